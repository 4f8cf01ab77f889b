//! The seam between the replay engine and the generated code: device creation from decoded
//! parameters, and the generated dispatch for every command not written by hand.

use std::any::Any;
use std::ffi::c_void;

use ash::vk;
use vkstream::{types, PNext};

use crate::error::ReplayError;
use crate::generated::dispatch::{Remap, ReplayContext};
use crate::session::Session;

fn core_features(f: &types::VkPhysicalDeviceFeatures) -> vk::PhysicalDeviceFeatures {
    macro_rules! copy {
        ($($n:ident),*) => { vk::PhysicalDeviceFeatures { $($n: f.$n,)* } };
    }
    copy!(
        robust_buffer_access,
        full_draw_index_uint32,
        image_cube_array,
        independent_blend,
        geometry_shader,
        tessellation_shader,
        sample_rate_shading,
        dual_src_blend,
        logic_op,
        multi_draw_indirect,
        draw_indirect_first_instance,
        depth_clamp,
        depth_bias_clamp,
        fill_mode_non_solid,
        depth_bounds,
        wide_lines,
        large_points,
        alpha_to_one,
        multi_viewport,
        sampler_anisotropy,
        texture_compression_etc2,
        texture_compression_astc_ldr,
        texture_compression_bc,
        occlusion_query_precise,
        pipeline_statistics_query,
        vertex_pipeline_stores_and_atomics,
        fragment_stores_and_atomics,
        shader_tessellation_and_geometry_point_size,
        shader_image_gather_extended,
        shader_storage_image_extended_formats,
        shader_storage_image_multisample,
        shader_storage_image_read_without_format,
        shader_storage_image_write_without_format,
        shader_uniform_buffer_array_dynamic_indexing,
        shader_sampled_image_array_dynamic_indexing,
        shader_storage_buffer_array_dynamic_indexing,
        shader_storage_image_array_dynamic_indexing,
        shader_clip_distance,
        shader_cull_distance,
        shader_float64,
        shader_int64,
        shader_int16,
        shader_resource_residency,
        shader_resource_min_lod,
        sparse_binding,
        sparse_residency_buffer,
        sparse_residency_image2_d,
        sparse_residency_image3_d,
        sparse_residency2_samples,
        sparse_residency4_samples,
        sparse_residency8_samples,
        sparse_residency16_samples,
        sparse_residency_aliased,
        variable_multisample_rate,
        inherited_queries
    )
}

macro_rules! feature_structs {
    ($(($t:ident, $v:ident) { $($f:ident),* }),* $(,)?) => {
        /// A raw copy of a captured features struct of the device create info's chain, or `None`
        /// when it is not a features struct this build copies.
        fn raw_feature(n: &PNext) -> Option<(Box<dyn Any>, *mut vk::BaseOutStructure<'static>)> {
            match n {
                $(PNext::$v(x) => {
                    let mut b = Box::new(vk::$t { $($f: x.$f,)* ..Default::default() });
                    let p = &mut *b as *mut vk::$t<'static> as *mut vk::BaseOutStructure<'static>;
                    Some((b as Box<dyn Any>, p))
                })*
                _ => None,
            }
        }
    };
}

feature_structs!(
    (PhysicalDeviceVulkan11Features, VkPhysicalDeviceVulkan11Features) { storage_buffer16_bit_access, uniform_and_storage_buffer16_bit_access, storage_push_constant16, storage_input_output16, multiview, multiview_geometry_shader, multiview_tessellation_shader, variable_pointers_storage_buffer, variable_pointers, protected_memory, sampler_ycbcr_conversion, shader_draw_parameters },
    (PhysicalDeviceVulkan12Features, VkPhysicalDeviceVulkan12Features) { sampler_mirror_clamp_to_edge, draw_indirect_count, storage_buffer8_bit_access, uniform_and_storage_buffer8_bit_access, storage_push_constant8, shader_buffer_int64_atomics, shader_shared_int64_atomics, shader_float16, shader_int8, descriptor_indexing, shader_input_attachment_array_dynamic_indexing, shader_uniform_texel_buffer_array_dynamic_indexing, shader_storage_texel_buffer_array_dynamic_indexing, shader_uniform_buffer_array_non_uniform_indexing, shader_sampled_image_array_non_uniform_indexing, shader_storage_buffer_array_non_uniform_indexing, shader_storage_image_array_non_uniform_indexing, shader_input_attachment_array_non_uniform_indexing, shader_uniform_texel_buffer_array_non_uniform_indexing, shader_storage_texel_buffer_array_non_uniform_indexing, descriptor_binding_uniform_buffer_update_after_bind, descriptor_binding_sampled_image_update_after_bind, descriptor_binding_storage_image_update_after_bind, descriptor_binding_storage_buffer_update_after_bind, descriptor_binding_uniform_texel_buffer_update_after_bind, descriptor_binding_storage_texel_buffer_update_after_bind, descriptor_binding_update_unused_while_pending, descriptor_binding_partially_bound, descriptor_binding_variable_descriptor_count, runtime_descriptor_array, sampler_filter_minmax, scalar_block_layout, imageless_framebuffer, uniform_buffer_standard_layout, shader_subgroup_extended_types, separate_depth_stencil_layouts, host_query_reset, timeline_semaphore, buffer_device_address, buffer_device_address_capture_replay, buffer_device_address_multi_device, vulkan_memory_model, vulkan_memory_model_device_scope, vulkan_memory_model_availability_visibility_chains, shader_output_viewport_index, shader_output_layer, subgroup_broadcast_dynamic_id },
    (PhysicalDeviceVulkan13Features, VkPhysicalDeviceVulkan13Features) { robust_image_access, inline_uniform_block, descriptor_binding_inline_uniform_block_update_after_bind, pipeline_creation_cache_control, private_data, shader_demote_to_helper_invocation, shader_terminate_invocation, subgroup_size_control, compute_full_subgroups, synchronization2, texture_compression_astc_hdr, shader_zero_initialize_workgroup_memory, dynamic_rendering, shader_integer_dot_product, maintenance4 },
    (PhysicalDeviceHostQueryResetFeatures, VkPhysicalDeviceHostQueryResetFeatures) { host_query_reset },
    (PhysicalDeviceTransformFeedbackFeaturesEXT, VkPhysicalDeviceTransformFeedbackFeaturesEXT) { transform_feedback, geometry_streams },
    (PhysicalDevicePrimitivesGeneratedQueryFeaturesEXT, VkPhysicalDevicePrimitivesGeneratedQueryFeaturesEXT) { primitives_generated_query, primitives_generated_query_with_rasterizer_discard, primitives_generated_query_with_non_zero_streams },
    (PhysicalDevicePerformanceQueryFeaturesKHR, VkPhysicalDevicePerformanceQueryFeaturesKHR) { performance_counter_query_pools, performance_counter_multiple_query_pools },
    (PhysicalDeviceSynchronization2Features, VkPhysicalDeviceSynchronization2Features) { synchronization2 },
    (PhysicalDeviceDynamicRenderingFeatures, VkPhysicalDeviceDynamicRenderingFeatures) { dynamic_rendering },
    (PhysicalDeviceTimelineSemaphoreFeatures, VkPhysicalDeviceTimelineSemaphoreFeatures) { timeline_semaphore },
    (PhysicalDeviceBufferDeviceAddressFeatures, VkPhysicalDeviceBufferDeviceAddressFeatures) { buffer_device_address, buffer_device_address_capture_replay, buffer_device_address_multi_device },
    (PhysicalDeviceMeshShaderFeaturesEXT, VkPhysicalDeviceMeshShaderFeaturesEXT) { task_shader, mesh_shader, multiview_mesh_shader, primitive_fragment_shading_rate_mesh_shader, mesh_shader_queries },
    (PhysicalDeviceDescriptorIndexingFeatures, VkPhysicalDeviceDescriptorIndexingFeatures) { shader_input_attachment_array_dynamic_indexing, shader_uniform_texel_buffer_array_dynamic_indexing, shader_storage_texel_buffer_array_dynamic_indexing, shader_uniform_buffer_array_non_uniform_indexing, shader_sampled_image_array_non_uniform_indexing, shader_storage_buffer_array_non_uniform_indexing, shader_storage_image_array_non_uniform_indexing, shader_input_attachment_array_non_uniform_indexing, shader_uniform_texel_buffer_array_non_uniform_indexing, shader_storage_texel_buffer_array_non_uniform_indexing, descriptor_binding_uniform_buffer_update_after_bind, descriptor_binding_sampled_image_update_after_bind, descriptor_binding_storage_image_update_after_bind, descriptor_binding_storage_buffer_update_after_bind, descriptor_binding_uniform_texel_buffer_update_after_bind, descriptor_binding_storage_texel_buffer_update_after_bind, descriptor_binding_update_unused_while_pending, descriptor_binding_partially_bound, descriptor_binding_variable_descriptor_count, runtime_descriptor_array },
    (PhysicalDeviceShaderDrawParametersFeatures, VkPhysicalDeviceShaderDrawParametersFeatures) { shader_draw_parameters },
    (PhysicalDeviceMultiviewFeatures, VkPhysicalDeviceMultiviewFeatures) { multiview, multiview_geometry_shader, multiview_tessellation_shader },
    (PhysicalDevice16BitStorageFeatures, VkPhysicalDevice16BitStorageFeatures) { storage_buffer16_bit_access, uniform_and_storage_buffer16_bit_access, storage_push_constant16, storage_input_output16 },
    (PhysicalDevice8BitStorageFeatures, VkPhysicalDevice8BitStorageFeatures) { storage_buffer8_bit_access, uniform_and_storage_buffer8_bit_access, storage_push_constant8 },
    (PhysicalDeviceScalarBlockLayoutFeatures, VkPhysicalDeviceScalarBlockLayoutFeatures) { scalar_block_layout },
    (PhysicalDeviceShaderFloat16Int8Features, VkPhysicalDeviceShaderFloat16Int8Features) { shader_float16, shader_int8 },
    (PhysicalDeviceSamplerYcbcrConversionFeatures, VkPhysicalDeviceSamplerYcbcrConversionFeatures) { sampler_ycbcr_conversion },
    (PhysicalDeviceExtendedDynamicStateFeaturesEXT, VkPhysicalDeviceExtendedDynamicStateFeaturesEXT) { extended_dynamic_state },
    (PhysicalDeviceRobustness2FeaturesEXT, VkPhysicalDeviceRobustness2FeaturesEXT) { robust_buffer_access2, robust_image_access2, null_descriptor },
    (PhysicalDeviceDepthClipEnableFeaturesEXT, VkPhysicalDeviceDepthClipEnableFeaturesEXT) { depth_clip_enable },
    (PhysicalDeviceImagelessFramebufferFeatures, VkPhysicalDeviceImagelessFramebufferFeatures) { imageless_framebuffer },
    (PhysicalDeviceUniformBufferStandardLayoutFeatures, VkPhysicalDeviceUniformBufferStandardLayoutFeatures) { uniform_buffer_standard_layout },
    (PhysicalDeviceShaderSubgroupExtendedTypesFeatures, VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures) { shader_subgroup_extended_types },
    (PhysicalDeviceSeparateDepthStencilLayoutsFeatures, VkPhysicalDeviceSeparateDepthStencilLayoutsFeatures) { separate_depth_stencil_layouts },
    (PhysicalDeviceVulkanMemoryModelFeatures, VkPhysicalDeviceVulkanMemoryModelFeatures) { vulkan_memory_model, vulkan_memory_model_device_scope, vulkan_memory_model_availability_visibility_chains },
    (PhysicalDeviceShaderAtomicInt64Features, VkPhysicalDeviceShaderAtomicInt64Features) { shader_buffer_int64_atomics, shader_shared_int64_atomics },
    (PhysicalDeviceMaintenance4Features, VkPhysicalDeviceMaintenance4Features) { maintenance4 },
    (PhysicalDeviceInlineUniformBlockFeatures, VkPhysicalDeviceInlineUniformBlockFeatures) { inline_uniform_block, descriptor_binding_inline_uniform_block_update_after_bind },
    (PhysicalDevicePipelineCreationCacheControlFeatures, VkPhysicalDevicePipelineCreationCacheControlFeatures) { pipeline_creation_cache_control },
    (PhysicalDeviceImageRobustnessFeatures, VkPhysicalDeviceImageRobustnessFeatures) { robust_image_access },
    (PhysicalDeviceSubgroupSizeControlFeatures, VkPhysicalDeviceSubgroupSizeControlFeatures) { subgroup_size_control, compute_full_subgroups },
    (PhysicalDeviceTextureCompressionASTCHDRFeatures, VkPhysicalDeviceTextureCompressionASTCHDRFeatures) { texture_compression_astc_hdr },
    (PhysicalDeviceZeroInitializeWorkgroupMemoryFeatures, VkPhysicalDeviceZeroInitializeWorkgroupMemoryFeatures) { shader_zero_initialize_workgroup_memory },
    (PhysicalDeviceShaderIntegerDotProductFeatures, VkPhysicalDeviceShaderIntegerDotProductFeatures) { shader_integer_dot_product },
    (PhysicalDeviceShaderTerminateInvocationFeatures, VkPhysicalDeviceShaderTerminateInvocationFeatures) { shader_terminate_invocation },
    (PhysicalDeviceShaderDemoteToHelperInvocationFeatures, VkPhysicalDeviceShaderDemoteToHelperInvocationFeatures) { shader_demote_to_helper_invocation },
    (PhysicalDevicePrivateDataFeatures, VkPhysicalDevicePrivateDataFeatures) { private_data },
    (PhysicalDeviceVariablePointersFeatures, VkPhysicalDeviceVariablePointersFeatures) { variable_pointers_storage_buffer, variable_pointers },
    (PhysicalDeviceProtectedMemoryFeatures, VkPhysicalDeviceProtectedMemoryFeatures) { protected_memory },
    (PhysicalDeviceCustomBorderColorFeaturesEXT, VkPhysicalDeviceCustomBorderColorFeaturesEXT) { custom_border_colors, custom_border_color_without_format },
    (PhysicalDeviceConditionalRenderingFeaturesEXT, VkPhysicalDeviceConditionalRenderingFeaturesEXT) { conditional_rendering, inherited_conditional_rendering },
    (PhysicalDeviceExtendedDynamicState2FeaturesEXT, VkPhysicalDeviceExtendedDynamicState2FeaturesEXT) { extended_dynamic_state2, extended_dynamic_state2_logic_op, extended_dynamic_state2_patch_control_points },
    (PhysicalDevicePrimitiveTopologyListRestartFeaturesEXT, VkPhysicalDevicePrimitiveTopologyListRestartFeaturesEXT) { primitive_topology_list_restart, primitive_topology_patch_list_restart },
    (PhysicalDeviceVertexInputDynamicStateFeaturesEXT, VkPhysicalDeviceVertexInputDynamicStateFeaturesEXT) { vertex_input_dynamic_state },
    (PhysicalDeviceLineRasterizationFeaturesEXT, VkPhysicalDeviceLineRasterizationFeaturesEXT) { rectangular_lines, bresenham_lines, smooth_lines, stippled_rectangular_lines, stippled_bresenham_lines, stippled_smooth_lines },
    (PhysicalDeviceGraphicsPipelineLibraryFeaturesEXT, VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT) { graphics_pipeline_library },
    (PhysicalDeviceRasterizationOrderAttachmentAccessFeaturesEXT, VkPhysicalDeviceRasterizationOrderAttachmentAccessFeaturesEXT) { rasterization_order_color_attachment_access, rasterization_order_depth_attachment_access, rasterization_order_stencil_attachment_access },
    (PhysicalDevice4444FormatsFeaturesEXT, VkPhysicalDevice4444FormatsFeaturesEXT) { format_a4r4g4b4, format_a4b4g4r4 },
    (PhysicalDeviceColorWriteEnableFeaturesEXT, VkPhysicalDeviceColorWriteEnableFeaturesEXT) { color_write_enable },
    (PhysicalDeviceExtendedDynamicState3FeaturesEXT, VkPhysicalDeviceExtendedDynamicState3FeaturesEXT) { extended_dynamic_state3_tessellation_domain_origin, extended_dynamic_state3_depth_clamp_enable, extended_dynamic_state3_polygon_mode, extended_dynamic_state3_rasterization_samples, extended_dynamic_state3_sample_mask, extended_dynamic_state3_alpha_to_coverage_enable, extended_dynamic_state3_alpha_to_one_enable, extended_dynamic_state3_logic_op_enable, extended_dynamic_state3_color_blend_enable, extended_dynamic_state3_color_blend_equation, extended_dynamic_state3_color_write_mask, extended_dynamic_state3_rasterization_stream, extended_dynamic_state3_conservative_rasterization_mode, extended_dynamic_state3_extra_primitive_overestimation_size, extended_dynamic_state3_depth_clip_enable, extended_dynamic_state3_sample_locations_enable, extended_dynamic_state3_color_blend_advanced, extended_dynamic_state3_provoking_vertex_mode, extended_dynamic_state3_line_rasterization_mode, extended_dynamic_state3_line_stipple_enable, extended_dynamic_state3_depth_clip_negative_one_to_one, extended_dynamic_state3_viewport_w_scaling_enable, extended_dynamic_state3_viewport_swizzle, extended_dynamic_state3_coverage_to_color_enable, extended_dynamic_state3_coverage_to_color_location, extended_dynamic_state3_coverage_modulation_mode, extended_dynamic_state3_coverage_modulation_table_enable, extended_dynamic_state3_coverage_modulation_table, extended_dynamic_state3_coverage_reduction_mode, extended_dynamic_state3_representative_fragment_test_enable, extended_dynamic_state3_shading_rate_image_enable },
    (PhysicalDeviceBorderColorSwizzleFeaturesEXT, VkPhysicalDeviceBorderColorSwizzleFeaturesEXT) { border_color_swizzle, border_color_swizzle_from_image },
    (PhysicalDeviceNonSeamlessCubeMapFeaturesEXT, VkPhysicalDeviceNonSeamlessCubeMapFeaturesEXT) { non_seamless_cube_map },
    (PhysicalDeviceShaderClockFeaturesKHR, VkPhysicalDeviceShaderClockFeaturesKHR) { shader_subgroup_clock, shader_device_clock },
    (PhysicalDeviceVertexAttributeDivisorFeaturesEXT, VkPhysicalDeviceVertexAttributeDivisorFeaturesEXT) { vertex_attribute_instance_rate_divisor, vertex_attribute_instance_rate_zero_divisor },
    (PhysicalDeviceIndexTypeUint8FeaturesEXT, VkPhysicalDeviceIndexTypeUint8FeaturesEXT) { index_type_uint8 },
    (PhysicalDeviceAttachmentFeedbackLoopLayoutFeaturesEXT, VkPhysicalDeviceAttachmentFeedbackLoopLayoutFeaturesEXT) { attachment_feedback_loop_layout },
    (PhysicalDeviceImage2DViewOf3DFeaturesEXT, VkPhysicalDeviceImage2DViewOf3DFeaturesEXT) { image2_d_view_of3_d, sampler2_d_view_of3_d },
    (PhysicalDeviceShaderAtomicFloatFeaturesEXT, VkPhysicalDeviceShaderAtomicFloatFeaturesEXT) { shader_buffer_float32_atomics, shader_buffer_float32_atomic_add, shader_buffer_float64_atomics, shader_buffer_float64_atomic_add, shader_shared_float32_atomics, shader_shared_float32_atomic_add, shader_shared_float64_atomics, shader_shared_float64_atomic_add, shader_image_float32_atomics, shader_image_float32_atomic_add, sparse_image_float32_atomics, sparse_image_float32_atomic_add },
    (PhysicalDeviceDepthClipControlFeaturesEXT, VkPhysicalDeviceDepthClipControlFeaturesEXT) { depth_clip_control },
    (PhysicalDeviceProvokingVertexFeaturesEXT, VkPhysicalDeviceProvokingVertexFeaturesEXT) { provoking_vertex_last, transform_feedback_preserves_provoking_vertex },
);

/// Creates the replay device for a captured `vkCreateDevice`: the feature chain is copied (features
/// structs only; any other chained struct is reported), queue families and extensions are
/// translated by the session.
pub(crate) unsafe fn create_device(
    s: &mut Session<'_>,
    captured: u64,
    physical: u64,
    ci: &types::VkDeviceCreateInfo,
    queues: &[(u32, Vec<f32>, vk::DeviceQueueCreateFlags)],
    extensions: &[String],
) -> Result<(), ReplayError> {
    let mut keep: Vec<Box<dyn Any>> = Vec::new();
    let mut chain: Vec<*mut vk::BaseOutStructure<'static>> = Vec::new();
    let mut unsupported = Vec::new();
    for n in &ci.p_next {
        if let PNext::VkPhysicalDeviceFeatures2(f2) = n {
            let mut b = Box::new(
                vk::PhysicalDeviceFeatures2::default().features(core_features(&f2.features)),
            );
            chain.push(
                &mut *b as *mut vk::PhysicalDeviceFeatures2<'static>
                    as *mut vk::BaseOutStructure<'static>,
            );
            keep.push(b);
        } else if matches!(n, PNext::VkDeviceGroupDeviceCreateInfo(g) if g.physical_device_count <= 1)
        {
            // A group of one physical device is the device alone (vulkaninfo makes one); the
            // captured physical device is not the replay's, so the struct is left out.
        } else if let Some((b, p)) = raw_feature(n) {
            chain.push(p);
            keep.push(b);
        } else {
            unsupported.push(
                format!("{n:?}")
                    .split('(')
                    .next()
                    .unwrap_or("?")
                    .to_string(),
            );
        }
    }
    if !unsupported.is_empty() {
        return Err(ReplayError::Other(format!(
            "VkDeviceCreateInfo chains structs the replayer cannot re-create: {}",
            unsupported.join(", ")
        )));
    }
    for w in chain.windows(2) {
        (*w[0]).p_next = w[1];
    }
    let features = ci.p_enabled_features.as_deref().map(core_features);
    let mut info = vk::DeviceCreateInfo::default().flags(vk::DeviceCreateFlags::from_raw(ci.flags));
    if let Some(f) = features.as_ref() {
        info = info.enabled_features(f);
    }
    info.p_next = chain
        .first()
        .map_or(std::ptr::null(), |p| *p as *const c_void);
    let r = s.create_device(captured, physical, &info, queues, extensions);
    drop(keep);
    r
}

/// Replays a command through the generated dispatch.
pub(crate) unsafe fn dispatch(
    s: &mut Session<'_>,
    call: &vkstream::Call,
) -> Result<vk::Result, ReplayError> {
    crate::generated::dispatch::replay(call, s)
}

impl Remap for Session<'_> {
    fn handle(&mut self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
        Session::handle(self, ty, captured)
    }
    fn bind(&mut self, ty: vk::ObjectType, captured: u64, replayed: u64) {
        Session::bind(self, ty, captured, replayed)
    }
    fn queue_family(&mut self, captured: u32) -> u32 {
        // Barriers carry no device: the mapping of the device of the call they are in (each
        // device maps the families it asked for), else of the first device.
        let device = match self.devices.contains_key(&self.current_device) {
            true => self.current_device,
            false => match self.devices.values().next() {
                Some(d) => d.captured,
                None => return captured,
            },
        };
        self.map_family(device, captured)
    }
}

impl ReplayContext for Session<'_> {
    fn remap(&mut self) -> &mut dyn Remap {
        self
    }

    fn instance_table(&mut self, captured: u64) -> Result<&vkstream::InstanceTable, ReplayError> {
        if captured == 0 {
            return Ok(&self.gtable);
        }
        // The table of the instance the captured instance or physical device belongs to.
        Ok(&self.instance_of(captured)?.table)
    }

    fn device_table(&mut self, captured: u64) -> Result<&vkstream::DeviceTable, ReplayError> {
        // Most calls are recorded commands, whose first argument is a command buffer: its owner
        // first, so that they take two lookups rather than three.
        let device = match self.owner.get(&captured) {
            Some(device) => *device,
            None => captured,
        };
        match self.devices.get(&device) {
            Some(d) => {
                self.current_device = device;
                Ok(&d.table)
            }
            None if device != captured => Err(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE,
                handle: device,
            }),
            None => Err(ReplayError::Other(format!(
                "handle 0x{captured:x} belongs to no device the replay created"
            ))),
        }
    }
}
