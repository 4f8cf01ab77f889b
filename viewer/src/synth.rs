//! Deterministic synthetic traces and results files for tests, benches and screenshots.

use std::ffi::CString;

use ash::vk::{self, Handle as _};
use format::record::*;
use vkstream::Encoder;

use crate::model::{self, RESULT_64_BIT, RESULT_WITH_AVAILABILITY};

/// Small xorshift so fixtures are reproducible without a rand dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A plausible software device (lavapipe-like) for fixture headers.
pub fn device(name: &str, driver: &str) -> DeviceSummary {
    DeviceSummary {
        name: name.to_owned(),
        vendor_id: 0x10005,
        device_id: 0,
        driver_id: 13,
        driver_name: driver.to_owned(),
        driver_info: "Mesa 22.3.6 (LLVM 15.0.6)".to_owned(),
        driver_version: (22 << 22) | (3 << 12) | 6,
        api_version: (1 << 22) | (3 << 12) | 230,
        timestamp_period_ns: 1.0,
        queue_families: vec![QueueFamilySummary {
            flags: 0xf,
            queue_count: 1,
            timestamp_valid_bits: 64,
        }],
        ..DeviceSummary::default()
    }
}

pub fn header(kind: FileKind, dev: DeviceSummary) -> Header {
    Header {
        kind,
        writer: "quarry-viewer synth".to_owned(),
        created_unix_ns: 1_763_900_000_000_000_000,
        device: Some(dev),
        application: "synthetic".to_owned(),
    }
}

/// The pools every fixture uses: (handle, type, statistics, queries per frame).
pub const POOLS: [(u64, i32, u32, u32); 3] = [
    (0x1000, model::QUERY_TYPE_OCCLUSION, 0, 8),
    (0x2000, model::QUERY_TYPE_TIMESTAMP, 0, 8),
    (
        0x3000,
        model::QUERY_TYPE_PIPELINE_STATISTICS,
        0b1000_0101,
        4,
    ),
];

/// A results file with `n` queries spread over frames, replayed on `replay_device`.
///
/// Every `mismatch_every`-th occlusion query replays one sample off (0 = never), so compare
/// views have something to highlight.
pub fn results(
    n: usize,
    seed: u64,
    replay_device: &str,
    mismatch_every: u64,
) -> (Header, Vec<Record>) {
    let mut rng = Rng(seed | 1);
    let per_frame: u32 = POOLS.iter().map(|p| p.3).sum();
    let frames = (n as u64).div_ceil(u64::from(per_frame));
    let mut records = Vec::with_capacity(n + 64);
    // Replayed on the capture device: deterministic values must match (tests of cross-GPU
    // replays change `capture_device`).
    records.push(Record::ReplayInfo(ReplayInfo {
        trace: "synthetic.qtrace".to_owned(),
        capture_device: Some(device(replay_device, replay_device)),
        loops: 1,
        passes: 1,
        replay_ns: frames * 16_000_000,
        capture_ns: frames * 16_600_000,
        frames,
    }));
    let mut made = 0usize;
    let mut seq = 100u64;
    'frames: for frame in 0..frames {
        let frame_start = 1_000_000_000 + frame * 16_666_666;
        let replay_start = 5_000_000_000 + frame * 16_000_000;
        let mut ts_gpu = frame_start as f64;
        let mut rts_gpu = replay_start as f64;
        for &(pool, ty, stats, count) in &POOLS {
            seq += 10;
            for q in 0..count {
                if made == n {
                    break 'frames;
                }
                made += 1;
                let jitter = rng.below(40_000);
                let values = match ty {
                    model::QUERY_TYPE_OCCLUSION => vec![1000 + rng.below(50_000)],
                    model::QUERY_TYPE_TIMESTAMP => {
                        // Pairs (begin, end) of passes of 0.5-3 ms.
                        ts_gpu += if q % 2 == 0 {
                            200_000.0
                        } else {
                            500_000.0 + rng.below(2_500_000) as f64
                        };
                        vec![ts_gpu as u64]
                    }
                    _ => {
                        let v = 3000 + rng.below(1000);
                        vec![v, v / 3, v * 40]
                    }
                };
                let mut replayed = values.clone();
                let mut rgpu = None;
                let mut cgpu = None;
                if ty == model::QUERY_TYPE_TIMESTAMP {
                    rts_gpu += if q % 2 == 0 {
                        150_000.0
                    } else {
                        450_000.0 + rng.below(2_000_000) as f64
                    };
                    replayed = vec![rts_gpu as u64];
                    cgpu = Some(values[0] as f64);
                    rgpu = Some(rts_gpu);
                } else if mismatch_every > 0
                    && ty == model::QUERY_TYPE_OCCLUSION
                    && (made as u64).is_multiple_of(mismatch_every)
                {
                    replayed[0] += 1;
                }
                let submit = frame_start + 2_000_000 + u64::from(q) * 10_000;
                let rsubmit = replay_start + 1_500_000 + u64::from(q) * 9_000;
                records.push(Record::QueryResult(QueryResult {
                    pool,
                    query: frame as u32 % 2 * count + q,
                    query_type: ty,
                    pipeline_statistics: stats,
                    frame,
                    queue: 0xa0,
                    command_buffer: 0xc0 + frame % 3,
                    loop_index: 0,
                    pass: 0,
                    seq,
                    flags: RESULT_64_BIT | RESULT_WITH_AVAILABILITY,
                    captured: Some(QueryValues {
                        values,
                        available: true,
                        result: 0,
                        host_ns: submit + 3_000_000 + jitter,
                    }),
                    replayed: Some(QueryValues {
                        values: replayed,
                        available: true,
                        result: 0,
                        host_ns: rsubmit + 2_500_000 + jitter / 2,
                    }),
                    submit_ns: rsubmit,
                    available_ns: rsubmit + 2_500_000 + jitter / 2,
                    captured_gpu_ns: cgpu,
                    replayed_gpu_ns: rgpu,
                    begin: None,
                    device: None,
                }));
            }
        }
        if frame < 64 {
            for (i, (name, unit)) in [("Fragment invocations", 0u32), ("GPU busy", 2u32)]
                .iter()
                .enumerate()
            {
                let base = if i == 0 { 2.0e6 } else { 75.0 };
                let cap = base * (1.0 + (frame as f64 * 0.3).sin() * 0.1);
                records.push(Record::CounterValue(CounterValue {
                    counter: PerfCounterDesc {
                        uuid: [i as u8 + 1; 16],
                        name: (*name).to_owned(),
                        category: "Synthetic".to_owned(),
                        description: format!("Synthetic counter {name}"),
                        unit: *unit,
                        storage: 5,
                        scope: 0,
                    },
                    pass: 0,
                    frame,
                    command_buffer: 0xc0,
                    render_pass: None,
                    value: cap * (1.0 + (rng.below(100) as f64 - 50.0) / 1000.0),
                    captured: Some(cap),
                }));
            }
        }
    }
    let dev = device(replay_device, replay_device);
    (header(FileKind::Results, dev), records)
}

/// Counters of [`render_pass_counters`]: (name, unit, base value, counter pass).
pub const RP_COUNTERS: [(&str, u32, f64, u32); 3] = [
    ("Fragments shaded", 0, 100_000.0, 0),
    ("Render pass time", 2, 250_000.0, 0),
    ("Shader busy", 1, 40.0, 1),
];
/// Command buffers of [`render_pass_counters`]; each records `RP_PER_CB` render passes.
pub const RP_CBS: [u64; 2] = [0xc0, 0xc1];
pub const RP_PER_CB: u32 = 3;

/// The value [`render_pass_counters`] writes: exact in f64, so tests can recompute it.
/// `scale` tells GPUs apart (1.0 for the capture).
pub fn render_pass_value(counter: usize, cb: usize, rp: u32, frame: u64, scale: f64) -> f64 {
    let base = RP_COUNTERS[counter].2;
    (base * f64::from(rp + 1) * (cb as f64 + 1.0) + frame as f64) * scale
}

/// Performance-counter samples scoped to render passes, as `quarry replay --counters all
/// --scope render-pass` writes them: for each frame, command buffer (`RP_CBS`) and render pass
/// (`0..RP_PER_CB`), one `CounterValue` per counter of `RP_COUNTERS` in that counter's pass,
/// with the captured value (scale 1) alongside the replayed one (`scale`).
pub fn render_pass_counters(frames: u64, scale: f64) -> Vec<Record> {
    let mut out = Vec::new();
    for frame in 0..frames {
        for (ci, cb) in RP_CBS.iter().enumerate() {
            for rp in 0..RP_PER_CB {
                for (k, (name, unit, _, pass)) in RP_COUNTERS.iter().enumerate() {
                    out.push(Record::CounterValue(CounterValue {
                        counter: PerfCounterDesc {
                            uuid: [0x40 + k as u8; 16],
                            name: (*name).to_owned(),
                            category: "Render pass".to_owned(),
                            description: format!("Synthetic per-render-pass counter: {name}"),
                            unit: *unit,
                            storage: 5,
                            scope: 1,
                        },
                        pass: *pass,
                        frame,
                        command_buffer: *cb,
                        render_pass: Some(rp),
                        value: render_pass_value(k, ci, rp, frame, scale),
                        captured: Some(render_pass_value(k, ci, rp, frame, 1.0)),
                    }));
                }
            }
        }
    }
    out
}

/// A results file holding only [`render_pass_counters`], replayed on `device`.
pub fn render_pass_results(frames: u64, device: &str, scale: f64) -> (Header, Vec<Record>) {
    let mut records = vec![Record::ReplayInfo(ReplayInfo {
        trace: "synthetic.qtrace".to_owned(),
        capture_device: Some(self::device("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe")),
        loops: 1,
        passes: 2,
        replay_ns: frames * 16_000_000,
        capture_ns: frames * 16_600_000,
        frames,
    })];
    records.extend(render_pass_counters(frames, scale));
    (
        header(FileKind::Results, self::device(device, device)),
        records,
    )
}

/// A small trace: pools, resets, begin/end, timestamps, submits, results bytes, availability.
pub fn trace(frames: u64) -> (Header, Vec<Record>) {
    let mut out = Vec::new();
    let dev = device("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe");
    out.push(Record::Device(dev.clone()));
    out.push(Record::Calibration(Calibration {
        device: 0xd,
        host_ns: 1_000_000_000,
        gpu_ticks: 0,
        max_deviation_ns: 100,
    }));
    let mut seq = 1u64;
    for &(pool, ty, stats, count) in &POOLS {
        out.push(Record::QueryPool(QueryPoolInfo {
            seq,
            device: 0xd,
            pool,
            query_type: ty,
            query_count: count,
            pipeline_statistics: stats,
            perf_queue_family: None,
            perf_counters: Vec::new(),
        }));
        seq += 1;
    }
    out.push(Record::DebugName(DebugName {
        handle: 0x1000,
        object_type: 12,
        name: "occlusion pool".to_owned(),
    }));
    out.push(Record::DebugName(DebugName {
        handle: 0x2000,
        object_type: 12,
        name: "frame timers".to_owned(),
    }));
    for frame in 0..frames {
        let t0 = 1_000_000_000 + frame * 16_666_666;
        let cb = 0xc0 + frame % 2;
        let mut t = t0;
        for &(pool, ty, _, count) in &POOLS {
            seq += 1;
            t += 1000;
            out.push(Record::QueryOp(QueryOp {
                seq,
                command_buffer: cb,
                pool,
                kind: QueryOpKind::Reset { first: 0, count },
                host_ns: t,
            }));
            for q in 0..count {
                seq += 1;
                t += 5_000;
                if ty == model::QUERY_TYPE_TIMESTAMP {
                    out.push(Record::QueryOp(QueryOp {
                        seq,
                        command_buffer: cb,
                        pool,
                        kind: QueryOpKind::Timestamp {
                            query: q,
                            stage: 0x2000,
                            sync2: false,
                        },
                        host_ns: t,
                    }));
                } else {
                    out.push(Record::QueryOp(QueryOp {
                        seq,
                        command_buffer: cb,
                        pool,
                        kind: QueryOpKind::Begin {
                            query: q,
                            flags: 0,
                            index: 0,
                        },
                        host_ns: t,
                    }));
                    seq += 1;
                    t += 20_000;
                    out.push(Record::QueryOp(QueryOp {
                        seq,
                        command_buffer: cb,
                        pool,
                        kind: QueryOpKind::End { query: q, index: 0 },
                        host_ns: t,
                    }));
                }
            }
        }
        seq += 1;
        let submit = t0 + 1_000_000;
        out.push(Record::Submit(Submit {
            seq,
            queue: 0xa0,
            queue_family: 0,
            command_buffers: vec![cb],
            host_ns: submit,
            frame,
            counter_pass: None,
        }));
        let mut gpu = submit - 1_000_000_000 + 300_000;
        for &(pool, ty, stats, count) in &POOLS {
            seq += 1;
            let read = submit + 4_000_000;
            let flags = RESULT_64_BIT | RESULT_WITH_AVAILABILITY;
            let n_values = model::values_per_query(ty, stats, 0);
            let mut data = Vec::new();
            for q in 0..count {
                let vals: Vec<u64> = match ty {
                    model::QUERY_TYPE_TIMESTAMP => {
                        gpu += if q % 2 == 0 {
                            100_000
                        } else {
                            1_000_000 + frame * 10_000
                        };
                        vec![gpu]
                    }
                    _ => (0..n_values as u64)
                        .map(|i| 100 * (u64::from(q) + 1) + i + frame)
                        .collect(),
                };
                for v in vals.iter().chain(std::iter::once(&1u64)) {
                    data.extend_from_slice(&v.to_le_bytes());
                }
                out.push(Record::QueryAvailable(QueryAvailable {
                    pool,
                    query: q,
                    host_ns: read - 500_000,
                }));
            }
            out.push(Record::QueryResults(QueryResults {
                seq,
                thread: 1,
                device: 0xd,
                pool,
                first: 0,
                count,
                stride: (n_values as u64 + 1) * 8,
                flags,
                result: 0,
                host_ns: read,
                data,
            }));
        }
        seq += 1;
        out.push(Record::Frame(Frame {
            index: frame,
            last_seq: seq,
            host_ns: t0 + 16_000_000,
            boundary: FrameBoundary::Present,
        }));
    }
    (header(FileKind::Trace, dev), out)
}

/// Builds `Call` records of debug-utils label and render-pass commands, with the command table
/// they index (`table`, to write as the trace's `CommandTable`).
pub struct LabelCalls {
    pub table: Vec<String>,
    pub seq: u64,
}

impl Default for LabelCalls {
    fn default() -> Self {
        LabelCalls::new()
    }
}

impl LabelCalls {
    pub fn new() -> LabelCalls {
        LabelCalls {
            table: Vec::new(),
            seq: 100,
        }
    }

    fn call(&mut self, name: &str, f: impl FnOnce(&mut Encoder)) -> Call {
        let cmd = match self.table.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.table.push(name.to_owned());
                self.table.len() - 1
            }
        } as u32;
        let mut e = Encoder::new();
        f(&mut e);
        self.seq += 1;
        Call {
            seq: self.seq,
            thread: 1,
            cmd,
            host_ns: self.seq,
            result: 0,
            params: e.into_bytes(),
        }
    }

    pub fn begin_cb(&mut self, cb: u64) -> Call {
        let info = vk::CommandBufferBeginInfo::default();
        self.call("vkBeginCommandBuffer", |e| unsafe {
            vkstream::encode::vkBeginCommandBuffer(e, vk::CommandBuffer::from_raw(cb), &info)
        })
    }

    pub fn cmd_label(&mut self, cb: u64, name: Option<&str>, insert: bool) -> Call {
        let cbh = vk::CommandBuffer::from_raw(cb);
        match name {
            Some(n) => {
                let n = CString::new(n).unwrap_or_default();
                let l = vk::DebugUtilsLabelEXT::default().label_name(&n);
                if insert {
                    self.call("vkCmdInsertDebugUtilsLabelEXT", |e| unsafe {
                        vkstream::encode::vkCmdInsertDebugUtilsLabelEXT(e, cbh, &l)
                    })
                } else {
                    self.call("vkCmdBeginDebugUtilsLabelEXT", |e| unsafe {
                        vkstream::encode::vkCmdBeginDebugUtilsLabelEXT(e, cbh, &l)
                    })
                }
            }
            None => self.call("vkCmdEndDebugUtilsLabelEXT", |e| unsafe {
                vkstream::encode::vkCmdEndDebugUtilsLabelEXT(e, cbh)
            }),
        }
    }

    pub fn queue_label(&mut self, queue: u64, name: Option<&str>) -> Call {
        let q = vk::Queue::from_raw(queue);
        match name {
            Some(n) => {
                let n = CString::new(n).unwrap_or_default();
                let l = vk::DebugUtilsLabelEXT::default().label_name(&n);
                self.call("vkQueueBeginDebugUtilsLabelEXT", |e| unsafe {
                    vkstream::encode::vkQueueBeginDebugUtilsLabelEXT(e, q, &l)
                })
            }
            None => self.call("vkQueueEndDebugUtilsLabelEXT", |e| unsafe {
                vkstream::encode::vkQueueEndDebugUtilsLabelEXT(e, q)
            }),
        }
    }

    pub fn begin_render_pass(&mut self, cb: u64, render_pass: u64) -> Call {
        let info = vk::RenderPassBeginInfo::default()
            .render_pass(vk::RenderPass::from_raw(render_pass))
            .framebuffer(vk::Framebuffer::from_raw(0xf0));
        self.call("vkCmdBeginRenderPass", |e| unsafe {
            vkstream::encode::vkCmdBeginRenderPass(
                e,
                vk::CommandBuffer::from_raw(cb),
                &info,
                vk::SubpassContents::INLINE,
            )
        })
    }

    /// Dynamic rendering under `view_mask` (multiview when non-zero).
    pub fn begin_rendering(&mut self, cb: u64, view_mask: u32) -> Call {
        let info = vk::RenderingInfo::default()
            .layer_count(1)
            .view_mask(view_mask);
        self.call("vkCmdBeginRendering", |e| unsafe {
            vkstream::encode::vkCmdBeginRendering(e, vk::CommandBuffer::from_raw(cb), &info)
        })
    }

    pub fn end_rendering(&mut self, cb: u64) -> Call {
        self.call("vkCmdEndRendering", |e| unsafe {
            vkstream::encode::vkCmdEndRendering(e, vk::CommandBuffer::from_raw(cb))
        })
    }
}

/// Labels of the render passes [`with_labels`] adds, one per pool of [`POOLS`].
pub const RP_LABELS: [&str; 3] = ["Shadow pass", "Main pass", "Post"];
/// `VkRenderPass` handles of those render passes; the first two are named (`DebugName`).
pub const RP_HANDLES: [u64; 3] = [0x5a0, 0x5a1, 0x5a2];

/// [`trace`]'s records with debug-utils labels and render passes: each submit inside a queue
/// label `Frame N`; each command buffer recording inside `Scene`, with one label
/// ([`RP_LABELS`]) and one render pass ([`RP_HANDLES`]) around each pool's queries, and an
/// inserted label `late` before the last pool's.
pub fn with_labels(records: Vec<Record>) -> Vec<Record> {
    let mut c = LabelCalls::new();
    let mut out = Vec::with_capacity(records.len() * 2);
    // Index of the render pass open in the command buffer being recorded.
    let mut open: Option<usize> = None;
    for r in records {
        match &r {
            Record::QueryOp(op) if matches!(op.kind, QueryOpKind::Reset { .. }) => {
                let cb = op.command_buffer;
                let i = match open {
                    None => {
                        out.push(Record::Call(c.begin_cb(cb)));
                        out.push(Record::Call(c.cmd_label(cb, Some("Scene"), false)));
                        0
                    }
                    Some(i) => {
                        out.push(Record::Call(c.cmd_label(cb, None, false)));
                        i + 1
                    }
                };
                out.push(Record::Call(c.cmd_label(cb, Some(RP_LABELS[i % 3]), false)));
                out.push(Record::Call(c.begin_render_pass(cb, RP_HANDLES[i % 3])));
                if i == 2 {
                    out.push(Record::Call(c.cmd_label(cb, Some("late"), true)));
                }
                open = Some(i);
            }
            Record::Submit(sub) => {
                let cb = sub.command_buffers[0];
                if open.take().is_some() {
                    out.push(Record::Call(c.cmd_label(cb, None, false)));
                    out.push(Record::Call(c.cmd_label(cb, None, false)));
                }
                let label = format!("Frame {}", sub.frame);
                out.push(Record::Call(c.queue_label(sub.queue, Some(&label))));
                let queue = sub.queue;
                out.push(r);
                out.push(Record::Call(c.queue_label(queue, None)));
                continue;
            }
            _ => {}
        }
        out.push(r);
    }
    out.insert(0, Record::CommandTable(c.table.clone()));
    for (handle, name) in RP_HANDLES.iter().zip(["shadow rp", "main rp"]) {
        out.push(Record::DebugName(DebugName {
            handle: *handle,
            object_type: 18,
            name: name.to_owned(),
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use std::path::PathBuf;

    #[test]
    fn results_fixture_has_requested_rows_and_mismatches() {
        let (h, r) = results(1000, 1, "gpu-a", 7);
        let ds = Dataset::from_records(vec![(PathBuf::from("a.qres"), h, r)]);
        assert_eq!(ds.rows.len(), 1000);
        let mism = ds.mismatch.iter().filter(|m| **m).count();
        assert!(mism > 0 && mism < 200, "{mism}");
        assert_eq!(ds.pools.len(), 3);
        assert!(!ds.counters.is_empty());
    }

    #[test]
    fn trace_fixture_decodes_into_rows_with_times() {
        let (h, r) = trace(3);
        let ds = Dataset::from_records(vec![(PathBuf::from("t.qtrace"), h, r)]);
        assert_eq!(ds.rows.len(), 3 * 20);
        let stat_row = ds
            .rows
            .iter()
            .find(|r| ds.pools[r.pool as usize].pipeline_statistics != 0)
            .unwrap();
        assert_eq!(stat_row.captured.as_ref().unwrap().values.len(), 3);
        assert!(ds
            .rows
            .iter()
            .all(|r| r.times.submit != 0 && r.times.end != 0 && r.times.available != 0));
        assert_eq!(ds.trace.as_ref().unwrap().frames, 3);
        assert_eq!(ds.pools[0].name.as_deref(), Some("occlusion pool"));
        let ts = ds
            .rows
            .iter()
            .find(|r| ds.pools[r.pool as usize].query_type == 2)
            .unwrap();
        assert!(ts.times.gpu > 1_000_000_000);
    }
}
