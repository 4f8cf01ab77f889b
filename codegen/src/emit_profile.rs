//! The feature-struct table of device profiles (`layer_support/src/generated/features.rs`): every
//! struct that extends `VkPhysicalDeviceFeatures2` and holds only `VkBool32` members, with its sType,
//! what provides it (core versions and extensions), and its member names in order. Profiles store
//! features by these names; the capture layer ANDs app chains against a profile by member index
//! (the members are consecutive 32-bit words after sType and pNext, checked at compile time).

use crate::emit_stream::HEADER;
use crate::model::Registry;
use anyhow::{anyhow, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use vk_parse::{ExtensionChild, FeatureChild, InterfaceItem, RegistryChild};

/// Which core versions and extensions require each type (aliases resolved), in registry order.
fn type_origins(vk_xml: &Path, reg: &Registry) -> Result<BTreeMap<String, Vec<String>>> {
    let (raw, _) =
        vk_parse::parse_file(vk_xml).map_err(|e| anyhow!("parsing {}: {e:?}", vk_xml.display()))?;
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |items: &[InterfaceItem], origin: &str| {
        for it in items {
            if let InterfaceItem::Type { name, .. } = it {
                let v = out.entry(reg.resolve(name).to_string()).or_default();
                if !v.iter().any(|o| o == origin) {
                    v.push(origin.to_string());
                }
            }
        }
    };
    for child in &raw.0 {
        match child {
            RegistryChild::Feature(f) if f.api.split(',').any(|a| a == "vulkan") => {
                for fc in &f.children {
                    if let FeatureChild::Require { items, .. } = fc {
                        add(items, &f.name);
                    }
                }
            }
            RegistryChild::Extensions(exts) => {
                for ext in &exts.children {
                    let supported = ext.supported.as_deref().unwrap_or("");
                    if !supported.split(',').any(|s| s == "vulkan") {
                        continue;
                    }
                    for ec in &ext.children {
                        if let ExtensionChild::Require { items, .. } = ec {
                            add(items, &ext.name);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn is_bool(d: &crate::model::Decl) -> bool {
    d.ty == "VkBool32" && d.ptrs.is_empty() && d.dims.is_empty()
}

pub fn features_rs(reg: &Registry, vk_xml: &Path) -> Result<String> {
    let origins = type_origins(vk_xml, reg)?;
    let mut s = String::from(HEADER);
    s.push_str(
        "//! Feature structs of the registry (see `codegen::emit_profile`).\n\
         use ash::vk;\n\n\
         /// A struct that extends `VkPhysicalDeviceFeatures2` with only `VkBool32` members.\n\
         pub struct FeatureStruct {\n\
         pub name: &'static str,\n\
         pub s_type: vk::StructureType,\n\
         /// Core versions (`VK_VERSION_1_2`) and extensions that provide it.\n\
         pub origins: &'static [&'static str],\n\
         /// Member names in order: member `i` is the 32-bit word at byte `16 + 4 * i`.\n\
         pub members: &'static [&'static str],\n\
         }\n\n",
    );
    let core = reg
        .structs
        .get("VkPhysicalDeviceFeatures")
        .ok_or_else(|| anyhow!("no VkPhysicalDeviceFeatures in vk.xml"))?;
    let names: Vec<String> = core
        .members
        .iter()
        .map(|m| format!("{:?}", m.name))
        .collect();
    writeln!(
        s,
        "/// `VkPhysicalDeviceFeatures` members in order (all `VkBool32`).\n\
         pub const CORE_FEATURES: &[&str] = &[{}];\n\
         const _: () = assert!(std::mem::size_of::<vk::PhysicalDeviceFeatures>() == 4 * {});\n",
        names.join(", "),
        names.len()
    )?;
    s.push_str("pub const FEATURE_STRUCTS: &[FeatureStruct] = &[\n");
    let mut asserts = String::new();
    for name in &reg.struct_order {
        let st = &reg.structs[name];
        if !st.extends.iter().any(|e| e == "VkPhysicalDeviceFeatures2")
            || !reg.required_types.iter().any(|t| reg.resolve(t) == name)
        {
            continue;
        }
        let Some(stype) = &st.stype else { continue };
        let members: Vec<_> = st
            .members
            .iter()
            .filter(|m| m.name != "sType" && m.name != "pNext")
            .collect();
        if members.is_empty() || !members.iter().all(|m| is_bool(m)) {
            continue;
        }
        let Some(origin) = origins.get(name) else {
            continue;
        };
        let rust = name.trim_start_matches("Vk");
        let sty = stype.trim_start_matches("VK_STRUCTURE_TYPE_");
        writeln!(
            s,
            "FeatureStruct {{ name: {name:?}, s_type: vk::StructureType::{sty}, origins: &[{}], members: &[{}] }},",
            origin
                .iter()
                .map(|o| format!("{o:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            members
                .iter()
                .map(|m| format!("{:?}", m.name))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        writeln!(
            asserts,
            "const _: () = assert!(std::mem::size_of::<vk::{rust}<'static>>() == {});",
            (16 + 4 * members.len()).div_ceil(8) * 8
        )?;
    }
    s.push_str("];\n\n");
    s.push_str(&asserts);
    Ok(s)
}
