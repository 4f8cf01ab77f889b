//! The chain: how the loader reaches the layer. `get_instance_proc_addr`/`get_device_proc_addr`
//! hand out the hand-written hooks (the generated `hook_proc_addr`, from codegen's
//! `config::LAYER_HOOKS`), else the generated ones, else hide a command the
//! layer cannot record; `instance` and `device` hold creation, destruction and enumeration.
//!
//! Transparency: an instance created while the process records nothing (disabled by
//! `QUARRY_CAPTURE_DISABLE` or the `disable` layer setting, or no trace could be opened) never
//! records, since a trace only opens at a vkCreateInstance. Its instance and its devices get the next
//! layer's own pointers for everything but the few hooks that keep the chain and the dispatch maps
//! (`KEPT`): no cost per call, nothing hidden. Instances created while recording get the intercepts,
//! and hide what cannot be recorded only while the process records (`runtime::recording`).
//!
//! Depends on: `generated` (whose hook table names every hand-written hook), `region`, `runtime`,
//! `hooks`. Nothing but the exported entry points (lib.rs) depends on `chain`.

#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::raw;
use crate::runtime;
use ash::vk;
use std::ffi::{c_char, CStr};
use std::sync::Mutex;
pub mod device;
pub mod instance;
pub mod physical;

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

// ==== transparency ===================================================================================

/// The transparent instances, by the address of their (leaked, never reused) `InstanceData`. Read at
/// proc-address lookups only, never per call.
static TRANSPARENT: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn key(data: &crate::tables::InstanceData) -> usize {
    data as *const _ as usize
}

/// Marks `data` transparent (or forgets it, at destruction).
pub(crate) fn set_transparent(data: &crate::tables::InstanceData, on: bool) {
    let mut t = TRANSPARENT.lock().unwrap_or_else(|e| e.into_inner());
    t.retain(|&k| k != key(data));
    if on {
        t.push(key(data));
    }
}

/// Whether lookups for `data`'s instance (and its devices) get the next layer's pointers: it was
/// created while nothing recorded, or the process stopped recording for good (a trace ends at the
/// frame range, a write error, or once every instance is gone; none reopens while one lives).
fn pass_through(data: &crate::tables::InstanceData) -> bool {
    !runtime::recording()
        || TRANSPARENT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key(data))
}

/// What a transparent instance or device still gets from the layer: the chain's own entry points and
/// the hooks that register and unregister handles in the dispatch maps.
const KEPT: &[&[u8]] = &[
    b"vkGetInstanceProcAddr",
    b"vkGetDeviceProcAddr",
    b"vkCreateInstance",
    b"vkDestroyInstance",
    b"vkCreateDevice",
    b"vkDestroyDevice",
];

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
    if pass_through(data) && !KEPT.contains(&name.to_bytes()) {
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
    let next = (data.gdpa)(device, p_name);
    if pass_through(data.instance) && !KEPT.contains(&name.to_bytes()) {
        return next;
    }
    intercept_for(name, next)
}
