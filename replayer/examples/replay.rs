//! `cargo run -p replayer --example replay -- TRACE [--gpu SEL] [--loop N] [--results OUT] [--compare] [--validate]`:
//! `quarry replay` without the root CLI.
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: replayer::cli::ReplayArgs,
}

fn main() {
    let cli = Cli::parse();
    match cli.args.run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("quarry: {e:#}");
            std::process::exit(1);
        }
    }
}
