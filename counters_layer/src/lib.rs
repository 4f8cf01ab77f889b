//! `VK_LAYER_QUARRY_counters`: VK_KHR_performance_query on any driver, emulated with core queries.
//!
//! Code map:
//! - `counters`: the counter catalog (units, scopes, UUIDs) and the pass plan;
//! - `layer`: the intercepts (instance/device chains, extension and feature advertising, query pools,
//!   command recording, submits, results, the profiling lock); `layer::copy`: vkCmdCopyQueryPoolResults
//!   on performance pools (a compute dispatch of `shaders/resolve.comp`, checked-in SPIR-V regenerated
//!   by `shaders/build.sh`, resolves durations on the GPU);
//! - `loader`: the loader's chain structs and dispatch keys;
//! - `launch`: writing a manifest so other tools can load the layer via `VK_ADD_LAYER_PATH`.
//!
//! Invariants: nothing panics across `extern "system"` (intercepts catch and report); devices whose app
//! did not enable VK_KHR_performance_query see every call passed straight through.

// The crate (and so the library file) is named after the layer, as loaders expect.
#![allow(non_snake_case)]

pub mod counters;
pub mod launch;
mod layer;
mod loader;

use ash::vk;

/// Layer name as in the manifest.
pub const LAYER_NAME: &str = layer_support::counters::LAYER_NAME;

/// Environment variable: counters measured per pass (positive integer, default 2).
pub const PER_PASS_ENV: &str = "QUARRY_COUNTERS_PER_PASS";
/// Comma-separated counter names the layer does not list (acts out a GPU that lacks them).
pub const HIDE_ENV: &str = "QUARRY_COUNTERS_HIDE";

/// Writes this layer's manifest (absolute library path) into `dir`; see [`launch::LayerDir`] for a
/// self-cleaning temporary directory.
pub fn write_manifest(dir: &std::path::Path) -> Result<std::path::PathBuf, launch::LaunchError> {
    launch::write_manifest(dir, &launch::find_layer_library()?)
}

/// Exported for loaders that look the symbol up instead of negotiating.
///
/// # Safety
/// Vulkan entry point: valid handle (or null) and NUL-terminated name.
#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    p_name: *const std::ffi::c_char,
) -> vk::PFN_vkVoidFunction {
    layer::get_instance_proc_addr(instance, p_name)
}

/// Exported for loaders that look the symbol up instead of negotiating.
///
/// # Safety
/// Vulkan entry point: valid handle and NUL-terminated name.
#[no_mangle]
pub unsafe extern "system" fn vkGetDeviceProcAddr(
    device: vk::Device,
    p_name: *const std::ffi::c_char,
) -> vk::PFN_vkVoidFunction {
    layer::get_device_proc_addr(device, p_name)
}

/// Loader/layer interface negotiation: this layer speaks version 2.
///
/// # Safety
/// Called by the loader with a valid struct.
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p: *mut loader::NegotiateLayerInterface,
) -> vk::Result {
    let Some(s) = p.as_mut() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if s.s_type != loader::LAYER_NEGOTIATE_INTERFACE_STRUCT || s.loader_layer_interface_version < 2
    {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    s.loader_layer_interface_version = 2;
    // The internal functions, not the exported symbols: those may resolve to libvulkan's exports.
    s.pfn_get_instance_proc_addr = Some(layer::get_instance_proc_addr);
    s.pfn_get_device_proc_addr = Some(layer::get_device_proc_addr);
    s.pfn_get_physical_device_proc_addr = None;
    vk::Result::SUCCESS
}
