//! Emits what the replayer needs to tell which enabled extensions and features a trace uses
//! (`replayer/src/portability/generated/`): per extension the commands, structs, enum values and
//! flag bits it adds; SPIR-V extensions and capabilities with what enables them; and a walker that
//! reports every sType, extension enum value, extension flag bit and shader module a decoded call
//! carries. Its reading of vk.xml ([`read`]) also gives `emit_features` the features structs, whose
//! one table is `layer_support`'s.
//!
//! SPIR-V capability numbers are not in vk.xml: they are read back from `spirv-as` (SPIRV-Tools,
//! installed by `scripts/deps.sh`), which assembles `OpCapability <name>` for each name vk.xml lists.

use crate::analyze::{Analysis, Elem, Field, Kind, Len, PElem};
use crate::emit_features::{self, Features};
use crate::emit_stream::HEADER;
use crate::model::{Registry, TypeCat};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use vk_parse::{
    Enable, EnumSpec, EnumsChild, ExtensionChild, FeatureChild, InterfaceItem, RegistryChild,
    TypesChild,
};

const DIR: &str = "replayer/src/portability/generated";

/// The generated files: `mod.rs`, `registry.rs` (tables) and `walk.rs` (the call walker).
pub fn files(reg: &Registry, an: &Analysis, facts: &Facts) -> Vec<(PathBuf, String)> {
    let module = format!(
        "{HEADER}//! Generated from vk.xml by `codegen` (`emit_extensions.rs`): what each extension adds and\n//! what SPIR-V needs (`registry`), and the walker over decoded calls (`walk`).\npub mod registry;\npub mod walk;\n"
    );
    vec![
        (format!("{DIR}/mod.rs").into(), module),
        (format!("{DIR}/registry.rs").into(), registry_rs(facts)),
        (format!("{DIR}/walk.rs").into(), walk_rs(reg, an, facts)),
    ]
}

#[derive(Default)]
struct Ext {
    number: i64,
    device: bool,
    requires: Vec<String>,
    promoted_to: Option<String>,
    commands: BTreeSet<String>,
    structs: BTreeSet<String>,
    /// (enum type, value, name)
    enums: BTreeSet<(String, i64, String)>,
    /// (flag bits type, bit, name)
    bits: BTreeSet<(String, u64, String)>,
}

/// What vk.xml says of extensions, enum values, SPIR-V and features structs.
#[derive(Default)]
pub struct Facts {
    exts: BTreeMap<String, Ext>,
    /// Command -> extensions and core versions (1.1 and later) that add it.
    commands: BTreeMap<String, BTreeSet<String>>,
    /// (enum type, value) -> (name, providers).
    enums: BTreeMap<(String, i64), (String, BTreeSet<String>)>,
    bits: BTreeMap<(String, u64), (String, BTreeSet<String>)>,
    /// For `emit_features`.
    pub features: Features,
    spirv_exts: Vec<(String, Vec<Enable>)>,
    /// (number, name, enables)
    spirv_caps: Vec<(u32, String, Vec<Enable>)>,
    /// Bitmask type (`VkAccessFlags`) -> its bits type (`VkAccessFlagBits`).
    bits_of: HashMap<String, String>,
    /// Enum and bits types that extensions add values to.
    extended_enums: BTreeSet<String>,
    /// Every value vk.xml defines for each (non-bitmask) enum type, core and extensions alike:
    /// the replay's checks refuse others (`emit_checks::checks_rs`).
    pub enum_values: BTreeMap<String, BTreeSet<i64>>,
    extended_bits: BTreeSet<String>,
}

fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        return i64::from_str_radix(h, 16).ok();
    }
    s.parse().ok()
}

/// An enum item's (extends, value) when it adds a value to an enum type; aliases return the
/// alias target's name so a second pass can resolve them.
enum Item {
    Value(String, i64),
    Bit(String, u64),
    Alias(String, String),
}

fn item(spec: &EnumSpec, own_number: Option<i64>) -> Option<Item> {
    match spec {
        EnumSpec::Offset {
            offset,
            extends,
            extnumber,
            dir,
        } => {
            let n = extnumber.or(own_number)?;
            let v = 1_000_000_000 + (n - 1) * 1000 + offset;
            Some(Item::Value(extends.clone(), if *dir { v } else { -v }))
        }
        EnumSpec::Bitpos {
            bitpos,
            extends: Some(e),
        } => Some(Item::Bit(e.clone(), 1u64 << bitpos)),
        EnumSpec::Value {
            value,
            extends: Some(e),
        } => parse_int(value).map(|v| Item::Value(e.clone(), v)),
        EnumSpec::Alias {
            alias,
            extends: Some(e),
        } => Some(Item::Alias(e.clone(), alias.clone())),
        _ => None,
    }
}

pub fn read(vk_xml: &Path, reg: &Registry) -> Result<Facts> {
    let (raw, _) =
        vk_parse::parse_file(vk_xml).map_err(|e| anyhow!("parsing {}: {e:?}", vk_xml.display()))?;
    let mut f = Facts::default();
    let mut bitmask_enums: BTreeSet<String> = BTreeSet::new();
    // Every named enum value: name -> (type, value) for aliases; from the base <enums> blocks too.
    let mut named: HashMap<String, (String, i64, bool)> = HashMap::new();
    let mut type_providers: HashMap<String, BTreeSet<String>> = HashMap::new();
    // (provider, items) of every feature and extension, handled after the base enums are known.
    let mut requires: Vec<(String, Option<i64>, Vec<InterfaceItem>)> = Vec::new();
    for child in &raw.0 {
        match child {
            RegistryChild::Types(types) => {
                for tc in &types.children {
                    let TypesChild::Type(t) = tc else { continue };
                    if t.category.as_deref() != Some("bitmask") {
                        continue;
                    }
                    let Some(name) = &t.name.clone().or_else(|| type_name(t)) else {
                        continue;
                    };
                    if let Some(bits) = t.requires.as_ref().or(t.bitvalues.as_ref()) {
                        f.bits_of.insert(name.clone(), bits.clone());
                    }
                }
            }
            RegistryChild::Enums(e) => {
                let Some(ty) = &e.name else { continue };
                let bitmask = e.kind.as_deref() == Some("bitmask");
                if bitmask {
                    bitmask_enums.insert(ty.clone());
                }
                for c in &e.children {
                    let EnumsChild::Enum(en) = c else { continue };
                    match &en.spec {
                        EnumSpec::Value { value, .. } => {
                            if let Some(v) = parse_int(value) {
                                named.insert(en.name.clone(), (ty.clone(), v, false));
                                if e.kind.as_deref() == Some("enum") {
                                    f.enum_values.entry(ty.clone()).or_default().insert(v);
                                }
                            }
                        }
                        EnumSpec::Bitpos { bitpos, .. } => {
                            named.insert(en.name.clone(), (ty.clone(), 1i64 << bitpos, true));
                        }
                        _ => {}
                    }
                }
            }
            RegistryChild::Feature(feat) => {
                if feat.name == "VK_VERSION_1_0" || !feat.api.split(',').any(|a| a == "vulkan") {
                    continue;
                }
                for fc in &feat.children {
                    if let FeatureChild::Require { api, items, .. } = fc {
                        if api_ok(api) {
                            requires.push((feat.name.clone(), None, items.clone()));
                        }
                    }
                }
            }
            RegistryChild::Extensions(exts) => {
                for ext in &exts.children {
                    let supported = ext.supported.as_deref().unwrap_or("");
                    if !supported.split(',').any(|s| s == "vulkan") {
                        continue;
                    }
                    let e = f.exts.entry(ext.name.clone()).or_default();
                    e.number = ext.number.unwrap_or(0);
                    e.device = ext.ext_type.as_deref() == Some("device");
                    e.requires = ext
                        .requires
                        .iter()
                        .flat_map(|r| r.split(','))
                        .filter(|r| !r.is_empty())
                        .map(str::to_string)
                        .collect();
                    e.promoted_to = ext.promotedto.clone();
                    for ec in &ext.children {
                        if let ExtensionChild::Require { api, items, .. } = ec {
                            if api_ok(api) {
                                requires.push((ext.name.clone(), ext.number, items.clone()));
                            }
                        }
                    }
                }
            }
            RegistryChild::SpirvExtensions(s) => {
                for x in &s.children {
                    f.spirv_exts.push((x.name.clone(), x.enables.clone()));
                }
            }
            RegistryChild::SpirvCapabilities(s) => {
                for x in &s.children {
                    f.spirv_caps.push((0, x.name.clone(), x.enables.clone()));
                }
            }
            _ => {}
        }
    }
    // Values added by features and extensions, aliases resolved in a second pass.
    let mut aliases: Vec<(String, String, String, String)> = Vec::new();
    for (provider, number, items) in &requires {
        for it in items {
            match it {
                InterfaceItem::Command { name, .. } => {
                    f.commands
                        .entry(name.clone())
                        .or_default()
                        .insert(provider.clone());
                    if let Some(e) = f.exts.get_mut(provider) {
                        e.commands.insert(name.clone());
                    }
                }
                InterfaceItem::Type { name, .. } => {
                    let canon = reg.resolve(name).to_string();
                    type_providers
                        .entry(canon.clone())
                        .or_default()
                        .insert(provider.clone());
                    if let Some(e) = f.exts.get_mut(provider) {
                        if reg.structs.get(&canon).is_some_and(|s| s.stype.is_some()) {
                            e.structs.insert(canon);
                        }
                    }
                }
                InterfaceItem::Enum(en) => match item(&en.spec, *number) {
                    Some(Item::Value(ty, v)) => {
                        named.insert(en.name.clone(), (ty.clone(), v, false));
                        add_value(&mut f, &bitmask_enums, provider, &ty, v, &en.name);
                    }
                    Some(Item::Bit(ty, v)) => {
                        named.insert(en.name.clone(), (ty.clone(), v as i64, true));
                        add_value(&mut f, &bitmask_enums, provider, &ty, v as i64, &en.name);
                    }
                    Some(Item::Alias(ty, target)) => {
                        aliases.push((provider.clone(), ty, en.name.clone(), target))
                    }
                    None => {}
                },
                _ => {}
            }
        }
    }
    for (provider, ty, name, target) in aliases {
        let mut t = target.as_str();
        // Aliases of aliases are rare but exist.
        for _ in 0..4 {
            if named.contains_key(t) {
                break;
            }
            match aliases_target(&raw, t) {
                Some(n) => t = n,
                None => break,
            }
        }
        if let Some((_, v, _)) = named.get(t).cloned() {
            add_value(&mut f, &bitmask_enums, &provider, &ty, v, &name);
        }
    }
    f.features = emit_features::select(reg, |st| named.get(st).map(|v| v.1), &type_providers)?;
    // Struct names in SPIR-V enables may be aliases (`...FeaturesKHR`).
    for (_, enables) in f.spirv_exts.iter_mut() {
        canon_enables(reg, enables);
    }
    for (_, _, enables) in f.spirv_caps.iter_mut() {
        canon_enables(reg, enables);
    }
    let numbers = spirv_capability_numbers(f.spirv_caps.iter().map(|c| c.1.as_str()))?;
    f.spirv_caps.retain(|c| numbers.contains_key(&c.1));
    for c in f.spirv_caps.iter_mut() {
        c.0 = numbers[&c.1];
    }
    f.spirv_caps.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    // Aliases (`...EXT`/`...NV` of one number) become one entry with every enable.
    let mut merged: Vec<(u32, String, Vec<Enable>)> = Vec::new();
    for c in f.spirv_caps.drain(..) {
        match merged.last_mut() {
            Some(last) if last.0 == c.0 => {
                last.1 = format!("{}/{}", last.1, c.1);
                last.2.extend(c.2);
            }
            _ => merged.push(c),
        }
    }
    f.spirv_caps = merged;
    f.spirv_exts.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(f)
}

fn aliases_target<'a>(raw: &'a vk_parse::Registry, name: &str) -> Option<&'a str> {
    for child in &raw.0 {
        if let RegistryChild::Enums(e) = child {
            for c in &e.children {
                if let EnumsChild::Enum(en) = c {
                    if en.name == name {
                        if let EnumSpec::Alias { alias, .. } = &en.spec {
                            return Some(alias);
                        }
                    }
                }
            }
        }
    }
    None
}

fn canon_enables(reg: &Registry, enables: &mut [Enable]) {
    for e in enables {
        if let Enable::Feature(fe) = e {
            fe.struct_ = reg.resolve(&fe.struct_).to_string();
        }
    }
}

fn type_name(t: &vk_parse::Type) -> Option<String> {
    match &t.spec {
        vk_parse::TypeSpec::Code(c) => c.markup.iter().find_map(|m| match m {
            vk_parse::TypeCodeMarkup::Name(n) => Some(n.clone()),
            _ => None,
        }),
        _ => None,
    }
}

fn api_ok(api: &Option<String>) -> bool {
    api.as_deref()
        .is_none_or(|a| a.split(',').any(|x| x == "vulkan"))
}

fn add_value(
    f: &mut Facts,
    bitmask_enums: &BTreeSet<String>,
    provider: &str,
    ty: &str,
    v: i64,
    name: &str,
) {
    if bitmask_enums.contains(ty) {
        if v == 0 {
            return;
        }
        let (_, p) = f
            .bits
            .entry((ty.to_string(), v as u64))
            .or_insert_with(|| (name.to_string(), BTreeSet::new()));
        p.insert(provider.to_string());
        f.extended_bits.insert(ty.to_string());
        if let Some(e) = f.exts.get_mut(provider) {
            e.bits.insert((ty.to_string(), v as u64, name.to_string()));
        }
    } else {
        f.enum_values.entry(ty.to_string()).or_default().insert(v);
        let (_, p) = f
            .enums
            .entry((ty.to_string(), v))
            .or_insert_with(|| (name.to_string(), BTreeSet::new()));
        p.insert(provider.to_string());
        f.extended_enums.insert(ty.to_string());
        if let Some(e) = f.exts.get_mut(provider) {
            e.enums.insert((ty.to_string(), v, name.to_string()));
        }
    }
}

/// SPIR-V capability name -> number, assembled by `spirv-as`; names it does not know are left out
/// (retried without them).
fn spirv_capability_numbers<'a>(
    names: impl Iterator<Item = &'a str>,
) -> Result<BTreeMap<String, u32>> {
    use std::io::Write as _;
    let mut names: Vec<&str> = names.collect::<BTreeSet<_>>().into_iter().collect();
    for _ in 0..64 {
        let mut src = String::new();
        for n in &names {
            let _ = writeln!(src, "OpCapability {n}");
        }
        src.push_str("OpMemoryModel Logical GLSL450\n");
        let mut child = std::process::Command::new("spirv-as")
            .args(["--target-env", "spv1.6", "-", "-o", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context(
                "running spirv-as (Debian package spirv-tools; scripts/deps.sh installs it)",
            )?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(src.as_bytes())?;
        let out = child.wait_with_output()?;
        if out.status.success() {
            let words: Vec<u32> = out
                .stdout
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            // Header of 5 words, then one OpCapability (2 words: 0x00020011, number) per name.
            let mut map = BTreeMap::new();
            for (i, n) in names.iter().enumerate() {
                let at = 5 + 2 * i;
                match words.get(at..at + 2) {
                    Some([op, num]) if *op == 0x0002_0011 => {
                        map.insert(n.to_string(), *num);
                    }
                    _ => bail!("spirv-as wrote an unexpected module for OpCapability {n}"),
                }
            }
            return Ok(map);
        }
        // `error: LINE: COL: Invalid capability 'Name'.`: drop that line and retry.
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .split(':')
            .nth(1)
            .and_then(|l| l.trim().parse::<usize>().ok())
            .filter(|l| *l >= 1 && *l <= names.len())
            .with_context(|| format!("spirv-as failed: {err}"))?;
        names.remove(line - 1);
    }
    bail!("spirv-as rejected too many SPIR-V capability names from vk.xml")
}

/// `&["a", "b"]`: a Rust slice of string literals.
pub(crate) fn strs<'a>(v: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<String> = v.into_iter().map(|s| format!("{s:?}")).collect();
    format!("&[{}]", items.join(", "))
}

fn enables(v: &[Enable]) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|e| match e {
            Enable::Version(x) => format!("Enable::Version({x:?})"),
            Enable::Extension(x) => format!("Enable::Extension({x:?})"),
            Enable::Feature(fe) => format!(
                "Enable::Feature {{ structure: {:?}, feature: {:?}, requires: {} }}",
                fe.struct_,
                fe.feature,
                strs(
                    fe.requires
                        .iter()
                        .flat_map(|r| r.split(','))
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                        .iter()
                )
            ),
            Enable::Property(p) => format!(
                "Enable::Property {{ property: {:?}, member: {:?}, value: {:?} }}",
                p.property, p.member, p.value
            ),
            _ => "Enable::Version(\"?\")".to_string(),
        })
        .collect();
    format!("&[{}]", items.join(", "))
}

fn registry_rs(f: &Facts) -> String {
    let mut o = String::from(HEADER);
    o.push_str(
        "//! What each Vulkan extension adds, read from vk.xml: commands, structs, enum values and flag\n\
         //! bits (each with the extensions and core versions, 1.1 and later, that add it); SPIR-V\n\
         //! extensions and capabilities with what enables them. The features structs are\n\
         //! `layer_support::generated::features`.\n\
         //! Every table is sorted by its key for binary search.\n\
         #![allow(clippy::all)]\n\n\
         /// One extension and what it adds.\n\
         pub struct Extension {\n\
         pub name: &'static str,\npub number: u32,\n/// A device extension (else instance).\npub device: bool,\n\
         /// Extensions (and core versions) it requires.\npub requires: &'static [&'static str],\n\
         pub promoted_to: Option<&'static str>,\npub commands: &'static [&'static str],\n\
         /// Structs with an sType.\npub structs: &'static [&'static str],\n\
         /// (enum type, value, name), sTypes included.\npub enums: &'static [(&'static str, i64, &'static str)],\n\
         /// (flag bits type, bit, name).\npub flag_bits: &'static [(&'static str, u64, &'static str)],\n}\n\n\
         /// What makes a SPIR-V extension or capability usable (any one of them).\n\
         #[derive(Debug)]\npub enum Enable {\nVersion(&'static str),\nExtension(&'static str),\n\
         Feature { structure: &'static str, feature: &'static str, requires: &'static [&'static str] },\n\
         Property { property: &'static str, member: &'static str, value: &'static str },\n}\n\n",
    );
    o.push_str("pub static EXTENSIONS: &[Extension] = &[\n");
    for (name, e) in &f.exts {
        let enums: Vec<String> = e
            .enums
            .iter()
            .map(|(t, v, n)| format!("({t:?}, {v}, {n:?})"))
            .collect();
        let bits: Vec<String> = e
            .bits
            .iter()
            .map(|(t, v, n)| format!("({t:?}, {v:#x}, {n:?})"))
            .collect();
        let _ = writeln!(
            o,
            "Extension {{ name: {name:?}, number: {}, device: {}, requires: {}, promoted_to: {:?}, commands: {}, structs: {}, enums: &[{}], flag_bits: &[{}] }},",
            e.number,
            e.device,
            strs(&e.requires),
            e.promoted_to,
            strs(&e.commands),
            strs(&e.structs),
            enums.join(", "),
            bits.join(", ")
        );
    }
    o.push_str("];\n\n/// Command -> the extensions and core versions (1.1 and later) that add it.\npub static COMMANDS: &[(&str, &[&str])] = &[\n");
    for (c, p) in &f.commands {
        let _ = writeln!(o, "({c:?}, {}),", strs(p));
    }
    o.push_str("];\n\n/// (enum type, value) -> (name, providers), for values that extensions or core versions 1.1 and later add.\npub static ENUM_VALUES: &[(&str, i64, &str, &[&str])] = &[\n");
    for ((t, v), (n, p)) in &f.enums {
        let _ = writeln!(o, "({t:?}, {v}, {n:?}, {}),", strs(p));
    }
    o.push_str("];\n\n/// (flag bits type, bit) -> (name, providers).\npub static FLAG_BITS: &[(&str, u64, &str, &[&str])] = &[\n");
    for ((t, v), (n, p)) in &f.bits {
        let _ = writeln!(o, "({t:?}, {v:#x}, {n:?}, {}),", strs(p));
    }
    o.push_str("];\n\n");
    o.push_str("/// SPIR-V extension -> what enables it.\npub static SPIRV_EXTENSIONS: &[(&str, &[Enable])] = &[\n");
    for (n, e) in &f.spirv_exts {
        let _ = writeln!(o, "({n:?}, {}),", enables(e));
    }
    o.push_str("];\n\n/// SPIR-V capability (number, name) -> what enables it.\npub static SPIRV_CAPABILITIES: &[(u32, &str, &[Enable])] = &[\n");
    for (num, n, e) in &f.spirv_caps {
        let _ = writeln!(o, "({num}, {n:?}, {}),", enables(e));
    }
    o.push_str("];\n");
    o
}

// ---------------------------------------------------------------- the walker

/// What a member's element reports: `Some(code)` with `x` bound to a reference to the element.
fn elem_visit(
    reg: &Registry,
    f: &Facts,
    el: &Elem,
    x: &str,
    with: &BTreeSet<String>,
) -> Option<String> {
    match el {
        Elem::Struct(s) if with.contains(s) => Some(format!("w_{s}({x}, f);")),
        Elem::Scalar(TypeCat::Enum, ty) if f.extended_enums.contains(reg.resolve(ty)) => {
            Some(format!("f.value({:?}, *{x} as i64);", reg.resolve(ty)))
        }
        Elem::Scalar(TypeCat::Flags32 | TypeCat::Flags64, ty) => {
            let bits = f.bits_of.get(reg.resolve(ty))?;
            let bits = reg.resolve(bits);
            f.extended_bits
                .contains(bits)
                .then(|| format!("f.bits({bits:?}, *{x} as u64);"))
        }
        _ => None,
    }
}

fn field_visit(
    reg: &Registry,
    f: &Facts,
    fl: &Field,
    src: &str,
    with: &BTreeSet<String>,
) -> Option<String> {
    match &fl.kind {
        Kind::PNext => Some(format!("w_chain(&{src}, f);")),
        Kind::Val(el) => elem_visit(reg, f, el, &format!("&{src}"), with),
        Kind::Fixed(el, _) => {
            elem_visit(reg, f, el, "y", with).map(|w| format!("for y in {src}.iter() {{ {w} }}"))
        }
        Kind::Ptr { len, elem } => match (len, elem) {
            (Len::One, PElem::Elem(Elem::Struct(s))) if with.contains(s) => {
                Some(format!("if let Some(x) = &{src} {{ w_{s}(x, f); }}"))
            }
            (Len::One, PElem::Elem(el)) => elem_visit(reg, f, el, "x", with)
                .map(|w| format!("if let Some(x) = &{src} {{ {w} }}")),
            (_, PElem::Elem(el)) | (_, PElem::FixedArr(el, _)) => elem_visit(reg, f, el, "y", with)
                .map(|w| format!("if let Some(x) = &{src} {{ for y in x.iter() {{ {w} }} }}")),
            (_, PElem::StructPtrArray(s)) if with.contains(s) => Some(format!(
                "if let Some(x) = &{src} {{ for y in x.iter().flatten() {{ w_{s}(y, f); }} }}"
            )),
            _ => None,
        },
        Kind::SType | Kind::FixedStr(_) => None,
    }
}

const SHADER_MODULE: &str = "VkShaderModuleCreateInfo";

fn walk_rs(reg: &Registry, an: &Analysis, f: &Facts) -> String {
    // Structs worth walking: input structs with a chain, an extension enum or flag member, shader
    // code, or such a struct inside (to a fixpoint).
    let mut with: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = with.len();
        for name in &an.struct_order {
            let s = &an.structs[name];
            if s.def.is_union || s.def.returned_only || with.contains(name) {
                continue;
            }
            if name == SHADER_MODULE
                || s.fields
                    .iter()
                    .any(|fl| field_visit(reg, f, fl, "v", &with).is_some())
            {
                with.insert(name.clone());
            }
        }
        if with.len() == before {
            break;
        }
    }
    let mut o = String::from(HEADER);
    o.push_str(
        "//! Walks a decoded call's input parameters (output parameters and returned-only structs are\n\
         //! skipped) and reports every chained struct's sType, every value of an enum that extensions\n\
         //! extend, every flags value whose bits extensions extend, and the code of every shader module\n\
         //! create info (on its own or chained into a pipeline stage).\n\
         #![allow(non_snake_case, unused_variables, clippy::all)]\n\
         use vkstream::types::*;\nuse vkstream::{Call, PNext};\n\n\
         /// Receives what [`walk_call`] finds.\n\
         pub trait Visit {\n\
         /// A struct in a pNext chain.\nfn s_type(&mut self, s_type: i32);\n\
         /// A value of enum type `ty` (`VkFormat`).\nfn value(&mut self, ty: &'static str, v: i64);\n\
         /// A flags value of bits type `ty` (`VkAccessFlagBits`).\nfn bits(&mut self, ty: &'static str, v: u64);\n\
         /// SPIR-V code of a shader module.\nfn spirv(&mut self, code: &[u32]);\n}\n\n",
    );
    o.push_str("fn w_chain(c: &[PNext], f: &mut dyn Visit) {\nfor e in c {\nf.s_type(e.s_type());\nmatch e {\n");
    for name in &an.struct_order {
        let s = &an.structs[name];
        if s.def.stype.is_some()
            && s.fields.iter().any(|fl| fl.kind == Kind::PNext)
            && with.contains(name)
        {
            let _ = writeln!(o, "PNext::{name}(x) => w_{name}(x, f),");
        }
    }
    o.push_str("_ => {}\n}\n}\n}\n\n");
    for name in &an.struct_order {
        if !with.contains(name) {
            continue;
        }
        let s = &an.structs[name];
        let _ = writeln!(o, "fn w_{name}(v: &{name}, f: &mut dyn Visit) {{");
        if name == SHADER_MODULE {
            o.push_str("if let Some(c) = &v.p_code { f.spirv(c); }\n");
        }
        for fl in &s.fields {
            if let Some(w) = field_visit(reg, f, fl, &format!("v.{}", fl.snake), &with) {
                o.push_str(&w);
                o.push('\n');
            }
        }
        o.push_str("}\n");
    }
    let mut walked = Vec::new();
    o.push_str(
        "\n/// Reports what `call`'s input parameters carry (see the module documentation).\n\
         pub fn walk_call(call: &Call, f: &mut dyn Visit) {\nmatch call {\n",
    );
    for c in &an.cmds {
        let mut body = String::new();
        for p in &c.params {
            let out = !p.decl.ptrs.is_empty() && !p.decl.ptrs[0];
            if out {
                continue;
            }
            if let Some(w) = field_visit(reg, f, p, &format!("p.{}", p.snake), &with) {
                body.push_str(&w);
                body.push('\n');
            }
        }
        if !body.is_empty() {
            walked.push(c.def.name.clone());
            let _ = writeln!(o, "Call::{}(p) => {{\n{body}}}", c.def.name);
        }
    }
    o.push_str("_ => {}\n}\n}\n\n");
    o.push_str("/// Whether [`walk_call`] can report anything for a command (the others need no decoding).\npub fn walks(command: &str) -> bool {\nmatches!(command, ");
    let names: Vec<String> = walked.iter().map(|n| format!("{n:?}")).collect();
    o.push_str(&names.join(" | "));
    o.push_str(")\n}\n\n");
    // Enabled features of a device create info's chain.
    o.push_str(
        "/// The features a chained features struct enables: (struct, enabled members), vk.xml names.\n\
         pub fn enabled_features(e: &PNext) -> Option<(&'static str, Vec<&'static str>)> {\nmatch e {\n",
    );
    let feature_names: BTreeSet<&str> =
        f.features.structs.iter().map(|s| s.name.as_str()).collect();
    for name in &an.struct_order {
        if !feature_names.contains(name.as_str()) {
            continue;
        }
        let s = &an.structs[name];
        let checks: Vec<String> = s
            .fields
            .iter()
            .filter(|fl| matches!(fl.kind, Kind::Val(_)))
            .map(|fl| format!("if x.{} != 0 {{ on.push({:?}); }}", fl.snake, fl.decl.name))
            .collect();
        let _ = writeln!(
            o,
            "PNext::{name}(x) => {{ let mut on = Vec::new(); {} Some(({name:?}, on)) }}",
            checks.join(" ")
        );
    }
    o.push_str("_ => None,\n}\n}\n\n");
    if let Some(core) = an.structs.get("VkPhysicalDeviceFeatures") {
        let checks: Vec<String> = core
            .fields
            .iter()
            .map(|fl| format!("if v.{} != 0 {{ on.push({:?}); }}", fl.snake, fl.decl.name))
            .collect();
        let _ = writeln!(
            o,
            "/// The core features a VkPhysicalDeviceFeatures enables (vk.xml names).\npub fn core_features(v: &VkPhysicalDeviceFeatures) -> Vec<&'static str> {{ let mut on = Vec::new(); {} on }}",
            checks.join(" ")
        );
    }
    o
}
