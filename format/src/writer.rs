//! Streaming writer: records are encoded into an open block under a mutex; sealed blocks go to
//! compression workers and then to one output thread that writes them in seal order.
//!
//! Made to run inside arbitrary applications (the capture layer): no panics on I/O, no global
//! state, no signal handlers, nothing printed. Memory is bounded by the open block plus
//! `WriterOptions::max_in_flight_bytes` of sealed blocks waiting for compression or the disk.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_128;

use crate::error::{FormatError, Problem};
use crate::index::{BlockEntry, FooterIndex};
use crate::layout::*;
use crate::record::{BlobId, Header, Payload, QueryOp, Record};
use crate::{bincode_config, file_kind_byte};

/// Tuning knobs; the defaults suit both the capture layer and the replayer.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// A record block is sealed once its encoded records reach this many bytes.
    pub block_size: usize,
    /// A non-empty open block is sealed before it gets this old, so it reaches the file
    /// within this time even when the application stops producing records.
    pub seal_interval: Duration,
    /// `payload()` keeps byte strings shorter than this inline; longer ones become blobs.
    pub inline_threshold: usize,
    /// zstd level.
    pub level: i32,
    /// zstd level of the tiny blocks (under 16 KiB) compressed with the dictionary: sealed at
    /// the ends of short frames, often hundreds a second, where per-block work dominates.
    pub dict_level: i32,
    /// Compression threads.
    pub workers: usize,
    /// Sealed-but-unwritten bytes above which writers wait (at least one block always passes).
    pub max_in_flight_bytes: usize,
    /// Size of the zstd dictionary taken from the first record bytes and used for every later
    /// record block (0: none). Blocks sealed at small frames compress far better with it.
    pub dictionary_bytes: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_size: 1 << 20,
            seal_interval: Duration::from_millis(100),
            inline_threshold: 8 << 10,
            level: 3,
            dict_level: DICT_LEVEL,
            workers: 2,
            max_in_flight_bytes: 64 << 20,
            dictionary_bytes: 100 << 10,
        }
    }
}

/// What `finish` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteSummary {
    pub records: u64,
    pub frames: u64,
    pub blocks: u64,
    pub blobs: u64,
    pub blob_dedup_hits: u64,
    /// Encoded record and blob bytes before compression.
    pub uncompressed_bytes: u64,
    /// Block payload bytes after compression.
    pub compressed_bytes: u64,
    pub file_bytes: u64,
}

/// What one compression thread takes at a time: one block, or a batch of small ones (see
/// `Deferred`) compressed in a row while the dictionary's tables are warm in its cache.
struct Job {
    seq: u64,
    blocks: Vec<BlockJob>,
    /// Uncompressed bytes of all the blocks.
    bytes: usize,
}

struct BlockJob {
    kind: BlockKind,
    records: u32,
    aux: u64,
    data: Vec<u8>,
    /// Compress with this dictionary (id `DICT_ID`), already submitted ahead of this block.
    dict: Option<Arc<Vec<u8>>>,
}

/// bincode's variant index of `Record::Call`.
const CALL_VARIANT: u64 = 1;

/// bincode 2's varint: below 251 one byte, else a marker (251/252/253) and a u16/u32/u64.
fn put_bincode_varint(buf: &mut Vec<u8>, v: u64) {
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
fn encode_call(
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

fn zigzag(v: i32) -> u64 {
    ((v << 1) ^ (v >> 31)) as u32 as u64
}

/// `Record::QueryResults` as bincode standard() encodes it.
fn encode_query_results(buf: &mut Vec<u8>, r: &QueryResultsRef<'_>) {
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
fn encode_query_op(buf: &mut Vec<u8>, op: &QueryOp) {
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
fn encode_query_available(buf: &mut Vec<u8>, pool: u64, query: u32, host_ns: u64) {
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
fn call_head(buf: &mut Vec<u8>, seq: u64, thread: u32, cmd: u32, host_ns: u64, result: i32) {
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
unsafe fn varint_raw(p: *mut u8, v: u64) -> usize {
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

/// Record blocks up to this size sealed at a frame end wait for the next batch (see
/// `Deferred`) and are copied out of the open block's buffer, which stays open.
const SMALL_BLOCK: usize = 64 << 10;
/// Deferred bytes or blocks above which the batch is handed over at once.
const DEFER_MAX_BYTES: usize = 512 << 10;
const DEFER_MAX_JOBS: usize = 4096;
/// Recycled small-block buffers kept at most.
const SMALL_POOL: usize = 64;

const DICT_LEVEL: i32 = -1;
/// Dictionary blocks below this size use `dict_level`, larger ones `level`.
const TINY_BLOCK: usize = 16 << 10;

/// Names of a writer's threads (the compression threads' followed by their index).
const ZSTD_THREAD: &str = "quarry-zstd-";
const WRITE_THREAD: &str = "quarry-write";
const SEAL_THREAD: &str = "quarry-seal";

/// Whether a thread named `name` is one of a writer's own (for accounting their CPU time).
pub fn is_writer_thread(name: &str) -> bool {
    name == WRITE_THREAD || name == SEAL_THREAD || name.starts_with(ZSTD_THREAD)
}

/// The one dictionary a writer produces.
const DICT_ID: u16 = 1;
/// Record blocks below this size are compressed with the dictionary.
const DICT_MAX_BLOCK: usize = 128 << 10;

struct Done {
    seq: u64,
    blocks: Vec<DoneBlock>,
    /// The job's `bytes`.
    input_len: usize,
}

struct DoneBlock {
    header: BlockHeader,
    /// Payload as stored: compressed bytes, or the input when compression did not help.
    stored: Vec<u8>,
}

/// What appending a call touches comes first (`repr(C)` keeps the order): with the failure flag
/// and the lock before it, one cache line (see `Shared`), cold again after the app's and the
/// driver's work between two calls.
#[repr(C)]
struct OpenBlock {
    buf: Vec<u8>,
    /// `Call` records: counted here rather than in `counts`, one line fewer for every call.
    calls: u64,
    /// `opts.block_size`, here to keep it in the same line.
    block_size: usize,
    records: u32,
    // Below: not read by a call's append.
    /// Records of the blocks sealed so far (added at each seal).
    total_records: u64,
    /// Indexed by the bincode variant byte of the record (`Call` aside).
    counts: Vec<(u64, &'static str)>,
    /// When the block's first record was appended (the ticker seals old blocks).
    opened: Option<Instant>,
    frame: u64,
    frames_ended: u64,
    /// First record bytes, until they make the dictionary.
    dict_collect: Vec<u8>,
    dict: Option<Arc<Vec<u8>>>,
}

struct Submitter {
    next_seq: u64,
    tx: Option<Sender<Job>>,
}

/// Small record blocks sealed at frame ends, not yet handed to the compression threads (no
/// seq yet): handing one over wakes a sleeping thread, a syscall on the app's thread, so
/// blocks of short frames go in batches, from the ticker or the next direct submit. Its own
/// lock, held only to push or take, so a frame end never waits for a batch being handed over.
#[derive(Default)]
struct Deferred {
    jobs: Vec<BlockJob>,
    bytes: usize,
}

struct PipeState {
    in_flight_bytes: usize,
    /// Every seq below this has been written (or dropped after an error).
    written_upto: u64,
    error: Option<FormatError>,
    stop: bool,
}

struct Blobs {
    by_hash: HashMap<u128, BlobId>,
    next: u64,
    dedup_hits: u64,
}

/// Aligned so that the failure flag, the open block's lock and the fields of it that a call's
/// append reads and writes share one cache line (checked by a test).
#[repr(C, align(64))]
struct Shared {
    /// First, next to the open block (see `OpenBlock`).
    failed: AtomicBool,
    /// parking_lot's: no poisoning to check, so no read of the standard library's global panic
    /// count (one more cache line) at every lock and unlock of every recorded call.
    open: parking_lot::Mutex<OpenBlock>,
    path: PathBuf,
    opts: WriterOptions,
    submit: Mutex<Submitter>,
    deferred: Mutex<Deferred>,
    state: Mutex<PipeState>,
    cond: Condvar,
    /// The ticker's own: it would otherwise wake at every block written and contend with the
    /// app's threads for the open block.
    ticker_cond: Condvar,
    /// Block-sized buffers handed back after writing: fresh large allocations are mapped
    /// pages that fault and get zeroed on first touch, which cost as much as compressing.
    pool: Mutex<Vec<Vec<u8>>>,
    small_pool: Mutex<Vec<Vec<u8>>>,
    blobs: Mutex<Blobs>,
}

/// Poisoning only follows a panic elsewhere; the data behind these locks stays consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    #[inline]
    fn check(&self) -> Result<(), FormatError> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.stored_error()
    }

    #[cold]
    fn stored_error(&self) -> Result<(), FormatError> {
        let st = lock(&self.state);
        match &st.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    fn fail(&self, st: &mut PipeState, e: FormatError) {
        if st.error.is_none() {
            st.error = Some(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Assigns the next sequence number and queues the block (after any deferred ones), waiting
    /// while too many bytes are in flight. Callers that need seal order hold the `open` lock
    /// around this.
    fn submit(
        &self,
        kind: BlockKind,
        records: u32,
        aux: u64,
        data: Vec<u8>,
        dict: Option<Arc<Vec<u8>>>,
    ) -> Result<(), FormatError> {
        let mut sub = lock(&self.submit);
        self.drain_locked(&mut sub)?;
        let job = BlockJob {
            kind,
            records,
            aux,
            data,
            dict,
        };
        self.send_locked(&mut sub, vec![job])
    }

    /// Queues a small record block for the next batch; hands the batch over once it is large.
    fn defer(
        &self,
        records: u32,
        aux: u64,
        data: Vec<u8>,
        dict: Option<Arc<Vec<u8>>>,
    ) -> Result<(), FormatError> {
        let full = {
            let mut d = lock(&self.deferred);
            d.bytes += data.len();
            d.jobs.push(BlockJob {
                kind: BlockKind::Records,
                records,
                aux,
                data,
                dict,
            });
            d.bytes > DEFER_MAX_BYTES || d.jobs.len() > DEFER_MAX_JOBS
        };
        if full {
            self.drain()?;
        }
        Ok(())
    }

    /// Hands every deferred block to the compression threads, in order.
    fn drain(&self) -> Result<(), FormatError> {
        let mut sub = lock(&self.submit);
        self.drain_locked(&mut sub)
    }

    /// Holding the submit lock, so deferred blocks get their seq before any later block. The
    /// batch goes as one job: one thread wakes for it, and one write puts it in the file.
    fn drain_locked(&self, sub: &mut Submitter) -> Result<(), FormatError> {
        let jobs = {
            let mut d = lock(&self.deferred);
            if d.jobs.is_empty() {
                return Ok(());
            }
            d.bytes = 0;
            std::mem::take(&mut d.jobs)
        };
        self.send_locked(sub, jobs)
    }

    fn send_locked(&self, sub: &mut Submitter, blocks: Vec<BlockJob>) -> Result<(), FormatError> {
        let bytes = blocks.iter().map(|b| b.data.len()).sum::<usize>();
        {
            let mut st = lock(&self.state);
            while st.error.is_none()
                && st.in_flight_bytes > 0
                && st.in_flight_bytes + bytes > self.opts.max_in_flight_bytes
            {
                st = self.cond.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if let Some(e) = &st.error {
                return Err(e.duplicate());
            }
            st.in_flight_bytes += bytes;
        }
        let job = Job {
            seq: sub.next_seq,
            blocks,
            bytes,
        };
        let sent = match &sub.tx {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
            let e = FormatError::new(
                &self.path,
                0,
                Problem::WriterFailed("compression threads are gone".into()),
            );
            let mut st = lock(&self.state);
            self.fail(&mut st, e.duplicate());
            return Err(e);
        }
        sub.next_seq += 1;
        Ok(())
    }

    /// Hands the open block to the pipeline if it holds records. `frame_end`: sealed because a
    /// frame ended on the app's thread, so a small block may wait for the next batch.
    fn seal(&self, open: &mut OpenBlock, frame_end: bool) -> Result<(), FormatError> {
        if open.records == 0 {
            return Ok(());
        }
        let small = open.buf.len() <= SMALL_BLOCK;
        let data = if small {
            // A copy: the large buffer stays the open block's.
            let data = self.copy_small(&open.buf);
            open.buf.clear();
            data
        } else {
            let cap = self
                .opts
                .block_size
                .saturating_add(self.opts.block_size / 8);
            std::mem::replace(&mut open.buf, self.take_buf(cap))
        };
        let records = open.records;
        open.total_records += u64::from(records);
        open.records = 0;
        open.opened = None;
        let hand_over = |data: Vec<u8>, dict: Option<Arc<Vec<u8>>>| {
            if frame_end && small {
                self.defer(records, open.frame, data, dict)
            } else {
                self.submit(BlockKind::Records, records, open.frame, data, dict)
            }
        };
        let want = self.opts.dictionary_bytes;
        if open.dict.is_some() || want == 0 {
            // Large blocks carry their own context; a dictionary only slows them down.
            let dict = open.dict.clone().filter(|_| data.len() < DICT_MAX_BLOCK);
            return hand_over(data, dict);
        }
        let take = (want - open.dict_collect.len()).min(data.len());
        open.dict_collect.extend_from_slice(&data[..take]);
        hand_over(data, None)?;
        if open.dict_collect.len() >= want {
            // The dictionary block precedes every block compressed with it, so a reader of a
            // truncated file never holds a block whose dictionary is missing.
            let dict = Arc::new(std::mem::take(&mut open.dict_collect));
            self.submit(BlockKind::Dict, 0, DICT_ID as u64, dict.to_vec(), None)?;
            open.dict = Some(dict);
        }
        Ok(())
    }

    fn take_buf(&self, cap: usize) -> Vec<u8> {
        let mut v = lock(&self.pool).pop().unwrap_or_default();
        v.clear();
        if v.capacity() < cap {
            // Allocation failure here surfaces later as a smaller buffer, never as an abort.
            let _ = v.try_reserve_exact(cap);
        }
        v
    }

    fn give_buf(&self, v: Vec<u8>) {
        let max_cap = 2 * zstd::zstd_safe::compress_bound(self.opts.block_size);
        if v.capacity() >= self.opts.block_size / 2 && v.capacity() <= max_cap {
            let mut pool = lock(&self.pool);
            if pool.len() < 2 * self.opts.workers + 4 {
                pool.push(v);
            }
        } else if v.capacity() <= SMALL_BLOCK && v.capacity() >= 1024 {
            let mut pool = lock(&self.small_pool);
            if pool.len() < SMALL_POOL {
                pool.push(v);
            }
        }
    }

    /// A copy of a small block in a recycled buffer: blocks of short frames are copied out
    /// at every frame end, and allocations freed on the writer's threads would otherwise go
    /// through malloc's shared arena each time.
    fn copy_small(&self, data: &[u8]) -> Vec<u8> {
        let mut v = lock(&self.small_pool).pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(data);
        v
    }

    /// Seals and waits until everything submitted so far is in the file.
    fn flush(&self) -> Result<(), FormatError> {
        let target = {
            let mut open = self.open.lock();
            self.seal(&mut open, false)?;
            let mut sub = lock(&self.submit);
            self.drain_locked(&mut sub)?;
            sub.next_seq
        };
        let mut st = lock(&self.state);
        while st.error.is_none() && st.written_upto < target {
            st = self.cond.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        match &st.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

/// Asks for the two cache lines after the block's end, which the next record will write: they
/// arrive while the app goes on, instead of missing at the next call (records are appended to
/// fresh memory, and between two calls the app's and the driver's work evicts the layer's).
#[inline]
fn prefetch_tail(buf: &Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    {
        let end = buf.len();
        if end + 128 <= buf.capacity() {
            // SAFETY: within the allocation; a prefetch never faults or changes memory.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
                let p = buf.as_ptr().add(end) as *const i8;
                _mm_prefetch::<_MM_HINT_ET0>(p.add(64));
                _mm_prefetch::<_MM_HINT_ET0>(p.add(127));
            }
        }
    }
}

/// Writes a trace or results file. `Send + Sync`: share it by reference or `Arc` between threads.
///
/// Its first word is the pointer every write follows (`repr(C)`), so a caller that keeps the
/// writer next to its own lock reads both from one cache line.
#[repr(C)]
pub struct TraceWriter {
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    output: Option<JoinHandle<Result<WriteSummary, FormatError>>>,
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("path", &self.shared.path)
            .field("failed", &self.shared.failed.load(Ordering::Relaxed))
            .finish()
    }
}

impl TraceWriter {
    /// Creates (truncates) `path` and writes the file header.
    pub fn create(path: impl AsRef<Path>, header: Header) -> Result<Self, FormatError> {
        Self::create_with(path, header, WriterOptions::default())
    }

    pub fn create_with(
        path: impl AsRef<Path>,
        header: Header,
        opts: WriterOptions,
    ) -> Result<Self, FormatError> {
        let path = path.as_ref();
        let file =
            File::create(path).map_err(|e| FormatError::io(path, 0, "cannot create file", e))?;
        Self::create_on(file, path, header, opts)
    }

    /// Writes to any byte sink (a pipe, a socket, a test double); `name` labels errors.
    /// The result is only readable back as a file, but the bytes are the same.
    pub fn create_on(
        out: impl Write + Send + 'static,
        name: impl AsRef<Path>,
        header: Header,
        opts: WriterOptions,
    ) -> Result<Self, FormatError> {
        let mut file: Box<dyn Write + Send> = Box::new(out);
        let path = name.as_ref().to_path_buf();
        let hdr = bincode::serde::encode_to_vec(&header, bincode_config()).map_err(|e| {
            FormatError::new(&path, PREFIX_LEN as u64, Problem::Encode(e.to_string()))
        })?;
        if hdr.len() > MAX_HEADER_LEN as usize {
            return Err(FormatError::new(
                &path,
                PREFIX_LEN as u64,
                Problem::TooLarge {
                    what: "header",
                    len: hdr.len() as u64,
                    max: MAX_HEADER_LEN as u64,
                },
            ));
        }
        let prefix = Prefix::encode(file_kind_byte(header.kind), &hdr);
        file.write_all(&prefix)
            .and_then(|_| file.write_all(&hdr))
            .map_err(|e| FormatError::io(&path, 0, "cannot write header", e))?;
        let body_start = (PREFIX_LEN + hdr.len()) as u64;

        let mut opts = opts;
        opts.workers = opts.workers.max(1);
        // Keeps every records block under MAX_BLOCK_LEN (a block holds less than the block size
        // plus one record).
        opts.block_size = opts.block_size.clamp(1, MAX_BLOCK_SIZE);
        let shared = Arc::new(Shared {
            path: path.clone(),
            open: parking_lot::Mutex::new(OpenBlock {
                buf: Vec::with_capacity(opts.block_size + opts.block_size / 8),
                records: 0,
                block_size: opts.block_size,
                frame: 0,
                opened: None,
                calls: 0,
                counts: Vec::new(),
                total_records: 0,
                frames_ended: 0,
                dict_collect: Vec::new(),
                dict: None,
            }),
            submit: Mutex::new(Submitter {
                next_seq: 0,
                tx: None,
            }),
            deferred: Mutex::new(Deferred::default()),
            state: Mutex::new(PipeState {
                in_flight_bytes: 0,
                written_upto: 0,
                error: None,
                stop: false,
            }),
            cond: Condvar::new(),
            ticker_cond: Condvar::new(),
            failed: AtomicBool::new(false),
            pool: Mutex::new(Vec::new()),
            small_pool: Mutex::new(Vec::new()),
            blobs: Mutex::new(Blobs {
                by_hash: HashMap::new(),
                next: 0,
                dedup_hits: 0,
            }),
            opts,
        });

        let (job_tx, job_rx) = channel::<Job>();
        let (done_tx, done_rx) = channel::<Result<Done, FormatError>>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let mut writer = TraceWriter {
            shared: shared.clone(),
            ticker: None,
            workers: Vec::new(),
            output: None,
        };
        for i in 0..shared.opts.workers {
            let rx = job_rx.clone();
            let tx = done_tx.clone();
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("{ZSTD_THREAD}{i}"))
                .spawn(move || compress_loop(&sh, &rx, &tx))
                .map_err(|e| FormatError::io(&path, 0, "cannot start compression thread", e))?;
            writer.workers.push(h);
        }
        drop(done_tx);
        let sh = shared.clone();
        writer.output = Some(
            std::thread::Builder::new()
                .name(WRITE_THREAD.into())
                .spawn(move || output_loop(&sh, file, body_start, done_rx))
                .map_err(|e| FormatError::io(&path, 0, "cannot start writer thread", e))?,
        );
        lock(&shared.submit).tx = Some(job_tx);
        let sh = shared.clone();
        writer.ticker = Some(
            std::thread::Builder::new()
                .name(SEAL_THREAD.into())
                .spawn(move || ticker_loop(&sh))
                .map_err(|e| FormatError::io(&path, 0, "cannot start timer thread", e))?,
        );
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    pub fn options(&self) -> &WriterOptions {
        &self.shared.opts
    }

    /// Appends one record. Records from one thread keep their order; across threads the order
    /// is the order in which calls take the block lock.
    pub fn write(&self, rec: &Record) -> Result<(), FormatError> {
        self.append(rec.type_name(), |buf| {
            bincode::serde::encode_into_std_write(rec, buf, bincode_config())
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    /// Appends a `Record::Call` made of these fields, byte for byte what [`write`](Self::write)
    /// writes for it, straight from `params` (the capture layer's hot path: no `Record`, no copy
    /// of the parameters).
    pub fn write_call(
        &self,
        seq: u64,
        thread: u32,
        cmd: u32,
        host_ns: u64,
        result: i32,
        params: &[u8],
    ) -> Result<(), FormatError> {
        self.append("Call", |buf| {
            encode_call(buf, seq, thread, cmd, host_ns, result, params);
            Ok(())
        })
    }

    /// As [`write_call`](Self::write_call), with the parameters encoded by `params` straight
    /// into the open block (no buffer of their own). An error from `params` leaves the block as
    /// it was and is returned as an encoding error. Generic, so a caller's copy calls `params`
    /// directly: no vtable, and no trip through the GOT to reach this function.
    #[inline(always)]
    pub fn write_call_with<F: FnOnce(&mut Vec<u8>) -> Result<(), String>>(
        &self,
        seq: u64,
        thread: u32,
        cmd: u32,
        host_ns: u64,
        result: i32,
        params: F,
    ) -> Result<(), FormatError> {
        self.append(
            "Call",
            #[inline(always)]
            |buf| {
                call_head(buf, seq, thread, cmd, host_ns, result);
                // The length goes before the bytes: one byte reserved, widened when they are longer.
                let at = buf.len();
                buf.push(0);
                params(buf)?;
                let len = (buf.len() - at - 1) as u64;
                if len < 251 {
                    buf[at] = len as u8;
                } else {
                    let mut prefix = [0u8; 9];
                    // SAFETY: `prefix` has the 9 bytes `varint_raw` may write.
                    let k = unsafe { varint_raw(prefix.as_mut_ptr(), len) };
                    let end = buf.len();
                    buf.resize(end + k - 1, 0);
                    buf.copy_within(at + 1..end, at + k);
                    buf[at..at + k].copy_from_slice(&prefix[..k]);
                }
                Ok(())
            },
        )
    }

    /// Appends a `Record::QueryOp`: what [`write`](Self::write) writes for it, without going
    /// through serde (a query command writes one or more after its call, on the app's thread).
    pub fn write_query_op(&self, op: &QueryOp) -> Result<(), FormatError> {
        self.append("QueryOp", |buf| {
            encode_query_op(buf, op);
            Ok(())
        })
    }

    /// Appends a `Record::QueryResults` and a `Record::QueryAvailable` (same pool and host time)
    /// for each of `available`: what [`write`](Self::write) writes for them, without the copies.
    pub fn write_query_results(
        &self,
        r: &QueryResultsRef<'_>,
        available: &[u32],
    ) -> Result<(), FormatError> {
        self.append("QueryResults", |buf| {
            encode_query_results(buf, r);
            Ok(())
        })?;
        for &query in available {
            self.append("QueryAvailable", |buf| {
                encode_query_available(buf, r.pool, query, r.host_ns);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Appends one record that `encode` writes into the open block, behind its length prefix.
    #[inline(always)]
    fn append(
        &self,
        type_name: &'static str,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
    ) -> Result<(), FormatError> {
        self.shared.check()?;
        let sh = &*self.shared;
        let mut open = sh.open.lock();
        // Length prefix: LEB128, one byte reserved (most records are short), widened after
        // encoding when the record turns out longer.
        let start = open.buf.len();
        open.buf.push(0);
        if let Err(e) = encode(&mut open.buf) {
            open.buf.truncate(start);
            return Err(FormatError::new(&sh.path, 0, Problem::Encode(e)));
        }
        let len = open.buf.len() - start - 1;
        if len > MAX_RECORD_LEN {
            open.buf.truncate(start);
            return Err(FormatError::new(
                &sh.path,
                0,
                Problem::TooLarge {
                    what: "record",
                    len: len as u64,
                    max: MAX_RECORD_LEN as u64,
                },
            ));
        }
        let mut prefix = [0u8; 5];
        let k = put_varint(&mut prefix, len as u32);
        if k > 1 {
            let end = open.buf.len();
            open.buf.resize(end + k - 1, 0);
            open.buf.copy_within(start + 1..end, start + k);
        }
        open.buf[start..start + k].copy_from_slice(&prefix[..k]);
        let variant = open.buf[start + k] as usize;
        if variant == CALL_VARIANT as usize {
            open.calls += 1;
        } else {
            if open.counts.len() <= variant {
                open.counts.resize(variant + 1, (0, ""));
            }
            open.counts[variant] = (open.counts[variant].0 + 1, type_name);
        }
        open.records += 1;
        if open.records == 1 {
            open.opened = Some(Instant::now());
        }
        if open.buf.len() >= open.block_size || open.records == u32::MAX {
            sh.seal(&mut open, false)?;
        }
        prefetch_tail(&open.buf);
        Ok(())
    }

    /// Stores `bytes` once per file; equal contents give the same id.
    pub fn blob(&self, bytes: &[u8]) -> Result<BlobId, FormatError> {
        self.shared.check()?;
        let sh = &*self.shared;
        if bytes.len() as u64 > MAX_BLOB_LEN {
            return Err(FormatError::new(
                &sh.path,
                0,
                Problem::TooLarge {
                    what: "blob",
                    len: bytes.len() as u64,
                    max: MAX_BLOB_LEN,
                },
            ));
        }
        let hash = xxh3_128(bytes);
        // Held across submit so that a record naming this blob can never reach the file first.
        let mut blobs = lock(&sh.blobs);
        if let Some(id) = blobs.by_hash.get(&hash) {
            let id = *id;
            blobs.dedup_hits += 1;
            return Ok(id);
        }
        let id = BlobId(blobs.next);
        // Pieces keep every block under MAX_BLOCK_LEN; an empty blob is one empty block.
        for piece in bytes
            .chunks(BLOB_PIECE)
            .chain(bytes.is_empty().then_some(&[][..]))
        {
            sh.submit(BlockKind::Blob, 0, id.0, piece.to_vec(), None)?;
        }
        blobs.next += 1;
        blobs.by_hash.insert(hash, id);
        Ok(id)
    }

    /// Inline below `inline_threshold`, otherwise a (deduplicated) blob.
    pub fn payload(&self, bytes: &[u8]) -> Result<Payload, FormatError> {
        if bytes.len() < self.shared.opts.inline_threshold {
            return Ok(Payload::Inline(bytes.to_vec()));
        }
        let id = self.blob(bytes)?;
        Ok(Payload::Blob {
            id,
            len: bytes.len() as u64,
        })
    }

    /// Frame `frame` ended: seals the open block so the frame reaches the file now; records
    /// written afterwards belong to frame `frame + 1`.
    pub fn end_frame(&self, frame: u64) -> Result<(), FormatError> {
        self.shared.check()?;
        let sh = &*self.shared;
        let mut open = sh.open.lock();
        let r = sh.seal(&mut open, true);
        open.frame = frame.saturating_add(1);
        open.frames_ended += 1;
        r
    }

    /// Seals the open block; records written afterwards belong to frame `frame` (a trimmed
    /// capture starts at its first frame, not at 0).
    pub fn set_frame(&self, frame: u64) -> Result<(), FormatError> {
        self.shared.check()?;
        let sh = &*self.shared;
        let mut open = sh.open.lock();
        let r = sh.seal(&mut open, true);
        open.frame = frame;
        r
    }

    /// Seals the open block and waits until everything written so far is in the file.
    pub fn flush(&self) -> Result<(), FormatError> {
        self.shared.check()?;
        self.shared.flush()
    }

    /// Writes the remaining blocks and the footer index, and closes the file.
    pub fn finish(mut self) -> Result<WriteSummary, FormatError> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> Result<WriteSummary, FormatError> {
        let Some(output) = self.output.take() else {
            return Err(FormatError::new(
                &self.shared.path,
                0,
                Problem::WriterFailed("already finished".into()),
            ));
        };
        let sh = &*self.shared;
        let sealed = {
            let mut open = sh.open.lock();
            sh.seal(&mut open, false).and_then(|_| sh.drain())
        };
        {
            let mut st = lock(&sh.state);
            st.stop = true;
            sh.cond.notify_all();
            sh.ticker_cond.notify_all();
        }
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        // Closing the job channel lets the workers, then the output thread, run dry.
        lock(&sh.submit).tx = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        let result = match output.join() {
            Ok(r) => r,
            Err(_) => Err(FormatError::new(
                &sh.path,
                0,
                Problem::WriterFailed("writer thread panicked".into()),
            )),
        };
        sealed?;
        result
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.output.is_some() {
            let _ = self.finish_inner();
        }
    }
}

fn ticker_loop(sh: &Shared) {
    // Sealing at half the interval, polled every quarter, keeps a block's age at the file
    // under the interval including compression time.
    let interval = sh.opts.seal_interval.max(Duration::from_millis(4));
    let poll = interval / 4;
    let mut st = lock(&sh.state);
    loop {
        if st.stop {
            return;
        }
        let (guard, _) = sh
            .ticker_cond
            .wait_timeout(st, poll)
            .unwrap_or_else(|e| e.into_inner());
        st = guard;
        if st.stop {
            return;
        }
        drop(st);
        {
            let mut open = sh.open.lock();
            // An error is stored in the pipeline state and reported by the next call.
            if open.opened.is_some_and(|t| t.elapsed() >= interval / 2) {
                let _ = sh.seal(&mut open, false);
            }
        }
        let _ = sh.drain();
        st = lock(&sh.state);
    }
}

fn compress_loop(sh: &Shared, rx: &Mutex<Receiver<Job>>, tx: &Sender<Result<Done, FormatError>>) {
    let mut comp = zstd::bulk::Compressor::new(sh.opts.level).ok();
    // With the dictionary: [at `level`, at `dict_level` for tiny blocks], made at first use.
    let mut with_dict: [Option<zstd::bulk::Compressor<'static>>; 2] = [None, None];
    loop {
        let job = match lock(rx).recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        let mut blocks = Vec::with_capacity(job.blocks.len());
        let mut failed = None;
        for block in job.blocks {
            let done = match &block.dict {
                Some(d) => {
                    let tiny = block.data.len() < TINY_BLOCK;
                    let slot = &mut with_dict[tiny as usize];
                    if slot.is_none() {
                        let level = if tiny {
                            sh.opts.dict_level
                        } else {
                            sh.opts.level
                        };
                        *slot = zstd::bulk::Compressor::with_dictionary(level, d).ok();
                    }
                    match slot.as_mut() {
                        Some(c) => compress_block(sh, Some((c, DICT_ID)), block),
                        None => compress_block(sh, comp.as_mut().map(|c| (c, 0)), block),
                    }
                }
                None => compress_block(sh, comp.as_mut().map(|c| (c, 0)), block),
            };
            match done {
                Ok(d) => blocks.push(d),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let done = match failed {
            Some(e) => Err(e),
            None => Ok(Done {
                seq: job.seq,
                blocks,
                input_len: job.bytes,
            }),
        };
        if tx.send(done).is_err() {
            return;
        }
    }
}

fn compress_block(
    sh: &Shared,
    comp: Option<(&mut zstd::bulk::Compressor<'static>, u16)>,
    job: BlockJob,
) -> Result<DoneBlock, FormatError> {
    let input_len = job.data.len();
    let mut codec = CODEC_STORED;
    let mut dict = 0;
    let mut stored = Vec::new();
    if let Some((comp, dict_id)) = comp {
        let bound = zstd::zstd_safe::compress_bound(input_len);
        if input_len <= sh.opts.block_size * 2 {
            stored = sh.take_buf(bound);
        }
        if stored.capacity() < bound && stored.try_reserve_exact(bound).is_err() {
            return Err(FormatError::new(&sh.path, 0, Problem::Alloc(bound as u64)));
        }
        match comp.compress_to_buffer(&job.data, &mut stored) {
            Ok(n) if n < input_len => {
                (codec, dict) = if dict_id == 0 {
                    (CODEC_ZSTD, 0)
                } else {
                    (CODEC_ZSTD_DICT, dict_id)
                };
            }
            Ok(_) => {}
            Err(e) => return Err(FormatError::io(&sh.path, 0, "zstd compression failed", e)),
        }
    }
    if codec == CODEC_STORED {
        sh.give_buf(std::mem::replace(&mut stored, job.data));
    } else {
        sh.give_buf(job.data);
    }
    let header = BlockHeader {
        kind: job.kind,
        codec,
        dict,
        records: job.records,
        aux: job.aux,
        uncompressed_len: input_len as u64,
        stored_len: stored.len() as u64,
        payload_checksum: payload_checksum(&stored),
        // Numbered by the output thread, in file order.
        seq: 0,
    };
    Ok(DoneBlock { header, stored })
}

/// Staged output above this is written before the next block is added.
const OUT_STAGE: usize = 1 << 20;

/// The output thread's side of the file: blocks in seal order, staged so that a batch of small
/// blocks goes out in one write.
struct Output {
    file: Box<dyn Write + Send>,
    offset: u64,
    stage: Vec<u8>,
    /// Headers of the blocks in `stage`, indexed once they are in the file.
    staged: Vec<BlockHeader>,
    index: FooterIndex,
    summary: WriteSummary,
    broken: bool,
}

impl Output {
    /// Adds one block, writing what is staged first when the stage would grow too large; a
    /// large payload goes out from its own buffer rather than through the stage.
    fn add(&mut self, sh: &Shared, b: &DoneBlock) {
        let big = b.stored.len() >= OUT_STAGE / 4;
        if !self.stage.is_empty() && (big || self.stage.len() + b.stored.len() > OUT_STAGE) {
            self.write(sh, &[]);
        }
        if self.broken {
            return;
        }
        let mut header = b.header;
        header.seq = (self.index.blocks.len() + self.staged.len()) as u32;
        self.stage.extend_from_slice(&header.encode());
        self.staged.push(header);
        if big {
            self.write(sh, &b.stored);
        } else {
            self.stage.extend_from_slice(&b.stored);
        }
    }

    /// Writes the stage (then `tail`, the last staged block's payload) and indexes its blocks;
    /// on failure records the error and stops writing (the blocks are not indexed).
    fn write(&mut self, sh: &Shared, tail: &[u8]) {
        if self.broken || self.staged.is_empty() {
            self.stage.clear();
            self.staged.clear();
            return;
        }
        let res = self
            .file
            .write_all(&self.stage)
            .and_then(|_| self.file.write_all(tail));
        self.stage.clear();
        if self.stage.capacity() > 4 * OUT_STAGE {
            self.stage = Vec::new();
        }
        match res {
            Ok(()) => {
                for h in self.staged.drain(..) {
                    self.index
                        .blocks
                        .push(BlockEntry::from_header(self.offset, &h));
                    self.offset += h.total_len();
                    self.summary.blocks += 1;
                    self.summary.uncompressed_bytes += h.uncompressed_len;
                    self.summary.compressed_bytes += h.stored_len;
                }
            }
            Err(e) => {
                self.staged.clear();
                self.broken = true;
                let mut st = lock(&sh.state);
                sh.fail(
                    &mut st,
                    FormatError::io(&sh.path, self.offset, "cannot write block", e),
                );
            }
        }
    }
}

fn output_loop(
    sh: &Shared,
    file: Box<dyn Write + Send>,
    body_start: u64,
    rx: Receiver<Result<Done, FormatError>>,
) -> Result<WriteSummary, FormatError> {
    let mut out = Output {
        file,
        offset: body_start,
        stage: Vec::new(),
        staged: Vec::new(),
        index: FooterIndex::default(),
        summary: WriteSummary::default(),
        broken: false,
    };
    let mut next = 0u64;
    let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
    for done in rx {
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                out.broken = true;
                let mut st = lock(&sh.state);
                sh.fail(&mut st, e);
                sh.cond.notify_all();
                continue;
            }
        };
        pending.insert(done.seq, done);
        // Every job now in order goes out together (a batch of small blocks in one write), and
        // counts as written only once it is in the file.
        let (mut freed, first) = (0usize, next);
        while let Some(d) = pending.remove(&next) {
            for b in d.blocks {
                out.add(sh, &b);
                sh.give_buf(b.stored);
            }
            next += 1;
            freed += d.input_len;
        }
        if next == first {
            continue;
        }
        out.write(sh, &[]);
        let mut st = lock(&sh.state);
        st.in_flight_bytes = st.in_flight_bytes.saturating_sub(freed);
        st.written_upto = next;
        sh.cond.notify_all();
    }
    let Output {
        mut file,
        offset,
        mut index,
        mut summary,
        broken,
        ..
    } = out;
    if broken {
        let st = lock(&sh.state);
        return Err(match &st.error {
            Some(e) => e.duplicate(),
            None => FormatError::new(&sh.path, offset, Problem::WriterFailed("unknown".into())),
        });
    }
    {
        let open = sh.open.lock();
        index.records = open.total_records;
        index.frames_ended = open.frames_ended;
        let mut counts = open.counts.clone();
        let call = CALL_VARIANT as usize;
        if counts.len() <= call {
            counts.resize(call + 1, (0, ""));
        }
        counts[call] = (open.calls, "Call");
        index.record_counts = counts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, name)| (name.to_string(), *n))
            .collect();
        let blobs = lock(&sh.blobs);
        index.blobs = blobs.next;
        index.blob_dedup_hits = blobs.dedup_hits;
    }
    summary.records = index.records;
    summary.frames = index.frames_ended;
    summary.blobs = index.blobs;
    summary.blob_dedup_hits = index.blob_dedup_hits;

    let block = index
        .encode_block(index.blocks.len() as u32)
        .map_err(|e| FormatError::new(&sh.path, offset, Problem::Encode(e)))?;
    let trailer = encode_trailer(offset, block.len() as u64);
    file.write_all(&block)
        .and_then(|_| file.write_all(&trailer))
        .and_then(|_| file.flush())
        .map_err(|e| FormatError::io(&sh.path, offset, "cannot write footer", e))?;
    summary.file_bytes = offset + block.len() as u64 + TRAILER_LEN as u64;
    Ok(summary)
}

#[cfg(test)]
mod tests {
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
                bincode::serde::encode_to_vec(Record::Call(call.clone()), bincode_config())
                    .unwrap();
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
}
