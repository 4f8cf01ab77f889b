//! The trace writer's side of the runtime: opening the trace (or, for a trimmed capture, the
//! tracker), records written under the capture lock, failure handling, and the state snapshot's
//! records once the snapshot writer (`trim::snapshot`) has built them.
//!
//! Depends on: `statics`, `clock`, `prof`, `settings`, `trim::tracker` (bookkeeping only). The
//! call path (`record`) and frames (`frames`) build on this.

use super::clock::{now_ns, unix_ns};
use super::deferred::{lock_tracker, push_numbered, push_records, set_tracker};
use super::statics::{
    capturing, lock_capture, log_once, recording, Capture, CaptureGuard, Stats, HOT,
};
use crate::settings::{Given, Settings};
use crate::trim::tracker::{SnapRecord, Snapshot, Tracker};
use format::record::{self, Record};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

// ---- settings -----------------------------------------------------------------------------------

/// The settings for a trace opened now: the environment, over the app's layer settings (`layer`, from
/// its `VkInstanceCreateInfo`). A bad value is logged and disables this capture.
pub fn settings(layer: &Given) -> Settings {
    match Settings::resolve(&Given::from_env(), layer) {
        Ok(s) => s,
        Err(e) => {
            log_once(&format!("settings {e}"), &format!("{e}; capture disabled"));
            Settings {
                disabled: true,
                ..Settings::default()
            }
        }
    }
}

/// Trace paths (before numbering) this process opened: a path used again gets `.N`.
static OPENED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set once the frame range is done or an internal error happened: no new trace opens.
pub(super) static ENDED: AtomicBool = AtomicBool::new(false);
/// `end=instances`: the capture open now ends when no instance is left alive, not at exit.
pub(super) static END_WITH_INSTANCES: AtomicBool = AtomicBool::new(false);
/// Apps with a swapchain get frame boundaries at present only.
pub(super) static SWAPCHAIN_SEEN: AtomicBool = AtomicBool::new(false);
/// What a trimmed capture opens its trace with at the snapshot, and the tracked frame counter.
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);
/// While tracking: a submit happened since the last frame boundary (`Capture::submitted` of a
/// trace; here outside the pending lock, which submits would otherwise take).
pub(super) static TRACKED_SUBMIT: AtomicBool = AtomicBool::new(false);

pub(super) struct Pending {
    pub(super) application: String,
    pub(super) settings: Settings,
    pub(super) first: u64,
    pub(super) frame: u64,
    /// Capture on demand: the pending capture survives each trace (`first` is unused).
    pub(super) trigger: Option<TriggerPlan>,
    /// Frame boundaries a due trigger's snapshot has waited for light command buffers.
    pub(super) postponed: u32,
}

/// Capture on demand's state between traces.
pub(super) struct TriggerPlan {
    pub(super) default_frames: u32,
    pub(super) at_frame: Option<u64>,
    /// Frames the trigger being served asked for, and what sent it.
    pub(super) frames: u32,
    pub(super) from: String,
    /// When that trigger came (`control::monotonic_ns`).
    pub(super) asked_at: u64,
}

impl TriggerPlan {
    /// At a frame boundary while tracking, `frame` now beginning: whether a trigger asks for a
    /// capture from here. One relaxed load unless a trigger came.
    #[inline]
    pub(super) fn due(&mut self, frame: u64) -> bool {
        let asked = crate::control::take_request();
        if asked > 0 {
            let (from, at) = crate::control::request_source();
            (self.frames, self.from, self.asked_at) = (asked, from, at);
            return true;
        }
        if self.at_frame == Some(frame) {
            self.frames = self.default_frames;
            self.from = format!("trigger-frame {frame}");
            self.asked_at = crate::control::monotonic_ns();
            return true;
        }
        false
    }
}

/// Traces capture on demand has written in this process (they are numbered from 1).
static TRIGGERED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The next trigger trace's path: `FILE_K`, skipping names that exist (never overwritten).
fn next_triggered_path(base: &std::path::Path) -> (u32, PathBuf) {
    loop {
        let k = TRIGGERED.fetch_add(1, Ordering::Relaxed) + 1;
        let path = crate::settings::triggered(base, k);
        if path.symlink_metadata().is_err() || k > 100_000 {
            return (k, path);
        }
    }
}

/// The launcher went away (its status channel closed): the trace in progress is finished and
/// capture ends for good; the app goes on, passed through.
fn launcher_gone() {
    ENDED.store(true, Ordering::Relaxed);
    log_once(
        "launcher-gone",
        "the quarry launcher is gone: finishing the trace; the application continues uncaptured",
    );
    super::frames::finish("the quarry launcher died");
}

pub(super) fn lock_pending() -> MutexGuard<'static, Option<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Gives up a trimmed capture before its first frame: logged once, nothing written, calls pass.
pub(super) fn abandon_tracking(message: &str) {
    HOT.tracking.store(false, Ordering::Release);
    ENDED.store(true, Ordering::Relaxed);
    *lock_tracker() = None;
    *lock_pending() = None;
    log_once(
        "tracking-failed",
        &format!(
            "{message}; the trimmed capture is abandoned, the application continues unchanged"
        ),
    );
}

/// Opens the trace at the first vkCreateInstance (with `end=instances`, the first after every
/// instance was destroyed too); `layer` holds the layer settings of that instance's create info.
/// True when a trace (or a trimmed capture's tracking) started here: the caller then finishes it
/// at process exit. Later instances go into the same trace.
pub fn open_capture(application: &str, layer: &Given) -> bool {
    if ENDED.load(Ordering::Relaxed) || recording() {
        return false;
    }
    let s = settings(layer);
    if s.disabled {
        return false;
    }
    END_WITH_INSTANCES.store(s.end_with_instances, Ordering::Relaxed);
    HOT.profile.store(
        std::env::var_os("QUARRY_CAPTURE_PROFILE").is_some_and(|v| v == "1"),
        Ordering::Relaxed,
    );
    crate::control::start(
        s.trigger.as_ref(),
        crate::control::Hooks {
            on_parent_death: launcher_gone,
        },
        |m| log_once(m, m),
    );
    let trigger = s.trigger.as_ref().map(|t| TriggerPlan {
        default_frames: t.frames,
        at_frame: t.at_frame,
        frames: t.frames,
        from: String::new(),
        asked_at: 0,
    });
    let first = match &trigger {
        // Never reached by counting: triggers start the traces.
        Some(_) => Some(u64::MAX),
        None => s.frames.map(|r| r.first).filter(|&f| f > 0),
    };
    if let Some(first) = first {
        // Trimmed: nothing is written before frame `first`; the tracker keeps the state.
        let mut p = lock_pending();
        if p.is_some() || lock_capture().is_some() {
            return false;
        }
        // A start known ahead turns light tracking off `LIGHT_AHEAD` frames before it.
        let start = trigger.as_ref().map_or(Some(first), |t| t.at_frame);
        *p = Some(Pending {
            application: application.to_string(),
            settings: s,
            first,
            frame: 0,
            trigger,
            postponed: 0,
        });
        set_tracker(Some(Tracker::default()));
        super::light::set_mode(start.is_none_or(|f| f > super::light::AHEAD));
        HOT.tracking.store(true, Ordering::Release);
        register_atfork();
        return true;
    }
    let mut guard = lock_capture();
    if guard.is_some() {
        return false;
    }
    let Some(cap) = new_capture(application, &s, 0, None) else {
        return false;
    };
    register_atfork();
    *guard = Some(cap);
    HOT.active.store(true, Ordering::Release);
    true
}

fn register_atfork() {
    extern "C" fn child() {
        // The child's threads have new OS ids; its main thread keeps the parent's pthread_self.
        HOT.main_self.store(0, Ordering::Relaxed);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain extern "C" fn that only stores an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
}

/// Creates the trace file with its command table (and a note naming the frame range); trimmed
/// captures start at frame `first`. `trigger`: capture on demand's plan, for a trace of its own.
fn new_capture(
    application: &str,
    s: &Settings,
    first: u64,
    trigger: Option<&TriggerPlan>,
) -> Option<Capture> {
    let base = s.file.clone().unwrap_or_else(|| {
        PathBuf::from(crate::settings::default_file_name(
            &crate::settings::exe_name(),
            std::process::id(),
        ))
    });
    let (number, path) = match trigger {
        Some(_) => {
            let (k, p) = next_triggered_path(&base);
            (Some(k), p)
        }
        None => {
            let n = {
                let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
                let n = opened.iter().filter(|p| **p == base).count() as u32;
                opened.push(base.clone());
                n
            };
            (None, crate::settings::numbered(&base, n))
        }
    };
    let header = record::Header {
        kind: record::FileKind::Trace,
        writer: format!("quarry-capture {}", env!("CARGO_PKG_VERSION")),
        created_unix_ns: unix_ns(),
        device: None,
        application: application.to_string(),
    };
    let writer = match format::TraceWriter::create(&path, header) {
        Ok(w) => w,
        Err(e) => {
            log_once(
                "open",
                &format!(
                    "cannot create trace {}: {e}; capture disabled",
                    path.display()
                ),
            );
            crate::control::status(&format!(
                "error cannot create trace {}: {e}",
                path.display()
            ));
            ENDED.store(true, Ordering::Relaxed);
            return None;
        }
    };
    if trigger.is_some() {
        crate::control::status(&format!("open {}", path.display()));
    }
    let last_frame = match trigger {
        Some(t) => Some(first + u64::from(t.frames.max(1)) - 1),
        None => s.frames.and_then(|r| r.last),
    };
    let cap = Capture {
        writer,
        path,
        frame: first,
        first_frame: first,
        submitted: false,
        last_frame,
        stats: Stats::default(),
        triggered: number,
    };
    let commands: Vec<String> = vkstream::COMMANDS.iter().map(|c| c.to_string()).collect();
    if let Err(e) = cap.writer.write(&Record::CommandTable(commands)) {
        log_once(
            "open",
            &format!(
                "cannot write trace {}: {e}; capture disabled",
                cap.path.display()
            ),
        );
        ENDED.store(true, Ordering::Relaxed);
        return None;
    }
    if let (Some(t), Some(k), Some(last)) = (trigger, number, last_frame) {
        let _ = cap.writer.write(&Record::Note(record::Note {
            host_ns: now_ns(),
            message: format!(
                "capture on demand, trace {k}: {} asked for {} frames; the trace starts with a \
                 state snapshot taken when frame {first} began and ends after frame {last}",
                t.from, t.frames
            ),
        }));
    } else if let Some(range) = s.frames {
        let last = range
            .last
            .map(|l| l.to_string())
            .unwrap_or_else(|| "exit".into());
        let msg = if range.first > 0 {
            format!(
                "{}={}-{last}: the trace starts with a state snapshot taken when frame {} began and ends \
                 after frame {last}",
                s.frames_from, range.first, range.first
            )
        } else {
            format!(
                "{}={}-{last}: the trace ends after frame {last}",
                s.frames_from, range.first
            )
        };
        let _ = cap.writer.write(&Record::Note(record::Note {
            host_ns: now_ns(),
            message: msg,
        }));
    }
    Some(cap)
}

pub fn trace_path() -> Option<PathBuf> {
    lock_capture().as_ref().map(|c| c.path.clone())
}

/// Writes one record under the ordering lock. `make` gets the record's `seq` and runs under that
/// lock (the tracking queue's while tracking): it must not record. Returns that seq.
pub fn emit(make: impl FnOnce(u64) -> Record) -> Option<u64> {
    if !recording() {
        return None;
    }
    let mut make = make;
    if HOT.tracking.load(Ordering::Acquire) {
        // Numbered under the tracking queue's lock, as tracked calls are (see `deferred`).
        match push_numbered(make) {
            Ok(seq) => return Some(seq),
            // The snapshot was written meanwhile: the record goes to the trace.
            Err(m) => make = m,
        }
    }
    let mut guard = lock_capture();
    let cap = guard.as_mut()?;
    // Numbered under the lock, so records reach the file in seq order.
    let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
    let rec = make(seq);
    if let Err(e) = cap.writer.write(&rec) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
        return None;
    }
    Some(seq)
}

/// Writes host-memory contents: `writes` are (memory, offset, bytes); large ones become blobs.
pub fn emit_memory(writes: Vec<(u64, u64, Vec<u8>)>, scan: Option<(u64, u64)>) {
    if !capturing() {
        return;
    }
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else { return };
    if let Some((bytes, ns)) = scan {
        cap.stats.scans += 1;
        cap.stats.scanned_bytes += bytes;
        cap.stats.scan_ns += ns;
    }
    for (memory, offset, bytes) in writes {
        cap.stats.written_bytes += bytes.len() as u64;
        let data = match cap.writer.payload(&bytes) {
            Ok(p) => p,
            Err(e) => {
                fail_locked(&mut guard, &format!("writing memory contents failed: {e}"));
                return;
            }
        };
        let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
        let rec = Record::MemoryWrite(record::MemoryWrite {
            seq,
            memory,
            offset,
            data,
        });
        if let Err(e) = cap.writer.write(&rec) {
            fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
            return;
        }
    }
}

/// Runs layer bookkeeping; a panic inside stops capturing instead of unwinding into the app.
pub fn guard<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            fail(&format!("internal error in {what}"));
            None
        }
    }
}

/// Stops capturing after an internal error: logged once, a `Note` written, the trace flushed but not
/// finalized (so it reads as incomplete); calls keep passing through.
pub fn fail(message: &str) {
    let mut guard = lock_capture();
    fail_locked(&mut guard, message);
}

pub(super) fn fail_locked(guard: &mut CaptureGuard, message: &str) {
    HOT.active.store(false, Ordering::Release);
    HOT.tracking.store(false, Ordering::Release);
    ENDED.store(true, Ordering::Relaxed);
    log_once(
        "fail",
        &format!("{message}; capture stopped, the application continues unchanged"),
    );
    crate::control::status(&format!("error {message}"));
    if let Some(cap) = guard.take() {
        let note = record::Note {
            host_ns: now_ns(),
            message: format!("capture stopped: {message}"),
        };
        let _ = cap.writer.write(&Record::Note(note));
        let _ = cap.writer.flush();
        // Dropped without finish(): no footer, so readers report the trace incomplete.
        drop(cap);
    }
}

/// Adds `message` as a `Note` record.
pub fn note(message: String) {
    emit_plain(Record::Note(record::Note {
        host_ns: now_ns(),
        message,
    }));
}

/// Writes a record that carries no seq.
pub fn emit_plain(rec: Record) {
    emit_plain_all(std::iter::once(rec));
}

/// Writes records that carry no seq, under one lock.
pub fn emit_plain_all(recs: impl IntoIterator<Item = Record>) {
    if !recording() {
        return;
    }
    if HOT.tracking.load(Ordering::Acquire) {
        // Given back when the snapshot was written meanwhile: they go to the trace.
        let rest = push_records(recs.into_iter());
        if !rest.is_empty() {
            write_all(&mut lock_capture(), rest.into_iter());
        }
        return;
    }
    let mut recs = recs.into_iter().peekable();
    if recs.peek().is_some() {
        write_all(&mut lock_capture(), recs);
    }
}

pub(super) fn write_all(guard: &mut CaptureGuard, recs: impl Iterator<Item = Record>) {
    let Some(cap) = guard.as_mut() else { return };
    for rec in recs {
        if let Err(e) = cap.writer.write(&rec) {
            fail_locked(guard, &format!("writing the trace failed: {e}"));
            return;
        }
    }
}

/// Accumulates shadow-compare cost without writing anything.
pub fn add_scan_stats(bytes: u64, ns: u64) {
    if let Some(cap) = lock_capture().as_mut() {
        cap.stats.scans += 1;
        cap.stats.scanned_bytes += bytes;
        cap.stats.scan_ns += ns;
    }
}

/// Flags of the records a reader can use to place a device in the trace.
pub fn emit_device(summary: record::DeviceSummary) {
    emit_plain(Record::Device(summary));
}

// ---- trimmed capture: writing the snapshot ------------------------------------------------------

/// Frame `first` began: opens the trace and writes the state snapshot that `build` makes from the
/// tracker (called with the capture and tracker locks held), then capture goes on as usual. `t0`:
/// when the snapshot began (the snapshot writer waited for the GPU and read memory since).
pub fn write_snapshot(t0: u64, build: impl FnOnce(&Tracker) -> Snapshot) {
    // Capture on demand keeps its pending state (and tracker) for the next trigger.
    let (application, settings, first, trigger) = {
        let mut p = lock_pending();
        match p.as_mut() {
            None => return,
            Some(t) if t.trigger.is_some() => (
                t.application.clone(),
                t.settings.clone(),
                t.frame,
                t.trigger.as_ref().map(|t| TriggerPlan {
                    from: t.from.clone(),
                    ..*t
                }),
            ),
            Some(_) => {
                let t = p.take().expect("matched above");
                (t.application, t.settings, t.first, None)
            }
        }
    };
    let mut guard = lock_capture();
    let Some(cap) = new_capture(&application, &settings, first, trigger.as_ref()) else {
        abandon_tracking("no trace could be opened");
        return;
    };
    let mut tracker_guard = lock_tracker();
    let Some(tracker) = tracker_guard.as_ref() else {
        return;
    };
    let snap = build(tracker);
    let undecodable = tracker.undecodable;
    if trigger.is_none() {
        *tracker_guard = None;
    }
    let write = |cap: &mut Capture| -> Result<(u64, u64), format::FormatError> {
        cap.writer.set_frame(first)?;
        cap.writer.write(&Record::StateBegin(record::StateBegin {
            first_frame: first,
            host_ns: t0,
        }))?;
        let (mut calls, mut bytes) = (0u64, 0u64);
        for r in snap.records {
            match r {
                SnapRecord::Kept(rec) => {
                    calls += matches!(*rec, Record::Call(_)) as u64;
                    cap.writer.write(&rec)?;
                }
                SnapRecord::Memory {
                    memory,
                    offset,
                    bytes: data,
                } => {
                    bytes += data.len() as u64;
                    let payload = cap.writer.payload(&data)?;
                    cap.writer.write(&Record::MemoryWrite(record::MemoryWrite {
                        seq: HOT.seq.fetch_add(1, Ordering::Relaxed),
                        memory,
                        offset,
                        data: payload,
                    }))?;
                }
                SnapRecord::Made { cmd, params } => {
                    calls += 1;
                    cap.writer.write(&Record::Call(record::Call {
                        seq: HOT.seq.fetch_add(1, Ordering::Relaxed),
                        thread: 0,
                        cmd,
                        host_ns: now_ns(),
                        result: 0,
                        params,
                    }))?;
                }
            }
        }
        Ok((calls, bytes))
    };
    let mut cap = cap;
    let result = write(&mut cap);
    *guard = Some(cap);
    let (calls, memory_bytes) = match result {
        Ok(x) => x,
        Err(e) => {
            drop(tracker_guard);
            fail_locked(
                &mut guard,
                &format!("writing the state snapshot failed: {e}"),
            );
            return;
        }
    };
    let mut gaps = snap.gaps;
    if undecodable > 0 {
        gaps.push(format!(
            "{undecodable} calls before the trim point could not be decoded by the tracker"
        ));
    }
    for g in &gaps {
        log_once(g, &format!("snapshot: {g}"));
    }
    let end = Record::StateEnd(record::StateEnd {
        first_frame: first,
        host_ns: now_ns(),
        calls,
        objects: snap.objects,
        memory_bytes,
        gaps,
    });
    let cap = guard.as_mut().expect("set above");
    if let Err(e) = cap.writer.write(&end) {
        drop(tracker_guard);
        fail_locked(
            &mut guard,
            &format!("writing the state snapshot failed: {e}"),
        );
        return;
    }
    if let Some(t) = &trigger {
        // Trigger to first captured frame: the wait for a frame boundary, then the snapshot.
        let now = crate::control::monotonic_ns();
        let waited = (now.saturating_sub(t.asked_at)).saturating_sub(now_ns().saturating_sub(t0));
        let message = format!(
            "capture on demand: {:.2} ms from the trigger to the first captured frame ({:.2} ms to \
             the next frame boundary, {:.2} ms for the snapshot)",
            now.saturating_sub(t.asked_at) as f64 / 1e6,
            waited as f64 / 1e6,
            now_ns().saturating_sub(t0) as f64 / 1e6
        );
        let cap = guard.as_mut().expect("set above");
        if let Err(e) = cap.writer.write(&Record::Note(record::Note {
            host_ns: now_ns(),
            message,
        })) {
            drop(tracker_guard);
            fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
            return;
        }
    }
    // Records offered from here on find no tracker and go to the trace.
    HOT.tracking.store(false, Ordering::Release);
    HOT.active.store(true, Ordering::Release);
    drop(tracker_guard);
    log_once(
        "snapshot",
        &format!(
            "frame {first}: state snapshot written ({calls} calls, {} objects, {memory_bytes} bytes of memory, {} ms)",
            snap.objects,
            now_ns().saturating_sub(t0) / 1_000_000
        ),
    );
}

/// Writing the snapshot panicked: the trimmed capture is abandoned, and a trace already opened is
/// left unfinished, so readers see it incomplete.
pub fn snapshot_failed() {
    abandon_tracking("internal error while writing the state snapshot");
    fail("internal error while writing the state snapshot");
}
