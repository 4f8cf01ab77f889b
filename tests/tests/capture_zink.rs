//! An OpenGL program on Zink (Mesa's GL-on-Vulkan, here over lavapipe) runs unchanged under the capture
//! layer through `quarry capture`: glmark2 runs the same benchmarks, prints its scores and exits 0 with and
//! without the layer; the trace is complete, every call decodes, and `quarry info --json` sees its calls
//! and frames; the layer adds no validation messages.
//!
//! Skips (prints `SKIP`) when glmark2, Xvfb or lavapipe is missing. The `quarry` binary must be built in
//! the same target directory (`cargo build --workspace`; `scripts/test.sh` does it first).

use quarry_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What must be the same with and without the layer: the renderer glmark2 got, the benchmarks it ran (in
/// order, with their options), and that each printed an FPS figure and a final score.
#[derive(Debug, PartialEq)]
struct Run {
    renderer: String,
    benchmarks: Vec<String>,
    scored: bool,
}

fn parse_run(out: &str) -> Run {
    let renderer = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("GL_RENDERER:"))
        .map(|r| r.trim().to_string())
        .unwrap_or_default();
    let benchmarks = out
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("FPS:"))
        .map(|l| {
            let fps = l.split("FPS:").nth(1).unwrap_or("").trim();
            let fps: f64 = fps
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            // "[build] duration=0.5: FPS: 945 ..." -> "[build] duration=0.5", if it ran at all.
            let name = l.split(": FPS:").next().unwrap_or(l).trim().to_string();
            if fps > 0.0 {
                name
            } else {
                format!("{name} (no frames)")
            }
        })
        .collect();
    let scored = out.lines().any(|l| {
        l.trim()
            .strip_prefix("glmark2 Score:")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .is_some_and(|s| s > 0)
    });
    Run {
        renderer,
        benchmarks,
        scored,
    }
}

#[test]
fn glmark2_on_zink_runs_unchanged_under_the_layer() {
    if !require(&["glmark2", "Xvfb"]) {
        return;
    }
    let glmark = PathBuf::from("glmark2");
    let x = Xvfb::start();
    let quarry = quarry_exe();
    // The layer built with this test, not whatever sits next to the quarry binary.
    let library =
        find_layer_library().expect("build the layer first: cargo build -p capture_layer");

    // Without the layer: the reference run, and a check that Zink really runs on lavapipe.
    let plain = on_zink(&glmark, &x.display)
        .args(GLMARK_ARGS)
        .output()
        .unwrap();
    let plain_text = output_text(&plain);
    assert!(plain.status.success(), "glmark2 failed: {plain_text}");
    let reference = parse_run(&plain_text);
    assert!(
        reference.renderer.contains("zink") && reference.renderer.contains("llvmpipe"),
        "glmark2 does not render through Zink on lavapipe: GL_RENDERER {:?}",
        reference.renderer
    );
    assert_eq!(
        reference.benchmarks,
        ["[build] duration=0.5", "[shading] duration=0.5"]
    );
    assert!(reference.scored, "no score printed: {plain_text}");

    // Under the layer, through `quarry capture`.
    let trace = scratch("glmark2.qtrace");
    let mut cmd = on_zink(&quarry, &x.display);
    cmd.env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
        .arg("capture")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&glmark)
        .args(GLMARK_ARGS);
    let captured = cmd.output().unwrap();
    let captured_text = output_text(&captured);
    assert!(
        captured.status.success(),
        "glmark2 under the layer failed ({}): {captured_text}",
        captured.status
    );
    assert_eq!(
        parse_run(&captured_text),
        reference,
        "glmark2 ran differently under the layer:\n{captured_text}"
    );
    assert!(
        !captured_text.contains("capture stopped") && !captured_text.contains("internal error"),
        "the layer hit an internal error: {captured_text}"
    );
    assert!(
        captured_text.contains(&format!("trace: {}", trace.display())),
        "quarry capture names the trace: {captured_text}"
    );

    // The trace, as `quarry info --json` sees it.
    let info = Command::new(&quarry)
        .args(["info", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(info.status.success(), "quarry info: {}", output_text(&info));
    let json: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let calls = json["record_counts"]["Call"].as_u64().unwrap_or(0);
    let frames = json["frames"].as_u64().unwrap_or(0);
    assert!(calls > 0 && frames > 0, "calls {calls}, frames {frames}");
    assert_eq!(json["complete"], true, "trace finalized: {json}");
    assert_eq!(json["application"], "glmark2");

    // What Zink did, in the trace: every call decodes (a hand-encoded command that disagrees with the
    // generated decoder shows up here), and the drawing is there.
    let t = read_trace(&trace);
    t.check_structure();
    assert!(t.calls_of("vkCreateDevice") >= 1);
    // Zink draws through VK_EXT_multi_draw where the layer no longer hides it.
    let draws = [
        "vkCmdDraw",
        "vkCmdDrawIndexed",
        "vkCmdDrawMultiEXT",
        "vkCmdDrawMultiIndexedEXT",
    ];
    assert!(
        draws.iter().map(|d| t.calls_of(d)).sum::<usize>() >= 2,
        "draws recorded"
    );
    assert!(t.calls_of("vkQueueSubmit") + t.calls_of("vkQueueSubmit2") >= 2);
    assert!(t.count("Submit") >= 2, "submit records");
    assert!(
        t.count("MemoryWrite") >= 1,
        "host writes into mapped memory"
    );

    // Validation: the layer adds no message (Zink itself may cause some; they must be the same).
    let validate = |with_layer: bool| -> usize {
        let mut c = on_zink(&glmark, &x.display);
        c.args(GLMARK_ARGS);
        if with_layer {
            let layer = LayerDir::new(&library).unwrap();
            layer.apply(&mut c);
            let trace = scratch("glmark2-validate.qtrace");
            c.env("QUARRY_CAPTURE_FILE", &trace).env(
                "VK_LOADER_LAYERS_ENABLE",
                "VK_LAYER_QUARRY_capture,VK_LAYER_KHRONOS_validation",
            );
            let out = c.output().unwrap();
            assert!(out.status.success(), "{}", output_text(&out));
            validation_messages(&output_text(&out))
        } else {
            c.env("VK_LOADER_LAYERS_ENABLE", "VK_LAYER_KHRONOS_validation");
            let out = c.output().unwrap();
            assert!(out.status.success(), "{}", output_text(&out));
            validation_messages(&output_text(&out))
        }
    };
    if Path::new(VALIDATION_MANIFEST).exists() {
        let without = validate(false);
        let with = validate(true);
        assert_eq!(with, without, "validation messages added by the layer");
    } else {
        eprintln!("SKIP (part): no Khronos validation layer installed");
    }
}

/// The glmark2 trace replays headless: Zink's descriptor-template updates carry handles inside
/// their data, which the replay translates per template entry.
#[test]
fn glmark2_trace_replays() {
    if !require(&["glmark2", "Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let quarry = quarry_exe();
    // `quarry capture [capture_args] -o TRACE -- glmark2 ...` through the built layer.
    let capture = |trace: &Path, capture_args: &[&str]| {
        capture_glmark2(&x.display, trace, capture_args);
    };
    let trace = scratch("glmark2-replay.qtrace");
    capture(&trace, &[]);
    let replay = vulkan_command(&quarry)
        .arg("replay")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "replay failed: {}",
        output_text(&replay)
    );

    // Trimmed at Zink's second frame: the snapshot holds everything the GL driver set up (pipelines,
    // descriptor templates, persistently mapped buffers) and the replay needs nothing else. The range
    // stops before glmark2's exit, where Zink destroys its device with two images and their views
    // still alive (validation reports that in the untrimmed replay too).
    let trimmed = scratch("glmark2-trimmed.qtrace");
    capture(&trimmed, &["--frames", "1-1"]);
    let replay = vulkan_command(&quarry)
        .args(["replay", "--validate"])
        .arg(&trimmed)
        .output()
        .unwrap();
    let t = output_text(&replay);
    assert!(replay.status.success(), "trimmed replay failed: {t}");
    assert!(
        t.contains("trimmed trace: a state snapshot rebuilds"),
        "{t}"
    );
    assert!(t.contains("validation: 0 messages"), "{t}");
}

#[test]
fn parses_glmark2_output() {
    let out = "    GL_RENDERER:    zink (llvmpipe (LLVM 15.0.6, 256 bits))\n\
               [build] duration=0.5: FPS: 945 FrameTime: 1.059 ms\n\
               [shading] duration=0.5: FPS: 0 FrameTime: inf ms\n\
                                         glmark2 Score: 755 \n";
    let r = parse_run(out);
    assert_eq!(r.renderer, "zink (llvmpipe (LLVM 15.0.6, 256 bits))");
    assert_eq!(
        r.benchmarks,
        ["[build] duration=0.5", "[shading] duration=0.5 (no frames)"]
    );
    assert!(r.scored);
    assert!(!parse_run("glmark2 Score: 0").scored);
    assert_eq!(validation_messages("x\nValidation Error: [ VUID-a ]\ny"), 1);
}
