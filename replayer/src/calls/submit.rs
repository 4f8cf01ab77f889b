//! Queue submissions: handles translated, timeline values and performance-query passes kept
//! (every replayed performance pool needs one pass: the app's later passes keep only their
//! synchronisation).

use std::ffi::c_void;

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, Call};

use super::{loaded, Entry};
use crate::chain::chained;
use crate::error::ReplayError;
use crate::generated::dispatch::{m_VkSubmitInfo, m_VkSubmitInfo2, Arena};
use crate::session::Session;

pub(crate) unsafe fn vkQueueSubmit(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkQueueSubmit,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
    let fence = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, p.fence)?);
    // Every submit info, chains included, through the generated code; only the
    // performance-query pass is then changed.
    let mut arena = Arena::new();
    let mut infos = Vec::new();
    for si in p.p_submits.as_deref().unwrap_or(&[]) {
        let mut info = m_VkSubmitInfo(si, &mut arena, s)?;
        if first_pass_only(info.p_next) {
            info.command_buffer_count = 0;
        }
        infos.push(info);
    }
    let d = s.device_for(q)?;
    d.device
        .queue_submit(vk::Queue::from_raw(q), &infos, fence)
        .map_err(|e| ReplayError::vk("vkQueueSubmit", e))
}

/// Every replayed performance pool needs one pass (crate::perf): a submit of the app's further
/// passes would re-run its queries unreset, so only its synchronisation is kept (`true`: leave
/// its command buffers out). The pass index of a chained `VkPerformanceQuerySubmitInfoKHR`
/// becomes 0.
///
/// # Safety
/// `chain` must be a chain the replayer materialised.
unsafe fn first_pass_only(chain: *const c_void) -> bool {
    let pass = vk::StructureType::PERFORMANCE_QUERY_SUBMIT_INFO_KHR;
    match chained::<vk::PerformanceQuerySubmitInfoKHR<'_>>(chain, pass) {
        Some(pq) => {
            let later = (*pq).counter_pass_index > 0;
            (*pq).counter_pass_index = 0;
            later
        }
        None => false,
    }
}

/// Also `vkQueueSubmit2KHR`, called through the entry point of the name recorded (`E`).
pub(crate) unsafe fn vkQueueSubmit2<E: Entry<vk::PFN_vkQueueSubmit2>>(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkQueueSubmit2,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
    let fence = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, p.fence)?);
    // As in vkQueueSubmit: everything through the generated code, the pass changed after.
    let mut arena = Arena::new();
    let mut infos = Vec::new();
    for si in p.p_submits.as_deref().unwrap_or(&[]) {
        let mut info = m_VkSubmitInfo2(si, &mut arena, s)?;
        if first_pass_only(info.p_next) {
            info.command_buffer_info_count = 0;
        }
        infos.push(info);
    }
    let f = loaded(E::next(&s.device_for(q)?.table), E::NAME)?;
    f(
        vk::Queue::from_raw(q),
        infos.len() as u32,
        infos.as_ptr(),
        fence,
    )
    .result()
    .map_err(|e| ReplayError::vk("vkQueueSubmit2", e))
}
