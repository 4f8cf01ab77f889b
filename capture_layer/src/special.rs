//! Hand-written intercepts: the chain plumbing (instance/device creation, proc-addr lookup, enumeration)
//! and the commands that carry more than their parameters (memory, submits, waits, queries, frames).
//!
//! Pattern: call down first and return exactly what the driver returned; bookkeeping runs afterwards
//! inside `runtime::guard`, so a layer bug stops capturing instead of reaching the app.
#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::loader;
use crate::runtime::{self, capturing, guard, DeviceData, InstanceData};
use crate::state::{diff_pages, CopyOp, Mapping, Memory, PendingCopy, Pool, TemplateEntry};
use ash::vk;
use ash::vk::Handle;
use format::record::{self, FrameBoundary, QueryOpKind, Record};
use std::ffi::{c_char, c_void, CStr};
use vkstream::{DeviceTable, InstanceTable};

pub const LAYER_NAME: &CStr = c"VK_LAYER_QUARRY_capture";

/// Records the generic `Call` of `$name` with the generated encoder; evaluates to the call's seq.
macro_rules! rec {
    ($name:ident, $result:expr, |$e:ident| $body:expr) => {{
        // The generated constant, not a lookup by name cached in a static: one cache line
        // fewer for every call recorded here.
        runtime::record_call(vkstream::ids::$name, $result, |$e| {
            #[allow(unused_unsafe)]
            unsafe {
                $body
            }
        })
    }};
}

/// Records the `Call` of `$name` and its `QueryOp`s (`$kinds` on `$pool`, recorded in `$cb`, 0
/// for a host command) under one lock; evaluates to the call's seq.
macro_rules! rec_ops {
    ($name:ident, $result:expr, |$e:ident| $body:expr, $cb:expr, $pool:expr, $kinds:expr) => {{
        runtime::record_call_ops(
            vkstream::ids::$name,
            $result,
            |$e| {
                #[allow(unused_unsafe)]
                unsafe {
                    $body
                }
            },
            $cb,
            $pool,
            $kinds,
        )
    }};
}

/// The next layer's function, or return `$ret` when the chain below does not provide it.
macro_rules! next {
    ($f:expr) => {
        match $f {
            Some(f) => f,
            None => return,
        }
    };
    ($f:expr, $ret:expr) => {
        match $f {
            Some(f) => f,
            None => return $ret,
        }
    };
}

const NOT_PRESENT: vk::Result = vk::Result::ERROR_EXTENSION_NOT_PRESENT;

fn raw<H: Handle>(h: H) -> u64 {
    h.as_raw()
}

unsafe fn slice<'a, T>(p: *const T, n: u32) -> &'a [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n as usize)
    }
}

unsafe fn cstr_list(p: *const *const c_char, n: u32) -> Vec<String> {
    slice(p, n)
        .iter()
        .filter(|s| !s.is_null())
        .map(|&s| CStr::from_ptr(s).to_string_lossy().into_owned())
        .collect()
}

/// Walks a pNext chain for the first element with `s_type`.
unsafe fn find_in_chain(mut p: *const c_void, s_type: vk::StructureType) -> *const c_void {
    while !p.is_null() {
        let base = &*(p as *const vk::BaseInStructure<'_>);
        if base.s_type == s_type {
            return p;
        }
        p = base.p_next as *const c_void;
    }
    std::ptr::null()
}

// ==== proc-addr lookup ===============================================================================

type Void = vk::PFN_vkVoidFunction;

macro_rules! entry {
    ($f:path) => {
        Some(std::mem::transmute::<*const (), unsafe extern "system" fn()>($f as *const ()))
    };
}

/// Hand-written intercepts by name (they take precedence over generated ones).
pub unsafe fn lookup(name: &[u8]) -> Void {
    match name {
        b"vkGetInstanceProcAddr" => entry!(get_instance_proc_addr),
        b"vkGetDeviceProcAddr" => entry!(get_device_proc_addr),
        b"vkCreateInstance" => entry!(vkCreateInstance),
        b"vkDestroyInstance" => entry!(vkDestroyInstance),
        b"vkEnumeratePhysicalDevices" => entry!(vkEnumeratePhysicalDevices),
        b"vkEnumerateDeviceExtensionProperties" => entry!(vkEnumerateDeviceExtensionProperties),
        b"vkEnumerateDeviceLayerProperties" => entry!(vkEnumerateDeviceLayerProperties),
        b"vkCreateDevice" => entry!(vkCreateDevice),
        b"vkDestroyDevice" => entry!(vkDestroyDevice),
        b"vkGetDeviceQueue" => entry!(vkGetDeviceQueue),
        b"vkGetDeviceQueue2" => entry!(vkGetDeviceQueue2),
        b"vkAllocateMemory" => entry!(vkAllocateMemory),
        b"vkFreeMemory" => entry!(vkFreeMemory),
        b"vkMapMemory" => entry!(vkMapMemory),
        b"vkUnmapMemory" => entry!(vkUnmapMemory),
        b"vkFlushMappedMemoryRanges" => entry!(vkFlushMappedMemoryRanges),
        b"vkBindBufferMemory" => entry!(vkBindBufferMemory),
        b"vkBindBufferMemory2" => entry!(vkBindBufferMemory2),
        b"vkBindBufferMemory2KHR" => entry!(vkBindBufferMemory2KHR),
        b"vkBeginCommandBuffer" => entry!(vkBeginCommandBuffer),
        b"vkResetCommandBuffer" => entry!(vkResetCommandBuffer),
        b"vkQueueSubmit" => entry!(vkQueueSubmit),
        b"vkQueueSubmit2" => entry!(vkQueueSubmit2),
        b"vkQueueSubmit2KHR" => entry!(vkQueueSubmit2KHR),
        b"vkQueuePresentKHR" => entry!(vkQueuePresentKHR),
        b"vkQueueWaitIdle" => entry!(vkQueueWaitIdle),
        b"vkDeviceWaitIdle" => entry!(vkDeviceWaitIdle),
        b"vkWaitForFences" => entry!(vkWaitForFences),
        b"vkGetFenceStatus" => entry!(vkGetFenceStatus),
        b"vkCreateQueryPool" => entry!(vkCreateQueryPool),
        b"vkDestroyQueryPool" => entry!(vkDestroyQueryPool),
        b"vkGetQueryPoolResults" => entry!(vkGetQueryPoolResults),
        b"vkCmdCopyQueryPoolResults" => entry!(vkCmdCopyQueryPoolResults),
        b"vkCmdBeginQuery" => entry!(vkCmdBeginQuery),
        b"vkCmdEndQuery" => entry!(vkCmdEndQuery),
        b"vkCmdBeginQueryIndexedEXT" => entry!(vkCmdBeginQueryIndexedEXT),
        b"vkCmdEndQueryIndexedEXT" => entry!(vkCmdEndQueryIndexedEXT),
        b"vkCmdWriteTimestamp" => entry!(vkCmdWriteTimestamp),
        b"vkCmdWriteTimestamp2" => entry!(vkCmdWriteTimestamp2),
        b"vkCmdWriteTimestamp2KHR" => entry!(vkCmdWriteTimestamp2KHR),
        b"vkCmdResetQueryPool" => entry!(vkCmdResetQueryPool),
        b"vkResetQueryPool" => entry!(vkResetQueryPool),
        b"vkResetQueryPoolEXT" => entry!(vkResetQueryPoolEXT),
        b"vkAcquireProfilingLockKHR" => entry!(vkAcquireProfilingLockKHR),
        b"vkReleaseProfilingLockKHR" => entry!(vkReleaseProfilingLockKHR),
        b"vkGetCalibratedTimestampsEXT" => entry!(vkGetCalibratedTimestampsEXT),
        b"vkSetDebugUtilsObjectNameEXT" => entry!(vkSetDebugUtilsObjectNameEXT),
        b"vkCreateSwapchainKHR" => entry!(vkCreateSwapchainKHR),
        b"vkGetSwapchainImagesKHR" => entry!(vkGetSwapchainImagesKHR),
        b"vkAcquireNextImageKHR" => entry!(vkAcquireNextImageKHR),
        b"vkCmdWriteAccelerationStructuresPropertiesKHR" => {
            entry!(vkCmdWriteAccelerationStructuresPropertiesKHR)
        }
        b"vkCreateDescriptorUpdateTemplate" => entry!(vkCreateDescriptorUpdateTemplate),
        b"vkCreateDescriptorUpdateTemplateKHR" => entry!(vkCreateDescriptorUpdateTemplateKHR),
        b"vkUpdateDescriptorSetWithTemplate" => entry!(vkUpdateDescriptorSetWithTemplate),
        b"vkUpdateDescriptorSetWithTemplateKHR" => entry!(vkUpdateDescriptorSetWithTemplateKHR),
        b"vkCmdPushDescriptorSetWithTemplateKHR" => entry!(vkCmdPushDescriptorSetWithTemplateKHR),
        b"vkCmdBeginRenderPass" => entry!(vkCmdBeginRenderPass),
        b"vkCmdBeginRenderPass2" => entry!(vkCmdBeginRenderPass2),
        b"vkCmdBeginRenderPass2KHR" => entry!(vkCmdBeginRenderPass2KHR),
        b"vkCmdBeginRendering" => entry!(vkCmdBeginRendering),
        b"vkCmdBeginRenderingKHR" => entry!(vkCmdBeginRenderingKHR),
        _ => None,
    }
}

/// Our entry for `name` given that the chain below provides it (`next` non-null), or NULL for commands the
/// layer cannot capture (logged once per name).
unsafe fn intercept_for(name: &CStr, next: Void) -> Void {
    next?;
    if let Some(f) = lookup(name.to_bytes()) {
        return Some(f);
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
        b"vkCreateInstance" => return entry!(vkCreateInstance),
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
        if runtime::register_instance(data).is_none() {
            runtime::log_once(
                "instances",
                "too many live instances; this one is not captured",
            );
            return;
        }
        // The app's layer settings (VK_EXT_layer_settings) for this layer; the environment wins.
        let (layer_settings, warnings) = crate::settings::Given::from_chain(ci.p_next);
        for w in warnings {
            runtime::log_once(&w, &w);
        }
        runtime::open_capture(
            &app_name.unwrap_or_else(crate::settings::exe_name),
            &layer_settings,
        );
        // The loader's own chain elements are process-local pointers: keep them out of the trace.
        let mut copy = *ci;
        copy.p_next = loader::skip_loader_structs(ci.p_next);
        rec!(vkCreateInstance, r.as_raw(), |e| {
            vkstream::encode::vkCreateInstance(e, &copy, p_allocator, p_instance)
        });
    });
    r
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
    if let Some(f) = data.table.vkDestroyInstance {
        f(instance, p_allocator);
    }
    guard("vkDestroyInstance", || {
        rec!(vkDestroyInstance, 0, |e| {
            vkstream::encode::vkDestroyInstance(e, instance, p_allocator)
        });
        if runtime::live_instance_count() == 0 {
            runtime::finish("the last instance was destroyed");
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
    if p_count.is_null() {
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
            }
            !hide
        })
        .collect();
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

// ==== device ========================================================================================

pub unsafe extern "system" fn vkCreateDevice(
    physical: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    if p_create_info.is_null() || p_device.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    let Some(inst) = runtime::instance_data(raw(physical)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let set_loader_data = loader::device_loader_data_callback(p_create_info);
    let Some((gipa, gdpa)) = loader::take_device_link(p_create_info) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(create) = gipa(inst.handle, c"vkCreateDevice".as_ptr()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let create: vk::PFN_vkCreateDevice = std::mem::transmute(create);
    let r = create(physical, p_create_info, p_allocator, p_device);
    if r != vk::Result::SUCCESS {
        return r;
    }
    guard("vkCreateDevice", || {
        let device = *p_device;
        let ci = &*p_create_info;
        let extensions = cstr_list(ci.pp_enabled_extension_names, ci.enabled_extension_count);
        let table = DeviceTable::load(gdpa, device);
        let mut memory = vk::PhysicalDeviceMemoryProperties::default();
        if let Some(f) = inst.table.vkGetPhysicalDeviceMemoryProperties {
            f(physical, &mut memory);
        }
        let queue_families = queue_families(inst, physical);
        let calibrated = extensions
            .iter()
            .any(|e| e == "VK_EXT_calibrated_timestamps")
            && table.vkGetCalibratedTimestampsEXT.is_some()
            && calibration_domains_ok(inst, physical);
        let data = DeviceData {
            handle: device,
            physical,
            instance: inst,
            gdpa,
            table,
            extensions,
            calibrated,
            memory,
            queue_families,
            state: Default::default(),
            set_loader_data,
        };
        let Some(d) = runtime::register_device(data) else {
            runtime::log_once("devices", "too many live devices; this one is not captured");
            return;
        };
        if !runtime::recording() {
            return;
        }
        runtime::emit_device(device_summary(inst, physical, &d.queue_families, &d.memory));
        let mut copy = *ci;
        copy.p_next = loader::skip_loader_structs(ci.p_next);
        rec!(vkCreateDevice, r.as_raw(), |e| {
            vkstream::encode::vkCreateDevice(e, physical, &copy, p_allocator, p_device)
        });
        if d.calibrated {
            calibrate(d);
        } else {
            runtime::note(format!(
                "device {:#x}: the app did not enable VK_EXT_calibrated_timestamps (or the device lacks the \
                 DEVICE and CLOCK_MONOTONIC domains), so the layer does not call it; no Calibration records, GPU \
                 times use timestampPeriod from the device summary",
                raw(device)
            ));
        }
    });
    r
}

unsafe fn queue_families(
    inst: &InstanceData,
    physical: vk::PhysicalDevice,
) -> Vec<vk::QueueFamilyProperties> {
    let Some(f) = inst.table.vkGetPhysicalDeviceQueueFamilyProperties else {
        return Vec::new();
    };
    let mut n = 0;
    f(physical, &mut n, std::ptr::null_mut());
    let mut v = vec![vk::QueueFamilyProperties::default(); n as usize];
    f(physical, &mut n, v.as_mut_ptr());
    v.truncate(n as usize);
    v
}

unsafe fn calibration_domains_ok(inst: &InstanceData, physical: vk::PhysicalDevice) -> bool {
    let Some(f) = inst.table.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT else {
        return false;
    };
    let mut n = 0;
    if f(physical, &mut n, std::ptr::null_mut()) != vk::Result::SUCCESS {
        return false;
    }
    let mut v = vec![vk::TimeDomainKHR::default(); n as usize];
    if f(physical, &mut n, v.as_mut_ptr()) != vk::Result::SUCCESS {
        return false;
    }
    v.contains(&vk::TimeDomainKHR::DEVICE) && v.contains(&vk::TimeDomainKHR::CLOCK_MONOTONIC)
}

fn cstr_field(bytes: &[c_char]) -> String {
    let b: Vec<u8> = bytes
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}

unsafe fn device_summary(
    inst: &InstanceData,
    physical: vk::PhysicalDevice,
    families: &[vk::QueueFamilyProperties],
    memory: &vk::PhysicalDeviceMemoryProperties,
) -> record::DeviceSummary {
    let mut props = vk::PhysicalDeviceProperties::default();
    if let Some(f) = inst.table.vkGetPhysicalDeviceProperties {
        f(physical, &mut props);
    }
    let mut s = record::DeviceSummary {
        name: cstr_field(&props.device_name),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        driver_version: props.driver_version,
        api_version: props.api_version,
        pipeline_cache_uuid: props.pipeline_cache_uuid,
        timestamp_period_ns: props.limits.timestamp_period,
        ..Default::default()
    };
    // Driver and ID properties need vkGetPhysicalDeviceProperties2, valid only with an 1.1 instance and
    // device or the KHR extension enabled by the app.
    let p2 = if inst.api_version >= vk::API_VERSION_1_1 && props.api_version >= vk::API_VERSION_1_1
    {
        inst.table.vkGetPhysicalDeviceProperties2
    } else if inst
        .extensions
        .iter()
        .any(|e| e == "VK_KHR_get_physical_device_properties2")
    {
        inst.table.vkGetPhysicalDeviceProperties2KHR
    } else {
        None
    };
    if let Some(f) = p2 {
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut p = vk::PhysicalDeviceProperties2::default();
        // Driver properties are core in 1.2 only; ID properties are core in 1.1.
        id.p_next = if props.api_version >= vk::API_VERSION_1_2 {
            &mut driver as *mut _ as *mut c_void
        } else {
            std::ptr::null_mut()
        };
        p.p_next = &mut id as *mut _ as *mut c_void;
        f(physical, &mut p);
        s.device_uuid = id.device_uuid;
        if props.api_version >= vk::API_VERSION_1_2 {
            s.driver_id = driver.driver_id.as_raw() as u32;
            s.driver_name = cstr_field(&driver.driver_name);
            s.driver_info = cstr_field(&driver.driver_info);
        }
    }
    s.queue_families = families
        .iter()
        .map(|q| record::QueueFamilySummary {
            flags: q.queue_flags.as_raw(),
            queue_count: q.queue_count,
            timestamp_valid_bits: q.timestamp_valid_bits,
        })
        .collect();
    s.memory_types = memory.memory_types
        [..(memory.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES)]
        .iter()
        .map(|t| record::MemoryTypeSummary {
            property_flags: t.property_flags.as_raw(),
            heap_index: t.heap_index,
        })
        .collect();
    s.memory_heaps = memory.memory_heaps
        [..(memory.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS)]
        .iter()
        .map(|h| record::MemoryHeapSummary {
            size: h.size,
            flags: h.flags.as_raw(),
        })
        .collect();
    s
}

/// A GPU/host clock pair from vkGetCalibratedTimestampsEXT (only when the app enabled the extension).
fn calibrate(d: &DeviceData) {
    if !d.calibrated || !capturing() {
        return;
    }
    let Some(f) = d.table.vkGetCalibratedTimestampsEXT else {
        return;
    };
    let infos = [
        vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::DEVICE),
        vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::CLOCK_MONOTONIC),
    ];
    let mut ts = [0u64; 2];
    let mut deviation = 0u64;
    // SAFETY: arrays sized as declared; the extension is enabled on this device.
    let r = unsafe { f(d.handle, 2, infos.as_ptr(), ts.as_mut_ptr(), &mut deviation) };
    if r == vk::Result::SUCCESS {
        runtime::emit_plain(Record::Calibration(record::Calibration {
            device: raw(d.handle),
            host_ns: ts[1],
            gpu_ticks: ts[0],
            max_deviation_ns: deviation,
        }));
    }
}

pub unsafe extern "system" fn vkDestroyDevice(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    if device == vk::Device::null() {
        return;
    }
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    // The app must have waited for its work before destroying the device: every copy is complete.
    guard("vkDestroyDevice", || complete(d, |_| true));
    // The layer's own objects go before the device does.
    guard("vkDestroyDevice", || d.lock().copy_reader = None);
    runtime::unregister_device(raw(device));
    if let Some(f) = d.table.vkDestroyDevice {
        f(device, p_allocator);
    }
    guard("vkDestroyDevice", || {
        rec!(vkDestroyDevice, 0, |e| vkstream::encode::vkDestroyDevice(
            e,
            device,
            p_allocator
        ));
        *d.lock() = Default::default();
    });
}

pub unsafe extern "system" fn vkGetDeviceQueue(
    device: vk::Device,
    family: u32,
    index: u32,
    p_queue: *mut vk::Queue,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkGetDeviceQueue);
    f(device, family, index, p_queue);
    guard("vkGetDeviceQueue", || {
        if !p_queue.is_null() && *p_queue != vk::Queue::null() {
            d.lock().queues.insert(raw(*p_queue), family);
        }
        rec!(vkGetDeviceQueue, 0, |e| {
            vkstream::encode::vkGetDeviceQueue(e, device, family, index, p_queue)
        });
    });
}

pub unsafe extern "system" fn vkGetDeviceQueue2(
    device: vk::Device,
    p_info: *const vk::DeviceQueueInfo2<'_>,
    p_queue: *mut vk::Queue,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkGetDeviceQueue2);
    f(device, p_info, p_queue);
    guard("vkGetDeviceQueue2", || {
        if !p_info.is_null() && !p_queue.is_null() && *p_queue != vk::Queue::null() {
            d.lock()
                .queues
                .insert(raw(*p_queue), (*p_info).queue_family_index);
        }
        rec!(vkGetDeviceQueue2, 0, |e| {
            vkstream::encode::vkGetDeviceQueue2(e, device, p_info, p_queue)
        });
    });
}

// ==== host memory ===================================================================================

pub unsafe extern "system" fn vkAllocateMemory(
    device: vk::Device,
    p_info: *const vk::MemoryAllocateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_memory: *mut vk::DeviceMemory,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkAllocateMemory, NOT_PRESENT);
    let r = f(device, p_info, p_allocator, p_memory);
    guard("vkAllocateMemory", || {
        if r == vk::Result::SUCCESS && !p_info.is_null() {
            let info = &*p_info;
            let host_visible = d
                .memory
                .memory_types
                .get(info.memory_type_index as usize)
                .is_some_and(|t| {
                    t.property_flags
                        .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
                });
            d.lock().memories.insert(
                raw(*p_memory),
                Memory {
                    size: info.allocation_size,
                    type_index: info.memory_type_index,
                    host_visible,
                    mapped: None,
                },
            );
        }
        rec!(vkAllocateMemory, r.as_raw(), |e| {
            vkstream::encode::vkAllocateMemory(e, device, p_info, p_allocator, p_memory)
        });
    });
    r
}

pub unsafe extern "system" fn vkFreeMemory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkFreeMemory);
    {
        let mut st = d.lock();
        st.remove_memory(raw(memory));
        f(device, memory, p_allocator);
    }
    guard("vkFreeMemory", || {
        rec!(vkFreeMemory, 0, |e| vkstream::encode::vkFreeMemory(
            e,
            device,
            memory,
            p_allocator
        ));
    });
}

/// Writes `MemoryWrite`s for what changed in mapped memory since the last scan (`only`: these allocations).
/// The caller holds the device state lock, so no mapping changes meanwhile.
fn scan_memory(st: &mut crate::state::DeviceState, only: Option<&[u64]>) {
    if !capturing() {
        return;
    }
    // The TSC clock: clock_gettime would fence this scan's loads behind the driver's.
    let t0 = runtime::call_ns();
    let mut writes = Vec::new();
    let mut bytes = 0u64;
    let crate::state::DeviceState {
        memories, mapped, ..
    } = st;
    for &handle in mapped.iter() {
        if only.is_some_and(|o| !o.contains(&handle)) {
            continue;
        }
        let Some(map) = memories.get_mut(&handle).and_then(|m| m.mapped.as_mut()) else {
            continue;
        };
        if map.ptr.is_null() || map.size == 0 {
            continue;
        }
        // SAFETY: the mapping stays valid while the state lock is held (unmap/free take it).
        let live = unsafe { std::slice::from_raw_parts(map.ptr as *const u8, map.size as usize) };
        bytes += map.size;
        if map.shadow.len() != live.len() {
            // Mapped before capture started: the whole range is new to the trace.
            map.shadow = live.to_vec();
            writes.push((handle, map.offset, map.shadow.clone()));
            continue;
        }
        for (off, data) in diff_pages(live, &mut map.shadow) {
            writes.push((handle, map.offset + off as u64, data));
        }
    }
    runtime::emit_memory(writes, Some((bytes, runtime::call_ns().saturating_sub(t0))));
}

pub unsafe extern "system" fn vkMapMemory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    pp_data: *mut *mut c_void,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkMapMemory, NOT_PRESENT);
    // Held across the call: the layer's own read-back mapping never overlaps the app's.
    let mut st = d.lock();
    let r = f(device, memory, offset, size, flags, pp_data);
    guard("vkMapMemory", || {
        rec!(vkMapMemory, r.as_raw(), |e| vkstream::encode::vkMapMemory(
            e, device, memory, offset, size, flags, pp_data
        ));
        if r != vk::Result::SUCCESS || pp_data.is_null() {
            return;
        }
        let Some(m) = st.memories.get_mut(&raw(memory)) else {
            return;
        };
        let len = if size == vk::WHOLE_SIZE {
            m.size.saturating_sub(offset)
        } else {
            size
        };
        let ptr = *pp_data as *mut u8;
        let mut mapping = Mapping {
            ptr,
            offset,
            size: len,
            shadow: Vec::new(),
        };
        if capturing() && !ptr.is_null() {
            // The initial content the app sees, once; later scans send only changed pages.
            mapping.shadow = std::slice::from_raw_parts(ptr as *const u8, len as usize).to_vec();
            runtime::emit_memory(vec![(raw(memory), offset, mapping.shadow.clone())], None);
        }
        st.set_mapping(raw(memory), Some(mapping));
    });
    r
}

pub unsafe extern "system" fn vkUnmapMemory(device: vk::Device, memory: vk::DeviceMemory) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkUnmapMemory);
    let mut st = d.lock();
    guard("vkUnmapMemory", || {
        scan_memory(&mut st, Some(&[raw(memory)]))
    });
    f(device, memory);
    st.set_mapping(raw(memory), None);
    drop(st);
    guard("vkUnmapMemory", || {
        rec!(vkUnmapMemory, 0, |e| vkstream::encode::vkUnmapMemory(
            e, device, memory
        ));
    });
}

pub unsafe extern "system" fn vkFlushMappedMemoryRanges(
    device: vk::Device,
    count: u32,
    p_ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkFlushMappedMemoryRanges, NOT_PRESENT);
    guard("vkFlushMappedMemoryRanges", || {
        let handles: Vec<u64> = slice(p_ranges, count)
            .iter()
            .map(|r| raw(r.memory))
            .collect();
        scan_memory(&mut d.lock(), Some(&handles));
    });
    let r = f(device, count, p_ranges);
    guard("vkFlushMappedMemoryRanges", || {
        rec!(vkFlushMappedMemoryRanges, r.as_raw(), |e| {
            vkstream::encode::vkFlushMappedMemoryRanges(e, device, count, p_ranges)
        });
    });
    r
}

pub unsafe extern "system" fn vkBindBufferMemory(
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkBindBufferMemory, NOT_PRESENT);
    let r = f(device, buffer, memory, offset);
    guard("vkBindBufferMemory", || {
        if r == vk::Result::SUCCESS {
            d.lock().buffers.insert(raw(buffer), (raw(memory), offset));
        }
        rec!(vkBindBufferMemory, r.as_raw(), |e| {
            vkstream::encode::vkBindBufferMemory(e, device, buffer, memory, offset)
        });
    });
    r
}

unsafe fn bind_buffer_memory2(
    khr: bool,
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(
        if khr {
            d.table.vkBindBufferMemory2KHR
        } else {
            d.table.vkBindBufferMemory2
        },
        NOT_PRESENT
    );
    let r = f(device, count, p_infos);
    guard("vkBindBufferMemory2", || {
        if r == vk::Result::SUCCESS {
            let mut st = d.lock();
            for i in slice(p_infos, count) {
                st.buffers
                    .insert(raw(i.buffer), (raw(i.memory), i.memory_offset));
            }
        }
        if khr {
            rec!(vkBindBufferMemory2KHR, r.as_raw(), |e| {
                vkstream::encode::vkBindBufferMemory2KHR(e, device, count, p_infos)
            });
        } else {
            rec!(vkBindBufferMemory2, r.as_raw(), |e| {
                vkstream::encode::vkBindBufferMemory2(e, device, count, p_infos)
            });
        }
    });
    r
}

pub unsafe extern "system" fn vkBindBufferMemory2(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    bind_buffer_memory2(false, device, count, p_infos)
}

pub unsafe extern "system" fn vkBindBufferMemory2KHR(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    bind_buffer_memory2(true, device, count, p_infos)
}

// ==== command buffers ===============================================================================

pub unsafe extern "system" fn vkBeginCommandBuffer(
    cb: vk::CommandBuffer,
    p_info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkBeginCommandBuffer, NOT_PRESENT);
    let r = f(cb, p_info);
    guard("vkBeginCommandBuffer", || {
        // Beginning resets the buffer: its earlier query work will not run again.
        d.lock().cmdbufs.remove(&raw(cb));
        rec!(vkBeginCommandBuffer, r.as_raw(), |e| {
            vkstream::encode::vkBeginCommandBuffer(e, cb, p_info)
        });
    });
    r
}

pub unsafe extern "system" fn vkResetCommandBuffer(
    cb: vk::CommandBuffer,
    flags: vk::CommandBufferResetFlags,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkResetCommandBuffer, NOT_PRESENT);
    let r = f(cb, flags);
    guard("vkResetCommandBuffer", || {
        d.lock().cmdbufs.remove(&raw(cb));
        rec!(vkResetCommandBuffer, r.as_raw(), |e| {
            vkstream::encode::vkResetCommandBuffer(e, cb, flags)
        });
    });
    r
}

// ==== submits, present, waits =======================================================================

/// Bookkeeping after a successful submit of `batches` (command buffers, counter pass) on `queue`.
fn after_submit(
    d: &DeviceData,
    seq: Option<u64>,
    queue: u64,
    fence: u64,
    batches: Vec<(Vec<u64>, Option<u32>)>,
) {
    let t0 = runtime::prof::start();
    let host_ns = runtime::call_ns();
    let mut guard = d.lock();
    let st = &mut *guard;
    let family = st.queues.get(&queue).copied().unwrap_or(u32::MAX);
    st.submit_order += 1;
    let order = st.submit_order;
    if fence != 0 {
        st.fences.insert(fence, (queue, order));
    }
    for cb in batches.iter().flat_map(|(cbs, _)| cbs) {
        let Some(q) = st.cmdbufs.get(cb) else {
            continue;
        };
        // Resets recorded in the buffer take effect now (near enough for availability tracking).
        for &(pool, first, count) in &q.resets {
            if let Some(p) = st.pools.get_mut(&pool) {
                p.reset(first, count);
            }
        }
        st.pending.extend(q.copies.iter().map(|op| PendingCopy {
            op: op.clone(),
            queue,
            fence,
            order,
        }));
    }
    if let Some(seq) = seq {
        // The device state lock is taken before the capture's, as everywhere.
        runtime::submitted(|frame| {
            batches
                .into_iter()
                .map(move |(command_buffers, counter_pass)| {
                    Record::Submit(record::Submit {
                        seq,
                        queue,
                        queue_family: family,
                        command_buffers,
                        host_ns,
                        frame,
                        counter_pass,
                    })
                })
        });
    }
    drop(guard);
    runtime::prof::end(runtime::prof::SUBMIT, t0);
}

pub unsafe extern "system" fn vkQueueSubmit(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkQueueSubmit, NOT_PRESENT);
    // Host writes reach the trace before the submit that lets the GPU read them.
    guard("vkQueueSubmit", || scan_memory(&mut d.lock(), None));
    let r = f(queue, count, p_submits, fence);
    guard("vkQueueSubmit", || {
        let seq = rec!(vkQueueSubmit, r.as_raw(), |e| {
            vkstream::encode::vkQueueSubmit(e, queue, count, p_submits, fence)
        });
        if r != vk::Result::SUCCESS {
            return;
        }
        let batches = slice(p_submits, count)
            .iter()
            .map(|s| {
                let cbs = slice(s.p_command_buffers, s.command_buffer_count)
                    .iter()
                    .map(|&c| raw(c))
                    .collect();
                let perf = find_in_chain(
                    s.p_next,
                    vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR,
                ) as *const vk::PerformanceQuerySubmitInfoKHR<'_>;
                (cbs, perf.as_ref().map(|p| p.counter_pass_index))
            })
            .collect();
        after_submit(d, seq, raw(queue), raw(fence), batches);
    });
    r
}

unsafe fn queue_submit2(
    khr: bool,
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(
        if khr {
            d.table.vkQueueSubmit2KHR
        } else {
            d.table.vkQueueSubmit2
        },
        NOT_PRESENT
    );
    guard("vkQueueSubmit2", || scan_memory(&mut d.lock(), None));
    let r = f(queue, count, p_submits, fence);
    guard("vkQueueSubmit2", || {
        let seq = if khr {
            rec!(vkQueueSubmit2KHR, r.as_raw(), |e| {
                vkstream::encode::vkQueueSubmit2KHR(e, queue, count, p_submits, fence)
            })
        } else {
            rec!(vkQueueSubmit2, r.as_raw(), |e| {
                vkstream::encode::vkQueueSubmit2(e, queue, count, p_submits, fence)
            })
        };
        if r != vk::Result::SUCCESS {
            return;
        }
        let batches = slice(p_submits, count)
            .iter()
            .map(|s| {
                let cbs = slice(s.p_command_buffer_infos, s.command_buffer_info_count)
                    .iter()
                    .map(|c| raw(c.command_buffer))
                    .collect();
                let perf = find_in_chain(
                    s.p_next,
                    vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR,
                ) as *const vk::PerformanceQuerySubmitInfoKHR<'_>;
                (cbs, perf.as_ref().map(|p| p.counter_pass_index))
            })
            .collect();
        after_submit(d, seq, raw(queue), raw(fence), batches);
    });
    r
}

pub unsafe extern "system" fn vkQueueSubmit2(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    queue_submit2(false, queue, count, p_submits, fence)
}

pub unsafe extern "system" fn vkQueueSubmit2KHR(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    queue_submit2(true, queue, count, p_submits, fence)
}

pub unsafe extern "system" fn vkQueuePresentKHR(
    queue: vk::Queue,
    p_info: *const vk::PresentInfoKHR<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkQueuePresentKHR, NOT_PRESENT);
    let r = f(queue, p_info);
    guard("vkQueuePresentKHR", || {
        let seq = rec!(vkQueuePresentKHR, r.as_raw(), |e| {
            vkstream::encode::vkQueuePresentKHR(e, queue, p_info)
        });
        // Every present call ends the app's frame, whatever the swapchain's state.
        runtime::frame_boundary(FrameBoundary::Present, seq);
        calibrate(d);
    });
    r
}

/// Reads back every pending copy for which `done` holds, writes its `QueryCopy`, drops it.
fn complete(d: &'static DeviceData, done: impl Fn(&PendingCopy) -> bool) {
    let t0 = runtime::prof::start();
    complete_inner(d, done);
    runtime::prof::end(runtime::prof::WAIT, t0);
}

fn complete_inner(d: &'static DeviceData, done: impl Fn(&PendingCopy) -> bool) {
    let mut st = d.lock();
    if st.pending.is_empty() {
        return;
    }
    // Taken out in order, without new vectors: this runs at every wait.
    let mut ready = smallvec::SmallVec::<[PendingCopy; 4]>::new();
    let mut i = 0;
    while i < st.pending.len() {
        if done(&st.pending[i]) {
            ready.push(st.pending.remove(i));
        } else {
            i += 1;
        }
    }
    if !capturing() {
        return;
    }
    for p in ready {
        let data = read_back(d, &mut st, &p.op);
        let op = p.op;
        runtime::emit_plain(Record::QueryCopy(record::QueryCopy {
            seq: op.seq,
            command_buffer: op.command_buffer,
            pool: op.pool,
            first: op.first,
            count: op.count,
            dst_buffer: op.dst_buffer,
            dst_offset: op.dst_offset,
            stride: op.stride,
            flags: op.flags,
            host_ns: runtime::call_ns(),
            data,
        }));
    }
}

/// Bytes one query's results occupy in a vkGetQueryPoolResults / copy layout.
fn result_size(pool: Option<&Pool>, flags: u32) -> u64 {
    let width = if flags & vk::QueryResultFlags::TYPE_64.as_raw() != 0 {
        8
    } else {
        4
    };
    let Some(p) = pool else { return width };
    if p.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() {
        return 8 * p.counters as u64;
    }
    let extra = (flags & vk::QueryResultFlags::WITH_AVAILABILITY.as_raw() != 0) as u64
        + (flags & vk::QueryResultFlags::WITH_STATUS_KHR.as_raw() != 0) as u64;
    width * (p.values_per_query() as u64 + extra)
}

/// Staging kept for query-copy destinations read through the GPU (copies larger than this get
/// a reader of their own size).
const COPY_STAGING: u64 = 64 << 10;

/// The destination range of a query copy, read from the app's mapping or through a short-lived mapping of
/// our own (the state lock keeps the app from mapping it meanwhile). Empty when the memory is not host
/// visible.
fn read_back(d: &'static DeviceData, st: &mut crate::state::DeviceState, op: &CopyOp) -> Vec<u8> {
    let elem = result_size(st.pools.get(&op.pool), op.flags);
    let len = op
        .stride
        .saturating_mul(op.count.saturating_sub(1) as u64)
        .saturating_add(elem);
    if op.count == 0 {
        return Vec::new();
    }
    let Some(&(memory, buffer_offset)) = st.buffers.get(&op.dst_buffer) else {
        return Vec::new();
    };
    let Some(m) = st.memories.get(&memory) else {
        return Vec::new();
    };
    let start = buffer_offset + op.dst_offset;
    if start.saturating_add(len) > m.size {
        return Vec::new();
    }
    if !m.host_visible || crate::readback::forced() {
        // Device-local destination: copied out through the GPU (the submit that wrote it is done).
        let (size, type_index) = (m.size, m.type_index);
        let reader = match st.copy_reader.take() {
            Some(r) if r.fits(len) => Ok(r),
            _ => {
                let queues: Vec<(u64, u32)> = st.queues.iter().map(|(q, f)| (*q, *f)).collect();
                // SAFETY: the device is live; its queues are the app's own.
                unsafe { crate::readback::Reader::new(d, &queues, len.max(COPY_STAGING)) }
            }
        };
        // SAFETY: the device is live, the memory too (state lock held), and its writer completed.
        let read = reader.and_then(|mut r| {
            let read = unsafe { r.read(memory, size, type_index, start, len) };
            if read.is_ok() {
                st.copy_reader = Some(r);
            }
            read
        });
        return read.unwrap_or_else(|e| {
            runtime::log_once(
                "copy-readback",
                &format!(
                    "a vkCmdCopyQueryPoolResults destination could not be read back ({e}); its contents are not recorded"
                ),
            );
            Vec::new()
        });
    }
    if let Some(map) = &m.mapped {
        if start >= map.offset && start + len <= map.offset + map.size {
            // SAFETY: inside the live mapping.
            return unsafe {
                std::slice::from_raw_parts(map.ptr.add((start - map.offset) as usize), len as usize)
                    .to_vec()
            };
        }
        return Vec::new();
    }
    let (Some(map), Some(unmap)) = (d.table.vkMapMemory, d.table.vkUnmapMemory) else {
        return Vec::new();
    };
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: memory is unmapped (checked under the lock the app's map calls also take).
    unsafe {
        if map(
            d.handle,
            vk::DeviceMemory::from_raw(memory),
            start,
            len,
            vk::MemoryMapFlags::empty(),
            &mut p,
        ) != vk::Result::SUCCESS
            || p.is_null()
        {
            return Vec::new();
        }
        let v = std::slice::from_raw_parts(p as *const u8, len as usize).to_vec();
        unmap(d.handle, vk::DeviceMemory::from_raw(memory));
        v
    }
}

pub unsafe extern "system" fn vkQueueWaitIdle(queue: vk::Queue) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkQueueWaitIdle, NOT_PRESENT);
    let r = f(queue);
    guard("vkQueueWaitIdle", || {
        let seq = rec!(vkQueueWaitIdle, r.as_raw(), |e| {
            vkstream::encode::vkQueueWaitIdle(e, queue)
        });
        if r == vk::Result::SUCCESS {
            complete(d, |p| p.queue == raw(queue));
            runtime::frame_boundary(FrameBoundary::QueueWaitIdle, seq);
        }
    });
    r
}

pub unsafe extern "system" fn vkDeviceWaitIdle(device: vk::Device) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkDeviceWaitIdle, NOT_PRESENT);
    let r = f(device);
    guard("vkDeviceWaitIdle", || {
        let seq = rec!(vkDeviceWaitIdle, r.as_raw(), |e| {
            vkstream::encode::vkDeviceWaitIdle(e, device)
        });
        if r == vk::Result::SUCCESS {
            complete(d, |_| true);
            runtime::frame_boundary(FrameBoundary::DeviceWaitIdle, seq);
        }
    });
    r
}

/// Fences now known signaled: their submits and every earlier submit on the same queue completed.
fn fences_signaled(d: &'static DeviceData, fences: &[u64]) {
    let marks: smallvec::SmallVec<[(u64, u64); 8]> = {
        let st = d.lock();
        fences
            .iter()
            .filter_map(|f| st.fences.get(f).copied())
            .collect()
    };
    if marks.is_empty() {
        return;
    }
    complete(d, |p| {
        marks
            .iter()
            .any(|&(q, order)| p.queue == q && p.order <= order)
    });
}

pub unsafe extern "system" fn vkWaitForFences(
    device: vk::Device,
    count: u32,
    p_fences: *const vk::Fence,
    wait_all: vk::Bool32,
    timeout: u64,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkWaitForFences, NOT_PRESENT);
    let r = f(device, count, p_fences, wait_all, timeout);
    guard("vkWaitForFences", || {
        let seq = rec!(vkWaitForFences, r.as_raw(), |e| {
            vkstream::encode::vkWaitForFences(e, device, count, p_fences, wait_all, timeout)
        });
        if r != vk::Result::SUCCESS {
            return;
        }
        let all = slice(p_fences, count);
        let signaled: smallvec::SmallVec<[u64; 8]> = if wait_all != 0 || all.len() == 1 {
            all.iter().map(|&f| raw(f)).collect()
        } else if let Some(status) = d.table.vkGetFenceStatus {
            all.iter()
                .filter(|&&f| status(device, f) == vk::Result::SUCCESS)
                .map(|&f| raw(f))
                .collect()
        } else {
            smallvec::SmallVec::new()
        };
        fences_signaled(d, &signaled);
        runtime::frame_boundary(FrameBoundary::FenceWait, seq);
    });
    r
}

pub unsafe extern "system" fn vkGetFenceStatus(device: vk::Device, fence: vk::Fence) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkGetFenceStatus, NOT_PRESENT);
    let r = f(device, fence);
    guard("vkGetFenceStatus", || {
        rec!(vkGetFenceStatus, r.as_raw(), |e| {
            vkstream::encode::vkGetFenceStatus(e, device, fence)
        });
        if r == vk::Result::SUCCESS {
            fences_signaled(d, &[raw(fence)]);
        }
    });
    r
}

/// At process exit the driver may already be gone: pending copies are only counted, not read.
pub fn flush_pending_at_exit() {
    // try_lock: at exit another thread may be stopped inside the layer holding a device lock.
    let pending: usize = runtime::live_devices()
        .iter()
        .filter_map(|d| d.state.try_lock().map(|st| st.pending.len()))
        .sum();
    if pending > 0 {
        runtime::note(format!(
            "{pending} vkCmdCopyQueryPoolResults destinations were not read back: the app exited without waiting \
             for their submits"
        ));
    }
}

// ==== queries =======================================================================================

unsafe fn perf_counters(
    d: &DeviceData,
    family: u32,
    indices: &[u32],
) -> Vec<record::PerfCounterDesc> {
    let Some(f) = d
        .instance
        .table
        .vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR
    else {
        return Vec::new();
    };
    let mut n = 0u32;
    if f(
        d.physical,
        family,
        &mut n,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    ) != vk::Result::SUCCESS
    {
        return Vec::new();
    }
    let mut counters = vec![vk::PerformanceCounterKHR::default(); n as usize];
    let mut descs = vec![vk::PerformanceCounterDescriptionKHR::default(); n as usize];
    if f(
        d.physical,
        family,
        &mut n,
        counters.as_mut_ptr(),
        descs.as_mut_ptr(),
    ) != vk::Result::SUCCESS
    {
        return Vec::new();
    }
    indices
        .iter()
        .filter_map(|&i| {
            let c = counters.get(i as usize)?;
            let dsc = descs.get(i as usize)?;
            Some(record::PerfCounterDesc {
                uuid: c.uuid,
                name: cstr_field(&dsc.name),
                category: cstr_field(&dsc.category),
                description: cstr_field(&dsc.description),
                unit: c.unit.as_raw() as u32,
                storage: c.storage.as_raw() as u32,
                scope: c.scope.as_raw() as u32,
            })
        })
        .collect()
}

pub unsafe extern "system" fn vkCreateQueryPool(
    device: vk::Device,
    p_info: *const vk::QueryPoolCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_pool: *mut vk::QueryPool,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkCreateQueryPool, NOT_PRESENT);
    let r = f(device, p_info, p_allocator, p_pool);
    guard("vkCreateQueryPool", || {
        let seq = rec!(vkCreateQueryPool, r.as_raw(), |e| {
            vkstream::encode::vkCreateQueryPool(e, device, p_info, p_allocator, p_pool)
        });
        if r != vk::Result::SUCCESS || p_info.is_null() {
            return;
        }
        let info = &*p_info;
        let pool = raw(*p_pool);
        let perf = find_in_chain(
            info.p_next,
            vk::StructureType::QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR,
        ) as *const vk::QueryPoolPerformanceCreateInfoKHR<'_>;
        let (perf_queue_family, perf_counters, n_counters) = match perf.as_ref() {
            Some(p) => {
                let idx = slice(p.p_counter_indices, p.counter_index_count);
                (
                    Some(p.queue_family_index),
                    perf_counters(d, p.queue_family_index, idx),
                    p.counter_index_count,
                )
            }
            None => (None, Vec::new(), 0),
        };
        let stats = if info.query_type == vk::QueryType::PIPELINE_STATISTICS {
            info.pipeline_statistics.as_raw()
        } else {
            0
        };
        d.lock().pools.insert(
            pool,
            Pool {
                query_type: info.query_type.as_raw(),
                count: info.query_count,
                pipeline_statistics: stats,
                counters: n_counters,
                seen_available: vec![false; info.query_count as usize],
            },
        );
        if let Some(seq) = seq {
            runtime::emit_plain(Record::QueryPool(record::QueryPoolInfo {
                seq,
                device: raw(device),
                pool,
                query_type: info.query_type.as_raw(),
                query_count: info.query_count,
                pipeline_statistics: stats,
                perf_queue_family,
                perf_counters,
            }));
        }
    });
    r
}

pub unsafe extern "system" fn vkDestroyQueryPool(
    device: vk::Device,
    pool: vk::QueryPool,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkDestroyQueryPool);
    f(device, pool, p_allocator);
    guard("vkDestroyQueryPool", || {
        d.lock().pools.remove(&raw(pool));
        rec!(vkDestroyQueryPool, 0, |e| {
            vkstream::encode::vkDestroyQueryPool(e, device, pool, p_allocator)
        });
    });
}

pub unsafe extern "system" fn vkGetQueryPoolResults(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    data_size: usize,
    p_data: *mut c_void,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkGetQueryPoolResults, NOT_PRESENT);
    let r = f(device, pool, first, count, data_size, p_data, stride, flags);
    // Also while a trimmed capture only tracks state: results define none, and a query first seen
    // available then is reported at the first results call after the trim point.
    if !runtime::capturing() {
        return r;
    }
    let host_ns = runtime::call_ns();
    let t0 = runtime::prof::start();
    guard("vkGetQueryPoolResults", || {
        let cmd = vkstream::ids::vkGetQueryPoolResults;
        let data: &[u8] = if p_data.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p_data as *const u8, data_size)
        };
        let fl = flags.as_raw();
        // Queries seen available for the first time (on the stack: a results call runs once per
        // frame or more, and usually for a handful of queries).
        let mut newly = smallvec::SmallVec::<[u32; 32]>::new();
        {
            let mut st = d.lock();
            if let Some(p) = st.pools.get_mut(&raw(pool)) {
                let width = if fl & vk::QueryResultFlags::TYPE_64.as_raw() != 0 {
                    8
                } else {
                    4
                };
                let flagged = fl
                    & (vk::QueryResultFlags::WITH_AVAILABILITY.as_raw()
                        | vk::QueryResultFlags::WITH_STATUS_KHR.as_raw())
                    != 0
                    && p.query_type != vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw();
                let values = p.values_per_query() as usize;
                for i in 0..count {
                    let q = first + i;
                    let available = if flagged {
                        // The availability (or status) word follows the values.
                        let at = i as usize * stride as usize + values * width;
                        match data.get(at..at + width) {
                            Some(w) => w.iter().any(|&b| b != 0),
                            None => false,
                        }
                    } else {
                        r == vk::Result::SUCCESS
                    };
                    if let Some(seen) = p.seen_available.get_mut(q as usize) {
                        if available && !*seen {
                            *seen = true;
                            newly.push(q);
                        }
                    }
                }
            }
        }
        let mut results = format::QueryResultsRef {
            seq: 0,
            thread: 0,
            device: raw(device),
            pool: raw(pool),
            first,
            count,
            stride,
            flags: fl,
            result: r.as_raw(),
            host_ns,
            data,
        };
        runtime::record_query_results(
            cmd,
            r.as_raw(),
            |e| {
                vkstream::encode::vkGetQueryPoolResults(
                    e, device, pool, first, count, data_size, p_data, stride, flags,
                )
            },
            &mut results,
            &newly,
        );
    });
    runtime::prof::end(runtime::prof::RESULTS, t0);
    r
}

pub unsafe extern "system" fn vkCmdCopyQueryPoolResults(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    dst: vk::Buffer,
    dst_offset: vk::DeviceSize,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdCopyQueryPoolResults);
    f(cb, pool, first, count, dst, dst_offset, stride, flags);
    guard("vkCmdCopyQueryPoolResults", || {
        let (dst_buffer, raw_flags) = (raw(dst), flags.as_raw());
        let seq = rec_ops!(
            vkCmdCopyQueryPoolResults,
            0,
            |e| vkstream::encode::vkCmdCopyQueryPoolResults(
                e, cb, pool, first, count, dst, dst_offset, stride, flags,
            ),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Copy {
                first,
                count,
                dst_buffer,
                dst_offset,
                stride,
                flags: raw_flags,
            }]
        );
        let Some(seq) = seq else { return };
        let op = CopyOp {
            seq,
            command_buffer: raw(cb),
            pool: raw(pool),
            first,
            count,
            dst_buffer,
            dst_offset,
            stride,
            flags: raw_flags,
        };
        d.lock().cmdbufs.entry(raw(cb)).or_default().copies.push(op);
    });
}

pub unsafe extern "system" fn vkCmdBeginQuery(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdBeginQuery);
    f(cb, pool, query, flags);
    guard("vkCmdBeginQuery", || {
        rec_ops!(
            vkCmdBeginQuery,
            0,
            |e| vkstream::encode::vkCmdBeginQuery(e, cb, pool, query, flags),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Begin {
                query,
                flags: flags.as_raw(),
                index: 0,
            }]
        );
    });
}

pub unsafe extern "system" fn vkCmdEndQuery(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdEndQuery);
    f(cb, pool, query);
    guard("vkCmdEndQuery", || {
        rec_ops!(
            vkCmdEndQuery,
            0,
            |e| vkstream::encode::vkCmdEndQuery(e, cb, pool, query),
            raw(cb),
            raw(pool),
            &[QueryOpKind::End { query, index: 0 }]
        );
    });
}

pub unsafe extern "system" fn vkCmdBeginQueryIndexedEXT(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
    index: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdBeginQueryIndexedEXT);
    f(cb, pool, query, flags, index);
    guard("vkCmdBeginQueryIndexedEXT", || {
        rec_ops!(
            vkCmdBeginQueryIndexedEXT,
            0,
            |e| vkstream::encode::vkCmdBeginQueryIndexedEXT(e, cb, pool, query, flags, index),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Begin {
                query,
                flags: flags.as_raw(),
                index,
            }]
        );
    });
}

pub unsafe extern "system" fn vkCmdEndQueryIndexedEXT(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    index: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdEndQueryIndexedEXT);
    f(cb, pool, query, index);
    guard("vkCmdEndQueryIndexedEXT", || {
        rec_ops!(
            vkCmdEndQueryIndexedEXT,
            0,
            |e| vkstream::encode::vkCmdEndQueryIndexedEXT(e, cb, pool, query, index),
            raw(cb),
            raw(pool),
            &[QueryOpKind::End { query, index }]
        );
    });
}

pub unsafe extern "system" fn vkCmdWriteTimestamp(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags,
    pool: vk::QueryPool,
    query: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdWriteTimestamp);
    f(cb, stage, pool, query);
    guard("vkCmdWriteTimestamp", || {
        rec_ops!(
            vkCmdWriteTimestamp,
            0,
            |e| vkstream::encode::vkCmdWriteTimestamp(e, cb, stage, pool, query),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Timestamp {
                query,
                stage: stage.as_raw() as u64,
                sync2: false,
            }]
        );
    });
}

unsafe fn write_timestamp2(
    khr: bool,
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags2,
    pool: vk::QueryPool,
    query: u32,
) {
    let t = runtime::device_table(raw(cb));
    let f = next!(if khr {
        t.vkCmdWriteTimestamp2KHR
    } else {
        t.vkCmdWriteTimestamp2
    });
    f(cb, stage, pool, query);
    guard("vkCmdWriteTimestamp2", || {
        let kinds = [QueryOpKind::Timestamp {
            query,
            stage: stage.as_raw(),
            sync2: true,
        }];
        if khr {
            rec_ops!(
                vkCmdWriteTimestamp2KHR,
                0,
                |e| vkstream::encode::vkCmdWriteTimestamp2KHR(e, cb, stage, pool, query),
                raw(cb),
                raw(pool),
                &kinds
            );
        } else {
            rec_ops!(
                vkCmdWriteTimestamp2,
                0,
                |e| vkstream::encode::vkCmdWriteTimestamp2(e, cb, stage, pool, query),
                raw(cb),
                raw(pool),
                &kinds
            );
        }
    });
}

pub unsafe extern "system" fn vkCmdWriteTimestamp2(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags2,
    pool: vk::QueryPool,
    query: u32,
) {
    write_timestamp2(false, cb, stage, pool, query)
}

pub unsafe extern "system" fn vkCmdWriteTimestamp2KHR(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags2,
    pool: vk::QueryPool,
    query: u32,
) {
    write_timestamp2(true, cb, stage, pool, query)
}

pub unsafe extern "system" fn vkCmdResetQueryPool(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdResetQueryPool);
    f(cb, pool, first, count);
    guard("vkCmdResetQueryPool", || {
        rec_ops!(
            vkCmdResetQueryPool,
            0,
            |e| vkstream::encode::vkCmdResetQueryPool(e, cb, pool, first, count),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Reset { first, count }]
        );
        d.lock()
            .cmdbufs
            .entry(raw(cb))
            .or_default()
            .resets
            .push((raw(pool), first, count));
    });
}

unsafe fn reset_query_pool(
    ext: bool,
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(if ext {
        d.table.vkResetQueryPoolEXT
    } else {
        d.table.vkResetQueryPool
    });
    f(device, pool, first, count);
    guard("vkResetQueryPool", || {
        if let Some(p) = d.lock().pools.get_mut(&raw(pool)) {
            p.reset(first, count);
        }
        let kinds = [QueryOpKind::Reset { first, count }];
        if ext {
            rec_ops!(
                vkResetQueryPoolEXT,
                0,
                |e| vkstream::encode::vkResetQueryPoolEXT(e, device, pool, first, count),
                0,
                raw(pool),
                &kinds
            );
        } else {
            rec_ops!(
                vkResetQueryPool,
                0,
                |e| vkstream::encode::vkResetQueryPool(e, device, pool, first, count),
                0,
                raw(pool),
                &kinds
            );
        }
    });
}

pub unsafe extern "system" fn vkResetQueryPool(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    reset_query_pool(false, device, pool, first, count)
}

pub unsafe extern "system" fn vkResetQueryPoolEXT(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    reset_query_pool(true, device, pool, first, count)
}

pub unsafe extern "system" fn vkCmdWriteAccelerationStructuresPropertiesKHR(
    cb: vk::CommandBuffer,
    count: u32,
    p_structures: *const vk::AccelerationStructureKHR,
    query_type: vk::QueryType,
    pool: vk::QueryPool,
    first_query: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdWriteAccelerationStructuresPropertiesKHR);
    f(cb, count, p_structures, query_type, pool, first_query);
    guard("vkCmdWriteAccelerationStructuresPropertiesKHR", || {
        let kinds: Vec<QueryOpKind> = (0..count)
            .map(|i| QueryOpKind::Write {
                query: first_query + i,
            })
            .collect();
        rec_ops!(
            vkCmdWriteAccelerationStructuresPropertiesKHR,
            0,
            |e| vkstream::encode::vkCmdWriteAccelerationStructuresPropertiesKHR(
                e,
                cb,
                count,
                p_structures,
                query_type,
                pool,
                first_query,
            ),
            raw(cb),
            raw(pool),
            &kinds
        );
    });
}

pub unsafe extern "system" fn vkAcquireProfilingLockKHR(
    device: vk::Device,
    p_info: *const vk::AcquireProfilingLockInfoKHR<'_>,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkAcquireProfilingLockKHR,
        NOT_PRESENT
    );
    let r = f(device, p_info);
    guard("vkAcquireProfilingLockKHR", || {
        rec!(vkAcquireProfilingLockKHR, r.as_raw(), |e| {
            vkstream::encode::vkAcquireProfilingLockKHR(e, device, p_info)
        });
    });
    r
}

pub unsafe extern "system" fn vkReleaseProfilingLockKHR(device: vk::Device) {
    let f = next!(runtime::device_table(raw(device)).vkReleaseProfilingLockKHR);
    f(device);
    guard("vkReleaseProfilingLockKHR", || {
        rec!(vkReleaseProfilingLockKHR, 0, |e| {
            vkstream::encode::vkReleaseProfilingLockKHR(e, device)
        });
    });
}

pub unsafe extern "system" fn vkGetCalibratedTimestampsEXT(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::CalibratedTimestampInfoKHR<'_>,
    p_timestamps: *mut u64,
    p_max_deviation: *mut u64,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkGetCalibratedTimestampsEXT,
        NOT_PRESENT
    );
    let r = f(device, count, p_infos, p_timestamps, p_max_deviation);
    guard("vkGetCalibratedTimestampsEXT", || {
        rec!(vkGetCalibratedTimestampsEXT, r.as_raw(), |e| {
            vkstream::encode::vkGetCalibratedTimestampsEXT(
                e,
                device,
                count,
                p_infos,
                p_timestamps,
                p_max_deviation,
            )
        });
        if r != vk::Result::SUCCESS || p_timestamps.is_null() {
            return;
        }
        // The app's own samples are calibration points too, when they pair the device and monotonic clocks.
        let infos = slice(p_infos, count);
        let ts = std::slice::from_raw_parts(p_timestamps, count as usize);
        let at = |dom| {
            infos
                .iter()
                .position(|i| i.time_domain == dom)
                .map(|i| ts[i])
        };
        if let (Some(gpu), Some(host)) = (
            at(vk::TimeDomainKHR::DEVICE),
            at(vk::TimeDomainKHR::CLOCK_MONOTONIC),
        ) {
            runtime::emit_plain(Record::Calibration(record::Calibration {
                device: raw(device),
                host_ns: host,
                gpu_ticks: gpu,
                max_deviation_ns: if p_max_deviation.is_null() {
                    0
                } else {
                    *p_max_deviation
                },
            }));
        }
    });
    r
}

pub unsafe extern "system" fn vkSetDebugUtilsObjectNameEXT(
    device: vk::Device,
    p_info: *const vk::DebugUtilsObjectNameInfoEXT<'_>,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkSetDebugUtilsObjectNameEXT,
        NOT_PRESENT
    );
    let r = f(device, p_info);
    guard("vkSetDebugUtilsObjectNameEXT", || {
        rec!(vkSetDebugUtilsObjectNameEXT, r.as_raw(), |e| {
            vkstream::encode::vkSetDebugUtilsObjectNameEXT(e, device, p_info)
        });
        if r == vk::Result::SUCCESS && runtime::recording() && !p_info.is_null() {
            let i = &*p_info;
            let name = if i.p_object_name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(i.p_object_name)
                    .to_string_lossy()
                    .into_owned()
            };
            runtime::emit_plain(Record::DebugName(record::DebugName {
                handle: i.object_handle,
                object_type: i.object_type.as_raw(),
                name,
            }));
        }
    });
    r
}

// ==== swapchain =====================================================================================

pub unsafe extern "system" fn vkCreateSwapchainKHR(
    device: vk::Device,
    p_info: *const vk::SwapchainCreateInfoKHR<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_swapchain: *mut vk::SwapchainKHR,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkCreateSwapchainKHR,
        NOT_PRESENT
    );
    let r = f(device, p_info, p_allocator, p_swapchain);
    guard("vkCreateSwapchainKHR", || {
        runtime::note_swapchain();
        rec!(vkCreateSwapchainKHR, r.as_raw(), |e| {
            vkstream::encode::vkCreateSwapchainKHR(e, device, p_info, p_allocator, p_swapchain)
        });
    });
    r
}

pub unsafe extern "system" fn vkGetSwapchainImagesKHR(
    device: vk::Device,
    swapchain: vk::SwapchainKHR,
    p_count: *mut u32,
    p_images: *mut vk::Image,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkGetSwapchainImagesKHR,
        NOT_PRESENT
    );
    let r = f(device, swapchain, p_count, p_images);
    guard("vkGetSwapchainImagesKHR", || {
        rec!(vkGetSwapchainImagesKHR, r.as_raw(), |e| {
            vkstream::encode::vkGetSwapchainImagesKHR(e, device, swapchain, p_count, p_images)
        });
    });
    r
}

pub unsafe extern "system" fn vkAcquireNextImageKHR(
    device: vk::Device,
    swapchain: vk::SwapchainKHR,
    timeout: u64,
    semaphore: vk::Semaphore,
    fence: vk::Fence,
    p_index: *mut u32,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkAcquireNextImageKHR,
        NOT_PRESENT
    );
    let r = f(device, swapchain, timeout, semaphore, fence, p_index);
    guard("vkAcquireNextImageKHR", || {
        rec!(vkAcquireNextImageKHR, r.as_raw(), |e| {
            vkstream::encode::vkAcquireNextImageKHR(
                e, device, swapchain, timeout, semaphore, fence, p_index,
            )
        });
    });
    r
}

// ==== descriptor update templates ===================================================================

unsafe fn create_template(
    khr: bool,
    device: vk::Device,
    p_info: *const vk::DescriptorUpdateTemplateCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_template: *mut vk::DescriptorUpdateTemplate,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(
        if khr {
            d.table.vkCreateDescriptorUpdateTemplateKHR
        } else {
            d.table.vkCreateDescriptorUpdateTemplate
        },
        NOT_PRESENT
    );
    let r = f(device, p_info, p_allocator, p_template);
    guard("vkCreateDescriptorUpdateTemplate", || {
        if r == vk::Result::SUCCESS && !p_info.is_null() {
            let info = &*p_info;
            let entries = slice(
                info.p_descriptor_update_entries,
                info.descriptor_update_entry_count,
            )
            .iter()
            .map(|e| TemplateEntry {
                binding: e.dst_binding,
                array_element: e.dst_array_element,
                count: e.descriptor_count,
                descriptor_type: e.descriptor_type.as_raw(),
                offset: e.offset,
                stride: e.stride,
            })
            .collect();
            d.lock().templates.insert(raw(*p_template), entries);
        }
        if khr {
            rec!(vkCreateDescriptorUpdateTemplateKHR, r.as_raw(), |e| {
                vkstream::encode::vkCreateDescriptorUpdateTemplateKHR(
                    e,
                    device,
                    p_info,
                    p_allocator,
                    p_template,
                )
            });
        } else {
            rec!(vkCreateDescriptorUpdateTemplate, r.as_raw(), |e| {
                vkstream::encode::vkCreateDescriptorUpdateTemplate(
                    e,
                    device,
                    p_info,
                    p_allocator,
                    p_template,
                )
            });
        }
    });
    r
}

pub unsafe extern "system" fn vkCreateDescriptorUpdateTemplate(
    device: vk::Device,
    p_info: *const vk::DescriptorUpdateTemplateCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_template: *mut vk::DescriptorUpdateTemplate,
) -> vk::Result {
    create_template(false, device, p_info, p_allocator, p_template)
}

pub unsafe extern "system" fn vkCreateDescriptorUpdateTemplateKHR(
    device: vk::Device,
    p_info: *const vk::DescriptorUpdateTemplateCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_template: *mut vk::DescriptorUpdateTemplate,
) -> vk::Result {
    create_template(true, device, p_info, p_allocator, p_template)
}

/// The bytes a template update reads from `p_data`, per the template's recorded entries.
unsafe fn template_bytes(
    d: &DeviceData,
    template: vk::DescriptorUpdateTemplate,
    p_data: *const c_void,
) -> Option<Vec<u8>> {
    let size = crate::state::template_data_size(d.lock().templates.get(&raw(template))?);
    if p_data.is_null() {
        return Some(Vec::new());
    }
    Some(std::slice::from_raw_parts(p_data as *const u8, size).to_vec())
}

unsafe fn update_with_template(
    khr: bool,
    device: vk::Device,
    set: vk::DescriptorSet,
    template: vk::DescriptorUpdateTemplate,
    p_data: *const c_void,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(if khr {
        d.table.vkUpdateDescriptorSetWithTemplateKHR
    } else {
        d.table.vkUpdateDescriptorSetWithTemplate
    });
    f(device, set, template, p_data);
    guard("vkUpdateDescriptorSetWithTemplate", || {
        let Some(bytes) = template_bytes(d, template, p_data) else {
            runtime::fail(
                "vkUpdateDescriptorSetWithTemplate with a template the layer did not see created",
            );
            return;
        };
        let handles = [raw(device), raw(set), raw(template)];
        if khr {
            rec!(vkUpdateDescriptorSetWithTemplateKHR, 0, |e| {
                crate::compat::encode_template_call(e, &handles, None, &bytes)
            });
        } else {
            rec!(vkUpdateDescriptorSetWithTemplate, 0, |e| {
                crate::compat::encode_template_call(e, &handles, None, &bytes)
            });
        }
    });
}

pub unsafe extern "system" fn vkUpdateDescriptorSetWithTemplate(
    device: vk::Device,
    set: vk::DescriptorSet,
    template: vk::DescriptorUpdateTemplate,
    p_data: *const c_void,
) {
    update_with_template(false, device, set, template, p_data)
}

pub unsafe extern "system" fn vkUpdateDescriptorSetWithTemplateKHR(
    device: vk::Device,
    set: vk::DescriptorSet,
    template: vk::DescriptorUpdateTemplate,
    p_data: *const c_void,
) {
    update_with_template(true, device, set, template, p_data)
}

pub unsafe extern "system" fn vkCmdPushDescriptorSetWithTemplateKHR(
    cb: vk::CommandBuffer,
    template: vk::DescriptorUpdateTemplate,
    layout: vk::PipelineLayout,
    set: u32,
    p_data: *const c_void,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdPushDescriptorSetWithTemplateKHR);
    f(cb, template, layout, set, p_data);
    guard("vkCmdPushDescriptorSetWithTemplateKHR", || {
        let Some(bytes) = template_bytes(d, template, p_data) else {
            runtime::fail("vkCmdPushDescriptorSetWithTemplateKHR with a template the layer did not see created");
            return;
        };
        let handles = [raw(cb), raw(template), raw(layout)];
        rec!(vkCmdPushDescriptorSetWithTemplateKHR, 0, |e| {
            crate::compat::encode_template_call(e, &handles, Some(set), &bytes)
        });
    });
}

// ---- render pass begins: per-region counters (VK_ARM_performance_counters_by_region) ---------

/// Writes a `RegionCounters` record for the begin call `seq` when `chain` asks for per-region
/// counters.
unsafe fn region_counters(seq: Option<u64>, cb: vk::CommandBuffer, chain: *const c_void) {
    let (Some(seq), Some((counter_addresses, serialize_regions, counter_indices))) =
        (seq, crate::region::find(chain))
    else {
        return;
    };
    runtime::emit_plain(Record::RegionCounters(record::RegionCounters {
        seq,
        command_buffer: raw(cb),
        counter_addresses,
        serialize_regions,
        counter_indices,
    }));
}

pub unsafe extern "system" fn vkCmdBeginRenderPass(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    contents: vk::SubpassContents,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdBeginRenderPass);
    f(cb, p_begin, contents);
    guard("vkCmdBeginRenderPass", || {
        let seq = rec!(vkCmdBeginRenderPass, 0, |e| {
            vkstream::encode::vkCmdBeginRenderPass(e, cb, p_begin, contents)
        });
        if let Some(b) = p_begin.as_ref() {
            region_counters(seq, cb, b.p_next);
        }
    });
}

unsafe fn begin_render_pass2(
    khr: bool,
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    p_subpass: *const vk::SubpassBeginInfo<'_>,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(if khr {
        d.table.vkCmdBeginRenderPass2KHR
    } else {
        d.table.vkCmdBeginRenderPass2
    });
    f(cb, p_begin, p_subpass);
    guard("vkCmdBeginRenderPass2", || {
        let seq = if khr {
            rec!(vkCmdBeginRenderPass2KHR, 0, |e| {
                vkstream::encode::vkCmdBeginRenderPass2KHR(e, cb, p_begin, p_subpass)
            })
        } else {
            rec!(vkCmdBeginRenderPass2, 0, |e| {
                vkstream::encode::vkCmdBeginRenderPass2(e, cb, p_begin, p_subpass)
            })
        };
        if let Some(b) = p_begin.as_ref() {
            region_counters(seq, cb, b.p_next);
        }
    });
}

pub unsafe extern "system" fn vkCmdBeginRenderPass2(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    p_subpass: *const vk::SubpassBeginInfo<'_>,
) {
    begin_render_pass2(false, cb, p_begin, p_subpass)
}

pub unsafe extern "system" fn vkCmdBeginRenderPass2KHR(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    p_subpass: *const vk::SubpassBeginInfo<'_>,
) {
    begin_render_pass2(true, cb, p_begin, p_subpass)
}

unsafe fn begin_rendering(khr: bool, cb: vk::CommandBuffer, p_info: *const vk::RenderingInfo<'_>) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(if khr {
        d.table.vkCmdBeginRenderingKHR
    } else {
        d.table.vkCmdBeginRendering
    });
    f(cb, p_info);
    guard("vkCmdBeginRendering", || {
        let seq = if khr {
            rec!(vkCmdBeginRenderingKHR, 0, |e| {
                vkstream::encode::vkCmdBeginRenderingKHR(e, cb, p_info)
            })
        } else {
            rec!(vkCmdBeginRendering, 0, |e| {
                vkstream::encode::vkCmdBeginRendering(e, cb, p_info)
            })
        };
        if let Some(i) = p_info.as_ref() {
            region_counters(seq, cb, i.p_next);
        }
    });
}

pub unsafe extern "system" fn vkCmdBeginRendering(
    cb: vk::CommandBuffer,
    p_info: *const vk::RenderingInfo<'_>,
) {
    begin_rendering(false, cb, p_info)
}

pub unsafe extern "system" fn vkCmdBeginRenderingKHR(
    cb: vk::CommandBuffer,
    p_info: *const vk::RenderingInfo<'_>,
) {
    begin_rendering(true, cb, p_info)
}
