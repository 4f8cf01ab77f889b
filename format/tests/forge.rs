//! Damage that every checksum lets through, forged from a file written by `TraceWriter`:
//! duplicated, deleted and reordered blocks, absurd declared sizes, index entries that lie.
//! The reader reports each (what, where) and reads what is intact in the writer's order.
mod common;

use std::path::{Path, PathBuf};

use common::*;
use format::forge::Forge;
use format::layout::*;
use format::record::*;
use format::{check_results, ResultsCheck, TraceReader, TraceWriter, WriterOptions};

/// Three frames, each in its own records block (or more), a blob, a dictionary.
fn write_sample(path: &Path) -> Vec<Record> {
    let opts = WriterOptions {
        block_size: 600,
        inline_threshold: 256,
        dictionary_bytes: 1000,
        ..Default::default()
    };
    let w = TraceWriter::create_with(path, header(FileKind::Trace), opts).unwrap();
    let mut records = vec![command_table()];
    w.write(&records[0]).unwrap();
    let payload = w.payload(&[5u8; 3000]).unwrap();
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
        for _ in 0..40 {
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
    records
}

struct Case {
    _dir: tempfile::TempDir,
    path: PathBuf,
    bytes: Vec<u8>,
    records: Vec<Record>,
}

fn case() -> Case {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.qtrace");
    let records = write_sample(&path);
    Case {
        bytes: std::fs::read(&path).unwrap(),
        path,
        records,
        _dir: dir,
    }
}

fn open(c: &Case, name: &str, bytes: &[u8]) -> TraceReader {
    let p = c.path.with_file_name(name);
    std::fs::write(&p, bytes).unwrap();
    TraceReader::open(&p).unwrap()
}

fn records(r: &TraceReader) -> Vec<Record> {
    r.records().collect::<Result<_, _>>().unwrap()
}

fn problems(r: &TraceReader) -> String {
    let info = r.info();
    info.damage
        .iter()
        .map(|d| format!("@{} +{}: {}", d.offset, d.len, d.problem))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The records of the records blocks at these positions of the forge.
fn records_of(c: &Case, f: &Forge, blocks: &[usize]) -> usize {
    let r = TraceReader::open(&c.path).unwrap();
    let off = |i: usize| {
        // Offsets in the intact file, where the forge's blocks came from.
        let mut at = f.head.len() as u64;
        for b in &f.blocks[..i] {
            at += b.header.total_len();
        }
        at
    };
    blocks
        .iter()
        .map(|&i| {
            let k = r.blocks().iter().position(|b| b.offset == off(i)).unwrap();
            r.block_records(k).unwrap().len()
        })
        .sum()
}

#[test]
fn a_forge_that_changes_nothing_gives_the_same_bytes() {
    let c = case();
    let f = Forge::parse(&c.bytes);
    assert!(f.blocks.len() >= 5, "{} blocks", f.blocks.len());
    assert_eq!(f.bytes_with_index(|_| {}), c.bytes);
}

#[test]
fn a_writer_killed_between_blocks_is_recovered_without_damage() {
    let c = case();
    let r = open(&c, "killed", &Forge::parse(&c.bytes).bytes());
    assert!(!r.has_footer());
    assert!(r.damage().is_empty(), "{}", problems(&r));
    let info = r.info();
    assert_eq!(info.lost_bytes, 0);
    assert!(info.damage.is_empty());
    assert!(!info.complete);
    assert!(info.recovered());
    assert!(r
        .open_problems()
        .unwrap()
        .contains("blocks it wrote are intact"));
    assert_eq!(records(&r), c.records);
    assert_eq!(TraceReader::open(&c.path).unwrap().open_problems(), None);
}

#[test]
fn duplicated_blocks_are_reported_and_read_once() {
    let c = case();
    let mut f = Forge::parse(&c.bytes);
    let recs = f.of_kind(BlockKind::Records);
    f.duplicate(recs[1]);
    for (name, bytes) in [
        ("dup", f.bytes()),
        ("dup-indexed", f.bytes_with_index(|_| {})),
    ] {
        let r = open(&c, name, &bytes);
        assert!(!r.has_footer(), "{name}");
        let p = problems(&r);
        assert!(p.contains("repeats the block at offset"), "{name}: {p}");
        assert!(r.open_problems().unwrap().contains("repeats the block"));
        assert!(!r.info().complete && !r.info().recovered());
        assert!(r.info().lost_bytes > 0);
        assert_eq!(records(&r), c.records, "{name}");
    }
}

#[test]
fn deleted_blocks_are_reported_as_missing() {
    let c = case();
    let mut f = Forge::parse(&c.bytes);
    let recs = f.of_kind(BlockKind::Records);
    let gone = records_of(&c, &f, &[recs[2]]);
    let seq = f.blocks[recs[2]].header.seq;
    f.delete(recs[2]);
    for (name, bytes) in [
        ("del", f.bytes()),
        ("del-indexed", f.bytes_with_index(|_| {})),
    ] {
        let r = open(&c, name, &bytes);
        let p = problems(&r);
        assert!(
            p.contains(&format!("block {seq} is missing")),
            "{name}: {p}"
        );
        assert!(!r.info().complete && !r.info().recovered());
        assert_eq!(records(&r).len(), c.records.len() - gone, "{name}");
    }
    // The last data block: only the index block's number tells.
    let mut f = Forge::parse(&c.bytes);
    let last = f.blocks.len() - 1;
    f.delete(last);
    let r = open(&c, "del-last", &f.bytes_with_index(|_| {}));
    assert!(problems(&r).contains("is missing"), "{}", problems(&r));
}

#[test]
fn reordered_blocks_are_reported_and_read_in_the_writers_order() {
    let c = case();
    let mut f = Forge::parse(&c.bytes);
    let recs = f.of_kind(BlockKind::Records);
    f.swap(recs[1], recs[3]);
    for (name, bytes) in [
        ("swap", f.bytes()),
        ("swap-indexed", f.bytes_with_index(|_| {})),
    ] {
        let r = open(&c, name, &bytes);
        let p = problems(&r);
        assert!(p.contains("out of order"), "{name}: {p}");
        assert_eq!(r.info().lost_bytes, 0);
        assert!(!r.info().complete && !r.info().recovered());
        assert_eq!(records(&r), c.records, "{name}");
    }
    // Renumbered to match the new order, the file is consistent: nothing to report, and the
    // records come in the order the forger chose (checksums cannot tell).
    f.renumber();
    let r = open(&c, "swap-renumbered", &f.bytes_with_index(|_| {}));
    assert!(r.has_footer() && r.damage().is_empty(), "{}", problems(&r));
}

#[test]
fn a_huge_declared_size_is_refused_before_allocating() {
    let c = case();
    let f0 = Forge::parse(&c.bytes);
    let recs = f0.of_kind(BlockKind::Records);
    for ulen in [MAX_BLOCK_LEN + 1, u32::MAX as u64] {
        for i in [recs[0], f0.of_kind(BlockKind::Blob)[0]] {
            let mut f = f0.clone();
            f.edit(i, |h| h.uncompressed_len = ulen);
            for (name, bytes) in [
                ("huge", f.bytes()),
                ("huge-indexed", f.bytes_with_index(|_| {})),
            ] {
                let r = open(&c, name, &bytes);
                let p = problems(&r);
                assert!(
                    p.contains("more than the format's limit"),
                    "{name} {ulen}: {p}"
                );
                assert!(!r.info().complete);
                // The block is left out: nothing reads it.
                assert_eq!(r.blocks().len(), f.blocks.len() - 1);
            }
        }
    }
}

#[test]
fn a_forged_index_entry_is_reported_and_the_block_still_read() {
    let c = case();
    let f = Forge::parse(&c.bytes);
    let recs = f.of_kind(BlockKind::Records);
    let k = recs[recs.len() - 1];
    // Hidden as an unknown kind, or moved to another frame: either would drop a frame.
    let hide = f.bytes_with_index(|ix| ix.blocks[k].kind = 99);
    let move_frame = f.bytes_with_index(|ix| ix.blocks[k].aux += 7);
    let shrink = f.bytes_with_index(|ix| ix.blocks[k].records -= 1);
    for (name, bytes) in [("hide", hide), ("move", move_frame), ("shrink", shrink)] {
        let r = open(&c, name, &bytes);
        assert!(!r.has_footer(), "{name}");
        let p = problems(&r);
        assert!(
            p.contains("the footer index disagrees with the file"),
            "{name}: {p}"
        );
        assert!(!r.info().complete && !r.info().recovered());
        assert_eq!(r.info().lost_bytes, 0);
        assert_eq!(records(&r), c.records, "{name}");
        assert_eq!(r.frame_records(2).count(), 41, "{name}");
    }
}

/// Format 1.x files (no block numbers, 8-byte uncompressed lengths) are still read.
#[test]
fn format_1_files_are_read() {
    use xxhash_rust::xxh3::xxh3_64;
    let c = case();
    let f = Forge::parse(&c.bytes);
    let v1_header = |h: &BlockHeader| {
        let mut b = h.encode();
        b[24..32].copy_from_slice(&h.uncompressed_len.to_le_bytes());
        b[12..16].fill(0);
        let sum = xxh3_64(&b) as u32;
        b[12..16].copy_from_slice(&sum.to_le_bytes());
        b
    };
    let mut out = f.head.clone();
    out[8..12].copy_from_slice(&[1, 0, 1, 0]);
    let hlen = f.head.len() - PREFIX_LEN;
    let sum = prefix_checksum(&out[..24], &out[PREFIX_LEN..PREFIX_LEN + hlen]);
    out[24..32].copy_from_slice(&sum.to_le_bytes());
    for b in &f.blocks {
        out.extend_from_slice(&v1_header(&b.header));
        out.extend_from_slice(&b.payload);
    }
    let index_at = out.len() as u64;
    let with_index = f.bytes_with_index(|_| {});
    let ib = &with_index[index_at as usize..with_index.len() - TRAILER_LEN];
    let ih = BlockHeader::parse(ib).unwrap();
    out.extend_from_slice(&v1_header(&ih));
    out.extend_from_slice(&ib[BLOCK_HEADER_LEN..]);
    out.extend_from_slice(&encode_trailer(index_at, ib.len() as u64));
    let r = open(&c, "v1", &out);
    assert_eq!(r.format_version(), (1, 1));
    assert!(r.has_footer() && r.damage().is_empty(), "{}", problems(&r));
    assert!(r.info().complete);
    assert_eq!(records(&r), c.records);
    // Without its footer too.
    let r = open(&c, "v1-killed", &out[..index_at as usize]);
    assert!(r.damage().is_empty(), "{}", problems(&r));
    assert_eq!(records(&r), c.records);
}

#[test]
fn trace_identity_names_the_content_and_results_are_checked_against_it() {
    let c = case();
    let trace = TraceReader::open(&c.path).unwrap();
    let id = trace.identity();
    // The same content without footer has the same identity; other content another one.
    assert_eq!(
        open(&c, "nofooter", &Forge::parse(&c.bytes).bytes()).identity(),
        id
    );
    let other_path = c.path.with_file_name("other.qtrace");
    let w = TraceWriter::create(&other_path, header(FileKind::Trace)).unwrap();
    w.write(&call(1, 1)).unwrap();
    w.finish().unwrap();
    let other = TraceReader::open(&other_path).unwrap();
    assert_ne!(other.identity(), id);

    let results = |name: &str, first: Option<Record>| {
        let p = c.path.with_file_name(name);
        let w = TraceWriter::create(&p, header(FileKind::Results)).unwrap();
        if let Some(r) = first {
            w.write(&r).unwrap();
        }
        w.write(&call(9, 9)).unwrap();
        w.finish().unwrap();
        TraceReader::open(&p).unwrap()
    };
    let mine = results("mine.qres", Some(trace.identity_record()));
    assert_eq!(mine.recorded_trace(), Some(id));
    assert_eq!(check_results(&mine, &trace), ResultsCheck::Same);
    assert_eq!(check_results(&trace, &mine), ResultsCheck::Same);
    assert_eq!(check_results(&mine, &other), ResultsCheck::Other);
    let old = results("old.qres", None);
    assert_eq!(check_results(&old, &trace), ResultsCheck::Unknown);
}

/// A blob over `BLOB_PIECE` is stored in pieces, none over the bound, and reads back whole.
#[test]
fn large_blobs_are_stored_in_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.qtrace");
    let big: Vec<u8> = (0..BLOB_PIECE + 5000)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let w = TraceWriter::create(&p, header(FileKind::Trace)).unwrap();
    let payload = w.payload(&big).unwrap();
    w.write(&Record::MemoryWrite(MemoryWrite {
        seq: 0,
        memory: 1,
        offset: 0,
        data: payload.clone(),
    }))
    .unwrap();
    w.finish().unwrap();
    let r = TraceReader::open(&p).unwrap();
    let pieces = r
        .blocks()
        .iter()
        .filter(|b| b.kind() == BlockKind::Blob)
        .collect::<Vec<_>>();
    assert_eq!(pieces.len(), 2);
    assert!(pieces
        .iter()
        .all(|b| b.uncompressed_len <= BLOB_PIECE as u64));
    assert!(r.info().complete);
    assert_eq!(r.payload_bytes(&payload).unwrap(), big);
}
