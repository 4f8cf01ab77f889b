//! One-time command buffers while tracking. A primary command buffer begun with
//! `ONE_TIME_SUBMIT` can be submitted once, then must be recorded again: a snapshot taken after its
//! submit never needs its commands. So while tracking, such a buffer is "light": its commands are
//! not encoded at all, except those that move image layouts (the tracker applies them at the
//! submit). Engines that record every frame (Zink, wgpu, DXVK, the demo) make most of their calls
//! into such buffers, so this removes most of tracking's per-call work from the app's thread.
//!
//! The one case that needs the commands is a light buffer begun before a snapshot and submitted
//! after it. A due snapshot therefore waits (`frames`) until no light buffer is open (begun and
//! not yet submitted, as the tracker sees them), with light mode off so that none opens meanwhile;
//! apps that submit a frame's buffers before presenting wait for nothing.
//!
//! Light buffers are kept in a fixed open-addressed table of handles read without locks (the
//! intercept of every recorded command looks its buffer up): a slot holds a handle, with bit 0 set
//! while it is light. Keys are never removed (a freed buffer's stale bit is rewritten by the begin
//! that must come before its next command), and a buffer that finds the table half full is simply
//! tracked in full. `QUARRY_CAPTURE_LIGHT=0` turns light tracking off (for comparisons).
//!
//! Depends on: `statics` (the hot line's `light` flag).

use super::statics::HOT;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const SLOTS: usize = 8192;
/// Frame boundaries before a start known ahead (`--frames A-B`, `--trigger-frame`) at which light
/// tracking ends: a buffer open at the start would have to span this many boundaries.
pub(super) const AHEAD: u64 = 2;
/// Probes before a lookup gives up (the buffer is then tracked in full: always safe).
const PROBES: usize = 32;

struct Table {
    slots: [AtomicU64; SLOTS],
    /// Serialises inserts; lookups take no lock.
    insert: Mutex<usize>,
}

static TABLE: Table = Table {
    slots: [const { AtomicU64::new(0) }; SLOTS],
    insert: Mutex::new(0),
};

#[inline(always)]
fn home(cb: u64) -> usize {
    // Dispatchable handles are pointers: the low bits carry little.
    ((cb >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 51) as usize & (SLOTS - 1)
}

/// Whether `cb` was begun light (and not begun again since). A few loads from one line, lock-free.
#[inline(always)]
pub(super) fn is_light(cb: u64) -> bool {
    let mut i = home(cb);
    for _ in 0..PROBES {
        let v = TABLE.slots[i].load(Ordering::Relaxed);
        if v & !1 == cb {
            return v & 1 == 1;
        }
        if v == 0 {
            return false;
        }
        i = (i + 1) & (SLOTS - 1);
    }
    false
}

/// Records whether `cb`, just begun, is light; false when it cannot be (table full), so the caller
/// tracks it in full. Called by the begin, before any command of the buffer.
fn set(cb: u64, light: bool) -> bool {
    if cb == 0 || cb & 1 == 1 {
        return !light;
    }
    let mut used = TABLE.insert.lock().unwrap_or_else(|e| e.into_inner());
    let mut i = home(cb);
    for _ in 0..PROBES {
        let v = TABLE.slots[i].load(Ordering::Relaxed);
        if v & !1 == cb {
            TABLE.slots[i].store(cb | u64::from(light), Ordering::Relaxed);
            return true;
        }
        if v == 0 {
            if !light {
                return true;
            }
            if *used >= SLOTS / 2 {
                return false;
            }
            *used += 1;
            TABLE.slots[i].store(cb | 1, Ordering::Relaxed);
            return true;
        }
        i = (i + 1) & (SLOTS - 1);
    }
    !light
}

/// At `vkBeginCommandBuffer` while tracking: whether this begin makes `cb` light (a primary
/// one-time buffer while light mode is on). Buffers begun otherwise lose a light mark they had.
pub fn begin(cb: u64, one_time: bool, has_inheritance: bool) -> bool {
    // A secondary buffer must pass inheritance info; one without it is a primary, whose submit
    // the tracker sees (a secondary's would be the primary's).
    let want = one_time && !has_inheritance && HOT.light.load(Ordering::Relaxed);
    if want == is_light(cb) {
        // Unchanged (a buffer recorded every frame): no lock.
        return want;
    }
    set(cb, want) && want
}

/// `cb`'s begin did not reach the tracker after all (it went to the trace): its commands must not
/// be skipped.
pub(super) fn unmark(cb: Option<u64>) {
    if let Some(cb) = cb {
        begin(cb, false, false);
    }
}

/// Light mode on or off for the buffers begun from now on.
pub(super) fn set_mode(on: bool) {
    HOT.light.store(on && enabled(), Ordering::Relaxed);
}

/// `QUARRY_CAPTURE_LIGHT=0` turns light tracking off.
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("QUARRY_CAPTURE_LIGHT").is_none_or(|v| v != "0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_found_and_cleared() {
        let a = 0x7f00_1234_5670u64;
        let b = (1..u64::MAX)
            .map(|k| a + k * 16)
            .find(|&b| home(b) == home(a))
            .expect("a colliding handle");
        assert!(!is_light(a));
        assert!(set(a, true) && set(b, true));
        assert!(is_light(a) && is_light(b));
        assert!(set(a, false));
        assert!(!is_light(a) && is_light(b), "clearing one keeps the other");
        assert!(set(a, true) && is_light(a));
        assert!(!is_light(0x7f00_9999_0000));
    }
}
