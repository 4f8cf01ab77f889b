//! The one feature-struct table (`layer_support/src/generated/features.rs`), read by the device
//! profiles of `layer_support` (and so the capture layer's `--target`) and by the replayer's
//! portability checks: every struct that extends `VkPhysicalDeviceFeatures2` and holds only
//! `VkBool32` members, with its sType, what adds it (core versions 1.1 and later and extensions) and
//! its member names in order; and the members of `VkPhysicalDeviceFeatures`. Users find a feature
//! by member index (the members are consecutive 32-bit words after sType and pNext, checked at
//! compile time against ash's structs).
//!
//! The registry facts it needs (sType values, which features and extensions require a type) come
//! from `emit_extensions::read`, the one reader of those.

use crate::emit_extensions::strs;
use crate::emit_stream::HEADER;
use crate::model::{Decl, Registry};
use anyhow::{anyhow, Result};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

/// One features struct as the table lists it.
pub struct FeatureStruct {
    pub name: String,
    /// `VK_STRUCTURE_TYPE_...` and its value.
    pub s_type: String,
    pub s_type_value: i64,
    pub members: Vec<String>,
    /// Core versions (1.1 and later) and extensions that require it.
    pub origins: BTreeSet<String>,
    /// Only extensions codegen leaves out (provisional, or of another platform) require it.
    pub provisional: bool,
}

/// The features structs, sorted by sType, and `VkPhysicalDeviceFeatures`'s members.
#[derive(Default)]
pub struct Features {
    pub structs: Vec<FeatureStruct>,
    pub core: Vec<String>,
}

fn is_bool(d: &Decl) -> bool {
    d.ty == "VkBool32" && d.ptrs.is_empty() && d.dims.is_empty()
}

/// Picks the features structs: `s_type_value` maps `VK_STRUCTURE_TYPE_...` names to values,
/// `origins` canonical type names to what requires them.
pub fn select(
    reg: &Registry,
    s_type_value: impl Fn(&str) -> Option<i64>,
    origins: &HashMap<String, BTreeSet<String>>,
) -> Result<Features> {
    let mut structs = Vec::new();
    for name in &reg.struct_order {
        let s = &reg.structs[name];
        if !s.extends.iter().any(|e| e == "VkPhysicalDeviceFeatures2") {
            continue;
        }
        let members: Vec<&Decl> = s
            .members
            .iter()
            .filter(|m| m.name != "sType" && m.name != "pNext")
            .collect();
        if members.is_empty() || !members.iter().all(|m| is_bool(m)) {
            continue;
        }
        let Some(st) = &s.stype else { continue };
        let Some(v) = s_type_value(st) else { continue };
        structs.push(FeatureStruct {
            name: name.clone(),
            s_type: st.clone(),
            s_type_value: v,
            members: members.iter().map(|m| m.name.clone()).collect(),
            origins: origins.get(name).cloned().unwrap_or_default(),
            provisional: !reg.required_types.iter().any(|t| reg.resolve(t) == name),
        });
    }
    structs.sort_by_key(|s| s.s_type_value);
    let core = reg
        .structs
        .get("VkPhysicalDeviceFeatures")
        .ok_or_else(|| anyhow!("no VkPhysicalDeviceFeatures in vk.xml"))?
        .members
        .iter()
        .map(|m| m.name.clone())
        .collect();
    Ok(Features { structs, core })
}

pub fn features_rs(f: &Features) -> String {
    let mut s = String::from(HEADER);
    s.push_str(
        "//! Feature structs of the registry (see `codegen::emit_features`).\n\
         use ash::vk;\n\n\
         /// A struct that extends `VkPhysicalDeviceFeatures2` with only `VkBool32` members.\n\
         pub struct FeatureStruct {\n\
         pub name: &'static str,\n\
         pub s_type: vk::StructureType,\n\
         /// Core versions (`VK_VERSION_1_2`) and extensions that provide it, sorted.\n\
         pub origins: &'static [&'static str],\n\
         /// Only provisional (or other-platform) extensions provide it: quarry's streams do not\n\
         /// carry it and device profiles leave it out.\n\
         pub provisional: bool,\n\
         /// Member names in order: member `i` is the 32-bit word at byte `16 + 4 * i`.\n\
         pub members: &'static [&'static str],\n\
         }\n\n",
    );
    let _ = writeln!(
        s,
        "/// `VkPhysicalDeviceFeatures` members in order (all `VkBool32`).\n\
         pub static CORE_FEATURES: &[&str] = {};\n\
         const _: () = assert!(std::mem::size_of::<vk::PhysicalDeviceFeatures>() == 4 * {});\n",
        strs(&f.core),
        f.core.len()
    );
    s.push_str("/// Sorted by sType (see [`by_s_type`]).\npub static FEATURE_STRUCTS: &[FeatureStruct] = &[\n");
    let mut asserts = String::new();
    for fs in &f.structs {
        let rust = fs.name.trim_start_matches("Vk");
        let sty = fs.s_type.trim_start_matches("VK_STRUCTURE_TYPE_");
        let _ = writeln!(
            s,
            "FeatureStruct {{ name: {:?}, s_type: vk::StructureType::{sty}, origins: {}, provisional: {}, members: {} }},",
            fs.name,
            strs(&fs.origins),
            fs.provisional,
            strs(&fs.members)
        );
        let _ = writeln!(
            asserts,
            "const _: () = assert!(std::mem::size_of::<vk::{rust}<'static>>() == {});",
            (16 + 4 * fs.members.len()).div_ceil(8) * 8
        );
    }
    s.push_str("];\n\n");
    s.push_str(&asserts);
    s.push_str(
        "\n/// The features struct of an sType.\n\
         pub fn by_s_type(s_type: vk::StructureType) -> Option<&'static FeatureStruct> {\n\
         FEATURE_STRUCTS.binary_search_by_key(&s_type, |s| s.s_type).ok().map(|i| &FEATURE_STRUCTS[i])\n}\n\n\
         /// The features struct of a vk.xml name (`VkPhysicalDeviceVulkan12Features`).\n\
         pub fn by_name(name: &str) -> Option<&'static FeatureStruct> {\n\
         FEATURE_STRUCTS.iter().find(|s| s.name == name)\n}\n",
    );
    s
}
