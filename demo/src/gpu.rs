//! Instance, device and the small helpers every scene uses. Plain core
//! Vulkan 1.3 plus optional extensions, so that the capture layer sees
//! ordinary calls (vkAllocateMemory, vkMapMemory, vkGetQueryPoolResults).
//! Creating them is in `setup`; this file holds the helpers.

use anyhow::{anyhow, bail, Context as _, Result};
use ash::vk;
use std::ffi::{c_void, CStr, CString};
use std::sync::Mutex;

mod setup;

/// Messages collected by the debug-utils messenger (validation runs).
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    let text = if data.is_null() || (*data).p_message.is_null() {
        String::from("(no message text)")
    } else {
        CStr::from_ptr((*data).p_message)
            .to_string_lossy()
            .into_owned()
    };
    // The loader reports through the same messenger (e.g. "layer forced
    // enabled by env var"); only the layers' validation and performance
    // findings, and errors of any kind, count.
    let counts = kind.intersects(
        vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
            | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
    ) || severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR);
    if !counts {
        return vk::FALSE;
    }
    if let Ok(mut m) = MESSAGES.lock() {
        m.push(format!("[{severity:?} {kind:?}] {text}"));
    }
    vk::FALSE
}

/// Takes the messages gathered so far.
pub fn take_messages() -> Vec<String> {
    MESSAGES
        .lock()
        .map(|mut m| std::mem::take(&mut *m))
        .unwrap_or_default()
}

/// What the chosen device offers, decided once at start-up.
#[derive(Default, Clone, Debug)]
pub struct Support {
    pub debug_utils: bool,
    pub pipeline_statistics: bool,
    pub occlusion_precise: bool,
    pub geometry: bool,
    pub tessellation: bool,
    pub inherited_queries: bool,
    pub multiview: bool,
    pub host_query_reset: bool,
    pub xfb: bool,
    pub xfb_queries: bool,
    pub xfb_streams: u32,
    pub xfb_buffers: u32,
    pub geometry_streams: bool,
    pub pg_query: bool,
    pub pg_discard: bool,
    pub pg_nonzero_streams: bool,
    pub calibrated: bool,
    pub mesh: bool,
    pub mesh_queries: bool,
    /// VK_EXT_multi_draw's multiDraw.
    pub multi_draw: bool,
    pub perf_query: bool,
    pub accel: bool,
    pub rt_maintenance1: bool,
    /// H.264 decode with result-status queries (see video.rs).
    pub video: crate::video::VideoSupport,
    /// VK_KHR_swapchain enabled (windowed mode).
    pub swapchain: bool,
}

pub struct Gpu {
    pub _entry: ash::Entry,
    pub instance: ash::Instance,
    pub messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub pdev: vk::PhysicalDevice,
    pub props: vk::PhysicalDeviceProperties,
    pub mem_props: vk::PhysicalDeviceMemoryProperties,
    pub families: Vec<vk::QueueFamilyProperties>,
    pub device: ash::Device,
    pub family: u32,
    pub queue: vk::Queue,
    /// A second queue family with timestamps, when the device has one.
    pub second: Option<(u32, vk::Queue)>,
    pub support: Support,
    pub name: String,
    pub driver: String,
    pub debug: Option<ash::ext::debug_utils::Device>,
    pub xfb_fn: Option<ash::ext::transform_feedback::Device>,
    pub calib: Option<(
        ash::ext::calibrated_timestamps::Instance,
        ash::ext::calibrated_timestamps::Device,
    )>,
    pub mesh_fn: Option<ash::ext::mesh_shader::Device>,
    pub multi_draw_fn: Option<ash::ext::multi_draw::Device>,
    pub perf: Option<(
        ash::khr::performance_query::Instance,
        ash::khr::performance_query::Device,
    )>,
    pub accel_fn: Option<ash::khr::acceleration_structure::Device>,
    /// The video decode queue, when `support.video` is ready.
    pub video: Option<crate::video::VideoDevice>,
    pub pool: vk::CommandPool,
}

pub struct Options<'a> {
    pub gpu: Option<&'a str>,
    pub validate: bool,
    /// Instance extensions a window needs (empty when headless).
    pub surface_extensions: &'a [&'a CStr],
    /// Enable VK_KHR_swapchain (windowed mode).
    pub swapchain: bool,
    /// Probe for and enable VK_KHR_acceleration_structure when the device has it.
    pub accel: bool,
    /// Probe for and enable the video decode extensions and queue when the device has them.
    pub video: bool,
}

fn has(list: &[vk::ExtensionProperties], name: &CStr) -> bool {
    list.iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(name))
}

impl Gpu {
    /// Gives an object a VK_EXT_debug_utils name (the viewer shows them).
    pub fn name_object<H: vk::Handle>(&self, handle: H, name: &str) {
        if let (Some(du), Ok(n)) = (&self.debug, CString::new(name)) {
            let info = vk::DebugUtilsObjectNameInfoEXT::default()
                .object_handle(handle)
                .object_name(&n);
            // Naming is cosmetic; a failure must not stop the workload.
            let _ = unsafe { du.set_debug_utils_object_name(&info) };
        }
    }

    pub fn query_pool(
        &self,
        ty: vk::QueryType,
        count: u32,
        stats: vk::QueryPipelineStatisticFlags,
        name: &str,
    ) -> Result<vk::QueryPool> {
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(ty)
            .query_count(count)
            .pipeline_statistics(stats);
        let pool = unsafe { self.device.create_query_pool(&ci, None) }
            .with_context(|| format!("vkCreateQueryPool ({name})"))?;
        self.name_object(pool, name);
        Ok(pool)
    }

    pub fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> Result<u32> {
        (0..self.mem_props.memory_type_count)
            .find(|&i| {
                bits & (1 << i) != 0
                    && self.mem_props.memory_types[i as usize]
                        .property_flags
                        .contains(want)
            })
            .ok_or_else(|| anyhow!("no memory type with {want:?} for mask {bits:#x}"))
    }

    /// A host-visible, coherent buffer, persistently mapped.
    pub fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, name: &str) -> Result<Buffer> {
        let device = &self.device;
        let buffer = unsafe {
            device.create_buffer(
                &vk::BufferCreateInfo::default().size(size).usage(usage),
                None,
            )
        }
        .with_context(|| format!("vkCreateBuffer ({name})"))?;
        self.name_object(buffer, name);
        let req = unsafe { device.get_buffer_memory_requirements(buffer) };
        let ty = self.memory_type(
            req.memory_type_bits,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        )?;
        let mut flags =
            vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut ai = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(ty);
        if usage.contains(vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS) {
            ai = ai.push_next(&mut flags);
        }
        let memory = unsafe { device.allocate_memory(&ai, None) }
            .with_context(|| format!("vkAllocateMemory ({name})"))?;
        unsafe { device.bind_buffer_memory(buffer, memory, 0) }.context("vkBindBufferMemory")?;
        let ptr =
            unsafe { device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .context("vkMapMemory")? as *mut u8;
        // Start from zero so read-backs never see stale memory.
        unsafe { std::ptr::write_bytes(ptr, 0, size as usize) };
        Ok(Buffer {
            buffer,
            memory,
            ptr,
            size,
        })
    }

    /// A device-local image with one view.
    pub fn image(
        &self,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        aspect: vk::ImageAspectFlags,
        extent: vk::Extent2D,
        layers: u32,
        name: &str,
    ) -> Result<Image> {
        self.image_ms(
            format,
            usage,
            aspect,
            extent,
            layers,
            vk::SampleCountFlags::TYPE_1,
            name,
        )
    }

    /// Like `image`, with a sample count.
    #[allow(clippy::too_many_arguments)]
    pub fn image_ms(
        &self,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        aspect: vk::ImageAspectFlags,
        extent: vk::Extent2D,
        layers: u32,
        samples: vk::SampleCountFlags,
        name: &str,
    ) -> Result<Image> {
        let device = &self.device;
        let image = unsafe {
            device.create_image(
                &vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(format)
                    .extent(vk::Extent3D {
                        width: extent.width,
                        height: extent.height,
                        depth: 1,
                    })
                    .mip_levels(1)
                    .array_layers(layers)
                    .samples(samples)
                    .tiling(vk::ImageTiling::OPTIMAL)
                    .usage(usage),
                None,
            )
        }
        .with_context(|| format!("vkCreateImage ({name})"))?;
        self.name_object(image, name);
        let req = unsafe { device.get_image_memory_requirements(image) };
        let ty = self
            .memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)
            .or_else(|_| {
                self.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::empty())
            })?;
        let memory = unsafe {
            device.allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
        }
        .with_context(|| format!("vkAllocateMemory ({name})"))?;
        unsafe { device.bind_image_memory(image, memory, 0) }.context("vkBindImageMemory")?;
        let view = unsafe {
            device.create_image_view(
                &vk::ImageViewCreateInfo::default()
                    .image(image)
                    .view_type(if layers > 1 {
                        vk::ImageViewType::TYPE_2D_ARRAY
                    } else {
                        vk::ImageViewType::TYPE_2D
                    })
                    .format(format)
                    .subresource_range(range(aspect, layers)),
                None,
            )
        }
        .context("vkCreateImageView")?;
        Ok(Image {
            image,
            memory,
            view,
            aspect,
            layers,
        })
    }

    pub fn shader(&self, code: &[u8]) -> Result<vk::ShaderModule> {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(code))
            .context("embedded SPIR-V is malformed")?;
        unsafe {
            self.device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
        }
        .context("vkCreateShaderModule")
    }

    pub fn command_buffer(
        &self,
        pool: vk::CommandPool,
        level: vk::CommandBufferLevel,
    ) -> Result<vk::CommandBuffer> {
        let cbs = unsafe {
            self.device.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(level)
                    .command_buffer_count(1),
            )
        }
        .context("vkAllocateCommandBuffers")?;
        Ok(cbs[0])
    }

    /// Records `f` into a fresh primary command buffer of the main family.
    pub fn record(
        &self,
        f: impl FnOnce(&ash::Device, vk::CommandBuffer) -> Result<()>,
    ) -> Result<vk::CommandBuffer> {
        let cb = self.command_buffer(self.pool, vk::CommandBufferLevel::PRIMARY)?;
        unsafe {
            self.device.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
        }
        .context("vkBeginCommandBuffer")?;
        f(&self.device, cb)?;
        unsafe { self.device.end_command_buffer(cb) }.context("vkEndCommandBuffer")?;
        Ok(cb)
    }

    pub fn fence(&self) -> Result<vk::Fence> {
        unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .context("vkCreateFence")
    }

    /// Submits and returns the fence to wait on.
    pub fn submit(&self, queue: vk::Queue, cb: vk::CommandBuffer) -> Result<vk::Fence> {
        let fence = self.fence()?;
        let cbs = [cb];
        unsafe {
            self.device.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                fence,
            )
        }
        .context("vkQueueSubmit")?;
        Ok(fence)
    }

    pub fn wait(&self, fence: vk::Fence) -> Result<()> {
        unsafe {
            self.device
                .wait_for_fences(&[fence], true, 20_000_000_000)
                .context("vkWaitForFences (20 s)")?;
            self.device.destroy_fence(fence, None);
        }
        Ok(())
    }

    pub fn submit_wait(&self, cb: vk::CommandBuffer) -> Result<()> {
        let fence = self.submit(self.queue, cb)?;
        self.wait(fence)?;
        unsafe { self.device.free_command_buffers(self.pool, &[cb]) };
        Ok(())
    }

    /// vkGetQueryPoolResults with an explicit stride, returning the raw
    /// VkResult (NOT_READY is an answer here, not an error) and the bytes.
    pub fn results(
        &self,
        pool: vk::QueryPool,
        first: u32,
        count: u32,
        stride: usize,
        flags: vk::QueryResultFlags,
    ) -> Result<(vk::Result, Vec<u8>)> {
        let mut data = vec![0u8; stride * count as usize];
        let r = unsafe {
            (self.device.fp_v1_0().get_query_pool_results)(
                self.device.handle(),
                pool,
                first,
                count,
                data.len(),
                data.as_mut_ptr().cast(),
                stride as u64,
                flags,
            )
        };
        match r {
            vk::Result::SUCCESS | vk::Result::NOT_READY => Ok((r, data)),
            e => Err(anyhow!("vkGetQueryPoolResults: {e}")),
        }
    }

    /// 64-bit results of `count` queries with `per` values each, waiting.
    pub fn results64(
        &self,
        pool: vk::QueryPool,
        first: u32,
        count: u32,
        per: usize,
    ) -> Result<Vec<u64>> {
        let (r, bytes) = self.results(
            pool,
            first,
            count,
            per * 8,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
        )?;
        if r != vk::Result::SUCCESS {
            bail!(
                "vkGetQueryPoolResults with WAIT returned {r} (pool {pool:?}, queries {first}..{})",
                first + count
            );
        }
        Ok(u64s(&bytes))
    }
}

pub fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk")))
        .collect()
}

pub fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4-byte chunk")))
        .collect()
}

pub fn range(aspect: vk::ImageAspectFlags, layers: u32) -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: aspect,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: layers,
    }
}

pub struct Buffer {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub ptr: *mut u8,
    pub size: u64,
}

impl Buffer {
    pub fn write<T: Copy>(&self, data: &[T]) {
        let bytes = std::mem::size_of_val(data);
        assert!(bytes as u64 <= self.size, "buffer write past the end");
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), self.ptr, bytes) };
    }

    pub fn bytes(&self) -> Vec<u8> {
        unsafe { std::slice::from_raw_parts(self.ptr, self.size as usize).to_vec() }
    }

    pub fn zero(&self) {
        unsafe { std::ptr::write_bytes(self.ptr, 0, self.size as usize) };
    }

    pub fn destroy(&self, device: &ash::Device) {
        unsafe {
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
    }
}

pub struct Image {
    pub image: vk::Image,
    pub memory: vk::DeviceMemory,
    pub view: vk::ImageView,
    pub aspect: vk::ImageAspectFlags,
    pub layers: u32,
}

impl Image {
    pub fn destroy(&self, device: &ash::Device) {
        unsafe {
            device.destroy_image_view(self.view, None);
            device.destroy_image(self.image, None);
            device.free_memory(self.memory, None);
        }
    }
}
