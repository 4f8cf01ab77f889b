//! clap arguments and entry points for `quarry devices` and `quarry replay`; the root binary wires them.

use clap::Args;

/// `quarry devices [--json]`: list GPUs and their query capabilities.
#[derive(Args, Debug, Clone)]
pub struct DevicesArgs {
    /// Print one JSON array of GPUs instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `quarry devices`; returns the process exit code.
pub fn run_devices(args: &DevicesArgs) -> anyhow::Result<i32> {
    let gpus = crate::devices::devices()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&gpus)?);
    } else if gpus.is_empty() {
        println!("no GPU found");
    } else {
        print!("{}", crate::devices::to_text(&gpus));
    }
    Ok(0)
}
