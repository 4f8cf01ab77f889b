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

use crate::hooks::{find_in_chain, next, raw, rec, slice, NOT_PRESENT};
use crate::memory::scan_memory;
use crate::query_copies::complete;
use crate::runtime::{self, guard, DeviceData};
use crate::state::PendingCopy;
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
        // Beginning resets the buffer: its earlier query work will not run again.
        d.lock().cmdbufs.remove(&raw(cb));
        rec!(vkBeginCommandBuffer, r.as_raw(), |e| {
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
        d.lock().cmdbufs.remove(&raw(cb));
        rec!(vkResetCommandBuffer, r.as_raw(), |e| {
            vkstream::encode::vkResetCommandBuffer(e, cb, flags)
        });
    });
    r
}

// ==== submits, present, waits =======================================================================

/// Bookkeeping after a successful submit of `batches` (command buffers, counter pass) on `queue`.
fn after_submit(
    d: &DeviceData,
    seq: Option<u64>,
    queue: u64,
    fence: u64,
    batches: Vec<(Vec<u64>, Option<u32>)>,
) {
    let t0 = runtime::prof::start();
    let host_ns = runtime::call_ns();
    let mut guard = d.lock();
    let st = &mut *guard;
    let family = st.queues.get(&queue).copied().unwrap_or(u32::MAX);
    st.submit_order += 1;
    let order = st.submit_order;
    if fence != 0 {
        st.fences.insert(fence, (queue, order));
    }
    for cb in batches.iter().flat_map(|(cbs, _)| cbs) {
        let Some(q) = st.cmdbufs.get(cb) else {
            continue;
        };
        // Resets recorded in the buffer take effect now (near enough for availability tracking).
        for &(pool, first, count) in &q.resets {
            if let Some(p) = st.pools.get_mut(&pool) {
                p.reset(first, count);
            }
        }
        st.pending.extend(q.copies.iter().map(|op| PendingCopy {
            op: op.clone(),
            queue,
            fence,
            order,
        }));
    }
    if let Some(seq) = seq {
        // The device state lock is taken before the capture's, as everywhere.
        runtime::submitted(|frame| {
            batches
                .into_iter()
                .map(move |(command_buffers, counter_pass)| {
                    Record::Submit(record::Submit {
                        seq,
                        queue,
                        queue_family: family,
                        command_buffers,
                        host_ns,
                        frame,
                        counter_pass,
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
    // Host writes reach the trace before the submit that lets the GPU read them.
    guard("vkQueueSubmit", || scan_memory(&mut d.lock(), None));
    let r = f(queue, count, p_submits, fence);
    guard("vkQueueSubmit", || {
        let seq = rec!(vkQueueSubmit, r.as_raw(), |e| {
            vkstream::encode::vkQueueSubmit(e, queue, count, p_submits, fence)
        });
        if r != vk::Result::SUCCESS {
            return;
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
                (cbs, perf.as_ref().map(|p| p.counter_pass_index))
            })
            .collect();
        after_submit(d, seq, raw(queue), raw(fence), batches);
    });
    r
}

unsafe fn queue_submit2(
    khr: bool,
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(queue)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(
        if khr {
            d.table.vkQueueSubmit2KHR
        } else {
            d.table.vkQueueSubmit2
        },
        NOT_PRESENT
    );
    guard("vkQueueSubmit2", || scan_memory(&mut d.lock(), None));
    let r = f(queue, count, p_submits, fence);
    guard("vkQueueSubmit2", || {
        let seq = if khr {
            rec!(vkQueueSubmit2KHR, r.as_raw(), |e| {
                vkstream::encode::vkQueueSubmit2KHR(e, queue, count, p_submits, fence)
            })
        } else {
            rec!(vkQueueSubmit2, r.as_raw(), |e| {
                vkstream::encode::vkQueueSubmit2(e, queue, count, p_submits, fence)
            })
        };
        if r != vk::Result::SUCCESS {
            return;
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
                (cbs, perf.as_ref().map(|p| p.counter_pass_index))
            })
            .collect();
        after_submit(d, seq, raw(queue), raw(fence), batches);
    });
    r
}

pub unsafe extern "system" fn vkQueueSubmit2(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    queue_submit2(false, queue, count, p_submits, fence)
}

pub unsafe extern "system" fn vkQueueSubmit2KHR(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    queue_submit2(true, queue, count, p_submits, fence)
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
            complete(d, |p| p.queue == raw(queue));
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
            complete(d, |_| true);
            crate::trim::snapshot::frame_boundary(FrameBoundary::DeviceWaitIdle, seq);
        }
    });
    r
}

/// Fences now known signaled: their submits and every earlier submit on the same queue completed.
fn fences_signaled(d: &'static DeviceData, fences: &[u64]) {
    let marks: smallvec::SmallVec<[(u64, u64); 8]> = {
        let st = d.lock();
        fences
            .iter()
            .filter_map(|f| st.fences.get(f).copied())
            .collect()
    };
    if marks.is_empty() {
        return;
    }
    complete(d, |p| {
        marks
            .iter()
            .any(|&(q, order)| p.queue == q && p.order <= order)
    });
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
        if r != vk::Result::SUCCESS {
            return;
        }
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
        crate::trim::snapshot::frame_boundary(FrameBoundary::FenceWait, seq);
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
        rec!(vkGetFenceStatus, r.as_raw(), |e| {
            vkstream::encode::vkGetFenceStatus(e, device, fence)
        });
        if r == vk::Result::SUCCESS {
            fences_signaled(d, &[raw(fence)]);
        }
    });
    r
}
