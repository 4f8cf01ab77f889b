//! `quarry replay --frames A-B`: replays from the trace's start through frame B and reports frames
//! A..=B only; a range past the trace's end is bad input (exit 2).

use std::path::PathBuf;
use std::process::{Command, Output};

use format::record::Record;
use format::TraceReader;

fn quarry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quarry"))
        .args(args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .output()
        .unwrap()
}

fn both(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn frame_range_replays_and_reports_only_those_frames() {
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_quarry"))
        .parent()
        .unwrap()
        .to_path_buf();
    let demo = dir.join("quarry-demo");
    if !demo.is_file() || !dir.join("libVkLayer_quarry_capture.so").is_file() {
        eprintln!("SKIP: quarry-demo or the capture layer is not built next to quarry");
        return;
    }
    if !both(&quarry(&["devices"])).contains("llvmpipe") {
        eprintln!("SKIP: no lavapipe");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("quarry-frames-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let t = tmp.join("demo.qtrace");
    let out = quarry(&[
        "capture",
        "-o",
        t.to_str().unwrap(),
        "--",
        demo.to_str().unwrap(),
        "--headless",
        "--frames",
        "2",
        "--gpu",
        "llvmpipe",
    ]);
    assert!(out.status.success(), "{}", both(&out));
    let frames = TraceReader::open(&t).unwrap().info().frames;
    assert!(frames > 6, "the demo ends frames at its waits: {frames}");

    let res = tmp.join("range.qres");
    let out = quarry(&[
        "replay",
        t.to_str().unwrap(),
        "--gpu",
        "llvmpipe",
        "--frames",
        "3-5",
        "--compare",
        "--results",
        res.to_str().unwrap(),
    ]);
    let text = both(&out);
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

    let out = quarry(&["replay", t.to_str().unwrap(), "--frames", "2-999"]);
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    assert!(both(&out).contains("holds frames 0 to"), "{}", both(&out));
    let _ = std::fs::remove_dir_all(&tmp);
}
