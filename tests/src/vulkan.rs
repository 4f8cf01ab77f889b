//! Running Vulkan programs on lavapipe, under the capture layer and the validation layer.

use std::path::Path;
use std::process::{Command, Stdio};
pub use VkLayer_quarry_capture::launch::{find_layer_library, LayerDir};

/// lavapipe only: other ICDs on the machine have no hardware behind them.
pub const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// The Khronos validation layer's manifest (Debian's vulkan-validationlayers).
pub const VALIDATION_MANIFEST: &str =
    "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json";

/// Whether `program` is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether lavapipe is installed; prints a `SKIP:` line when it is not.
pub fn lavapipe() -> bool {
    if !Path::new(LAVAPIPE_ICD).exists() {
        eprintln!("SKIP: lavapipe (mesa-vulkan-drivers) not installed");
        return false;
    }
    true
}

/// Whether every one of `programs` is on the PATH; prints a `SKIP:` line naming the first one missing.
pub fn have_all(programs: &[&str]) -> bool {
    for p in programs {
        if !have(p) {
            eprintln!("SKIP: {p} not installed");
            return false;
        }
    }
    true
}

/// Skips (returns false, printing why) when the test's programs or lavapipe are missing.
pub fn require(programs: &[&str]) -> bool {
    have_all(programs) && lavapipe()
}

/// Whether the Khronos validation layer is installed; prints a `SKIP:` line when it is not.
pub fn validation_layer() -> bool {
    if !Path::new(VALIDATION_MANIFEST).exists() {
        eprintln!("SKIP: validation layer (vulkan-validationlayers) not installed");
        return false;
    }
    true
}

/// Lines of a program's output that are validation-layer messages.
pub fn validation_messages(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.contains("Validation Error")
                || l.contains("Validation Warning")
                || l.contains("VUID-")
        })
        .count()
}

/// The capture layer built with this crate, in a manifest directory of its own (removed on drop).
pub fn layer() -> LayerDir {
    let lib = find_layer_library().unwrap_or_else(|e| panic!("the capture layer: {e}"));
    LayerDir::new(&lib).expect("write layer manifest")
}

/// Base environment for a Vulkan program: lavapipe, XDG_RUNTIME_DIR, no stray layer settings.
pub fn vulkan_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env("XDG_RUNTIME_DIR", crate::xdg_runtime_dir())
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .env_remove("QUARRY_CAPTURE_DISABLE")
        .env_remove("QUARRY_CAPTURE_FRAMES")
        .env_remove("QUARRY_CAPTURE_END");
    c
}

/// `cmd` with the capture layer enabled, writing `trace`.
pub fn under_layer(mut cmd: Command, layer: &LayerDir, trace: &Path) -> Command {
    layer.apply(&mut cmd);
    cmd.env("QUARRY_CAPTURE_FILE", trace);
    cmd
}

/// Points this process's Vulkan at lavapipe with the layer enabled, capturing to `trace` over
/// `frames` (or the whole run). Must run before libvulkan is loaded; the loader reads the
/// environment once, so one such test per process. The trace ends when the test destroys its
/// last instance (`QUARRY_CAPTURE_END=instances`), so the test reads it finished before its
/// process exits.
pub fn capture_in_process(layer: &LayerDir, trace: &Path, frames: Option<&str>) {
    std::env::set_var("QUARRY_CAPTURE_END", "instances");
    std::env::set_var("VK_DRIVER_FILES", LAVAPIPE_ICD);
    std::env::set_var("VK_ICD_FILENAMES", LAVAPIPE_ICD);
    std::env::set_var("VK_ADD_LAYER_PATH", &layer.dir);
    std::env::set_var("VK_LOADER_LAYERS_ENABLE", "VK_LAYER_QUARRY_capture");
    std::env::set_var("QUARRY_CAPTURE_FILE", trace);
    std::env::remove_var("QUARRY_CAPTURE_DISABLE");
    match frames {
        Some(f) => std::env::set_var("QUARRY_CAPTURE_FRAMES", f),
        None => std::env::remove_var("QUARRY_CAPTURE_FRAMES"),
    }
}
