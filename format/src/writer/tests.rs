use super::*;
use crate::record::Call;

/// The hand-written encoding of a call is bincode's, for every size class of every field.
#[test]
fn encode_call_is_bincode() {
    let ints = [
        0u64,
        1,
        250,
        251,
        65_535,
        65_536,
        u32::MAX as u64,
        u32::MAX as u64 + 1,
        u64::MAX,
    ];
    let results = [0i32, 1, -1, 5, -4, 1_000_001_000, i32::MIN, i32::MAX];
    let params: [&[u8]; 3] = [&[], &[7; 3], &[9; 300]];
    for (k, &v) in ints.iter().enumerate() {
        let thread = (v as u32).wrapping_add(k as u32);
        let call = Call {
            seq: v,
            thread,
            cmd: v as u32,
            host_ns: v.rotate_left(k as u32),
            result: results[k % results.len()],
            params: params[k % params.len()].to_vec(),
        };
        let mut mine = Vec::new();
        encode_call(
            &mut mine,
            call.seq,
            call.thread,
            call.cmd,
            call.host_ns,
            call.result,
            &call.params,
        );
        let theirs =
            bincode::serde::encode_to_vec(Record::Call(call.clone()), bincode_config()).unwrap();
        assert_eq!(mine, theirs, "{call:?}");
    }
}

/// The failure flag, the open block's lock and what a call's append touches of the open
/// block lie in one cache line.
#[test]
fn a_calls_append_reads_one_line() {
    use std::mem::{align_of, offset_of};
    assert_eq!(align_of::<Shared>(), 64);
    // Where a mutex keeps its data (the lock word comes first): measured, not assumed.
    let m = parking_lot::Mutex::new([0u64; 4]);
    let data = &*m.lock() as *const [u64; 4] as usize - &m as *const _ as usize;
    let open = offset_of!(Shared, open) + data;
    let last = [
        offset_of!(OpenBlock, buf) + size_of::<Vec<u8>>(),
        offset_of!(OpenBlock, calls) + 8,
        offset_of!(OpenBlock, block_size) + 8,
        offset_of!(OpenBlock, records) + 4,
    ];
    assert!(offset_of!(Shared, failed) < offset_of!(Shared, open));
    for end in last {
        assert!(open + end <= 64, "a hot field ends at byte {}", open + end);
    }
}

#[test]
fn the_shared_state_pointer_comes_first() {
    assert_eq!(std::mem::offset_of!(TraceWriter, shared), 0);
}

/// The hand-written query-op encoding is bincode's, for every kind.
#[test]
fn query_op_encoding_is_bincode() {
    use crate::record::QueryOpKind as K;
    for v in [0u64, 250, 251, 70_000, u32::MAX as u64 + 9, u64::MAX] {
        let w = v as u32;
        let kinds = [
            K::Reset {
                first: w,
                count: w / 3,
            },
            K::Begin {
                query: w,
                flags: 1,
                index: w ^ 7,
            },
            K::End { query: w, index: 2 },
            K::Timestamp {
                query: w,
                stage: v.rotate_left(5),
                sync2: v % 2 == 1,
            },
            K::Timestamp {
                query: 0,
                stage: 1,
                sync2: true,
            },
            K::Copy {
                first: w,
                count: 3,
                dst_buffer: !v,
                dst_offset: v / 7,
                stride: 8,
                flags: 0xf,
            },
            K::Write { query: w },
        ];
        for kind in kinds {
            let op = QueryOp {
                seq: v,
                command_buffer: v.rotate_left(9),
                pool: v ^ 0x55,
                kind,
                host_ns: v.wrapping_mul(3),
            };
            let mut mine = Vec::new();
            encode_query_op(&mut mine, &op);
            let theirs =
                bincode::serde::encode_to_vec(Record::QueryOp(op), bincode_config()).unwrap();
            assert_eq!(mine, theirs);
        }
    }
}

/// The hand-written query-results encodings are bincode's.
#[test]
fn query_results_encodings_are_bincode() {
    use crate::record::QueryAvailable;
    for (k, &v) in [0u64, 250, 251, 70_000, u32::MAX as u64 + 9, u64::MAX]
        .iter()
        .enumerate()
    {
        let data: Vec<u8> = (0..(v % 300) as usize).map(|i| i as u8).collect();
        let r = QueryResultsRef {
            seq: v,
            thread: v as u32,
            device: v.rotate_left(3),
            pool: v ^ 0xff,
            first: (v >> 1) as u32,
            count: k as u32,
            stride: v / 3,
            flags: 0x13,
            result: [0, -1, 1, i32::MIN, i32::MAX, 5][k],
            host_ns: v.wrapping_mul(7),
            data: &data,
        };
        let mut mine = Vec::new();
        encode_query_results(&mut mine, &r);
        let r = r.to_record();
        assert_eq!(r.data, data);
        let theirs =
            bincode::serde::encode_to_vec(Record::QueryResults(r), bincode_config()).unwrap();
        assert_eq!(mine, theirs);
        let a = QueryAvailable {
            pool: v,
            query: v as u32,
            host_ns: !v,
        };
        let mut mine = Vec::new();
        encode_query_available(&mut mine, a.pool, a.query, a.host_ns);
        let theirs =
            bincode::serde::encode_to_vec(Record::QueryAvailable(a), bincode_config()).unwrap();
        assert_eq!(mine, theirs);
    }
}

/// A trace header for tests.
fn header() -> Header {
    Header {
        kind: crate::record::FileKind::Trace,
        writer: "test".into(),
        created_unix_ns: 0,
        device: None,
        application: "test".into(),
    }
}

/// Parameters encoded in place give the bytes `write_call` gives, at every length class of
/// the parameter length; a failing encoder leaves nothing behind.
#[test]
fn calls_encoded_in_place_match() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.qtrace"), dir.path().join("b.qtrace"));
    let wa = TraceWriter::create(&a, header()).unwrap();
    let wb = TraceWriter::create(&b, header()).unwrap();
    for (k, len) in [0usize, 1, 127, 128, 250, 251, 252, 65_535, 65_536, 300_000]
        .into_iter()
        .enumerate()
    {
        let params: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
        let seq = k as u64 * 1000;
        wa.write_call(seq, 3, 4, 5, -2, &params).unwrap();
        wb.write_call_with(seq, 3, 4, 5, -2, |buf| {
            buf.extend_from_slice(&params);
            Ok(())
        })
        .unwrap();
        let e = wb.write_call_with(seq + 1, 3, 4, 5, 0, |buf| {
            buf.extend_from_slice(&params);
            Err("no".into())
        });
        assert!(e.is_err());
    }
    wa.finish().unwrap();
    wb.finish().unwrap();
    let read = |p: &std::path::Path| -> Vec<Record> {
        crate::TraceReader::open(p)
            .unwrap()
            .records()
            .map(|r| r.unwrap())
            .collect()
    };
    let (ra, rb) = (read(&a), read(&b));
    assert_eq!(ra.len(), 10);
    assert_eq!(ra, rb);
}

/// The names a writer gives its threads are the ones `is_writer_thread` knows, and an
/// app's own "quarry-..." threads are not among them.
#[test]
fn writer_threads_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let w = TraceWriter::create_with(dir.path().join("t.qtrace"), header(), Default::default())
        .unwrap();
    // A thread names itself once it runs: poll until every one has.
    let wanted = [WRITE_THREAD, SEAL_THREAD, "quarry-zstd-0", "quarry-zstd-1"];
    let deadline = Instant::now() + Duration::from_secs(10);
    let names = loop {
        let names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .filter(|c| is_writer_thread(c))
            .collect();
        if wanted.iter().all(|w| names.iter().any(|n| n == w)) || Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    for want in wanted {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(!is_writer_thread("quarry-demo"));
    w.finish().unwrap();
}

/// Short frames' blocks wait for a batch instead of each waking a compression thread; at
/// the next flush they go as one job and reach the file in order, each block holding its
/// own frame.
#[test]
fn short_frames_are_handed_over_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batched.qtrace");
    let opts = WriterOptions {
        // The ticker, which also hands batches over, stays asleep during the test.
        seal_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    let w = TraceWriter::create_with(&path, header(), opts).unwrap();
    for frame in 0..10u64 {
        w.write_call(frame, 1, 2, 3, 0, &[frame as u8; 40]).unwrap();
        w.end_frame(frame).unwrap();
    }
    assert_eq!(
        lock(&w.shared.submit).next_seq,
        0,
        "nothing handed over yet"
    );
    assert_eq!(lock(&w.shared.deferred).jobs.len(), 10);
    w.flush().unwrap();
    assert!(lock(&w.shared.deferred).jobs.is_empty());
    assert_eq!(
        lock(&w.shared.submit).next_seq,
        1,
        "the batch went as one job"
    );
    w.finish().unwrap();
    let r = crate::TraceReader::open(&path).unwrap();
    let record_blocks = r.blocks().iter().filter(|b| b.kind == 1).count();
    assert_eq!(record_blocks, 10, "one block per frame");
    for frame in 0..10u64 {
        let recs: Vec<Record> = r.frame_records(frame).map(|x| x.unwrap()).collect();
        match recs.as_slice() {
            [Record::Call(c)] => {
                assert_eq!(c.seq, frame);
                assert_eq!(c.params, vec![frame as u8; 40]);
            }
            other => panic!("frame {frame}: {other:?}"),
        }
    }
}
