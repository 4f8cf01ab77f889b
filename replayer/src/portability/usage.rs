//! Which of the extensions and features a trace's devices enable the trace actually uses, and the
//! first call that uses each, found by one pass over the trace before anything is replayed.
//!
//! A use is a device-level command an extension adds, a struct it adds in any pNext chain, a value
//! it adds to an enum or a flag bit it adds in an input parameter (all from vk.xml, see
//! `generated::registry`), or a SPIR-V capability or extension of a shader module that the
//! extension or feature enables. An extension that a used one requires is used too. The device
//! create info itself, physical-device queries and output parameters are not uses.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use format::record::Record;
use format::TraceReader;
use layer_support::generated::features;
use vkstream::Call;

use super::generated::registry::{self, Enable};
use super::generated::walk;
use super::spirv;

/// The first call that uses an extension or feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    pub seq: u64,
    pub call: String,
    /// What in the call: `command`, a struct, enum value or flag bit name, `SPIR-V capability X`,
    /// `SPIR-V extension X`, `required by VK_X`, `feature of used VK_X`.
    pub what: String,
}

impl std::fmt::Display for Use {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.what == "command" {
            write!(f, "{} (call {})", self.call, self.seq)
        } else {
            write!(f, "{} (call {}: {})", self.call, self.seq, self.what)
        }
    }
}

/// A feature as vk.xml names it: (`VkPhysicalDeviceFeatures` for core 1.0 features, member).
pub type Feature = (String, String);

/// Whether an enabled feature is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeatureUse<'a> {
    Used(&'a Use),
    /// Only extensions none of which the trace uses add its struct, and no shader needs it.
    Unused,
    /// A core feature that no shader declares a need for: whether commands use it is not known.
    Unknown,
}

/// One device the trace creates: what it enables and what of that it uses.
#[derive(Debug, Clone, Default)]
pub struct DeviceUsage {
    /// The captured VkDevice.
    pub device: u64,
    /// `seq` of its vkCreateDevice.
    pub created_at: u64,
    pub extensions: Vec<String>,
    pub features: Vec<Feature>,
    pub used_extensions: BTreeMap<String, Use>,
    /// Features a shader needs (by SPIR-V capability) or whose extension is used.
    pub used_features: BTreeMap<Feature, Use>,
    /// Captured queue families it creates queues of.
    pub queue_families: Vec<u32>,
    /// Captured memory types it allocates from.
    pub memory_types: BTreeSet<u32>,
    /// Images it creates, by what a GPU must support of them: (format, image type, tiling,
    /// usage, flags) -> seq of the first vkCreateImage.
    pub images: BTreeMap<(i32, i32, i32, u32, u32), u64>,
}

impl DeviceUsage {
    /// Enabled extensions the trace never uses, in enabled order. Extensions the registry does
    /// not know are never in it: what they add is not known (see [`Self::unknown_extensions`]).
    pub fn unused_extensions(&self) -> Vec<&str> {
        self.extensions
            .iter()
            .filter(|e| !self.used_extensions.contains_key(*e) && extension(e).is_some())
            .map(String::as_str)
            .collect()
    }

    /// Enabled extensions this build's registry (vk.xml) does not know.
    pub fn unknown_extensions(&self) -> Vec<&str> {
        self.extensions
            .iter()
            .filter(|e| extension(e).is_none())
            .map(String::as_str)
            .collect()
    }

    pub fn extension_use(&self, ext: &str) -> Option<&Use> {
        self.used_extensions.get(ext)
    }

    pub fn feature_use(&self, structure: &str, member: &str) -> FeatureUse<'_> {
        if let Some(u) = self
            .used_features
            .get(&(structure.to_string(), member.to_string()))
        {
            return FeatureUse::Used(u);
        }
        let providers = features::by_name(structure).map_or(&[][..], |s| s.origins);
        let by_extensions_only =
            !providers.is_empty() && providers.iter().all(|p| !p.starts_with("VK_VERSION_"));
        if by_extensions_only {
            FeatureUse::Unused
        } else {
            FeatureUse::Unknown
        }
    }
}

/// What a trace's devices use, in creation order.
#[derive(Debug, Clone, Default)]
pub struct TraceUsage {
    pub devices: Vec<DeviceUsage>,
    /// The capture device (from the header or the first `Device` record).
    pub capture_device: Option<format::record::DeviceSummary>,
}

impl TraceUsage {
    pub fn device(&self, captured: u64) -> Option<&DeviceUsage> {
        self.devices.iter().rev().find(|d| d.device == captured)
    }
}

/// The extensions and core versions (1.1 and later) that add a struct, by its sType.
pub fn stype_providers(s_type: i32) -> &'static [&'static str] {
    lookup_value("VkStructureType", s_type as i64).map_or(&[], |v| v.1)
}

fn lookup_command(name: &str) -> &'static [&'static str] {
    registry::COMMANDS
        .binary_search_by(|(c, _)| (*c).cmp(name))
        .map_or(&[], |i| registry::COMMANDS[i].1)
}

fn lookup_value(ty: &str, v: i64) -> Option<(&'static str, &'static [&'static str])> {
    registry::ENUM_VALUES
        .binary_search_by(|(t, x, _, _)| (*t, *x).cmp(&(ty, v)))
        .ok()
        .map(|i| (registry::ENUM_VALUES[i].2, registry::ENUM_VALUES[i].3))
}

fn lookup_bit(ty: &str, bit: u64) -> Option<(&'static str, &'static [&'static str])> {
    registry::FLAG_BITS
        .binary_search_by(|(t, x, _, _)| (*t, *x).cmp(&(ty, bit)))
        .ok()
        .map(|i| (registry::FLAG_BITS[i].2, registry::FLAG_BITS[i].3))
}

/// What the registry says of an extension.
pub fn extension(name: &str) -> Option<&'static registry::Extension> {
    registry::EXTENSIONS
        .binary_search_by(|e| e.name.cmp(name))
        .ok()
        .map(|i| &registry::EXTENSIONS[i])
}

/// One device's bookkeeping during the pass.
struct Tracker {
    usage: DeviceUsage,
    enabled: BTreeSet<String>,
    /// Enabled features by member name (SPIR-V enables name one struct; the member may be enabled
    /// through another, e.g. an extension's struct instead of `VkPhysicalDeviceVulkan12Features`).
    features_by_member: HashMap<String, Vec<Feature>>,
}

impl Tracker {
    fn new(device: u64, created_at: u64, extensions: Vec<String>, features: Vec<Feature>) -> Self {
        let mut features_by_member: HashMap<String, Vec<Feature>> = HashMap::new();
        for f in &features {
            features_by_member
                .entry(f.1.clone())
                .or_default()
                .push(f.clone());
        }
        Tracker {
            enabled: extensions.iter().cloned().collect(),
            usage: DeviceUsage {
                device,
                created_at,
                extensions,
                features,
                ..Default::default()
            },
            features_by_member,
        }
    }

    fn use_providers(&mut self, providers: &[&str], at: &Use) {
        for p in providers {
            if self.enabled.contains(*p) && !self.usage.used_extensions.contains_key(*p) {
                self.usage.used_extensions.insert(p.to_string(), at.clone());
            }
        }
    }

    fn use_feature_member(&mut self, member: &str, at: &Use) {
        for f in self.features_by_member.get(member).into_iter().flatten() {
            self.usage
                .used_features
                .entry(f.clone())
                .or_insert_with(|| at.clone());
        }
    }

    fn use_enables(&mut self, enables: &[Enable], at: &Use) {
        for e in enables {
            match e {
                Enable::Extension(x) => self.use_providers(&[x], at),
                Enable::Feature { feature, .. } => self.use_feature_member(feature, at),
                Enable::Version(_) | Enable::Property { .. } => {}
            }
        }
    }

    fn spirv(&mut self, code: &[u32], seq: u64, call: &str) {
        let d = spirv::declared(code);
        for c in d.capabilities {
            let Ok(i) = registry::SPIRV_CAPABILITIES.binary_search_by_key(&c, |x| x.0) else {
                continue;
            };
            let (_, name, enables) = &registry::SPIRV_CAPABILITIES[i];
            let at = Use {
                seq,
                call: call.to_string(),
                what: format!("SPIR-V capability {name}"),
            };
            self.use_enables(enables, &at);
        }
        for x in d.extensions {
            let Ok(i) = registry::SPIRV_EXTENSIONS.binary_search_by(|e| e.0.cmp(x.as_str())) else {
                continue;
            };
            let at = Use {
                seq,
                call: call.to_string(),
                what: format!("SPIR-V extension {x}"),
            };
            self.use_enables(registry::SPIRV_EXTENSIONS[i].1, &at);
        }
    }

    /// Uses that follow from others: extensions that used ones require; features of structs that
    /// used extensions add; extensions whose structs hold used features.
    fn finish(mut self) -> DeviceUsage {
        for (f, at) in self.usage.used_features.clone() {
            if let Some(s) = features::by_name(&f.0) {
                let what = format!("{} needs feature {}.{}", at.what, f.0, f.1);
                let at = Use { what, ..at.clone() };
                self.use_providers(s.origins, &at);
            }
        }
        loop {
            let mut added = Vec::new();
            for (e, at) in &self.usage.used_extensions {
                for r in extension(e).map_or(&[][..], |x| x.requires) {
                    if self.enabled.contains(*r) && !self.usage.used_extensions.contains_key(*r) {
                        added.push((
                            r.to_string(),
                            Use {
                                what: format!("required by {e}"),
                                ..at.clone()
                            },
                        ));
                    }
                }
            }
            if added.is_empty() {
                break;
            }
            for (r, at) in added {
                self.usage.used_extensions.entry(r).or_insert(at);
            }
        }
        for f in self.usage.features.clone() {
            if self.usage.used_features.contains_key(&f) {
                continue;
            }
            let Some(s) = features::by_name(&f.0) else {
                continue;
            };
            if let Some((e, at)) = s
                .origins
                .iter()
                .find_map(|p| self.usage.used_extensions.get_key_value(*p))
            {
                let at = Use {
                    what: format!("feature of used {e}"),
                    ..at.clone()
                };
                self.usage.used_features.insert(f, at);
            }
        }
        self.usage
    }
}

/// Collects what one call carries for one device.
struct Visitor<'a> {
    t: &'a mut Tracker,
    seq: u64,
    call: &'static str,
}

impl Visitor<'_> {
    fn at(&self, what: &str) -> Use {
        Use {
            seq: self.seq,
            call: self.call.to_string(),
            what: what.to_string(),
        }
    }
}

impl walk::Visit for Visitor<'_> {
    fn s_type(&mut self, s_type: i32) {
        if let Some((name, providers)) = lookup_value("VkStructureType", s_type as i64) {
            let at = self.at(name);
            self.t.use_providers(providers, &at);
        }
    }
    fn value(&mut self, ty: &'static str, v: i64) {
        if let Some((name, providers)) = lookup_value(ty, v) {
            let at = self.at(name);
            self.t.use_providers(providers, &at);
        }
    }
    fn bits(&mut self, ty: &'static str, v: u64) {
        let mut rest = v;
        while rest != 0 {
            let bit = rest & rest.wrapping_neg();
            rest &= !bit;
            if let Some((name, providers)) = lookup_bit(ty, bit) {
                let at = self.at(name);
                self.t.use_providers(providers, &at);
            }
        }
    }
    fn spirv(&mut self, code: &[u32]) {
        self.t.spirv(code, self.seq, self.call);
    }
}

/// What a decoded vkCreateDevice enables: extensions and features (vk.xml names).
pub fn enabled(p: &vkstream::params::vkCreateDevice) -> (Vec<String>, Vec<Feature>) {
    let Some(ci) = p.p_create_info.as_deref() else {
        return Default::default();
    };
    let exts = ci.pp_enabled_extension_names.clone().unwrap_or_default();
    let mut features = Vec::new();
    let core = |v: &vkstream::types::VkPhysicalDeviceFeatures, out: &mut Vec<Feature>| {
        for m in walk::core_features(v) {
            out.push(("VkPhysicalDeviceFeatures".into(), m.into()));
        }
    };
    if let Some(f) = ci.p_enabled_features.as_deref() {
        core(f, &mut features);
    }
    for e in &ci.p_next {
        if let vkstream::PNext::VkPhysicalDeviceFeatures2(f2) = e {
            core(&f2.features, &mut features);
        } else if let Some((s, members)) = walk::enabled_features(e) {
            for m in members {
                features.push((s.to_string(), m.to_string()));
            }
        }
    }
    features.dedup();
    (exts, features)
}

const DEVICE: &str = "vkCreateDevice";

/// One pass over `reader`'s calls (see the module documentation).
pub fn scan(reader: &TraceReader) -> Result<TraceUsage, String> {
    // Trace command index -> (name, vkstream id, walked).
    let mut table: Vec<Option<(&'static str, u32, bool)>> = Vec::new();
    let mut trackers: Vec<Tracker> = Vec::new();
    // Captured queue / command buffer / device -> index into `trackers`.
    let mut owner: HashMap<u64, usize> = HashMap::new();
    let mut capture_device = reader.header().device.clone();
    for rec in reader.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let c = match rec {
            Record::Device(d) => {
                capture_device.get_or_insert(d);
                continue;
            }
            Record::CommandTable(names) => {
                table = names
                    .iter()
                    .map(|n| {
                        vkstream::command_id(n).map(|id| {
                            let name = vkstream::COMMANDS[id as usize];
                            (name, id, walk::walks(name) || creates_dispatchable(name))
                        })
                    })
                    .collect();
                continue;
            }
            Record::Call(c) => c,
            _ => continue,
        };
        let Some(Some((name, id, walked))) = table.get(c.cmd as usize).copied() else {
            continue;
        };
        if name == DEVICE {
            if c.result < 0 {
                continue;
            }
            // Undecodable calls are reported by the replay itself.
            if let Ok(Call::vkCreateDevice(p)) = vkstream::decode_call(id, &c.params) {
                let (exts, features) = enabled(&p);
                if let Some(d) = p.p_device {
                    owner.insert(d, trackers.len());
                    let mut t = Tracker::new(d, c.seq, exts, features);
                    t.usage.queue_families = p
                        .p_create_info
                        .as_deref()
                        .and_then(|ci| ci.p_queue_create_infos.as_deref())
                        .unwrap_or(&[])
                        .iter()
                        .map(|q| q.queue_family_index)
                        .collect();
                    trackers.push(t);
                }
            }
            continue;
        }
        if !vkstream::IS_DEVICE_LEVEL
            .get(id as usize)
            .copied()
            .unwrap_or(false)
        {
            continue;
        }
        // The first parameter of a device-level command is its dispatchable handle.
        let Some(first) = c
            .params
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        else {
            continue;
        };
        let Some(&ti) = owner.get(&first).or_else(|| {
            // A handle the pass did not see created (a trimmed trace's snapshot names it first):
            // with one device there is no doubt.
            (trackers.len() == 1).then_some(&0)
        }) else {
            continue;
        };
        let t = &mut trackers[ti];
        let providers = lookup_command(name);
        if !providers.is_empty() {
            let at = Use {
                seq: c.seq,
                call: name.to_string(),
                what: "command".into(),
            };
            t.use_providers(providers, &at);
        }
        if !walked {
            continue;
        }
        let Ok(call) = vkstream::decode_call(id, &c.params) else {
            continue;
        };
        for h in created_dispatchable(&call) {
            owner.insert(h, ti);
        }
        match &call {
            Call::vkAllocateMemory(p) => {
                if let Some(ai) = &p.p_allocate_info {
                    t.usage.memory_types.insert(ai.memory_type_index);
                }
            }
            Call::vkCreateImage(p) if c.result >= 0 => {
                if let Some(ci) = &p.p_create_info {
                    let key = (ci.format, ci.image_type, ci.tiling, ci.usage, ci.flags);
                    t.usage.images.entry(key).or_insert(c.seq);
                }
            }
            _ => {}
        }
        walk::walk_call(
            &call,
            &mut Visitor {
                t,
                seq: c.seq,
                call: name,
            },
        );
    }
    Ok(TraceUsage {
        devices: trackers.into_iter().map(Tracker::finish).collect(),
        capture_device,
    })
}

/// Commands decoded for bookkeeping even when the walker finds nothing in them.
fn creates_dispatchable(name: &str) -> bool {
    matches!(
        name,
        "vkGetDeviceQueue"
            | "vkGetDeviceQueue2"
            | "vkAllocateCommandBuffers"
            | "vkAllocateMemory"
            | "vkCreateImage"
    )
}

fn created_dispatchable(call: &Call) -> Vec<u64> {
    match call {
        Call::vkGetDeviceQueue(p) => p.p_queue.into_iter().collect(),
        Call::vkGetDeviceQueue2(p) => p.p_queue.into_iter().collect(),
        Call::vkAllocateCommandBuffers(p) => p.p_command_buffers.clone().unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portability::spirv::tests::module;

    fn tracker(exts: &[&str], features: &[(&str, &str)]) -> Tracker {
        Tracker::new(
            1,
            0,
            exts.iter().map(|s| s.to_string()).collect(),
            features
                .iter()
                .map(|(s, m)| (s.to_string(), m.to_string()))
                .collect(),
        )
    }

    #[test]
    fn stencil_export_capability_uses_its_extension() {
        let mut t = tracker(
            &[
                "VK_EXT_shader_stencil_export",
                "VK_EXT_rasterization_order_attachment_access",
            ],
            &[],
        );
        // StencilExportEXT = 5013.
        t.spirv(&module(&[1, 5013], &[]), 7, "vkCreateShaderModule");
        let u = t.finish();
        let at = u.extension_use("VK_EXT_shader_stencil_export").unwrap();
        assert_eq!(at.seq, 7);
        assert_eq!(at.what, "SPIR-V capability StencilExportEXT");
        assert_eq!(
            u.unused_extensions(),
            vec!["VK_EXT_rasterization_order_attachment_access"]
        );
    }

    #[test]
    fn spirv_extension_names_its_vulkan_extension() {
        let mut t = tracker(&["VK_EXT_shader_stencil_export"], &[]);
        t.spirv(
            &module(&[1], &["SPV_EXT_shader_stencil_export"]),
            3,
            "vkCreateShaderModule",
        );
        let u = t.finish();
        assert_eq!(
            u.extension_use("VK_EXT_shader_stencil_export")
                .unwrap()
                .what,
            "SPIR-V extension SPV_EXT_shader_stencil_export"
        );
    }

    #[test]
    fn capabilities_use_features_through_any_struct_and_their_extensions() {
        // Int8 (39) is enabled by shaderInt8, named in VkPhysicalDeviceVulkan12Features by vk.xml;
        // here the device enabled it through the extension's own struct.
        let mut t = tracker(
            &[
                "VK_KHR_shader_float16_int8",
                "VK_KHR_get_physical_device_properties2",
            ],
            &[
                ("VkPhysicalDeviceShaderFloat16Int8Features", "shaderInt8"),
                ("VkPhysicalDeviceShaderFloat16Int8Features", "shaderFloat16"),
                ("VkPhysicalDeviceFeatures", "geometryShader"),
            ],
        );
        t.spirv(&module(&[39], &[]), 9, "vkCreateShaderModule");
        let u = t.finish();
        let f = |s: &str, m: &str| u.feature_use(s, m);
        assert!(matches!(
            f("VkPhysicalDeviceShaderFloat16Int8Features", "shaderInt8"),
            FeatureUse::Used(Use { seq: 9, .. })
        ));
        // The extension is used (it adds the struct), so its other feature counts as used.
        assert!(u.extension_use("VK_KHR_shader_float16_int8").is_some());
        assert!(matches!(
            f("VkPhysicalDeviceShaderFloat16Int8Features", "shaderFloat16"),
            FeatureUse::Used(_)
        ));
        // ... and what it requires.
        assert_eq!(
            u.extension_use("VK_KHR_get_physical_device_properties2")
                .unwrap()
                .what,
            "required by VK_KHR_shader_float16_int8"
        );
        assert_eq!(
            f("VkPhysicalDeviceFeatures", "geometryShader"),
            FeatureUse::Unknown
        );
    }

    #[test]
    fn features_of_unused_extensions_are_unused() {
        let t = tracker(
            &["VK_EXT_rasterization_order_attachment_access"],
            &[(
                "VkPhysicalDeviceRasterizationOrderAttachmentAccessFeaturesEXT",
                "rasterizationOrderColorAttachmentAccess",
            )],
        );
        let u = t.finish();
        assert_eq!(
            u.feature_use(
                "VkPhysicalDeviceRasterizationOrderAttachmentAccessFeaturesEXT",
                "rasterizationOrderColorAttachmentAccess"
            ),
            FeatureUse::Unused
        );
    }

    #[test]
    fn visitor_reports_values_bits_and_structs() {
        use walk::Visit as _;
        let mut t = tracker(
            &[
                "VK_EXT_4444_formats",
                "VK_EXT_rasterization_order_attachment_access",
                "VK_EXT_transform_feedback",
            ],
            &[],
        );
        let mut v = Visitor {
            t: &mut t,
            seq: 5,
            call: "vkCreateImage",
        };
        // VK_FORMAT_A4R4G4B4_UNORM_PACK16_EXT
        v.value("VkFormat", 1000340000);
        // A core format and a core bit: nothing.
        v.value("VkFormat", 37);
        v.bits("VkPipelineColorBlendStateCreateFlagBits", 0x1);
        v.s_type(1000028000); // VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TRANSFORM_FEEDBACK_FEATURES_EXT
        let u = t.finish();
        assert_eq!(
            u.extension_use("VK_EXT_4444_formats").unwrap().what,
            // The value's first name in vk.xml (core 1.3's).
            "VK_FORMAT_A4R4G4B4_UNORM_PACK16"
        );
        assert!(u
            .extension_use("VK_EXT_rasterization_order_attachment_access")
            .is_some());
        assert!(u.extension_use("VK_EXT_transform_feedback").is_some());
    }

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(registry::COMMANDS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(registry::EXTENSIONS
            .windows(2)
            .all(|w| w[0].name < w[1].name));
        assert!(registry::ENUM_VALUES
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
        assert!(registry::FLAG_BITS
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
        assert!(registry::SPIRV_CAPABILITIES
            .windows(2)
            .all(|w| w[0].0 < w[1].0));
        assert!(registry::SPIRV_EXTENSIONS
            .windows(2)
            .all(|w| w[0].0 < w[1].0));
        assert_eq!(
            lookup_command("vkCmdBeginTransformFeedbackEXT"),
            &["VK_EXT_transform_feedback"]
        );
    }
}
