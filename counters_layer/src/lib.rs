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

// vkNegotiateLoaderLayerInterfaceVersion, vkGetInstanceProcAddr and vkGetDeviceProcAddr.
layer_support::export_entry_points!(layer::get_instance_proc_addr, layer::get_device_proc_addr);
