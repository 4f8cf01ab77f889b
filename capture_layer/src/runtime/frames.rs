//! Frames and finalization: submits mark a frame as submitted, boundaries (present, or waits in
//! apps without a swapchain) write `Frame` records and end the frame range, and the trace is
//! finalized at process exit or after the range (per trigger in capture on demand). The trace
//! follows the process, not an instance: when no instance is left alive it is only flushed, so a
//! process that never reaches its exit handlers leaves a trace complete up to there (readers
//! rebuild the missing index), and the next instance goes on in it (`end=instances` finalizes
//! it there instead).
//!
//! Depends on: `statics`, `clock`, `prof`, `writer`, `readback` (its count for the closing note).
//! A trimmed capture's snapshot is not written here: `frame_boundary` says when it is due and
//! `trim::snapshot` writes it.

use super::clock::{anchor_now, now_ns};
use super::statics::{lock_capture, log_once, recording, Capture, CaptureGuard, HOT};
use super::writer::{
    fail_locked, lock_pending, write_all, ENDED, END_WITH_INSTANCES, SWAPCHAIN_SEEN, TRACKED_SUBMIT,
};
use super::{light, prof};
use format::record::{self, FrameBoundary, Record};
use std::sync::atomic::Ordering;

/// A submit went through: the frame counts as submitted and `records` (given the frame in
/// progress) are written, under one lock.
pub fn submitted<I: IntoIterator<Item = Record>>(records: impl FnOnce(u64) -> I) {
    if HOT.tracking.load(Ordering::Relaxed) {
        // The tracker keeps no `Submit` records (submits change state through their calls).
        // An atomic rather than the pending lock: one load per submit once set.
        if !TRACKED_SUBMIT.load(Ordering::Relaxed) {
            TRACKED_SUBMIT.store(true, Ordering::Relaxed);
        }
        return;
    }
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else { return };
    cap.submitted = true;
    let recs = records(cap.frame).into_iter();
    write_all(&mut guard, recs);
}

pub fn note_swapchain() {
    SWAPCHAIN_SEEN.store(true, Ordering::Relaxed);
    // The app presents: the trigger hotkey is watched from now on.
    crate::control::WINDOWED.store(true, Ordering::Relaxed);
}

/// A call that may end a frame returned. Frames end at vkQueuePresentKHR. Apps that never created a
/// swapchain get boundaries at vkQueueWaitIdle / vkDeviceWaitIdle / a successful vkWaitForFences, but only
/// when a submit happened since the previous boundary (so idle waits do not make empty frames).
/// True when a trimmed capture's first frame begins now: its snapshot is due
/// (`trim::snapshot::frame_boundary` writes it).
pub fn frame_boundary(boundary: FrameBoundary, last_seq: Option<u64>) -> bool {
    if !recording() {
        return false;
    }
    if boundary != FrameBoundary::Present && SWAPCHAIN_SEEN.load(Ordering::Relaxed) {
        return false;
    }
    if HOT.tracking.load(Ordering::Relaxed) {
        let (due, waits) = {
            let mut p = lock_pending();
            let Some(p) = p.as_mut() else { return false };
            if boundary != FrameBoundary::Present && !TRACKED_SUBMIT.load(Ordering::Relaxed) {
                return false;
            }
            p.frame += 1;
            TRACKED_SUBMIT.store(false, Ordering::Relaxed);
            let frame = p.frame;
            let (due, next, ahead) = match p.trigger.as_mut() {
                Some(t) => {
                    let ahead = t.at_frame == Some(frame) && p.postponed == 0;
                    (
                        p.postponed > 0 || t.due(frame),
                        t.at_frame.is_some_and(|a| frame + light::AHEAD >= a),
                        ahead,
                    )
                }
                None => (frame == p.first, frame + light::AHEAD >= p.first, true),
            };
            // No command buffer begun from here on is light: at a due snapshot none may be open
            // (`light`). A start known ahead switches frames early, so that none is even in apps
            // that keep a buffer open across a frame boundary (Zink); a trigger that comes at any
            // time waits instead (`postpone`).
            if due || next {
                light::set_mode(false);
            }
            (due, !ahead)
        };
        // Anchors the fast clock of recorded calls (`call_ns`), as the `Frame` record does while
        // capturing: without an anchor every tracked call read CLOCK_MONOTONIC, whose fenced
        // TSC read waits for the call's cache misses.
        anchor_now();
        return due && !(waits && postpone());
    }
    let t0 = prof::start();
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else {
        return false;
    };
    if boundary != FrameBoundary::Present && !cap.submitted {
        return false;
    }
    let index = cap.frame;
    let last_seq = last_seq.unwrap_or_else(|| HOT.seq.load(Ordering::Relaxed).saturating_sub(1));
    let rec = Record::Frame(record::Frame {
        index,
        last_seq,
        host_ns: anchor_now(),
        boundary,
    });
    if let Err(e) = cap.writer.write(&rec) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
        return false;
    }
    if let Err(e) = cap.writer.end_frame(index) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
        return false;
    }
    cap.frame += 1;
    cap.submitted = false;
    prof::end(prof::FRAME, t0);
    if let Some(last) = cap.last_frame {
        if index >= last && cap.triggered.is_some() {
            super::on_demand::back_to_tracking(&mut guard, index + 1);
        } else if index >= last {
            ENDED.store(true, Ordering::Relaxed);
            finish_locked(&mut guard, "requested frame range done");
        }
    }
    false
}

/// A trigger's snapshot is due: whether it waits for the next boundary because a light command
/// buffer is open (begun, not yet submitted: its commands were not tracked). One still recording
/// is waited for up to `MAX_POSTPONED` boundaries in a row, one already ended for one (a buffer
/// recorded ahead is submitted in the next frame; Zink and wgpu leave unused one-time buffers
/// begun or ended until their pool is reset, many frames later, so waiting longer would only
/// delay the capture). After that the snapshot names the buffers it misses in its gaps.
fn postpone() -> bool {
    const MAX_POSTPONED: u32 = 3;
    let (recording, ended) = super::deferred::lock_tracker()
        .as_ref()
        .map_or((0, 0), |t| t.open_light());
    let mut p = lock_pending();
    let Some(p) = p.as_mut() else { return false };
    if (recording > 0 && p.postponed < MAX_POSTPONED) || (ended > 0 && p.postponed < 1) {
        p.postponed += 1;
        return true;
    }
    if p.postponed > 0 {
        log_once(
            "light-postponed",
            &format!(
                "capture on demand: the snapshot waited {} frame boundaries for one-time command \
                 buffers begun before the trigger to be submitted",
                p.postponed
            ),
        );
    }
    p.postponed = 0;
    false
}

// ---- finalization ---------------------------------------------------------------------------------

/// The process destroyed its last live instance. The trace stays open for the instances it may
/// make next and is finalized at exit; here everything written so far reaches the file (a
/// process that ends in `_exit`, a crash or a kill before its exit handlers run loses nothing
/// of it). With `end=instances` the trace is finalized here instead.
pub fn instances_gone() {
    if END_WITH_INSTANCES.load(Ordering::Relaxed) {
        finish("the last instance was destroyed (end=instances)");
        return;
    }
    let mut guard = lock_capture();
    let Some(cap) = guard.as_mut() else { return };
    let note = Record::Note(record::Note {
        host_ns: now_ns(),
        message: format!(
            "every instance was destroyed after {} calls/records; the trace goes on with the \
             process's next instance and ends at exit",
            HOT.seq.load(Ordering::Relaxed)
        ),
    });
    if let Err(e) = cap.writer.write(&note).and_then(|_| cap.writer.flush()) {
        fail_locked(&mut guard, &format!("writing the trace failed: {e}"));
    }
}

/// Finalizes the trace (at process exit, after the frame range, or with `end=instances` at the
/// last vkDestroyInstance).
pub fn finish(reason: &str) {
    let mut guard = lock_capture();
    finish_locked(&mut guard, reason);
}

fn finish_locked(guard: &mut CaptureGuard, reason: &str) {
    HOT.active.store(false, Ordering::Release);
    if HOT.tracking.swap(false, Ordering::AcqRel) {
        *super::deferred::lock_tracker() = None;
        if let Some(p) = lock_pending().take().filter(|p| p.trigger.is_none()) {
            log_once(
                "never-reached",
                &format!(
                    "{} ended after {} frames, before frame {} where the trimmed capture starts: no trace \
                     written",
                    p.application, p.frame, p.first
                ),
            );
            if HOT.profile.load(Ordering::Relaxed) {
                // No trace to hold it: the tracker's cost goes to stderr only.
                log_once(
                    "profile",
                    &format!("tracked {} frames{}", p.frame, prof::summary()),
                );
            }
        }
    }
    let Some(cap) = guard.take() else { return };
    close_trace(cap, reason);
}

/// Writes the closing frame and note and finishes the file; a trigger's trace is reported to the
/// launcher.
pub(super) fn close_trace(mut cap: Capture, reason: &str) {
    let now = now_ns();
    if cap.submitted {
        let last_seq = HOT.seq.load(Ordering::Relaxed).saturating_sub(1);
        let rec = Record::Frame(record::Frame {
            index: cap.frame,
            last_seq,
            host_ns: now,
            boundary: FrameBoundary::End,
        });
        let _ = cap.writer.write(&rec);
        cap.frame += 1;
    }
    let s = &cap.stats;
    let per_scan = s.scan_ns.checked_div(s.scans).unwrap_or(0);
    let msg = format!(
        "capture finished ({reason}): {} frames, {} calls/records; host-memory shadow compare: {} scans, {} bytes \
         compared, {} ns total ({per_scan} ns/scan), {} bytes written; {} ranges read back through the GPU{}",
        cap.frame - cap.first_frame,
        HOT.seq.load(Ordering::Relaxed),
        s.scans,
        s.scanned_bytes,
        s.scan_ns,
        s.written_bytes,
        crate::readback::READS.load(Ordering::Relaxed),
        prof::summary()
    );
    if HOT.profile.load(Ordering::Relaxed) {
        // Whoever asked for the profile reads it on stderr as well as in the trace.
        log_once("profile", &msg);
    }
    let _ = cap.writer.write(&Record::Note(record::Note {
        host_ns: now,
        message: msg,
    }));
    match cap.writer.finish() {
        Err(e) => {
            let m = format!("finalizing trace {} failed: {e}", cap.path.display());
            log_once("finish", &m);
            crate::control::status(&format!("error {m}"));
        }
        Ok(_) => crate::control::status(&format!(
            "trace {} {} {}",
            cap.first_frame,
            cap.frame - cap.first_frame,
            cap.path.display()
        )),
    }
}
