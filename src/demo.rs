//! `quarry demo`: the whole loop on this machine. Capture quarry-demo (queries with known
//! answers) under the layer, replay the trace on every GPU with one results file each, print the
//! comparisons, open the viewer when there is a display, and say how to do the same for any app.
//!
//! Finding the pieces: `quarry-demo` is a binary of another package and the capture layer a
//! cdylib, and `cargo run -p quarry` builds neither next to `quarry`. So when either is missing
//! next to the running executable and this executable sits in a cargo target directory of the
//! workspace it was built from, `quarry demo` runs `cargo build -p demo -p capture_layer` with the
//! same profile and target directory, which puts both beside it. `QUARRY_DEMO_BIN` and
//! `QUARRY_CAPTURE_LAYER_LIBRARY` override the search (installed copies, packaging).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::capture;

#[derive(clap::Args)]
pub struct Args {
    /// Directory for the trace and the results files.
    #[arg(long, value_name = "DIR", default_value = "quarry-demo-out")]
    out: PathBuf,
    /// GPU that quarry-demo captures on (index, UUID or part of the name); replays use every GPU.
    #[arg(long, value_name = "SEL")]
    gpu: Option<String>,
    /// Frames quarry-demo renders.
    #[arg(long, value_name = "N", default_value_t = 3)]
    frames: u32,
    /// Do not open the viewer at the end.
    #[arg(long)]
    no_view: bool,
}

/// The workspace this binary was built from (its scripts and manifest).
const WORKSPACE: &str = env!("CARGO_MANIFEST_DIR");
const DEMO_BIN: &str = "quarry-demo";
/// Kept in step with scripts/deps.sh, for a binary run away from its source tree.
const PACKAGES: [&str; 6] = [
    "mesa-vulkan-drivers",
    "libvulkan1",
    "vulkan-tools",
    "vulkan-validationlayers",
    "xvfb",
    "libxkbcommon-x11-0",
];

pub fn run(args: Args) -> anyhow::Result<u8> {
    if args.frames == 0 {
        crate::bad_input!("--frames must be at least 1")
    }
    check_packages();
    let demo_bin = locate_tools()?;

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let out = std::fs::canonicalize(&args.out)?;
    let trace = out.join("quarry-demo.qtrace");

    // 1. Capture.
    crate::say!(
        "== capture: {DEMO_BIN} --headless --frames {} --check",
        args.frames
    );
    let mut demo_args: Vec<OsString> = ["--headless", "--check", "--frames"]
        .iter()
        .map(OsString::from)
        .collect();
    demo_args.push(args.frames.to_string().into());
    if let Some(g) = &args.gpu {
        demo_args.push("--gpu".into());
        demo_args.push(g.into());
    }
    let (c, stdout) = capture::capture(
        &demo_bin.clone().into_os_string(),
        &demo_args,
        &trace,
        None,
        true,
        false,
    )?;
    let text = String::from_utf8_lossy(&stdout);
    for line in text.lines() {
        crate::say!("  {line}");
    }
    let check_ok = c.status.success();
    if !check_ok {
        eprintln!(
            "quarry: {DEMO_BIN} --check failed ({})",
            capture::exit_text(c.status)
        );
    }
    if !trace.is_file() {
        bail!("{DEMO_BIN} wrote no trace to {}", trace.display());
    }
    crate::say!("trace: {}", trace.display());
    crate::say!("  {}", capture::summary_line(&trace)?);

    // 2. Replay on every GPU.
    let gpus = replayer::devices().context("cannot list GPUs for the replay")?;
    if gpus.is_empty() {
        bail!("no GPU found to replay on");
    }
    let mut results = Vec::new();
    let mut same_device_mismatch = false;
    let mut replay_failed = false;
    for g in &gpus {
        let file = out.join(format!("replay-gpu{}-{}.qres", g.index, slug(&g.name)));
        crate::say!(
            "\n== replay on GPU {}: {} ({})",
            g.index,
            g.name,
            g.driver_info
        );
        let opts = replayer::ReplayOptions {
            trace: trace.clone(),
            gpu: Some(g.index.to_string()),
            loops: 1,
            results: Some(file.clone()),
            compare: true,
            validate: false,
            progress: false,
            passes: None,
            inject: None,
            frames: None,
            window: false,
            drop_unsupported: false,
            memory: Default::default(),
        };
        match replayer::replay_with_progress(&opts, &mut crate::replay::Bar::new(&opts)) {
            Ok(s) => {
                for line in s.to_text(true).lines() {
                    crate::say!("  {line}");
                }
                if s.comparison.same_device && s.comparison.failed() {
                    same_device_mismatch = true;
                }
                results.push(file);
            }
            Err(e) => {
                eprintln!("quarry: replay on GPU {} ({}) failed: {e}", g.index, g.name);
                replay_failed = true;
            }
        }
    }

    // 3. View.
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    if display && !args.no_view {
        crate::say!("\n== opening the viewer (close its window to finish)");
        let mut files = vec![trace.clone()];
        files.extend(results.iter().cloned());
        if let Err(e) = viewer::run(viewer::ViewArgs {
            files,
            ..Default::default()
        }) {
            eprintln!("quarry: viewer: {e}");
        }
    }

    // 4. Where things are, and what next.
    crate::say!("\n== files");
    crate::say!("  trace:   {}", trace.display());
    for r in &results {
        crate::say!("  results: {}", r.display());
    }
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "quarry".into());
    crate::say!("\n== capture your own app");
    crate::say!("  {me} capture -o vkcube.qtrace -- vkcube --c 100");
    crate::say!("  {me} info vkcube.qtrace");
    crate::say!("  then copy vkcube.qtrace to a machine with another GPU and run:");
    crate::say!("  {me} replay vkcube.qtrace --compare --results vkcube.qres");
    crate::say!("  {me} view vkcube.qtrace vkcube.qres");

    if !check_ok || same_device_mismatch || replay_failed {
        if same_device_mismatch {
            eprintln!("quarry: a deterministic query differs on the capture device");
        }
        return Ok(1);
    }
    Ok(0)
}

/// A file-name-safe form of a GPU name.
fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let s = s
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let s: String = s.chars().take(40).collect();
    if s.is_empty() {
        "gpu".into()
    } else {
        s
    }
}

/// Runs scripts/deps.sh (installs as root, else prints the apt command); without the source tree,
/// checks the runtime packages itself. Missing packages are a warning: the steps below fail with
/// their own clear error when something they need is absent.
fn check_packages() {
    let script = Path::new(WORKSPACE).join("scripts/deps.sh");
    if script.is_file() {
        match Command::new("bash").arg(&script).status() {
            Ok(s) if s.success() => {}
            Ok(_) => {
                eprintln!("quarry: warning: some packages are missing (see above); trying anyway")
            }
            Err(e) => eprintln!("quarry: warning: cannot run {}: {e}", script.display()),
        }
        return;
    }
    let missing: Vec<&str> = PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "quarry: warning: missing packages; install them with: sudo apt-get install -y {}",
            missing.join(" ")
        );
    }
}

/// Finds quarry-demo and the layer library, building them with cargo when they are missing.
fn locate_tools() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the quarry executable")?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let find_demo = || -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("QUARRY_DEMO_BIN") {
            return Some(PathBuf::from(p));
        }
        // Test binaries live in target/<profile>/deps; the demo one level up.
        [dir.join(DEMO_BIN), dir.join("..").join(DEMO_BIN)]
            .into_iter()
            .find(|p| p.is_file())
    };
    let layer_ok = capture_layer::launch::find_layer_library().is_ok();
    if let (Some(d), true) = (find_demo(), layer_ok) {
        return Ok(d);
    }
    build_tools(&dir)?;
    let demo = find_demo().with_context(|| {
        format!(
            "{DEMO_BIN} not found next to {} after building it",
            exe.display()
        )
    })?;
    capture_layer::launch::find_layer_library()?;
    Ok(demo)
}

/// `cargo build -p demo -p capture_layer` into the target directory `exe_dir` belongs to.
fn build_tools(exe_dir: &Path) -> anyhow::Result<()> {
    let manifest = Path::new(WORKSPACE).join("Cargo.toml");
    // target/<profile>/quarry, or target/<profile>/deps/<test binary>.
    let profile_dir = if exe_dir.ends_with("deps") {
        exe_dir.parent().unwrap_or(exe_dir)
    } else {
        exe_dir
    };
    let profile = profile_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = profile_dir.parent();
    let (Some(target), true, true) = (
        target,
        manifest.is_file(),
        profile == "debug" || profile == "release",
    ) else {
        bail!(
            "{DEMO_BIN} or the capture layer is missing next to quarry and there is no source tree \
             to build them from; build them with `cargo build --release -p demo -p capture_layer` \
             or set QUARRY_DEMO_BIN and QUARRY_CAPTURE_LAYER_LIBRARY"
        );
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["-p", "demo", "-p", "capture_layer"])
        .env("CARGO_TARGET_DIR", target);
    if profile == "release" {
        cmd.arg("--release");
    }
    crate::say!(
        "== building {DEMO_BIN} and the capture layer ({profile}) into {}",
        target.display()
    );
    let status = cmd.status().with_context(|| {
        format!(
            "cannot run {} to build {DEMO_BIN}; build it with `cargo build -p demo -p capture_layer`",
            cargo.to_string_lossy()
        )
    })?;
    if !status.success() {
        bail!("building {DEMO_BIN} and the capture layer failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn gpu_names_become_file_names() {
        assert_eq!(
            slug("llvmpipe (LLVM 15.0.6, 256 bits)"),
            "llvmpipe-llvm-15-0-6-256-bits"
        );
        assert_eq!(slug("///"), "gpu");
        assert_eq!(slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
    }
}
