//! Passing SIGINT, SIGTERM and SIGHUP on to the captured program while quarry waits for it, so
//! that quarry outlives the program, removes its temporary manifests and says what became of
//! the trace.

use std::sync::atomic::{AtomicI32, Ordering};

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The running program's pid, 0 when there is none.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A signal that arrived before the program was started, passed on once it is.
static PENDING: AtomicI32 = AtomicI32::new(0);
/// The last signal quarry received while forwarding.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe work here: atomics and kill(2).
    RECEIVED.store(sig, Ordering::Relaxed);
    // The terminal sends Ctrl-C (and hang-up) to its whole foreground process group, the program
    // included (SI_KERNEL): passing it on would deliver it twice. A signal sent to quarry alone
    // (kill, a CI runner's timeout) is passed on.
    // SAFETY: the kernel hands SA_SIGINFO handlers a valid siginfo_t.
    if !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL {
        return;
    }
    let child = CHILD.load(Ordering::Acquire);
    if child > 0 {
        // SAFETY: kill is async-signal-safe; the pid is our unreaped child.
        unsafe { libc::kill(child, sig) };
    } else {
        PENDING.store(sig, Ordering::Relaxed);
    }
}

/// While alive, the signals above are caught and passed to the program named by [`Self::started`];
/// dropping it restores the previous handlers.
pub struct Forwarding {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl Forwarding {
    pub fn install() -> Forwarding {
        CHILD.store(0, Ordering::Release);
        PENDING.store(0, Ordering::Relaxed);
        RECEIVED.store(0, Ordering::Relaxed);
        let mut old = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is a valid starting point; the handler only touches
            // atomics and calls kill.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = handler as *const () as libc::sighandler_t;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Forwarding { old }
    }

    /// The program is running as `pid`: pass on what arrives from now on, and what arrived while
    /// it was being started.
    pub fn started(&self, pid: u32) {
        let pid = pid as i32;
        CHILD.store(pid, Ordering::Release);
        let pending = PENDING.swap(0, Ordering::Relaxed);
        if pending != 0 {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, pending) };
        }
    }

    /// The program has exited (its pid may be reused: stop signalling it).
    pub fn stopped(&self) {
        CHILD.store(0, Ordering::Release);
    }

    /// The last signal quarry received, if any.
    pub fn received(&self) -> Option<i32> {
        Some(RECEIVED.load(Ordering::Relaxed)).filter(|&s| s != 0)
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        CHILD.store(0, Ordering::Release);
        for (sig, prev) in &self.old {
            // SAFETY: restoring the action sigaction gave us.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
    }
}

/// `SIGINT`-style name of a signal number.
pub fn name(sig: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == sig)
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| format!("signal {sig}"))
}
