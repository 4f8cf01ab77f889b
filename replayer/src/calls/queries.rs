//! Query pools and query commands. Performance pools are planned per replay GPU (`crate::perf`):
//! each replay pass measures one group of the captured counters. Query *reads* are not replayed
//! here: the engine re-does them at the trace's `QueryResults`/`QueryCopy` records.

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, Call};

use super::{cmd, loaded, other, Entry};
use crate::chain::{chained, unchain};
use crate::error::ReplayError;
use crate::generated::dispatch::{m_VkQueryPoolCreateInfo, Arena};
use crate::session::Session;

fn pool(s: &Session<'_>, captured: u64) -> Result<vk::QueryPool, ReplayError> {
    Ok(vk::QueryPool::from_raw(
        s.lookup(vk::ObjectType::QUERY_POOL, captured)?,
    ))
}

pub(crate) unsafe fn vkCreateQueryPool(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateQueryPool,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let ci = p
        .p_create_info
        .as_deref()
        .ok_or_else(|| other("no create info"))?;
    // The whole create info through the generated code; a performance pool's counters and
    // queue family are then those planned for the replay GPU.
    let mut arena = Arena::new();
    let mut info = m_VkQueryPoolCreateInfo(ci, &mut arena, s)?;
    let perf_type = vk::StructureType::QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR;
    let perf_indices: Vec<u32>;
    if let Some(perf) = chained::<vk::QueryPoolPerformanceCreateInfoKHR<'_>>(info.p_next, perf_type)
    {
        let family = s.map_family(p.device, (*perf).queue_family_index);
        let captured = p.p_query_pool.unwrap_or(0);
        perf_indices = plan_perf_pool(s, rec.seq, p.device, captured, family)?;
        (*perf).queue_family_index = family;
        (*perf).counter_index_count = perf_indices.len() as u32;
        (*perf).p_counter_indices = perf_indices.as_ptr();
        if perf_indices.is_empty() {
            unchain(&mut info.p_next, perf_type);
        }
    }
    let d = s.device(p.device)?;
    let pool = d
        .device
        .create_query_pool(&info, None)
        .map_err(|e| ReplayError::vk("vkCreateQueryPool", e))?;
    let captured = p.p_query_pool.unwrap_or(0);
    s.bind(vk::ObjectType::QUERY_POOL, captured, pool.as_raw());
    s.tracked.live_pools.insert(captured, (p.device, pool));
    Ok(())
}

pub(crate) unsafe fn vkDestroyQueryPool(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkDestroyQueryPool,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let pool = pool(s, p.query_pool)?;
    s.device(p.device)?.device.destroy_query_pool(pool, None);
    s.unbind(vk::ObjectType::QUERY_POOL, p.query_pool);
    s.tracked.live_pools.remove(&p.query_pool);
    Ok(())
}

/// Also `vkResetQueryPoolEXT`, called through the entry point of the name recorded (`E`).
pub(crate) unsafe fn vkResetQueryPool<E: Entry<vk::PFN_vkResetQueryPool>>(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkResetQueryPool,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let pool = pool(s, p.query_pool)?;
    let d = s.device(p.device)?;
    let f = loaded(E::next(&d.table), E::NAME)?;
    f(d.device.handle(), pool, p.first_query, p.query_count);
    Ok(())
}

pub(crate) unsafe fn vkCmdResetQueryPool(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdResetQueryPool,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let (d, cb) = cmd(s, p.command_buffer)?;
    d.cmd_reset_query_pool(cb, pool(s, p.query_pool)?, p.first_query, p.query_count);
    Ok(())
}

pub(crate) unsafe fn vkCmdBeginQuery(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdBeginQuery,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let (d, cb) = cmd(s, p.command_buffer)?;
    let pool = pool(s, p.query_pool)?;
    d.cmd_begin_query(cb, pool, p.query, vk::QueryControlFlags::from_raw(p.flags));
    Ok(())
}

pub(crate) unsafe fn vkCmdEndQuery(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdEndQuery,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let (d, cb) = cmd(s, p.command_buffer)?;
    d.cmd_end_query(cb, pool(s, p.query_pool)?, p.query);
    Ok(())
}

pub(crate) unsafe fn vkCmdBeginQueryIndexedEXT(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdBeginQueryIndexedEXT,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
    let f = s.device_for(cb)?.table.vkCmdBeginQueryIndexedEXT;
    let f = loaded(f, "vkCmdBeginQueryIndexedEXT")?;
    f(
        vk::CommandBuffer::from_raw(cb),
        pool(s, p.query_pool)?,
        p.query,
        vk::QueryControlFlags::from_raw(p.flags),
        p.index,
    );
    Ok(())
}

pub(crate) unsafe fn vkCmdEndQueryIndexedEXT(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdEndQueryIndexedEXT,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
    let f = s.device_for(cb)?.table.vkCmdEndQueryIndexedEXT;
    let f = loaded(f, "vkCmdEndQueryIndexedEXT")?;
    f(
        vk::CommandBuffer::from_raw(cb),
        pool(s, p.query_pool)?,
        p.query,
        p.index,
    );
    Ok(())
}

pub(crate) unsafe fn vkCmdWriteTimestamp(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdWriteTimestamp,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let (d, cb) = cmd(s, p.command_buffer)?;
    d.cmd_write_timestamp(
        cb,
        vk::PipelineStageFlags::from_raw(p.pipeline_stage),
        pool(s, p.query_pool)?,
        p.query,
    );
    Ok(())
}

/// Also `vkCmdWriteTimestamp2KHR`, called through the entry point of the name recorded (`E`).
pub(crate) unsafe fn vkCmdWriteTimestamp2<E: Entry<vk::PFN_vkCmdWriteTimestamp2>>(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdWriteTimestamp2,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let stage = vk::PipelineStageFlags2::from_raw(p.stage);
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
    let f = loaded(E::next(&s.device_for(cb)?.table), E::NAME)?;
    f(
        vk::CommandBuffer::from_raw(cb),
        stage,
        pool(s, p.query_pool)?,
        p.query,
    );
    Ok(())
}

pub(crate) unsafe fn vkCmdCopyQueryPoolResults(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdCopyQueryPoolResults,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let (d, cb) = cmd(s, p.command_buffer)?;
    let pool = pool(s, p.query_pool)?;
    let buf = vk::Buffer::from_raw(s.lookup(vk::ObjectType::BUFFER, p.dst_buffer)?);
    d.cmd_copy_query_pool_results(
        cb,
        pool,
        p.first_query,
        p.query_count,
        buf,
        p.dst_offset,
        p.stride,
        vk::QueryResultFlags::from_raw(p.flags),
    );
    Ok(())
}

/// Works out how captured performance pool `captured` (created by call `seq`) is measured on the
/// replay GPU's queue family `family` and returns the counter indices of this replay pass.
fn plan_perf_pool(
    s: &mut Session<'_>,
    seq: u64,
    device_captured: u64,
    captured: u64,
    family: u32,
) -> Result<Vec<u32>, ReplayError> {
    let descs = s.perf.pool_counters.get(&seq).cloned().unwrap_or_default();
    if descs.is_empty() {
        return Err(other(
            "the trace holds no counter descriptions for this performance query pool",
        ));
    }
    let device = s.device_counters(device_captured, family)?;
    let matched = crate::perf::match_counters(&descs, &device);
    for (d, m) in descs.iter().zip(&matched) {
        if m.is_none() {
            let w = format!(
                "performance counter \"{}\" ({}) is not on the replay GPU; it is not measured",
                d.name,
                d.uuid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            );
            if !s.perf.warnings.contains(&w) {
                s.perf.warnings.push(w);
            }
        }
    }
    if matched.iter().all(Option::is_none) {
        return Err(other(format!(
            "none of this pool's {} performance counters ({}) exists on the replay GPU (matched by UUID, then by name and unit)",
            descs.len(),
            descs
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let plan = crate::perf::plan(
        matched,
        |ix| s.perf_passes(device_captured, family, ix),
        s.perf.forced,
    )
    .map_err(other)?;
    s.hold_profiling_lock(device_captured, "performance query pools")?;
    let indices = plan.indices_for(s.perf.pass);
    s.perf.passes_needed = s.perf.passes_needed.max(plan.groups.len() as u32);
    s.perf.plans.insert(captured, plan);
    Ok(indices)
}
