//! The multiview view mask each command buffer records under, followed from decoded calls: render
//! passes created with view masks, the subpass or dynamic rendering each command buffer is in, and
//! secondary command buffers that continue one. A query begun under a view mask of N views uses N
//! consecutive queries, so whoever reads query results must know it; the replayer (results files)
//! and the viewer (traces opened beside old results files) both follow it here.

use std::collections::HashMap;

use crate::{Call, PNext};

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
pub struct ViewMasks {
    /// Render pass -> view mask of each subpass (multiview render passes only).
    render_passes: HashMap<u64, Vec<u32>>,
    /// Command buffer -> the render pass instance it records in.
    inside: HashMap<u64, Inside>,
}

impl ViewMasks {
    /// The commands [`ViewMasks::call`] follows; others may be skipped without decoding.
    pub const COMMANDS: &'static [&'static str] = &[
        "vkCreateRenderPass",
        "vkCreateRenderPass2",
        "vkCreateRenderPass2KHR",
        "vkCmdBeginRenderPass",
        "vkCmdBeginRenderPass2",
        "vkCmdBeginRenderPass2KHR",
        "vkCmdNextSubpass",
        "vkCmdNextSubpass2",
        "vkCmdNextSubpass2KHR",
        "vkCmdBeginRendering",
        "vkCmdBeginRenderingKHR",
        "vkCmdEndRenderPass",
        "vkCmdEndRenderPass2",
        "vkCmdEndRenderPass2KHR",
        "vkCmdEndRendering",
        "vkCmdEndRenderingKHR",
        "vkBeginCommandBuffer",
    ];

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
            self.render_passes.insert(h, masks);
        } else {
            self.render_passes.remove(&h);
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
    pub fn view_mask(&self, cb: u64) -> u32 {
        match self.inside.get(&cb) {
            Some(Inside::Rendering(mask)) => *mask,
            Some(Inside::Subpass {
                render_pass,
                subpass,
            }) => self
                .render_passes
                .get(render_pass)
                .and_then(|m| m.get(*subpass as usize))
                .copied()
                .unwrap_or(0),
            None => 0,
        }
    }
}
