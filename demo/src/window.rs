//! Windowed mode: an Xlib window (libX11 loaded at run time, so the binary
//! has no X link dependency and `--headless` works without it), a
//! VK_KHR_xlib_surface surface and a FIFO swapchain. Each frame the offscreen
//! colour image is blitted to the acquired swapchain image and presented.

use crate::gpu::{range, Gpu};
use anyhow::{anyhow, bail, Context as _, Result};
use ash::vk;
use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};

type XOpenDisplay = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type XDefaultScreen = unsafe extern "C" fn(*mut c_void) -> c_int;
type XRootWindow = unsafe extern "C" fn(*mut c_void, c_int) -> c_ulong;
type XCreateSimpleWindow = unsafe extern "C" fn(
    *mut c_void,
    c_ulong,
    c_int,
    c_int,
    c_uint,
    c_uint,
    c_uint,
    c_ulong,
    c_ulong,
) -> c_ulong;
type XWindowOp = unsafe extern "C" fn(*mut c_void, c_ulong) -> c_int;
type XStoreName = unsafe extern "C" fn(*mut c_void, c_ulong, *const c_char) -> c_int;
type XDisplayOp = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The X connection and window; closed on drop.
pub struct XWindow {
    lib: *mut c_void,
    display: *mut c_void,
    window: c_ulong,
    destroy_window: XWindowOp,
    close_display: XDisplayOp,
}

unsafe fn sym<T: Copy>(lib: *mut c_void, name: &CStr) -> Result<T> {
    let p = libc::dlsym(lib, name.as_ptr());
    if p.is_null() {
        bail!("libX11 lacks {}", name.to_string_lossy());
    }
    Ok(std::mem::transmute_copy(&p))
}

pub const WIDTH: u32 = 256;
pub const HEIGHT: u32 = 256;

impl XWindow {
    pub fn open() -> Result<Self> {
        if std::env::var_os("DISPLAY").is_none() {
            bail!("DISPLAY is not set: run under an X server (e.g. Xvfb :99 and DISPLAY=:99) or use --headless");
        }
        unsafe {
            let lib = libc::dlopen(c"libX11.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if lib.is_null() {
                bail!("cannot load libX11.so.6 (Debian: libx11-6); use --headless");
            }
            let open: XOpenDisplay = sym(lib, c"XOpenDisplay")?;
            let screen_of: XDefaultScreen = sym(lib, c"XDefaultScreen")?;
            let root_of: XRootWindow = sym(lib, c"XRootWindow")?;
            let create: XCreateSimpleWindow = sym(lib, c"XCreateSimpleWindow")?;
            let map: XWindowOp = sym(lib, c"XMapWindow")?;
            let store_name: XStoreName = sym(lib, c"XStoreName")?;
            let flush: XDisplayOp = sym(lib, c"XFlush")?;
            let destroy_window: XWindowOp = sym(lib, c"XDestroyWindow")?;
            let close_display: XDisplayOp = sym(lib, c"XCloseDisplay")?;
            let display = open(std::ptr::null());
            if display.is_null() {
                libc::dlclose(lib);
                bail!(
                    "cannot open X display {:?}",
                    std::env::var("DISPLAY").unwrap_or_default()
                );
            }
            let screen = screen_of(display);
            let root = root_of(display, screen);
            let window = create(display, root, 0, 0, WIDTH, HEIGHT, 0, 0, 0);
            store_name(display, window, c"quarry-demo".as_ptr());
            map(display, window);
            flush(display);
            Ok(XWindow {
                lib,
                display,
                window,
                destroy_window,
                close_display,
            })
        }
    }
}

impl Drop for XWindow {
    fn drop(&mut self) {
        unsafe {
            (self.destroy_window)(self.display, self.window);
            (self.close_display)(self.display);
            libc::dlclose(self.lib);
        }
    }
}

pub struct Presenter {
    surface_fn: ash::khr::surface::Instance,
    swapchain_fn: ash::khr::swapchain::Device,
    surface: vk::SurfaceKHR,
    swapchain: vk::SwapchainKHR,
    images: Vec<vk::Image>,
    extent: vk::Extent2D,
    acquired: vk::Semaphore,
    rendered: Vec<vk::Semaphore>,
}

impl Presenter {
    pub fn new(gpu: &Gpu, win: &XWindow) -> Result<Self> {
        let xlib = ash::khr::xlib_surface::Instance::new(&gpu._entry, &gpu.instance);
        let surface = unsafe {
            xlib.create_xlib_surface(
                &vk::XlibSurfaceCreateInfoKHR::default()
                    .dpy(win.display.cast())
                    .window(win.window),
                None,
            )
        }
        .context("vkCreateXlibSurfaceKHR")?;
        let surface_fn = ash::khr::surface::Instance::new(&gpu._entry, &gpu.instance);
        let ok = unsafe {
            surface_fn.get_physical_device_surface_support(gpu.pdev, gpu.family, surface)
        }
        .context("vkGetPhysicalDeviceSurfaceSupportKHR")?;
        if !ok {
            bail!(
                "queue family {} of {} cannot present to this X window",
                gpu.family,
                gpu.name
            );
        }
        let caps =
            unsafe { surface_fn.get_physical_device_surface_capabilities(gpu.pdev, surface) }
                .context("vkGetPhysicalDeviceSurfaceCapabilitiesKHR")?;
        let formats = unsafe { surface_fn.get_physical_device_surface_formats(gpu.pdev, surface) }
            .context("vkGetPhysicalDeviceSurfaceFormatsKHR")?;
        let format = formats
            .iter()
            .find(|f| {
                f.format == vk::Format::B8G8R8A8_UNORM || f.format == vk::Format::R8G8B8A8_UNORM
            })
            .or(formats.first())
            .copied()
            .ok_or_else(|| anyhow!("surface reports no formats"))?;
        let fp = unsafe {
            gpu.instance
                .get_physical_device_format_properties(gpu.pdev, format.format)
        };
        if !fp
            .optimal_tiling_features
            .contains(vk::FormatFeatureFlags::BLIT_DST)
        {
            bail!(
                "swapchain format {:?} cannot be a blit destination",
                format.format
            );
        }
        if !caps
            .supported_usage_flags
            .contains(vk::ImageUsageFlags::TRANSFER_DST)
        {
            bail!("swapchain images cannot be transfer destinations on this surface");
        }
        let extent = if caps.current_extent.width == u32::MAX {
            vk::Extent2D {
                width: WIDTH,
                height: HEIGHT,
            }
        } else {
            caps.current_extent
        };
        let mut count = caps.min_image_count.max(2);
        if caps.max_image_count != 0 {
            count = count.min(caps.max_image_count);
        }
        let swapchain_fn = ash::khr::swapchain::Device::new(&gpu.instance, &gpu.device);
        let swapchain = unsafe {
            swapchain_fn.create_swapchain(
                &vk::SwapchainCreateInfoKHR::default()
                    .surface(surface)
                    .min_image_count(count)
                    .image_format(format.format)
                    .image_color_space(format.color_space)
                    .image_extent(extent)
                    .image_array_layers(1)
                    .image_usage(vk::ImageUsageFlags::TRANSFER_DST)
                    .image_sharing_mode(vk::SharingMode::EXCLUSIVE)
                    .pre_transform(caps.current_transform)
                    .composite_alpha(vk::CompositeAlphaFlagsKHR::OPAQUE)
                    .present_mode(vk::PresentModeKHR::FIFO)
                    .clipped(true),
                None,
            )
        }
        .context("vkCreateSwapchainKHR")?;
        let images = unsafe { swapchain_fn.get_swapchain_images(swapchain) }
            .context("vkGetSwapchainImagesKHR")?;
        let sem = || unsafe {
            gpu.device
                .create_semaphore(&vk::SemaphoreCreateInfo::default(), None)
        };
        let acquired = sem().context("vkCreateSemaphore")?;
        // One per image: a present may still wait on the previous one.
        let rendered = images
            .iter()
            .map(|_| sem())
            .collect::<Result<Vec<_>, _>>()
            .context("vkCreateSemaphore")?;
        Ok(Presenter {
            surface_fn,
            swapchain_fn,
            surface,
            swapchain,
            images,
            extent,
            acquired,
            rendered,
        })
    }

    /// Blits `color` (64x64, colour-attachment layout) to the next swapchain
    /// image and presents it.
    pub fn present(&self, gpu: &Gpu, color: vk::Image, w: u32, h: u32) -> Result<()> {
        let d = &gpu.device;
        let (index, _) = unsafe {
            self.swapchain_fn.acquire_next_image(
                self.swapchain,
                u64::MAX,
                self.acquired,
                vk::Fence::null(),
            )
        }
        .context("vkAcquireNextImageKHR")?;
        let target = self.images[index as usize];
        let cb = gpu.record(|d, cb| unsafe {
            let color_range = range(vk::ImageAspectFlags::COLOR, 1);
            let to_transfer = [
                vk::ImageMemoryBarrier2::default()
                    .src_stage_mask(vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT)
                    .src_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
                    .dst_stage_mask(vk::PipelineStageFlags2::BLIT)
                    .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)
                    .old_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
                    .new_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)
                    .image(color)
                    .subresource_range(color_range),
                vk::ImageMemoryBarrier2::default()
                    .src_stage_mask(vk::PipelineStageFlags2::BLIT)
                    .dst_stage_mask(vk::PipelineStageFlags2::BLIT)
                    .dst_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                    .old_layout(vk::ImageLayout::UNDEFINED)
                    .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
                    .image(target)
                    .subresource_range(color_range),
            ];
            d.cmd_pipeline_barrier2(
                cb,
                &vk::DependencyInfo::default().image_memory_barriers(&to_transfer),
            );
            let layers = vk::ImageSubresourceLayers {
                aspect_mask: vk::ImageAspectFlags::COLOR,
                mip_level: 0,
                base_array_layer: 0,
                layer_count: 1,
            };
            let blit = vk::ImageBlit {
                src_subresource: layers,
                src_offsets: [
                    vk::Offset3D::default(),
                    vk::Offset3D {
                        x: w as i32,
                        y: h as i32,
                        z: 1,
                    },
                ],
                dst_subresource: layers,
                dst_offsets: [
                    vk::Offset3D::default(),
                    vk::Offset3D {
                        x: self.extent.width as i32,
                        y: self.extent.height as i32,
                        z: 1,
                    },
                ],
            };
            d.cmd_blit_image(
                cb,
                color,
                vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                target,
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                &[blit],
                vk::Filter::NEAREST,
            );
            let back = [
                vk::ImageMemoryBarrier2::default()
                    .src_stage_mask(vk::PipelineStageFlags2::BLIT)
                    .src_access_mask(vk::AccessFlags2::TRANSFER_READ)
                    .dst_stage_mask(vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT)
                    .dst_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
                    .old_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)
                    .new_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
                    .image(color)
                    .subresource_range(color_range),
                vk::ImageMemoryBarrier2::default()
                    .src_stage_mask(vk::PipelineStageFlags2::BLIT)
                    .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                    .dst_stage_mask(vk::PipelineStageFlags2::BOTTOM_OF_PIPE)
                    .old_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
                    .new_layout(vk::ImageLayout::PRESENT_SRC_KHR)
                    .image(target)
                    .subresource_range(color_range),
            ];
            d.cmd_pipeline_barrier2(
                cb,
                &vk::DependencyInfo::default().image_memory_barriers(&back),
            );
            Ok(())
        })?;
        let rendered = self.rendered[index as usize];
        let waits = [vk::SemaphoreSubmitInfo::default()
            .semaphore(self.acquired)
            .stage_mask(vk::PipelineStageFlags2::BLIT)];
        let signals = [vk::SemaphoreSubmitInfo::default()
            .semaphore(rendered)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
        let cbs = [vk::CommandBufferSubmitInfo::default().command_buffer(cb)];
        let fence = gpu.fence()?;
        unsafe {
            d.queue_submit2(
                gpu.queue,
                &[vk::SubmitInfo2::default()
                    .wait_semaphore_infos(&waits)
                    .command_buffer_infos(&cbs)
                    .signal_semaphore_infos(&signals)],
                fence,
            )
        }
        .context("vkQueueSubmit2 (present blit)")?;
        let swapchains = [self.swapchain];
        let indices = [index];
        let wait = [rendered];
        unsafe {
            self.swapchain_fn.queue_present(
                gpu.queue,
                &vk::PresentInfoKHR::default()
                    .wait_semaphores(&wait)
                    .swapchains(&swapchains)
                    .image_indices(&indices),
            )
        }
        .context("vkQueuePresentKHR")?;
        // Waiting here also makes reusing `acquired` next frame safe.
        gpu.wait(fence)?;
        unsafe { d.free_command_buffers(gpu.pool, &[cb]) };
        Ok(())
    }

    pub fn destroy(&self, gpu: &Gpu) {
        unsafe {
            let _ = gpu.device.queue_wait_idle(gpu.queue);
            gpu.device.destroy_semaphore(self.acquired, None);
            for s in &self.rendered {
                gpu.device.destroy_semaphore(*s, None);
            }
            self.swapchain_fn.destroy_swapchain(self.swapchain, None);
            self.surface_fn.destroy_surface(self.surface, None);
        }
    }
}
