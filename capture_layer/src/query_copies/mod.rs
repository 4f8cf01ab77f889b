//! vkCmdCopyQueryPoolResults: the copy is noted on its command buffer, becomes pending at submit,
//! and when a wait or fence shows its submit complete, the destination range is read back (from the
//! app's mapping, a mapping of the layer's own, or through the GPU with `readback`) into a
//! `QueryCopy` record.
//!
//! Depends on: `runtime`, `state`, `readback`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec_ops};
use crate::runtime::{self, capturing, guard, DeviceData};
use crate::state::{CopyOp, PendingCopy, Pool};
use ash::vk;
use ash::vk::Handle;
use format::record::{self, QueryOpKind, Record};
use std::ffi::c_void;

pub unsafe extern "system" fn vkCmdCopyQueryPoolResults(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    dst: vk::Buffer,
    dst_offset: vk::DeviceSize,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdCopyQueryPoolResults);
    f(cb, pool, first, count, dst, dst_offset, stride, flags);
    guard("vkCmdCopyQueryPoolResults", || {
        let (dst_buffer, raw_flags) = (raw(dst), flags.as_raw());
        let seq = rec_ops!(
            vkCmdCopyQueryPoolResults,
            0,
            |e| vkstream::encode::vkCmdCopyQueryPoolResults(
                e, cb, pool, first, count, dst, dst_offset, stride, flags,
            ),
            raw(cb),
            raw(pool),
            &[QueryOpKind::Copy {
                first,
                count,
                dst_buffer,
                dst_offset,
                stride,
                flags: raw_flags,
            }]
        );
        let Some(seq) = seq else { return };
        let op = CopyOp {
            seq,
            command_buffer: raw(cb),
            pool: raw(pool),
            first,
            count,
            dst_buffer,
            dst_offset,
            stride,
            flags: raw_flags,
        };
        d.lock().cmdbufs.entry(raw(cb)).or_default().copies.push(op);
    });
}

/// Reads back every pending copy for which `done` holds, writes its `QueryCopy`, drops it.
pub fn complete(d: &'static DeviceData, done: impl Fn(&PendingCopy) -> bool) {
    let t0 = runtime::prof::start();
    complete_inner(d, done);
    runtime::prof::end(runtime::prof::WAIT, t0);
}

fn complete_inner(d: &'static DeviceData, done: impl Fn(&PendingCopy) -> bool) {
    let mut st = d.lock();
    if st.pending.is_empty() {
        return;
    }
    // Taken out in order, without new vectors: this runs at every wait.
    let mut ready = smallvec::SmallVec::<[PendingCopy; 4]>::new();
    let mut i = 0;
    while i < st.pending.len() {
        if done(&st.pending[i]) {
            ready.push(st.pending.remove(i));
        } else {
            i += 1;
        }
    }
    if !capturing() {
        return;
    }
    for p in ready {
        let data = read_back(d, &mut st, &p.op);
        let op = p.op;
        runtime::emit_plain(Record::QueryCopy(record::QueryCopy {
            seq: op.seq,
            command_buffer: op.command_buffer,
            pool: op.pool,
            first: op.first,
            count: op.count,
            dst_buffer: op.dst_buffer,
            dst_offset: op.dst_offset,
            stride: op.stride,
            flags: op.flags,
            host_ns: runtime::call_ns(),
            data,
        }));
    }
}

/// Bytes one query's results occupy in a vkGetQueryPoolResults / copy layout.
fn result_size(pool: Option<&Pool>, flags: u32) -> u64 {
    let width = if flags & vk::QueryResultFlags::TYPE_64.as_raw() != 0 {
        8
    } else {
        4
    };
    let Some(p) = pool else { return width };
    if p.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() {
        return 8 * p.counters as u64;
    }
    let extra = (flags & vk::QueryResultFlags::WITH_AVAILABILITY.as_raw() != 0) as u64
        + (flags & vk::QueryResultFlags::WITH_STATUS_KHR.as_raw() != 0) as u64;
    width * (p.values_per_query() as u64 + extra)
}

/// Staging kept for query-copy destinations read through the GPU (copies larger than this get
/// a reader of their own size).
const COPY_STAGING: u64 = 64 << 10;

/// The destination range of a query copy, read from the app's mapping or through a short-lived mapping of
/// our own (the state lock keeps the app from mapping it meanwhile). Empty when the memory is not host
/// visible.
fn read_back(d: &'static DeviceData, st: &mut crate::state::DeviceState, op: &CopyOp) -> Vec<u8> {
    let elem = result_size(st.pools.get(&op.pool), op.flags);
    let len = op
        .stride
        .saturating_mul(op.count.saturating_sub(1) as u64)
        .saturating_add(elem);
    if op.count == 0 {
        return Vec::new();
    }
    let Some(&(memory, buffer_offset)) = st.buffers.get(&op.dst_buffer) else {
        return Vec::new();
    };
    let Some(m) = st.memories.get(&memory) else {
        return Vec::new();
    };
    let start = buffer_offset + op.dst_offset;
    if start.saturating_add(len) > m.size {
        return Vec::new();
    }
    if !m.host_visible || crate::readback::forced() {
        // Device-local destination: copied out through the GPU (the submit that wrote it is done).
        let (size, type_index) = (m.size, m.type_index);
        let reader = match st.copy_reader.take() {
            Some(r) if r.fits(len) => Ok(r),
            _ => {
                let queues: Vec<(u64, u32)> = st.queues.iter().map(|(q, f)| (*q, *f)).collect();
                // SAFETY: the device is live; its queues are the app's own.
                unsafe { crate::readback::Reader::new(d, &queues, len.max(COPY_STAGING)) }
            }
        };
        // SAFETY: the device is live, the memory too (state lock held), and its writer completed.
        let read = reader.and_then(|mut r| {
            let read = unsafe { r.read(memory, size, type_index, start, len) };
            if read.is_ok() {
                st.copy_reader = Some(r);
            }
            read
        });
        return read.unwrap_or_else(|e| {
            runtime::log_once(
                "copy-readback",
                &format!(
                    "a vkCmdCopyQueryPoolResults destination could not be read back ({e}); its contents are not recorded"
                ),
            );
            Vec::new()
        });
    }
    if let Some(map) = &m.mapped {
        if start >= map.offset && start + len <= map.offset + map.size {
            // SAFETY: inside the live mapping.
            return unsafe {
                std::slice::from_raw_parts(map.ptr.add((start - map.offset) as usize), len as usize)
                    .to_vec()
            };
        }
        return Vec::new();
    }
    let (Some(map), Some(unmap)) = (d.table.vkMapMemory, d.table.vkUnmapMemory) else {
        return Vec::new();
    };
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: memory is unmapped (checked under the lock the app's map calls also take).
    unsafe {
        if map(
            d.handle,
            vk::DeviceMemory::from_raw(memory),
            start,
            len,
            vk::MemoryMapFlags::empty(),
            &mut p,
        ) != vk::Result::SUCCESS
            || p.is_null()
        {
            return Vec::new();
        }
        let v = std::slice::from_raw_parts(p as *const u8, len as usize).to_vec();
        unmap(d.handle, vk::DeviceMemory::from_raw(memory));
        v
    }
}

/// At process exit the driver may already be gone: pending copies are only counted, not read.
pub fn flush_pending_at_exit() {
    // try_lock: at exit another thread may be stopped inside the layer holding a device lock.
    let pending: usize = runtime::live_devices()
        .iter()
        .filter_map(|d| d.state.try_lock().map(|st| st.pending.len()))
        .sum();
    if pending > 0 {
        runtime::note(format!(
            "{pending} vkCmdCopyQueryPoolResults destinations were not read back: the app exited without waiting \
             for their submits"
        ));
    }
}
