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
//!
//! This file holds the shared state, the dispatch tables and the proc-address lookup; the intercepts
//! live by topic in `instance`, `device`, `pools`, `recording`, `submit` and `copy`.

mod copy;
mod device;
mod instance;
mod pools;
mod recording;
mod submit;

use crate::counters::{self, Capabilities, PassPlan, Source, CATALOG};
use crate::loader;
use ash::vk;
use ash::vk::Handle;
use device::{acquire_profiling_lock, create_device, destroy_device, release_profiling_lock};
use instance::{
    create_instance, destroy_instance, enumerate_counters, enumerate_device_extension_properties,
    get_features2, get_features2_khr, get_passes, get_properties2, get_properties2_khr,
};
use layer_support::entry::find_in_chain_mut;
use pools::{
    cmd_copy_query_pool_results, create_query_pool, destroy_query_pool, get_query_pool_results,
    reset_query_pool, reset_query_pool_ext,
};
use recording::{
    begin_command_buffer, cmd_begin_query, cmd_begin_query_indexed, cmd_begin_render_pass,
    cmd_begin_render_pass2, cmd_begin_render_pass2_khr, cmd_begin_rendering,
    cmd_begin_rendering_khr, cmd_end_query, cmd_end_query_indexed, cmd_end_render_pass,
    cmd_end_render_pass2, cmd_end_render_pass2_khr, cmd_end_rendering, cmd_end_rendering_khr,
    cmd_execute_commands, cmd_reset_query_pool, cmd_write_timestamp, end_command_buffer,
    free_command_buffers,
};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use submit::{queue_submit, queue_submit2, queue_submit2_khr};

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
