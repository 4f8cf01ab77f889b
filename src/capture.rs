//! `quarry capture [-o FILE] [--force] [--frames A-B] -- PROGRAM [ARGS...]`: run a program under the
//! capture layer (no system-wide install: a temporary manifest names the built layer) and say what
//! became of the trace.
//!
//! The launcher protects the user's files: an existing trace is kept unless `--force`, and an
//! output it cannot write is refused before the program starts. SIGINT, SIGTERM and SIGHUP are
//! passed to the program while quarry waits ([`forward`]), so the temporary manifests are always
//! removed and the last line always says the trace's state. The exit status is the program's
//! (128 + signal when a signal ended it); 2 for launcher errors; 1 when the program succeeded but
//! the trace is missing or unfinished.

mod forward;
mod on_demand;
mod status;

use std::ffi::OsString;
use std::io::Read as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use anyhow::Context as _;
use capture_layer::launch::{self, LayerDir};
use format::layout::BlockKind;
use format::record::Record;
use format::TraceReader;

use crate::bad_input;
use crate::output::human_bytes;

#[derive(clap::Args)]
pub struct Args {
    /// Trace file to write (default `<program>_<YYYYmmdd_HHMMSS>.qtrace` in the current directory).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Overwrite FILE if it exists (without it an existing file is never touched).
    #[arg(long)]
    force: bool,
    /// Frames to capture: `A-B`, `A-` or `A` (0-based); the trace is finished when frame B ends.
    #[arg(long, value_name = "A-B")]
    frames: Option<String>,
    /// Put VK_LAYER_QUARRY_counters under the capture layer, so the program sees
    /// VK_KHR_performance_query (emulated from core queries) on GPUs without it.
    #[arg(long)]
    emulate_counters: bool,
    /// Capture for another GPU: a profile from `quarry devices --json` on the target machine
    /// (`FILE`, or `FILE#INDEX` when it lists several GPUs); the program sees only what both GPUs
    /// offer, and the trace records the profile.
    #[arg(long, value_name = "FILE")]
    target: Option<String>,
    #[command(flatten)]
    trigger: on_demand::TriggerArgs,
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
    /// A signal quarry received (and passed on) while the program ran.
    pub signal: Option<i32>,
    /// What the layer reported on its status channel.
    pub statuses: Vec<status::Status>,
}

/// Runs `program args` under the layer writing `output` (an existing file there is replaced), with
/// an optional frame range; `capture_stdout` keeps the program's stdout away from the user (the
/// demo prints its own summary). Signals quarry receives meanwhile go to the program.
pub fn capture(
    program: &OsString,
    args: &[OsString],
    output: &Path,
    frames: Option<&str>,
    capture_stdout: bool,
    emulate_counters: bool,
) -> anyhow::Result<(Captured, Vec<u8>)> {
    capture_with(
        program,
        args,
        output,
        frames,
        capture_stdout,
        emulate_counters,
        Extra::default(),
    )
}

/// Called for each line the layer sends.
pub type OnStatus = Box<dyn FnMut(&status::Status) + Send>;

/// What a capture on demand adds to [`capture`].
#[derive(Default)]
pub struct Extra {
    /// Layer environment (trigger settings).
    pub env: Vec<(&'static str, String)>,
    /// Called on a thread for each line the layer sends (a finished trace, a write error).
    pub on_status: Option<OnStatus>,
    /// Seconds after which quarry sends a trigger itself.
    pub trigger_after: Option<(std::time::Duration, u32)>,
}

/// [`capture`], plus the status channel's lines (every trace the layer finished).
#[allow(clippy::too_many_arguments)]
fn capture_with(
    program: &OsString,
    args: &[OsString],
    output: &Path,
    frames: Option<&str>,
    capture_stdout: bool,
    emulate_counters: bool,
    mut extra: Extra,
) -> anyhow::Result<(Captured, Vec<u8>)> {
    if let Some(f) = frames {
        // The layer would only log a bad range inside the app; check it here so the user sees it.
        capture_layer::settings::Settings::parse(None, None, Some(f.to_string()))
            .map_err(crate::output::BadInput)?;
    }
    // Installed before the manifests exist, so that no signal can leave them behind.
    let forwarding = forward::Forwarding::install();
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
    for (env, _) in capture_layer::settings::TRIGGER_KEYS {
        cmd.env_remove(env);
    }
    for (k, v) in &extra.env {
        cmd.env(k, v);
    }
    // The layer reports finished traces here, and finishes its trace if quarry dies.
    let mut channel = status::Channel::new().context("cannot create the layer's status channel")?;
    let mut dirs = vec![layer.dir.as_path()];
    dirs.extend(counters.as_ref().map(|c| c.dir.as_path()));
    channel.apply(&mut cmd, &dirs);
    let trace = absolute(output)?;
    // A stale trace from an earlier run would be mistaken for this run's output.
    let _ = std::fs::remove_file(&trace);
    let prog = program.to_string_lossy();
    if capture_stdout {
        cmd.stdout(Stdio::piped());
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bad_input!("cannot run {prog}: program not found")
        }
        Err(e) => return Err(e).with_context(|| format!("cannot run {prog}")),
    };
    forwarding.started(child.id());
    let child_pid = child.id();
    let mut each = extra.on_status.take();
    channel.started(move |s| {
        if let Some(f) = each.as_mut() {
            f(s)
        }
    });
    if let Some((after, n)) = extra.trigger_after {
        // Sent on the channel: the layer's control thread takes it like `quarry trigger`.
        let ch = channel.sender();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            ch.trigger(n);
        });
    }
    let mut stdout = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_end(&mut stdout);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {prog}"))?;
    forwarding.stopped();
    let signal = forwarding.received();
    let statuses = channel.finish();
    // A program killed by a signal leaves its trigger socket behind.
    let _ = std::fs::remove_file(capture_layer::control::sockets_dir().join(child_pid.to_string()));
    // The manifests go before the handlers: a signal now ends quarry with nothing left behind.
    drop(layer);
    drop(counters);
    drop(forwarding);
    Ok((
        Captured {
            status,
            trace,
            signal,
            statuses,
        },
        stdout,
    ))
}

/// Hands `--target` to the layer (`QUARRY_CAPTURE_TARGET`, inherited by the program) after
/// checking that the profile reads; without it no target reaches the program.
fn set_target(target: Option<&str>) -> anyhow::Result<()> {
    let Some(spec) = target else {
        std::env::remove_var("QUARRY_CAPTURE_TARGET");
        return Ok(());
    };
    // The layer reads it again in the app and says which target it captures for.
    layer_support::profile::load(spec)
        .map_err(|e| crate::output::BadInput(format!("--target {e}")))?;
    let (path, index) = match spec.rsplit_once('#') {
        Some((f, i)) if i.bytes().all(|b| b.is_ascii_digit()) && !i.is_empty() => (f, Some(i)),
        _ => (spec, None),
    };
    let mut abs = absolute(Path::new(path))?.into_os_string();
    if let Some(i) = index {
        abs.push(format!("#{i}"));
    }
    std::env::set_var("QUARRY_CAPTURE_TARGET", abs);
    Ok(())
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// `frames 3, calls 1234, queries 56, 120.4 KiB` for a trace.
pub fn summary_line(trace: &Path) -> anyhow::Result<String> {
    let r = TraceReader::open(trace)?;
    let mut line = counts_line(&r.info());
    if !r.info().complete {
        line.push_str(" (incomplete: the writer did not finish it)");
    }
    Ok(line)
}

fn counts_line(info: &format::Info) -> String {
    let count = |k: &str| info.record_counts.get(k).copied().unwrap_or(0);
    format!(
        "frames {}, calls {}, query reads {}, {}",
        info.frames,
        count("Call"),
        count("QueryResults"),
        human_bytes(info.file_bytes)
    )
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let Some((program, rest)) = args.command.split_first() else {
        bad_input!("no program given (usage: quarry capture -- PROGRAM [ARGS...])")
    };
    let output = match args.output {
        Some(o) => o,
        None => default_output(program),
    };
    check_output(&output, args.force)?;
    set_target(args.target.as_deref())?;
    if args.trigger.trigger {
        return on_demand::run(program, rest, &output, args.emulate_counters, &args.trigger);
    }
    let (c, _) = capture(
        program,
        rest,
        &output,
        args.frames.as_deref(),
        false,
        args.emulate_counters,
    )?;
    let prog = program.to_string_lossy();
    let status = exit_code(c.status);
    let Some(state) = TraceState::read(&c.trace)? else {
        // A trimmed capture writes nothing until its first frame begins.
        let first = args
            .frames
            .as_deref()
            .and_then(|f| f.split('-').next()?.trim().parse::<u64>().ok())
            .filter(|&f| f > 0);
        let why = match first {
            Some(first) => format!(
                "a trimmed capture starts at frame {first}, and the program ended before it (or \
                 never created a Vulkan instance);"
            ),
            None => "did it create a Vulkan instance?".to_string(),
        };
        eprintln!(
            "quarry: {prog} wrote no trace to {} ({why} {})",
            c.trace.display(),
            exit_text(c.status)
        );
        return Ok(if status == 0 { 1 } else { status });
    };
    if !c.status.success() {
        eprintln!("quarry: {prog} {}", exit_text(c.status));
    }
    crate::say!("trace: {}", c.trace.display());
    if let Some(info) = &state.info {
        crate::say!("{}", counts_line(info));
    }
    let complete = state.problem.is_none();
    match state.last_line(&c) {
        line if complete => crate::say!("{line}"),
        line => eprintln!("quarry: {line}"),
    }
    Ok(if status == 0 && !complete { 1 } else { status })
}

/// The program's exit status as quarry's: its code, or 128 + the signal that ended it.
fn exit_code(s: ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        (None, None) => 1,
    }
}

/// `<program>_<YYYYmmdd_HHMMSS>.qtrace` in local time, with `_2`, `_3`, ... if that exists.
fn default_output(program: &OsString) -> PathBuf {
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    let stem = format!("{name}_{}", local_timestamp());
    let mut path = PathBuf::from(format!("{stem}.qtrace"));
    let mut n = 2;
    while path.symlink_metadata().is_ok() {
        path = PathBuf::from(format!("{stem}_{n}.qtrace"));
        n += 1;
    }
    path
}

fn local_timestamp() -> String {
    // SAFETY: time and localtime_r write only into the struct we pass.
    let tm = unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        tm
    };
    format!(
        "{:04}{:02}{:02}_{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Refuses, before anything runs, an output that is a directory, that exists (unless `force`),
/// or whose directory is missing or cannot be written.
fn check_output(path: &Path, force: bool) -> anyhow::Result<()> {
    let shown = path.display();
    if path.is_dir() {
        bad_input!("{shown}: is a directory (give a trace file name with -o)")
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bad_input!(
            "cannot write {shown}: directory {} does not exist",
            dir.display()
        )
    }
    if path.symlink_metadata().is_ok() && !force {
        bad_input!("{shown} exists: not overwriting it (use --force, or another -o)")
    }
    // The layer creates the file (and --force removes the old one): both need a writable directory.
    let probe = dir.join(format!(".quarry-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => bad_input!("cannot write {shown}: {e}"),
    }
}

/// What a capture left in its trace file.
struct TraceState {
    /// Counts, when the file could be read at all.
    info: Option<format::Info>,
    /// Why it is not complete; `None` for a finished, intact trace.
    problem: Option<Problem>,
}

enum Problem {
    /// The layer stopped writing: its note's reason, or what the file system says.
    WriteError(String),
    /// Readable up to a point: the writer never finished.
    Unfinished,
    /// Not readable at all (killed before the header reached the file, ...).
    Unreadable(String),
}

impl TraceState {
    /// `None` when there is no file.
    fn read(trace: &Path) -> anyhow::Result<Option<TraceState>> {
        if !trace.is_file() {
            return Ok(None);
        }
        let r = match TraceReader::open(trace) {
            Ok(r) => r,
            Err(e) => {
                return Ok(Some(TraceState {
                    info: None,
                    problem: Some(Problem::Unreadable(e.to_string())),
                }))
            }
        };
        let info = r.info();
        let problem = if info.complete {
            None
        } else if let Some(reason) = stop_note(&r) {
            Some(Problem::WriteError(reason))
        } else if let Some(full) = disk_full(trace) {
            Some(Problem::WriteError(full))
        } else {
            Some(Problem::Unfinished)
        };
        Ok(Some(TraceState {
            info: Some(info),
            problem,
        }))
    }

    /// The line that ends `quarry capture`'s output.
    fn last_line(&self, c: &Captured) -> String {
        let path = c.trace.display();
        let frames = self.info.as_ref().map_or(0, |i| i.frames);
        let lost = self.info.as_ref().map_or(0, |i| i.lost_bytes);
        let cause = match (c.status.signal(), c.signal) {
            (Some(sig), _) => format!("the program was killed by {}", forward::name(sig)),
            (None, Some(sig)) => format!(
                "quarry passed {} to the program, which {}",
                forward::name(sig),
                exit_text(c.status)
            ),
            (None, None) => format!("the program {}", exit_text(c.status)),
        };
        match &self.problem {
            None => format!("trace complete: {path}"),
            Some(Problem::WriteError(reason)) => format!(
                "trace stopped by a write error: {reason}; {frames} frames readable in {path} \
                 ({cause})"
            ),
            // At a normal exit the layer finishes the trace itself (atexit): an unfinished one
            // means it stopped writing, and its own `quarry:` line on stderr says why.
            Some(Problem::Unfinished) if c.status.signal().is_none() && c.signal.is_none() => {
                format!(
                    "trace stopped early: {frames} frames readable in {path} ({cause}, but the \
                     layer stopped writing the trace after a write or internal error: see its \
                     `quarry:` message above; or the program left through _exit)"
                )
            }
            Some(Problem::Unfinished) => {
                let lost = match lost {
                    0 => String::new(),
                    n => format!("{} of damaged or partial blocks and ", human_bytes(n)),
                };
                format!(
                    "trace recovered with {frames} frames: {path} ({cause} before the trace was \
                     finished; lost: {lost}the records the layer had not yet written)"
                )
            }
            Some(Problem::Unreadable(e)) => {
                format!("trace unreadable: {e} ({cause} before the trace was written)")
            }
        }
    }
}

/// The reason in the layer's `capture stopped: ...` note, which it writes into the last block
/// when a write fails (if the failure still lets it write that block).
fn stop_note(r: &TraceReader) -> Option<String> {
    let last = r
        .blocks()
        .iter()
        .rposition(|b| b.kind() == BlockKind::Records)?;
    r.block_records(last)
        .ok()?
        .into_iter()
        .rev()
        .find_map(|rec| match rec {
            Record::Note(n) => n
                .message
                .strip_prefix("capture stopped: ")
                .map(str::to_owned),
            _ => None,
        })
}

/// For an unfinished trace whose layer left no note: a file system with no room left is the
/// likely write error (the note itself could not be written).
fn disk_full(trace: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = trace.parent()?;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes only into the struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    // Less than one of the writer's blocks: the next block could not have been written.
    (free < 1 << 20).then(|| {
        format!(
            "no space left on device ({} free on {})",
            human_bytes(free),
            dir.display()
        )
    })
}

pub fn exit_text(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by {}", forward::name(sig)),
        (None, None) => format!("was killed ({s})"),
    }
}
