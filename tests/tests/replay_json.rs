//! `quarry replay` output: the per-frame table only with `--frames-table`, loops summarised as
//! min / median / max, and `--json` saying the same as the text.

use std::collections::BTreeMap;

use format::TraceReader;
use quarry_tests::*;

/// The comparison's rows in the text: query type -> its seven counts.
fn text_comparison(text: &str) -> BTreeMap<String, Vec<u64>> {
    text.lines()
        .skip_while(|l| !l.starts_with("comparison ("))
        .skip(2)
        .map_while(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let counts: Vec<u64> = f
                .get(1..)?
                .iter()
                .map(|n| n.parse().ok())
                .collect::<Option<_>>()?;
            (counts.len() == 7).then(|| (f[0].to_string(), counts))
        })
        .collect()
}

/// Lines of the per-frame table: (frame, line).
fn table_frames(text: &str) -> Vec<u64> {
    text.lines()
        .skip_while(|l| !l.contains("capture ms"))
        .skip(1)
        .map_while(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn replay_json_and_frames_table_agree_with_the_text() {
    let Some(t) = capture_demo_on_lavapipe("replay-json", "2") else {
        return;
    };
    let frames = TraceReader::open(&t).unwrap().info().frames;
    let ts = t.to_str().unwrap();
    let base = [
        "replay",
        ts,
        "--gpu",
        "llvmpipe",
        "--loop",
        "3",
        "--compare",
    ];
    let with = |extra: &[&str]| run_quarry(&[&base[..], extra].concat());

    let json = with(&["--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", output_text(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", output_text(&json)));
    assert_eq!(v["frames"].as_u64(), Some(frames), "{v}");
    assert!(v["calls"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["trace"].as_str(), Some(ts));
    assert!(
        v["device"]["name"].as_str().unwrap().contains("llvmpipe"),
        "{v}"
    );
    assert_eq!(v["result"], "ok", "{v}");
    let loops = &v["loops"];
    assert_eq!(loops["count"], 3, "{v}");
    assert_eq!(loops["per_loop_ms"].as_array().unwrap().len(), 3, "{v}");
    let (min, median, max) = (
        loops["min_ms"].as_f64().unwrap(),
        loops["median_ms"].as_f64().unwrap(),
        loops["max_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= median && median <= max, "{v}");
    let json_frames: Vec<u64> = v["frame_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["per_loop_ms"].as_array().unwrap().len(), 3, "{f}");
            f["frame"].as_u64().unwrap()
        })
        .collect();
    assert!(!json_frames.is_empty(), "{v}");
    let json_comparison: BTreeMap<String, Vec<u64>> = v["comparison"]["by_type"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, t)| {
            let keys = [
                "queries",
                "matches",
                "mismatches",
                "variations",
                "clock",
                "not_compared",
                "unavailable",
            ];
            (
                name.clone(),
                keys.iter().map(|k| t[k].as_u64().unwrap()).collect(),
            )
        })
        .collect();
    assert!(!json_comparison.is_empty(), "{v}");
    assert!(v["comparison"]["not_compared"].is_array(), "{v}");

    // Default text: header, totals and comparison; no per-frame lines.
    let out = with(&[]);
    let text = output_text(&out);
    assert_eq!(out.status.code(), json.status.code(), "{text}");
    assert!(!text.contains("capture ms"), "{text}");
    assert!(table_frames(&text).is_empty(), "{text}");
    let total = text.lines().find(|l| l.starts_with("total:")).unwrap();
    assert!(
        total.contains("min ") && total.contains("median ") && total.contains("over 3 loops"),
        "{total}"
    );
    assert!(text.contains("result: "), "{text}");
    assert_eq!(text_comparison(&text), json_comparison, "{text}\n{v}");

    // --frames-table (and -v): one line per frame, the frames the JSON lists.
    for flag in ["--frames-table", "-v"] {
        let out = with(&[flag]);
        let text = output_text(&out);
        assert!(out.status.success(), "{text}");
        assert_eq!(table_frames(&text), json_frames, "{text}");
        assert_eq!(text_comparison(&text), json_comparison, "{text}");
    }
}
