//! Emulated swapchains: offscreen images standing in for presentable ones, empty submissions
//! for acquire and present, and `--window`'s real window.

use ash::vk;
use ash::vk::Handle as _;

use super::Session;
use crate::error::ReplayError;
use crate::mapping;

/// An emulated swapchain: offscreen images standing in for presentable ones.
pub struct Swapchain {
    pub device: u64,
    pub format: vk::Format,
    pub extent: vk::Extent2D,
    pub layers: u32,
    pub usage: vk::ImageUsageFlags,
    pub flags: vk::ImageCreateFlags,
    pub view_formats: Vec<vk::Format>,
    pub images: Vec<(vk::Image, vk::DeviceMemory)>,
    pub next: u32,
    /// `--window`: the real window this swapchain's presents go to (opened at the first present).
    pub window: Option<Box<crate::window::Window>>,
}

impl Session<'_> {
    pub fn create_swapchain(
        &mut self,
        device: u64,
        captured: u64,
        sc: Swapchain,
    ) -> Result<(), ReplayError> {
        self.device(device)?;
        let fake = self.fake_handle();
        let mut sc = sc;
        if self.wsi.window {
            // Blitted into the window's swapchain at each present.
            sc.usage |= vk::ImageUsageFlags::TRANSFER_SRC;
        }
        self.wsi.swapchains.insert(captured, sc);
        self.bind(vk::ObjectType::SWAPCHAIN_KHR, captured, fake);
        Ok(())
    }

    /// `vkGetSwapchainImagesKHR` with the image array: make as many offscreen images.
    pub fn swapchain_images(&mut self, captured: u64, images: &[u64]) -> Result<(), ReplayError> {
        let sc = self
            .wsi
            .swapchains
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::SWAPCHAIN_KHR,
                handle: captured,
            })?;
        if sc.images.len() < images.len() {
            let d = self.device(sc.device)?;
            let mut made = Vec::new();
            let mut fmt_list =
                vk::ImageFormatListCreateInfo::default().view_formats(&sc.view_formats);
            for _ in sc.images.len()..images.len() {
                let mut ci = vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(sc.format)
                    .extent(vk::Extent3D {
                        width: sc.extent.width.max(1),
                        height: sc.extent.height.max(1),
                        depth: 1,
                    })
                    .mip_levels(1)
                    .array_layers(sc.layers.max(1))
                    .samples(vk::SampleCountFlags::TYPE_1)
                    .tiling(vk::ImageTiling::OPTIMAL)
                    .usage(sc.usage)
                    .flags(sc.flags)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE)
                    .initial_layout(vk::ImageLayout::UNDEFINED);
                if !sc.view_formats.is_empty() {
                    ci = ci.push_next(&mut fmt_list);
                }
                // SAFETY: valid device and create info.
                unsafe {
                    let img = d.device.create_image(&ci, None).map_err(|e| {
                        ReplayError::vk("vkCreateImage for an emulated swapchain image", e)
                    })?;
                    let req = d.device.get_image_memory_requirements(img);
                    let ti = mapping::pick_memory_type(
                        vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw(),
                        &d.memory_types,
                        req.memory_type_bits,
                        false,
                    )
                    .ok_or_else(|| {
                        ReplayError::Other("no memory type for an emulated swapchain image".into())
                    })?;
                    let ai = vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(ti);
                    let mem = d.device.allocate_memory(&ai, None).map_err(|e| {
                        ReplayError::vk("vkAllocateMemory for an emulated swapchain image", e)
                    })?;
                    d.device.bind_image_memory(img, mem, 0).map_err(|e| {
                        ReplayError::vk("vkBindImageMemory for an emulated swapchain image", e)
                    })?;
                    made.push((img, mem));
                }
            }
            self.wsi
                .swapchains
                .get_mut(&captured)
                .expect("exists")
                .images
                .extend(made);
        }
        let bound: Vec<u64> = self.wsi.swapchains[&captured]
            .images
            .iter()
            .map(|(i, _)| i.as_raw())
            .collect();
        for (c, r) in images.iter().zip(bound) {
            self.bind(vk::ObjectType::IMAGE, *c, r);
        }
        Ok(())
    }

    pub fn destroy_swapchain(&mut self, captured: u64) {
        if let Some(mut sc) = self.wsi.swapchains.remove(&captured) {
            if let Some(d) = self.devices.get(&sc.device) {
                unsafe {
                    let _ = d.device.device_wait_idle();
                    if let Some(w) = sc.window.as_mut() {
                        w.destroy(&d.device);
                    }
                    for (img, mem) in sc.images {
                        d.device.destroy_image(img, None);
                        d.device.free_memory(mem, None);
                    }
                }
            }
        }
        self.unbind(vk::ObjectType::SWAPCHAIN_KHR, captured);
    }

    /// `--window`: shows image `index` of emulated swapchain `captured` in its window (opened on
    /// the first present) once `waits` signal.
    pub fn present_window(
        &mut self,
        queue: vk::Queue,
        captured: u64,
        index: u32,
        waits: &[vk::Semaphore],
    ) -> Result<(), ReplayError> {
        let device = self.wsi.swapchains.get(&captured).map_or(0, |sc| sc.device);
        let inst = self.instance_of_device(device)?;
        let (instance, pd) = (inst.instance.clone(), inst.pd);
        let entry = self.entry;
        let sc = self
            .wsi
            .swapchains
            .get_mut(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::SWAPCHAIN_KHR,
                handle: captured,
            })?;
        let d = self
            .devices
            .get(&sc.device)
            .ok_or_else(|| ReplayError::Other("the swapchain's device was destroyed".into()))?;
        let Some(&(image, _)) = sc.images.get(index as usize) else {
            return Err(ReplayError::Other(format!(
                "present of swapchain image {index}, which vkGetSwapchainImagesKHR never returned"
            )));
        };
        // SAFETY: instance, physical device, device, image and queue are the session's own.
        unsafe {
            if sc.window.is_none() {
                let family = d.queue_family_of.get(&queue.as_raw()).copied().unwrap_or(0);
                sc.window = Some(Box::new(crate::window::Window::open(
                    entry,
                    &instance,
                    pd,
                    &d.device,
                    family,
                    sc.extent,
                    "quarry replay",
                )?));
            }
            let w = sc.window.as_mut().expect("opened above");
            w.present(&d.device, queue, image, sc.extent, waits)?;
        }
        self.wsi.presented += 1;
        Ok(())
    }

    /// An empty submission on a queue of `device`: how emulated acquire signals and emulated
    /// present waits.
    pub fn empty_submit(
        &self,
        device: u64,
        queue: Option<vk::Queue>,
        wait: &[vk::Semaphore],
        signal: &[vk::Semaphore],
        fence: vk::Fence,
    ) -> Result<(), ReplayError> {
        let d = self.device(device)?;
        let q = match queue.or_else(|| d.queues.first().copied()) {
            Some(q) => q,
            None => {
                let fam = d.queue_counts.keys().min().copied().unwrap_or(0);
                // SAFETY: a family the device was created with.
                unsafe { d.device.get_device_queue(fam, 0) }
            }
        };
        let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; wait.len()];
        let si = vk::SubmitInfo::default()
            .wait_semaphores(wait)
            .wait_dst_stage_mask(&stages)
            .signal_semaphores(signal);
        // SAFETY: handles belong to this device.
        unsafe { d.device.queue_submit(q, &[si], fence) }
            .map_err(|e| ReplayError::vk("vkQueueSubmit (emulated swapchain)", e))
    }
}
