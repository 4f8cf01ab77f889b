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
use crate::state::{CopyOp, DeviceState, PendingCopy, Pool};
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

/// Completes the batches `seeds` (given the device state) prove done: `(queue, order)` proves
/// that batch, every earlier one on its queue and, through semaphore waits, the batches it waited
/// for. Their pending copies are read back now, each into a `QueryCopy` right after the call that
/// proved it done, with `QueryAvailable` for the queries it shows available.
pub fn complete_proven<I: IntoIterator<Item = (u64, u64)>>(
    d: &'static DeviceData,
    seeds: impl FnOnce(&DeviceState) -> I,
) {
    // Nothing is made pending unless capturing (`submit::tracked_submit`), and what a capture
    // left pending is dropped by the next snapshot: no state lock at waits while tracking.
    if !capturing() {
        return;
    }
    let t0 = runtime::prof::start();
    complete_inner(d, seeds);
    runtime::prof::end(runtime::prof::WAIT, t0);
}

/// Completes every pending copy for which `done` holds (and what its submit proves done).
pub fn complete(d: &'static DeviceData, done: impl Fn(&PendingCopy) -> bool) {
    complete_proven(d, |st| {
        st.pending
            .iter()
            .filter(|p| done(p))
            .map(|p| (p.queue, p.order))
            .collect::<Vec<_>>()
    });
}

fn complete_inner<I: IntoIterator<Item = (u64, u64)>>(
    d: &'static DeviceData,
    seeds: impl FnOnce(&DeviceState) -> I,
) {
    let mut st = d.lock();
    if st.pending.is_empty() {
        st.nodes.clear();
        return;
    }
    let seeds = seeds(&st);
    let done = st.prove_done(seeds);
    if done.is_empty() {
        return;
    }
    let is_done = |p: &PendingCopy| done.iter().any(|&(q, o)| p.queue == q && p.order <= o);
    let clobbered = overwritten(&st);
    // Taken out in order, without new vectors: this runs at every wait.
    let mut ready = smallvec::SmallVec::<[(PendingCopy, Option<u64>); 4]>::new();
    let (mut i, mut at) = (0, 0);
    while i < st.pending.len() {
        if is_done(&st.pending[i]) {
            let by = clobbered.iter().find(|c| c.0 == at).map(|c| c.1);
            ready.push((st.pending.remove(i), by));
        } else {
            i += 1;
        }
        at += 1;
    }
    if st.pending.is_empty() {
        st.nodes.clear();
    }
    let live = capturing();
    let mut clobbered_notes = Vec::new();
    for (p, clobbered_by) in ready {
        // While tracking the shadows are not kept (the snapshot takes them afresh): only the
        // range's pending count changes, which empty data does.
        let mut data = if live {
            read_back(d, &mut st, &p.op)
        } else {
            Vec::new()
        };
        if let Some((memory, start, len)) = p.host_range {
            if let Some(m) = st.memories.get_mut(&memory) {
                m.gpu_range_completed(start, len, &data);
            }
        }
        if !live {
            continue;
        }
        if let Some(by) = clobbered_by {
            // What the range holds now may be the later copy's: recorded as no data (not
            // compared), never as this copy's values.
            data.clear();
            clobbered_notes.push((p.op.seq, by));
        }
        let host_ns = runtime::call_ns();
        let available = availability(&mut st, &p.op, &data, host_ns);
        if !available.is_empty() {
            d.queries_seen
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let op = p.op;
        let copy = Record::QueryCopy(record::QueryCopy {
            seq: op.seq,
            command_buffer: op.command_buffer,
            pool: op.pool,
            first: op.first,
            count: op.count,
            dst_buffer: op.dst_buffer,
            dst_offset: op.dst_offset,
            stride: op.stride,
            flags: op.flags,
            host_ns,
            data,
        });
        runtime::emit_plain_all(std::iter::once(copy).chain(available));
    }
    if let Some(&(seq, by)) = clobbered_notes.first() {
        runtime::note(format!(
            "{} query copies not recorded (first: seq {seq}, overwritten by the copy at seq {by}): a copy \
             submitted later writes the same range and may have run before this completion point",
            clobbered_notes.len()
        ));
    }
}

/// Pending copies whose destination a copy submitted after them also writes, as (index in
/// `pending`, seq of the later copy): once the later one may have run, the range no longer says what
/// the earlier copy wrote (wgpu resolves several query sets through one buffer; Zink reuses its
/// result slots frame after frame). Overlaps are found per memory object by a sweep over start
/// offsets, so a wait with hundreds of pending copies stays near-linear.
fn overwritten(st: &DeviceState) -> Vec<(usize, u64)> {
    let mut spans: Vec<(u64, u64, u64, usize)> = st
        .pending
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let (memory, start, len) = dst_range(st, &p.op)?;
            Some((memory, start, start.saturating_add(len), i))
        })
        .collect();
    if spans.len() < 2 {
        return Vec::new();
    }
    spans.sort_unstable();
    let mut out: Vec<(usize, u64)> = Vec::new();
    let mut active: Vec<(u64, u64, usize)> = Vec::new(); // (memory, end, index)
    for &(memory, start, end, i) in &spans {
        active.retain(|&(m, e, _)| m == memory && e > start);
        for &(_, _, j) in &active {
            let (first, later) = if j < i { (j, i) } else { (i, j) };
            let seq = st.pending[later].op.seq;
            match out.iter_mut().find(|o| o.0 == first) {
                Some(o) => o.1 = o.1.max(seq),
                None => out.push((first, seq)),
            }
        }
        active.push((memory, end, i));
    }
    out
}

/// (memory, offset in memory, length) of a copy's destination, in any memory.
fn dst_range(st: &DeviceState, op: &CopyOp) -> Option<(u64, u64, u64)> {
    if op.count == 0 {
        return None;
    }
    let &(memory, buffer_offset) = st.buffers.get(&op.dst_buffer)?;
    Some((memory, buffer_offset + op.dst_offset, copy_len(st, op)))
}

/// `QueryAvailable` records for the copied queries first seen available at this completion point:
/// each one the copy shows available (its availability word, when copied, is nonzero).
fn availability(st: &mut DeviceState, op: &CopyOp, data: &[u8], host_ns: u64) -> Vec<Record> {
    let Some(pool) = st.pools.get(&op.pool) else {
        return Vec::new();
    };
    let elem = result_size(Some(pool), op.flags);
    let width = if op.flags & vk::QueryResultFlags::TYPE_64.as_raw() != 0 {
        8
    } else {
        4
    };
    let with_avail = op.flags & vk::QueryResultFlags::WITH_AVAILABILITY.as_raw() != 0;
    let avail_at = width * u64::from(pool.values_per_query());
    let mut out = Vec::new();
    let Some(pool) = st.pools.get_mut(&op.pool) else {
        return out;
    };
    for k in 0..op.count {
        let query = op.first + k;
        if pool
            .seen_available
            .get(query as usize)
            .is_none_or(|&seen| seen)
        {
            continue;
        }
        if with_avail {
            let at = (op.stride * u64::from(k) + avail_at) as usize;
            let Some(word) = data.get(at..at + width as usize) else {
                continue;
            };
            if word.iter().all(|&b| b == 0) {
                continue;
            }
        } else if data.len() < (op.stride * u64::from(k) + elem) as usize {
            // Not read back: nothing says the results were there.
            continue;
        }
        pool.seen_available[query as usize] = true;
        out.push(Record::QueryAvailable(record::QueryAvailable {
            pool: op.pool,
            query,
            host_ns,
        }));
    }
    out
}

/// (memory, offset in memory, length) of a copy's destination in host-visible memory.
pub fn host_range(st: &DeviceState, op: &CopyOp) -> Option<(u64, u64, u64)> {
    let (memory, start, len) = dst_range(st, op)?;
    let m = st.memories.get(&memory)?;
    (m.host_visible && start.saturating_add(len) <= m.size).then_some((memory, start, len))
}

fn copy_len(st: &DeviceState, op: &CopyOp) -> u64 {
    let elem = result_size(st.pools.get(&op.pool), op.flags);
    op.stride
        .saturating_mul(op.count.saturating_sub(1) as u64)
        .saturating_add(elem)
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
fn read_back(d: &'static DeviceData, st: &mut DeviceState, op: &CopyOp) -> Vec<u8> {
    let Some((memory, start, len)) = dst_range(st, op) else {
        return Vec::new();
    };
    let Some(m) = st.memories.get(&memory) else {
        return Vec::new();
    };
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
