//! Swapchains and present: creating a swapchain makes frames end at present only; every present
//! ends a frame and takes a calibration.
//!
//! Depends on: `runtime`, `queries::calibration`, `trim::snapshot` (frame ends), `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec, NOT_PRESENT};
use crate::queries::calibration::calibrate;
use crate::runtime::{self, guard};
use ash::vk;
use format::record::FrameBoundary;

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

pub unsafe extern "system" fn vkQueuePresentKHR(
    queue: vk::Queue,
    p_info: *const vk::PresentInfoKHR<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkQueuePresentKHR, NOT_PRESENT);
    let gate = runtime::submit_gate();
    let r = f(queue, p_info);
    let seq = guard("vkQueuePresentKHR", || {
        rec!(vkQueuePresentKHR, r.as_raw(), |e| {
            vkstream::encode::vkQueuePresentKHR(e, queue, p_info)
        })
    })
    .flatten();
    // Before the boundary, which may take the snapshot (it closes the gate).
    drop(gate);
    guard("vkQueuePresentKHR", || {
        // Every present call ends the app's frame, whatever the swapchain's state.
        crate::trim::snapshot::frame_boundary(FrameBoundary::Present, seq);
        calibrate(d);
    });
    r
}
