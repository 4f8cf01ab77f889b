//! A writer process killed with SIGKILL mid-stream: every block it had flushed is read back.
//!
//! The test re-runs its own binary as the child (selected by an environment variable), so no
//! extra executable is needed.
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::*;
use format::record::*;
use format::{TraceReader, TraceWriter, WriterOptions};

const CHILD_ENV: &str = "QUARRY_FORMAT_KILL_CHILD";

/// The child: writes calls forever, ending a frame every 100 and flushing every 2000; after each
/// flush it reports how many records are certainly in the file.
#[test]
fn kill_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let opts = WriterOptions {
        block_size: 16 << 10,
        ..Default::default()
    };
    let w = TraceWriter::create_with(&path, header(FileKind::Trace), opts).unwrap();
    w.write(&command_table()).unwrap();
    let mut out = std::io::stdout();
    let mut written = 1u64;
    for seq in 0u64.. {
        w.write(&call(seq, 0)).unwrap();
        written += 1;
        if seq % 100 == 99 {
            w.write(&frame(seq / 100, seq)).unwrap();
            written += 1;
            w.end_frame(seq / 100).unwrap();
        }
        if seq % 2000 == 1999 {
            w.flush().unwrap();
            writeln!(out, "QUARRY-FLUSHED {written}").unwrap();
            out.flush().unwrap();
        }
    }
}

#[test]
fn sigkill_mid_stream_keeps_every_complete_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.qtrace");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["kill_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut flushed = 0u64;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while flushed < 60_000 {
        let line = lines.next().expect("child ended early").unwrap();
        if let Some(n) = line.strip_prefix("QUARRY-FLUSHED ") {
            flushed = n.parse().unwrap();
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();

    let r = TraceReader::open(&path).unwrap();
    assert!(!r.has_footer());
    let info = r.info();
    assert!(!info.complete);
    // At most the blocks in flight are lost: a few 16 KiB blocks, never the flushed part.
    assert!(info.lost_bytes < 1 << 20, "lost {} bytes", info.lost_bytes);
    assert!(
        info.damage.iter().all(|d| d.problem.contains("truncated")),
        "{:?}",
        info.damage
    );

    let mut records = r.records();
    assert_eq!(records.next().unwrap().unwrap(), command_table());
    let mut count = 1u64;
    let mut seq = 0u64;
    for rec in records {
        match rec.unwrap() {
            Record::Call(c) => {
                assert_eq!(
                    c,
                    match call(seq, 0) {
                        Record::Call(c) => c,
                        _ => unreachable!(),
                    }
                );
                seq += 1;
            }
            Record::Frame(f) => assert_eq!(f.last_seq + 1, seq),
            other => panic!("unexpected {other:?}"),
        }
        count += 1;
    }
    assert!(
        count >= flushed,
        "read {count} records, the child had flushed {flushed}"
    );
    assert_eq!(count, info.records);
    // Frames end on block boundaries, so every recovered frame is whole.
    let last_frame = (seq / 100).saturating_sub(1);
    assert_eq!(
        r.frame_records(last_frame).filter_map(Result::ok).count(),
        101
    );
}
