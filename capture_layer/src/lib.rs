//! quarry's capture layer, `VK_LAYER_QUARRY_capture`.
//!
//! Loaded by the Vulkan loader (interface version 2) between the app and the driver, it records every
//! call into a trace file, plus what queries returned to the app. Code map, bottom up (each module
//! depends only on those above it in this list, and says so in its header):
//! - `loader`, `keymap`, `settings`, `compat`, `region`, `mapped` (which pages of a mapping the
//!   host wrote: write protection or shadow compare), `control` (triggers, the launcher's
//!   status channel): leaves (loader structs, the dispatch-key map,
//!   settings, hidden extensions and template encoding, the ARM per-region struct);
//! - `tables`: what the chain gave per instance and device (dispatch tables, properties);
//! - `readback`: reading device memory through the GPU;
//! - `state`: per-device bookkeeping (mapped memory shadows, buffer bindings, query pools, pending
//!   query copies);
//! - `trim::tracker`: a trimmed capture's bookkeeping before its first frame (no Vulkan calls);
//! - `runtime`: dispatch maps, the call path, the trace writer, frames, finalization;
//! - `trim::snapshot`: the trimmed capture's snapshot writer (its Vulkan calls);
//! - `hooks`: what hand-written intercepts share (`rec!`, `next!`, pointer helpers);
//! - hand-written hooks by topic: `memory`, `queries`, `query_copies`, `templates`, then `submit`
//!   and `wsi` (which use memory scans, query copies and calibration), and `chain::instance` /
//!   `chain::device`; each is listed in codegen's `config::LAYER_HOOKS` (unlisted: dead code,
//!   denied);
//! - `generated`: one intercept per remaining command and the table of the listed hooks
//!   (`hook_proc_addr`), written by `codegen`;
//! - `chain`: the proc-address lookup that hands out every hook and intercept;
//! - `launch`: running a program with the layer enabled (used by `quarry capture`).

// The crate (and so the library file) is named after the layer, as loaders expect.
#![allow(non_snake_case)]

mod chain;
mod compat;
pub mod control;
pub mod generated;
mod hooks;
mod keymap;
pub mod launch;
mod loader;
mod mapped;
mod memory;
mod queries;
mod query_copies;
mod readback;
mod region;
pub mod runtime;
pub mod settings;
pub mod state;
mod submit;
mod tables;
mod target;
mod templates;
mod trim;
mod wsi;

// vkNegotiateLoaderLayerInterfaceVersion, vkGetInstanceProcAddr and vkGetDeviceProcAddr.
layer_support::export_entry_points!(chain::get_instance_proc_addr, chain::get_device_proc_addr);

/// Layer name as in the manifest.
pub const LAYER_NAME: &str = "VK_LAYER_QUARRY_capture";
