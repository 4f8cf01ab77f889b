//! Two instances alive at once (`src/bin/two_instances.rs`): instance A with device A, instance B
//! with devices B and C on one physical device, destroyed interleaved (A's device and instance go
//! while B and C go on drawing). Captured through `quarry capture`, the trace holds every device's
//! query reads; `quarry replay --compare --gpu 0` re-creates both instances and all three devices
//! and replays every read: each occlusion count is the app's known answer, on the device that made
//! it (which the results name), and every timestamp is the replay GPU's own (it differs from the captured one).
//!
//! A copy of the trace whose device A says it was captured on another GPU replays too, with a
//! warning that names both GPUs, and compares as across devices.
//!
//! A program we did not write does the same: the wgpu app of `capture_wgpu.rs` with GL on Zink
//! (wgpu-native opens its GL backend through EGL, and Zink makes a Vulkan instance and device of
//! its own beside wgpu's); its trace replays with the app's occlusion answers.
//!
//! vulkaninfo keeps two devices alive, one made with a device group of one physical device (found
//! through vkEnumeratePhysicalDeviceGroups); its trace replays too.
//!
//! Skips (prints `SKIP`) when lavapipe (or, for the wgpu test, Python's `wgpu`; for the last,
//! vulkaninfo) is missing.

use format::record::{QueryResult, Record};
use format::{TraceReader, TraceWriter};
use quarry_tests::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One line the app printed: device name, samples, timestamps, the known answer.
#[derive(Debug)]
struct Read {
    device: String,
    samples: u64,
    timestamps: [u64; 2],
    expected: u64,
}

fn printed(out: &str) -> Vec<Read> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["device", d, "round", _, "samples", s, "timestamps", t0, t1, "expected", e] => {
                    Some(Read {
                        device: d.to_string(),
                        samples: s.parse().ok()?,
                        timestamps: [t0.parse().ok()?, t1.parse().ok()?],
                        expected: e.parse().ok()?,
                    })
                }
                _ => None,
            }
        })
        .collect()
}

fn capture(tag: &str) -> (PathBuf, Vec<Read>) {
    let trace = scratch(&format!("two-instances-{tag}.qtrace"));
    let library =
        find_layer_library().expect("build the layer first: cargo build -p capture_layer");
    let out = quarry_command()
        .env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .args(["capture", "--force", "-o"])
        .arg(&trace)
        .args(["--", env!("CARGO_BIN_EXE_two_instances")])
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "capture failed: {text}");
    assert!(text.contains("trace complete"), "{text}");
    let reads = printed(&text);
    assert_eq!(reads.len(), 6, "{text}");
    for r in &reads {
        assert_eq!(r.samples, r.expected, "the app's own answer: {r:?}");
    }
    (trace, reads)
}

/// `quarry replay --compare --validate --gpu 0 --json`, and the rows of the results file.
fn replay(trace: &Path) -> (serde_json::Value, Vec<QueryResult>) {
    let results = trace.with_extension("qres");
    let out = quarry_command()
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .args(["replay", "--compare", "--validate", "--gpu", "0", "--json"])
        .arg("--results")
        .arg(&results)
        .arg(trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "replay: {}", output_text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["validation_messages"], 0, "{json}");
    let rows = read_trace(&results).query_results();
    (json, rows)
}

/// Pool -> the app's name of its device: devices are created B, A, C, each with its pools.
fn pool_devices(trace: &Path) -> HashMap<u64, String> {
    let t = read_trace(trace);
    t.check_structure();
    assert_eq!(t.calls_of("vkCreateInstance"), 2);
    assert_eq!(t.calls_of("vkDestroyInstance"), 2);
    assert_eq!(t.calls_of("vkCreateDevice"), 3);
    let mut devices: Vec<u64> = Vec::new();
    let mut pools = Vec::new();
    for r in &t.records {
        if let Record::QueryPool(p) = r {
            if !devices.contains(&p.device) {
                devices.push(p.device);
            }
            pools.push((p.pool, p.device));
        }
    }
    assert_eq!(devices.len(), 3, "three devices made pools");
    let names = ["B", "A", "C"];
    pools
        .into_iter()
        .map(|(pool, d)| {
            let i = devices.iter().position(|x| *x == d).unwrap();
            (pool, names[i].to_string())
        })
        .collect()
}

const OCCLUSION: i32 = ash::vk::QueryType::OCCLUSION.as_raw();
const TIMESTAMP: i32 = ash::vk::QueryType::TIMESTAMP.as_raw();

#[test]
fn two_live_instances_and_three_devices_replay_every_query() {
    if !lavapipe() {
        return;
    }
    let (trace, reads) = capture("one-gpu");
    let devices = pool_devices(&trace);
    let (json, mut rows) = replay(&trace);
    assert_eq!(json["result"], "ok", "{json}");
    rows.sort_by_key(|r| (r.seq, r.query));

    // Occlusion: one read per printed line, in order, on the device that printed it, with the
    // known answer replayed.
    let occlusion: Vec<&QueryResult> = rows.iter().filter(|r| r.query_type == OCCLUSION).collect();
    assert_eq!(occlusion.len(), reads.len(), "{occlusion:?}");
    for (row, read) in occlusion.iter().zip(&reads) {
        assert_eq!(devices[&row.pool], read.device, "{row:?}");
        // The results name the device: the trace makes them B, A, C.
        let d = row.device.as_ref().expect("the results name the device");
        let made = ["B", "A", "C"].iter().position(|n| *n == read.device);
        assert_eq!(Some(d.index as usize), made, "{row:?}");
        assert!(d.captured_on.contains("llvmpipe"), "{d:?}");
        let captured = row.captured.as_ref().expect("captured values");
        let replayed = row.replayed.as_ref().expect("replayed values");
        assert!(replayed.available, "{row:?}");
        assert_eq!(captured.values, vec![read.samples], "{row:?}");
        assert_eq!(replayed.values, vec![read.expected], "{row:?}");
    }

    // Timestamps: two per read, the captured ones as the app printed them, the replayed ones the
    // replay GPU's own, in order.
    let stamps: Vec<&QueryResult> = rows.iter().filter(|r| r.query_type == TIMESTAMP).collect();
    assert_eq!(stamps.len(), 2 * reads.len(), "{stamps:?}");
    for (pair, read) in stamps.chunks(2).zip(&reads) {
        let mut replayed = [0u64; 2];
        for (i, row) in pair.iter().enumerate() {
            assert_eq!(row.query, i as u32);
            assert_eq!(devices[&row.pool], read.device, "{row:?}");
            let c = row.captured.as_ref().expect("captured values");
            let r = row.replayed.as_ref().expect("replayed values");
            assert!(r.available, "{row:?}");
            assert_eq!(c.values, vec![read.timestamps[i]], "{row:?}");
            assert_ne!(
                r.values, c.values,
                "a replayed timestamp equals the captured one"
            );
            replayed[i] = r.values[0];
        }
        assert!(replayed[1] >= replayed[0], "{pair:?}");
    }
    // Every device's pools were read in the replay.
    let read_on: std::collections::HashSet<&String> =
        rows.iter().map(|r| &devices[&r.pool]).collect();
    assert_eq!(read_on.len(), 3, "{read_on:?}");
}

/// A copy of `trace` whose second `Device` record (device A's) names another GPU.
fn with_other_capture_gpu(trace: &Path) -> PathBuf {
    let reader = TraceReader::open(trace).unwrap();
    let out = scratch("two-instances-two-gpus.qtrace");
    let w = TraceWriter::create(&out, reader.header().clone()).unwrap();
    let mut seen = 0;
    for r in reader.records() {
        let mut r = r.unwrap();
        if let Record::Device(d) = &mut r {
            seen += 1;
            if seen == 2 {
                d.name = "Other GPU".into();
                d.device_uuid = [7; 16];
            }
        }
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(seen, 3, "one Device record per device");
    out
}

#[test]
fn instances_on_different_capture_gpus_are_named_and_compared_across_devices() {
    if !lavapipe() {
        return;
    }
    let (trace, reads) = capture("two-gpus");
    let other = with_other_capture_gpu(&trace);
    let (json, rows) = replay(&other);
    let warnings = json["warnings"].to_string();
    assert!(
        warnings.contains("2 different physical devices") && warnings.contains("Other GPU"),
        "{json}"
    );
    assert_eq!(json["comparison"]["same_device"], false, "{json}");
    // Still every query replayed, with the known answers.
    let occlusion: Vec<&QueryResult> = rows.iter().filter(|r| r.query_type == OCCLUSION).collect();
    assert_eq!(occlusion.len(), reads.len());
    for row in occlusion {
        let r = row.replayed.as_ref().expect("replayed values");
        assert!(
            reads.iter().any(|x| r.values == vec![x.expected]),
            "{row:?}"
        );
    }
}

/// The highest number of instances alive at once in a trace.
fn most_live_instances(trace: &Path) -> usize {
    let t = read_trace(trace);
    let create = vkstream::command_id("vkCreateInstance").unwrap();
    let destroy = vkstream::command_id("vkDestroyInstance").unwrap();
    let (mut live, mut most) = (0usize, 0usize);
    for r in &t.records {
        if let Record::Call(c) = r {
            if c.cmd == create && c.result >= 0 {
                live += 1;
                most = most.max(live);
            } else if c.cmd == destroy {
                live = live.saturating_sub(1);
            }
        }
    }
    most
}

#[test]
fn wgpu_with_its_gl_backend_on_zink_keeps_two_instances_and_replays() {
    let have_wgpu = std::process::Command::new("python3")
        .args(["-c", "import wgpu"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_wgpu {
        eprintln!("SKIP: Python's wgpu package is not installed (pip install wgpu)");
        return;
    }
    if !lavapipe() {
        return;
    }
    let trace = scratch("wgpu-zink.qtrace");
    let library =
        find_layer_library().expect("build the layer first: cargo build -p capture_layer");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/wgpu_queries.py");
    let out = quarry_command()
        .env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env("GALLIUM_DRIVER", "zink")
        .env_remove("DISPLAY")
        .args(["capture", "--force", "-o"])
        .arg(&trace)
        .args(["--", "python3"])
        .arg(&app)
        .arg("2")
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "capture failed: {text}");
    let live = most_live_instances(&trace);
    if live < 2 {
        // wgpu found no GL adapter (no EGL, or Zink not picked): nothing here to test.
        eprintln!("SKIP: wgpu made {live} instance(s) on this machine; no GL backend on Zink");
        return;
    }
    let (json, rows) = replay(&trace);
    assert_eq!(json["result"], "ok", "{json}");
    let occlusion: Vec<&QueryResult> = rows.iter().filter(|r| r.query_type == OCCLUSION).collect();
    assert!(!occlusion.is_empty(), "{json}");
    for row in occlusion {
        let c = row.captured.as_ref().expect("captured values");
        let r = row.replayed.as_ref().expect("replayed values");
        assert!(r.available, "{row:?}");
        assert_eq!(r.values, c.values, "{row:?}");
    }
}

#[test]
fn vulkaninfo_with_two_devices_and_a_device_group_replays() {
    if !require(&["vulkaninfo"]) {
        return;
    }
    let trace = scratch("vulkaninfo-devices.qtrace");
    let library =
        find_layer_library().expect("build the layer first: cargo build -p capture_layer");
    let out = quarry_command()
        .env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .args(["capture", "--force", "-o"])
        .arg(&trace)
        .args(["--", "vulkaninfo"])
        .output()
        .unwrap();
    assert!(out.status.success(), "capture: {}", output_text(&out));
    let t = read_trace(&trace);
    assert!(
        t.calls_of("vkCreateDevice") >= 2,
        "vulkaninfo made fewer devices"
    );
    assert!(
        t.calls_of("vkEnumeratePhysicalDeviceGroups")
            + t.calls_of("vkEnumeratePhysicalDeviceGroupsKHR")
            > 0
    );
    let out = quarry_command()
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .args(["replay", "--validate", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "replay: {}", output_text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["validation_messages"], 0, "{json}");
}
