//! One execution of a trace: the replayed instance and devices, captured-to-replayed handle maps,
//! memory, emulated swapchains, and the state queries need (pools, which command buffer wrote which
//! query, when it was submitted).
//!
//! The parts, one file each: `instance` (instance creation, validation messages), `device`
//! (devices, queues, queue-family mapping, performance counters and the profiling lock), `memory`
//! (deferred allocations, mappings, writes and read-backs), `wsi` (emulated swapchains and
//! `--window`). This module holds the handle maps every part uses. Dependencies point one way:
//! the session uses the mapping, perf and window helpers, never the calls, engine or injection.

mod copies;
mod device;
mod instance;
mod memory;
mod wsi;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ash::vk;
use ash::vk::Handle as _;
use format::record::DeviceSummary;

pub use self::copies::{CopyDst, CopyKey, CopySource, CopyTracker};
pub use self::device::{extension_state, needs_perf_feature, DeviceState, ExtensionState};
pub use self::instance::{is_window_system_extension, InstanceState, Messages};
pub use self::memory::MemState;
pub use self::wsi::Swapchain;
use crate::devices::GpuInfo;
use crate::error::ReplayError;
use crate::fasthash::HandleMap;
use crate::queries::PoolShape;

/// Where and when a captured command buffer was last submitted.
#[derive(Debug, Clone, Copy)]
pub struct SubmitInfo {
    pub queue: u64,
    /// Capture queue family.
    pub family: u32,
    /// Replay host time.
    pub submit_ns: u64,
    pub frame: u64,
}

pub struct PoolState {
    pub shape: PoolShape,
    /// Counters of a performance query pool, in result order.
    pub counters: Vec<format::record::PerfCounterDesc>,
}

pub struct Session<'a> {
    pub entry: &'a ash::Entry,
    pub gpu: &'a GpuInfo,
    /// The capture device the results name (the trace's first).
    pub capture_device: Option<&'a DeviceSummary>,
    /// Captured device -> the summary of the physical device it was created on, where the
    /// capture's devices were not all on one.
    pub capture_devices: Arc<HashMap<u64, DeviceSummary>>,
    pub messages: Option<Arc<Messages>>,
    /// Captured instance -> its replay instance (any number alive at once).
    pub instances: HandleMap<u64, InstanceState>,
    /// Captured physical device -> the captured instance that enumerated it.
    pub physical: HandleMap<u64, u64>,
    /// Global commands (vkCreateInstance, ...) for the generated dispatch.
    pub gtable: vkstream::InstanceTable,
    /// Captured queue / command buffer -> captured device.
    pub owner: HandleMap<u64, u64>,
    /// (VkObjectType, captured) -> replayed.
    pub handles: HandleMap<(i32, u64), u64>,
    pub devices: HandleMap<u64, DeviceState>,
    /// Devices created so far (instances and devices come and go: the index results name).
    pub devices_made: u32,
    /// Loader dispatch key of a replayed dispatchable handle -> captured device.
    pub dispatch_keys: HandleMap<usize, u64>,
    /// The captured device of the call the generated dispatch is replaying (its table was the
    /// last one asked for), for what carries no device of its own (barriers' queue families).
    pub current_device: u64,
    /// Captured allocations and what is bound to them.
    pub memory: MemoryState<'a>,
    /// What query reads need: pools, which command buffer wrote which query, submissions.
    pub tracked: QueryTracking,
    /// Emulated swapchains and `--window`.
    pub wsi: WsiState,
    /// Fake handles for emulated objects (surfaces, swapchains).
    pub next_fake: u64,
    pub frame: u64,
    /// Performance pools: which replay pass this is and how each pool is split into passes.
    pub perf: PerfState,
    /// `--counters`: the engine injects performance queries around command buffers or render
    /// passes (devices get VK_KHR_performance_query and its feature).
    pub counters_injected: bool,
    /// `--drop-unsupported`.
    pub drop: DropState,
    /// Captured descriptor update template -> its entries (to translate handles in update data).
    pub templates: HashMap<u64, Vec<crate::templates::Entry>>,
}

/// Captured allocations (see `memory.rs`).
pub struct MemoryState<'a> {
    pub memories: HandleMap<u64, MemState>,
    /// Captured memory the trace maps or writes (from a scan before the replay).
    pub host_memories: &'a HashSet<u64>,
    /// Captured buffer -> (captured memory, offset).
    pub buffer_memory: HashMap<u64, (u64, u64)>,
    /// `--memory`: the trace's binds, and the decision taken at its first bind (`crate::rebind`).
    pub plan: Arc<crate::rebind::Plan>,
    /// Whether this replay rebinds resources, once decided.
    pub rebinding: Option<bool>,
    /// Under rebind: what this pass did (allocations made, shared, given destroyed bytes).
    pub rebound: crate::rebind::Counts,
}

/// The state query reads need, kept as the trace goes.
#[derive(Default)]
pub struct QueryTracking {
    pub pools: HashMap<u64, PoolState>,
    /// Replayed query pools alive: captured pool -> (captured device, replayed pool).
    pub live_pools: HashMap<u64, (u64, vk::QueryPool)>,
    pub cmdbuf_submit: HashMap<u64, SubmitInfo>,
    /// (captured pool, query) -> (captured command buffer, begun with PRECISE).
    pub query_owner: HashMap<(u64, u32), (u64, bool)>,
    /// Query-copy destinations the replay GPU wrote, kept from host writes (see `copies.rs`).
    pub copies: CopyTracker,
}

/// Emulated swapchains (see `wsi.rs`).
#[derive(Default)]
pub struct WsiState {
    pub swapchains: HashMap<u64, Swapchain>,
    /// `--window`: presents are shown in X11 windows (see `crate::window`).
    pub window: bool,
    /// Frames shown in windows.
    pub presented: u64,
}

/// What the replay GPU lacks: extensions and features the trace never uses are left out (see
/// `crate::portability`); with `--drop-unsupported` used ones too, and their commands skipped.
#[derive(Default)]
pub struct DropState {
    pub enabled: bool,
    /// What the trace's devices use of what they enable (from a pass before the replay).
    pub usage: Option<Arc<crate::portability::TraceUsage>>,
    /// Extensions (and `feature X`) left out by --drop-unsupported.
    pub dropped: Vec<String>,
    /// Calls skipped because their extension was dropped.
    pub skipped_calls: u64,
}

/// Multi-pass state of one replay pass (see `crate::perf`).
#[derive(Default)]
pub struct PerfState {
    /// This replay's pass (0-based).
    pub pass: u32,
    /// `--passes N`; `None` takes as many as the replay device needs.
    pub forced: Option<u32>,
    /// `seq` of each performance pool's vkCreateQueryPool -> the counters the capture chose.
    pub pool_counters: Arc<HashMap<u64, Vec<format::record::PerfCounterDesc>>>,
    /// Captured pool -> its plan on the replay device.
    pub plans: HashMap<u64, crate::perf::PoolPlan>,
    /// Most passes any pool needs (1 when there are none).
    pub passes_needed: u32,
    /// Counters the replay device lacks, once each.
    pub warnings: Vec<String>,
    /// Captured devices whose profiling lock the replayer holds (until the device is destroyed).
    pub locked: HashSet<u64>,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.teardown();
    }
}

fn read_dispatch_key(handle: u64) -> Option<usize> {
    if handle == 0 {
        return None;
    }
    // SAFETY: dispatchable handles the loader returned point at an object whose first word is the
    // loader's dispatch table pointer; only such handles are passed here.
    Some(unsafe { *(handle as usize as *const usize) })
}

impl<'a> Session<'a> {
    pub fn new(
        entry: &'a ash::Entry,
        gpu: &'a GpuInfo,
        capture_device: Option<&'a DeviceSummary>,
        host_memories: &'a HashSet<u64>,
        validate: bool,
    ) -> Self {
        Session {
            entry,
            gpu,
            capture_device,
            capture_devices: Arc::default(),
            messages: validate.then(|| Arc::new(Messages::default())),
            instances: HandleMap::default(),
            physical: HandleMap::default(),
            // SAFETY: the loader's entry point with a null instance loads only global commands.
            gtable: unsafe {
                vkstream::InstanceTable::load(
                    entry.static_fn().get_instance_proc_addr,
                    vk::Instance::null(),
                )
            },
            owner: HandleMap::default(),
            handles: HandleMap::default(),
            devices: HandleMap::default(),
            devices_made: 0,
            dispatch_keys: HandleMap::default(),
            current_device: 0,
            memory: MemoryState {
                memories: HandleMap::default(),
                host_memories,
                buffer_memory: HashMap::new(),
                plan: crate::rebind::Plan::fixed(crate::engine::MemoryMode::Remap),
                rebinding: None,
                rebound: Default::default(),
            },
            tracked: QueryTracking::default(),
            wsi: WsiState::default(),
            next_fake: 0x5157_0000_0000_0001,
            frame: 0,
            perf: PerfState::default(),
            counters_injected: false,
            drop: DropState::default(),
            templates: HashMap::new(),
        }
    }

    // ---- handle maps ----------------------------------------------------------------------

    pub fn lookup(&self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
        if captured == 0 {
            return Ok(0);
        }
        self.handles
            .get(&(ty.as_raw(), captured))
            .copied()
            .ok_or(ReplayError::UnknownHandle {
                ty,
                handle: captured,
            })
    }

    /// Like `lookup`, and creates deferred memory allocations on first use.
    pub fn handle(&mut self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
        if ty == vk::ObjectType::DEVICE_MEMORY && captured != 0 {
            return self
                .ensure_memory(captured, u32::MAX, 0)
                .map(|m| m.as_raw());
        }
        self.lookup(ty, captured)
    }

    pub fn bind(&mut self, ty: vk::ObjectType, captured: u64, replayed: u64) {
        if captured == 0 {
            return;
        }
        self.handles.insert((ty.as_raw(), captured), replayed);
        if matches!(ty, vk::ObjectType::QUEUE | vk::ObjectType::COMMAND_BUFFER) {
            // Queues and command buffers carry their device's loader dispatch key.
            if let Some(dev) = read_dispatch_key(replayed).and_then(|k| self.dispatch_keys.get(&k))
            {
                self.owner.insert(captured, *dev);
            }
        }
    }

    pub fn unbind(&mut self, ty: vk::ObjectType, captured: u64) {
        self.handles.remove(&(ty.as_raw(), captured));
    }

    pub fn fake_handle(&mut self) -> u64 {
        self.next_fake += 1;
        self.next_fake
    }

    /// The device state a replayed or captured dispatchable handle belongs to.
    pub fn device_for(&self, handle: u64) -> Result<&DeviceState, ReplayError> {
        if let Some(d) = self.devices.get(&handle) {
            return Ok(d);
        }
        read_dispatch_key(handle)
            .and_then(|k| self.dispatch_keys.get(&k))
            .and_then(|c| self.devices.get(c))
            .ok_or_else(|| {
                ReplayError::Other(format!("no replayed device owns handle 0x{handle:x}"))
            })
    }

    /// The device state of a captured device handle.
    pub fn device(&self, captured: u64) -> Result<&DeviceState, ReplayError> {
        self.devices
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE,
                handle: captured,
            })
    }

    /// The summary of the physical device captured device `device` was created on.
    pub fn capture_device_of(&self, device: u64) -> Option<&DeviceSummary> {
        self.capture_devices.get(&device).or(self.capture_device)
    }

    /// Waits until a captured queue's replay counterpart is idle.
    pub fn wait_device_of_queue(&self, captured_queue: u64) -> Result<(), ReplayError> {
        let q = self.lookup(vk::ObjectType::QUEUE, captured_queue)?;
        let d = self.device_for(q)?;
        // SAFETY: valid queue.
        unsafe { d.device.queue_wait_idle(vk::Queue::from_raw(q)) }
            .map_err(|e| ReplayError::vk("vkQueueWaitIdle", e))
    }

    pub fn wait_all_devices(&self) -> Result<(), ReplayError> {
        for d in self.devices.values() {
            // SAFETY: valid device.
            unsafe { d.device.device_wait_idle() }
                .map_err(|e| ReplayError::vk("vkDeviceWaitIdle", e))?;
        }
        Ok(())
    }

    pub fn validation_messages(&self) -> u64 {
        self.messages
            .as_ref()
            .map_or(0, |m| m.count.load(Ordering::Relaxed))
    }
}
