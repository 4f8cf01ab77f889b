//! Counter injection (`quarry replay --counters LIST|all --scope command-buffer|render-pass`):
//! performance queries the application never made, wrapped around each primary command buffer or
//! each render pass instance of the replay, and read back after every submission.
//!
//! The counters come from `VK_KHR_performance_query` on the replay device; a device without it
//! gets `VK_LAYER_QUARRY_counters` underneath (the CLI loads it), which builds the same counters
//! from timestamp, pipeline-statistics and occlusion queries. Counters that do not fit in one pass
//! are split into groups, one replay of the trace per group (see `crate::perf`).
//!
//! Vulkan forbids resetting a performance query in a command buffer that begins it, so the slots a
//! submission uses are reset by a small command buffer of ours submitted just before it on the same
//! queue; the results are read once the queue is idle again.

use std::collections::HashMap;

use ash::vk;
use ash::vk::Handle as _;
use format::record::{CounterValue, PerfCounterDesc};
use vkstream::Call;

use crate::error::ReplayError;
use crate::session::Session;

/// Slots of the injected pool per device; a frame's command buffers and render passes share them.
const SLOTS: u32 = 4096;

/// What to measure around.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    CommandBuffer,
    RenderPass,
}

/// `--counters` and `--scope`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectSpec {
    /// Counter names (case-insensitive); `None` is every counter the scope allows.
    pub counters: Option<Vec<String>>,
    pub scope: Scope,
}

struct DeviceInject {
    pool: vk::QueryPool,
    family: u32,
    /// This pass's counters, in pool order.
    counters: Vec<PerfCounterDesc>,
    next: u32,
    free: Vec<u32>,
}

#[derive(Default)]
struct CbInject {
    device: u64,
    /// (slot, render pass index within the command buffer when scoped to render passes).
    slots: Vec<(u32, Option<u32>)>,
    open: Option<u32>,
    render_passes: u32,
    /// The app's own performance query is active in this command buffer: VK_KHR_performance_query
    /// allows one at a time, so nothing is injected until it ends.
    app_query: bool,
    /// Slots ended early because the app began its own performance query inside them: they are
    /// reset and reused like the others but never reported (they measured part of the scope).
    cut: Vec<u32>,
}

/// Injection state of one replay pass.
pub struct InjectState {
    pub spec: InjectSpec,
    pub pass: u32,
    pub forced: Option<u32>,
    /// Most passes any device needs for the chosen counters.
    pub passes_needed: u32,
    /// Counter values measured so far, for the engine to write.
    pub records: Vec<CounterValue>,
    /// Command buffers (or render passes) measured.
    pub measured: u64,
    pub warnings: Vec<String>,
    /// Scopes left unmeasured because the app's own performance query was active there.
    pub beside_app_queries: u64,
    devices: HashMap<u64, DeviceInject>,
    /// Captured command pool -> replay queue family.
    pool_family: HashMap<u64, u32>,
    /// Captured primary command buffer -> its recording's queries.
    cbs: HashMap<u64, CbInject>,
    full: bool,
}

impl InjectState {
    pub fn new(spec: InjectSpec, pass: u32, forced: Option<u32>) -> Self {
        InjectState {
            spec,
            pass,
            forced,
            passes_needed: 1,
            records: Vec::new(),
            measured: 0,
            warnings: Vec::new(),
            beside_app_queries: 0,
            devices: HashMap::new(),
            pool_family: HashMap::new(),
            cbs: HashMap::new(),
            full: false,
        }
    }
}

fn other(m: impl Into<String>) -> ReplayError {
    ReplayError::Other(m.into())
}

/// Chooses the counters `spec` names among the device's, in device order.
pub fn choose(
    spec: &InjectSpec,
    device: &[(crate::perf::DeviceCounter, u32)],
) -> Result<Vec<u32>, String> {
    let allowed = |scope: u32| {
        spec.scope == Scope::CommandBuffer
            || scope != vk::PerformanceCounterScopeKHR::COMMAND_BUFFER.as_raw() as u32
    };
    match &spec.counters {
        None => Ok((0..device.len() as u32)
            .filter(|&i| allowed(device[i as usize].1))
            .collect()),
        Some(names) => {
            let mut out = Vec::new();
            for n in names {
                let Some(i) = device
                    .iter()
                    .position(|(c, _)| c.name.eq_ignore_ascii_case(n.trim()))
                else {
                    return Err(format!(
                        "--counters: the replay GPU has no counter named \"{}\"; it has: {}",
                        n.trim(),
                        device
                            .iter()
                            .map(|(c, _)| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                };
                if !allowed(device[i].1) {
                    return Err(format!(
                        "--counters: \"{}\" has command-buffer scope, so it cannot be measured per render pass (use --scope command-buffer)",
                        device[i].0.name
                    ));
                }
                if !out.contains(&(i as u32)) {
                    out.push(i as u32);
                }
            }
            Ok(out)
        }
    }
}

/// After a replayed call: tracks command pools and buffers, sets up a new device, begins the
/// command-buffer query, ends render-pass queries, and reads back after submissions.
pub(crate) unsafe fn after(
    s: &mut Session<'_>,
    st: &mut InjectState,
    call: &Call,
) -> Result<(), ReplayError> {
    match call {
        Call::vkCreateDevice(p) => {
            if let Some(d) = p.p_device {
                setup_device(s, st, d)?;
            }
        }
        Call::vkCreateCommandPool(p) => {
            if let (Some(pool), Some(ci)) = (p.p_command_pool, p.p_create_info.as_deref()) {
                let family = s.map_family(p.device, ci.queue_family_index);
                st.pool_family.insert(pool, family);
            }
        }
        Call::vkAllocateCommandBuffers(p) => {
            let Some(ai) = p.p_allocate_info.as_deref() else {
                return Ok(());
            };
            let family = st.pool_family.get(&ai.command_pool).copied();
            let ours = st
                .devices
                .get(&p.device)
                .is_some_and(|d| Some(d.family) == family);
            if ai.level == vk::CommandBufferLevel::PRIMARY.as_raw() && ours {
                for cb in p.p_command_buffers.as_deref().unwrap_or(&[]) {
                    st.cbs.insert(
                        *cb,
                        CbInject {
                            device: p.device,
                            ..Default::default()
                        },
                    );
                }
            }
        }
        Call::vkFreeCommandBuffers(p) => {
            for cb in p.p_command_buffers.as_deref().unwrap_or(&[]) {
                release(st, *cb);
                st.cbs.remove(cb);
            }
        }
        Call::vkBeginCommandBuffer(p) => {
            if !st.cbs.contains_key(&p.command_buffer) {
                return Ok(());
            }
            release(st, p.command_buffer);
            if st.spec.scope == Scope::CommandBuffer {
                begin(s, st, p.command_buffer, None)?;
            }
        }
        _ => {
            if let Some(cb) = app_performance_query(s, call, false) {
                if let Some(c) = st.cbs.get_mut(&cb) {
                    c.app_query = false;
                }
            } else if let Some(cb) = ends_render_pass(call) {
                end(s, st, cb)?;
            } else if let Some((queue, cbs)) = submitted(call) {
                read_back(s, st, queue, &cbs)?;
            }
        }
    }
    Ok(())
}

/// Before a replayed call: begins render-pass queries, ends the command-buffer query before
/// vkEndCommandBuffer, and resets the slots a submission is about to use.
pub(crate) unsafe fn before(
    s: &mut Session<'_>,
    st: &mut InjectState,
    call: &Call,
) -> Result<(), ReplayError> {
    let scope = st.spec.scope;
    if let Some(cb) = app_performance_query(s, call, true) {
        // Ours would be a second active performance query: end it here and never report it.
        let open = st.cbs.get(&cb).and_then(|c| c.open);
        if let Some(slot) = open {
            end(s, st, cb)?;
            st.beside_app_queries += 1;
            if let Some(c) = st.cbs.get_mut(&cb) {
                c.cut.push(slot);
            }
        }
        if let Some(c) = st.cbs.get_mut(&cb) {
            c.app_query = true;
        }
    } else if let Some(cb) = begins_render_pass(call) {
        if scope == Scope::RenderPass {
            let index = st.cbs.get_mut(&cb).map(|c| {
                c.render_passes += 1;
                c.render_passes - 1
            });
            if let Some(i) = index {
                begin(s, st, cb, Some(i))?;
            }
        }
    } else if let Call::vkEndCommandBuffer(p) = call {
        end(s, st, p.command_buffer)?;
    } else if let Some((queue, cbs)) = submitted(call) {
        reset_slots(s, st, queue, &cbs)?;
    }
    Ok(())
}

/// The command buffer in which the app begins (`begin`) or ends its own performance query.
fn app_performance_query(s: &Session<'_>, call: &Call, begin: bool) -> Option<u64> {
    let (cb, pool) = match (call, begin) {
        (Call::vkCmdBeginQuery(p), true) => (p.command_buffer, p.query_pool),
        (Call::vkCmdBeginQueryIndexedEXT(p), true) => (p.command_buffer, p.query_pool),
        (Call::vkCmdEndQuery(p), false) => (p.command_buffer, p.query_pool),
        (Call::vkCmdEndQueryIndexedEXT(p), false) => (p.command_buffer, p.query_pool),
        _ => return None,
    };
    let perf = s
        .tracked
        .pools
        .get(&pool)
        .is_some_and(|p| p.shape.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw());
    perf.then_some(cb)
}

fn begins_render_pass(call: &Call) -> Option<u64> {
    match call {
        Call::vkCmdBeginRenderPass(p) => Some(p.command_buffer),
        Call::vkCmdBeginRenderPass2(p) | Call::vkCmdBeginRenderPass2KHR(p) => {
            Some(p.command_buffer)
        }
        Call::vkCmdBeginRendering(p) | Call::vkCmdBeginRenderingKHR(p) => Some(p.command_buffer),
        _ => None,
    }
}

fn ends_render_pass(call: &Call) -> Option<u64> {
    match call {
        Call::vkCmdEndRenderPass(p) => Some(p.command_buffer),
        Call::vkCmdEndRenderPass2(p) | Call::vkCmdEndRenderPass2KHR(p) => Some(p.command_buffer),
        Call::vkCmdEndRendering(p) | Call::vkCmdEndRenderingKHR(p) => Some(p.command_buffer),
        _ => None,
    }
}

/// The queue and command buffers of a submission.
fn submitted(call: &Call) -> Option<(u64, Vec<u64>)> {
    match call {
        Call::vkQueueSubmit(p) => Some((
            p.queue,
            p.p_submits
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .flat_map(|si| si.p_command_buffers.clone().unwrap_or_default())
                .collect(),
        )),
        Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) => Some((
            p.queue,
            p.p_submits
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .flat_map(|si| {
                    si.p_command_buffer_infos
                        .as_deref()
                        .unwrap_or(&[])
                        .iter()
                        .map(|c| c.command_buffer)
                        .collect::<Vec<_>>()
                })
                .collect(),
        )),
        _ => None,
    }
}

/// Returns a command buffer's slots to its device's free list (it is being re-recorded or freed).
fn release(st: &mut InjectState, cb: u64) {
    let Some(c) = st.cbs.get_mut(&cb) else { return };
    let slots: Vec<u32> = c.slots.drain(..).map(|s| s.0).collect();
    c.open = None;
    c.render_passes = 0;
    c.app_query = false;
    c.cut.clear();
    let device = c.device;
    if let Some(d) = st.devices.get_mut(&device) {
        d.free.extend(slots);
    }
}

unsafe fn begin(
    s: &mut Session<'_>,
    st: &mut InjectState,
    cb: u64,
    render_pass: Option<u32>,
) -> Result<(), ReplayError> {
    let Some(c) = st.cbs.get_mut(&cb) else {
        return Ok(());
    };
    if c.app_query {
        st.beside_app_queries += 1;
        return Ok(());
    }
    let Some(d) = st.devices.get_mut(&c.device) else {
        return Ok(());
    };
    let slot = match d.free.pop() {
        Some(x) => x,
        None if d.next < SLOTS => {
            d.next += 1;
            d.next - 1
        }
        None => {
            if !st.full {
                st.full = true;
                st.warnings.push(format!(
                    "counter injection: more than {SLOTS} command buffers or render passes in flight between submissions; the rest are not measured"
                ));
            }
            return Ok(());
        }
    };
    c.slots.push((slot, render_pass));
    c.open = Some(slot);
    let pool = d.pool;
    let replay_cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, cb)?;
    let dev = &s.device_for(replay_cb)?.device;
    dev.cmd_begin_query(
        vk::CommandBuffer::from_raw(replay_cb),
        pool,
        slot,
        vk::QueryControlFlags::empty(),
    );
    Ok(())
}

unsafe fn end(s: &mut Session<'_>, st: &mut InjectState, cb: u64) -> Result<(), ReplayError> {
    let Some(c) = st.cbs.get_mut(&cb) else {
        return Ok(());
    };
    let Some(slot) = c.open.take() else {
        return Ok(());
    };
    let Some(pool) = st.devices.get(&c.device).map(|d| d.pool) else {
        return Ok(());
    };
    let replay_cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, cb)?;
    let dev = &s.device_for(replay_cb)?.device;
    dev.cmd_end_query(vk::CommandBuffer::from_raw(replay_cb), pool, slot);
    Ok(())
}

/// The (device, slots) of the injected queries in `cbs`.
fn slots_of(st: &InjectState, cbs: &[u64]) -> Vec<(u64, u64, u32, Option<u32>)> {
    cbs.iter()
        .filter_map(|cb| st.cbs.get(cb).map(|c| (cb, c)))
        .flat_map(|(cb, c)| c.slots.iter().map(move |(s, rp)| (c.device, *cb, *s, *rp)))
        .collect()
}

unsafe fn reset_slots(
    s: &mut Session<'_>,
    st: &InjectState,
    queue: u64,
    cbs: &[u64],
) -> Result<(), ReplayError> {
    let slots = slots_of(st, cbs);
    if slots.is_empty() {
        return Ok(());
    }
    let device = slots[0].0;
    let Some(d) = st.devices.get(&device) else {
        return Ok(());
    };
    let (pool, family) = (d.pool, d.family);
    let q = vk::Queue::from_raw(s.lookup(vk::ObjectType::QUEUE, queue)?);
    let cmd_pool = own_pool(s, device, family)?;
    let dev = &s.device(device)?.device;
    let cb = dev
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(cmd_pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1),
        )
        .map_err(|e| ReplayError::vk("vkAllocateCommandBuffers (counter reset)", e))?[0];
    let r = (|| {
        dev.begin_command_buffer(
            cb,
            &vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
        )?;
        for (_, _, slot, _) in &slots {
            dev.cmd_reset_query_pool(cb, pool, *slot, 1);
        }
        dev.end_command_buffer(cb)?;
        let cbs = [cb];
        dev.queue_submit(
            q,
            &[vk::SubmitInfo::default().command_buffers(&cbs)],
            vk::Fence::null(),
        )?;
        // The app's submission follows on the same queue, so the reset is ordered before it;
        // waiting here keeps our command buffer's lifetime simple.
        dev.queue_wait_idle(q)
    })();
    dev.free_command_buffers(cmd_pool, &[cb]);
    r.map_err(|e| ReplayError::vk("counter reset submission", e))
}

unsafe fn own_pool(
    s: &mut Session<'_>,
    device: u64,
    family: u32,
) -> Result<vk::CommandPool, ReplayError> {
    if let Some(p) = s.device(device)?.own_pools.get(&family) {
        return Ok(*p);
    }
    let d = s.device(device)?;
    let p = d
        .device
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(family)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
        .map_err(|e| ReplayError::vk("vkCreateCommandPool (counter reset)", e))?;
    if let Some(d) = s.devices.get_mut(&device) {
        d.own_pools.insert(family, p);
    }
    Ok(p)
}

unsafe fn read_back(
    s: &mut Session<'_>,
    st: &mut InjectState,
    queue: u64,
    cbs: &[u64],
) -> Result<(), ReplayError> {
    let slots = slots_of(st, cbs);
    if slots.is_empty() {
        return Ok(());
    }
    let q = vk::Queue::from_raw(s.lookup(vk::ObjectType::QUEUE, queue)?);
    let device = slots[0].0;
    let Some(d) = st.devices.get(&device) else {
        return Ok(());
    };
    let (pool, counters) = (d.pool, d.counters.clone());
    let dev = &s.device(device)?.device;
    dev.queue_wait_idle(q)
        .map_err(|e| ReplayError::vk("vkQueueWaitIdle (counter read-back)", e))?;
    let n = counters.len();
    let mut out = Vec::new();
    for (_, cb, slot, rp) in slots {
        if st.cbs.get(&cb).is_some_and(|c| c.cut.contains(&slot)) {
            continue;
        }
        let mut buf = vec![0u8; 8 * n];
        let r = (dev.fp_v1_0().get_query_pool_results)(
            dev.handle(),
            pool,
            slot,
            1,
            buf.len(),
            buf.as_mut_ptr().cast(),
            buf.len() as u64,
            vk::QueryResultFlags::WAIT,
        );
        if r != vk::Result::SUCCESS {
            return Err(ReplayError::vk(
                "vkGetQueryPoolResults (injected counters)",
                r,
            ));
        }
        for (i, c) in counters.iter().enumerate() {
            let raw = u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            out.push(CounterValue {
                counter: c.clone(),
                pass: 0,
                frame: s.frame,
                command_buffer: cb,
                render_pass: rp,
                value: crate::queries::counter_value(raw, c.storage),
                captured: None,
            });
        }
    }
    st.measured += (out.len() / n.max(1)) as u64;
    for mut v in out {
        v.pass = st.pass;
        st.records.push(v);
    }
    Ok(())
}

/// Creates the injected pool of a new device: the chosen counters of this pass on the device's
/// first graphics (else first) queue family, and takes the profiling lock.
unsafe fn setup_device(
    s: &mut Session<'_>,
    st: &mut InjectState,
    device: u64,
) -> Result<(), ReplayError> {
    let families = &s.gpu.summary.queue_families;
    let family = families
        .iter()
        .position(|f| f.flags & vk::QueueFlags::GRAPHICS.as_raw() != 0)
        .unwrap_or(0) as u32;
    let descs = s.device_counter_descs(device, family)?;
    let listed: Vec<(crate::perf::DeviceCounter, u32)> =
        descs.iter().map(|d| (d.into(), d.scope)).collect();
    let chosen = choose(&st.spec, &listed).map_err(ReplayError::BadOption)?;
    if chosen.is_empty() {
        return Err(ReplayError::BadOption(
            "--counters: no counter of the replay GPU can be measured with this scope".into(),
        ));
    }
    let plan = crate::perf::plan(
        chosen.iter().map(|&i| Some(i)).collect(),
        |ix| s.perf_passes(device, family, ix),
        st.forced,
    )
    .map_err(other)?;
    let pass = st.pass;
    let indices = plan.indices_for(pass);
    let measures = plan.measures_in(pass);
    let counters: Vec<PerfCounterDesc> =
        indices.iter().map(|&i| descs[i as usize].clone()).collect();
    // Before the pool exists, so a refusal leaves nothing behind.
    s.hold_profiling_lock(device, "counter injection (--counters)")?;
    let dev = &s.device(device)?.device;
    let mut perf = vk::QueryPoolPerformanceCreateInfoKHR::default()
        .queue_family_index(family)
        .counter_indices(&indices);
    let pool = dev
        .create_query_pool(
            &vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::PERFORMANCE_QUERY_KHR)
                .query_count(SLOTS)
                .push_next(&mut perf),
            None,
        )
        .map_err(|e| ReplayError::vk("vkCreateQueryPool (injected counters)", e))?;
    // Destroyed with the device (teardown destroys live pools first).
    s.tracked
        .live_pools
        .insert(0x5157_1000_0000_0000 | device & 0xffff_ffff, (device, pool));
    st.passes_needed = st.passes_needed.max(plan.groups.len() as u32);
    if measures {
        st.devices.insert(
            device,
            DeviceInject {
                pool,
                family,
                counters,
                next: 0,
                free: Vec::new(),
            },
        );
    }
    Ok(())
}

/// Kept here for callers of the old path; it lives with device creation.
pub use crate::session::needs_perf_feature;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::DeviceCounter;

    fn dc(name: &str, scope: vk::PerformanceCounterScopeKHR) -> (DeviceCounter, u32) {
        (
            DeviceCounter {
                uuid: [0; 16],
                name: name.into(),
                unit: 0,
            },
            scope.as_raw() as u32,
        )
    }

    #[test]
    fn choose_by_name_and_scope() {
        let list = [
            dc("Duration", vk::PerformanceCounterScopeKHR::COMMAND_BUFFER),
            dc("Samples", vk::PerformanceCounterScopeKHR::RENDER_PASS),
            dc("Draws", vk::PerformanceCounterScopeKHR::COMMAND),
        ];
        let all_cb = InjectSpec {
            counters: None,
            scope: Scope::CommandBuffer,
        };
        assert_eq!(choose(&all_cb, &list).unwrap(), vec![0, 1, 2]);
        let all_rp = InjectSpec {
            counters: None,
            scope: Scope::RenderPass,
        };
        assert_eq!(choose(&all_rp, &list).unwrap(), vec![1, 2]);
        let named = InjectSpec {
            counters: Some(vec!["samples".into(), " draws".into(), "Samples".into()]),
            scope: Scope::RenderPass,
        };
        assert_eq!(choose(&named, &list).unwrap(), vec![1, 2]);
        let bad = InjectSpec {
            counters: Some(vec!["nope".into()]),
            scope: Scope::CommandBuffer,
        };
        let e = choose(&bad, &list).unwrap_err();
        assert!(
            e.contains("no counter named \"nope\"") && e.contains("Samples"),
            "{e}"
        );
        let wrong_scope = InjectSpec {
            counters: Some(vec!["Duration".into()]),
            scope: Scope::RenderPass,
        };
        assert!(choose(&wrong_scope, &list)
            .unwrap_err()
            .contains("command-buffer scope"));
    }
}
