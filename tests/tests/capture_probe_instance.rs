//! A capture follows the process, not its first instance: `quarry-demo --probe-instance` looks the
//! GPUs over with an instance of its own (enumerates, reads properties, makes and destroys a
//! device), destroys it, then does its work with a second instance. One trace holds both
//! instances and the work, ends at process exit, and replays with every query compared, each
//! result naming the device it ran on. The same trace with the work instance and device under
//! the probe's handles (a driver may hand them out again) replays the same. A frame range
//! (`--frames 1-2`) across the probe gives a trimmed trace whose snapshot holds only the live
//! instance and device.
//!
//! Skips (prints `SKIP`) without lavapipe, the demo or the layer.

use format::record::{QueryResult, Record};
use quarry_tests::hostile::{call_name, forged_from};
use quarry_tests::*;
use std::path::{Path, PathBuf};

/// `quarry capture [--frames F] -o TRACE -- quarry-demo --headless --probe-instance ...`.
fn capture(tag: &str, frames: Option<&str>, demo_frames: &str) -> Option<PathBuf> {
    let demo = built_or_skip(QUARRY_DEMO)?;
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return None;
    }
    let dir = scratch_dir(tag);
    let trace = dir.join("probe.qtrace");
    let mut args = vec!["capture", "--force", "-o", trace.to_str()?];
    if let Some(f) = frames {
        args.extend(["--frames", f]);
    }
    args.extend([
        "--",
        demo.to_str()?,
        "--headless",
        "--probe-instance",
        "--check",
        "--frames",
        demo_frames,
        "--gpu",
        "llvmpipe",
    ]);
    let out = run_quarry(&args);
    let text = output_text(&out);
    assert!(out.status.success(), "capture failed: {text}");
    assert!(text.contains("trace complete"), "{text}");
    // One trace: nothing numbered beside it (a trace per instance would be `probe.1.qtrace`).
    let others: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".qtrace") && n != "probe.qtrace")
        .collect();
    assert!(others.is_empty(), "more traces than one: {others:?}");
    Some(trace)
}

/// The seqs of the calls to `name`, in trace order.
fn seqs_of(t: &Trace, name: &str) -> Vec<u64> {
    let id = vkstream::command_id(name).unwrap();
    t.records
        .iter()
        .filter_map(|r| match r {
            Record::Call(c) if c.cmd == id => Some(c.seq),
            _ => None,
        })
        .collect()
}

/// `quarry replay --compare --gpu llvmpipe --json --results`: the JSON and the results rows.
fn replay(trace: &Path) -> (serde_json::Value, Vec<QueryResult>) {
    let results = trace.with_extension("qres");
    let validate = validation_layer();
    let out = quarry_command()
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .args(["replay", "--compare", "--gpu", "llvmpipe", "--json"])
        .args(validate.then_some("--validate"))
        .arg("--results")
        .arg(&results)
        .arg(trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "replay: {}", output_text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if validate {
        assert_eq!(json["validation_messages"], 0, "{json}");
    }
    let rows = read_trace(&results).query_results();
    (json, rows)
}

/// Every row ran on the work device (the second the trace made: the probe's is the first) of
/// lavapipe, and deterministic queries were compared and matched.
fn check_rows(json: &serde_json::Value, rows: &[QueryResult], work_device: u32) {
    assert_eq!(json["result"], "ok", "{json}");
    assert!(!rows.is_empty(), "no query replayed: {json}");
    for r in rows {
        let d = r.device.as_ref().expect("the results name the device");
        assert_eq!(d.index, work_device, "{r:?}");
        assert!(d.captured_on.contains("llvmpipe"), "{d:?}");
        assert_ne!(d.handle, 0);
    }
    let occlusion = &json["comparison"]["by_type"]["OCCLUSION"];
    assert!(
        occlusion["matches"].as_u64().unwrap_or(0) > 0,
        "occlusion queries compared: {json}"
    );
}

#[test]
fn a_probe_instance_and_the_work_instance_are_one_trace_that_replays() {
    let Some(trace) = capture("probe-instance", None, "2") else {
        return;
    };
    let t = read_trace(&trace);
    assert!(t.info.complete, "finished at process exit");
    t.check_structure();
    let creates = seqs_of(&t, "vkCreateInstance");
    let destroys = seqs_of(&t, "vkDestroyInstance");
    assert_eq!((creates.len(), destroys.len()), (2, 2), "two instances");
    // One after the other: the probe is gone before the work instance exists.
    assert!(destroys[0] < creates[1], "{creates:?} {destroys:?}");
    let devices = seqs_of(&t, "vkCreateDevice");
    assert_eq!(devices.len(), 2, "the probe's device and the work's");
    assert!(devices[0] < destroys[0] && devices[1] > creates[1]);
    // The work is there, after the probe.
    let reads = seqs_of(&t, "vkGetQueryPoolResults");
    assert!(
        !reads.is_empty() && reads[0] > creates[1],
        "the work's query reads are in the trace"
    );
    assert!(t.calls_of("vkQueueSubmit") + t.calls_of("vkQueueSubmit2") > 0);
    let notes: Vec<&str> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Note(n) => Some(n.message.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("every instance was destroyed")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("capture finished (process exit)")),
        "{notes:?}"
    );

    let (json, rows) = replay(&trace);
    check_rows(&json, &rows, 1);
}

/// The handles made by the `nth` call to vkCreateInstance and vkCreateDevice.
fn made(t: &Trace, nth: usize) -> (u64, u64) {
    let mut instances = Vec::new();
    let mut devices = Vec::new();
    for r in &t.records {
        if let Record::Call(c) = r {
            match vkstream::decode_call(c.cmd, &c.params) {
                Ok(vkstream::Call::vkCreateInstance(p)) => instances.push(p.p_instance.unwrap()),
                Ok(vkstream::Call::vkCreateDevice(p)) => devices.push(p.p_device.unwrap()),
                _ => {}
            }
        }
    }
    (instances[nth], devices[nth])
}

/// `trace` with every handle of `map` replaced: in call parameters (handles are 8 bytes, little
/// endian) and in the records that name a device.
fn with_handles(trace: &Path, map: &[(u64, u64)]) -> PathBuf {
    let dir = scratch_dir("probe-instance-reused");
    forged_from(&dir, trace, |recs, table| {
        for r in recs.iter_mut() {
            let swap = |h: &mut u64| {
                if let Some((_, to)) = map.iter().find(|(from, _)| from == h) {
                    *h = *to;
                }
            };
            match r {
                Record::Call(c) => {
                    assert!(!call_name(table, c).is_empty());
                    for (from, to) in map {
                        let (from, to) = (from.to_le_bytes(), to.to_le_bytes());
                        let mut i = 0;
                        while i + 8 <= c.params.len() {
                            if c.params[i..i + 8] == from {
                                c.params[i..i + 8].copy_from_slice(&to);
                                i += 8;
                            } else {
                                i += 1;
                            }
                        }
                    }
                }
                Record::QueryPool(p) => swap(&mut p.device),
                Record::QueryResults(q) => swap(&mut q.device),
                Record::Calibration(c) => swap(&mut c.device),
                _ => {}
            }
        }
    })
}

#[test]
fn the_work_instance_and_device_under_the_probes_handles_replay() {
    let Some(trace) = capture("probe-instance-handles", None, "1") else {
        return;
    };
    let t = read_trace(&trace);
    let (probe_instance, probe_device) = made(&t, 0);
    let (work_instance, work_device) = made(&t, 1);
    let forged = with_handles(
        &trace,
        &[(work_instance, probe_instance), (work_device, probe_device)],
    );
    let f = read_trace(&forged);
    f.check_structure();
    assert_eq!(
        made(&f, 1),
        (probe_instance, probe_device),
        "handles made again"
    );
    let (json, rows) = replay(&forged);
    check_rows(&json, &rows, 1);
    assert!(rows
        .iter()
        .all(|r| r.device.as_ref().is_some_and(|d| d.handle == probe_device)));
}

#[test]
fn a_frame_range_across_a_probe_instance_snapshots_only_the_live_instance() {
    let Some(trace) = capture("probe-instance-frames", Some("1-2"), "4") else {
        return;
    };
    let t = read_trace(&trace);
    assert!(t.info.complete, "finished after frame 2");
    t.check_structure();
    // The snapshot rebuilds the work instance and its device; the probe's were destroyed before
    // the trim point and are gone from the tracker.
    let begin = t
        .records
        .iter()
        .position(|r| matches!(r, Record::StateBegin(_)))
        .expect("a trimmed trace");
    let end = t
        .records
        .iter()
        .position(|r| matches!(r, Record::StateEnd(_)))
        .expect("its snapshot ends");
    let in_snapshot = |name: &str| {
        let id = vkstream::command_id(name).unwrap();
        t.records[begin..end]
            .iter()
            .filter(|r| matches!(r, Record::Call(c) if c.cmd == id))
            .count()
    };
    assert_eq!(in_snapshot("vkCreateInstance"), 1);
    assert_eq!(in_snapshot("vkEnumeratePhysicalDevices"), 1);
    assert_eq!(in_snapshot("vkCreateDevice"), 1);
    assert_eq!(
        t.calls_of("vkCreateInstance"),
        1,
        "no instance made after it"
    );
    let frames: Vec<u64> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Frame(f) => Some(f.index),
            _ => None,
        })
        .collect();
    assert_eq!(frames, vec![1, 2], "frames count over both instances");

    let (json, rows) = replay(&trace);
    // The snapshot's device is the trace's first.
    check_rows(&json, &rows, 0);
}

/// Capture on demand across a probe instance: the trigger's trace starts with a snapshot of the
/// work instance alone, and replays.
#[test]
fn a_trigger_after_a_probe_instance_captures_the_work() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("probe-instance-trigger");
    let out = dir.join("probe.qtrace");
    let o = run_quarry_on(
        &[
            "capture",
            "--trigger",
            "--trigger-frame",
            "2",
            "-o",
            out.to_str().unwrap(),
            "--",
            demo.to_str().unwrap(),
            "--headless",
            "--probe-instance",
            "--frames",
            "4",
            "--gpu",
            "llvmpipe",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let trace = dir.join("probe_1.qtrace");
    let t = read_trace(&trace);
    assert!(t.info.complete);
    t.check_structure();
    assert_eq!(t.calls_of("vkCreateInstance"), 1, "the work instance alone");
    assert_eq!(t.calls_of("vkCreateDevice"), 1);
    assert_eq!(t.count("StateBegin"), 1);
    let (json, rows) = replay(&trace);
    check_rows(&json, &rows, 0);
}
