//! `cargo run -p replayer --example devices -- [--json]`: the `quarry devices` output without the root CLI.
fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let emulate_counters = std::env::args().any(|a| a == "--emulate-counters");
    match (replayer::cli::DevicesArgs {
        json,
        emulate_counters,
    })
    .run()
    {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("quarry: {e:#}");
            std::process::exit(1);
        }
    }
}
