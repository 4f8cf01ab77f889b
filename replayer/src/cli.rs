//! clap arguments and entry points for `quarry devices` and `quarry replay`; the root binary wires them.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;

use crate::engine::{ReplayOptions, ReplaySummary};
use crate::error::ReplayError;

/// `quarry devices [--json]`: list GPUs and their query capabilities.
#[derive(Args, Debug, Clone)]
pub struct DevicesArgs {
    /// Print one JSON array of GPUs instead of text.
    #[arg(long)]
    pub json: bool,
    /// List the GPUs as seen through VK_LAYER_QUARRY_counters (VK_KHR_performance_query emulated).
    #[arg(long)]
    pub emulate_counters: bool,
}

/// Makes every Vulkan instance this process creates from now on load VK_LAYER_QUARRY_counters
/// below the replayer; the returned directory holds its manifest and must outlive the replay.
pub fn emulate_counters() -> anyhow::Result<layer_support::counters::LayerDir> {
    let layer = layer_support::counters::LayerDir::for_built_layer()?;
    let [(key, paths), _] = layer.env_values(std::env::var_os("VK_ADD_LAYER_PATH"), None);
    // The loader reads its search path at instance creation; nothing else in this process reads it.
    std::env::set_var(key, paths);
    crate::devices::add_layer(layer_support::counters::LAYER_NAME);
    Ok(layer)
}

/// `--passes auto|N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passes(pub Option<u32>);

fn parse_passes(s: &str) -> Result<Passes, String> {
    if s == "auto" {
        return Ok(Passes(None));
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=64).contains(&n) => Ok(Passes(Some(n))),
        _ => Err(format!("`{s}` is not `auto` or a pass count from 1 to 64")),
    }
}

impl DevicesArgs {
    /// Runs `quarry devices`; returns the process exit code.
    pub fn run(&self) -> anyhow::Result<i32> {
        let _layer = self.emulate_counters.then(emulate_counters).transpose()?;
        let gpus = crate::devices::devices()?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&gpus)?);
        } else if gpus.is_empty() {
            println!("no GPU found");
        } else {
            print!("{}", crate::devices::to_text(&gpus));
        }
        Ok(0)
    }
}

/// Runs `quarry devices`; returns the process exit code.
pub fn run_devices(args: &DevicesArgs) -> anyhow::Result<i32> {
    args.run()
}

/// `quarry replay TRACE`: re-execute a trace headless on any GPU and re-read every query.
///
/// Exit status: 0 replayed (and, with `--compare`, every deterministic query matched); 1 with
/// `--compare` when a deterministic query differs; 2 when the trace cannot be read.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace (`.qtrace`) to replay.
    pub trace: PathBuf,
    /// GPU to replay on: index, UUID or part of the name (see `quarry devices`).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Replay the whole trace N times, each from the trace's start state.
    #[arg(long = "loop", value_name = "N", default_value_t = 1)]
    pub loops: u32,
    /// Write captured and replayed query values to this results file (`.qres`).
    #[arg(long, value_name = "OUT")]
    pub results: Option<PathBuf>,
    /// Print a per-query-type comparison and every mismatch; exit 1 when a deterministic result differs.
    #[arg(long)]
    pub compare: bool,
    /// Enable VK_LAYER_KHRONOS_validation and report how many messages it printed.
    #[arg(long)]
    pub validate: bool,
    /// Performance query pools: replay the trace once per counter pass, `auto` (as many as the
    /// replay GPU needs for the captured counters) or N (counters spread over N passes).
    #[arg(long, value_name = "auto|N", default_value = "auto", value_parser = parse_passes)]
    pub passes: Passes,
    /// Replay on top of VK_LAYER_QUARRY_counters: VK_KHR_performance_query emulated from
    /// timestamp, pipeline-statistics and occlusion queries, for GPUs without it.
    #[arg(long)]
    pub emulate_counters: bool,
    /// Measure counters around every command buffer (or render pass, see --scope) of the replay,
    /// even where the app had no queries: `all` or comma-separated names (see `quarry devices`).
    /// A GPU without VK_KHR_performance_query measures through VK_LAYER_QUARRY_counters.
    #[arg(long, value_name = "LIST|all")]
    pub counters: Option<String>,
    /// Leave out device extensions the replay GPU lacks when they are safe to drop (debug
    /// markers, checkpoints, HDR metadata, present timing, ...) and skip their commands.
    #[arg(long)]
    pub drop_unsupported: bool,
    /// Show the presented frames in an X11 window (on $DISPLAY); headless without it.
    #[arg(long)]
    pub window: bool,
    /// Replay from the trace's start through frame B and report frames A to B only (0-based):
    /// `A-B`, `A-` (to the end) or `A`.
    #[arg(long, value_name = "A-B", value_parser = parse_frames)]
    pub frames: Option<(u64, Option<u64>)>,
    /// What --counters measures around: `command-buffer` or `render-pass`.
    #[arg(long, value_name = "SCOPE", default_value = "command-buffer", value_parser = parse_scope)]
    pub scope: crate::inject::Scope,
}

/// `A-B`, `A-` or `A`.
pub fn parse_frames(s: &str) -> Result<(u64, Option<u64>), String> {
    let bad = || format!("`{s}` is not a frame range (A-B, A- or A, 0-based, A <= B)");
    let num = |t: &str| t.trim().parse::<u64>().map_err(|_| bad());
    match s.split_once('-') {
        None => {
            let a = num(s)?;
            Ok((a, Some(a)))
        }
        Some((a, "")) => Ok((num(a)?, None)),
        Some((a, b)) => {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(bad());
            }
            Ok((a, Some(b)))
        }
    }
}

fn parse_scope(s: &str) -> Result<crate::inject::Scope, String> {
    match s {
        "command-buffer" => Ok(crate::inject::Scope::CommandBuffer),
        "render-pass" => Ok(crate::inject::Scope::RenderPass),
        _ => Err(format!("`{s}` is not `command-buffer` or `render-pass`")),
    }
}

impl ReplayArgs {
    pub fn options(&self) -> ReplayOptions {
        ReplayOptions {
            trace: self.trace.clone(),
            gpu: self.gpu.clone(),
            loops: self.loops.max(1),
            results: self.results.clone(),
            compare: self.compare,
            validate: self.validate,
            progress: self.loops > 1,
            passes: self.passes.0,
            frames: self.frames,
            window: self.window,
            drop_unsupported: self.drop_unsupported,
            inject: self.counters.as_deref().map(|c| crate::inject::InjectSpec {
                counters: (c.trim() != "all").then(|| {
                    c.split(',')
                        .map(|n| n.trim().to_string())
                        .filter(|n| !n.is_empty())
                        .collect()
                }),
                scope: self.scope,
            }),
        }
    }

    /// Runs `quarry replay`; returns the process exit code.
    pub fn run(&self) -> anyhow::Result<i32> {
        let _layer = if self.emulate_counters || self.counters.is_some() && !self.gpu_counts()? {
            Some(emulate_counters()?)
        } else {
            None
        };
        match crate::engine::replay(&self.options()) {
            Ok(summary) => {
                print!("{}", report(&summary, self.compare));
                Ok(if self.compare && summary.comparison.failed() {
                    1
                } else {
                    0
                })
            }
            Err(e @ ReplayError::Trace(_)) => {
                eprintln!("quarry: {e}");
                Ok(2)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl ReplayArgs {
    /// Whether the GPU `--gpu` picks has VK_KHR_performance_query of its own (else `--counters`
    /// measures through the emulation layer).
    fn gpu_counts(&self) -> anyhow::Result<bool> {
        let gpus = crate::devices::devices()?;
        let gpu = crate::devices::select(&gpus, self.gpu.as_deref())?;
        if !gpu.queries.performance_query {
            eprintln!(
                "quarry: GPU {} has no VK_KHR_performance_query; --counters measures through VK_LAYER_QUARRY_counters (timestamps, pipeline statistics, occlusion)",
                gpu.index
            );
        }
        Ok(gpu.queries.performance_query)
    }
}

/// Runs `quarry replay`; returns the process exit code.
pub fn run_replay(args: &ReplayArgs) -> anyhow::Result<i32> {
    args.run()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The text `quarry replay` prints.
pub fn report(s: &ReplaySummary, compare: bool) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_ranges() {
        assert_eq!(parse_frames("3"), Ok((3, Some(3))));
        assert_eq!(parse_frames("2-5"), Ok((2, Some(5))));
        assert_eq!(parse_frames("4-"), Ok((4, None)));
        for bad in ["5-2", "a", "-3", "1-b", ""] {
            assert!(parse_frames(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_passes("auto"), Ok(Passes(None)));
        assert_eq!(parse_passes("3"), Ok(Passes(Some(3))));
        assert!(parse_passes("0").is_err() && parse_passes("x").is_err());
    }
}
