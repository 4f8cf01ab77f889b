//! Encode real ash structures through the generated encoders, decode them back and check the
//! owned values; corrupt and truncated inputs must give errors, never panics.

use ash::vk;
use ash::vk::Handle;
use std::ffi::{c_char, c_void};
use vkstream::{decode_call, encode, ids, params, types, Call, Encoder, PNext, ToJson};

fn decode(cmd: u32, e: Encoder) -> (Call, Vec<u8>) {
    let bytes = e.into_bytes();
    let call = decode_call(cmd, &bytes).unwrap_or_else(|err| panic!("decode failed: {err}"));
    // Every strict prefix is an error, not a panic and not a success.
    for cut in 0..bytes.len() {
        assert!(
            decode_call(cmd, &bytes[..cut]).is_err(),
            "prefix of {cut} bytes decoded"
        );
    }
    // Output must be valid JSON.
    let json = call.to_json();
    serde_json::from_str::<serde_json::Value>(&json)
        .unwrap_or_else(|e| panic!("bad JSON {e}: {json}"));
    (call, bytes)
}

#[test]
fn device_create_info_with_feature_chain() {
    let priorities = [1.0f32, 0.5];
    let queue = vk::DeviceQueueCreateInfo::default()
        .queue_family_index(2)
        .queue_priorities(&priorities);
    let queues = [queue];
    let ext = c"VK_KHR_swapchain";
    let exts = [ext.as_ptr()];
    // A structure this build does not know, inside the chain: recorded as a marker, chain continues.
    #[repr(C)]
    struct Foreign {
        s_type: vk::StructureType,
        p_next: *mut c_void,
        payload: u32,
    }
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default()
        .timeline_semaphore(true)
        .buffer_device_address(true);
    let mut foreign = Foreign {
        s_type: vk::StructureType::from_raw(1_999_999_000),
        p_next: std::ptr::null_mut(),
        payload: 7,
    };
    v12.p_next = &mut foreign as *mut Foreign as *mut c_void;
    let mut f2 = vk::PhysicalDeviceFeatures2::default();
    f2.features.shader_float64 = vk::TRUE;
    f2.features.sampler_anisotropy = vk::TRUE;
    f2.p_next = &mut v12 as *mut _ as *mut c_void;
    let mut ci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&exts);
    ci.p_next = &f2 as *const _ as *const c_void;
    let device = vk::Device::from_raw(0x5555_0000_1234);
    let mut e = Encoder::new();
    unsafe {
        encode::vkCreateDevice(
            &mut e,
            vk::PhysicalDevice::from_raw(0xabc),
            &ci,
            std::ptr::null(),
            &device as *const _ as *mut _,
        )
    };
    let (call, _) = decode(ids::vkCreateDevice, e);
    let Call::vkCreateDevice(p) = call else {
        panic!("wrong variant {call:?}")
    };
    assert_eq!(p.physical_device, 0xabc);
    assert_eq!(p.p_device, Some(0x5555_0000_1234));
    assert!(p.p_allocator.is_none());
    let info = p.p_create_info.expect("create info");
    let q = info.p_queue_create_infos.as_ref().unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].queue_family_index, 2);
    assert_eq!(q[0].p_queue_priorities.as_deref(), Some(&[1.0f32, 0.5][..]));
    assert_eq!(
        info.pp_enabled_extension_names.as_deref(),
        Some(&["VK_KHR_swapchain".to_string()][..])
    );
    assert!(info.pp_enabled_layer_names.is_none());
    assert_eq!(info.p_next.len(), 3, "{:?}", info.p_next);
    match &info.p_next[0] {
        PNext::VkPhysicalDeviceFeatures2(f) => {
            assert_eq!(f.features.shader_float64, 1);
            assert_eq!(f.features.sampler_anisotropy, 1);
            assert_eq!(f.features.geometry_shader, 0);
            assert!(
                f.p_next.is_empty(),
                "chain elements are flattened into the top struct"
            );
        }
        other => panic!("expected Features2, got {other:?}"),
    }
    match &info.p_next[1] {
        PNext::VkPhysicalDeviceVulkan12Features(f) => {
            assert_eq!(f.timeline_semaphore, 1);
            assert_eq!(f.buffer_device_address, 1);
            assert_eq!(f.descriptor_indexing, 0);
        }
        other => panic!("expected Vulkan12Features, got {other:?}"),
    }
    assert_eq!(info.p_next[2], PNext::Unknown(1_999_999_000));
    assert_eq!(info.p_next[2].s_type(), 1_999_999_000);
    assert_eq!(
        info.p_next[0].s_type(),
        vk::StructureType::PHYSICAL_DEVICE_FEATURES_2.as_raw()
    );
}

#[test]
fn graphics_pipeline_full_state_and_created_handles() {
    let code = [0x0723_0203u32, 0x0001_0000, 0, 0];
    let entries = [vk::SpecializationMapEntry {
        constant_id: 3,
        offset: 4,
        size: 4,
    }];
    let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let spec = vk::SpecializationInfo::default()
        .map_entries(&entries)
        .data(&data);
    let mut module_ci = vk::ShaderModuleCreateInfo::default().code(&code);
    let stages = [
        vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::VERTEX)
            .name(c"main")
            .specialization_info(&spec)
            .push_next(&mut module_ci),
        vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::FRAGMENT)
            .module(vk::ShaderModule::from_raw(77))
            .name(c"fs_main"),
    ];
    let bindings = [vk::VertexInputBindingDescription {
        binding: 0,
        stride: 16,
        input_rate: vk::VertexInputRate::VERTEX,
    }];
    let attrs = [vk::VertexInputAttributeDescription {
        location: 1,
        binding: 0,
        format: vk::Format::R32G32_SFLOAT,
        offset: 8,
    }];
    let vi = vk::PipelineVertexInputStateCreateInfo::default()
        .vertex_binding_descriptions(&bindings)
        .vertex_attribute_descriptions(&attrs);
    let ia = vk::PipelineInputAssemblyStateCreateInfo::default()
        .topology(vk::PrimitiveTopology::TRIANGLE_STRIP);
    let viewports = [vk::Viewport {
        x: 0.0,
        y: 0.0,
        width: 640.0,
        height: 480.0,
        min_depth: 0.0,
        max_depth: 1.0,
    }];
    let vp = vk::PipelineViewportStateCreateInfo::default()
        .viewports(&viewports)
        .scissor_count(1);
    let rs = vk::PipelineRasterizationStateCreateInfo::default()
        .cull_mode(vk::CullModeFlags::BACK)
        .line_width(1.0);
    let mask = [0xffff_fff0u32, 0x1];
    let mut ms = vk::PipelineMultisampleStateCreateInfo::default()
        .rasterization_samples(vk::SampleCountFlags::TYPE_64);
    ms.p_sample_mask = mask.as_ptr();
    let att = [vk::PipelineColorBlendAttachmentState::default()
        .color_write_mask(vk::ColorComponentFlags::RGBA)];
    let cb = vk::PipelineColorBlendStateCreateInfo::default()
        .attachments(&att)
        .blend_constants([0.25, 0.5, 0.75, 1.0]);
    let dyns = [vk::DynamicState::SCISSOR];
    let ds = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dyns);
    let ci = [vk::GraphicsPipelineCreateInfo::default()
        .stages(&stages)
        .vertex_input_state(&vi)
        .input_assembly_state(&ia)
        .viewport_state(&vp)
        .rasterization_state(&rs)
        .multisample_state(&ms)
        .color_blend_state(&cb)
        .dynamic_state(&ds)
        .layout(vk::PipelineLayout::from_raw(99))
        .render_pass(vk::RenderPass::from_raw(98))];
    let out = [vk::Pipeline::from_raw(0x1001)];
    let mut e = Encoder::new();
    unsafe {
        encode::vkCreateGraphicsPipelines(
            &mut e,
            vk::Device::from_raw(1),
            vk::PipelineCache::null(),
            1,
            ci.as_ptr(),
            std::ptr::null(),
            out.as_ptr() as *mut _,
        )
    };
    let (call, _) = decode(ids::vkCreateGraphicsPipelines, e);
    let Call::vkCreateGraphicsPipelines(p) = call else {
        panic!()
    };
    assert_eq!(p.p_pipelines, Some(vec![0x1001]));
    let gp = &p.p_create_infos.as_ref().unwrap()[0];
    let st = gp.p_stages.as_ref().unwrap();
    assert_eq!(st.len(), 2);
    assert_eq!(st[0].p_name.as_deref(), Some("main"));
    assert_eq!(st[1].p_name.as_deref(), Some("fs_main"));
    assert_eq!(st[1].module, 77);
    assert_eq!(st[0].stage, vk::ShaderStageFlags::VERTEX.as_raw());
    let sp = st[0].p_specialization_info.as_ref().unwrap();
    assert_eq!(sp.p_data.as_deref(), Some(&data[..]));
    assert_eq!(sp.p_map_entries.as_ref().unwrap()[0].size, 4);
    match &st[0].p_next[0] {
        PNext::VkShaderModuleCreateInfo(m) => {
            // codeSize is in bytes, pCode in words (latexmath length codeSize / 4).
            assert_eq!(m.code_size, 16);
            assert_eq!(m.p_code.as_deref(), Some(&code[..]));
        }
        other => panic!("{other:?}"),
    }
    let vi = gp.p_vertex_input_state.as_ref().unwrap();
    assert_eq!(
        vi.p_vertex_attribute_descriptions.as_ref().unwrap()[0].format,
        vk::Format::R32G32_SFLOAT.as_raw()
    );
    assert_eq!(
        gp.p_viewport_state
            .as_ref()
            .unwrap()
            .p_viewports
            .as_ref()
            .unwrap()[0]
            .width,
        640.0
    );
    assert!(gp.p_viewport_state.as_ref().unwrap().p_scissors.is_none());
    // 64 samples need (64 + 31) / 32 = 2 mask words.
    assert_eq!(
        gp.p_multisample_state
            .as_ref()
            .unwrap()
            .p_sample_mask
            .as_deref(),
        Some(&mask[..])
    );
    assert_eq!(
        gp.p_color_blend_state.as_ref().unwrap().blend_constants,
        vec![0.25, 0.5, 0.75, 1.0]
    );
    assert_eq!(
        gp.p_dynamic_state.as_ref().unwrap().p_dynamic_states,
        Some(vec![vk::DynamicState::SCISSOR.as_raw()])
    );
    assert!(gp.p_tessellation_state.is_none());
    assert_eq!(gp.layout, 99);
}

#[test]
fn render_pass_begin_clear_values_are_raw_union_bytes() {
    let clears = [
        vk::ClearValue {
            color: vk::ClearColorValue {
                float32: [0.1, 0.2, 0.3, 1.0],
            },
        },
        vk::ClearValue {
            depth_stencil: vk::ClearDepthStencilValue {
                depth: 1.0,
                stencil: 3,
            },
        },
    ];
    let info = vk::RenderPassBeginInfo::default()
        .render_pass(vk::RenderPass::from_raw(5))
        .framebuffer(vk::Framebuffer::from_raw(6))
        .render_area(vk::Rect2D {
            offset: vk::Offset2D { x: -1, y: 2 },
            extent: vk::Extent2D {
                width: 64,
                height: 32,
            },
        })
        .clear_values(&clears);
    let mut e = Encoder::new();
    unsafe {
        encode::vkCmdBeginRenderPass(
            &mut e,
            vk::CommandBuffer::from_raw(9),
            &info,
            vk::SubpassContents::INLINE,
        )
    };
    let (call, _) = decode(ids::vkCmdBeginRenderPass, e);
    let Call::vkCmdBeginRenderPass(p) = call else {
        panic!()
    };
    assert_eq!(p.contents, vk::SubpassContents::INLINE.as_raw());
    let b = p.p_render_pass_begin.unwrap();
    assert_eq!(b.render_area.offset.x, -1);
    assert_eq!(b.render_area.extent.width, 64);
    let cv = b.p_clear_values.unwrap();
    assert_eq!(cv.len(), 2);
    assert_eq!(cv[0].len(), std::mem::size_of::<vk::ClearValue>());
    assert_eq!(&cv[0][..4], &0.1f32.to_le_bytes());
    assert_eq!(&cv[1][..4], &1.0f32.to_le_bytes());
    assert_eq!(&cv[1][4..8], &3u32.to_le_bytes());
}

#[test]
fn write_descriptor_set_follows_only_the_pointer_its_type_uses() {
    let buffers = [vk::DescriptorBufferInfo {
        buffer: vk::Buffer::from_raw(40),
        offset: 256,
        range: vk::WHOLE_SIZE,
    }];
    let mut w = vk::WriteDescriptorSet::default()
        .dst_set(vk::DescriptorSet::from_raw(30))
        .dst_binding(1)
        .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
        .buffer_info(&buffers);
    // Ignored by the driver for this descriptor type; may be garbage in real apps.
    w.p_image_info = 0x10 as *const vk::DescriptorImageInfo;
    w.p_texel_buffer_view = 0x20 as *const vk::BufferView;
    let writes = [w];
    let mut e = Encoder::new();
    unsafe {
        encode::vkUpdateDescriptorSets(
            &mut e,
            vk::Device::from_raw(1),
            1,
            writes.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    let (call, _) = decode(ids::vkUpdateDescriptorSets, e);
    let Call::vkUpdateDescriptorSets(p) = call else {
        panic!()
    };
    let w = &p.p_descriptor_writes.unwrap()[0];
    assert_eq!(w.dst_set, 30);
    assert_eq!(w.descriptor_count, 1);
    assert!(w.p_image_info.is_none());
    assert!(w.p_texel_buffer_view.is_none());
    let b = &w.p_buffer_info.as_ref().unwrap()[0];
    assert_eq!((b.buffer, b.offset, b.range), (40, 256, vk::WHOLE_SIZE));
    assert!(p.p_descriptor_copies.is_none());
}

#[test]
fn output_arrays_use_the_count_written_by_the_driver() {
    let mut count = 2u32;
    let props = [
        vk::QueueFamilyProperties {
            queue_flags: vk::QueueFlags::GRAPHICS,
            queue_count: 1,
            timestamp_valid_bits: 64,
            ..Default::default()
        },
        vk::QueueFamilyProperties {
            queue_flags: vk::QueueFlags::TRANSFER,
            queue_count: 4,
            timestamp_valid_bits: 36,
            ..Default::default()
        },
    ];
    let mut e = Encoder::new();
    unsafe {
        encode::vkGetPhysicalDeviceQueueFamilyProperties(
            &mut e,
            vk::PhysicalDevice::from_raw(3),
            &mut count,
            props.as_ptr() as *mut _,
        )
    };
    let (call, _) = decode(ids::vkGetPhysicalDeviceQueueFamilyProperties, e);
    let Call::vkGetPhysicalDeviceQueueFamilyProperties(p) = call else {
        panic!()
    };
    assert_eq!(p.p_queue_family_property_count, Some(2));
    let q = p.p_queue_family_properties.unwrap();
    assert_eq!(q[1].queue_count, 4);
    assert_eq!(q[1].timestamp_valid_bits, 36);
    assert_eq!(q[0].queue_flags, vk::QueueFlags::GRAPHICS.as_raw());
}

#[test]
fn value_returning_commands_record_the_value() {
    let info = vk::BufferDeviceAddressInfo::default().buffer(vk::Buffer::from_raw(12));
    let mut e = Encoder::new();
    unsafe {
        encode::vkGetBufferDeviceAddress(&mut e, vk::Device::from_raw(1), &info, 0xdead_0000)
    };
    let (call, _) = decode(ids::vkGetBufferDeviceAddress, e);
    let Call::vkGetBufferDeviceAddress(p) = call else {
        panic!()
    };
    assert_eq!(p.ret, 0xdead_0000);
    assert_eq!(p.p_info.unwrap().buffer, 12);
    // Aliases share the target's parameter type but keep their own id and name.
    let mut e = Encoder::new();
    unsafe { encode::vkGetBufferDeviceAddressKHR(&mut e, vk::Device::from_raw(1), &info, 5) };
    let (call, _) = decode(ids::vkGetBufferDeviceAddressKHR, e);
    assert_eq!(call.name(), "vkGetBufferDeviceAddressKHR");
    assert_eq!(call.id(), ids::vkGetBufferDeviceAddressKHR);
    assert!(matches!(
        call,
        Call::vkGetBufferDeviceAddressKHR(params::vkGetBufferDeviceAddress { ret: 5, .. })
    ));
}

#[test]
fn template_data_is_copied_with_the_size_the_layer_gives() {
    let data = [9u8; 24];
    let mut e = Encoder::new();
    unsafe {
        encode::vkUpdateDescriptorSetWithTemplate(
            &mut e,
            vk::Device::from_raw(1),
            vk::DescriptorSet::from_raw(2),
            vk::DescriptorUpdateTemplate::from_raw(3),
            data.as_ptr() as *const c_void,
            data.len(),
        )
    };
    let (call, _) = decode(ids::vkUpdateDescriptorSetWithTemplate, e);
    let Call::vkUpdateDescriptorSetWithTemplate(p) = call else {
        panic!()
    };
    assert_eq!(p.p_data.as_deref(), Some(&data[..]));
}

#[test]
fn strings_and_display() {
    let mut e = Encoder::new();
    let layer = vk::LayerProperties {
        spec_version: 1,
        implementation_version: 2,
        ..Default::default()
    };
    let mut layer = layer;
    for (d, s) in layer.layer_name.iter_mut().zip(b"VK_LAYER_test\"q") {
        *d = *s as c_char;
    }
    let mut n = 1u32;
    unsafe { encode::vkEnumerateInstanceLayerProperties(&mut e, &mut n, &mut layer) };
    let (call, _) = decode(ids::vkEnumerateInstanceLayerProperties, e);
    let Call::vkEnumerateInstanceLayerProperties(p) = &call else {
        panic!()
    };
    assert_eq!(
        p.p_properties.as_ref().unwrap()[0].layer_name,
        "VK_LAYER_test\"q"
    );
    let shown = call.to_string();
    assert!(
        shown.starts_with("vkEnumerateInstanceLayerProperties{"),
        "{shown}"
    );
    assert!(
        shown.contains(r#""layer_name":"VK_LAYER_test\"q""#),
        "{shown}"
    );
    let owned = types::VkExtent2D {
        width: 3,
        height: 4,
    };
    assert_eq!(owned.json(), r#"{"width":3,"height":4}"#);
}

#[test]
fn command_table_is_consistent() {
    assert_eq!(vkstream::COMMANDS.len(), vkstream::IS_DEVICE_LEVEL.len());
    for (i, name) in vkstream::COMMANDS.iter().enumerate() {
        assert_eq!(vkstream::command_id(name), Some(i as u32), "{name}");
    }
    assert_eq!(vkstream::command_id("vkCmdDraw"), Some(ids::vkCmdDraw));
    assert!(vkstream::IS_DEVICE_LEVEL[ids::vkCmdDraw as usize]);
    assert!(!vkstream::IS_DEVICE_LEVEL[ids::vkCreateInstance as usize]);
    assert_eq!(vkstream::command_id("vkNotACommand"), None);
    for u in vkstream::UNSUPPORTED {
        assert_eq!(
            vkstream::command_id(u),
            None,
            "{u} is unsupported but has an id"
        );
    }
    // vkMapMemory2KHR/vkUnmapMemory2KHR arrived after registry 1.3.239.
    for s in vkstream::SPECIAL
        .iter()
        .filter(|s| !s.starts_with("vkMapMemory2") && !s.starts_with("vkUnmapMemory2"))
    {
        assert!(
            vkstream::command_id(s).is_some(),
            "special {s} needs an encoder"
        );
    }
    assert!(vkstream::command_id("vkCmdDrawMultiEXT").is_some());
    assert!(vkstream::UNSUPPORTED.contains(&"vkCmdCuLaunchKernelNVX"));
    assert!(vkstream::UNSUPPORTED.contains(&"vkCreateWin32SurfaceKHR"));
    assert!(vkstream::command_id("vkCreateXcbSurfaceKHR").is_some());
    assert!(matches!(
        decode_call(u32::MAX, &[]),
        Err(vkstream::DecodeError::UnknownCommand(_))
    ));
}

/// vkCmdDrawMultiEXT's draw infos lie `stride` bytes apart: each is copied, the padding is not.
#[test]
fn strided_arrays_are_copied_element_by_element() {
    let draws: [[u32; 4]; 2] = [[6, 3, 0xdead, 0xbeef], [9, 3, 0xdead, 0xbeef]];
    let mut e = Encoder::new();
    unsafe {
        encode::vkCmdDrawMultiEXT(
            &mut e,
            vk::CommandBuffer::from_raw(1),
            2,
            draws.as_ptr().cast(),
            1,
            0,
            16,
        )
    };
    let (call, bytes) = decode(ids::vkCmdDrawMultiEXT, e);
    assert!(!bytes.windows(4).any(|w| w == 0xdeadu32.to_le_bytes()));
    let Call::vkCmdDrawMultiEXT(p) = call else {
        panic!("{call:?}")
    };
    assert_eq!(p.stride, 16);
    let got: Vec<(u32, u32)> = p
        .p_vertex_info
        .unwrap()
        .iter()
        .map(|d| (d.first_vertex, d.vertex_count))
        .collect();
    assert_eq!(got, [(6, 3), (9, 3)]);
}

/// ppMaxPrimitiveCounts[i] holds pInfos[i].geometryCount counts.
#[test]
fn arrays_of_arrays_follow_the_sibling_member() {
    let mut infos = [vk::AccelerationStructureBuildGeometryInfoKHR::default(); 2];
    infos[0].geometry_count = 2;
    infos[1].geometry_count = 1;
    let (c0, c1) = ([10u32, 20], [30u32]);
    let counts = [c0.as_ptr(), c1.as_ptr()];
    let (addresses, strides) = ([0u64; 2], [0u32; 2]);
    let mut e = Encoder::new();
    unsafe {
        encode::vkCmdBuildAccelerationStructuresIndirectKHR(
            &mut e,
            vk::CommandBuffer::from_raw(1),
            2,
            infos.as_ptr(),
            addresses.as_ptr(),
            strides.as_ptr(),
            counts.as_ptr(),
        )
    };
    let (call, _) = decode(ids::vkCmdBuildAccelerationStructuresIndirectKHR, e);
    let Call::vkCmdBuildAccelerationStructuresIndirectKHR(p) = call else {
        panic!("{call:?}")
    };
    assert_eq!(
        p.pp_max_primitive_counts,
        Some(vec![Some(vec![10, 20]), Some(vec![30])])
    );
}

#[test]
fn trailing_bytes_are_rejected() {
    let mut e = Encoder::new();
    unsafe { encode::vkCmdDraw(&mut e, vk::CommandBuffer::from_raw(1), 3, 1, 0, 0) };
    let mut bytes = e.into_bytes();
    assert!(decode_call(ids::vkCmdDraw, &bytes).is_ok());
    bytes.push(0);
    assert!(matches!(
        decode_call(ids::vkCmdDraw, &bytes),
        Err(vkstream::DecodeError::TrailingBytes { .. })
    ));
}

/// xorshift: deterministic pseudo-random bytes without extra dependencies.
fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut ok = 0usize;
    for cmd in 0..vkstream::COMMANDS.len() as u32 {
        for round in 0..40 {
            let len = (rng(&mut s) % 200) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| rng(&mut s) as u8).collect();
            // Bias towards plausible encodings: flags 0/1 and small counts get past the first checks.
            if round & 1 == 0 {
                for b in bytes.iter_mut() {
                    if rng(&mut s) % 3 >= 1 {
                        *b = (rng(&mut s) % 3) as u8;
                    }
                }
            }
            if decode_call(cmd, &bytes).is_ok() {
                ok += 1;
            }
        }
    }
    // Mutate a valid, deep encoding byte by byte.
    let mut e = Encoder::new();
    let names = [c"VK_LAYER_a".as_ptr(), c"VK_LAYER_b".as_ptr()];
    let app = vk::ApplicationInfo::default()
        .application_name(c"app")
        .api_version(vk::API_VERSION_1_3);
    let ci = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&names);
    let inst = vk::Instance::from_raw(0x77);
    unsafe { encode::vkCreateInstance(&mut e, &ci, std::ptr::null(), &inst as *const _ as *mut _) };
    let good = e.into_bytes();
    assert!(decode_call(ids::vkCreateInstance, &good).is_ok());
    for i in 0..good.len() {
        for v in [0u8, 1, 2, 0x7f, 0xff] {
            let mut m = good.clone();
            m[i] = v;
            let _ = decode_call(ids::vkCreateInstance, &m);
        }
    }
    eprintln!("{ok} random inputs happened to decode");
}

#[test]
fn queue_family_list_is_followed_only_for_concurrent_sharing() {
    let mut ci = vk::BufferCreateInfo::default()
        .size(16)
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    // Ignored by the driver for exclusive sharing: must not be read.
    ci.queue_family_index_count = 3;
    ci.p_queue_family_indices = 0x8 as *const u32;
    let out = vk::Buffer::from_raw(1);
    let mut e = Encoder::new();
    unsafe {
        encode::vkCreateBuffer(
            &mut e,
            vk::Device::from_raw(1),
            &ci,
            std::ptr::null(),
            &out as *const _ as *mut _,
        )
    };
    let (call, _) = decode(ids::vkCreateBuffer, e);
    let Call::vkCreateBuffer(p) = call else {
        panic!()
    };
    let info = p.p_create_info.unwrap();
    assert_eq!(info.queue_family_index_count, 3);
    assert!(info.p_queue_family_indices.is_none());
    assert_eq!(info.size, 16);
}
