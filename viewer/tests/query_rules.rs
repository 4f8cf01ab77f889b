//! The viewer reads comparisons and timestamps with the shared rules of `format::query`.

use std::path::PathBuf;

use format::record::{FileKind, QueryResult, QueryValues, Record, ReplayInfo};
use viewer::data::Dataset;
use viewer::plots::TimestampPairs;
use viewer::{synth, table};

fn values(v: &[u64]) -> Option<QueryValues> {
    Some(QueryValues {
        values: v.to_vec(),
        available: true,
        result: 0,
        host_ns: 1,
    })
}

fn result(query_type: i32, query: u32, captured: &[u64], replayed: &[u64]) -> Record {
    let ts = query_type == 2;
    Record::QueryResult(QueryResult {
        pool: 0x1000 + query_type as u64,
        query,
        query_type,
        pipeline_statistics: 0,
        frame: 0,
        queue: 0xa0,
        command_buffer: 0xc0,
        loop_index: 0,
        pass: 0,
        seq: 10,
        flags: 1 | 4,
        captured: values(captured),
        replayed: values(replayed),
        submit_ns: 0,
        available_ns: 0,
        // What the replayer writes: ticks converted to f64 ns before any subtraction.
        captured_gpu_ns: ts.then(|| captured[0] as f64),
        replayed_gpu_ns: ts.then(|| replayed[0] as f64),
        begin: None,
        device: None,
    })
}

fn dataset(records: Vec<Record>) -> Dataset {
    let dev = synth::device("llvmpipe", "llvmpipe");
    let mut all = vec![Record::ReplayInfo(ReplayInfo {
        trace: "t.qtrace".into(),
        capture_device: Some(dev.clone()),
        loops: 1,
        passes: 1,
        replay_ns: 0,
        capture_ns: 0,
        frames: 1,
    })];
    all.extend(records);
    Dataset::from_records(vec![(
        PathBuf::from("r.qres"),
        synth::header(FileKind::Results, dev),
        all,
    )])
}

#[test]
fn timestamps_are_clock_values_and_a_changed_counter_is_no_mismatch() {
    let ds = dataset(vec![
        // Equal timestamps are still clock values, never "=".
        result(2, 0, &[500], &[500]),
        // A performance counter that changed: a variation, as the replayer says.
        result(1_000_116_000, 0, &[10, 20], &[10, 21]),
        // A primitives-generated count that changed: a mismatch.
        result(1_000_382_000, 0, &[3], &[4]),
    ]);
    let texts: Vec<String> = (0..3).map(|i| table::diff_text(&ds, i, 0)).collect();
    assert_eq!(texts, ["(clock)", "1/2 differ, max +1", "+1"]);
    assert_eq!(ds.mismatch, [false, false, true]);
}

#[test]
fn timestamp_pairs_subtract_in_integer_ticks() {
    // At 1.7e18 ticks f64 holds multiples of 256: 1000 ticks apart read 1024 when subtracted as ns.
    let t = 1_700_000_000_000_000_123u64;
    let ds = dataset(vec![
        result(2, 0, &[t], &[t + 77]),
        result(2, 1, &[t + 1000], &[t + 77 + 2500]),
    ]);
    let pairs = TimestampPairs::build(&ds);
    assert_eq!(pairs.durations[0], [Some(1000.0)]);
    assert_eq!(pairs.durations[1], [Some(2500.0)]);
}
