mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use format::record::*;
use format::{TraceReader, TraceWriter, WriterOptions};

fn small_blocks() -> WriterOptions {
    WriterOptions {
        block_size: 2048,
        ..Default::default()
    }
}

#[test]
fn records_round_trip_in_order_with_frames_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.qtrace");
    let w = TraceWriter::create_with(&path, header(FileKind::Trace), small_blocks()).unwrap();
    let mut expected = vec![command_table()];
    w.write(&expected[0]).unwrap();
    let mut seq = 0;
    for f in 0..5u64 {
        for _ in 0..200 {
            let r = call(seq, 0);
            w.write(&r).unwrap();
            expected.push(r);
            seq += 1;
        }
        let r = frame(f, seq - 1);
        w.write(&r).unwrap();
        expected.push(r);
        w.end_frame(f).unwrap();
    }
    let s = w.finish().unwrap();
    assert_eq!(s.records, expected.len() as u64);
    assert_eq!(s.frames, 5);
    assert!(s.blocks > 5, "small blocks must split frames: {s:?}");
    assert_eq!(s.file_bytes, std::fs::metadata(&path).unwrap().len());

    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.header(), &header(FileKind::Trace));
    assert!(r.has_footer());
    let got: Vec<Record> = r.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, expected);

    let info = r.info();
    assert!(info.complete && info.from_footer, "{info:?}");
    assert_eq!(info.lost_bytes, 0);
    assert_eq!(info.records, expected.len() as u64);
    assert_eq!(info.frames, 5);
    assert_eq!(info.record_counts.get("Call"), Some(&1000));
    assert_eq!(info.record_counts.get("CommandTable"), Some(&1));
    assert!(info.compressed_bytes < info.uncompressed_bytes);

    // Frame 3 = calls 600..800 and its Frame record, nothing else.
    let f3: Vec<Record> = r.frame_records(3).collect::<Result<_, _>>().unwrap();
    assert_eq!(f3.len(), 201);
    assert_eq!(f3[0], call(600, 0));
    assert_eq!(f3[200], frame(3, 799));
    let from3: Vec<Record> = r.records_from_frame(3).collect::<Result<_, _>>().unwrap();
    assert_eq!(from3.len(), 402);
    assert_eq!(
        r.command_table().unwrap(),
        Some((0..7).map(|i| format!("vkCmd{i}")).collect())
    );
}

#[test]
fn many_threads_keep_per_thread_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mt.qtrace");
    let w =
        Arc::new(TraceWriter::create_with(&path, header(FileKind::Trace), small_blocks()).unwrap());
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || {
                for i in 0..3000u64 {
                    w.write(&call(i, t)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let w = Arc::into_inner(w).unwrap();
    w.finish().unwrap();
    let r = TraceReader::open(&path).unwrap();
    let mut next = [0u64; 4];
    for rec in r.records() {
        match rec.unwrap() {
            Record::Call(c) => {
                assert_eq!(
                    c.seq, next[c.thread as usize],
                    "thread {} out of order",
                    c.thread
                );
                next[c.thread as usize] += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(next, [3000; 4]);
}

#[test]
fn blobs_are_deduplicated_and_payloads_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.qtrace");
    let w = TraceWriter::create(&path, header(FileKind::Trace)).unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let other: Vec<u8> = (0..50_000u32).map(|i| (i % 13) as u8).collect();
    let a = w.blob(&big).unwrap();
    let b = w.blob(&big).unwrap();
    let c = w.blob(&other).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    let small = w.payload(&[1, 2, 3]).unwrap();
    assert_eq!(small, Payload::Inline(vec![1, 2, 3]));
    let large = w.payload(&big).unwrap();
    assert_eq!(
        large,
        Payload::Blob {
            id: a,
            len: big.len() as u64
        }
    );
    let mw = Record::MemoryWrite(MemoryWrite {
        seq: 1,
        memory: 0xabc,
        offset: 64,
        data: large.clone(),
    });
    w.write(&mw).unwrap();
    let s = w.finish().unwrap();
    assert_eq!(s.blobs, 2);
    assert_eq!(s.blob_dedup_hits, 2);

    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.blob(a).unwrap(), big);
    assert_eq!(r.blob(c).unwrap(), other);
    assert!(r.blob(BlobId(99)).is_err());
    let recs: Vec<Record> = r.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(recs, vec![mw]);
    assert_eq!(r.payload_bytes(&large).unwrap(), big);
    assert_eq!(r.payload_bytes(&small).unwrap(), vec![1, 2, 3]);
    assert!(r.payload_bytes(&Payload::Blob { id: a, len: 5 }).is_err());
    assert_eq!(r.info().blob_blocks, 2);
}

#[test]
fn results_files_use_the_same_container() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.qresults");
    let w = TraceWriter::create(&path, header(FileKind::Results)).unwrap();
    let rec = Record::Note(Note {
        host_ns: 5,
        message: "hello".into(),
    });
    w.write(&rec).unwrap();
    w.finish().unwrap();
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.kind(), FileKind::Results);
    assert_eq!(r.records().next().unwrap().unwrap(), rec);
}

/// While the writer is still open, a reader must see a frame's records right after
/// `end_frame`, and a lone record within about 100 ms without any frame boundary.
#[test]
fn blocks_reach_the_file_at_frame_end_and_on_the_timer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.qtrace");
    let w = TraceWriter::create(&path, header(FileKind::Trace)).unwrap();
    w.write(&call(0, 0)).unwrap();
    w.write(&frame(0, 0)).unwrap();
    w.end_frame(0).unwrap();
    let visible = |n: usize| {
        TraceReader::open(&path)
            .map(|r| r.records().filter_map(Result::ok).count() >= n)
            .unwrap_or(false)
    };
    let wait_until = |n: usize, limit: Duration| {
        let t = Instant::now();
        while t.elapsed() < limit {
            if visible(n) {
                return Some(t.elapsed());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        None
    };
    assert!(
        wait_until(2, Duration::from_millis(50)).is_some(),
        "frame end did not reach the file"
    );
    w.write(&call(1, 0)).unwrap();
    let t = wait_until(3, Duration::from_millis(400)).expect("timer never sealed the block");
    // 100 ms is the promise; the slack is for a loaded 2-core CI machine.
    assert!(t <= Duration::from_millis(250), "timer seal took {t:?}");
    // Right after a write the block is still open: the timer, not the write, seals it.
    let before = Instant::now();
    w.write(&call(2, 0)).unwrap();
    let seen = visible(4);
    assert!(
        !seen || before.elapsed() >= Duration::from_millis(40),
        "sealed without a reason"
    );
    w.flush().unwrap();
    assert!(visible(4));
    w.finish().unwrap();
}

#[test]
fn unknown_block_kinds_are_skipped() {
    use format::layout::*;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.qtrace");
    let w = TraceWriter::create(&path, header(FileKind::Trace)).unwrap();
    w.write(&call(0, 0)).unwrap();
    w.flush().unwrap();
    w.finish().unwrap();
    // Rewrite the file without its footer and with a block of kind 99 in the middle, as a newer
    // minor version might write, then the first block again, numbered after it (block 2).
    let bytes = std::fs::read(&path).unwrap();
    let r = TraceReader::open(&path).unwrap();
    let first = r.blocks()[0];
    let end = (first.offset + first.total_len()) as usize;
    let payload = b"from the future";
    let h = BlockHeader {
        kind: BlockKind::Unknown(99),
        codec: CODEC_STORED,
        dict: 0,
        records: 0,
        aux: 0,
        uncompressed_len: payload.len() as u64,
        stored_len: payload.len() as u64,
        payload_checksum: payload_checksum(payload),
        seq: 1,
    };
    let mut out = bytes[..end].to_vec();
    out.extend_from_slice(&h.encode());
    out.extend_from_slice(payload);
    let mut again = BlockHeader::parse(&bytes[first.offset as usize..]).unwrap();
    again.seq = 2;
    out.extend_from_slice(&again.encode());
    out.extend_from_slice(&bytes[first.offset as usize + BLOCK_HEADER_LEN..end]);
    std::fs::write(&path, &out).unwrap();
    let r = TraceReader::open(&path).unwrap();
    let recs: Vec<Record> = r.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(recs, vec![call(0, 0), call(0, 0)]);
    let info = r.info();
    assert_eq!(info.lost_bytes, 0);
    assert_eq!(info.blocks, 3);
}

/// Blocks sealed at small frames compress with the shared dictionary, and still read back.
#[test]
fn dictionary_shrinks_small_frame_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, dictionary_bytes: usize| {
        let path = dir.path().join(name);
        let opts = WriterOptions {
            dictionary_bytes,
            ..Default::default()
        };
        let w = TraceWriter::create_with(&path, header(FileKind::Trace), opts).unwrap();
        let mut expected = Vec::new();
        let mut seq = 0;
        for f in 0..3000u64 {
            for _ in 0..6 {
                let r = call(seq, 0);
                w.write(&r).unwrap();
                expected.push(r);
                seq += 1;
            }
            w.end_frame(f).unwrap();
        }
        let s = w.finish().unwrap();
        let r = TraceReader::open(&path).unwrap();
        let got: Vec<Record> = r.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(got, expected);
        assert_eq!(r.frame_records(2999).count(), 6);
        s.compressed_bytes
    };
    let plain = write("plain.qtrace", 0);
    let with_dict = write("dict.qtrace", 16 << 10);
    assert!(
        (with_dict as f64) < plain as f64 * 0.85,
        "dictionary: {with_dict} bytes, none: {plain} bytes"
    );
}

#[test]
fn writer_and_reader_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<TraceWriter>();
    shared::<TraceReader>();
}

/// Blocks decode independently: decoding them in any order, on several threads, gives the
/// same records as one pass from the start.
#[test]
fn blocks_decode_independently_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.qtrace");
    let w = TraceWriter::create_with(&path, header(FileKind::Trace), small_blocks()).unwrap();
    for i in 0..5000 {
        w.write(&call(i, 0)).unwrap();
        if i % 700 == 699 {
            w.end_frame(i / 700).unwrap();
        }
    }
    w.finish().unwrap();
    let r = TraceReader::open(&path).unwrap();
    let sequential: Vec<Record> = r.records().collect::<Result<_, _>>().unwrap();
    let ids: Vec<usize> = (0..r.blocks().len())
        .filter(|&i| r.blocks()[i].kind == 1)
        .collect();
    assert!(ids.len() > 10);
    let halves: Vec<Vec<(usize, Vec<Record>)>> = std::thread::scope(|s| {
        let r = &r;
        let handles: Vec<_> = [0, 1]
            .map(|par| {
                let ids = ids.clone();
                s.spawn(move || {
                    ids.iter()
                        .rev()
                        .filter(|i| *i % 2 == par)
                        .map(|&i| (i, r.block_records(i).unwrap()))
                        .collect()
                })
            })
            .into_iter()
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut blocks: Vec<(usize, Vec<Record>)> = halves.into_iter().flatten().collect();
    blocks.sort_by_key(|(i, _)| *i);
    let parallel: Vec<Record> = blocks.into_iter().flat_map(|(_, v)| v).collect();
    assert_eq!(parallel, sequential);
}

/// A sink that accepts `room` bytes, then fails like a full disk.
struct FullDisk {
    room: usize,
}

impl std::io::Write for FullDisk {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        let n = b.len().min(self.room);
        self.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A full disk is reported by the calls that follow, and finish, without panicking.
#[test]
fn io_errors_are_returned_not_panicked() {
    let w = TraceWriter::create_on(
        FullDisk { room: 3000 },
        "full.qtrace",
        header(FileKind::Trace),
        small_blocks(),
    )
    .unwrap();
    let mut first_error = None;
    for i in 0..1_000_000 {
        // flush() waits for the output thread, so the failure surfaces however busy the
        // machine is.
        let r = if i % 1000 == 999 {
            w.flush()
        } else {
            w.write(&call(i, 0))
        };
        if let Err(e) = r {
            first_error = Some(e);
            break;
        }
    }
    let e = first_error.expect("writes never failed on a full disk");
    let msg = e.to_string();
    assert!(msg.starts_with("full.qtrace: offset "), "{msg}");
    assert!(msg.contains("cannot write block"), "{msg}");
    assert!(w.flush().is_err());
    assert!(w.blob(&[1; 100_000]).is_err());
    assert!(w.finish().is_err());

    // A header that does not fit fails at creation.
    let e = TraceWriter::create_on(
        FullDisk { room: 10 },
        "tiny",
        header(FileKind::Trace),
        WriterOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot write header"), "{e}");
}
