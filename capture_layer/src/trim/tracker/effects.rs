//! What submitted work does to the state a snapshot restores: image layouts moved by the
//! barriers, event waits and render passes of a submitted recording (the secondaries it executes
//! included), and binary semaphores left signaled by submits, acquires and presents.

use super::*;

impl Tracker {
    /// Binary semaphores a queue operation waits for (left unsignaled) or signals, in order.
    pub(super) fn binary_semaphores(&mut self, call: &Call) {
        let mut ops: Vec<(u64, bool)> = Vec::new();
        match call {
            Call::vkQueueSubmit(p) => {
                for s in p.p_submits.iter().flatten() {
                    ops.extend(s.p_wait_semaphores.iter().flatten().map(|&h| (h, false)));
                    ops.extend(s.p_signal_semaphores.iter().flatten().map(|&h| (h, true)));
                }
            }
            Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) => {
                for s in p.p_submits.iter().flatten() {
                    let waits = s.p_wait_semaphore_infos.iter().flatten();
                    ops.extend(waits.map(|i| (i.semaphore, false)));
                    let signals = s.p_signal_semaphore_infos.iter().flatten();
                    ops.extend(signals.map(|i| (i.semaphore, true)));
                }
            }
            Call::vkQueuePresentKHR(p) => {
                let waits = p
                    .p_present_info
                    .iter()
                    .flat_map(|i| i.p_wait_semaphores.iter());
                ops.extend(waits.flatten().map(|&h| (h, false)));
            }
            Call::vkAcquireNextImageKHR(p) => ops.push((p.semaphore, true)),
            Call::vkAcquireNextImage2KHR(p) => {
                ops.extend(p.p_acquire_info.iter().map(|i| (i.semaphore, true)));
            }
            _ => {}
        }
        for (h, signal) in ops {
            if let Some(Obj {
                info: Info::Binary { signaled },
                ..
            }) = self.objects.get_mut(&h)
            {
                *signaled = signal;
            }
        }
    }

    /// (image, layout) in order, for the barriers, event waits and render passes `cb`'s recording
    /// holds, those of the secondaries it executes included (`depth`: how deep in them); and
    /// whether that depends on `cb`'s recording alone (no secondaries).
    pub(super) fn layout_effects(&self, cb: u64, depth: u32) -> (Vec<(u64, i32)>, bool) {
        let Some(o) = self.objects.get(&cb) else {
            return (Vec::new(), true);
        };
        let mut out = Vec::new();
        let mut whole = true;
        for c in o.recording.calls() {
            if !moves_layouts(c.cmd) {
                continue;
            }
            let Some(call) = decode(c.cmd, c.params) else {
                continue;
            };
            match &call {
                Call::vkCmdPipelineBarrier(p) => {
                    for b in p.p_image_memory_barriers.iter().flatten() {
                        out.push((b.image, b.new_layout));
                    }
                }
                Call::vkCmdPipelineBarrier2(p) | Call::vkCmdPipelineBarrier2KHR(p) => {
                    dependency_layouts(p.p_dependency_info.as_deref().into_iter(), &mut out)
                }
                Call::vkCmdBeginRenderPass(p) => {
                    if let Some(b) = &p.p_render_pass_begin {
                        self.render_pass_finals(b.render_pass, b.framebuffer, &mut out);
                    }
                }
                Call::vkCmdBeginRenderPass2(p) | Call::vkCmdBeginRenderPass2KHR(p) => {
                    if let Some(b) = &p.p_render_pass_begin {
                        self.render_pass_finals(b.render_pass, b.framebuffer, &mut out);
                    }
                }
                Call::vkCmdWaitEvents(p) => {
                    for b in p.p_image_memory_barriers.iter().flatten() {
                        out.push((b.image, b.new_layout));
                    }
                }
                Call::vkCmdWaitEvents2(p) | Call::vkCmdWaitEvents2KHR(p) => {
                    dependency_layouts(p.p_dependency_infos.iter().flatten(), &mut out)
                }
                // Secondaries cannot execute others without VK_EXT_nested_command_buffer, whose
                // depth is bounded by the driver; two levels here.
                Call::vkCmdExecuteCommands(p) if depth < 2 => {
                    whole = false;
                    for &s in p.p_command_buffers.iter().flatten() {
                        out.extend(self.layout_effects(s, depth + 1).0);
                    }
                }
                _ => {}
            }
        }
        (out, whole)
    }

    fn render_pass_finals(&self, rp: u64, fb: u64, out: &mut Vec<(u64, i32)>) {
        let finals = match self.objects.get(&rp).map(|o| &o.info) {
            Some(Info::RenderPass { finals }) => finals,
            _ => return,
        };
        let views = match self.objects.get(&fb).map(|o| &o.info) {
            Some(Info::Framebuffer { views }) => views,
            _ => return,
        };
        for (view, layout) in views.iter().zip(finals) {
            if let Some(Info::View { image }) = self.objects.get(view).map(|o| &o.info) {
                out.push((*image, *layout));
            }
        }
    }
}

/// (image, new layout) of the image barriers of synchronization2's dependency infos.
fn dependency_layouts<'a>(
    deps: impl Iterator<Item = &'a vkstream::types::VkDependencyInfo>,
    out: &mut Vec<(u64, i32)>,
) {
    for b in deps.flat_map(|d| d.p_image_memory_barriers.iter().flatten()) {
        out.push((b.image, b.new_layout));
    }
}
