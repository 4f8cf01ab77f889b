//! Deferred tracking: before a trimmed capture's first frame (and between capture on demand's
//! triggers) the app's threads only encode a call and append it to a queue; the layer's tracking
//! thread (`quarry-track`) feeds the queue to the tracker. The tracker's decoding, maps and
//! layout bookkeeping (1–3.5 µs for a submit, an allocation or a destruction) leave the app's
//! thread, which pays the encoding and one uncontended lock per call: one locked instruction
//! (the lock's exchange; the release is a plain store and the seq a plain add under the lock).
//!
//! Whoever reads or ends the tracker (the snapshot writer, capture on demand's return to
//! tracking, finalization) takes it with [`lock_tracker`], which feeds it everything queued and
//! holds the queue until the guard is dropped: the app's threads wait there, as they used to wait
//! at the tracker's own lock, so a call is either in the tracker or goes to the trace after the
//! snapshot, never lost between them. Lock order: tracker, then queue; the call path takes only
//! the queue.
//!
//! Depends on: `statics` (the tracking flag), `clock` (its anchor), `trim::tracker`.

use super::clock::anchor_now;
use super::statics::{log_once, HOT};
use crate::trim::tracker::{CallAt, Tracker};
use format::record::{QueryOp, Record};
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

static TRACKER: Mutex<Option<Tracker>> = Mutex::new(None);
static QUEUE: QueueLock = QueueLock::new();
static THREAD: AtomicBool = AtomicBool::new(false);
/// The tracking thread, unparked when the queue reaches `WAKE_AT`.
static TRACK_THREAD: OnceLock<std::thread::Thread> = OnceLock::new();

/// Queued items at which a push wakes the tracking thread (it also wakes every `PERIOD`).
const WAKE_AT: usize = 512;
/// Past this many items or parameter bytes the pushing thread feeds the tracker itself, so a
/// stalled tracking thread cannot make the queue grow without bound.
const FULL_ITEMS: usize = 1 << 16;
const FULL_BYTES: usize = 64 << 20;
const _: () = assert!(std::mem::size_of::<Item>() <= 48);
const PERIOD: Duration = Duration::from_millis(4);

/// One queued item, 48 bytes: the producer writes the queue's memory after the tracking thread
/// read it on another core, so each cache line an item takes costs the app's thread a transfer.
enum Item {
    /// A call whose parameters are in `bytes`.
    Call(CallAt),
    /// The next of `recs`.
    Rec,
    /// The next of `ops`: a query command's record, queued with its call.
    Op,
    /// The command buffer just begun is light (`light`).
    Light(u64),
}

/// `repr(C)`: the lock and the two buffers every call appends to share the first cache line.
#[repr(C)]
struct Queue {
    items: Vec<Item>,
    bytes: Vec<u8>,
    recs: Vec<Record>,
    ops: Vec<QueryOp>,
}

/// The queue behind a one-byte lock taken with one atomic exchange and released with a plain
/// store. A locked instruction waits for every store before it to reach the cache: parking_lot's
/// unlock (a compare-exchange) waited there for the lines of the call just queued, which the
/// tracking thread read last, on another core (they miss); a release store does not wait.
/// Waiters spin, then yield, then sleep in short steps: the lock is held for a call's encoding,
/// the tracking thread's swap of buffers, or (rarely, for milliseconds) a snapshot.
#[repr(C, align(64))]
struct QueueLock {
    locked: AtomicBool,
    queue: UnsafeCell<Queue>,
}

// SAFETY: `queue` is only reached through a `QueueGuard`, which holds `locked`.
unsafe impl Sync for QueueLock {}

impl QueueLock {
    const fn new() -> Self {
        QueueLock {
            locked: AtomicBool::new(false),
            queue: UnsafeCell::new(Queue::new()),
        }
    }

    #[inline]
    fn lock(&'static self) -> QueueGuard {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        QueueGuard(self)
    }

    #[cold]
    fn lock_contended(&self) {
        let mut waits = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                match waits {
                    0..64 => std::hint::spin_loop(),
                    64..128 => std::thread::yield_now(),
                    _ => std::thread::sleep(Duration::from_micros(20)),
                }
                waits = waits.saturating_add(1);
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// The queue, locked until dropped.
struct QueueGuard(&'static QueueLock);

impl std::ops::Deref for QueueGuard {
    type Target = Queue;
    fn deref(&self) -> &Queue {
        // SAFETY: the lock is held.
        unsafe { &*self.0.queue.get() }
    }
}

impl std::ops::DerefMut for QueueGuard {
    fn deref_mut(&mut self) -> &mut Queue {
        // SAFETY: the lock is held, and this guard is its only holder.
        unsafe { &mut *self.0.queue.get() }
    }
}

impl Drop for QueueGuard {
    #[inline]
    fn drop(&mut self) {
        self.0.locked.store(false, Ordering::Release);
    }
}

impl Queue {
    const fn new() -> Self {
        Queue {
            items: Vec::new(),
            bytes: Vec::new(),
            recs: Vec::new(),
            ops: Vec::new(),
        }
    }

    fn full(&self) -> bool {
        self.items.len() >= FULL_ITEMS || self.bytes.len() >= FULL_BYTES
    }

    /// Offers every item to `tracker` in order and empties the queue (keeping its allocations).
    /// Err when the tracker panicked: it is dropped, and the caller abandons tracking.
    fn feed(&mut self, tracker: &mut Option<Tracker>) -> Result<(), ()> {
        let Queue {
            items,
            bytes,
            recs,
            ops,
        } = self;
        let result = match tracker.as_mut() {
            None => Ok(()),
            Some(t) => catch_unwind(AssertUnwindSafe(|| {
                let mut recs = recs.drain(..);
                let mut ops = ops.drain(..);
                for item in items.drain(..) {
                    match item {
                        Item::Call(c) => t.offer_call(c.with(bytes)),
                        Item::Rec => {
                            if let Some(rec) = recs.next() {
                                t.offer(rec);
                            }
                        }
                        Item::Op => {
                            if let Some(op) = ops.next() {
                                t.offer(Record::QueryOp(op));
                            }
                        }
                        Item::Light(cb) => t.mark_light(cb),
                    }
                }
            }))
            .map_err(|_| ()),
        };
        items.clear();
        bytes.clear();
        recs.clear();
        ops.clear();
        if result.is_err() {
            *tracker = None;
        }
        result
    }
}

/// The tracker, fed with everything queued; the queue stays locked (calls wait) while it is held.
pub(super) struct TrackerGuard {
    tracker: MutexGuard<'static, Option<Tracker>>,
    _queue: QueueGuard,
}

impl std::ops::Deref for TrackerGuard {
    type Target = Option<Tracker>;
    fn deref(&self) -> &Option<Tracker> {
        &self.tracker
    }
}

impl std::ops::DerefMut for TrackerGuard {
    fn deref_mut(&mut self) -> &mut Option<Tracker> {
        &mut self.tracker
    }
}

fn tracker_mutex() -> MutexGuard<'static, Option<Tracker>> {
    TRACKER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tracker, up to date with every call made so far (see the module's comment).
pub(super) fn lock_tracker() -> TrackerGuard {
    let mut tracker = tracker_mutex();
    let mut queue = QUEUE.lock();
    if queue.feed(&mut tracker).is_err() {
        // Abandoned here rather than through `writer::abandon_tracking`, which takes these locks.
        HOT.tracking.store(false, Ordering::Release);
        log_once(
            "tracking-failed",
            "internal error in the state tracker; the trimmed capture is abandoned, the \
             application continues unchanged",
        );
    }
    TrackerGuard {
        tracker,
        _queue: queue,
    }
}

/// Sets the tracker that calls are fed to (None ends tracking's bookkeeping) and starts the
/// tracking thread the first time.
pub(super) fn set_tracker(t: Option<Tracker>) {
    let starting = t.is_some();
    *lock_tracker() = t;
    if starting && !THREAD.swap(true, Ordering::AcqRel) {
        let spawned = std::thread::Builder::new()
            .name("quarry-track".into())
            .spawn(run);
        match spawned {
            Ok(t) => {
                let _ = TRACK_THREAD.set(t.thread().clone());
            }
            // Without the thread, pushes feed the tracker themselves once the queue is full.
            Err(_) => THREAD.store(false, Ordering::Release),
        }
    }
}

/// What became of a call offered to the tracker.
pub(super) enum Pushed {
    /// Queued under `seq`; `unknown`: the sType of a chained struct the encoder could not
    /// serialize.
    Queued { seq: u64, unknown: Option<i32> },
    /// Tracking has ended (the snapshot was written meanwhile): the call goes to the trace.
    Closed,
    /// The encoder panicked (or the call does not fit the queue); nothing was queued.
    Panicked,
}

/// Queues a call for the tracker, encoded by `encode` (false: it panicked) straight into the
/// queue's parameter bytes, and numbers it; then, under the same lock, the query records `ops`
/// appends for that seq (a query command's), and a begin's light mark. Inlined into the call path
/// (`record::track_call`).
#[inline(always)]
pub(super) fn push_encoded(
    thread: u32,
    host_ns: u64,
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder) -> bool,
    ops: impl FnOnce(u64, &mut Vec<QueryOp>),
    light: Option<u64>,
) -> Pushed {
    let mut q = QUEUE.lock();
    // Under the queue's lock: the snapshot clears the flag while it holds the queue.
    if !HOT.tracking.load(Ordering::Acquire) {
        return Pushed::Closed;
    }
    // Numbered before the encoding (a call whose encoder panics leaves a gap, and capture stops).
    let seq = next_seq();
    let (before, at) = (q.items.len(), q.bytes.len());
    let mut e = vkstream::Encoder::from_vec(std::mem::take(&mut q.bytes));
    let ok = encode(&mut e);
    let unknown = e.unknown_stype();
    q.bytes = e.into_bytes();
    // Offsets are 32-bit: the queue is drained at `FULL_BYTES`, so only one call of 4 GiB fails.
    if !ok || q.bytes.len() > u32::MAX as usize {
        q.bytes.truncate(at);
        return Pushed::Panicked;
    }
    let len = (q.bytes.len() - at) as u32;
    q.items.push(Item::Call(CallAt {
        seq,
        host_ns,
        thread,
        cmd,
        result,
        at: at as u32,
        len,
    }));
    let op_at = q.ops.len();
    ops(seq, &mut q.ops);
    for _ in op_at..q.ops.len() {
        q.items.push(Item::Op);
    }
    if let Some(cb) = light {
        q.items.push(Item::Light(cb));
    }
    after_push(q, before);
    Pushed::Queued { seq, unknown }
}

/// The next seq, while tracking, under the queue's lock. Every seq taken while tracking is taken
/// under it (calls and records here, the snapshot's holding `lock_tracker`); elsewhere one is
/// taken only while a trace is open, under the capture lock, and a trace is open while tracking
/// only during the snapshot (which holds the queue) and it is closed (`on_demand`) holding both.
/// So a plain load and store serve, not a locked instruction (one less per call).
#[inline(always)]
fn next_seq() -> u64 {
    let seq = HOT.seq.load(Ordering::Relaxed);
    HOT.seq.store(seq + 1, Ordering::Relaxed);
    seq
}

/// Queues the record `make` builds for the next seq (under the queue's lock: `make` must not
/// record); gives `make` back when tracking has ended.
pub(super) fn push_numbered<F: FnOnce(u64) -> Record>(make: F) -> Result<u64, F> {
    let mut q = QUEUE.lock();
    if !HOT.tracking.load(Ordering::Acquire) {
        return Err(make);
    }
    let seq = next_seq();
    let before = q.items.len();
    q.items.push(Item::Rec);
    q.recs.push(make(seq));
    after_push(q, before);
    Ok(seq)
}

/// Queues records for the tracker under one lock; gives them all back when tracking has ended.
pub(super) fn push_records(recs: impl Iterator<Item = Record>) -> Vec<Record> {
    let mut q = QUEUE.lock();
    if !HOT.tracking.load(Ordering::Acquire) {
        return recs.collect();
    }
    let before = q.items.len();
    for rec in recs {
        q.items.push(Item::Rec);
        q.recs.push(rec);
    }
    after_push(q, before);
    Vec::new()
}

#[inline(always)]
fn after_push(q: QueueGuard, before: usize) {
    let (n, full) = (q.items.len(), q.full());
    drop(q);
    if (before < WAKE_AT && n >= WAKE_AT) || full {
        wake_or_drain(full);
    }
}

#[cold]
#[inline(never)]
fn wake_or_drain(full: bool) {
    if let Some(t) = TRACK_THREAD.get() {
        t.unpark();
    }
    if full {
        drain();
    }
}

/// Feeds what is queued to the tracker on this thread (abandoning tracking if it panics).
fn drain() {
    let mut local = Queue::new();
    drain_into(&mut local);
}

/// `drain` with the caller's spare queue: the two swap, so their allocations are reused.
fn drain_into(local: &mut Queue) {
    let mut tracker = tracker_mutex();
    std::mem::swap(&mut *QUEUE.lock(), local);
    if local.feed(&mut tracker).is_err() {
        drop(tracker);
        super::writer::abandon_tracking("internal error in the state tracker");
    }
}

/// The tracking thread: feeds the queue every `PERIOD`, or sooner when it fills. While tracking
/// it also keeps the fast call clock anchored (`clock::anchor_now`, a no-op while the last anchor
/// is recent), for apps whose frame ends do not come often enough: without an anchor every
/// tracked call reads CLOCK_MONOTONIC.
fn run() {
    let mut local = Queue::new();
    loop {
        if QUEUE.lock().items.len() < WAKE_AT {
            let tracking = HOT.tracking.load(Ordering::Relaxed);
            let period = if tracking { PERIOD } else { PERIOD * 25 };
            std::thread::park_timeout(period);
            if tracking {
                anchor_now();
            }
        }
        if QUEUE.lock().items.is_empty() {
            continue;
        }
        drain_into(&mut local);
    }
}
