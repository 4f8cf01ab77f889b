//! Emits the replayer's checks from vk.xml (`replayer/src/generated/checks.rs`): array counts
//! against their arrays, required handles and struct members, enum values the driver reads, the
//! handles a destroy ends, and each command's kind. Split from `emit_replay` (the dispatch).

use crate::analyze::{Analysis, Elem, Field, Kind, Len, LenTok, PElem, SField};
use crate::emit_replay::{has_pnext, objtype};
use crate::emit_stream::HEADER;
use crate::model::{snake, Registry, TypeCat};
use std::fmt::Write;

/// The length of an array as a Rust `u64` expression over the owned decoded values (`base.`
/// prefixes siblings: `v.` in structs, `p.` in commands), or `None` when it cannot be said
/// (API constants, the template data size the registry cannot express).
fn check_len(an: &Analysis, toks: &[LenTok], sib: &[Field], base: &str) -> Option<String> {
    let mut s = String::new();
    for t in toks {
        match t {
            LenTok::Ident(name) => {
                let f = sib.iter().find(|f| &f.decl.name == name)?;
                if f.decl.values.as_deref() == Some("synthetic") {
                    return None;
                }
                match &f.kind {
                    Kind::Val(Elem::Scalar(..)) => {
                        let _ = write!(s, "({base}{} as u64)", f.snake);
                    }
                    Kind::Ptr {
                        len: Len::One,
                        elem: PElem::Elem(Elem::Scalar(..)),
                    } => {
                        let _ = write!(s, "{base}{}.map_or(0u64, |n| n as u64)", f.snake);
                    }
                    _ => return None,
                }
            }
            LenTok::Deref(p, m) => {
                let f = sib.iter().find(|f| &f.decl.name == p)?;
                let Kind::Ptr {
                    len: Len::One,
                    elem: PElem::Elem(Elem::Struct(st)),
                } = &f.kind
                else {
                    return None;
                };
                let mf = an
                    .structs
                    .get(st)?
                    .fields
                    .iter()
                    .find(|x| &x.decl.name == m)?;
                let _ = write!(
                    s,
                    "{base}{}.as_ref().map_or(0u64, |z| z.{} as u64)",
                    f.snake, mf.snake
                );
            }
            LenTok::Lit(l) => {
                let _ = write!(s, "{l}u64");
            }
            LenTok::Op(o) => {
                let _ = write!(s, " {o} ");
            }
            LenTok::Const(_) => return None,
        }
    }
    Some(s)
}

/// Checks of one set of fields (a struct's members or a command's parameters): every array at
/// least as long as its count says, a required array present when its count is not 0, and the
/// same inside nested structs and pNext chains. `what` names the owner in messages. With
/// `handles` (a command's parameters, or a struct the app fills in rather than one the driver
/// returns), a required handle that is VK_NULL_HANDLE is refused too.
fn check_fields(
    an: &Analysis,
    fields: &[Field],
    base: &str,
    what: &str,
    needs: &std::collections::BTreeSet<String>,
    chain: bool,
    handles: bool,
) -> String {
    let mut o = String::new();
    for f in fields {
        let src = format!("{base}{}", f.snake);
        let name = &f.decl.name;
        match &f.kind {
            Kind::PNext if chain => {
                // Most chains are empty: no call for them (every call checks several structs).
                let _ = writeln!(o, "if !{src}.is_empty() {{ c_chain(&{src})?; }}");
            }
            // A required handle left null reaches the driver as a null object (the implicit
            // `*-parameter` valid usage): a command's parameter, or a member of a struct it reads
            // that vk.xml neither marks optional nor exempts from implicit valid usage (a member
            // the spec ignores in some cases, such as VkDescriptorImageInfo's, is exempt).
            Kind::Val(Elem::Scalar(TypeCat::Handle { .. }, _))
                if handles
                    && !f.decl.optional
                    && (base == "p." || (!f.decl.noauto && f.cond.is_none())) =>
            {
                let _ = writeln!(
                    o,
                    "if {src} == 0 {{ return Err(\"{what}{name} is VK_NULL_HANDLE\".into()); }}"
                );
            }
            Kind::Val(Elem::Struct(st)) if needs.contains(st) => {
                let _ = writeln!(o, "c_{st}(&{src})?;");
            }
            Kind::Fixed(Elem::Struct(st), _) if needs.contains(st) => {
                let _ = writeln!(o, "for y in {src}.iter() {{ c_{st}(y)?; }}");
            }
            Kind::Ptr { len, elem } => {
                if let Len::Count(toks) | Len::Strided(toks, _) = len {
                    if matches!(elem, PElem::FixedArr(..)) {
                        continue;
                    }
                    if let Some(n) = check_len(an, toks, fields, base) {
                        let expr = f
                            .decl
                            .altlen
                            .clone()
                            .or(f.decl.len.clone())
                            .unwrap_or_default();
                        let expr = expr.replace('"', "'");
                        // An array of arrays: the outer length here, the inner ones below.
                        let expr = match elem {
                            PElem::Nested(..) => expr.split(',').next().unwrap_or("").to_string(),
                            _ => expr,
                        };
                        let required = !f.decl.optional && f.cond.is_none();
                        let _ = writeln!(
                            o,
                            "arr({src}.as_ref().map(|x| x.len()), {n}, \"{what}{expr}\", \"{name}\", {required})?;"
                        );
                    }
                }
                if let PElem::Nested(_, array, m) = elem {
                    // Each inner array as long as the member of its sibling element says.
                    let sf = fields.iter().find(|x| &x.decl.name == array);
                    if let Some(sf) = sf {
                        let _ = writeln!(
                            o,
                            "if let (Some(x), Some(s)) = (&{src}, &{base}{}) {{ for (k, y) in x.iter().enumerate() {{ arr(y.as_ref().map(|z| z.len()), s.get(k).map_or(0u64, |i| i.{} as u64), \"{what}{array}[].{m}\", \"{name}[]\", true)?; }} }}",
                            sf.snake,
                            snake(m)
                        );
                    }
                }
                let each = match elem {
                    PElem::Elem(Elem::Struct(st)) if needs.contains(st) => match len {
                        Len::One => format!("c_{st}(x)?;"),
                        Len::Count(_) | Len::Strided(..) => {
                            format!("for y in x.iter() {{ c_{st}(y)?; }}")
                        }
                    },
                    PElem::StructPtrArray(st) if needs.contains(st) => {
                        format!("for y in x.iter().flatten() {{ c_{st}(y)?; }}")
                    }
                    _ => continue,
                };
                let _ = writeln!(o, "if let Some(x) = &{src} {{ {each} }}");
            }
            _ => {}
        }
    }
    o
}

/// The structs whose checks are not empty, and whether any pNext chain needs checking: a
/// fixpoint over nesting and chains. `body` emits a struct's checks given the set so far.
fn structs_needing(
    an: &Analysis,
    mut body: impl FnMut(&SField, &std::collections::BTreeSet<String>, bool) -> String,
) -> (std::collections::BTreeSet<String>, bool) {
    let mut needs = std::collections::BTreeSet::new();
    let mut chain = false;
    loop {
        let before = (needs.len(), chain);
        for name in &an.struct_order {
            let s = &an.structs[name];
            if s.def.is_union || needs.contains(name) {
                continue;
            }
            if !body(s, &needs, chain).is_empty() || (chain && has_pnext(&s.fields)) {
                needs.insert(name.clone());
            }
        }
        chain = an
            .struct_order
            .iter()
            .any(|n| an.structs[n].def.stype.is_some() && needs.contains(n));
        if (needs.len(), chain) == before {
            return (needs, chain);
        }
    }
}

/// `{prefix}_chain`: runs `{prefix}_{struct}` on each element of a pNext chain that has checks.
fn chain_fn(an: &Analysis, prefix: &str, needs: &std::collections::BTreeSet<String>) -> String {
    let mut o = format!("fn {prefix}_chain(c: &[PNext]) -> R {{\nfor e in c {{\nmatch e {{\n");
    for name in &an.struct_order {
        let s = &an.structs[name];
        if s.def.stype.is_some() && has_pnext(&s.fields) && needs.contains(name) {
            let _ = writeln!(o, "PNext::{name}(x) => {prefix}_{name}(x)?,");
        }
    }
    o.push_str("_ => {}\n}\n}\nOk(())\n}\n\n");
    o
}

/// Every enum value vk.xml defines, by enum type (`emit_extensions::Facts::enum_values`).
pub type EnumValues = std::collections::BTreeMap<String, std::collections::BTreeSet<i64>>;

/// Whether a declaration is read by the driver (every pointer level const): only inputs are
/// checked for enum values (what a newer driver returned may be a value this vk.xml lacks).
fn input(f: &Field) -> bool {
    f.decl.ptrs.iter().all(|c| *c)
}

/// The enum type of a field the spec gives implicit valid usage (a valid value of its type).
fn checked_enum<'a>(f: &'a Field, enums: &EnumValues) -> Option<&'a str> {
    let ty = f.decl.ty.as_str();
    (!f.decl.noauto && enums.get(ty).is_some_and(|v| !v.is_empty())).then_some(ty)
}

/// Enum checks of one set of fields, inputs only: each enum value one vk.xml defines for its
/// type (drivers index tables with them: an undefined swizzle crashed NVIDIA's driver), in
/// nested structs, input arrays and pNext chains too. `used` collects the enum types named.
fn enum_fields(
    fields: &[Field],
    base: &str,
    what: &str,
    needs: &std::collections::BTreeSet<String>,
    chain: bool,
    enums: &EnumValues,
    used: &mut std::collections::BTreeSet<String>,
) -> String {
    let mut o = String::new();
    for f in fields {
        let src = format!("{base}{}", f.snake);
        let name = &f.decl.name;
        match &f.kind {
            Kind::PNext if chain => {
                let _ = writeln!(o, "if !{src}.is_empty() {{ e_chain(&{src})?; }}");
            }
            Kind::Val(Elem::Scalar(TypeCat::Enum, _)) => {
                let Some(ty) = checked_enum(f, enums) else {
                    continue;
                };
                used.insert(ty.to_string());
                let zero = if f.decl.optional {
                    format!("{src} != 0 && ")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    o,
                    "if {zero}!ok_{ty}({src}) {{ return Err(bad_enum(\"{what}{name}\", \"{ty}\", {src})); }}"
                );
            }
            Kind::Val(Elem::Struct(st)) if needs.contains(st) => {
                let _ = writeln!(o, "e_{st}(&{src})?;");
            }
            Kind::Fixed(Elem::Struct(st), _) if needs.contains(st) => {
                let _ = writeln!(o, "for y in {src}.iter() {{ e_{st}(y)?; }}");
            }
            Kind::Ptr { len, elem } if input(f) => {
                let each = match (elem, len) {
                    (PElem::Elem(Elem::Struct(st)), Len::One) if needs.contains(st) => {
                        format!("e_{st}(x)?;")
                    }
                    (PElem::Elem(Elem::Struct(st)), Len::Count(_) | Len::Strided(..))
                        if needs.contains(st) =>
                    {
                        format!("for y in x.iter() {{ e_{st}(y)?; }}")
                    }
                    (PElem::StructPtrArray(st), _) if needs.contains(st) => {
                        format!("for y in x.iter().flatten() {{ e_{st}(y)?; }}")
                    }
                    (PElem::Elem(Elem::Scalar(TypeCat::Enum, _)), Len::Count(_)) => {
                        let Some(ty) = checked_enum(f, enums) else {
                            continue;
                        };
                        used.insert(ty.to_string());
                        format!(
                            "for &y in x.iter() {{ if !ok_{ty}(y) {{ return Err(bad_enum(\"{what}{name}\", \"{ty}\", y)); }} }}"
                        )
                    }
                    _ => continue,
                };
                let _ = writeln!(o, "if let Some(x) = &{src} {{ {each} }}");
            }
            _ => {}
        }
    }
    o
}

/// `ok_{ty}`: whether an i32 is a value vk.xml defines for enum `ty`, as ranges.
fn enum_predicate(ty: &str, values: &std::collections::BTreeSet<i64>) -> String {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &v in values {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == v => *hi = v,
            _ => runs.push((v, v)),
        }
    }
    let pats: Vec<String> = runs
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                format!("{lo}")
            } else {
                format!("{lo}..={hi}")
            }
        })
        .collect();
    format!(
        "#[inline(always)]\nfn ok_{ty}(v: i32) -> bool {{ matches!(v, {}) }}\n",
        pats.join(" | ")
    )
}

/// The replayer's checks of a decoded call before the driver sees it (`replay::validate` holds
/// the state machines): array counts against their arrays, the handles a call destroys, and
/// what kind of command it is.
pub fn checks_rs(reg: &Registry, an: &Analysis, enums: &EnumValues) -> String {
    let _ = reg;
    let (needs, chain) = structs_needing(an, |s, needs, chain| {
        check_fields(an, &s.fields, "v.", "", needs, chain, !s.def.returned_only)
    });
    let mut scratch = std::collections::BTreeSet::new();
    let (e_needs, e_chain) = structs_needing(an, |s, needs, chain| {
        enum_fields(&s.fields, "v.", "", needs, chain, enums, &mut scratch)
    });
    let mut used = std::collections::BTreeSet::new();
    let mut o = String::from(HEADER);
    o.push_str(
        "//! Checks of a decoded call that need no replay state, generated from vk.xml:\n\
         //! [`counts_and_handles`] (every array at least as long as the count the driver will read,\n\
         //! a required array present when its count is not 0, a required handle not VK_NULL_HANDLE,\n\
         //! nested structs and pNext chains included; the handle walk fused in), [`destroyed`]\n\
         //! (the handles a `vkDestroy*`/`vkFree*` call ends), [`kind`] and [`flags`].\n\
         #![allow(non_snake_case, unused_variables, unused_parens, clippy::all)]\n\
         use ash::vk;\nuse vkstream::types::*;\nuse vkstream::{Call, PNext};\n\n\
         type R = Result<(), String>;\n\n\
         /// An array of `len` elements (`None`: NULL) where the driver reads `n` (inlined: every\n\
         /// call checks several; the message is built out of line).\n\
         #[inline(always)]\n\
         fn arr(len: Option<usize>, n: u64, count: &str, name: &str, required: bool) -> R {\n\
         match len {\n\
         Some(l) if (l as u64) < n => Err(short(count, n, name, Some(l))),\n\
         None if required && n > 0 => Err(short(count, n, name, None)),\n\
         _ => Ok(()),\n}\n}\n\n\
         #[cold]\n\
         #[inline(never)]\n\
         fn short(count: &str, n: u64, name: &str, len: Option<usize>) -> String {\n\
         match len {\n\
         Some(l) => format!(\"{count} is {n} but {name} holds {l}\"),\n\
         None => format!(\"{count} is {n} but {name} is NULL\"),\n}\n}\n\n\
         #[cold]\n\
         #[inline(never)]\n\
         fn bad_enum(name: &str, ty: &str, v: i32) -> String {\n\
         format!(\"{name} is {v}, which is not a {ty} value\")\n}\n\n",
    );
    if chain {
        o.push_str(&chain_fn(an, "c", &needs));
    }
    for name in &an.struct_order {
        if !needs.contains(name) {
            continue;
        }
        let s = &an.structs[name];
        let body = check_fields(
            an,
            &s.fields,
            "v.",
            &format!("{name}."),
            &needs,
            chain,
            !s.def.returned_only,
        );
        let _ = writeln!(o, "fn c_{name}(v: &{name}) -> R {{\n{body}Ok(())\n}}");
    }
    if e_chain {
        o.push_str(&chain_fn(an, "e", &e_needs));
    }
    for name in &an.struct_order {
        if !e_needs.contains(name) {
            continue;
        }
        let s = &an.structs[name];
        let body = enum_fields(
            &s.fields,
            "v.",
            &format!("{name}."),
            &e_needs,
            e_chain,
            enums,
            &mut used,
        );
        let _ = writeln!(o, "fn e_{name}(v: &{name}) -> R {{\n{body}Ok(())\n}}");
    }
    // The handle walk (`vkstream::handles::walk`) again, fused with the counts: one match per
    // call for both, the parameters read once.
    let (walkers, walks) = crate::emit_stream::walk_parts(an);
    o.push_str(&walkers);
    o.push_str(
        "\n/// Array counts of `call` against its arrays (the message names the count and the array),\n\
         /// then `f` for every non-null handle it names, as `vkstream::handles::walk` does: one pass.\n\
         pub fn counts_and_handles<F: FnMut(vk::ObjectType, u64, bool) + ?Sized>(call: &Call, f: &mut F) -> R {\nmatch call {\n",
    );
    for (c, (name, walk)) in an.cmds.iter().zip(&walks) {
        debug_assert_eq!(&c.def.name, name);
        let body = check_fields(an, &c.params, "p.", "", &needs, chain, true)
            + &enum_fields(&c.params, "p.", "", &e_needs, e_chain, enums, &mut used);
        if !body.is_empty() || !walk.is_empty() {
            let _ = writeln!(o, "Call::{name}(p) => {{\n{body}{walk}}}");
        }
    }
    o.push_str("_ => {}\n}\nOk(())\n}\n\n");

    o.push_str(
        "/// Calls `f` for each handle a `vkDestroy*`/`vkFree*` call ends (its last handle parameter).\n\
         pub fn destroyed(call: &Call, f: &mut dyn FnMut(vk::ObjectType, u64)) {\nmatch call {\n",
    );
    for c in &an.cmds {
        let name = &c.def.name;
        if !(name.starts_with("vkDestroy") || name.starts_with("vkFree")) {
            continue;
        }
        let last = c.params.iter().rev().find_map(|p| match &p.kind {
            Kind::Val(Elem::Scalar(cat @ TypeCat::Handle { .. }, _)) => Some(format!(
                "if p.{0} != 0 {{ f({1}, p.{0}); }}",
                p.snake,
                objtype(cat)
            )),
            Kind::Ptr {
                len: Len::Count(_),
                elem: PElem::Elem(Elem::Scalar(cat @ TypeCat::Handle { .. }, _)),
            } => Some(format!(
                "for h in p.{}.iter().flatten() {{ if *h != 0 {{ f({}, *h); }} }}",
                p.snake,
                objtype(cat)
            )),
            _ => None,
        });
        if let Some(body) = last {
            let _ = writeln!(o, "Call::{name}(p) => {{ {body} }}");
        }
    }
    o.push_str("_ => {}\n}\n}\n\n");

    o.push_str(
        "/// What a command does, by its name: `CREATE` (vkCreate*/vkAllocate*), `DESTROY`\n\
         /// (vkDestroy*/vkFree*), else `OTHER`; recorded commands (vkCmd*) are `RECORD` or above:\n\
         /// draws (`DRAW`, `DRAW_INDEXED`: they read an index buffer; `DRAW_MESH`: no vertex input),\n\
         /// dispatches, and the commands that open, advance and close a render pass instance.\n\
         pub const OTHER: u8 = 0;\npub const CREATE: u8 = 1;\npub const DESTROY: u8 = 2;\npub const RECORD: u8 = 3;\n\
         pub const DRAW: u8 = 4;\npub const DRAW_INDEXED: u8 = 5;\npub const DRAW_MESH: u8 = 6;\npub const DISPATCH: u8 = 7;\n\
         pub const PASS_BEGIN: u8 = 8;\npub const PASS_NEXT: u8 = 9;\npub const PASS_END: u8 = 10;\n\
         pub fn kind(call: &Call) -> u8 {\nmatch call {\n",
    );
    let mut by: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for c in &an.cmds {
        by.entry(kind_of(&c.def.name))
            .or_default()
            .push(format!("Call::{}(_)", c.def.name));
    }
    for (k, names) in by {
        if k != "OTHER" {
            let _ = writeln!(o, "{} => {k},", names.join(" | "));
        }
    }
    o.push_str("_ => OTHER,\n}\n}\n");
    o.push_str(&crate::emit_validate::flags(an));
    o.push_str("\n/// Whether a value is one vk.xml defines for its enum type, core and extensions alike.\n");
    for ty in &used {
        o.push_str(&enum_predicate(ty, &enums[ty]));
    }
    o
}

/// A command's class for `checks::kind`, by its name.
pub(crate) fn kind_of(n: &str) -> &'static str {
    if n.starts_with("vkCreate") || n.starts_with("vkAllocate") {
        "CREATE"
    } else if n.starts_with("vkDestroy") || n.starts_with("vkFree") {
        "DESTROY"
    } else if n.starts_with("vkCmdDrawMeshTasks") || n.starts_with("vkCmdDrawCluster") {
        "DRAW_MESH"
    } else if n.starts_with("vkCmdDraw") && n.contains("Indexed") {
        "DRAW_INDEXED"
    } else if n.starts_with("vkCmdDraw") {
        "DRAW"
    } else if n.starts_with("vkCmdDispatch") {
        "DISPATCH"
    } else if n.starts_with("vkCmdBeginRenderPass") || n.starts_with("vkCmdBeginRendering") {
        "PASS_BEGIN"
    } else if n.starts_with("vkCmdNextSubpass") {
        "PASS_NEXT"
    } else if n.starts_with("vkCmdEndRenderPass") || n.starts_with("vkCmdEndRendering") {
        "PASS_END"
    } else if n.starts_with("vkCmd") {
        "RECORD"
    } else {
        "OTHER"
    }
}
