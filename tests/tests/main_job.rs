//! The main job end to end on this machine's GPUs (lavapipe in CI): `quarry demo`, plus
//! `quarry capture`, `replay` of damaged input, `devices --json` and `export --format perfetto`,
//! all through the built binary.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use format::record::{QueryOpKind, Record};
use format::TraceReader;
use quarry_tests::*;

const OCCLUSION: i32 = 0;
const PRECISE: u32 = 1;

/// One `quarry demo` run shared by the tests (it also builds quarry-demo and the layer next to
/// the quarry binary when they are missing).
fn demo() -> &'static (Output, PathBuf) {
    static DEMO: OnceLock<(Output, PathBuf)> = OnceLock::new();
    DEMO.get_or_init(|| {
        let dir = scratch_dir("demo");
        let out = run_quarry(&["demo", "--no-view", "--out", dir.to_str().unwrap()]);
        (out, dir)
    })
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn demo_captures_replays_and_matches() {
    let (out, dir) = demo();
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("capture your own app"), "{so}");
    let trace = dir.join("quarry-demo.qtrace");
    assert!(trace.is_file());
    let results = files_with_ext(dir, "qres");
    assert!(!results.is_empty(), "no results file in {}", dir.display());

    let info = run_quarry(&["info", "--json", trace.to_str().unwrap()]);
    assert_eq!(info.status.code(), Some(0), "{}", text(&info.stderr));
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert!(v["frames"].as_u64().unwrap() >= 3, "{v}");
    assert!(
        v["record_counts"]["QueryResults"].as_u64().unwrap_or(0) > 0,
        "{v}"
    );
    // The layer writes the header before it knows the device; info names it from the trace.
    assert!(
        v["device"]["name"].as_str().is_some_and(|n| !n.is_empty()),
        "{v}"
    );

    // A results file names its capture device in the trace's notation (UUIDs as hex strings).
    let rinfo = run_quarry(&["info", "--json", results[0].to_str().unwrap()]);
    assert_eq!(rinfo.status.code(), Some(0), "{}", text(&rinfo.stderr));
    let rv: serde_json::Value = serde_json::from_slice(&rinfo.stdout).unwrap();
    assert_eq!(
        rv["replay"]["capture_device"]["device_uuid"], v["device"]["device_uuid"],
        "{rv}"
    );
    assert!(v["device"]["device_uuid"].is_string(), "{v}");

    // Precise occlusion queries, by (pool, query), from the trace's begin operations.
    let mut precise = HashSet::new();
    let r = TraceReader::open(&trace).unwrap();
    for rec in r.records() {
        if let Record::QueryOp(op) = rec.unwrap() {
            if let QueryOpKind::Begin { query, flags, .. } = op.kind {
                if flags & PRECISE != 0 {
                    precise.insert((op.pool, query));
                }
            }
        }
    }
    assert!(
        !precise.is_empty(),
        "quarry-demo begins precise occlusion queries"
    );

    // The first results file is GPU 0; lavapipe is the capture device here.
    let res = TraceReader::open(&results[0]).unwrap();
    let (mut results_seen, mut compared) = (0, 0);
    for rec in res.records() {
        if let Record::QueryResult(q) = rec.unwrap() {
            results_seen += 1;
            if q.query_type != OCCLUSION || !precise.contains(&(q.pool, q.query)) {
                continue;
            }
            let Some(c) = q.captured.as_ref().filter(|c| c.available) else {
                continue;
            };
            let rep = q.replayed.as_ref().expect("replayed value");
            assert_eq!(
                c.values, rep.values,
                "precise occlusion {}:{}",
                q.pool, q.query
            );
            compared += 1;
        }
    }
    assert!(results_seen > 0);
    assert!(compared > 0, "no precise occlusion query was compared");
}

#[test]
fn capture_runs_a_program_under_the_layer() {
    let (demo_out, _) = demo();
    assert_eq!(
        demo_out.status.code(),
        Some(0),
        "{}",
        text(&demo_out.stderr)
    );
    let demo_bin = target_dir().join(QUARRY_DEMO);
    assert!(
        demo_bin.is_file(),
        "quarry demo builds {}",
        demo_bin.display()
    );
    let dir = scratch_dir("capture");
    let trace = dir.join("t.qtrace");
    let out = run_quarry(&[
        "capture",
        "-o",
        trace.to_str().unwrap(),
        "--",
        demo_bin.to_str().unwrap(),
        "--headless",
        "--frames",
        "2",
    ]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{so}\n{}", text(&out.stderr));
    assert!(so.contains(&format!("trace: {}", trace.display())), "{so}");
    assert!(so.contains("frames "), "{so}");
    let info = TraceReader::open(&trace).unwrap().info();
    assert!(info.complete);
    assert!(info.frames >= 2, "{}", info.frames);

    // A bad frame range is a usage error, before anything runs.
    let bad = run_quarry(&["capture", "--frames", "9-2", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    // A program that does not exist: exit 2, one line.
    let missing = run_quarry(&[
        "capture",
        "-o",
        trace.to_str().unwrap(),
        "--",
        "/nonexistent/app",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(
        text(&missing.stderr).lines().count(),
        1,
        "{}",
        text(&missing.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn replay_of_damaged_trace_is_bad_input() {
    let dir = scratch_dir("damaged");
    let garbage = dir.join("garbage.qtrace");
    std::fs::write(&garbage, b"this is not a quarry trace at all, just text").unwrap();
    let missing = dir.join("missing.qtrace");
    // The demo's real trace with a stretch of payload bytes flipped: a block checksum fails.
    let (demo_out, demo_dir) = demo();
    assert_eq!(
        demo_out.status.code(),
        Some(0),
        "{}",
        text(&demo_out.stderr)
    );
    let mut bytes = std::fs::read(demo_dir.join("quarry-demo.qtrace")).unwrap();
    for b in &mut bytes[3000..3100] {
        *b ^= 0xff;
    }
    let flipped = dir.join("flipped.qtrace");
    std::fs::write(&flipped, bytes).unwrap();
    for p in [&garbage, &missing, &flipped] {
        let out = run_quarry(&["replay", p.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("quarry: "), "{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn devices_json_lists_lavapipe() {
    let out = run_quarry(&["devices", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpus = v.as_array().expect("a JSON array");
    assert!(
        gpus.iter()
            .any(|g| g["name"].as_str().is_some_and(|n| n.contains("llvmpipe"))),
        "{v}"
    );
    assert!(gpus
        .iter()
        .all(|g| g["uuid"].as_str().is_some_and(|u| u.len() == 32)));
}

#[test]
fn export_perfetto_writes_valid_json() {
    let (demo_out, dir) = demo();
    assert_eq!(
        demo_out.status.code(),
        Some(0),
        "{}",
        text(&demo_out.stderr)
    );
    let trace = dir.join("quarry-demo.qtrace");
    let results = files_with_ext(dir, "qres");
    let out_file = scratch_dir("export").join("q.perfetto.json");
    let mut args = vec![
        "export",
        "--format",
        "perfetto",
        "-o",
        out_file.to_str().unwrap(),
    ];
    args.push(trace.to_str().unwrap());
    args.push(results[0].to_str().unwrap());
    let out = run_quarry(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out_file).unwrap()).expect("valid JSON");
    let events = v
        .get("traceEvents")
        .or(Some(&v))
        .and_then(|e| e.as_array())
        .expect("trace events array");
    assert!(!events.is_empty());

    let bad = run_quarry(&[
        "export",
        "--format",
        "svg",
        "-o",
        "/tmp/x",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
}
