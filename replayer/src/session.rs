//! One execution of a trace: the replayed instance and devices, captured-to-replayed handle maps,
//! memory, emulated swapchains, and the state queries need (pools, which command buffer wrote which
//! query, when it was submitted).

use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;
use ash::vk::Handle as _;
use format::record::{DeviceSummary, MemoryTypeSummary};

use crate::devices::GpuInfo;
use crate::error::ReplayError;
use crate::fasthash::HandleMap;
use crate::mapping;
use crate::queries::PoolShape;

/// Validation messages seen through the debug messenger.
#[derive(Default)]
pub struct Messages {
    pub count: AtomicU64,
    pub first: Mutex<Vec<String>>,
}

const KEEP_MESSAGES: usize = 20;

unsafe extern "system" fn on_debug_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // Never unwind into the driver.
    let _ = std::panic::catch_unwind(|| {
        if user.is_null() {
            return;
        }
        // SAFETY: `user` is the `Messages` the session keeps alive for the messenger's lifetime.
        let m = unsafe { &*(user as *const Messages) };
        m.count.fetch_add(1, Ordering::Relaxed);
        let text = if data.is_null() || unsafe { (*data).p_message.is_null() } {
            String::from("(no message)")
        } else {
            // SAFETY: the loader passes a NUL-terminated message valid during the callback.
            unsafe { CStr::from_ptr((*data).p_message) }
                .to_string_lossy()
                .into_owned()
        };
        if let Ok(mut first) = m.first.lock() {
            if first.len() < KEEP_MESSAGES {
                first.push(format!("{severity:?}: {text}"));
            }
        }
    });
    vk::FALSE
}

/// A replayed device and what the translation of its commands needs.
pub struct DeviceState {
    pub captured: u64,
    pub device: ash::Device,
    /// Function pointers the generated dispatch calls through.
    pub table: vkstream::DeviceTable,
    /// Captured queue family -> replay queue family.
    pub families: HashMap<u32, u32>,
    /// Queues created per replay family (captured queue indices beyond it fold onto the last one).
    pub queue_counts: HashMap<u32, u32>,
    pub memory_types: Vec<MemoryTypeSummary>,
    pub non_coherent_atom: u64,
    /// Replayed queues retrieved so far, for emulated acquire and for waits.
    pub queues: Vec<vk::Queue>,
    /// Command pool per replay family for the replayer's own transfers.
    pub own_pools: HashMap<u32, vk::CommandPool>,
    pub queue_family_of: HashMap<u64, u32>,
}

/// A captured allocation. The replay allocation is made when the memory is first needed (bound,
/// mapped or written), so its type and size can follow the replay device's requirements of the
/// first resource bound to it.
pub struct MemState {
    pub device: u64,
    pub size: u64,
    pub captured_flags: u32,
    pub replayed: vk::DeviceMemory,
    pub type_index: u32,
    pub coherent: bool,
    /// Whole-allocation replay mapping, kept while the capture has the memory mapped.
    pub mapped: *mut u8,
    pub persistent: bool,
    /// `VkMemoryAllocateFlagsInfo` flags and device mask from the capture, when chained.
    pub alloc_flags: Option<(vk::MemoryAllocateFlags, u32)>,
    /// Captured dedicated buffer / image, when chained.
    pub dedicated: Option<(u64, u64)>,
}

/// An emulated swapchain: offscreen images standing in for presentable ones.
pub struct Swapchain {
    pub device: u64,
    pub format: vk::Format,
    pub extent: vk::Extent2D,
    pub layers: u32,
    pub usage: vk::ImageUsageFlags,
    pub flags: vk::ImageCreateFlags,
    pub view_formats: Vec<vk::Format>,
    pub images: Vec<(vk::Image, vk::DeviceMemory)>,
    pub next: u32,
    /// `--window`: the real window this swapchain's presents go to (opened at the first present).
    pub window: Option<Box<crate::window::Window>>,
}

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
    pub capture_device: Option<&'a DeviceSummary>,
    pub messages: Option<Arc<Messages>>,
    pub instance: Option<ash::Instance>,
    pub itable: Option<vkstream::InstanceTable>,
    /// Global commands (vkCreateInstance, ...) for the generated dispatch.
    pub gtable: vkstream::InstanceTable,
    /// Captured queue / command buffer -> captured device.
    pub owner: HandleMap<u64, u64>,
    pub debug_utils: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub pd: vk::PhysicalDevice,
    /// (VkObjectType, captured) -> replayed.
    pub handles: HandleMap<(i32, u64), u64>,
    pub devices: HandleMap<u64, DeviceState>,
    /// Loader dispatch key of a replayed dispatchable handle -> captured device.
    pub dispatch_keys: HandleMap<usize, u64>,
    pub memories: HandleMap<u64, MemState>,
    /// Captured memory the trace maps or writes (from a scan before the replay).
    pub host_memories: &'a HashSet<u64>,
    pub pools: HashMap<u64, PoolState>,
    /// Replayed query pools alive: captured pool -> (captured device, replayed pool).
    pub live_pools: HashMap<u64, (u64, vk::QueryPool)>,
    pub swapchains: HashMap<u64, Swapchain>,
    /// Captured buffer -> (captured memory, offset).
    pub buffer_memory: HashMap<u64, (u64, u64)>,
    pub cmdbuf_submit: HashMap<u64, SubmitInfo>,
    /// (captured pool, query) -> (captured command buffer, begun with PRECISE).
    pub query_owner: HashMap<(u64, u32), (u64, bool)>,
    /// Fake handles for emulated objects (surfaces, swapchains).
    pub next_fake: u64,
    pub frame: u64,
    /// Performance pools: which replay pass this is and how each pool is split into passes.
    pub perf: PerfState,
    /// `--counters`: performance queries injected around command buffers or render passes.
    pub inject: Option<crate::inject::InjectState>,
    /// `--window`: presents are shown in X11 windows (see `crate::window`).
    pub window: bool,
    /// `--drop-unsupported`: device extensions in [`SAFE_TO_DROP`] the replay GPU lacks are left
    /// out, and their commands skipped.
    pub drop_unsupported: bool,
    /// Extensions left out that way.
    pub dropped: Vec<String>,
    /// Calls skipped because their extension was dropped.
    pub skipped_calls: u64,
    /// Captured descriptor update template -> its entries (to translate handles in update data).
    pub templates: HashMap<u64, Vec<crate::templates::Entry>>,
    /// Frames shown in windows.
    pub presented: u64,
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
            messages: validate.then(|| Arc::new(Messages::default())),
            instance: None,
            itable: None,
            // SAFETY: the loader's entry point with a null instance loads only global commands.
            gtable: unsafe {
                vkstream::InstanceTable::load(
                    entry.static_fn().get_instance_proc_addr,
                    vk::Instance::null(),
                )
            },
            owner: HandleMap::default(),
            debug_utils: None,
            pd: vk::PhysicalDevice::null(),
            handles: HandleMap::default(),
            devices: HandleMap::default(),
            dispatch_keys: HandleMap::default(),
            memories: HandleMap::default(),
            host_memories,
            pools: HashMap::new(),
            live_pools: HashMap::new(),
            swapchains: HashMap::new(),
            buffer_memory: HashMap::new(),
            cmdbuf_submit: HashMap::new(),
            query_owner: HashMap::new(),
            next_fake: 0x5157_0000_0000_0001,
            frame: 0,
            perf: PerfState::default(),
            inject: None,
            window: false,
            presented: 0,
            drop_unsupported: false,
            dropped: Vec::new(),
            skipped_calls: 0,
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

    /// The replay GPU's performance counters on queue family `family` (`VK_KHR_performance_query`),
    /// described as a trace records them.
    pub fn device_counter_descs(
        &self,
        family: u32,
    ) -> Result<Vec<format::record::PerfCounterDesc>, ReplayError> {
        let perf = ash::khr::performance_query::Instance::new(self.entry, self.instance()?);
        let err = |e| {
            ReplayError::vk(
                "vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR",
                e,
            )
        };
        // SAFETY: valid instance and physical device; the output slices have the reported length.
        unsafe {
            let n = perf
                .enumerate_physical_device_queue_family_performance_query_counters_len(
                    self.pd, family,
                )
                .map_err(err)?;
            let mut counters = vec![vk::PerformanceCounterKHR::default(); n];
            let mut descs = vec![vk::PerformanceCounterDescriptionKHR::default(); n];
            perf.enumerate_physical_device_queue_family_performance_query_counters(
                self.pd,
                family,
                &mut counters,
                &mut descs,
            )
            .map_err(err)?;
            Ok(counters
                .iter()
                .zip(&descs)
                .map(|(c, d)| format::record::PerfCounterDesc {
                    uuid: c.uuid,
                    name: crate::devices::c_array_str(&d.name),
                    category: crate::devices::c_array_str(&d.category),
                    description: crate::devices::c_array_str(&d.description),
                    unit: c.unit.as_raw() as u32,
                    storage: c.storage.as_raw() as u32,
                    scope: c.scope.as_raw() as u32,
                })
                .collect())
        }
    }

    /// The replay GPU's counters on `family` as the matcher sees them.
    pub fn device_counters(
        &self,
        family: u32,
    ) -> Result<Vec<crate::perf::DeviceCounter>, ReplayError> {
        Ok(self
            .device_counter_descs(family)?
            .iter()
            .map(crate::perf::DeviceCounter::from)
            .collect())
    }

    /// Takes the profiling lock of captured device `device` unless the replay already holds it; it
    /// is released when the device is destroyed. `what` names the replay's need in the error.
    pub fn hold_profiling_lock(&mut self, device: u64, what: &str) -> Result<(), ReplayError> {
        if self.perf.locked.contains(&device) {
            return Ok(());
        }
        let d = self.device(device)?;
        let perf = ash::khr::performance_query::Device::new(self.instance()?, &d.device);
        let info = vk::AcquireProfilingLockInfoKHR::default().timeout(10_000_000_000);
        // SAFETY: valid device with VK_KHR_performance_query enabled (the caller's pools need it).
        unsafe { perf.acquire_profiling_lock(&info) }.map_err(|e| {
            ReplayError::Other(format!(
                "cannot acquire the profiling lock ({e}), which {what} need; is another process profiling this GPU?"
            ))
        })?;
        self.perf.locked.insert(device);
        Ok(())
    }

    /// Passes the replay GPU needs to measure `indices` on queue family `family`.
    pub fn perf_passes(&self, family: u32, indices: &[u32]) -> u32 {
        let Ok(instance) = self.instance() else {
            return u32::MAX;
        };
        let perf = ash::khr::performance_query::Instance::new(self.entry, instance);
        let ci = vk::QueryPoolPerformanceCreateInfoKHR::default()
            .queue_family_index(family)
            .counter_indices(indices);
        // SAFETY: valid instance and physical device; ci lives across the call.
        unsafe { perf.get_physical_device_queue_family_performance_query_passes(self.pd, &ci) }
    }

    pub fn instance(&self) -> Result<&ash::Instance, ReplayError> {
        self.instance
            .as_ref()
            .ok_or_else(|| ReplayError::Other("no instance was created before this call".into()))
    }

    // ---- instance and device ----------------------------------------------------------------

    /// Creates the replay instance. `layers`/`extensions` are the captured lists; the capture layer
    /// and window-system surface extensions are dropped (replay is headless), validation is added
    /// when asked.
    pub fn create_instance(
        &mut self,
        captured: u64,
        app: Option<(&str, u32, &str, u32, u32)>,
        layers: &[String],
        extensions: &[String],
    ) -> Result<(), ReplayError> {
        if self.instance.is_some() {
            return Err(ReplayError::Other(
                "the trace creates a second instance; quarry replays one".into(),
            ));
        }
        let available_ext: Vec<String> =
            unsafe { self.entry.enumerate_instance_extension_properties(None) }
                .map_err(|e| ReplayError::vk("vkEnumerateInstanceExtensionProperties", e))?
                .iter()
                .map(|e| crate::devices::c_array_str(&e.extension_name))
                .collect();
        let available_layers: Vec<String> =
            unsafe { self.entry.enumerate_instance_layer_properties() }
                .map_err(|e| ReplayError::vk("vkEnumerateInstanceLayerProperties", e))?
                .iter()
                .map(|l| crate::devices::c_array_str(&l.layer_name))
                .collect();
        let mut ext: Vec<String> = extensions
            .iter()
            .filter(|e| !is_window_system_extension(e))
            .cloned()
            .collect();
        let mut lay: Vec<String> = layers
            .iter()
            .filter(|l| !l.starts_with("VK_LAYER_QUARRY"))
            .cloned()
            .collect();
        if self.messages.is_some() {
            ext.push("VK_EXT_debug_utils".into());
            lay.push("VK_LAYER_KHRONOS_validation".into());
        }
        // Below validation, so validation checks the replay's calls, not the emulation's.
        lay.extend(crate::devices::extra_layers());
        if self.window {
            ext.extend(crate::window::INSTANCE_EXTENSIONS.map(String::from));
        }
        if available_ext
            .iter()
            .any(|e| e == "VK_KHR_portability_enumeration")
        {
            ext.push("VK_KHR_portability_enumeration".into());
        }
        ext.sort();
        ext.dedup();
        let mut seen = HashSet::new();
        lay.retain(|l| seen.insert(l.clone()));
        let missing_ext: Vec<&String> = ext.iter().filter(|e| !available_ext.contains(e)).collect();
        let missing_layers: Vec<&String> = lay
            .iter()
            .filter(|l| !available_layers.contains(l))
            .collect();
        if !missing_ext.is_empty() || !missing_layers.is_empty() {
            let mut msg = String::from("the replay machine lacks what the trace's instance needs:");
            for e in &missing_ext {
                msg.push_str(&format!("\n  instance extension {e}"));
            }
            for l in &missing_layers {
                msg.push_str(&format!(
                    "\n  layer {l}{}",
                    if l.as_str() == "VK_LAYER_KHRONOS_validation" {
                        " (install vulkan-validationlayers)"
                    } else {
                        ""
                    }
                ));
            }
            return Err(ReplayError::NoGpu(msg));
        }
        let cstr = |v: &[String]| -> Vec<CString> {
            v.iter()
                .map(|s| CString::new(s.as_str()).unwrap_or_default())
                .collect()
        };
        let ext_c = cstr(&ext);
        let lay_c = cstr(&lay);
        let ext_p: Vec<*const i8> = ext_c.iter().map(|c| c.as_ptr()).collect();
        let lay_p: Vec<*const i8> = lay_c.iter().map(|c| c.as_ptr()).collect();
        let loader_version = crate::devices::instance_api_version(self.entry);
        let (app_name, app_version, engine, engine_version, api) =
            app.unwrap_or(("quarry-replay", 0, "quarry", 0, vk::API_VERSION_1_0));
        let app_name = CString::new(app_name).unwrap_or_default();
        let engine = CString::new(engine).unwrap_or_default();
        // The replayer needs 1.1 for properties2/features2; apps asking for less still work.
        let api = api
            .max(vk::API_VERSION_1_1)
            .min(loader_version.max(vk::API_VERSION_1_1));
        let app_info = vk::ApplicationInfo::default()
            .application_name(&app_name)
            .application_version(app_version)
            .engine_name(&engine)
            .engine_version(engine_version)
            .api_version(api);
        let user = self
            .messages
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| Arc::as_ptr(m) as *mut c_void);
        let mut dbg = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_debug_message))
            .user_data(user);
        let mut ci = vk::InstanceCreateInfo::default()
            .application_info(&app_info)
            .enabled_layer_names(&lay_p)
            .enabled_extension_names(&ext_p);
        if ext.iter().any(|e| e == "VK_KHR_portability_enumeration") {
            ci = ci.flags(vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR);
        }
        if self.messages.is_some() {
            ci = ci.push_next(&mut dbg);
        }
        // SAFETY: every pointer in ci lives until the call returns.
        let instance = unsafe { self.entry.create_instance(&ci, None) }
            .map_err(|e| ReplayError::vk("vkCreateInstance", e))?;
        if self.messages.is_some() {
            let du = ash::ext::debug_utils::Instance::new(self.entry, &instance);
            // SAFETY: valid instance and create info.
            match unsafe { du.create_debug_utils_messenger(&dbg, None) } {
                Ok(m) => self.debug_utils = Some((du, m)),
                Err(e) => {
                    unsafe { instance.destroy_instance(None) };
                    return Err(ReplayError::vk("vkCreateDebugUtilsMessengerEXT", e));
                }
            }
        }
        // Find the selected GPU in this instance (same loader, same order; the UUID confirms it).
        let pds = unsafe { instance.enumerate_physical_devices() }
            .map_err(|e| ReplayError::vk("vkEnumeratePhysicalDevices", e))?;
        let pd = pds
            .iter()
            .copied()
            .enumerate()
            .find(|(i, pd)| {
                let uuid_ok = self.gpu.summary.device_uuid == [0; 16] || {
                    let mut id = vk::PhysicalDeviceIDProperties::default();
                    let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                    unsafe { instance.get_physical_device_properties2(*pd, &mut p2) };
                    id.device_uuid == self.gpu.summary.device_uuid
                };
                *i as u32 == self.gpu.index && uuid_ok
            })
            .map(|(_, pd)| pd);
        let Some(pd) = pd else {
            unsafe { instance.destroy_instance(None) };
            return Err(ReplayError::NoGpu(format!(
                "GPU {} ({}) is not visible to the replay instance",
                self.gpu.index, self.gpu.name
            )));
        };
        self.pd = pd;
        let gipa = self.entry.static_fn().get_instance_proc_addr;
        // SAFETY: a valid instance and the loader's entry point.
        self.itable = Some(unsafe { vkstream::InstanceTable::load(gipa, instance.handle()) });
        self.bind(
            vk::ObjectType::INSTANCE,
            captured,
            instance.handle().as_raw(),
        );
        self.instance = Some(instance);
        Ok(())
    }

    /// Binds every physical device the capture enumerated to the replay GPU.
    pub fn bind_physical_devices(&mut self, captured: &[u64]) {
        let pd = self.pd.as_raw();
        for &c in captured {
            self.bind(vk::ObjectType::PHYSICAL_DEVICE, c, pd);
        }
    }

    /// Creates the replay device from a create info already translated except for queue families
    /// (`queue_infos` holds captured family indices). Checks extensions and features first so
    /// everything missing is listed in one error.
    ///
    /// # Safety
    /// `create_info.p_next` must be a valid chain.
    pub unsafe fn create_device(
        &mut self,
        captured: u64,
        create_info: &vk::DeviceCreateInfo<'_>,
        queue_infos: &[(u32, Vec<f32>, vk::DeviceQueueCreateFlags)],
        extensions: &[String],
    ) -> Result<(), ReplayError> {
        let instance = self.instance()?.clone();
        let pd = self.pd;
        // Swapchain support is kept when available (PRESENT_SRC layouts in the app's barriers
        // need it); the emulation never calls it.
        let available = crate::devices::device_extensions(&instance, pd);
        let mut ext: Vec<String> = extensions
            .iter()
            .filter(|e| e.as_str() != "VK_KHR_swapchain" || available.contains(e))
            .cloned()
            .collect();
        if self.window && !ext.iter().any(|e| e == "VK_KHR_swapchain") {
            ext.push("VK_KHR_swapchain".into());
        }
        // Counter injection measures with performance queries even when the app made none.
        if self.inject.is_some() && !ext.iter().any(|e| e == "VK_KHR_performance_query") {
            ext.push("VK_KHR_performance_query".into());
        }
        // Extensions the replay can do without: dropped with --drop-unsupported, else named.
        let droppable: Vec<String> = ext
            .iter()
            .filter(|e| !available.contains(e) && SAFE_TO_DROP.contains(&e.as_str()))
            .cloned()
            .collect();
        if self.drop_unsupported {
            ext.retain(|e| !droppable.contains(e));
            self.dropped.extend(droppable.iter().cloned());
        }
        let mut missing: Vec<String> = ext
            .iter()
            .filter(|e| !available.contains(e))
            .map(|e| {
                if e == "VK_KHR_performance_query" {
                    format!("device extension {e} (replay with --emulate-counters to measure the counters with VK_LAYER_QUARRY_counters)")
                } else {
                    format!("device extension {e}")
                }
            })
            .collect();
        missing.extend(crate::features::missing_features(
            &instance,
            pd,
            create_info,
        ));

        // Queue families by capability.
        let replay_families: Vec<_> = self.gpu.summary.queue_families.clone();
        let requested: Vec<u32> = queue_infos.iter().map(|q| q.0).collect();
        let captured_families = self
            .capture_device
            .map(|d| d.queue_families.clone())
            .unwrap_or_default();
        let families =
            match mapping::map_queue_families(&captured_families, &replay_families, &requested) {
                Ok(m) => m,
                Err(e) => {
                    missing.push(e);
                    HashMap::new()
                }
            };
        if !missing.is_empty() {
            let hint = if droppable.is_empty() || self.drop_unsupported {
                String::new()
            } else {
                format!(
                    "\n  ({} can be dropped safely with --drop-unsupported: the replay skips {} commands)",
                    droppable.join(", "),
                    if droppable.len() == 1 { "its" } else { "their" }
                )
            };
            return Err(ReplayError::NoGpu(format!(
                "GPU {} ({}) lacks what the trace's device needs:\n  {}{hint}",
                self.gpu.index,
                self.gpu.name,
                missing.join("\n  ")
            )));
        }
        // Merge captured families that landed on one replay family.
        let mut merged: Vec<(u32, Vec<f32>, vk::DeviceQueueCreateFlags)> = Vec::new();
        for (fam, prios, flags) in queue_infos {
            let rf = families[fam];
            let max = replay_families
                .get(rf as usize)
                .map_or(1, |f| f.queue_count.max(1)) as usize;
            match merged.iter_mut().find(|m| m.0 == rf && m.2 == *flags) {
                Some(m) => {
                    for p in prios {
                        if m.1.len() < max {
                            m.1.push(*p);
                        }
                    }
                }
                None => merged.push((rf, prios.iter().copied().take(max).collect(), *flags)),
            }
        }
        let qcis: Vec<vk::DeviceQueueCreateInfo<'_>> = merged
            .iter()
            .map(|(f, p, flags)| {
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(*f)
                    .queue_priorities(p)
                    .flags(*flags)
            })
            .collect();
        let ext_c: Vec<CString> = ext
            .iter()
            .map(|s| CString::new(s.as_str()).unwrap_or_default())
            .collect();
        let ext_p: Vec<*const i8> = ext_c.iter().map(|c| c.as_ptr()).collect();
        let mut ci = *create_info;
        let mut perf_features = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default()
            .performance_counter_query_pools(true);
        if self.inject.is_some() && crate::inject::needs_perf_feature(ci.p_next) {
            perf_features.p_next = ci.p_next as *mut c_void;
            ci.p_next = &perf_features as *const _ as *const c_void;
        }
        ci.queue_create_info_count = qcis.len() as u32;
        ci.p_queue_create_infos = qcis.as_ptr();
        ci.enabled_extension_count = ext_p.len() as u32;
        ci.pp_enabled_extension_names = ext_p.as_ptr();
        // Device layers are deprecated and ignored.
        #[allow(deprecated)]
        {
            ci.enabled_layer_count = 0;
            ci.pp_enabled_layer_names = std::ptr::null();
        }
        // The queue families were read through another instance (`devices`); read them through
        // this one too, as the spec expects before queues of a family are asked for (validation
        // reports VUID-VkDeviceQueueCreateInfo-queueFamilyIndex-00381 otherwise).
        let _ = instance.get_physical_device_queue_family_properties(pd);
        let device = instance
            .create_device(pd, &ci, None)
            .map_err(|e| ReplayError::vk("vkCreateDevice", e))?;
        let props = instance.get_physical_device_properties(pd);
        let table =
            vkstream::DeviceTable::load(instance.fp_v1_0().get_device_proc_addr, device.handle());
        let state = DeviceState {
            captured,
            table,
            families,
            queue_counts: merged.iter().map(|m| (m.0, m.1.len() as u32)).collect(),
            memory_types: self.gpu.summary.memory_types.clone(),
            non_coherent_atom: props.limits.non_coherent_atom_size.max(1),
            queues: Vec::new(),
            own_pools: HashMap::new(),
            queue_family_of: HashMap::new(),
            device,
        };
        let raw = state.device.handle().as_raw();
        if let Some(key) = read_dispatch_key(raw) {
            self.dispatch_keys.insert(key, captured);
        }
        self.devices.insert(captured, state);
        self.bind(vk::ObjectType::DEVICE, captured, raw);
        Ok(())
    }

    /// `vkGetDeviceQueue[2]` with the family translated.
    pub fn get_queue(
        &mut self,
        device: u64,
        family: u32,
        index: u32,
        flags: vk::DeviceQueueCreateFlags,
        captured_queue: u64,
    ) -> Result<(), ReplayError> {
        let d = self.device(device)?;
        let rf = d.families.get(&family).copied().unwrap_or(family);
        let count = d.queue_counts.get(&rf).copied().unwrap_or(1).max(1);
        let info = vk::DeviceQueueInfo2::default()
            .queue_family_index(rf)
            .queue_index(index.min(count - 1))
            .flags(flags);
        // SAFETY: valid device; the family and index were created with it.
        let q = unsafe { d.device.get_device_queue2(&info) };
        if q == vk::Queue::null() {
            return Err(ReplayError::Other(format!(
                "vkGetDeviceQueue2 returned no queue for family {rf}"
            )));
        }
        let d = self.devices.get_mut(&device).expect("checked above");
        if !d.queues.contains(&q) {
            d.queues.push(q);
        }
        d.queue_family_of.insert(q.as_raw(), rf);
        self.bind(vk::ObjectType::QUEUE, captured_queue, q.as_raw());
        Ok(())
    }

    /// Captured queue family index -> replay family for a device.
    pub fn map_family(&self, device: u64, family: u32) -> u32 {
        if family == vk::QUEUE_FAMILY_IGNORED
            || family == vk::QUEUE_FAMILY_EXTERNAL
            || family == vk::QUEUE_FAMILY_FOREIGN_EXT
        {
            return family;
        }
        self.devices
            .get(&device)
            .and_then(|d| d.families.get(&family).copied())
            .unwrap_or(family)
    }

    pub fn destroy_device(&mut self, captured: u64) -> Result<(), ReplayError> {
        // Emulated swapchains and our own objects first.
        let chains: Vec<u64> = self
            .swapchains
            .iter()
            .filter(|(_, s)| s.device == captured)
            .map(|(k, _)| *k)
            .collect();
        for c in chains {
            self.destroy_swapchain(c);
        }
        let mems: Vec<u64> = self
            .memories
            .iter()
            .filter(|(_, m)| m.device == captured)
            .map(|(k, _)| *k)
            .collect();
        let pools: Vec<(u64, vk::QueryPool)> = self
            .live_pools
            .iter()
            .filter(|(_, (dev, _))| *dev == captured)
            .map(|(k, (_, p))| (*k, *p))
            .collect();
        if let Some(d) = self.devices.remove(&captured) {
            unsafe {
                let _ = d.device.device_wait_idle();
                if self.perf.locked.remove(&captured) {
                    if let Some(i) = &self.instance {
                        ash::khr::performance_query::Device::new(i, &d.device)
                            .release_profiling_lock();
                    }
                }
                // Pools the trace never destroyed (the app exited with them alive).
                for (c, p) in pools {
                    d.device.destroy_query_pool(p, None);
                    self.live_pools.remove(&c);
                }
                for m in &mems {
                    if let Some(ms) = self.memories.remove(m) {
                        if ms.replayed != vk::DeviceMemory::null() {
                            d.device.free_memory(ms.replayed, None);
                        }
                    }
                }
                for p in d.own_pools.values() {
                    d.device.destroy_command_pool(*p, None);
                }
                d.device.destroy_device(None);
            }
            self.dispatch_keys.retain(|_, v| *v != captured);
        }
        self.unbind(vk::ObjectType::DEVICE, captured);
        Ok(())
    }

    /// Destroys everything still alive (the trace may end without cleaning up).
    pub fn teardown(&mut self) {
        let devices: Vec<u64> = self.devices.keys().copied().collect();
        for d in devices {
            let _ = self.destroy_device(d);
        }
        if let Some(instance) = self.instance.take() {
            unsafe {
                if let Some((du, m)) = self.debug_utils.take() {
                    du.destroy_debug_utils_messenger(m, None);
                }
                instance.destroy_instance(None);
            }
        }
        self.handles.clear();
    }

    // ---- memory ------------------------------------------------------------------------------

    pub fn allocate_memory(
        &mut self,
        device: u64,
        captured: u64,
        size: u64,
        captured_type: u32,
        alloc_flags: Option<(vk::MemoryAllocateFlags, u32)>,
        dedicated: Option<(u64, u64)>,
    ) -> Result<(), ReplayError> {
        self.device(device)?;
        let captured_flags = match self.capture_device {
            Some(c) => c
                .memory_types
                .get(captured_type as usize)
                .map(|t| t.property_flags)
                .ok_or_else(|| {
                    ReplayError::Other(format!(
                        "memory type {captured_type} does not exist on the capture device"
                    ))
                })?,
            // No capture summary: assume the replay device's type of the same index.
            None => self
                .gpu
                .summary
                .memory_types
                .get(captured_type as usize)
                .map_or(0, |t| t.property_flags),
        };
        self.memories.insert(
            captured,
            MemState {
                device,
                size,
                captured_flags,
                replayed: vk::DeviceMemory::null(),
                type_index: u32::MAX,
                coherent: true,
                mapped: std::ptr::null_mut(),
                persistent: false,
                alloc_flags,
                dedicated,
            },
        );
        Ok(())
    }

    /// Makes the replay allocation of `captured` if not done yet, compatible with `type_bits` and
    /// at least `min_size` bytes.
    pub fn ensure_memory(
        &mut self,
        captured: u64,
        type_bits: u32,
        min_size: u64,
    ) -> Result<vk::DeviceMemory, ReplayError> {
        let host = self.host_memories.contains(&captured);
        let m = self
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?;
        if m.replayed != vk::DeviceMemory::null() {
            if m.type_index < 32 && type_bits & (1 << m.type_index) == 0 {
                return Err(ReplayError::Other(format!(
                    "memory 0x{captured:x} was allocated from replay type {} but a resource bound to it \
                     accepts only types {type_bits:#b}",
                    m.type_index
                )));
            }
            if min_size > m.size {
                return Err(ReplayError::Other(format!(
                    "memory 0x{captured:x} has {} bytes but the replay device needs {min_size} for a resource bound to it",
                    m.size
                )));
            }
            return Ok(m.replayed);
        }
        let d = self.device(m.device)?;
        let ti = mapping::pick_memory_type(m.captured_flags, &d.memory_types, type_bits, host)
            .ok_or_else(|| {
                ReplayError::NoGpu(format!(
                "no memory type of the replay GPU can stand in for capture memory 0x{captured:x} \
                 (flags {:?}, allowed types {type_bits:#b}{})",
                vk::MemoryPropertyFlags::from_raw(m.captured_flags),
                if host { ", host access needed" } else { "" }
            ))
            })?;
        let size = m.size.max(min_size);
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(ti);
        let mut flags_info = vk::MemoryAllocateFlagsInfo::default();
        if let Some((f, mask)) = m.alloc_flags {
            flags_info = flags_info.flags(f).device_mask(mask);
            info = info.push_next(&mut flags_info);
        }
        let mut ded = vk::MemoryDedicatedAllocateInfo::default();
        if let Some((buf, img)) = m.dedicated {
            let b = self.lookup(vk::ObjectType::BUFFER, buf)?;
            let i = self.lookup(vk::ObjectType::IMAGE, img)?;
            ded = ded
                .buffer(vk::Buffer::from_raw(b))
                .image(vk::Image::from_raw(i));
            info = info.push_next(&mut ded);
        }
        let d = self.device(m.device)?;
        // SAFETY: valid device and allocate info.
        let mem = unsafe { d.device.allocate_memory(&info, None) }.map_err(|e| {
            ReplayError::vk(format!("vkAllocateMemory of {size} bytes (type {ti})"), e)
        })?;
        let coherent = d.memory_types.get(ti as usize).is_some_and(|t| {
            t.property_flags & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0
        });
        let m = self.memories.get_mut(&captured).expect("checked above");
        m.replayed = mem;
        m.type_index = ti;
        m.size = size;
        m.coherent = coherent;
        self.handles.insert(
            (vk::ObjectType::DEVICE_MEMORY.as_raw(), captured),
            mem.as_raw(),
        );
        Ok(mem)
    }

    pub fn free_memory(&mut self, captured: u64) -> Result<(), ReplayError> {
        if let Some(m) = self.memories.remove(&captured) {
            if m.replayed != vk::DeviceMemory::null() {
                let d = self.device(m.device)?;
                // SAFETY: the memory belongs to this device and the trace frees it here.
                unsafe { d.device.free_memory(m.replayed, None) };
            }
        }
        self.unbind(vk::ObjectType::DEVICE_MEMORY, captured);
        Ok(())
    }

    /// Host pointer to the start of the replayed allocation (mapped on demand).
    fn map_whole(&mut self, captured: u64) -> Result<*mut u8, ReplayError> {
        self.ensure_memory(captured, u32::MAX, 0)?;
        let m = &self.memories[&captured];
        if !m.mapped.is_null() {
            return Ok(m.mapped);
        }
        let d = self.device(m.device)?;
        // SAFETY: memory from this device, host visible (ensured by the type choice for host-accessed memory).
        let p = unsafe {
            d.device
                .map_memory(m.replayed, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        }
        .map_err(|e| {
            ReplayError::vk(
                format!("vkMapMemory of replay memory for 0x{captured:x}"),
                e,
            )
        })?;
        let m = self.memories.get_mut(&captured).expect("exists");
        m.mapped = p as *mut u8;
        Ok(m.mapped)
    }

    fn unmap_if_transient(&mut self, captured: u64) -> Result<(), ReplayError> {
        let Some(m) = self.memories.get(&captured) else {
            return Ok(());
        };
        if m.persistent || m.mapped.is_null() {
            return Ok(());
        }
        let (mem, dev) = (m.replayed, m.device);
        let d = self.device(dev)?;
        // SAFETY: mapped above by us.
        unsafe { d.device.unmap_memory(mem) };
        self.memories.get_mut(&captured).expect("exists").mapped = std::ptr::null_mut();
        Ok(())
    }

    /// The capture mapped this memory: keep a replay mapping for as long.
    pub fn map_memory(&mut self, captured: u64) -> Result<(), ReplayError> {
        self.map_whole(captured)?;
        self.memories.get_mut(&captured).expect("mapped").persistent = true;
        Ok(())
    }

    pub fn unmap_memory(&mut self, captured: u64) -> Result<(), ReplayError> {
        if let Some(m) = self.memories.get_mut(&captured) {
            m.persistent = false;
        }
        self.unmap_if_transient(captured)
    }

    /// Applies a `MemoryWrite`: the bytes the app wrote at `offset` of its mapping.
    pub fn write_memory(
        &mut self,
        captured: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ReplayError> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| ReplayError::Other("memory write range overflows".into()))?;
        let size = self
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?
            .size;
        if end > size {
            return Err(ReplayError::Other(format!(
                "memory write of {} bytes at offset {offset} is outside memory 0x{captured:x} of {size} bytes",
                data.len()
            )));
        }
        self.ensure_memory(captured, u32::MAX, 0)?;
        let m = &self.memories[&captured];
        let host_visible = self
            .device(m.device)?
            .memory_types
            .get(m.type_index as usize)
            .is_some_and(|t| {
                t.property_flags & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() != 0
            });
        // `QUARRY_REPLAY_UPLOAD=gpu` takes the GPU path for every write (tests it on GPUs whose
        // memory is all host-visible).
        let forced = std::env::var("QUARRY_REPLAY_UPLOAD").is_ok_and(|v| v == "gpu");
        if !host_visible || forced {
            // Contents a trimmed capture's snapshot read back from memory the host could not map.
            return self.upload(captured, offset, data);
        }
        let p = self.map_whole(captured)?;
        // SAFETY: [offset, end) lies inside the mapped allocation (checked above).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.add(offset as usize), data.len()) };
        let m = &self.memories[&captured];
        if !m.coherent {
            let d = self.device(m.device)?;
            let atom = d.non_coherent_atom;
            let start = offset / atom * atom;
            let range_end = end.div_ceil(atom).saturating_mul(atom);
            let size = if range_end >= m.size {
                vk::WHOLE_SIZE
            } else {
                range_end - start
            };
            let range = vk::MappedMemoryRange::default()
                .memory(m.replayed)
                .offset(start)
                .size(size);
            // SAFETY: the range is inside the mapped allocation.
            unsafe { d.device.flush_mapped_memory_ranges(&[range]) }
                .map_err(|e| ReplayError::vk("vkFlushMappedMemoryRanges", e))?;
        }
        self.unmap_if_transient(captured)
    }

    /// Writes `data` at `offset` of a replay allocation the host cannot map: a host-visible staging
    /// buffer copied on the GPU into a transfer buffer bound over the whole allocation, waited on.
    fn upload(&mut self, captured: u64, offset: u64, data: &[u8]) -> Result<(), ReplayError> {
        let m = &self.memories[&captured];
        let (mem, size, type_index) = (m.replayed, m.size, m.type_index);
        let d = self.device(m.device)?;
        let Some((queue, family)) = d
            .queues
            .iter()
            .find_map(|q| Some((*q, *d.queue_family_of.get(&q.as_raw())?)))
        else {
            return Err(ReplayError::Other(format!(
                "memory 0x{captured:x}: its contents need a GPU upload, and the trace has retrieved no queue yet"
            )));
        };
        let dev = &d.device;
        let vkerr = |what: &'static str| move |e| ReplayError::vk(what, e);
        // Everything made here is destroyed on every path out.
        struct Made<'a> {
            dev: &'a ash::Device,
            buffers: Vec<vk::Buffer>,
            memory: vk::DeviceMemory,
            pool: vk::CommandPool,
        }
        impl Drop for Made<'_> {
            fn drop(&mut self) {
                // SAFETY: objects of this device, idle (the queue was waited on) or never used.
                unsafe {
                    for b in &self.buffers {
                        self.dev.destroy_buffer(*b, None);
                    }
                    if self.memory != vk::DeviceMemory::null() {
                        self.dev.free_memory(self.memory, None);
                    }
                    if self.pool != vk::CommandPool::null() {
                        self.dev.destroy_command_pool(self.pool, None);
                    }
                }
            }
        }
        let mut made = Made {
            dev,
            buffers: Vec::new(),
            memory: vk::DeviceMemory::null(),
            pool: vk::CommandPool::null(),
        };
        // SAFETY: plain object creation and a waited-on submission on this device.
        unsafe {
            let staging = dev
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(data.len().max(1) as u64)
                        .usage(vk::BufferUsageFlags::TRANSFER_SRC),
                    None,
                )
                .map_err(vkerr("vkCreateBuffer (upload staging)"))?;
            made.buffers.push(staging);
            let req = dev.get_buffer_memory_requirements(staging);
            let host = (vk::MemoryPropertyFlags::HOST_VISIBLE
                | vk::MemoryPropertyFlags::HOST_COHERENT)
                .as_raw();
            let ti = (0..d.memory_types.len())
                .find(|&i| {
                    req.memory_type_bits & (1 << i) != 0
                        && d.memory_types[i].property_flags & host == host
                })
                .ok_or_else(|| {
                    ReplayError::Other("no host-visible memory type for an upload".into())
                })?;
            made.memory = dev
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(ti as u32),
                    None,
                )
                .map_err(vkerr("vkAllocateMemory (upload staging)"))?;
            dev.bind_buffer_memory(staging, made.memory, 0)
                .map_err(vkerr("vkBindBufferMemory (upload staging)"))?;
            let p = dev
                .map_memory(made.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .map_err(vkerr("vkMapMemory (upload staging)"))?;
            std::ptr::copy_nonoverlapping(data.as_ptr(), p as *mut u8, data.len());
            let alias = dev
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(size)
                        .usage(vk::BufferUsageFlags::TRANSFER_DST),
                    None,
                )
                .map_err(vkerr("vkCreateBuffer (upload target)"))?;
            made.buffers.push(alias);
            let areq = dev.get_buffer_memory_requirements(alias);
            if areq.memory_type_bits & (1 << type_index) == 0 || areq.size > size {
                return Err(ReplayError::Other(format!(
                    "memory 0x{captured:x}: a transfer buffer cannot be bound over its replay allocation (type {type_index})"
                )));
            }
            dev.bind_buffer_memory(alias, mem, 0)
                .map_err(vkerr("vkBindBufferMemory (upload target)"))?;
            made.pool = dev
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default().queue_family_index(family),
                    None,
                )
                .map_err(vkerr("vkCreateCommandPool (upload)"))?;
            let cb = dev
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(made.pool)
                        .command_buffer_count(1),
                )
                .map_err(vkerr("vkAllocateCommandBuffers (upload)"))?[0];
            dev.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(vkerr("vkBeginCommandBuffer (upload)"))?;
            dev.cmd_copy_buffer(
                cb,
                staging,
                alias,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: offset,
                    size: data.len() as u64,
                }],
            );
            // Later work of any kind reads what was written.
            dev.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::DependencyFlags::empty(),
                &[vk::MemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                    .dst_access_mask(vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE)],
                &[],
                &[],
            );
            dev.end_command_buffer(cb)
                .map_err(vkerr("vkEndCommandBuffer (upload)"))?;
            let cbs = [cb];
            dev.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                vk::Fence::null(),
            )
            .map_err(vkerr("vkQueueSubmit (upload)"))?;
            dev.queue_wait_idle(queue)
                .map_err(vkerr("vkQueueWaitIdle (upload)"))?;
        }
        drop(made);
        Ok(())
    }

    /// Reads `len` bytes at `offset` of a captured allocation from its replay counterpart.
    pub fn read_memory(
        &mut self,
        captured: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, ReplayError> {
        let size = self
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?
            .size;
        let end = offset.saturating_add(len);
        if end > size {
            return Err(ReplayError::Other(format!(
                "read of {len} bytes at {offset} is outside memory 0x{captured:x} of {size} bytes"
            )));
        }
        let p = self.map_whole(captured)?;
        let m = &self.memories[&captured];
        if !m.coherent {
            let d = self.device(m.device)?;
            let range = vk::MappedMemoryRange::default()
                .memory(m.replayed)
                .offset(0)
                .size(vk::WHOLE_SIZE);
            // SAFETY: whole mapped allocation.
            unsafe { d.device.invalidate_mapped_memory_ranges(&[range]) }
                .map_err(|e| ReplayError::vk("vkInvalidateMappedMemoryRanges", e))?;
        }
        let mut out = vec![0u8; len as usize];
        // SAFETY: inside the mapped allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(p.add(offset as usize), out.as_mut_ptr(), len as usize)
        };
        self.unmap_if_transient(captured)?;
        Ok(out)
    }

    /// Before a resource is bound: make its memory with the replay device's requirements.
    pub fn prepare_bind(
        &mut self,
        memory: u64,
        requirements: vk::MemoryRequirements,
        offset: u64,
    ) -> Result<(), ReplayError> {
        if requirements.alignment > 1 && !offset.is_multiple_of(requirements.alignment) {
            return Err(ReplayError::Other(format!(
                "the capture binds at offset {offset}, not a multiple of the replay device's alignment {}",
                requirements.alignment
            )));
        }
        self.ensure_memory(
            memory,
            requirements.memory_type_bits,
            offset.saturating_add(requirements.size),
        )?;
        Ok(())
    }

    // ---- emulated swapchains -------------------------------------------------------------------

    pub fn create_swapchain(
        &mut self,
        device: u64,
        captured: u64,
        sc: Swapchain,
    ) -> Result<(), ReplayError> {
        self.device(device)?;
        let fake = self.fake_handle();
        let mut sc = sc;
        if self.window {
            // Blitted into the window's swapchain at each present.
            sc.usage |= vk::ImageUsageFlags::TRANSFER_SRC;
        }
        self.swapchains.insert(captured, sc);
        self.bind(vk::ObjectType::SWAPCHAIN_KHR, captured, fake);
        Ok(())
    }

    /// `vkGetSwapchainImagesKHR` with the image array: make as many offscreen images.
    pub fn swapchain_images(&mut self, captured: u64, images: &[u64]) -> Result<(), ReplayError> {
        let sc = self
            .swapchains
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::SWAPCHAIN_KHR,
                handle: captured,
            })?;
        if sc.images.len() < images.len() {
            let d = self.device(sc.device)?;
            let mut made = Vec::new();
            let mut fmt_list =
                vk::ImageFormatListCreateInfo::default().view_formats(&sc.view_formats);
            for _ in sc.images.len()..images.len() {
                let mut ci = vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(sc.format)
                    .extent(vk::Extent3D {
                        width: sc.extent.width.max(1),
                        height: sc.extent.height.max(1),
                        depth: 1,
                    })
                    .mip_levels(1)
                    .array_layers(sc.layers.max(1))
                    .samples(vk::SampleCountFlags::TYPE_1)
                    .tiling(vk::ImageTiling::OPTIMAL)
                    .usage(sc.usage)
                    .flags(sc.flags)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE)
                    .initial_layout(vk::ImageLayout::UNDEFINED);
                if !sc.view_formats.is_empty() {
                    ci = ci.push_next(&mut fmt_list);
                }
                // SAFETY: valid device and create info.
                unsafe {
                    let img = d.device.create_image(&ci, None).map_err(|e| {
                        ReplayError::vk("vkCreateImage for an emulated swapchain image", e)
                    })?;
                    let req = d.device.get_image_memory_requirements(img);
                    let ti = mapping::pick_memory_type(
                        vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw(),
                        &d.memory_types,
                        req.memory_type_bits,
                        false,
                    )
                    .ok_or_else(|| {
                        ReplayError::Other("no memory type for an emulated swapchain image".into())
                    })?;
                    let ai = vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(ti);
                    let mem = d.device.allocate_memory(&ai, None).map_err(|e| {
                        ReplayError::vk("vkAllocateMemory for an emulated swapchain image", e)
                    })?;
                    d.device.bind_image_memory(img, mem, 0).map_err(|e| {
                        ReplayError::vk("vkBindImageMemory for an emulated swapchain image", e)
                    })?;
                    made.push((img, mem));
                }
            }
            self.swapchains
                .get_mut(&captured)
                .expect("exists")
                .images
                .extend(made);
        }
        let bound: Vec<u64> = self.swapchains[&captured]
            .images
            .iter()
            .map(|(i, _)| i.as_raw())
            .collect();
        for (c, r) in images.iter().zip(bound) {
            self.bind(vk::ObjectType::IMAGE, *c, r);
        }
        Ok(())
    }

    pub fn destroy_swapchain(&mut self, captured: u64) {
        if let Some(mut sc) = self.swapchains.remove(&captured) {
            if let Some(d) = self.devices.get(&sc.device) {
                unsafe {
                    let _ = d.device.device_wait_idle();
                    if let Some(w) = sc.window.as_mut() {
                        w.destroy(&d.device);
                    }
                    for (img, mem) in sc.images {
                        d.device.destroy_image(img, None);
                        d.device.free_memory(mem, None);
                    }
                }
            }
        }
        self.unbind(vk::ObjectType::SWAPCHAIN_KHR, captured);
    }

    /// `--window`: shows image `index` of emulated swapchain `captured` in its window (opened on
    /// the first present) once `waits` signal.
    pub fn present_window(
        &mut self,
        queue: vk::Queue,
        captured: u64,
        index: u32,
        waits: &[vk::Semaphore],
    ) -> Result<(), ReplayError> {
        let instance = self.instance()?.clone();
        let (entry, pd) = (self.entry, self.pd);
        let sc = self
            .swapchains
            .get_mut(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::SWAPCHAIN_KHR,
                handle: captured,
            })?;
        let d = self
            .devices
            .get(&sc.device)
            .ok_or_else(|| ReplayError::Other("the swapchain's device was destroyed".into()))?;
        let Some(&(image, _)) = sc.images.get(index as usize) else {
            return Err(ReplayError::Other(format!(
                "present of swapchain image {index}, which vkGetSwapchainImagesKHR never returned"
            )));
        };
        // SAFETY: instance, physical device, device, image and queue are the session's own.
        unsafe {
            if sc.window.is_none() {
                let family = d.queue_family_of.get(&queue.as_raw()).copied().unwrap_or(0);
                sc.window = Some(Box::new(crate::window::Window::open(
                    entry,
                    &instance,
                    pd,
                    &d.device,
                    family,
                    sc.extent,
                    "quarry replay",
                )?));
            }
            let w = sc.window.as_mut().expect("opened above");
            w.present(&d.device, queue, image, sc.extent, waits)?;
        }
        self.presented += 1;
        Ok(())
    }

    /// An empty submission on a queue of `device`: how emulated acquire signals and emulated
    /// present waits.
    pub fn empty_submit(
        &self,
        device: u64,
        queue: Option<vk::Queue>,
        wait: &[vk::Semaphore],
        signal: &[vk::Semaphore],
        fence: vk::Fence,
    ) -> Result<(), ReplayError> {
        let d = self.device(device)?;
        let q = match queue.or_else(|| d.queues.first().copied()) {
            Some(q) => q,
            None => {
                let fam = d.queue_counts.keys().min().copied().unwrap_or(0);
                // SAFETY: a family the device was created with.
                unsafe { d.device.get_device_queue(fam, 0) }
            }
        };
        let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; wait.len()];
        let si = vk::SubmitInfo::default()
            .wait_semaphores(wait)
            .wait_dst_stage_mask(&stages)
            .signal_semaphores(signal);
        // SAFETY: handles belong to this device.
        unsafe { d.device.queue_submit(q, &[si], fence) }
            .map_err(|e| ReplayError::vk("vkQueueSubmit (emulated swapchain)", e))
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

/// Instance extensions that need a window system; replay emulates surfaces instead.
/// Device extensions a replay can do without: their commands only annotate, describe or tune
/// (markers, checkpoints, HDR metadata, budgets, present timing, pipeline statistics for tools),
/// so skipping them changes no query result and no rendered image.
pub const SAFE_TO_DROP: &[&str] = &[
    "VK_EXT_debug_marker",
    "VK_NV_device_diagnostic_checkpoints",
    "VK_NV_device_diagnostics_config",
    "VK_AMD_shader_info",
    "VK_KHR_pipeline_executable_properties",
    "VK_EXT_tooling_info",
    "VK_EXT_device_fault",
    "VK_EXT_calibrated_timestamps",
    "VK_KHR_calibrated_timestamps",
    "VK_EXT_hdr_metadata",
    "VK_KHR_present_id",
    "VK_KHR_present_wait",
    "VK_GOOGLE_display_timing",
    "VK_KHR_incremental_present",
];

pub fn is_window_system_extension(name: &str) -> bool {
    matches!(
        name,
        "VK_KHR_xlib_surface"
            | "VK_KHR_xcb_surface"
            | "VK_KHR_wayland_surface"
            | "VK_KHR_win32_surface"
            | "VK_KHR_android_surface"
            | "VK_EXT_metal_surface"
            | "VK_MVK_macos_surface"
            | "VK_MVK_ios_surface"
            | "VK_KHR_display"
            | "VK_EXT_direct_mode_display"
            | "VK_EXT_acquire_xlib_display"
            | "VK_EXT_acquire_drm_display"
            | "VK_EXT_headless_surface"
            | "VK_EXT_directfb_surface"
            | "VK_QNX_screen_surface"
    )
}
