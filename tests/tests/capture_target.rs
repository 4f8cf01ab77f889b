//! Capture for a target device (`quarry capture --target`): a profile made from lavapipe's own
//! `quarry devices --json` with transform feedback and pipeline statistics removed stands for a
//! smaller GPU. quarry-demo captured with it skips what that GPU lacks, its `--check` passes, the
//! trace records the profile and replays with every deterministic result equal; vulkaninfo under
//! the layer shows the reduced set; a replay GPU that lacks what the profile offers is warned about.
//! Without a target nothing changes (`capture_disabled.rs`).

use quarry_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// lavapipe's entry of `quarry devices --json`, and its index there.
fn lavapipe_gpu() -> Option<(usize, Value)> {
    if !quarry_sees_lavapipe() {
        return None;
    }
    let out = run_quarry(&["devices", "--json"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (i, gpu) = list
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .find(|(_, g)| g["name"].as_str().unwrap_or("").contains("llvmpipe"))?;
    Some((i, gpu.clone()))
}

/// lavapipe's profile without VK_EXT_transform_feedback and pipelineStatisticsQuery, written as
/// the whole `quarry devices --json` list (lavapipe's entry changed): returns `FILE#INDEX`.
fn reduced_profile(dir: &Path) -> Option<String> {
    let (i, _) = lavapipe_gpu()?;
    let out = run_quarry(&["devices", "--json"]);
    let mut list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &mut list[i]["profile"];
    assert_eq!(p["schema"], "quarry-device-profile", "{p}");
    assert!(p["extensions"]["VK_EXT_transform_feedback"].is_u64());
    assert_eq!(
        p["features"]["VkPhysicalDeviceFeatures"]["pipelineStatisticsQuery"],
        true
    );
    for key in [
        "properties",
        "formats",
        "queue_families",
        "memory_types",
        "memory_heaps",
    ] {
        assert!(
            p[key].as_array().is_some_and(|a| !a.is_empty())
                || p[key].as_object().is_some_and(|o| !o.is_empty()),
            "profile lacks {key}"
        );
    }
    assert!(p["properties"]["VkPhysicalDeviceLimits"]["maxImageDimension2D"].is_u64());
    p["extensions"]
        .as_object_mut()
        .unwrap()
        .remove("VK_EXT_transform_feedback");
    p["features"]["VkPhysicalDeviceFeatures"]["pipelineStatisticsQuery"] = false.into();
    p["properties"]["VkPhysicalDeviceLimits"]["maxImageDimension2D"] = 4096.into();
    p["name"] = "lavapipe without xfb and pipeline statistics".into();
    let file = dir.join("reduced.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
    Some(format!("{}#{i}", file.display()))
}

/// `quarry capture [--frames CAPTURED] --target TARGET -- quarry-demo --frames FRAMES ...`.
fn capture_demo(
    dir: &Path,
    target: &str,
    frames: &str,
    captured: Option<&str>,
    check: bool,
) -> (PathBuf, String) {
    let demo = require_built(QUARRY_DEMO);
    let trace = dir.join("demo.qtrace");
    let mut args = vec!["capture", "--force", "-o", trace.to_str().unwrap()];
    if let Some(c) = captured {
        args.extend(["--frames", c]);
    }
    args.extend([
        "--target",
        target,
        "--",
        demo.to_str().unwrap(),
        "--headless",
        "--frames",
        frames,
        "--gpu",
        "llvmpipe",
    ]);
    if check {
        args.push("--check");
    }
    let out = run_quarry(&args);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    (trace, text)
}

#[test]
fn demo_captured_for_a_smaller_target_skips_what_it_lacks_and_replays() {
    let dir = scratch_dir("capture-target-demo");
    if built_or_skip(QUARRY_DEMO).is_none() || built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() {
        return;
    }
    let Some(target) = reduced_profile(&dir) else {
        return;
    };
    let (trace, text) = capture_demo(&dir, &target, "3", None, true);
    for line in [
        "quarry: target device lacks device extensions, hidden from the app: ",
        "VK_EXT_transform_feedback",
        "VkPhysicalDeviceFeatures.pipelineStatisticsQuery",
        "skipped: transform feedback stream queries needs VK_EXT_transform_feedback",
        "skipped: pipeline statistics needs VkPhysicalDeviceFeatures::pipelineStatisticsQuery",
        "check: all",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }

    let t = read_trace(&trace);
    t.check_structure();
    assert_eq!(t.count("TargetProfile"), 1);
    assert_eq!(t.calls_of("vkCmdBeginTransformFeedbackEXT"), 0);
    for r in &t.records {
        if let format::record::Record::QueryPool(p) = r {
            assert!(
                !matches!(p.query_type, 1 | 1000028004),
                "a pool the target cannot have: {p:?}"
            );
        }
    }
    let info = run_quarry(&["info", "--json", trace.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(
        v["target"]["name"], "lavapipe without xfb and pipeline statistics",
        "{v}"
    );
    assert_eq!(v["target"]["hash"].as_str().map(str::len), Some(16));

    // lavapipe offers everything the profile does: a clean replay, no target warning.
    let out = run_quarry(&[
        "replay",
        trace.to_str().unwrap(),
        "--compare",
        "--gpu",
        "llvmpipe",
    ]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("all deterministic results match"), "{text}");
    assert!(!text.contains("captured for target"), "{text}");
}

#[test]
fn a_trimmed_capture_keeps_the_target_in_its_snapshot() {
    let dir = scratch_dir("capture-target-trimmed");
    if built_or_skip(QUARRY_DEMO).is_none() || built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() {
        return;
    }
    let Some(target) = reduced_profile(&dir) else {
        return;
    };
    let (trace, text) = capture_demo(&dir, &target, "3", Some("1-2"), false);
    assert!(
        text.contains("VkPhysicalDeviceFeatures.pipelineStatisticsQuery"),
        "{text}"
    );
    let t = read_trace(&trace);
    assert_eq!(t.count("StateBegin"), 1);
    assert_eq!(t.count("TargetProfile"), 1);
    let out = run_quarry(&["replay", trace.to_str().unwrap(), "--gpu", "llvmpipe"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(!output_text(&out).contains("captured for target"));
}

#[test]
fn replay_warns_when_the_gpu_lacks_what_the_target_offers() {
    let dir = scratch_dir("capture-target-bigger");
    if built_or_skip(QUARRY_DEMO).is_none() || built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() {
        return;
    }
    let Some((_, gpu)) = lavapipe_gpu() else {
        return;
    };
    let mut p = gpu["profile"].clone();
    p["extensions"]["VK_QUARRY_imaginary"] = 1.into();
    p["properties"]["VkPhysicalDeviceLimits"]["maxImageDimension2D"] = 1_000_000.into();
    let file = dir.join("bigger.json");
    std::fs::write(&file, serde_json::to_vec(&p).unwrap()).unwrap();
    let (trace, _) = capture_demo(&dir, file.to_str().unwrap(), "1", None, false);
    let out = run_quarry(&["replay", trace.to_str().unwrap(), "--gpu", "llvmpipe"]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("captured for target device")
            && text.contains("extension VK_QUARRY_imaginary")
            && text.contains("maxImageDimension2D"),
        "{text}"
    );

    // A file that is no profile is bad input, before anything runs.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "[1, 2]").unwrap();
    let out = run_quarry(&[
        "capture",
        "-o",
        dir.join("never.qtrace").to_str().unwrap(),
        "--target",
        bad.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("FILE#INDEX"),
        "{}",
        output_text(&out)
    );
}

#[test]
fn vulkaninfo_under_the_target_shows_the_reduced_set() {
    if !require(&["vulkaninfo"]) || built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() {
        return;
    }
    let dir = scratch_dir("capture-target-vulkaninfo");
    let Some(target) = reduced_profile(&dir) else {
        return;
    };
    let layer = layer();
    let run = |target: Option<&str>| {
        let mut c = vulkan_command("vulkaninfo");
        c.env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
        let mut c = under_layer(c, &layer, &dir.join("vulkaninfo.qtrace"));
        match target {
            Some(t) => c.env("QUARRY_CAPTURE_TARGET", t),
            None => c.env_remove("QUARRY_CAPTURE_TARGET"),
        };
        let out = c.arg("--text").output().unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        text(&out.stdout)
    };
    let value = |s: &str, key: &str| -> String {
        s.lines()
            .find(|l| l.trim_start().starts_with(key))
            .and_then(|l| l.split('=').nth(1))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {key} in vulkaninfo"))
    };
    let full = run(None);
    assert!(full.contains("VK_EXT_transform_feedback"));
    assert_eq!(value(&full, "pipelineStatisticsQuery "), "true");
    assert_eq!(value(&full, "maxImageDimension2D "), "16384");
    let reduced = run(Some(&target));
    assert!(!reduced.contains("VK_EXT_transform_feedback"), "{reduced}");
    assert_eq!(value(&reduced, "pipelineStatisticsQuery "), "false");
    assert_eq!(value(&reduced, "maxImageDimension2D "), "4096");
    // What both offer is unchanged.
    assert_eq!(
        value(&reduced, "maxImageDimension1D "),
        value(&full, "maxImageDimension1D ")
    );
    assert!(reduced.contains("VK_KHR_timeline_semaphore"));
}
