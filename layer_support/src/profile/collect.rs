//! Reading a GPU's profile through ash (`quarry devices`, the replayer's check).

use super::rules::{property_structs, provided};
use super::{
    profile_feature_structs, DeviceProfile, FormatEntry, MemoryHeap, MemoryType, QueueFamily,
    SCHEMA, VERSION,
};
use crate::generated::features::CORE_FEATURES;
use ash::vk;
use std::collections::BTreeMap;
use std::ffi::c_void;

/// Formats in a profile: every core 1.0 format, and the 1.1 (YCbCr) and 1.3 core additions.
fn formats(api: u32, has: &dyn Fn(&str) -> bool) -> Vec<i32> {
    let mut v: Vec<i32> = (1..=184).collect();
    if api >= vk::API_VERSION_1_1 || has("VK_KHR_sampler_ycbcr_conversion") {
        v.extend(1_000_156_000..=1_000_156_033);
    }
    if api >= vk::API_VERSION_1_3 {
        v.extend(1_000_330_000..=1_000_330_003);
        v.extend(1_000_340_000..=1_000_340_001);
        v.extend(1_000_066_000..=1_000_066_013);
    }
    v
}

/// A zeroed output struct of `size` bytes with its sType, 8-byte aligned.
fn out_struct(s_type: vk::StructureType, size: usize) -> Vec<u64> {
    let mut buf = vec![0u64; size.div_ceil(8).max(2)];
    buf[0] = s_type.as_raw() as u32 as u64;
    buf
}

fn c_str(a: &[std::ffi::c_char]) -> String {
    let b: Vec<u8> = a
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// The profile of `pd`.
///
/// # Safety
/// `pd` must belong to `instance`, created with API version >= 1.1 when the device has it.
pub unsafe fn collect(instance: &ash::Instance, pd: vk::PhysicalDevice) -> DeviceProfile {
    let props = instance.get_physical_device_properties(pd);
    let api = props.api_version;
    let extensions: BTreeMap<String, u32> = instance
        .enumerate_device_extension_properties(pd)
        .unwrap_or_default()
        .iter()
        .map(|e| (c_str(&e.extension_name), e.spec_version))
        .collect();
    let has = |n: &str| extensions.contains_key(n);
    let v11 = api >= vk::API_VERSION_1_1;

    let mut features = BTreeMap::new();
    let core = instance.get_physical_device_features(pd);
    let words = std::slice::from_raw_parts(&core as *const _ as *const u32, CORE_FEATURES.len());
    features.insert(
        "VkPhysicalDeviceFeatures".to_string(),
        CORE_FEATURES
            .iter()
            .zip(words)
            .map(|(m, &w)| (m.to_string(), w != 0))
            .collect(),
    );
    let mut properties = BTreeMap::new();
    let table = property_structs();
    properties.insert(
        table[0].name.to_string(),
        (table[0].read)(&props.limits as *const _ as *const c_void),
    );
    properties.insert(
        table[1].name.to_string(),
        (table[1].read)(&props.sparse_properties as *const _ as *const c_void),
    );
    if v11 {
        for s in profile_feature_structs() {
            if !provided(s.origins, api, has) {
                continue;
            }
            let mut buf = out_struct(s.s_type, 16 + 4 * s.members.len());
            let mut f2 = vk::PhysicalDeviceFeatures2 {
                p_next: buf.as_mut_ptr() as *mut c_void,
                ..Default::default()
            };
            instance.get_physical_device_features2(pd, &mut f2);
            let w = (buf.as_ptr() as *const u8).add(16) as *const u32;
            features.insert(
                s.name.to_string(),
                s.members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| (m.to_string(), *w.add(i) != 0))
                    .collect(),
            );
        }
        for s in table {
            let Some(st) = s.s_type else { continue };
            if !provided(s.origins, api, has) {
                continue;
            }
            let mut buf = out_struct(st, s.size);
            let mut p2 = vk::PhysicalDeviceProperties2 {
                p_next: buf.as_mut_ptr() as *mut c_void,
                ..Default::default()
            };
            instance.get_physical_device_properties2(pd, &mut p2);
            properties.insert(s.name.to_string(), (s.read)(buf.as_ptr() as *const c_void));
        }
    }

    let formats = formats(api, &has)
        .into_iter()
        .map(|f| {
            let p = instance.get_physical_device_format_properties(pd, vk::Format::from_raw(f));
            FormatEntry {
                format: f,
                linear: p.linear_tiling_features.as_raw(),
                optimal: p.optimal_tiling_features.as_raw(),
                buffer: p.buffer_features.as_raw(),
            }
        })
        .collect();
    let queue_families = instance
        .get_physical_device_queue_family_properties(pd)
        .iter()
        .map(|q| QueueFamily {
            flags: q.queue_flags.as_raw(),
            queue_count: q.queue_count,
            timestamp_valid_bits: q.timestamp_valid_bits,
            min_image_transfer_granularity: [
                q.min_image_transfer_granularity.width,
                q.min_image_transfer_granularity.height,
                q.min_image_transfer_granularity.depth,
            ],
        })
        .collect();
    let mem = instance.get_physical_device_memory_properties(pd);
    let memory_types = mem.memory_types
        [..(mem.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES)]
        .iter()
        .map(|t| MemoryType {
            property_flags: t.property_flags.as_raw(),
            heap_index: t.heap_index,
        })
        .collect();
    let memory_heaps = mem.memory_heaps
        [..(mem.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS)]
        .iter()
        .map(|h| MemoryHeap {
            size: h.size,
            flags: h.flags.as_raw(),
        })
        .collect();
    let device_type = match props.device_type {
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    };
    let mut driver_name = String::new();
    if api >= vk::API_VERSION_1_2 {
        let mut d = vk::PhysicalDeviceDriverProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut d);
        instance.get_physical_device_properties2(pd, &mut p2);
        driver_name = c_str(&d.driver_name);
    }
    DeviceProfile {
        schema: SCHEMA.into(),
        version: VERSION,
        name: c_str(&props.device_name),
        device_type: device_type.into(),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        driver_version: props.driver_version,
        driver_name,
        api_version: api,
        extensions,
        features,
        properties,
        formats,
        queue_families,
        memory_types,
        memory_heaps,
    }
}
