//! Devices, queues and command pools (queue families remapped to the replay GPU's), and the waits:
//! a wait the capture saw complete is waited for for real, bounded by `WAIT_TIMEOUT`.

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, Call};

use super::{generic, other, Entry};
use crate::clock::WAIT_TIMEOUT;
use crate::error::ReplayError;
use crate::generated::dispatch::{m_VkCommandPoolCreateInfo, Arena};
use crate::session::Session;

pub(crate) unsafe fn vkCreateDevice(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateDevice,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let ci = p
        .p_create_info
        .as_deref()
        .ok_or_else(|| other("no create info"))?;
    let device = p
        .p_device
        .ok_or_else(|| other("the capture recorded no device handle"))?;
    crate::glue::create_device(s, device, p.physical_device, ci)
}

pub(crate) unsafe fn vkDestroyDevice(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkDestroyDevice,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.destroy_device(p.device)
}

pub(crate) unsafe fn vkGetDeviceQueue(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkGetDeviceQueue,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    match p.p_queue {
        Some(q) => s.get_queue(
            p.device,
            p.queue_family_index,
            p.queue_index,
            vk::DeviceQueueCreateFlags::empty(),
            q,
        ),
        None => Ok(()),
    }
}

pub(crate) unsafe fn vkGetDeviceQueue2(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkGetDeviceQueue2,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    match (p.p_queue, p.p_queue_info.as_deref()) {
        (Some(q), Some(info)) => s.get_queue(
            p.device,
            info.queue_family_index,
            info.queue_index,
            vk::DeviceQueueCreateFlags::from_raw(info.flags),
            q,
        ),
        _ => Ok(()),
    }
}

pub(crate) unsafe fn vkCreateCommandPool(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkCreateCommandPool,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    let ci = p
        .p_create_info
        .as_deref()
        .ok_or_else(|| other("no create info"))?;
    let fam = s.map_family(p.device, ci.queue_family_index);
    if fam == ci.queue_family_index || rec.result < 0 {
        return generic(s, call, rec);
    }
    // The create info through the generated code (its chain included), the family translated.
    let mut arena = Arena::new();
    let mut info = m_VkCommandPoolCreateInfo(ci, &mut arena, s)?;
    info.queue_family_index = fam;
    let d = s.device(p.device)?;
    let pool = d
        .device
        .create_command_pool(&info, None)
        .map_err(|e| ReplayError::vk("vkCreateCommandPool", e))?;
    s.bind(
        vk::ObjectType::COMMAND_POOL,
        p.p_command_pool.unwrap_or(0),
        pool.as_raw(),
    );
    Ok(())
}

pub(crate) unsafe fn vkWaitForFences(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkWaitForFences,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result != vk::Result::SUCCESS.as_raw() {
        return Ok(());
    }
    let fences = p
        .p_fences
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|f| s.lookup(vk::ObjectType::FENCE, *f).map(vk::Fence::from_raw))
        .collect::<Result<Vec<_>, _>>()?;
    wait_fences(s, p.device, &fences, p.wait_all != 0)
}

pub(crate) unsafe fn vkGetFenceStatus(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkGetFenceStatus,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result != vk::Result::SUCCESS.as_raw() {
        return Ok(());
    }
    let f = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, p.fence)?);
    wait_fences(s, p.device, &[f], true)
}

/// The value the capture read is one the app waited for (wgpu polls this until its submission's
/// value comes up, then resets that submission's command pool): the replay waits until its own
/// semaphore gets there, or it would run ahead of its GPU.
pub(crate) unsafe fn vkGetSemaphoreCounterValue<E: Entry<vk::PFN_vkGetSemaphoreCounterValue>>(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkGetSemaphoreCounterValue,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    let (true, Some(value)) = (rec.result == vk::Result::SUCCESS.as_raw(), p.p_value) else {
        return Ok(());
    };
    let semaphore = vk::Semaphore::from_raw(s.lookup(vk::ObjectType::SEMAPHORE, p.semaphore)?);
    let d = s.device(p.device)?;
    let (core, khr) = (d.table.vkWaitSemaphores, d.table.vkWaitSemaphoresKHR);
    // The app's device has the wait of the same origin as the read (core, or the KHR extension).
    let wait = if E::NAME.ends_with("KHR") {
        khr.or(core)
    } else {
        core.or(khr)
    }
    .ok_or_else(|| {
        other("the replay device has neither vkWaitSemaphores nor vkWaitSemaphoresKHR")
    })?;
    let (semaphores, values) = ([semaphore], [value]);
    let info = vk::SemaphoreWaitInfo::default()
        .semaphores(&semaphores)
        .values(&values);
    match wait(d.device.handle(), &info, WAIT_TIMEOUT.as_nanos() as u64) {
        vk::Result::SUCCESS => Ok(()),
        vk::Result::TIMEOUT => Err(other(format!(
            "the capture read value {value} from the semaphore but the replay's did not reach it \
             within {} s",
            WAIT_TIMEOUT.as_secs()
        ))),
        e => Err(ReplayError::vk("vkWaitSemaphores", e)),
    }
}

pub(crate) unsafe fn vkQueueWaitIdle(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkQueueWaitIdle,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
    let d = s.device_for(q)?;
    d.device
        .queue_wait_idle(vk::Queue::from_raw(q))
        .map_err(|e| ReplayError::vk("vkQueueWaitIdle", e))
}

pub(crate) unsafe fn vkDeviceWaitIdle(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkDeviceWaitIdle,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.device(p.device)?
        .device
        .device_wait_idle()
        .map_err(|e| ReplayError::vk("vkDeviceWaitIdle", e))
}

unsafe fn wait_fences(
    s: &Session<'_>,
    device: u64,
    fences: &[vk::Fence],
    all: bool,
) -> Result<(), ReplayError> {
    if fences.is_empty() {
        return Ok(());
    }
    let d = s.device(device)?;
    match d
        .device
        .wait_for_fences(fences, all, WAIT_TIMEOUT.as_nanos() as u64)
    {
        Ok(()) => Ok(()),
        Err(vk::Result::TIMEOUT) => Err(other(format!(
            "the capture saw the fences signaled but the replay's did not signal within {} s",
            WAIT_TIMEOUT.as_secs()
        ))),
        Err(e) => Err(ReplayError::vk("vkWaitForFences", e)),
    }
}
