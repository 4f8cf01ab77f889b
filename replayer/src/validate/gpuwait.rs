//! GPU-side waits the replay can satisfy (issue 37). A vkCmdCopyQueryPoolResults with
//! VK_QUERY_RESULT_WAIT_BIT waits on the GPU until its queries are available, and a
//! vkCmdWaitEvents[2] until its events are set: one that nothing submitted before it makes true
//! never ends (a stuck queue thread on lavapipe, a hung channel on a discrete GPU that can
//! outlive the process). Each recording keeps, in order, the commands that change or need
//! those states; a submission plays them over the device-wide states and is refused when a wait
//! would never end. Part of `Sync` (its `before`/`after` hand these calls on).
//!
//! Where a query's writes are not known exactly, the rules lean towards letting a copy through:
//! an end inside a render pass instance may write several queries (one per view of a multiview
//! pass), so it counts as writing the next `MAX_VIEWS` too.

use std::collections::{HashMap, HashSet};

use vkstream::Call;

use crate::fasthash::{HandleMap, HandleSet};

const WAIT: u32 = 0x2;
const HOST_STAGE: u32 = 0x4000;
/// Views a multiview render pass may have (`maxMultiviewViewCount` is at least 6; no GPU
/// offers more than 32, the width of a view mask).
const MAX_VIEWS: u32 = 32;

#[derive(Debug, Clone, Copy)]
enum Op {
    /// Queries first..first+count of a pool become unavailable.
    Reset(u64, u32, u32),
    /// ... become available once the work before runs.
    Write(u64, u32, u32),
    /// A copy with WAIT needs them available.
    Wait(u64, u32, u32),
    SetEvent(u64),
    ResetEvent(u64),
    /// A wait for an event (`true`: the host may set it later: legacy wait with HOST in its
    /// source stages).
    WaitEvent(u64, bool),
    /// A secondary command buffer runs here.
    Exec(u64),
}

#[derive(Default)]
struct Rec {
    ops: Vec<Op>,
    /// Inside a render pass instance (ends there may write one query per view).
    in_pass: bool,
}

#[derive(Default)]
pub(super) struct GpuWaits {
    recs: HandleMap<u64, Rec>,
    /// Pool -> queries whose last change, in submission order, is a write.
    written: HandleMap<u64, HashSet<u32>>,
    /// Events set (by the host, or by commands submitted before).
    set: HandleSet<u64>,
    /// What the submission being checked changes, applied once it is replayed.
    pending: Option<Overlay>,
}

/// States a submission changes: (pool, query) -> available; event -> set.
#[derive(Default)]
struct Overlay {
    queries: HashMap<(u64, u32), bool>,
    events: HashMap<u64, bool>,
}

const RENDER_PASS_CONTINUE: u32 = 0x2;

impl GpuWaits {
    /// What a call replayed without error changes (`cb`: the command buffer of a recorded
    /// command).
    pub(super) fn after(&mut self, cb: Option<u64>, call: &Call, result: i32) {
        match call {
            Call::vkBeginCommandBuffer(p) => {
                let flags = p.p_begin_info.as_ref().map_or(0, |i| i.flags);
                let rec = self.recs.entry(p.command_buffer).or_default();
                rec.ops.clear();
                rec.in_pass = flags & RENDER_PASS_CONTINUE != 0;
            }
            Call::vkQueueSubmit(_) | Call::vkQueueSubmit2(_) | Call::vkQueueSubmit2KHR(_) => {
                match result >= 0 {
                    true => self.submit_after(),
                    false => self.pending = None,
                }
            }
            Call::vkResetQueryPool(_)
            | Call::vkResetQueryPoolEXT(_)
            | Call::vkCreateQueryPool(_)
            | Call::vkSetEvent(_)
            | Call::vkResetEvent(_)
            | Call::vkCreateEvent(_) => self.host(call),
            _ => {
                if let Some(cb) = cb {
                    self.recorded(cb, call);
                }
            }
        }
    }

    /// A command buffer was freed (by itself or with its pool): its recording goes with it.
    pub(super) fn forget(&mut self, cb: u64) {
        self.recs.remove(&cb);
    }

    /// Records `call` into command buffer `cb`'s list (a recorded command).
    fn recorded(&mut self, cb: u64, call: &Call) {
        let rec = self.recs.entry(cb).or_default();
        let write = |rec: &Rec, pool: u64, query: u32| {
            Op::Write(pool, query, if rec.in_pass { MAX_VIEWS } else { 1 })
        };
        let op = match call {
            Call::vkCmdResetQueryPool(p) => Op::Reset(p.query_pool, p.first_query, p.query_count),
            Call::vkCmdEndQuery(p) => write(rec, p.query_pool, p.query),
            Call::vkCmdEndQueryIndexedEXT(p) => write(rec, p.query_pool, p.query),
            Call::vkCmdWriteTimestamp(p) => write(rec, p.query_pool, p.query),
            Call::vkCmdWriteTimestamp2(p) | Call::vkCmdWriteTimestamp2KHR(p) => {
                write(rec, p.query_pool, p.query)
            }
            Call::vkCmdWriteAccelerationStructuresPropertiesKHR(p) => {
                Op::Write(p.query_pool, p.first_query, p.acceleration_structure_count)
            }
            Call::vkCmdCopyQueryPoolResults(p) if p.flags & WAIT != 0 => {
                Op::Wait(p.query_pool, p.first_query, p.query_count)
            }
            Call::vkCmdSetEvent(p) => Op::SetEvent(p.event),
            Call::vkCmdSetEvent2(p) | Call::vkCmdSetEvent2KHR(p) => Op::SetEvent(p.event),
            Call::vkCmdResetEvent(p) => Op::ResetEvent(p.event),
            Call::vkCmdResetEvent2(p) | Call::vkCmdResetEvent2KHR(p) => Op::ResetEvent(p.event),
            Call::vkCmdWaitEvents(p) => {
                let host = p.src_stage_mask & HOST_STAGE != 0;
                rec.ops
                    .extend(p.p_events.iter().flatten().map(|e| Op::WaitEvent(*e, host)));
                return;
            }
            Call::vkCmdWaitEvents2(p) | Call::vkCmdWaitEvents2KHR(p) => {
                rec.ops.extend(
                    p.p_events
                        .iter()
                        .flatten()
                        .map(|e| Op::WaitEvent(*e, false)),
                );
                return;
            }
            Call::vkCmdExecuteCommands(p) => {
                rec.ops
                    .extend(p.p_command_buffers.iter().flatten().map(|s| Op::Exec(*s)));
                return;
            }
            Call::vkCmdBeginRenderPass(_)
            | Call::vkCmdBeginRenderPass2(_)
            | Call::vkCmdBeginRenderPass2KHR(_)
            | Call::vkCmdBeginRendering(_)
            | Call::vkCmdBeginRenderingKHR(_) => {
                rec.in_pass = true;
                return;
            }
            Call::vkCmdEndRenderPass(_)
            | Call::vkCmdEndRenderPass2(_)
            | Call::vkCmdEndRenderPass2KHR(_)
            | Call::vkCmdEndRendering(_)
            | Call::vkCmdEndRenderingKHR(_) => {
                rec.in_pass = false;
                return;
            }
            _ => return,
        };
        rec.ops.push(op);
    }

    /// Checks a submission of `cbs`, in order: every wait is satisfied by what runs before it.
    pub(super) fn submit_before(&mut self, cbs: &[u64]) -> Result<(), String> {
        let mut o = Overlay::default();
        for &cb in cbs {
            self.play(cb, cb, &mut o, 0)?;
        }
        self.pending = Some(o);
        Ok(())
    }

    /// The submission checked last was replayed: its changes take effect.
    fn submit_after(&mut self) {
        let Some(o) = self.pending.take() else {
            return;
        };
        for ((pool, q), available) in o.queries {
            let w = self.written.entry(pool).or_default();
            if available {
                w.insert(q);
            } else {
                w.remove(&q);
            }
        }
        for (e, set) in o.events {
            if set {
                self.set.insert(e);
            } else {
                self.set.remove(&e);
            }
        }
    }

    fn play(&self, primary: u64, cb: u64, o: &mut Overlay, depth: u32) -> Result<(), String> {
        let Some(rec) = self.recs.get(&cb) else {
            return Ok(());
        };
        for op in &rec.ops {
            match *op {
                Op::Reset(pool, first, count) => {
                    for q in first..first.saturating_add(count) {
                        o.queries.insert((pool, q), false);
                    }
                }
                Op::Write(pool, first, count) => {
                    for q in first..first.saturating_add(count) {
                        o.queries.insert((pool, q), true);
                    }
                }
                Op::Wait(pool, first, count) => {
                    for q in first..first.saturating_add(count) {
                        let known = self.written.get(&pool).is_some_and(|w| w.contains(&q));
                        if !o.queries.get(&(pool, q)).copied().unwrap_or(known) {
                            return Err(format!(
                                "command buffer 0x{primary:x} copies query {q} of pool \
                                 0x{pool:x} with VK_QUERY_RESULT_WAIT_BIT, but no command \
                                 submitted before the copy writes it since its reset: the \
                                 GPU would wait for it for ever"
                            ));
                        }
                    }
                }
                Op::SetEvent(e) => {
                    o.events.insert(e, true);
                }
                Op::ResetEvent(e) => {
                    o.events.insert(e, false);
                }
                Op::WaitEvent(e, host_may_set) => {
                    let set = o.events.get(&e).copied().unwrap_or(self.set.contains(&e));
                    if !set && !host_may_set {
                        return Err(format!(
                            "command buffer 0x{primary:x} waits for event 0x{e:x}, which \
                             neither the host nor a command submitted before sets: the GPU \
                             would wait for it for ever"
                        ));
                    }
                }
                // Secondaries execute no secondaries of their own more than one level down.
                Op::Exec(s) if depth < 2 => self.play(primary, s, o, depth + 1)?,
                Op::Exec(_) => {}
            }
        }
        Ok(())
    }

    /// Host calls: query resets, event sets and resets, and objects made again under a
    /// handle that an earlier one had.
    fn host(&mut self, call: &Call) {
        match call {
            Call::vkResetQueryPool(p) | Call::vkResetQueryPoolEXT(p) => {
                if let Some(w) = self.written.get_mut(&p.query_pool) {
                    for q in p.first_query..p.first_query.saturating_add(p.query_count) {
                        w.remove(&q);
                    }
                }
            }
            Call::vkCreateQueryPool(p) => {
                if let Some(h) = p.p_query_pool {
                    self.written.remove(&h);
                }
            }
            Call::vkSetEvent(p) => {
                self.set.insert(p.event);
            }
            Call::vkResetEvent(p) => {
                self.set.remove(&p.event);
            }
            Call::vkCreateEvent(p) => {
                if let Some(h) = p.p_event {
                    self.set.remove(&h);
                }
            }
            _ => {}
        }
    }
}
