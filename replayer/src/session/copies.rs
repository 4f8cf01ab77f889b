//! `vkCmdCopyQueryPoolResults` destinations the replay GPU writes. A copy is noted on its command
//! buffer when recorded and becomes pending when that command buffer is submitted; before any host
//! write the replay applies (a `MemoryWrite`, a freed allocation, a later submit copying over the
//! same range) touches a pending destination, the queue is waited on and the bytes the replay GPU
//! wrote are saved. The trace's `QueryCopy` record then takes the saved bytes, or the live memory
//! when nothing touched it since the submit, so a replayed copy value can never be bytes the trace
//! restored (old traces write the captured copy results back as `MemoryWrite`s before their
//! `QueryCopy` records).
//!
//! The bookkeeping (`CopyTracker`) calls no driver; `Session::save_copies_over` does the waits.

use std::collections::{HashMap, VecDeque};

use super::Session;

/// What identifies a trace's `QueryCopy` record: the copy call and where it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyKey {
    /// `seq` of the `vkCmdCopyQueryPoolResults` call.
    pub seq: u64,
    /// Command buffer the copy was recorded into.
    pub command_buffer: u64,
    pub dst_buffer: u64,
    pub dst_offset: u64,
}

/// A recorded copy with its destination in captured memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyDst {
    pub key: CopyKey,
    pub memory: u64,
    /// Offset in `memory`.
    pub start: u64,
    pub len: u64,
}

impl CopyDst {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start < end && start < self.start.saturating_add(self.len)
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Pending {
    dst: CopyDst,
    /// Captured queue it was submitted to.
    queue: u64,
}

/// Where a `QueryCopy` record finds the replay's bytes.
#[derive(Debug, PartialEq)]
pub enum CopySource {
    /// Saved before a host write touched the range (or why they could not be read).
    Saved(Result<Vec<u8>, String>),
    /// Nothing touched the range since the submit: wait on `queue`, read the memory.
    Live { dst: CopyDst, queue: u64 },
}

/// Copies recorded, submitted and saved (see the module documentation).
#[derive(Default)]
pub struct CopyTracker {
    /// Captured command buffer -> its copies since it was begun (secondaries' copies included
    /// where executed).
    recorded: HashMap<u64, Vec<CopyDst>>,
    /// Submitted copies whose range nothing has touched since: captured memory -> copies, oldest first.
    live: HashMap<u64, Vec<Pending>>,
    /// Destination bytes saved before something touched them, oldest first.
    saved: HashMap<CopyKey, VecDeque<Result<Vec<u8>, String>>>,
}

impl CopyTracker {
    /// Whether any submitted copy's range is unsaved (the one check a host write costs otherwise).
    pub fn any_live(&self) -> bool {
        !self.live.is_empty()
    }

    /// `vkBeginCommandBuffer`: its earlier recording is gone.
    pub fn begin(&mut self, command_buffer: u64) {
        if let Some(v) = self.recorded.get_mut(&command_buffer) {
            v.clear();
        }
    }

    pub fn record(&mut self, command_buffer: u64, dst: CopyDst) {
        self.recorded.entry(command_buffer).or_default().push(dst);
    }

    /// `vkCmdExecuteCommands`: the secondaries' copies run with the primary.
    pub fn execute(&mut self, primary: u64, secondaries: &[u64]) {
        let mut add = Vec::new();
        for s in secondaries {
            add.extend(self.recorded.get(s).into_iter().flatten().copied());
        }
        if !add.is_empty() {
            self.recorded.entry(primary).or_default().extend(add);
        }
    }

    /// The copies a submit of `command_buffers` will run.
    pub fn copies_of(&self, command_buffers: &[u64]) -> Vec<CopyDst> {
        command_buffers
            .iter()
            .filter_map(|cb| self.recorded.get(cb))
            .flatten()
            .copied()
            .collect()
    }

    /// The submit of `copies` to `queue` was made.
    pub fn submitted(&mut self, queue: u64, copies: Vec<CopyDst>) {
        for dst in copies {
            self.live
                .entry(dst.memory)
                .or_default()
                .push(Pending { dst, queue });
        }
    }

    /// Takes out the live copies of `memory` overlapping `[start, end)`.
    fn take_overlapping(&mut self, memory: u64, start: u64, end: u64) -> Vec<(CopyDst, u64)> {
        let Some(list) = self.live.get_mut(&memory) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        list.retain(|p| {
            let hit = p.dst.overlaps(start, end);
            if hit {
                out.push((p.dst, p.queue));
            }
            !hit
        });
        if list.is_empty() {
            self.live.remove(&memory);
        }
        out
    }

    fn save(&mut self, key: CopyKey, bytes: Result<Vec<u8>, String>) {
        self.saved.entry(key).or_default().push_back(bytes);
    }

    /// The oldest replayed instance of a `QueryCopy` record's copy, taken out. A saved instance
    /// is always older than a live one of the same key (the later submit saved it).
    pub fn take(&mut self, key: CopyKey) -> Option<CopySource> {
        if let Some(q) = self.saved.get_mut(&key) {
            let b = q.pop_front();
            if q.is_empty() {
                self.saved.remove(&key);
            }
            if let Some(b) = b {
                return Some(CopySource::Saved(b));
            }
        }
        for (memory, list) in self.live.iter_mut() {
            if let Some(i) = list.iter().position(|p| p.dst.key == key) {
                let p = list.remove(i);
                if list.is_empty() {
                    let m = *memory;
                    self.live.remove(&m);
                }
                return Some(CopySource::Live {
                    dst: p.dst,
                    queue: p.queue,
                });
            }
        }
        None
    }
}

impl Session<'_> {
    /// Saves what the replay GPU wrote to every pending copy destination overlapping
    /// `[start, end)` of captured `memory`, before something else writes there.
    pub fn save_copies_over(&mut self, memory: u64, start: u64, end: u64) {
        let hit = self.tracked.copies.take_overlapping(memory, start, end);
        let mut waited: Vec<(u64, Result<(), String>)> = Vec::new();
        for (dst, queue) in hit {
            // A failed wait or read leaves that copy not compared, with the reason.
            let done = match waited.iter().find(|w| w.0 == queue) {
                Some(w) => w.1.clone(),
                None => {
                    let r = self.wait_device_of_queue(queue).map_err(|e| e.to_string());
                    waited.push((queue, r.clone()));
                    r
                }
            };
            let bytes = done.and_then(|()| {
                self.read_memory(dst.memory, dst.start, dst.len)
                    .map_err(|e| e.to_string())
            });
            self.tracked.copies.save(dst.key, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dst(seq: u64, cb: u64, start: u64) -> CopyDst {
        CopyDst {
            key: CopyKey {
                seq,
                command_buffer: cb,
                dst_buffer: 7,
                dst_offset: start,
            },
            memory: 9,
            start,
            len: 16,
        }
    }

    #[test]
    fn pending_from_submit_until_taken() {
        let mut t = CopyTracker::default();
        t.record(1, dst(5, 1, 0));
        assert!(!t.any_live());
        assert_eq!(t.take(dst(5, 1, 0).key), None, "not submitted yet");
        let c = t.copies_of(&[1]);
        t.submitted(3, c);
        assert!(t.any_live());
        assert!(t.take_overlapping(9, 16, 32).is_empty(), "no overlap");
        assert!(t.take_overlapping(8, 0, 32).is_empty(), "other memory");
        assert_eq!(
            t.take(dst(5, 1, 0).key),
            Some(CopySource::Live {
                dst: dst(5, 1, 0),
                queue: 3
            })
        );
        assert!(!t.any_live());
    }

    #[test]
    fn saved_instances_come_first_and_in_order() {
        let mut t = CopyTracker::default();
        t.record(1, dst(5, 1, 0));
        for round in 0..2u8 {
            let c = t.copies_of(&[1]);
            let over = t.take_overlapping(9, c[0].start, c[0].start + c[0].len);
            for (d, _) in over {
                t.save(d.key, Ok(vec![round]));
            }
            t.submitted(3, c);
        }
        let k = dst(5, 1, 0).key;
        assert_eq!(t.take(k), Some(CopySource::Saved(Ok(vec![1]))));
        assert!(matches!(t.take(k), Some(CopySource::Live { .. })));
        assert_eq!(t.take(k), None);
    }

    #[test]
    fn begin_forgets_and_execute_inherits() {
        let mut t = CopyTracker::default();
        t.record(2, dst(5, 2, 0));
        t.execute(1, &[2]);
        assert_eq!(t.copies_of(&[1]), vec![dst(5, 2, 0)]);
        t.begin(1);
        assert!(t.copies_of(&[1]).is_empty());
    }
}
