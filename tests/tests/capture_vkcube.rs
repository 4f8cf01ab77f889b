//! vkcube under the capture layer (lavapipe + Xvfb): frames, validation cleanliness, SIGKILL recovery.

use format::record::{FrameBoundary, Record};
use quarry_tests::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn vkcube_100_frames_under_the_layer() {
    if !require(&["vkcube", "Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let layer = layer();
    let trace = scratch("vkcube100.qtrace");
    let mut cmd = under_layer(vulkan_command("vkcube"), &layer, &trace);
    let out = cmd
        .args(["--c", "100"])
        .env("DISPLAY", &x.display)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vkcube failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("capture stopped"),
        "the layer hit an internal error: {stderr}"
    );

    let t = read_trace(&trace);
    assert!(t.info.complete, "trace finalized at exit");
    t.check_structure();
    let frames: Vec<_> = t
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Frame(f) = r {
                Some(f.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(frames.len(), 100, "one Frame per present");
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.index, i as u64);
        assert_eq!(f.boundary, FrameBoundary::Present);
    }
    assert_eq!(t.calls_of("vkQueuePresentKHR"), 100);
    assert!(t.calls_of("vkCmdDraw") >= 1, "draws recorded");
    assert!(t.calls_of("vkCreateGraphicsPipelines") >= 1);
    assert!(t.count("Device") >= 1, "device summary recorded");
    assert!(
        t.count("Submit") >= 100,
        "submits recorded: {}",
        t.count("Submit")
    );
    // vkcube rewrites its uniform buffer every frame through a persistent mapping.
    assert!(
        t.count("MemoryWrite") >= 100,
        "host writes recorded: {}",
        t.count("MemoryWrite")
    );
    let dev = t
        .records
        .iter()
        .find_map(|r| {
            if let Record::Device(d) = r {
                Some(d.clone())
            } else {
                None
            }
        })
        .unwrap();
    assert!(
        dev.name.contains("llvmpipe"),
        "lavapipe device: {}",
        dev.name
    );
    assert!(!dev.queue_families.is_empty() && !dev.memory_types.is_empty());
}

/// Runs vkcube with `layers` (VK_INSTANCE_LAYERS order: first is nearest the app); returns the number
/// of validation messages printed.
fn vkcube_validation(
    display: &str,
    layers: &str,
    layer: &LayerDir,
    trace: &std::path::Path,
) -> usize {
    let mut cmd = under_layer(vulkan_command("vkcube"), layer, trace);
    cmd.env_remove("VK_LOADER_LAYERS_ENABLE")
        .env("VK_INSTANCE_LAYERS", layers)
        .env("DISPLAY", display)
        .args(["--c", "20"]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "vkcube with {layers} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    validation_messages(&output_text(&out))
}

#[test]
fn vkcube_with_validation_adds_no_messages() {
    if !require(&["vkcube", "Xvfb"]) || !validation_layer() {
        return;
    }
    let x = Xvfb::start();
    let layer = layer();
    let t0 = scratch("val0.qtrace");
    let baseline = vkcube_validation(&x.display, "VK_LAYER_KHRONOS_validation", &layer, &t0);
    for (order, name) in [
        (
            "VK_LAYER_KHRONOS_validation:VK_LAYER_QUARRY_capture",
            "val-above.qtrace",
        ),
        (
            "VK_LAYER_QUARRY_capture:VK_LAYER_KHRONOS_validation",
            "val-below.qtrace",
        ),
    ] {
        let trace = scratch(name);
        let n = vkcube_validation(&x.display, order, &layer, &trace);
        assert_eq!(
            n, baseline,
            "validation messages with {order}: {n}, without the capture layer: {baseline}"
        );
        let t = read_trace(&trace);
        assert!(t.info.complete);
        assert_eq!(t.count("Frame"), 20, "{order}");
    }
}

#[test]
fn sigkill_leaves_a_readable_incomplete_trace() {
    if !require(&["vkcube", "Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let layer = layer();
    let trace = scratch("killed.qtrace");
    let mut cmd = under_layer(vulkan_command("vkcube"), &layer, &trace);
    let mut child = cmd
        .args(["--c", "1000000"])
        .env("DISPLAY", &x.display)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Let it render a while: wait until the file holds some blocks.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::fs::metadata(&trace)
            .map(|m| m.len() > 64 * 1024)
            .unwrap_or(false)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let status = child.wait().unwrap();
    assert!(!status.success());

    let t = read_trace(&trace);
    assert!(!t.info.complete, "no footer after SIGKILL");
    t.check_structure();
    assert!(t.count("Frame") > 0, "frames before the kill survive");
    assert!(t.calls_of("vkCreateDevice") == 1);
}

#[test]
fn frame_range_ends_the_trace() {
    if !require(&["vkcube", "Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let layer = layer();
    let trace = scratch("range.qtrace");
    let mut cmd = under_layer(vulkan_command("vkcube"), &layer, &trace);
    let out = cmd
        .args(["--c", "30"])
        .env("DISPLAY", &x.display)
        .env("QUARRY_CAPTURE_FRAMES", "0-9")
        .output()
        .unwrap();
    assert!(out.status.success());
    let t = read_trace(&trace);
    assert!(t.info.complete, "finalized when frame 9 ended");
    t.check_structure();
    assert_eq!(t.count("Frame"), 10);
    assert_eq!(
        t.calls_of("vkQueuePresentKHR"),
        10,
        "nothing recorded after the range"
    );
    let notes: Vec<String> = t
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Note(n) = r {
                Some(n.message.clone())
            } else {
                None
            }
        })
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("QUARRY_CAPTURE_FRAMES=0-9")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("requested frame range done")),
        "{notes:?}"
    );
}
