//! The intersection rules: what an app sees of the capture GPU when it must also run on a target.
//! Every limit and property the layer changes has exactly one rule, in the tables below
//! (`props!`): `Min` for maxima and counts (the smaller of the two), `Max` for minima, alignments
//! and granularities (the stricter), `And` for flags, sample counts and bools, `Range` for
//! `[low, high]` pairs (the narrower), `Keep` for facts about the capture GPU that the app cannot
//! be shown otherwise (timestampPeriod, subgroupSize: its timestamps and shaders run there).
//! Features and format flags are ANDed, extensions intersected, apiVersion the minimum.
//!
//! The same tables say whether a replay GPU offers at least what a profile does (`shortfalls`).

use super::{feature_struct, feature_struct_by_s_type, DeviceProfile, Members};
use crate::generated::features::CORE_FEATURES;
use ash::vk;
use serde_json::Value as Json;
use std::ffi::c_void;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Min,
    Max,
    And,
    Range,
    Keep,
}

/// A property value the rules combine.
pub trait Value: Copy + PartialEq {
    fn to_json(self) -> Json;
    fn from_json(v: &Json) -> Option<Self>;
    fn min_of(self, o: Self) -> Self;
    fn max_of(self, o: Self) -> Self;
    fn and_of(self, o: Self) -> Self;
    /// `[max of lows, min of highs]` for pairs; `min_of` for scalars.
    fn range_of(self, o: Self) -> Self {
        self.min_of(o)
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn to_json(self) -> Json { Json::from(self) }
            fn from_json(v: &Json) -> Option<Self> {
                v.as_u64().and_then(|x| <$t>::try_from(x).ok())
                    .or_else(|| v.as_i64().and_then(|x| <$t>::try_from(x).ok()))
            }
            fn min_of(self, o: Self) -> Self { self.min(o) }
            fn max_of(self, o: Self) -> Self { self.max(o) }
            fn and_of(self, o: Self) -> Self { self & o }
        }
    )*};
}
int_value!(u32, i32, u64, usize);

impl Value for f32 {
    fn to_json(self) -> Json {
        Json::from(self as f64)
    }
    fn from_json(v: &Json) -> Option<Self> {
        v.as_f64().map(|x| x as f32)
    }
    fn min_of(self, o: Self) -> Self {
        self.min(o)
    }
    fn max_of(self, o: Self) -> Self {
        self.max(o)
    }
    fn and_of(self, o: Self) -> Self {
        self.min(o)
    }
}

macro_rules! flags_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn to_json(self) -> Json { Json::from(self.as_raw()) }
            fn from_json(v: &Json) -> Option<Self> { u32::from_json(v).map(<$t>::from_raw) }
            fn min_of(self, o: Self) -> Self { self & o }
            fn max_of(self, o: Self) -> Self { self | o }
            fn and_of(self, o: Self) -> Self { self & o }
        }
    )*};
}
flags_value!(
    vk::SampleCountFlags,
    vk::ShaderStageFlags,
    vk::SubgroupFeatureFlags,
    vk::ResolveModeFlags
);

impl<T: Value, const N: usize> Value for [T; N] {
    fn to_json(self) -> Json {
        Json::Array(self.iter().map(|x| x.to_json()).collect())
    }
    fn from_json(v: &Json) -> Option<Self> {
        let a = v.as_array()?;
        if a.len() != N {
            return None;
        }
        let mut out = [T::from_json(&a[0])?; N];
        for (o, x) in out.iter_mut().zip(a) {
            *o = T::from_json(x)?;
        }
        Some(out)
    }
    fn min_of(mut self, o: Self) -> Self {
        self.iter_mut().zip(o).for_each(|(a, b)| *a = a.min_of(b));
        self
    }
    fn max_of(mut self, o: Self) -> Self {
        self.iter_mut().zip(o).for_each(|(a, b)| *a = a.max_of(b));
        self
    }
    fn and_of(mut self, o: Self) -> Self {
        self.iter_mut().zip(o).for_each(|(a, b)| *a = a.and_of(b));
        self
    }
    fn range_of(mut self, o: Self) -> Self {
        for (i, (a, b)) in self.iter_mut().zip(o).enumerate() {
            *a = if i == 0 { a.max_of(b) } else { a.min_of(b) };
        }
        self
    }
}

pub fn combine<T: Value>(capture: T, target: T, rule: Rule) -> T {
    match rule {
        Rule::Min => capture.min_of(target),
        Rule::Max => capture.max_of(target),
        Rule::And => capture.and_of(target),
        Rule::Range => capture.range_of(target),
        Rule::Keep => capture,
    }
}

/// `max_image_dimension1_d` -> `maxImageDimension1D` (the registry's member names).
pub fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut up = false;
    for c in snake.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A properties struct the rules know: its name in profiles, how to read it and how to clamp it.
pub struct PropStruct {
    pub name: &'static str,
    /// `None` for the parts of `VkPhysicalDeviceProperties` (limits, sparse properties).
    pub s_type: Option<vk::StructureType>,
    /// Core versions and extensions that provide it (`VK_VERSION_1_1`, ...).
    pub origins: &'static [&'static str],
    pub rules: fn() -> Vec<(String, Rule)>,
    /// # Safety: the pointer is to the struct (for chained ones, its sType/pNext header).
    pub read: unsafe fn(*const c_void) -> Members,
    /// # Safety: as `read`.
    pub clamp: unsafe fn(*mut c_void, &Members),
    /// A zeroed struct with its sType, for `collect`.
    pub size: usize,
}

macro_rules! props {
    ($id:ident, $name:expr, $ty:ty, $stype:expr, [$($origin:expr),*], { $($field:ident : $rule:ident),* $(,)? }) => {{
        #[allow(non_snake_case)]
        mod $id {
            use super::*;
            pub fn rules() -> Vec<(String, Rule)> {
                vec![$((camel(stringify!($field)), Rule::$rule)),*]
            }
            pub unsafe fn read(p: *const c_void) -> Members {
                let s = &*(p as *const $ty);
                let mut m = Members::new();
                $( m.insert(camel(stringify!($field)), Value::to_json(s.$field)); )*
                m
            }
            fn get<T: Value>(m: &Members, k: &str, _like: T) -> Option<T> {
                m.get(k).and_then(T::from_json)
            }
            pub unsafe fn clamp(p: *mut c_void, t: &Members) {
                let s = &mut *(p as *mut $ty);
                $(
                    if let Some(v) = get(t, &camel(stringify!($field)), s.$field) {
                        s.$field = combine(s.$field, v, Rule::$rule);
                    }
                )*
            }
        }
        PropStruct {
            name: $name,
            s_type: $stype,
            origins: &[$($origin),*],
            rules: $id::rules,
            read: $id::read,
            clamp: $id::clamp,
            size: std::mem::size_of::<$ty>(),
        }
    }};
}

/// Every properties struct the rules know, core parts first. The one per-limit rule table.
pub fn property_structs() -> &'static [PropStruct] {
    static TABLE: std::sync::OnceLock<Vec<PropStruct>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            props!(limits, "VkPhysicalDeviceLimits", vk::PhysicalDeviceLimits, None, ["VK_VERSION_1_0"], {
                max_image_dimension1_d: Min, max_image_dimension2_d: Min, max_image_dimension3_d: Min,
                max_image_dimension_cube: Min, max_image_array_layers: Min, max_texel_buffer_elements: Min,
                max_uniform_buffer_range: Min, max_storage_buffer_range: Min, max_push_constants_size: Min,
                max_memory_allocation_count: Min, max_sampler_allocation_count: Min,
                buffer_image_granularity: Max, sparse_address_space_size: Min, max_bound_descriptor_sets: Min,
                max_per_stage_descriptor_samplers: Min, max_per_stage_descriptor_uniform_buffers: Min,
                max_per_stage_descriptor_storage_buffers: Min, max_per_stage_descriptor_sampled_images: Min,
                max_per_stage_descriptor_storage_images: Min, max_per_stage_descriptor_input_attachments: Min,
                max_per_stage_resources: Min, max_descriptor_set_samplers: Min,
                max_descriptor_set_uniform_buffers: Min, max_descriptor_set_uniform_buffers_dynamic: Min,
                max_descriptor_set_storage_buffers: Min, max_descriptor_set_storage_buffers_dynamic: Min,
                max_descriptor_set_sampled_images: Min, max_descriptor_set_storage_images: Min,
                max_descriptor_set_input_attachments: Min, max_vertex_input_attributes: Min,
                max_vertex_input_bindings: Min, max_vertex_input_attribute_offset: Min,
                max_vertex_input_binding_stride: Min, max_vertex_output_components: Min,
                max_tessellation_generation_level: Min, max_tessellation_patch_size: Min,
                max_tessellation_control_per_vertex_input_components: Min,
                max_tessellation_control_per_vertex_output_components: Min,
                max_tessellation_control_per_patch_output_components: Min,
                max_tessellation_control_total_output_components: Min,
                max_tessellation_evaluation_input_components: Min,
                max_tessellation_evaluation_output_components: Min, max_geometry_shader_invocations: Min,
                max_geometry_input_components: Min, max_geometry_output_components: Min,
                max_geometry_output_vertices: Min, max_geometry_total_output_components: Min,
                max_fragment_input_components: Min, max_fragment_output_attachments: Min,
                max_fragment_dual_src_attachments: Min, max_fragment_combined_output_resources: Min,
                max_compute_shared_memory_size: Min, max_compute_work_group_count: Min,
                max_compute_work_group_invocations: Min, max_compute_work_group_size: Min,
                sub_pixel_precision_bits: Min, sub_texel_precision_bits: Min, mipmap_precision_bits: Min,
                max_draw_indexed_index_value: Min, max_draw_indirect_count: Min, max_sampler_lod_bias: Min,
                max_sampler_anisotropy: Min, max_viewports: Min, max_viewport_dimensions: Min,
                viewport_bounds_range: Range, viewport_sub_pixel_bits: Min, min_memory_map_alignment: Max,
                min_texel_buffer_offset_alignment: Max, min_uniform_buffer_offset_alignment: Max,
                min_storage_buffer_offset_alignment: Max, min_texel_offset: Max, max_texel_offset: Min,
                min_texel_gather_offset: Max, max_texel_gather_offset: Min, min_interpolation_offset: Max,
                max_interpolation_offset: Min, sub_pixel_interpolation_offset_bits: Min,
                max_framebuffer_width: Min, max_framebuffer_height: Min, max_framebuffer_layers: Min,
                framebuffer_color_sample_counts: And, framebuffer_depth_sample_counts: And,
                framebuffer_stencil_sample_counts: And, framebuffer_no_attachments_sample_counts: And,
                max_color_attachments: Min, sampled_image_color_sample_counts: And,
                sampled_image_integer_sample_counts: And, sampled_image_depth_sample_counts: And,
                sampled_image_stencil_sample_counts: And, storage_image_sample_counts: And,
                max_sample_mask_words: Min, timestamp_compute_and_graphics: And, timestamp_period: Keep,
                max_clip_distances: Min, max_cull_distances: Min, max_combined_clip_and_cull_distances: Min,
                discrete_queue_priorities: Min, point_size_range: Range, line_width_range: Range,
                point_size_granularity: Max, line_width_granularity: Max, strict_lines: Keep,
                standard_sample_locations: Keep, optimal_buffer_copy_offset_alignment: Max,
                optimal_buffer_copy_row_pitch_alignment: Max, non_coherent_atom_size: Max,
            }),
            props!(sparse, "VkPhysicalDeviceSparseProperties", vk::PhysicalDeviceSparseProperties, None, ["VK_VERSION_1_0"], {
                residency_standard2_d_block_shape: And, residency_standard2_d_multisample_block_shape: And,
                residency_standard3_d_block_shape: And, residency_aligned_mip_size: And,
                residency_non_resident_strict: And,
            }),
            props!(subgroup, "VkPhysicalDeviceSubgroupProperties", vk::PhysicalDeviceSubgroupProperties<'static>,
                Some(vk::StructureType::PHYSICAL_DEVICE_SUBGROUP_PROPERTIES), ["VK_VERSION_1_1"], {
                subgroup_size: Keep, supported_stages: And, supported_operations: And,
                quad_operations_in_all_stages: And,
            }),
            props!(maint3, "VkPhysicalDeviceMaintenance3Properties", vk::PhysicalDeviceMaintenance3Properties<'static>,
                Some(vk::StructureType::PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES), ["VK_VERSION_1_1", "VK_KHR_maintenance3"], {
                max_per_set_descriptors: Min, max_memory_allocation_size: Min,
            }),
            props!(v11, "VkPhysicalDeviceVulkan11Properties", vk::PhysicalDeviceVulkan11Properties<'static>,
                Some(vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES), ["VK_VERSION_1_2"], {
                subgroup_size: Keep, subgroup_supported_stages: And, subgroup_supported_operations: And,
                subgroup_quad_operations_in_all_stages: And, max_multiview_view_count: Min,
                max_multiview_instance_index: Min, protected_no_fault: Keep, max_per_set_descriptors: Min,
                max_memory_allocation_size: Min,
            }),
            props!(v12, "VkPhysicalDeviceVulkan12Properties", vk::PhysicalDeviceVulkan12Properties<'static>,
                Some(vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES), ["VK_VERSION_1_2"], {
                shader_signed_zero_inf_nan_preserve_float16: And, shader_signed_zero_inf_nan_preserve_float32: And,
                shader_signed_zero_inf_nan_preserve_float64: And, shader_denorm_preserve_float16: And,
                shader_denorm_preserve_float32: And, shader_denorm_preserve_float64: And,
                shader_denorm_flush_to_zero_float16: And, shader_denorm_flush_to_zero_float32: And,
                shader_denorm_flush_to_zero_float64: And, shader_rounding_mode_rte_float16: And,
                shader_rounding_mode_rte_float32: And, shader_rounding_mode_rte_float64: And,
                shader_rounding_mode_rtz_float16: And, shader_rounding_mode_rtz_float32: And,
                shader_rounding_mode_rtz_float64: And,
                max_update_after_bind_descriptors_in_all_pools: Min,
                shader_uniform_buffer_array_non_uniform_indexing_native: And,
                shader_sampled_image_array_non_uniform_indexing_native: And,
                shader_storage_buffer_array_non_uniform_indexing_native: And,
                shader_storage_image_array_non_uniform_indexing_native: And,
                shader_input_attachment_array_non_uniform_indexing_native: And,
                robust_buffer_access_update_after_bind: And, quad_divergent_implicit_lod: And,
                max_per_stage_descriptor_update_after_bind_samplers: Min,
                max_per_stage_descriptor_update_after_bind_uniform_buffers: Min,
                max_per_stage_descriptor_update_after_bind_storage_buffers: Min,
                max_per_stage_descriptor_update_after_bind_sampled_images: Min,
                max_per_stage_descriptor_update_after_bind_storage_images: Min,
                max_per_stage_descriptor_update_after_bind_input_attachments: Min,
                max_per_stage_update_after_bind_resources: Min,
                max_descriptor_set_update_after_bind_samplers: Min,
                max_descriptor_set_update_after_bind_uniform_buffers: Min,
                max_descriptor_set_update_after_bind_uniform_buffers_dynamic: Min,
                max_descriptor_set_update_after_bind_storage_buffers: Min,
                max_descriptor_set_update_after_bind_storage_buffers_dynamic: Min,
                max_descriptor_set_update_after_bind_sampled_images: Min,
                max_descriptor_set_update_after_bind_storage_images: Min,
                max_descriptor_set_update_after_bind_input_attachments: Min,
                supported_depth_resolve_modes: And, supported_stencil_resolve_modes: And,
                independent_resolve_none: And, independent_resolve: And,
                filter_minmax_single_component_formats: And, filter_minmax_image_component_mapping: And,
                max_timeline_semaphore_value_difference: Min, framebuffer_integer_color_sample_counts: And,
            }),
            props!(v13, "VkPhysicalDeviceVulkan13Properties", vk::PhysicalDeviceVulkan13Properties<'static>,
                Some(vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES), ["VK_VERSION_1_3"], {
                min_subgroup_size: Keep, max_subgroup_size: Keep, max_compute_workgroup_subgroups: Min,
                required_subgroup_size_stages: And, max_inline_uniform_block_size: Min,
                max_per_stage_descriptor_inline_uniform_blocks: Min,
                max_per_stage_descriptor_update_after_bind_inline_uniform_blocks: Min,
                max_descriptor_set_inline_uniform_blocks: Min,
                max_descriptor_set_update_after_bind_inline_uniform_blocks: Min,
                max_inline_uniform_total_size: Min,
                storage_texel_buffer_offset_alignment_bytes: Max,
                storage_texel_buffer_offset_single_texel_alignment: And,
                uniform_texel_buffer_offset_alignment_bytes: Max,
                uniform_texel_buffer_offset_single_texel_alignment: And, max_buffer_size: Min,
            }),
            props!(xfb, "VkPhysicalDeviceTransformFeedbackPropertiesEXT", vk::PhysicalDeviceTransformFeedbackPropertiesEXT<'static>,
                Some(vk::StructureType::PHYSICAL_DEVICE_TRANSFORM_FEEDBACK_PROPERTIES_EXT), ["VK_EXT_transform_feedback"], {
                max_transform_feedback_streams: Min, max_transform_feedback_buffers: Min,
                max_transform_feedback_buffer_size: Min, max_transform_feedback_stream_data_size: Min,
                max_transform_feedback_buffer_data_size: Min, max_transform_feedback_buffer_data_stride: Min,
                transform_feedback_queries: And, transform_feedback_streams_lines_triangles: And,
                transform_feedback_rasterization_stream_select: And, transform_feedback_draw: And,
            }),
        ]
    })
}

/// Whether a device of `api_version` with `has_ext` provides a struct of these origins.
pub fn provided(origins: &[&str], api_version: u32, has_ext: impl Fn(&str) -> bool) -> bool {
    origins.iter().any(|o| match o.strip_prefix("VK_VERSION_") {
        Some(v) => {
            let mut it = v.split('_').map(|x| x.parse::<u32>().unwrap_or(99));
            let (major, minor) = (it.next().unwrap_or(99), it.next().unwrap_or(99));
            api_version >= vk::make_api_version(0, major, minor, 0)
        }
        None => has_ext(o),
    })
}

// ==== applying a profile to what the capture GPU reports ============================================

/// Clamps `VkPhysicalDeviceProperties` (apiVersion, limits, sparse properties).
pub fn clamp_properties(p: &mut vk::PhysicalDeviceProperties, target: &DeviceProfile) {
    p.api_version = p.api_version.min(target.api_version);
    let table = property_structs();
    for (s, ptr) in [
        (&table[0], &mut p.limits as *mut _ as *mut c_void),
        (&table[1], &mut p.sparse_properties as *mut _ as *mut c_void),
    ] {
        if let Some(m) = target.properties.get(s.name) {
            // SAFETY: the pointers are to the structs the table entries describe.
            unsafe { (s.clamp)(ptr, m) };
        }
    }
}

/// Walks a `VkPhysicalDeviceProperties2` output chain and clamps every struct the rules know.
///
/// # Safety
/// `chain` must be a valid output chain (or null).
pub unsafe fn clamp_properties_chain(mut chain: *mut c_void, target: &DeviceProfile) {
    while !chain.is_null() {
        let base = &mut *(chain as *mut vk::BaseOutStructure<'_>);
        if base.s_type == vk::StructureType::PHYSICAL_DEVICE_PROPERTIES_2 {
            let p2 = &mut *(chain as *mut vk::PhysicalDeviceProperties2<'_>);
            clamp_properties(&mut p2.properties, target);
        } else if let Some(s) = property_structs()
            .iter()
            .find(|s| s.s_type == Some(base.s_type))
        {
            if let Some(m) = target.properties.get(s.name) {
                (s.clamp)(chain, m);
            }
        }
        chain = base.p_next as *mut c_void;
    }
}

/// Whether the profile's device provides a struct of `origins` (its core version or one of its
/// extensions): a feature struct of an extension the profile lacks counts as all off, whatever
/// its members say (a profile edited by removing the extension only).
fn in_profile(origins: &[&str], target: &DeviceProfile) -> bool {
    origins == ["VK_VERSION_1_0"]
        || provided(origins, target.api_version, |e| target.has_extension(e))
}

/// ANDs the words of one feature struct (`words` at its first member) with the profile; returns
/// `struct.member` of each feature it turned off.
unsafe fn and_words(
    words: *mut u32,
    structure: &str,
    members: &[&str],
    target: &DeviceProfile,
    hidden: &mut Vec<String>,
) {
    let known = feature_struct(structure).is_none_or(|s| in_profile(s.origins, target));
    for (i, m) in members.iter().enumerate() {
        let w = words.add(i);
        if *w != 0 && !(known && target.feature(structure, m)) {
            *w = 0;
            hidden.push(format!("{structure}.{m}"));
        }
    }
}

/// ANDs `VkPhysicalDeviceFeatures` with the profile; returns what it turned off.
pub fn and_core_features(
    f: &mut vk::PhysicalDeviceFeatures,
    target: &DeviceProfile,
) -> Vec<String> {
    let mut hidden = Vec::new();
    // SAFETY: VkPhysicalDeviceFeatures is CORE_FEATURES.len() VkBool32s (asserted where generated).
    unsafe {
        and_words(
            f as *mut _ as *mut u32,
            "VkPhysicalDeviceFeatures",
            CORE_FEATURES,
            target,
            &mut hidden,
        )
    };
    hidden
}

/// Walks a `VkPhysicalDeviceFeatures2` output chain and ANDs every feature struct the registry
/// knows; returns what it turned off. Unknown structs are left as the driver filled them.
///
/// # Safety
/// `chain` must be a valid output chain (or null).
pub unsafe fn and_features_chain(mut chain: *mut c_void, target: &DeviceProfile) -> Vec<String> {
    let mut hidden = Vec::new();
    while !chain.is_null() {
        let base = &mut *(chain as *mut vk::BaseOutStructure<'_>);
        if base.s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
            let f2 = &mut *(chain as *mut vk::PhysicalDeviceFeatures2<'_>);
            hidden.extend(and_core_features(&mut f2.features, target));
        } else if let Some(s) = feature_struct_by_s_type(base.s_type) {
            let words = (chain as *mut u8).add(16) as *mut u32;
            and_words(words, s.name, s.members, target, &mut hidden);
        }
        chain = base.p_next as *mut c_void;
    }
    hidden
}

/// What a device-creation request enables that the profile lacks (`pEnabledFeatures` and the
/// feature structs of the create info's chain).
///
/// # Safety
/// `core` and `chain` must be valid (or null).
pub unsafe fn lacking_features(
    core: *const vk::PhysicalDeviceFeatures,
    chain: *const c_void,
    target: &DeviceProfile,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |words: *const u32, structure: &str, members: &[&str]| {
        let known = feature_struct(structure).is_none_or(|s| in_profile(s.origins, target));
        for (i, m) in members.iter().enumerate() {
            if *words.add(i) != 0 && !(known && target.feature(structure, m)) {
                out.push(format!("{structure}.{m}"));
            }
        }
    };
    if !core.is_null() {
        check(
            core as *const u32,
            "VkPhysicalDeviceFeatures",
            CORE_FEATURES,
        );
    }
    let mut p = chain;
    while !p.is_null() {
        let base = &*(p as *const vk::BaseInStructure<'_>);
        if base.s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
            let f2 = &*(p as *const vk::PhysicalDeviceFeatures2<'_>);
            check(
                &f2.features as *const _ as *const u32,
                "VkPhysicalDeviceFeatures",
                CORE_FEATURES,
            );
        } else if let Some(s) = feature_struct_by_s_type(base.s_type) {
            check((p as *const u8).add(16) as *const u32, s.name, s.members);
        }
        p = base.p_next as *const c_void;
    }
    out
}

/// ANDs format feature flags with the profile's (formats the profile does not list are left).
pub fn and_format(format: vk::Format, f: &mut vk::FormatProperties, target: &DeviceProfile) {
    if let Some(t) = target.formats.iter().find(|e| e.format == format.as_raw()) {
        f.linear_tiling_features &= vk::FormatFeatureFlags::from_raw(t.linear);
        f.optimal_tiling_features &= vk::FormatFeatureFlags::from_raw(t.optimal);
        f.buffer_features &= vk::FormatFeatureFlags::from_raw(t.buffer);
    }
}

/// As [`and_format`] for a `VkFormatProperties2` chain (its `VkFormatProperties3` too: the 64-bit
/// flags keep their upper bits only where the profile has any flag of that kind).
///
/// # Safety
/// `chain` must be a valid output chain (or null).
pub unsafe fn and_format_chain(format: vk::Format, mut chain: *mut c_void, target: &DeviceProfile) {
    let t = target.formats.iter().find(|e| e.format == format.as_raw());
    while !chain.is_null() {
        let base = &mut *(chain as *mut vk::BaseOutStructure<'_>);
        if base.s_type == vk::StructureType::FORMAT_PROPERTIES_2 {
            and_format(
                format,
                &mut (*(chain as *mut vk::FormatProperties2<'_>)).format_properties,
                target,
            );
        } else if base.s_type == vk::StructureType::FORMAT_PROPERTIES_3 {
            if let Some(t) = t {
                let f3 = &mut *(chain as *mut vk::FormatProperties3<'_>);
                let wide = |x: u32| {
                    vk::FormatFeatureFlags2::from_raw(
                        x as u64 | if x != 0 { !0xffff_ffffu64 } else { 0 },
                    )
                };
                f3.linear_tiling_features &= wide(t.linear);
                f3.optimal_tiling_features &= wide(t.optimal);
                f3.buffer_features &= wide(t.buffer);
            }
        }
        chain = base.p_next as *mut c_void;
    }
}

/// Whether the target offers images of `format` with `tiling` for `usage`: its format feature
/// flags for that tiling hold what each usage bit needs (formats the profile does not list, and
/// tilings other than linear and optimal, pass).
pub fn image_format_ok(
    format: vk::Format,
    tiling: vk::ImageTiling,
    usage: vk::ImageUsageFlags,
    target: &DeviceProfile,
) -> bool {
    use vk::{FormatFeatureFlags as F, ImageUsageFlags as U};
    let Some(t) = target.formats.iter().find(|e| e.format == format.as_raw()) else {
        return true;
    };
    let have = F::from_raw(match tiling {
        vk::ImageTiling::LINEAR => t.linear,
        vk::ImageTiling::OPTIMAL => t.optimal,
        _ => return true,
    });
    let needs: [(U, F); 7] = [
        (U::TRANSFER_SRC, F::TRANSFER_SRC),
        (U::TRANSFER_DST, F::TRANSFER_DST),
        (U::SAMPLED, F::SAMPLED_IMAGE),
        (U::STORAGE, F::STORAGE_IMAGE),
        (U::COLOR_ATTACHMENT, F::COLOR_ATTACHMENT),
        (U::DEPTH_STENCIL_ATTACHMENT, F::DEPTH_STENCIL_ATTACHMENT),
        (
            U::INPUT_ATTACHMENT,
            F::from_raw(F::COLOR_ATTACHMENT.as_raw() | F::DEPTH_STENCIL_ATTACHMENT.as_raw()),
        ),
    ];
    needs
        .iter()
        .all(|(u, f)| !usage.contains(*u) || have.intersects(*f))
}

/// Image format properties within the target's limits: extent by `maxImageDimension*` of the
/// image type, array layers by `maxImageArrayLayers`, mip levels by what that extent allows.
pub fn clamp_image_format(
    p: &mut vk::ImageFormatProperties,
    ty: vk::ImageType,
    target: &DeviceProfile,
) {
    let Some(l) = target.properties.get("VkPhysicalDeviceLimits") else {
        return;
    };
    let get = |k: &str| l.get(k).and_then(Json::as_u64).map(|v| v as u32);
    let dim = match ty {
        vk::ImageType::TYPE_1D => get("maxImageDimension1D"),
        vk::ImageType::TYPE_3D => get("maxImageDimension3D"),
        _ => get("maxImageDimension2D"),
    };
    if let Some(d) = dim {
        let e = &mut p.max_extent;
        e.width = e.width.min(d);
        e.height = e.height.min(d);
        e.depth = e.depth.min(d);
        let largest = e.width.max(e.height).max(e.depth).max(1);
        p.max_mip_levels = p.max_mip_levels.min(32 - largest.leading_zeros());
    }
    if let Some(n) = get("maxImageArrayLayers") {
        p.max_array_layers = p.max_array_layers.min(n);
    }
}

/// Queue families as an app choosing by them should see them: each family keeps only the flags
/// some target family has, and its queue count and timestampValidBits are at most the best a
/// target family with those flags offers (family indices stay the capture GPU's: the replayer maps
/// families by capability).
pub fn reduce_queue_family(q: &mut vk::QueueFamilyProperties, target: &DeviceProfile) {
    if target.queue_families.is_empty() {
        return;
    }
    let any = target.queue_families.iter().fold(0, |a, f| a | f.flags);
    q.queue_flags &= vk::QueueFlags::from_raw(any);
    let want = q.queue_flags.as_raw();
    let fits: Vec<_> = target
        .queue_families
        .iter()
        .filter(|f| f.flags & want == want)
        .collect();
    let pool = if fits.is_empty() {
        target.queue_families.iter().collect()
    } else {
        fits
    };
    let count = pool.iter().map(|f| f.queue_count).max().unwrap_or(1).max(1);
    let bits = pool
        .iter()
        .map(|f| f.timestamp_valid_bits)
        .max()
        .unwrap_or(0);
    q.queue_count = q.queue_count.min(count);
    q.timestamp_valid_bits = q.timestamp_valid_bits.min(bits);
}

/// Memory as an app choosing by it should see it: property flags no target type has are removed
/// (lazily allocated, protected, device-coherent, ...), and each heap is at most the largest target
/// heap of the same kind (device-local or not). Type and heap indices stay the capture GPU's.
pub fn reduce_memory(m: &mut vk::PhysicalDeviceMemoryProperties, target: &DeviceProfile) {
    if target.memory_types.is_empty() {
        return;
    }
    let any = target
        .memory_types
        .iter()
        .fold(0, |a, t| a | t.property_flags);
    let n = (m.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES);
    for t in &mut m.memory_types[..n] {
        t.property_flags &= vk::MemoryPropertyFlags::from_raw(any);
    }
    let n = (m.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS);
    let local = vk::MemoryHeapFlags::DEVICE_LOCAL.as_raw();
    for h in &mut m.memory_heaps[..n] {
        let kind = h.flags.as_raw() & local;
        let best = target
            .memory_heaps
            .iter()
            .filter(|t| t.flags & local == kind)
            .map(|t| t.size)
            .max()
            .or_else(|| target.memory_heaps.iter().map(|t| t.size).max());
        if let Some(b) = best {
            h.size = h.size.min(b);
        }
    }
}

// ==== checking a GPU against a profile ===============================================================

fn num(v: &Json) -> Vec<f64> {
    match v {
        Json::Array(a) => a.iter().filter_map(Json::as_f64).collect(),
        other => other.as_f64().into_iter().collect(),
    }
}

/// Whether `actual` offers at least `target` under `rule`.
fn covers(actual: &Json, target: &Json, rule: Rule) -> bool {
    let (a, t) = (num(actual), num(target));
    if a.len() != t.len() {
        return false;
    }
    a.iter()
        .zip(&t)
        .enumerate()
        .all(|(i, (&a, &t))| match rule {
            Rule::Min => a >= t,
            Rule::Max => a <= t,
            Rule::And => (t as u64) & !(a as u64) == 0,
            Rule::Range => (i == 0 && a <= t) || (i > 0 && a >= t),
            Rule::Keep => true,
        })
}

/// What the profile `target` offers that the device `actual` lacks: apiVersion, extensions,
/// features, limits and properties (by their rules), format flags. Empty: `actual` can do all a
/// capture made for `target` may use.
pub fn shortfalls(target: &DeviceProfile, actual: &DeviceProfile) -> Vec<String> {
    let mut out = Vec::new();
    if actual.api_version < target.api_version {
        out.push(format!(
            "apiVersion {}.{} < {}.{}",
            vk::api_version_major(actual.api_version),
            vk::api_version_minor(actual.api_version),
            vk::api_version_major(target.api_version),
            vk::api_version_minor(target.api_version)
        ));
    }
    for e in target.extensions.keys() {
        if !actual.has_extension(e) {
            out.push(format!("extension {e}"));
        }
    }
    for (s, members) in &target.features {
        if feature_struct(s).is_some_and(|f| !in_profile(f.origins, target)) {
            continue;
        }
        for (m, on) in members {
            if *on && !actual.feature(s, m) {
                out.push(format!("feature {s}.{m}"));
            }
        }
    }
    for s in property_structs() {
        let (Some(t), Some(a)) = (target.properties.get(s.name), actual.properties.get(s.name))
        else {
            continue;
        };
        for (m, rule) in (s.rules)() {
            if let (Some(tv), Some(av)) = (t.get(&m), a.get(&m)) {
                if !covers(av, tv, rule) {
                    out.push(format!("{}.{m} {av} (profile {tv})", s.name));
                }
            }
        }
    }
    for t in &target.formats {
        let a = actual
            .formats
            .iter()
            .find(|a| a.format == t.format)
            .copied()
            .unwrap_or_default();
        if t.linear & !a.linear != 0 || t.optimal & !a.optimal != 0 || t.buffer & !a.buffer != 0 {
            out.push(format!("format {} features", t.format));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> DeviceProfile {
        let mut p = DeviceProfile {
            api_version: vk::API_VERSION_1_2,
            ..Default::default()
        };
        let core = p
            .features
            .entry("VkPhysicalDeviceFeatures".into())
            .or_default();
        core.insert("geometryShader".into(), true);
        core.insert("pipelineStatisticsQuery".into(), false);
        let mut limits = Members::new();
        limits.insert("maxImageDimension2D".into(), Json::from(4096));
        limits.insert("minUniformBufferOffsetAlignment".into(), Json::from(256));
        limits.insert("pointSizeRange".into(), Json::from(vec![1.0, 64.0]));
        limits.insert("framebufferColorSampleCounts".into(), Json::from(5));
        limits.insert("timestampPeriod".into(), Json::from(40.0));
        p.properties.insert("VkPhysicalDeviceLimits".into(), limits);
        p.formats.push(super::super::FormatEntry {
            format: vk::Format::R8G8B8A8_UNORM.as_raw(),
            linear: 1,
            optimal: 3,
            buffer: 0,
        });
        p
    }

    #[test]
    fn camel_case_names() {
        assert_eq!(camel("max_image_dimension1_d"), "maxImageDimension1D");
        assert_eq!(
            camel("residency_standard2_d_block_shape"),
            "residencyStandard2DBlockShape"
        );
    }

    #[test]
    fn properties_take_the_stricter_value_per_rule() {
        let t = profile();
        let mut p = vk::PhysicalDeviceProperties {
            api_version: vk::API_VERSION_1_3,
            ..Default::default()
        };
        p.limits.max_image_dimension2_d = 32768;
        p.limits.min_uniform_buffer_offset_alignment = 64;
        p.limits.point_size_range = [0.5, 2047.0];
        p.limits.framebuffer_color_sample_counts = vk::SampleCountFlags::from_raw(0xf);
        p.limits.timestamp_period = 1.0;
        p.limits.max_viewports = 16; // not in the profile: unchanged
        clamp_properties(&mut p, &t);
        assert_eq!(p.api_version, vk::API_VERSION_1_2);
        assert_eq!(p.limits.max_image_dimension2_d, 4096);
        assert_eq!(p.limits.min_uniform_buffer_offset_alignment, 256);
        assert_eq!(p.limits.point_size_range, [1.0, 64.0]);
        assert_eq!(p.limits.framebuffer_color_sample_counts.as_raw(), 5);
        assert_eq!(p.limits.timestamp_period, 1.0, "kept");
        assert_eq!(p.limits.max_viewports, 16);
    }

    #[test]
    fn features_are_anded_through_the_chain() {
        /// Runs the chain walk over core features and a transform feedback struct, both all on.
        fn run(t: &DeviceProfile) -> (vk::PhysicalDeviceFeatures, u32, Vec<String>) {
            let mut xfb = vk::PhysicalDeviceTransformFeedbackFeaturesEXT {
                transform_feedback: 1,
                ..Default::default()
            };
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut xfb);
            f2.features.geometry_shader = 1;
            f2.features.pipeline_statistics_query = 1;
            f2.features.inherited_queries = 1;
            let hidden = unsafe { and_features_chain(&mut f2 as *mut _ as *mut c_void, t) };
            let core = f2.features;
            (core, xfb.transform_feedback, hidden)
        }
        let mut t = profile();
        let (core, xfb, hidden) = run(&t);
        assert_eq!(core.geometry_shader, 1);
        assert_eq!(core.pipeline_statistics_query, 0);
        assert_eq!(core.inherited_queries, 0, "absent means off");
        assert_eq!(xfb, 0, "struct not in the profile");
        assert!(hidden.contains(&"VkPhysicalDeviceFeatures.pipelineStatisticsQuery".into()));
        assert!(hidden
            .contains(&"VkPhysicalDeviceTransformFeedbackFeaturesEXT.transformFeedback".into()));
        // The struct listed but its extension removed from the profile: still off.
        t.features
            .entry("VkPhysicalDeviceTransformFeedbackFeaturesEXT".into())
            .or_default()
            .insert("transformFeedback".into(), true);
        assert_eq!(run(&t).1, 0);
        t.extensions.insert("VK_EXT_transform_feedback".into(), 1);
        assert_eq!(run(&t).1, 1);
    }

    #[test]
    fn formats_queues_and_memory() {
        let mut t = profile();
        let mut f = vk::FormatProperties {
            linear_tiling_features: vk::FormatFeatureFlags::from_raw(7),
            optimal_tiling_features: vk::FormatFeatureFlags::from_raw(7),
            buffer_features: vk::FormatFeatureFlags::from_raw(7),
        };
        and_format(vk::Format::R8G8B8A8_UNORM, &mut f, &t);
        assert_eq!(
            (
                f.linear_tiling_features.as_raw(),
                f.optimal_tiling_features.as_raw(),
                f.buffer_features.as_raw()
            ),
            (1, 3, 0)
        );
        t.queue_families.push(super::super::QueueFamily {
            flags: 7,
            queue_count: 1,
            timestamp_valid_bits: 64,
            ..Default::default()
        });
        let mut q = vk::QueueFamilyProperties {
            queue_flags: vk::QueueFlags::from_raw(0xf),
            queue_count: 16,
            timestamp_valid_bits: 64,
            ..Default::default()
        };
        reduce_queue_family(&mut q, &t);
        assert_eq!((q.queue_flags.as_raw(), q.queue_count), (7, 1));
        t.memory_types.push(super::super::MemoryType {
            property_flags: 7,
            heap_index: 0,
        });
        t.memory_heaps.push(super::super::MemoryHeap {
            size: 1 << 30,
            flags: 1,
        });
        let mut m = vk::PhysicalDeviceMemoryProperties {
            memory_type_count: 1,
            memory_heap_count: 1,
            ..Default::default()
        };
        m.memory_types[0].property_flags = vk::MemoryPropertyFlags::from_raw(0x21);
        m.memory_heaps[0] = vk::MemoryHeap {
            size: 80 << 30,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
        };
        reduce_memory(&mut m, &t);
        assert_eq!(m.memory_types[0].property_flags.as_raw(), 1);
        assert_eq!(m.memory_heaps[0].size, 1 << 30);
    }

    #[test]
    fn image_formats_follow_the_format_flags_and_limits() {
        let t = profile();
        let f = vk::Format::R8G8B8A8_UNORM;
        // optimal: SAMPLED_IMAGE | STORAGE_IMAGE (3); linear: SAMPLED_IMAGE (1).
        let (lin, opt) = (vk::ImageTiling::LINEAR, vk::ImageTiling::OPTIMAL);
        assert!(image_format_ok(f, opt, vk::ImageUsageFlags::STORAGE, &t));
        assert!(!image_format_ok(f, lin, vk::ImageUsageFlags::STORAGE, &t));
        assert!(!image_format_ok(
            f,
            opt,
            vk::ImageUsageFlags::COLOR_ATTACHMENT,
            &t
        ));
        assert!(image_format_ok(
            vk::Format::R8_UNORM,
            lin,
            vk::ImageUsageFlags::STORAGE,
            &t
        ));
        let mut p = vk::ImageFormatProperties {
            max_extent: vk::Extent3D {
                width: 16384,
                height: 16384,
                depth: 1,
            },
            max_mip_levels: 15,
            max_array_layers: 2048,
            ..Default::default()
        };
        clamp_image_format(&mut p, vk::ImageType::TYPE_2D, &t);
        assert_eq!(
            (p.max_extent.width, p.max_mip_levels, p.max_array_layers),
            (4096, 13, 2048)
        );
    }

    #[test]
    fn shortfalls_list_what_the_device_lacks() {
        let t = profile();
        let mut a = profile();
        assert!(shortfalls(&t, &a).is_empty());
        a.api_version = vk::API_VERSION_1_1;
        a.features
            .get_mut("VkPhysicalDeviceFeatures")
            .unwrap()
            .insert("geometryShader".into(), false);
        let l = a.properties.get_mut("VkPhysicalDeviceLimits").unwrap();
        l.insert("maxImageDimension2D".into(), Json::from(2048));
        l.insert("minUniformBufferOffsetAlignment".into(), Json::from(16));
        let s = shortfalls(&t, &a);
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(s[0].starts_with("apiVersion 1.1 < 1.2"));
        assert!(s[2].contains("maxImageDimension2D 2048"));
    }
}
