//! Streaming writer: records are encoded into an open block under a mutex; sealed blocks go to
//! compression workers and then to one output thread that writes them in seal order.
//!
//! Made to run inside arbitrary applications (the capture layer): no panics on I/O, no global
//! state, no signal handlers, nothing printed. Memory is bounded by the open block plus
//! `WriterOptions::max_in_flight_bytes` of sealed blocks waiting for compression or the disk.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_128;

use crate::error::{FormatError, Problem};
use crate::layout::*;
use crate::record::{BlobId, Header, Payload, QueryOp, Record};
use crate::{bincode_config, file_kind_byte};

mod encode;
mod workers;

pub use encode::QueryResultsRef;
use encode::{
    call_head, encode_call, encode_query_available, encode_query_op, encode_query_results,
    varint_raw, CALL_VARIANT,
};
use workers::{compress_loop, output_loop, ticker_loop};

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

#[cfg(test)]
mod tests;
