//! Golden-file tests for `quarry compare` on synthetic results files written through `format`.
//!
//! Each case runs the built `quarry` binary in a directory holding the fixtures (so file names in
//! the output are stable) and compares exit code, stdout and stderr with
//! `tests/golden/compare/<case>.txt`. `UPDATE_GOLDEN=1` rewrites the golden files.
//! The `quarry` binary must be built in the same target directory (`cargo build -p quarry`).

use std::path::Path;
use std::process::Command;

use format::record::*;
use format::TraceWriter;

const OCCLUSION: i32 = 0;
const STATISTICS: i32 = 1;
const TIMESTAMP: i32 = 2;
/// IA vertices and FS invocations.
const STAT_FLAGS: u32 = 0b1000_0001;

fn device(name: &str) -> DeviceSummary {
    DeviceSummary {
        name: name.to_owned(),
        vendor_id: 0x10005,
        driver_id: 13,
        driver_name: name.to_owned(),
        driver_version: 1,
        timestamp_period_ns: 1.0,
        queue_families: vec![QueueFamilySummary {
            flags: 0xf,
            queue_count: 1,
            timestamp_valid_bits: 64,
        }],
        ..DeviceSummary::default()
    }
}

/// What one synthetic run replayed: per frame, values that differ between fixtures.
#[derive(Clone)]
struct Fixture {
    device: &'static str,
    application: &'static str,
    loops: u32,
    /// Occlusion samples of queries 0..3 (captured: 100, 200, 300).
    occlusion: [u64; 3],
    /// GPU ns of the three intervals between timestamps 0..4 (captured: 1000, 2000, 3000).
    intervals: [u64; 3],
    /// Pipeline statistics (captured: 30 vertices, 5000 fragments).
    stats: [u64; 2],
    /// "Render pass time" (ns) of render passes 0 and 1, and "Fragments shaded".
    rp_time: [f64; 2],
    fragments: f64,
}

const BASE: Fixture = Fixture {
    device: "gpu-a",
    application: "synthetic",
    loops: 1,
    occlusion: [100, 200, 300],
    intervals: [1000, 2000, 3000],
    stats: [30, 5000],
    rp_time: [250_000.0, 500_000.0],
    fragments: 5000.0,
};

fn values(v: Vec<u64>, host_ns: u64) -> Option<QueryValues> {
    Some(QueryValues {
        values: v,
        available: true,
        result: 0,
        host_ns,
    })
}

#[allow(clippy::too_many_arguments)]
fn query(
    pool: u64,
    query: u32,
    ty: i32,
    frame: u64,
    seq: u64,
    l: u32,
    captured: Vec<u64>,
    replayed: Vec<u64>,
) -> Record {
    Record::QueryResult(QueryResult {
        pool,
        query,
        query_type: ty,
        pipeline_statistics: if ty == STATISTICS { STAT_FLAGS } else { 0 },
        frame,
        queue: 0xa0,
        command_buffer: 0xc0,
        loop_index: l,
        pass: 0,
        seq,
        flags: 0x5,
        captured: values(captured, 1_000 + seq),
        replayed: values(replayed, 2_000 + seq),
        submit_ns: 0,
        available_ns: 0,
        captured_gpu_ns: None,
        replayed_gpu_ns: None,
        begin: None,
        device: None,
    })
}

fn counter(name: &str, unit: u32, frame: u64, rp: u32, value: f64, captured: f64) -> Record {
    Record::CounterValue(CounterValue {
        counter: PerfCounterDesc {
            uuid: [name.len() as u8; 16],
            name: name.to_owned(),
            category: "synthetic".to_owned(),
            description: String::new(),
            unit,
            storage: 5,
            scope: 1,
        },
        pass: 0,
        frame,
        command_buffer: 0xc0,
        render_pass: Some(rp),
        value,
        captured: Some(captured),
    })
}

/// Two frames; each loop replays the same values (the medians equal the fixture's values).
fn records(f: &Fixture) -> Vec<Record> {
    let mut out = Vec::new();
    for l in 0..f.loops {
        for frame in 0..2u64 {
            let seq = 10 + frame * 10;
            for q in 0..3u32 {
                out.push(query(
                    0x1000,
                    q,
                    OCCLUSION,
                    frame,
                    seq,
                    l,
                    vec![100 * u64::from(q + 1)],
                    vec![f.occlusion[q as usize]],
                ));
            }
            // Each loop's clock starts elsewhere: only the intervals carry over.
            let (mut cap, mut rep) = (1_000_000 * (frame + 1), 7_000_000 * u64::from(l + 1));
            for q in 0..4u32 {
                if q > 0 {
                    cap += 1000 * u64::from(q);
                    rep += f.intervals[q as usize - 1];
                }
                out.push(query(
                    0x2000,
                    q,
                    TIMESTAMP,
                    frame,
                    seq + 1,
                    l,
                    vec![cap],
                    vec![rep],
                ));
            }
            out.push(query(
                0x3000,
                0,
                STATISTICS,
                frame,
                seq + 2,
                l,
                vec![30, 5000],
                f.stats.to_vec(),
            ));
            for rp in 0..2u32 {
                out.push(counter(
                    "Render pass time",
                    2,
                    frame,
                    rp,
                    f.rp_time[rp as usize],
                    BASE.rp_time[rp as usize],
                ));
                out.push(counter(
                    "Fragments shaded",
                    0,
                    frame,
                    rp,
                    f.fragments,
                    5000.0,
                ));
            }
        }
    }
    out.push(Record::ReplayInfo(ReplayInfo {
        trace: "/captures/synthetic.qtrace".to_owned(),
        capture_device: Some(device("llvmpipe")),
        loops: f.loops,
        passes: 1,
        replay_ns: 1_000_000,
        capture_ns: 1_000_000,
        frames: 2,
    }));
    out
}

fn write(path: &Path, kind: FileKind, f: &Fixture) {
    let w = TraceWriter::create(
        path,
        Header {
            kind,
            writer: "compare test".to_owned(),
            created_unix_ns: 0,
            device: Some(device(f.device)),
            application: f.application.to_owned(),
        },
    )
    .unwrap();
    for r in records(f) {
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
}

/// The fixtures, in a fresh directory.
fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("A.qres"), FileKind::Results, &BASE);
    // Another GPU: slower intervals, other occlusion and statistics counts (allowed across
    // devices), different counters.
    let other = Fixture {
        device: "gpu-b",
        occlusion: [110, 200, 290],
        intervals: [1200, 2000, 2700],
        stats: [30, 5400],
        rp_time: [325_000.0, 450_000.0],
        fragments: 5400.0,
        ..BASE
    };
    write(&d.join("B.qres"), FileKind::Results, &other);
    // The baseline's GPU again, but a query that saw samples now sees none and a statistic
    // changed: both deterministic on the same device and driver.
    let broken = Fixture {
        occlusion: [100, 0, 300],
        stats: [31, 5000],
        ..BASE
    };
    write(&d.join("C.qres"), FileKind::Results, &broken);
    // Another application's results.
    let foreign = Fixture {
        application: "vkcube",
        ..BASE
    };
    write(&d.join("D.qres"), FileKind::Results, &foreign);
    // The baseline replayed three times.
    let looped = Fixture { loops: 3, ..BASE };
    write(&d.join("A3.qres"), FileKind::Results, &looped);
    write(&d.join("trace.qtrace"), FileKind::Trace, &BASE);
    dir
}

/// Runs `quarry <args>` in `dir` and checks the transcript against the golden file `case`.
fn golden(dir: &Path, case: &str, args: &[&str], expect_code: i32) {
    let out = Command::new(quarry_tests::quarry_exe())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let transcript = format!(
        "$ quarry {}\nexit: {code}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden/compare")
        .join(format!("{case}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &transcript).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        transcript,
        want,
        "{case}: output differs from {} (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
    assert_eq!(code, expect_code, "{case}: exit code\n{transcript}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if code == 2 {
        assert!(
            stderr.lines().count() == 1 && stderr.starts_with("quarry: "),
            "{case}: {stderr}"
        );
    }
}

#[test]
fn compare_golden() {
    let dir = fixtures();
    let d = dir.path();
    golden(d, "two_gpus", &["compare", "A.qres", "B.qres"], 0);
    golden(
        d,
        "two_gpus_threshold",
        &["compare", "A.qres", "B.qres", "--threshold", "5%"],
        1,
    );
    golden(
        d,
        "two_gpus_by_counter",
        &[
            "compare",
            "A.qres",
            "B.qres",
            "--by",
            "counter",
            "--threshold",
            "50",
        ],
        0,
    );
    golden(
        d,
        "two_gpus_by_render_pass_json",
        &[
            "compare",
            "A.qres",
            "B.qres",
            "--by",
            "render-pass",
            "--json",
        ],
        0,
    );
    golden(
        d,
        "deterministic_differs",
        &["compare", "A.qres", "C.qres"],
        1,
    );
    golden(
        d,
        "three_runs_by_frame",
        &["compare", "A.qres", "B.qres", "C.qres", "--by", "frame"],
        1,
    );
    golden(
        d,
        "loops_same",
        &["compare", "A.qres", "A3.qres", "--all"],
        0,
    );
    golden(d, "different_traces", &["compare", "A.qres", "D.qres"], 2);
    golden(
        d,
        "trace_not_results",
        &["compare", "A.qres", "trace.qtrace"],
        2,
    );
    golden(d, "one_file", &["compare", "A.qres"], 2);
    golden(
        d,
        "bad_threshold",
        &["compare", "A.qres", "B.qres", "--threshold", "x"],
        2,
    );
}
