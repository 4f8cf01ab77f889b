//! A wgpu program (wgpu-native, through Python's `wgpu` package) that we did not write: it never
//! presents, sub-allocates its memory, waits on timeline semaphores by polling, and reads its
//! occlusion and timestamp queries through `vkCmdCopyQueryPoolResults` into a resolve buffer that it
//! copies on into a mapped one (`tests/apps/wgpu_queries.py`).
//!
//! Captured through `quarry capture`, the trace's occlusion copies hold exactly the counts the app
//! printed, the replay matches them, and every replayed timestamp differs from its captured one (the
//! replay GPU produced it). With `--shared-resolve` the app resolves its timestamps over the bytes of
//! its occlusion results within the same submission: the layer must not record those bytes as the
//! occlusion copy's values (they would be timestamps); they are left out with a note, and the replay
//! reports them as not compared instead of comparing timestamps with timestamps.
//!
//! Skips (prints `SKIP`) when Python's `wgpu` package or lavapipe is missing; scripts/test.sh installs
//! the package with pip.

use format::record::{FrameBoundary, Record};
use quarry_tests::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn app() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/wgpu_queries.py")
}

fn have_wgpu() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import wgpu"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP: Python's wgpu package is not installed (pip install wgpu)");
    }
    ok && lavapipe()
}

/// `(samples of draw 0, samples of draw 1)` per frame, as the app printed them.
fn printed_samples(out: &str) -> Vec<(u64, u64)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["frame", _, "samples", a, b, "timestamps_ok", "1"] => {
                    Some((a.parse().ok()?, b.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

fn wgpu_app(args: &[&str]) -> Command {
    let mut c = vulkan_command("python3");
    c.arg(app()).args(args);
    c
}

/// Captures the app through `quarry capture` (the layer built with this test) and returns the trace
/// and what the app printed.
fn capture(tag: &str, args: &[&str]) -> (PathBuf, String) {
    capture_with(tag, &[], args)
}

/// `capture` with options for `quarry capture` (`-o` is the returned path).
fn capture_with(tag: &str, capture_args: &[&str], args: &[&str]) -> (PathBuf, String) {
    let trace = scratch(&format!("wgpu-{tag}.qtrace"));
    let library =
        find_layer_library().expect("build the layer first: cargo build -p capture_layer");
    let out = quarry_command()
        .env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .arg("capture")
        .args(capture_args)
        .args(["--force", "-o"])
        .arg(&trace)
        .args(["--", "python3"])
        .arg(app())
        .args(args)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "capture failed: {text}");
    assert!(text.contains("trace complete"), "{text}");
    (trace, text)
}

/// The occlusion pools of a trace, and each occlusion copy's 64-bit values (empty when the layer
/// recorded no bytes for it).
fn occlusion_copies(trace: &Path) -> (Vec<Vec<u64>>, Vec<String>) {
    let t = read_trace(trace);
    t.check_structure();
    let kinds: HashMap<u64, i32> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::QueryPool(p) => Some((p.pool, p.query_type)),
            _ => None,
        })
        .collect();
    let occlusion = ash::vk::QueryType::OCCLUSION.as_raw();
    let copies = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::QueryCopy(c) if kinds.get(&c.pool) == Some(&occlusion) => Some(
                (0..c.count as usize)
                    .filter_map(|k| {
                        let at = k * c.stride as usize;
                        let b = c.data.get(at..at + 8)?;
                        Some(u64::from_le_bytes(b.try_into().unwrap()))
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    let notes = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Note(n) => Some(n.message.clone()),
            _ => None,
        })
        .collect();
    (copies, notes)
}

/// `quarry replay --compare --json`, and the results file it wrote.
fn replay(trace: &Path) -> (serde_json::Value, Vec<format::record::QueryResult>) {
    let results = trace.with_extension("qres");
    let out = quarry_command()
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .args(["replay", "--compare", "--validate", "--json", "--results"])
        .arg(&results)
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "replay --compare: {}",
        output_text(&out)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Our replay adds no validation messages to what the app did (it dropped VK_KHR_display but
    // kept an extension that requires it).
    assert_eq!(json["validation_messages"], 0, "{json}");
    let rows = read_trace(&results).query_results();
    (json, rows)
}

const FRAMES: &str = "4";

#[test]
fn wgpu_queries_read_through_copies_are_captured_and_replayed_honestly() {
    if !have_wgpu() {
        return;
    }
    // Without the layer: what the app sees.
    let plain = wgpu_app(&[FRAMES]).output().unwrap();
    let plain_text = output_text(&plain);
    assert!(plain.status.success(), "the wgpu app failed: {plain_text}");
    let reference = printed_samples(&plain_text);
    assert_eq!(reference.len(), 4, "{plain_text}");
    assert!(
        reference.iter().all(|&(a, b)| a > b && b > 0),
        "{reference:?}"
    );

    // Under the layer: the app sees the same, and the trace's copies hold what it saw.
    let (trace, text) = capture("separate", &[FRAMES]);
    assert_eq!(printed_samples(&text), reference, "{text}");
    let (copies, _) = occlusion_copies(&trace);
    assert_eq!(
        copies.len(),
        reference.len(),
        "one occlusion copy per frame"
    );
    for (copy, &(a, b)) in copies.iter().zip(&reference) {
        assert_eq!(copy, &vec![a, b], "the copy recorded what the app read");
    }

    let (json, rows) = replay(&trace);
    let by_type = &json["comparison"]["by_type"];
    assert_eq!(by_type["OCCLUSION"]["matches"], 8, "{json}");
    assert_eq!(by_type["OCCLUSION"]["not_compared"], 0, "{json}");
    assert_eq!(by_type["TIMESTAMP"]["clock"], 8, "{json}");
    // The replay GPU produced the timestamps: none equals the one copied out at capture.
    let stamps: Vec<_> = rows
        .iter()
        .filter(|q| q.query_type == ash::vk::QueryType::TIMESTAMP.as_raw())
        .collect();
    assert_eq!(stamps.len(), 8);
    for q in stamps {
        let (c, r) = (q.captured.as_ref().unwrap(), q.replayed.as_ref().unwrap());
        assert_ne!(
            c.values, r.values,
            "a replayed timestamp equals the captured one"
        );
    }
}

#[test]
fn a_copy_overwritten_before_its_completion_point_is_not_recorded_as_its_values() {
    if !have_wgpu() {
        return;
    }
    let (trace, text) = capture("shared", &[FRAMES, "--shared-resolve"]);
    let printed = printed_samples(&text);
    assert_eq!(printed.len(), 4, "{text}");
    let (copies, notes) = occlusion_copies(&trace);
    assert_eq!(copies.len(), 4);
    // Before the fix these held the timestamps resolved over them (values near the host clock).
    assert!(
        copies.iter().all(|c| c.is_empty()),
        "occlusion copies recorded bytes a later copy wrote: {copies:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("query copies not recorded")),
        "no note says why: {notes:?}"
    );

    let (json, _) = replay(&trace);
    let why = json["comparison"]["not_compared"].to_string();
    assert!(why.contains("recorded no bytes"), "{why}");
    let occlusion = &json["comparison"]["by_type"]["OCCLUSION"];
    assert_eq!(occlusion["not_compared"], 8, "{json}");
    assert_eq!(occlusion["matches"], 0, "{json}");
    assert_eq!(occlusion["mismatches"], 0, "{json}");
}

/// Capture on demand in the middle of the run: wgpu chains its submits through binary semaphores,
/// so the last one signaled before the snapshot is waited for by the first captured submit. The
/// snapshot signals it again, and the trace replays with no validation message (it was refused:
/// "waits on semaphore ..., which nothing replayed has signaled").
#[test]
fn triggered_mid_run_the_relay_semaphore_is_restored() {
    if !have_wgpu() {
        return;
    }
    // Frame 1: wgpu's frames end at status polls that see its latest submit done, and a poll
    // can see two frames' submits at once, so the count of boundaries can fall short of 30.
    let (base, text) = capture_with("trigger", &["--trigger", "--trigger-frame", "1"], &["30"]);
    assert!(text.contains("1 trace complete"), "{text}");
    let trace = base.with_file_name("wgpu-trigger_1.qtrace");
    // A frame of the app's own work, not the calls of its exit: its occlusion queries replay.
    let t = read_trace(&trace);
    let frames = t
        .records
        .iter()
        .filter(|r| matches!(r, Record::Frame(f) if f.boundary == FrameBoundary::StatusPoll))
        .count();
    assert_eq!(frames, 1, "{text}");
    let (json, _) = replay(&trace);
    assert_eq!(json["validation_messages"], 0, "{json}");
    // Two per app frame; a frame that ends at a poll seeing two frames' submits holds four.
    let occlusion = &json["comparison"]["by_type"]["OCCLUSION"];
    let matches = occlusion["matches"].as_u64().unwrap_or(0);
    assert!(matches >= 2 && matches % 2 == 0, "{json}");
    assert_eq!(occlusion["queries"], matches, "{json}");
    assert_eq!(occlusion["mismatches"], 0, "{json}");
}

/// wgpu never waits when its work is already done: it polls the timeline semaphore its submits
/// signal. A poll that sees the latest submit's value reached ends a frame, so a whole run has
/// about one frame per app frame instead of one frame in all.
#[test]
fn status_polls_that_see_the_latest_submit_done_end_frames() {
    if !have_wgpu() {
        return;
    }
    let (trace, _) = capture_with("polls", &[], &["12"]);
    let t = read_trace(&trace);
    let kinds: Vec<FrameBoundary> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Frame(f) => Some(f.boundary),
            _ => None,
        })
        .collect();
    let polls = kinds
        .iter()
        .filter(|k| **k == FrameBoundary::StatusPoll)
        .count();
    assert!(polls >= 6, "12 app frames, boundaries {kinds:?}");
    // wgpu's own set-up submits (texture clears, buffer inits) and the exit add a few.
    assert!(kinds.len() <= 24, "12 app frames, boundaries {kinds:?}");
}
