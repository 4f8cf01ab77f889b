//! Render pass begins, for per-region counters (VK_ARM_performance_counters_by_region): a begin
//! whose chain asks for them gets a `RegionCounters` record (the struct is read by `region`).
//!
//! Depends on: `runtime`, `region`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec, rec_cmd, Entry};
use crate::runtime::{self, guard};
use ash::vk;
use format::record::{self, Record};
use std::ffi::c_void;

// ---- render pass begins: per-region counters (VK_ARM_performance_counters_by_region) ---------

/// Writes a `RegionCounters` record for the begin call `seq` when `chain` asks for per-region
/// counters.
unsafe fn region_counters(seq: Option<u64>, cb: vk::CommandBuffer, chain: *const c_void) {
    // The chain is walked only for a recorded call.
    let Some(seq) = seq else { return };
    let Some((counter_addresses, serialize_regions, counter_indices)) = crate::region::find(chain)
    else {
        return;
    };
    runtime::emit_plain(Record::RegionCounters(record::RegionCounters {
        seq,
        command_buffer: raw(cb),
        counter_addresses,
        serialize_regions,
        counter_indices,
    }));
}

pub unsafe extern "system" fn vkCmdBeginRenderPass(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    contents: vk::SubpassContents,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdBeginRenderPass);
    f(cb, p_begin, contents);
    guard("vkCmdBeginRenderPass", || {
        let seq = rec!(vkCmdBeginRenderPass, 0, |e| {
            vkstream::encode::vkCmdBeginRenderPass(e, cb, p_begin, contents)
        });
        if let Some(b) = p_begin.as_ref() {
            region_counters(seq, cb, b.p_next);
        }
    });
}

/// Also `vkCmdBeginRenderPass2KHR` (`E` says which name the app called).
pub unsafe fn vkCmdBeginRenderPass2<E: Entry<vk::PFN_vkCmdBeginRenderPass2>>(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    p_subpass: *const vk::SubpassBeginInfo<'_>,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(E::next(&d.table));
    f(cb, p_begin, p_subpass);
    guard("vkCmdBeginRenderPass2", || {
        let seq = rec!(E::ID, 0, |e| {
            vkstream::encode::vkCmdBeginRenderPass2(e, cb, p_begin, p_subpass)
        });
        if let Some(b) = p_begin.as_ref() {
            region_counters(seq, cb, b.p_next);
        }
    });
}

/// Also `vkCmdBeginRenderingKHR` (`E` says which name the app called).
pub unsafe fn vkCmdBeginRendering<E: Entry<vk::PFN_vkCmdBeginRendering>>(
    cb: vk::CommandBuffer,
    p_info: *const vk::RenderingInfo<'_>,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(E::next(&d.table));
    f(cb, p_info);
    guard("vkCmdBeginRendering", || {
        let seq = rec_cmd!(E::ID, raw(cb), |e| {
            vkstream::encode::vkCmdBeginRendering(e, cb, p_info)
        });
        if let Some(i) = p_info.as_ref() {
            region_counters(seq, cb, i.p_next);
        }
    });
}
