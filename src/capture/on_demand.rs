//! `quarry capture --trigger`: the layer tracks the program's state and writes a trimmed trace of
//! the next N frames at each trigger (`quarry trigger`, the hotkey, a trigger file,
//! `--trigger-after`, `--trigger-frame`); quarry prints each trace as the layer finishes it and a
//! summary when the program ends.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::status::Status;
use super::{capture_with, exit_code, exit_text, Captured, Extra, TraceState};
use crate::bad_input;

#[derive(clap::Args, Default)]
pub struct TriggerArgs {
    /// Capture on demand: write nothing until a trigger, then a trimmed trace of the next frames
    /// (FILE_1.qtrace, FILE_2.qtrace, ...); trigger with `quarry trigger`, the hotkey, a trigger
    /// file, --trigger-after or --trigger-frame.
    #[arg(long, conflicts_with = "frames")]
    pub trigger: bool,
    /// Frames each trigger captures (default 1).
    #[arg(long, value_name = "N", requires = "trigger")]
    pub trigger_frames: Option<u32>,
    /// Trigger once, SECONDS after the program started.
    #[arg(long, value_name = "SECONDS", requires = "trigger")]
    pub trigger_after: Option<f64>,
    /// Trigger when frame N (0-based) begins.
    #[arg(long, value_name = "N", requires = "trigger")]
    pub trigger_frame: Option<u64>,
    /// Trigger whenever PATH appears (the layer removes it): `touch PATH`.
    #[arg(long, value_name = "PATH", requires = "trigger")]
    pub trigger_file: Option<PathBuf>,
    /// X11 key that triggers in windowed programs (default F12; `none` for no hotkey).
    #[arg(long, value_name = "KEY", requires = "trigger")]
    pub hotkey: Option<String>,
}

pub fn run(
    program: &OsString,
    args: &[OsString],
    output: &Path,
    emulate_counters: bool,
    t: &TriggerArgs,
) -> anyhow::Result<u8> {
    let frames = t.trigger_frames.unwrap_or(1);
    if frames == 0 {
        bad_input!("--trigger-frames must be 1 or more")
    }
    if let Some(k) = &t.hotkey {
        if k != "none" && capture_layer::control::hotkey::parse(k).is_none() {
            bad_input!(
                "--hotkey {k:?}: unknown key (F1-F24, Print, Pause, Scroll_Lock, Insert, Home, \
                 End, a letter or a digit, with optional ctrl+, shift+, alt+; none for no hotkey)"
            )
        }
    }
    let after = match t.trigger_after {
        Some(s) if !(0.0..1e9).contains(&s) => bad_input!("--trigger-after must be 0 or more"),
        Some(s) => Some((Duration::from_secs_f64(s), frames)),
        None => None,
    };
    let mut env = vec![
        ("QUARRY_CAPTURE_TRIGGER", "1".to_string()),
        ("QUARRY_CAPTURE_TRIGGER_FRAMES", frames.to_string()),
    ];
    if t.trigger_frame == Some(0) {
        bad_input!("--trigger-frame must be 1 or more (frame 0 is a plain capture: --frames 0-N)")
    }
    if let Some(n) = t.trigger_frame {
        env.push(("QUARRY_CAPTURE_TRIGGER_FRAME", n.to_string()));
    }
    if let Some(f) = &t.trigger_file {
        let f = super::absolute(f)?;
        env.push((
            "QUARRY_CAPTURE_TRIGGER_FILE",
            f.to_string_lossy().into_owned(),
        ));
    }
    if let Some(k) = &t.hotkey {
        env.push(("QUARRY_CAPTURE_HOTKEY", k.clone()));
    }
    let on_status = Box::new(|s: &Status| match s {
        Status::Trace {
            first,
            frames,
            path,
        } => crate::say!(
            "trace: {} (frames {first}-{})",
            path.display(),
            first + frames.saturating_sub(1)
        ),
        Status::Error(m) => eprintln!("quarry: the layer stopped capturing: {m}"),
        Status::Open(_) => {}
    });
    let extra = Extra {
        env,
        on_status: Some(on_status),
        trigger_after: after,
    };
    let (c, _) = capture_with(program, args, output, None, false, emulate_counters, extra)?;
    let prog = program.to_string_lossy();
    let status = exit_code(c.status);
    if !c.status.success() {
        eprintln!("quarry: {prog} {}", exit_text(c.status));
    }
    let traces: Vec<&PathBuf> = c
        .statuses
        .iter()
        .filter_map(|s| match s {
            Status::Trace { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    // A trace the program's end interrupted (killed while capturing) was opened, never finished.
    let unfinished = c.statuses.iter().find_map(|s| match s {
        Status::Open(p) if !traces.contains(&p) => Some(p.clone()),
        _ => None,
    });
    let mut bad = Vec::new();
    for path in &traces {
        match TraceState::read(path)? {
            Some(state) if state.problem.is_none() => {
                if let Some(info) = &state.info {
                    crate::say!("  {}: {}", path.display(), super::counts_line(info));
                }
            }
            _ => bad.push(path.display().to_string()),
        }
    }
    let errors: Vec<&String> = c
        .statuses
        .iter()
        .filter_map(|s| match s {
            Status::Error(m) => Some(m),
            _ => None,
        })
        .collect();
    if let Some(path) = &unfinished {
        if let Some(state) = TraceState::read(path)? {
            eprintln!("quarry: {}", state.last_line(&c_for(path, &c)));
            return Ok(if status == 0 { 1 } else { status });
        }
    }
    if traces.is_empty() && errors.is_empty() {
        eprintln!(
            "quarry: no trigger came: {prog} wrote no trace ({})",
            exit_text(c.status)
        );
        return Ok(if status == 0 { 1 } else { status });
    }
    if let Some(e) = errors.first() {
        eprintln!(
            "quarry: {} traces complete, then a write error stopped the capture: {e}",
            traces.len() - bad.len()
        );
        return Ok(if status == 0 { 1 } else { status });
    }
    if !bad.is_empty() {
        eprintln!("quarry: traces not complete: {}", bad.join(", "));
        return Ok(if status == 0 { 1 } else { status });
    }
    let names: Vec<String> = traces.iter().map(|p| p.display().to_string()).collect();
    let n = match traces.len() {
        1 => "1 trace".to_string(),
        n => format!("{n} traces"),
    };
    crate::say!("{n} complete: {}", names.join(", "));
    Ok(status)
}

/// `c` as if its trace were `path` (for the trace-state line of an interrupted trigger trace).
fn c_for(path: &Path, c: &Captured) -> Captured {
    Captured {
        status: c.status,
        trace: path.to_path_buf(),
        signal: c.signal,
        statuses: Vec::new(),
    }
}
