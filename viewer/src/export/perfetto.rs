//! The runs' timelines as Chrome trace-event JSON (opens in ui.perfetto.dev).
//!
//! Layout: one process per run (`pid` 1 the capture, `pid` 2 + f results file f), so capture and
//! replay never share a track; in each, one thread (track) per queue and kind of slice:
//! - `submit→available`: from the submit of the query's command buffer to the host first seeing
//!   the query available (capture: the trace's times; replay: the results file's);
//! - `begin→end` (capture): host times the begin and end commands were recorded;
//! - `GPU timestamps`: timestamp queries as instants, on the host clock through the trace's
//!   calibration sample; a replay has none, so its first GPU timestamp is put at its first
//!   submit (the track name says so).
//!
//! Overlapping slices of one queue go to further tracks of that queue (`#2`, `#3`, ...), so the
//! complete (`X`) events of a track never overlap. Times are µs from the run's first event: runs
//! start together and compare side by side. Counter samples are counter tracks (`C`) per run, at
//! the time their frame's first submit (or, where no query gives one, the average frame length).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::{self, Write};

use format::query::QueryKind;
use serde_json::{json, Map, Value};

use super::tidy::{counter_unit_name, outcome_name};
use super::{hex, Names};
use crate::data::Dataset;
use crate::model;

/// Kinds of track of one queue, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    SubmitAvailable,
    BeginEnd,
    GpuTimestamps,
}

/// One slice (or instant, start == end) before placement: absolute host ns and its row.
#[derive(Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    row: u32,
}

/// A run: the capture or one results file.
#[derive(Default)]
struct Run {
    name: String,
    /// (queue, kind) → spans.
    spans: BTreeMap<(u64, Kind), Vec<Span>>,
    /// Frame → host ns of its first submit.
    frame_start: BTreeMap<u64, u64>,
    /// Average frame length (from the replay info), for frames no query dates.
    frame_ns: f64,
}

impl Run {
    fn add(&mut self, queue: u64, kind: Kind, start: u64, end: u64, row: usize) {
        self.spans.entry((queue, kind)).or_default().push(Span {
            start,
            end: end.max(start),
            row: row as u32,
        });
    }

    fn origin(&self) -> Option<u64> {
        self.spans.values().flatten().map(|s| s.start).min()
    }

    /// ns from the run's origin at which `frame` starts.
    fn frame_rel(&self, origin: u64, frame: u64) -> f64 {
        if let Some(t) = self.frame_start.get(&frame) {
            return t.saturating_sub(origin) as f64;
        }
        match self.frame_start.iter().next() {
            Some((&f0, &t0)) => {
                t0.saturating_sub(origin) as f64 + (frame as f64 - f0 as f64) * self.frame_ns
            }
            None => frame as f64 * self.frame_ns,
        }
        .max(0.0)
    }
}

fn nz(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Writes the trace-event JSON of `ds`.
pub fn write(ds: &Dataset, names: &Names, out: &mut dyn Write) -> io::Result<()> {
    let runs = build_runs(ds);
    let cap = has_capture(ds);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let mut emit = |out: &mut dyn Write, v: &Value| -> io::Result<()> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, v).map_err(io::Error::from)
    };
    let us = |ns: f64| ns / 1000.0;
    for (k, run) in runs.iter().enumerate() {
        let pid = k + 1;
        let origin = run.origin().unwrap_or(0);
        emit(
            out,
            &json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": run.name}}),
        )?;
        emit(
            out,
            &json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}),
        )?;
        let mut tid = 0u32;
        for (&(queue, kind), spans) in &run.spans {
            let mut spans = spans.clone();
            spans.sort_by_key(|s| (s.start, s.end));
            // Lanes: a slice goes to the lane that freed up first, if free at its start (as
            // few lanes as the overlap needs, O(n log lanes)).
            let mut free: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
            let mut n_lanes = 1;
            let mut lane_of = Vec::with_capacity(spans.len());
            for s in &spans {
                let lane = if kind == Kind::GpuTimestamps {
                    0
                } else {
                    let l = match free.peek() {
                        Some(&Reverse((end, l))) if end <= s.start => {
                            free.pop();
                            l
                        }
                        _ => {
                            n_lanes = n_lanes.max(free.len() + 1);
                            free.len()
                        }
                    };
                    free.push(Reverse((s.end, l)));
                    l
                };
                lane_of.push(lane);
            }
            let base = tid + 1;
            tid += n_lanes as u32;
            let what = match kind {
                Kind::SubmitAvailable => "submit→available".to_owned(),
                Kind::BeginEnd => "begin→end (recorded)".to_owned(),
                Kind::GpuTimestamps if k == 0 && ds.trace.is_some() => "GPU timestamps".to_owned(),
                Kind::GpuTimestamps => {
                    "GPU timestamps (not calibrated: first put at first submit)".to_owned()
                }
            };
            let queue_label = if queue == 0 {
                "queue ?".to_owned()
            } else {
                format!("queue {}", names.label(queue))
            };
            for l in 0..n_lanes {
                let name = if l == 0 {
                    format!("{queue_label} · {what}")
                } else {
                    format!("{queue_label} · {what} #{}", l + 1)
                };
                let t = base + l as u32;
                emit(
                    out,
                    &json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": t, "args": {"name": name}}),
                )?;
                emit(
                    out,
                    &json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": t, "args": {"sort_index": t}}),
                )?;
            }
            for (s, lane) in spans.iter().zip(lane_of) {
                let i = s.row as usize;
                let r = &ds.rows[i];
                let pool = ds.pool_of(r);
                let rep = if k == 0 && cap {
                    None
                } else {
                    ds.replayed
                        .get(k - usize::from(cap))
                        .and_then(|f| f[i].as_ref())
                };
                let values = match rep {
                    Some(p) => Some(&p.values),
                    None => r.captured.as_ref(),
                };
                let mut args = Map::new();
                args.insert("frame".into(), r.frame.into());
                args.insert("pool".into(), hex(pool.handle).into());
                args.insert("query".into(), r.query.into());
                args.insert(
                    "query_type".into(),
                    QueryKind::from_raw(pool.query_type).name().into(),
                );
                args.insert(
                    "command_buffer".into(),
                    names.label(r.command_buffer).into(),
                );
                if let Some(l) = &r.label {
                    args.insert("label".into(), l.as_ref().into());
                }
                args.insert(
                    "values".into(),
                    values.map_or(Value::Null, |v| json!(v.values)),
                );
                if let Some(c) = rep.and_then(|p| p.classified) {
                    args.insert("outcome".into(), outcome_name(c.outcome).into());
                    if let Some(m) = c.multiview {
                        args.insert("multiview".into(), m.note().into());
                    }
                }
                let query_name = format!(
                    "{} #{}",
                    pool_name(names, pool.handle, pool.name.as_deref()),
                    r.query
                );
                let mut ev = json!({
                    // The innermost debug-utils label first: what the app called this work.
                    "name": match r.label.as_deref().and_then(|l| l.rsplit('/').next()) {
                        Some(inner) => format!("{inner} · {query_name}"),
                        None => query_name,
                    },
                    "cat": "query",
                    "pid": pid,
                    "tid": base + lane as u32,
                    "ts": us(s.start.saturating_sub(origin) as f64),
                    "args": args,
                });
                if kind == Kind::GpuTimestamps {
                    ev["ph"] = "i".into();
                    ev["s"] = "t".into();
                } else {
                    ev["ph"] = "X".into();
                    ev["dur"] = us((s.end - s.start) as f64).into();
                }
                emit(out, &ev)?;
            }
        }
        // Counters: one counter track per counter, one series per command buffer / render pass.
        let mut samples: BTreeMap<(String, u64), Map<String, Value>> = BTreeMap::new();
        for c in &ds.counters {
            let value = if cap && k == 0 {
                c.captured
            } else {
                c.values.get(k - usize::from(cap)).copied().flatten()
            };
            let Some(value) = value.filter(|v| v.is_finite()) else {
                continue;
            };
            let track = format!("{} ({})", c.name, counter_unit_name(c.unit));
            let series = match (c.command_buffer, c.render_pass) {
                (0, None) => "value".to_owned(),
                (cb, None) => format!("cb {}", names.label(cb)),
                (cb, Some(rp)) => match c.render_pass_title() {
                    Some(t) => format!("cb {} · render pass {rp}: {t}", names.label(cb)),
                    None => format!("cb {} · render pass {rp}", names.label(cb)),
                },
            };
            samples
                .entry((track, c.frame))
                .or_default()
                .insert(series, value.into());
        }
        for ((track, frame), args) in samples {
            emit(
                out,
                &json!({"ph": "C", "name": track, "cat": "counter", "pid": pid, "tid": 0,
                        "ts": us(run.frame_rel(origin, frame)), "args": args}),
            )?;
        }
    }
    out.write_all(b"\n]}\n")
}

fn pool_name(names: &Names, handle: u64, fallback: Option<&str>) -> String {
    match names.get(handle).or(fallback) {
        Some(n) => n.to_owned(),
        None => hex(handle),
    }
}

/// Whether the export has a capture run: a trace, or results files with captured counters.
fn has_capture(ds: &Dataset) -> bool {
    ds.trace.is_some() || ds.results.is_empty() || ds.counters.iter().any(|c| c.captured.is_some())
}

fn build_runs(ds: &Dataset) -> Vec<Run> {
    let cap = has_capture(ds);
    let mut runs: Vec<Run> = Vec::new();
    let period = |ns: u64, frames: u64| {
        if ns > 0 && frames > 0 {
            ns as f64 / frames as f64
        } else {
            16_666_667.0
        }
    };
    if cap {
        let info = ds.results.iter().find_map(|f| f.replay.as_ref());
        runs.push(Run {
            name: match &ds.trace {
                Some(t) => format!("capture: {}", t.label),
                None => "capture (from the results files)".to_owned(),
            },
            frame_ns: info.map_or(16_666_667.0, |r| period(r.capture_ns, r.frames)),
            ..Run::default()
        });
    }
    for f in &ds.results {
        let device = f.device.as_ref().map(|d| d.name.as_str()).unwrap_or("?");
        runs.push(Run {
            name: format!("replay: {} on {device}", f.label),
            frame_ns: f
                .replay
                .as_ref()
                .map_or(16_666_667.0, |r| period(r.replay_ns, r.frames)),
            ..Run::default()
        });
    }
    let mut replay_gpu: Vec<Vec<(usize, f64)>> = vec![Vec::new(); ds.results.len()];
    for (i, r) in ds.rows.iter().enumerate() {
        let is_ts = ds.pool_of(r).query_type == model::QUERY_TYPE_TIMESTAMP;
        if cap {
            let run = &mut runs[0];
            let t = &r.times;
            if let (Some(s), Some(a)) = (nz(t.submit), nz(t.available)) {
                run.add(r.queue, Kind::SubmitAvailable, s, a, i);
                let fs = run.frame_start.entry(r.frame).or_insert(s);
                *fs = (*fs).min(s);
            }
            if let (Some(b), Some(e)) = (nz(t.begin), nz(t.end)) {
                if e > b {
                    run.add(r.queue, Kind::BeginEnd, b, e, i);
                }
            }
            if let (true, Some(g)) = (is_ts, nz(t.gpu)) {
                run.add(r.queue, Kind::GpuTimestamps, g, g, i);
            }
        }
        for (f, col) in ds.replayed.iter().enumerate() {
            let Some(p) = col[i].as_ref() else { continue };
            let run = &mut runs[f + usize::from(cap)];
            if let (Some(s), Some(a)) = (nz(p.submit_ns), nz(p.available_ns)) {
                run.add(r.queue, Kind::SubmitAvailable, s, a, i);
                let fs = run.frame_start.entry(r.frame).or_insert(s);
                *fs = (*fs).min(s);
            }
            if let (true, Some(g)) = (is_ts, p.gpu_ns.filter(|g| g.is_finite())) {
                replay_gpu[f].push((i, g));
            }
        }
    }
    // Replays carry no calibration: their first GPU timestamp goes to their first submit.
    for (f, ts) in replay_gpu.into_iter().enumerate() {
        let Some(g0) = ts.iter().map(|t| t.1).reduce(f64::min) else {
            continue;
        };
        let run = &mut runs[f + usize::from(cap)];
        let anchor = ts
            .iter()
            .filter_map(|&(i, _)| ds.replayed[f][i].as_ref().and_then(|p| nz(p.submit_ns)))
            .min()
            .or_else(|| run.origin())
            .unwrap_or(0);
        for (i, g) in ts {
            let t = anchor + (g - g0).max(0.0) as u64;
            run.add(ds.rows[i].queue, Kind::GpuTimestamps, t, t, i);
        }
    }
    runs
}
