//! What a command buffer's recording must hold for its commands to be safe to hand to a driver
//! (each rule here closed a crash the fuzzer found in lavapipe): queries within their pool and
//! begun before they end, render pass instances opened before draws and closed before the end,
//! a pipeline bound before a draw or dispatch with the vertex buffers and index buffer it reads,
//! and buffers and images bound to memory before a command uses them.

// One arm per command, its checks inside: match guards would split a command over several arms.
#![allow(clippy::collapsible_match)]

use vkstream::Call;

use super::objects::{Table, BUFFER, IMAGE, MEMORY, PIPELINE, QUERY_POOL};
use crate::generated::checks::{
    self, DISPATCH, DRAW, DRAW_INDEXED, DRAW_MESH, PASS_BEGIN, PASS_END, PASS_NEXT,
};

/// A recording's state (kept in its command buffer's slot of the object table).
#[derive(Default)]
pub(super) struct Rec {
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

/// The rules; what they keep is in the object table (`objects`): each command buffer's
/// recording, query pools' query counts, graphics pipelines' vertex inputs, buffer sizes, and
/// the memory buffers and images are bound to (0: none needed: sparse, swapchain images).
#[derive(Default)]
pub(super) struct Recording;

const RENDER_PASS_CONTINUE: u32 = 0x2;
const DYNAMIC_VERTEX_INPUT: i32 = 1_000_352_000;

/// `offset..offset + len` must lie within `buffer` (sizes unknown pass).
fn within(t: &Table, buffer: u64, offset: u64, len: u64) -> Result<(), String> {
    match t.info(BUFFER, buffer) {
        Some(size) if offset.checked_add(len).is_none_or(|end| end > size) => Err(format!(
            "bytes {offset}..+{len} are outside buffer 0x{buffer:x} of {size} bytes"
        )),
        _ => Ok(()),
    }
}

fn range(t: &Table, pool: u64, first: u32, count: u32) -> Result<(), String> {
    match t.info(QUERY_POOL, pool) {
        Some(n) if u64::from(first) + u64::from(count) > n => Err(format!(
            "queries {first}..{} are outside query pool 0x{pool:x} of {n} queries",
            u64::from(first) + u64::from(count)
        )),
        _ => Ok(()),
    }
}

impl Recording {
    /// Checks a call against the recording state of the command buffer in slot `cb` of the
    /// object table (`u32::MAX` for calls outside command buffers).
    pub(super) fn before(&self, t: &Table, call: &Call, cb: u32, kind: u8) -> Result<(), String> {
        match call {
            Call::vkGetQueryPoolResults(p) => {
                return range(t, p.query_pool, p.first_query, p.query_count)
            }
            Call::vkResetQueryPool(p) | Call::vkResetQueryPoolEXT(p) => {
                return range(t, p.query_pool, p.first_query, p.query_count)
            }
            _ => {}
        }
        // Below: commands in a command buffer, and its end.
        if kind < checks::RECORD && !matches!(call, Call::vkEndCommandBuffer(_)) {
            return Ok(());
        }
        let Some(r) = t.cb_at(cb).and_then(|c| c.rec.as_ref()) else {
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
                let Some(vertex) = t.info(PIPELINE, r.pipeline[0]) else {
                    return Err("draw without a graphics pipeline bound".into());
                };
                let missing = vertex & !r.vertex;
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
            DISPATCH if t.info(PIPELINE, r.pipeline[1]).is_none() => {
                return Err("dispatch without a compute pipeline bound".into());
            }
            _ => {}
        }
        match call {
            Call::vkCmdBindPipeline(p) => bind_point(t, p.pipeline, p.pipeline_bind_point)?,
            Call::vkCmdBindVertexBuffers(p) => {
                for (b, o) in p
                    .p_buffers
                    .iter()
                    .flatten()
                    .zip(p.p_offsets.iter().flatten())
                {
                    if *b != 0 {
                        within(t, *b, *o, 1)?;
                    }
                }
            }
            Call::vkCmdBindIndexBuffer(p) => within(t, p.buffer, p.offset, 1)?,
            Call::vkCmdCopyBuffer(p) => {
                for r in p.p_regions.iter().flatten() {
                    within(t, p.src_buffer, r.src_offset, r.size)?;
                    within(t, p.dst_buffer, r.dst_offset, r.size)?;
                }
            }
            Call::vkCmdUpdateBuffer(p) => within(t, p.dst_buffer, p.dst_offset, p.data_size)?,
            Call::vkCmdFillBuffer(p) if p.size != u64::MAX => {
                within(t, p.dst_buffer, p.dst_offset, p.size)?
            }
            Call::vkCmdCopyQueryPoolResults(p) if p.query_count > 0 => {
                let span = p.stride.checked_mul(u64::from(p.query_count - 1));
                within(
                    t,
                    p.dst_buffer,
                    p.dst_offset,
                    span.map_or(u64::MAX, |x| x.saturating_add(4)),
                )?;
            }
            _ => {}
        }
        match call {
            Call::vkCmdBeginQuery(p) => {
                range(t, p.query_pool, p.query, 1)?;
                if r.active.contains(&(p.query_pool, p.query)) {
                    return Err(format!(
                        "query {} of pool 0x{:x} is already active",
                        p.query, p.query_pool
                    ));
                }
            }
            Call::vkCmdBeginQueryIndexedEXT(p) => {
                range(t, p.query_pool, p.query, 1)?;
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
            Call::vkCmdWriteTimestamp(p) => range(t, p.query_pool, p.query, 1)?,
            Call::vkCmdWriteTimestamp2(p) | Call::vkCmdWriteTimestamp2KHR(p) => {
                range(t, p.query_pool, p.query, 1)?
            }
            Call::vkCmdResetQueryPool(p) => range(t, p.query_pool, p.first_query, p.query_count)?,
            Call::vkCmdCopyQueryPoolResults(p) => {
                range(t, p.query_pool, p.first_query, p.query_count)?
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

    /// Records a call replayed without error (`cb`: as for `before`).
    pub(super) fn after(&mut self, t: &mut Table, call: &Call, cb: u32, kind: u8) {
        match call {
            Call::vkCreateQueryPool(p) => {
                if let (Some(i), Some(h)) = (&p.p_create_info, p.p_query_pool) {
                    set_info(t, QUERY_POOL, h, u64::from(i.query_count));
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
                            .filter(|b| b.binding < 63)
                            .fold(0u64, |m, b| m | 1 << b.binding)
                    };
                    set_info(t, PIPELINE, *h, vertex);
                }
                return;
            }
            Call::vkCreateComputePipelines(p) => {
                for h in p.p_pipelines.iter().flatten() {
                    set_info(t, PIPELINE, *h, COMPUTE_PIPELINE);
                }
                return;
            }
            Call::vkCreateBuffer(p) => {
                if let (Some(i), Some(b)) = (&p.p_create_info, p.p_buffer) {
                    set_info(t, BUFFER, b, i.size);
                }
                // Sparse buffers get memory another way.
                if p.p_create_info.as_ref().is_some_and(|i| i.flags & 0x1 != 0) {
                    bind(t, BUFFER, p.p_buffer.unwrap_or(0), 0);
                }
                return;
            }
            Call::vkCreateImage(p) => {
                if p.p_create_info.as_ref().is_some_and(|i| i.flags & 0x1 != 0) {
                    bind(t, IMAGE, p.p_image.unwrap_or(0), 0);
                }
                return;
            }
            Call::vkGetSwapchainImagesKHR(p) => {
                for i in p.p_swapchain_images.iter().flatten() {
                    bind(t, IMAGE, *i, 0);
                }
                return;
            }
            Call::vkBindBufferMemory(p) => {
                bind(t, BUFFER, p.buffer, p.memory);
                return;
            }
            Call::vkBindImageMemory(p) => {
                bind(t, IMAGE, p.image, p.memory);
                return;
            }
            Call::vkBindBufferMemory2(p) | Call::vkBindBufferMemory2KHR(p) => {
                for b in p.p_bind_infos.iter().flatten() {
                    bind(t, BUFFER, b.buffer, b.memory);
                }
                return;
            }
            Call::vkBindImageMemory2(p) | Call::vkBindImageMemory2KHR(p) => {
                for b in p.p_bind_infos.iter().flatten() {
                    bind(t, IMAGE, b.image, b.memory);
                }
                return;
            }
            Call::vkBeginCommandBuffer(p) => {
                let continues = p
                    .p_begin_info
                    .as_ref()
                    .is_some_and(|i| i.flags & RENDER_PASS_CONTINUE != 0);
                if let Some(c) = t.cb_at_mut(cb) {
                    // A recording starts afresh (its list of active queries kept for reuse).
                    let mut active = c.rec.take().map(|r| r.active).unwrap_or_default();
                    active.clear();
                    c.rec = Some(Rec {
                        active,
                        continues,
                        ..Default::default()
                    });
                }
                return;
            }
            _ => {}
        }
        if kind < checks::RECORD {
            return;
        }
        let Some(r) = t.cb_at_mut(cb).and_then(|c| c.rec.as_mut()) else {
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
}

/// A compute pipeline's `info` (a graphics pipeline's holds the vertex bindings it reads, below
/// binding 63).
const COMPUTE_PIPELINE: u64 = 1 << 63;

/// A pipeline is bound at the bind point of its kind (VUID-vkCmdBindPipeline-pipelineBindPoint-00779,
/// -00780, -02392): NVIDIA's driver crashed on a graphics pipeline bound for compute. Pipelines of
/// kinds not followed here (ray tracing) pass.
fn bind_point(t: &Table, pipeline: u64, point: i32) -> Result<(), String> {
    let Some(info) = t.info(PIPELINE, pipeline) else {
        return Ok(());
    };
    let (kind, wanted) = if info & COMPUTE_PIPELINE != 0 {
        ("compute", 1)
    } else {
        ("graphics", 0)
    };
    if point == wanted {
        return Ok(());
    }
    Err(format!(
        "{kind} pipeline 0x{pipeline:x} bound at pipeline bind point {point} (a {kind} pipeline \
         binds at {wanted})"
    ))
}

fn set_info(t: &mut Table, ty: i32, h: u64, info: u64) {
    if let Some(o) = t.get_mut(ty, h) {
        o.info = Some(info);
    }
}

/// A buffer or image bound to `memory` (0: needs none), with the memory's slot for the check
/// that it is still live.
fn bind(t: &mut Table, ty: i32, h: u64, memory: u64) {
    let slot = t.find(MEMORY, memory).unwrap_or(u32::MAX);
    if let Some(o) = t.get_mut(ty, h) {
        o.memory = memory;
        o.memory_slot = slot;
    }
}

fn mask(first: u32, count: u32) -> u64 {
    (first..first.saturating_add(count).min(64)).fold(0, |m, b| m | 1 << b)
}
