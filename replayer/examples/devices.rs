//! `cargo run -p replayer --example devices -- [--json]`: the `quarry devices` output without the root CLI.
fn main() {
    let json = std::env::args().any(|a| a == "--json");
    match (replayer::cli::DevicesArgs { json }).run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("quarry: {e:#}");
            std::process::exit(1);
        }
    }
}
