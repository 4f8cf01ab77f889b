//! The window system, emulated: surfaces are fake handles, swapchains are offscreen images
//! (`Session::create_swapchain`), acquire returns the image index the capture got and signals
//! through an empty submission, present waits the same way, or shows the image in an X11 window
//! with `--window`.

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, Call, PNext};

use super::other;
use crate::error::ReplayError;
use crate::session::{Session, Swapchain};

fn fake_surface(s: &mut Session<'_>, surface: Option<u64>) -> Result<(), ReplayError> {
    if let Some(surface) = surface {
        let fake = s.fake_handle();
        s.bind(vk::ObjectType::SURFACE_KHR, surface, fake);
    }
    Ok(())
}

pub(crate) unsafe fn vkCreateXlibSurfaceKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateXlibSurfaceKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    fake_surface(s, p.p_surface)
}

pub(crate) unsafe fn vkCreateXcbSurfaceKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateXcbSurfaceKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    fake_surface(s, p.p_surface)
}

pub(crate) unsafe fn vkCreateWaylandSurfaceKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateWaylandSurfaceKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    fake_surface(s, p.p_surface)
}

pub(crate) unsafe fn vkCreateHeadlessSurfaceEXT(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateHeadlessSurfaceEXT,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    fake_surface(s, p.p_surface)
}

pub(crate) unsafe fn vkCreateDisplayPlaneSurfaceKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateDisplayPlaneSurfaceKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    fake_surface(s, p.p_surface)
}

pub(crate) unsafe fn vkDestroySurfaceKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkDestroySurfaceKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.unbind(vk::ObjectType::SURFACE_KHR, p.surface);
    Ok(())
}

pub(crate) unsafe fn vkCreateSwapchainKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateSwapchainKHR,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let ci = p
        .p_create_info
        .as_deref()
        .ok_or_else(|| other("no create info"))?;
    let mut view_formats = Vec::new();
    for n in &ci.p_next {
        if let PNext::VkImageFormatListCreateInfo(l) = n {
            view_formats = l
                .p_view_formats
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|f| vk::Format::from_raw(*f))
                .collect();
        }
    }
    let mut flags = vk::ImageCreateFlags::empty();
    if ci.flags & vk::SwapchainCreateFlagsKHR::MUTABLE_FORMAT.as_raw() != 0 {
        flags |= vk::ImageCreateFlags::MUTABLE_FORMAT | vk::ImageCreateFlags::EXTENDED_USAGE;
    }
    if ci.flags & vk::SwapchainCreateFlagsKHR::SPLIT_INSTANCE_BIND_REGIONS.as_raw() != 0 {
        flags |= vk::ImageCreateFlags::SPLIT_INSTANCE_BIND_REGIONS;
    }
    let sc = Swapchain {
        device: p.device,
        format: vk::Format::from_raw(ci.image_format),
        extent: vk::Extent2D {
            width: ci.image_extent.width,
            height: ci.image_extent.height,
        },
        layers: ci.image_array_layers,
        usage: vk::ImageUsageFlags::from_raw(ci.image_usage),
        flags,
        view_formats,
        images: Vec::new(),
        next: 0,
        window: None,
    };
    let h = p
        .p_swapchain
        .ok_or_else(|| other("the capture recorded no swapchain handle"))?;
    s.create_swapchain(p.device, h, sc)
}

pub(crate) unsafe fn vkGetSwapchainImagesKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkGetSwapchainImagesKHR,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    match &p.p_swapchain_images {
        Some(images) if rec.result >= 0 => s.swapchain_images(p.swapchain, images),
        _ => Ok(()),
    }
}

pub(crate) unsafe fn vkDestroySwapchainKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkDestroySwapchainKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.destroy_swapchain(p.swapchain);
    Ok(())
}

pub(crate) unsafe fn vkAcquireNextImageKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkAcquireNextImageKHR,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    acquire(
        s,
        rec,
        p.device,
        p.swapchain,
        p.semaphore,
        p.fence,
        p.p_image_index,
    )
}

pub(crate) unsafe fn vkAcquireNextImage2KHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkAcquireNextImage2KHR,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    let info = p
        .p_acquire_info
        .as_deref()
        .ok_or_else(|| other("no acquire info"))?;
    acquire(
        s,
        rec,
        p.device,
        info.swapchain,
        info.semaphore,
        info.fence,
        p.p_image_index,
    )
}

pub(crate) unsafe fn vkQueuePresentKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkQueuePresentKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let info = p
        .p_present_info
        .as_deref()
        .ok_or_else(|| other("no present info"))?;
    let waits = info
        .p_wait_semaphores
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|x| {
            s.lookup(vk::ObjectType::SEMAPHORE, *x)
                .map(vk::Semaphore::from_raw)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
    if s.wsi.window {
        let swapchains = info.p_swapchains.as_deref().unwrap_or(&[]);
        let indices = info.p_image_indices.as_deref().unwrap_or(&[]);
        for (i, (sc, index)) in swapchains.iter().zip(indices).enumerate() {
            // The first present consumes the app's wait semaphores.
            let w: &[vk::Semaphore] = if i == 0 { &waits } else { &[] };
            s.present_window(vk::Queue::from_raw(q), *sc, *index, w)?;
        }
        if !swapchains.is_empty() {
            return Ok(());
        }
    }
    let device = s.device_for(q)?.captured;
    // Presenting consumes the wait semaphores; an empty submission does the same headless.
    s.empty_submit(
        device,
        Some(vk::Queue::from_raw(q)),
        &waits,
        &[],
        vk::Fence::null(),
    )
}

/// Emulated acquire: the image index the app got in the capture, with the semaphore and fence
/// signaled through an empty submission.
unsafe fn acquire(
    s: &mut Session<'_>,
    rec: &record::Call,
    device: u64,
    swapchain: u64,
    semaphore: u64,
    fence: u64,
    index: Option<u32>,
) -> Result<(), ReplayError> {
    let ok = rec.result == vk::Result::SUCCESS.as_raw()
        || rec.result == vk::Result::SUBOPTIMAL_KHR.as_raw();
    if !ok {
        return Ok(());
    }
    let sem = vk::Semaphore::from_raw(s.lookup(vk::ObjectType::SEMAPHORE, semaphore)?);
    let fen = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, fence)?);
    // The app then uses the captured image handle of that index, already bound to ours.
    if let Some(sc) = s.wsi.swapchains.get_mut(&swapchain) {
        let n = sc.images.len().max(1) as u32;
        sc.next = index.unwrap_or(sc.next + 1) % n;
    }
    let signal: Vec<vk::Semaphore> = if sem == vk::Semaphore::null() {
        vec![]
    } else {
        vec![sem]
    };
    s.empty_submit(device, None, &[], &signal, fen)
}
