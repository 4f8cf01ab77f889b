//! The table model and the exports read each query's outcome as `replay --compare` does: from the
//! begin the results file records (PRECISE, multiview), else the open trace's, else as precise.

use std::path::PathBuf;

use format::query::Outcome;
use format::record::*;

use crate::data::Dataset;
use crate::synth;
use crate::table;

const POOL: u64 = 0x77;
const OCCLUSION: i32 = 0;
const RESULT_64: u32 = 1;

fn result(query: u32, captured: u64, replayed: Option<u64>, begin: Option<QueryBegin>) -> Record {
    let v = |x: u64, available: bool| QueryValues {
        values: vec![x],
        available,
        result: 0,
        host_ns: 0,
    };
    Record::QueryResult(QueryResult {
        pool: POOL,
        query,
        query_type: OCCLUSION,
        pipeline_statistics: 0,
        frame: 0,
        queue: 0,
        command_buffer: 0xc0,
        loop_index: 0,
        pass: 0,
        seq: 50,
        flags: RESULT_64,
        captured: Some(v(captured, true)),
        replayed: Some(v(replayed.unwrap_or(0), replayed.is_some())),
        submit_ns: 0,
        available_ns: 0,
        captured_gpu_ns: None,
        replayed_gpu_ns: None,
        begin,
        device: None,
    })
}

fn begin(flags: u32, view_mask: u32, first: u32) -> Option<QueryBegin> {
    Some(QueryBegin {
        flags,
        view_mask,
        first,
    })
}

/// Replayed on the capture device (same device and driver).
fn results_file(records: Vec<Record>) -> (PathBuf, Header, Vec<Record>) {
    let dev = synth::device("llvmpipe", "llvmpipe");
    let mut r = vec![Record::ReplayInfo(ReplayInfo {
        trace: "t.qtrace".into(),
        capture_device: Some(dev.clone()),
        loops: 1,
        passes: 1,
        replay_ns: 0,
        capture_ns: 0,
        frames: 1,
    })];
    r.extend(records);
    (
        PathBuf::from("r.qres"),
        synth::header(FileKind::Results, dev),
        r,
    )
}

/// query -> (table outcome, CSV outcome column).
fn outcomes(ds: &Dataset) -> Vec<(u32, Option<Outcome>, String)> {
    let rows: Vec<u32> = (0..ds.rows.len() as u32).collect();
    let mut csv = Vec::new();
    crate::export::write_csv(ds, &rows, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (query, outcome) = (col("query"), col("outcome"));
    let by_query: std::collections::HashMap<u32, String> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[query].parse().unwrap(), f[outcome].to_owned())
        })
        .collect();
    let mut out: Vec<_> = ds
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.query, ds.outcome(i, 0), by_query[&r.query].clone()))
        .collect();
    out.sort_by_key(|o| o.0);
    out
}

#[test]
fn precision_and_multiview_come_from_the_recorded_begin() {
    let ds = Dataset::from_records(vec![results_file(vec![
        // A changed count on the capture device: precise is a mismatch, non-precise a variation.
        result(0, 100, Some(90), begin(1, 0, 0)),
        result(1, 100, Some(90), begin(0, 0, 1)),
        // A two-view query, the whole count in the first, the second never available (lavapipe).
        result(2, 60, Some(120), begin(1, 0b11, 2)),
        result(3, 60, None, begin(1, 0b11, 2)),
        // A two-view query whose sums differ.
        result(4, 60, Some(100), begin(1, 0b11, 4)),
        result(5, 60, Some(0), begin(1, 0b11, 4)),
        // Written before results recorded the begin, no trace open: read as precise.
        result(6, 100, Some(90), None),
    ])]);
    use Outcome::*;
    let multiview = NotCompared(format::query::NotCompared::MultiviewInFirst);
    let expected = [
        (0, Some(Mismatch), "mismatch"),
        (1, Some(Variation), "variation"),
        (2, Some(Match), "match"),
        (3, Some(multiview), "not_compared_multiview"),
        (4, Some(Mismatch), "mismatch"),
        (5, Some(Mismatch), "mismatch"),
        (6, Some(Mismatch), "mismatch"),
    ];
    let got = outcomes(&ds);
    let got: Vec<_> = got.iter().map(|(q, o, c)| (*q, *o, c.as_str())).collect();
    assert_eq!(got, expected);
    // Only real differences are flagged in the table.
    let flagged: Vec<u32> = (0..ds.rows.len())
        .filter(|&i| ds.mismatch[i])
        .map(|i| ds.rows[i].query)
        .collect();
    assert_eq!(flagged, [0, 4, 5, 6]);
    let row = |q: u32| ds.rows.iter().position(|r| r.query == q).unwrap();
    assert_eq!(
        table::diff_text(&ds, row(2), 0),
        "= (multiview: sum of 2 queries)"
    );
    assert_eq!(
        table::diff_text(&ds, row(3), 0),
        "multiview: result in first query"
    );
}

/// Results written before the begin was recorded, beside their trace: the trace's begin flags say
/// whether the count was precise, and its render passes whether a begin was multiview.
#[test]
fn results_without_the_begin_take_the_trace_s() {
    let dev = synth::device("llvmpipe", "llvmpipe");
    let op = |query: u32, flags: u32| {
        Record::QueryOp(QueryOp {
            seq: 10 + u64::from(query),
            command_buffer: 0xc0,
            pool: POOL,
            kind: QueryOpKind::Begin {
                query,
                flags,
                index: 0,
            },
            host_ns: 1,
        })
    };
    let mut calls = synth::LabelCalls::new();
    let rendering = [calls.begin_rendering(0xc0, 0b11), calls.end_rendering(0xc0)];
    let [multiview, end] = rendering.map(Record::Call);
    let trace = vec![
        Record::CommandTable(calls.table.clone()),
        Record::QueryPool(QueryPoolInfo {
            seq: 1,
            device: 0xd,
            pool: POOL,
            query_type: OCCLUSION,
            query_count: 4,
            pipeline_statistics: 0,
            perf_queue_family: None,
            perf_counters: Vec::new(),
        }),
        op(0, 1),
        op(1, 0),
        // Two views: queries 2 and 3, the whole count in the first on the replay device.
        multiview,
        op(2, 1),
        end,
        Record::QueryResults(QueryResults {
            seq: 50,
            thread: 0,
            device: 0xd,
            pool: POOL,
            first: 0,
            count: 4,
            stride: 8,
            flags: RESULT_64,
            result: 0,
            host_ns: 2,
            data: [100u64, 100, 60, 60]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        }),
    ];
    let ds = Dataset::from_records(vec![
        (
            PathBuf::from("t.qtrace"),
            synth::header(FileKind::Trace, dev),
            trace,
        ),
        results_file(vec![
            result(0, 100, Some(90), None),
            result(1, 100, Some(90), None),
            result(2, 60, Some(120), None),
            result(3, 60, None, None),
        ]),
    ]);
    let got = outcomes(&ds);
    let got: Vec<_> = got.iter().map(|(q, o, c)| (*q, *o, c.as_str())).collect();
    let multiview = Outcome::NotCompared(format::query::NotCompared::MultiviewInFirst);
    assert_eq!(
        got,
        [
            (0, Some(Outcome::Mismatch), "mismatch"),
            (1, Some(Outcome::Variation), "variation"),
            (2, Some(Outcome::Match), "match"),
            (3, Some(multiview), "not_compared_multiview"),
        ]
    );
}
