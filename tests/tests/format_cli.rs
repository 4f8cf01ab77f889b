//! `quarry info` / `quarry dump` on good and damaged files, through the built binary.

use std::path::Path;
use std::process::Output;

use format::record::*;
use format::{TraceWriter, WriterOptions};
use quarry_tests::run_quarry;

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// CommandTable, 3 frames of 50 calls each + a Frame record, a query results record.
fn write_trace(path: &Path) {
    let header = Header {
        kind: FileKind::Trace,
        writer: "cli-test".into(),
        created_unix_ns: 1_700_000_000_000_000_000,
        device: Some(DeviceSummary {
            name: "llvmpipe".into(),
            vendor_id: 0x10005,
            ..Default::default()
        }),
        application: "cli".into(),
    };
    let opts = WriterOptions {
        block_size: 1024,
        ..Default::default()
    };
    let w = TraceWriter::create_with(path, header, opts).unwrap();
    w.write(&Record::CommandTable(vec![
        "vkCreateQueryPool".into(),
        "vkCmdDraw".into(),
    ]))
    .unwrap();
    let mut seq = 0;
    for f in 0..3u64 {
        for _ in 0..50 {
            let c = Call {
                seq,
                thread: 0,
                cmd: 1,
                host_ns: seq,
                result: 0,
                params: vec![7; 12],
            };
            w.write(&Record::Call(c)).unwrap();
            seq += 1;
        }
        let fr = Frame {
            index: f,
            last_seq: seq - 1,
            host_ns: seq,
            boundary: FrameBoundary::Present,
        };
        w.write(&Record::Frame(fr)).unwrap();
        w.end_frame(f).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn info_json_has_the_promised_keys() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.qtrace");
    write_trace(&p);
    let o = run_quarry(&["info", p.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "one JSON object on one line");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "trace");
    assert_eq!(v["format_version"], "2.0");
    assert_eq!(v["device"]["name"], "llvmpipe");
    assert_eq!(v["frames"], 3);
    assert_eq!(v["records"], 154);
    assert_eq!(v["record_counts"]["Call"], 150);
    assert_eq!(v["record_counts"]["CommandTable"], 1);
    assert_eq!(v["lost_bytes"], 0);
    assert_eq!(v["complete"], true);
    assert!(v["blocks"].as_u64().unwrap() >= 3);

    let o = run_quarry(&["info", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(text.contains("kind:         trace"), "{text}");
    assert!(text.contains("device:       llvmpipe"), "{text}");
    assert!(text.contains("complete:     yes"), "{text}");
    assert!(text.contains("2023-11-14 22:13:20 UTC"), "{text}");
}

#[test]
fn dump_prints_one_line_per_record_and_filters_frames() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.qtrace");
    write_trace(&p);
    let ps = p.to_str().unwrap();
    let o = run_quarry(&["dump", ps]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 154);
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("[0] Call seq=0 thread=0 name=vkCmdDraw cmd=1"),
        "{text}"
    );

    let o = run_quarry(&["dump", ps, "--json", "--frame", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 51);
    assert_eq!(lines[0]["type"], "Call");
    assert_eq!(lines[0]["seq"], 50);
    assert_eq!(
        lines[0]["name"], "vkCmdDraw",
        "the command table comes from frame 0"
    );
    assert_eq!(lines[0]["params_len"], 12);
    assert_eq!(lines[50]["type"], "Frame");
    assert_eq!(lines[50]["index"], 1);
    assert!(lines.iter().all(|l| l["frame"] == 1));
}

#[test]
fn damaged_files_give_one_line_errors_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let good = d.path().join("good.qtrace");
    write_trace(&good);
    let bytes = std::fs::read(&good).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "offset 0: empty file"),
        (
            "magic",
            b"PK\x03\x04 definitely a zip".to_vec(),
            "offset 0: not a quarry file (bad magic)",
        ),
        ("header", bytes[..20].to_vec(), "truncated file prefix"),
        (
            "version",
            {
                let mut b = bytes.clone();
                b[8] = 9;
                b
            },
            "offset 8: format version 9.0 is newer than this reader",
        ),
    ];
    for (name, content, expect) in cases {
        let p = d.path().join(name);
        std::fs::write(&p, &content).unwrap();
        for cmd in ["info", "dump"] {
            let o = run_quarry(&[cmd, p.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}");
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "{cmd} {name}: {err}");
            assert!(
                err.starts_with(&format!("quarry: {}: offset ", p.display())),
                "{err}"
            );
            assert!(err.contains(expect), "{cmd} {name}: {err}");
            assert!(stdout(&o).is_empty());
        }
    }
}

#[test]
fn truncated_and_corrupt_files_show_what_survived_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let good = d.path().join("good.qtrace");
    write_trace(&good);
    let bytes = std::fs::read(&good).unwrap();

    // Cut in the middle: complete blocks are shown, lost bytes reported.
    let cut = d.path().join("cut.qtrace");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let o = run_quarry(&["info", cut.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["complete"], false);
    assert!(v["lost_bytes"].as_u64().unwrap() > 0);
    let recovered = v["records"].as_u64().unwrap();
    assert!(recovered > 10 && recovered < 154, "{v}");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("truncated"), "{err}");
    let o = run_quarry(&["dump", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o).lines().count() as u64, recovered);

    // A flipped bit in a block payload: that block is reported, the others still print.
    let flip = d.path().join("flip.qtrace");
    let mut b = bytes.clone();
    b[400] ^= 0x20;
    std::fs::write(&flip, &b).unwrap();
    for cmd in ["info", "dump"] {
        let o = run_quarry(&[cmd, flip.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("checksum"), "{cmd}: {err}");
        assert!(!stdout(&o).is_empty());
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run_quarry(&["dump"]).status.code(), Some(2));
    assert_eq!(run_quarry(&["frobnicate"]).status.code(), Some(2));
    let o = run_quarry(&["info", "/nonexistent/file.qtrace"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot open"));
}
