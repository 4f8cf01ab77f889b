//! Multi-pass replay of performance queries end to end on lavapipe, through the built `quarry`:
//! quarry-demo captured with `--emulate-counters` (the app itself runs 4 passes, 2 counters each),
//! replayed with `--emulate-counters` at 3 counters per pass (3 replay passes), merged values equal
//! the demo's known answers and the captured values; counters the replay GPU lacks are reported
//! and skipped, and a replay GPU with none of them is a clear error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use format::record::Record;
use format::TraceReader;
use quarry_tests::*;

fn quarry(args: &[&str], per_pass: &str, hide: &str) -> Output {
    quarry_command()
        .args(args)
        .env("QUARRY_COUNTERS_PER_PASS", per_pass)
        .env("QUARRY_COUNTERS_HIDE", hide)
        .output()
        .unwrap()
}

/// The demo captured once under both layers; `None` (and a SKIP line) when the pieces are not
/// built or there is no lavapipe.
fn trace() -> Option<&'static Path> {
    static T: OnceLock<Option<PathBuf>> = OnceLock::new();
    T.get_or_init(|| {
        for f in [QUARRY_DEMO, CAPTURE_LAYER_LIBRARY, COUNTERS_LAYER_LIBRARY] {
            built_or_skip(f)?;
        }
        if !quarry_sees_lavapipe() {
            return None;
        }
        let t = scratch_dir("counters-replay").join("demo.qtrace");
        let demo = require_built(QUARRY_DEMO);
        let out = quarry(
            &[
                "capture",
                "--emulate-counters",
                "-o",
                t.to_str().unwrap(),
                "--",
                demo.to_str().unwrap(),
                "--headless",
                "--frames",
                "2",
                "--check",
                "--gpu",
                "llvmpipe",
            ],
            "2",
            "",
        );
        assert!(
            out.status.success(),
            "capture failed:\n{}",
            output_text(&out)
        );
        Some(t)
    })
    .as_deref()
}

/// Per (read, counter name): (value, pass, captured value).
type Values = BTreeMap<(u64, String), (f64, u32, Option<f64>)>;

fn counter_values(results: &Path) -> (Values, u32) {
    let r = TraceReader::open(results).unwrap();
    let mut values = Values::new();
    let mut passes = 0;
    let mut reads = 0u64;
    for rec in r.records() {
        match rec.unwrap() {
            Record::CounterValue(c) => {
                values.insert((reads, c.counter.name), (c.value, c.pass, c.captured));
            }
            Record::QueryResult(q) if q.query_type == 1_000_116_000 => reads += 1,
            Record::ReplayInfo(i) => passes = i.passes,
            _ => {}
        }
    }
    (values, passes)
}

#[test]
fn three_pass_replay_merges_to_the_known_answers() {
    let Some(t) = trace() else { return };
    let res = t.with_file_name("three.qres");
    let out = quarry(
        &[
            "replay",
            t.to_str().unwrap(),
            "--emulate-counters",
            "--gpu",
            "llvmpipe",
            "--compare",
            "--results",
            res.to_str().unwrap(),
        ],
        "3",
        "",
    );
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("counter passes 3"), "{text}");
    assert!(text.contains("PERFORMANCE_QUERY"), "{text}");
    let (values, passes) = counter_values(&res);
    assert_eq!(passes, 3);
    // The demo chooses the layer's first 8 counters; 3 per pass puts them in passes 0,0,0,1,1,1,2,2.
    let used: BTreeSet<u32> = values.values().map(|v| v.1).collect();
    assert_eq!(used, BTreeSet::from([0, 1, 2]));
    let names: BTreeSet<&str> = values.keys().map(|k| k.1.as_str()).collect();
    assert_eq!(names.len(), 8, "{names:?}");
    let reads: BTreeSet<u64> = values.keys().map(|k| k.0).collect();
    assert!(!reads.is_empty());
    let known = [
        ("Samples passed", 2560.0),
        ("Clipping invocations", 4.0),
        ("Vertex shader invocations", 12.0),
        ("Clipping primitives", 4.0),
        ("Compute shader invocations", 0.0),
    ];
    for read in &reads {
        for (name, want) in known {
            let (got, _, captured) = values[&(*read, name.to_string())];
            assert_eq!(got, want, "{name} in read {read}");
            assert_eq!(captured, Some(want), "{name} as captured in read {read}");
        }
        let (dur, _, _) = values[&(*read, "Command buffer duration".to_string())];
        assert!(dur > 0.0, "durations are measured too");
    }

    // The same trace in 8 forced passes (one counter each) gives the same deterministic values.
    let res8 = t.with_file_name("eight.qres");
    let out = quarry(
        &[
            "replay",
            t.to_str().unwrap(),
            "--emulate-counters",
            "--gpu",
            "llvmpipe",
            "--passes",
            "8",
            "--results",
            res8.to_str().unwrap(),
        ],
        "3",
        "",
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let (v8, p8) = counter_values(&res8);
    assert_eq!(p8, 8);
    for ((read, name), (got, _, _)) in &v8 {
        if let Some((_, want)) = known.iter().find(|k| k.0 == name) {
            assert_eq!(got, want, "{name} in read {read} with 8 passes");
        }
    }
    // Fewer passes than the counters need is refused with the number needed.
    let out = quarry(
        &[
            "replay",
            t.to_str().unwrap(),
            "--emulate-counters",
            "--gpu",
            "llvmpipe",
            "--passes",
            "2",
        ],
        "3",
        "",
    );
    assert!(!out.status.success());
    assert!(
        output_text(&out).contains("need at least 3 passes"),
        "{}",
        output_text(&out)
    );
}

#[test]
fn missing_counters_are_reported_and_none_is_an_error() {
    let Some(t) = trace() else { return };
    let res = t.with_file_name("partial.qres");
    let out = quarry(
        &[
            "replay",
            t.to_str().unwrap(),
            "--emulate-counters",
            "--gpu",
            "llvmpipe",
            "--results",
            res.to_str().unwrap(),
        ],
        "4",
        "Samples passed,Clipping primitives",
    );
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("\"Samples passed\"") && text.contains("is not on the replay GPU"),
        "{text}"
    );
    let (values, _) = counter_values(&res);
    let names: BTreeSet<&str> = values.keys().map(|k| k.1.as_str()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(!names.contains("Samples passed"));

    let all = "Command buffer duration,Render pass duration,Vertex shader invocations,\
               Clipping invocations,Clipping primitives,Fragment shader invocations,\
               Samples passed,Compute shader invocations";
    let out = quarry(
        &[
            "replay",
            t.to_str().unwrap(),
            "--emulate-counters",
            "--gpu",
            "llvmpipe",
        ],
        "4",
        all,
    );
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("none of this pool's 8 performance counters"),
        "{text}"
    );
    assert!(text.contains("vkCreateQueryPool"), "names the call: {text}");

    // Without the emulation layer lavapipe has no VK_KHR_performance_query: one clear error.
    let out = quarry(
        &["replay", t.to_str().unwrap(), "--gpu", "llvmpipe"],
        "4",
        "",
    );
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("VK_KHR_performance_query"), "{text}");
    assert!(text.contains("--emulate-counters"), "{text}");
}

/// The demo captured without any layer below the capture (its trace has no performance queries).
fn plain_trace() -> Option<PathBuf> {
    let t = trace()?;
    let plain = t.with_file_name("plain.qtrace");
    let demo = require_built(QUARRY_DEMO);
    let out = quarry(
        &[
            "capture",
            "-o",
            plain.to_str().unwrap(),
            "--",
            demo.to_str().unwrap(),
            "--headless",
            "--frames",
            "2",
            "--gpu",
            "llvmpipe",
        ],
        "2",
        "",
    );
    assert!(
        out.status.success(),
        "capture failed:\n{}",
        output_text(&out)
    );
    Some(plain)
}

/// `--counters` measures around every command buffer or render pass of a trace that has no
/// performance queries at all; lavapipe lacks VK_KHR_performance_query, so the emulation layer is
/// loaded underneath automatically.
#[test]
fn injected_counters_per_command_buffer_and_render_pass() {
    let Some(t) = plain_trace() else { return };
    let t = t.to_str().unwrap();
    let mut per_scope = Vec::new();
    for scope in ["command-buffer", "render-pass"] {
        let res = scratch(&format!("inject-{scope}.qres"));
        let out = quarry(
            &[
                "replay",
                t,
                "--gpu",
                "llvmpipe",
                "--counters",
                "all",
                "--scope",
                scope,
                "--results",
                res.to_str().unwrap(),
            ],
            "4",
            "",
        );
        let text = output_text(&out);
        assert!(out.status.success(), "{scope}: {text}");
        assert!(text.contains("through VK_LAYER_QUARRY_counters"), "{text}");
        let r = TraceReader::open(&res).unwrap();
        let mut names = BTreeSet::new();
        let mut passes = BTreeSet::new();
        let mut samples = Vec::new();
        let mut vertices = Vec::new();
        let mut scoped = true;
        for rec in r.records() {
            if let Record::CounterValue(c) = rec.unwrap() {
                scoped &= c.render_pass.is_some() == (scope == "render-pass");
                passes.insert(c.pass);
                match c.counter.name.as_str() {
                    "Samples passed" => samples.push(c.value),
                    "Input assembly vertices" => vertices.push(c.value),
                    _ => {}
                }
                names.insert(c.counter.name);
            }
        }
        let _ = std::fs::remove_file(&res);
        assert!(
            scoped,
            "{scope}: render_pass set exactly for render-pass scope"
        );
        // The main pass draws the occluder and the target: 2560 samples, 12 vertices.
        assert!(samples.contains(&2560.0), "{scope}: {samples:?}");
        assert!(vertices.contains(&12.0), "{scope}: {vertices:?}");
        per_scope.push((names, passes));
    }
    let (cb_names, cb_passes) = &per_scope[0];
    let (rp_names, rp_passes) = &per_scope[1];
    // 10 counters at 4 per pass; render passes cannot hold the 2 command-buffer-scope ones.
    assert_eq!(cb_names.len(), 10, "{cb_names:?}");
    assert_eq!(cb_passes.len(), 3);
    assert_eq!(rp_names.len(), 8, "{rp_names:?}");
    assert!(!rp_names.contains("Command buffer duration"));
    assert_eq!(rp_passes.len(), 2);

    let out = quarry(
        &[
            "replay",
            t,
            "--gpu",
            "llvmpipe",
            "--counters",
            "Samples passed,Bogus",
        ],
        "4",
        "",
    );
    assert!(!out.status.success());
    assert!(
        output_text(&out).contains("no counter named \"Bogus\""),
        "{}",
        output_text(&out)
    );
}

/// `--counters all` beside the app's own performance queries: one performance query may be active
/// in a command buffer at a time, so the injection leaves the scopes the app measures alone and
/// says so, and both the app's values and the injected ones come out (it used to stop with a
/// query that never completed, after the counters layer reported VUID-vkCmdEndQuery-None-01923).
#[test]
fn injection_beside_the_apps_own_performance_queries() {
    let Some(t) = trace() else {
        return;
    };
    let res = t.with_file_name("beside.qres");
    let out = quarry(
        &[
            "replay",
            t.to_str().unwrap(),
            "--counters",
            "all",
            "--compare",
            "--gpu",
            "llvmpipe",
            "--results",
            res.to_str().unwrap(),
        ],
        "2",
        "",
    );
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("VUID"), "{text}");
    assert!(
        text.contains("the app's own performance query was active there"),
        "{text}"
    );
    let (mut app_reads, mut app_values, mut injected) = (0, 0, 0);
    for rec in TraceReader::open(&res).unwrap().records() {
        match rec.unwrap() {
            Record::QueryResult(q) if q.query_type == 1_000_116_000 => {
                app_reads += 1;
                assert!(
                    q.replayed.as_ref().is_some_and(|v| v.available),
                    "the app's query read at seq {} was not replayed",
                    q.seq
                );
            }
            Record::CounterValue(c) if c.captured.is_some() => app_values += 1,
            Record::CounterValue(_) => injected += 1,
            _ => {}
        }
    }
    assert!(app_reads > 0 && app_values > 0, "{app_reads} {app_values}");
    assert!(injected > 0, "no injected counter values");
}
