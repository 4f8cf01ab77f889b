//! The call path: what every intercept runs to record a call, from the flag test in the generic
//! `record_call` to the shared, non-generic `record_dyn`, with the capture lock, seq and the
//! writer's append inlined into it, and the tracker's path before a trimmed capture's first frame.
//! Tuned with measurements: see `runtime`'s header before changing the shape of anything here.
//!
//! Depends on: `statics`, `clock`, `prof`, `writer`, `trim::tracker`, `region` (one sType).

use super::clock::{call_ns, coarse_ns, thread_id};
use super::deferred::Pushed;
use super::prof;
use super::statics::{capturing, lock_capture, recording, CaptureGuard, HOT};
use super::writer::{fail, fail_locked, note};
use crate::trim::tracker;
use format::record;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// Records one API call (after it returned): a no-op unless capturing. Returns the call's seq.
///
/// Generic over the encoder, so instantiated once per command: kept to one flag test and a call
/// into the shared, non-generic rest (one copy of the hot path for every command keeps it in
/// cache between calls, which the driver's own work evicts).
#[inline]
pub fn record_call(
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
) -> Option<u64> {
    if !recording() || skipped(cmd) {
        return None;
    }
    let mut encode = Some(encode);
    record_dyn(cmd, result, &erase(&mut encode))
}

/// Records a command recorded into command buffer `cb` (the generated `vkCmd*` intercepts):
/// `record_call`, except that while tracking a light buffer's commands are skipped (`light`).
#[inline]
pub fn record_cmd(
    cmd: u32,
    cb: u64,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
) -> Option<u64> {
    if !recording() || skipped(cmd) || light_skipped(cmd, cb) {
        return None;
    }
    let mut encode = Some(encode);
    record_dyn(cmd, result, &erase(&mut encode))
}

/// A command into a light command buffer while tracking: nothing to encode. The command's part
/// folds to a constant in each intercept.
#[inline(always)]
fn light_skipped(cmd: u32, cb: u64) -> bool {
    tracker::light_skips(cmd) && HOT.tracking.load(Ordering::Relaxed) && super::light::is_light(cb)
}

/// Tracking a command that defines no state (gets, waits, presents): nothing to encode. Inlined
/// into every intercept, where `cmd` is a constant and the tracker's table read-only data: the
/// test folds to `false` for the commands the tracker keeps.
#[inline(always)]
fn skipped(cmd: u32) -> bool {
    !tracker::wanted(cmd) && !capturing()
}

/// Erases a command's encoder for the shared, non-generic path.
fn erase<F: FnOnce(&mut vkstream::Encoder)>(slot: &mut Option<F>) -> Encode {
    /// Runs the encoder `data` points at (an `Option<F>`, taken).
    ///
    /// # Safety
    /// `data` must point to a live `Option<F>`.
    unsafe fn run<F: FnOnce(&mut vkstream::Encoder)>(data: *mut (), e: &mut vkstream::Encoder) {
        if let Some(f) = (*(data as *mut Option<F>)).take() {
            f(e)
        }
    }
    Encode {
        data: slot as *mut Option<F> as *mut (),
        run: run::<F>,
    }
}

/// Records a results call (`vkGetQueryPoolResults`) and the results the app received: the
/// `Call` and its `QueryResults` (seq and thread filled in here) and `QueryAvailable` records
/// under one lock, without copying the data. Only while capturing: a trimmed capture's tracker
/// wants no results calls (the trace's snapshot is written before capturing starts).
pub fn record_query_results(
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
    results: &mut format::QueryResultsRef<'_>,
    available: &[u32],
) {
    if !capturing() {
        return;
    }
    let mut encode = Some(encode);
    let then = |guard: &mut CaptureGuard, seq, thread, _| {
        let Some(cap) = guard.as_mut() else { return };
        (results.seq, results.thread) = (seq, thread);
        if let Err(e) = cap.writer.write_query_results(results, available) {
            fail_locked(guard, &format!("writing the trace failed: {e}"));
        }
    };
    record_then(cmd, result, &erase(&mut encode), then, no_ops, None);
}

/// Records a query command's `Call` and its `QueryOp` records (one per kind, on `pool`, with the
/// call's seq and host time) under one capture lock; evaluates to the call's seq.
pub fn record_call_ops(
    cmd: u32,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
    command_buffer: u64,
    pool: u64,
    kinds: &[record::QueryOpKind],
) -> Option<u64> {
    if !recording() || skipped(cmd) || light_skipped(cmd, command_buffer) {
        return None;
    }
    let mut encode = Some(encode);
    record_ops_dyn(
        cmd,
        result,
        &erase(&mut encode),
        command_buffer,
        pool,
        kinds,
    )
}

fn record_ops_dyn(
    cmd: u32,
    result: i32,
    encode: &Encode,
    command_buffer: u64,
    pool: u64,
    kinds: &[record::QueryOpKind],
) -> Option<u64> {
    let op = |seq: u64, host_ns: u64, kind: &record::QueryOpKind| record::QueryOp {
        seq,
        command_buffer,
        pool,
        kind: kind.clone(),
        host_ns,
    };
    record_then(
        cmd,
        result,
        encode,
        |guard, seq, _, host_ns| {
            let Some(cap) = guard.as_mut() else { return };
            for kind in kinds {
                // Hand-encoded, not through serde: several follow a query command's call.
                if let Err(e) = cap.writer.write_query_op(&op(seq, host_ns, kind)) {
                    fail_locked(guard, &format!("writing the trace failed: {e}"));
                    return;
                }
            }
        },
        // Before a trimmed capture's first frame the ops go to the tracker with their call,
        // under the queue's one lock.
        |seq, host_ns, ops| ops.extend(kinds.iter().map(|k| op(seq, host_ns, k))),
        None,
    )
}

/// A recorded call's `then` and `ops` when it has none (plain functions, not closures: the
/// fallbacks between the trace and the tracker instantiate nothing new).
fn no_then(_: &mut CaptureGuard, _: u64, _: u32, _: u64) {}
fn no_ops(_: u64, _: u64, _: &mut Vec<record::QueryOp>) {}

/// A command's encoder, type-erased as a data pointer and a function (not a `dyn` closure,
/// whose vtable, one per command, is one more cache line to load at every call).
struct Encode {
    data: *mut (),
    run: unsafe fn(*mut (), &mut vkstream::Encoder),
}

impl Encode {
    fn call(&self, e: &mut vkstream::Encoder) {
        // SAFETY: built by `record_call` from an `Option<F>` that outlives this `Encode`.
        unsafe { (self.run)(self.data, e) }
    }
}

#[inline(never)]
fn record_dyn(cmd: u32, result: i32, encode: &Encode) -> Option<u64> {
    record_then(cmd, result, encode, no_then, no_ops, None)
}

/// Records `vkBeginCommandBuffer` of `cb`; `light`: it was begun light (`light::begin`), which
/// the tracker learns under the same queue lock as the call. A no-op unless recording.
pub fn record_begin(
    cb: u64,
    light: bool,
    result: i32,
    encode: impl FnOnce(&mut vkstream::Encoder),
) -> Option<u64> {
    if !recording() {
        return None;
    }
    let mut encode = Some(encode);
    record_begin_dyn(cb, light, result, &erase(&mut encode))
}

#[inline(never)]
fn record_begin_dyn(cb: u64, light: bool, result: i32, encode: &Encode) -> Option<u64> {
    let cmd = vkstream::ids::vkBeginCommandBuffer;
    record_then(cmd, result, encode, no_then, no_ops, light.then_some(cb))
}

/// Records a call, to the trace or (before a trimmed capture's first frame) to the tracker. When
/// it goes to the trace, `then` writes what goes with it under the same capture lock, given the
/// call's seq, thread and host time; when it goes to the tracker, `ops` appends its query records
/// (given seq and host time) and a begin's `light` mark under the queue's lock. Inlined, down to
/// the writer's append, into `record_dyn`: the shared part of a recorded call is one function, on
/// one or two pages of code instead of one page per step.
#[inline(always)]
fn record_then(
    cmd: u32,
    result: i32,
    encode: &Encode,
    then: impl FnOnce(&mut CaptureGuard, u64, u32, u64),
    ops: impl FnOnce(u64, u64, &mut Vec<record::QueryOp>),
    light: Option<u64>,
) -> Option<u64> {
    // The callers have skipped what the tracker does not want (`skipped`).
    let tracking = HOT.tracking.load(Ordering::Acquire);
    let t0 = prof::start();
    let thread = thread_id();
    let host_ns = if tracking { coarse_ns() } else { call_ns() };
    let seq = if tracking {
        track_call(thread, host_ns, cmd, result, encode, then, ops, light)
    } else {
        super::light::unmark(light);
        write_call_then(thread, host_ns, cmd, result, encode, |guard, seq| {
            then(guard, seq, thread, host_ns)
        })
    };
    prof::end_call(cmd, t0);
    seq
}

/// The hot path: writes a call straight into the trace's open block and then, under the same
/// capture lock, what `then` writes for its seq; a chained struct the encoder could not serialize
/// is reported once the lock is released.
#[inline(always)]
fn write_call_then(
    thread: u32,
    host_ns: u64,
    cmd: u32,
    result: i32,
    encode: &Encode,
    then: impl FnOnce(&mut CaptureGuard, u64),
) -> Option<u64> {
    let mut guard = lock_capture();
    let (seq, unknown) = write_call_locked(&mut guard, thread, host_ns, cmd, result, encode);
    if let Some(seq) = seq {
        then(&mut guard, seq);
    } else if guard.is_none() && HOT.tracking.load(Ordering::Acquire) {
        // A trigger's trace ended while this call waited for the lock: back to the tracker.
        drop(guard);
        return track_call(thread, host_ns, cmd, result, encode, no_then, no_ops, None);
    }
    drop(guard);
    if let Some(s_type) = unknown {
        unknown_struct(cmd, s_type);
    }
    seq
}

/// `write_call_then`'s write, under the capture lock; returns the seq and the sType of a chained
/// struct the encoder could not serialize (reported by the caller once the lock is released).
#[inline(always)]
fn write_call_locked(
    guard: &mut CaptureGuard,
    thread: u32,
    host_ns: u64,
    cmd: u32,
    result: i32,
    encode: &Encode,
) -> (Option<u64>, Option<i32>) {
    let mut unknown = None;
    let Some(cap) = guard.as_mut() else {
        return (None, None);
    };
    // Numbered under the lock, so records reach the file in seq order.
    let seq = HOT.seq.fetch_add(1, Ordering::Relaxed);
    let written = cap
        .writer
        .write_call_with(seq, thread, cmd, host_ns, result, |buf| {
            // The encoder borrows the block and gives it back even when it panics.
            let mut e = vkstream::Encoder::from_vec(std::mem::take(buf));
            let ok = catch_unwind(AssertUnwindSafe(|| encode.call(&mut e))).is_ok();
            unknown = e.unknown_stype();
            *buf = e.into_bytes();
            ok.then_some(()).ok_or_else(|| "panicked".to_string())
        });
    if let Err(err) = written {
        let name = vkstream::COMMANDS.get(cmd as usize).copied().unwrap_or("?");
        let message = match &err.problem {
            format::Problem::Encode(_) => format!("internal error while encoding {name}"),
            _ => format!("writing the trace failed: {err}"),
        };
        fail_locked(guard, &message);
        return (None, None);
    }
    (Some(seq), unknown)
}

/// Before a trimmed capture's first frame: the call is encoded straight into the tracking
/// thread's queue (see `deferred`), or, when the snapshot was written meanwhile, into the trace.
/// Inlined, with the queue's push, into `record_dyn`: the tracking path on its pages; what is
/// rare stays out of line.
// Inlined into the call path: the arguments stay in registers, a struct would not change that.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn track_call(
    thread: u32,
    host_ns: u64,
    cmd: u32,
    result: i32,
    encode: &Encode,
    then: impl FnOnce(&mut CaptureGuard, u64, u32, u64),
    ops: impl FnOnce(u64, u64, &mut Vec<record::QueryOp>),
    light: Option<u64>,
) -> Option<u64> {
    let pushed = super::deferred::push_encoded(
        thread,
        host_ns,
        cmd,
        result,
        |e| catch_unwind(AssertUnwindSafe(|| encode.call(e))).is_ok(),
        |seq, v| ops(seq, host_ns, v),
        light,
    );
    match pushed {
        Pushed::Queued { seq, unknown: None } => Some(seq),
        other => {
            if !matches!(other, Pushed::Queued { .. }) {
                super::light::unmark(light);
            }
            track_rare(other, thread, cmd, result, encode, then)
        }
    }
}

/// `track_call` when the encoder met an unknown struct, panicked, or tracking had ended (the call
/// and what `then` writes with it go to the trace).
#[cold]
#[inline(never)]
fn track_rare(
    pushed: Pushed,
    thread: u32,
    cmd: u32,
    result: i32,
    encode: &Encode,
    then: impl FnOnce(&mut CaptureGuard, u64, u32, u64),
) -> Option<u64> {
    match pushed {
        Pushed::Queued { seq, unknown } => {
            if let Some(s_type) = unknown {
                unknown_struct(cmd, s_type);
            }
            Some(seq)
        }
        Pushed::Closed => {
            // To the trace after all: the call's own time, not the tracker's coarse one.
            let host_ns = call_ns();
            write_call_then(thread, host_ns, cmd, result, encode, |guard, seq| {
                then(guard, seq, thread, host_ns)
            })
        }
        Pushed::Panicked => {
            let name = vkstream::COMMANDS.get(cmd as usize).copied().unwrap_or("?");
            fail(&format!("internal error while encoding {name}"));
            None
        }
    }
}

/// Structs the layer itself understands although the encoder does not: the loader's chain links,
/// `VkLayerSettingsCreateInfoEXT` (read in `settings`) and the ARM per-region counters begin info
/// (see `region`). They are recorded as sType only, silently.
const LAYER_STRUCTS: [i32; 4] = [
    47,                              // VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO
    48,                              // VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO
    1000496000,                      // VK_STRUCTURE_TYPE_LAYER_SETTINGS_CREATE_INFO_EXT
    crate::region::BEGIN_INFO_STYPE, // recorded as a RegionCounters record
];

/// The message for a chained struct the encoder could not serialize, or `None` for the layer's own
/// structs.
fn unknown_struct_message(cmd: u32, s_type: i32) -> Option<String> {
    if LAYER_STRUCTS.contains(&s_type) {
        return None;
    }
    let name = vkstream::COMMANDS.get(cmd as usize).copied().unwrap_or("?");
    Some(format!(
        "{name}: a pNext struct with sType {s_type} is unknown to this build's vk.xml; recorded as its \
         sType only (a replay skips it)"
    ))
}

/// A call's pNext chain held a struct the encoder wrote as sType only: logged to stderr and noted in
/// the trace, once per (command, sType). Capture goes on: the rest of the call is recorded.
fn unknown_struct(cmd: u32, s_type: i32) {
    static SEEN: Mutex<Vec<(u32, i32)>> = Mutex::new(Vec::new());
    let Some(message) = unknown_struct_message(cmd, s_type) else {
        return;
    };
    {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&(cmd, s_type)) {
            return;
        }
        seen.push((cmd, s_type));
    }
    eprintln!("quarry: {message}");
    note(message);
}

/// The generated intercepts' entry: records one call; a no-op unless capturing.
pub fn record(cmd: u32, result: i32, encode: impl FnOnce(&mut vkstream::Encoder)) {
    record_call(cmd, result, encode);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk;

    #[test]
    fn unknown_structs_are_named_with_command_and_stype() {
        let cmd = vkstream::command_id("vkCreateImage").unwrap();
        let m = unknown_struct_message(cmd, 1_000_999_000).unwrap();
        assert!(
            m.contains("vkCreateImage") && m.contains("1000999000"),
            "{m}"
        );
        // The layer's own structs are not news.
        let ci = vkstream::command_id("vkCreateInstance").unwrap();
        assert_eq!(unknown_struct_message(ci, 1_000_496_000), None);
        assert_eq!(unknown_struct_message(ci, 47), None);
    }

    /// The generated encoder reports the first struct it could only write as an sType, per thread,
    /// and forgets it once asked.
    #[test]
    fn encoder_reports_unknown_chained_structs() {
        let tail = vk::BaseInStructure {
            s_type: vk::StructureType::from_raw(1_000_999_001),
            ..Default::default()
        };
        let unknown = vk::BaseInStructure {
            s_type: vk::StructureType::from_raw(1_000_999_000),
            p_next: &tail,
            ..Default::default()
        };
        let chain = &unknown as *const _ as *const std::ffi::c_void;
        let mut e = vkstream::Encoder::new();
        assert_eq!(e.unknown_stype(), None);
        // SAFETY: a valid chain of two base structs.
        unsafe { vkstream::encode::pnext(&mut e, chain) };
        assert_eq!(e.unknown_stype(), Some(1_000_999_000));
        e.clear();
        assert_eq!(e.unknown_stype(), None);
        // Known structs leave nothing behind.
        let usage = vk::ImageViewUsageCreateInfo::default();
        unsafe { vkstream::encode::pnext(&mut e, &usage as *const _ as *const std::ffi::c_void) };
        assert_eq!(e.unknown_stype(), None);
    }
}
