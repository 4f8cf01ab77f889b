//! A Vulkan program with two instances alive at once, as apps that keep a probe instance, or a GL
//! driver on Zink beside the app's own Vulkan, have them: instance A with device A, instance B
//! with devices B and C (two devices on one physical device, which B finds through
//! vkEnumeratePhysicalDeviceGroups). Each device draws one rectangle of known size into a 64x64
//! target inside an occlusion query, between two timestamps, and reads both pools back. Objects end interleaved: device A and instance A are destroyed while B and C
//! still work (B draws again after instance A is gone), then C, B and instance B.
//!
//! Prints one line per read: `device X round R samples N timestamps T0 T1`, so a test knows the
//! answers (`tests/tests/replay_instances.rs`). Runs on whatever GPU the loader offers first.

use std::ffi::CStr;

use ash::vk;

const VERT: &[u8] = include_bytes!("../../../demo/shaders/quad.vert.spv");
const FRAG: &[u8] = include_bytes!("../../../demo/shaders/color.frag.spv");
const SIZE: u32 = 64;

/// A rectangle in clip space and the pixels it covers in the 64x64 target.
struct Rect {
    x1: f32,
    y1: f32,
}

impl Rect {
    /// From (-1, -1) to (x1, y1); edges on pixel boundaries, so coverage is exact.
    fn samples(&self) -> u64 {
        let px = |c: f32| ((c + 1.0) / 2.0 * SIZE as f32) as u64;
        px(self.x1) * px(self.y1)
    }
}

fn spirv(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn create_instance(entry: &ash::Entry, name: &CStr) -> ash::Instance {
    let app = vk::ApplicationInfo::default()
        .application_name(name)
        .api_version(vk::API_VERSION_1_1);
    let ci = vk::InstanceCreateInfo::default().application_info(&app);
    unsafe { entry.create_instance(&ci, None) }.expect("vkCreateInstance")
}

/// A device with its graphics queue and everything one draw needs.
struct Gpu {
    name: &'static str,
    device: ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    cb: vk::CommandBuffer,
    occlusion: vk::QueryPool,
    timestamps: vk::QueryPool,
    objects: Objects,
    rect: Rect,
}

/// What `Gpu::destroy` destroys besides the pools.
struct Objects {
    image: vk::Image,
    view: vk::ImageView,
    render_pass: vk::RenderPass,
    framebuffer: vk::Framebuffer,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    shaders: [vk::ShaderModule; 2],
    buffer: vk::Buffer,
    memory: [vk::DeviceMemory; 2],
}

fn memory_type(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    bits: u32,
    want: vk::MemoryPropertyFlags,
) -> u32 {
    let props = unsafe { instance.get_physical_device_memory_properties(pd) };
    (0..props.memory_type_count)
        .find(|&i| {
            bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(want)
        })
        .expect("a memory type")
}

impl Gpu {
    unsafe fn new(
        instance: &ash::Instance,
        pd: vk::PhysicalDevice,
        name: &'static str,
        rect: Rect,
    ) -> Gpu {
        let family = instance
            .get_physical_device_queue_family_properties(pd)
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
            .expect("a graphics queue family") as u32;
        let prio = [1.0];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let features = vk::PhysicalDeviceFeatures::default().occlusion_query_precise(true);
        let ci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_features(&features);
        let device = instance
            .create_device(pd, &ci, None)
            .expect("vkCreateDevice");
        let queue = device.get_device_queue(family, 0);
        let pool = device
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(family),
                None,
            )
            .unwrap();
        let cb = device
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .command_buffer_count(1),
            )
            .unwrap()[0];
        let occlusion = device
            .create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::OCCLUSION)
                    .query_count(1),
                None,
            )
            .unwrap();
        let timestamps = device
            .create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2),
                None,
            )
            .unwrap();
        let objects = Objects::new(instance, pd, &device);
        Gpu {
            name,
            device,
            queue,
            pool,
            cb,
            occlusion,
            timestamps,
            objects,
            rect,
        }
    }

    /// One draw inside the occlusion query, between the timestamps; prints what it read.
    unsafe fn draw(&self, round: u32) {
        let (d, o, cb) = (&self.device, &self.objects, self.cb);
        d.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty())
            .unwrap();
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_reset_query_pool(cb, self.occlusion, 0, 1);
        d.cmd_reset_query_pool(cb, self.timestamps, 0, 2);
        d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, self.timestamps, 0);
        let clear = [vk::ClearValue::default()];
        let area = vk::Rect2D::default().extent(vk::Extent2D {
            width: SIZE,
            height: SIZE,
        });
        d.cmd_begin_render_pass(
            cb,
            &vk::RenderPassBeginInfo::default()
                .render_pass(o.render_pass)
                .framebuffer(o.framebuffer)
                .render_area(area)
                .clear_values(&clear),
            vk::SubpassContents::INLINE,
        );
        d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::GRAPHICS, o.pipeline);
        d.cmd_bind_vertex_buffers(cb, 0, &[o.buffer], &[0]);
        let color: [f32; 4] = [1.0, 0.5, 0.0, 1.0];
        let bytes: Vec<u8> = color.iter().flat_map(|c| c.to_le_bytes()).collect();
        d.cmd_push_constants(cb, o.layout, vk::ShaderStageFlags::FRAGMENT, 0, &bytes);
        d.cmd_begin_query(cb, self.occlusion, 0, vk::QueryControlFlags::PRECISE);
        d.cmd_draw(cb, 6, 1, 0, 0);
        d.cmd_end_query(cb, self.occlusion, 0);
        d.cmd_end_render_pass(cb);
        d.cmd_write_timestamp(
            cb,
            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            self.timestamps,
            1,
        );
        d.end_command_buffer(cb).unwrap();
        let cbs = [cb];
        d.queue_submit(
            self.queue,
            &[vk::SubmitInfo::default().command_buffers(&cbs)],
            vk::Fence::null(),
        )
        .unwrap();
        d.queue_wait_idle(self.queue).unwrap();
        let mut samples = [0u64; 1];
        d.get_query_pool_results(
            self.occlusion,
            0,
            &mut samples,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
        )
        .unwrap();
        let mut ts = [0u64; 2];
        d.get_query_pool_results(
            self.timestamps,
            0,
            &mut ts,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
        )
        .unwrap();
        println!(
            "device {} round {round} samples {} timestamps {} {} expected {}",
            self.name,
            samples[0],
            ts[0],
            ts[1],
            self.rect.samples()
        );
    }

    unsafe fn destroy(self) {
        let d = &self.device;
        let o = &self.objects;
        d.device_wait_idle().unwrap();
        d.destroy_query_pool(self.occlusion, None);
        d.destroy_query_pool(self.timestamps, None);
        d.destroy_command_pool(self.pool, None);
        d.destroy_pipeline(o.pipeline, None);
        d.destroy_pipeline_layout(o.layout, None);
        for s in o.shaders {
            d.destroy_shader_module(s, None);
        }
        d.destroy_framebuffer(o.framebuffer, None);
        d.destroy_render_pass(o.render_pass, None);
        d.destroy_image_view(o.view, None);
        d.destroy_image(o.image, None);
        d.destroy_buffer(o.buffer, None);
        for m in o.memory {
            d.free_memory(m, None);
        }
        d.destroy_device(None);
    }
}

impl Objects {
    unsafe fn new(instance: &ash::Instance, pd: vk::PhysicalDevice, d: &ash::Device) -> Objects {
        let format = vk::Format::R8G8B8A8_UNORM;
        let image = d
            .create_image(
                &vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(format)
                    .extent(vk::Extent3D {
                        width: SIZE,
                        height: SIZE,
                        depth: 1,
                    })
                    .mip_levels(1)
                    .array_layers(1)
                    .samples(vk::SampleCountFlags::TYPE_1)
                    .usage(vk::ImageUsageFlags::COLOR_ATTACHMENT),
                None,
            )
            .unwrap();
        let req = d.get_image_memory_requirements(image);
        let image_memory = d
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(memory_type(
                        instance,
                        pd,
                        req.memory_type_bits,
                        vk::MemoryPropertyFlags::empty(),
                    )),
                None,
            )
            .unwrap();
        d.bind_image_memory(image, image_memory, 0).unwrap();
        let view = d
            .create_image_view(
                &vk::ImageViewCreateInfo::default()
                    .image(image)
                    .view_type(vk::ImageViewType::TYPE_2D)
                    .format(format)
                    .subresource_range(
                        vk::ImageSubresourceRange::default()
                            .aspect_mask(vk::ImageAspectFlags::COLOR)
                            .level_count(1)
                            .layer_count(1),
                    ),
                None,
            )
            .unwrap();
        let attachment = [vk::AttachmentDescription::default()
            .format(format)
            .samples(vk::SampleCountFlags::TYPE_1)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .initial_layout(vk::ImageLayout::UNDEFINED)
            .final_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)];
        let refs = [vk::AttachmentReference::default()
            .attachment(0)
            .layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)];
        let subpass = [vk::SubpassDescription::default()
            .pipeline_bind_point(vk::PipelineBindPoint::GRAPHICS)
            .color_attachments(&refs)];
        let render_pass = d
            .create_render_pass(
                &vk::RenderPassCreateInfo::default()
                    .attachments(&attachment)
                    .subpasses(&subpass),
                None,
            )
            .unwrap();
        let views = [view];
        let framebuffer = d
            .create_framebuffer(
                &vk::FramebufferCreateInfo::default()
                    .render_pass(render_pass)
                    .attachments(&views)
                    .width(SIZE)
                    .height(SIZE)
                    .layers(1),
                None,
            )
            .unwrap();
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::FRAGMENT)
            .size(16)];
        let layout = d
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().push_constant_ranges(&push),
                None,
            )
            .unwrap();
        let module = |code: &[u8]| {
            let words = spirv(code);
            d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
                .unwrap()
        };
        let shaders = [module(VERT), module(FRAG)];
        let main = c"main";
        let stages = [
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::VERTEX)
                .module(shaders[0])
                .name(main),
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::FRAGMENT)
                .module(shaders[1])
                .name(main),
        ];
        let bindings = [vk::VertexInputBindingDescription::default()
            .binding(0)
            .stride(16)
            .input_rate(vk::VertexInputRate::VERTEX)];
        let attributes = [vk::VertexInputAttributeDescription::default()
            .location(0)
            .binding(0)
            .format(vk::Format::R32G32B32A32_SFLOAT)];
        let vertex = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&bindings)
            .vertex_attribute_descriptions(&attributes);
        let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
            .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
        let viewports = [vk::Viewport {
            x: 0.0,
            y: 0.0,
            width: SIZE as f32,
            height: SIZE as f32,
            min_depth: 0.0,
            max_depth: 1.0,
        }];
        let scissors = [vk::Rect2D::default().extent(vk::Extent2D {
            width: SIZE,
            height: SIZE,
        })];
        let viewport = vk::PipelineViewportStateCreateInfo::default()
            .viewports(&viewports)
            .scissors(&scissors);
        let raster = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .line_width(1.0);
        let multisample = vk::PipelineMultisampleStateCreateInfo::default()
            .rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let blend_attachments = [vk::PipelineColorBlendAttachmentState::default()
            .color_write_mask(vk::ColorComponentFlags::RGBA)];
        let blend =
            vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend_attachments);
        let pci = [vk::GraphicsPipelineCreateInfo::default()
            .stages(&stages)
            .vertex_input_state(&vertex)
            .input_assembly_state(&assembly)
            .viewport_state(&viewport)
            .rasterization_state(&raster)
            .multisample_state(&multisample)
            .color_blend_state(&blend)
            .layout(layout)
            .render_pass(render_pass)];
        let pipeline = d
            .create_graphics_pipelines(vk::PipelineCache::null(), &pci, None)
            .map_err(|(_, e)| e)
            .unwrap()[0];
        let buffer = d
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(6 * 16)
                    .usage(vk::BufferUsageFlags::VERTEX_BUFFER),
                None,
            )
            .unwrap();
        let req = d.get_buffer_memory_requirements(buffer);
        let buffer_memory = d
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(memory_type(
                        instance,
                        pd,
                        req.memory_type_bits,
                        vk::MemoryPropertyFlags::HOST_VISIBLE
                            | vk::MemoryPropertyFlags::HOST_COHERENT,
                    )),
                None,
            )
            .unwrap();
        d.bind_buffer_memory(buffer, buffer_memory, 0).unwrap();
        Objects {
            image,
            view,
            render_pass,
            framebuffer,
            layout,
            pipeline,
            shaders,
            buffer,
            memory: [image_memory, buffer_memory],
        }
    }

    /// Writes the rectangle's two triangles into the vertex buffer.
    unsafe fn fill(&self, d: &ash::Device, rect: &Rect) {
        let (x0, y0, x1, y1) = (-1.0f32, -1.0f32, rect.x1, rect.y1);
        let v: [[f32; 4]; 6] = [
            [x0, y0, 0.0, 1.0],
            [x1, y0, 0.0, 1.0],
            [x0, y1, 0.0, 1.0],
            [x1, y0, 0.0, 1.0],
            [x1, y1, 0.0, 1.0],
            [x0, y1, 0.0, 1.0],
        ];
        let p = d
            .map_memory(
                self.memory[1],
                0,
                vk::WHOLE_SIZE,
                vk::MemoryMapFlags::empty(),
            )
            .unwrap() as *mut [[f32; 4]; 6];
        p.write_unaligned(v);
        d.unmap_memory(self.memory[1]);
    }
}

fn first_gpu(instance: &ash::Instance) -> vk::PhysicalDevice {
    unsafe { instance.enumerate_physical_devices() }.expect("vkEnumeratePhysicalDevices")[0]
}

/// The first GPU of the first device group (as apps that look for groups do).
fn first_group_gpu(instance: &ash::Instance) -> vk::PhysicalDevice {
    unsafe {
        let n = instance
            .enumerate_physical_device_groups_len()
            .expect("vkEnumeratePhysicalDeviceGroups");
        let mut groups = vec![vk::PhysicalDeviceGroupProperties::default(); n];
        instance
            .enumerate_physical_device_groups(&mut groups)
            .expect("vkEnumeratePhysicalDeviceGroups");
        groups[0].physical_devices[0]
    }
}

fn main() {
    let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader");
    unsafe {
        let a = create_instance(&entry, c"two-instances-a");
        let b = create_instance(&entry, c"two-instances-b");
        // Devices made after both instances exist, B's first; B finds its GPU through groups.
        let pd_b = first_group_gpu(&b);
        let pd_a = first_gpu(&a);
        let gpu_b = Gpu::new(&b, pd_b, "B", Rect { x1: 0.0, y1: 0.0 });
        let gpu_a = Gpu::new(&a, pd_a, "A", Rect { x1: 0.0, y1: 1.0 });
        let gpu_c = Gpu::new(&b, pd_b, "C", Rect { x1: -0.5, y1: 0.0 });
        for g in [&gpu_a, &gpu_b, &gpu_c] {
            g.objects.fill(&g.device, &g.rect);
        }
        gpu_a.draw(0);
        gpu_b.draw(0);
        gpu_c.draw(0);
        // Instance A ends while B's devices go on.
        gpu_a.destroy();
        a.destroy_instance(None);
        gpu_b.draw(1);
        gpu_c.draw(1);
        gpu_c.destroy();
        gpu_b.draw(2);
        gpu_b.destroy();
        b.destroy_instance(None);
    }
}
