//! `quarry export` schemas on small synthetic files written through `format`: the tidy CSV and
//! JSON lines (golden files, read back with the `csv` crate), and the Perfetto trace-event layout
//! (golden track list plus a structural check against the trace-event format).
//!
//! `UPDATE_GOLDEN=1 cargo test -p viewer --test export_formats` rewrites the golden files.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use format::record::*;
use serde_json::Value;
use viewer::data::Dataset;
use viewer::export::{tidy, Names};
use viewer::synth;

const QUEUE: u64 = 0xa0;

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/export_golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from the golden file at line {}:\n  golden: {:?}\n  actual: {:?}",
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

fn write_file(path: &Path, header: Header, records: &[Record]) {
    let w = format::TraceWriter::create(path, header).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

/// The synthetic trace with debug-utils labels and render passes, plus names for its queue and
/// command buffers.
fn trace() -> (Header, Vec<Record>) {
    let (h, recs) = synth::trace(2);
    let mut recs = synth::with_labels(recs);
    for (handle, object_type, name) in [
        (QUEUE, 4, "graphics queue"),
        (0xc0, 6, "main cb"),
        (0xc1, 6, "shadow, \"cb\""),
    ] {
        recs.push(Record::DebugName(DebugName {
            handle,
            object_type,
            name: name.to_owned(),
        }));
    }
    (h, recs)
}

/// A results file replaying the trace's queries (same pools, queries and seqs) on `device`,
/// `scale` apart, with render-pass counters.
fn results_of_trace(
    trace_ds: &Dataset,
    device: &str,
    base: u64,
    scale: f64,
) -> (Header, Vec<Record>) {
    let mut recs = vec![Record::ReplayInfo(ReplayInfo {
        trace: "synthetic.qtrace".to_owned(),
        // Replayed on the capture device: a changed deterministic value is a mismatch.
        capture_device: Some(synth::device(device, device)),
        loops: 1,
        passes: 2,
        replay_ns: 2 * 16_000_000,
        capture_ns: 2 * 16_666_666,
        frames: 2,
    })];
    for (i, r) in trace_ds.rows.iter().enumerate() {
        let pool = trace_ds.pool_of(r);
        let captured = r.captured.clone().unwrap();
        let mut replayed = captured.clone();
        let is_ts = pool.query_type == 2;
        let submit = base + r.frame * 16_000_000 + i as u64 * 1_000;
        if is_ts {
            replayed.values[0] = 7_000_000 + i as u64 * 50_000;
        } else if i % 7 == 3 {
            replayed.values[0] += 1;
        }
        replayed.host_ns = submit + 2_000_000;
        recs.push(Record::QueryResult(QueryResult {
            pool: pool.handle,
            query: r.query,
            query_type: pool.query_type,
            pipeline_statistics: pool.pipeline_statistics,
            frame: r.frame,
            queue: r.queue,
            command_buffer: r.command_buffer,
            loop_index: 0,
            pass: 0,
            seq: r.seq,
            flags: r.flags,
            captured_gpu_ns: r.captured_gpu_ns,
            replayed_gpu_ns: is_ts.then(|| replayed.values[0] as f64),
            begin: None,
            device: None,
            captured: Some(captured),
            replayed: Some(replayed),
            submit_ns: submit,
            available_ns: submit + 2_000_000 + (i as u64 % 3) * 100_000,
        }));
    }
    recs.extend(synth::render_pass_counters(2, scale));
    (
        synth::header(FileKind::Results, synth::device(device, device)),
        recs,
    )
}

/// Trace + two results files on disk, loaded as `quarry export` loads them.
fn fixture() -> (tempfile::TempDir, Vec<PathBuf>, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let (th, trecs) = trace();
    let trace_ds =
        Dataset::from_records(vec![(PathBuf::from("t.qtrace"), th.clone(), trecs.clone())]);
    let tp = dir.path().join("synthetic.qtrace");
    write_file(&tp, th, &trecs);
    let mut paths = vec![tp];
    for (name, dev, base, scale) in [
        ("gpu-a.qres", "gpu-a", 50_000_000_000u64, 1.0),
        ("gpu-b.qres", "gpu-b", 90_000_000_000, 1.5),
    ] {
        let (h, recs) = results_of_trace(&trace_ds, dev, base, scale);
        let p = dir.path().join(name);
        write_file(&p, h, &recs);
        paths.push(p);
    }
    let ds = viewer::load::load_paths(&paths);
    assert!(ds.failed.is_empty(), "{:?}", ds.failed);
    (dir, paths, ds)
}

fn all_rows(ds: &Dataset) -> Vec<u32> {
    (0..ds.rows.len() as u32).collect()
}

fn export(
    ds: &Dataset,
    f: impl Fn(&Dataset, &[u32], &mut dyn std::io::Write) -> std::io::Result<()>,
) -> String {
    let mut buf = Vec::new();
    f(ds, &all_rows(ds), &mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

const INT_COLUMNS: [&str; 11] = [
    "run",
    "pass",
    "frame",
    "render_pass",
    "query",
    "seq",
    "value_index",
    "captured",
    "replayed",
    "submit_ns",
    "available_ns",
];
const REAL_COLUMNS: [&str; 2] = ["captured_real", "replayed_real"];
const HANDLE_COLUMNS: [&str; 3] = ["queue", "command_buffer", "pool"];
const BOOL_COLUMNS: [&str; 2] = ["captured_available", "replayed_available"];
/// Columns every row of a kind fills.
const QUERY_FILLED: [&str; 16] = [
    "file",
    "device",
    "record",
    "run",
    "pass",
    "frame",
    "queue",
    "command_buffer",
    "pool",
    "query",
    "seq",
    "query_type",
    "flags",
    "value_index",
    "value_name",
    "unit",
];
const COUNTER_FILLED: [&str; 9] = [
    "file",
    "device",
    "record",
    "run",
    "pass",
    "frame",
    "value_index",
    "value_name",
    "real_unit",
];

#[test]
fn csv_schema_reads_back_typed_and_matches_golden() {
    let (_dir, _paths, ds) = fixture();
    let text = export(&ds, viewer::export::write_csv);
    golden("tidy.csv", &text);

    let mut rd = csv::Reader::from_reader(text.as_bytes());
    let headers: Vec<String> = rd.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(headers, tidy::COLUMNS);
    // No file names in the header: the columns do not change with the inputs.
    assert!(headers
        .iter()
        .all(|h| !h.contains(".qres") && !h.contains(".qtrace")));
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let mut per_kind: HashMap<String, usize> = HashMap::new();
    let mut files = BTreeMap::new();
    for rec in rd.records() {
        let rec = rec.unwrap();
        assert_eq!(rec.len(), tidy::COLUMNS.len());
        let kind = rec[col("record")].to_owned();
        *per_kind.entry(kind.clone()).or_default() += 1;
        *files.entry(rec[col("file")].to_owned()).or_insert(0usize) += 1;
        for c in INT_COLUMNS {
            let v = &rec[col(c)];
            assert!(
                v.is_empty() || v.parse::<u64>().is_ok(),
                "{c} = {v:?} is not an integer"
            );
        }
        for c in REAL_COLUMNS {
            let v = &rec[col(c)];
            assert!(
                v.is_empty() || (v.contains('.') && v.parse::<f64>().is_ok()),
                "{c} = {v:?} is not written as a real"
            );
        }
        for c in HANDLE_COLUMNS {
            let v = &rec[col(c)];
            assert!(
                v.is_empty() || v.starts_with("0x"),
                "{c} = {v:?} is not hex"
            );
        }
        for c in BOOL_COLUMNS {
            assert!(matches!(&rec[col(c)], "" | "true" | "false"));
        }
        let filled: &[&str] = if kind == "query" {
            &QUERY_FILLED
        } else {
            &COUNTER_FILLED
        };
        for c in filled {
            assert!(!rec[col(c)].is_empty(), "{kind} row without {c}: {rec:?}");
        }
        if kind == "query" {
            assert!(
                format::query::KNOWN_KINDS
                    .iter()
                    .any(|k| k.name() == rec[col("query_type")]),
                "{}",
                &rec[col("query_type")]
            );
            assert!(!rec[col("outcome")].is_empty());
        }
    }
    // 2 frames × 20 queries, 28 values; 2 frames × 2 cbs × 3 render passes × 3 counters.
    assert_eq!(per_kind["query"], 2 * 2 * 28);
    assert_eq!(per_kind["counter"], 2 * 36);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["gpu-a.qres", "gpu-b.qres"]
    );
    // Names from the trace's DebugName records, with quoting.
    assert!(
        text.contains(",0xa0,graphics queue,0xc0,main cb,"),
        "{text}"
    );
    assert!(text.contains("\"shadow, \"\"cb\"\"\""));
    assert!(text.contains(",0x1000,occlusion pool,"));
    // Label paths of each query's begin: queue labels at the submit, then the command buffer's.
    assert!(
        text.contains(",main cb,,,Frame 0/Scene/Shadow pass,0x1000,occlusion pool,"),
        "{text}"
    );
    assert!(text.contains(",Frame 1/Scene/Post/late,0x3000,"));
    // Render-pass counters: the render pass's name, or only the label around its begin.
    assert!(text.contains(",main cb,0,shadow rp,Scene/Shadow pass,,,"));
    assert!(text.contains(",main cb,2,,Scene/Post,,,"));
    // Enums by name.
    assert!(text.contains(",PIPELINE_STATISTICS,64|AVAIL,"));
    assert!(text.contains(",nanoseconds,"));
    assert!(text.contains(",mismatch,"));
}

#[test]
fn json_lines_have_the_csv_fields_and_match_golden() {
    let (_dir, _paths, ds) = fixture();
    let jsonl = export(&ds, viewer::export::write_json);
    golden("tidy.jsonl", &jsonl);
    let csv_text = export(&ds, viewer::export::write_csv);
    let mut rd = csv::Reader::from_reader(csv_text.as_bytes());
    let csv_rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let lines: Vec<&str> = jsonl.lines().collect();
    assert_eq!(lines.len(), csv_rows.len());
    for (line, row) in lines.iter().zip(&csv_rows) {
        // Keys in schema order (serde_json's map sorts, so read them off the text).
        let keys: Vec<String> = line
            .split(",\"")
            .map(|p| {
                p.trim_start_matches("{\"")
                    .split('"')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .filter(|k| tidy::COLUMNS.contains(&k.as_str()))
            .collect();
        assert_eq!(keys.len(), tidy::COLUMNS.len(), "{line}");
        let v: Value = serde_json::from_str(line).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), tidy::COLUMNS.len());
        for (k, name) in tidy::COLUMNS.iter().enumerate() {
            let j = &obj[*name];
            let c = &row[k];
            match j {
                Value::Null => assert!(c.is_empty(), "{name}"),
                Value::String(s) => assert_eq!(s, c, "{name}"),
                Value::Bool(b) => assert_eq!(b.to_string(), c, "{name}"),
                Value::Number(n) if INT_COLUMNS.contains(name) => {
                    assert_eq!(n.as_u64().unwrap().to_string(), c, "{name}")
                }
                Value::Number(n) => {
                    assert!(REAL_COLUMNS.contains(name), "{name}");
                    assert_eq!(n.as_f64().unwrap(), c.parse::<f64>().unwrap(), "{name}");
                }
                other => panic!("{name}: {other}"),
            }
        }
    }
}

#[test]
fn trace_only_export_has_captured_values_and_integer_columns_without_gaps() {
    let (h, recs) = trace();
    let names = Names::from_records(&recs);
    let ds = Dataset::from_records(vec![(PathBuf::from("t.qtrace"), h, recs)]);
    let mut buf = Vec::new();
    tidy::write_csv(&ds, &names, &all_rows(&ds), &mut buf).unwrap();
    let mut rd = csv::Reader::from_reader(buf.as_slice());
    let headers = rd.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2 * 28);
    for r in &rows {
        assert_eq!(&r[col("file")], "t.qtrace");
        assert_eq!(&r[col("command_buffer_name")].is_empty(), &false);
        // A pandas reader gets int64 for these: every row fills them with an integer.
        for c in [
            "run",
            "frame",
            "query",
            "seq",
            "value_index",
            "captured",
            "submit_ns",
        ] {
            assert!(r[col(c)].parse::<u64>().is_ok(), "{c}: {:?}", &r[col(c)]);
        }
        assert!(r[col("replayed")].is_empty() && r[col("outcome")].is_empty());
    }
}

// ---- Perfetto -------------------------------------------------------------------------------

fn num(e: &Value, key: &str) -> f64 {
    e[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing or not a number in {e}"))
}

/// Checks `v` against the trace-event format and quarry's layout; returns the golden track list.
fn check_trace_events(v: &Value, files: &[&str]) -> String {
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let mut process: BTreeMap<u64, String> = BTreeMap::new();
    let mut thread: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let (pid, tid) = (num(e, "pid") as u64, num(e, "tid") as u64);
        let name = e["args"]["name"].as_str().map(str::to_owned);
        match e["name"].as_str().unwrap() {
            "process_name" => assert!(process.insert(pid, name.unwrap()).is_none()),
            "thread_name" => assert!(thread.insert((pid, tid), name.unwrap()).is_none()),
            "process_sort_index" | "thread_sort_index" => {
                assert!(e["args"]["sort_index"].is_number())
            }
            other => panic!("unexpected metadata {other}"),
        }
    }
    // One process per run, each naming exactly one input file.
    assert_eq!(process.len(), files.len());
    for (pid, name) in &process {
        let owners: Vec<&&str> = files.iter().filter(|f| name.contains(**f)).collect();
        assert_eq!(owners.len(), 1, "process {pid} '{name}' must name one file");
    }
    let mut tracks: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut per_pid_min: BTreeMap<u64, f64> = BTreeMap::new();
    let mut counters: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] != "M") {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["name"].is_string(), "{e}");
        let pid = num(e, "pid") as u64;
        assert!(process.contains_key(&pid), "undeclared pid in {e}");
        let ts = num(e, "ts");
        assert!(ts >= 0.0, "{e}");
        match ph {
            "X" | "i" => {
                let tid = num(e, "tid") as u64;
                assert!(thread.contains_key(&(pid, tid)), "undeclared track in {e}");
                let dur = if ph == "X" { num(e, "dur") } else { 0.0 };
                assert!(dur >= 0.0);
                if ph == "i" {
                    assert!(matches!(e["s"].as_str(), Some("t" | "p" | "g")));
                }
                tracks.entry((pid, tid)).or_default().push((ts, ts + dur));
                let m = per_pid_min.entry(pid).or_insert(f64::MAX);
                *m = m.min(ts);
            }
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
                *counters
                    .entry((pid, e["name"].as_str().unwrap().to_owned()))
                    .or_default() += 1;
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    // Each run's times start at its own first event, and a replay's slices are spread out.
    for (pid, m) in &per_pid_min {
        assert_eq!(*m, 0.0, "run {pid} does not start at its first event");
    }
    for ((pid, tid), spans) in &mut tracks {
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let starts: std::collections::BTreeSet<u64> =
            spans.iter().map(|s| (s.0 * 1000.0) as u64).collect();
        assert!(
            spans.len() < 2 || starts.len() > 1,
            "track {pid}/{tid}: every slice starts at one time"
        );
        // Valid nesting: a slice ends before the next starts, or contains it.
        let mut stack: Vec<f64> = Vec::new();
        for &(s, e) in spans.iter() {
            while stack.last().is_some_and(|&end| end <= s + 1e-6) {
                stack.pop();
            }
            if let Some(&end) = stack.last() {
                assert!(
                    e <= end + 1e-6,
                    "track {pid}/{tid}: slice {s}..{e} overlaps one ending at {end}"
                );
            }
            stack.push(e);
        }
    }
    let mut layout = String::new();
    for (pid, name) in &process {
        layout += &format!("process {pid}: {name}\n");
        for ((p, tid), tname) in &thread {
            if p == pid {
                let n = tracks.get(&(*p, *tid)).map_or(0, Vec::len);
                layout += &format!("  track {tid}: {tname} ({n} events)\n");
            }
        }
        for ((p, cname), n) in &counters {
            if p == pid {
                layout += &format!("  counter: {cname} ({n} samples)\n");
            }
        }
    }
    layout
}

#[test]
fn perfetto_tracks_per_run_and_queue_match_golden() {
    let (_dir, _paths, ds) = fixture();
    let mut buf = Vec::new();
    viewer::export::write_perfetto(&ds, &mut buf).unwrap();
    if let Some(p) = std::env::var_os("QUARRY_PERFETTO_OUT") {
        // For checking by hand with Perfetto's trace processor.
        std::fs::write(p, &buf).unwrap();
    }
    let v: Value = serde_json::from_slice(&buf).unwrap();
    let layout = check_trace_events(&v, &["synthetic.qtrace", "gpu-a.qres", "gpu-b.qres"]);
    golden("perfetto_layout.txt", &layout);
    // Capture and each replay have their submit→available slices on their own tracks, named by
    // the queue's debug name.
    let events = v["traceEvents"].as_array().unwrap();
    let slices = |pid: u64| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["dur"].as_f64().unwrap() >= 2000.0)
            .count()
    };
    assert_eq!(slices(2), ds.rows.len());
    assert_eq!(slices(3), ds.rows.len());
    assert!(
        layout.contains("queue graphics queue (0xa0) · submit→available"),
        "{layout}"
    );
    // The capture's timestamps sit on the host clock through the calibration sample: the
    // trace's first timestamp (GPU 1.3 ms after calibration) comes out 1.3 ms after it.
    let gpu: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["pid"] == 1)
        .map(|e| num(e, "ts"))
        .collect();
    assert_eq!(gpu.len(), 2 * 8);
    // Each capture timestamp lies as far after its submit slice's start as the trace's calibrated
    // GPU time lies after the submit.
    let key = |e: &Value| {
        (
            e["args"]["pool"].clone(),
            e["args"]["query"].clone(),
            e["args"]["frame"].clone(),
        )
    };
    for inst in events.iter().filter(|e| e["ph"] == "i" && e["pid"] == 1) {
        let slice = events
            .iter()
            .find(|e| {
                e["ph"] == "X"
                    && e["pid"] == 1
                    && e["dur"].as_f64().unwrap() >= 2000.0
                    && key(e) == key(inst)
            })
            .expect("submit slice of the timestamp");
        let row = ds
            .rows
            .iter()
            .find(|r| {
                inst["args"]["query"] == r.query
                    && inst["args"]["frame"] == r.frame
                    && ds.pool_of(r).query_type == 2
            })
            .unwrap();
        let expected = (row.times.gpu as f64 - row.times.submit as f64) / 1000.0;
        assert!(row.times.gpu != 0);
        assert!(
            (num(inst, "ts") - num(slice, "ts") - expected).abs() < 1e-3,
            "{inst}"
        );
    }
    // Counter series by debug name of the command buffer and render pass index, with the render
    // pass's name (else its innermost label).
    assert!(events.iter().any(|e| e["ph"] == "C"
        && e["pid"] == 3
        && e["args"]["cb main cb (0xc0) · render pass 2: Post"].is_number()));
    assert!(events.iter().any(|e| e["ph"] == "C"
        && e["pid"] == 3
        && e["args"]["cb main cb (0xc0) · render pass 0: shadow rp"].is_number()));
    // Query slices are named after their innermost label, with the whole path in the args.
    let occlusion = events
        .iter()
        .find(|e| e["ph"] == "X" && e["pid"] == 2 && e["args"]["pool"] == "0x1000")
        .unwrap();
    assert!(
        occlusion["name"]
            .as_str()
            .unwrap()
            .starts_with("Shadow pass · occlusion pool #"),
        "{occlusion}"
    );
    assert!(occlusion["args"]["label"]
        .as_str()
        .unwrap()
        .ends_with("/Scene/Shadow pass"));
    assert!(layout.contains("counter: Render pass time (nanoseconds)"));
}

#[test]
fn perfetto_of_a_trace_alone_has_the_capture_run() {
    let (h, recs) = trace();
    let names = Names::from_records(&recs);
    let ds = Dataset::from_records(vec![(PathBuf::from("t.qtrace"), h, recs)]);
    let mut buf = Vec::new();
    viewer::export::perfetto::write(&ds, &names, &mut buf).unwrap();
    let v: Value = serde_json::from_slice(&buf).unwrap();
    let layout = check_trace_events(&v, &["t.qtrace"]);
    assert!(layout.contains("· GPU timestamps (16 events)"), "{layout}");
    assert!(
        layout.contains("· begin→end (recorded) (24 events)"),
        "{layout}"
    );
}

#[test]
fn perfetto_of_results_alone_keeps_runs_apart() {
    let (h, r) = synth::results(40, 3, "gpu-x", 5);
    let (h2, r2) = synth::results(40, 3, "gpu-y", 0);
    let ds = Dataset::from_records(vec![
        (PathBuf::from("x.qres"), h, r),
        (PathBuf::from("y.qres"), h2, r2),
    ]);
    let mut buf = Vec::new();
    viewer::export::perfetto::write(&ds, &Names::default(), &mut buf).unwrap();
    let v: Value = serde_json::from_slice(&buf).unwrap();
    // Captured counters make a capture run; the results give no capture times for queries.
    check_trace_events(
        &v,
        &["capture (from the results files)", "x.qres", "y.qres"],
    );
}
