//! Trimmed captures of programs nobody here wrote, cut in the middle: the snapshot must restore
//! what the frames after the trim point rely on, so the trimmed trace replays like the whole one.
//!
//! ffmpeg's Vulkan filters (Debian's ffmpeg 5.1: `avgblur_vulkan`, `scale_vulkan`) update one
//! descriptor set with a template every frame, naming that frame's image views, and free their
//! download buffer after each copy, the next one taking its address: the snapshot keeps only the
//! updates that give each set what it holds, and leaves out recorded commands naming an earlier
//! object of a reused handle value. Skips (prints `SKIP`) without ffmpeg or lavapipe.

use quarry_tests::*;
use std::path::Path;

/// Frame indices in a trace.
fn frames(path: &Path) -> Vec<u64> {
    let r = format::TraceReader::open(path).unwrap();
    r.records()
        .filter_map(|r| match r.unwrap() {
            format::record::Record::Frame(f) => Some(f.index),
            _ => None,
        })
        .collect()
}

/// Captures `program` trimmed to `range`, replays it with `--compare` on lavapipe and returns the
/// replay's output; both must succeed.
fn trim_and_replay(tag: &str, range: &str, program: &[&str]) -> String {
    let dir = scratch_dir(tag);
    let trace = dir.join("t.qtrace");
    let mut args = vec![
        "capture",
        "-o",
        trace.to_str().unwrap(),
        "--frames",
        range,
        "--",
    ];
    args.extend_from_slice(program);
    let out = run_quarry_on(&args, None);
    assert!(out.status.success(), "{}", output_text(&out));
    let (a, b) = range.split_once('-').unwrap();
    let want: Vec<u64> = (a.parse().unwrap()..=b.parse().unwrap()).collect();
    assert_eq!(frames(&trace), want, "{}", output_text(&out));
    let out = run_quarry_on(
        &[
            "replay",
            trace.to_str().unwrap(),
            "--gpu",
            "llvmpipe",
            "--compare",
        ],
        None,
    );
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("trimmed trace: a state snapshot rebuilds"),
        "{text}"
    );
    assert!(
        text.contains("result: all deterministic results match"),
        "{text}"
    );
    text
}

#[test]
fn trimmed_ffmpeg_vulkan_filters_replay() {
    if !require(&["ffmpeg"]) {
        return;
    }
    // 6 video frames give 20 frames (host waits); 8-12 is the middle.
    trim_and_replay(
        "trim-ffmpeg-filters",
        "8-12",
        &[
            "ffmpeg",
            "-v",
            "error",
            "-init_hw_device",
            "vulkan",
            "-f",
            "lavfi",
            "-i",
            "testsrc=s=160x120:r=30",
            "-frames:v",
            "6",
            "-vf",
            "format=yuv420p,hwupload,avgblur_vulkan,scale_vulkan=w=80:h=60,hwdownload,format=yuv420p",
            "-f",
            "null",
            "-",
        ],
    );
}

/// libplacebo (push descriptors with templates, timestamps it reads back): a trim in the middle
/// replays, and its timestamp reads are compared (as clock values: a replay cannot reproduce them).
#[test]
fn trimmed_ffmpeg_libplacebo_replays_and_compares_its_timestamps() {
    if !require(&["ffmpeg"]) {
        return;
    }
    let text = trim_and_replay(
        "trim-ffmpeg-libplacebo",
        "40-50",
        &[
            "ffmpeg",
            "-v",
            "error",
            "-init_hw_device",
            "vulkan",
            "-f",
            "lavfi",
            "-i",
            "testsrc=s=160x120:r=30",
            "-frames:v",
            "8",
            "-vf",
            "format=yuv420p,hwupload,libplacebo=w=80:h=60:format=yuv420p,hwdownload,format=yuv420p",
            "-f",
            "null",
            "-",
        ],
    );
    let clock: u64 = text
        .lines()
        .find(|l| l.trim_start().starts_with("TIMESTAMP"))
        .and_then(|l| l.split_whitespace().nth(5)?.parse().ok())
        .unwrap_or(0);
    assert!(clock > 0, "no timestamps compared\n{text}");
}
