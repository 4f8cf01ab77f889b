//! Which device features a captured `VkDeviceCreateInfo` enables that the replay GPU lacks, by
//! vk.xml name, so a failed device creation lists all of them at once, and so the ones the trace
//! does not use can be switched off. Every features struct vk.xml knows is checked (the table is
//! generated: `layer_support::generated::features`, which device profiles read too).

use std::ffi::c_void;

use ash::vk;

use layer_support::generated::features::{self, FeatureStruct, CORE_FEATURES};

/// Word offset of the first member after `sType`/`pNext` (4-byte sType, padding, 8-byte pNext).
const HEADER_WORDS: usize = 4;

/// One enabled feature the replay GPU lacks, and where its `VkBool32` is, to switch it off.
pub struct Missing {
    /// `VkPhysicalDeviceFeatures` for core 1.0 features, else the features struct's vk.xml name.
    pub structure: &'static str,
    pub member: &'static str,
    word: *mut u32,
}

impl Missing {
    /// `VkPhysicalDeviceVulkan12Features.samplerMirrorClampToEdge`, `pipelineStatisticsQuery`.
    pub fn name(&self) -> String {
        if self.structure == "VkPhysicalDeviceFeatures" {
            self.member.to_string()
        } else {
            format!("{}.{}", self.structure, self.member)
        }
    }

    /// Switches the feature off in the create info.
    ///
    /// # Safety
    /// The create info [`missing`] read must still be alive and its structs writable.
    pub unsafe fn disable(&self) {
        *self.word = 0;
    }
}

/// What the GPU supports of features struct `s` (a zeroed struct of its size, filled by the driver;
/// a driver that does not know the struct leaves it zeroed).
pub(crate) unsafe fn supported_words(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    s: &FeatureStruct,
) -> Vec<u32> {
    let words = HEADER_WORDS + s.members.len();
    // u64 storage keeps the pNext member aligned.
    let mut buf = vec![0u64; words.div_ceil(2)];
    let p = buf.as_mut_ptr() as *mut vk::BaseOutStructure<'_>;
    (*p).s_type = s.s_type;
    let mut f2 = vk::PhysicalDeviceFeatures2 {
        p_next: p as *mut c_void,
        ..Default::default()
    };
    instance.get_physical_device_features2(pd, &mut f2);
    std::slice::from_raw_parts(buf.as_ptr() as *const u32, words).to_vec()
}

/// Enabled words of a core `VkPhysicalDeviceFeatures` at `want` that `have` lacks.
unsafe fn check_core(have: &vk::PhysicalDeviceFeatures, want: *mut u32, out: &mut Vec<Missing>) {
    let h = have as *const vk::PhysicalDeviceFeatures as *const u32;
    for (i, member) in CORE_FEATURES.iter().enumerate() {
        if *want.add(i) != 0 && *h.add(i) == 0 {
            out.push(Missing {
                structure: "VkPhysicalDeviceFeatures",
                member,
                word: want.add(i),
            });
        }
    }
}

/// Every feature `ci` enables (core `pEnabledFeatures`, a chained `VkPhysicalDeviceFeatures2`, and
/// every features struct of the chain) that `pd` does not support.
///
/// # Safety
/// `ci` must be a valid create info with a valid `pNext` chain; `pEnabledFeatures` and the chained
/// structs must stay alive and writable while the result is used.
pub unsafe fn missing(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo<'_>,
) -> Vec<Missing> {
    let mut out = Vec::new();
    let have = instance.get_physical_device_features(pd);
    if !ci.p_enabled_features.is_null() {
        check_core(&have, ci.p_enabled_features as *mut u32, &mut out);
    }
    let mut p = ci.p_next as *mut vk::BaseOutStructure<'_>;
    let mut guard = 0;
    while !p.is_null() && guard < vkstream::MAX_CHAIN {
        let s_type = (*p).s_type;
        if s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
            let f2 = p as *mut vk::PhysicalDeviceFeatures2<'_>;
            check_core(&have, &mut (*f2).features as *mut _ as *mut u32, &mut out);
        } else if let Some(s) = features::by_s_type(s_type) {
            let have = supported_words(instance, pd, s);
            let want = p as *mut u32;
            for (k, member) in s.members.iter().enumerate() {
                let i = HEADER_WORDS + k;
                if *want.add(i) != 0 && have[i] == 0 {
                    out.push(Missing {
                        structure: s.name,
                        member,
                        word: want.add(i),
                    });
                }
            }
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
    fn members_follow_struct_order() {
        let s = features::by_name("VkPhysicalDeviceHostQueryResetFeatures").unwrap();
        assert_eq!(s.members, ["hostQueryReset"]);
        let s = features::by_name("VkPhysicalDeviceVulkan12Features").unwrap();
        assert_eq!(s.members.first(), Some(&"samplerMirrorClampToEdge"));
        // 47 members, each a word after the header: the last one is word 50 of ash's struct.
        assert_eq!(s.members.len(), 47);
        assert_eq!(s.members.last(), Some(&"subgroupBroadcastDynamicId"));
        let v = vk::PhysicalDeviceVulkan12Features {
            subgroup_broadcast_dynamic_id: 1,
            ..Default::default()
        };
        let w = &v as *const _ as *const u32;
        // SAFETY: the struct is at least HEADER_WORDS + 47 words long.
        assert_eq!(unsafe { *w.add(HEADER_WORDS + 46) }, 1);
        assert_eq!(
            s.s_type,
            vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES
        );
        assert!(features::FEATURE_STRUCTS.len() > 100);
    }

    #[test]
    fn core_feature_names() {
        let have = vk::PhysicalDeviceFeatures::default();
        let mut want = vk::PhysicalDeviceFeatures {
            pipeline_statistics_query: 1,
            ..Default::default()
        };
        let mut out = Vec::new();
        // SAFETY: both are plain arrays of VkBool32, one word per CORE_FEATURES entry.
        unsafe { check_core(&have, &mut want as *mut _ as *mut u32, &mut out) };
        assert_eq!(
            out.iter().map(Missing::name).collect::<Vec<_>>(),
            ["pipelineStatisticsQuery"]
        );
        // SAFETY: `want` is alive.
        unsafe { out[0].disable() };
        assert_eq!(want.pipeline_statistics_query, 0);
        assert_eq!(
            CORE_FEATURES.len() * 4,
            std::mem::size_of::<vk::PhysicalDeviceFeatures>()
        );
    }
}
