//! The layer's runtime: dispatch lookup, the capture writer, sequencing and frame boundaries.
//!
//! Invariants: nothing here blocks the app beyond the writer's bounded queue; nothing panics across the
//! FFI boundary (`record` and `guard` catch); after an internal error capture stops (logged once, a
//! `Note` written, the trace left unfinished so readers see it incomplete) and calls keep passing through.

use crate::keymap::KeyMap;
use crate::settings::{Given, Settings};
use crate::state::DeviceState;
use ash::vk;
use ash::vk::Handle;
use format::record::{self, FrameBoundary, Record};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use vkstream::{DeviceTable, InstanceTable};

/// Per-instance data, found through the dispatch key of a VkInstance or VkPhysicalDevice.
pub struct InstanceData {
    pub handle: vk::Instance,
    /// The next layer's vkGetInstanceProcAddr.
    pub gipa: vk::PFN_vkGetInstanceProcAddr,
    pub table: InstanceTable,
    /// `VkApplicationInfo::apiVersion` (1.0 when absent).
    pub api_version: u32,
    pub extensions: Vec<String>,
}

/// Per-device data, found through the dispatch key of a VkDevice, VkQueue or VkCommandBuffer.
pub struct DeviceData {
    pub handle: vk::Device,
    pub physical: vk::PhysicalDevice,
    pub instance: &'static InstanceData,
    pub gdpa: vk::PFN_vkGetDeviceProcAddr,
    pub table: DeviceTable,
    pub extensions: Vec<String>,
    /// The app enabled VK_EXT_calibrated_timestamps, so the layer may call vkGetCalibratedTimestampsEXT.
    pub calibrated: bool,
    pub memory: vk::PhysicalDeviceMemoryProperties,
    pub queue_families: Vec<vk::QueueFamilyProperties>,
    pub state: parking_lot::Mutex<DeviceState>,
    /// The loader's callback for dispatchable objects the layer creates itself (command buffers
    /// of the snapshot's GPU read-back).
    pub set_loader_data: Option<crate::loader::SetDeviceLoaderData>,
}

// SAFETY: the raw pointers inside ash structs held here (none are dereferenced across threads) are plain
// data; mutable state sits behind the mutex.
unsafe impl Sync for DeviceData {}
unsafe impl Send for DeviceData {}
unsafe impl Sync for InstanceData {}
unsafe impl Send for InstanceData {}

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

// ---- settings and logging -----------------------------------------------------------------------

/// The settings for a trace opened now: the environment, over the app's layer settings (`layer`, from
/// its `VkInstanceCreateInfo`). A bad value is logged and disables this capture.
pub fn settings(layer: &Given) -> Settings {
    match Settings::resolve(&Given::from_env(), layer) {
        Ok(s) => s,
        Err(e) => {
            log_once(&format!("settings {e}"), &format!("{e}; capture disabled"));
            Settings {
                disabled: true,
                ..Settings::default()
            }
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

// ---- clocks and threads --------------------------------------------------------------------------

/// CLOCK_MONOTONIC in ns (the clock the trace's host times use).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

thread_local! {
    /// Reused from call to call while a trimmed capture tracks state (taken while a call is
    /// encoded).
    static ENCODER: Cell<Option<vkstream::Encoder>> = const { Cell::new(None) };
}

/// Host time of a recorded call: the TSC scaled from the last anchor (a CLOCK_MONOTONIC reading
/// taken at every frame end, see `anchor_now`), or CLOCK_MONOTONIC itself while the
/// TSC's rate is not known yet or where the TSC is not invariant. Every call records its time,
/// and `clock_gettime` fences the TSC read behind every earlier load, which costs the layer's
/// cache misses their overlap (~50-80 ns a call on the H100 box).
#[inline]
pub fn call_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mult = HOT.tsc_mult.load(Ordering::Relaxed);
        if mult != 0 {
            let gen = HOT.anchor_gen.load(Ordering::Acquire);
            let tsc = HOT.anchor_tsc.load(Ordering::Relaxed);
            let ns = HOT.anchor_ns.load(Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Acquire);
            if gen & 1 == 0 && HOT.anchor_gen.load(Ordering::Relaxed) == gen {
                // SAFETY: rdtsc has no preconditions on x86_64.
                let now = unsafe { std::arch::x86_64::_rdtsc() };
                return ns
                    + ((u128::from(now.saturating_sub(tsc)) * u128::from(mult)) >> 32) as u64;
            }
        }
    }
    now_ns()
}

/// CLOCK_MONOTONIC, also made the fast clock's anchor when the last is 4 ms old or more: the calls
/// after it extrapolate from here. The TSC's rate is measured against CLOCK_MONOTONIC from the
/// first anchor on, once 20 ms apart.
pub fn anchor_now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let now = now_ns();
        let last = HOT.anchor_ns.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < 4_000_000 {
            return now;
        }
        use std::sync::atomic::fence;
        /// The first anchor (0: none yet); the rate is measured from it. Written only by the
        /// anchoring thread, which holds the seqlock odd.
        static FIRST_TSC: AtomicU64 = AtomicU64::new(0);
        static FIRST_NS: AtomicU64 = AtomicU64::new(0);
        if !tsc_invariant() {
            return now;
        }
        // The TSC read between two clock reads; a pair split by preemption would skew the
        // rate, so the tightest of a few tries is kept.
        let (mut ns, mut tsc, mut spread) = (0, 0, u64::MAX);
        for _ in 0..4 {
            let a = now_ns();
            // SAFETY: rdtsc has no preconditions on x86_64.
            let t = unsafe { std::arch::x86_64::_rdtsc() };
            let b = now_ns();
            if b - a < spread {
                (ns, tsc, spread) = (a + (b - a) / 2, t, b - a);
            }
            if spread < 1_000 {
                break;
            }
        }
        let gen = HOT.anchor_gen.load(Ordering::Relaxed);
        if gen & 1 == 1
            || HOT
                .anchor_gen
                .compare_exchange(gen, gen + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            // Another thread is anchoring right now: its anchor serves.
            return ns;
        }
        fence(Ordering::Release);
        let (t0, n0) = (
            FIRST_TSC.load(Ordering::Relaxed),
            FIRST_NS.load(Ordering::Relaxed),
        );
        let mult = if t0 == 0 {
            FIRST_NS.store(ns, Ordering::Relaxed);
            FIRST_TSC.store(tsc, Ordering::Relaxed);
            0
        } else if ns.saturating_sub(n0) >= 20_000_000 && tsc > t0 {
            ((u128::from(ns - n0) << 32) / u128::from(tsc - t0)) as u64
        } else {
            HOT.tsc_mult.load(Ordering::Relaxed)
        };
        HOT.anchor_tsc.store(tsc, Ordering::Relaxed);
        HOT.anchor_ns.store(ns, Ordering::Relaxed);
        HOT.tsc_mult.store(mult, Ordering::Relaxed);
        HOT.anchor_gen.store(gen + 2, Ordering::Release);
        ns
    }
    #[cfg(not(target_arch = "x86_64"))]
    now_ns()
}

/// The TSC ticks at a constant rate through frequency changes and idle states
/// (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo), so it can stand in for CLOCK_MONOTONIC.
fn tsc_invariant() -> bool {
    static INVARIANT: OnceLock<bool> = OnceLock::new();
    *INVARIANT.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
            c.lines().find(|l| l.starts_with("flags")).is_some_and(|l| {
                let has = |name: &str| l.split_whitespace().any(|w| w == name);
                has("constant_tsc") && has("nonstop_tsc")
            })
        })
    })
}

/// The OS thread id. The main thread's is cached in `HOT` beside the flags every call reads,
/// found by `pthread_self()` (its control block is never reused while the process lives); other
/// threads cache theirs in a pthread key: glibc keeps the first keys' values in the thread's
/// control block, where a Rust thread-local of a dlopen'ed library costs a call into the dynamic
/// linker and a page of its own (every call records its thread).
pub fn thread_id() -> u32 {
    let me = thread_self();
    if HOT.main_self.load(Ordering::Acquire) == me {
        return HOT.main_tid.load(Ordering::Relaxed);
    }
    thread_id_slow(me)
}

/// `pthread_self()`: the thread control block's address, which glibc keeps at `%fs:0` on
/// x86_64 (read inline, not through a call into libc by way of the GOT).
#[inline]
fn thread_self() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let tcb: u64;
        // SAFETY: on x86_64 Linux the fs base points at the thread's control block, whose first
        // word is its own address (the TLS ABI); reading it has no side effects.
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) tcb,
                options(nostack, readonly, preserves_flags, pure)
            )
        };
        tcb
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: pthread_self has no preconditions.
    unsafe {
        libc::pthread_self() as u64
    }
}

#[cold]
fn thread_id_slow(me: u64) -> u32 {
    let tid = keyed_thread_id();
    // SAFETY: getpid has no preconditions.
    if tid == unsafe { libc::getpid() } as u32 && HOT.main_self.load(Ordering::Relaxed) == 0 {
        HOT.main_tid.store(tid, Ordering::Relaxed);
        HOT.main_self.store(me, Ordering::Release);
    }
    tid
}

fn keyed_thread_id() -> u32 {
    let gettid = || {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as u32 }
    };
    let mut key = HOT.thread_key.load(Ordering::Acquire);
    if key == 0 {
        key = match new_thread_key() {
            Some(k) => k,
            None => return gettid(),
        };
    }
    let key = (key - 1) as libc::pthread_key_t;
    // SAFETY: a key this process created and never deletes.
    let cached = unsafe { libc::pthread_getspecific(key) } as usize as u32;
    if cached != 0 {
        return cached;
    }
    let tid = gettid();
    // SAFETY: as above; the value is an integer, never dereferenced.
    unsafe { libc::pthread_setspecific(key, tid as usize as *const libc::c_void) };
    tid
}

/// Creates the thread-id key once (the first thread to publish its key wins; a loser deletes
/// its own). Returns key + 1.
#[cold]
fn new_thread_key() -> Option<u64> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a valid out pointer, no destructor.
    if unsafe { libc::pthread_key_create(&mut key, None) } != 0 {
        return None;
    }
    let mine = key as u64 + 1;
    match HOT
        .thread_key
        .compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => Some(mine),
        Err(theirs) => {
            // SAFETY: our own key, never handed out.
            unsafe { libc::pthread_key_delete(key) };
            Some(theirs)
        }
    }
}

// ---- self-timing ---------------------------------------------------------------------------------

/// Where the layer spends app-thread time, measured only when `QUARRY_CAPTURE_PROFILE=1` (two clock
/// reads per span otherwise skipped) and written in the closing note.
pub mod prof {
    use std::sync::atomic::{AtomicU64, Ordering};

    pub const CALL: usize = 0;
    pub const SUBMIT: usize = 1;
    pub const WAIT: usize = 2;
    pub const FRAME: usize = 3;
    pub const RESULTS: usize = 4;
    const NAMES: [&str; 5] = [
        "calls recorded",
        "submit bookkeeping",
        "copy read-backs at waits",
        "frame ends",
        "query results recorded",
    ];

    static NS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
    static N: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
    /// Per command: (ns, calls) of recorded calls, for the costliest commands in the summary.
    static BY_CMD: std::sync::Mutex<Vec<(u64, u64)>> = std::sync::Mutex::new(Vec::new());

    /// As `end(CALL, t0)`, also counted for `cmd`.
    #[inline]
    pub fn end_call(cmd: u32, t0: u64) {
        if t0 == 0 {
            return;
        }
        let ns = add(CALL, t0);
        let mut by = BY_CMD.lock().unwrap_or_else(|e| e.into_inner());
        let i = cmd as usize;
        if by.len() <= i {
            by.resize(i + 1, (0, 0));
        }
        by[i].0 += ns;
        by[i].1 += 1;
    }

    #[inline]
    pub fn start() -> u64 {
        if super::HOT.profile.load(Ordering::Relaxed) {
            super::now_ns()
        } else {
            0
        }
    }

    #[inline]
    pub fn end(kind: usize, t0: u64) {
        if t0 != 0 {
            add(kind, t0);
        }
    }

    /// Counts one span of `kind` that began at `t0`; returns its length.
    fn add(kind: usize, t0: u64) -> u64 {
        let ns = super::now_ns().saturating_sub(t0);
        NS[kind].fetch_add(ns, Ordering::Relaxed);
        N[kind].fetch_add(1, Ordering::Relaxed);
        ns
    }

    /// "; app-thread time: ..." for the closing note, empty when not measured.
    pub fn summary() -> String {
        if !super::HOT.profile.load(Ordering::Relaxed) {
            return String::new();
        }
        let parts: Vec<String> = (0..NAMES.len())
            .map(|k| {
                let (ns, n) = (NS[k].load(Ordering::Relaxed), N[k].load(Ordering::Relaxed));
                format!(
                    "{} {n} x {} ns = {} us",
                    NAMES[k],
                    ns.checked_div(n).unwrap_or(0),
                    ns / 1000
                )
            })
            .collect();
        let mut by: Vec<(usize, u64, u64)> = BY_CMD
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .enumerate()
            .filter(|(_, c)| c.1 > 0)
            .map(|(i, c)| (i, c.0, c.1))
            .collect();
        by.sort_by_key(|c| std::cmp::Reverse(c.1));
        let top: Vec<String> = by
            .iter()
            .take(12)
            .map(|&(i, ns, n)| {
                let name = vkstream::COMMANDS.get(i).copied().unwrap_or("?");
                format!("{name} {n} x {} ns", ns / n)
            })
            .collect();
        format!(
            "; app-thread time (QUARRY_CAPTURE_PROFILE): {}; costliest commands recorded: {}; writer threads' CPU time: {}",
            parts.join(", "),
            top.join(", "),
            writer_threads_cpu()
        )
    }

    /// CPU time of the trace writer's threads so far, from the kernel's
    /// per-thread scheduler statistics: what the capture costs off the app's threads.
    fn writer_threads_cpu() -> String {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return "unknown".into();
        };
        let mut threads: Vec<(String, u64)> = tasks
            .flatten()
            .filter_map(|t| {
                let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                let comm = comm.trim();
                if !format::is_writer_thread(comm) {
                    return None;
                }
                let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
                let ns = stat.split_whitespace().next()?.parse().ok()?;
                Some((comm.to_string(), ns))
            })
            .collect();
        threads.sort();
        let total: u64 = threads.iter().map(|t| t.1).sum();
        let each: Vec<String> = threads
            .iter()
            .map(|(name, ns)| format!("{name} {} us", ns / 1000))
            .collect();
        format!("{} us ({})", total / 1000, each.join(", "))
    }
}

// ---- the capture ---------------------------------------------------------------------------------

/// The writer first (`repr(C)`): its first word, the pointer a recorded call follows, then sits
/// in the capture lock's cache line.
#[repr(C)]
struct Capture {
    writer: format::TraceWriter,
    path: PathBuf,
    /// Frame index of the frame in progress.
    frame: u64,
    /// Index of the trace's first frame (above 0 for trimmed captures).
    first_frame: u64,
    /// A submit happened since the last frame boundary (an `End` frame is then due at finalization).
    submitted: bool,
    /// The trace is finalized when this frame ends (the frame range's end).
    last_frame: Option<u64>,
    stats: Stats,
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
struct Hot {
    /// True while a trace is being written: the fast-path check of every intercept.
    active: AtomicBool,
    /// True while a trimmed capture waits for its first frame: calls are encoded and offered to
    /// the state tracker instead of the trace.
    tracking: AtomicBool,
    /// `QUARRY_CAPTURE_PROFILE`: the layer times its own work (see `prof`).
    profile: AtomicBool,
    /// The main thread's OS id, valid once `main_self` is set (see `thread_id`).
    main_tid: AtomicU32,
    /// The next record's seq.
    seq: AtomicU64,
    /// pthread key + 1 of the cached thread id (0: not created yet; see `thread_id`).
    thread_key: AtomicU64,
    /// The main thread's `pthread_self()` (see `thread_self`) once it has recorded (0: not yet).
    main_self: AtomicU64,
    /// Seqlock of the fast clock's anchor (odd while it is rewritten; see `call_ns`).
    anchor_gen: AtomicU64,
    anchor_tsc: AtomicU64,
    anchor_ns: AtomicU64,
    /// ns per TSC tick in 32.32 fixed point; 0 while unknown or where the TSC is not invariant.
    tsc_mult: AtomicU64,
}

/// The hot flags' line and, right after it, the capture lock's (with the writer pointer behind it),
/// then the device dispatch map: one page for what every recorded call reads in the layer's
/// statics, where they were on three. After the driver's work the core's adjacent-line prefetch
/// brings the first two lines in one miss, and the page costs one TLB walk at most.
#[repr(C, align(4096))]
struct Statics {
    hot: Hot,
    /// Serialises sequence numbers with writes, so records appear in the file in `seq` order.
    /// parking_lot's: no poisoning to check (see the writer's open block).
    capture: parking_lot::Mutex<Option<Capture>>,
    devices: KeyMap<DeviceData>,
}

static STATICS: Statics = Statics {
    hot: Hot {
        active: AtomicBool::new(false),
        tracking: AtomicBool::new(false),
        profile: AtomicBool::new(false),
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
static HOT: &Hot = &STATICS.hot;

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

type CaptureGuard = parking_lot::MutexGuard<'static, Option<Capture>>;

/// Trace paths (before numbering) this process opened: a path used again gets `.N`.
static OPENED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set once the frame range is done or an internal error happened: no new trace opens.
static ENDED: AtomicBool = AtomicBool::new(false);
/// Apps with a swapchain get frame boundaries at present only.
static SWAPCHAIN_SEEN: AtomicBool = AtomicBool::new(false);
static TRACKER: Mutex<Option<crate::tracker::Tracker>> = Mutex::new(None);
/// What a trimmed capture opens its trace with at the snapshot, and the tracked frame counter.
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

struct Pending {
    application: String,
    settings: Settings,
    first: u64,
    frame: u64,
    submitted: bool,
}

#[inline]
pub fn capturing() -> bool {
    HOT.active.load(Ordering::Relaxed)
}

/// Capturing or tracking: calls must be encoded.
#[inline]
pub fn recording() -> bool {
    HOT.active.load(Ordering::Relaxed) || HOT.tracking.load(Ordering::Relaxed)
}

fn lock_tracker() -> MutexGuard<'static, Option<crate::tracker::Tracker>> {
    TRACKER.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock_pending() -> MutexGuard<'static, Option<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Offers a record to the tracker; gives it back when tracking ended meanwhile.
fn offer(rec: Record) -> Option<Record> {
    if !HOT.tracking.load(Ordering::Acquire) {
        return Some(rec);
    }
    let mut t = lock_tracker();
    let Some(tracker) = t.as_mut() else {
        // The snapshot was written meanwhile: the record goes to the trace.
        return Some(rec);
    };
    // The generated intercepts call in here without a guard of their own.
    if catch_unwind(AssertUnwindSafe(|| tracker.offer(rec))).is_err() {
        *t = None;
        drop(t);
        abandon_tracking("internal error in the state tracker");
    }
    None
}

/// Gives up a trimmed capture before its first frame: logged once, nothing written, calls pass.
fn abandon_tracking(message: &str) {
    HOT.tracking.store(false, Ordering::Release);
    ENDED.store(true, Ordering::Relaxed);
    *lock_tracker() = None;
    *lock_pending() = None;
    log_once(
        "tracking-failed",
        &format!(
            "{message}; the trimmed capture is abandoned, the application continues unchanged"
        ),
    );
}

fn lock_capture() -> CaptureGuard {
    STATICS.capture.lock()
}

/// Opens the trace (at the first vkCreateInstance, or the first after every instance was destroyed);
/// `layer` holds the layer settings of that instance's create info.
pub fn open_capture(application: &str, layer: &Given) {
    if ENDED.load(Ordering::Relaxed) {
        return;
    }
    let s = settings(layer);
    if s.disabled {
        return;
    }
    HOT.profile.store(
        std::env::var_os("QUARRY_CAPTURE_PROFILE").is_some_and(|v| v == "1"),
        Ordering::Relaxed,
    );
    if let Some(first) = s.frames.map(|r| r.first).filter(|&f| f > 0) {
        // Trimmed: nothing is written before frame `first`; the tracker keeps the state.
        let mut p = lock_pending();
        if p.is_some() || lock_capture().is_some() {
            return;
        }
        *p = Some(Pending {
            application: application.to_string(),
            settings: s,
            first,
            frame: 0,
            submitted: false,
        });
        *lock_tracker() = Some(crate::tracker::Tracker::default());
        HOT.tracking.store(true, Ordering::Release);
        register_atexit();
        register_atfork();
        return;
    }
    let mut guard = lock_capture();
    if guard.is_some() {
        return;
    }
    let Some(cap) = new_capture(application, &s, 0) else {
        return;
    };
    register_atexit();
    register_atfork();
    *guard = Some(cap);
    HOT.active.store(true, Ordering::Release);
}

/// Creates the trace file with its command table (and a note naming the frame range); trimmed
/// captures start at frame `first`.
fn new_capture(application: &str, s: &Settings, first: u64) -> Option<Capture> {
    let base = s.file.clone().unwrap_or_else(|| {
        PathBuf::from(crate::settings::default_file_name(
            &crate::settings::exe_name(),
            std::process::id(),
        ))
    });
    let n = {
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        let n = opened.iter().filter(|p| **p == base).count() as u32;
        opened.push(base.clone());
        n
    };
    let path = crate::settings::numbered(&base, n);
    let header = record::Header {
        kind: record::FileKind::Trace,
        writer: format!("quarry-capture {}", env!("CARGO_PKG_VERSION")),
        created_unix_ns: unix_ns(),
        device: None,
        application: application.to_string(),
    };
    let writer = match format::TraceWriter::create(&path, header) {
        Ok(w) => w,
        Err(e) => {
            log_once(
                "open",
                &format!(
                    "cannot create trace {}: {e}; capture disabled",
                    path.display()
                ),
            );
            ENDED.store(true, Ordering::Relaxed);
            return None;
        }
    };
    let cap = Capture {
        writer,
        path,
        frame: first,
        first_frame: first,
        submitted: false,
        last_frame: s.frames.and_then(|r| r.last),
        stats: Stats::default(),
    };
    let commands: Vec<String> = vkstream::COMMANDS.iter().map(|c| c.to_string()).collect();
    if let Err(e) = cap.writer.write(&Record::CommandTable(commands)) {
        log_once(
            "open",
            &format!(
                "cannot write trace {}: {e}; capture disabled",
                cap.path.display()
            ),
        );
        ENDED.store(true, Ordering::Relaxed);
        return None;
    }
    if let Some(range) = s.frames {
        let last = range
            .last
            .map(|l| l.to_string())
            .unwrap_or_else(|| "exit".into());
        let msg = if range.first > 0 {
            format!(
                "{}={}-{last}: the trace starts with a state snapshot taken when frame {} began and ends \
                 after frame {last}",
                s.frames_from, range.first, range.first
            )
        } else {
            format!(
                "{}={}-{last}: the trace ends after frame {last}",
                s.frames_from, range.first
            )
        };
        let _ = cap.writer.write(&Record::Note(record::Note {
            host_ns: now_ns(),
            message: msg,
        }));
    }
    Some(cap)
}

pub fn trace_path() -> Option<PathBuf> {
    lock_capture().as_ref().map(|c| c.path.clone())
}

/// Writes one record under the ordering lock. `make` gets the record's `seq`. Returns that seq.
pub fn emit(make: impl FnOnce(u64) -> Record) -> Option<u64> {
    if !recording() {
        return None;
    }
    if HOT.tracking.load(Ordering::Acquire) {
        // The tracker orders by seq itself, so no lock is needed around numbering.
        let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
        let Some(rec) = offer(make(seq)) else {
            return Some(seq);
        };
        // The snapshot was written meanwhile: the record goes to the trace.
        let mut guard = lock_capture();
        let cap = guard.as_mut()?;
        if let Err(e) = cap.writer.write(&rec) {
            fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
            return None;
        }
        return Some(seq);
    }
    let mut guard = lock_capture();
    let cap = guard.as_mut()?;
    // Numbered under the lock, so records reach the file in seq order.
    let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
    let rec = make(seq);
    if let Err(e) = cap.writer.write(&rec) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
        return None;
    }
    Some(seq)
}

/// Writes host-memory contents: `writes` are (memory, offset, bytes); large ones become blobs.
pub fn emit_memory(writes: Vec<(u64, u64, Vec<u8>)>, scan: Option<(u64, u64)>) {
    if !capturing() {
        return;
    }
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else { return };
    if let Some((bytes, ns)) = scan {
        cap.stats.scans += 1;
        cap.stats.scanned_bytes += bytes;
        cap.stats.scan_ns += ns;
    }
    for (memory, offset, bytes) in writes {
        cap.stats.written_bytes += bytes.len() as u64;
        let data = match cap.writer.payload(&bytes) {
            Ok(p) => p,
            Err(e) => {
                fail_locked(&mut guard, &format!("writing memory contents failed: {e}"));
                return;
            }
        };
        let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
        let rec = Record::MemoryWrite(record::MemoryWrite {
            seq,
            memory,
            offset,
            data,
        });
        if let Err(e) = cap.writer.write(&rec) {
            fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
            return;
        }
    }
}

/// Records one API call (after it returned): a no-op unless capturing. Returns the call's seq.
///
/// Generic over the encoder, so instantiated once per command: kept to one flag test and a call
/// into the shared, non-generic rest (one copy of the hot path for every command keeps it in
/// cache between calls, which the driver's own work evicts).
#[inline]
pub fn record_call(
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
) -> Option<u64> {
    if !recording() {
        return None;
    }
    let mut encode = Some(encode);
    record_dyn(cmd, result, &erase(&mut encode))
}

/// Erases a command's encoder for the shared, non-generic path.
fn erase<F: FnOnce(&mut vkstream::Encoder)>(slot: &mut Option<F>) -> Encode {
    /// Runs the encoder `data` points at (an `Option<F>`, taken).
    ///
    /// # Safety
    /// `data` must point to a live `Option<F>`.
    unsafe fn run<F: FnOnce(&mut vkstream::Encoder)>(data: *mut (), e: &mut vkstream::Encoder) {
        if let Some(f) = (*(data as *mut Option<F>)).take() {
            f(e)
        }
    }
    Encode {
        data: slot as *mut Option<F> as *mut (),
        run: run::<F>,
    }
}

/// Records a results call (`vkGetQueryPoolResults`) and the results the app received: the
/// `Call` and its `QueryResults` (seq and thread filled in here) and `QueryAvailable` records
/// under one lock, without copying the data. Only while capturing: a trimmed capture's tracker
/// wants no results calls (the trace's snapshot is written before capturing starts).
pub fn record_query_results(
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
    results: &mut format::QueryResultsRef<'_>,
    available: &[u32],
) {
    if !capturing() {
        return;
    }
    let mut encode = Some(encode);
    record_then(cmd, result, &erase(&mut encode), |guard, seq, thread, _| {
        let Some(cap) = guard.as_mut() else { return };
        (results.seq, results.thread) = (seq, thread);
        if let Err(e) = cap.writer.write_query_results(results, available) {
            fail_locked(guard, &format!("writing the trace failed: {e}"));
        }
    });
}

/// Records a query command's `Call` and its `QueryOp` records (one per kind, on `pool`, with the
/// call's seq and host time) under one capture lock; evaluates to the call's seq.
pub fn record_call_ops(
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
    command_buffer: u64,
    pool: u64,
    kinds: &[record::QueryOpKind],
) -> Option<u64> {
    if !recording() {
        return None;
    }
    let mut encode = Some(encode);
    record_ops_dyn(
        cmd,
        result,
        &erase(&mut encode),
        command_buffer,
        pool,
        kinds,
    )
}

fn record_ops_dyn(
    cmd: u32,
    result: i32,
    encode: &Encode,
    command_buffer: u64,
    pool: u64,
    kinds: &[record::QueryOpKind],
) -> Option<u64> {
    let op = |seq: u64, host_ns: u64, kind: &record::QueryOpKind| record::QueryOp {
        seq,
        command_buffer,
        pool,
        kind: kind.clone(),
        host_ns,
    };
    if HOT.tracking.load(Ordering::Acquire) {
        // Before a trimmed capture's first frame the ops go to the tracker, one by one.
        let seq = record_dyn(cmd, result, encode)?;
        let host_ns = now_ns();
        emit_plain_all(kinds.iter().map(|k| Record::QueryOp(op(seq, host_ns, k))));
        return Some(seq);
    }
    record_then(cmd, result, encode, |guard, seq, _, host_ns| {
        let Some(cap) = guard.as_mut() else { return };
        for kind in kinds {
            // Hand-encoded, not through serde: several follow a query command's call.
            if let Err(e) = cap.writer.write_query_op(&op(seq, host_ns, kind)) {
                fail_locked(guard, &format!("writing the trace failed: {e}"));
                return;
            }
        }
    })
}

/// A command's encoder, type-erased as a data pointer and a function (not a `dyn` closure,
/// whose vtable, one per command, is one more cache line to load at every call).
struct Encode {
    data: *mut (),
    run: unsafe fn(*mut (), &mut vkstream::Encoder),
}

impl Encode {
    fn call(&self, e: &mut vkstream::Encoder) {
        // SAFETY: built by `record_call` from an `Option<F>` that outlives this `Encode`.
        unsafe { (self.run)(self.data, e) }
    }
}

#[inline(never)]
fn record_dyn(cmd: u32, result: i32, encode: &Encode) -> Option<u64> {
    record_then(cmd, result, encode, |_, _, _, _| {})
}

/// Records a call, to the trace or (before a trimmed capture's first frame) to the tracker. When
/// it goes to the trace, `then` writes what goes with it under the same capture lock, given the
/// call's seq, thread and host time. Inlined, down to the writer's append, into `record_dyn`: the
/// shared part of a recorded call is one function, on one or two pages of code instead of one
/// page per step.
#[inline(always)]
fn record_then(
    cmd: u32,
    result: i32,
    encode: &Encode,
    then: impl FnOnce(&mut CaptureGuard, u64, u32, u64),
) -> Option<u64> {
    let tracking = HOT.tracking.load(Ordering::Acquire);
    if tracking && !capturing() && !crate::tracker::wanted(cmd) {
        // Tracking a command that defines no state (gets, waits, presents): nothing to encode.
        return None;
    }
    let t0 = prof::start();
    let (thread, host_ns) = (thread_id(), call_ns());
    let seq = if tracking {
        track_call(thread, host_ns, cmd, result, encode)
    } else {
        write_call_then(thread, host_ns, cmd, result, encode, |guard, seq| {
            then(guard, seq, thread, host_ns)
        })
    };
    prof::end_call(cmd, t0);
    seq
}

/// The hot path: writes a call straight into the trace's open block and then, under the same
/// capture lock, what `then` writes for its seq; a chained struct the encoder could not serialize
/// is reported once the lock is released.
#[inline(always)]
fn write_call_then(
    thread: u32,
    host_ns: u64,
    cmd: u32,
    result: i32,
    encode: &Encode,
    then: impl FnOnce(&mut CaptureGuard, u64),
) -> Option<u64> {
    let mut guard = lock_capture();
    let (seq, unknown) = write_call_locked(&mut guard, thread, host_ns, cmd, result, encode);
    if let Some(seq) = seq {
        then(&mut guard, seq);
    }
    drop(guard);
    if let Some(s_type) = unknown {
        unknown_struct(cmd, s_type);
    }
    seq
}

/// `write_call_then`'s write, under the capture lock; returns the seq and the sType of a chained
/// struct the encoder could not serialize (reported by the caller once the lock is released).
#[inline(always)]
fn write_call_locked(
    guard: &mut CaptureGuard,
    thread: u32,
    host_ns: u64,
    cmd: u32,
    result: i32,
    encode: &Encode,
) -> (Option<u64>, Option<i32>) {
    let mut unknown = None;
    let Some(cap) = guard.as_mut() else {
        return (None, None);
    };
    // Numbered under the lock, so records reach the file in seq order.
    let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
    let written = cap
        .writer
        .write_call_with(seq, thread, cmd, host_ns, result, |buf| {
            // The encoder borrows the block and gives it back even when it panics.
            let mut e = vkstream::Encoder::from_vec(std::mem::take(buf));
            let ok = catch_unwind(AssertUnwindSafe(|| encode.call(&mut e))).is_ok();
            unknown = e.unknown_stype();
            *buf = e.into_bytes();
            ok.then_some(()).ok_or_else(|| "panicked".to_string())
        });
    if let Err(err) = written {
        let name = vkstream::COMMANDS.get(cmd as usize).copied().unwrap_or("?");
        let message = match &err.problem {
            format::Problem::Encode(_) => format!("internal error while encoding {name}"),
            _ => format!("writing the trace failed: {err}"),
        };
        fail_locked(guard, &message);
        return (None, None);
    }
    (Some(seq), unknown)
}

/// Before a trimmed capture's first frame: the call is encoded and offered to the tracker.
fn track_call(thread: u32, host_ns: u64, cmd: u32, result: i32, encode: &Encode) -> Option<u64> {
    let mut e = ENCODER
        .try_with(|c| c.take())
        .ok()
        .flatten()
        .unwrap_or_default();
    e.clear();
    if catch_unwind(AssertUnwindSafe(|| encode.call(&mut e))).is_err() {
        let name = vkstream::COMMANDS.get(cmd as usize).copied().unwrap_or("?");
        fail(&format!("internal error while encoding {name}"));
        return None;
    }
    if let Some(s_type) = e.unknown_stype() {
        unknown_struct(cmd, s_type);
    }
    // The tracker orders by seq itself, so no lock is needed around numbering.
    let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
    let call = crate::tracker::CallRef {
        seq,
        thread,
        cmd,
        host_ns,
        result,
        params: e.as_bytes(),
    };
    let out = if offer_call(call) {
        Some(seq)
    } else {
        // The snapshot was written meanwhile: the call goes to the trace.
        let mut guard = lock_capture();
        let written = guard
            .as_mut()
            .map(|cap| cap.writer.write(&Record::Call(call.to_owned())));
        match written {
            Some(Ok(())) => Some(seq),
            Some(Err(err)) => {
                fail_locked(&mut guard, &format!("writing the trace failed: {err}"));
                None
            }
            None => None,
        }
    };
    let _ = ENCODER.try_with(|c| c.set(Some(e)));
    out
}

/// [`offer`] for a call, without wrapping it in a `Record` (256 bytes, moved at every step) or
/// copying its parameters out of the encoder unless the tracker keeps them; false when the
/// tracker is gone (the snapshot was written meanwhile).
fn offer_call(call: crate::tracker::CallRef<'_>) -> bool {
    let mut t = lock_tracker();
    let Some(tracker) = t.as_mut() else {
        return false;
    };
    if catch_unwind(AssertUnwindSafe(|| tracker.offer_call(call))).is_err() {
        *t = None;
        drop(t);
        abandon_tracking("internal error in the state tracker");
    }
    true
}

/// Structs the layer itself understands although the encoder does not: the loader's chain links,
/// `VkLayerSettingsCreateInfoEXT` (read in `settings`) and the ARM per-region counters begin info
/// (see `region`). They are recorded as sType only, silently.
const LAYER_STRUCTS: [i32; 4] = [
    47,                              // VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO
    48,                              // VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO
    1000496000,                      // VK_STRUCTURE_TYPE_LAYER_SETTINGS_CREATE_INFO_EXT
    crate::region::BEGIN_INFO_STYPE, // recorded as a RegionCounters record
];

/// The message for a chained struct the encoder could not serialize, or `None` for the layer's own
/// structs.
fn unknown_struct_message(cmd: u32, s_type: i32) -> Option<String> {
    if LAYER_STRUCTS.contains(&s_type) {
        return None;
    }
    let name = vkstream::COMMANDS.get(cmd as usize).copied().unwrap_or("?");
    Some(format!(
        "{name}: a pNext struct with sType {s_type} is unknown to this build's vk.xml; recorded as its \
         sType only (a replay skips it)"
    ))
}

/// A call's pNext chain held a struct the encoder wrote as sType only: logged to stderr and noted in
/// the trace, once per (command, sType). Capture goes on: the rest of the call is recorded.
fn unknown_struct(cmd: u32, s_type: i32) {
    static SEEN: Mutex<Vec<(u32, i32)>> = Mutex::new(Vec::new());
    let Some(message) = unknown_struct_message(cmd, s_type) else {
        return;
    };
    {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&(cmd, s_type)) {
            return;
        }
        seen.push((cmd, s_type));
    }
    eprintln!("quarry: {message}");
    note(message);
}

/// The generated intercepts' entry: records one call; a no-op unless capturing.
pub fn record(cmd: u32, result: i32, encode: impl FnOnce(&mut vkstream::Encoder)) {
    record_call(cmd, result, encode);
}

/// Runs layer bookkeeping; a panic inside stops capturing instead of unwinding into the app.
pub fn guard<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            fail(&format!("internal error in {what}"));
            None
        }
    }
}

/// Stops capturing after an internal error: logged once, a `Note` written, the trace flushed but not
/// finalized (so it reads as incomplete); calls keep passing through.
pub fn fail(message: &str) {
    let mut guard = lock_capture();
    fail_locked(&mut guard, message);
}

fn fail_locked(guard: &mut CaptureGuard, message: &str) {
    HOT.active.store(false, Ordering::Release);
    HOT.tracking.store(false, Ordering::Release);
    ENDED.store(true, Ordering::Relaxed);
    log_once(
        "fail",
        &format!("{message}; capture stopped, the application continues unchanged"),
    );
    if let Some(cap) = guard.take() {
        let note = record::Note {
            host_ns: now_ns(),
            message: format!("capture stopped: {message}"),
        };
        let _ = cap.writer.write(&Record::Note(note));
        let _ = cap.writer.flush();
        // Dropped without finish(): no footer, so readers report the trace incomplete.
        drop(cap);
    }
}

/// Adds `message` as a `Note` record.
pub fn note(message: String) {
    emit_plain(Record::Note(record::Note {
        host_ns: now_ns(),
        message,
    }));
}

/// Writes a record that carries no seq.
pub fn emit_plain(rec: Record) {
    emit_plain_all(std::iter::once(rec));
}

/// Writes records that carry no seq, under one lock.
pub fn emit_plain_all(recs: impl IntoIterator<Item = Record>) {
    if !recording() {
        return;
    }
    // Offered under the capture lock: the snapshot takes the tracker's inside it too.
    let mut recs = recs.into_iter().filter_map(offer).peekable();
    if recs.peek().is_some() {
        write_all(&mut lock_capture(), recs);
    }
}

fn write_all(guard: &mut CaptureGuard, recs: impl Iterator<Item = Record>) {
    let Some(cap) = guard.as_mut() else { return };
    for rec in recs {
        if let Err(e) = cap.writer.write(&rec) {
            fail_locked(guard, &format!("writing the trace failed: {e}"));
            return;
        }
    }
}

/// Accumulates shadow-compare cost without writing anything.
pub fn add_scan_stats(bytes: u64, ns: u64) {
    if let Some(cap) = lock_capture().as_mut() {
        cap.stats.scans += 1;
        cap.stats.scanned_bytes += bytes;
        cap.stats.scan_ns += ns;
    }
}

// ---- frames ---------------------------------------------------------------------------------------

/// A submit went through: the frame counts as submitted and `records` (given the frame in
/// progress) are written, under one lock.
pub fn submitted<I: IntoIterator<Item = Record>>(records: impl FnOnce(u64) -> I) {
    if HOT.tracking.load(Ordering::Relaxed) {
        if let Some(p) = lock_pending().as_mut() {
            p.submitted = true;
        }
        emit_plain_all(records(0));
        return;
    }
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else { return };
    cap.submitted = true;
    let recs = records(cap.frame).into_iter();
    write_all(&mut guard, recs);
}

pub fn note_swapchain() {
    SWAPCHAIN_SEEN.store(true, Ordering::Relaxed);
}

/// A call that may end a frame returned. Frames end at vkQueuePresentKHR. Apps that never created a
/// swapchain get boundaries at vkQueueWaitIdle / vkDeviceWaitIdle / a successful vkWaitForFences, but only
/// when a submit happened since the previous boundary (so idle waits do not make empty frames).
pub fn frame_boundary(boundary: FrameBoundary, last_seq: Option<u64>) {
    if !recording() {
        return;
    }
    if boundary != FrameBoundary::Present && SWAPCHAIN_SEEN.load(Ordering::Relaxed) {
        return;
    }
    if HOT.tracking.load(Ordering::Relaxed) {
        let due = {
            let mut p = lock_pending();
            let Some(p) = p.as_mut() else { return };
            if boundary != FrameBoundary::Present && !p.submitted {
                return;
            }
            p.frame += 1;
            p.submitted = false;
            p.frame == p.first
        };
        if due && catch_unwind(snapshot).is_err() {
            abandon_tracking("internal error while writing the state snapshot");
            // A trace already opened is left unfinished, so readers see it incomplete.
            fail("internal error while writing the state snapshot");
        }
        return;
    }
    let t0 = prof::start();
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else { return };
    if boundary != FrameBoundary::Present && !cap.submitted {
        return;
    }
    let index = cap.frame;
    let last_seq = last_seq.unwrap_or_else(|| HOT.seq.load(Ordering::Relaxed).saturating_sub(1));
    let rec = Record::Frame(record::Frame {
        index,
        last_seq,
        host_ns: anchor_now(),
        boundary,
    });
    if let Err(e) = cap.writer.write(&rec) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
        return;
    }
    if let Err(e) = cap.writer.end_frame(index) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
        return;
    }
    cap.frame += 1;
    cap.submitted = false;
    prof::end(prof::FRAME, t0);
    if let Some(last) = cap.last_frame {
        if index >= last {
            ENDED.store(true, Ordering::Relaxed);
            finish_locked(&mut guard, "requested frame range done");
        }
    }
}

// ---- finalization ---------------------------------------------------------------------------------

/// Finalizes the trace (at the last vkDestroyInstance, at process exit, or after the frame range).
pub fn finish(reason: &str) {
    let mut guard = lock_capture();
    finish_locked(&mut guard, reason);
}

fn finish_locked(guard: &mut CaptureGuard, reason: &str) {
    HOT.active.store(false, Ordering::Release);
    if HOT.tracking.swap(false, Ordering::AcqRel) {
        *lock_tracker() = None;
        if let Some(p) = lock_pending().take() {
            log_once(
                "never-reached",
                &format!(
                    "{} ended after {} frames, before frame {} where the trimmed capture starts: no trace \
                     written",
                    p.application, p.frame, p.first
                ),
            );
            if HOT.profile.load(Ordering::Relaxed) {
                // No trace to hold it: the tracker's cost goes to stderr only.
                log_once(
                    "profile",
                    &format!("tracked {} frames{}", p.frame, prof::summary()),
                );
            }
        }
    }
    let Some(mut cap) = guard.take() else { return };
    let now = now_ns();
    if cap.submitted {
        let last_seq = HOT.seq.load(Ordering::Relaxed).saturating_sub(1);
        let rec = Record::Frame(record::Frame {
            index: cap.frame,
            last_seq,
            host_ns: now,
            boundary: FrameBoundary::End,
        });
        let _ = cap.writer.write(&rec);
        cap.frame += 1;
    }
    let s = &cap.stats;
    let per_scan = s.scan_ns.checked_div(s.scans).unwrap_or(0);
    let msg = format!(
        "capture finished ({reason}): {} frames, {} calls/records; host-memory shadow compare: {} scans, {} bytes \
         compared, {} ns total ({per_scan} ns/scan), {} bytes written; {} ranges read back through the GPU{}",
        cap.frame - cap.first_frame,
        HOT.seq.load(Ordering::Relaxed),
        s.scans,
        s.scanned_bytes,
        s.scan_ns,
        s.written_bytes,
        crate::readback::READS.load(Ordering::Relaxed),
        prof::summary()
    );
    if HOT.profile.load(Ordering::Relaxed) {
        // Whoever asked for the profile reads it on stderr as well as in the trace.
        log_once("profile", &msg);
    }
    let _ = cap.writer.write(&Record::Note(record::Note {
        host_ns: now,
        message: msg,
    }));
    if let Err(e) = cap.writer.finish() {
        log_once(
            "finish",
            &format!("finalizing trace {} failed: {e}", cap.path.display()),
        );
    }
}

extern "C" fn at_exit() {
    // Runs at exit() or when the loader unloads the layer; never unwinds.
    let _ = catch_unwind(|| {
        crate::special::flush_pending_at_exit();
        finish("process exit");
    });
}

fn register_atfork() {
    extern "C" fn child() {
        // The child's threads have new OS ids; its main thread keeps the parent's pthread_self.
        HOT.main_self.store(0, Ordering::Relaxed);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain extern "C" fn that only stores an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
}

fn register_atexit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering a plain extern "C" fn. glibc runs handlers registered from a shared object
        // at dlclose as well, so an unloaded layer never leaves a dangling handler.
        unsafe { libc::atexit(at_exit) };
    });
}

/// Flags of the records a reader can use to place a device in the trace.
pub fn emit_device(summary: record::DeviceSummary) {
    emit_plain(Record::Device(summary));
}

// ---- trimmed capture ------------------------------------------------------------------------------

/// Frame `first` begins: waits for every device, reads host-visible memory, opens the trace and
/// writes the state snapshot, then capture goes on as usual.
fn snapshot() {
    let t0 = now_ns();
    let devices = live_devices();
    for d in &devices {
        if let Some(f) = d.table.vkDeviceWaitIdle {
            // SAFETY: a live device; the GPU must be idle for memory contents to be final.
            let _ = unsafe { f(d.handle) };
        }
    }
    let mut memory = Vec::new();
    let mut gaps = Vec::new();
    for d in &devices {
        crate::tracker::read_memory(d, &mut memory, &mut gaps);
    }
    let Some(pending) = lock_pending().take() else {
        return;
    };
    let first = pending.first;
    let mut guard = lock_capture();
    let Some(cap) = new_capture(&pending.application, &pending.settings, first) else {
        HOT.tracking.store(false, Ordering::Release);
        *lock_tracker() = None;
        return;
    };
    let mut tracker_guard = lock_tracker();
    let Some(tracker) = tracker_guard.take() else {
        return;
    };
    let fence_signaled = |device: u64, fence: u64| -> Option<bool> {
        let d = device_data(device)?;
        let f = d.table.vkGetFenceStatus?;
        // SAFETY: both handles are live (the tracker saw them created and not destroyed).
        let r = unsafe { f(d.handle, vk::Fence::from_raw(fence)) };
        Some(r == vk::Result::SUCCESS)
    };
    let timeline_value = |device: u64, sem: u64| -> Option<u64> {
        let d = device_data(device)?;
        let f = d
            .table
            .vkGetSemaphoreCounterValue
            .or(d.table.vkGetSemaphoreCounterValueKHR)?;
        let mut v = 0u64;
        // SAFETY: both handles are live; a timeline semaphore's value is readable at any time.
        let r = unsafe { f(d.handle, vk::Semaphore::from_raw(sem), &mut v) };
        (r == vk::Result::SUCCESS).then_some(v)
    };
    let snap = tracker.snapshot(memory, gaps, &fence_signaled, &timeline_value);
    let undecodable = tracker.undecodable;
    drop(tracker);
    let write = |cap: &mut Capture| -> Result<(u64, u64), format::FormatError> {
        cap.writer.set_frame(first)?;
        cap.writer.write(&Record::StateBegin(record::StateBegin {
            first_frame: first,
            host_ns: t0,
        }))?;
        let (mut calls, mut bytes) = (0u64, 0u64);
        for r in snap.records {
            match r {
                crate::tracker::SnapRecord::Kept(rec) => {
                    calls += matches!(*rec, Record::Call(_)) as u64;
                    cap.writer.write(&rec)?;
                }
                crate::tracker::SnapRecord::Memory {
                    memory,
                    offset,
                    bytes: data,
                } => {
                    bytes += data.len() as u64;
                    let payload = cap.writer.payload(&data)?;
                    cap.writer.write(&Record::MemoryWrite(record::MemoryWrite {
                        seq: HOT.seq.fetch_add(1, Ordering::Relaxed),
                        memory,
                        offset,
                        data: payload,
                    }))?;
                }
                crate::tracker::SnapRecord::Made { cmd, params } => {
                    calls += 1;
                    cap.writer.write(&Record::Call(record::Call {
                        seq: HOT.seq.fetch_add(1, Ordering::Relaxed),
                        thread: 0,
                        cmd,
                        host_ns: now_ns(),
                        result: 0,
                        params,
                    }))?;
                }
            }
        }
        Ok((calls, bytes))
    };
    let mut cap = cap;
    let result = write(&mut cap);
    *guard = Some(cap);
    let (calls, memory_bytes) = match result {
        Ok(x) => x,
        Err(e) => {
            drop(tracker_guard);
            fail_locked(
                &mut guard,
                &format!("writing the state snapshot failed: {e}"),
            );
            return;
        }
    };
    let mut gaps = snap.gaps;
    if undecodable > 0 {
        gaps.push(format!(
            "{undecodable} calls before the trim point could not be decoded by the tracker"
        ));
    }
    for g in &gaps {
        log_once(g, &format!("snapshot: {g}"));
    }
    let end = Record::StateEnd(record::StateEnd {
        first_frame: first,
        host_ns: now_ns(),
        calls,
        objects: snap.objects,
        memory_bytes,
        gaps,
    });
    let cap = guard.as_mut().expect("set above");
    if let Err(e) = cap.writer.write(&end) {
        drop(tracker_guard);
        fail_locked(
            &mut guard,
            &format!("writing the state snapshot failed: {e}"),
        );
        return;
    }
    // Records offered from here on find no tracker and go to the trace.
    HOT.tracking.store(false, Ordering::Release);
    HOT.active.store(true, Ordering::Release);
    drop(tracker_guard);
    log_once(
        "snapshot",
        &format!(
            "frame {first}: state snapshot written ({calls} calls, {} objects, {memory_bytes} bytes of memory, {} ms)",
            snap.objects,
            now_ns().saturating_sub(t0) / 1_000_000
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_times_follow_the_monotonic_clock() {
        anchor_now();
        std::thread::sleep(std::time::Duration::from_millis(25));
        anchor_now();
        if cfg!(target_arch = "x86_64") && tsc_invariant() {
            assert_ne!(
                HOT.tsc_mult.load(Ordering::Relaxed),
                0,
                "TSC rate not measured"
            );
        }
        let mut last = 0;
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            let (before, call, after) = (now_ns(), call_ns(), now_ns());
            // Extrapolated over a few ms from an anchor: within 20 us of the real clock.
            assert!(
                call + 20_000 >= before && call <= after + 20_000,
                "{before} {call} {after}"
            );
            assert!(call >= last, "went back: {last} then {call}");
            last = call;
        }
    }

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

    #[test]
    fn threads_get_their_own_ids() {
        let ids: Vec<(u32, u32)> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    // SAFETY: gettid has no preconditions.
                    let os = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
                    (thread_id(), os)
                })
            })
            .map(|t| t.join().unwrap())
            .collect();
        for (id, os) in &ids {
            assert_eq!(id, os);
        }
        assert_eq!(thread_id(), thread_id());
        let selves: Vec<(u64, u64)> = (0..2)
            .map(|_| {
                // SAFETY: pthread_self has no preconditions.
                std::thread::spawn(|| (thread_self(), unsafe { libc::pthread_self() } as u64))
            })
            .map(|t| t.join().unwrap())
            .collect();
        for (mine, libc) in selves {
            assert_eq!(mine, libc, "the fs-based read is pthread_self()");
        }
    }

    #[test]
    fn unknown_structs_are_named_with_command_and_stype() {
        let cmd = vkstream::command_id("vkCreateImage").unwrap();
        let m = unknown_struct_message(cmd, 1_000_999_000).unwrap();
        assert!(
            m.contains("vkCreateImage") && m.contains("1000999000"),
            "{m}"
        );
        // The layer's own structs are not news.
        let ci = vkstream::command_id("vkCreateInstance").unwrap();
        assert_eq!(unknown_struct_message(ci, 1_000_496_000), None);
        assert_eq!(unknown_struct_message(ci, 47), None);
    }

    /// The generated encoder reports the first struct it could only write as an sType, per thread,
    /// and forgets it once asked.
    #[test]
    fn encoder_reports_unknown_chained_structs() {
        let tail = vk::BaseInStructure {
            s_type: vk::StructureType::from_raw(1_000_999_001),
            ..Default::default()
        };
        let unknown = vk::BaseInStructure {
            s_type: vk::StructureType::from_raw(1_000_999_000),
            p_next: &tail,
            ..Default::default()
        };
        let chain = &unknown as *const _ as *const std::ffi::c_void;
        let mut e = vkstream::Encoder::new();
        assert_eq!(e.unknown_stype(), None);
        // SAFETY: a valid chain of two base structs.
        unsafe { vkstream::encode::pnext(&mut e, chain) };
        assert_eq!(e.unknown_stype(), Some(1_000_999_000));
        e.clear();
        assert_eq!(e.unknown_stype(), None);
        // Known structs leave nothing behind.
        let usage = vk::ImageViewUsageCreateInfo::default();
        unsafe { vkstream::encode::pnext(&mut e, &usage as *const _ as *const std::ffi::c_void) };
        assert_eq!(e.unknown_stype(), None);
    }
}
