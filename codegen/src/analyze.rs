//! Classifies every member/parameter into how it is deep-copied, and decides which structs and
//! commands can be encoded faithfully (the rest are listed as unsupported, with the reason).

use crate::config;
use crate::model::{snake, CommandDef, Decl, Registry, StructDef, TypeCat};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq)]
pub enum Elem {
    Scalar(TypeCat, String),
    Struct(String),
    Union(String),
}

/// One token of a length expression.
#[derive(Clone, Debug, PartialEq)]
pub enum LenTok {
    /// A sibling member / parameter.
    Ident(String),
    /// `param->member`.
    Deref(String, String),
    /// An API constant (`VK_UUID_SIZE`).
    Const(String),
    Lit(String),
    Op(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Len {
    One,
    Count(Vec<LenTok>),
    /// `Count` elements `stride` bytes apart (vk.xml's `stride`: the sibling that gives it).
    Strided(Vec<LenTok>, String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum PElem {
    Elem(Elem),
    Bytes,
    Str,
    StrArray,
    StructPtrArray(String),
    /// `void**`: the pointer value written by the driver.
    OpaqueOut,
    /// A C array parameter (`const float blendConstants[4]`), a pointer to a fixed array in ash.
    FixedArr(Elem, String),
    /// An array of pointers to arrays (`ppBuildRangeInfos`), the length of the i-th from a member
    /// of the i-th element of a sibling array (vk.xml `len="infoCount,pInfos[].geometryCount"`):
    /// (element, sibling array, member).
    Nested(Elem, String, String),
    /// A generic chain header (`VkBaseOutStructure*`): the struct it points to, and its chain,
    /// walked by sType like a pNext chain.
    Chain,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    SType,
    Val(Elem),
    /// Fixed array, flattened; the string is the Rust element-count expression.
    Fixed(Elem, String),
    FixedStr(String),
    PNext,
    Ptr {
        len: Len,
        elem: PElem,
    },
}

pub struct Field {
    pub decl: Decl,
    pub snake: String,
    pub kind: Kind,
    /// Rust condition on `v` under which the pointer is followed (config::CONDITIONAL_MEMBERS).
    pub cond: Option<String>,
}

pub struct SField {
    pub def: StructDef,
    pub fields: Vec<Field>,
    pub lifetime: bool,
}

pub struct Cmd {
    pub def: CommandDef,
    pub params: Vec<Field>,
    /// Return type category when the command returns a value other than VkResult/void; the
    /// value is passed to the encoder as an extra trailing `ret` argument.
    pub ret_value: Option<(TypeCat, String)>,
    /// Extra trailing argument giving a byte size the registry cannot express (template data).
    pub data_size_param: bool,
    pub level: Level,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Instance,
    Device,
}

pub struct Analysis {
    pub structs: BTreeMap<String, SField>,
    /// Encodable structs in registry order.
    pub struct_order: Vec<String>,
    pub cmds: Vec<Cmd>,
    /// Unsupported commands with the reason.
    pub unsupported: Vec<(String, String)>,
    /// Extensions that have at least one unsupported command (the layer hides them), with the
    /// reason (that of their first unsupported command).
    pub unsupported_exts: BTreeMap<String, String>,
}

pub fn ash_name(reg: &Registry, ty: &str) -> String {
    let ty = reg.resolve(ty);
    match ty {
        "void" => "c_void".into(),
        "char" => "c_char".into(),
        "float" => "f32".into(),
        "double" => "f64".into(),
        "uint8_t" => "u8".into(),
        "uint16_t" => "u16".into(),
        "uint32_t" => "u32".into(),
        "uint64_t" => "u64".into(),
        "int8_t" => "i8".into(),
        "int16_t" => "i16".into(),
        "int32_t" => "i32".into(),
        "int64_t" => "i64".into(),
        "int" => "c_int".into(),
        "size_t" => "usize".into(),
        _ => {
            if let Some(rest) = ty.strip_prefix("Vk") {
                format!("vk::{}", rest.replace("FlagBits", "Flags"))
            } else {
                format!("vk::{ty}")
            }
        }
    }
}

fn parse_len(expr: &str, siblings: &[Decl]) -> Result<Vec<LenTok>, String> {
    let mut toks = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let s: String = chars[i..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            i += s.len();
            toks.push(LenTok::Lit(s));
        } else if c.is_alphabetic() || c == '_' {
            let s: String = chars[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            i += s.len();
            if chars.get(i) == Some(&'-') && chars.get(i + 1) == Some(&'>') {
                i += 2;
                let m: String = chars[i..]
                    .iter()
                    .take_while(|c| c.is_alphanumeric() || **c == '_')
                    .collect();
                i += m.len();
                if !siblings.iter().any(|d| d.name == s) {
                    return Err(format!("length `{expr}` names unknown `{s}`"));
                }
                toks.push(LenTok::Deref(s, m));
            } else if s.starts_with("VK_") {
                toks.push(LenTok::Const(s));
            } else {
                if !siblings.iter().any(|d| d.name == s) {
                    return Err(format!("length `{expr}` names unknown `{s}`"));
                }
                toks.push(LenTok::Ident(s));
            }
        } else if "+-*/()".contains(c) {
            toks.push(LenTok::Op(c.to_string()));
            i += 1;
        } else {
            return Err(format!("length `{expr}` is not an expression we evaluate"));
        }
    }
    if toks.is_empty() {
        return Err(format!("empty length `{expr}`"));
    }
    Ok(toks)
}

fn elem_of(reg: &Registry, ty: &str) -> Result<Elem, String> {
    let cat = reg.cat(ty);
    let ty = reg.resolve(ty).to_string();
    match cat {
        TypeCat::Struct => Ok(Elem::Struct(ty)),
        TypeCat::Union => Ok(Elem::Union(ty)),
        TypeCat::Foreign | TypeCat::Void | TypeCat::Char => {
            Err(format!("type {ty} is not representable"))
        }
        c => Ok(Elem::Scalar(c, ty)),
    }
}

fn dims_expr(dims: &[String]) -> String {
    dims.iter()
        .map(|d| match d.strip_prefix("VK_") {
            Some(c) => format!("vk::{c}"),
            None => d.clone(),
        })
        .collect::<Vec<_>>()
        .join(" * ")
}

/// How a member or parameter is copied; `param` selects parameter rules (C array parameters).
fn classify(reg: &Registry, d: &Decl, siblings: &[Decl], param: bool) -> Result<Kind, String> {
    if d.bitfield {
        return Err(format!("bitfield member {}", d.name));
    }
    if !param && d.name == "sType" && d.ptrs.is_empty() {
        return Ok(Kind::SType);
    }
    if !param && d.name == "pNext" {
        return Ok(Kind::PNext);
    }
    let cat = reg.cat(&d.ty);
    let lens: Vec<&str> = d
        .len
        .as_deref()
        .map(|l| l.split(',').collect())
        .unwrap_or_default();
    let count = |first: &str| -> Result<Len, String> {
        let e = if first.starts_with("latexmath") {
            d.altlen
                .clone()
                .ok_or_else(|| format!("{}: latexmath length without altlen", d.name))?
        } else {
            first.to_string()
        };
        Ok(Len::Count(parse_len(&e, siblings)?))
    };
    match d.ptrs.len() {
        0 => {
            if !d.dims.is_empty() {
                if param {
                    return Ok(Kind::Ptr {
                        len: Len::One,
                        elem: PElem::FixedArr(elem_of(reg, &d.ty)?, dims_expr(&d.dims)),
                    });
                }
                if cat == TypeCat::Char {
                    return Ok(Kind::FixedStr(dims_expr(&d.dims)));
                }
                return Ok(Kind::Fixed(elem_of(reg, &d.ty)?, dims_expr(&d.dims)));
            }
            Ok(Kind::Val(elem_of(reg, &d.ty)?))
        }
        1 => {
            if !d.dims.is_empty() {
                return Err(format!("{}: array of pointers", d.name));
            }
            match cat {
                // ash declares `VkRemoteAddressNV*` as `*mut c_void`; it holds a pointer value.
                TypeCat::OpaquePtr if d.ty == "VkRemoteAddressNV" => Ok(Kind::Ptr {
                    len: Len::One,
                    elem: PElem::OpaqueOut,
                }),
                TypeCat::OpaquePtr => Ok(Kind::Val(Elem::Scalar(TypeCat::OpaquePtr, d.ty.clone()))),
                TypeCat::Void => match lens.first() {
                    Some(l) => Ok(Kind::Ptr {
                        len: count(l)?,
                        elem: PElem::Bytes,
                    }),
                    None => Ok(Kind::Val(Elem::Scalar(TypeCat::OpaquePtr, "void".into()))),
                },
                TypeCat::Char => match lens.first() {
                    None | Some(&"null-terminated") => Ok(Kind::Ptr {
                        len: Len::One,
                        elem: PElem::Str,
                    }),
                    Some(l) => Ok(Kind::Ptr {
                        len: count(l)?,
                        elem: PElem::Elem(Elem::Scalar(TypeCat::Prim("i8"), "char".into())),
                    }),
                },
                _ if matches!(
                    reg.resolve(&d.ty),
                    "VkBaseOutStructure" | "VkBaseInStructure"
                ) =>
                {
                    Ok(Kind::Ptr {
                        len: Len::One,
                        elem: PElem::Chain,
                    })
                }
                _ => {
                    let elem = PElem::Elem(elem_of(reg, &d.ty)?);
                    match (lens.first(), &d.stride) {
                        (None, _) => Ok(Kind::Ptr {
                            len: Len::One,
                            elem,
                        }),
                        (Some(l), None) => Ok(Kind::Ptr {
                            len: count(l)?,
                            elem,
                        }),
                        (Some(l), Some(stride)) => {
                            if !siblings.iter().any(|x| &x.name == stride) {
                                return Err(format!("{}: stride names unknown `{stride}`", d.name));
                            }
                            let Len::Count(toks) = count(l)? else {
                                unreachable!("count gives Count")
                            };
                            Ok(Kind::Ptr {
                                len: Len::Strided(toks, stride.clone()),
                                elem,
                            })
                        }
                    }
                }
            }
        }
        2 => match (cat, lens.as_slice()) {
            (TypeCat::Char, [l, "null-terminated"]) => Ok(Kind::Ptr {
                len: count(l)?,
                elem: PElem::StrArray,
            }),
            (TypeCat::Struct, [l, "1"]) => Ok(Kind::Ptr {
                len: count(l)?,
                elem: PElem::StructPtrArray(reg.resolve(&d.ty).to_string()),
            }),
            (TypeCat::Void, []) if param && !d.ptrs[0] => Ok(Kind::Ptr {
                len: Len::One,
                elem: PElem::OpaqueOut,
            }),
            (_, [l, inner]) if d.ptrs.iter().all(|c| *c) && inner.contains("[].") => {
                let (array, member) = inner.split_once("[].").expect("checked");
                let sib = siblings.iter().find(|x| x.name == array).ok_or_else(|| {
                    format!("{}: length `{inner}` names unknown `{array}`", d.name)
                })?;
                let has_member = reg
                    .structs
                    .get(reg.resolve(&sib.ty))
                    .is_some_and(|st| st.members.iter().any(|m| m.name == member));
                if sib.ptrs.len() != 1 || !has_member {
                    return Err(format!(
                        "{}: length `{inner}` is not a member of an array of structs",
                        d.name
                    ));
                }
                Ok(Kind::Ptr {
                    len: count(l)?,
                    elem: PElem::Nested(elem_of(reg, &d.ty)?, array.into(), member.into()),
                })
            }
            (TypeCat::Void, [_]) => Err(format!(
                "{}: array of pointers to data whose sizes the registry does not give",
                d.name
            )),
            _ => Err(format!(
                "{}: pointer to pointer without a length we can follow",
                d.name
            )),
        },
        _ => Err(format!("{}: too many pointer levels", d.name)),
    }
}

fn referenced_structs(k: &Kind) -> Vec<String> {
    match k {
        Kind::Val(Elem::Struct(s)) | Kind::Fixed(Elem::Struct(s), _) => vec![s.clone()],
        Kind::Ptr {
            elem: PElem::Elem(Elem::Struct(s)),
            ..
        }
        | Kind::Ptr {
            elem: PElem::StructPtrArray(s),
            ..
        }
        | Kind::Ptr {
            elem: PElem::FixedArr(Elem::Struct(s), _),
            ..
        }
        | Kind::Ptr {
            elem: PElem::Nested(Elem::Struct(s), ..),
            ..
        } => vec![s.clone()],
        _ => vec![],
    }
}

pub fn analyze(reg: &Registry) -> Analysis {
    // Fixed point: a struct is encodable if all its members classify and every struct it
    // contains is encodable. Unions are copied as raw bytes and so always encodable.
    let mut bad: BTreeMap<String, String> = BTreeMap::new();
    for s in config::SKIP_STRUCTS {
        bad.insert(
            s.to_string(),
            "listed in codegen config SKIP_STRUCTS".into(),
        );
    }
    // Only types that a supported feature/extension requires (and what they contain) exist for us:
    // provisional and foreign-platform structs may be absent from ash or laid out differently.
    let mut reachable: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = reg
        .required_types
        .iter()
        .map(|t| reg.resolve(t).to_string())
        .collect();
    while let Some(t) = todo.pop() {
        if !reachable.insert(t.clone()) {
            continue;
        }
        if let Some(def) = reg.structs.get(&t) {
            for m in &def.members {
                todo.push(reg.resolve(&m.ty).to_string());
            }
        }
    }
    for name in reg.structs.keys() {
        if !reachable.contains(name) {
            bad.insert(
                name.clone(),
                "not required by a supported feature or extension".into(),
            );
        }
    }
    for name in ["VkBaseInStructure", "VkBaseOutStructure"] {
        bad.insert(name.into(), "generic chain header".into());
    }
    let mut classified: BTreeMap<String, Vec<Field>> = BTreeMap::new();
    for (name, def) in &reg.structs {
        let mut fields = Vec::new();
        for m in &def.members {
            match classify(reg, m, &def.members, false) {
                Ok(kind) => {
                    let cond = config::CONDITIONAL_MEMBERS
                        .iter()
                        .find(|(s, mm, _)| s == name && *mm == m.name)
                        .map(|(_, _, c)| c.to_string());
                    fields.push(Field {
                        decl: m.clone(),
                        snake: snake(&m.name),
                        kind,
                        cond,
                    })
                }
                Err(e) => {
                    if !def.is_union {
                        bad.entry(name.clone()).or_insert(e);
                    }
                }
            }
        }
        classified.insert(name.clone(), fields);
    }
    loop {
        let mut changed = false;
        for (name, fields) in &classified {
            if bad.contains_key(name) || reg.structs[name].is_union {
                continue;
            }
            for f in fields {
                for r in referenced_structs(&f.kind) {
                    if let Some(why) = bad.get(&r) {
                        let why = format!("contains {r} ({why})");
                        bad.insert(name.clone(), why);
                        changed = true;
                        break;
                    }
                }
                if bad.contains_key(name) {
                    break;
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Lifetimes as ash assigns them: structs with a pointer member, or containing a type that
    // has one; unions only through their members' types.
    let mut lifetime: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = lifetime.len();
        for (name, def) in &reg.structs {
            let has = def.members.iter().any(|m| {
                (!def.is_union && !m.ptrs.is_empty()) || lifetime.contains(reg.resolve(&m.ty))
            });
            if has {
                lifetime.insert(name.clone());
            }
        }
        if lifetime.len() == before {
            break;
        }
    }

    let mut structs = BTreeMap::new();
    let mut struct_order = Vec::new();
    for name in &reg.struct_order {
        let def = &reg.structs[name];
        if bad.contains_key(name) {
            continue;
        }
        let fields = classified.remove(name).unwrap_or_default();
        struct_order.push(name.clone());
        structs.insert(
            name.clone(),
            SField {
                def: def.clone(),
                fields,
                lifetime: lifetime.contains(name),
            },
        );
    }
    // Unions are always encodable but their lifetime flag still matters.
    for (name, def) in &reg.structs {
        if def.is_union && !structs.contains_key(name) {
            structs.insert(
                name.clone(),
                SField {
                    def: def.clone(),
                    fields: Vec::new(),
                    lifetime: lifetime.contains(name),
                },
            );
        }
    }

    let mut cmds = Vec::new();
    let mut unsupported: Vec<(String, String)> = reg.excluded.clone();
    for c in &reg.commands {
        if config::SKIP_COMMANDS.contains(&c.name.as_str()) {
            unsupported.push((
                c.name.clone(),
                "listed in codegen config SKIP_COMMANDS".into(),
            ));
            continue;
        }
        let template = config::TEMPLATE_DATA.iter().any(|(n, _)| *n == c.name);
        let mut params = Vec::new();
        let mut err = None;
        for p in &c.params {
            let mut p = p.clone();
            if template && p.name == "pData" {
                // The layer computes the byte size from the template and passes it as `data_size`.
                p.len = Some("dataSize".into());
            }
            if let Some((_, _, inner)) = config::INNER_LENGTHS
                .iter()
                .find(|(cmd, n, _)| *cmd == c.name && *n == p.name)
            {
                if let Some(l) = p.len.as_mut().filter(|l| !l.contains(',')) {
                    *l = format!("{l},{inner}");
                }
            }
            let mut sib = c.params.clone();
            if template {
                sib.push(synthetic_data_size());
            }
            match classify(reg, &p, &sib, true) {
                Ok(kind) => {
                    for r in referenced_structs(&kind) {
                        if let Some(why) = bad.get(&r) {
                            err.get_or_insert(format!("{}: {r} ({why})", p.name));
                        }
                    }
                    params.push(Field {
                        snake: snake(&p.name),
                        decl: p,
                        kind,
                        cond: None,
                    });
                }
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = err {
            unsupported.push((c.name.clone(), e));
            continue;
        }
        let ret_value = match c.ret.as_str() {
            "void" | "VkResult" => None,
            t => Some((reg.cat(t), t.to_string())),
        };
        let first = c
            .params
            .first()
            .map(|p| reg.resolve(&p.ty).to_string())
            .unwrap_or_default();
        let level = match first.as_str() {
            "VkDevice" | "VkQueue" | "VkCommandBuffer" => Level::Device,
            _ => Level::Instance,
        };
        cmds.push(Cmd {
            def: c.clone(),
            params,
            ret_value,
            data_size_param: template,
            level,
        });
    }
    unsupported.sort();
    let mut unsupported_exts = BTreeMap::new();
    for (c, why) in &unsupported {
        if let Some(o) = reg.command_origin.get(c) {
            if !o.starts_with("VK_VERSION") {
                unsupported_exts
                    .entry(o.clone())
                    .or_insert_with(|| format!("{c}: {why}"));
            }
        }
    }
    for e in config::UNREPLAYABLE_EXTENSIONS {
        unsupported_exts.insert(
            e.to_string(),
            "its replay needs video std-header data the registry leaves opaque".into(),
        );
    }
    Analysis {
        structs,
        struct_order,
        cmds,
        unsupported,
        unsupported_exts,
    }
}

/// The `dataSize` argument the layer adds for template-data commands.
pub fn synthetic_data_size() -> Decl {
    Decl {
        name: "dataSize".into(),
        ty: "size_t".into(),
        ptrs: vec![],
        dims: vec![],
        bitfield: false,
        len: None,
        altlen: None,
        optional: false,
        stride: None,
        values: Some("synthetic".into()),
        noauto: false,
    }
}
