//! The `quarry` command. Each subcommand lives in its own module with an `Args` struct and a
//! `run` function; adding one is a variant of `Command` and an arm in `main`.
//!
//! Exit codes: 0 success, 2 bad input (unreadable or damaged file, usage error), 1 anything else.

mod dump;
mod info;
mod output;

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
    /// Summary of a trace or results file: header, device, record counts, frames, blocks.
    Info(info::Args),
    /// Every record of a trace or results file, one per line.
    Dump(dump::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info(a) => info::run(a),
        Command::Dump(a) => dump::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => output::report(&e),
    }
}
