//! Capture -> replay -> compare, end to end on lavapipe: quarry-demo headless and vkcube under
//! Xvfb are captured with the layer, then replayed in a process with no DISPLAY.
//!
//! Needs the demo built in the same target dir (`cargo build --workspace`) and lavapipe; vkcube/Xvfb
//! for the vkcube test. Missing pieces skip the test with a message.

use std::path::Path;
use std::process::Command;

use format::record::Record;
use format::TraceReader;
use quarry_tests::*;
use replayer::ReplayOptions;

const CHILD_ENV: &str = "QUARRY_REPLAY_TEST_CHILD_TRACE";

fn replay_opts(trace: &Path) -> ReplayOptions {
    let mut o = ReplayOptions::new(trace);
    // The capture ran on lavapipe; replay there too so "same device" rules apply.
    o.gpu = Some("llvmpipe".into());
    o.compare = true;
    o
}

/// quarry-demo --headless --frames 3 captured, replayed with a results file: every deterministic
/// query matches, and the results file holds one record per query read.
#[test]
fn demo_capture_replay_compare() {
    if !lavapipe() {
        return;
    }
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let layer = layer();
    let trace = tmp.path().join("demo.qtrace");
    // Self-timing on: it must not disturb the capture, and it counts what the trace holds.
    let child = under_layer(vulkan_command(&demo), &layer, &trace)
        .env("QUARRY_CAPTURE_PROFILE", "1")
        .args(["--headless", "--frames", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quarry-demo failed: {stderr}");
    assert!(
        stderr.contains("quarry: capture finished") && stderr.contains("calls recorded"),
        "the profile is printed on stderr too: {stderr}"
    );
    check_profile_note(&trace);
    check_call_threads_and_times(&trace, pid);

    let results = tmp.path().join("demo.qres");
    let mut opts = replay_opts(&trace);
    opts.results = Some(results.clone());
    let s = replayer::replay(&opts).expect("replay of the demo trace");
    let text = s.comparison.to_text();
    assert!(!s.comparison.failed(), "{text}");
    assert!(
        s.comparison.same_device,
        "captured and replayed on lavapipe"
    );
    let matched = |name: &str| s.comparison.by_type.get(name).map_or(0, |t| t.matches);
    // The demo exercises these with known answers on lavapipe.
    for ty in [
        "OCCLUSION",
        "PIPELINE_STATISTICS",
        "PRIMITIVES_GENERATED",
        "TRANSFORM_FEEDBACK_STREAM",
    ] {
        assert!(matched(ty) > 0, "no {ty} query matched:\n{text}");
    }
    let ts = &s.comparison.by_type["TIMESTAMP"];
    assert_eq!(ts.mismatches, 0, "timestamps are never deterministic");
    // Clock values: never "match", on the same device too.
    assert!(ts.matches == 0 && ts.clock > 0, "{text}");
    assert!(s.queries > 0 && s.frames > 0);

    let r = TraceReader::open(&results).unwrap();
    let mut n = 0;
    let mut timestamps_converted = 0;
    for rec in r.records() {
        if let Record::QueryResult(q) = rec.unwrap() {
            n += 1;
            assert!(q.captured.is_some() && q.replayed.is_some());
            if q.replayed_gpu_ns.is_some() {
                timestamps_converted += 1;
            }
        }
    }
    assert_eq!(n, s.queries);
    assert!(timestamps_converted > 0, "timestamps are converted to ns");

    // The same trace with one captured primitives-generated count off by one: --compare must fail
    // and name that query.
    let tampered = tmp.path().join("tampered.qtrace");
    let pool = tamper_primitives_generated(&trace, &tampered);
    let s = replayer::replay(&replay_opts(&tampered)).expect("replay of the tampered trace");
    assert!(s.comparison.failed(), "{}", s.comparison.to_text());
    assert_eq!(s.comparison.by_type["PRIMITIVES_GENERATED"].mismatches, 1);
    assert!(
        s.comparison
            .mismatches
            .iter()
            .any(|m| m.contains(&format!("pool 0x{pool:x}"))),
        "{:?}",
        s.comparison.mismatches
    );
}

/// The demo records on its main thread only: every call carries the process id as its thread,
/// and call times (from the TSC, anchored at frame ends) run forward with the frames' clock reads.
fn check_call_threads_and_times(trace: &Path, pid: u32) {
    let r = TraceReader::open(trace).unwrap();
    let (mut calls, mut last) = (0, 0u64);
    // Extrapolated call times may sit a little after the next clock read; never microseconds.
    const SLACK_NS: u64 = 2_000;
    for rec in r.records() {
        let (ns, what) = match rec.unwrap() {
            Record::Call(c) => {
                assert_eq!(c.thread, pid, "call {} from another thread", c.seq);
                calls += 1;
                (c.host_ns, format!("call {}", c.seq))
            }
            Record::Frame(f) => (f.host_ns, format!("frame {}", f.index)),
            _ => continue,
        };
        assert!(ns + SLACK_NS >= last, "{what} at {ns} ns, after {last} ns");
        last = last.max(ns);
    }
    assert!(calls > 100, "{calls} calls");
}

/// The closing note's `QUARRY_CAPTURE_PROFILE` figures count the calls and results calls the
/// trace holds.
fn check_profile_note(trace: &Path) {
    let r = TraceReader::open(trace).unwrap();
    let (mut calls, mut results, mut note) = (0, 0, None);
    for rec in r.records() {
        match rec.unwrap() {
            Record::Call(_) => calls += 1,
            Record::QueryResults(_) => results += 1,
            Record::Note(n) if n.message.starts_with("capture finished") => note = Some(n.message),
            _ => {}
        }
    }
    let note = note.expect("a closing note");
    let count = |what: &str| -> usize {
        let at = note
            .find(what)
            .unwrap_or_else(|| panic!("no '{what}' in: {note}"));
        note[at + what.len()..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count after '{what}' in: {note}"))
    };
    assert!(results > 0);
    assert_eq!(count("calls recorded "), calls, "{note}");
    assert_eq!(count("query results recorded "), results, "{note}");
}

/// Copies `src` to `dst` adding 1 to the value of the first primitives-generated query a
/// `QueryResults` record shows available; returns its pool.
fn tamper_primitives_generated(src: &Path, dst: &Path) -> u64 {
    let r = TraceReader::open(src).unwrap();
    let w = format::TraceWriter::create(dst, r.header().clone()).unwrap();
    let mut pools = std::collections::HashSet::new();
    let mut done = None;
    for rec in r.records() {
        let mut rec = rec.unwrap();
        match &mut rec {
            Record::QueryPool(p)
                if p.query_type == ash::vk::QueryType::PRIMITIVES_GENERATED_EXT.as_raw() =>
            {
                pools.insert(p.pool);
            }
            Record::QueryResults(q) if done.is_none() && pools.contains(&q.pool) => {
                let shape = replayer::queries::PoolShape {
                    query_type: ash::vk::QueryType::PRIMITIVES_GENERATED_EXT.as_raw(),
                    pipeline_statistics: 0,
                    perf_counters: 0,
                };
                let decoded =
                    replayer::queries::decode(&q.data, q.count, q.stride, q.flags, shape, q.result)
                        .unwrap();
                if let Some(i) = decoded.iter().position(|d| d.available) {
                    let at = i * q.stride as usize;
                    if q.flags & replayer::queries::RESULT_64 != 0 {
                        let v = u64::from_le_bytes(q.data[at..at + 8].try_into().unwrap()) + 1;
                        q.data[at..at + 8].copy_from_slice(&v.to_le_bytes());
                    } else {
                        let v = u32::from_le_bytes(q.data[at..at + 4].try_into().unwrap()) + 1;
                        q.data[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                    done = Some(q.pool);
                }
            }
            // Blob payloads are re-interned in the new file.
            Record::MemoryWrite(m) => {
                let bytes = r.payload_bytes(&m.data).unwrap();
                m.data = w.payload(&bytes).unwrap();
            }
            _ => {}
        }
        w.write(&rec).unwrap();
    }
    w.finish().unwrap();
    done.expect("the demo reads an available primitives-generated query")
}

/// Validation enabled during the replay of the demo trace reports nothing.
#[test]
fn demo_replay_under_validation_adds_no_messages() {
    if !lavapipe() {
        return;
    }
    if !validation_layer() {
        return;
    }
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let layer = layer();
    let trace = tmp.path().join("demo.qtrace");
    let out = under_layer(vulkan_command(&demo), &layer, &trace)
        .args(["--headless", "--frames", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut opts = replay_opts(&trace);
    opts.validate = true;
    let s = replayer::replay(&opts).expect("replay");
    assert_eq!(s.validation_messages, 0, "{:#?}", s.first_messages);
    assert!(!s.comparison.failed(), "{}", s.comparison.to_text());
}

/// vkcube captured in a window under Xvfb replays offscreen in a process without DISPLAY.
#[test]
fn vkcube_replays_without_a_display() {
    if let Some(trace) = std::env::var_os(CHILD_ENV) {
        // Child mode (see below): no DISPLAY here.
        assert!(std::env::var_os("DISPLAY").is_none());
        let s =
            replayer::replay(&replay_opts(Path::new(&trace))).expect("headless replay of vkcube");
        assert_eq!(s.frames, 10, "one frame per present");
        assert!(!s.comparison.failed());
        return;
    }
    if !require(&["vkcube", "Xvfb"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let layer = layer();
    let x = Xvfb::start();
    let trace = tmp.path().join("cube.qtrace");
    let out = under_layer(vulkan_command("vkcube"), &layer, &trace)
        .env("DISPLAY", &x.display)
        .args(["--c", "10"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vkcube failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Re-run this test in a child process without DISPLAY to replay.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "vkcube_replays_without_a_display", "--nocapture"])
        .env(CHILD_ENV, &trace)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "headless replay failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
