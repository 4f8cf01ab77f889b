//! The executables and layer libraries cargo built into this target directory.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The quarry command.
pub const QUARRY: &str = "quarry";
/// The demo app that `quarry demo` captures.
pub const QUARRY_DEMO: &str = "quarry-demo";
/// The capture layer's library, which `quarry capture` loads from next to itself.
pub const CAPTURE_LAYER_LIBRARY: &str = "libVkLayer_quarry_capture.so";
/// The performance-counter emulation layer's library.
pub const COUNTERS_LAYER_LIBRARY: &str = "libVkLayer_quarry_counters.so";

/// `target/<profile>`: where `cargo build` puts executables. Test and bench executables run from its
/// `deps/` directory.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the path of this test executable");
    let deps = exe.parent().expect("the directory of this test executable");
    deps.parent().unwrap_or(deps).to_path_buf()
}

/// `name` in [`target_dir`], if it is built.
pub fn built(name: &str) -> Option<PathBuf> {
    let p = target_dir().join(name);
    p.is_file().then_some(p)
}

/// `name` in [`target_dir`]; when it is not built, prints a `SKIP:` line and gives `None`.
pub fn built_or_skip(name: &str) -> Option<PathBuf> {
    let p = built(name);
    if p.is_none() {
        eprintln!(
            "SKIP: {} is not built (cargo build --workspace)",
            target_dir().join(name).display()
        );
    }
    p
}

/// `name` in [`target_dir`]; panics saying how to build it when it is missing.
pub fn require_built(name: &str) -> PathBuf {
    built(name).unwrap_or_else(|| {
        panic!(
            "{} is not built: run `cargo build --workspace` (scripts/test.sh does) before \
             `cargo test -p quarry-tests`, with the same target directory and profile",
            target_dir().join(name).display()
        )
    })
}

/// The `quarry` executable (panics when it is not built).
pub fn quarry_exe() -> PathBuf {
    require_built(QUARRY)
}

/// `$XDG_RUNTIME_DIR`, or `/tmp` (Mesa's software drivers want one).
pub fn xdg_runtime_dir() -> std::ffi::OsString {
    std::env::var_os("XDG_RUNTIME_DIR").unwrap_or_else(|| "/tmp".into())
}

/// A `quarry` command with the environment every test wants: `XDG_RUNTIME_DIR` set, and no layers
/// enabled through this process's environment (a test adds what it needs).
pub fn quarry_command() -> Command {
    let mut c = Command::new(quarry_exe());
    c.env("XDG_RUNTIME_DIR", xdg_runtime_dir())
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE");
    c
}

/// Runs `quarry args` ([`quarry_command`]) to completion.
pub fn run_quarry(args: &[&str]) -> Output {
    quarry_command().args(args).output().expect("run quarry")
}

/// Runs `quarry args` with `DISPLAY` set to `display`, or without `DISPLAY` for `None`.
pub fn run_quarry_on(args: &[&str], display: Option<&str>) -> Output {
    let mut c = quarry_command();
    match display {
        Some(d) => c.env("DISPLAY", d),
        None => c.env_remove("DISPLAY"),
    };
    c.args(args).output().expect("run quarry")
}

/// Whether `quarry devices` lists lavapipe; prints a `SKIP:` line when it does not.
pub fn quarry_sees_lavapipe() -> bool {
    let sees = output_text(&run_quarry(&["devices"])).contains("llvmpipe");
    if !sees {
        eprintln!("SKIP: no lavapipe");
    }
    sees
}

/// `bytes` as text, invalid UTF-8 replaced.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A finished program's stdout, then its stderr, as text.
pub fn output_text(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

/// Captures `quarry-demo --headless --frames FRAMES` on lavapipe into `<scratch tag>/demo.qtrace`
/// through `quarry capture`; `None` (after a `SKIP:` line) when the demo, the layer or lavapipe is
/// missing.
pub fn capture_demo_on_lavapipe(tag: &str, frames: &str) -> Option<PathBuf> {
    let demo = built_or_skip(QUARRY_DEMO)?;
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return None;
    }
    let t = crate::scratch_dir(tag).join("demo.qtrace");
    let out = run_quarry(&[
        "capture",
        "-o",
        t.to_str()?,
        "--",
        demo.to_str()?,
        "--headless",
        "--frames",
        frames,
        "--gpu",
        "llvmpipe",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    Some(t)
}
