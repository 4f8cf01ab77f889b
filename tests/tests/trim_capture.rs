//! Trimmed capture (`quarry capture --frames A-B`, A > 0): the layer writes nothing before frame
//! A, then a state snapshot, then frames A..=B. Replays of such traces must rebuild the state the
//! app had (objects, memory, fence states, image layouts) well enough that the queries of the
//! captured frames give the captured answers and validation has nothing to say.

use std::path::Path;

use format::record::Record;
use format::TraceReader;
use quarry_tests::*;

/// Frame indices, calls, and where the snapshot sits among the records.
struct Shape {
    frames: Vec<u64>,
    calls: u64,
    state_begin: Option<usize>,
    state_end: Option<(usize, format::record::StateEnd)>,
    first_frame_record: Option<usize>,
    /// `vkCmdCopyQueryPoolResults` destinations read back, and how many of them came back empty.
    copies: (u64, u64),
    notes: Vec<String>,
}

fn shape(path: &Path) -> Shape {
    let r = TraceReader::open(path).unwrap();
    let mut s = Shape {
        frames: Vec::new(),
        calls: 0,
        state_begin: None,
        state_end: None,
        first_frame_record: None,
        copies: (0, 0),
        notes: Vec::new(),
    };
    for (i, rec) in r.records().enumerate() {
        match rec.unwrap() {
            Record::Call(_) => s.calls += 1,
            Record::Frame(f) => {
                s.first_frame_record.get_or_insert(i);
                s.frames.push(f.index);
            }
            Record::StateBegin(_) => s.state_begin = Some(i),
            Record::Note(n) => s.notes.push(n.message),
            Record::QueryCopy(c) => {
                s.copies.0 += 1;
                s.copies.1 += c.data.is_empty() as u64;
            }
            Record::StateEnd(e) => s.state_end = Some((i, e)),
            _ => {}
        }
    }
    s
}

fn replay_checked(trace: &Path, upload: Option<&str>) -> String {
    let mut c = quarry_command();
    c.args([
        "replay",
        trace.to_str().unwrap(),
        "--gpu",
        "llvmpipe",
        "--compare",
        "--validate",
    ])
    .env_remove("DISPLAY");
    if let Some(u) = upload {
        c.env("QUARRY_REPLAY_UPLOAD", u);
    }
    let out = c.output().unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("validation: 0 messages"), "{text}");
    assert!(
        text.contains("trimmed trace: a state snapshot rebuilds"),
        "{text}"
    );
    text
}

#[test]
fn trimmed_demo_starts_with_a_snapshot_and_its_queries_replay_exactly() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("trim-demo");
    let capture_with = |out: &Path, frames: Option<&str>, readback: Option<&str>| {
        let mut args = vec!["capture", "-o", out.to_str().unwrap()];
        if let Some(f) = frames {
            args.extend(["--frames", f]);
        }
        args.extend([
            "--",
            demo.to_str().unwrap(),
            "--headless",
            "--frames",
            "3",
            "--gpu",
            "llvmpipe",
            "--check",
            "--validate",
        ]);
        let mut c = quarry_command();
        c.args(&args).env_remove("DISPLAY");
        if let Some(r) = readback {
            c.env("QUARRY_CAPTURE_READBACK", r);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", output_text(&o));
        output_text(&o)
    };
    let capture = |out: &Path, frames: Option<&str>| capture_with(out, frames, None);
    let full = dir.join("full.qtrace");
    capture(&full, None);
    let trimmed = dir.join("trimmed.qtrace");
    let text = capture(&trimmed, Some("8-14"));
    assert!(text.contains("frame 8: state snapshot written"), "{text}");

    let f = shape(&full);
    let t = shape(&trimmed);
    assert!(f.frames.len() > 14, "full capture frames: {:?}", f.frames);
    assert_eq!(t.frames, (8..=14).collect::<Vec<u64>>());
    let (end_at, end) = t.state_end.clone().expect("a StateEnd record");
    let begin_at = t.state_begin.expect("a StateBegin record");
    assert!(begin_at < end_at && end_at < t.first_frame_record.unwrap());
    assert_eq!(end.first_frame, 8);
    assert!(
        end.gaps.is_empty(),
        "lavapipe memory is all host-visible: {:?}",
        end.gaps
    );
    assert!(end.memory_bytes > 0 && end.objects > 10, "{end:?}");
    assert!(
        t.calls < f.calls,
        "frames 0-7 are not recorded: {} calls trimmed vs {} full",
        t.calls,
        f.calls
    );

    // A range that starts after the program's last frame: no trace, and the message says why.
    let late = dir.join("late.qtrace");
    let o = run_quarry_on(
        &[
            "capture",
            "-o",
            late.to_str().unwrap(),
            "--frames",
            "100-200",
            "--",
            demo.to_str().unwrap(),
            "--headless",
            "--frames",
            "1",
            "--gpu",
            "llvmpipe",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        output_text(&o)
            .contains("a trimmed capture starts at frame 100, and the program ended before it"),
        "{}",
        output_text(&o)
    );
    assert!(!late.exists());

    let info = output_text(&run_quarry_on(&["info", trimmed.to_str().unwrap()], None));
    assert!(
        info.contains("trimmed:      starts at frame 8 with a state snapshot"),
        "{info}"
    );

    // Memory the host cannot map is read back through the GPU (forced here: lavapipe's memory is all
    // host-visible): the same bytes reach the snapshot, and the demo (validation on) is unchanged.
    let gpu = dir.join("gpu.qtrace");
    capture_with(&gpu, Some("8-14"), Some("gpu"));
    let g = shape(&gpu);
    let (_, gpu_end) = g.state_end.clone().expect("a StateEnd record");
    // The same path reads vkCmdCopyQueryPoolResults destinations (device-local on discrete GPUs).
    assert!(
        g.copies.0 > 0 && g.copies.1 == 0,
        "copies (read, empty): {:?}",
        g.copies
    );
    let through_gpu = |s: &Shape| -> u64 {
        s.notes
            .iter()
            .find_map(|n| {
                let (head, _) = n.split_once(" ranges read back through the GPU")?;
                head.rsplit(' ').next()?.parse().ok()
            })
            .expect("the closing note counts GPU read-backs")
    };
    assert!(
        through_gpu(&g) > g.copies.0,
        "every copy destination and every allocation went through the GPU: {:?}",
        g.notes
    );
    assert_eq!(through_gpu(&t), 0, "lavapipe needs no GPU read-back");
    assert!(gpu_end.gaps.is_empty(), "{:?}", gpu_end.gaps);
    assert_eq!(gpu_end.memory_bytes, end.memory_bytes);
    // ... and replayed through the GPU upload path device-local replay memory takes (forced here;
    // without the uploads the demo's draws read zeros and its occlusion counts differ).
    let text = replay_checked(&gpu, Some("gpu"));
    assert!(text.contains("all deterministic results match"), "{text}");

    // The queries of frames 8-14 replay to the captured values; reads of work submitted before
    // the trim point are skipped, not compared.
    let text = replay_checked(&trimmed, None);
    assert!(text.contains("all deterministic results match"), "{text}");
    assert!(text.contains("frames 7"), "{text}");
    let compared: u64 = text
        .lines()
        .skip_while(|l| !l.contains("query type"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum();
    assert!(compared > 20, "matched queries: {compared}\n{text}");
}

#[test]
fn trimmed_vkcube_restores_image_layouts_and_fences() {
    let Some(display) = display_or_skip() else {
        return;
    };
    if !have_all(&["vkcube"]) {
        return;
    }
    let dir = scratch_dir("trim-vkcube");
    let trace = dir.join("cube.qtrace");
    let out = run_quarry_on(
        &[
            "capture",
            "-o",
            trace.to_str().unwrap(),
            "--frames",
            "20-29",
            "--",
            "vkcube",
            "--c",
            "40",
        ],
        Some(&display),
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let t = shape(&trace);
    assert_eq!(t.frames, (20..=29).collect::<Vec<u64>>());
    // vkcube moves its texture out of PREINITIALIZED once, at start-up: without the snapshot's
    // layout barrier every draw of the replay is a validation error.
    let dump = run_quarry_on(&["dump", trace.to_str().unwrap()], None);
    let dump = output_text(&dump);
    assert!(
        dump.lines()
            .any(|l| l.contains("thread=0") && l.contains("vkCmdPipelineBarrier")),
        "no layout restore in the snapshot"
    );
    let text = replay_checked(&trace, None);
    assert!(text.contains("frames 10"), "{text}");
}
