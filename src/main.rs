//! The `quarry` command. Each subcommand lives in its own module with an `Args` struct and a
//! `run` function; adding one is a variant of `Command` and an arm in `main`.
//!
//! Exit codes: 0 success, 1 failure or mismatch, 2 bad input (unreadable or damaged file, usage).
//! Every error, clap's usage errors included, is one `quarry: ...` line on stderr.

mod capture;
mod compare;
mod demo;
mod dump;
mod info;
mod layer;
mod output;
mod replay;
mod trigger;
mod view;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "quarry",
    version,
    about = "Vulkan capture and replay for GPU queries"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Capture quarry-demo, replay it on every GPU, compare and view: the whole loop.
    Demo(demo::Args),
    /// Run a program under the capture layer: `quarry capture -o t.qtrace -- vkcube --c 100`.
    Capture(capture::Args),
    /// Re-execute a trace headless on any GPU and re-read every query.
    Replay(replay::ReplayArgs),
    /// GPUs and their query capabilities.
    Devices(replay::DevicesArgs),
    /// Open traces and results in the desktop viewer.
    View(view::Args),
    /// Write the query table as CSV, JSON or a Perfetto (Chrome JSON) trace.
    Export(view::ExportArgs),
    /// Summary of a trace or results file: header, device, record counts, frames, blocks.
    Info(info::Args),
    /// Every record of a trace or results file, one per line, call parameters decoded.
    Dump(dump::Args),
    /// Compare results files of one trace: matched queries and counters, largest change first;
    /// exit 1 when a deterministic result differs or a change passes --threshold.
    Compare(compare::Args),
    /// Install the capture layer's manifest where the Vulkan loader finds it (or remove it).
    Layer(layer::Args),
    /// Ask a running `quarry capture --trigger` to capture its next frames.
    Trigger(trigger::Args),
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Capture(a) => capture::run(a),
        Command::Replay(a) => replay::run_replay(a),
        Command::Devices(a) => replay::run_devices(a),
        Command::View(a) => view::run(a),
        Command::Export(a) => view::run_export(a),
        Command::Info(a) => info::run(a).map(|()| 0),
        Command::Dump(a) => dump::run(a).map(|()| 0),
        Command::Compare(a) => compare::run(a),
        Command::Layer(a) => layer::run(a),
        Command::Trigger(a) => trigger::run(a),
    };
    let code = match result {
        Ok(code) => code,
        Err(e) => output::report(&e),
    };
    // A GPU the replay gave up on (busy or lost): the driver's exit handlers would wait for it.
    if replayer::gpu_abandoned() {
        replayer::exit_now(i32::from(code));
    }
    ExitCode::from(code)
}

/// Parses the command line. Help and version print as clap prints them (exit 0); usage errors
/// and input files that are directories become one `quarry:` line and exit 2.
fn parse() -> Result<Cli, ExitCode> {
    let usage = |line: String| {
        eprintln!("quarry: {line}");
        ExitCode::from(2)
    };
    let matches = Cli::command().try_get_matches().map_err(clap_error)?;
    if let Some(dir) = directory_input(&matches) {
        return Err(usage(format!("{}: is a directory", dir.display())));
    }
    Cli::from_arg_matches(&matches).map_err(clap_error)
}

/// Input file arguments, by subcommand and argument id: checked here once, before any
/// subcommand opens them, so a directory is reported as one rather than as a failed map.
const INPUT_FILES: [(&str, &str); 6] = [
    ("info", "file"),
    ("dump", "file"),
    ("replay", "trace"),
    ("view", "files"),
    ("export", "files"),
    ("compare", "runs"),
];

fn directory_input(matches: &clap::ArgMatches) -> Option<std::path::PathBuf> {
    let (name, sub) = matches.subcommand()?;
    INPUT_FILES
        .iter()
        .filter(|(n, _)| *n == name)
        .filter_map(|(_, id)| sub.try_get_raw(id).ok().flatten())
        .flatten()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_dir())
}

/// A clap error as one line: its message, clap's tip when it has one, and the usage.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.render().to_string();
    // clap's layout: the message (maybe wrapped over lines), a blank line, tips, the usage.
    let message = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut line = match e.kind() {
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            "a command is required".to_owned()
        }
        _ => message
            .strip_prefix("error: ")
            .unwrap_or(&message)
            .to_owned(),
    };
    for tip in text.lines().filter_map(|l| l.trim().strip_prefix("tip: ")) {
        line.push_str(&format!("; {tip}"));
    }
    match text.lines().find_map(|l| l.trim().strip_prefix("Usage: ")) {
        Some(usage) => eprintln!("quarry: {line} (usage: {usage}; see --help)"),
        None => eprintln!("quarry: {line} (see --help)"),
    }
    ExitCode::from(2)
}
