//! Submission: which pass a submit counts as, the lock checks at submit, and the performance queries
//! marked measured once the submit succeeded.

use super::pools::apply_reset;
use super::*;

unsafe fn pass_index(p_next: *const c_void) -> u32 {
    let p = find_in_chain_mut(
        p_next as *mut c_void,
        vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR,
    ) as *const vk::PerformanceQuerySubmitInfoKHR<'_>;
    p.as_ref().map_or(0, |p| p.counter_pass_index)
}

/// Checks the batch's command buffers, then (after a successful submit) marks each performance query
/// they end as measured in `pass`. Returns the error to give the app, if any.
fn collect(st: &DevState, batches: &[(u32, Vec<u64>)]) -> Result<Vec<(u32, Op)>, vk::Result> {
    let mut ops = Vec::new();
    for (pass, cbs) in batches {
        for cb in cbs {
            let Some(c) = st.cbs.get(cb) else { continue };
            if let Some(v) = &c.violation {
                report(&format!(
                    "vkQueueSubmit refused: a command buffer broke a profiling-lock rule ({v})"
                ));
                return Err(vk::Result::ERROR_UNKNOWN);
            }
            ops.extend(c.ops.iter().map(|&o| (*pass, o)));
        }
    }
    Ok(ops)
}

fn apply(st: &mut DevState, ops: &[(u32, Op)]) {
    for &(pass, op) in ops {
        match op {
            Op::Reset { pool, first, count } => {
                if let Some(p) = st.pools.get_mut(&pool) {
                    apply_reset(p, first, count);
                }
            }
            Op::Query {
                pool,
                query,
                render_passes,
            } => {
                let Some(p) = st.pools.get_mut(&pool) else {
                    continue;
                };
                if pass >= p.plan.passes {
                    report(&format!(
                        "VUID-VkPerformanceQuerySubmitInfoKHR-counterPassIndex-03221: counterPassIndex {pass} is not below the {} passes of the query; the submit measured nothing",
                        p.plan.passes
                    ));
                    continue;
                }
                if let Some(q) = p.queries.get_mut(query as usize) {
                    q.passes_submitted |= 1 << pass.min(63);
                    q.render_passes = render_passes;
                }
            }
            Op::Copy { pool, first, count } => {
                let Some(p) = st.pools.get(&pool) else {
                    continue;
                };
                let all = p.all_passes();
                let end = first.saturating_add(count).min(p.count);
                if let Some(q) = (first.min(end)..end)
                    .find(|&q| p.queries[q as usize].passes_submitted & all != all)
                {
                    // Measured by this very submit (the copy follows the query in the same
                    // recording) counts; the values are right once every pass was submitted.
                    report_once("03234", &format!(
                        "VUID-vkCmdCopyQueryPoolResults-queryType-03234: a copy of performance query {q} was submitted before each of its {} passes was (passes submitted: mask {:#b}); it copies the last submitted measurement",
                        p.plan.passes,
                        p.queries[q as usize].passes_submitted
                    ));
                }
            }
        }
    }
}

pub(super) unsafe extern "system" fn queue_submit(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(queue.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let submits: &[vk::SubmitInfo<'_>] = if n == 0 || p_submits.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p_submits, n as usize)
        };
        let batches: Vec<(u32, Vec<u64>)> = submits
            .iter()
            .map(|s| {
                let cbs = if s.command_buffer_count == 0 || s.p_command_buffers.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(s.p_command_buffers, s.command_buffer_count as usize)
                        .iter()
                        .map(|c| c.as_raw())
                        .collect()
                };
                (pass_index(s.p_next), cbs)
            })
            .collect();
        submit_with(&dev, &batches, || {
            let mut copy: Vec<vk::SubmitInfo<'_>> = submits.to_vec();
            let mut heads: Vec<*const c_void> = copy.iter().map(|s| s.p_next).collect();
            let restore = unlink_pass_infos(&mut heads);
            for (s, h) in copy.iter_mut().zip(heads) {
                s.p_next = h;
            }
            let r = (dev.f.queue_submit.expect("core vkQueueSubmit"))(
                queue,
                n,
                if copy.is_empty() {
                    p_submits
                } else {
                    copy.as_ptr()
                },
                fence,
            );
            relink(restore);
            r
        })
    })
}

/// Unlinks every VkPerformanceQuerySubmitInfoKHR from the pNext chains of `heads` (the driver below
/// does not know the extension, and a validation layer below would index its per-pass query state
/// with it); returns the links to put back after the call.
unsafe fn unlink_pass_infos(
    heads: &mut [*const c_void],
) -> Vec<(
    *mut vk::BaseOutStructure<'static>,
    *mut vk::BaseOutStructure<'static>,
)> {
    let mut restore = Vec::new();
    for head in heads.iter_mut() {
        while !head.is_null()
            && (*(*head as *const vk::BaseInStructure<'_>)).s_type
                == vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR
        {
            *head = (*(*head as *const vk::BaseInStructure<'_>)).p_next as *const c_void;
        }
        let mut prev = *head as *mut vk::BaseOutStructure<'static>;
        while !prev.is_null() {
            let next = (*prev).p_next;
            if !next.is_null()
                && (*next).s_type == vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR
            {
                restore.push((prev, next));
                (*prev).p_next = (*next).p_next;
            } else {
                prev = next;
            }
        }
    }
    restore
}

unsafe fn relink(
    restore: Vec<(
        *mut vk::BaseOutStructure<'static>,
        *mut vk::BaseOutStructure<'static>,
    )>,
) {
    for (p, old) in restore.into_iter().rev() {
        (*p).p_next = old;
    }
}

fn submit_with(
    dev: &Device,
    batches: &[(u32, Vec<u64>)],
    submit: impl FnOnce() -> vk::Result,
) -> vk::Result {
    let ops = match collect(&lock(&dev.st), batches) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let r = submit();
    if r == vk::Result::SUCCESS && !ops.is_empty() {
        apply(&mut lock(&dev.st), &ops);
    }
    r
}

unsafe fn submit2_batches(n: u32, p_submits: *const vk::SubmitInfo2<'_>) -> Vec<(u32, Vec<u64>)> {
    let submits: &[vk::SubmitInfo2<'_>] = if n == 0 || p_submits.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p_submits, n as usize)
    };
    submits
        .iter()
        .map(|s| {
            let cbs = if s.command_buffer_info_count == 0 || s.p_command_buffer_infos.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(
                    s.p_command_buffer_infos,
                    s.command_buffer_info_count as usize,
                )
                .iter()
                .map(|c| c.command_buffer.as_raw())
                .collect()
            };
            (pass_index(s.p_next), cbs)
        })
        .collect()
}

pub(super) unsafe extern "system" fn queue_submit2(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    submit2_through(queue, n, p_submits, fence, |d| {
        d.f.queue_submit2.expect("vkQueueSubmit2")
    })
}

pub(super) unsafe extern "system" fn queue_submit2_khr(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    submit2_through(queue, n, p_submits, fence, |d| {
        d.f.queue_submit2_khr.expect("vkQueueSubmit2KHR")
    })
}

/// vkQueueSubmit2 and its KHR alias: the pass-index structs are unlinked from a copy of the batches
/// before calling `next` of the driver, and relinked after.
unsafe fn submit2_through(
    queue: vk::Queue,
    n: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
    next: impl Fn(&Device) -> vk::PFN_vkQueueSubmit2,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(queue.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let batches = submit2_batches(n, p_submits);
        submit_with(&dev, &batches, || {
            let mut copy: Vec<vk::SubmitInfo2<'_>> = if n == 0 || p_submits.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p_submits, n as usize).to_vec()
            };
            let mut heads: Vec<*const c_void> = copy.iter().map(|s| s.p_next).collect();
            let restore = unlink_pass_infos(&mut heads);
            for (s, h) in copy.iter_mut().zip(heads) {
                s.p_next = h;
            }
            let ptr = if copy.is_empty() {
                p_submits
            } else {
                copy.as_ptr()
            };
            let r = (next(&dev))(queue, n, ptr, fence);
            relink(restore);
            r
        })
    })
}
