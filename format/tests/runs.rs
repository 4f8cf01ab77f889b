//! `format::runs`: matching results of runs of one trace (keys, loops, intervals, identity,
//! grouping). The deterministic rule comes in as a stand-in classifier here.

use format::record::*;
use format::runs::*;
use format::TraceWriter;

fn dev(name: &str, valid_bits: u32, period: f32) -> DeviceSummary {
    DeviceSummary {
        name: name.to_owned(),
        timestamp_period_ns: period,
        queue_families: vec![QueueFamilySummary {
            flags: 1,
            queue_count: 1,
            timestamp_valid_bits: valid_bits,
        }],
        ..DeviceSummary::default()
    }
}

fn header(kind: FileKind, device: DeviceSummary, app: &str) -> Header {
    Header {
        kind,
        writer: "runs test".to_owned(),
        created_unix_ns: 0,
        device: Some(device),
        application: app.to_owned(),
    }
}

fn info(loops: u32) -> Record {
    Record::ReplayInfo(ReplayInfo {
        trace: "t.qtrace".to_owned(),
        capture_device: Some(dev("capture", 64, 1.0)),
        loops,
        passes: 1,
        replay_ns: 0,
        capture_ns: 0,
        frames: 1,
    })
}

fn q(ty: i32, pool: u64, query: u32, seq: u64, l: u32, captured: u64, replayed: u64) -> Record {
    let v = |x| {
        Some(QueryValues {
            values: vec![x],
            available: true,
            result: 0,
            host_ns: 0,
        })
    };
    Record::QueryResult(QueryResult {
        pool,
        query,
        query_type: ty,
        pipeline_statistics: 0,
        frame: 0,
        queue: 0,
        command_buffer: 0xc0,
        loop_index: l,
        pass: 0,
        seq,
        flags: 0,
        captured: v(captured),
        replayed: v(replayed),
        submit_ns: 0,
        available_ns: 0,
        captured_gpu_ns: None,
        replayed_gpu_ns: None,
        begin: None,
        device: None,
    })
}

fn c(name: &str, unit: u32, frame: u64, value: f64) -> Record {
    Record::CounterValue(CounterValue {
        counter: PerfCounterDesc {
            uuid: [0; 16],
            name: name.to_owned(),
            category: String::new(),
            description: String::new(),
            unit,
            storage: 5,
            scope: 0,
        },
        pass: 0,
        frame,
        command_buffer: 0xc0,
        render_pass: None,
        value,
        captured: Some(1.0),
    })
}

fn run(label: &str, device: DeviceSummary, records: Vec<Record>) -> Run {
    Run::from_records(label, &header(FileKind::Results, device, "app"), records).unwrap()
}

/// Stand-in rule: equal is the same, occlusion differences are deterministic, the rest varies.
fn classify(
    read: &[QueryResult],
    i: usize,
    _: Option<&DeviceSummary>,
    _: Option<&DeviceSummary>,
) -> Verdict {
    let r = &read[i];
    let vals = |v: &Option<QueryValues>| v.as_ref().map(|v| v.values.clone());
    if vals(&r.captured) == vals(&r.replayed) {
        Verdict::Same
    } else if r.query_type == 0 {
        Verdict::Differs
    } else {
        Verdict::Varies
    }
}

#[test]
fn repeated_reads_get_occurrences_and_loops_merge_by_lower_median() {
    let mut recs = Vec::new();
    for (l, vals) in [(0, [10, 7]), (1, [30, 9]), (2, [20, 8])] {
        // The same read (pool, query, seq) twice per loop: a copy submitted twice.
        recs.push(q(0, 0x10, 0, 5, l, 1, vals[0]));
        recs.push(q(0, 0x10, 0, 5, l, 1, vals[1]));
    }
    recs.push(info(3));
    let r = run("a", dev("gpu", 64, 1.0), recs);
    let key = |occurrence| QueryKey {
        pool: 0x10,
        query: 0,
        seq: 5,
        occurrence,
    };
    assert_eq!(r.queries.len(), 2);
    let v = |k| {
        r.queries[&k]
            .result
            .replayed
            .as_ref()
            .unwrap()
            .values
            .clone()
    };
    assert_eq!(v(key(0)), vec![20]);
    assert_eq!(v(key(1)), vec![8]);

    let two = run(
        "b",
        dev("gpu", 64, 1.0),
        vec![
            q(0, 0x10, 0, 5, 0, 1, 30),
            q(0, 0x10, 0, 5, 1, 1, 10),
            info(2),
        ],
    );
    assert_eq!(
        two.queries[&key(0)]
            .result
            .replayed
            .as_ref()
            .unwrap()
            .values,
        vec![10],
        "lower median: a value that was measured"
    );
}

#[test]
fn timestamp_intervals_are_integer_ticks_masked_to_valid_bits() {
    let top = (1u64 << 36) - 100;
    let recs = vec![
        q(2, 0x20, 0, 7, 0, 0, top),
        q(2, 0x20, 1, 7, 0, 0, 50),           // wrapped: 150 ticks later
        q(2, 0x20, 2, 7, 0, 0, 40),           // before query 1: no interval
        q(2, 0x20, 3, 7, 0, 0, 1 << 62 | 60), // bits above 36 are ignored
        info(1),
    ];
    let r = run("a", dev("gpu", 36, 2.0), recs);
    let at = |query| {
        r.queries[&QueryKey {
            pool: 0x20,
            query,
            seq: 7,
            occurrence: 0,
        }]
            .clone()
    };
    assert_eq!(at(0).interval_ns, None);
    assert_eq!(at(1).interval_ns, Some(300.0));
    assert_eq!(at(1).interval_from, Some(0));
    assert_eq!(at(2).interval_ns, None);
    assert_eq!(at(3).interval_ns, Some(40.0));
    assert_eq!(ticks_to_ns(5, 5, u64::MAX, 1.0), Some(0.0));
    assert_eq!(ticks_to_ns(6, 5, u64::MAX, 1.0), None);
    // Far up the clock an f64 cannot hold 1000 ns apart; the integer subtraction can.
    let big = 1_700_000_000_000_000_000u64;
    assert_eq!(ticks_to_ns(big, big + 1000, u64::MAX, 1.0), Some(1000.0));
}

#[test]
fn counters_without_loop_index_split_by_loop_count() {
    let recs = vec![
        c("time", 2, 0, 5.0),
        c("time", 2, 0, 9.0),
        c("time", 2, 0, 7.0),
        c("time", 2, 0, 1.0),
        info(2),
    ];
    // Two loops of two samples each: occurrence 0 = {5, 7}, occurrence 1 = {9, 1}.
    let r = run("a", dev("gpu", 64, 1.0), recs);
    let vals: Vec<(u32, f64)> = r
        .counters
        .iter()
        .map(|(k, e)| (k.occurrence, e.value))
        .collect();
    assert_eq!(vals, vec![(0, 5.0), (1, 1.0)]);
    // Samples that do not divide by the loop count are kept apart.
    let odd = run(
        "b",
        dev("gpu", 64, 1.0),
        vec![
            c("x", 0, 0, 1.0),
            c("x", 0, 0, 2.0),
            c("x", 0, 0, 3.0),
            info(2),
        ],
    );
    assert_eq!(odd.counters.len(), 3);
}

#[test]
fn same_trace_compares_what_results_carry() {
    let base = || vec![q(0, 0x10, 0, 5, 0, 100, 100), info(1)];
    let a = run("A", dev("gpu-a", 64, 1.0), base());
    let b = run("B", dev("gpu-b", 64, 1.0), base());
    assert_eq!(same_trace(&a, &b), Ok(()));

    let other_app = Run::from_records(
        "C",
        &header(FileKind::Results, dev("gpu", 64, 1.0), "vkcube"),
        base(),
    )
    .unwrap();
    assert!(same_trace(&a, &other_app).unwrap_err().contains("vkcube"));

    let recaptured = run(
        "D",
        dev("gpu", 64, 1.0),
        vec![q(0, 0x10, 0, 5, 0, 101, 100), info(1)],
    );
    assert!(same_trace(&a, &recaptured)
        .unwrap_err()
        .contains("captured differently"));

    let disjoint = run(
        "E",
        dev("gpu", 64, 1.0),
        vec![q(0, 0x99, 0, 5, 0, 100, 100), info(1)],
    );
    assert!(same_trace(&a, &disjoint).unwrap_err().contains("in common"));

    let mut other_device = base();
    other_device[1] = Record::ReplayInfo(ReplayInfo {
        trace: "t.qtrace".to_owned(),
        capture_device: Some(dev("another capture GPU", 64, 1.0)),
        loops: 1,
        passes: 1,
        replay_ns: 0,
        capture_ns: 0,
        frames: 1,
    });
    let f = run("F", dev("gpu", 64, 1.0), other_device);
    assert!(same_trace(&a, &f)
        .unwrap_err()
        .contains("another capture GPU"));
}

#[test]
fn matching_groups_sorts_and_names_directions() {
    let a = run(
        "A",
        dev("gpu", 64, 1.0),
        vec![
            q(0, 0x10, 0, 5, 0, 100, 100),
            q(0, 0x10, 1, 5, 0, 100, 100),
            q(0, 0x10, 2, 5, 0, 0, 0),
            c("busy", 1, 0, 40.0),
            c("busy", 1, 1, 60.0),
            c("time", 2, 0, 1000.0),
            info(1),
        ],
    );
    let b = run(
        "B",
        dev("gpu", 64, 1.0),
        vec![
            q(0, 0x10, 0, 5, 0, 100, 100),
            q(0, 0x10, 1, 5, 0, 100, 90),
            q(0, 0x10, 2, 5, 0, 0, 7),
            q(0, 0x10, 3, 5, 0, 0, 7),
            c("busy", 1, 0, 50.0),
            c("busy", 1, 1, 70.0),
            c("time", 2, 0, 900.0),
            info(1),
        ],
    );
    let m = match_runs(&[a, b], &classify);
    assert_eq!(m.queries_only_here, vec![0, 1]);
    assert_eq!(m.queries_missing, vec![0, 0]);
    assert_eq!(m.query_verdicts[1].get(&Verdict::Differs), Some(&2));
    assert_eq!(m.query_verdicts[1].get(&Verdict::Same), Some(&1));

    let by_query = rows(&m, By::Query);
    assert_eq!(by_query.len(), 6);
    // Failing rows first (0 -> 7 is a new value), then by largest change.
    assert!(by_query[0].fails() && by_query[0].change_pct[1] == Some(f64::INFINITY));
    assert!(by_query[1].fails() && by_query[1].change_pct[1] == Some(-10.0));
    assert_eq!(by_query[2].change_pct[1], Some(25.0));
    assert_eq!(by_query[2].measure.direction(10.0), "higher");

    let by_counter = rows(&m, By::Counter);
    let find = |name: &str| {
        by_counter
            .iter()
            .find(|r| matches!(&r.key.metric, Metric::Counter { name: n, .. } if n == name))
            .unwrap()
    };
    // Levels average over samples; times and counts sum.
    assert_eq!(find("busy").values, vec![Some(50.0), Some(60.0)]);
    assert_eq!(find("busy").samples, 2);
    assert_eq!(find("time").values, vec![Some(1000.0), Some(900.0)]);
    assert_eq!(find("time").measure.direction(-100.0), "faster");
    let occ = by_counter
        .iter()
        .find(|r| matches!(r.key.metric, Metric::Query { .. }))
        .unwrap();
    assert_eq!(occ.values, vec![Some(200.0), Some(197.0)]);
    assert_eq!(Measure::Count.direction(-3.0), "fewer");
    assert_eq!(change_pct(0.0, 0.0), 0.0);
    assert_eq!(change_pct(200.0, 190.0), -5.0);
}

#[test]
fn read_checks_kind_and_replay_info() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, kind: FileKind, recs: Vec<Record>| {
        let p = dir.path().join(name);
        let w = TraceWriter::create(&p, header(kind, dev("gpu", 64, 1.0), "app")).unwrap();
        for r in recs {
            w.write(&r).unwrap();
        }
        w.finish().unwrap();
        p
    };
    let ok = write(
        "a.qres",
        FileKind::Results,
        vec![q(0, 0x10, 0, 5, 0, 1, 1), info(1)],
    );
    let r = Run::read(&ok).unwrap();
    assert_eq!(r.queries.len(), 1);
    assert_eq!(r.trace.application, "app");
    let trace = write("t.qtrace", FileKind::Trace, vec![]);
    assert!(matches!(Run::read(&trace), Err(RunError::NotResults(_))));
    let unfinished = write("u.qres", FileKind::Results, vec![q(0, 0x10, 0, 5, 0, 1, 1)]);
    assert!(matches!(
        Run::read(&unfinished),
        Err(RunError::NoReplayInfo(_))
    ));
}

#[test]
fn same_trace_trusts_the_content_hash_where_both_carry_one() {
    let id = |b: u8| Record::TraceIdentity(format::record::TraceIdentity { trace_id: [b; 16] });
    let ty = 0; // occlusion
    let a = run(
        "a",
        dev("x", 64, 1.0),
        vec![id(1), info(1), q(ty, 1, 0, 5, 0, 9, 9)],
    );
    // Same contents: equal whatever else differs (here the captured value, which a forged or
    // edited file could change; the hash covers the trace, not the results).
    let b = run(
        "b",
        dev("y", 64, 1.0),
        vec![id(1), info(1), q(ty, 1, 0, 5, 0, 7, 7)],
    );
    assert_eq!(same_trace(&a, &b), Ok(()));
    // Other contents: refused even where every query agrees.
    let c = run(
        "c",
        dev("x", 64, 1.0),
        vec![id(2), info(1), q(ty, 1, 0, 5, 0, 9, 9)],
    );
    assert!(same_trace(&a, &c)
        .unwrap_err()
        .contains("different contents"));
    // Only one side carries a hash: the older checks decide.
    let d = run(
        "d",
        dev("x", 64, 1.0),
        vec![info(1), q(ty, 1, 0, 5, 0, 7, 7)],
    );
    assert!(same_trace(&a, &d).is_err());
}

#[test]
fn rows_say_direction_and_goodness_and_the_threshold_rule_is_shared() {
    let a = run(
        "A",
        dev("gpu", 64, 1.0),
        vec![c("time", 2, 0, 1000.0), c("busy", 1, 0, 40.0), info(1)],
    );
    let b = run(
        "B",
        dev("gpu", 64, 1.0),
        vec![c("time", 2, 0, 850.0), c("busy", 1, 0, 52.8), info(1)],
    );
    let rows = rows(&match_runs(&[a, b], &classify_runs), By::Counter);
    // Sorted by largest change: busy +32 % first, then time -15 %.
    assert_eq!(rows.len(), 2);
    assert!((rows[0].change_pct[1].unwrap() - 32.0).abs() < 1e-9);
    assert_eq!(rows[0].direction(1), Some("higher"));
    assert_eq!(rows[0].better(1), None);
    assert_eq!(rows[1].change_pct[1], Some(-15.0));
    assert_eq!(rows[1].direction(1), Some("faster"));
    assert_eq!(rows[1].better(1), Some(true));
    assert_eq!(rows[1].direction(0), Some("same"));
    assert_eq!(Measure::of_counter(2), Measure::Time);
    assert_eq!(Measure::Time.better(5.0), Some(false));
    assert_eq!(Measure::Time.better(0.0), None);
    assert!(over_threshold(-15.0, 5.0) && !over_threshold(5.0, 5.0));
    // The shared rule: same device and driver decide whether sizes must match exactly;
    // occlusion counts compare as non-precise (only zero vs non-zero is exact).
    let (x, y) = (dev("gpu", 64, 1.0), dev("other", 64, 1.0));
    assert!(same_device(&x, &x) && !same_device(&x, &y));
    let Record::QueryResult(size) = q(1_000_150_000, 0x10, 0, 5, 0, 100, 90) else {
        unreachable!()
    };
    assert_eq!(
        classify_runs(std::slice::from_ref(&size), 0, Some(&x), Some(&x)),
        Verdict::Differs
    );
    assert_eq!(
        classify_runs(std::slice::from_ref(&size), 0, Some(&x), Some(&y)),
        Verdict::Varies
    );
    let Record::QueryResult(mut occ) = q(0, 0x10, 0, 5, 0, 100, 90) else {
        unreachable!()
    };
    assert_eq!(
        classify_runs(std::slice::from_ref(&occ), 0, Some(&x), Some(&x)),
        Verdict::Varies
    );
    occ.replayed.as_mut().unwrap().values[0] = 0;
    assert_eq!(
        classify_runs(std::slice::from_ref(&occ), 0, Some(&x), Some(&y)),
        Verdict::Differs
    );
}

/// `quarry compare` reads the begin each results file records: a precise occlusion count that
/// changes on one device differs, a non-precise one varies; the queries of a two-view multiview
/// begin compare by their sum, and a second query one GPU left unavailable is not compared.
#[test]
fn runs_read_precision_and_multiview_from_the_recorded_begin() {
    let with = |r: Record, begin: QueryBegin, replayed: Option<u64>| {
        let Record::QueryResult(mut q) = r else {
            unreachable!()
        };
        q.begin = Some(begin);
        if replayed.is_none() {
            q.replayed.as_mut().unwrap().available = false;
        }
        Record::QueryResult(q)
    };
    let precise = QueryBegin {
        flags: 1,
        view_mask: 0,
        first: 0,
    };
    let loose = QueryBegin {
        first: 1,
        ..QueryBegin::default()
    };
    let mv = QueryBegin {
        flags: 1,
        view_mask: 0b11,
        first: 2,
    };
    let records = |a: u64, b: u64, views: (Option<u64>, Option<u64>)| {
        vec![
            with(q(0, 0x10, 0, 5, 0, 100, a), precise, Some(a)),
            with(q(0, 0x10, 1, 5, 0, 100, b), loose, Some(b)),
            with(q(0, 0x10, 2, 5, 0, 100, views.0.unwrap_or(0)), mv, views.0),
            with(q(0, 0x10, 3, 5, 0, 100, views.1.unwrap_or(0)), mv, views.1),
            info(1),
        ]
    };
    let gpu = dev("gpu", 64, 1.0);
    // Baseline: all of the multiview count in the first query, the second never available.
    let a = run("a", gpu.clone(), records(100, 100, (Some(120), None)));
    let b = run("b", gpu.clone(), records(90, 90, (Some(60), Some(60))));
    let m = match_runs(&[a, b], &classify_runs);
    let verdict = |query: u32| {
        m.values
            .iter()
            .find(|v| matches!(v.item, Item::Query(k) if k.query == query))
            .map(|v| v.verdicts[1])
    };
    assert_eq!(verdict(0), Some(Verdict::Differs));
    assert_eq!(verdict(1), Some(Verdict::Varies));
    assert_eq!(verdict(2), Some(Verdict::Same));
    assert_eq!(verdict(3), Some(Verdict::NotCompared));
    // Sums that differ are a precise count that changed.
    let a = run("a", gpu.clone(), records(100, 100, (Some(120), None)));
    let c = run("c", gpu, records(100, 100, (Some(60), Some(50))));
    let m = match_runs(&[a, c], &classify_runs);
    let v = |query: u32| {
        m.values
            .iter()
            .find(|v| matches!(v.item, Item::Query(k) if k.query == query))
            .map(|v| v.verdicts[1])
    };
    assert_eq!(
        (v(2), v(3)),
        (Some(Verdict::Differs), Some(Verdict::NotCompared))
    );
}
