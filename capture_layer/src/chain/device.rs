//! Devices: vkCreateDevice (dispatch table, memory and queue properties, the device summary record,
//! a first calibration), vkDestroyDevice (pending query copies completed first), queues, and
//! debug object names.
//!
//! Depends on: `runtime`, `loader`, `query_copies` (completion at destroy), `queries::calibration`,
//! `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{cstr_field, cstr_list, next, raw, rec, NOT_PRESENT};
use crate::loader;
use crate::queries::calibration::calibrate;
use crate::query_copies::complete;
use crate::runtime::{self, guard, DeviceData};
use crate::tables::{DeviceInfo, InstanceData};
use ash::vk;
use format::record::{self, Record};
use std::ffi::{c_void, CStr};
use vkstream::DeviceTable;

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
            info: DeviceInfo {
                handle: device,
                physical,
                instance: inst,
                gdpa,
                table,
                extensions,
                calibrated,
                memory,
                queue_families,
                set_loader_data,
            },
            state: Default::default(),
            queries_seen: Default::default(),
            last_submit: Default::default(),
        };
        let Some(d) = runtime::register_device(data) else {
            runtime::log_once("devices", "too many live devices; this one is not captured");
            return;
        };
        if !runtime::recording() {
            return;
        }
        runtime::emit_device(device_summary(inst, physical, &d.queue_families, &d.memory));
        crate::target::check_device(ci);
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

// ==== object names ====

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
