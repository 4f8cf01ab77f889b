//! `quarry capture [-o FILE] [--frames A-B] -- PROGRAM [ARGS...]`: run a program under the capture
//! layer (no system-wide install: a temporary manifest names the built layer) and summarise the trace.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use anyhow::Context as _;
use capture_layer::launch::{self, LayerDir};
use format::TraceReader;

use crate::bad_input;
use crate::output::human_bytes;

#[derive(clap::Args)]
pub struct Args {
    /// Trace file to write (default `<program>.qtrace` in the current directory).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Frames to capture: `A-B`, `A-` or `A` (0-based); the trace is finished when frame B ends.
    #[arg(long, value_name = "A-B")]
    frames: Option<String>,
    /// Put VK_LAYER_QUARRY_counters under the capture layer, so the program sees
    /// VK_KHR_performance_query (emulated from core queries) on GPUs without it.
    #[arg(long)]
    emulate_counters: bool,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<OsString>,
}

/// What one capture produced.
pub struct Captured {
    pub status: ExitStatus,
    pub trace: PathBuf,
}

/// Runs `program args` under the layer writing `output`, with an optional frame range; `quiet`
/// keeps the program's stdout away from the user (the demo prints its own summary).
pub fn capture(
    program: &OsString,
    args: &[OsString],
    output: &Path,
    frames: Option<&str>,
    capture_stdout: bool,
    emulate_counters: bool,
) -> anyhow::Result<(Captured, Vec<u8>)> {
    if let Some(f) = frames {
        // The layer would only log a bad range inside the app; check it here so the user sees it.
        capture_layer::settings::Settings::parse(None, None, Some(f.to_string()))
            .map_err(crate::output::BadInput)?;
    }
    let library = launch::find_layer_library()?;
    let layer = LayerDir::new(&library)?;
    let mut cmd = launch::command(program, args, output, &layer)?;
    let counters = if emulate_counters {
        let counters = layer_support::counters::LayerDir::for_built_layer()?;
        let current = |key: &str| {
            cmd.get_envs()
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.map(OsString::from))
        };
        // The loader stacks layers enabled by VK_LOADER_LAYERS_ENABLE in the order it finds their
        // manifests, first closest to the program: the capture layer's directory comes first so the
        // emulation sits below it (the capture records the program's performance-query calls and
        // the emulation answers them).
        let [(_, counters_dir), (enable_key, enable)] =
            counters.env_values(None, current("VK_LOADER_LAYERS_ENABLE"));
        let mut paths = current("VK_ADD_LAYER_PATH").unwrap_or_default();
        if !paths.is_empty() {
            paths.push(":");
        }
        paths.push(counters_dir);
        cmd.env("VK_ADD_LAYER_PATH", paths);
        cmd.env(enable_key, enable);
        Some(counters)
    } else {
        None
    };
    if let Some(f) = frames {
        cmd.env("QUARRY_CAPTURE_FRAMES", f);
    } else {
        cmd.env_remove("QUARRY_CAPTURE_FRAMES");
    }
    cmd.env_remove("QUARRY_CAPTURE_DISABLE");
    let trace = absolute(output)?;
    // A stale trace from an earlier run would be mistaken for this run's output.
    let _ = std::fs::remove_file(&trace);
    let prog = program.to_string_lossy();
    let (status, stdout) = if capture_stdout {
        cmd.stderr(std::process::Stdio::inherit());
        let out = match cmd.output() {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bad_input!("cannot run {prog}: program not found")
            }
            Err(e) => return Err(e).with_context(|| format!("cannot run {prog}")),
        };
        (out.status, out.stdout)
    } else {
        match cmd.status() {
            Ok(s) => (s, Vec::new()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bad_input!("cannot run {prog}: program not found")
            }
            Err(e) => return Err(e).with_context(|| format!("cannot run {prog}")),
        }
    };
    drop(layer);
    drop(counters);
    Ok((Captured { status, trace }, stdout))
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// `frames 3, calls 1234, queries 56, 120.4 KiB` for a finished trace.
pub fn summary_line(trace: &Path) -> anyhow::Result<String> {
    let r = TraceReader::open(trace)?;
    let info = r.info();
    let count = |k: &str| info.record_counts.get(k).copied().unwrap_or(0);
    let mut line = format!(
        "frames {}, calls {}, query reads {}, {}",
        info.frames,
        count("Call"),
        count("QueryResults"),
        human_bytes(info.file_bytes)
    );
    if !info.complete {
        line.push_str(" (incomplete: the program did not destroy its Vulkan instance)");
    }
    Ok(line)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let Some((program, rest)) = args.command.split_first() else {
        bad_input!("no program given (usage: quarry capture -- PROGRAM [ARGS...])")
    };
    let output = match args.output {
        Some(o) => o,
        None => {
            let name = Path::new(program)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into());
            PathBuf::from(format!("{name}.qtrace"))
        }
    };
    let (c, _) = capture(
        program,
        rest,
        &output,
        args.frames.as_deref(),
        false,
        args.emulate_counters,
    )?;
    if !c.trace.is_file() {
        // A trimmed capture writes nothing until its first frame begins.
        let first = args
            .frames
            .as_deref()
            .and_then(|f| f.split('-').next()?.trim().parse::<u64>().ok())
            .filter(|&f| f > 0);
        if let Some(first) = first {
            anyhow::bail!(
                "{} wrote no trace to {}: a trimmed capture starts at frame {first}, and the program \
                 ended before it (or never created a Vulkan instance; {})",
                program.to_string_lossy(),
                c.trace.display(),
                exit_text(c.status)
            );
        }
        anyhow::bail!(
            "{} wrote no trace to {} (did it create a Vulkan instance? {})",
            program.to_string_lossy(),
            c.trace.display(),
            exit_text(c.status)
        );
    }
    crate::say!("trace: {}", c.trace.display());
    crate::say!("{}", summary_line(&c.trace)?);
    if !c.status.success() {
        eprintln!(
            "quarry: {} {}",
            program.to_string_lossy(),
            exit_text(c.status)
        );
        return Ok(1);
    }
    Ok(0)
}

pub fn exit_text(s: ExitStatus) -> String {
    match s.code() {
        Some(c) => format!("exited with status {c}"),
        None => format!("was killed ({s})"),
    }
}
