//! The `Vec<u8>` fields marked `#[serde(with = "serde_bytes")]` encode to exactly the bytes they
//! had before the attribute (serde's default: a sequence of `u8`), and old bytes decode to the
//! same values: the on-disk format did not change.

use format::record::*;
use proptest::prelude::*;
use serde::Serialize;

fn cfg() -> bincode::config::Configuration {
    bincode::config::standard()
}

fn enc<T: Serialize>(v: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(v, cfg()).unwrap()
}

fn dec(bytes: &[u8]) -> Record {
    let (r, n): (Record, usize) = bincode::serde::decode_from_slice(bytes, cfg()).unwrap();
    assert_eq!(n, bytes.len());
    r
}

// The records as they were declared before the attribute: plain `Vec<u8>`.
#[derive(Serialize)]
struct OldCall {
    seq: u64,
    thread: u32,
    cmd: u32,
    host_ns: u64,
    result: i32,
    params: Vec<u8>,
}

#[derive(Serialize)]
enum OldPayload {
    Inline(Vec<u8>),
    Blob { id: BlobId, len: u64 },
}

#[derive(Serialize)]
struct OldMemoryWrite {
    seq: u64,
    memory: Handle,
    offset: u64,
    data: OldPayload,
}

#[derive(Serialize)]
struct OldQueryResults {
    seq: u64,
    thread: u32,
    device: Handle,
    pool: Handle,
    first: u32,
    count: u32,
    stride: u64,
    flags: u32,
    result: i32,
    host_ns: u64,
    data: Vec<u8>,
}

#[derive(Serialize)]
struct OldQueryCopy {
    seq: u64,
    command_buffer: Handle,
    pool: Handle,
    first: u32,
    count: u32,
    dst_buffer: Handle,
    dst_offset: u64,
    stride: u64,
    flags: u32,
    host_ns: u64,
    data: Vec<u8>,
}

/// The variant index bincode writes before a `Record`'s fields (one byte below 251).
fn variant(name: &str) -> u8 {
    format::RECORD_NAMES
        .iter()
        .position(|n| *n == name)
        .unwrap() as u8
}

fn with_variant(name: &str, body: Vec<u8>) -> Vec<u8> {
    let mut v = vec![variant(name)];
    v.extend(body);
    v
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    // Around the varint length boundaries (250/251, 65535/65536) as well as small.
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..8),
        proptest::collection::vec(any::<u8>(), 240..260),
        proptest::collection::vec(any::<u8>(), 65_530..65_540),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn call_bytes_are_unchanged(seq: u64, thread: u32, cmd: u32, host_ns: u64, result: i32, params in bytes()) {
        let new = Record::Call(Call { seq, thread, cmd, host_ns, result, params: params.clone() });
        let old = with_variant("Call", enc(&OldCall { seq, thread, cmd, host_ns, result, params }));
        prop_assert_eq!(&enc(&new), &old);
        prop_assert_eq!(dec(&old), new);
    }

    #[test]
    fn memory_write_bytes_are_unchanged(seq: u64, memory: u64, offset: u64, data in bytes(), blob: bool, id: u64, len: u64) {
        let (newp, oldp) = if blob {
            (Payload::Blob { id: BlobId(id), len }, OldPayload::Blob { id: BlobId(id), len })
        } else {
            (Payload::Inline(data.clone()), OldPayload::Inline(data))
        };
        let new = Record::MemoryWrite(MemoryWrite { seq, memory, offset, data: newp });
        let old = with_variant("MemoryWrite", enc(&OldMemoryWrite { seq, memory, offset, data: oldp }));
        prop_assert_eq!(&enc(&new), &old);
        prop_assert_eq!(dec(&old), new);
    }

    #[test]
    fn query_results_bytes_are_unchanged(
        ints in proptest::collection::vec(any::<u64>(), 5),
        small in proptest::collection::vec(any::<u32>(), 4),
        result: i32,
        data in bytes(),
    ) {
        let new = Record::QueryResults(QueryResults {
            seq: ints[0], thread: small[0], device: ints[1], pool: ints[2], first: small[1],
            count: small[2], stride: ints[3], flags: small[3], result, host_ns: ints[4],
            data: data.clone(),
        });
        let old = with_variant("QueryResults", enc(&OldQueryResults {
            seq: ints[0], thread: small[0], device: ints[1], pool: ints[2], first: small[1],
            count: small[2], stride: ints[3], flags: small[3], result, host_ns: ints[4], data,
        }));
        prop_assert_eq!(&enc(&new), &old);
        prop_assert_eq!(dec(&old), new);
    }

    #[test]
    fn query_copy_bytes_are_unchanged(
        ints in proptest::collection::vec(any::<u64>(), 7),
        small in proptest::collection::vec(any::<u32>(), 3),
        data in bytes(),
    ) {
        let new = Record::QueryCopy(QueryCopy {
            seq: ints[0], command_buffer: ints[1], pool: ints[2], first: small[0], count: small[1],
            dst_buffer: ints[3], dst_offset: ints[4], stride: ints[5], flags: small[2],
            host_ns: ints[6], data: data.clone(),
        });
        let old = with_variant("QueryCopy", enc(&OldQueryCopy {
            seq: ints[0], command_buffer: ints[1], pool: ints[2], first: small[0], count: small[1],
            dst_buffer: ints[3], dst_offset: ints[4], stride: ints[5], flags: small[2],
            host_ns: ints[6], data,
        }));
        prop_assert_eq!(&enc(&new), &old);
        prop_assert_eq!(dec(&old), new);
    }
}

#[test]
fn a_call_encodes_to_the_documented_bytes() {
    // FORMAT.md: varint integers (250 and below in one byte, 251 + u16 above), zigzag i32,
    // byte fields as a varint length and the bytes.
    let r = Record::Call(Call {
        seq: 1,
        thread: 2,
        cmd: 3,
        host_ns: 300,
        result: -1,
        params: vec![9, 8, 7],
    });
    assert_eq!(enc(&r), [1, 1, 2, 3, 251, 44, 1, 1, 3, 9, 8, 7]);
}
