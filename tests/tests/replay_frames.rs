//! `quarry replay --frames A-B`: replays from the trace's start through frame B and reports frames
//! A..=B only; a range past the trace's end is bad input (exit 2).

use format::record::Record;
use format::TraceReader;
use quarry_tests::*;

#[test]
fn frame_range_replays_and_reports_only_those_frames() {
    let Some(t) = capture_demo_on_lavapipe("frames", "2") else {
        return;
    };
    let tmp = t.parent().unwrap().to_path_buf();
    let frames = TraceReader::open(&t).unwrap().info().frames;
    assert!(frames > 6, "the demo ends frames at its waits: {frames}");

    let res = tmp.join("range.qres");
    let out = run_quarry(&[
        "replay",
        t.to_str().unwrap(),
        "--gpu",
        "llvmpipe",
        "--frames",
        "3-5",
        "--compare",
        "--frames-table",
        "--results",
        res.to_str().unwrap(),
    ]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("frames 3-5: capture"), "{text}");
    let table: Vec<u64> = text
        .lines()
        .skip_while(|l| !l.contains("capture ms"))
        .skip(1)
        .map_while(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(table, vec![3, 4, 5], "{text}");
    let mut reads = 0;
    for rec in TraceReader::open(&res).unwrap().records() {
        match rec.unwrap() {
            // Reads made in frames 3..=5 of work submitted from frame 2 on.
            Record::QueryResult(q) => {
                reads += 1;
                assert!((2..=5).contains(&q.frame), "frame {}", q.frame);
            }
            Record::ReplayInfo(i) => assert_eq!(i.frames, 3),
            _ => {}
        }
    }
    assert!(reads > 0);

    let out = run_quarry(&["replay", t.to_str().unwrap(), "--frames", "2-999"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("holds frames 0 to"),
        "{}",
        output_text(&out)
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
