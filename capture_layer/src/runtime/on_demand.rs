//! Capture on demand's return to tracking: when a trigger's last frame ends, its trace is
//! finished and the tracker, which did not see the captured frames, reads them back from the
//! finished file, so the next trigger's snapshot rebuilds the state as the app has it then.
//!
//! Depends on: `statics`, `writer` (the tracker and pending state), `frames` (closing a trace),
//! `trim::tracker`.

use super::deferred::lock_tracker;
use super::frames::close_trace;
use super::statics::{log_once, CaptureGuard, HOT};
use super::writer::{abandon_tracking, lock_pending};
use crate::trim::tracker::Tracker;
use format::record::Record;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::Ordering;

/// The trigger's frames are done (`next_frame` begins now): finishes the trace and tracks again.
/// Called with the capture lock held; takes the tracker's inside it (the usual order).
pub(super) fn back_to_tracking(guard: &mut CaptureGuard, next_frame: u64) {
    let mut tracker = lock_tracker();
    let Some(cap) = guard.take() else { return };
    if tracker.is_none() {
        HOT.active.store(false, Ordering::Release);
        drop(tracker);
        close_trace(cap, "capture on demand: the triggered frames are done");
        return;
    }
    // Calls from here on wait at the tracker's lock (held) until the read-back is done; their
    // seqs follow the trace's.
    HOT.tracking.store(true, Ordering::Release);
    HOT.active.store(false, Ordering::Release);
    let path = cap.path.clone();
    let t0 = super::clock::now_ns();
    close_trace(cap, "capture on demand: the triggered frames are done");
    let fed = match tracker.as_mut() {
        Some(t) => catch_unwind(AssertUnwindSafe(|| read_back(t, &path)))
            .unwrap_or_else(|_| Err("internal error in the state tracker".into())),
        None => Ok(0),
    };
    if let Some(p) = lock_pending().as_mut() {
        p.frame = next_frame;
        super::writer::TRACKED_SUBMIT.store(false, Ordering::Relaxed);
    }
    // Calls still wait at the tracker's lock: buffers begun after it are light again.
    super::light::set_mode(true);
    if let Err(e) = fed {
        drop(tracker);
        abandon_tracking(&format!(
            "capture on demand cannot track on after {}: {e}",
            path.display()
        ));
        return;
    }
    let ms = super::clock::now_ns().saturating_sub(t0) as f64 / 1e6;
    log_once(
        "back-to-tracking",
        &format!(
            "capture on demand: trace written, tracking until the next trigger (finishing it and \
             reading {} records back into the tracker took {ms:.1} ms)",
            fed.unwrap_or(0)
        ),
    );
}

/// Offers the state-building records a trace holds after its snapshot to `tracker`; returns how
/// many.
fn read_back(tracker: &mut Tracker, path: &Path) -> Result<u64, String> {
    let r = format::TraceReader::open(path).map_err(|e| e.to_string())?;
    let mut after_snapshot = false;
    let mut n = 0;
    for rec in r.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        match rec {
            Record::StateEnd(_) => after_snapshot = true,
            Record::Call(_)
            | Record::QueryPool(_)
            | Record::DebugName(_)
            | Record::QueryOp(_)
            | Record::RegionCounters(_)
            | Record::Device(_)
                if after_snapshot =>
            {
                tracker.offer(rec);
                n += 1;
            }
            _ => {}
        }
    }
    Ok(n)
}
