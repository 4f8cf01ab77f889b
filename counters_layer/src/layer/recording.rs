//! Command buffer recording: the profiling lock checks, the internal queries written for
//! begin/end of a performance query, timestamps, and the render pass instances measured.

use super::*;

pub(super) unsafe extern "system" fn begin_command_buffer(
    cb: vk::CommandBuffer,
    p_info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let r = (dev
            .f
            .begin_command_buffer
            .expect("core vkBeginCommandBuffer"))(cb, p_info);
        if r == vk::Result::SUCCESS {
            let mut st = lock(&dev.st);
            let held = st.lock_generation_if_held();
            st.cbs.insert(
                cb.as_raw(),
                CbState {
                    lock_at_begin: held,
                    ..Default::default()
                },
            );
        }
        r
    })
}

pub(super) unsafe extern "system" fn end_command_buffer(cb: vk::CommandBuffer) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let r = (dev.f.end_command_buffer.expect("core vkEndCommandBuffer"))(cb);
        let mut st = lock(&dev.st);
        let now = st.lock_generation_if_held();
        let Some(c) = st.cbs.get_mut(&cb.as_raw()) else {
            return r;
        };
        // A copy alone does not need the profiling lock.
        let has_perf = c.ops.iter().any(|o| !matches!(o, Op::Copy { .. })) || c.active.is_some();
        if has_perf
            && c.violation.is_none()
            && (c.lock_at_begin.is_none() || c.lock_at_begin != now)
        {
            let msg = "VUID-vkQueueSubmit-pCommandBuffers-03220: the profiling lock was released while a command buffer with performance queries was being recorded".to_string();
            report(&msg);
            c.violation = Some(msg);
        }
        if c.violation.is_some() && r == vk::Result::SUCCESS {
            return vk::Result::ERROR_UNKNOWN;
        }
        r
    })
}

pub(super) unsafe extern "system" fn free_command_buffers(
    device: vk::Device,
    pool: vk::CommandPool,
    n: u32,
    p_cbs: *const vk::CommandBuffer,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        if !p_cbs.is_null() {
            let mut st = lock(&dev.st);
            for cb in std::slice::from_raw_parts(p_cbs, n as usize) {
                st.cbs.remove(&cb.as_raw());
            }
        }
        (dev.f
            .free_command_buffers
            .expect("core vkFreeCommandBuffers"))(device, pool, n, p_cbs);
    })
}

pub(super) unsafe extern "system" fn cmd_execute_commands(
    cb: vk::CommandBuffer,
    n: u32,
    p_cbs: *const vk::CommandBuffer,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !p_cbs.is_null() {
            // Queries recorded in secondaries count when the primary is submitted.
            let mut st = lock(&dev.st);
            let mut ops = Vec::new();
            let mut violation = None;
            for s in std::slice::from_raw_parts(p_cbs, n as usize) {
                if let Some(c) = st.cbs.get(&s.as_raw()) {
                    ops.extend_from_slice(&c.ops);
                    violation = violation.or_else(|| c.violation.clone());
                }
            }
            if let Some(c) = st.cbs.get_mut(&cb.as_raw()) {
                c.ops.extend(ops);
                if c.violation.is_none() {
                    c.violation = violation;
                }
            }
        }
        (dev.f
            .cmd_execute_commands
            .expect("core vkCmdExecuteCommands"))(cb, n, p_cbs);
    })
}

pub(super) unsafe extern "system" fn cmd_reset_query_pool(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        {
            let mut st = lock(&dev.st);
            if st.pools.contains_key(&pool.as_raw()) {
                st.cbs.entry(cb.as_raw()).or_default().ops.push(Op::Reset {
                    pool: pool.as_raw(),
                    first,
                    count,
                });
                return;
            }
        }
        (dev.f
            .cmd_reset_query_pool
            .expect("core vkCmdResetQueryPool"))(cb, pool, first, count);
    })
}

/// Records the internal queries for a performance query begin; returns false when `pool` is not a
/// performance pool.
unsafe fn perf_begin(dev: &Device, cb: vk::CommandBuffer, pool: vk::QueryPool, query: u32) -> bool {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(p) = st.pools.get(&pool.as_raw()) else {
        return false;
    };
    let held = st.lock_generation_if_held();
    let c = st.cbs.entry(cb.as_raw()).or_default();
    if c.lock_at_begin.is_none() || c.lock_at_begin != held {
        let msg = "VUID-vkCmdBeginQuery-queryPool-03223: the profiling lock (vkAcquireProfilingLockKHR) must be held before vkBeginCommandBuffer is called on a command buffer that records performance queries".to_string();
        report(&msg);
        c.violation.get_or_insert(msg);
        return true;
    }
    if query >= p.count {
        report(&format!(
            "VUID-vkCmdBeginQuery-query-00802: query {query} is not below the pool's {} queries",
            p.count
        ));
        return true;
    }
    if c.active.is_some() {
        report("VUID-vkCmdBeginQuery-queryPool-01922: a performance query is already active in this command buffer (performanceCounterMultipleQueryPools is VK_FALSE)");
        return true;
    }
    let f = &dev.f;
    let reset = f.cmd_reset_query_pool.expect("core vkCmdResetQueryPool");
    let ts_base = query * p.ts_slots;
    reset(cb, p.ts, ts_base, p.ts_slots);
    if let Some((s, _)) = p.stats {
        reset(cb, s, query, 1);
    }
    if let Some(o) = p.occlusion {
        reset(cb, o, query, 1);
    }
    if p.durations {
        (f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
            cb,
            vk::PipelineStageFlags::TOP_OF_PIPE,
            p.ts,
            ts_base,
        );
    }
    let begin = f.cmd_begin_query.expect("core vkCmdBeginQuery");
    if let Some((s, _)) = p.stats {
        begin(cb, s, query, vk::QueryControlFlags::empty());
    }
    if let Some(o) = p.occlusion {
        begin(cb, o, query, vk::QueryControlFlags::PRECISE);
    }
    c.active = Some(Active {
        pool: pool.as_raw(),
        query,
        render_passes: 0,
        rp_open: false,
    });
    true
}

unsafe fn perf_end(dev: &Device, cb: vk::CommandBuffer, pool: vk::QueryPool, query: u32) -> bool {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(p) = st.pools.get(&pool.as_raw()) else {
        return false;
    };
    let c = st.cbs.entry(cb.as_raw()).or_default();
    let Some(a) = c
        .active
        .filter(|a| a.pool == pool.as_raw() && a.query == query)
    else {
        if c.violation.is_none() {
            report(&format!("VUID-vkCmdEndQuery-None-01923: performance query {query} is not active in this command buffer"));
        }
        return true;
    };
    let f = &dev.f;
    let end = f.cmd_end_query.expect("core vkCmdEndQuery");
    if let Some(o) = p.occlusion {
        end(cb, o, query);
    }
    if let Some((s, _)) = p.stats {
        end(cb, s, query);
    }
    if p.durations {
        (f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
            cb,
            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            p.ts,
            query * p.ts_slots + 1,
        );
    }
    if let Some(pc) = &p.copy {
        pc.after_end(dev, cb, p, query, a.render_passes);
    }
    c.active = None;
    c.ops.push(Op::Query {
        pool: pool.as_raw(),
        query,
        render_passes: a.render_passes,
    });
    true
}

pub(super) unsafe extern "system" fn cmd_begin_query(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_begin(&dev, cb, pool, query) {
            (dev.f.cmd_begin_query.expect("core vkCmdBeginQuery"))(cb, pool, query, flags);
        }
    })
}

pub(super) unsafe extern "system" fn cmd_end_query(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_end(&dev, cb, pool, query) {
            (dev.f.cmd_end_query.expect("core vkCmdEndQuery"))(cb, pool, query);
        }
    })
}

pub(super) unsafe extern "system" fn cmd_begin_query_indexed(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    flags: vk::QueryControlFlags,
    index: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_begin(&dev, cb, pool, query) {
            if let Some(f) = dev.f.cmd_begin_query_indexed {
                f(cb, pool, query, flags, index);
            }
        }
    })
}

pub(super) unsafe extern "system" fn cmd_end_query_indexed(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    query: u32,
    index: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !perf_end(&dev, cb, pool, query) {
            if let Some(f) = dev.f.cmd_end_query_indexed {
                f(cb, pool, query, index);
            }
        }
    })
}

pub(super) unsafe extern "system" fn cmd_write_timestamp(
    cb: vk::CommandBuffer,
    stage: vk::PipelineStageFlags,
    pool: vk::QueryPool,
    query: u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if lock(&dev.st).pools.contains_key(&pool.as_raw()) {
            report("VUID-vkCmdWriteTimestamp-queryPool-01416: vkCmdWriteTimestamp on a performance query pool; not recorded");
            return;
        }
        (dev.f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(cb, stage, pool, query);
    })
}

/// Before a render pass instance begins: a timestamp outside it (so multiview does not widen it).
unsafe fn render_pass_begins(dev: &Device, cb: vk::CommandBuffer) {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(c) = st.cbs.get_mut(&cb.as_raw()) else {
        return;
    };
    let Some(a) = c.active.as_mut() else { return };
    let Some(p) = st.pools.get(&a.pool) else {
        return;
    };
    if !p.render_pass_duration {
        return;
    }
    if a.render_passes >= RP_SLOTS {
        report_once("rp-slots", &format!("more than {RP_SLOTS} render pass instances in one performance query: \"Render pass duration\" counts the first {RP_SLOTS}"));
        return;
    }
    (dev.f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
        cb,
        vk::PipelineStageFlags::TOP_OF_PIPE,
        p.ts,
        a.query * p.ts_slots + 2 + 2 * a.render_passes,
    );
    a.rp_open = true;
}

/// After a render pass instance ended.
unsafe fn render_pass_ended(dev: &Device, cb: vk::CommandBuffer) {
    let mut guard = lock(&dev.st);
    let st = &mut *guard;
    let Some(c) = st.cbs.get_mut(&cb.as_raw()) else {
        return;
    };
    let Some(a) = c.active.as_mut() else { return };
    if !a.rp_open {
        return;
    }
    let Some(p) = st.pools.get(&a.pool) else {
        return;
    };
    (dev.f.cmd_write_timestamp.expect("core vkCmdWriteTimestamp"))(
        cb,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        p.ts,
        a.query * p.ts_slots + 3 + 2 * a.render_passes,
    );
    a.rp_open = false;
    a.render_passes += 1;
}

macro_rules! render_pass_hook {
    ($name:ident, $field:ident, begin, ($($arg:ident : $ty:ty),*)) => {
        pub(super) unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard((), || {
                let Some(dev) = device_of(cb.as_raw()) else { return };
                render_pass_begins(&dev, cb);
                if let Some(f) = dev.f.$field {
                    f(cb, $($arg),*);
                }
            })
        }
    };
    ($name:ident, $field:ident, end, ($($arg:ident : $ty:ty),*)) => {
        pub(super) unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard((), || {
                let Some(dev) = device_of(cb.as_raw()) else { return };
                if let Some(f) = dev.f.$field {
                    f(cb, $($arg),*);
                }
                render_pass_ended(&dev, cb);
            })
        }
    };
}

render_pass_hook!(cmd_begin_render_pass, cmd_begin_render_pass, begin,
    (info: *const vk::RenderPassBeginInfo<'_>, contents: vk::SubpassContents));
render_pass_hook!(cmd_begin_render_pass2, cmd_begin_render_pass2, begin,
    (info: *const vk::RenderPassBeginInfo<'_>, sub: *const vk::SubpassBeginInfo<'_>));
render_pass_hook!(cmd_begin_render_pass2_khr, cmd_begin_render_pass2_khr, begin,
    (info: *const vk::RenderPassBeginInfo<'_>, sub: *const vk::SubpassBeginInfo<'_>));
render_pass_hook!(cmd_end_render_pass, cmd_end_render_pass, end, ());
render_pass_hook!(cmd_end_render_pass2, cmd_end_render_pass2, end,
    (sub: *const vk::SubpassEndInfo<'_>));
render_pass_hook!(cmd_end_render_pass2_khr, cmd_end_render_pass2_khr, end,
    (sub: *const vk::SubpassEndInfo<'_>));
render_pass_hook!(cmd_begin_rendering, cmd_begin_rendering, begin,
    (info: *const vk::RenderingInfo<'_>));
render_pass_hook!(cmd_begin_rendering_khr, cmd_begin_rendering_khr, begin,
    (info: *const vk::RenderingInfo<'_>));
render_pass_hook!(cmd_end_rendering, cmd_end_rendering, end, ());
render_pass_hook!(cmd_end_rendering_khr, cmd_end_rendering_khr, end, ());
