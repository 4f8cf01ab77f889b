//! The last defence against a driver call that never returns. Every wait the replay does is
//! bounded (`stall`), but a driver may block inside a call that has no timeout at all (lavapipe
//! blocks in several while a submission runs). A thread watches the replay loop: when one
//! record has been in progress for `LIMIT`, it prints the error line naming the call and ends
//! the process with `_exit` (not `exit`: its handlers and the driver's destructors would wait
//! for the very threads that are stuck). The loop only bumps counters, so this costs nothing
//! per call.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use crate::clock::WAIT_TIMEOUT;

/// Longer than any bounded wait a record does (`WAIT_TIMEOUT`) with room for the call itself.
pub(super) const LIMIT: Duration = Duration::from_secs(WAIT_TIMEOUT.as_secs() + 5);

/// Record in progress: a step counter (changes on every record), its seq and what it is.
static STEP: AtomicU64 = AtomicU64::new(0);
static SEQ: AtomicU64 = AtomicU64::new(0);
static WHAT: AtomicU32 = AtomicU32::new(0);
/// A replay loop is running (the watchdog sleeps otherwise).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// [`WHAT`] values that are not a vkstream command id.
pub(super) const QUERY_READ: u32 = u32::MAX - 1;
pub(super) const QUERY_COPY: u32 = u32::MAX - 2;
pub(super) const MEMORY_WRITE: u32 = u32::MAX - 3;
pub(super) const OTHER: u32 = u32::MAX;
/// Waiting for the checks thread (`ahead`): CPU work that ends, never a driver call.
pub(super) const CHECKS: u32 = u32::MAX - 4;
/// Destroying what the replay made (idle waits, vkDestroy*) once the records are done.
pub(super) const TEARDOWN: u32 = u32::MAX - 5;

/// A replay gave up on a GPU that did not finish or was lost: the process must end without
/// the driver's exit-time teardown, which would wait for that GPU ([`exit_now`]).
static ABANDONED: AtomicBool = AtomicBool::new(false);

/// Marks the replay GPU as given up on (see [`gpu_abandoned`]).
pub(super) fn abandon() {
    ABANDONED.store(true, Relaxed);
}

/// Whether a replay in this process gave up on its GPU: a busy or lost device whose driver
/// may block in its exit handlers, so the caller should end with [`exit_now`].
pub fn gpu_abandoned() -> bool {
    ABANDONED.load(Relaxed)
}

/// Ends the process at once with `code`, after flushing stdout and stderr: `exit` would run the
/// driver's destructors, which wait for a GPU that never finishes (seen on NVIDIA, issue 37).
pub fn exit_now(code: i32) -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process; nothing of ours is left half-written (results are written
    // before the replay returns).
    unsafe { libc::_exit(code) }
}

/// The replay loop begins (`true`) or ends.
pub(super) fn active(on: bool) {
    if on {
        static STARTED: OnceLock<()> = OnceLock::new();
        STARTED.get_or_init(|| {
            let _ = std::thread::Builder::new()
                .name("quarry-watchdog".into())
                .spawn(watch);
        });
    }
    STEP.fetch_add(1, Relaxed);
    ACTIVE.store(on, Relaxed);
}

/// Tears `session` down under the watchdog: a lost or hung device can block an idle wait or a
/// destroy for ever, and the process then ends with the one-line error instead.
pub(super) fn watched_teardown(session: &mut crate::session::Session<'_>) {
    active(true);
    step(0, TEARDOWN);
    session.teardown();
    active(false);
}

/// The loop moves on to record `seq` (`what`: a vkstream command id or one of the above).
#[inline]
pub(super) fn step(seq: u64, what: u32) {
    SEQ.store(seq, Relaxed);
    WHAT.store(what, Relaxed);
    STEP.fetch_add(1, Relaxed);
}

fn watch() {
    const TICK: Duration = Duration::from_millis(250);
    let (mut last, mut still) = (u64::MAX, Duration::ZERO);
    loop {
        std::thread::sleep(TICK);
        let now = STEP.load(Relaxed);
        if !ACTIVE.load(Relaxed) || now != last {
            (last, still) = (now, Duration::ZERO);
            continue;
        }
        still += TICK;
        if still < LIMIT {
            continue;
        }
        let what = WHAT.load(Relaxed);
        if what == CHECKS {
            continue;
        }
        let name = match what {
            QUERY_READ => "vkGetQueryPoolResults",
            QUERY_COPY => "vkCmdCopyQueryPoolResults",
            MEMORY_WRITE => "memory write",
            TEARDOWN => "teardown: waiting for the replay devices to go idle and destroying them",
            id => vkstream::COMMANDS.get(id as usize).copied().unwrap_or("?"),
        };
        // Compiling is CPU work that ends: a batch of pipelines may take longer than `LIMIT`
        // without anything being stuck.
        if name.starts_with("vkCreate") && (name.contains("Pipeline") || name.contains("Shader")) {
            continue;
        }
        let at = match what {
            TEARDOWN => "after the last record".to_string(),
            _ => format!("call {}", SEQ.load(Relaxed)),
        };
        eprintln!(
            "quarry: {at} ({name}): the driver did not return within {} s (the replay GPU \
             is still busy or lost?); the replay stops here without waiting for it",
            LIMIT.as_secs()
        );
        // Nothing here is left half-written that matters more than a replay that would never end.
        exit_now(1)
    }
}
