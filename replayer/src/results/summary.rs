//! What a replay did ([`ReplaySummary`]) and the text `quarry replay` prints for it.

use std::fmt::Write as _;
use std::path::PathBuf;

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
    /// CPU time per call (first loop) decoding parameters only, and decoding plus replaying
    /// (materialising, translating handles and the driver's own time).
    pub decode_ns_per_call: f64,
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
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl ReplaySummary {
    /// The text `quarry replay` prints; `compare` adds the comparison of every query type.
    pub fn to_text(&self, compare: bool) -> String {
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
            "cpu per call: decode {:.0} ns, decode+replay (incl. driver) {:.0} ns",
            s.decode_ns_per_call, s.cpu_ns_per_call
        );
        if !s.frame_times.is_empty() {
            let _ = writeln!(
                o,
                "{:>6} {:>12} {:>12} {:>7}",
                "frame", "capture ms", "replay ms", "ratio"
            );
            for f in &s.frame_times {
                let replay = if f.replay_ns.is_empty() {
                    0
                } else {
                    f.replay_ns.iter().sum::<u64>() / f.replay_ns.len() as u64
                };
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
            let replay: u64 = s
                .frame_times
                .iter()
                .map(|f| f.replay_ns.iter().sum::<u64>() / f.replay_ns.len().max(1) as u64)
                .sum();
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
        let mean = if s.loop_ns.is_empty() {
            0
        } else {
            total / s.loop_ns.len() as u64
        };
        let _ = writeln!(
            o,
            "total: capture {:.3} ms, replay {:.3} ms per loop ({})",
            ms(s.capture_ns),
            ms(mean),
            s.loop_ns
                .iter()
                .map(|l| format!("{:.3}", ms(*l)))
                .collect::<Vec<_>>()
                .join(", ")
        );
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
}
