//! The chain: how the loader reaches the layer. `get_instance_proc_addr`/`get_device_proc_addr`
//! hand out the hand-written intercepts (`lookup`), else the generated ones, else hide a command the
//! layer cannot record; `instance` and `device` hold creation, destruction and enumeration.
//!
//! Depends on: every intercept folder (the lookup names them all), `generated`, `region`, `runtime`,
//! `hooks`. Nothing but the exported entry points (lib.rs) depends on `chain`.

#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::raw;
use crate::runtime::{self};
use ash::vk;
use std::ffi::{c_char, CStr};
pub mod device;
pub mod instance;

use self::device::*;
use self::instance::*;
use crate::memory::*;
use crate::queries::calibration::*;
use crate::queries::commands::*;
use crate::queries::pools::*;
use crate::queries::regions::*;
use crate::query_copies::*;
use crate::submit::*;
use crate::templates::*;
use crate::wsi::*;

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
