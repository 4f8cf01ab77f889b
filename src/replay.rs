//! `quarry replay` and `quarry devices`: clap arguments turned into the replayer's plain
//! [`replayer::ReplayOptions`], a progress bar on a terminal, and the exit codes.

use std::path::PathBuf;

use clap::Args;
use format::frames::FrameRange;
use replayer::inject::{InjectSpec, Scope};
use replayer::{PassInfo, Progress, ReplayError, ReplayOptions};

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
fn emulate_counters() -> anyhow::Result<layer_support::counters::LayerDir> {
    let layer = layer_support::counters::LayerDir::for_built_layer()?;
    let [(key, paths), _] = layer.env_values(std::env::var_os("VK_ADD_LAYER_PATH"), None);
    // The loader reads its search path at instance creation; nothing else in this process reads it.
    std::env::set_var(key, paths);
    replayer::devices::add_layer(layer_support::counters::LAYER_NAME);
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

/// `quarry replay TRACE`: re-execute a trace headless on any GPU and re-read every query.
///
/// Exit status: 0 replayed (and, with `--compare`, every deterministic query matched); 1 with
/// `--compare` when a deterministic query differs; 2 when the trace cannot be read, is damaged
/// (unless `--salvage`) or holds a call that cannot be replayed safely.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace (`.qtrace`) to replay.
    pub trace: PathBuf,
    /// GPU to replay on: index, UUID or part of the name (see `quarry devices`).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Replay the whole trace N times, each from the trace's start state.
    #[arg(long = "loop", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
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
    /// Leave out device extensions and features the replay GPU lacks even when the trace uses
    /// them, and skip the calls that need them (unused ones are always left out).
    #[arg(long)]
    pub drop_unsupported: bool,
    /// Only say, in one line, whether this GPU can replay the trace and, if not, what it lacks
    /// and which options would help: exit 0 it can, 1 it cannot, 2 bad input.
    #[arg(long)]
    pub check_only: bool,
    /// Show the presented frames in an X11 window (on $DISPLAY); headless without it.
    #[arg(long)]
    pub window: bool,
    /// Replay from the trace's start through frame B and report frames A to B only (0-based):
    /// `A-B`, `A-` (to the end) or `A`.
    #[arg(long, value_name = "A-B", value_parser = FrameRange::parse)]
    pub frames: Option<FrameRange>,
    /// What --counters measures around: `command-buffer` or `render-pass`.
    #[arg(long, value_name = "SCOPE", default_value = "command-buffer", value_parser = parse_scope)]
    pub scope: Scope,
    /// Print the per-frame table (capture and replay time and their ratio for every frame).
    #[arg(long = "frames-table", short = 'v')]
    pub frames_table: bool,
    /// Memory layout on the replay GPU: `remap` (the captured allocations as they are),
    /// `rebind` (each buffer and image in its own allocation, sized and aligned for this GPU) or
    /// `auto` (rebind only when some captured placement does not fit this GPU).
    #[arg(long, value_name = "remap|rebind|auto", default_value = "auto")]
    pub memory: replayer::MemoryMode,
    /// Print one JSON object (device, loops, frame times, comparison, result) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub salvage: crate::output::Salvage,
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    match s {
        "command-buffer" => Ok(Scope::CommandBuffer),
        "render-pass" => Ok(Scope::RenderPass),
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
            memory: self.memory,
            inject: self.counters.as_deref().map(|c| InjectSpec {
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

    /// Every name `--counters` lists is a counter of the GPU `--gpu` picks (as the replay will
    /// see it, emulated or not): a misspelt name is bad input before the trace is touched.
    fn check_counter_names(&self) -> anyhow::Result<()> {
        let Some(list) = self.counters.as_deref().filter(|c| c.trim() != "all") else {
            return Ok(());
        };
        let gpus = replayer::devices()?;
        let gpu = replayer::devices::select(&gpus, self.gpu.as_deref())?;
        let known: Vec<&str> = gpu
            .queue_families
            .iter()
            .flat_map(|f| f.counters.iter().map(|c| c.name.as_str()))
            .collect();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
                crate::bad_input!(
                    "--counters: GPU {} has no counter named \"{name}\" (`quarry devices` lists them)",
                    gpu.index
                )
            }
        }
        Ok(())
    }

    /// Whether the GPU `--gpu` picks has VK_KHR_performance_query of its own (else `--counters`
    /// measures through the emulation layer).
    fn gpu_counts(&self) -> anyhow::Result<bool> {
        let gpus = replayer::devices()?;
        let gpu = replayer::devices::select(&gpus, self.gpu.as_deref())?;
        // A note, not an error: stderr keeps its one `quarry:` line for errors; --json keeps
        // stdout to its one object.
        if !gpu.queries.performance_query && !self.json {
            println!(
                "note: GPU {} has no VK_KHR_performance_query; --counters measures through VK_LAYER_QUARRY_counters (timestamps, pipeline statistics, occlusion)",
                gpu.index
            );
        }
        Ok(gpu.queries.performance_query)
    }
}

/// A bar over the calls of each pass of each loop, drawn only when stderr is a terminal.
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    /// Name the loop even with one (`--loop` given) and the pass even with one (`--passes N`).
    loop_always: bool,
    pass_always: bool,
}

impl Bar {
    pub fn new(opts: &ReplayOptions) -> Self {
        Bar {
            bar: None,
            loop_always: opts.progress,
            pass_always: opts.passes.is_some(),
        }
    }
}

impl Progress for Bar {
    fn pass_begun(&mut self, p: &PassInfo) {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(p.calls),
            indicatif::ProgressDrawTarget::stderr_with_hz(10),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:40}] {pos}/{len} calls {elapsed_precise}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        let mut prefix = String::from("replay");
        if p.loops > 1 || self.loop_always {
            prefix.push_str(&format!(" loop {}/{}", p.loop_index + 1, p.loops));
        }
        if p.passes > 1 || self.pass_always {
            prefix.push_str(&format!(" pass {}/{}", p.pass + 1, p.passes));
        }
        bar.set_prefix(prefix);
        self.bar = Some(bar);
    }

    fn calls_replayed(&mut self, calls: u64) {
        if let Some(b) = &self.bar {
            b.set_position(calls);
        }
    }

    fn pass_ended(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

fn code(c: i32) -> u8 {
    u8::try_from(c).unwrap_or(1)
}

/// Runs `quarry replay`; returns the process exit code.
pub fn run_replay(args: ReplayArgs) -> anyhow::Result<u8> {
    if !args.trace.is_file() {
        crate::bad_input!("{}: no such file", args.trace.display())
    }
    if args.check_only {
        return check_only(&args);
    }
    let _layer = if args.emulate_counters || args.counters.is_some() && !args.gpu_counts()? {
        Some(emulate_counters()?)
    } else {
        None
    };
    args.check_counter_names()?;
    // The damage policy every command shares: a damaged trace is refused unless --salvage
    // (what cannot be opened at all is left to the replayer's own message).
    if let Ok(reader) = format::TraceReader::open(&args.trace) {
        crate::output::judge(
            &reader.info(),
            reader.path(),
            &crate::output::Met::default(),
            args.salvage,
        )?;
    }
    let opts = args.options();
    match replayer::replay_with_progress(&opts, &mut Bar::new(&opts)) {
        Ok(summary) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&summary.to_json(&args.trace, args.compare))?
                );
            } else {
                print!("{}", summary.to_text_with(args.compare, args.frames_table));
            }
            Ok(code(if args.compare && summary.comparison.failed() {
                1
            } else {
                0
            }))
        }
        Err(
            e @ (ReplayError::Trace(_) | ReplayError::BadOption(_) | ReplayError::Invalid { .. }),
        ) => {
            eprintln!("quarry: {}", e.to_string().replace('\n', " "));
            Ok(2)
        }
        Err(e) => Err(e.into()),
    }
}

/// `quarry replay --check-only`: one line; 0 the GPU can replay the trace, 1 it cannot, 2 bad input.
fn check_only(args: &ReplayArgs) -> anyhow::Result<u8> {
    let _layer = args.emulate_counters.then(emulate_counters).transpose()?;
    match replayer::portability::check(&args.trace, args.gpu.as_deref(), args.drop_unsupported) {
        Ok(c) => {
            println!("{}", c.line());
            Ok(if c.gpu.can_replay() { 0 } else { 1 })
        }
        Err(e @ (ReplayError::Trace(_) | ReplayError::BadOption(_))) => {
            eprintln!("quarry: {}", e.to_string().replace('\n', " "));
            Ok(2)
        }
        Err(e) => Err(e.into()),
    }
}

/// Runs `quarry devices`; returns the process exit code.
pub fn run_devices(args: DevicesArgs) -> anyhow::Result<u8> {
    let _layer = args.emulate_counters.then(emulate_counters).transpose()?;
    let mut gpus = replayer::devices()?;
    // A GPU without counters of its own lists those --counters would measure through
    // VK_LAYER_QUARRY_counters (marked emulated), when that layer is built.
    let _emulation = if !args.emulate_counters && gpus.iter().any(|g| !g.queries.performance_query)
    {
        emulate_counters().ok()
    } else {
        None
    };
    if _emulation.is_some() {
        let emulated = replayer::devices()?;
        for g in gpus.iter_mut().filter(|g| !g.queries.performance_query) {
            if let Some(e) = emulated.iter().find(|e| e.uuid == g.uuid) {
                for (f, ef) in g.queue_families.iter_mut().zip(&e.queue_families) {
                    f.counters = ef.counters.clone();
                }
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&gpus)?);
    } else if gpus.is_empty() {
        println!("no GPU found");
    } else {
        print!("{}", replayer::devices::to_text(&gpus));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_counts() {
        assert_eq!(parse_passes("auto"), Ok(Passes(None)));
        assert_eq!(parse_passes("3"), Ok(Passes(Some(3))));
        assert!(parse_passes("0").is_err() && parse_passes("x").is_err());
    }
}
