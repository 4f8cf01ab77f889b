//! `TraceReader::records_parallel` yields exactly what `records()` yields, block by block, on good
//! and damaged files, whatever the thread count.

mod common;

use common::*;
use format::record::*;
use format::{TraceReader, TraceWriter, WriterOptions};

fn query_result(i: u64) -> Record {
    Record::QueryResult(QueryResult {
        pool: 0x1000 + i % 3,
        query: (i % 64) as u32,
        query_type: (i % 3) as i32,
        pipeline_statistics: 0,
        frame: i / 50,
        queue: 0xa0,
        command_buffer: 0xc0 + i % 5,
        loop_index: 0,
        pass: (i % 2) as u32,
        seq: 100 + i,
        flags: 3,
        captured: Some(QueryValues {
            values: vec![i * 1_000_003, i],
            available: !i.is_multiple_of(7),
            result: if i.is_multiple_of(11) { 1 } else { 0 },
            host_ns: 1_000_000 + i * 17,
        }),
        replayed: (!i.is_multiple_of(5)).then(|| QueryValues {
            values: vec![i * 1_000_003 + u64::from(i.is_multiple_of(13))],
            available: true,
            result: 0,
            host_ns: 2_000_000 + i * 19,
        }),
        submit_ns: 3_000_000 + i,
        available_ns: 4_000_000 + i,
        captured_gpu_ns: (i % 3 == 1).then_some(i as f64 * 1.5),
        replayed_gpu_ns: None,
        begin: None,
        device: None,
    })
}

/// A results file of 20,000 records (mixed with frames and counters) in ~4 KiB blocks.
fn write(path: &std::path::Path) -> Vec<Record> {
    let opts = WriterOptions {
        block_size: 4096,
        ..Default::default()
    };
    let w = TraceWriter::create_with(path, header(FileKind::Results), opts).unwrap();
    let mut all = Vec::new();
    for i in 0..20_000u64 {
        let r = query_result(i);
        w.write(&r).unwrap();
        all.push(r);
        if i % 1000 == 999 {
            let f = frame(i / 1000, i);
            w.write(&f).unwrap();
            all.push(f);
        }
    }
    w.finish().unwrap();
    all
}

/// Records (as Debug text, errors as their message) from `records()`.
fn sequential(r: &TraceReader) -> Vec<String> {
    r.records()
        .map(|x| match x {
            Ok(r) => format!("{r:?}"),
            Err(e) => format!("error: {e}"),
        })
        .collect()
}

fn parallel(r: &TraceReader, threads: usize) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    let mut blocks = 0;
    let mut last_offset = None;
    r.records_parallel(threads, |b| {
        assert!(last_offset < Some(b.offset), "blocks come in file order");
        last_offset = Some(b.offset);
        blocks += 1;
        out.extend(b.records.into_iter().map(|x| match x {
            Ok(r) => format!("{r:?}"),
            Err(e) => format!("error: {e}"),
        }));
    });
    (out, blocks)
}

#[test]
fn parallel_matches_sequential_on_a_good_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.qres");
    let written = write(&path);
    let r = TraceReader::open(&path).unwrap();
    let seq = sequential(&r);
    assert_eq!(seq.len(), written.len());
    assert_eq!(seq[12_345], format!("{:?}", written[12_345]));
    let record_blocks = r
        .blocks()
        .iter()
        .filter(|b| b.kind() == format::layout::BlockKind::Records)
        .count();
    assert!(record_blocks > 50, "{record_blocks} blocks");
    for threads in [0, 1, 2, 3, 8] {
        let (par, blocks) = parallel(&r, threads);
        assert_eq!(blocks, record_blocks, "threads {threads}");
        assert!(par == seq, "threads {threads}: records differ");
    }
}

#[test]
fn parallel_matches_sequential_on_a_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.qres");
    write(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    // Damage the payload of a few blocks in the middle (checksums catch it) and cut the end.
    let r = TraceReader::open(&path).unwrap();
    let offsets: Vec<u64> = r.blocks().iter().map(|b| b.offset).collect();
    drop(r);
    for &k in &[5usize, 6, 40] {
        let at = offsets[k] as usize + 60;
        bytes[at] ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let r = TraceReader::open(&path).unwrap();
    assert!(r.has_footer());
    let seq = sequential(&r);
    let errors = seq.iter().filter(|s| s.starts_with("error")).count();
    assert!(errors >= 3, "{errors} errors");
    for threads in [1, 2, 4] {
        let (par, _) = parallel(&r, threads);
        assert!(par == seq, "threads {threads}: records differ");
    }
    // Cut short as well: no footer, blocks found by scanning.
    bytes.truncate(bytes.len() * 3 / 4);
    std::fs::write(&path, &bytes).unwrap();
    let r = TraceReader::open(&path).unwrap();
    assert!(!r.has_footer());
    let seq = sequential(&r);
    assert!(seq.len() > 5000);
    for threads in [1, 2, 4] {
        let (par, _) = parallel(&r, threads);
        assert!(par == seq, "threads {threads}: records differ (no footer)");
    }
}

#[test]
fn a_panicking_sink_does_not_hang_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.qres");
    write(&path);
    let r = TraceReader::open(&path).unwrap();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut n = 0;
        r.records_parallel(2, |_| {
            n += 1;
            if n == 3 {
                panic!("sink gave up");
            }
        });
    }));
    assert!(res.is_err());
}
