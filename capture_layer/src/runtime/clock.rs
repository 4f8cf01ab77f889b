//! Clocks and thread ids, as every recorded call reads them: the TSC extrapolated from the last
//! CLOCK_MONOTONIC anchor, and the OS thread id cached beside the hot flags (main thread) or in a
//! pthread key (others). See `runtime`'s header for why.
//!
//! Depends on: `statics` (the hot line holds the anchor and the main thread's id).

use super::statics::HOT;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// CLOCK_MONOTONIC in ns (the clock the trace's host times use).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(super) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Host time of a recorded call: the TSC scaled from the last anchor (a CLOCK_MONOTONIC reading
/// taken at every frame end, see `anchor_now`), or CLOCK_MONOTONIC itself while the
/// TSC's rate is not known yet or where the TSC is not invariant. Every call records its time,
/// and `clock_gettime` fences the TSC read behind every earlier load, which costs the layer's
/// cache misses their overlap (~50-80 ns a call on the H100 box).
#[inline]
pub fn call_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mult = HOT.tsc_mult.load(Ordering::Relaxed);
        if mult != 0 {
            let gen = HOT.anchor_gen.load(Ordering::Acquire);
            let tsc = HOT.anchor_tsc.load(Ordering::Relaxed);
            let ns = HOT.anchor_ns.load(Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Acquire);
            if gen & 1 == 0 && HOT.anchor_gen.load(Ordering::Relaxed) == gen {
                // SAFETY: rdtsc has no preconditions on x86_64.
                let now = unsafe { std::arch::x86_64::_rdtsc() };
                return ns
                    + ((u128::from(now.saturating_sub(tsc)) * u128::from(mult)) >> 32) as u64;
            }
        }
    }
    now_ns()
}

/// Host time of a tracked call: the last anchor (at most about 4 ms old: the tracking thread and
/// frame ends renew it), or CLOCK_MONOTONIC before the first. A tracked call's time is only
/// shown for the calls a snapshot replays before the first captured frame, and reading the TSC
/// costs hundreds of ns on VMs that trap it (the H100 box).
#[inline]
pub fn coarse_ns() -> u64 {
    match HOT.anchor_ns.load(Ordering::Relaxed) {
        0 => now_ns(),
        ns => ns,
    }
}

/// CLOCK_MONOTONIC, also made the fast clock's anchor when the last is 4 ms old or more: the calls
/// after it extrapolate from here. The TSC's rate is measured against CLOCK_MONOTONIC from the
/// first anchor on, once 20 ms apart.
pub fn anchor_now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let now = now_ns();
        let last = HOT.anchor_ns.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < 4_000_000 {
            return now;
        }
        use std::sync::atomic::fence;
        /// The first anchor (0: none yet); the rate is measured from it. Written only by the
        /// anchoring thread, which holds the seqlock odd.
        static FIRST_TSC: AtomicU64 = AtomicU64::new(0);
        static FIRST_NS: AtomicU64 = AtomicU64::new(0);
        if !tsc_invariant() {
            return now;
        }
        // The TSC read between two clock reads; a pair split by preemption would skew the
        // rate, so the tightest of a few tries is kept.
        let (mut ns, mut tsc, mut spread) = (0, 0, u64::MAX);
        for _ in 0..4 {
            let a = now_ns();
            // SAFETY: rdtsc has no preconditions on x86_64.
            let t = unsafe { std::arch::x86_64::_rdtsc() };
            let b = now_ns();
            if b - a < spread {
                (ns, tsc, spread) = (a + (b - a) / 2, t, b - a);
            }
            if spread < 1_000 {
                break;
            }
        }
        let gen = HOT.anchor_gen.load(Ordering::Relaxed);
        if gen & 1 == 1
            || HOT
                .anchor_gen
                .compare_exchange(gen, gen + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            // Another thread is anchoring right now: its anchor serves.
            return ns;
        }
        fence(Ordering::Release);
        let (t0, n0) = (
            FIRST_TSC.load(Ordering::Relaxed),
            FIRST_NS.load(Ordering::Relaxed),
        );
        let mult = if t0 == 0 {
            FIRST_NS.store(ns, Ordering::Relaxed);
            FIRST_TSC.store(tsc, Ordering::Relaxed);
            0
        } else if ns.saturating_sub(n0) >= 20_000_000 && tsc > t0 {
            ((u128::from(ns - n0) << 32) / u128::from(tsc - t0)) as u64
        } else {
            HOT.tsc_mult.load(Ordering::Relaxed)
        };
        HOT.anchor_tsc.store(tsc, Ordering::Relaxed);
        HOT.anchor_ns.store(ns, Ordering::Relaxed);
        HOT.tsc_mult.store(mult, Ordering::Relaxed);
        HOT.anchor_gen.store(gen + 2, Ordering::Release);
        ns
    }
    #[cfg(not(target_arch = "x86_64"))]
    now_ns()
}

/// The TSC ticks at a constant rate through frequency changes and idle states
/// (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo), so it can stand in for CLOCK_MONOTONIC.
pub(super) fn tsc_invariant() -> bool {
    static INVARIANT: OnceLock<bool> = OnceLock::new();
    *INVARIANT.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
            c.lines().find(|l| l.starts_with("flags")).is_some_and(|l| {
                let has = |name: &str| l.split_whitespace().any(|w| w == name);
                has("constant_tsc") && has("nonstop_tsc")
            })
        })
    })
}

/// The OS thread id. The main thread's is cached in `HOT` beside the flags every call reads,
/// found by `pthread_self()` (its control block is never reused while the process lives); other
/// threads cache theirs in a pthread key: glibc keeps the first keys' values in the thread's
/// control block, where a Rust thread-local of a dlopen'ed library costs a call into the dynamic
/// linker and a page of its own (every call records its thread). `#[inline]`: called on the hot
/// path from `record`, its former neighbour in one module.
#[inline]
pub fn thread_id() -> u32 {
    let me = thread_self();
    if HOT.main_self.load(Ordering::Acquire) == me {
        return HOT.main_tid.load(Ordering::Relaxed);
    }
    thread_id_slow(me)
}

/// `pthread_self()`: the thread control block's address, which glibc keeps at `%fs:0` on
/// x86_64 (read inline, not through a call into libc by way of the GOT).
#[inline]
pub(super) fn thread_self() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let tcb: u64;
        // SAFETY: on x86_64 Linux the fs base points at the thread's control block, whose first
        // word is its own address (the TLS ABI); reading it has no side effects.
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) tcb,
                options(nostack, readonly, preserves_flags, pure)
            )
        };
        tcb
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: pthread_self has no preconditions.
    unsafe {
        libc::pthread_self() as u64
    }
}

#[cold]
fn thread_id_slow(me: u64) -> u32 {
    let tid = keyed_thread_id();
    // SAFETY: getpid has no preconditions.
    if tid == unsafe { libc::getpid() } as u32 && HOT.main_self.load(Ordering::Relaxed) == 0 {
        HOT.main_tid.store(tid, Ordering::Relaxed);
        HOT.main_self.store(me, Ordering::Release);
    }
    tid
}

fn keyed_thread_id() -> u32 {
    let gettid = || {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as u32 }
    };
    let mut key = HOT.thread_key.load(Ordering::Acquire);
    if key == 0 {
        key = match new_thread_key() {
            Some(k) => k,
            None => return gettid(),
        };
    }
    let key = (key - 1) as libc::pthread_key_t;
    // SAFETY: a key this process created and never deletes.
    let cached = unsafe { libc::pthread_getspecific(key) } as usize as u32;
    if cached != 0 {
        return cached;
    }
    let tid = gettid();
    // SAFETY: as above; the value is an integer, never dereferenced.
    unsafe { libc::pthread_setspecific(key, tid as usize as *const libc::c_void) };
    tid
}

/// Creates the thread-id key once (the first thread to publish its key wins; a loser deletes
/// its own). Returns key + 1.
#[cold]
fn new_thread_key() -> Option<u64> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a valid out pointer, no destructor.
    if unsafe { libc::pthread_key_create(&mut key, None) } != 0 {
        return None;
    }
    let mine = key as u64 + 1;
    match HOT
        .thread_key
        .compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => Some(mine),
        Err(theirs) => {
            // SAFETY: our own key, never handed out.
            unsafe { libc::pthread_key_delete(key) };
            Some(theirs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_times_follow_the_monotonic_clock() {
        anchor_now();
        std::thread::sleep(std::time::Duration::from_millis(25));
        anchor_now();
        if cfg!(target_arch = "x86_64") && tsc_invariant() {
            assert_ne!(
                HOT.tsc_mult.load(Ordering::Relaxed),
                0,
                "TSC rate not measured"
            );
        }
        let mut last = 0;
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            let (before, call, after) = (now_ns(), call_ns(), now_ns());
            // Extrapolated over a few ms from an anchor: within 20 us of the real clock.
            assert!(
                call + 20_000 >= before && call <= after + 20_000,
                "{before} {call} {after}"
            );
            assert!(call >= last, "went back: {last} then {call}");
            last = call;
        }
    }

    #[test]
    fn threads_get_their_own_ids() {
        let ids: Vec<(u32, u32)> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    // SAFETY: gettid has no preconditions.
                    let os = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
                    (thread_id(), os)
                })
            })
            .map(|t| t.join().unwrap())
            .collect();
        for (id, os) in &ids {
            assert_eq!(id, os);
        }
        assert_eq!(thread_id(), thread_id());
        let selves: Vec<(u64, u64)> = (0..2)
            .map(|_| {
                // SAFETY: pthread_self has no preconditions.
                std::thread::spawn(|| (thread_self(), unsafe { libc::pthread_self() } as u64))
            })
            .map(|t| t.join().unwrap())
            .collect();
        for (mine, libc) in selves {
            assert_eq!(mine, libc, "the fs-based read is pthread_self()");
        }
    }
}
