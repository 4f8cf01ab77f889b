//! `quarry replay` and `quarry devices`: thin wrappers over the replayer's own clap argument structs, so
//! the flags and their help live in one place.

pub use replayer::cli::{DevicesArgs, ReplayArgs};

fn code(c: i32) -> u8 {
    u8::try_from(c).unwrap_or(1)
}

pub fn run_replay(args: ReplayArgs) -> anyhow::Result<u8> {
    if !args.trace.is_file() {
        crate::bad_input!("{}: no such file", args.trace.display())
    }
    Ok(code(args.run()?))
}

pub fn run_devices(args: DevicesArgs) -> anyhow::Result<u8> {
    Ok(code(args.run()?))
}
