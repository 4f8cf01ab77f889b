//! The chain: how the loader reaches the layer. `get_instance_proc_addr`/`get_device_proc_addr`
//! hand out the hand-written hooks (the generated `hook_proc_addr`, from codegen's
//! `config::LAYER_HOOKS`), else the generated ones, else hide a command the
//! layer cannot record; `instance` and `device` hold creation, destruction and enumeration.
//!
//! Depends on: `generated` (whose hook table names every hand-written hook), `region`, `runtime`,
//! `hooks`. Nothing but the exported entry points (lib.rs) depends on `chain`.

#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::raw;
use crate::runtime;
use ash::vk;
use std::ffi::{c_char, CStr};
pub mod device;
pub mod instance;

// ==== proc-addr lookup ===============================================================================

type Void = vk::PFN_vkVoidFunction;

macro_rules! entry {
    ($f:path) => {
        Some(std::mem::transmute::<*const (), unsafe extern "system" fn()>($f as *const ()))
    };
}

/// The proc-address hooks under their command names, as the generated hook table
/// (`generated::intercept::hook_proc_addr`) names every hook.
pub(crate) use self::{
    get_device_proc_addr as vkGetDeviceProcAddr, get_instance_proc_addr as vkGetInstanceProcAddr,
};

/// Our entry for `name` given that the chain below provides it (`next` non-null), or NULL for commands the
/// layer cannot capture (logged once per name).
unsafe fn intercept_for(name: &CStr, next: Void) -> Void {
    next?;
    if let Some(f) = crate::generated::intercept::hook_proc_addr(name.to_bytes()) {
        return f;
    }
    if name.to_bytes() == crate::region::ENUMERATE {
        return next;
    }
    if let Some(f) = crate::generated::intercept::intercept_proc_addr(name) {
        return f;
    }
    let n = name.to_string_lossy();
    runtime::log_once(
        &format!("hide:{n}"),
        &format!("hiding {n}: the capture layer cannot record it"),
    );
    None
}

/// The layer's vkGetInstanceProcAddr. Handed out by address only: the exported symbol of the same name
/// (in lib.rs) would be interposed by libvulkan's own export when taken by address inside this library.
pub unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    p_name: *const c_char,
) -> Void {
    if p_name.is_null() {
        return None;
    }
    let name = CStr::from_ptr(p_name);
    match name.to_bytes() {
        b"vkGetInstanceProcAddr" => return entry!(get_instance_proc_addr),
        b"vkCreateInstance" => return entry!(instance::vkCreateInstance),
        _ => {}
    }
    if instance == vk::Instance::null() {
        return None;
    }
    let data = runtime::instance_data(raw(instance))?;
    let next = (data.gipa)(instance, p_name);
    // Pre-instance queries change nothing a replay needs: whatever the chain gives, unrecorded.
    if matches!(
        name.to_bytes(),
        b"vkEnumerateInstanceExtensionProperties"
            | b"vkEnumerateInstanceLayerProperties"
            | b"vkEnumerateInstanceVersion"
    ) {
        return next;
    }
    intercept_for(name, next)
}

/// The layer's vkGetDeviceProcAddr (see `get_instance_proc_addr` on why it is not the exported symbol).
pub unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    p_name: *const c_char,
) -> Void {
    if p_name.is_null() || device == vk::Device::null() {
        return None;
    }
    let name = CStr::from_ptr(p_name);
    if name.to_bytes() == b"vkGetDeviceProcAddr" {
        return entry!(get_device_proc_addr);
    }
    let data = runtime::device_data(raw(device))?;
    intercept_for(name, (data.gdpa)(device, p_name))
}
