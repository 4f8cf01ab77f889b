//! The records the capture layer writes on the app's thread for every call (calls, query ops,
//! query results, availability), encoded by hand straight into the open block: byte for byte
//! what bincode `standard()` writes for the same `Record` (the tests pin it), without building
//! the owned record first.

use crate::record::QueryOp;

/// bincode's variant index of `Record::Call`.
pub(super) const CALL_VARIANT: u64 = 1;

/// bincode 2's varint: below 251 one byte, else a marker (251/252/253) and a u16/u32/u64.
pub(super) fn put_bincode_varint(buf: &mut Vec<u8>, v: u64) {
    buf.reserve(9);
    let len = buf.len();
    // SAFETY: 9 bytes are reserved past `len`; `varint_raw` initialises the `n` it reports.
    unsafe {
        let n = varint_raw(buf.as_mut_ptr().add(len), v);
        buf.set_len(len + n);
    }
}

/// `Record::Call` as bincode standard() encodes it: the variant index and every integer as a
/// varint, the i32 zigzagged, the byte field as a length and the bytes.
pub(super) fn encode_call(
    buf: &mut Vec<u8>,
    seq: u64,
    thread: u32,
    cmd: u32,
    host_ns: u64,
    result: i32,
    params: &[u8],
) {
    call_head(buf, seq, thread, cmd, host_ns, result);
    put_bincode_varint(buf, params.len() as u64);
    buf.extend_from_slice(params);
}

/// bincode's variant indices of `Record::QueryOp`, `Record::QueryResults` and
/// `Record::QueryAvailable`.
const QUERY_OP_VARIANT: u64 = 6;
const QUERY_RESULTS_VARIANT: u64 = 7;
const QUERY_AVAILABLE_VARIANT: u64 = 9;

/// A `Record::QueryResults` whose data is borrowed: the capture layer writes the bytes the app
/// received without copying them first.
#[derive(Debug, Clone, Copy)]
pub struct QueryResultsRef<'a> {
    pub seq: u64,
    pub thread: u32,
    pub device: u64,
    pub pool: u64,
    pub first: u32,
    pub count: u32,
    pub stride: u64,
    pub flags: u32,
    pub result: i32,
    pub host_ns: u64,
    pub data: &'a [u8],
}

impl QueryResultsRef<'_> {
    /// The owned record.
    pub fn to_record(&self) -> crate::record::QueryResults {
        crate::record::QueryResults {
            seq: self.seq,
            thread: self.thread,
            device: self.device,
            pool: self.pool,
            first: self.first,
            count: self.count,
            stride: self.stride,
            flags: self.flags,
            result: self.result,
            host_ns: self.host_ns,
            data: self.data.to_vec(),
        }
    }
}

pub(super) fn zigzag(v: i32) -> u64 {
    ((v << 1) ^ (v >> 31)) as u32 as u64
}

/// `Record::QueryResults` as bincode standard() encodes it.
pub(super) fn encode_query_results(buf: &mut Vec<u8>, r: &QueryResultsRef<'_>) {
    for v in [
        QUERY_RESULTS_VARIANT,
        r.seq,
        r.thread as u64,
        r.device,
        r.pool,
        r.first as u64,
        r.count as u64,
        r.stride,
        r.flags as u64,
        zigzag(r.result),
        r.host_ns,
        r.data.len() as u64,
    ] {
        put_bincode_varint(buf, v);
    }
    buf.extend_from_slice(r.data);
}

/// `Record::QueryOp` as bincode standard() encodes it: the kind's variant index and fields
/// between the handles and the host time. Every field a varint; the one bool too, as bincode's
/// single byte 0 or 1 is what a varint below 251 is.
pub(super) fn encode_query_op(buf: &mut Vec<u8>, op: &QueryOp) {
    use crate::record::QueryOpKind as K;
    let mut put = |v: u64| put_bincode_varint(buf, v);
    [QUERY_OP_VARIANT, op.seq, op.command_buffer, op.pool]
        .into_iter()
        .for_each(&mut put);
    let u = u64::from;
    match op.kind {
        K::Reset { first, count } => [0, u(first), u(count)].into_iter().for_each(&mut put),
        K::Begin {
            query,
            flags,
            index,
        } => [1, u(query), u(flags), u(index)]
            .into_iter()
            .for_each(&mut put),
        K::End { query, index } => [2, u(query), u(index)].into_iter().for_each(&mut put),
        K::Timestamp {
            query,
            stage,
            sync2,
        } => [3, u(query), stage, u64::from(sync2)]
            .into_iter()
            .for_each(&mut put),
        K::Copy {
            first,
            count,
            dst_buffer,
            dst_offset,
            stride,
            flags,
        } => [
            4,
            u(first),
            u(count),
            dst_buffer,
            dst_offset,
            stride,
            u(flags),
        ]
        .into_iter()
        .for_each(&mut put),
        K::Write { query } => [5, u(query)].into_iter().for_each(&mut put),
    }
    put(op.host_ns);
}

/// `Record::QueryAvailable` as bincode standard() encodes it.
pub(super) fn encode_query_available(buf: &mut Vec<u8>, pool: u64, query: u32, host_ns: u64) {
    for v in [QUERY_AVAILABLE_VARIANT, pool, query as u64, host_ns] {
        put_bincode_varint(buf, v);
    }
}

/// Every field of a `Record::Call` before its parameters.
///
/// Written straight into the buffer's spare room: one capacity check, no bounds checks and no
/// `memcpy` call (this runs for every recorded call, where each instruction fetched after the
/// driver's work is likely a miss).
#[inline]
pub(super) fn call_head(
    buf: &mut Vec<u8>,
    seq: u64,
    thread: u32,
    cmd: u32,
    host_ns: u64,
    result: i32,
) {
    /// The variant byte and five varints of at most 9 bytes.
    const MAX: usize = 1 + 5 * 9;
    const _: () = assert!(CALL_VARIANT < 251, "the variant is one byte");
    buf.reserve(MAX);
    let len = buf.len();
    // SAFETY: `MAX` bytes are reserved past `len` and at most `MAX` are written; every byte up to
    // the new length is initialised.
    unsafe {
        let p = buf.as_mut_ptr().add(len);
        p.write(CALL_VARIANT as u8);
        let mut n = 1;
        n += varint_raw(p.add(n), seq);
        n += varint_raw(p.add(n), u64::from(thread));
        n += varint_raw(p.add(n), u64::from(cmd));
        n += varint_raw(p.add(n), host_ns);
        n += varint_raw(p.add(n), zigzag(result));
        buf.set_len(len + n);
    }
}

/// bincode 2's varint (see [`put_bincode_varint`]) to `p`; returns the bytes written (1, 3, 5 or 9).
///
/// # Safety
/// `p` must be valid for writing 9 bytes.
#[inline(always)]
pub(super) unsafe fn varint_raw(p: *mut u8, v: u64) -> usize {
    if v < 251 {
        p.write(v as u8);
        1
    } else if v <= u16::MAX as u64 {
        p.write(251);
        p.add(1)
            .cast::<[u8; 2]>()
            .write_unaligned((v as u16).to_le_bytes());
        3
    } else if v <= u32::MAX as u64 {
        p.write(252);
        p.add(1)
            .cast::<[u8; 4]>()
            .write_unaligned((v as u32).to_le_bytes());
        5
    } else {
        p.write(253);
        p.add(1).cast::<[u8; 8]>().write_unaligned(v.to_le_bytes());
        9
    }
}
