//! How the trace began each query: the flags of its begin (PRECISE) and the view mask of the
//! render pass instance around it (multiview: the begin then uses one query per view). Results
//! files record it (`QueryResult::begin`) and `format::query::classify_read` reads it.
//!
//! Followed from the calls as the trace goes, before the replay sees them: render passes created
//! with view masks, the subpass or dynamic rendering each command buffer is in, and secondary
//! command buffers that continue one.

use std::collections::HashMap;

use format::record::{QueryBegin, QueryOp, QueryOpKind};
use vkstream::{Call, PNext};

/// `VK_COMMAND_BUFFER_USAGE_RENDER_PASS_CONTINUE_BIT`.
const RENDER_PASS_CONTINUE: u32 = 0x2;

/// Where a command buffer is recording now.
#[derive(Debug, Clone, Copy)]
enum Inside {
    Subpass {
        render_pass: u64,
        subpass: u32,
    },
    /// Dynamic rendering (or a secondary continuing one): its view mask.
    Rendering(u32),
}

#[derive(Debug, Default)]
pub(crate) struct Begins {
    /// Captured render pass -> view mask of each subpass (multiview render passes only).
    view_masks: HashMap<u64, Vec<u32>>,
    /// Captured command buffer -> the render pass instance it records in.
    inside: HashMap<u64, Inside>,
    /// (captured pool, query) -> its last begin (every query of a multiview begin).
    queries: HashMap<(u64, u32), QueryBegin>,
}

impl Begins {
    /// A call of the trace, decoded.
    pub fn call(&mut self, call: &Call) {
        match call {
            Call::vkCreateRenderPass(p) => {
                let masks = p.p_create_info.as_ref().and_then(|ci| {
                    ci.p_next.iter().find_map(|n| match n {
                        PNext::VkRenderPassMultiviewCreateInfo(m) => m.p_view_masks.clone(),
                        _ => None,
                    })
                });
                self.render_pass(p.p_render_pass, masks.unwrap_or_default());
            }
            Call::vkCreateRenderPass2(p) | Call::vkCreateRenderPass2KHR(p) => {
                let masks = p
                    .p_create_info
                    .as_ref()
                    .and_then(|ci| ci.p_subpasses.as_ref())
                    .map(|s| s.iter().map(|s| s.view_mask).collect())
                    .unwrap_or_default();
                self.render_pass(p.p_render_pass, masks);
            }
            Call::vkCmdBeginRenderPass(p) => {
                let rp = p.p_render_pass_begin.as_ref().map_or(0, |b| b.render_pass);
                self.subpass(p.command_buffer, rp);
            }
            Call::vkCmdBeginRenderPass2(p) | Call::vkCmdBeginRenderPass2KHR(p) => {
                let rp = p.p_render_pass_begin.as_ref().map_or(0, |b| b.render_pass);
                self.subpass(p.command_buffer, rp);
            }
            Call::vkCmdNextSubpass(p) => self.next_subpass(p.command_buffer),
            Call::vkCmdNextSubpass2(p) | Call::vkCmdNextSubpass2KHR(p) => {
                self.next_subpass(p.command_buffer)
            }
            Call::vkCmdBeginRendering(p) | Call::vkCmdBeginRenderingKHR(p) => {
                let mask = p.p_rendering_info.as_ref().map_or(0, |r| r.view_mask);
                self.inside
                    .insert(p.command_buffer, Inside::Rendering(mask));
            }
            Call::vkCmdEndRenderPass(p) => {
                self.inside.remove(&p.command_buffer);
            }
            Call::vkCmdEndRenderPass2(p) | Call::vkCmdEndRenderPass2KHR(p) => {
                self.inside.remove(&p.command_buffer);
            }
            Call::vkCmdEndRendering(p) | Call::vkCmdEndRenderingKHR(p) => {
                self.inside.remove(&p.command_buffer);
            }
            Call::vkBeginCommandBuffer(p) => {
                self.inside.remove(&p.command_buffer);
                let Some(info) = p.p_begin_info.as_ref() else {
                    return;
                };
                let Some(inh) = info
                    .p_inheritance_info
                    .as_ref()
                    .filter(|_| info.flags & RENDER_PASS_CONTINUE != 0)
                else {
                    return;
                };
                let inside = if inh.render_pass != 0 {
                    Inside::Subpass {
                        render_pass: inh.render_pass,
                        subpass: inh.subpass,
                    }
                } else {
                    let mask = inh.p_next.iter().find_map(|n| match n {
                        PNext::VkCommandBufferInheritanceRenderingInfo(r) => Some(r.view_mask),
                        _ => None,
                    });
                    Inside::Rendering(mask.unwrap_or(0))
                };
                self.inside.insert(p.command_buffer, inside);
            }
            _ => {}
        }
    }

    fn render_pass(&mut self, handle: Option<u64>, masks: Vec<u32>) {
        let Some(h) = handle else {
            return;
        };
        // A handle the driver handed out again after a destroy describes the new pass.
        if masks.iter().any(|m| *m != 0) {
            self.view_masks.insert(h, masks);
        } else {
            self.view_masks.remove(&h);
        }
    }

    fn subpass(&mut self, cb: u64, render_pass: u64) {
        let inside = Inside::Subpass {
            render_pass,
            subpass: 0,
        };
        self.inside.insert(cb, inside);
    }

    fn next_subpass(&mut self, cb: u64) {
        if let Some(Inside::Subpass { subpass, .. }) = self.inside.get_mut(&cb) {
            *subpass = subpass.saturating_add(1);
        }
    }

    /// The view mask `cb` records under now (0 outside multiview).
    fn view_mask(&self, cb: u64) -> u32 {
        match self.inside.get(&cb) {
            Some(Inside::Rendering(mask)) => *mask,
            Some(Inside::Subpass {
                render_pass,
                subpass,
            }) => self
                .view_masks
                .get(render_pass)
                .and_then(|m| m.get(*subpass as usize))
                .copied()
                .unwrap_or(0),
            None => 0,
        }
    }

    /// A query op of the trace.
    pub fn op(&mut self, op: &QueryOp) {
        let (query, flags) = match op.kind {
            QueryOpKind::Begin { query, flags, .. } => (query, flags),
            QueryOpKind::Timestamp { query, .. } | QueryOpKind::Write { query } => (query, 0),
            QueryOpKind::Reset { .. } | QueryOpKind::End { .. } | QueryOpKind::Copy { .. } => {
                return
            }
        };
        let begin = QueryBegin {
            flags,
            view_mask: self.view_mask(op.command_buffer),
            first: query,
        };
        for i in 0..begin.views() {
            self.queries
                .insert((op.pool, query.saturating_add(i)), begin);
        }
    }

    /// How `query` of `pool` was last begun, if the trace says.
    pub fn of(&self, pool: u64, query: u32) -> Option<QueryBegin> {
        self.queries.get(&(pool, query)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vkstream::params;
    use vkstream::types::{VkRenderingInfo, VkSubpassDescription2};

    fn begin(cb: u64, query: u32, flags: u32) -> QueryOp {
        QueryOp {
            seq: 0,
            command_buffer: cb,
            pool: 0x9,
            kind: QueryOpKind::Begin {
                query,
                flags,
                index: 0,
            },
            host_ns: 0,
        }
    }

    #[test]
    fn dynamic_rendering_and_subpasses_give_each_begin_its_view_mask() {
        let mut b = Begins::default();
        let rendering = VkRenderingInfo {
            view_mask: 0b11,
            ..Default::default()
        };
        b.call(&Call::vkCmdBeginRendering(params::vkCmdBeginRendering {
            command_buffer: 0xc,
            p_rendering_info: Some(Box::new(rendering)),
        }));
        b.op(&begin(0xc, 4, 1));
        let two = QueryBegin {
            flags: 1,
            view_mask: 0b11,
            first: 4,
        };
        assert_eq!((b.of(0x9, 4), b.of(0x9, 5)), (Some(two), Some(two)));
        assert_eq!(b.of(0x9, 6), None);
        b.call(&Call::vkCmdEndRendering(params::vkCmdEndRendering {
            command_buffer: 0xc,
        }));
        b.op(&begin(0xc, 6, 0));
        assert_eq!(b.of(0x9, 6).map(|q| q.view_mask), Some(0));
        // A render pass whose second subpass renders three views.
        let subpasses = vec![
            VkSubpassDescription2::default(),
            VkSubpassDescription2 {
                view_mask: 0b111,
                ..Default::default()
            },
        ];
        b.call(&Call::vkCreateRenderPass2(params::vkCreateRenderPass2 {
            device: 1,
            p_create_info: Some(Box::new(vkstream::types::VkRenderPassCreateInfo2 {
                p_subpasses: Some(subpasses),
                ..Default::default()
            })),
            p_allocator: None,
            p_render_pass: Some(0x50),
        }));
        b.call(&Call::vkCmdBeginRenderPass(params::vkCmdBeginRenderPass {
            command_buffer: 0xd,
            p_render_pass_begin: Some(Box::new(vkstream::types::VkRenderPassBeginInfo {
                render_pass: 0x50,
                ..Default::default()
            })),
            contents: 0,
        }));
        b.op(&begin(0xd, 10, 0));
        assert_eq!(b.of(0x9, 10).map(|q| q.views()), Some(1));
        b.call(&Call::vkCmdNextSubpass(params::vkCmdNextSubpass {
            command_buffer: 0xd,
            contents: 0,
        }));
        b.op(&begin(0xd, 20, 0));
        assert_eq!(b.of(0x9, 22).map(|q| (q.first, q.views())), Some((20, 3)));
    }
}
