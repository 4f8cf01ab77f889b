//! `quarry replay --window`: the emulated swapchain images are shown in an X11 window.
//!
//! The replay still renders into its offscreen images (so a trace replays the same with or
//! without a window); at each captured vkQueuePresentKHR the presented image is blitted into an
//! image of a real swapchain on an Xlib surface and presented there. libX11 is loaded at run time
//! (x11-dl), so the replayer needs no X libraries unless a window is asked for.

use std::ptr;

use ash::vk;
use x11_dl::xlib;

use crate::error::ReplayError;

/// Instance extensions a window needs.
pub const INSTANCE_EXTENSIONS: [&str; 2] = ["VK_KHR_surface", "VK_KHR_xlib_surface"];

/// One X11 window with its surface and swapchain, for one emulated swapchain.
pub struct Window {
    xlib: xlib::Xlib,
    display: *mut xlib::Display,
    window: xlib::Window,
    surface_fn: ash::khr::surface::Instance,
    surface: vk::SurfaceKHR,
    swapchain_fn: ash::khr::swapchain::Device,
    swapchain: vk::SwapchainKHR,
    images: Vec<vk::Image>,
    extent: vk::Extent2D,
    pool: vk::CommandPool,
    acquired: vk::Semaphore,
    blitted: vk::Semaphore,
    fence: vk::Fence,
    /// Frames shown so far.
    pub presented: u64,
}

fn vkerr(what: &'static str) -> impl Fn(vk::Result) -> ReplayError {
    move |e| ReplayError::vk(what, e)
}

impl Window {
    /// Opens a window of `extent` on `$DISPLAY` and a swapchain for it on `device`, presenting from
    /// queue family `family`.
    ///
    /// # Safety
    /// `instance`, `pd` and `device` are valid and `device` enabled VK_KHR_swapchain.
    pub unsafe fn open(
        entry: &ash::Entry,
        instance: &ash::Instance,
        pd: vk::PhysicalDevice,
        device: &ash::Device,
        family: u32,
        extent: vk::Extent2D,
        title: &str,
    ) -> Result<Window, ReplayError> {
        let no_window = |why: String| ReplayError::Other(format!("--window: {why}"));
        let xlib = xlib::Xlib::open()
            .map_err(|e| no_window(format!("cannot load libX11 ({e}); install libx11-6")))?;
        let display = (xlib.XOpenDisplay)(ptr::null());
        if display.is_null() {
            return Err(no_window(format!(
                "cannot open the X11 display {:?} (set DISPLAY, or replay without --window)",
                std::env::var("DISPLAY").unwrap_or_default()
            )));
        }
        let screen = (xlib.XDefaultScreen)(display);
        let root = (xlib.XRootWindow)(display, screen);
        let (w, h) = (extent.width.max(1), extent.height.max(1));
        let window = (xlib.XCreateSimpleWindow)(display, root, 0, 0, w, h, 0, 0, 0);
        if let Ok(t) = std::ffi::CString::new(title) {
            (xlib.XStoreName)(display, window, t.as_ptr());
        }
        (xlib.XMapWindow)(display, window);
        (xlib.XFlush)(display);
        let mut win = Window {
            xlib,
            display,
            window,
            surface_fn: ash::khr::surface::Instance::new(entry, instance),
            surface: vk::SurfaceKHR::null(),
            swapchain_fn: ash::khr::swapchain::Device::new(instance, device),
            swapchain: vk::SwapchainKHR::null(),
            images: Vec::new(),
            extent,
            pool: vk::CommandPool::null(),
            acquired: vk::Semaphore::null(),
            blitted: vk::Semaphore::null(),
            fence: vk::Fence::null(),
            presented: 0,
        };
        // On error, Drop tears down what was made so far (it needs the device for that).
        match win.make(entry, instance, pd, device, family) {
            Ok(()) => Ok(win),
            Err(e) => {
                win.destroy(device);
                Err(e)
            }
        }
    }

    unsafe fn make(
        &mut self,
        entry: &ash::Entry,
        instance: &ash::Instance,
        pd: vk::PhysicalDevice,
        device: &ash::Device,
        family: u32,
    ) -> Result<(), ReplayError> {
        let xs = ash::khr::xlib_surface::Instance::new(entry, instance);
        self.surface = xs
            .create_xlib_surface(
                &vk::XlibSurfaceCreateInfoKHR::default()
                    .dpy(self.display.cast::<vk::Display>())
                    .window(self.window),
                None,
            )
            .map_err(vkerr("vkCreateXlibSurfaceKHR"))?;
        let supported = self
            .surface_fn
            .get_physical_device_surface_support(pd, family, self.surface)
            .map_err(vkerr("vkGetPhysicalDeviceSurfaceSupportKHR"))?;
        if !supported {
            return Err(ReplayError::Other(format!(
                "--window: queue family {family} of the replay GPU cannot present to an X11 window"
            )));
        }
        let caps = self
            .surface_fn
            .get_physical_device_surface_capabilities(pd, self.surface)
            .map_err(vkerr("vkGetPhysicalDeviceSurfaceCapabilitiesKHR"))?;
        let formats = self
            .surface_fn
            .get_physical_device_surface_formats(pd, self.surface)
            .map_err(vkerr("vkGetPhysicalDeviceSurfaceFormatsKHR"))?;
        let format = formats
            .iter()
            .find(|f| f.format == vk::Format::B8G8R8A8_UNORM)
            .or(formats.first())
            .copied()
            .ok_or_else(|| ReplayError::Other("--window: the surface lists no format".into()))?;
        if caps.current_extent.width != u32::MAX {
            self.extent = caps.current_extent;
        }
        self.extent.width = self.extent.width.clamp(
            caps.min_image_extent.width,
            caps.max_image_extent.width.max(1),
        );
        self.extent.height = self.extent.height.clamp(
            caps.min_image_extent.height,
            caps.max_image_extent.height.max(1),
        );
        let count = if caps.max_image_count == 0 {
            caps.min_image_count + 1
        } else {
            (caps.min_image_count + 1).min(caps.max_image_count)
        };
        self.swapchain = self
            .swapchain_fn
            .create_swapchain(
                &vk::SwapchainCreateInfoKHR::default()
                    .surface(self.surface)
                    .min_image_count(count)
                    .image_format(format.format)
                    .image_color_space(format.color_space)
                    .image_extent(self.extent)
                    .image_array_layers(1)
                    .image_usage(vk::ImageUsageFlags::TRANSFER_DST)
                    .image_sharing_mode(vk::SharingMode::EXCLUSIVE)
                    .pre_transform(caps.current_transform)
                    .composite_alpha(vk::CompositeAlphaFlagsKHR::OPAQUE)
                    .present_mode(vk::PresentModeKHR::FIFO)
                    .clipped(true),
                None,
            )
            .map_err(vkerr("vkCreateSwapchainKHR (window)"))?;
        self.images = self
            .swapchain_fn
            .get_swapchain_images(self.swapchain)
            .map_err(vkerr("vkGetSwapchainImagesKHR (window)"))?;
        self.pool = device
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::TRANSIENT),
                None,
            )
            .map_err(vkerr("vkCreateCommandPool (window)"))?;
        let sci = vk::SemaphoreCreateInfo::default();
        self.acquired = device
            .create_semaphore(&sci, None)
            .map_err(vkerr("vkCreateSemaphore (window)"))?;
        self.blitted = device
            .create_semaphore(&sci, None)
            .map_err(vkerr("vkCreateSemaphore (window)"))?;
        self.fence = device
            .create_fence(&vk::FenceCreateInfo::default(), None)
            .map_err(vkerr("vkCreateFence (window)"))?;
        Ok(())
    }

    /// Shows `image` (an emulated swapchain image of `src_extent`, in PRESENT_SRC_KHR layout, left
    /// so) once `waits` signal, on `queue`.
    ///
    /// # Safety
    /// `device` is the device this window was opened with; `image` and `queue` belong to it.
    pub unsafe fn present(
        &mut self,
        device: &ash::Device,
        queue: vk::Queue,
        image: vk::Image,
        src_extent: vk::Extent2D,
        waits: &[vk::Semaphore],
    ) -> Result<(), ReplayError> {
        self.pump_events();
        let (index, _) = self
            .swapchain_fn
            .acquire_next_image(self.swapchain, u64::MAX, self.acquired, vk::Fence::null())
            .map_err(vkerr("vkAcquireNextImageKHR (window)"))?;
        let target = self.images[index as usize];
        let cb = device
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )
            .map_err(vkerr("vkAllocateCommandBuffers (window)"))?[0];
        let range = vk::ImageSubresourceRange::default()
            .aspect_mask(vk::ImageAspectFlags::COLOR)
            .level_count(1)
            .layer_count(1);
        let barrier = |img, from, to, src: vk::AccessFlags, dst: vk::AccessFlags| {
            vk::ImageMemoryBarrier::default()
                .image(img)
                .old_layout(from)
                .new_layout(to)
                .src_access_mask(src)
                .dst_access_mask(dst)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .subresource_range(range)
        };
        let r = (|| {
            device.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )?;
            device.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[
                    barrier(
                        image,
                        vk::ImageLayout::PRESENT_SRC_KHR,
                        vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                        vk::AccessFlags::MEMORY_WRITE,
                        vk::AccessFlags::TRANSFER_READ,
                    ),
                    barrier(
                        target,
                        vk::ImageLayout::UNDEFINED,
                        vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                        vk::AccessFlags::empty(),
                        vk::AccessFlags::TRANSFER_WRITE,
                    ),
                ],
            );
            let corner = |e: vk::Extent2D| vk::Offset3D {
                x: e.width as i32,
                y: e.height as i32,
                z: 1,
            };
            let layers = vk::ImageSubresourceLayers::default()
                .aspect_mask(vk::ImageAspectFlags::COLOR)
                .layer_count(1);
            device.cmd_blit_image(
                cb,
                image,
                vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                target,
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                &[vk::ImageBlit::default()
                    .src_subresource(layers)
                    .src_offsets([vk::Offset3D::default(), corner(src_extent)])
                    .dst_subresource(layers)
                    .dst_offsets([vk::Offset3D::default(), corner(self.extent)])],
                vk::Filter::NEAREST,
            );
            device.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[
                    barrier(
                        image,
                        vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                        vk::ImageLayout::PRESENT_SRC_KHR,
                        vk::AccessFlags::TRANSFER_READ,
                        vk::AccessFlags::empty(),
                    ),
                    barrier(
                        target,
                        vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                        vk::ImageLayout::PRESENT_SRC_KHR,
                        vk::AccessFlags::TRANSFER_WRITE,
                        vk::AccessFlags::empty(),
                    ),
                ],
            );
            device.end_command_buffer(cb)?;
            let mut wait: Vec<vk::Semaphore> = waits.to_vec();
            wait.push(self.acquired);
            let stages = vec![vk::PipelineStageFlags::TRANSFER; wait.len()];
            let cbs = [cb];
            let signal = [self.blitted];
            device.queue_submit(
                queue,
                &[vk::SubmitInfo::default()
                    .wait_semaphores(&wait)
                    .wait_dst_stage_mask(&stages)
                    .command_buffers(&cbs)
                    .signal_semaphores(&signal)],
                self.fence,
            )?;
            let swapchains = [self.swapchain];
            let indices = [index];
            match self.swapchain_fn.queue_present(
                queue,
                &vk::PresentInfoKHR::default()
                    .wait_semaphores(&signal)
                    .swapchains(&swapchains)
                    .image_indices(&indices),
            ) {
                Ok(_) | Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => {}
                Err(e) => return Err(e),
            }
            // One frame in flight: the command buffer and semaphores are reused next present.
            device.wait_for_fences(&[self.fence], true, u64::MAX)?;
            device.reset_fences(&[self.fence])
        })();
        device.free_command_buffers(self.pool, &[cb]);
        r.map_err(vkerr("presenting to the window"))?;
        self.presented += 1;
        Ok(())
    }

    /// Drains the X event queue so the window stays responsive (nothing is acted on).
    fn pump_events(&self) {
        // SAFETY: display is open for the life of self.
        unsafe {
            let mut ev: xlib::XEvent = std::mem::zeroed();
            while (self.xlib.XPending)(self.display) > 0 {
                (self.xlib.XNextEvent)(self.display, &mut ev);
            }
        }
    }

    /// Destroys the swapchain, surface and window.
    ///
    /// # Safety
    /// `device` is the device the window was opened with and is idle.
    pub unsafe fn destroy(&mut self, device: &ash::Device) {
        let _ = device.device_wait_idle();
        if self.fence != vk::Fence::null() {
            device.destroy_fence(self.fence, None);
        }
        for s in [self.acquired, self.blitted] {
            if s != vk::Semaphore::null() {
                device.destroy_semaphore(s, None);
            }
        }
        if self.pool != vk::CommandPool::null() {
            device.destroy_command_pool(self.pool, None);
        }
        if self.swapchain != vk::SwapchainKHR::null() {
            self.swapchain_fn.destroy_swapchain(self.swapchain, None);
        }
        if self.surface != vk::SurfaceKHR::null() {
            self.surface_fn.destroy_surface(self.surface, None);
        }
        if !self.display.is_null() {
            (self.xlib.XDestroyWindow)(self.display, self.window);
            (self.xlib.XCloseDisplay)(self.display);
            self.display = ptr::null_mut::<xlib::Display>();
        }
        self.fence = vk::Fence::null();
        self.acquired = vk::Semaphore::null();
        self.blitted = vk::Semaphore::null();
        self.pool = vk::CommandPool::null();
        self.swapchain = vk::SwapchainKHR::null();
        self.surface = vk::SurfaceKHR::null();
    }
}

// The raw X display pointer is used only from the replay thread.
unsafe impl Send for Window {}
