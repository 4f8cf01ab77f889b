//! Runs the real binary on lavapipe (the CI driver): `--check` must pass and
//! VK_LAYER_KHRONOS_validation must stay silent. No Vulkan driver is a
//! failure, not a skip: CI always has lavapipe.

use std::process::{Command, Output};

fn demo(args: &[&str], validation: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quarry-demo"));
    cmd.args(args).env("XDG_RUNTIME_DIR", std::env::temp_dir());
    if validation {
        cmd.env("VK_LOADER_LAYERS_ENABLE", "*validation*");
    } else {
        cmd.env_remove("VK_LOADER_LAYERS_ENABLE");
    }
    cmd.output().expect("quarry-demo could not be started")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn check_passes_on_lavapipe() {
    let o = demo(
        &[
            "--headless",
            "--frames",
            "3",
            "--check",
            "--gpu",
            "llvmpipe",
        ],
        false,
    );
    let (out, err) = text(&o);
    assert!(
        o.status.success(),
        "quarry-demo --check failed\n{out}\n{err}"
    );
    assert!(err.contains("check: all"), "{err}");
    // The exact answers the rest of the project relies on.
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("row {name:?} missing from\n{out}"))
            .to_string()
    };
    assert!(row("occlusion PRECISE, half-hidden quad").contains(" 512 "));
    assert!(row("occlusion PRECISE 4x MSAA, half-hidden quad").contains(" 2048 "));
    assert!(row("pipeline statistics: compute shader invocations").contains(" 192 "));
    assert!(row("xfb stream 1: primitives written (overflow)").contains(" 8 "));
    assert!(!out.contains("MISMATCH"));
    // lavapipe lacks these, and says so in the exact form.
    assert!(out.contains(
        "skipped: occlusion query inherited by a secondary command buffer needs VkPhysicalDeviceFeatures::inheritedQueries"
    ));
    assert!(out.contains("skipped: mesh primitives generated"));
}

#[test]
fn validation_layer_reports_nothing() {
    let o = demo(
        &[
            "--headless",
            "--frames",
            "3",
            "--check",
            "--validate",
            "--gpu",
            "llvmpipe",
        ],
        true,
    );
    let (out, err) = text(&o);
    assert!(!err.contains("validation:"), "validation messages:\n{err}");
    assert!(
        o.status.success(),
        "quarry-demo under validation failed\n{out}\n{err}"
    );
}

#[test]
fn json_has_every_frame() {
    let o = demo(
        &[
            "--headless",
            "--frames",
            "2",
            "--check",
            "--json",
            "--gpu",
            "llvmpipe",
        ],
        false,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(v["frames"], 2);
    assert_eq!(v["passed"], true);
    let checks = v["checks"].as_array().expect("checks array");
    let occ = checks
        .iter()
        .find(|c| c["query"] == "occlusion PRECISE, half-hidden quad")
        .expect("precise occlusion row");
    assert_eq!(occ["got"], serde_json::json!(["512", "512"]));
    assert_eq!(occ["rule"], "exact");
    assert!(v["skipped"].as_array().is_some_and(|s| !s.is_empty()));
}

/// The benchmark flags leave their workloads out (and say so) and the rest still checks out.
#[test]
fn benchmark_flags_leave_workloads_out() {
    let args = [
        "--headless",
        "--frames",
        "1",
        "--check",
        "--no-video",
        "--no-accel",
        "--gpu",
        "llvmpipe",
    ];
    let o = demo(&args, false);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains(
        "skipped: acceleration-structure queries needs the acceleration-structure workload (left out by --no-accel)"
    ), "{out}");
    assert!(out.contains("(left out by --no-video)"), "{out}");
    assert!(out.contains("occlusion PRECISE, half-hidden quad"), "{out}");
}

/// The timeline-semaphore path: every value read through vkCmdCopyQueryPoolResults after a
/// semaphore wait is the one its own round drew (2 rounds per frame, a different answer each), and
/// `--no-timeline` leaves it out with a skip line.
#[test]
fn timeline_copies_hold_each_rounds_answer() {
    let o = demo(
        &[
            "--headless",
            "--frames",
            "3",
            "--check",
            "--json",
            "--gpu",
            "llvmpipe",
        ],
        false,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("--json prints JSON");
    let checks = v["checks"].as_array().expect("checks array");
    let row = |name: &str| {
        checks
            .iter()
            .find(|c| c["query"] == name)
            .unwrap_or_else(|| panic!("row {name:?} missing from {out}"))
            .clone()
    };
    let got = |name: &str| row(name)["got"].clone();
    use serde_json::json;
    // 64 px per row, 1 + (round + 13k) % 64 rows for query k.
    assert_eq!(
        got("timeline: occlusion q0 copied @0 (submit, wait)"),
        json!(["64", "128", "192", "256", "320", "384"])
    );
    assert_eq!(
        got("timeline: occlusion q3 copied @48 (submit, wait)"),
        json!(["2560", "2624", "2688", "2752", "2816", "2880"])
    );
    assert_eq!(
        got("timeline: occlusion q4 copied 32-bit @128 (submit2, poll)"),
        json!(["3392", "3456", "3520", "3584", "3648", "3712"])
    );
    for bits in ["64", "32"] {
        let name = format!("timeline: occlusion q5 via device-local + vkCmdCopyBuffer, {bits}-bit");
        assert_eq!(
            got(&name),
            json!(["128", "192", "256", "320", "384", "448"]),
            "{name}"
        );
        assert_eq!(row(&name)["rule"], "exact");
    }
    assert_eq!(
        got("timeline: statistics input assembly vertices copied @96"),
        json!(["6", "12", "18", "24", "6", "12"])
    );
    assert_eq!(
        got("timeline: semaphore value polled after the round"),
        json!(["2", "4", "6", "8", "10", "12"])
    );
    let ts = row("timeline: timestamp pair after the previous round's");
    assert_eq!(ts["rule"], "spec bound");
    assert_eq!(ts["got"].as_array().map(Vec::len), Some(5));
    assert!(checks
        .iter()
        .filter(|c| c["query"]
            .as_str()
            .is_some_and(|q| q.starts_with("timeline")))
        .all(|c| c["pass"] == true));

    let o = demo(
        &[
            "--headless",
            "--frames",
            "1",
            "--check",
            "--no-timeline",
            "--gpu",
            "llvmpipe",
        ],
        false,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("skipped: timeline-semaphore query copies needs the timeline workload (left out by --no-timeline)"),
        "{out}"
    );
    assert!(!out.contains("timeline: occlusion"), "{out}");
}

#[test]
fn bad_arguments_give_clear_errors() {
    let o = demo(&["--headless", "--gpu", "99"], false);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("--gpu 99: no such device"), "{err}");
    let o = demo(&["--headless", "--gpu", "no-such-gpu-name"], false);
    assert!(text(&o).1.contains("no device name contains it"));
    let o = demo(&["--headless", "--frames", "0"], false);
    assert!(text(&o).1.contains("--frames must be at least 1"));
}

/// Windowed mode under a private Xvfb display: presents every frame and
/// still passes `--check` with validation silent.
#[test]
fn windowed_under_xvfb() {
    // A display number no other server holds: killed runs leave lock files and sockets behind,
    // and a stale socket would look like our server having started.
    let mut n = 200 + std::process::id() % 500;
    while std::path::Path::new(&format!("/tmp/.X{n}-lock")).exists()
        || std::path::Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
    {
        n += 1;
    }
    let display = format!(":{n}");
    let mut xvfb = Command::new("Xvfb")
        .args([
            display.as_str(),
            "-screen",
            "0",
            "320x240x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("Xvfb is needed for the windowed test (Debian: xvfb)");
    let socket = format!("/tmp/.X11-unix/X{n}");
    let start = std::time::Instant::now();
    while !std::path::Path::new(&socket).exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "Xvfb {display} did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_quarry-demo"))
        .args([
            "--frames",
            "3",
            "--check",
            "--validate",
            "--gpu",
            "llvmpipe",
        ])
        .env("DISPLAY", &display)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env("VK_LOADER_LAYERS_ENABLE", "*validation*")
        .output()
        .expect("quarry-demo could not be started");
    let _ = xvfb.kill();
    let _ = xvfb.wait();
    let (out, err) = text(&o);
    assert!(!err.contains("validation:"), "validation messages:\n{err}");
    assert!(o.status.success(), "windowed run failed\n{out}\n{err}");
}

#[test]
fn windowed_without_display_is_a_clear_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_quarry-demo"))
        .args(["--frames", "1"])
        .env_remove("DISPLAY")
        .output()
        .expect("quarry-demo could not be started");
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("DISPLAY is not set"));
}
