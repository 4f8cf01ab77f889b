//! Damaged input: truncation at every byte, random mutations, crafted lengths, versions.
//! The reader must never panic, must report every change to a file (all bytes are checksummed),
//! and must recover exactly the complete blocks of a truncated file.
mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use format::layout::*;
use format::record::*;
use format::{TraceReader, TraceWriter, WriterOptions};
use proptest::prelude::*;

struct Sample {
    bytes: Vec<u8>,
    records: Vec<Record>,
    blob: (BlobId, Vec<u8>),
}

/// A real file with many small blocks, a blob and several frames.
fn sample() -> &'static Sample {
    static S: OnceLock<Sample> = OnceLock::new();
    S.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.qtrace");
        let opts = WriterOptions {
            block_size: 400,
            inline_threshold: 256,
            dictionary_bytes: 1500,
            ..Default::default()
        };
        let w = TraceWriter::create_with(&path, header(FileKind::Trace), opts).unwrap();
        let mut records = vec![command_table()];
        w.write(&records[0]).unwrap();
        let blob_data: Vec<u8> = (0..3000u32).map(|i| (i % 97) as u8).collect();
        let payload = w.payload(&blob_data).unwrap();
        let Payload::Blob { id, .. } = payload else {
            panic!("expected a blob")
        };
        let mw = Record::MemoryWrite(MemoryWrite {
            seq: 0,
            memory: 1,
            offset: 0,
            data: payload,
        });
        w.write(&mw).unwrap();
        records.push(mw);
        let mut seq = 1;
        for f in 0..3 {
            for _ in 0..60 {
                let r = call(seq, 1);
                w.write(&r).unwrap();
                records.push(r);
                seq += 1;
            }
            let r = frame(f, seq - 1);
            w.write(&r).unwrap();
            records.push(r);
            w.end_frame(f).unwrap();
        }
        w.finish().unwrap();
        Sample {
            bytes: std::fs::read(&path).unwrap(),
            records,
            blob: (id, blob_data),
        }
    })
}

struct Outcome {
    /// Opened, complete, no error anywhere, and the same content as the sample.
    clean: bool,
    open_error: Option<String>,
    records: Vec<Record>,
    record_errors: usize,
}

fn examine(path: &Path) -> Outcome {
    let s = sample();
    let r = match TraceReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "multi-line error: {msg}");
            assert!(
                msg.starts_with(&format!("{}: offset ", path.display())),
                "error lacks file/offset: {msg}"
            );
            return Outcome {
                clean: false,
                open_error: Some(msg),
                records: vec![],
                record_errors: 0,
            };
        }
    };
    let info = r.info();
    let mut records = Vec::new();
    let mut record_errors = 0;
    for rec in r.records() {
        match rec {
            Ok(rec) => records.push(rec),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    !msg.contains('\n') && msg.contains(": offset "),
                    "bad error: {msg}"
                );
                record_errors += 1;
            }
        }
    }
    let blob_ok = r.blob(s.blob.0).map(|b| b == s.blob.1).unwrap_or(false);
    let _ = r.frame_records(1).count();
    let clean = info.complete
        && info.lost_bytes == 0
        && record_errors == 0
        && blob_ok
        && r.header() == &header(FileKind::Trace)
        && records == s.records;
    Outcome {
        clean,
        open_error: None,
        records,
        record_errors,
    }
}

fn write_tmp(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn the_sample_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(dir.path(), "ok", &sample().bytes);
    assert!(examine(&p).clean);
}

/// Every truncation point: an error, or the records of the complete blocks, in order, and
/// nothing else; and never "complete".
#[test]
fn truncation_at_every_byte_recovers_a_prefix() {
    let s = sample();
    let dir = tempfile::tempdir().unwrap();
    let full = TraceReader::open(write_tmp(dir.path(), "full", &s.bytes)).unwrap();
    let body_start = full.blocks()[0].offset as usize;
    let mut best = 0;
    // Every byte of the prefix, header and each block header (where the parsing decisions
    // are), every 7th byte of payloads.
    let mut edges: Vec<usize> = full.blocks().iter().map(|b| b.offset as usize).collect();
    edges.push(s.bytes.len() - TRAILER_LEN);
    let near_edge = |len: usize| {
        edges
            .iter()
            .any(|&e| len + 2 >= e && len <= e + BLOCK_HEADER_LEN + 2)
    };
    let cuts =
        (0..s.bytes.len()).filter(|&len| len <= body_start + 2 || near_edge(len) || len % 7 == 0);
    for len in cuts {
        let p = write_tmp(dir.path(), "cut", &s.bytes[..len]);
        let o = examine(&p);
        assert!(!o.clean, "truncated to {len} looks complete");
        if len < body_start {
            assert!(o.open_error.is_some(), "header cut at {len} opened");
            continue;
        }
        let r = TraceReader::open(&p).unwrap();
        assert!(!r.has_footer());
        assert_eq!(o.record_errors, 0, "cut at {len}");
        assert_eq!(
            o.records[..],
            s.records[..o.records.len()],
            "cut at {len}: not a prefix"
        );
        // Every block that ends before the cut is recovered, and the lost bytes are exactly
        // what follows the last complete block.
        let complete: Vec<_> = full
            .blocks()
            .iter()
            .filter(|b| (b.offset + b.total_len()) as usize <= len)
            .collect();
        assert_eq!(r.blocks().len(), complete.len(), "cut at {len}");
        let mut end = complete
            .last()
            .map(|b| (b.offset + b.total_len()) as usize)
            .unwrap_or(body_start);
        // A complete footer index block is not data, but not lost either.
        let index_end = s.bytes.len() - TRAILER_LEN;
        if len >= index_end {
            end = index_end;
        }
        assert_eq!(r.info().lost_bytes as usize, len - end, "cut at {len}");
        assert!(
            o.records.len() >= best,
            "recovered fewer records from a longer file"
        );
        best = o.records.len();
    }
    assert_eq!(
        best,
        s.records.len(),
        "a file cut just before its footer still holds every record"
    );
}

#[test]
fn empty_file_and_wrong_magic() {
    let dir = tempfile::tempdir().unwrap();
    let e = TraceReader::open(write_tmp(dir.path(), "empty", b"")).unwrap_err();
    assert!(e.to_string().ends_with("offset 0: empty file"), "{e}");
    let e = TraceReader::open(write_tmp(
        dir.path(),
        "txt",
        b"hello world, this is not a trace at all",
    ))
    .unwrap_err();
    assert!(
        e.to_string()
            .ends_with("offset 0: not a quarry file (bad magic)"),
        "{e}"
    );
    let e = TraceReader::open(dir.path().join("missing")).unwrap_err();
    assert!(e.to_string().contains("cannot open"), "{e}");
}

#[test]
fn newer_major_is_refused_and_newer_minor_is_read() {
    let s = sample();
    let dir = tempfile::tempdir().unwrap();
    let mut b = s.bytes.clone();
    b[8..10].copy_from_slice(&(VERSION_MAJOR + 1).to_le_bytes());
    let e = TraceReader::open(write_tmp(dir.path(), "v3", &b)).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "offset 8: format version {}.{VERSION_MINOR} is newer than this reader",
            VERSION_MAJOR + 1
        )),
        "{e}"
    );
    // A newer minor with a correct checksum reads normally.
    let mut b = s.bytes.clone();
    b[10..12].copy_from_slice(&7u16.to_le_bytes());
    let hlen = u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    let sum = prefix_checksum(&b[..24], &b[PREFIX_LEN..PREFIX_LEN + hlen]);
    b[24..32].copy_from_slice(&sum.to_le_bytes());
    let r = TraceReader::open(write_tmp(dir.path(), "v2.7", &b)).unwrap();
    assert_eq!(r.format_version(), (VERSION_MAJOR, 7));
    assert_eq!(r.records().count(), s.records.len());
}

/// A block header re-sealed with a valid checksum but absurd lengths: refused before any
/// allocation, without panicking, in both footer and scan mode.
#[test]
fn absurd_lengths_are_refused() {
    let s = sample();
    let dir = tempfile::tempdir().unwrap();
    let full = TraceReader::open(write_tmp(dir.path(), "full", &s.bytes)).unwrap();
    let b0 = full.blocks()[0];
    let at = b0.offset as usize;
    let no_footer_len = {
        let last = full.blocks().last().unwrap();
        (last.offset + last.total_len()) as usize
    };
    for (ulen, stored) in [
        (1u64 << 40, b0.stored_len),
        (1 << 31, b0.stored_len),
        (b0.uncompressed_len, u64::MAX - 10),
        (b0.uncompressed_len, 1 << 40),
        (u64::MAX, u64::MAX),
    ] {
        let mut h = BlockHeader::parse(&s.bytes[at..]).unwrap();
        h.uncompressed_len = ulen;
        h.stored_len = stored;
        let mut b = s.bytes.clone();
        b[at..at + BLOCK_HEADER_LEN].copy_from_slice(&h.encode());
        for bytes in [&b[..], &b[..no_footer_len]] {
            let p = write_tmp(dir.path(), "absurd", bytes);
            let o = examine(&p);
            assert!(!o.clean);
            if o.open_error.is_none() {
                let r = TraceReader::open(&p).unwrap();
                assert!(!r.info().complete);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any single changed byte is detected.
    #[test]
    fn any_flipped_byte_is_detected(pos in 0usize..100_000, xor in 1u8..=255) {
        let s = sample();
        let pos = pos % s.bytes.len();
        let mut b = s.bytes.clone();
        b[pos] ^= xor;
        let dir = tempfile::tempdir().unwrap();
        let o = examine(&write_tmp(dir.path(), "flip", &b));
        prop_assert!(!o.clean, "flip at {} went unnoticed", pos);
    }

    /// Several changes plus an optional cut: never a panic, errors are one line with an offset.
    #[test]
    fn random_damage_never_panics(
        edits in proptest::collection::vec((0usize..100_000, any::<u8>()), 1..12),
        cut in proptest::option::of(0usize..100_000),
    ) {
        let s = sample();
        let mut b = s.bytes.clone();
        for (pos, v) in edits {
            let pos = pos % b.len();
            b[pos] = v;
        }
        if let Some(c) = cut {
            b.truncate(c % (b.len() + 1));
        }
        let dir = tempfile::tempdir().unwrap();
        let o = examine(&write_tmp(dir.path(), "dmg", &b));
        if b != s.bytes {
            prop_assert!(!o.clean);
        }
    }
}
