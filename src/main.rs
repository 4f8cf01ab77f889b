//! The `quarry` command. Each subcommand lives in its own module with an `Args` struct and a
//! `run` function; adding one is a variant of `Command` and an arm in `main`.
//!
//! Exit codes: 0 success, 1 failure or mismatch, 2 bad input (unreadable or damaged file, usage).

mod capture;
mod demo;
mod dump;
mod info;
mod output;
mod replay;
mod view;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Capture(a) => capture::run(a),
        Command::Replay(a) => replay::run_replay(a),
        Command::Devices(a) => replay::run_devices(a),
        Command::View(a) => view::run(a),
        Command::Export(a) => view::run_export(a),
        Command::Info(a) => info::run(a).map(|()| 0),
        Command::Dump(a) => dump::run(a).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => output::report(&e),
    }
}
