//! Completion points at host semaphore waits, checked from the trace alone (no replay): the demo's
//! timeline path (`demo/src/timeline.rs`) reads occlusion queries through copies into one mapped
//! buffer at the same offsets every round, proving its submits done only with vkWaitSemaphores and
//! vkGetSemaphoreCounterValue. Each timeline `QueryCopy` must hold its own round's known answers
//! (64 × (1 + (i + 13k) mod 64) pixels for query k of round i), come right after the wait call that
//! completed it, and no `MemoryWrite` may cover one of those copy destinations (the GPU's bytes
//! are not host writes).
//!
//! Skips when lavapipe is missing; the `quarry`, `quarry-demo` binaries and the layer must be built.

use format::record::{Payload, Record};
use quarry_tests::*;
use std::collections::HashMap;

#[test]
fn timeline_copies_are_read_at_their_semaphore_wait() {
    if !lavapipe() {
        println!("SKIP: lavapipe not found");
        return;
    }
    let demo = require_built("quarry-demo");
    let dir = scratch_dir("capture_timeline");
    let trace = dir.join("demo.qtrace");
    let out = run_quarry(&[
        "capture",
        "-o",
        trace.to_str().unwrap(),
        "--",
        demo.to_str().unwrap(),
        "--headless",
        "--frames",
        "3",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let t = read_trace(&trace);
    t.check_structure();

    let id = |name| vkstream::command_id(name).unwrap();
    let waits = [
        id("vkWaitSemaphores"),
        id("vkWaitSemaphoresKHR"),
        id("vkGetSemaphoreCounterValue"),
        id("vkGetSemaphoreCounterValueKHR"),
    ];
    let bind = id("vkBindBufferMemory");
    let mut buffers: HashMap<u64, (u64, u64)> = HashMap::new();
    // (memory, start, end, seq of the copy command) of every copy destination known from binds.
    let mut copy_ranges: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut last_call: Option<(u32, u64)> = None;
    let mut rounds: Vec<u64> = Vec::new();
    let mut after_semaphore = 0;
    for r in &t.records {
        match r {
            Record::Call(c) => {
                if c.cmd == bind {
                    if let Ok(vkstream::Call::vkBindBufferMemory(p)) =
                        vkstream::decode_call(c.cmd, &c.params)
                    {
                        buffers.insert(p.buffer, (p.memory, p.memory_offset));
                    }
                }
                last_call = Some((c.cmd, c.seq));
            }
            Record::QueryCopy(q) => {
                let (cmd, seq) = last_call.expect("a call before every copy");
                assert!(
                    seq > q.seq,
                    "copy {} read back before a call that follows it",
                    q.seq
                );
                if !waits.contains(&cmd) {
                    continue;
                }
                // The timeline path never writes its copy destinations from the host (the fence
                // path zeroes its own between frames: real host writes, recorded).
                if let Some(&(memory, offset)) = buffers.get(&q.dst_buffer) {
                    let start = offset + q.dst_offset;
                    copy_ranges.push((memory, start, start + q.data.len() as u64, q.seq));
                }
                after_semaphore += 1;
                // The occlusion block: 4 queries, u64 value + u64 availability, stride 16.
                if q.dst_offset != 0 || q.count != 4 || q.stride != 16 {
                    continue;
                }
                assert_eq!(q.data.len(), 64, "copy {} read back whole", q.seq);
                let vals: Vec<u64> = (0..4)
                    .map(|k| u64::from_le_bytes(q.data[k * 16..k * 16 + 8].try_into().unwrap()))
                    .collect();
                let avail: Vec<u64> = (0..4)
                    .map(|k| {
                        u64::from_le_bytes(q.data[k * 16 + 8..k * 16 + 16].try_into().unwrap())
                    })
                    .collect();
                assert!(avail.iter().all(|&a| a == 1), "available: {avail:?}");
                // Round i from query 0 (rows 1 + i mod 64); every query must agree with it.
                let i = vals[0] / 64 - 1;
                for (k, &v) in vals.iter().enumerate() {
                    assert_eq!(
                        v,
                        64 * (1 + (i + 13 * k as u64) % 64),
                        "copy {}: query {k} holds {v}, not round {i}'s answer ({vals:?})",
                        q.seq
                    );
                }
                rounds.push(i);
            }
            _ => {}
        }
    }
    assert!(
        rounds.len() >= 6,
        "three frames of two rounds read at semaphore waits, got rounds {rounds:?}"
    );
    for w in rounds.windows(2) {
        assert_eq!(w[1], w[0] + 1, "each round read once, in order: {rounds:?}");
    }
    assert!(after_semaphore >= rounds.len() * 2);

    for r in &t.records {
        let Record::MemoryWrite(m) = r else { continue };
        let len = match &m.data {
            Payload::Inline(b) => b.len() as u64,
            Payload::Blob { len, .. } => *len,
        };
        // The mapping's first contents (before any copy was recorded) are the host's.
        for &(memory, start, end, copied) in &copy_ranges {
            assert!(
                m.seq < copied || m.memory != memory || m.offset >= end || m.offset + len <= start,
                "MemoryWrite {}..{} of memory {memory:#x} covers copy destination {start}..{end}",
                m.offset,
                m.offset + len
            );
        }
    }
}
