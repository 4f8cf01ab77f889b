//! Device profiles: what one GPU offers, as `quarry devices --json` prints it (each GPU's `profile`),
//! and what `quarry capture --target FILE` hands the capture layer so the app sees only what both
//! the capture GPU and the target offer.
//!
//! Schema `quarry-device-profile` version 1 (JSON): identity (name, ids, apiVersion), device
//! extensions with spec versions, features by struct and member name (core `VkPhysicalDeviceFeatures`
//! and every feature struct of the registry the device provides), properties that gate behaviour by
//! struct and member name (limits, sparse, subgroup, ... see `rules::PROPERTY_STRUCTS`), format
//! feature flags of every core format, queue families and memory types/heaps. Readers accept newer
//! minor additions (unknown fields are ignored) and refuse a newer `version`.
//!
//! `rules` holds the intersection rules (the one per-limit table); `collect` reads a GPU through ash.
//! Features structs come from the registry's one table (`generated::features`, which the replayer
//! reads too), less the provisional ones.
//! Depends on: `generated::features` only.

pub mod collect;
pub mod rules;

use crate::generated::features::{self, FeatureStruct, FEATURE_STRUCTS};
use ash::vk;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "quarry-device-profile";
pub const VERSION: u32 = 1;

/// Member name (Vulkan spelling) -> value, for one properties struct.
pub type Members = BTreeMap<String, serde_json::Value>;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct DeviceProfile {
    pub schema: String,
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub device_type: String,
    #[serde(default)]
    pub vendor_id: u32,
    #[serde(default)]
    pub device_id: u32,
    #[serde(default)]
    pub driver_version: u32,
    #[serde(default)]
    pub driver_name: String,
    /// Raw `VkPhysicalDeviceProperties::apiVersion`.
    pub api_version: u32,
    /// Device extension name -> spec version.
    pub extensions: BTreeMap<String, u32>,
    /// Feature struct (`VkPhysicalDeviceFeatures`, `VkPhysicalDeviceVulkan12Features`, ...) ->
    /// member -> supported. A struct the device does not provide is absent.
    pub features: BTreeMap<String, BTreeMap<String, bool>>,
    /// Properties struct (`VkPhysicalDeviceLimits`, `VkPhysicalDeviceSparseProperties`, ...) ->
    /// member -> value (numbers, arrays of numbers; flags and bools as integers).
    pub properties: BTreeMap<String, Members>,
    /// Format feature flags of every core format (and the 1.1/1.3 core additions the device has).
    pub formats: Vec<FormatEntry>,
    pub queue_families: Vec<QueueFamily>,
    pub memory_types: Vec<MemoryType>,
    pub memory_heaps: Vec<MemoryHeap>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FormatEntry {
    /// `VkFormat` raw value.
    pub format: i32,
    /// `VkFormatFeatureFlags` of linear tiling, optimal tiling, buffers.
    pub linear: u32,
    pub optimal: u32,
    pub buffer: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueFamily {
    /// `VkQueueFlags`.
    pub flags: u32,
    pub queue_count: u32,
    pub timestamp_valid_bits: u32,
    pub min_image_transfer_granularity: [u32; 3],
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryType {
    /// `VkMemoryPropertyFlags`.
    pub property_flags: u32,
    pub heap_index: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryHeap {
    pub size: u64,
    /// `VkMemoryHeapFlags`.
    pub flags: u32,
}

impl DeviceProfile {
    /// The profile as compact JSON (what the trace records).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// FNV-1a 64 of the compact JSON (maps are sorted, so equal profiles hash equal), 16 hex digits.
    pub fn hash(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.to_json().bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    pub fn has_extension(&self, name: &str) -> bool {
        self.extensions.contains_key(name)
    }

    /// Whether the profile's device supports feature `member` of `structure` (false when absent).
    pub fn feature(&self, structure: &str, member: &str) -> bool {
        self.features
            .get(structure)
            .and_then(|m| m.get(member))
            .copied()
            .unwrap_or(false)
    }
}

/// Reads a profile from JSON text: a profile object, one GPU of `quarry devices --json` (its
/// `profile`), or the whole list (`index` picks one; without it the list must hold one GPU).
pub fn parse(text: &str, index: Option<usize>) -> Result<DeviceProfile, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let one = match &v {
        serde_json::Value::Array(list) => {
            let i = match (index, list.len()) {
                (Some(i), n) if i < n => i,
                (Some(i), n) => return Err(format!("no GPU #{i}: the file lists {n}")),
                (None, 1) => 0,
                (None, n) => {
                    let names: Vec<String> = list
                        .iter()
                        .enumerate()
                        .map(|(i, g)| format!("#{i} {}", g["name"].as_str().unwrap_or("?")))
                        .collect();
                    return Err(format!(
                        "the file lists {n} GPUs ({}); name one as FILE#INDEX",
                        names.join(", ")
                    ));
                }
            };
            &list[i]
        }
        other => other,
    };
    let p = if one.get("schema").is_some() {
        one
    } else {
        one.get("profile").ok_or(
            "no device profile in it (made by an older `quarry devices --json`? run this one's)",
        )?
    };
    if p["schema"].as_str() != Some(SCHEMA) {
        return Err(format!("not a {SCHEMA} (schema {})", p["schema"]));
    }
    let version = p["version"].as_u64().unwrap_or(0);
    if version > VERSION as u64 {
        return Err(format!(
            "profile version {version} is newer than this quarry's ({VERSION})"
        ));
    }
    serde_json::from_value(p.clone()).map_err(|e| format!("bad profile: {e}"))
}

/// The features structs profiles hold: the registry's, less those only provisional extensions add.
pub(crate) fn profile_feature_structs() -> impl Iterator<Item = &'static FeatureStruct> {
    FEATURE_STRUCTS.iter().filter(|s| !s.provisional)
}

/// A features struct profiles hold, by vk.xml name.
pub(crate) fn feature_struct(name: &str) -> Option<&'static FeatureStruct> {
    features::by_name(name).filter(|s| !s.provisional)
}

/// A features struct profiles hold, by sType.
pub(crate) fn feature_struct_by_s_type(
    s_type: vk::StructureType,
) -> Option<&'static FeatureStruct> {
    features::by_s_type(s_type).filter(|s| !s.provisional)
}

/// Reads `PATH` or `PATH#INDEX` (an index into a `quarry devices --json` list).
pub fn load(spec: &str) -> Result<DeviceProfile, String> {
    let (path, index) = match spec.rsplit_once('#') {
        Some((p, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => {
            (p, i.parse::<usize>().ok())
        }
        _ => (spec, None),
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    parse(&text, index).map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DeviceProfile {
        let mut p = DeviceProfile {
            schema: SCHEMA.into(),
            version: VERSION,
            name: "gpu".into(),
            api_version: ash::vk::API_VERSION_1_3,
            ..Default::default()
        };
        p.extensions.insert("VK_EXT_transform_feedback".into(), 1);
        p.features
            .entry("VkPhysicalDeviceFeatures".into())
            .or_default()
            .insert("pipelineStatisticsQuery".into(), true);
        p
    }

    #[test]
    fn parse_accepts_profile_gpu_and_list() {
        let p = sample();
        let json = p.to_json();
        assert_eq!(parse(&json, None).unwrap(), p);
        let gpu = format!(r#"{{"name":"gpu","profile":{json}}}"#);
        assert_eq!(parse(&gpu, None).unwrap(), p);
        let list = format!("[{gpu},{gpu}]");
        assert_eq!(parse(&list, Some(1)).unwrap(), p);
        assert!(parse(&list, None).unwrap_err().contains("FILE#INDEX"));
        assert!(parse(&list, Some(2)).is_err());
        assert!(parse("[]", None).is_err());
        let newer = json.replace("\"version\":1", "\"version\":99");
        assert!(parse(&newer, None).unwrap_err().contains("newer"));
        assert!(parse(r#"{"name":"x"}"#, None).is_err());
    }

    #[test]
    fn feature_structs_are_sorted_for_binary_search() {
        assert!(FEATURE_STRUCTS
            .windows(2)
            .all(|w| w[0].s_type < w[1].s_type));
        for s in FEATURE_STRUCTS {
            assert!(features::by_s_type(s.s_type).is_some_and(|f| std::ptr::eq(f, s)));
        }
    }

    #[test]
    fn profiles_leave_out_provisional_feature_structs() {
        let name = "VkPhysicalDevicePortabilitySubsetFeaturesKHR";
        let s = features::by_name(name).unwrap();
        assert!(s.provisional);
        assert!(feature_struct(name).is_none());
        assert!(feature_struct_by_s_type(s.s_type).is_none());
        assert!(profile_feature_structs().all(|f| !f.provisional));
        assert!(feature_struct("VkPhysicalDeviceVulkan12Features").is_some());
    }

    #[test]
    fn hash_is_stable_and_content_dependent() {
        let a = sample();
        let mut b = sample();
        assert_eq!(a.hash(), b.hash());
        b.extensions.clear();
        assert_ne!(a.hash(), b.hash());
        assert_eq!(a.hash().len(), 16);
    }
}
