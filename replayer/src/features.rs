//! Which device features a captured `VkDeviceCreateInfo` enables that the replay GPU lacks, by name,
//! so a failed device creation lists all of them at once.

use std::ffi::c_void;

use ash::vk::{self, TaggedStructure};

/// Field names of a features struct, read from ash's `Debug` output of a default value (every
/// member after `s_type`/`p_next` is a `VkBool32`, so member i is 32-bit word i after the header).
fn field_names<T: Default + std::fmt::Debug>() -> Vec<String> {
    let text = format!("{:?}", T::default());
    let Some(open) = text.find('{') else {
        return Vec::new();
    };
    text[open + 1..]
        .split(',')
        .filter_map(|f| f.split(':').next())
        .map(|n| n.trim().trim_end_matches('}').trim().to_string())
        .filter(|n| !n.is_empty() && n != "s_type" && n != "p_next" && n != "_marker")
        .collect()
}

/// Word offset of the first member after `sType`/`pNext`.
const HEADER_WORDS: usize = 4;

/// Compares the enabled words of `enabled` (a captured struct of type `T`) with what the GPU reports.
///
/// # Safety
/// `enabled` must point to a valid `T`.
unsafe fn check<T: Default + std::fmt::Debug + TaggedStructure>(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    enabled: *const c_void,
    out: &mut Vec<String>,
) {
    let mut supported = T::default();
    let mut f2 = vk::PhysicalDeviceFeatures2 {
        p_next: &mut supported as *mut T as *mut c_void,
        ..Default::default()
    };
    instance.get_physical_device_features2(pd, &mut f2);
    let words = std::mem::size_of::<T>() / 4;
    let want = std::slice::from_raw_parts(enabled as *const u32, words);
    let have = std::slice::from_raw_parts(&supported as *const T as *const u32, words);
    let names = field_names::<T>();
    let struct_name = std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("")
        .trim_end_matches("<'_>")
        .to_string();
    // Only the named members: the struct may end in alignment padding.
    for (k, field) in names.iter().enumerate() {
        let i = HEADER_WORDS + k;
        if i < words && want[i] != 0 && have[i] == 0 {
            out.push(format!("feature {struct_name}.{field}"));
        }
    }
}

fn check_core(
    have: &vk::PhysicalDeviceFeatures,
    want: &vk::PhysicalDeviceFeatures,
    out: &mut Vec<String>,
) {
    let words = std::mem::size_of::<vk::PhysicalDeviceFeatures>() / 4;
    // SAFETY: PhysicalDeviceFeatures is a plain array of VkBool32.
    let (w, h) = unsafe {
        (
            std::slice::from_raw_parts(want as *const _ as *const u32, words),
            std::slice::from_raw_parts(have as *const _ as *const u32, words),
        )
    };
    let names = {
        let text = format!("{:?}", vk::PhysicalDeviceFeatures::default());
        let open = text.find('{').map_or(0, |o| o + 1);
        text[open..]
            .split(',')
            .filter_map(|f| f.split(':').next())
            .map(|n| n.trim().trim_end_matches('}').trim().to_string())
            .filter(|n| !n.is_empty())
            .collect::<Vec<_>>()
    };
    for i in 0..words {
        if w[i] != 0 && h[i] == 0 {
            out.push(format!(
                "feature {}",
                names.get(i).cloned().unwrap_or_else(|| format!("#{i}"))
            ));
        }
    }
}

macro_rules! known_feature_structs {
    ($($t:ident),* $(,)?) => {
        /// Checks one chained struct when it is a features struct this build knows.
        unsafe fn check_chained(instance: &ash::Instance, pd: vk::PhysicalDevice, s_type: vk::StructureType, p: *const c_void, out: &mut Vec<String>) {
            $(
                if s_type == vk::$t::STRUCTURE_TYPE {
                    check::<vk::$t>(instance, pd, p, out);
                    return;
                }
            )*
        }
    };
}

known_feature_structs!(
    PhysicalDeviceVulkan11Features,
    PhysicalDeviceVulkan12Features,
    PhysicalDeviceVulkan13Features,
    PhysicalDeviceTransformFeedbackFeaturesEXT,
    PhysicalDeviceMeshShaderFeaturesEXT,
    PhysicalDevicePerformanceQueryFeaturesKHR,
    PhysicalDevicePrimitivesGeneratedQueryFeaturesEXT,
    PhysicalDeviceHostQueryResetFeatures,
    PhysicalDeviceTimelineSemaphoreFeatures,
    PhysicalDeviceBufferDeviceAddressFeatures,
    PhysicalDeviceDescriptorIndexingFeatures,
    PhysicalDeviceDynamicRenderingFeatures,
    PhysicalDeviceSynchronization2Features,
    PhysicalDeviceShaderDrawParametersFeatures,
    PhysicalDevice16BitStorageFeatures,
    PhysicalDevice8BitStorageFeatures,
    PhysicalDeviceMultiviewFeatures,
    PhysicalDeviceSamplerYcbcrConversionFeatures,
    PhysicalDeviceScalarBlockLayoutFeatures,
    PhysicalDeviceShaderFloat16Int8Features,
    PhysicalDeviceExtendedDynamicStateFeaturesEXT,
    PhysicalDeviceExtendedDynamicState2FeaturesEXT,
    PhysicalDeviceAccelerationStructureFeaturesKHR,
    PhysicalDeviceRayTracingPipelineFeaturesKHR,
    PhysicalDeviceRayQueryFeaturesKHR,
    PhysicalDeviceRobustness2FeaturesEXT,
    PhysicalDeviceDepthClipEnableFeaturesEXT,
    PhysicalDeviceCustomBorderColorFeaturesEXT,
    PhysicalDeviceVertexAttributeDivisorFeaturesEXT,
    PhysicalDeviceConditionalRenderingFeaturesEXT,
);

/// Every feature `ci` enables (core `pEnabledFeatures`, a chained `VkPhysicalDeviceFeatures2`, and the
/// known feature structs of the chain) that `pd` does not support.
///
/// # Safety
/// `ci` must be a valid create info with a valid `pNext` chain.
pub unsafe fn missing_features(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo<'_>,
) -> Vec<String> {
    let mut out = Vec::new();
    let have = instance.get_physical_device_features(pd);
    if !ci.p_enabled_features.is_null() {
        check_core(&have, &*ci.p_enabled_features, &mut out);
    }
    let mut p = ci.p_next as *const vk::BaseInStructure<'_>;
    let mut guard = 0;
    while !p.is_null() && guard < 256 {
        let s_type = (*p).s_type;
        if s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
            let f2 = &*(p as *const vk::PhysicalDeviceFeatures2<'_>);
            check_core(&have, &f2.features, &mut out);
        } else {
            check_chained(instance, pd, s_type, p as *const c_void, &mut out);
        }
        p = (*p).p_next;
        guard += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_member_order() {
        let n = field_names::<vk::PhysicalDeviceHostQueryResetFeatures>();
        assert_eq!(n, vec!["host_query_reset".to_string()]);
        let n = field_names::<vk::PhysicalDeviceVulkan12Features>();
        assert_eq!(
            n.first().map(String::as_str),
            Some("sampler_mirror_clamp_to_edge")
        );
        // 47 members; the struct ends in 4 bytes of alignment padding.
        assert_eq!(n.len(), 47);
        assert_eq!(
            n.last().map(String::as_str),
            Some("subgroup_broadcast_dynamic_id")
        );
    }

    #[test]
    fn core_feature_names() {
        let have = vk::PhysicalDeviceFeatures::default();
        let want = vk::PhysicalDeviceFeatures {
            pipeline_statistics_query: 1,
            ..Default::default()
        };
        let mut out = Vec::new();
        check_core(&have, &want, &mut out);
        assert_eq!(out, vec!["feature pipeline_statistics_query".to_string()]);
    }
}
