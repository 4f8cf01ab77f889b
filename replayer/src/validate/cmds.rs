//! What a recording holds that a driver reads past without checking (each rule closed a lavapipe
//! crash or endless draw the fuzzer found; part of [`Compat`]):
//! - queries: none reset while active, and each ended in the render pass instance (subpass) it
//!   was begun in (one left active is `record`'s);
//! - draws: the vertices and instances a draw reads lie within the vertex buffers bound (for the
//!   bound pipeline's strides), and an indexed draw's indices within the index buffer. Devices
//!   that enable robust buffer access define reads out of range, so they are not checked there;
//! - transform feedback: the bindings it is begun for, and those whose position an end records
//!   into a counter buffer, have a buffer bound in the recording.

use std::cell::Cell;

use vkstream::{Call, PNext};

use super::compat::{Compat, Live, Memory};
use crate::fasthash::HandleMap;

/// A pipeline's vertex buffer bindings: (binding, stride, per instance, furthest attribute
/// offset read within a stride).
type Vertex = Box<[(u32, u32, bool, u32)]>;

/// A command buffer's recording as far as these rules follow it: kept in its slot of the
/// object table (`objects::Cb`), so that a recorded command finds it with its handle.
#[derive(Default)]
pub(super) struct CbCmds {
    /// Render pass instance or subpass the recording is in (0: none).
    pass: u32,
    passes: u32,
    /// (pool, query, pass it was begun in).
    active: Vec<(u64, u32, u32)>,
    pipeline: u64,
    compute: u64,
    /// Descriptor sets bound (bit per set): graphics, compute.
    sets: [u32; 2],
    /// The sets bound by vkCmdBindDescriptorSets at 0..8 (0: another way or none).
    handles: [[u64; 8]; 2],
    /// Binding -> (buffer, offset, bytes usable from offset or u64::MAX).
    vertex: Vec<(u64, u64, u64)>,
    /// (buffer, offset, bytes per index).
    index: (u64, u64, u64),
    /// Transform feedback bindings with a buffer bound (bit per binding, the first 64).
    xfb: u64,
}

#[derive(Default)]
pub(super) struct Cmds {
    /// The current call's command buffer and whether it is inside a render pass instance
    /// with no graphics pipeline bound (set by `recorded_before`, for `no_pipeline_in_pass`).
    no_pipeline: Cell<(u64, bool)>,
    pipelines: HandleMap<u64, Vertex>,
    /// A device enabled robust buffer access.
    robust: bool,
}

const PER_INSTANCE: i32 = 1;
const DYNAMIC_STRIDE: i32 = 1_000_267_005;
const DYNAMIC_VERTEX_INPUT: i32 = 1_000_352_000;
/// Secondaries continuing a render pass are inside one from the start.
const CONTINUES: u32 = u32::MAX;
const RENDER_PASS_CONTINUE: u32 = 0x2;

impl Compat {
    /// What `before` checks, for a call whose first handle is command buffer `h`, with the
    /// state `cb` its slot holds.
    pub(super) fn recorded_before(
        &self,
        call: &Call,
        h: u64,
        cb: Option<&CbCmds>,
        live: &Live,
        memory: &Memory,
    ) -> Result<(), String> {
        let c = &self.cmds;
        let Some(cb) = cb else {
            c.no_pipeline.set((0, false));
            return self.before(call, live, memory);
        };
        match call {
            Call::vkCmdResetQueryPool(p) => {
                let end = u64::from(p.first_query) + u64::from(p.query_count);
                match cb.active.iter().find(|(pool, q, _)| {
                    *pool == p.query_pool && *q >= p.first_query && u64::from(*q) < end
                }) {
                    Some((_, q, _)) => Err(format!(
                        "resets query {q} of pool 0x{:x} while it is active",
                        p.query_pool
                    )),
                    None => Ok(()),
                }
            }
            Call::vkCmdEndQuery(p) => end_query(cb, p.query_pool, p.query),
            Call::vkCmdEndQueryIndexedEXT(p) => {
                end_query(cb, p.query_pool, p.query)?;
                self.limits_before(call)
            }
            // VUID-vkCmdBeginTransformFeedbackEXT-firstCounterBuffer-09630: each binding begun
            // has a buffer bound (the fuzzer deleted Zink's bind; lavapipe crashed when the end
            // recorded the counters of bindings it had no target for).
            Call::vkCmdBeginTransformFeedbackEXT(p) => {
                let missing = xfb_bits(p.first_counter_buffer, p.counter_buffer_count) & !cb.xfb;
                if missing != 0 {
                    return Err(format!(
                        "begins transform feedback for bindings {}..+{}, but binding {} has no \
                         transform feedback buffer bound (vkCmdBindTransformFeedbackBuffersEXT) \
                         in this recording",
                        p.first_counter_buffer,
                        p.counter_buffer_count,
                        missing.trailing_zeros()
                    ));
                }
                Ok(())
            }
            // A counter buffer at the end records how far its binding's buffer was written: no
            // buffer, no position (no VUID says so; lavapipe read a null target and crashed).
            Call::vkCmdEndTransformFeedbackEXT(p) => {
                let counters = p.p_counter_buffers.iter().flatten();
                let counters = counters.take(p.counter_buffer_count as usize).enumerate();
                for (i, &b) in counters {
                    let k = u64::from(p.first_counter_buffer) + i as u64;
                    if b != 0 && k < 64 && cb.xfb & (1 << k) == 0 {
                        return Err(format!(
                            "pCounterBuffers {i} (buffer 0x{b:x}) would record the position of \
                             transform feedback binding {k}, which has no buffer bound in this \
                             recording"
                        ));
                    }
                }
                Ok(())
            }
            Call::vkCmdDrawIndirect(_) => self.sets_bound(cb, 0),
            Call::vkCmdDrawIndexedIndirect(_) => self.sets_bound(cb, 0),
            Call::vkCmdDispatch(_) => self.sets_bound(cb, 1),
            Call::vkCmdDispatchIndirect(_) => self.sets_bound(cb, 1),
            Call::vkCmdDraw(p) => {
                self.sets_bound(cb, 0)?;
                if c.robust {
                    return Ok(());
                }
                let Some(pipe) = c.pipelines.get(&cb.pipeline) else {
                    return Ok(());
                };
                self.vertices(cb, pipe, p.first_vertex, p.vertex_count, true)?;
                self.vertices(cb, pipe, p.first_instance, p.instance_count, false)
            }
            Call::vkCmdDrawIndexed(p) => {
                self.sets_bound(cb, 0)?;
                if c.robust {
                    return Ok(());
                }
                {
                    let (buffer, offset, size) = cb.index;
                    let end = (u64::from(p.first_index) + u64::from(p.index_count))
                        .saturating_mul(size)
                        .saturating_add(offset);
                    match self.buffers.get(&buffer) {
                        Some(&have) if p.index_count > 0 && end > have => {
                            return Err(format!(
                                "indices {}..+{} read past index buffer 0x{buffer:x} of {have} \
                                 bytes (from offset {offset})",
                                p.first_index, p.index_count
                            ));
                        }
                        _ => {}
                    }
                }
                match c.pipelines.get(&cb.pipeline) {
                    Some(pipe) => {
                        self.vertices(cb, pipe, p.first_instance, p.instance_count, false)
                    }
                    None => Ok(()),
                }
            }
            _ => {
                c.no_pipeline.set((h, cb.pass != 0 && cb.pipeline == 0));
                self.before(call, live, memory)
            }
        }
    }

    /// The rest of `before`'s chain (`passes_before` ends here): the commands above need
    /// their command buffer's state and come through `recorded_before`.
    pub(super) fn cmds_before(&self, call: &Call) -> Result<(), String> {
        self.limits_before(call)
    }

    /// Every descriptor set the bound pipeline's shaders use is bound (`point`: graphics 0,
    /// compute 1).
    fn sets_bound(&self, cb: &CbCmds, point: usize) -> Result<(), String> {
        let pipeline = if point == 0 { cb.pipeline } else { cb.compute };
        let Some(used) = self.used_sets.get(&pipeline) else {
            return Ok(());
        };
        let missing = used.mask & !cb.sets[point];
        if missing != 0 {
            return Err(format!(
                "descriptor set {} is not bound, but pipeline 0x{pipeline:x}'s shaders use it",
                missing.trailing_zeros()
            ));
        }
        for &(s, b) in used.pairs.iter() {
            let Some(&set) = cb.handles[point].get(s as usize) else {
                continue;
            };
            if !self.readable(set, b) {
                return Err(format!(
                    "binding {b} of descriptor set 0x{set:x} (bound as set {s}) was never \
                     written, but pipeline 0x{pipeline:x}'s shaders read it"
                ));
            }
        }
        Ok(())
    }

    /// Vertices (or instances) `first..first + count` within the vertex buffers bound, as the
    /// bound pipeline `pipe` reads them.
    fn vertices(
        &self,
        cb: &CbCmds,
        pipe: &Vertex,
        first: u32,
        count: u32,
        per_vertex: bool,
    ) -> Result<(), String> {
        if count == 0 {
            return Ok(());
        }
        let last = u64::from(first) + u64::from(count) - 1;
        for &(binding, stride, instance, reach) in pipe.iter() {
            if instance == per_vertex {
                continue;
            }
            let Some(&(buffer, offset, usable)) = cb.vertex.get(binding as usize) else {
                continue;
            };
            let Some(&size) = self.buffers.get(&buffer) else {
                continue;
            };
            let have = size.saturating_sub(offset).min(usable);
            let start = last
                .saturating_mul(u64::from(stride))
                .saturating_add(u64::from(reach));
            if start >= have {
                let what = if per_vertex { "vertices" } else { "instances" };
                return Err(format!(
                    "{what} {first}..+{count} read past vertex buffer 0x{buffer:x} at binding \
                     {binding} ({have} bytes from offset {offset}, stride {stride})"
                ));
            }
        }
        Ok(())
    }

    /// What `after` records, for a call whose first handle is a command buffer, into the state
    /// `cb` its slot holds.
    pub(super) fn recorded_after(&mut self, call: &Call, cb: Option<&mut CbCmds>) {
        let Some(cb) = cb else {
            return self.after(call);
        };
        match call {
            Call::vkBeginCommandBuffer(p) => {
                let continues = p
                    .p_begin_info
                    .as_ref()
                    .is_some_and(|i| i.flags & RENDER_PASS_CONTINUE != 0);
                cb.pass = if continues { CONTINUES } else { 0 };
                cb.active.clear();
                cb.pipeline = 0;
                cb.compute = 0;
                cb.sets = [0; 2];
                cb.handles = [[0; 8]; 2];
                cb.vertex.clear();
                cb.index = (0, 0, 0);
                cb.xfb = 0;
            }
            Call::vkCmdBeginRenderPass(_) => cb.begin_pass(),
            Call::vkCmdBeginRenderPass2(_) | Call::vkCmdBeginRenderPass2KHR(_) => cb.begin_pass(),
            Call::vkCmdBeginRendering(_) | Call::vkCmdBeginRenderingKHR(_) => cb.begin_pass(),
            Call::vkCmdNextSubpass(_) => cb.begin_pass(),
            Call::vkCmdNextSubpass2(_) | Call::vkCmdNextSubpass2KHR(_) => cb.begin_pass(),
            Call::vkCmdEndRenderPass(_) => cb.pass = 0,
            Call::vkCmdEndRenderPass2(_) | Call::vkCmdEndRenderPass2KHR(_) => cb.pass = 0,
            Call::vkCmdEndRendering(_) | Call::vkCmdEndRenderingKHR(_) => cb.pass = 0,
            Call::vkCmdBeginQuery(p) => cb.active.push((p.query_pool, p.query, cb.pass)),
            Call::vkCmdBeginQueryIndexedEXT(p) => cb.active.push((p.query_pool, p.query, cb.pass)),
            Call::vkCmdEndQuery(p) => cb.ended(p.query_pool, p.query),
            Call::vkCmdEndQueryIndexedEXT(p) => cb.ended(p.query_pool, p.query),
            Call::vkCmdBindPipeline(p) => match p.pipeline_bind_point {
                0 => cb.pipeline = p.pipeline,
                1 => cb.compute = p.pipeline,
                _ => {}
            },
            Call::vkCmdBindDescriptorSets(p) => {
                // A VK_NULL_HANDLE set binds nothing.
                let sets = p.p_descriptor_sets.iter().flatten();
                let bits = sets
                    .take(p.descriptor_set_count as usize)
                    .enumerate()
                    .filter(|(k, s)| **s != 0 && p.first_set as usize + k < 32)
                    .fold(0u32, |m, (k, _)| m | 1 << (p.first_set as usize + k));
                cb.bound(p.pipeline_bind_point, bits);
                if let Some(h) = cb.handles.get_mut(p.pipeline_bind_point as usize) {
                    let sets = p.p_descriptor_sets.iter().flatten();
                    for (k, s) in sets.take(p.descriptor_set_count as usize).enumerate() {
                        if let Some(slot) = h.get_mut(p.first_set as usize + k) {
                            *slot = *s;
                        }
                    }
                }
            }
            Call::vkCmdPushDescriptorSetKHR(p) if p.set < 32 => {
                cb.bound(p.pipeline_bind_point, 1 << p.set)
            }
            // The template says the bind point: both count as bound.
            Call::vkCmdPushDescriptorSetWithTemplateKHR(p) if p.set < 32 => {
                cb.bound(0, 1 << p.set);
                cb.bound(1, 1 << p.set);
            }
            Call::vkCmdSetDescriptorBufferOffsetsEXT(p) => {
                let n = p.set_count.min(32);
                let bits = (p.first_set..p.first_set.saturating_add(n).min(32))
                    .fold(0u32, |m, s| m | 1 << s);
                cb.bound(p.pipeline_bind_point, bits);
            }
            Call::vkCmdBindDescriptorBufferEmbeddedSamplersEXT(p) if p.set < 32 => {
                cb.bound(p.pipeline_bind_point, 1 << p.set)
            }
            Call::vkCmdBindVertexBuffers(p) => {
                let bufs = p.p_buffers.iter().flatten();
                let offs = p.p_offsets.iter().flatten();
                let all = bufs.zip(offs).map(|(b, o)| (*b, *o, u64::MAX));
                let all = all.take(p.binding_count as usize);
                cb.bind_vertex(p.first_binding, all);
            }
            Call::vkCmdBindVertexBuffers2(p) | Call::vkCmdBindVertexBuffers2EXT(p) => {
                let bufs = p.p_buffers.iter().flatten();
                let offs = p.p_offsets.iter().flatten();
                let sizes = p.p_sizes.as_deref();
                let all = bufs.zip(offs).enumerate().map(|(k, (b, o))| {
                    let size = sizes.and_then(|s| s.get(k)).copied().unwrap_or(u64::MAX);
                    (*b, *o, size)
                });
                let all = all.take(p.binding_count as usize);
                cb.bind_vertex(p.first_binding, all);
            }
            Call::vkCmdBindTransformFeedbackBuffersEXT(p) => {
                cb.xfb |= xfb_bits(p.first_binding, p.binding_count);
            }
            Call::vkCmdBindIndexBuffer(p) => {
                let size = match p.index_type {
                    0 => 2,
                    1 => 4,
                    1_000_265_000 => 1,
                    _ => 0,
                };
                cb.index = (p.buffer, p.offset, size);
            }
            _ => self.after(call),
        }
    }

    /// The rest of `after`'s chain (`passes_after` ends here).
    pub(super) fn cmds_after(&mut self, call: &Call) {
        let c = &mut self.cmds;
        match call {
            Call::vkCreateDevice(p) => {
                let f = p.p_create_info.as_ref();
                let core = f
                    .and_then(|i| i.p_enabled_features.as_ref())
                    .is_some_and(|f| f.robust_buffer_access != 0);
                let chained = f.iter().flat_map(|i| i.p_next.iter()).any(|n| match n {
                    PNext::VkPhysicalDeviceFeatures2(f) => f.features.robust_buffer_access != 0,
                    PNext::VkPhysicalDeviceRobustness2FeaturesEXT(f) => {
                        f.robust_buffer_access2 != 0
                    }
                    _ => false,
                });
                c.robust |= core || chained;
            }
            Call::vkCreateGraphicsPipelines(p) => {
                let infos = p.p_create_infos.iter().flatten();
                for (i, h) in infos.zip(p.p_pipelines.iter().flatten()) {
                    let dynamic = i
                        .p_dynamic_state
                        .iter()
                        .flat_map(|d| d.p_dynamic_states.iter().flatten())
                        .any(|s| *s == DYNAMIC_STRIDE || *s == DYNAMIC_VERTEX_INPUT);
                    let Some(v) = i.p_vertex_input_state.as_ref().filter(|_| !dynamic) else {
                        continue;
                    };
                    // A divisor reads fewer instances than drawn: not followed.
                    let divisor = v.p_next.iter().any(|n| {
                        matches!(n, PNext::VkPipelineVertexInputDivisorStateCreateInfoEXT(_))
                    });
                    let attrs = v.p_vertex_attribute_descriptions.as_deref().unwrap_or(&[]);
                    let vertex: Vertex = v
                        .p_vertex_binding_descriptions
                        .iter()
                        .flatten()
                        .filter(|b| !(divisor && b.input_rate == PER_INSTANCE))
                        .filter_map(|b| {
                            let reach = attrs
                                .iter()
                                .filter(|a| a.binding == b.binding)
                                .map(|a| a.offset)
                                .max()?;
                            Some((b.binding, b.stride, b.input_rate == PER_INSTANCE, reach))
                        })
                        .collect();
                    c.pipelines.insert(*h, vertex);
                }
            }
            _ => self.limits_after(call),
        }
    }

    /// Whether recording `cb` is inside a render pass instance with no graphics pipeline bound
    /// yet.
    /// (`cb` is the current call's: `recorded_before` noted its state.)
    pub(super) fn no_pipeline_in_pass(&self, cb: u64) -> bool {
        let (h, no) = self.cmds.no_pipeline.get();
        h == cb && no
    }

    pub(super) fn cmds_destroyed(&mut self, h: u64) {
        self.cmds.pipelines.remove(&h);
    }
}

/// Where a recording is, for messages.
fn place(pass: u32) -> String {
    match pass {
        0 => "outside any render pass instance".into(),
        CONTINUES => "inside the render pass instance it continues".into(),
        n => format!("inside render pass instance (or subpass) #{n} of the recording"),
    }
}

/// Transform feedback bindings `first..+count` as bits (those past the first 64 are not
/// followed).
fn xfb_bits(first: u32, count: u32) -> u64 {
    if first >= 64 || count == 0 {
        return 0;
    }
    let n = (u64::from(first) + u64::from(count)).min(64) - u64::from(first);
    let ones = if n == 64 { u64::MAX } else { (1 << n) - 1 };
    ones << first
}

/// A query ended in a pass other than the one it was begun in.
fn end_query(cb: &CbCmds, pool: u64, query: u32) -> Result<(), String> {
    match cb.active.iter().find(|(p, q, _)| *p == pool && *q == query) {
        Some((_, _, pass)) if *pass != cb.pass => Err(format!(
            "query {query} of pool 0x{pool:x} was begun {} but is ended {}",
            place(*pass),
            place(cb.pass)
        )),
        _ => Ok(()),
    }
}

impl CbCmds {
    fn begin_pass(&mut self) {
        self.passes = self.passes.wrapping_add(1).max(1);
        self.pass = self.passes;
    }

    fn ended(&mut self, pool: u64, query: u32) {
        self.active.retain(|(p, q, _)| (*p, *q) != (pool, query));
    }

    /// Sets `bits` bound at `point`, not (yet) by handle.
    fn bound(&mut self, point: i32, bits: u32) {
        let Some(s) = self.sets.get_mut(point as usize) else {
            return;
        };
        *s |= bits;
        for (k, h) in self.handles[point as usize].iter_mut().enumerate() {
            if bits & (1 << k) != 0 {
                *h = 0;
            }
        }
    }

    fn bind_vertex(&mut self, first: u32, all: impl Iterator<Item = (u64, u64, u64)>) {
        for (k, b) in all.enumerate() {
            let i = first as usize + k;
            // The binding range was checked against the replay GPU's limit.
            if i >= 64 {
                break;
            }
            if self.vertex.len() <= i {
                self.vertex.resize(i + 1, (0, 0, 0));
            }
            self.vertex[i] = b;
        }
    }
}
