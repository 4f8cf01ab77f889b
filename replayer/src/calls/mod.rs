//! Per-call replay: the commands the replayer handles by hand, one function per command in a
//! module per topic, and [`generic`] (the generated dispatch) for everything else.
//!
//! Dependencies point one way: the engine calls [`replay_call`]; these modules use the session
//! and the generated dispatch, never the engine.
#![allow(non_snake_case)] // one function per command, named after it

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::Call;

use crate::error::ReplayError;
use crate::session::Session;

mod descriptors;
mod device;
mod instance;
mod memory;
mod queries;
mod submit;
mod wsi;

pub(crate) fn other(msg: impl Into<String>) -> ReplayError {
    ReplayError::Other(msg.into())
}

/// Replays one decoded call. `rec` carries the capture's result code.
///
/// # Safety
/// The session's handles must be those the trace created so far (the engine guarantees the order).
pub(crate) unsafe fn replay_call(
    s: &mut Session<'_>,
    call: &Call,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    use Call as C;
    match call {
        C::vkCreateInstance(p) => instance::vkCreateInstance(s, call, p, rec),
        C::vkDestroyInstance(p) => instance::vkDestroyInstance(s, call, p, rec),
        C::vkEnumeratePhysicalDevices(p) => instance::vkEnumeratePhysicalDevices(s, call, p, rec),
        C::vkCreateDebugUtilsMessengerEXT(p) => {
            instance::vkCreateDebugUtilsMessengerEXT(s, call, p, rec)
        }
        C::vkCreateDebugReportCallbackEXT(p) => {
            instance::vkCreateDebugReportCallbackEXT(s, call, p, rec)
        }
        C::vkCreateDevice(p) => device::vkCreateDevice(s, call, p, rec),
        C::vkDestroyDevice(p) => device::vkDestroyDevice(s, call, p, rec),
        C::vkGetDeviceQueue(p) => device::vkGetDeviceQueue(s, call, p, rec),
        C::vkGetDeviceQueue2(p) => device::vkGetDeviceQueue2(s, call, p, rec),
        C::vkCreateCommandPool(p) => device::vkCreateCommandPool(s, call, p, rec),
        C::vkWaitForFences(p) => device::vkWaitForFences(s, call, p, rec),
        C::vkGetFenceStatus(p) => device::vkGetFenceStatus(s, call, p, rec),
        C::vkQueueWaitIdle(p) => device::vkQueueWaitIdle(s, call, p, rec),
        C::vkDeviceWaitIdle(p) => device::vkDeviceWaitIdle(s, call, p, rec),
        C::vkAllocateMemory(p) => memory::vkAllocateMemory(s, call, p, rec),
        C::vkFreeMemory(p) => memory::vkFreeMemory(s, call, p, rec),
        C::vkMapMemory(p) => memory::vkMapMemory(s, call, p, rec),
        C::vkUnmapMemory(p) => memory::vkUnmapMemory(s, call, p, rec),
        C::vkBindBufferMemory(p) => memory::vkBindBufferMemory(s, call, p, rec),
        C::vkBindImageMemory(p) => memory::vkBindImageMemory(s, call, p, rec),
        C::vkBindBufferMemory2(p) | C::vkBindBufferMemory2KHR(p) => {
            memory::vkBindBufferMemory2(s, call, p, rec)
        }
        C::vkBindImageMemory2(p) | C::vkBindImageMemory2KHR(p) => {
            memory::vkBindImageMemory2(s, call, p, rec)
        }
        C::vkCreateQueryPool(p) => queries::vkCreateQueryPool(s, call, p, rec),
        C::vkDestroyQueryPool(p) => queries::vkDestroyQueryPool(s, call, p, rec),
        C::vkResetQueryPool(p) | C::vkResetQueryPoolEXT(p) => {
            queries::vkResetQueryPool(s, call, p, rec)
        }
        C::vkCmdResetQueryPool(p) => queries::vkCmdResetQueryPool(s, call, p, rec),
        C::vkCmdBeginQuery(p) => queries::vkCmdBeginQuery(s, call, p, rec),
        C::vkCmdEndQuery(p) => queries::vkCmdEndQuery(s, call, p, rec),
        C::vkCmdBeginQueryIndexedEXT(p) => queries::vkCmdBeginQueryIndexedEXT(s, call, p, rec),
        C::vkCmdEndQueryIndexedEXT(p) => queries::vkCmdEndQueryIndexedEXT(s, call, p, rec),
        C::vkCmdWriteTimestamp(p) => queries::vkCmdWriteTimestamp(s, call, p, rec),
        C::vkCmdWriteTimestamp2(p) | C::vkCmdWriteTimestamp2KHR(p) => {
            queries::vkCmdWriteTimestamp2(s, call, p, rec)
        }
        C::vkCmdCopyQueryPoolResults(p) => queries::vkCmdCopyQueryPoolResults(s, call, p, rec),
        C::vkCreateDescriptorUpdateTemplate(p) | C::vkCreateDescriptorUpdateTemplateKHR(p) => {
            descriptors::vkCreateDescriptorUpdateTemplate(s, call, p, rec)
        }
        C::vkDestroyDescriptorUpdateTemplate(p) | C::vkDestroyDescriptorUpdateTemplateKHR(p) => {
            descriptors::vkDestroyDescriptorUpdateTemplate(s, call, p, rec)
        }
        C::vkUpdateDescriptorSetWithTemplate(p) | C::vkUpdateDescriptorSetWithTemplateKHR(p) => {
            descriptors::vkUpdateDescriptorSetWithTemplate(s, call, p, rec)
        }
        C::vkCmdPushDescriptorSetWithTemplateKHR(p) => {
            descriptors::vkCmdPushDescriptorSetWithTemplateKHR(s, call, p, rec)
        }
        C::vkQueueSubmit(p) => submit::vkQueueSubmit(s, call, p, rec),
        C::vkQueueSubmit2(p) | C::vkQueueSubmit2KHR(p) => submit::vkQueueSubmit2(s, call, p, rec),
        C::vkCreateXlibSurfaceKHR(p) => wsi::vkCreateXlibSurfaceKHR(s, call, p, rec),
        C::vkCreateXcbSurfaceKHR(p) => wsi::vkCreateXcbSurfaceKHR(s, call, p, rec),
        C::vkCreateWaylandSurfaceKHR(p) => wsi::vkCreateWaylandSurfaceKHR(s, call, p, rec),
        C::vkCreateHeadlessSurfaceEXT(p) => wsi::vkCreateHeadlessSurfaceEXT(s, call, p, rec),
        C::vkCreateDisplayPlaneSurfaceKHR(p) => {
            wsi::vkCreateDisplayPlaneSurfaceKHR(s, call, p, rec)
        }
        C::vkDestroySurfaceKHR(p) => wsi::vkDestroySurfaceKHR(s, call, p, rec),
        C::vkCreateSwapchainKHR(p) => wsi::vkCreateSwapchainKHR(s, call, p, rec),
        C::vkGetSwapchainImagesKHR(p) => wsi::vkGetSwapchainImagesKHR(s, call, p, rec),
        C::vkDestroySwapchainKHR(p) => wsi::vkDestroySwapchainKHR(s, call, p, rec),
        C::vkAcquireNextImageKHR(p) => wsi::vkAcquireNextImageKHR(s, call, p, rec),
        C::vkAcquireNextImage2KHR(p) => wsi::vkAcquireNextImage2KHR(s, call, p, rec),
        C::vkQueuePresentKHR(p) => wsi::vkQueuePresentKHR(s, call, p, rec),
        // Queries of the loader/driver the replay does not need.
        C::vkEnumerateInstanceExtensionProperties(_)
        | C::vkEnumerateInstanceLayerProperties(_)
        | C::vkEnumerateDeviceExtensionProperties(_)
        | C::vkEnumerateDeviceLayerProperties(_)
        | C::vkGetInstanceProcAddr(_)
        | C::vkGetDeviceProcAddr(_) => Ok(()),
        // Memory writes are flushed as they are applied; invalidation only matters to the host.
        C::vkFlushMappedMemoryRanges(_) | C::vkInvalidateMappedMemoryRanges(_) => Ok(()),
        // Re-done at the trace's QueryResults record, with the exact bytes the app got to compare.
        C::vkGetQueryPoolResults(_) => Ok(()),
        // The replayer holds the profiling lock itself from the first performance pool until the
        // device is destroyed (see queries::plan_perf_pool), whatever part of the app's hold the
        // trace saw.
        C::vkAcquireProfilingLockKHR(_) | C::vkReleaseProfilingLockKHR(_) => Ok(()),
        // Clock samples have no effect the replay needs; names only help tools (and need
        // VK_EXT_debug_utils, which the replay may not have).
        C::vkGetCalibratedTimestampsEXT(_) | C::vkSetDebugUtilsObjectNameEXT(_) => Ok(()),
        // Surface and presentation queries: their answers are in the capture and nothing replayed
        // depends on calling them again.
        C::vkGetPhysicalDeviceSurfaceSupportKHR(_)
        | C::vkGetPhysicalDeviceSurfaceCapabilitiesKHR(_)
        | C::vkGetPhysicalDeviceSurfaceFormatsKHR(_)
        | C::vkGetPhysicalDeviceSurfacePresentModesKHR(_)
        | C::vkGetPhysicalDeviceSurfaceCapabilities2KHR(_)
        | C::vkGetPhysicalDeviceSurfaceCapabilities2EXT(_)
        | C::vkGetPhysicalDeviceSurfaceFormats2KHR(_)
        | C::vkGetPhysicalDeviceXlibPresentationSupportKHR(_)
        | C::vkGetPhysicalDeviceXcbPresentationSupportKHR(_)
        | C::vkGetPhysicalDeviceWaylandPresentationSupportKHR(_)
        | C::vkGetPhysicalDevicePresentRectanglesKHR(_)
        | C::vkGetDeviceGroupSurfacePresentModesKHR(_)
        | C::vkGetDeviceGroupPresentCapabilitiesKHR(_)
        | C::vkGetSwapchainStatusKHR(_)
        | C::vkWaitForPresentKHR(_)
        | C::vkReleaseSwapchainImagesEXT(_) => Ok(()),
        // The app's debug callbacks point into the captured process: never installed.
        C::vkDestroyDebugUtilsMessengerEXT(_)
        | C::vkDestroyDebugReportCallbackEXT(_)
        | C::vkSubmitDebugUtilsMessageEXT(_)
        | C::vkDebugReportMessageEXT(_) => Ok(()),
        _ => generic(s, call, rec),
    }
}

/// Everything not hand-written: the generated dispatch, then a check that the replay did not fail
/// where the capture succeeded.
pub(crate) unsafe fn generic(
    s: &mut Session<'_>,
    call: &Call,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    // Physical-device queries change no state, and the replay device is described by the
    // replayer's own queries. Re-issuing them is harmful: the loader aborts the process when an
    // extension query (e.g. video capabilities) reaches a driver that lacks the extension.
    if call.name().starts_with("vkGetPhysicalDevice") {
        return Ok(());
    }
    let r = match crate::glue::dispatch(s, call) {
        // A command of an extension --drop-unsupported left out.
        Err(ReplayError::Unavailable(_)) if !s.dropped.is_empty() => {
            s.skipped_calls += 1;
            return Ok(());
        }
        r => r?,
    };
    if r.as_raw() < 0 && rec.result >= 0 {
        return Err(ReplayError::Other(format!(
            "the replay returned {r} where the capture got {}",
            vk::Result::from_raw(rec.result)
        )));
    }
    Ok(())
}

/// An extension command from the table loaded at device creation: loading the extension's
/// function table on every recorded command would cost a `vkGetDeviceProcAddr` per entry.
pub(crate) fn loaded<F>(f: Option<F>, name: &str) -> Result<F, ReplayError> {
    f.ok_or_else(|| ReplayError::Other(format!("{name} is not available on the replay device")))
}

/// The replay device and command buffer for a captured command buffer (the device borrowed, not
/// cloned: a clone copies ash's whole function table on every recorded command).
pub(crate) fn cmd<'s>(
    s: &'s Session<'_>,
    captured: u64,
) -> Result<(&'s ash::Device, vk::CommandBuffer), ReplayError> {
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, captured)?;
    Ok((&s.device_for(cb)?.device, vk::CommandBuffer::from_raw(cb)))
}

pub(crate) fn lookup_all<T: vk::Handle>(
    s: &Session<'_>,
    ty: vk::ObjectType,
    v: &Option<Vec<u64>>,
) -> Result<Vec<T>, ReplayError> {
    v.as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|h| s.lookup(ty, *h).map(T::from_raw))
        .collect()
}
