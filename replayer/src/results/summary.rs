//! What a replay did ([`ReplaySummary`]) and the text `quarry replay` prints for it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use format::record::DeviceSummary;

use crate::compare::Comparison;
use crate::devices::GpuInfo;

/// Per-frame timing: the capture's frame time and the replay's in each loop.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameTime {
    pub frame: u64,
    pub capture_ns: u64,
    pub replay_ns: Vec<u64>,
}

/// What a replay did.
#[derive(Debug, Clone)]
pub struct ReplaySummary {
    pub gpu: GpuInfo,
    pub capture_device: Option<DeviceSummary>,
    pub calls: u64,
    pub frames: u64,
    pub loops: u32,
    /// Wall time of each loop.
    pub loop_ns: Vec<u64>,
    /// From the first call to the last frame boundary of the capture.
    pub capture_ns: u64,
    pub frame_times: Vec<FrameTime>,
    /// Query reads re-done (one per query per read per loop).
    pub queries: u64,
    pub comparison: Comparison,
    pub validation_messages: u64,
    pub first_messages: Vec<String>,
    pub results: Option<PathBuf>,
    /// Things worth telling the user that did not stop the replay.
    pub warnings: Vec<String>,
    /// CPU time per call (first loop) of the checks thread (reading records, decoding
    /// parameters, the checks; 0 when they ran on the replay thread, with one CPU), and of the
    /// replay thread (materialising, translating handles and the driver's own time).
    pub checks_ns_per_call: f64,
    pub cpu_ns_per_call: f64,
    /// Whether validation was enabled (then `validation_messages` is meaningful).
    pub validated: bool,
    /// Replay passes per loop (more than 1 when performance counters need several).
    pub passes: u32,
    /// Wall time of each pass of the first loop.
    pub pass_ns: Vec<u64>,
    /// `--counters`: command buffers or render passes measured (all passes and loops).
    pub injected: u64,
    /// `--frames` limited the report to a frame range (frame_times holds only those frames).
    pub frame_range: bool,
    /// `--window`: frames shown in a window (all loops and passes).
    pub presented: u64,
    /// `--memory`: `remap` or `rebind`, with `auto`'s reason.
    pub memory: String,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Min, median and max of the loops' wall times (the median of an even count is the mean of the
/// middle two); all zero without loops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoopStats {
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
}

impl LoopStats {
    pub fn of(loop_ns: &[u64]) -> Self {
        let mut v = loop_ns.to_vec();
        v.sort_unstable();
        let Some((&min, &max)) = v.first().zip(v.last()) else {
            return LoopStats {
                min_ms: 0.0,
                median_ms: 0.0,
                max_ms: 0.0,
            };
        };
        let n = v.len();
        let median = if n % 2 == 1 {
            ms(v[n / 2])
        } else {
            (ms(v[n / 2 - 1]) + ms(v[n / 2])) / 2.0
        };
        LoopStats {
            min_ms: ms(min),
            median_ms: median,
            max_ms: ms(max),
        }
    }
}

/// A frame's mean replay time over the loops.
fn mean_replay_ns(f: &FrameTime) -> u64 {
    f.replay_ns.iter().sum::<u64>() / f.replay_ns.len().max(1) as u64
}

/// `quarry replay --json`: one object with what the text says.
#[derive(Serialize)]
struct JsonSummary<'a> {
    device: JsonDevice<'a>,
    capture_device: Option<JsonDevice<'a>>,
    trace: &'a Path,
    calls: u64,
    frames: u64,
    query_reads: u64,
    loops: JsonLoops,
    capture_ms: f64,
    frame_times: Vec<JsonFrame>,
    passes: u32,
    presented: u64,
    injected: u64,
    /// CPU per call of the first loop (`checks_ns_per_call`, `cpu_ns_per_call`).
    checks_thread_ns_per_call: f64,
    replay_thread_ns_per_call: f64,
    /// `remap` or `rebind` (`--memory`), with `auto`'s reason.
    memory: &'a str,
    validation_messages: Option<u64>,
    results: Option<&'a Path>,
    warnings: &'a [String],
    comparison: Option<JsonComparison<'a>>,
    /// `ok`, or `mismatch` when `--compare` found a deterministic result that differs.
    result: &'static str,
}

#[derive(Serialize)]
struct JsonDevice<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<u32>,
    name: &'a str,
    driver_info: &'a str,
}

#[derive(Serialize)]
struct JsonLoops {
    count: u32,
    #[serde(flatten)]
    stats: LoopStats,
    per_loop_ms: Vec<f64>,
}

#[derive(Serialize)]
struct JsonFrame {
    frame: u64,
    capture_ms: f64,
    /// Mean over the loops.
    replay_ms: f64,
    per_loop_ms: Vec<f64>,
}

#[derive(Serialize)]
struct JsonComparison<'a> {
    same_device: bool,
    by_type: &'a std::collections::BTreeMap<String, crate::compare::TypeSummary>,
    mismatches: &'a [String],
    not_compared: &'a [String],
    clock_order: &'a [String],
}

impl ReplaySummary {
    /// The text `quarry replay` prints without its per-frame table; `compare` adds the
    /// comparison of every query type.
    pub fn to_text(&self, compare: bool) -> String {
        self.to_text_with(compare, false)
    }

    /// [`Self::to_text`], with the per-frame table (`--frames-table`) when `frames_table`.
    pub fn to_text_with(&self, compare: bool, frames_table: bool) -> String {
        let s = self;
        let mut o = String::new();
        for w in &s.warnings {
            let _ = writeln!(o, "warning: {w}");
        }
        let _ = writeln!(
            o,
            "replayed on GPU {}: {} ({})",
            s.gpu.index, s.gpu.name, s.gpu.driver_info
        );
        if let Some(c) = &s.capture_device {
            let _ = writeln!(o, "captured on: {} ({})", c.name, c.driver_info);
        }
        let _ = writeln!(
            o,
            "calls {}  frames {}  loops {}  query reads {}",
            s.calls, s.frames, s.loops, s.queries
        );
        let _ = writeln!(o, "memory: {}", s.memory);
        if s.presented > 0 {
            let _ = writeln!(o, "presented {} frames in a window", s.presented);
        }
        if s.injected > 0 {
            let _ = writeln!(
                o,
                "counters measured around {} command buffers / render passes",
                s.injected
            );
        }
        if s.passes > 1 {
            let _ = writeln!(
                o,
                "counter passes {} ({} ms each)",
                s.passes,
                s.pass_ns
                    .iter()
                    .map(|p| format!("{:.1}", ms(*p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            o,
            "cpu per call: checks thread (read, decode, checks) {:.0} ns, replay thread (incl. driver) {:.0} ns",
            s.checks_ns_per_call, s.cpu_ns_per_call
        );
        if frames_table && !s.frame_times.is_empty() {
            let _ = writeln!(
                o,
                "{:>6} {:>12} {:>12} {:>7}",
                "frame", "capture ms", "replay ms", "ratio"
            );
            for f in &s.frame_times {
                let replay = mean_replay_ns(f);
                let ratio = if f.capture_ns > 0 {
                    replay as f64 / f.capture_ns as f64
                } else {
                    0.0
                };
                let _ = writeln!(
                    o,
                    "{:>6} {:>12.3} {:>12.3} {:>7.2}",
                    f.frame,
                    ms(f.capture_ns),
                    ms(replay),
                    ratio
                );
            }
        }
        if s.frame_range {
            let replay: u64 = s.frame_times.iter().map(mean_replay_ns).sum();
            let capture: u64 = s.frame_times.iter().map(|f| f.capture_ns).sum();
            let _ = writeln!(
                o,
                "frames {}-{}: capture {:.3} ms, replay {:.3} ms per loop",
                s.frame_times.first().map_or(0, |f| f.frame),
                s.frame_times.last().map_or(0, |f| f.frame),
                ms(capture),
                ms(replay)
            );
        }
        let total: u64 = s.loop_ns.iter().sum();
        let mean = total / s.loop_ns.len().max(1) as u64;
        if s.loop_ns.len() > 1 {
            let l = LoopStats::of(&s.loop_ns);
            let _ = writeln!(
                o,
                "total: capture {:.3} ms, replay {:.3} ms per loop (min {:.3}, median {:.3}, max {:.3} over {} loops)",
                ms(s.capture_ns),
                ms(mean),
                l.min_ms,
                l.median_ms,
                l.max_ms,
                s.loop_ns.len()
            );
        } else {
            let _ = writeln!(
                o,
                "total: capture {:.3} ms, replay {:.3} ms",
                ms(s.capture_ns),
                ms(mean)
            );
        }
        if s.validated || s.validation_messages > 0 {
            let _ = writeln!(o, "validation: {} messages", s.validation_messages);
            for m in &s.first_messages {
                let _ = writeln!(o, "  {m}");
            }
        }
        if let Some(r) = &s.results {
            let _ = writeln!(o, "results: {}", r.display());
        }
        if compare {
            o.push_str(&s.comparison.to_text());
        }
        o
    }

    /// What `quarry replay --json` prints for a replay of `trace`; `compare` adds the comparison.
    pub fn to_json(&self, trace: &Path, compare: bool) -> serde_json::Value {
        let s = self;
        let c = &s.comparison;
        let j = JsonSummary {
            device: JsonDevice {
                index: Some(s.gpu.index),
                name: &s.gpu.name,
                driver_info: &s.gpu.driver_info,
            },
            capture_device: s.capture_device.as_ref().map(|d| JsonDevice {
                index: None,
                name: &d.name,
                driver_info: &d.driver_info,
            }),
            trace,
            calls: s.calls,
            frames: s.frames,
            query_reads: s.queries,
            loops: JsonLoops {
                count: s.loops,
                stats: LoopStats::of(&s.loop_ns),
                per_loop_ms: s.loop_ns.iter().map(|l| ms(*l)).collect(),
            },
            capture_ms: ms(s.capture_ns),
            frame_times: s
                .frame_times
                .iter()
                .map(|f| JsonFrame {
                    frame: f.frame,
                    capture_ms: ms(f.capture_ns),
                    replay_ms: ms(mean_replay_ns(f)),
                    per_loop_ms: f.replay_ns.iter().map(|r| ms(*r)).collect(),
                })
                .collect(),
            passes: s.passes,
            presented: s.presented,
            injected: s.injected,
            checks_thread_ns_per_call: s.checks_ns_per_call.round(),
            replay_thread_ns_per_call: s.cpu_ns_per_call.round(),
            memory: &s.memory,
            validation_messages: (s.validated || s.validation_messages > 0)
                .then_some(s.validation_messages),
            results: s.results.as_deref(),
            warnings: &s.warnings,
            comparison: compare.then_some(JsonComparison {
                same_device: c.same_device,
                by_type: &c.by_type,
                mismatches: &c.mismatches,
                not_compared: &c.not_compared,
                clock_order: &c.clock_order,
            }),
            result: if compare && c.failed() {
                "mismatch"
            } else {
                "ok"
            },
        };
        serde_json::to_value(j).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_stats() {
        let l = LoopStats::of(&[3_000_000, 1_000_000, 2_000_000]);
        assert_eq!((l.min_ms, l.median_ms, l.max_ms), (1.0, 2.0, 3.0));
        let l = LoopStats::of(&[4_000_000, 1_000_000, 2_000_000, 3_000_000]);
        assert_eq!((l.min_ms, l.median_ms, l.max_ms), (1.0, 2.5, 4.0));
        assert_eq!(LoopStats::of(&[]).max_ms, 0.0);
    }
}
