//! `quarry layer install|uninstall|status [--user]`: manifests for the built capture and counters
//! layers where the Vulkan loader finds explicit layers, so that programs run the usual way with
//! `VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture app`. The manifests name the built libraries
//! by absolute path: rebuild in place and they stay valid; move or clean the build and install
//! again.

use std::path::{Path, PathBuf};

use capture_layer::launch as capture;
use layer_support::counters;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Write the manifests (system-wide in /usr/local/share, or --user).
    Install(Scope),
    /// Remove the manifests that `install` wrote.
    Uninstall(Scope),
    /// Where the manifests are installed and which libraries they name.
    Status,
}

#[derive(clap::Args)]
struct Scope {
    /// For this user only: $XDG_DATA_HOME/vulkan/explicit_layer.d (~/.local/share by default).
    #[arg(long)]
    user: bool,
}

/// The system-wide place (the loader also reads /usr/share, which belongs to packages).
const SYSTEM_DIR: &str = "/usr/local/share/vulkan/explicit_layer.d";

/// The manifest files quarry installs.
const MANIFESTS: [&str; 2] = [capture::MANIFEST_FILE, counters::MANIFEST_FILE];

fn user_dir() -> anyhow::Result<PathBuf> {
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/share"),
            None => crate::bad_input!("neither XDG_DATA_HOME nor HOME is set"),
        },
    };
    Ok(data.join("vulkan/explicit_layer.d"))
}

fn dir(scope: &Scope) -> anyhow::Result<PathBuf> {
    if scope.user {
        user_dir()
    } else {
        Ok(PathBuf::from(SYSTEM_DIR))
    }
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.action {
        Action::Install(s) => install(&dir(&s)?),
        Action::Uninstall(s) => uninstall(&dir(&s)?),
        Action::Status => status(),
    }
}

fn install(dir: &Path) -> anyhow::Result<u8> {
    let library = capture::find_layer_library()?;
    let path = capture::write_manifest(dir, &library)?;
    crate::say!("installed {} -> {}", path.display(), library.display());
    // The counters layer is optional: quarry capture works without it.
    match counters::find_layer_library() {
        Ok(lib) => {
            let path = counters::write_manifest(dir, &lib)?;
            crate::say!("installed {} -> {}", path.display(), lib.display());
        }
        Err(e) => eprintln!("quarry: counters layer not installed: {e}"),
    }
    crate::say!(
        "run programs with VK_LOADER_LAYERS_ENABLE={} (and QUARRY_CAPTURE_FILE=trace.qtrace)",
        capture_layer::LAYER_NAME
    );
    Ok(0)
}

fn uninstall(dir: &Path) -> anyhow::Result<u8> {
    let mut removed = 0;
    for m in MANIFESTS {
        let path = dir.join(m);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                removed += 1;
                crate::say!("removed {}", path.display());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("cannot remove {}: {e}", path.display()),
        }
    }
    if removed == 0 {
        crate::say!("no quarry layer manifests in {}", dir.display());
    }
    Ok(0)
}

fn status() -> anyhow::Result<u8> {
    let mut dirs = vec![PathBuf::from(SYSTEM_DIR)];
    if let Ok(d) = user_dir() {
        dirs.push(d);
    }
    let mut found = false;
    for dir in &dirs {
        for m in MANIFESTS {
            let path = dir.join(m);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            found = true;
            match library_path(&text) {
                Some(lib) if Path::new(&lib).is_file() => {
                    crate::say!("{} -> {lib}", path.display())
                }
                Some(lib) => crate::say!("{} -> {lib} (missing: install again)", path.display()),
                None => crate::say!("{} (no library_path)", path.display()),
            }
        }
    }
    if !found {
        let list: Vec<_> = dirs.iter().map(|d| d.display().to_string()).collect();
        crate::say!("not installed (looked in {})", list.join(", "));
    }
    Ok(0)
}

/// The manifest's `library_path` value (as `write_manifest` writes it: one JSON string).
fn library_path(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(v["layer"]["library_path"].as_str()?.to_owned())
}
