//! The registry reduced to what the emitters need: the commands and types of the Vulkan API we
//! support (core + non-provisional extensions for Linux-relevant platforms), with every C
//! declaration parsed into base type, pointer levels and fixed array dimensions.

use crate::config;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use vk_parse::{
    Command, CommandParam, ExtensionChild, FeatureChild, InterfaceItem, RegistryChild,
    TypeCodeMarkup, TypeMember, TypeMemberMarkup, TypeSpec, TypesChild,
};

/// One parsed C declaration (struct member or command parameter).
#[derive(Clone, Debug)]
pub struct Decl {
    pub name: String,
    /// Canonical (alias-resolved) base type name as written in vk.xml (`VkBuffer`, `uint32_t`).
    pub ty: String,
    /// Pointer levels, outermost first; `true` when that level points to const data.
    pub ptrs: Vec<bool>,
    /// Fixed array dimensions (literal numbers or API constant names), outermost first.
    pub dims: Vec<String>,
    pub bitfield: bool,
    pub len: Option<String>,
    pub altlen: Option<String>,
    pub optional: bool,
    pub stride: Option<String>,
    /// `values=` on sType members.
    pub values: Option<String>,
    /// `noautovalidity`: no implicit valid usage (an enum member may hold anything, as when the
    /// spec says it is ignored).
    pub noauto: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeCat {
    /// A scalar with a fixed Rust representation.
    Prim(&'static str),
    Usize,
    Enum,
    Flags32,
    Flags64,
    Handle {
        dispatchable: bool,
        objtype: String,
    },
    FuncPtr,
    /// A pointer-sized opaque value (`VkRemoteAddressNV`, platform `Display` pointers etc.).
    OpaquePtr,
    /// An integer platform typedef (`Window`, `VisualID`, `xcb_window_t`): stored as u64.
    PlatformInt,
    Struct,
    Union,
    Void,
    Char,
    /// Something we cannot represent (video std headers, foreign platform types).
    Foreign,
}

#[derive(Clone, Debug)]
pub struct StructDef {
    pub name: String,
    pub members: Vec<Decl>,
    pub is_union: bool,
    pub extends: Vec<String>,
    /// `VK_STRUCTURE_TYPE_...` of the sType member, if any.
    pub stype: Option<String>,
    pub returned_only: bool,
}

#[derive(Clone, Debug)]
pub struct CommandDef {
    pub name: String,
    /// The command whose signature it shares (itself for non-aliases).
    pub canonical: String,
    pub ret: String,
    pub params: Vec<Decl>,
}

pub struct Registry {
    pub cats: HashMap<String, TypeCat>,
    pub aliases: HashMap<String, String>,
    pub structs: BTreeMap<String, StructDef>,
    /// Struct names in registry order (deterministic output order).
    pub struct_order: Vec<String>,
    /// Commands required by the supported features/extensions, in registry order.
    pub commands: Vec<CommandDef>,
    /// Commands excluded up front (platform/provisional), with the reason.
    pub excluded: Vec<(String, String)>,
    /// Which extension (or core version) first requires each command.
    pub command_origin: HashMap<String, String>,
    /// Types required by supported features/extensions.
    pub required_types: BTreeSet<String>,
    /// Every extension defined for Vulkan (`supported="vulkan"`), in registry order.
    pub extensions: Vec<String>,
}

impl Registry {
    pub fn resolve<'a>(&'a self, mut name: &'a str) -> &'a str {
        while let Some(a) = self.aliases.get(name) {
            name = a;
        }
        name
    }
    pub fn cat(&self, name: &str) -> TypeCat {
        self.cats
            .get(self.resolve(name))
            .cloned()
            .unwrap_or(TypeCat::Foreign)
    }
}

fn prim(c: &str) -> Option<TypeCat> {
    Some(match c {
        "uint8_t" => TypeCat::Prim("u8"),
        "uint16_t" => TypeCat::Prim("u16"),
        "uint32_t" => TypeCat::Prim("u32"),
        "uint64_t" => TypeCat::Prim("u64"),
        "int8_t" => TypeCat::Prim("i8"),
        "int16_t" => TypeCat::Prim("i16"),
        "int32_t" => TypeCat::Prim("i32"),
        "int64_t" => TypeCat::Prim("i64"),
        "int" => TypeCat::Prim("i32"),
        "float" => TypeCat::Prim("f32"),
        "double" => TypeCat::Prim("f64"),
        "size_t" => TypeCat::Usize,
        "void" => TypeCat::Void,
        "char" => TypeCat::Char,
        "Window" | "VisualID" | "xcb_window_t" | "xcb_visualid_t" | "RROutput" => {
            TypeCat::PlatformInt
        }
        "Display" | "xcb_connection_t" | "wl_display" | "wl_surface" => TypeCat::OpaquePtr,
        _ => return None,
    })
}

/// Tokenises a C declaration such as `const char* const* ppNames` or `float m[3][4]`.
fn parse_decl(code: &str, name: &str, ty: &str, aliases: &HashMap<String, String>) -> Result<Decl> {
    let mut toks: Vec<String> = Vec::new();
    let mut cur = String::new();
    for ch in code.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            cur.push(ch);
        } else {
            if !cur.is_empty() {
                toks.push(std::mem::take(&mut cur));
            }
            if !ch.is_whitespace() {
                toks.push(ch.to_string());
            }
        }
    }
    if !cur.is_empty() {
        toks.push(cur);
    }
    let npos = toks
        .iter()
        .position(|t| t == name)
        .ok_or_else(|| anyhow!("declaration `{code}` lacks its name `{name}`"))?;
    let (pre, post) = toks.split_at(npos);
    // Pre: [const] [struct] Type {* [const]}
    let mut base_const = false;
    let mut stars: Vec<bool> = Vec::new(); // per star (innermost first): is that pointer itself const
    let mut seen_type = false;
    for t in pre {
        match t.as_str() {
            "const" if !seen_type => base_const = true,
            "const" => {
                if let Some(last) = stars.last_mut() {
                    *last = true;
                }
            }
            "struct" => {}
            "*" => stars.push(false),
            _ => seen_type = true,
        }
    }
    // Level i (innermost = 0) points to const data if the base is const (i = 0) or the pointer
    // one level inside is itself const.
    let mut ptrs_inner_first = Vec::new();
    for i in 0..stars.len() {
        ptrs_inner_first.push(if i == 0 { base_const } else { stars[i - 1] });
    }
    ptrs_inner_first.reverse();
    let mut dims = Vec::new();
    let mut bitfield = false;
    let mut i = 1;
    while i < post.len() {
        match post[i].as_str() {
            "[" => {
                let d = post
                    .get(i + 1)
                    .ok_or_else(|| anyhow!("bad array in `{code}`"))?;
                dims.push(d.clone());
                i += 3;
            }
            ":" => {
                bitfield = true;
                i += 2;
            }
            _ => i += 1,
        }
    }
    let mut t = ty.to_string();
    while let Some(a) = aliases.get(&t) {
        t = a.clone();
    }
    Ok(Decl {
        name: name.to_string(),
        ty: t,
        ptrs: ptrs_inner_first,
        dims,
        bitfield,
        len: None,
        altlen: None,
        optional: false,
        stride: None,
        values: None,
        noauto: false,
    })
}

fn api_ok(api: &Option<String>) -> bool {
    api.as_deref()
        .is_none_or(|a| a.split(',').any(|x| x == "vulkan"))
}

pub fn load(path: &Path) -> Result<Registry> {
    let (reg, _warnings) =
        vk_parse::parse_file(path).map_err(|e| anyhow!("parsing {}: {e:?}", path.display()))?;
    let mut cats: HashMap<String, TypeCat> = HashMap::new();
    let mut aliases: HashMap<String, String> = HashMap::new();
    let mut raw_structs: Vec<(vk_parse::Type, bool)> = Vec::new();
    let mut raw_cmds: Vec<vk_parse::CommandDefinition> = Vec::new();
    let mut cmd_aliases: Vec<(String, String)> = Vec::new();
    let mut required_cmds: Vec<(String, String)> = Vec::new();
    let mut required_types: BTreeSet<String> = BTreeSet::new();
    let mut excluded: BTreeMap<String, String> = BTreeMap::new();
    let mut extensions = Vec::new();
    let mut excluded_origin: HashMap<String, String> = HashMap::new();

    for child in &reg.0 {
        match child {
            RegistryChild::Types(types) => {
                for tc in &types.children {
                    let TypesChild::Type(ty) = tc else { continue };
                    if !api_ok(&ty.api) {
                        continue;
                    }
                    let (code, markup) = match &ty.spec {
                        TypeSpec::Code(c) => (c.code.clone(), c.markup.clone()),
                        _ => (String::new(), Vec::new()),
                    };
                    let name = ty.name.clone().or_else(|| {
                        markup.iter().find_map(|m| match m {
                            TypeCodeMarkup::Name(n) => Some(n.clone()),
                            _ => None,
                        })
                    });
                    let Some(name) = name else { continue };
                    if let Some(a) = &ty.alias {
                        aliases.insert(name, a.clone());
                        continue;
                    }
                    let cat = match ty.category.as_deref() {
                        Some("basetype") => {
                            let under = markup.iter().find_map(|m| match m {
                                TypeCodeMarkup::Type(t) => Some(t.clone()),
                                _ => None,
                            });
                            match (name.as_str(), under.as_deref()) {
                                ("VkFlags", _) => TypeCat::Prim("u32"),
                                ("VkFlags64", _) => TypeCat::Prim("u64"),
                                ("VkBool32" | "VkSampleMask", _) => TypeCat::Prim("u32"),
                                ("VkDeviceSize" | "VkDeviceAddress", _) => TypeCat::Prim("u64"),
                                ("VkRemoteAddressNV", _) => TypeCat::OpaquePtr,
                                _ => TypeCat::Foreign,
                            }
                        }
                        Some("bitmask") => {
                            let under = markup.iter().find_map(|m| match m {
                                TypeCodeMarkup::Type(t) => Some(t.clone()),
                                _ => None,
                            });
                            if under.as_deref() == Some("VkFlags64") {
                                TypeCat::Flags64
                            } else {
                                TypeCat::Flags32
                            }
                        }
                        Some("handle") => TypeCat::Handle {
                            dispatchable: !code.contains("NON_DISPATCHABLE"),
                            objtype: ty.objtypeenum.clone().unwrap_or_default(),
                        },
                        Some("enum") => TypeCat::Enum,
                        Some("funcpointer") => TypeCat::FuncPtr,
                        Some("struct") | Some("union") => {
                            raw_structs.push((ty.clone(), ty.category.as_deref() == Some("union")));
                            if ty.category.as_deref() == Some("union") {
                                TypeCat::Union
                            } else {
                                TypeCat::Struct
                            }
                        }
                        _ => prim(&name).unwrap_or(TypeCat::Foreign),
                    };
                    cats.insert(name, cat);
                }
            }
            RegistryChild::Commands(cmds) => {
                for c in &cmds.children {
                    match c {
                        Command::Alias { name, alias } => {
                            cmd_aliases.push((name.clone(), alias.clone()))
                        }
                        Command::Definition(d) if api_ok(&d.api) => raw_cmds.push(d.clone()),
                        _ => {}
                    }
                }
            }
            RegistryChild::Feature(f) => {
                if !f.api.split(',').any(|a| a == "vulkan") {
                    continue;
                }
                for fc in &f.children {
                    if let FeatureChild::Require { api, items, .. } = fc {
                        if !api_ok(api) {
                            continue;
                        }
                        collect(items, &f.name, &mut required_cmds, &mut required_types);
                    }
                }
            }
            RegistryChild::Extensions(exts) => {
                for ext in &exts.children {
                    let supported = ext.supported.as_deref().unwrap_or("");
                    if !supported.split(',').any(|s| s == "vulkan") {
                        continue;
                    }
                    extensions.push(ext.name.clone());
                    let platform_ok = match ext.platform.as_deref() {
                        None => true,
                        Some(p) => config::ALLOWED_PLATFORMS.contains(&p),
                    };
                    let skip_reason = if ext.provisional {
                        Some(format!("provisional ({})", ext.name))
                    } else if !platform_ok {
                        Some(format!(
                            "platform {} ({})",
                            ext.platform.as_deref().unwrap_or(""),
                            ext.name
                        ))
                    } else {
                        None
                    };
                    for ec in &ext.children {
                        if let ExtensionChild::Require { api, items, .. } = ec {
                            if !api_ok(api) {
                                continue;
                            }
                            if let Some(reason) = &skip_reason {
                                for it in items {
                                    if let InterfaceItem::Command { name, .. } = it {
                                        excluded
                                            .entry(name.clone())
                                            .or_insert_with(|| reason.clone());
                                        excluded_origin
                                            .entry(name.clone())
                                            .or_insert_with(|| ext.name.clone());
                                    }
                                }
                            } else {
                                collect(items, &ext.name, &mut required_cmds, &mut required_types);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }

    // Bit enums (`VkSampleCountFlagBits`) are flag types in ash, as wide as their `*Flags` type.
    let flagbits: Vec<(String, TypeCat)> = cats
        .iter()
        .filter(|(n, c)| **c == TypeCat::Enum && n.contains("FlagBits"))
        .map(|(n, _)| {
            let flags = n.replace("FlagBits", "Flags");
            let cat = match cats.get(&flags) {
                Some(TypeCat::Flags64) => TypeCat::Flags64,
                _ => TypeCat::Flags32,
            };
            (n.clone(), cat)
        })
        .collect();
    cats.extend(flagbits);

    let mut structs = BTreeMap::new();
    let mut struct_order = Vec::new();
    for (ty, is_union) in &raw_structs {
        let name = ty.name.clone().unwrap_or_default();
        let TypeSpec::Members(members) = &ty.spec else {
            continue;
        };
        let mut decls = Vec::new();
        for m in members {
            let TypeMember::Definition(def) = m else {
                continue;
            };
            if !api_ok(&def.api) {
                continue;
            }
            let mut mname = None;
            let mut mty = None;
            for mk in &def.markup {
                match mk {
                    TypeMemberMarkup::Name(n) => mname = Some(n.clone()),
                    TypeMemberMarkup::Type(t) => mty = Some(t.clone()),
                    _ => {}
                }
            }
            let (Some(mname), Some(mty)) = (mname, mty) else {
                bail!("member of {name} without name/type: {}", def.code)
            };
            // The code string lacks array sizes given by <enum> markup; add them back.
            let mut code = def.code.clone();
            for mk in &def.markup {
                if let TypeMemberMarkup::Enum(e) = mk {
                    if !code.contains(e.as_str()) {
                        code = code.replace("[]", &format!("[{e}]"));
                    }
                }
            }
            let mut d =
                parse_decl(&code, &mname, &mty, &aliases).with_context(|| format!("in {name}"))?;
            d.len = def.len.clone();
            d.altlen = def.altlen.clone();
            d.optional = def
                .optional
                .as_deref()
                .is_some_and(|o| o.starts_with("true"));
            d.values = def.values.clone();
            d.noauto = def.noautovalidity.is_some();
            decls.push(d);
        }
        let stype = decls
            .iter()
            .find(|d| d.name == "sType")
            .and_then(|d| d.values.clone());
        let extends = ty
            .structextends
            .as_deref()
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        struct_order.push(name.clone());
        structs.insert(
            name.clone(),
            StructDef {
                name,
                members: decls,
                is_union: *is_union,
                extends,
                stype,
                returned_only: ty.returnedonly.as_deref() == Some("true"),
            },
        );
    }

    let mut defs: HashMap<String, CommandDef> = HashMap::new();
    for d in &raw_cmds {
        let mut params = Vec::new();
        for p in &d.params {
            if !api_ok(&p.api) {
                continue;
            }
            params.push(param_decl(p, &aliases)?);
        }
        let ret = d.proto.type_name.clone().unwrap_or_else(|| "void".into());
        defs.insert(
            d.proto.name.clone(),
            CommandDef {
                name: d.proto.name.clone(),
                canonical: d.proto.name.clone(),
                ret,
                params,
            },
        );
    }
    for (name, alias) in &cmd_aliases {
        let mut target = alias.clone();
        while let Some((_, a)) = cmd_aliases.iter().find(|(n, _)| *n == target) {
            target = a.clone();
        }
        if let Some(t) = defs.get(&target).cloned() {
            defs.insert(
                name.clone(),
                CommandDef {
                    name: name.clone(),
                    canonical: target,
                    ..t
                },
            );
        }
    }
    let mut commands = Vec::new();
    let mut seen = BTreeSet::new();
    let mut command_origin = excluded_origin;
    for (c, origin) in &required_cmds {
        if !seen.insert(c.clone()) {
            continue;
        }
        excluded.remove(c);
        command_origin.insert(c.clone(), origin.clone());
        let def = defs
            .get(c)
            .ok_or_else(|| anyhow!("required command {c} is not defined"))?;
        commands.push(def.clone());
    }
    Ok(Registry {
        cats,
        aliases,
        structs,
        struct_order,
        commands,
        excluded: excluded.into_iter().collect(),
        command_origin,
        required_types,
        extensions,
    })
}

fn collect(
    items: &[InterfaceItem],
    origin: &str,
    cmds: &mut Vec<(String, String)>,
    types: &mut BTreeSet<String>,
) {
    for it in items {
        match it {
            InterfaceItem::Command { name, .. } => cmds.push((name.clone(), origin.to_string())),
            InterfaceItem::Type { name, .. } => {
                types.insert(name.clone());
            }
            _ => {}
        }
    }
}

fn param_decl(p: &CommandParam, aliases: &HashMap<String, String>) -> Result<Decl> {
    let ty = p
        .definition
        .type_name
        .clone()
        .ok_or_else(|| anyhow!("param {} has no type", p.definition.name))?;
    let mut d = parse_decl(&p.definition.code, &p.definition.name, &ty, aliases)?;
    d.len = p.len.clone();
    d.altlen = p.altlen.clone();
    d.optional = p.optional.as_deref().is_some_and(|o| o.starts_with("true"));
    d.stride = p.stride.clone();
    d.noauto = p.noautovalidity.is_some();
    Ok(d)
}

/// ash's snake_case of a Vulkan identifier (same word-splitting rule as the `heck` crate).
pub fn snake(s: &str) -> String {
    let out = s
        .split('_')
        .filter(|w| !w.is_empty())
        .map(snake_word)
        .collect::<Vec<_>>()
        .join("_");
    match out.as_str() {
        "type" => "ty".into(),
        _ => out,
    }
}

fn snake_word(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut init = 0;
    #[derive(PartialEq, Clone, Copy)]
    enum Mode {
        Boundary,
        Lower,
        Upper,
    }
    let mut mode = Mode::Boundary;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if i + 1 < chars.len() {
            let next = chars[i + 1];
            let next_mode = if c.is_lowercase() {
                Mode::Lower
            } else if c.is_uppercase() {
                Mode::Upper
            } else {
                mode
            };
            if next == '_' || (next_mode == Mode::Lower && next.is_uppercase()) {
                words.push(chars[init..=i].iter().collect());
                init = i + 1;
                mode = Mode::Boundary;
            } else if mode == Mode::Upper && c.is_uppercase() && next.is_lowercase() {
                words.push(chars[init..i].iter().collect());
                init = i;
                mode = Mode::Boundary;
            } else {
                mode = next_mode;
            }
        } else {
            words.push(chars[init..].iter().collect());
        }
        i += 1;
    }
    words
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::snake;
    #[test]
    fn snake_matches_ash() {
        assert_eq!(snake("maxImageDimension1D"), "max_image_dimension1_d");
        assert_eq!(snake("pNext"), "p_next");
        assert_eq!(snake("deviceUUID"), "device_uuid");
        assert_eq!(snake("shaderFloat64"), "shader_float64");
        assert_eq!(snake("ppEnabledLayerNames"), "pp_enabled_layer_names");
        assert_eq!(snake("type"), "ty");
        assert_eq!(
            snake("textureCompressionASTC_LDR"),
            "texture_compression_astc_ldr"
        );
    }
}
