//! `cargo run -p replayer --example devices -- [--json]`: the `quarry devices` listing without the root CLI.
fn main() {
    let json = std::env::args().any(|a| a == "--json");
    match replayer::devices() {
        Ok(gpus) if json => match serde_json::to_string_pretty(&gpus) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("quarry: {e}");
                std::process::exit(1);
            }
        },
        Ok(gpus) if gpus.is_empty() => println!("no GPU found"),
        Ok(gpus) => print!("{}", replayer::devices::to_text(&gpus)),
        Err(e) => {
            eprintln!("quarry: {e}");
            std::process::exit(1);
        }
    }
}
