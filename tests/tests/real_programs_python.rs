//! Real programs from PyPI (issue 31): two Vulkan compute frameworks and wgpu, each driven by a
//! short script of `tests/apps/`. Taichi (`taichi_steps.py`, `arch=ti.vulkan`) probes Vulkan with
//! an instance of its own, destroys it, then creates the one it works with, and its kernel
//! profiler reads timestamp queries; ncnn (`ncnn_net.py`) runs a small net with Vulkan compute;
//! wgpu (`wgpu_queries.py`) reads occlusion and timestamp queries through copies. For each: the
//! script prints the same under `quarry capture` as without it, the trace replays with `--compare`
//! exit 0, a capture trimmed in the middle replays, and where it reads queries, the comparison
//! compared every query the trace read, each as its type's rule says.
//!
//! Skips (prints `SKIP`) when a package or lavapipe is missing; scripts/test.sh installs the
//! packages with pip (pinned versions).

use quarry_tests::real::*;
use quarry_tests::*;

// ---- taichi -------------------------------------------------------------------------------

fn taichi() -> Option<App> {
    if !(lavapipe() && python_module("taichi")) {
        return None;
    }
    let script = app_script("taichi_steps.py");
    Some(App::new("taichi", &["python3", script.to_str()?, "8"]))
}

/// Taichi's output less its timings: the kernel profiler's rows become `COUNT NAME`, sorted
/// (the table is ordered by time), and other figures with a decimal point are masked.
fn taichi_text(s: &str) -> String {
    let mut rows = Vec::new();
    let mut other = Vec::new();
    for l in s.lines() {
        match l.split_once("] ") {
            Some((head, name)) if head.starts_with('[') && head.contains("x |") => {
                let count = head.split_whitespace().find(|w| w.ends_with('x'));
                rows.push(format!("{} {name}", count.unwrap_or("?")));
            }
            _ => other.push(mask_decimals(l)),
        }
    }
    rows.sort();
    format!("{}\n{}", other.join("\n"), rows.join("\n"))
}

/// `l` with every number that has a decimal point replaced by `#`.
fn mask_decimals(l: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.contains('.') && run.chars().any(|c| c.is_ascii_digit()) {
            out.push('#');
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in l.chars() {
        if c.is_ascii_digit() || c == '.' {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The 8 steps' sums (exact: the field holds halves) and the profiler's table, all 4 kernels.
fn taichi_ran(out: &std::process::Output) {
    let (o, _) = app_output(out);
    let steps = o.lines().filter(|l| l.starts_with("step ")).count();
    assert_eq!(steps, 8, "{}", output_text(out));
    assert!(o.contains("step 7 sum 126563.5"), "{o}");
    assert!(o.contains("Kernel Profiler"), "{o}");
}

#[test]
fn taichi_probe_instance_then_work_captured_and_its_profiler_timestamps_compared() {
    let Some(app) = taichi() else {
        return;
    };
    let plain = app.plain();
    taichi_ran(&plain);
    let trace = scratch("taichi.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, taichi_text);
    // The probe instance and the working one, both in the trace, with the work after them.
    let t = read_trace(&trace);
    t.check_structure();
    assert_eq!(t.calls_of("vkCreateInstance"), 2);
    assert!(t.calls_of("vkCreateDevice") >= 1);
    assert!(t.calls_of("vkCmdDispatch") >= 8 * 2);
    let read = queries_read(&trace);
    assert!(read.get("TIMESTAMP").is_some_and(|&n| n >= 16), "{read:?}");
    let json = replay_compare(&trace);
    assert_compared(&json, Some(&read), &[("TIMESTAMP", Expect::Clock)]);
}

#[test]
fn taichi_trimmed_in_the_middle_replays_its_profiler_timestamps() {
    let Some(app) = taichi() else {
        return;
    };
    let plain = app.plain();
    let trace = scratch("taichi-trim.qtrace");
    let captured = app.capture(&trace, &["--frames", "3-5"]);
    assert_same_output(&plain, &captured, taichi_text);
    let (frames, info) = trace_frames(&trace);
    assert_eq!(frames, 3, "{info}");
    let json = replay_compare(&trace);
    assert_compared(&json, None, &[("TIMESTAMP", Expect::Clock)]);
}

// ---- ncnn ---------------------------------------------------------------------------------

/// ncnn loads the driver named by VK_ICD_FILENAMES / VK_DRIVER_FILES itself, past the loader and
/// every layer: without them it goes through the loader (lavapipe is this machine's only GPU).
fn ncnn() -> Option<App> {
    if !(lavapipe() && python_module("ncnn")) {
        return None;
    }
    let script = app_script("ncnn_net.py");
    let weights = scratch("ncnn-weights.bin");
    Some(
        App::new(
            "ncnn",
            &["python3", script.to_str()?, weights.to_str()?, "4"],
        )
        .env_remove("VK_ICD_FILENAMES")
        .env_remove("VK_DRIVER_FILES"),
    )
}

fn ncnn_ran(out: &std::process::Output) {
    let (o, _) = app_output(out);
    let runs = o
        .lines()
        .filter(|l| l.starts_with("run ") && l.contains("ret 0 shape (8, 16, 16)"))
        .count();
    assert_eq!(runs, 4, "{}", output_text(out));
}

#[test]
fn ncnn_vulkan_output_unchanged_and_replays() {
    let Some(app) = ncnn() else {
        return;
    };
    let plain = app.plain();
    ncnn_ran(&plain);
    let trace = scratch("ncnn.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, |s| s.to_string());
    let t = read_trace(&trace);
    t.check_structure();
    assert!(t.calls_of("vkCmdDispatch") >= 4, "the net ran on the GPU");
    let json = replay_compare(&trace);
    assert_compared(&json, Some(&queries_read(&trace)), &[]);
}

#[test]
fn ncnn_vulkan_trimmed_in_the_middle_replays() {
    let Some(app) = ncnn() else {
        return;
    };
    let plain = app.plain();
    let trace = scratch("ncnn-trim.qtrace");
    let captured = app.capture(&trace, &["--frames", "2-3"]);
    assert_same_output(&plain, &captured, |s| s.to_string());
    assert_eq!(trace_frames(&trace).0, 2);
    replay_compare(&trace);
}

// ---- wgpu ---------------------------------------------------------------------------------

fn wgpu() -> Option<App> {
    if !(lavapipe() && python_module("wgpu")) {
        return None;
    }
    let script = app_script("wgpu_queries.py");
    Some(App::new("wgpu", &["python3", script.to_str()?, "12"]))
}

/// Its frames' occlusion counts and `timestamps_ok 1`: the same with and without capture.
fn wgpu_ran(out: &std::process::Output) {
    let (o, _) = app_output(out);
    let frames = o
        .lines()
        .filter(|l| l.starts_with("frame ") && l.ends_with("timestamps_ok 1"))
        .count();
    assert_eq!(frames, 12, "{}", output_text(out));
}

#[test]
fn wgpu_output_unchanged_its_queries_compared_and_trimmed() {
    let Some(app) = wgpu() else {
        return;
    };
    let plain = app.plain();
    wgpu_ran(&plain);
    let trace = scratch("wgpu.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, |s| s.to_string());
    let read = queries_read(&trace);
    assert_eq!(read.get("OCCLUSION"), Some(&24), "{read:?}");
    let json = replay_compare(&trace);
    assert_compared(
        &json,
        Some(&read),
        &[("OCCLUSION", Expect::Matches), ("TIMESTAMP", Expect::Clock)],
    );

    let trimmed = scratch("wgpu-trim.qtrace");
    let captured = app.capture(&trimmed, &["--frames", "5-8"]);
    assert_same_output(&plain, &captured, |s| s.to_string());
    let json = replay_compare(&trimmed);
    assert_compared(
        &json,
        None,
        &[("OCCLUSION", Expect::Matches), ("TIMESTAMP", Expect::Clock)],
    );
}
