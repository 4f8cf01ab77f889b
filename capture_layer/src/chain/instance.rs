//! Instances: vkCreateInstance (the first opens the trace, or a trimmed capture's tracking, which
//! is finalized at process exit; every later instance goes into it), vkDestroyInstance (the last
//! one alive flushes the trace: `runtime::instances_gone`), and the enumerations (device
//! extensions the layer cannot record, or the target device lacks, are hidden while recording).
//!
//! Depends on: `runtime`, `settings`, `loader`, `compat`, `query_copies` (flushed at exit), `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{cstr_list, next, raw, rec};
use crate::loader;
use crate::runtime::{self, guard};
use crate::tables::InstanceData;
use ash::vk;
use std::ffi::{c_char, CStr};
use vkstream::InstanceTable;

pub const LAYER_NAME: &CStr = c"VK_LAYER_QUARRY_capture";

// ==== instance ======================================================================================

pub unsafe extern "system" fn vkCreateInstance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    if p_create_info.is_null() || p_instance.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    let Some(gipa) = loader::take_instance_link(p_create_info) else {
        runtime::log_once(
            "no-link",
            "vkCreateInstance without loader link info; is the layer loaded by the loader?",
        );
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let create = gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr());
    let Some(create) = create else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let create: vk::PFN_vkCreateInstance = std::mem::transmute(create);
    let r = create(p_create_info, p_allocator, p_instance);
    if r != vk::Result::SUCCESS {
        return r;
    }
    guard("vkCreateInstance", || {
        let instance = *p_instance;
        let ci = &*p_create_info;
        let (api_version, app_name) = if ci.p_application_info.is_null() {
            (vk::API_VERSION_1_0, None)
        } else {
            let ai = &*ci.p_application_info;
            let name = (!ai.p_application_name.is_null())
                .then(|| {
                    CStr::from_ptr(ai.p_application_name)
                        .to_string_lossy()
                        .into_owned()
                })
                .filter(|n| !n.is_empty());
            (
                if ai.api_version == 0 {
                    vk::API_VERSION_1_0
                } else {
                    ai.api_version
                },
                name,
            )
        };
        let extensions = cstr_list(ci.pp_enabled_extension_names, ci.enabled_extension_count);
        let table = InstanceTable::load(gipa, instance);
        let data = InstanceData {
            handle: instance,
            gipa,
            table,
            api_version,
            extensions,
        };
        let Some(data) = runtime::register_instance(data) else {
            runtime::log_once(
                "instances",
                "too many live instances; this one is not captured",
            );
            return;
        };
        // The app's layer settings (VK_EXT_layer_settings) for this layer; the environment wins.
        let (layer_settings, warnings) = crate::settings::Given::from_chain(ci.p_next);
        for w in warnings {
            runtime::log_once(&w, &w);
        }
        if runtime::open_capture(
            &app_name.unwrap_or_else(crate::settings::exe_name),
            &layer_settings,
        ) {
            stay_loaded();
            register_atexit();
            crate::target::record();
        }
        // Nothing records now: nothing ever will for this instance (see `chain`'s header).
        super::set_transparent(data, !runtime::recording());
        // The loader's own chain elements are process-local pointers: keep them out of the trace.
        let mut copy = *ci;
        copy.p_next = loader::skip_loader_structs(ci.p_next);
        rec!(vkCreateInstance, r.as_raw(), |e| {
            vkstream::encode::vkCreateInstance(e, &copy, p_allocator, p_instance)
        });
    });
    r
}

/// Finalizes the trace at exit() (the layer stays loaded until then: `stay_loaded`); pending query
/// copies are only counted, the driver may be gone.
extern "C" fn at_exit() {
    // Never unwinds.
    let _ = std::panic::catch_unwind(|| {
        crate::query_copies::flush_pending_at_exit();
        runtime::finish("process exit");
    });
}

fn register_atexit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering a plain extern "C" fn. glibc runs handlers registered from a shared object
        // at dlclose as well, so were the layer unloaded after all, no handler would dangle.
        unsafe { libc::atexit(at_exit) };
    });
}

/// Keeps this library mapped until the process ends. The loader closes a layer's library
/// (dlclose) when the last instance that enabled it is destroyed; the capture outlives instances (the trace, its writer's
/// threads, the exit handler), and a process that makes another instance must find it as it was.
fn stay_loaded() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: dladdr on a function of this library; dlopen with RTLD_NOLOAD only marks the
        // already loaded object NODELETE (it takes a reference, never released: that is the point).
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            let here = stay_loaded as *const libc::c_void;
            if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
                runtime::log_once("stay-loaded", "cannot find the layer's own file (dladdr)");
                return;
            }
            let flags = libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE;
            if libc::dlopen(info.dli_fname, flags).is_null() {
                runtime::log_once(
                    "stay-loaded",
                    "cannot keep the layer loaded (dlopen RTLD_NODELETE); a capture may end when \
                     the last instance is destroyed",
                );
            }
        }
    });
}

pub unsafe extern "system" fn vkDestroyInstance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    if instance == vk::Instance::null() {
        return;
    }
    // Removed before calling down: the handle (and its dispatch key) is freed by the call.
    let Some(data) = runtime::unregister_instance(raw(instance)) else {
        return;
    };
    super::set_transparent(data, false);
    if let Some(f) = data.table.vkDestroyInstance {
        f(instance, p_allocator);
    }
    guard("vkDestroyInstance", || {
        rec!(vkDestroyInstance, 0, |e| {
            vkstream::encode::vkDestroyInstance(e, instance, p_allocator)
        });
        if runtime::live_instance_count() == 0 {
            runtime::instances_gone();
        }
    });
}

pub unsafe extern "system" fn vkEnumeratePhysicalDevices(
    instance: vk::Instance,
    p_count: *mut u32,
    p_devices: *mut vk::PhysicalDevice,
) -> vk::Result {
    let f = next!(
        runtime::instance_table(raw(instance)).vkEnumeratePhysicalDevices,
        vk::Result::ERROR_INITIALIZATION_FAILED
    );
    let r = f(instance, p_count, p_devices);
    guard("vkEnumeratePhysicalDevices", || {
        rec!(vkEnumeratePhysicalDevices, r.as_raw(), |e| {
            vkstream::encode::vkEnumeratePhysicalDevices(e, instance, p_count, p_devices)
        });
    });
    r
}

/// Whether the layer hides a device extension from the app (it could not record its commands).
fn hide_extension(name: &str) -> bool {
    crate::compat::hidden_extension(name)
}

pub unsafe extern "system" fn vkEnumerateDeviceExtensionProperties(
    physical: vk::PhysicalDevice,
    p_layer_name: *const c_char,
    p_count: *mut u32,
    p_props: *mut vk::ExtensionProperties,
) -> vk::Result {
    let f = next!(
        runtime::instance_table(raw(physical)).vkEnumerateDeviceExtensionProperties,
        vk::Result::ERROR_INITIALIZATION_FAILED
    );
    if !p_layer_name.is_null() {
        if CStr::from_ptr(p_layer_name) == LAYER_NAME {
            // This layer adds no extensions of its own.
            if p_count.is_null() {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            }
            *p_count = 0;
            return vk::Result::SUCCESS;
        }
        return f(physical, p_layer_name, p_count, p_props);
    }
    // Hidden only while recording: once the process stops, nothing is recorded again.
    if p_count.is_null() || !runtime::recording() {
        return f(physical, p_layer_name, p_count, p_props);
    }
    // Full list from below, filtered, then the usual count/array protocol towards the app.
    let mut all: Vec<vk::ExtensionProperties> = Vec::new();
    loop {
        let mut n = 0u32;
        let r = f(physical, std::ptr::null(), &mut n, std::ptr::null_mut());
        if r != vk::Result::SUCCESS {
            return r;
        }
        all.resize(n as usize, vk::ExtensionProperties::default());
        let r = f(physical, std::ptr::null(), &mut n, all.as_mut_ptr());
        if r == vk::Result::INCOMPLETE {
            continue;
        }
        if r != vk::Result::SUCCESS {
            return r;
        }
        all.truncate(n as usize);
        break;
    }
    let mut for_target = Vec::new();
    let kept: Vec<vk::ExtensionProperties> = all
        .into_iter()
        .filter(|p| {
            let name = p
                .extension_name_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let hide = hide_extension(&name);
            if hide {
                runtime::log_once(
                    &format!("hide-ext:{name}"),
                    &format!("hiding device extension {name}: not capturable"),
                );
            } else if crate::target::hides_extension(&name) {
                for_target.push(name);
                return false;
            }
            !hide
        })
        .collect();
    crate::target::log_hidden("device extensions", &for_target);
    let r = if p_props.is_null() {
        *p_count = kept.len() as u32;
        vk::Result::SUCCESS
    } else {
        let n = (*p_count as usize).min(kept.len());
        std::ptr::copy_nonoverlapping(kept.as_ptr(), p_props, n);
        *p_count = n as u32;
        if n < kept.len() {
            vk::Result::INCOMPLETE
        } else {
            vk::Result::SUCCESS
        }
    };
    guard("vkEnumerateDeviceExtensionProperties", || {
        rec!(vkEnumerateDeviceExtensionProperties, r.as_raw(), |e| {
            vkstream::encode::vkEnumerateDeviceExtensionProperties(
                e,
                physical,
                p_layer_name,
                p_count,
                p_props,
            )
        });
    });
    r
}

pub unsafe extern "system" fn vkEnumerateDeviceLayerProperties(
    physical: vk::PhysicalDevice,
    p_count: *mut u32,
    p_props: *mut vk::LayerProperties,
) -> vk::Result {
    let f = next!(
        runtime::instance_table(raw(physical)).vkEnumerateDeviceLayerProperties,
        vk::Result::ERROR_INITIALIZATION_FAILED
    );
    let r = f(physical, p_count, p_props);
    guard("vkEnumerateDeviceLayerProperties", || {
        rec!(vkEnumerateDeviceLayerProperties, r.as_raw(), |e| {
            vkstream::encode::vkEnumerateDeviceLayerProperties(e, physical, p_count, p_props)
        });
    });
    r
}
