//! OpenGL on Zink (Mesa's GL over Vulkan, here over lavapipe): glmark2 runs for the capture tests.

use std::path::Path;
use std::process::{Command, Output};

use crate::{find_layer_library, output_text, quarry_exe, vulkan_command};

/// Short benchmarks: two scenes of half a second each keep a run near 1.5 s on lavapipe.
pub const GLMARK_ARGS: &[&str] = &[
    "-b",
    "build:duration=0.5",
    "-b",
    "shading:duration=0.5",
    "--off-screen",
    "-s",
    "64x64",
];

/// `program` with GL on Zink over lavapipe, no Vulkan layer enabled, on `display`.
pub fn on_zink(program: &Path, display: &str) -> Command {
    let mut c = vulkan_command(program);
    c.env("DISPLAY", display)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env("GALLIUM_DRIVER", "zink")
        .env_remove("VK_ADD_LAYER_PATH")
        .env_remove("QUARRY_CAPTURE_FILE");
    c
}

/// `quarry capture [capture_args] -o TRACE -- glmark2 GLMARK_ARGS` through the built layer; asserts
/// it succeeded and returns its output.
pub fn capture_glmark2(display: &str, trace: &Path, capture_args: &[&str]) -> Output {
    let library =
        find_layer_library().expect("build the layer first: cargo build -p capture_layer");
    let out = on_zink(&quarry_exe(), display)
        .env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
        .arg("capture")
        .args(capture_args)
        .arg("-o")
        .arg(trace)
        .arg("--")
        .arg("glmark2")
        .args(GLMARK_ARGS)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    out
}
