//! Query commands recorded in command buffers (begin/end, indexed, timestamps, resets, acceleration
//! structure properties) and host resets: each writes its `Call` and `QueryOp`s under one lock.
//!
//! Depends on: `runtime`, `state`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec_ops, Entry};
use crate::runtime::{self, guard};
use ash::vk;
use format::record::QueryOpKind;

pub unsafe extern "system" fn vkCmdBeginQuery(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdBeginQuery);
    f(cb, pool, query, flags);
    guard("vkCmdBeginQuery", || {
        rec_ops!(
            vkCmdBeginQuery,
            0,
            |e| vkstream::encode::vkCmdBeginQuery(e, cb, pool, query, flags),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Begin {
                query,
                flags: flags.as_raw(),
                index: 0,
            }]
        );
    });
}

pub unsafe extern "system" fn vkCmdEndQuery(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdEndQuery);
    f(cb, pool, query);
    guard("vkCmdEndQuery", || {
        rec_ops!(
            vkCmdEndQuery,
            0,
            |e| vkstream::encode::vkCmdEndQuery(e, cb, pool, query),
            raw(cb),
            raw(pool),
            &[QueryOpKind::End { query, index: 0 }]
        );
    });
}

pub unsafe extern "system" fn vkCmdBeginQueryIndexedEXT(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
    index: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdBeginQueryIndexedEXT);
    f(cb, pool, query, flags, index);
    guard("vkCmdBeginQueryIndexedEXT", || {
        rec_ops!(
            vkCmdBeginQueryIndexedEXT,
            0,
            |e| vkstream::encode::vkCmdBeginQueryIndexedEXT(e, cb, pool, query, flags, index),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Begin {
                query,
                flags: flags.as_raw(),
                index,
            }]
        );
    });
}

pub unsafe extern "system" fn vkCmdEndQueryIndexedEXT(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    index: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdEndQueryIndexedEXT);
    f(cb, pool, query, index);
    guard("vkCmdEndQueryIndexedEXT", || {
        rec_ops!(
            vkCmdEndQueryIndexedEXT,
            0,
            |e| vkstream::encode::vkCmdEndQueryIndexedEXT(e, cb, pool, query, index),
            raw(cb),
            raw(pool),
            &[QueryOpKind::End { query, index }]
        );
    });
}

pub unsafe extern "system" fn vkCmdWriteTimestamp(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags,
    pool: vk::QueryPool,
    query: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdWriteTimestamp);
    f(cb, stage, pool, query);
    guard("vkCmdWriteTimestamp", || {
        rec_ops!(
            vkCmdWriteTimestamp,
            0,
            |e| vkstream::encode::vkCmdWriteTimestamp(e, cb, stage, pool, query),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Timestamp {
                query,
                stage: stage.as_raw() as u64,
                sync2: false,
            }]
        );
    });
}

/// Also `vkCmdWriteTimestamp2KHR` (`E` says which name the app called).
pub unsafe fn vkCmdWriteTimestamp2<E: Entry<vk::PFN_vkCmdWriteTimestamp2>>(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags2,
    pool: vk::QueryPool,
    query: u32,
) {
    let f = next!(E::next(runtime::device_table(raw(cb))));
    f(cb, stage, pool, query);
    guard("vkCmdWriteTimestamp2", || {
        let kinds = [QueryOpKind::Timestamp {
            query,
            stage: stage.as_raw(),
            sync2: true,
        }];
        rec_ops!(
            E::ID,
            0,
            |e| vkstream::encode::vkCmdWriteTimestamp2(e, cb, stage, pool, query),
            raw(cb),
            raw(pool),
            &kinds
        );
    });
}

pub unsafe extern "system" fn vkCmdResetQueryPool(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdResetQueryPool);
    f(cb, pool, first, count);
    guard("vkCmdResetQueryPool", || {
        rec_ops!(
            vkCmdResetQueryPool,
            0,
            |e| vkstream::encode::vkCmdResetQueryPool(e, cb, pool, first, count),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Reset { first, count }]
        );
        d.lock()
            .cmdbufs
            .entry(raw(cb))
            .or_default()
            .resets
            .push((raw(pool), first, count));
    });
}

/// Also `vkResetQueryPoolEXT` (`E` says which name the app called).
pub unsafe fn vkResetQueryPool<E: Entry<vk::PFN_vkResetQueryPool>>(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(E::next(&d.table));
    f(device, pool, first, count);
    guard("vkResetQueryPool", || {
        // Nothing to clear before a query was first reported available (`queries_seen`).
        if d.queries_seen.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(p) = d.lock().pools.get_mut(&raw(pool)) {
                p.reset(first, count);
            }
        }
        let kinds = [QueryOpKind::Reset { first, count }];
        rec_ops!(
            E::ID,
            0,
            |e| vkstream::encode::vkResetQueryPool(e, device, pool, first, count),
            0,
            raw(pool),
            &kinds
        );
    });
}

pub unsafe extern "system" fn vkCmdWriteAccelerationStructuresPropertiesKHR(
    cb: vk::CommandBuffer,
    count: u32,
    p_structures: *const vk::AccelerationStructureKHR,
    query_type: vk::QueryType,
    pool: vk::QueryPool,
    first_query: u32,
) {
    let f = next!(runtime::device_table(raw(cb)).vkCmdWriteAccelerationStructuresPropertiesKHR);
    f(cb, count, p_structures, query_type, pool, first_query);
    guard("vkCmdWriteAccelerationStructuresPropertiesKHR", || {
        let kinds: Vec<QueryOpKind> = (0..count)
            .map(|i| QueryOpKind::Write {
                query: first_query + i,
            })
            .collect();
        rec_ops!(
            vkCmdWriteAccelerationStructuresPropertiesKHR,
            0,
            |e| vkstream::encode::vkCmdWriteAccelerationStructuresPropertiesKHR(
                e,
                cb,
                count,
                p_structures,
                query_type,
                pool,
                first_query,
            ),
            raw(cb),
            raw(pool),
            &kinds
        );
    });
}
