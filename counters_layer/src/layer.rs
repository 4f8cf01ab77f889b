//! The intercepts. A performance query pool is emulated by up to three internal pools on the real
//! device: timestamps (whose handle doubles as the app's pool handle, so the handle is real and unique),
//! pipeline statistics and precise occlusion. vkCmdBeginQuery/vkCmdEndQuery on a performance pool record
//! the internal queries, resetting them first in the same command buffer so that one recording can be
//! submitted once per pass. Every submit measures every counter of the query; `counterPassIndex` decides
//! which pass the submit counts as, and a query becomes available only when each of its passes has
//! been submitted since its reset (VUID-vkGetQueryPoolResults-queryType-03231). Results come through
//! vkGetQueryPoolResults (computed on the host) and vkCmdCopyQueryPoolResults (computed by a compute
//! dispatch with the same integer arithmetic; see `copy`), so allowCommandBufferQueryCopies is VK_TRUE.
//!
//! Profiling lock rule enforced: VUID-vkCmdBeginQuery-queryPool-03223 (the lock must have been held
//! before vkBeginCommandBuffer) and VUID-vkQueueSubmit-pCommandBuffers-03220 (held continuously while
//! recording). A violation is reported on stderr with the VUID; vkEndCommandBuffer and then
//! vkQueueSubmit return VK_ERROR_UNKNOWN ("the application has provided invalid input").

mod copy;
use crate::counters::{self, Capabilities, PassPlan, Source, CATALOG};
use crate::loader;
use ash::vk;
use ash::vk::Handle;
use layer_support::entry::find_in_chain_mut;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

type Void = vk::PFN_vkVoidFunction;

/// Render pass instances measured per performance query (two timestamps each); later ones in the same
/// query are not counted, and the layer says so once.
const RP_SLOTS: u32 = 32;
const PERF_EXT: &CStr = c"VK_KHR_performance_query";

// ---- reporting ------------------------------------------------------------------------------------

fn report(message: &str) {
    eprintln!("{}: {message}", crate::LAYER_NAME);
}

fn report_once(key: &str, message: &str) {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|k| k == key) {
        seen.push(key.to_string());
        report(message);
    }
}

/// Runs an intercept body; a panic is reported and turned into `fallback` instead of unwinding into C.
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        report("internal error (panic) in an intercept; the call was not completed");
        fallback
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- dispatch tables ------------------------------------------------------------------------------

macro_rules! fn_table {
    ($name:ident { $($field:ident : $pfn:ty = $sym:literal,)* }) => {
        #[derive(Clone, Copy)]
        struct $name { $($field: Option<$pfn>,)* }
        impl $name {
            unsafe fn load(mut get: impl FnMut(&CStr) -> Void) -> Self {
                Self { $($field: get($sym).map(|f| std::mem::transmute::<unsafe extern "system" fn(), $pfn>(f)),)* }
            }
        }
    };
}

fn_table!(InstanceFns {
    destroy_instance: vk::PFN_vkDestroyInstance = c"vkDestroyInstance",
    enumerate_device_extension_properties: vk::PFN_vkEnumerateDeviceExtensionProperties =
        c"vkEnumerateDeviceExtensionProperties",
    get_features: vk::PFN_vkGetPhysicalDeviceFeatures = c"vkGetPhysicalDeviceFeatures",
    get_features2: vk::PFN_vkGetPhysicalDeviceFeatures2 = c"vkGetPhysicalDeviceFeatures2",
    get_features2_khr: vk::PFN_vkGetPhysicalDeviceFeatures2 = c"vkGetPhysicalDeviceFeatures2KHR",
    get_properties: vk::PFN_vkGetPhysicalDeviceProperties = c"vkGetPhysicalDeviceProperties",
    get_properties2: vk::PFN_vkGetPhysicalDeviceProperties2 = c"vkGetPhysicalDeviceProperties2",
    get_properties2_khr: vk::PFN_vkGetPhysicalDeviceProperties2 =
        c"vkGetPhysicalDeviceProperties2KHR",
    get_queue_family_properties: vk::PFN_vkGetPhysicalDeviceQueueFamilyProperties =
        c"vkGetPhysicalDeviceQueueFamilyProperties",
    get_memory_properties: vk::PFN_vkGetPhysicalDeviceMemoryProperties =
        c"vkGetPhysicalDeviceMemoryProperties",
});

fn_table!(DeviceFns {
    destroy_device: vk::PFN_vkDestroyDevice = c"vkDestroyDevice",
    create_query_pool: vk::PFN_vkCreateQueryPool = c"vkCreateQueryPool",
    destroy_query_pool: vk::PFN_vkDestroyQueryPool = c"vkDestroyQueryPool",
    reset_query_pool: vk::PFN_vkResetQueryPool = c"vkResetQueryPool",
    reset_query_pool_ext: vk::PFN_vkResetQueryPool = c"vkResetQueryPoolEXT",
    get_query_pool_results: vk::PFN_vkGetQueryPoolResults = c"vkGetQueryPoolResults",
    cmd_reset_query_pool: vk::PFN_vkCmdResetQueryPool = c"vkCmdResetQueryPool",
    cmd_begin_query: vk::PFN_vkCmdBeginQuery = c"vkCmdBeginQuery",
    cmd_end_query: vk::PFN_vkCmdEndQuery = c"vkCmdEndQuery",
    cmd_begin_query_indexed: vk::PFN_vkCmdBeginQueryIndexedEXT = c"vkCmdBeginQueryIndexedEXT",
    cmd_end_query_indexed: vk::PFN_vkCmdEndQueryIndexedEXT = c"vkCmdEndQueryIndexedEXT",
    cmd_copy_query_pool_results: vk::PFN_vkCmdCopyQueryPoolResults = c"vkCmdCopyQueryPoolResults",
    cmd_write_timestamp: vk::PFN_vkCmdWriteTimestamp = c"vkCmdWriteTimestamp",
    begin_command_buffer: vk::PFN_vkBeginCommandBuffer = c"vkBeginCommandBuffer",
    end_command_buffer: vk::PFN_vkEndCommandBuffer = c"vkEndCommandBuffer",
    free_command_buffers: vk::PFN_vkFreeCommandBuffers = c"vkFreeCommandBuffers",
    cmd_execute_commands: vk::PFN_vkCmdExecuteCommands = c"vkCmdExecuteCommands",
    cmd_begin_render_pass: vk::PFN_vkCmdBeginRenderPass = c"vkCmdBeginRenderPass",
    cmd_begin_render_pass2: vk::PFN_vkCmdBeginRenderPass2 = c"vkCmdBeginRenderPass2",
    cmd_begin_render_pass2_khr: vk::PFN_vkCmdBeginRenderPass2 = c"vkCmdBeginRenderPass2KHR",
    cmd_end_render_pass: vk::PFN_vkCmdEndRenderPass = c"vkCmdEndRenderPass",
    cmd_end_render_pass2: vk::PFN_vkCmdEndRenderPass2 = c"vkCmdEndRenderPass2",
    cmd_end_render_pass2_khr: vk::PFN_vkCmdEndRenderPass2 = c"vkCmdEndRenderPass2KHR",
    cmd_begin_rendering: vk::PFN_vkCmdBeginRendering = c"vkCmdBeginRendering",
    cmd_begin_rendering_khr: vk::PFN_vkCmdBeginRendering = c"vkCmdBeginRenderingKHR",
    cmd_end_rendering: vk::PFN_vkCmdEndRendering = c"vkCmdEndRendering",
    cmd_end_rendering_khr: vk::PFN_vkCmdEndRendering = c"vkCmdEndRenderingKHR",
    queue_submit: vk::PFN_vkQueueSubmit = c"vkQueueSubmit",
    queue_submit2: vk::PFN_vkQueueSubmit2 = c"vkQueueSubmit2",
    queue_submit2_khr: vk::PFN_vkQueueSubmit2 = c"vkQueueSubmit2KHR",
    // The copy path (copy.rs).
    create_buffer: vk::PFN_vkCreateBuffer = c"vkCreateBuffer",
    destroy_buffer: vk::PFN_vkDestroyBuffer = c"vkDestroyBuffer",
    get_buffer_memory_requirements: vk::PFN_vkGetBufferMemoryRequirements =
        c"vkGetBufferMemoryRequirements",
    allocate_memory: vk::PFN_vkAllocateMemory = c"vkAllocateMemory",
    free_memory: vk::PFN_vkFreeMemory = c"vkFreeMemory",
    bind_buffer_memory: vk::PFN_vkBindBufferMemory = c"vkBindBufferMemory",
    map_memory: vk::PFN_vkMapMemory = c"vkMapMemory",
    create_shader_module: vk::PFN_vkCreateShaderModule = c"vkCreateShaderModule",
    destroy_shader_module: vk::PFN_vkDestroyShaderModule = c"vkDestroyShaderModule",
    create_descriptor_set_layout: vk::PFN_vkCreateDescriptorSetLayout =
        c"vkCreateDescriptorSetLayout",
    destroy_descriptor_set_layout: vk::PFN_vkDestroyDescriptorSetLayout =
        c"vkDestroyDescriptorSetLayout",
    create_pipeline_layout: vk::PFN_vkCreatePipelineLayout = c"vkCreatePipelineLayout",
    destroy_pipeline_layout: vk::PFN_vkDestroyPipelineLayout = c"vkDestroyPipelineLayout",
    create_compute_pipelines: vk::PFN_vkCreateComputePipelines = c"vkCreateComputePipelines",
    destroy_pipeline: vk::PFN_vkDestroyPipeline = c"vkDestroyPipeline",
    create_descriptor_pool: vk::PFN_vkCreateDescriptorPool = c"vkCreateDescriptorPool",
    destroy_descriptor_pool: vk::PFN_vkDestroyDescriptorPool = c"vkDestroyDescriptorPool",
    allocate_descriptor_sets: vk::PFN_vkAllocateDescriptorSets = c"vkAllocateDescriptorSets",
    update_descriptor_sets: vk::PFN_vkUpdateDescriptorSets = c"vkUpdateDescriptorSets",
    cmd_pipeline_barrier: vk::PFN_vkCmdPipelineBarrier = c"vkCmdPipelineBarrier",
    cmd_bind_pipeline: vk::PFN_vkCmdBindPipeline = c"vkCmdBindPipeline",
    cmd_bind_descriptor_sets: vk::PFN_vkCmdBindDescriptorSets = c"vkCmdBindDescriptorSets",
    cmd_push_constants: vk::PFN_vkCmdPushConstants = c"vkCmdPushConstants",
    cmd_dispatch: vk::PFN_vkCmdDispatch = c"vkCmdDispatch",
    cmd_copy_buffer: vk::PFN_vkCmdCopyBuffer = c"vkCmdCopyBuffer",
    cmd_fill_buffer: vk::PFN_vkCmdFillBuffer = c"vkCmdFillBuffer",
});

// ---- instances and devices ------------------------------------------------------------------------

struct Instance {
    handle: vk::Instance,
    gipa: vk::PFN_vkGetInstanceProcAddr,
    f: InstanceFns,
}

/// One emulated query: which passes were submitted since its reset, and how many render passes the
/// last recording measured.
#[derive(Clone, Copy, Default)]
struct QueryState {
    passes_submitted: u64,
    render_passes: u32,
}

struct PerfPool {
    /// Catalog index of each counter, in the app's `pCounterIndices` order (the result order).
    counters: Vec<usize>,
    family: u32,
    plan: PassPlan,
    count: u32,
    /// Timestamp pool; also the handle the app holds.
    ts: vk::QueryPool,
    /// Timestamps per query: begin, end, then a pair per measured render pass.
    ts_slots: u32,
    durations: bool,
    render_pass_duration: bool,
    stats: Option<(vk::QueryPool, vk::QueryPipelineStatisticFlags)>,
    occlusion: Option<vk::QueryPool>,
    queries: Vec<QueryState>,
    /// The layer's buffer for vkCmdCopyQueryPoolResults (None: copies are refused with a message).
    copy: Option<copy::PoolCopy>,
}

impl PerfPool {
    fn all_passes(&self) -> u64 {
        if self.plan.passes >= 64 {
            u64::MAX
        } else {
            (1u64 << self.plan.passes) - 1
        }
    }
}

#[derive(Clone, Copy)]
enum Op {
    Reset {
        pool: u64,
        first: u32,
        count: u32,
    },
    Query {
        pool: u64,
        query: u32,
        render_passes: u32,
    },
    /// vkCmdCopyQueryPoolResults: checked against the passes submitted when it is submitted.
    Copy {
        pool: u64,
        first: u32,
        count: u32,
    },
}

#[derive(Clone, Copy)]
struct Active {
    pool: u64,
    query: u32,
    render_passes: u32,
    /// A render pass begun inside the query got a begin timestamp.
    rp_open: bool,
}

#[derive(Default)]
struct CbState {
    /// Profiling-lock generation at vkBeginCommandBuffer, if the lock was held then.
    lock_at_begin: Option<u64>,
    active: Option<Active>,
    ops: Vec<Op>,
    /// The first broken profiling-lock rule, with its VUID.
    violation: Option<String>,
    /// The app's compute pipeline, descriptor sets and push constants, restored after a copy's dispatch.
    bound: copy::Bound,
}

#[derive(Default)]
struct DevState {
    lock_holders: u32,
    /// Bumped each time the lock is fully released, so "held continuously" can be checked.
    lock_generation: u64,
    pools: HashMap<u64, PerfPool>,
    cbs: HashMap<u64, CbState>,
}

impl DevState {
    fn lock_generation_if_held(&self) -> Option<u64> {
        (self.lock_holders > 0).then_some(self.lock_generation)
    }
}

struct Device {
    handle: vk::Device,
    gdpa: vk::PFN_vkGetDeviceProcAddr,
    /// The app enabled VK_KHR_performance_query; otherwise every call passes straight through.
    emulate: bool,
    families: Vec<Capabilities>,
    valid_bits: Vec<u32>,
    period: f32,
    per_pass: u32,
    f: DeviceFns,
    /// The compute pipeline of the copy path; only for devices that emulate, None if it failed.
    copier: Option<copy::Copier>,
    mem_props: vk::PhysicalDeviceMemoryProperties,
    st: Mutex<DevState>,
}

// SAFETY: the handles are plain integers; mutable state is behind the mutex.
unsafe impl Send for Instance {}
unsafe impl Sync for Instance {}
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

fn instances() -> &'static RwLock<HashMap<usize, Arc<Instance>>> {
    static M: OnceLock<RwLock<HashMap<usize, Arc<Instance>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

fn devices() -> &'static RwLock<HashMap<usize, Arc<Device>>> {
    static M: OnceLock<RwLock<HashMap<usize, Arc<Device>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// The instance owning a VkInstance or VkPhysicalDevice.
fn instance_of(handle: u64) -> Option<Arc<Instance>> {
    // SAFETY: the loader only hands out live dispatchable handles.
    let key = unsafe { loader::dispatch_key(handle) };
    instances()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned()
}

/// The device owning a VkDevice, VkQueue or VkCommandBuffer.
fn device_of(handle: u64) -> Option<Arc<Device>> {
    // SAFETY: as in `instance_of`.
    let key = unsafe { loader::dispatch_key(handle) };
    devices()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned()
}

/// The counters a family lists: those it can measure, less the ones named in
/// `QUARRY_COUNTERS_HIDE` (comma-separated names), which lets tests act out a GPU lacking some.
fn visible_counters(caps: &counters::Capabilities) -> Vec<usize> {
    static HIDE: OnceLock<Vec<String>> = OnceLock::new();
    let hide = HIDE.get_or_init(|| {
        std::env::var(crate::HIDE_ENV)
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    counters::family_counters(caps)
        .into_iter()
        .filter(|&i| !hide.iter().any(|h| h == counters::CATALOG[i].name))
        .collect()
}

fn per_pass() -> Result<u32, String> {
    static P: OnceLock<Result<u32, String>> = OnceLock::new();
    P.get_or_init(|| {
        let v = std::env::var(crate::PER_PASS_ENV).ok();
        counters::per_pass_from(v.as_deref())
    })
    .clone()
}

// ---- proc addr ------------------------------------------------------------------------------------

macro_rules! entry {
    ($f:expr) => {
        Some(std::mem::transmute::<*const (), unsafe extern "system" fn()>($f as *const ()))
    };
}

/// Device-level intercepts. `ours` are the functions the layer provides even when the driver has none.
unsafe fn device_intercept(name: &[u8]) -> Option<(Void, bool)> {
    let e: Void = match name {
        b"vkGetDeviceProcAddr" => entry!(get_device_proc_addr),
        b"vkDestroyDevice" => entry!(destroy_device),
        b"vkAcquireProfilingLockKHR" => return Some((entry!(acquire_profiling_lock), true)),
        b"vkReleaseProfilingLockKHR" => return Some((entry!(release_profiling_lock), true)),
        b"vkCreateQueryPool" => entry!(create_query_pool),
        b"vkDestroyQueryPool" => entry!(destroy_query_pool),
        b"vkResetQueryPool" => entry!(reset_query_pool),
        b"vkResetQueryPoolEXT" => entry!(reset_query_pool_ext),
        b"vkGetQueryPoolResults" => entry!(get_query_pool_results),
        b"vkCmdResetQueryPool" => entry!(cmd_reset_query_pool),
        b"vkCmdBeginQuery" => entry!(cmd_begin_query),
        b"vkCmdEndQuery" => entry!(cmd_end_query),
        b"vkCmdBeginQueryIndexedEXT" => entry!(cmd_begin_query_indexed),
        b"vkCmdEndQueryIndexedEXT" => entry!(cmd_end_query_indexed),
        b"vkCmdCopyQueryPoolResults" => entry!(cmd_copy_query_pool_results),
        b"vkCmdWriteTimestamp" => entry!(cmd_write_timestamp),
        b"vkBeginCommandBuffer" => entry!(begin_command_buffer),
        b"vkEndCommandBuffer" => entry!(end_command_buffer),
        b"vkFreeCommandBuffers" => entry!(free_command_buffers),
        b"vkCmdExecuteCommands" => entry!(cmd_execute_commands),
        b"vkCmdBeginRenderPass" => entry!(cmd_begin_render_pass),
        b"vkCmdBeginRenderPass2" => entry!(cmd_begin_render_pass2),
        b"vkCmdBeginRenderPass2KHR" => entry!(cmd_begin_render_pass2_khr),
        b"vkCmdEndRenderPass" => entry!(cmd_end_render_pass),
        b"vkCmdEndRenderPass2" => entry!(cmd_end_render_pass2),
        b"vkCmdEndRenderPass2KHR" => entry!(cmd_end_render_pass2_khr),
        b"vkCmdBeginRendering" => entry!(cmd_begin_rendering),
        b"vkCmdBeginRenderingKHR" => entry!(cmd_begin_rendering_khr),
        b"vkCmdEndRendering" => entry!(cmd_end_rendering),
        b"vkCmdEndRenderingKHR" => entry!(cmd_end_rendering_khr),
        b"vkQueueSubmit" => entry!(queue_submit),
        b"vkQueueSubmit2" => entry!(queue_submit2),
        b"vkQueueSubmit2KHR" => entry!(queue_submit2_khr),
        b"vkCmdBindPipeline" => entry!(copy::cmd_bind_pipeline),
        b"vkCmdBindDescriptorSets" => entry!(copy::cmd_bind_descriptor_sets),
        b"vkCmdPushConstants" => entry!(copy::cmd_push_constants),
        _ => return None,
    };
    Some((e, false))
}

unsafe fn instance_intercept(name: &[u8]) -> Option<(Void, bool)> {
    let e: Void = match name {
        b"vkGetInstanceProcAddr" => entry!(get_instance_proc_addr),
        b"vkCreateInstance" => entry!(create_instance),
        b"vkDestroyInstance" => entry!(destroy_instance),
        b"vkCreateDevice" => entry!(create_device),
        b"vkEnumerateDeviceExtensionProperties" => entry!(enumerate_device_extension_properties),
        b"vkGetPhysicalDeviceFeatures2" => entry!(get_features2),
        b"vkGetPhysicalDeviceFeatures2KHR" => entry!(get_features2_khr),
        b"vkGetPhysicalDeviceProperties2" => entry!(get_properties2),
        b"vkGetPhysicalDeviceProperties2KHR" => entry!(get_properties2_khr),
        b"vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR" => {
            return Some((entry!(enumerate_counters), true))
        }
        b"vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR" => {
            return Some((entry!(get_passes), true))
        }
        _ => return None,
    };
    Some((e, false))
}

/// The intercept when the layer provides the function or the next layer has it; else what next gave.
fn choose(intercept: Option<(Void, bool)>, next: Void) -> Void {
    match intercept {
        Some((e, true)) => e,
        Some((e, false)) if next.is_some() => e,
        _ => next,
    }
}

pub unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    p_name: *const c_char,
) -> Void {
    if p_name.is_null() {
        return None;
    }
    let name = CStr::from_ptr(p_name).to_bytes();
    match name {
        b"vkGetInstanceProcAddr" => return entry!(get_instance_proc_addr),
        b"vkCreateInstance" => return entry!(create_instance),
        _ => {}
    }
    let inst = instance_of(instance.as_raw())?;
    let next = (inst.gipa)(instance, p_name);
    if let Some(i) = instance_intercept(name) {
        return choose(Some(i), next);
    }
    choose(device_intercept(name), next)
}

pub unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    p_name: *const c_char,
) -> Void {
    if p_name.is_null() || device == vk::Device::null() {
        return None;
    }
    let name = CStr::from_ptr(p_name).to_bytes();
    if name == b"vkGetDeviceProcAddr" {
        return entry!(get_device_proc_addr);
    }
    let dev = device_of(device.as_raw())?;
    let next = (dev.gdpa)(device, p_name);
    if !dev.emulate {
        // Nothing to emulate: the app talks to the driver directly, except for the teardown.
        return if name == b"vkDestroyDevice" {
            entry!(destroy_device)
        } else {
            next
        };
    }
    choose(device_intercept(name), next)
}

// ---- instance -------------------------------------------------------------------------------------

unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    guard(vk::Result::ERROR_INITIALIZATION_FAILED, || {
        if p_create_info.is_null() || p_instance.is_null() {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        if let Err(e) = per_pass() {
            report(&e);
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        let Some(gipa) = loader::take_instance_link(p_create_info) else {
            report("vkCreateInstance without loader link info; is the layer loaded by the loader?");
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(create) = gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let create: vk::PFN_vkCreateInstance = std::mem::transmute(create);
        let r = create(p_create_info, p_allocator, p_instance);
        if r != vk::Result::SUCCESS {
            return r;
        }
        let handle = *p_instance;
        let f = InstanceFns::load(|n| gipa(handle, n.as_ptr()));
        let key = loader::dispatch_key(handle.as_raw());
        instances()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, Arc::new(Instance { handle, gipa, f }));
        vk::Result::SUCCESS
    })
}

unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard((), || {
        let key = loader::dispatch_key(instance.as_raw());
        let inst = instances()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Some(f) = inst.and_then(|i| i.f.destroy_instance) {
            f(instance, p_allocator);
        }
    })
}

/// What each queue family of `pd` can measure (the feature bits the layer turns on when it emulates).
unsafe fn family_caps(inst: &Instance, pd: vk::PhysicalDevice) -> Vec<Capabilities> {
    let (Some(qfp), Some(feat)) = (inst.f.get_queue_family_properties, inst.f.get_features) else {
        return Vec::new();
    };
    let mut n = 0u32;
    qfp(pd, &mut n, std::ptr::null_mut());
    let mut props = vec![vk::QueueFamilyProperties::default(); n as usize];
    qfp(pd, &mut n, props.as_mut_ptr());
    props.truncate(n as usize);
    let mut f = vk::PhysicalDeviceFeatures::default();
    feat(pd, &mut f);
    props
        .iter()
        .map(|p| Capabilities {
            graphics: p.queue_flags.contains(vk::QueueFlags::GRAPHICS),
            compute: p.queue_flags.contains(vk::QueueFlags::COMPUTE),
            timestamps: p.timestamp_valid_bits > 0,
            pipeline_statistics: f.pipeline_statistics_query == vk::TRUE,
            occlusion: f.occlusion_query_precise == vk::TRUE,
        })
        .collect()
}

/// The standard two-call array protocol.
unsafe fn write_array<T: Copy>(items: &[T], p_count: *mut u32, p_out: *mut T) -> vk::Result {
    if p_out.is_null() {
        *p_count = items.len() as u32;
        return vk::Result::SUCCESS;
    }
    let n = (*p_count as usize).min(items.len());
    std::ptr::copy_nonoverlapping(items.as_ptr(), p_out, n);
    *p_count = n as u32;
    if n < items.len() {
        vk::Result::INCOMPLETE
    } else {
        vk::Result::SUCCESS
    }
}

fn perf_extension() -> vk::ExtensionProperties {
    let mut e = vk::ExtensionProperties {
        spec_version: 1,
        ..Default::default()
    };
    counters::fill_c_chars(&mut e.extension_name, "VK_KHR_performance_query");
    e
}

unsafe extern "system" fn enumerate_device_extension_properties(
    pd: vk::PhysicalDevice,
    p_layer_name: *const c_char,
    p_count: *mut u32,
    p_props: *mut vk::ExtensionProperties,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        if p_count.is_null() {
            return vk::Result::ERROR_UNKNOWN;
        }
        if !p_layer_name.is_null()
            && CStr::from_ptr(p_layer_name).to_bytes() == crate::LAYER_NAME.as_bytes()
        {
            return write_array(&[perf_extension()], p_count, p_props);
        }
        let Some(inst) = instance_of(pd.as_raw()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(next) = inst.f.enumerate_device_extension_properties else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        if !p_layer_name.is_null() {
            return next(pd, p_layer_name, p_count, p_props);
        }
        let mut n = 0u32;
        let r = next(pd, std::ptr::null(), &mut n, std::ptr::null_mut());
        if r != vk::Result::SUCCESS {
            return r;
        }
        let mut list = vec![vk::ExtensionProperties::default(); n as usize];
        let r = next(pd, std::ptr::null(), &mut n, list.as_mut_ptr());
        if r.as_raw() < 0 {
            return r;
        }
        list.truncate(n as usize);
        if !list
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(PERF_EXT))
        {
            list.push(perf_extension());
        }
        write_array(&list, p_count, p_props)
    })
}

unsafe fn fill_features(p: *mut vk::PhysicalDeviceFeatures2<'_>) {
    let f = find_in_chain_mut(
        (*p).p_next,
        vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR,
    ) as *mut vk::PhysicalDevicePerformanceQueryFeaturesKHR<'_>;
    if let Some(f) = f.as_mut() {
        f.performance_counter_query_pools = vk::TRUE;
        // Internal queries of one type cannot be active twice in a command buffer.
        f.performance_counter_multiple_query_pools = vk::FALSE;
    }
}

unsafe extern "system" fn get_features2(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_features2) {
            f(pd, p);
            fill_features(p);
        }
    })
}

unsafe extern "system" fn get_features2_khr(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_features2_khr) {
            f(pd, p);
            fill_features(p);
        }
    })
}

unsafe fn fill_properties(p: *mut vk::PhysicalDeviceProperties2<'_>) {
    let q = find_in_chain_mut(
        (*p).p_next,
        vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_PROPERTIES_KHR,
    ) as *mut vk::PhysicalDevicePerformanceQueryPropertiesKHR<'_>;
    if let Some(q) = q.as_mut() {
        // Durations are differences of two timestamps: a copy resolves them with a compute dispatch.
        q.allow_command_buffer_query_copies = vk::TRUE;
    }
}

unsafe extern "system" fn get_properties2(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_properties2) {
            f(pd, p);
            fill_properties(p);
        }
    })
}

unsafe extern "system" fn get_properties2_khr(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_properties2_khr) {
            f(pd, p);
            fill_properties(p);
        }
    })
}

unsafe extern "system" fn enumerate_counters(
    pd: vk::PhysicalDevice,
    family: u32,
    p_count: *mut u32,
    p_counters: *mut vk::PerformanceCounterKHR<'_>,
    p_descs: *mut vk::PerformanceCounterDescriptionKHR<'_>,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(inst) = instance_of(pd.as_raw()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        if p_count.is_null() {
            return vk::Result::ERROR_UNKNOWN;
        }
        let caps = family_caps(&inst, pd);
        let Some(c) = caps.get(family as usize) else {
            report(&format!(
                "vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR: queue family {family} does not exist (the device has {})",
                caps.len()
            ));
            *p_count = 0;
            return vk::Result::SUCCESS;
        };
        let list = visible_counters(c);
        if p_counters.is_null() && p_descs.is_null() {
            *p_count = list.len() as u32;
            return vk::Result::SUCCESS;
        }
        let n = (*p_count as usize).min(list.len());
        for (k, &ci) in list.iter().take(n).enumerate() {
            let c = &CATALOG[ci];
            if let Some(out) = p_counters.add(k).as_mut() {
                // sType/pNext belong to the app.
                out.unit = c.unit;
                out.scope = c.scope;
                out.storage = c.storage;
                out.uuid = c.uuid();
            }
            if !p_descs.is_null() {
                let d = &mut *p_descs.add(k);
                d.flags = vk::PerformanceCounterDescriptionFlagsKHR::empty();
                counters::fill_c_chars(&mut d.name, c.name);
                counters::fill_c_chars(&mut d.category, c.category);
                counters::fill_c_chars(&mut d.description, c.description);
            }
        }
        *p_count = n as u32;
        if n < list.len() {
            vk::Result::INCOMPLETE
        } else {
            vk::Result::SUCCESS
        }
    })
}

/// Catalog indices for the app's counter indices on `family`, or a message naming the bad one.
unsafe fn resolve_counters(
    caps: &[Capabilities],
    family: u32,
    indices: &[u32],
) -> Result<Vec<usize>, String> {
    let Some(c) = caps.get(family as usize) else {
        return Err(format!(
            "queue family {family} does not exist (the device has {})",
            caps.len()
        ));
    };
    let list = visible_counters(c);
    indices
        .iter()
        .map(|&i| {
            list.get(i as usize).copied().ok_or_else(|| {
                format!(
                    "VUID-VkQueryPoolPerformanceCreateInfoKHR-pCounterIndices-03321: counter index {i} is not below the {} counters of queue family {family}",
                    list.len()
                )
            })
        })
        .collect()
}

unsafe fn counter_indices<'a>(info: &'a vk::QueryPoolPerformanceCreateInfoKHR<'_>) -> &'a [u32] {
    if info.counter_index_count == 0 || info.p_counter_indices.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(info.p_counter_indices, info.counter_index_count as usize)
    }
}

unsafe extern "system" fn get_passes(
    pd: vk::PhysicalDevice,
    p_info: *const vk::QueryPoolPerformanceCreateInfoKHR<'_>,
    p_passes: *mut u32,
) {
    guard((), || {
        let (Some(inst), Some(info), Some(out)) =
            (instance_of(pd.as_raw()), p_info.as_ref(), p_passes.as_mut())
        else {
            return;
        };
        let caps = family_caps(&inst, pd);
        match resolve_counters(&caps, info.queue_family_index, counter_indices(info)) {
            Ok(set) => {
                *out = PassPlan::new(&set, per_pass().unwrap_or(counters::DEFAULT_PER_PASS)).passes
            }
            Err(e) => {
                report(&format!(
                    "vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR: {e}"
                ));
                *out = 0;
            }
        }
    })
}

// ---- device creation ------------------------------------------------------------------------------

unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    guard(vk::Result::ERROR_INITIALIZATION_FAILED, || {
        let (Some(ci), false) = (p_create_info.as_ref(), p_device.is_null()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(inst) = instance_of(pd.as_raw()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some((gipa, gdpa)) = loader::take_device_link(p_create_info) else {
            report("vkCreateDevice without loader link info");
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(create) = gipa(inst.handle, c"vkCreateDevice".as_ptr()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let create: vk::PFN_vkCreateDevice = std::mem::transmute(create);

        let names: &[*const c_char] =
            if ci.enabled_extension_count == 0 || ci.pp_enabled_extension_names.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(
                    ci.pp_enabled_extension_names,
                    ci.enabled_extension_count as usize,
                )
            };
        let emulate = names
            .iter()
            .any(|&n| !n.is_null() && CStr::from_ptr(n) == PERF_EXT);
        let r = if emulate {
            create_stripped(create, &inst, pd, ci, names, p_allocator, p_device)
        } else {
            create(pd, p_create_info, p_allocator, p_device)
        };
        if r != vk::Result::SUCCESS {
            return r;
        }
        let handle = *p_device;
        let f = DeviceFns::load(|n| gdpa(handle, n.as_ptr()));
        let mut props = vk::PhysicalDeviceProperties::default();
        if let Some(gp) = inst.f.get_properties {
            gp(pd, &mut props);
        }
        let families = family_caps(&inst, pd);
        let valid_bits = {
            let mut n = 0u32;
            let mut v = Vec::new();
            if let Some(q) = inst.f.get_queue_family_properties {
                q(pd, &mut n, std::ptr::null_mut());
                let mut p = vec![vk::QueueFamilyProperties::default(); n as usize];
                q(pd, &mut n, p.as_mut_ptr());
                v = p.iter().map(|p| p.timestamp_valid_bits).collect();
            }
            v
        };
        let mut mem_props = vk::PhysicalDeviceMemoryProperties::default();
        if let Some(g) = inst.f.get_memory_properties {
            g(pd, &mut mem_props);
        }
        let copier = if emulate {
            match copy::Copier::new(handle, &f) {
                Ok(c) => Some(c),
                Err(e) => {
                    report(&format!(
                        "vkCmdCopyQueryPoolResults on performance pools will not work: {e}"
                    ));
                    None
                }
            }
        } else {
            None
        };
        let dev = Device {
            handle,
            gdpa,
            emulate,
            families,
            valid_bits,
            period: props.limits.timestamp_period,
            per_pass: per_pass().unwrap_or(counters::DEFAULT_PER_PASS),
            f,
            copier,
            mem_props,
            st: Mutex::new(DevState::default()),
        };
        devices()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(loader::dispatch_key(handle.as_raw()), Arc::new(dev));
        vk::Result::SUCCESS
    })
}

/// Creates the device without VK_KHR_performance_query (the driver may not know it) and with the
/// query features the emulation needs. The app's pNext chain is relinked around the performance
/// feature struct for the call and restored afterwards.
unsafe fn create_stripped(
    create: vk::PFN_vkCreateDevice,
    inst: &Instance,
    pd: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo<'_>,
    names: &[*const c_char],
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    let kept: Vec<*const c_char> = names
        .iter()
        .copied()
        .filter(|&n| n.is_null() || CStr::from_ptr(n) != PERF_EXT)
        .collect();
    let mut supported = vk::PhysicalDeviceFeatures::default();
    if let Some(f) = inst.f.get_features {
        f(pd, &mut supported);
    }
    let want = |f: &mut vk::PhysicalDeviceFeatures| {
        f.pipeline_statistics_query |= supported.pipeline_statistics_query;
        f.occlusion_query_precise |= supported.occlusion_query_precise;
    };

    // Walk the chain: unlink the performance feature structs, note every pNext we change.
    let mut ours = *ci;
    ours.enabled_extension_count = kept.len() as u32;
    ours.pp_enabled_extension_names = kept.as_ptr();
    let mut restore: Vec<(*mut vk::BaseOutStructure<'_>, *mut vk::BaseOutStructure<'_>)> =
        Vec::new();
    let mut features2: *mut vk::PhysicalDeviceFeatures2<'_> = std::ptr::null_mut();
    let mut prev: *mut vk::BaseOutStructure<'_> = std::ptr::null_mut();
    let mut node = ci.p_next as *mut vk::BaseOutStructure<'_>;
    while !node.is_null() {
        let next = (*node).p_next;
        if (*node).s_type == vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR {
            if prev.is_null() {
                ours.p_next = next as *const c_void;
            } else {
                restore.push((prev, (*prev).p_next));
                (*prev).p_next = next;
            }
        } else {
            if (*node).s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
                features2 = node as *mut vk::PhysicalDeviceFeatures2<'_>;
            }
            prev = node;
        }
        node = next;
    }
    let mut core;
    let saved2 = features2.as_ref().map(|f| f.features);
    if let Some(f2) = features2.as_mut() {
        want(&mut f2.features);
    } else {
        core = ci.p_enabled_features.as_ref().copied().unwrap_or_default();
        want(&mut core);
        ours.p_enabled_features = &core;
    }
    let r = create(pd, &ours, p_allocator, p_device);
    if let (Some(f2), Some(saved)) = (features2.as_mut(), saved2) {
        f2.features = saved;
    }
    for (p, old) in restore.into_iter().rev() {
        (*p).p_next = old;
    }
    r
}

unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard((), || {
        let key = loader::dispatch_key(device.as_raw());
        let dev = devices()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        let Some(dev) = dev else { return };
        // Pools the app leaked: their internal pools go with the device, the driver frees those; the
        // copy buffers and pipeline objects are the layer's to free.
        {
            let mut st = lock(&dev.st);
            for (_, p) in st.pools.drain() {
                if let Some(c) = p.copy {
                    c.destroy(&dev, p_allocator);
                }
            }
        }
        if let Some(c) = &dev.copier {
            c.destroy(&dev, p_allocator);
        }
        if let Some(f) = dev.f.destroy_device {
            f(device, p_allocator);
        }
    })
}

// ---- profiling lock -------------------------------------------------------------------------------

unsafe extern "system" fn acquire_profiling_lock(
    device: vk::Device,
    _info: *const vk::AcquireProfilingLockInfoKHR<'_>,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(device.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        // The spec lets several actors hold the lock at once; nothing here ever contends, so the
        // timeout never expires.
        lock(&dev.st).lock_holders += 1;
        vk::Result::SUCCESS
    })
}

unsafe extern "system" fn release_profiling_lock(device: vk::Device) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        let mut st = lock(&dev.st);
        if st.lock_holders == 0 {
            report("VUID-vkReleaseProfilingLockKHR-device-03235: vkReleaseProfilingLockKHR without a held profiling lock");
            return;
        }
        st.lock_holders -= 1;
        if st.lock_holders == 0 {
            st.lock_generation += 1;
        }
    })
}

// ---- query pools ----------------------------------------------------------------------------------

unsafe extern "system" fn create_query_pool(
    device: vk::Device,
    p_info: *const vk::QueryPoolCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_pool: *mut vk::QueryPool,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(device.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let create = dev.f.create_query_pool.expect("core vkCreateQueryPool");
        let Some(info) = p_info.as_ref() else {
            return vk::Result::ERROR_UNKNOWN;
        };
        if !dev.emulate || info.query_type != vk::QueryType::PERFORMANCE_QUERY_KHR {
            return create(device, p_info, p_allocator, p_pool);
        }
        let perf = find_in_chain_mut(
            info.p_next as *mut c_void,
            vk::StructureType::QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR,
        ) as *const vk::QueryPoolPerformanceCreateInfoKHR<'_>;
        let Some(perf) = perf.as_ref() else {
            report("VUID-VkQueryPoolCreateInfo-queryType-03222: a performance query pool needs VkQueryPoolPerformanceCreateInfoKHR in pNext");
            return vk::Result::ERROR_UNKNOWN;
        };
        let set = match resolve_counters(
            &dev.families,
            perf.queue_family_index,
            counter_indices(perf),
        ) {
            Ok(s) if !s.is_empty() => s,
            Ok(_) => {
                report("VUID-VkQueryPoolPerformanceCreateInfoKHR-counterIndexCount-arraylength: a performance query pool needs at least one counter");
                return vk::Result::ERROR_UNKNOWN;
            }
            Err(e) => {
                report(&format!("vkCreateQueryPool: {e}"));
                return vk::Result::ERROR_UNKNOWN;
            }
        };
        match new_perf_pool(
            &dev,
            create,
            set,
            perf.queue_family_index,
            info.query_count,
            p_allocator,
        ) {
            Ok(mut pool) => {
                if dev.copier.is_some() {
                    match copy::PoolCopy::new(&dev, &pool, p_allocator) {
                        Ok(c) => pool.copy = Some(c),
                        Err(e) => report(&format!(
                            "vkCmdCopyQueryPoolResults will be refused on this performance pool: {e}"
                        )),
                    }
                }
                let handle = pool.ts;
                lock(&dev.st).pools.insert(handle.as_raw(), pool);
                *p_pool = handle;
                vk::Result::SUCCESS
            }
            Err(r) => r,
        }
    })
}

unsafe fn new_perf_pool(
    dev: &Device,
    create: vk::PFN_vkCreateQueryPool,
    counters: Vec<usize>,
    family: u32,
    count: u32,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) -> Result<PerfPool, vk::Result> {
    let plan = PassPlan::new(&counters, dev.per_pass);
    let has = |s: &dyn Fn(Source) -> bool| counters.iter().any(|&c| s(CATALOG[c].source));
    let render_pass_duration = has(&|s| s == Source::RenderPassDuration);
    let durations = render_pass_duration || has(&|s| s == Source::CommandBufferDuration);
    let mut stat_flags = vk::QueryPipelineStatisticFlags::empty();
    for &c in &counters {
        if let Source::Statistic(b) = CATALOG[c].source {
            stat_flags |= b;
        }
    }
    let occlusion = has(&|s| s == Source::SamplesPassed);
    let ts_slots = if render_pass_duration {
        2 + 2 * RP_SLOTS
    } else {
        2
    };
    let mk = |ty: vk::QueryType, n: u32, stats: vk::QueryPipelineStatisticFlags| {
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(ty)
            .query_count(n)
            .pipeline_statistics(stats);
        let mut p = vk::QueryPool::null();
        let r = create(dev.handle, &ci, p_allocator, &mut p);
        if r == vk::Result::SUCCESS {
            Ok(p)
        } else {
            Err(r)
        }
    };
    let destroy = dev.f.destroy_query_pool.expect("core vkDestroyQueryPool");
    let ts = mk(
        vk::QueryType::TIMESTAMP,
        count.max(1) * ts_slots,
        vk::QueryPipelineStatisticFlags::empty(),
    )?;
    let stats = if stat_flags.is_empty() {
        None
    } else {
        match mk(vk::QueryType::PIPELINE_STATISTICS, count.max(1), stat_flags) {
            Ok(p) => Some((p, stat_flags)),
            Err(r) => {
                destroy(dev.handle, ts, p_allocator);
                return Err(r);
            }
        }
    };
    let occ = if occlusion {
        match mk(
            vk::QueryType::OCCLUSION,
            count.max(1),
            vk::QueryPipelineStatisticFlags::empty(),
        ) {
            Ok(p) => Some(p),
            Err(r) => {
                destroy(dev.handle, ts, p_allocator);
                if let Some((s, _)) = stats {
                    destroy(dev.handle, s, p_allocator);
                }
                return Err(r);
            }
        }
    } else {
        None
    };
    Ok(PerfPool {
        counters,
        family,
        plan,
        count,
        ts,
        ts_slots,
        durations,
        render_pass_duration,
        stats,
        occlusion: occ,
        queries: vec![QueryState::default(); count as usize],
        copy: None,
    })
}

unsafe extern "system" fn destroy_query_pool(
    device: vk::Device,
    pool: vk::QueryPool,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        let destroy = dev.f.destroy_query_pool.expect("core vkDestroyQueryPool");
        let removed = lock(&dev.st).pools.remove(&pool.as_raw());
        if let Some(p) = removed {
            if let Some(c) = &p.copy {
                c.destroy(&dev, p_allocator);
            }
            if let Some((s, _)) = p.stats {
                destroy(device, s, p_allocator);
            }
            if let Some(o) = p.occlusion {
                destroy(device, o, p_allocator);
            }
        }
        destroy(device, pool, p_allocator);
    })
}

fn host_reset(dev: &Device, pool: vk::QueryPool, first: u32, count: u32) -> bool {
    let mut st = lock(&dev.st);
    let Some(p) = st.pools.get_mut(&pool.as_raw()) else {
        return false;
    };
    apply_reset(p, first, count);
    true
}

fn apply_reset(p: &mut PerfPool, first: u32, count: u32) {
    let end = first.saturating_add(count).min(p.count);
    for q in first.min(end)..end {
        p.queries[q as usize] = QueryState::default();
    }
}

unsafe extern "system" fn reset_query_pool(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        // The internal queries are reset where they are begun; only the availability state is here.
        if !host_reset(&dev, pool, first, count) {
            if let Some(f) = dev.f.reset_query_pool {
                f(device, pool, first, count);
            }
        }
    })
}

unsafe extern "system" fn reset_query_pool_ext(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        if !host_reset(&dev, pool, first, count) {
            if let Some(f) = dev.f.reset_query_pool_ext {
                f(device, pool, first, count);
            }
        }
    })
}

/// Reads the internal results of one query; `None` while any of them is not available.
unsafe fn read_query(
    dev: &Device,
    p: &PerfPool,
    q: u32,
    wait: bool,
) -> Result<Option<Vec<u64>>, vk::Result> {
    let get = dev
        .f
        .get_query_pool_results
        .expect("core vkGetQueryPoolResults");
    let flags = vk::QueryResultFlags::TYPE_64
        | if wait {
            vk::QueryResultFlags::WAIT
        } else {
            vk::QueryResultFlags::empty()
        };
    let st = p.queries[q as usize];
    let fetch = |pool: vk::QueryPool,
                 first: u32,
                 n: u32,
                 per: u32|
     -> Result<Option<Vec<u64>>, vk::Result> {
        let mut v = vec![0u64; (n * per) as usize];
        let r = get(
            dev.handle,
            pool,
            first,
            n,
            v.len() * 8,
            v.as_mut_ptr() as *mut c_void,
            8 * per as u64,
            flags,
        );
        match r {
            vk::Result::SUCCESS => Ok(Some(v)),
            vk::Result::NOT_READY => Ok(None),
            e => Err(e),
        }
    };
    let measured_rp = st.render_passes.min(RP_SLOTS);
    let ts = if p.durations {
        let n = if p.render_pass_duration {
            2 + 2 * measured_rp
        } else {
            2
        };
        match fetch(p.ts, q * p.ts_slots, n, 1)? {
            Some(v) => v,
            None => return Ok(None),
        }
    } else {
        Vec::new()
    };
    let stats = match p.stats {
        Some((pool, flags)) => match fetch(pool, q, 1, flags.as_raw().count_ones())? {
            Some(v) => Some((v, flags)),
            None => return Ok(None),
        },
        None => None,
    };
    let occ = match p.occlusion {
        Some(pool) => match fetch(pool, q, 1, 1)? {
            Some(v) => v[0],
            None => return Ok(None),
        },
        None => 0,
    };
    let bits = dev.valid_bits.get(p.family as usize).copied().unwrap_or(64);
    let values = p
        .counters
        .iter()
        .map(|&c| match CATALOG[c].source {
            Source::CommandBufferDuration => counters::ticks_to_ns(ts[0], ts[1], bits, dev.period),
            Source::RenderPassDuration => {
                counters::render_pass_ns(&ts[2..], measured_rp as usize, bits, dev.period)
            }
            Source::Statistic(bit) => {
                let (v, flags) = stats
                    .as_ref()
                    .expect("statistics pool exists for a statistic counter");
                // Results come in bit order of the enabled statistics.
                let below = flags.as_raw() & (bit.as_raw() - 1);
                v[below.count_ones() as usize]
            }
            Source::SamplesPassed => occ,
        })
        .collect();
    Ok(Some(values))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "system" fn get_query_pool_results(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    data_size: usize,
    p_data: *mut c_void,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(device.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let get = dev
            .f
            .get_query_pool_results
            .expect("core vkGetQueryPoolResults");
        let st = lock(&dev.st);
        let Some(p) = st.pools.get(&pool.as_raw()) else {
            drop(st);
            return get(device, pool, first, count, data_size, p_data, stride, flags);
        };
        let row = 8 * p.counters.len() as u64;
        let bad = vk::QueryResultFlags::WITH_AVAILABILITY
            | vk::QueryResultFlags::PARTIAL
            | vk::QueryResultFlags::TYPE_64
            | vk::QueryResultFlags::WITH_STATUS_KHR;
        if flags.intersects(bad) {
            report(&format!("VUID-vkGetQueryPoolResults-queryType-03230: flags {flags:?} are not allowed for a performance query pool"));
            return vk::Result::ERROR_UNKNOWN;
        }
        if stride & 7 != 0 || (count > 1 && stride < row) {
            report(&format!("VUID-vkGetQueryPoolResults-queryType-03229: stride {stride} must be a multiple of 8 and hold {} counter results", p.counters.len()));
            return vk::Result::ERROR_UNKNOWN;
        }
        if first.checked_add(count).is_none_or(|e| e > p.count) {
            report(&format!("VUID-vkGetQueryPoolResults-firstQuery-00813: queries {first}..{} exceed the pool's {}", first as u64 + count as u64, p.count));
            return vk::Result::ERROR_UNKNOWN;
        }
        if count > 0 && (p_data.is_null() || (count as u64 - 1) * stride + row > data_size as u64) {
            report(&format!("VUID-vkGetQueryPoolResults-dataSize-00817: dataSize {data_size} cannot hold {count} queries at stride {stride}"));
            return vk::Result::ERROR_UNKNOWN;
        }
        let wait = flags.contains(vk::QueryResultFlags::WAIT);
        let mut result = vk::Result::SUCCESS;
        for i in 0..count {
            let q = first + i;
            let s = p.queries[q as usize];
            if s.passes_submitted & p.all_passes() != p.all_passes() {
                if wait {
                    report_once("03231", &format!(
                        "VUID-vkGetQueryPoolResults-queryType-03231: query {q} was not submitted once for each of its {} passes (passes submitted: mask {:#b}); it stays unavailable",
                        p.plan.passes, s.passes_submitted
                    ));
                }
                result = vk::Result::NOT_READY;
                continue;
            }
            match read_query(&dev, p, q, wait) {
                Ok(Some(values)) => {
                    let out = (p_data as *mut u8).add((i as u64 * stride) as usize);
                    for (k, v) in values.iter().enumerate() {
                        let r = vk::PerformanceCounterResultKHR { uint64: *v };
                        std::ptr::write_unaligned(
                            out.add(8 * k) as *mut vk::PerformanceCounterResultKHR,
                            r,
                        );
                    }
                }
                Ok(None) => result = vk::Result::NOT_READY,
                Err(e) => return e,
            }
        }
        result
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "system" fn cmd_copy_query_pool_results(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    dst: vk::Buffer,
    offset: vk::DeviceSize,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        {
            let mut guard = lock(&dev.st);
            let st = &mut *guard;
            if let Some(p) = st.pools.get(&pool.as_raw()) {
                let bound = st.cbs.get(&cb.as_raw()).map(|c| &c.bound);
                if copy::record_copy(&dev, cb, p, bound, first, count, dst, offset, stride, flags) {
                    st.cbs.entry(cb.as_raw()).or_default().ops.push(Op::Copy {
                        pool: pool.as_raw(),
                        first,
                        count,
                    });
                }
                return;
            }
        }
        if let Some(f) = dev.f.cmd_copy_query_pool_results {
            f(cb, pool, first, count, dst, offset, stride, flags);
        }
    })
}

// ---- recording ------------------------------------------------------------------------------------

unsafe extern "system" fn begin_command_buffer(
    cb: vk::CommandBuffer,
    p_info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let r = (dev
            .f
            .begin_command_buffer
            .expect("core vkBeginCommandBuffer"))(cb, p_info);
        if r == vk::Result::SUCCESS {
            let mut st = lock(&dev.st);
            let held = st.lock_generation_if_held();
            st.cbs.insert(
                cb.as_raw(),
                CbState {
                    lock_at_begin: held,
                    ..Default::default()
                },
            );
        }
        r
    })
}

unsafe extern "system" fn end_command_buffer(cb: vk::CommandBuffer) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let r = (dev.f.end_command_buffer.expect("core vkEndCommandBuffer"))(cb);
        let mut st = lock(&dev.st);
        let now = st.lock_generation_if_held();
        let Some(c) = st.cbs.get_mut(&cb.as_raw()) else {
            return r;
        };
        // A copy alone does not need the profiling lock.
        let has_perf = c.ops.iter().any(|o| !matches!(o, Op::Copy { .. })) || c.active.is_some();
        if has_perf
            && c.violation.is_none()
            && (c.lock_at_begin.is_none() || c.lock_at_begin != now)
        {
            let msg = "VUID-vkQueueSubmit-pCommandBuffers-03220: the profiling lock was released while a command buffer with performance queries was being recorded".to_string();
            report(&msg);
            c.violation = Some(msg);
        }
        if c.violation.is_some() && r == vk::Result::SUCCESS {
            return vk::Result::ERROR_UNKNOWN;
        }
        r
    })
}

unsafe extern "system" fn free_command_buffers(
    device: vk::Device,
    pool: vk::CommandPool,
    n: u32,
    p_cbs: *const vk::CommandBuffer,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        if !p_cbs.is_null() {
            let mut st = lock(&dev.st);
            for cb in std::slice::from_raw_parts(p_cbs, n as usize) {
                st.cbs.remove(&cb.as_raw());
            }
        }
        (dev.f
            .free_command_buffers
            .expect("core vkFreeCommandBuffers"))(device, pool, n, p_cbs);
    })
}

unsafe extern "system" fn cmd_execute_commands(
    cb: vk::CommandBuffer,
    n: u32,
    p_cbs: *const vk::CommandBuffer,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !p_cbs.is_null() {
            // Queries recorded in secondaries count when the primary is submitted.
            let mut st = lock(&dev.st);
            let mut ops = Vec::new();
            let mut violation = None;
            for s in std::slice::from_raw_parts(p_cbs, n as usize) {
                if let Some(c) = st.cbs.get(&s.as_raw()) {
                    ops.extend_from_slice(&c.ops);
                    violation = violation.or_else(|| c.violation.clone());
                }
            }
            if let Some(c) = st.cbs.get_mut(&cb.as_raw()) {
                c.ops.extend(ops);
                if c.violation.is_none() {
                    c.violation = violation;
                }
            }
        }
        (dev.f
            .cmd_execute_commands
            .expect("core vkCmdExecuteCommands"))(cb, n, p_cbs);
    })
}

unsafe extern "system" fn cmd_reset_query_pool(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        {
            let mut st = lock(&dev.st);
            if st.pools.contains_key(&pool.as_raw()) {
                st.cbs.entry(cb.as_raw()).or_default().ops.push(Op::Reset {
                    pool: pool.as_raw(),
                    first,
                    count,
                });
                return;
            }
        }
        (dev.f
            .cmd_reset_query_pool
            .expect("core vkCmdResetQueryPool"))(cb, pool, first, count);
    })
}

/// Records the internal queries for a performance query begin; returns false when `pool` is not a
/// performance pool.
unsafe fn perf_begin(dev: &Device, cb: vk::CommandBuffer, pool: vk::QueryPool, query: u32) -> bool {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(p) = st.pools.get(&pool.as_raw()) else {
        return false;
    };
    let held = st.lock_generation_if_held();
    let c = st.cbs.entry(cb.as_raw()).or_default();
    if c.lock_at_begin.is_none() || c.lock_at_begin != held {
        let msg = "VUID-vkCmdBeginQuery-queryPool-03223: the profiling lock (vkAcquireProfilingLockKHR) must be held before vkBeginCommandBuffer is called on a command buffer that records performance queries".to_string();
        report(&msg);
        c.violation.get_or_insert(msg);
        return true;
    }
    if query >= p.count {
        report(&format!(
            "VUID-vkCmdBeginQuery-query-00802: query {query} is not below the pool's {} queries",
            p.count
        ));
        return true;
    }
    if c.active.is_some() {
        report("VUID-vkCmdBeginQuery-queryPool-01922: a performance query is already active in this command buffer (performanceCounterMultipleQueryPools is VK_FALSE)");
        return true;
    }
    let f = &dev.f;
    let reset = f.cmd_reset_query_pool.expect("core vkCmdResetQueryPool");
    let ts_base = query * p.ts_slots;
    reset(cb, p.ts, ts_base, p.ts_slots);
    if let Some((s, _)) = p.stats {
        reset(cb, s, query, 1);
    }
    if let Some(o) = p.occlusion {
        reset(cb, o, query, 1);
    }
    if p.durations {
        (f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
            cb,
            vk::PipelineStageFlags::TOP_OF_PIPE,
            p.ts,
            ts_base,
        );
    }
    let begin = f.cmd_begin_query.expect("core vkCmdBeginQuery");
    if let Some((s, _)) = p.stats {
        begin(cb, s, query, vk::QueryControlFlags::empty());
    }
    if let Some(o) = p.occlusion {
        begin(cb, o, query, vk::QueryControlFlags::PRECISE);
    }
    c.active = Some(Active {
        pool: pool.as_raw(),
        query,
        render_passes: 0,
        rp_open: false,
    });
    true
}

unsafe fn perf_end(dev: &Device, cb: vk::CommandBuffer, pool: vk::QueryPool, query: u32) -> bool {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(p) = st.pools.get(&pool.as_raw()) else {
        return false;
    };
    let c = st.cbs.entry(cb.as_raw()).or_default();
    let Some(a) = c
        .active
        .filter(|a| a.pool == pool.as_raw() && a.query == query)
    else {
        if c.violation.is_none() {
            report(&format!("VUID-vkCmdEndQuery-None-01923: performance query {query} is not active in this command buffer"));
        }
        return true;
    };
    let f = &dev.f;
    let end = f.cmd_end_query.expect("core vkCmdEndQuery");
    if let Some(o) = p.occlusion {
        end(cb, o, query);
    }
    if let Some((s, _)) = p.stats {
        end(cb, s, query);
    }
    if p.durations {
        (f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
            cb,
            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            p.ts,
            query * p.ts_slots + 1,
        );
    }
    if let Some(pc) = &p.copy {
        pc.after_end(dev, cb, p, query, a.render_passes);
    }
    c.active = None;
    c.ops.push(Op::Query {
        pool: pool.as_raw(),
        query,
        render_passes: a.render_passes,
    });
    true
}

unsafe extern "system" fn cmd_begin_query(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_begin(&dev, cb, pool, query) {
            (dev.f.cmd_begin_query.expect("core vkCmdBeginQuery"))(cb, pool, query, flags);
        }
    })
}

unsafe extern "system" fn cmd_end_query(cb: vk::CommandBuffer, pool: vk::QueryPool, query: u32) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_end(&dev, cb, pool, query) {
            (dev.f.cmd_end_query.expect("core vkCmdEndQuery"))(cb, pool, query);
        }
    })
}

unsafe extern "system" fn cmd_begin_query_indexed(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
    index: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_begin(&dev, cb, pool, query) {
            if let Some(f) = dev.f.cmd_begin_query_indexed {
                f(cb, pool, query, flags, index);
            }
        }
    })
}

unsafe extern "system" fn cmd_end_query_indexed(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    index: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_end(&dev, cb, pool, query) {
            if let Some(f) = dev.f.cmd_end_query_indexed {
                f(cb, pool, query, index);
            }
        }
    })
}

unsafe extern "system" fn cmd_write_timestamp(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags,
    pool: vk::QueryPool,
    query: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if lock(&dev.st).pools.contains_key(&pool.as_raw()) {
            report("VUID-vkCmdWriteTimestamp-queryPool-01416: vkCmdWriteTimestamp on a performance query pool; not recorded");
            return;
        }
        (dev.f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(cb, stage, pool, query);
    })
}

/// Before a render pass instance begins: a timestamp outside it (so multiview does not widen it).
unsafe fn render_pass_begins(dev: &Device, cb: vk::CommandBuffer) {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(c) = st.cbs.get_mut(&cb.as_raw()) else {
        return;
    };
    let Some(a) = c.active.as_mut() else { return };
    let Some(p) = st.pools.get(&a.pool) else {
        return;
    };
    if !p.render_pass_duration {
        return;
    }
    if a.render_passes >= RP_SLOTS {
        report_once("rp-slots", &format!("more than {RP_SLOTS} render pass instances in one performance query: \"Render pass duration\" counts the first {RP_SLOTS}"));
        return;
    }
    (dev.f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
        cb,
        vk::PipelineStageFlags::TOP_OF_PIPE,
        p.ts,
        a.query * p.ts_slots + 2 + 2 * a.render_passes,
    );
    a.rp_open = true;
}

/// After a render pass instance ended.
unsafe fn render_pass_ended(dev: &Device, cb: vk::CommandBuffer) {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(c) = st.cbs.get_mut(&cb.as_raw()) else {
        return;
    };
    let Some(a) = c.active.as_mut() else { return };
    if !a.rp_open {
        return;
    }
    let Some(p) = st.pools.get(&a.pool) else {
        return;
    };
    (dev.f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
        cb,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        p.ts,
        a.query * p.ts_slots + 3 + 2 * a.render_passes,
    );
    a.rp_open = false;
    a.render_passes += 1;
}

macro_rules! render_pass_hook {
    ($name:ident, $field:ident, begin, ($($arg:ident : $ty:ty),*)) => {
        unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard((), || {
                let Some(dev) = device_of(cb.as_raw()) else { return };
                render_pass_begins(&dev, cb);
                if let Some(f) = dev.f.$field {
                    f(cb, $($arg),*);
                }
            })
        }
    };
    ($name:ident, $field:ident, end, ($($arg:ident : $ty:ty),*)) => {
        unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard((), || {
                let Some(dev) = device_of(cb.as_raw()) else { return };
                if let Some(f) = dev.f.$field {
                    f(cb, $($arg),*);
                }
                render_pass_ended(&dev, cb);
            })
        }
    };
}

render_pass_hook!(cmd_begin_render_pass, cmd_begin_render_pass, begin,
    (info: *const vk::RenderPassBeginInfo<'_>, contents: vk::SubpassContents));
render_pass_hook!(cmd_begin_render_pass2, cmd_begin_render_pass2, begin,
    (info: *const vk::RenderPassBeginInfo<'_>, sub: *const vk::SubpassBeginInfo<'_>));
render_pass_hook!(cmd_begin_render_pass2_khr, cmd_begin_render_pass2_khr, begin,
    (info: *const vk::RenderPassBeginInfo<'_>, sub: *const vk::SubpassBeginInfo<'_>));
render_pass_hook!(cmd_end_render_pass, cmd_end_render_pass, end, ());
render_pass_hook!(cmd_end_render_pass2, cmd_end_render_pass2, end,
    (sub: *const vk::SubpassEndInfo<'_>));
render_pass_hook!(cmd_end_render_pass2_khr, cmd_end_render_pass2_khr, end,
    (sub: *const vk::SubpassEndInfo<'_>));
render_pass_hook!(cmd_begin_rendering, cmd_begin_rendering, begin,
    (info: *const vk::RenderingInfo<'_>));
render_pass_hook!(cmd_begin_rendering_khr, cmd_begin_rendering_khr, begin,
    (info: *const vk::RenderingInfo<'_>));
render_pass_hook!(cmd_end_rendering, cmd_end_rendering, end, ());
render_pass_hook!(cmd_end_rendering_khr, cmd_end_rendering_khr, end, ());

// ---- submission -----------------------------------------------------------------------------------

unsafe fn pass_index(p_next: *const c_void) -> u32 {
    let p = find_in_chain_mut(
        p_next as *mut c_void,
        vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR,
    ) as *const vk::PerformanceQuerySubmitInfoKHR<'_>;
    p.as_ref().map_or(0, |p| p.counter_pass_index)
}

/// Checks the batch's command buffers, then (after a successful submit) marks each performance query
/// they end as measured in `pass`. Returns the error to give the app, if any.
fn collect(st: &DevState, batches: &[(u32, Vec<u64>)]) -> Result<Vec<(u32, Op)>, vk::Result> {
    let mut ops = Vec::new();
    for (pass, cbs) in batches {
        for cb in cbs {
            let Some(c) = st.cbs.get(cb) else { continue };
            if let Some(v) = &c.violation {
                report(&format!(
                    "vkQueueSubmit refused: a command buffer broke a profiling-lock rule ({v})"
                ));
                return Err(vk::Result::ERROR_UNKNOWN);
            }
            ops.extend(c.ops.iter().map(|&o| (*pass, o)));
        }
    }
    Ok(ops)
}

fn apply(st: &mut DevState, ops: &[(u32, Op)]) {
    for &(pass, op) in ops {
        match op {
            Op::Reset { pool, first, count } => {
                if let Some(p) = st.pools.get_mut(&pool) {
                    apply_reset(p, first, count);
                }
            }
            Op::Query {
                pool,
                query,
                render_passes,
            } => {
                let Some(p) = st.pools.get_mut(&pool) else {
                    continue;
                };
                if pass >= p.plan.passes {
                    report(&format!(
                        "VUID-VkPerformanceQuerySubmitInfoKHR-counterPassIndex-03221: counterPassIndex {pass} is not below the {} passes of the query; the submit measured nothing",
                        p.plan.passes
                    ));
                    continue;
                }
                if let Some(q) = p.queries.get_mut(query as usize) {
                    q.passes_submitted |= 1 << pass.min(63);
                    q.render_passes = render_passes;
                }
            }
            Op::Copy { pool, first, count } => {
                let Some(p) = st.pools.get(&pool) else {
                    continue;
                };
                let all = p.all_passes();
                let end = first.saturating_add(count).min(p.count);
                if let Some(q) = (first.min(end)..end)
                    .find(|&q| p.queries[q as usize].passes_submitted & all != all)
                {
                    // Measured by this very submit (the copy follows the query in the same
                    // recording) counts; the values are right once every pass was submitted.
                    report_once("03234", &format!(
                        "VUID-vkCmdCopyQueryPoolResults-queryType-03234: a copy of performance query {q} was submitted before each of its {} passes was (passes submitted: mask {:#b}); it copies the last submitted measurement",
                        p.plan.passes,
                        p.queries[q as usize].passes_submitted
                    ));
                }
            }
        }
    }
}

unsafe extern "system" fn queue_submit(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(queue.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let submits: &[vk::SubmitInfo<'_>] = if n == 0 || p_submits.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p_submits, n as usize)
        };
        let batches: Vec<(u32, Vec<u64>)> = submits
            .iter()
            .map(|s| {
                let cbs = if s.command_buffer_count == 0 || s.p_command_buffers.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(s.p_command_buffers, s.command_buffer_count as usize)
                        .iter()
                        .map(|c| c.as_raw())
                        .collect()
                };
                (pass_index(s.p_next), cbs)
            })
            .collect();
        submit_with(&dev, &batches, || {
            let mut copy: Vec<vk::SubmitInfo<'_>> = submits.to_vec();
            let mut heads: Vec<*const c_void> = copy.iter().map(|s| s.p_next).collect();
            let restore = unlink_pass_infos(&mut heads);
            for (s, h) in copy.iter_mut().zip(heads) {
                s.p_next = h;
            }
            let r = (dev.f.queue_submit.expect("core vkQueueSubmit"))(
                queue,
                n,
                if copy.is_empty() {
                    p_submits
                } else {
                    copy.as_ptr()
                },
                fence,
            );
            relink(restore);
            r
        })
    })
}

/// Unlinks every VkPerformanceQuerySubmitInfoKHR from the pNext chains of `heads` (the driver below
/// does not know the extension, and a validation layer below would index its per-pass query state
/// with it); returns the links to put back after the call.
unsafe fn unlink_pass_infos(
    heads: &mut [*const c_void],
) -> Vec<(
    *mut vk::BaseOutStructure<'static>,
    *mut vk::BaseOutStructure<'static>,
)> {
    let mut restore = Vec::new();
    for head in heads.iter_mut() {
        while !head.is_null()
            && (*(*head as *const vk::BaseInStructure<'_>)).s_type
                == vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR
        {
            *head = (*(*head as *const vk::BaseInStructure<'_>)).p_next as *const c_void;
        }
        let mut prev = *head as *mut vk::BaseOutStructure<'static>;
        while !prev.is_null() {
            let next = (*prev).p_next;
            if !next.is_null()
                && (*next).s_type == vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR
            {
                restore.push((prev, next));
                (*prev).p_next = (*next).p_next;
            } else {
                prev = next;
            }
        }
    }
    restore
}

unsafe fn relink(
    restore: Vec<(
        *mut vk::BaseOutStructure<'static>,
        *mut vk::BaseOutStructure<'static>,
    )>,
) {
    for (p, old) in restore.into_iter().rev() {
        (*p).p_next = old;
    }
}

fn submit_with(
    dev: &Device,
    batches: &[(u32, Vec<u64>)],
    submit: impl FnOnce() -> vk::Result,
) -> vk::Result {
    let ops = match collect(&lock(&dev.st), batches) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let r = submit();
    if r == vk::Result::SUCCESS && !ops.is_empty() {
        apply(&mut lock(&dev.st), &ops);
    }
    r
}

unsafe fn submit2_batches(n: u32, p_submits: *const vk::SubmitInfo2<'_>) -> Vec<(u32, Vec<u64>)> {
    let submits: &[vk::SubmitInfo2<'_>] = if n == 0 || p_submits.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p_submits, n as usize)
    };
    submits
        .iter()
        .map(|s| {
            let cbs = if s.command_buffer_info_count == 0 || s.p_command_buffer_infos.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(
                    s.p_command_buffer_infos,
                    s.command_buffer_info_count as usize,
                )
                .iter()
                .map(|c| c.command_buffer.as_raw())
                .collect()
            };
            (pass_index(s.p_next), cbs)
        })
        .collect()
}

unsafe extern "system" fn queue_submit2(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    submit2_through(queue, n, p_submits, fence, |d| {
        d.f.queue_submit2.expect("vkQueueSubmit2")
    })
}

unsafe extern "system" fn queue_submit2_khr(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    submit2_through(queue, n, p_submits, fence, |d| {
        d.f.queue_submit2_khr.expect("vkQueueSubmit2KHR")
    })
}

/// vkQueueSubmit2 and its KHR alias: the pass-index structs are unlinked from a copy of the batches
/// before calling `next` of the driver, and relinked after.
unsafe fn submit2_through(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
    next: impl Fn(&Device) -> vk::PFN_vkQueueSubmit2,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(queue.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let batches = submit2_batches(n, p_submits);
        submit_with(&dev, &batches, || {
            let mut copy: Vec<vk::SubmitInfo2<'_>> = if n == 0 || p_submits.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p_submits, n as usize).to_vec()
            };
            let mut heads: Vec<*const c_void> = copy.iter().map(|s| s.p_next).collect();
            let restore = unlink_pass_infos(&mut heads);
            for (s, h) in copy.iter_mut().zip(heads) {
                s.p_next = h;
            }
            let ptr = if copy.is_empty() {
                p_submits
            } else {
                copy.as_ptr()
            };
            let r = (next(&dev))(queue, n, ptr, fence);
            relink(restore);
            r
        })
    })
}
