//! quarry's capture layer, `VK_LAYER_QUARRY_capture`.
//!
//! Loaded by the Vulkan loader (interface version 2) between the app and the driver, it records every
//! call into a trace file (see `runtime`), plus what queries returned to the app. Code map:
//! - `loader`: the loader's chain structs and dispatch keys;
//! - `runtime`: dispatch lookup, the trace writer, sequencing, frames, finalization;
//! - `special`: hand-written intercepts (chain plumbing, memory, submits, waits, queries);
//! - `generated`: one intercept per remaining command, written by `codegen`;
//! - `state`: per-device tracking (mapped memory shadows, buffer bindings, query pools);
//! - `launch`: running a program with the layer enabled (used by `quarry capture`).

// The crate (and so the library file) is named after the layer, as loaders expect.
#![allow(non_snake_case)]

mod compat;
pub mod generated;
mod keymap;
pub mod launch;
mod loader;
mod readback;
mod region;
pub mod runtime;
pub mod settings;
mod special;
pub mod state;
mod tracker;

use ash::vk;

/// Exported for loaders that look the symbol up instead of negotiating.
///
/// # Safety
/// Vulkan entry point: valid handle (or null) and NUL-terminated name.
#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    p_name: *const std::ffi::c_char,
) -> vk::PFN_vkVoidFunction {
    special::get_instance_proc_addr(instance, p_name)
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
    special::get_device_proc_addr(device, p_name)
}

/// Layer name as in the manifest.
pub const LAYER_NAME: &str = "VK_LAYER_QUARRY_capture";

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
    s.pfn_get_instance_proc_addr = Some(special::get_instance_proc_addr);
    s.pfn_get_device_proc_addr = Some(special::get_device_proc_addr);
    s.pfn_get_physical_device_proc_addr = None;
    vk::Result::SUCCESS
}
