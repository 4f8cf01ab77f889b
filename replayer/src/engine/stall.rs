//! Work that does not finish: a legal but enormous draw (a trace forged to ask for two billion
//! instances) keeps a software GPU busy for hours. Every wait the replay does is bounded by
//! `WAIT_TIMEOUT`; once one runs out while submitted work is still running, the replay stops
//! with an error and abandons the session: no idle wait, no destroy call reaches a device that
//! is still busy (each would block until the work ends), and the Vulkan loader stays loaded so
//! that the driver's threads keep their code until the process exits.
//!
//! Whether a device is done is asked with a fence behind an empty submission on each of its
//! queues (it signals once everything submitted there before has completed).

use std::time::{Duration, Instant};

use ash::vk::{self, Handle};

use crate::clock::WAIT_TIMEOUT;
use crate::error::ReplayError;
use crate::session::Session;

/// How long a replay that already failed waits for the GPU before abandoning it (what normal
/// work needs to finish, far below a stalled draw).
pub(super) const AFTER_ERROR: Duration = Duration::from_secs(2);

/// Whether all work submitted to captured device `device`'s queues completes within `limit`
/// (`Ok(true)` too when the device is not there). Fences of queues that did not finish are
/// left alive: the device is abandoned then.
pub(super) fn settles(s: &Session<'_>, device: u64, limit: Duration) -> Result<bool, ReplayError> {
    let Some(d) = s.devices.get(&device) else {
        return Ok(true);
    };
    let start = Instant::now();
    for &q in &d.queues {
        // SAFETY: a fence of this live device, submitted alone on one of its queues.
        unsafe {
            let fence = d
                .device
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(|e| ReplayError::vk("vkCreateFence", e))?;
            d.device
                .queue_submit(q, &[], fence)
                .map_err(|e| ReplayError::vk("vkQueueSubmit", e))?;
            let left = limit.saturating_sub(start.elapsed()).as_nanos() as u64;
            match d.device.wait_for_fences(&[fence], true, left) {
                Ok(()) => d.device.destroy_fence(fence, None),
                Err(vk::Result::TIMEOUT) => return Ok(false),
                Err(e) => return Err(ReplayError::vk("vkWaitForFences", e)),
            }
        }
    }
    Ok(true)
}

/// Every replayed device that does not finish its work within `limit`.
pub(super) fn unsettled(s: &Session<'_>, limit: Duration) -> Vec<u64> {
    let start = Instant::now();
    let devices: Vec<u64> = s.devices.keys().copied().collect();
    devices
        .into_iter()
        .filter(|d| !settles(s, *d, limit.saturating_sub(start.elapsed())).unwrap_or(false))
        .collect()
}

/// Waits, at most `WAIT_TIMEOUT`, for what a vkWaitSemaphores the capture saw succeed waits
/// for (the call itself replays with the app's timeout, and a timeout there would pass
/// unnoticed: what follows would take the work as done).
pub(super) fn wait_semaphores(
    s: &Session<'_>,
    p: &vkstream::params::vkWaitSemaphores,
) -> Result<(), ReplayError> {
    let Some(info) = &p.p_wait_info else {
        return Ok(());
    };
    let d = s.device(p.device)?;
    let Some(wait) = d.table.vkWaitSemaphores.or(d.table.vkWaitSemaphoresKHR) else {
        return Ok(());
    };
    let semaphores = info
        .p_semaphores
        .iter()
        .flatten()
        .map(|h| {
            s.lookup(vk::ObjectType::SEMAPHORE, *h)
                .map(vk::Semaphore::from_raw)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let values = info.p_values.as_deref().unwrap_or(&[]);
    if values.len() < semaphores.len() {
        return Ok(());
    }
    let wi = vk::SemaphoreWaitInfo::default()
        .flags(vk::SemaphoreWaitFlags::from_raw(info.flags))
        .semaphores(&semaphores)
        .values(&values[..semaphores.len()]);
    // SAFETY: semaphores of this live device; the info outlives the call.
    match unsafe { wait(d.device.handle(), &wi, WAIT_TIMEOUT.as_nanos() as u64) } {
        vk::Result::SUCCESS => Ok(()),
        vk::Result::TIMEOUT => Err(ReplayError::Other(format!(
            "the capture saw the semaphore wait succeed but the replay's semaphores did not \
             reach their values within {} s",
            WAIT_TIMEOUT.as_secs()
        ))),
        e => Err(ReplayError::vk("vkWaitSemaphores", e)),
    }
}

/// Whether the replay GPU blocks the caller while a submission runs (a driver quirk):
/// lavapipe (VK_DRIVER_ID_MESA_LLVMPIPE) runs each submission on its queue thread, and
/// vkGetQueryPoolResults waits for that thread even without VK_QUERY_RESULT_WAIT_BIT, as does
/// a submission waiting on a semaphore that the running work signals. There such calls wait
/// (bounded) for the submitted work first: what the driver would do, with a limit.
pub(super) fn blocks_while_busy(gpu: &crate::devices::GpuInfo) -> bool {
    const MESA_LLVMPIPE: u32 = 13;
    gpu.driver_id == MESA_LLVMPIPE
}

/// The captured queue of `call` when it submits work that waits on semaphores (a present
/// does, emulated by a submission).
pub(super) fn waits_on_semaphores(call: &vkstream::Call) -> Option<u64> {
    use vkstream::Call;
    let some = |w: &Option<Vec<u64>>| w.as_ref().is_some_and(|w| !w.is_empty());
    let waits = match call {
        Call::vkQueueSubmit(p) => (
            p.queue,
            p.p_submits
                .iter()
                .flatten()
                .any(|s| some(&s.p_wait_semaphores)),
        ),
        Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) => (
            p.queue,
            p.p_submits.iter().flatten().any(|s| {
                s.p_wait_semaphore_infos
                    .as_ref()
                    .is_some_and(|w| !w.is_empty())
            }),
        ),
        Call::vkQueueBindSparse(p) => (
            p.queue,
            p.p_bind_info
                .iter()
                .flatten()
                .any(|s| some(&s.p_wait_semaphores)),
        ),
        Call::vkQueuePresentKHR(p) => (
            p.queue,
            p.p_present_info
                .as_ref()
                .is_some_and(|i| some(&i.p_wait_semaphores)),
        ),
        _ => (0, false),
    };
    waits.1.then_some(waits.0)
}

/// The error of a wait that ran out while the GPU was still busy.
pub(super) fn stalled() -> String {
    format!(
        "the replay GPU did not finish the work submitted so far within {} s (a draw or \
         dispatch too large for it?); the replay stops here without waiting for it",
        WAIT_TIMEOUT.as_secs()
    )
}
