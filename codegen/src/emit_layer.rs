//! Emits the capture layer's intercepts: call down, then record the call with the generated
//! encoder (after the call, so output parameters hold what the driver wrote).

use crate::analyze::{Analysis, Level};
use crate::config;
use crate::emit_stream::{extra_args, ret_ty, sig_ty, HEADER};
use crate::model::{Registry, TypeCat};
use std::fmt::Write;

pub fn mod_rs() -> String {
    format!(
        "{HEADER}//! Generated from vk.xml by `codegen`: one intercept per command outside the special list, and the table of the hand-written hooks.\npub mod intercept;\n"
    )
}

pub fn intercept_rs(reg: &Registry, an: &Analysis) -> String {
    let mut o = String::from(HEADER);
    o.push_str(
        "//! Intercepts for every encodable command that is neither special (hand-written in the layer)\n\
         //! nor global (no dispatchable first parameter). Each one calls the next layer through the\n\
         //! dispatch table of its first argument, then records the call; a missing next function gives\n\
         //! `VK_ERROR_EXTENSION_NOT_PRESENT` (or nothing / zero for other return types).\n\
         #![allow(non_snake_case, unused_unsafe, clippy::all)]\n\
         use ash::vk;\nuse ash::vk::Handle;\nuse std::ffi::{c_char, c_int, c_void, CStr};\n\n\
         pub use vkstream::{SPECIAL, UNSUPPORTED, UNSUPPORTED_EXTENSIONS};\n\n",
    );
    let mut generated = Vec::new();
    for c in &an.cmds {
        let name = &c.def.name;
        if config::SPECIAL.contains(&name.as_str()) {
            continue;
        }
        let Some(first) = c.params.first() else {
            continue;
        };
        let dispatchable = matches!(
            reg.cat(&first.decl.ty),
            TypeCat::Handle {
                dispatchable: true,
                ..
            }
        ) && first.decl.ptrs.is_empty();
        if !dispatchable {
            continue;
        }
        let args: Vec<String> = c
            .params
            .iter()
            .map(|p| format!("{}: {}", p.snake, sig_ty(reg, an, &p.decl)))
            .collect();
        let names: Vec<String> = c.params.iter().map(|p| p.snake.clone()).collect();
        let ret = ret_ty(reg, an, &c.def.ret);
        let (missing, result) = match c.def.ret.as_str() {
            "VkResult" => ("vk::Result::ERROR_EXTENSION_NOT_PRESENT", "r.as_raw()"),
            "void" => ("()", "0"),
            _ => ("Default::default()", "0"),
        };
        let table = if c.level == Level::Device {
            "device_table"
        } else {
            "instance_table"
        };
        let mut enc_args = vec!["e".to_string()];
        enc_args.extend(names.iter().cloned());
        for (n, _) in extra_args(reg, an, c) {
            enc_args.push(if n == "ret" { "r".into() } else { n });
        }
        let _ = writeln!(
            o,
            "pub unsafe extern \"system\" fn {name}({}) -> {ret} {{\n\
             let t = crate::runtime::{table}({}.as_raw() as u64);\n\
             let Some(next) = t.{name} else {{ return {missing}; }};\n\
             let r = next({});\n\
             crate::runtime::record(vkstream::ids::{name}, {result}, |e| vkstream::encode::{name}({}));\n\
             r\n}}\n",
            args.join(", "),
            first.snake,
            names.join(", "),
            enc_args.join(", ")
        );
        generated.push(c);
    }
    o.push_str(
        "/// The generated intercept for `name`, `None` when the layer has none (special, unsupported or\n\
         /// unknown). The typed binding checks each signature against ash's `PFN_vk*` at compile time.\n\
         pub fn intercept_proc_addr(name: &CStr) -> Option<vk::PFN_vkVoidFunction> {\n\
         unsafe { Some(Some(match name.to_bytes() {\n",
    );
    for c in &generated {
        let _ = writeln!(
            o,
            "b\"{0}\" => {{ let f: {1} = {0}; std::mem::transmute::<{1}, unsafe extern \"system\" fn()>(f) }}",
            c.def.name, config::ash_pfn(&c.def.canonical)
        );
    }
    o.push_str("_ => return None,\n}))}\n}\n\n");
    o.push_str(&hook_table(an));
    o.push_str("/// Whether a generated intercept is device-level (reachable through `vkGetDeviceProcAddr`).\npub fn intercept_is_device_level(name: &CStr) -> bool {\nmatches!(name.to_bytes(), ");
    let dev: Vec<String> = generated
        .iter()
        .filter(|c| c.level == Level::Device)
        .map(|c| format!("b\"{}\"", c.def.name))
        .collect();
    o.push_str(&dev.join(" | "));
    o.push_str(")\n}\n");
    o
}

/// `hook_proc_addr`: the hand-written hooks of `config::LAYER_HOOKS` by name, each bound to its
/// ash `PFN_vk*` type, so a listed hook whose function is missing, misplaced or mistyped does not
/// compile.
fn hook_table(an: &Analysis) -> String {
    let mut o = String::from(
        "/// The hand-written hook for `name` (`config::LAYER_HOOKS` in codegen), `None` when the\n\
         /// layer has none. They take precedence over the generated intercepts.\n\
         pub fn hook_proc_addr(name: &[u8]) -> Option<vk::PFN_vkVoidFunction> {\n\
         unsafe { Some(Some(match name {\n",
    );
    for h in config::LAYER_HOOKS {
        let canonical = an
            .cmds
            .iter()
            .find(|c| c.def.name == h.command)
            .map(|c| c.def.canonical.as_str())
            .unwrap_or_else(|| panic!("layer hook {} is not a command of vk.xml", h.command));
        let _ = writeln!(
            o,
            "b\"{0}\" => {{ let f: {1} = crate::{2}::{0}; std::mem::transmute::<{1}, unsafe extern \"system\" fn()>(f) }}",
            h.command,
            config::ash_pfn(canonical),
            h.module
        );
    }
    o.push_str("_ => return None,\n}))}\n}\n\n");
    o
}
