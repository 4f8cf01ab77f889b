//! Command buffers, submits and waits: a submit records what its command buffers did to queries
//! (resets, copies pending read-back), scans mapped memory first, and writes `Submit` records; waits
//! and fences complete pending query copies and end frames in apps without a swapchain.
//!
//! Depends on: `runtime`, `state`, `memory` (scans), `query_copies` (completion),
//! `trim::snapshot` (frame ends), `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{find_in_chain, next, raw, rec, slice, Entry, NOT_PRESENT};
use crate::memory::scan_memory;
use crate::query_copies::complete_proven as complete;
use crate::runtime::{self, guard, DeviceData};
use crate::state::{PendingCopy, SubmitNode};
use ash::vk;
use format::record::{self, FrameBoundary, Record};

// ==== command buffers ===============================================================================

pub unsafe extern "system" fn vkBeginCommandBuffer(
    cb: vk::CommandBuffer,
    p_info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkBeginCommandBuffer, NOT_PRESENT);
    let r = f(cb, p_info);
    guard("vkBeginCommandBuffer", || {
        // Beginning resets the buffer: its earlier query work will not run again (emptied in
        // place: a buffer recorded every frame keeps its allocations).
        forget_queries(d, raw(cb));
        // While tracking, a primary one-time buffer is light: its commands are not encoded.
        // Every recorded begin updates the mark, so none outlives the recording it was made for.
        let light = runtime::recording() && {
            let (one_time, inherits) = p_info.as_ref().map_or((false, false), |i| {
                let one_time = i
                    .flags
                    .contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                (one_time, !i.p_inheritance_info.is_null())
            });
            let one_time = one_time && r == vk::Result::SUCCESS && runtime::tracking();
            runtime::light::begin(raw(cb), one_time, inherits)
        };
        runtime::record_begin(raw(cb), light, r.as_raw(), |e| {
            vkstream::encode::vkBeginCommandBuffer(e, cb, p_info)
        });
    });
    r
}

pub unsafe extern "system" fn vkResetCommandBuffer(
    cb: vk::CommandBuffer,
    flags: vk::CommandBufferResetFlags,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkResetCommandBuffer, NOT_PRESENT);
    let r = f(cb, flags);
    guard("vkResetCommandBuffer", || {
        forget_queries(d, raw(cb));
        rec!(vkResetCommandBuffer, r.as_raw(), |e| {
            vkstream::encode::vkResetCommandBuffer(e, cb, flags)
        });
    });
    r
}

/// Empties what `cb`'s recording did to queries.
fn forget_queries(d: &DeviceData, cb: u64) {
    if let Some(q) = d.lock().cmdbufs.get_mut(&cb) {
        q.copies.clear();
        q.resets.clear();
    }
}

// ==== submits, present, waits =======================================================================

/// One submitted batch: its command buffers, counter pass and semaphores.
struct Batch {
    cbs: Vec<u64>,
    counter_pass: Option<u32>,
    /// (semaphore, value) waited for and signaled (binary semaphores: the value is meaningless).
    waits: smallvec::SmallVec<[(u64, u64); 2]>,
    signals: smallvec::SmallVec<[(u64, u64); 2]>,
}

/// A successful submit while nothing is written (tracking for a trimmed capture, or after it
/// ended): only the query resets recorded in `cbs` are applied, once a capture saw a query
/// available (they clear that). Copies are not made pending, nor fences and semaphores noted: the trace starts at
/// a snapshot taken with every device idle, which drops what is pending
/// (`trim::snapshot::read_memory`), so nothing submitted now completes inside it.
fn tracked_submit(d: &DeviceData, seq: Option<u64>, cbs: impl Iterator<Item = u64>) {
    let t0 = runtime::prof::start();
    // Nothing seen available yet (always before the first trace): the resets clear nothing.
    if d.queries_seen.load(std::sync::atomic::Ordering::Relaxed) {
        let mut guard = d.lock();
        let st = &mut *guard;
        for cb in cbs {
            let Some(q) = st.cmdbufs.get(&cb) else {
                continue;
            };
            for &(pool, first, count) in &q.resets {
                if let Some(p) = st.pools.get_mut(&pool) {
                    p.reset(first, count);
                }
            }
        }
    }
    if seq.is_some() {
        // Marks the tracked frame submitted; writes nothing while tracking.
        runtime::submitted(|_| std::iter::empty());
    }
    runtime::prof::end(runtime::prof::SUBMIT, t0);
}

/// The fence and timeline signals of a device's latest submit. Polls that see them reached prove
/// every submit so far done (as far as the app can tell): a completion point the app found by
/// polling (`vkGetSemaphoreCounterValue`, `vkGetFenceStatus`), which ends a frame in apps that never
/// wait when their work is already done (wgpu's `map_sync` on a fast GPU).
#[derive(Default)]
pub struct LastSubmit {
    fence: u64,
    signals: smallvec::SmallVec<[(u64, u64); 2]>,
}

/// Remembers the latest submit's fence and timeline signals (`LastSubmit`). One small lock per
/// submit, while tracking too: frame boundaries are what a trigger counts.
fn note_last_submit(d: &DeviceData, fence: u64, signals: impl Iterator<Item = (u64, u64)>) {
    let mut last = d.last_submit.lock();
    last.fence = fence;
    last.signals.clear();
    last.signals.extend(signals);
}

/// A status poll's answer: a frame boundary when it shows the latest submit done.
fn polled(d: &DeviceData, seq: Option<u64>, fence: u64, reached: Option<(u64, u64)>) {
    let done = {
        let last = d.last_submit.lock();
        match reached {
            Some((s, v)) => last.signals.iter().any(|&(ls, lv)| ls == s && v >= lv),
            None => fence != 0 && last.fence == fence,
        }
    };
    if done {
        crate::trim::snapshot::frame_boundary(FrameBoundary::StatusPoll, seq);
    }
}

/// Bookkeeping after a successful submit of `batches` on `queue`.
fn after_submit(d: &DeviceData, seq: Option<u64>, queue: u64, fence: u64, batches: Vec<Batch>) {
    let t0 = runtime::prof::start();
    let host_ns = runtime::call_ns();
    let mut guard = d.lock();
    let st = &mut *guard;
    let family = st.queues.get(&queue).copied().unwrap_or(u32::MAX);
    for b in &batches {
        st.submit_order += 1;
        let order = st.submit_order;
        let before = st.pending.len();
        for cb in &b.cbs {
            let Some(q) = st.cmdbufs.get(cb) else {
                continue;
            };
            // Resets recorded in the buffer take effect now (near enough for availability tracking).
            for &(pool, first, count) in &q.resets {
                if let Some(p) = st.pools.get_mut(&pool) {
                    p.reset(first, count);
                }
            }
            for op in &q.copies {
                let host_range = crate::query_copies::host_range(st, op);
                st.pending.push(PendingCopy {
                    op: op.clone(),
                    queue,
                    fence,
                    order,
                    host_range,
                });
            }
        }
        for p in &st.pending[before..] {
            if let Some((memory, start, len)) = p.host_range {
                if let Some(m) = st.memories.get_mut(&memory) {
                    m.gpu_range_submitted(start, len);
                }
            }
        }
        // Semaphores matter only while a copy waits for a proof that its submit is done.
        if !st.pending.is_empty() && (!b.signals.is_empty() || !b.waits.is_empty()) {
            let deps = b
                .waits
                .iter()
                .filter_map(|&(s, v)| st.signaler(s, v))
                .collect();
            st.nodes.push(SubmitNode {
                queue,
                order,
                signals: b.signals.clone(),
                deps,
            });
        }
    }
    if st.pending.is_empty() {
        st.nodes.clear();
    }
    if fence != 0 {
        st.fences.insert(fence, (queue, st.submit_order));
    }
    if let Some(seq) = seq {
        // The device state lock is taken before the capture's, as everywhere.
        runtime::submitted(|frame| {
            batches.into_iter().map(move |b| {
                Record::Submit(record::Submit {
                    seq,
                    queue,
                    queue_family: family,
                    command_buffers: b.cbs,
                    host_ns,
                    frame,
                    counter_pass: b.counter_pass,
                })
            })
        });
    }
    drop(guard);
    runtime::prof::end(runtime::prof::SUBMIT, t0);
}

pub unsafe extern "system" fn vkQueueSubmit(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkQueueSubmit, NOT_PRESENT);
    let _gate = runtime::submit_gate();
    // Host writes reach the trace before the submit that lets the GPU read them.
    // Only while capturing (`scan_memory` says so too): not even the state lock while tracking.
    if runtime::capturing() {
        guard("vkQueueSubmit", || scan_memory(&mut d.lock(), None));
    }
    let r = f(queue, count, p_submits, fence);
    guard("vkQueueSubmit", || {
        let seq = rec!(vkQueueSubmit, r.as_raw(), |e| {
            vkstream::encode::vkQueueSubmit(e, queue, count, p_submits, fence)
        });
        if r != vk::Result::SUCCESS {
            return;
        }
        // Timeline signals only (a binary semaphore cannot be polled): the last batch's.
        let last = slice(p_submits, count).last();
        let tl = last.map_or(std::ptr::null(), |s| {
            find_in_chain(s.p_next, vk::StructureType::TIMELINE_SEMAPHORE_SUBMIT_INFO)
                as *const vk::TimelineSemaphoreSubmitInfo<'_>
        });
        let signals = match (last, tl.as_ref()) {
            (Some(s), Some(t)) => {
                let values = slice(t.p_signal_semaphore_values, t.signal_semaphore_value_count);
                slice(s.p_signal_semaphores, s.signal_semaphore_count)
                    .iter()
                    .zip(values)
                    .map(|(&sem, &v)| (raw(sem), v))
                    .collect()
            }
            _ => smallvec::SmallVec::<[(u64, u64); 2]>::new(),
        };
        note_last_submit(d, raw(fence), signals.into_iter());
        if !runtime::capturing() {
            let cbs = slice(p_submits, count).iter().flat_map(|s| {
                slice(s.p_command_buffers, s.command_buffer_count)
                    .iter()
                    .map(|&c| raw(c))
            });
            return tracked_submit(d, seq, cbs);
        }
        let batches = slice(p_submits, count)
            .iter()
            .map(|s| {
                let cbs = slice(s.p_command_buffers, s.command_buffer_count)
                    .iter()
                    .map(|&c| raw(c))
                    .collect();
                let perf = find_in_chain(
                    s.p_next,
                    vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR,
                ) as *const vk::PerformanceQuerySubmitInfoKHR<'_>;
                let tl = find_in_chain(s.p_next, vk::StructureType::TIMELINE_SEMAPHORE_SUBMIT_INFO)
                    as *const vk::TimelineSemaphoreSubmitInfo<'_>;
                let (wv, sv) = tl.as_ref().map_or((&[][..], &[][..]), |t| {
                    (
                        slice(t.p_wait_semaphore_values, t.wait_semaphore_value_count),
                        slice(t.p_signal_semaphore_values, t.signal_semaphore_value_count),
                    )
                });
                let pair = |vals: &[u64], i: usize, sem: vk::Semaphore| {
                    (raw(sem), vals.get(i).copied().unwrap_or(0))
                };
                Batch {
                    cbs,
                    counter_pass: perf.as_ref().map(|p| p.counter_pass_index),
                    waits: slice(s.p_wait_semaphores, s.wait_semaphore_count)
                        .iter()
                        .enumerate()
                        .map(|(i, &sem)| pair(wv, i, sem))
                        .collect(),
                    signals: slice(s.p_signal_semaphores, s.signal_semaphore_count)
                        .iter()
                        .enumerate()
                        .map(|(i, &sem)| pair(sv, i, sem))
                        .collect(),
                }
            })
            .collect();
        after_submit(d, seq, raw(queue), raw(fence), batches);
    });
    r
}

/// Also `vkQueueSubmit2KHR` (`E` says which name the app called).
pub unsafe fn vkQueueSubmit2<E: Entry<vk::PFN_vkQueueSubmit2>>(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(E::next(&d.table), NOT_PRESENT);
    let _gate = runtime::submit_gate();
    if runtime::capturing() {
        guard("vkQueueSubmit2", || scan_memory(&mut d.lock(), None));
    }
    let r = f(queue, count, p_submits, fence);
    guard("vkQueueSubmit2", || {
        let seq = rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkQueueSubmit2(e, queue, count, p_submits, fence)
        });
        if r != vk::Result::SUCCESS {
            return;
        }
        let signals = slice(p_submits, count).last().map_or(&[][..], |s| {
            slice(s.p_signal_semaphore_infos, s.signal_semaphore_info_count)
        });
        note_last_submit(
            d,
            raw(fence),
            signals.iter().map(|i| (raw(i.semaphore), i.value)),
        );
        if !runtime::capturing() {
            let cbs = slice(p_submits, count).iter().flat_map(|s| {
                slice(s.p_command_buffer_infos, s.command_buffer_info_count)
                    .iter()
                    .map(|c| raw(c.command_buffer))
            });
            return tracked_submit(d, seq, cbs);
        }
        let batches = slice(p_submits, count)
            .iter()
            .map(|s| {
                let cbs = slice(s.p_command_buffer_infos, s.command_buffer_info_count)
                    .iter()
                    .map(|c| raw(c.command_buffer))
                    .collect();
                let perf = find_in_chain(
                    s.p_next,
                    vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR,
                ) as *const vk::PerformanceQuerySubmitInfoKHR<'_>;
                let pairs = |infos: &[vk::SemaphoreSubmitInfo<'_>]| {
                    infos.iter().map(|i| (raw(i.semaphore), i.value)).collect()
                };
                Batch {
                    cbs,
                    counter_pass: perf.as_ref().map(|p| p.counter_pass_index),
                    waits: pairs(slice(s.p_wait_semaphore_infos, s.wait_semaphore_info_count)),
                    signals: pairs(slice(
                        s.p_signal_semaphore_infos,
                        s.signal_semaphore_info_count,
                    )),
                }
            })
            .collect();
        after_submit(d, seq, raw(queue), raw(fence), batches);
    });
    r
}

pub unsafe extern "system" fn vkQueueWaitIdle(queue: vk::Queue) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkQueueWaitIdle, NOT_PRESENT);
    let r = f(queue);
    guard("vkQueueWaitIdle", || {
        let seq = rec!(vkQueueWaitIdle, r.as_raw(), |e| {
            vkstream::encode::vkQueueWaitIdle(e, queue)
        });
        if r == vk::Result::SUCCESS {
            complete(d, |st| [(raw(queue), st.submit_order)]);
            crate::trim::snapshot::frame_boundary(FrameBoundary::QueueWaitIdle, seq);
        }
    });
    r
}

pub unsafe extern "system" fn vkDeviceWaitIdle(device: vk::Device) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkDeviceWaitIdle, NOT_PRESENT);
    let r = f(device);
    guard("vkDeviceWaitIdle", || {
        let seq = rec!(vkDeviceWaitIdle, r.as_raw(), |e| {
            vkstream::encode::vkDeviceWaitIdle(e, device)
        });
        if r == vk::Result::SUCCESS {
            complete(d, |st| {
                let last = st.submit_order;
                let queues = st
                    .pending
                    .iter()
                    .map(|p| p.queue)
                    .chain(st.nodes.iter().map(|n| n.queue));
                queues
                    .map(move |q| (q, last))
                    .collect::<smallvec::SmallVec<[(u64, u64); 4]>>()
            });
            crate::trim::snapshot::frame_boundary(FrameBoundary::DeviceWaitIdle, seq);
        }
    });
    r
}

/// Fences now known signaled: their submits and every earlier submit on the same queue completed.
fn fences_signaled(d: &'static DeviceData, fences: &[u64]) {
    complete(d, |st| {
        fences
            .iter()
            .filter_map(|f| st.fences.get(f).copied())
            .collect::<smallvec::SmallVec<[(u64, u64); 4]>>()
    });
}

/// Timeline semaphores the host saw reach (semaphore, value): every batch that signals one of
/// them with a value up to that is done.
fn semaphores_reached(d: &'static DeviceData, reached: &[(u64, u64)]) {
    complete(d, |st| {
        let mut seeds = smallvec::SmallVec::<[(u64, u64); 4]>::new();
        for n in &st.nodes {
            if n.signals
                .iter()
                .any(|&(s, v)| reached.iter().any(|&(rs, rv)| rs == s && v <= rv))
            {
                seeds.push((n.queue, n.order));
            }
        }
        seeds
    });
}

/// Also `vkWaitSemaphoresKHR` (`E` says which name the app called).
pub unsafe fn vkWaitSemaphores<E: Entry<vk::PFN_vkWaitSemaphores>>(
    device: vk::Device,
    p_info: *const vk::SemaphoreWaitInfo<'_>,
    timeout: u64,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(E::next(&d.table), NOT_PRESENT);
    let r = f(device, p_info, timeout);
    guard("vkWaitSemaphores", || {
        let seq = rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkWaitSemaphores(e, device, p_info, timeout)
        });
        if r != vk::Result::SUCCESS || p_info.is_null() {
            return;
        }
        let info = &*p_info;
        let sems = slice(info.p_semaphores, info.semaphore_count);
        let values = slice(info.p_values, info.semaphore_count);
        let any = info.flags.contains(vk::SemaphoreWaitFlags::ANY) && sems.len() > 1;
        // Nothing pending (the common case, and always while tracking): no read of counters, no
        // allocation, no lock while tracking.
        if runtime::capturing() && !d.lock().pending.is_empty() {
            // Either name: the wait just succeeded through one of them, so the device has it.
            let counter = d
                .table
                .vkGetSemaphoreCounterValue
                .or(d.table.vkGetSemaphoreCounterValueKHR);
            let reached: smallvec::SmallVec<[(u64, u64); 4]> = sems
                .iter()
                .zip(values)
                .filter_map(|(&s, &v)| {
                    if !any {
                        return Some((raw(s), v));
                    }
                    // Wait-any: which were reached is the counter's say.
                    let mut now = 0u64;
                    let get = counter?;
                    (get(device, s, &mut now) == vk::Result::SUCCESS).then_some((raw(s), now))
                })
                .collect();
            semaphores_reached(d, &reached);
        }
        crate::trim::snapshot::frame_boundary(FrameBoundary::SemaphoreWait, seq);
    });
    r
}

/// Also `vkGetSemaphoreCounterValueKHR` (`E` says which name the app called).
pub unsafe fn vkGetSemaphoreCounterValue<E: Entry<vk::PFN_vkGetSemaphoreCounterValue>>(
    device: vk::Device,
    semaphore: vk::Semaphore,
    p_value: *mut u64,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(E::next(&d.table), NOT_PRESENT);
    let r = f(device, semaphore, p_value);
    guard("vkGetSemaphoreCounterValue", || {
        let seq = rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkGetSemaphoreCounterValue(e, device, semaphore, p_value)
        });
        if r == vk::Result::SUCCESS && !p_value.is_null() {
            semaphores_reached(d, &[(raw(semaphore), *p_value)]);
            polled(d, seq, 0, Some((raw(semaphore), *p_value)));
        }
    });
    r
}

pub unsafe extern "system" fn vkWaitForFences(
    device: vk::Device,
    count: u32,
    p_fences: *const vk::Fence,
    wait_all: vk::Bool32,
    timeout: u64,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkWaitForFences, NOT_PRESENT);
    let r = f(device, count, p_fences, wait_all, timeout);
    guard("vkWaitForFences", || {
        let seq = rec!(vkWaitForFences, r.as_raw(), |e| {
            vkstream::encode::vkWaitForFences(e, device, count, p_fences, wait_all, timeout)
        });
        // While tracking no copy is pending (see `tracked_submit`): no fence to look up.
        if r == vk::Result::SUCCESS && runtime::capturing() {
            let all = slice(p_fences, count);
            let signaled: smallvec::SmallVec<[u64; 8]> = if wait_all != 0 || all.len() == 1 {
                all.iter().map(|&f| raw(f)).collect()
            } else if let Some(status) = d.table.vkGetFenceStatus {
                all.iter()
                    .filter(|&&f| status(device, f) == vk::Result::SUCCESS)
                    .map(|&f| raw(f))
                    .collect()
            } else {
                smallvec::SmallVec::new()
            };
            fences_signaled(d, &signaled);
        }
        if r == vk::Result::SUCCESS {
            crate::trim::snapshot::frame_boundary(FrameBoundary::FenceWait, seq);
        }
    });
    r
}

pub unsafe extern "system" fn vkGetFenceStatus(device: vk::Device, fence: vk::Fence) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkGetFenceStatus, NOT_PRESENT);
    let r = f(device, fence);
    guard("vkGetFenceStatus", || {
        let seq = rec!(vkGetFenceStatus, r.as_raw(), |e| {
            vkstream::encode::vkGetFenceStatus(e, device, fence)
        });
        if r == vk::Result::SUCCESS {
            fences_signaled(d, &[raw(fence)]);
            polled(d, seq, raw(fence), None);
        }
    });
    r
}
