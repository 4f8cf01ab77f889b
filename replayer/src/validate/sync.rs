//! The state machines behind the checks: command buffer states (commands only while recording,
//! submits only when executable), fence and semaphore signals (no wait on something no replayed
//! submit signals), and the submissions not known to have completed (so that a command buffer
//! recorded again, or an object destroyed, never races work still on the GPU, and no host query
//! reset reaches queries such work uses).

use ash::vk;
use vkstream::{Call, PNext};

use super::objects::{St, Table};
use crate::generated::checks;

/// A wait the engine must do before the call can be replayed safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    /// vkQueueWaitIdle on the captured queue's replay counterpart.
    Queue(u64),
    /// vkDeviceWaitIdle on the captured device's.
    Device(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CbState {
    Initial,
    Recording,
    Executable,
    /// Submitted, completion not known.
    Pending,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FenceState {
    Unsignaled,
    Signaled,
    /// A submission or acquire will signal it.
    Pending,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Sem {
    timeline: bool,
    /// Binary: a signal is pending or done and not yet waited on.
    signaled: bool,
    /// Timeline: the highest value signaled or to be signaled by work already submitted.
    value: u64,
}

/// One submission not known to have completed.
#[derive(Debug)]
struct Submit {
    /// The seq of the call that made it.
    seq: u64,
    /// Captured queue (0: an emulated acquire).
    queue: u64,
    device: u64,
    fence: u64,
    cbs: Vec<u64>,
    /// Timeline semaphores it signals, with their values.
    signals: Vec<(u64, u64)>,
}

/// Command buffer, fence and semaphore states live in the object table (`objects`), each in
/// its object's slot; what is kept here spans objects.
#[derive(Default)]
pub(super) struct Sync {
    outstanding: Vec<Submit>,
    /// Command buffers a replayed submission ran, once freed (their queries are read later;
    /// a live one says so itself: `Cb::ran`).
    ran: crate::fasthash::HandleSet<u64>,
    /// Scratch kept between calls: submissions completed, and completed submissions kept for
    /// reuse (so that no call allocates).
    finished: Vec<Submit>,
    spare: Vec<Submit>,
    /// Command buffer -> the objects its recording names (type, handle, slot): one destroyed
    /// since, or a buffer or image whose memory was freed since, makes it invalid.
    named: crate::fasthash::HandleMap<u64, Vec<(i32, u64, u32)>>,
    /// Query and event waits on the GPU (`gpuwait`).
    waits: super::gpuwait::GpuWaits,
    /// Scratch: a submission's command buffers in order.
    order: Vec<u64>,
}

const SIMULTANEOUS_USE: u32 = 0x4;
const BUFFER: i32 = vk::ObjectType::BUFFER.as_raw();
const IMAGE: i32 = vk::ObjectType::IMAGE.as_raw();
const SUBOPTIMAL: i32 = 1_000_001_003;

/// Whether the capture's acquire got an image: only then does the replay's emulated acquire
/// signal its semaphore and fence (`calls::wsi`).
fn acquired(result: i32) -> bool {
    result == 0 || result == SUBOPTIMAL
}
const FENCE_SIGNALED: u32 = 0x1;
const TIMELINE: i32 = 1;
const WAIT_ANY: u32 = 0x1;

fn state_name(s: CbState) -> &'static str {
    match s {
        CbState::Initial => "initial (not recorded)",
        CbState::Recording => "still recording",
        CbState::Executable => "executable",
        CbState::Pending => "pending",
    }
}

/// The timeline values of a vkQueueSubmit or vkQueueBindSparse batch, where given.
fn timeline(p_next: &[PNext]) -> Option<&vkstream::types::VkTimelineSemaphoreSubmitInfo> {
    p_next.iter().find_map(|n| match n {
        PNext::VkTimelineSemaphoreSubmitInfo(t) => Some(&**t),
        _ => None,
    })
}

/// One side (waits or signals) of a batch: each semaphore with its timeline value where given.
/// A value count of 0 is legal when those semaphores are all binary (wgpu waits on binary
/// semaphores beside timeline signals): a semaphore without a value is binary here, and a
/// timeline one without a value fails in `check_waits`, naming it.
fn side<'a>(
    sems: &'a Option<Vec<u64>>,
    values: Option<&'a Vec<u64>>,
) -> impl Iterator<Item = (u64, Option<u64>)> + 'a {
    sems.iter()
        .flatten()
        .enumerate()
        .map(move |(i, s)| (*s, values.and_then(|v| v.get(i)).copied()))
}

impl Sync {
    /// Checks `call`'s states and waits; `device` is the call's captured device.
    pub(super) fn before(
        &mut self,
        t: &Table,
        call: &Call,
        result: i32,
        device: u64,
        (first, slot, named): (u64, u32, &[(i32, u64, u32)]),
        kind: u8,
    ) -> Result<Action, String> {
        // `first`: the call's first handle, in `slot` when it is a command buffer; `named`: a
        // recorded command's other handles with their slots.
        if kind >= checks::RECORD {
            let cb = first;
            let state = t.cb_at(slot).map_or(CbState::Initial, |c| c.state);
            if state != CbState::Recording {
                return Err(format!(
                    "command buffer 0x{cb:x} is not recording (it is {})",
                    state_name(state)
                ));
            }
            if let Call::vkCmdExecuteCommands(p) = call {
                for s in p.p_command_buffers.iter().flatten() {
                    let st = t.cb(*s).map_or(CbState::Initial, |c| c.state);
                    if !matches!(st, CbState::Executable | CbState::Pending) {
                        return Err(format!(
                            "secondary command buffer 0x{s:x} is {}, not executable",
                            state_name(st)
                        ));
                    }
                    self.still_valid(t, *s)?;
                }
            }
            self.name(cb, named);
            return Ok(Action::None);
        }
        // An acquire's signal is no tracked submission (without a fence): a semaphore destroyed
        // while signaled may still be in the emulated acquire's hands.
        if let Call::vkDestroySemaphore(p) = call {
            if device != 0
                && t.sem(p.semaphore)
                    .is_some_and(|x| !x.timeline && x.signaled)
            {
                return Ok(Action::Device(device));
            }
        }
        if kind == checks::DESTROY
            || matches!(
                call,
                Call::vkResetCommandPool(_) | Call::vkResetDescriptorPool(_)
            )
        {
            // Whatever it ends may be in use by work still on the GPU.
            return Ok(self.idle_device(device));
        }
        match call {
            Call::vkBeginCommandBuffer(p) => self.rerecord(t, p.command_buffer, true),
            Call::vkResetCommandBuffer(p) => self.rerecord(t, p.command_buffer, false),
            Call::vkEndCommandBuffer(p) => {
                let st = t.cb_at(slot).map_or(CbState::Initial, |c| c.state);
                if st != CbState::Recording {
                    return Err(format!(
                        "command buffer 0x{:x} is not recording (it is {})",
                        p.command_buffer,
                        state_name(st)
                    ));
                }
                Ok(Action::None)
            }
            Call::vkQueueSubmit(p) if result >= 0 => {
                for si in p.p_submits.iter().flatten() {
                    check_cbs(t, si.p_command_buffers.iter().flatten().copied())?;
                    for cb in si.p_command_buffers.iter().flatten() {
                        self.submittable(t, *cb)?;
                    }
                    let tl = timeline(&si.p_next);
                    let values = tl.and_then(|t| t.p_wait_semaphore_values.as_ref());
                    check_waits(t, side(&si.p_wait_semaphores, values))?;
                }
                check_fence(t, p.fence)?;
                self.order.clear();
                for si in p.p_submits.iter().flatten() {
                    self.order.extend(si.p_command_buffers.iter().flatten());
                }
                self.waits.submit_before(&self.order)?;
                Ok(Action::None)
            }
            Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) if result >= 0 => {
                for si in p.p_submits.iter().flatten() {
                    let cbs = si.p_command_buffer_infos.iter().flatten();
                    check_cbs(t, cbs.clone().map(|c| c.command_buffer))?;
                    for c in cbs {
                        self.submittable(t, c.command_buffer)?;
                    }
                    for x in si.p_wait_semaphore_infos.iter().flatten() {
                        check_waits(t, [(x.semaphore, Some(x.value))])?;
                    }
                }
                check_fence(t, p.fence)?;
                self.order.clear();
                for si in p.p_submits.iter().flatten() {
                    let cbs = si.p_command_buffer_infos.iter().flatten();
                    self.order.extend(cbs.map(|c| c.command_buffer));
                }
                self.waits.submit_before(&self.order)?;
                Ok(Action::None)
            }
            Call::vkQueueBindSparse(p) if result >= 0 => {
                for bi in p.p_bind_info.iter().flatten() {
                    let tl = timeline(&bi.p_next);
                    let values = tl.and_then(|t| t.p_wait_semaphore_values.as_ref());
                    check_waits(t, side(&bi.p_wait_semaphores, values))?;
                }
                check_fence(t, p.fence)?;
                Ok(Action::None)
            }
            Call::vkQueuePresentKHR(p) => {
                if let Some(info) = &p.p_present_info {
                    for s in info.p_wait_semaphores.iter().flatten() {
                        check_waits(t, [(*s, None)])?;
                    }
                }
                Ok(Action::None)
            }
            Call::vkResetQueryPool(p) | Call::vkResetQueryPoolEXT(p) => {
                self.host_reset(t, p.query_pool, p.first_query, p.query_count)?;
                Ok(Action::None)
            }
            // Resetting a fence a submission may still signal: the GPU finishes first.
            Call::vkResetFences(p)
                if p.p_fences
                    .iter()
                    .flatten()
                    .any(|f| t.fence(*f) == Some(FenceState::Pending)) =>
            {
                Ok(self.idle_device(device))
            }
            Call::vkAcquireNextImageKHR(p) if acquired(result) => {
                check_fence(t, p.fence)?;
                check_unsignaled(t, p.semaphore)?;
                Ok(Action::None)
            }
            Call::vkAcquireNextImage2KHR(p) if acquired(result) => {
                let info = p.p_acquire_info.as_ref();
                check_fence(t, info.map_or(0, |i| i.fence))?;
                check_unsignaled(t, info.map_or(0, |i| i.semaphore))?;
                Ok(Action::None)
            }
            // Replayed waits only where the capture saw them succeed.
            Call::vkWaitForFences(p) if result == 0 => {
                let fences = p.p_fences.as_deref().unwrap_or(&[]);
                let ok = |f: &u64| t.fence(*f).is_some_and(|s| s != FenceState::Unsignaled);
                let bad = if p.wait_all != 0 {
                    fences.iter().find(|f| !ok(f))
                } else if fences.iter().any(ok) {
                    None
                } else {
                    fences.first()
                };
                match bad {
                    Some(f) => Err(format!(
                        "waits for fence 0x{f:x}, which no replayed submission signals"
                    )),
                    None => Ok(Action::None),
                }
            }
            Call::vkGetFenceStatus(p) if result == 0 => {
                if t.fence(p.fence)
                    .is_some_and(|s| s != FenceState::Unsignaled)
                {
                    Ok(Action::None)
                } else {
                    Err(format!(
                        "waits for fence 0x{:x}, which no replayed submission signals",
                        p.fence
                    ))
                }
            }
            Call::vkWaitSemaphores(p) | Call::vkWaitSemaphoresKHR(p) if result == 0 => {
                let Some(info) = &p.p_wait_info else {
                    return Ok(Action::None);
                };
                let sems = info.p_semaphores.as_deref().unwrap_or(&[]);
                let values = info.p_values.as_deref().unwrap_or(&[]);
                let reach = |(s, v): (&u64, &u64)| t.sem(*s).is_some_and(|x| x.value >= *v);
                let any = info.flags & WAIT_ANY != 0;
                let bad = if any && sems.iter().zip(values).any(reach) {
                    None
                } else {
                    sems.iter().zip(values).find(|x| !reach(*x))
                };
                match bad {
                    Some((s, v)) => Err(format!(
                        "waits for value {v} of timeline semaphore 0x{s:x}, which no replayed submission or signal reaches (highest: {})",
                        t.sem(*s).map_or(0, |x| x.value)
                    )),
                    None => Ok(Action::None),
                }
            }
            _ => Ok(Action::None),
        }
    }

    /// A host reset of queries that a submission no replayed wait has shown complete may still
    /// write (VUID-vkResetQueryPool-firstQuery-02741): the GPU would race the host, and the
    /// read after it wait for an availability that never comes.
    fn host_reset(&self, t: &Table, pool: u64, first: u32, count: u32) -> Result<(), String> {
        let end = first.saturating_add(count);
        for s in &self.outstanding {
            for cb in &s.cbs {
                let Some(qs) = t.cb(*cb).map(|c| &c.queries) else {
                    continue;
                };
                if let Some(&(_, a, b)) = qs
                    .iter()
                    .find(|(p, a, b)| *p == pool && *a < end && first < *b)
                {
                    return Err(format!(
                        "resets queries {first}..+{count} of query pool 0x{pool:x} while the \
                         submission of call {} may still use queries {a}..{b} of it (command \
                         buffer 0x{cb:x}; no replayed wait has shown it complete)",
                        s.seq
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether work submitted to `device` may still run: a replayed submission no replayed wait
    /// has shown complete.
    /// The devices of the submissions that may still run (with repeats).
    pub(super) fn outstanding_devices(&self) -> impl Iterator<Item = u64> + '_ {
        self.outstanding.iter().map(|s| s.device)
    }

    pub(super) fn outstanding_on(&self, device: u64) -> bool {
        self.outstanding.iter().any(|s| s.device == device)
    }

    /// A device wait when submitted work may still run there.
    fn idle_device(&self, device: u64) -> Action {
        if device != 0 && self.outstanding_on(device) {
            Action::Device(device)
        } else {
            Action::None
        }
    }

    /// Begin or reset: never while recording (begin) or while the GPU may still run it.
    fn rerecord(&self, t: &Table, cb: u64, begin: bool) -> Result<Action, String> {
        let Some(c) = t.cb(cb) else {
            return Ok(Action::None);
        };
        match c.state {
            CbState::Recording if begin => {
                Err(format!("command buffer 0x{cb:x} is already recording"))
            }
            CbState::Pending if self.outstanding.iter().any(|s| s.cbs.contains(&cb)) => {
                Ok(Action::Queue(c.queue))
            }
            _ => Ok(Action::None),
        }
    }

    /// Records a handle `call` created (in `slot` of the object table).
    pub(super) fn created(&mut self, t: &mut Table, call: &Call, ty: vk::ObjectType, slot: u32) {
        let st = match (ty, call) {
            (vk::ObjectType::COMMAND_BUFFER, _) => return t.new_cb(slot),
            (vk::ObjectType::FENCE, Call::vkCreateFence(p)) => {
                let signaled = p
                    .p_create_info
                    .as_ref()
                    .is_some_and(|i| i.flags & FENCE_SIGNALED != 0);
                St::Fence(if signaled {
                    FenceState::Signaled
                } else {
                    FenceState::Unsignaled
                })
            }
            // Fences made otherwise (display events) are signaled by the driver.
            (vk::ObjectType::FENCE, _) => St::Fence(FenceState::Pending),
            (vk::ObjectType::SEMAPHORE, Call::vkCreateSemaphore(p)) => {
                let tl = p
                    .p_create_info
                    .iter()
                    .flat_map(|i| &i.p_next)
                    .find_map(|n| match n {
                        PNext::VkSemaphoreTypeCreateInfo(t) if t.semaphore_type == TIMELINE => {
                            Some(t.initial_value)
                        }
                        _ => None,
                    });
                St::Sem(Sem {
                    timeline: tl.is_some(),
                    signaled: false,
                    value: tl.unwrap_or(0),
                })
            }
            _ => return,
        };
        t.at_mut(slot).st = st;
    }

    /// An object ended; `st` is what its slot held.
    pub(super) fn destroyed(&mut self, t: &Table, ty: vk::ObjectType, h: u64, st: St) {
        if ty == vk::ObjectType::COMMAND_BUFFER {
            self.named.remove(&h);
            self.waits.forget(h);
        }
        match st {
            St::Cb(i) if t.cb_data(i).ran => {
                self.ran.insert(h);
            }
            _ if ty == vk::ObjectType::DEVICE => self.outstanding.retain(|s| s.device != h),
            _ => {}
        }
    }

    /// Records the state changes of a call replayed without error (`seq`: its place; `slot`:
    /// its command buffer's slot when its first handle is one; `first`: that handle).
    pub(super) fn after(
        &mut self,
        t: &mut Table,
        call: &Call,
        result: i32,
        device: u64,
        (first, slot): (u64, u32),
        seq: u64,
    ) {
        // Only a recorded command's first handle is a command buffer (in a slot).
        self.waits
            .after((slot != u32::MAX).then_some(first), call, result);
        match call {
            Call::vkCmdBeginQuery(p) => uses(t, slot, p.query_pool, p.query, 1),
            Call::vkCmdBeginQueryIndexedEXT(p) => uses(t, slot, p.query_pool, p.query, 1),
            Call::vkCmdWriteTimestamp(p) => uses(t, slot, p.query_pool, p.query, 1),
            Call::vkCmdWriteTimestamp2(p) | Call::vkCmdWriteTimestamp2KHR(p) => {
                uses(t, slot, p.query_pool, p.query, 1)
            }
            Call::vkCmdResetQueryPool(p) => {
                uses(t, slot, p.query_pool, p.first_query, p.query_count)
            }
            Call::vkCmdCopyQueryPoolResults(p) => {
                uses(t, slot, p.query_pool, p.first_query, p.query_count)
            }
            Call::vkBeginCommandBuffer(p) => {
                if let Some(n) = self.named.get_mut(&p.command_buffer) {
                    n.clear();
                }
                if let Some(c) = t.cb_at_mut(slot) {
                    c.queries.clear();
                    c.state = CbState::Recording;
                    c.simultaneous = p
                        .p_begin_info
                        .as_ref()
                        .is_some_and(|i| i.flags & SIMULTANEOUS_USE != 0);
                    c.secondaries.clear();
                }
            }
            Call::vkEndCommandBuffer(p) => set_cb(t, p.command_buffer, CbState::Executable),
            Call::vkResetCommandBuffer(p) => set_cb(t, p.command_buffer, CbState::Initial),
            Call::vkCmdExecuteCommands(p) => {
                if let Some(c) = t.cb_at_mut(slot) {
                    c.secondaries
                        .extend(p.p_command_buffers.iter().flatten().copied());
                }
            }
            Call::vkQueueSubmit(p) if result >= 0 => {
                let mut s = self.submit(seq, p.queue, device, p.fence);
                for si in p.p_submits.iter().flatten() {
                    consume(t, si.p_wait_semaphores.iter().flatten().copied());
                    let tl = timeline(&si.p_next);
                    let values = tl.and_then(|t| t.p_signal_semaphore_values.as_ref());
                    signal(t, side(&si.p_signal_semaphores, values), &mut s);
                    s.cbs.extend(si.p_command_buffers.iter().flatten());
                }
                self.push(t, s);
            }
            Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) if result >= 0 => {
                let mut s = self.submit(seq, p.queue, device, p.fence);
                for si in p.p_submits.iter().flatten() {
                    let waits = si.p_wait_semaphore_infos.iter().flatten();
                    consume(t, waits.map(|x| x.semaphore));
                    let signals = si.p_signal_semaphore_infos.iter().flatten();
                    signal(t, signals.map(|x| (x.semaphore, Some(x.value))), &mut s);
                    s.cbs.extend(
                        si.p_command_buffer_infos
                            .iter()
                            .flatten()
                            .map(|c| c.command_buffer),
                    );
                }
                self.push(t, s);
            }
            Call::vkQueueBindSparse(p) if result >= 0 => {
                let mut s = self.submit(seq, p.queue, device, p.fence);
                for bi in p.p_bind_info.iter().flatten() {
                    consume(t, bi.p_wait_semaphores.iter().flatten().copied());
                    let tl = timeline(&bi.p_next);
                    let values = tl.and_then(|t| t.p_signal_semaphore_values.as_ref());
                    signal(t, side(&bi.p_signal_semaphores, values), &mut s);
                }
                self.push(t, s);
            }
            Call::vkQueuePresentKHR(p) => {
                if let Some(info) = &p.p_present_info {
                    consume(t, info.p_wait_semaphores.iter().flatten().copied());
                }
            }
            Call::vkAcquireNextImageKHR(p) if acquired(result) => {
                self.acquire(t, seq, device, p.semaphore, p.fence)
            }
            Call::vkAcquireNextImage2KHR(p) if acquired(result) => {
                if let Some(i) = &p.p_acquire_info {
                    self.acquire(t, seq, device, i.semaphore, i.fence);
                }
            }
            Call::vkWaitForFences(p) if result == 0 => {
                let fences = p.p_fences.as_deref().unwrap_or(&[]);
                // With wait-any, which fence signaled is not known: none is taken as done.
                if p.wait_all != 0 || fences.len() == 1 {
                    for f in fences {
                        self.fence_done(t, *f);
                    }
                }
            }
            Call::vkGetFenceStatus(p) if result == 0 => self.fence_done(t, p.fence),
            Call::vkResetFences(p) => {
                for f in p.p_fences.iter().flatten() {
                    if let Some(st) = t.fence_mut(*f) {
                        *st = FenceState::Unsignaled;
                    }
                    for s in &mut self.outstanding {
                        if s.fence == *f {
                            s.fence = 0;
                        }
                    }
                }
            }
            Call::vkWaitSemaphores(p) | Call::vkWaitSemaphoresKHR(p) if result == 0 => {
                if let Some(info) = &p.p_wait_info {
                    if info.flags & WAIT_ANY == 0 || info.semaphore_count == 1 {
                        let sems = info.p_semaphores.as_deref().unwrap_or(&[]);
                        for (s, v) in sems.iter().zip(info.p_values.iter().flatten()) {
                            let last = self
                                .outstanding
                                .iter()
                                .rposition(|x| x.signals.iter().any(|(t, w)| t == s && w <= v));
                            if let Some(i) = last {
                                self.complete_upto(t, i);
                            }
                        }
                    }
                }
            }
            Call::vkSignalSemaphore(p) | Call::vkSignalSemaphoreKHR(p) if result >= 0 => {
                if let Some(i) = &p.p_signal_info {
                    if let Some(s) = t.sem_mut(i.semaphore) {
                        s.value = s.value.max(i.value);
                    }
                }
            }
            Call::vkImportSemaphoreFdKHR(p) if result >= 0 => {
                // An imported payload is signaled by someone else: take it as signaled.
                if let Some(i) = &p.p_import_semaphore_fd_info {
                    if let Some(s) = t.sem_mut(i.semaphore) {
                        s.signaled = true;
                        s.value = u64::MAX;
                    }
                }
            }
            Call::vkImportFenceFdKHR(p) if result >= 0 => {
                if let Some(i) = &p.p_import_fence_fd_info {
                    set_fence(t, i.fence, FenceState::Pending);
                }
            }
            Call::vkQueueWaitIdle(p) => self.waited(t, Action::Queue(p.queue)),
            Call::vkDeviceWaitIdle(p) => self.waited(t, Action::Device(p.device)),
            _ => {}
        }
    }

    /// Recording `cb` names `named`: the command's other handles, with the slots the handle pass
    /// found them in (no second walk or lookup).
    fn name(&mut self, cb: u64, named: &[(i32, u64, u32)]) {
        if !named.is_empty() {
            self.named.entry(cb).or_default().extend_from_slice(named);
        }
    }

    /// A command buffer is invalid once an object its recording names is destroyed (or a
    /// buffer or image of it loses its memory); it must not be submitted or executed then
    /// (VUID-vkQueueSubmit-pCommandBuffers-00070, vkCmdExecuteCommands-pCommandBuffers-00089):
    /// the driver would use what it freed (a query pool destroyed between recording and
    /// submit crashed lavapipe).
    fn still_valid(&self, t: &Table, cb: u64) -> Result<(), String> {
        for &(ty, h, slot) in self.named.get(&cb).into_iter().flatten() {
            if !t.holds(slot, ty, h) {
                // Named only here: formatting it for every handle cost three allocations each.
                let name = super::ty_name(vk::ObjectType::from_raw(ty));
                return Err(format!(
                    "command buffer 0x{cb:x} is invalid: {name} 0x{h:x}, which its recording \
                     uses, was destroyed since"
                ));
            }
            if ty == BUFFER || ty == IMAGE {
                let o = t.at(slot);
                if !super::memory_live(t, o.memory, o.memory_slot) {
                    return Err(format!(
                        "command buffer 0x{cb:x} is invalid: {}",
                        super::no_memory(vk::ObjectType::from_raw(ty), h, o.memory)
                    ));
                }
            }
        }
        Ok(())
    }

    /// [`Sync::still_valid`] for a primary and the secondaries it executes.
    fn submittable(&self, t: &Table, cb: u64) -> Result<(), String> {
        self.still_valid(t, cb)?;
        for &s in t.cb(cb).map(|c| c.secondaries.as_slice()).unwrap_or(&[]) {
            self.still_valid(t, s)?;
        }
        Ok(())
    }

    /// A command pool reset: its command buffer `cb` is initial again.
    pub(super) fn reset_cb(&mut self, t: &mut Table, cb: u64) {
        set_cb(t, cb, CbState::Initial);
    }

    /// A submission record, from the ones kept for reuse when there is one.
    fn submit(&mut self, seq: u64, queue: u64, device: u64, fence: u64) -> Submit {
        let mut s = self.spare.pop().unwrap_or_else(|| Submit {
            seq: 0,
            queue: 0,
            device: 0,
            fence: 0,
            cbs: Vec::new(),
            signals: Vec::new(),
        });
        s.seq = seq;
        s.queue = queue;
        s.device = device;
        s.fence = fence;
        s.cbs.clear();
        s.signals.clear();
        s
    }

    fn push(&mut self, t: &mut Table, mut s: Submit) {
        let n = s.cbs.len();
        for k in 0..n {
            let cb = s.cbs[k];
            if let Some(c) = t.cb_mut(cb) {
                c.state = CbState::Pending;
                c.queue = s.queue;
                c.ran = true;
                s.cbs.extend_from_slice(&c.secondaries);
            } else {
                self.ran.insert(cb);
            }
        }
        // The secondaries ran too.
        for k in n..s.cbs.len() {
            match t.cb_mut(s.cbs[k]) {
                Some(c) => c.ran = true,
                None => {
                    self.ran.insert(s.cbs[k]);
                }
            }
        }
        if s.fence != 0 {
            set_fence(t, s.fence, FenceState::Pending);
        }
        self.outstanding.push(s);
    }

    fn acquire(&mut self, t: &mut Table, seq: u64, device: u64, semaphore: u64, fence: u64) {
        if let Some(x) = t.sem_mut(semaphore) {
            x.signaled = true;
        }
        // Only a fence makes the emulated acquire's submission something to wait for.
        if fence != 0 {
            let s = self.submit(seq, 0, device, fence);
            self.push(t, s);
        }
    }

    /// A fence was waited for: its submission and every earlier one on its queue completed.
    fn fence_done(&mut self, t: &mut Table, fence: u64) {
        if let Some(i) = self.outstanding.iter().rposition(|s| s.fence == fence) {
            self.complete_upto(t, i);
        }
        if let Some(st) = t.fence_mut(fence) {
            if *st == FenceState::Pending {
                *st = FenceState::Signaled;
            }
        }
    }

    /// Submission `i` completed, and with it every earlier one on the same queue.
    fn complete_upto(&mut self, t: &mut Table, i: usize) {
        let queue = self.outstanding[i].queue;
        let mut k = 0;
        self.complete(t, |s| {
            k += 1;
            k - 1 <= i && s.queue == queue
        });
    }

    /// The engine waited for a queue or a device to go idle.
    pub(super) fn waited(&mut self, t: &mut Table, action: Action) {
        match action {
            Action::None => {}
            Action::Queue(q) => self.complete(t, |s| s.queue == q),
            Action::Device(d) => self.complete(t, |s| s.device == d),
        }
    }

    /// The outstanding submissions `f` picks completed: their fences signaled, their command
    /// buffers executable again (unless another outstanding submission holds them).
    fn complete(&mut self, t: &mut Table, mut f: impl FnMut(&Submit) -> bool) {
        let mut done = std::mem::take(&mut self.finished);
        let mut k = 0;
        while k < self.outstanding.len() {
            if f(&self.outstanding[k]) {
                done.push(self.outstanding.remove(k));
            } else {
                k += 1;
            }
        }
        for s in &done {
            if s.fence != 0 {
                set_fence(t, s.fence, FenceState::Signaled);
            }
            for cb in &s.cbs {
                if self.outstanding.iter().any(|o| o.cbs.contains(cb)) {
                    continue;
                }
                if let Some(c) = t.cb_mut(*cb) {
                    if c.state == CbState::Pending {
                        c.state = CbState::Executable;
                    }
                }
            }
        }
        self.spare.append(&mut done);
        self.finished = done;
    }

    pub(super) fn ever_submitted(&self, t: &Table, cb: u64) -> bool {
        t.cb(cb).is_some_and(|c| c.ran) || self.ran.contains(&cb)
    }
}

fn check_cbs(t: &Table, cbs: impl Iterator<Item = u64>) -> Result<(), String> {
    for cb in cbs {
        let c = t.cb(cb);
        let st = c.map_or(CbState::Initial, |c| c.state);
        let ok = match st {
            CbState::Executable => true,
            CbState::Pending => c.is_some_and(|c| c.simultaneous),
            _ => false,
        };
        if !ok {
            let why = if st == CbState::Pending {
                "pending (submitted, not known to have completed) and not begun for simultaneous use".to_string()
            } else {
                format!("{}, not executable", state_name(st))
            };
            return Err(format!("command buffer 0x{cb:x} is {why}"));
        }
    }
    Ok(())
}

fn check_waits(
    t: &Table,
    waits: impl IntoIterator<Item = (u64, Option<u64>)>,
) -> Result<(), String> {
    for (s, v) in waits {
        let sem = t.sem(s).unwrap_or_default();
        if sem.timeline {
            let Some(v) = v else {
                return Err(format!(
                    "waits on timeline semaphore 0x{s:x} without a value (no VkTimelineSemaphoreSubmitInfo)"
                ));
            };
            if sem.value < v {
                return Err(format!(
                    "waits for value {v} of timeline semaphore 0x{s:x}, which no replayed submission or signal reaches (highest: {})",
                    sem.value
                ));
            }
        } else if !sem.signaled {
            return Err(format!(
                "waits on semaphore 0x{s:x}, which nothing replayed has signaled"
            ));
        }
    }
    Ok(())
}

fn check_fence(t: &Table, fence: u64) -> Result<(), String> {
    if fence == 0 {
        return Ok(());
    }
    match t.fence(fence) {
        Some(FenceState::Pending | FenceState::Signaled) => Err(format!(
            "fence 0x{fence:x} is signaled or already in use (not reset since)"
        )),
        _ => Ok(()),
    }
}

/// The recording of the command buffer in `slot` uses queries `first..first + count` of `pool`.
fn uses(t: &mut Table, slot: u32, pool: u64, first: u32, count: u32) {
    let Some(c) = t.cb_at_mut(slot) else {
        return;
    };
    let r = (pool, first, first.saturating_add(count));
    if !c.queries.contains(&r) {
        c.queries.push(r);
    }
}

fn set_cb(t: &mut Table, cb: u64, state: CbState) {
    if let Some(c) = t.cb_mut(cb) {
        c.state = state;
    }
}

fn set_fence(t: &mut Table, fence: u64, state: FenceState) {
    if let Some(st) = t.fence_mut(fence) {
        *st = state;
    }
}

/// An acquire signals its semaphore: it must not be signaled already (a second signal before
/// a wait; lavapipe then frees the semaphore while its first signal is still in use).
fn check_unsignaled(t: &Table, semaphore: u64) -> Result<(), String> {
    match t.sem(semaphore) {
        Some(x) if !x.timeline && x.signaled => Err(format!(
            "semaphore 0x{semaphore:x} is already signaled and nothing has waited on it since"
        )),
        _ => Ok(()),
    }
}

/// Binary semaphores waited on are unsignaled again.
fn consume(t: &mut Table, waits: impl Iterator<Item = u64>) {
    for s in waits {
        if let Some(x) = t.sem_mut(s) {
            if !x.timeline {
                x.signaled = false;
            }
        }
    }
}

fn signal(t: &mut Table, signals: impl Iterator<Item = (u64, Option<u64>)>, sub: &mut Submit) {
    for (s, v) in signals {
        if let Some(x) = t.sem_mut(s) {
            if x.timeline {
                let v = v.unwrap_or(0);
                x.value = x.value.max(v);
                sub.signals.push((s, v));
            } else {
                x.signaled = true;
            }
        }
    }
}
