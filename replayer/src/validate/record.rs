//! What a command buffer's recording must hold for its commands to be safe to hand to a driver
//! (each rule here closed a crash the fuzzer found in lavapipe): queries within their pool and
//! begun before they end, render pass instances opened before draws and closed before the end,
//! a pipeline bound before a draw or dispatch with the vertex buffers and index buffer it reads,
//! and buffers and images bound to memory before a command uses them.

// One arm per command, its checks inside: match guards would split a command over several arms.
#![allow(clippy::collapsible_match)]

use vkstream::Call;

use crate::fasthash::HandleMap;
use crate::generated::checks::{
    self, DISPATCH, DRAW, DRAW_INDEXED, DRAW_MESH, PASS_BEGIN, PASS_END, PASS_NEXT,
};

/// A recording's state.
#[derive(Default)]
struct Rec {
    /// (pool, query) begun and not ended.
    active: Vec<(u64, u32)>,
    in_pass: bool,
    /// A secondary continuing a render pass (draws are inside one).
    continues: bool,
    /// Pipelines bound: graphics, compute.
    pipeline: [u64; 2],
    /// Vertex buffer bindings bound (bit per binding, bindings over 63 not tracked).
    vertex: u64,
    index: bool,
}

/// A pipeline's needs.
#[derive(Clone, Copy)]
struct Pipe {
    /// Vertex buffer bindings it reads.
    vertex: u64,
}

#[derive(Default)]
pub(super) struct Recording {
    recs: HandleMap<u64, Rec>,
    /// Query pool -> its query count.
    pools: HandleMap<u64, u32>,
    pipelines: HandleMap<u64, Pipe>,
    /// Buffer -> its size.
    sizes: HandleMap<u64, u64>,
    /// Buffers and images with memory -> that memory (0: none needed: sparse, swapchain images).
    bound: HandleMap<u64, u64>,
}

const RENDER_PASS_CONTINUE: u32 = 0x2;
const DYNAMIC_VERTEX_INPUT: i32 = 1_000_352_000;

/// `offset..offset + len` must lie within `buffer` (sizes unknown pass).
fn within(sizes: &HandleMap<u64, u64>, buffer: u64, offset: u64, len: u64) -> Result<(), String> {
    match sizes.get(&buffer) {
        Some(&size) if offset.checked_add(len).is_none_or(|end| end > size) => Err(format!(
            "bytes {offset}..+{len} are outside buffer 0x{buffer:x} of {size} bytes"
        )),
        _ => Ok(()),
    }
}

fn range(pools: &HandleMap<u64, u32>, pool: u64, first: u32, count: u32) -> Result<(), String> {
    match pools.get(&pool) {
        Some(&n) if u64::from(first) + u64::from(count) > u64::from(n) => Err(format!(
            "queries {first}..{} are outside query pool 0x{pool:x} of {n} queries",
            u64::from(first) + u64::from(count)
        )),
        _ => Ok(()),
    }
}

impl Recording {
    /// The memory a buffer or image named by a command is bound to (`Some(0)`: needs none).
    pub(super) fn memory_of(&self, h: u64) -> Option<u64> {
        self.bound.get(&h).copied()
    }

    /// Checks a call against the recording state of command buffer `cb` (0 for calls outside
    /// command buffers).
    pub(super) fn before(&mut self, call: &Call, cb: u64, kind: u8) -> Result<(), String> {
        let pools = &self.pools;
        match call {
            Call::vkGetQueryPoolResults(p) => {
                return range(pools, p.query_pool, p.first_query, p.query_count)
            }
            Call::vkResetQueryPool(p) | Call::vkResetQueryPoolEXT(p) => {
                return range(pools, p.query_pool, p.first_query, p.query_count)
            }
            _ => {}
        }
        let Some(r) = self.recs.get(&cb) else {
            return Ok(());
        };
        match kind {
            PASS_BEGIN if r.in_pass => return Err("a render pass instance is already open".into()),
            PASS_NEXT | PASS_END if !r.in_pass => {
                return Err("no render pass instance is open".into())
            }
            DRAW | DRAW_INDEXED | DRAW_MESH => {
                if !r.in_pass && !r.continues {
                    return Err("draw outside a render pass instance".into());
                }
                let Some(pipe) = self.pipelines.get(&r.pipeline[0]) else {
                    return Err("draw without a graphics pipeline bound".into());
                };
                let missing = pipe.vertex & !r.vertex;
                if missing != 0 && kind != DRAW_MESH {
                    return Err(format!(
                        "draw without a vertex buffer bound at binding {}",
                        missing.trailing_zeros()
                    ));
                }
                if kind == DRAW_INDEXED && !r.index {
                    return Err("indexed draw without an index buffer bound".into());
                }
                return Ok(());
            }
            DISPATCH if !self.pipelines.contains_key(&r.pipeline[1]) => {
                return Err("dispatch without a compute pipeline bound".into());
            }
            _ => {}
        }
        let sizes = &self.sizes;
        match call {
            Call::vkCmdBindVertexBuffers(p) => {
                for (b, o) in p
                    .p_buffers
                    .iter()
                    .flatten()
                    .zip(p.p_offsets.iter().flatten())
                {
                    if *b != 0 {
                        within(sizes, *b, *o, 1)?;
                    }
                }
            }
            Call::vkCmdBindIndexBuffer(p) => within(sizes, p.buffer, p.offset, 1)?,
            Call::vkCmdCopyBuffer(p) => {
                for r in p.p_regions.iter().flatten() {
                    within(sizes, p.src_buffer, r.src_offset, r.size)?;
                    within(sizes, p.dst_buffer, r.dst_offset, r.size)?;
                }
            }
            Call::vkCmdUpdateBuffer(p) => within(sizes, p.dst_buffer, p.dst_offset, p.data_size)?,
            Call::vkCmdFillBuffer(p) if p.size != u64::MAX => {
                within(sizes, p.dst_buffer, p.dst_offset, p.size)?
            }
            Call::vkCmdCopyQueryPoolResults(p) if p.query_count > 0 => {
                let span = p.stride.checked_mul(u64::from(p.query_count - 1));
                within(
                    sizes,
                    p.dst_buffer,
                    p.dst_offset,
                    span.map_or(u64::MAX, |x| x.saturating_add(4)),
                )?;
            }
            _ => {}
        }
        match call {
            Call::vkCmdBeginQuery(p) => {
                range(pools, p.query_pool, p.query, 1)?;
                if r.active.contains(&(p.query_pool, p.query)) {
                    return Err(format!(
                        "query {} of pool 0x{:x} is already active",
                        p.query, p.query_pool
                    ));
                }
            }
            Call::vkCmdBeginQueryIndexedEXT(p) => {
                range(pools, p.query_pool, p.query, 1)?;
                if r.active.contains(&(p.query_pool, p.query)) {
                    return Err(format!(
                        "query {} of pool 0x{:x} is already active",
                        p.query, p.query_pool
                    ));
                }
            }
            Call::vkCmdEndQuery(p) => {
                if !r.active.contains(&(p.query_pool, p.query)) {
                    return Err(format!(
                        "query {} of pool 0x{:x} was not begun",
                        p.query, p.query_pool
                    ));
                }
            }
            Call::vkCmdEndQueryIndexedEXT(p) => {
                if !r.active.contains(&(p.query_pool, p.query)) {
                    return Err(format!(
                        "query {} of pool 0x{:x} was not begun",
                        p.query, p.query_pool
                    ));
                }
            }
            Call::vkCmdWriteTimestamp(p) => range(pools, p.query_pool, p.query, 1)?,
            Call::vkCmdWriteTimestamp2(p) | Call::vkCmdWriteTimestamp2KHR(p) => {
                range(pools, p.query_pool, p.query, 1)?
            }
            Call::vkCmdResetQueryPool(p) => {
                range(pools, p.query_pool, p.first_query, p.query_count)?
            }
            Call::vkCmdCopyQueryPoolResults(p) => {
                range(pools, p.query_pool, p.first_query, p.query_count)?
            }
            Call::vkEndCommandBuffer(_) => {
                if let Some((pool, q)) = r.active.first() {
                    return Err(format!("query {q} of pool 0x{pool:x} is still active"));
                }
                if r.in_pass {
                    return Err("a render pass instance is still open".into());
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Records a call replayed without error.
    pub(super) fn after(&mut self, call: &Call, cb: u64, kind: u8) {
        match call {
            Call::vkCreateQueryPool(p) => {
                if let (Some(i), Some(h)) = (&p.p_create_info, p.p_query_pool) {
                    self.pools.insert(h, i.query_count);
                }
                return;
            }
            Call::vkCreateGraphicsPipelines(p) => {
                for (i, h) in p
                    .p_create_infos
                    .iter()
                    .flatten()
                    .zip(p.p_pipelines.iter().flatten())
                {
                    let dynamic = i
                        .p_dynamic_state
                        .iter()
                        .flat_map(|d| d.p_dynamic_states.iter().flatten())
                        .any(|s| *s == DYNAMIC_VERTEX_INPUT);
                    let vertex = if dynamic {
                        0
                    } else {
                        i.p_vertex_input_state
                            .iter()
                            .flat_map(|v| v.p_vertex_binding_descriptions.iter().flatten())
                            .filter(|b| b.binding < 64)
                            .fold(0u64, |m, b| m | 1 << b.binding)
                    };
                    self.pipelines.insert(*h, Pipe { vertex });
                }
                return;
            }
            Call::vkCreateComputePipelines(p) => {
                for h in p.p_pipelines.iter().flatten() {
                    self.pipelines.insert(*h, Pipe { vertex: 0 });
                }
                return;
            }
            Call::vkCreateBuffer(p) => {
                if let (Some(i), Some(b)) = (&p.p_create_info, p.p_buffer) {
                    self.sizes.insert(b, i.size);
                }
                // Sparse buffers get memory another way.
                if p.p_create_info.as_ref().is_some_and(|i| i.flags & 0x1 != 0) {
                    self.bound.extend(p.p_buffer.map(|b| (b, 0)));
                }
                return;
            }
            Call::vkCreateImage(p) => {
                if p.p_create_info.as_ref().is_some_and(|i| i.flags & 0x1 != 0) {
                    self.bound.extend(p.p_image.map(|i| (i, 0)));
                }
                return;
            }
            Call::vkGetSwapchainImagesKHR(p) => {
                self.bound
                    .extend(p.p_swapchain_images.iter().flatten().map(|i| (*i, 0)));
                return;
            }
            Call::vkBindBufferMemory(p) => {
                self.bound.insert(p.buffer, p.memory);
                return;
            }
            Call::vkBindImageMemory(p) => {
                self.bound.insert(p.image, p.memory);
                return;
            }
            Call::vkBindBufferMemory2(p) | Call::vkBindBufferMemory2KHR(p) => {
                self.bound.extend(
                    p.p_bind_infos
                        .iter()
                        .flatten()
                        .map(|b| (b.buffer, b.memory)),
                );
                return;
            }
            Call::vkBindImageMemory2(p) | Call::vkBindImageMemory2KHR(p) => {
                self.bound
                    .extend(p.p_bind_infos.iter().flatten().map(|b| (b.image, b.memory)));
                return;
            }
            Call::vkBeginCommandBuffer(p) => {
                let continues = p
                    .p_begin_info
                    .as_ref()
                    .is_some_and(|i| i.flags & RENDER_PASS_CONTINUE != 0);
                self.recs.insert(
                    p.command_buffer,
                    Rec {
                        continues,
                        ..Default::default()
                    },
                );
                return;
            }
            _ => {}
        }
        if kind < checks::RECORD {
            return;
        }
        let Some(r) = self.recs.get_mut(&cb) else {
            return;
        };
        match kind {
            PASS_BEGIN => r.in_pass = true,
            PASS_END => r.in_pass = false,
            _ => {}
        }
        match call {
            Call::vkCmdBeginQuery(p) => r.active.push((p.query_pool, p.query)),
            Call::vkCmdBeginQueryIndexedEXT(p) => r.active.push((p.query_pool, p.query)),
            Call::vkCmdEndQuery(p) => r.active.retain(|x| *x != (p.query_pool, p.query)),
            Call::vkCmdEndQueryIndexedEXT(p) => r.active.retain(|x| *x != (p.query_pool, p.query)),
            Call::vkCmdBindPipeline(p) => {
                if let Some(slot) = r.pipeline.get_mut(p.pipeline_bind_point as usize) {
                    *slot = p.pipeline;
                }
            }
            Call::vkCmdBindVertexBuffers(p) => r.vertex |= mask(p.first_binding, p.binding_count),
            Call::vkCmdBindVertexBuffers2(p) | Call::vkCmdBindVertexBuffers2EXT(p) => {
                r.vertex |= mask(p.first_binding, p.binding_count)
            }
            Call::vkCmdBindIndexBuffer(_) => r.index = true,
            _ => {}
        }
    }

    pub(super) fn destroyed(&mut self, h: u64) {
        self.recs.remove(&h);
        self.sizes.remove(&h);
        self.bound.remove(&h);
        self.pools.remove(&h);
        self.pipelines.remove(&h);
    }
}

fn mask(first: u32, count: u32) -> u64 {
    (first..first.saturating_add(count).min(64)).fold(0, |m, b| m | 1 << b)
}
