//! How the trace began each query: the flags of its begin (PRECISE) and the view mask of the
//! render pass instance around it (multiview: the begin then uses one query per view). Results
//! files record it (`QueryResult::begin`) and `format::query::classify_read` reads it.
//!
//! Followed from the calls as the trace goes, before the replay sees them
//! (`vkstream::multiview`, which the viewer shares).

use std::collections::HashMap;

use format::record::{QueryBegin, QueryOp, QueryOpKind};
use vkstream::multiview::ViewMasks;
use vkstream::Call;

#[derive(Debug, Default)]
pub(crate) struct Begins {
    /// The view mask each captured command buffer records under.
    views: ViewMasks,
    /// (captured pool, query) -> its last begin (every query of a multiview begin).
    queries: HashMap<(u64, u32), QueryBegin>,
}

impl Begins {
    /// A call of the trace, decoded.
    pub fn call(&mut self, call: &Call) {
        self.views.call(call);
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
            view_mask: self.views.view_mask(op.command_buffer),
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
