//! Emits the capture layer's intercepts: call down, then record the call with the generated
//! encoder (after the call, so output parameters hold what the driver wrote).

use crate::analyze::{Analysis, Cmd, Level};
use crate::config::{self, LayerHook};
use crate::emit_stream::{extra_args, ret_ty, sig_ty, HEADER};
use crate::model::{Registry, TypeCat};
use std::fmt::Write;

/// Each hook of `config::LAYER_HOOKS` with the commands it serves: its canonical command first,
/// then the encodable aliases vk.xml gives it (KHR/EXT names of a promoted command).
pub fn hook_groups(an: &Analysis) -> Vec<(&'static LayerHook, Vec<&Cmd>)> {
    config::LAYER_HOOKS
        .iter()
        .map(|h| {
            let Some(c) = an.cmds.iter().find(|c| c.def.name == h.command) else {
                panic!("layer hook {} is not a command of vk.xml", h.command);
            };
            if c.def.canonical != c.def.name {
                panic!(
                    "layer hook {} is an alias: list its canonical command {} (aliases are generated)",
                    h.command, c.def.canonical
                );
            }
            let mut group = vec![c];
            group.extend(
                an.cmds
                    .iter()
                    .filter(|a| a.def.canonical == h.command && a.def.name != h.command),
            );
            (h, group)
        })
        .collect()
}

/// Commands the capture layer writes by hand or leaves alone: every name of every hook (aliases
/// included), then `config::LAYER_UNHOOKED`. No intercept is generated for them.
pub fn special(an: &Analysis) -> Vec<String> {
    let mut out: Vec<String> = hook_groups(an)
        .into_iter()
        .flat_map(|(_, g)| g.into_iter().map(|c| c.def.name.clone()))
        .collect();
    out.extend(config::LAYER_UNHOOKED.iter().map(|s| s.to_string()));
    out
}

pub fn mod_rs() -> String {
    format!(
        "{HEADER}//! Generated from vk.xml by `codegen`: one intercept per command outside the special list, the table of the hand-written hooks, and the thunks of hooks serving several names (core/KHR/EXT aliases).\npub mod intercept;\n"
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
    let special = special(an);
    let mut generated = Vec::new();
    for c in &an.cmds {
        let name = &c.def.name;
        if special.contains(name) {
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
        // Commands recorded into a command buffer skip light buffers while tracking
        // (`runtime::light`); the rest record as usual.
        let record = if first.decl.ty == "VkCommandBuffer" {
            format!(
                "record_cmd(vkstream::ids::{name}, {}.as_raw() as u64, ",
                first.snake
            )
        } else {
            format!("record(vkstream::ids::{name}, ")
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
             crate::runtime::{record}{result}, |e| vkstream::encode::{name}({}));\n\
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
    o.push_str(&hook_table(reg, an));
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
/// compile; then `mod alias`, the thunks of hooks that serve several names.
fn hook_table(reg: &Registry, an: &Analysis) -> String {
    let groups = hook_groups(an);
    let mut o = String::from(
        "/// The hand-written hook for `name` (`config::LAYER_HOOKS` in codegen), `None` when the\n\
         /// layer has none. They take precedence over the generated intercepts.\n\
         pub fn hook_proc_addr(name: &[u8]) -> Option<vk::PFN_vkVoidFunction> {\n\
         unsafe { Some(Some(match name {\n",
    );
    for (h, group) in &groups {
        let pfn = config::ash_pfn(h.command);
        for c in group {
            let path = if group.len() == 1 {
                format!("crate::{}::{}", h.module, h.command)
            } else {
                format!("alias::{}", c.def.name)
            };
            let _ = writeln!(
                o,
                "b\"{}\" => {{ let f: {pfn} = {path}; std::mem::transmute::<{pfn}, unsafe extern \"system\" fn()>(f) }}",
                c.def.name
            );
        }
    }
    o.push_str("_ => return None,\n}))}\n}\n\n");
    o.push_str(&alias_mod(reg, an, &groups));
    o
}

/// `mod alias`: for a hook whose command vk.xml names more than once (core, KHR, EXT), one
/// `extern "system"` thunk per name that calls the hook, which is generic over `hooks::Entry`,
/// with that name's entry: the next layer's function of that name (on a device older than the
/// core version the extension's may be the only one loaded) and its command id (the trace keeps
/// the name the app called, which the replay calls in turn).
fn alias_mod(reg: &Registry, an: &Analysis, groups: &[(&LayerHook, Vec<&Cmd>)]) -> String {
    let mut o = String::from(
        "/// The names of the hooks that serve several (core/KHR/EXT): a thunk per name, and in `entry`\n\
         /// each name's `hooks::Entry` (next layer's function, command id).\n\
         pub mod alias {\n\
         use ash::vk;\n\
         #[allow(unused_imports)]\n\
         use std::ffi::{c_char, c_int, c_void};\n\n\
         #[allow(non_camel_case_types)]\n\
         pub mod entry {\n\
         use ash::vk;\n",
    );
    let mut thunks = String::new();
    for (h, group) in groups.iter().filter(|(_, g)| g.len() > 1) {
        let pfn = config::ash_pfn(h.command);
        for c in group {
            let name = &c.def.name;
            let table = match c.level {
                Level::Device => "vkstream::DeviceTable",
                Level::Instance => "vkstream::InstanceTable",
            };
            let _ = writeln!(
                o,
                "pub enum {name} {{}}\n\
                 impl crate::hooks::Entry<{pfn}, {table}> for {name} {{\n\
                 const ID: u32 = vkstream::ids::{name};\n\
                 #[inline(always)]\n\
                 fn next(t: &{table}) -> Option<{pfn}> {{ t.{name} }}\n}}"
            );
            let args: Vec<String> = c
                .params
                .iter()
                .map(|p| format!("{}: {}", p.snake, sig_ty(reg, an, &p.decl)))
                .collect();
            let names: Vec<&str> = c.params.iter().map(|p| p.snake.as_str()).collect();
            let _ = writeln!(
                thunks,
                "pub unsafe extern \"system\" fn {name}({}) -> {} {{\n\
                 crate::{}::{}::<entry::{name}>({})\n}}",
                args.join(", "),
                ret_ty(reg, an, &c.def.ret),
                h.module,
                h.command,
                names.join(", ")
            );
        }
    }
    o.push_str("}\n\n");
    o.push_str(&thunks);
    o.push_str("}\n");
    o
}
