//! Debug-utils labels and render passes from a trace's call stream.
//!
//! The capture layer records `vkCmd*DebugUtilsLabelEXT`, `vkQueue*DebugUtilsLabelEXT` and render
//! pass begins as plain `Call` records; only those few commands are decoded (with the generated
//! `vkstream` decoder, chosen by name from the trace's own command table), so walking a trace of
//! millions of calls costs one table look-up per call.
//!
//! A label path is the labels open around a point, outermost first, joined by `/`: the queue's
//! labels at the submit, then the command buffer's at the command (e.g. `Frame 3/Shadow pass`).
//! An inserted label (`vk*InsertDebugUtilsLabelEXT`) names what follows it in its scope until the
//! next label command, as the last element of the path.

use std::collections::HashMap;
use std::sync::Arc;

use format::record::{Call, Handle, Submit};
use vkstream::multiview::ViewMasks;
use vkstream::Call as Decoded;

/// The commands the tracker decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    BeginCommandBuffer,
    BeginCbLabel,
    EndCbLabel,
    InsertCbLabel,
    BeginQueueLabel,
    EndQueueLabel,
    InsertQueueLabel,
    BeginRenderPass,
    /// Followed only for multiview view masks (`vkstream::multiview`).
    View,
}

fn cmd_of(name: &str) -> Option<Cmd> {
    Some(match name {
        "vkBeginCommandBuffer" => Cmd::BeginCommandBuffer,
        "vkCmdBeginDebugUtilsLabelEXT" => Cmd::BeginCbLabel,
        "vkCmdEndDebugUtilsLabelEXT" => Cmd::EndCbLabel,
        "vkCmdInsertDebugUtilsLabelEXT" => Cmd::InsertCbLabel,
        "vkQueueBeginDebugUtilsLabelEXT" => Cmd::BeginQueueLabel,
        "vkQueueEndDebugUtilsLabelEXT" => Cmd::EndQueueLabel,
        "vkQueueInsertDebugUtilsLabelEXT" => Cmd::InsertQueueLabel,
        "vkCmdBeginRenderPass"
        | "vkCmdBeginRenderPass2"
        | "vkCmdBeginRenderPass2KHR"
        | "vkCmdBeginRendering"
        | "vkCmdBeginRenderingKHR" => Cmd::BeginRenderPass,
        n if ViewMasks::COMMANDS.contains(&n) => Cmd::View,
        _ => return None,
    })
}

/// Open labels of one command buffer or queue.
#[derive(Debug, Clone, Default)]
struct Scope {
    open: Vec<String>,
    /// Label inserted since the last begin/end.
    marker: Option<String>,
    /// The path, once asked for since the last change (every query begin asks).
    cached: Option<Option<Arc<str>>>,
}

impl Scope {
    fn push(&mut self, label: String) {
        self.open.push(label);
        self.marker = None;
        self.cached = None;
    }
    fn pop(&mut self) {
        self.open.pop();
        self.marker = None;
        self.cached = None;
    }
    fn insert(&mut self, label: String) {
        self.marker = Some(label);
        self.cached = None;
    }

    fn path(&self) -> Vec<&str> {
        let mut p: Vec<&str> = self.open.iter().map(String::as_str).collect();
        p.extend(self.marker.as_deref());
        p
    }
}

/// A render pass begun in a command buffer recording.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderPass {
    /// The `VkRenderPass` (0 for dynamic rendering), named later through `DebugName`s.
    pub handle: Handle,
    /// Command-buffer label path at the begin.
    pub label: Option<Arc<str>>,
}

/// Walks calls and submits of one trace, in record order.
#[derive(Debug, Default)]
pub struct LabelTracker {
    /// Per trace command index: the command, when it is one the tracker decodes, and this build's id.
    table: Vec<Option<(Cmd, u32)>>,
    cbs: HashMap<Handle, Scope>,
    queues: HashMap<Handle, Scope>,
    /// Render passes of each command buffer's current recording, in begin order.
    recording: HashMap<Handle, Vec<RenderPass>>,
    /// Render passes by (frame, command buffer), from the recordings submitted in that frame.
    submitted: HashMap<(u64, Handle), Vec<RenderPass>>,
    /// The last recording submitted of each command buffer (counters of frames not in the map).
    last: HashMap<Handle, Vec<RenderPass>>,
    /// Queue label path at the submit of (frame, command buffer).
    submit_labels: HashMap<(u64, Handle), Arc<str>>,
    /// Distinct paths share one allocation.
    interned: HashMap<String, Arc<str>>,
    /// Joined paths by the addresses of their two parts.
    joined: HashMap<(usize, usize), Option<Arc<str>>>,
    /// The multiview view mask each command buffer records under.
    views: ViewMasks,
    /// Calls whose parameters did not decode.
    pub undecoded: u64,
}

fn label_text(l: Option<&vkstream::types::VkDebugUtilsLabelEXT>) -> String {
    l.and_then(|l| l.p_label_name.clone()).unwrap_or_default()
}

impl LabelTracker {
    /// The trace's `CommandTable`.
    pub fn command_table(&mut self, names: &[String]) {
        self.table = names
            .iter()
            .map(|n| cmd_of(n).zip(vkstream::command_id(n)))
            .collect();
    }

    /// The multiview view mask `cb` records under now (0 outside multiview).
    pub fn view_mask(&self, cb: Handle) -> u32 {
        self.views.view_mask(cb)
    }

    /// Whether anything was labelled or a render pass begun (else the tracker adds nothing).
    pub fn is_empty(&self) -> bool {
        self.interned.is_empty()
            && self.submitted.is_empty()
            && self.last.is_empty()
            && self.submit_labels.is_empty()
    }

    fn intern(&mut self, parts: &[&str]) -> Option<Arc<str>> {
        if parts.is_empty() {
            return None;
        }
        let s = parts.join("/");
        if let Some(a) = self.interned.get(&s) {
            return Some(a.clone());
        }
        let a: Arc<str> = Arc::from(s.as_str());
        self.interned.insert(s, a.clone());
        Some(a)
    }

    pub fn call(&mut self, c: &Call) {
        let Some(&Some((cmd, id))) = self.table.get(c.cmd as usize) else {
            return;
        };
        let decoded = match vkstream::decode_call(id, &c.params) {
            Ok(d) => d,
            Err(_) => {
                self.undecoded += 1;
                return;
            }
        };
        self.views.call(&decoded);
        match (cmd, decoded) {
            (Cmd::BeginCommandBuffer, Decoded::vkBeginCommandBuffer(p)) => {
                self.cbs.remove(&p.command_buffer);
                self.recording.remove(&p.command_buffer);
            }
            (Cmd::BeginCbLabel, Decoded::vkCmdBeginDebugUtilsLabelEXT(p)) => {
                let l = label_text(p.p_label_info.as_deref());
                self.cbs.entry(p.command_buffer).or_default().push(l);
            }
            (Cmd::EndCbLabel, Decoded::vkCmdEndDebugUtilsLabelEXT(p)) => {
                self.cbs.entry(p.command_buffer).or_default().pop();
            }
            (Cmd::InsertCbLabel, Decoded::vkCmdInsertDebugUtilsLabelEXT(p)) => {
                let l = label_text(p.p_label_info.as_deref());
                self.cbs.entry(p.command_buffer).or_default().insert(l);
            }
            (Cmd::BeginQueueLabel, Decoded::vkQueueBeginDebugUtilsLabelEXT(p)) => {
                let l = label_text(p.p_label_info.as_deref());
                self.queues.entry(p.queue).or_default().push(l);
            }
            (Cmd::EndQueueLabel, Decoded::vkQueueEndDebugUtilsLabelEXT(p)) => {
                self.queues.entry(p.queue).or_default().pop();
            }
            (Cmd::InsertQueueLabel, Decoded::vkQueueInsertDebugUtilsLabelEXT(p)) => {
                let l = label_text(p.p_label_info.as_deref());
                self.queues.entry(p.queue).or_default().insert(l);
            }
            (Cmd::BeginRenderPass, d) => {
                let (cb, handle) = match d {
                    Decoded::vkCmdBeginRenderPass(p) => (
                        p.command_buffer,
                        p.p_render_pass_begin.map_or(0, |b| b.render_pass),
                    ),
                    Decoded::vkCmdBeginRenderPass2(p) | Decoded::vkCmdBeginRenderPass2KHR(p) => (
                        p.command_buffer,
                        p.p_render_pass_begin.map_or(0, |b| b.render_pass),
                    ),
                    Decoded::vkCmdBeginRendering(p) | Decoded::vkCmdBeginRenderingKHR(p) => {
                        (p.command_buffer, 0)
                    }
                    _ => return,
                };
                let label = self.cb_label(cb);
                self.recording
                    .entry(cb)
                    .or_default()
                    .push(RenderPass { handle, label });
            }
            _ => {}
        }
    }

    /// The label path of `scope` now, interned and cached in the scope.
    fn scope_label(
        interned: &mut HashMap<String, Arc<str>>,
        scope: Option<&mut Scope>,
    ) -> Option<Arc<str>> {
        let s = scope?;
        if let Some(c) = &s.cached {
            return c.clone();
        }
        let path = s.path();
        let label = if path.is_empty() {
            None
        } else {
            let text = path.join("/");
            Some(
                interned
                    .entry(text)
                    .or_insert_with_key(|t| Arc::from(t.as_str()))
                    .clone(),
            )
        };
        s.cached = Some(label.clone());
        label
    }

    /// The command buffer's label path now (at a query's begin, say).
    pub fn cb_label(&mut self, cb: Handle) -> Option<Arc<str>> {
        Self::scope_label(&mut self.interned, self.cbs.get_mut(&cb))
    }

    /// The queue's label path now.
    pub fn queue_label(&mut self, queue: Handle) -> Option<Arc<str>> {
        Self::scope_label(&mut self.interned, self.queues.get_mut(&queue))
    }

    /// `outer/inner`, either side optional (every query row asks: cached by the parts).
    pub fn join(&mut self, outer: Option<&Arc<str>>, inner: Option<&Arc<str>>) -> Option<Arc<str>> {
        let addr = |a: Option<&Arc<str>>| a.map_or(0, |a| Arc::as_ptr(a) as *const u8 as usize);
        let key = (addr(outer), addr(inner));
        if let Some(j) = self.joined.get(&key) {
            return j.clone();
        }
        let parts: Vec<&str> = outer.into_iter().chain(inner).map(|a| a.as_ref()).collect();
        let j = self.intern(&parts);
        self.joined.insert(key, j.clone());
        j
    }

    /// A submit: its command buffers' render passes now belong to its frame.
    pub fn submit(&mut self, sub: &Submit) {
        if let Some(q) = self.queue_label(sub.queue) {
            for cb in &sub.command_buffers {
                self.submit_labels.insert((sub.frame, *cb), q.clone());
            }
        }
        for cb in &sub.command_buffers {
            let Some(rps) = self.recording.get(cb) else {
                continue;
            };
            self.submitted.insert((sub.frame, *cb), rps.clone());
            self.last.insert(*cb, rps.clone());
        }
    }

    /// The queue's label path when `cb` was submitted in `frame`.
    pub fn submit_label(&self, frame: u64, cb: Handle) -> Option<&Arc<str>> {
        self.submit_labels.get(&(frame, cb))
    }

    /// Render pass `index` of `cb` as submitted in `frame` (else in its last submitted recording).
    pub fn render_pass(&self, frame: u64, cb: Handle, index: u32) -> Option<&RenderPass> {
        self.submitted
            .get(&(frame, cb))
            .or_else(|| self.last.get(&cb))
            .and_then(|v| v.get(index as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::LabelCalls as Calls;

    fn submit(cb: u64, queue: u64, frame: u64) -> Submit {
        Submit {
            seq: 0,
            queue,
            queue_family: 0,
            command_buffers: vec![cb],
            host_ns: 0,
            frame,
            counter_pass: None,
        }
    }

    #[test]
    fn label_paths_nest_and_reset_with_each_recording() {
        let mut c = Calls::new();
        let calls = [
            c.begin_cb(0xcb),
            c.cmd_label(0xcb, Some("Shadow pass"), false),
            c.begin_render_pass(0xcb, 0x5a),
            c.cmd_label(0xcb, Some("cascade 0"), false),
            c.cmd_label(0xcb, None, false),
            c.cmd_label(0xcb, Some("draw trees"), true),
        ];
        let mut t = LabelTracker::default();
        t.command_table(&c.table);
        assert!(t.is_empty());
        for (i, call) in calls.iter().enumerate() {
            t.call(call);
            if i == 3 {
                assert_eq!(t.cb_label(0xcb).as_deref(), Some("Shadow pass/cascade 0"));
            }
        }
        assert_eq!(t.cb_label(0xcb).as_deref(), Some("Shadow pass/draw trees"));
        assert_eq!(t.undecoded, 0);
        // Queue labels enclose the command buffer's.
        let frame = c.queue_label(0x9, Some("Frame 3"));
        t.command_table(&c.table);
        t.call(&frame);
        let q = t.queue_label(0x9);
        let cbl = t.cb_label(0xcb);
        assert_eq!(
            t.join(q.as_ref(), cbl.as_ref()).as_deref(),
            Some("Frame 3/Shadow pass/draw trees")
        );
        t.submit(&submit(0xcb, 0x9, 3));
        assert_eq!(t.submit_label(3, 0xcb).map(|l| l.as_ref()), Some("Frame 3"));
        let rp = t.render_pass(3, 0xcb, 0).unwrap();
        assert_eq!(
            (rp.handle, rp.label.as_deref()),
            (0x5a, Some("Shadow pass"))
        );
        // Another frame falls back on the last submitted recording.
        assert_eq!(t.render_pass(4, 0xcb, 0).map(|r| r.handle), Some(0x5a));
        assert!(t.render_pass(3, 0xcb, 1).is_none());
        // A new recording starts without labels.
        let (begin, end) = (c.begin_cb(0xcb), c.queue_label(0x9, None));
        t.command_table(&c.table);
        t.call(&begin);
        assert_eq!(t.cb_label(0xcb), None);
        t.call(&end);
        assert_eq!(t.queue_label(0x9), None);
    }

    #[test]
    fn undecodable_calls_are_counted_not_fatal() {
        let mut c = Calls::new();
        let mut call = c.cmd_label(0xcb, Some("x"), false);
        call.params.truncate(5);
        let mut t = LabelTracker::default();
        t.command_table(&c.table);
        t.call(&call);
        assert_eq!(t.undecoded, 1);
        assert_eq!(t.cb_label(0xcb), None);
    }
}

#[cfg(test)]
mod dataset_tests {
    use crate::data::Dataset;
    use crate::synth;
    use std::path::PathBuf;

    #[test]
    fn rows_and_render_pass_counters_carry_the_trace_labels() {
        let (th, trecs) = synth::trace(2);
        let trecs = synth::with_labels(trecs);
        let (rh, mut rrecs) = synth::render_pass_results(2, "gpu-a", 2.0);
        // One sample of a whole command buffer.
        let mut whole = rrecs
            .iter()
            .find_map(|r| match r {
                format::record::Record::CounterValue(c) => Some(c.clone()),
                _ => None,
            })
            .unwrap();
        whole.render_pass = None;
        whole.counter.name = "Command buffer time".into();
        rrecs.push(format::record::Record::CounterValue(whole));
        let trace_only =
            Dataset::from_records(vec![(PathBuf::from("t.qtrace"), th.clone(), trecs.clone())]);
        let ds = Dataset::from_records(vec![
            (PathBuf::from("t.qtrace"), th, trecs),
            (PathBuf::from("a.qres"), rh, rrecs),
        ]);
        let label_of = |pool: u64, frame: u64| {
            let ds = &trace_only;
            ds.rows
                .iter()
                .find(|r| ds.pool_of(r).handle == pool && r.frame == frame)
                .and_then(|r| r.label.as_deref())
        };
        assert_eq!(label_of(0x1000, 0), Some("Frame 0/Scene/Shadow pass"));
        assert_eq!(label_of(0x2000, 1), Some("Frame 1/Scene/Main pass"));
        assert_eq!(label_of(0x3000, 1), Some("Frame 1/Scene/Post/late"));
        let rp = |cb: u64, i: u32| {
            ds.counters
                .iter()
                .find(|c| c.frame == 0 && c.command_buffer == cb && c.render_pass == Some(i))
                .unwrap()
        };
        let c = rp(0xc0, 0);
        assert_eq!(c.render_pass_name.as_deref(), Some("shadow rp"));
        assert_eq!(c.label.as_deref(), Some("Scene/Shadow pass"));
        // Unnamed: titled by its innermost label.
        assert_eq!(rp(0xc0, 2).render_pass_name, None);
        assert_eq!(rp(0xc0, 2).render_pass_title(), Some("Post"));
        // 0xc1 was only recorded in frame 1: its frame-0 samples take that recording's passes.
        assert_eq!(rp(0xc1, 1).render_pass_title(), Some("main rp"));
        assert_eq!(ds.names.get(0x5a0), Some("shadow rp"));
        // A command buffer's sample: the queue's labels at its submit.
        let cb = ds
            .counters
            .iter()
            .find(|c| c.render_pass.is_none())
            .unwrap();
        assert_eq!((cb.frame, cb.label.as_deref()), (0, Some("Frame 0")));
    }
}
