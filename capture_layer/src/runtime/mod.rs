//! The layer's runtime: dispatch lookup, the capture writer, the call path, sequencing, frame
//! boundaries and finalization. Every intercept (generated or hand-written) calls in here.
//!
//! Invariants: nothing here blocks the app beyond the writer's bounded queue; nothing panics across the
//! FFI boundary (`record` and `guard` catch); after an internal error capture stops (logged once, a
//! `Note` written, the trace left unfinished so readers see it incomplete) and calls keep passing through.
//!
//! Parts, each depending only on those before it: `statics` (the statics block and dispatch maps)
//! ← `clock` ← `prof` ← `writer` (trace and tracker, failures, the snapshot's records) ← `frames`
//! and `record` (the call path), with `on_demand` beside `frames` (capture on demand's return to
//! tracking after a trigger's frames: `frames` calls it at the last one, it closes the trace
//! through `frames`). Outside the runtime it depends on `tables`, `state`, `settings`, `keymap`,
//! `loader`, `region`, `control` (triggers, the launcher's status channel) and `trim::tracker`
//! (bookkeeping, no Vulkan calls); the intercepts and `trim::snapshot` sit above it.
//!
//! ## The hot path's layout
//!
//! The hot path is one non-generic function for every command (`record::record_dyn`: the generated
//! intercept tests one flag and passes its encoder, the inlined generated encoding, as a data
//! pointer and a function), with the capture lock, seq and the writer's append inlined into it,
//! which encodes the call straight into the writer's open block: the driver's own work evicts the
//! layer from the caches and the TLB between calls, so fewer distinct cache lines and pages per
//! call is what makes it cheap. The statics a call reads share one page-aligned block
//! (`statics::Statics`: hot flags, the main thread's id and the TSC clock's anchor in its first
//! line; the capture lock and the writer pointer in the next; then the device dispatch map); the
//! writer's failure flag, open-block lock and a call's open-block fields share a line of its
//! shared state (in `format`); command ids are constants (`vkstream::ids`).
//! `QUARRY_CAPTURE_PROFILE=1` times the layer's work into the trace's closing note (`prof`);
//! `cargo bench -p quarry-tests --bench call_path` measures a call cold and warm. A query command
//! writes its `Call` and `QueryOp` under one lock; a submit scans only the memories mapped at the
//! time. Functions the call path takes from a sibling file (`statics::lock_capture`,
//! `clock::thread_id`) are `#[inline]`, as they were inlined when they shared its file.
//!
//! While tracking (before a trimmed capture's first frame, between triggers) the same function
//! pushes the call into `deferred`'s queue, inlined: one locked instruction per call (the
//! queue's lock; its release is a plain store, so nothing waits for the queued call's stores,
//! and seq is a plain add under it), a query command's records under the same lock, and the TSC
//! clock anchored at tracked frame ends as at captured ones. The commands the tracker does not
//! want are skipped in the intercept itself, by a test that folds to a constant.

mod clock;
mod deferred;
mod frames;
pub mod light;
mod on_demand;
pub mod prof;
mod record;
mod statics;
mod writer;

pub use clock::{anchor_now, call_ns, now_ns, thread_id};

/// Tracking: before a trimmed capture's first frame, or between capture on demand's triggers.
pub fn tracking() -> bool {
    statics::HOT
        .tracking
        .load(std::sync::atomic::Ordering::Acquire)
}

pub use frames::{finish, frame_boundary, instances_gone, note_swapchain, submitted};

/// Work reaches the GPU (submits, presents) only through this gate; a trimmed capture's snapshot
/// closes it (`stop_submits`) from before its idle wait until capturing has begun, so a thread
/// that submits while another takes the snapshot neither runs GPU work during the memory reads
/// nor falls between the snapshot and the trace. Held only around the driver call and its
/// recording: a frame boundary (which may take the snapshot) comes after it is released.
static SUBMIT_GATE: parking_lot::RwLock<()> = parking_lot::RwLock::new(());

/// Held while a submit or present is in the driver and recorded.
pub fn submit_gate() -> parking_lot::RwLockReadGuard<'static, ()> {
    SUBMIT_GATE.read()
}

/// Held while a snapshot is taken: waits for submits in progress, holds back new ones.
pub fn stop_submits() -> parking_lot::RwLockWriteGuard<'static, ()> {
    SUBMIT_GATE.write()
}
pub use record::{
    record, record_begin, record_call, record_call_ops, record_cmd, record_query_results,
};
pub use statics::{
    capturing, device_data, device_table, instance_data, instance_table, live_devices,
    live_instance_count, log_once, recording, register_device, register_instance,
    unregister_device, unregister_instance, DeviceData, Stats,
};
pub use writer::{
    add_scan_stats, emit, emit_device, emit_memory, emit_plain, emit_plain_all, fail, guard, note,
    open_capture, settings, snapshot_failed, trace_path, write_snapshot,
};

pub use crate::tables::InstanceData;
