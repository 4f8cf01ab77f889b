//! Query copies replayed from the GPU (issue 20): quarry-demo's timeline path reads timestamps and
//! occlusion results only through vkCmdCopyQueryPoolResults into mapped memory, after host waits
//! on timeline semaphores. Captured and replayed with a results file, every timestamp read through
//! a copy must differ from its captured value (a re-execution cannot reproduce a clock, so an
//! equal value was taken from the trace) and none is a "match"; occlusion copies match.
//!
//! Needs `cargo build --workspace --bins` in the same target dir and lavapipe; skips otherwise.

use std::collections::HashSet;

use ash::vk;
use format::query::{classify, Context, Outcome};
use format::record::Record;
use format::TraceReader;
use quarry_tests::*;
use replayer::ReplayOptions;

/// Every timestamp read through a copy differs from its captured value and is not a "match";
/// every occlusion copy is available in the replay and compares as "match" (the capture reads each
/// copy at the wait that completed it).
#[test]
fn demo_copied_values_are_the_replay_gpus() {
    if !lavapipe() {
        return;
    }
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let layer = layer();
    let trace = tmp.path().join("demo.qtrace");
    let out = under_layer(vulkan_command(&demo), &layer, &trace)
        .args(["--headless", "--frames", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "quarry-demo: {}", output_text(&out));

    // The copy calls the trace read back.
    let copy_seqs: HashSet<u64> = TraceReader::open(&trace)
        .unwrap()
        .records()
        .filter_map(|r| match r.unwrap() {
            Record::QueryCopy(c) => Some(c.seq),
            _ => None,
        })
        .collect();
    assert!(!copy_seqs.is_empty(), "the demo's timeline path copies");

    let results = tmp.path().join("demo.qres");
    let mut o = ReplayOptions::new(&trace);
    o.gpu = Some("llvmpipe".into());
    o.compare = true;
    o.results = Some(results.clone());
    let s = replayer::replay(&o).expect("replay of the demo trace");
    let text = s.comparison.to_text();
    assert_eq!(s.comparison.by_type["TIMESTAMP"].matches, 0, "{text}");

    let ctx = Context {
        precise: false,
        same_device: s.comparison.same_device,
    };
    let (mut timestamps, mut occlusion, mut matched) = (0, 0, 0);
    for rec in TraceReader::open(&results).unwrap().records() {
        let Record::QueryResult(q) = rec.unwrap() else {
            continue;
        };
        if !copy_seqs.contains(&q.seq) {
            continue;
        }
        let (c, r) = (q.captured.as_ref().unwrap(), q.replayed.as_ref().unwrap());
        let outcome = classify(q.query_type, Some(c), Some(r), ctx);
        let what = format!("seq {} pool 0x{:x} query {}", q.seq, q.pool, q.query);
        if q.query_type == vk::QueryType::TIMESTAMP.as_raw() {
            assert_ne!(outcome, Outcome::Match, "{what}");
            if c.available && r.available {
                assert_ne!(
                    c.values[0], r.values[0],
                    "{what}: the replayed timestamp equals the captured one, so it came from the trace"
                );
                timestamps += 1;
            }
        } else if q.query_type == vk::QueryType::OCCLUSION.as_raw() {
            assert!(r.available, "{what}: replayed {r:?}");
            matched += usize::from(outcome == Outcome::Match);
            assert_eq!(
                outcome,
                Outcome::Match,
                "{what}: captured {c:?}, replayed {r:?}\n{text}"
            );
            occlusion += 1;
        }
    }
    assert!(
        timestamps > 0 && occlusion > 0 && matched > 0,
        "{timestamps} timestamps, {occlusion} occlusion queries ({matched} match) read through copies\n{text}"
    );
}
