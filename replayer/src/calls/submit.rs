//! Queue submissions: handles translated, timeline values and performance-query passes kept
//! (every replayed performance pool needs one pass: the app's later passes keep only their
//! synchronisation).

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, types, Call, PNext};

use super::{loaded, lookup_all, other, Entry};
use crate::error::ReplayError;
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
    struct One {
        wait: Vec<vk::Semaphore>,
        stages: Vec<vk::PipelineStageFlags>,
        cbs: Vec<vk::CommandBuffer>,
        signal: Vec<vk::Semaphore>,
        timeline: Option<(Vec<u64>, Vec<u64>)>,
        pass: Option<u32>,
    }
    let mut all = Vec::new();
    for si in p.p_submits.as_deref().unwrap_or(&[]) {
        let mut one = One {
            wait: lookup_all(s, vk::ObjectType::SEMAPHORE, &si.p_wait_semaphores)?,
            stages: si
                .p_wait_dst_stage_mask
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|m| vk::PipelineStageFlags::from_raw(*m))
                .collect(),
            cbs: lookup_all(s, vk::ObjectType::COMMAND_BUFFER, &si.p_command_buffers)?,
            signal: lookup_all(s, vk::ObjectType::SEMAPHORE, &si.p_signal_semaphores)?,
            timeline: None,
            pass: None,
        };
        for n in &si.p_next {
            match n {
                PNext::VkTimelineSemaphoreSubmitInfo(t) => {
                    one.timeline = Some((
                        t.p_wait_semaphore_values.clone().unwrap_or_default(),
                        t.p_signal_semaphore_values.clone().unwrap_or_default(),
                    ))
                }
                PNext::VkPerformanceQuerySubmitInfoKHR(x) => one.pass = Some(x.counter_pass_index),
                o => {
                    return Err(other(format!(
                        "VkSubmitInfo chains {o:?}, which the replayer cannot re-create"
                    )))
                }
            }
        }
        // Every replayed performance pool needs one pass (crate::perf): the app's further passes
        // would re-run its queries unreset, so only their synchronisation is kept.
        if one.pass.is_some_and(|k| k > 0) {
            one.cbs.clear();
        }
        one.pass = one.pass.map(|_| 0);
        all.push(one);
    }
    let mut timelines: Vec<vk::TimelineSemaphoreSubmitInfo<'_>> = all
        .iter()
        .map(|o| match &o.timeline {
            Some((w, sg)) => vk::TimelineSemaphoreSubmitInfo::default()
                .wait_semaphore_values(w)
                .signal_semaphore_values(sg),
            None => vk::TimelineSemaphoreSubmitInfo::default(),
        })
        .collect();
    let mut passes: Vec<vk::PerformanceQuerySubmitInfoKHR<'_>> = all
        .iter()
        .map(|o| {
            vk::PerformanceQuerySubmitInfoKHR::default().counter_pass_index(o.pass.unwrap_or(0))
        })
        .collect();
    let mut infos = Vec::new();
    for (i, (o, (t, pq))) in all
        .iter()
        .zip(timelines.iter_mut().zip(passes.iter_mut()))
        .enumerate()
    {
        let _ = i;
        let mut si = vk::SubmitInfo::default()
            .wait_semaphores(&o.wait)
            .wait_dst_stage_mask(&o.stages)
            .command_buffers(&o.cbs)
            .signal_semaphores(&o.signal);
        if o.timeline.is_some() {
            si = si.push_next(t);
        }
        if o.pass.is_some() {
            si = si.push_next(pq);
        }
        infos.push(si);
    }
    let d = s.device_for(q)?;
    d.device
        .queue_submit(vk::Queue::from_raw(q), &infos, fence)
        .map_err(|e| ReplayError::vk("vkQueueSubmit", e))
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
    let sem = |s: &Session<'_>,
               v: &Option<Vec<types::VkSemaphoreSubmitInfo>>|
     -> Result<Vec<vk::SemaphoreSubmitInfo<'static>>, ReplayError> {
        v.as_deref()
            .unwrap_or(&[])
            .iter()
            .map(|x| {
                Ok(vk::SemaphoreSubmitInfo::default()
                    .semaphore(vk::Semaphore::from_raw(
                        s.lookup(vk::ObjectType::SEMAPHORE, x.semaphore)?,
                    ))
                    .value(x.value)
                    .stage_mask(vk::PipelineStageFlags2::from_raw(x.stage_mask))
                    .device_index(x.device_index))
            })
            .collect()
    };
    let mut parts = Vec::new();
    for si in p.p_submits.as_deref().unwrap_or(&[]) {
        let cbs: Vec<vk::CommandBufferSubmitInfo<'static>> = si
            .p_command_buffer_infos
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .map(|c| {
                Ok(vk::CommandBufferSubmitInfo::default()
                    .command_buffer(vk::CommandBuffer::from_raw(
                        s.lookup(vk::ObjectType::COMMAND_BUFFER, c.command_buffer)?,
                    ))
                    .device_mask(c.device_mask))
            })
            .collect::<Result<_, ReplayError>>()?;
        let mut pass = None;
        for n in &si.p_next {
            match n {
                PNext::VkPerformanceQuerySubmitInfoKHR(x) => pass = Some(x.counter_pass_index),
                o => {
                    return Err(other(format!(
                        "VkSubmitInfo2 chains {o:?}, which the replayer cannot re-create"
                    )))
                }
            }
        }
        // As in vkQueueSubmit: the app's passes above 0 keep only their synchronisation.
        let cbs = if pass.is_some_and(|k| k > 0) {
            Vec::new()
        } else {
            cbs
        };
        let pass = pass.map(|_| 0u32);
        parts.push((
            si.flags,
            sem(s, &si.p_wait_semaphore_infos)?,
            cbs,
            sem(s, &si.p_signal_semaphore_infos)?,
            pass,
        ));
    }
    let mut passes: Vec<vk::PerformanceQuerySubmitInfoKHR<'_>> = parts
        .iter()
        .map(|p| vk::PerformanceQuerySubmitInfoKHR::default().counter_pass_index(p.4.unwrap_or(0)))
        .collect();
    let infos: Vec<vk::SubmitInfo2<'_>> = parts
        .iter()
        .zip(passes.iter_mut())
        .map(|((flags, w, c, sg, pass), pq)| {
            let mut i = vk::SubmitInfo2::default()
                .flags(vk::SubmitFlags::from_raw(*flags))
                .wait_semaphore_infos(w)
                .command_buffer_infos(c)
                .signal_semaphore_infos(sg);
            if pass.is_some() {
                i = i.push_next(pq);
            }
            i
        })
        .collect();
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
