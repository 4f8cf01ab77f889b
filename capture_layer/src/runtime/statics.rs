//! The layer's statics: the page-aligned block every recorded call reads (hot flags, the capture
//! lock with the writer behind it, the device dispatch map), the instance map, and the lookups by
//! dispatchable handle that every intercept starts with. See `runtime`'s header for the layout.
//!
//! Depends on: `tables`, `state`, `keymap`, `loader`, `format`. Below every other part of `runtime`.

use crate::keymap::KeyMap;
use crate::state::DeviceState;
use crate::tables::{DeviceInfo, InstanceData};
use ash::vk::Handle;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use vkstream::{DeviceTable, InstanceTable};

/// Per-device data, found through the dispatch key of a VkDevice, VkQueue or VkCommandBuffer: what
/// the chain gave (`DeviceInfo`, reached through `Deref`) and the layer's bookkeeping.
pub struct DeviceData {
    pub info: DeviceInfo,
    pub state: parking_lot::Mutex<DeviceState>,
    /// Set once a query of this device was reported available (only while capturing): until
    /// then a query reset has nothing to clear, and tracking's submits skip them unlocked.
    pub queries_seen: std::sync::atomic::AtomicBool,
    /// What the device's latest submit signals (`submit::LastSubmit`): a status poll that sees
    /// it done is a frame boundary in apps that poll rather than wait (wgpu).
    pub last_submit: parking_lot::Mutex<crate::submit::LastSubmit>,
}

impl std::ops::Deref for DeviceData {
    type Target = DeviceInfo;
    fn deref(&self) -> &DeviceInfo {
        &self.info
    }
}

impl DeviceData {
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, DeviceState> {
        self.state.lock()
    }
}

static INSTANCES: KeyMap<InstanceData> = KeyMap::new();
/// `STATICS.devices`: every device-level call's dispatch lookup, on the page of the hot flags.
static DEVICES: &KeyMap<DeviceData> = &STATICS.devices;

pub fn instance_data(handle: u64) -> Option<&'static InstanceData> {
    // SAFETY: the loader only hands out live dispatchable handles; 0 is filtered in dispatch_key.
    INSTANCES.get(unsafe { crate::loader::dispatch_key(handle) })
}

pub fn device_data(handle: u64) -> Option<&'static DeviceData> {
    DEVICES.get(unsafe { crate::loader::dispatch_key(handle) })
}

pub fn register_instance(data: InstanceData) -> Option<&'static InstanceData> {
    let key = unsafe { crate::loader::dispatch_key(data.handle.as_raw()) };
    let data: &'static InstanceData = Box::leak(Box::new(data));
    INSTANCES.insert(key, data).then_some(data)
}

pub fn unregister_instance(handle: u64) -> Option<&'static InstanceData> {
    INSTANCES.remove(unsafe { crate::loader::dispatch_key(handle) })
}

pub fn register_device(data: DeviceData) -> Option<&'static DeviceData> {
    let key = unsafe { crate::loader::dispatch_key(data.handle.as_raw()) };
    let data: &'static DeviceData = Box::leak(Box::new(data));
    DEVICES.insert(key, data).then_some(data)
}

pub fn unregister_device(handle: u64) -> Option<&'static DeviceData> {
    DEVICES.remove(unsafe { crate::loader::dispatch_key(handle) })
}

pub fn live_devices() -> Vec<&'static DeviceData> {
    DEVICES.values()
}

pub fn live_instance_count() -> usize {
    INSTANCES.values().len()
}

/// Dispatch table of the device that owns `handle` (VkDevice, VkQueue or VkCommandBuffer, raw).
/// An unknown handle gets an all-empty table, so the generated intercept reports the command missing
/// instead of crashing.
pub fn device_table(handle: u64) -> &'static DeviceTable {
    match device_data(handle) {
        Some(d) => &d.table,
        None => {
            static EMPTY: OnceLock<DeviceTable> = OnceLock::new();
            EMPTY.get_or_init(|| {
                log_once(
                    "unknown-device",
                    "a device-level call came with a handle the layer never saw created",
                );
                // SAFETY: the table holds only `Option<fn>` fields, for which all-zero is `None`.
                unsafe { std::mem::zeroed() }
            })
        }
    }
}

/// Dispatch table of the instance that owns `handle` (VkInstance or VkPhysicalDevice, raw).
pub fn instance_table(handle: u64) -> &'static InstanceTable {
    match instance_data(handle) {
        Some(d) => &d.table,
        None => {
            static EMPTY: OnceLock<InstanceTable> = OnceLock::new();
            EMPTY.get_or_init(|| {
                log_once(
                    "unknown-instance",
                    "an instance-level call came with a handle the layer never saw created",
                );
                // SAFETY: as in `device_table`.
                unsafe { std::mem::zeroed() }
            })
        }
    }
}

/// Logs `message` to stderr once per `key` for the life of the process.
pub fn log_once(key: &str, message: &str) {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|k| k == key) {
        seen.push(key.to_string());
        eprintln!("quarry: {message}");
    }
}

// ---- the capture ---------------------------------------------------------------------------------

/// The writer first (`repr(C)`): its first word, the pointer a recorded call follows, then sits
/// in the capture lock's cache line.
#[repr(C)]
pub(super) struct Capture {
    pub writer: format::TraceWriter,
    pub path: PathBuf,
    /// Frame index of the frame in progress.
    pub(super) frame: u64,
    /// Index of the trace's first frame (above 0 for trimmed captures).
    pub(super) first_frame: u64,
    /// A submit happened since the last frame boundary (an `End` frame is then due at finalization).
    pub(super) submitted: bool,
    /// The trace is finalized when this frame ends (the frame range's end).
    pub(super) last_frame: Option<u64>,
    pub(super) stats: Stats,
    /// Capture on demand: this trace's number (`FILE_K`); at its last frame the layer goes back
    /// to tracking.
    pub(super) triggered: Option<u32>,
}

/// Measured costs, written as a `Note` when the trace is finalized.
#[derive(Default)]
pub struct Stats {
    pub scans: u64,
    pub scanned_bytes: u64,
    pub scan_ns: u64,
    pub written_bytes: u64,
}

/// The flags and counter every recorded call reads, in one cache line of their own (each would
/// otherwise sit in a line of its own among the layer's statics, each a miss after the driver's
/// work between two calls).
#[repr(C, align(64))]
pub(super) struct Hot {
    /// True while a trace is being written: the fast-path check of every intercept.
    pub(super) active: AtomicBool,
    /// True while a trimmed capture waits for its first frame: calls are encoded and offered to
    /// the state tracker instead of the trace.
    pub(super) tracking: AtomicBool,
    /// `QUARRY_CAPTURE_PROFILE`: the layer times its own work (see `prof`).
    pub(super) profile: AtomicBool,
    /// While tracking: primary one-time command buffers begun now are light (see `light`).
    pub(super) light: AtomicBool,
    /// The main thread's OS id, valid once `main_self` is set (see `thread_id`).
    pub(super) main_tid: AtomicU32,
    /// The next record's seq.
    pub(super) seq: AtomicU64,
    /// pthread key + 1 of the cached thread id (0: not created yet; see `thread_id`).
    pub(super) thread_key: AtomicU64,
    /// The main thread's `pthread_self()` (see `thread_self`) once it has recorded (0: not yet).
    pub(super) main_self: AtomicU64,
    /// Seqlock of the fast clock's anchor (odd while it is rewritten; see `call_ns`).
    pub(super) anchor_gen: AtomicU64,
    pub(super) anchor_tsc: AtomicU64,
    pub(super) anchor_ns: AtomicU64,
    /// ns per TSC tick in 32.32 fixed point; 0 while unknown or where the TSC is not invariant.
    pub(super) tsc_mult: AtomicU64,
}

/// The hot flags' line and, right after it, the capture lock's (with the writer pointer behind it),
/// then the device dispatch map: one page for what every recorded call reads in the layer's
/// statics, where they were on three. After the driver's work the core's adjacent-line prefetch
/// brings the first two lines in one miss, and the page costs one TLB walk at most.
#[repr(C, align(4096))]
pub(super) struct Statics {
    pub(super) hot: Hot,
    /// Serialises sequence numbers with writes, so records appear in the file in `seq` order.
    /// parking_lot's: no poisoning to check (see the writer's open block).
    pub(super) capture: parking_lot::Mutex<Option<Capture>>,
    pub(super) devices: KeyMap<DeviceData>,
}

pub(super) static STATICS: Statics = Statics {
    hot: Hot {
        active: AtomicBool::new(false),
        tracking: AtomicBool::new(false),
        profile: AtomicBool::new(false),
        light: AtomicBool::new(false),
        main_tid: AtomicU32::new(0),
        seq: AtomicU64::new(0),
        thread_key: AtomicU64::new(0),
        main_self: AtomicU64::new(0),
        anchor_gen: AtomicU64::new(0),
        anchor_tsc: AtomicU64::new(0),
        anchor_ns: AtomicU64::new(0),
        tsc_mult: AtomicU64::new(0),
    },
    capture: parking_lot::Mutex::new(None),
    devices: KeyMap::new(),
};

/// `STATICS.hot`, by its short name.
pub(super) static HOT: &Hot = &STATICS.hot;

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

pub(super) type CaptureGuard = parking_lot::MutexGuard<'static, Option<Capture>>;

#[inline]
pub fn capturing() -> bool {
    HOT.active.load(Ordering::Relaxed)
}

/// Capturing or tracking: calls must be encoded.
#[inline]
pub fn recording() -> bool {
    HOT.active.load(Ordering::Relaxed) || HOT.tracking.load(Ordering::Relaxed)
}

/// `#[inline]`: called on the hot path from `record`, its former neighbour in one module.
#[inline]
pub(super) fn lock_capture() -> CaptureGuard {
    STATICS.capture.lock()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capture_lock_and_its_writer_share_a_line() {
        use std::mem::{align_of_val, offset_of, size_of};
        assert_eq!(align_of_val(&STATICS), 4096);
        assert_eq!(offset_of!(Statics, capture), 64);
        // The first device's slot on the same page.
        assert!(offset_of!(Statics, devices) + 16 <= 4096);
        assert_eq!(offset_of!(Capture, writer), 0);
        // No tag before the capture: `None` is a niche inside it.
        assert_eq!(size_of::<Option<Capture>>(), size_of::<Capture>());
        // Where the mutex keeps its data: measured, not assumed.
        let m = parking_lot::Mutex::new(Some(0u64));
        let data = &*m.lock() as *const Option<u64> as usize - &m as *const _ as usize;
        // The writer's first word is its shared-state pointer (format's own test).
        assert!(
            data + 8 <= 64,
            "the writer pointer ends at byte {}",
            data + 8
        );
    }
}
