//! Watching and signalling running programs: waiting for a condition, a process's children,
//! signals by pid (tests end only the processes they started).

use std::path::Path;
use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it holds (true) or `timeout` passes (false).
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pids of `pid`'s children (from `/proc`).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Whether `pid` is running (not yet reaped, and not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Whether `path` is a finished (footer written) quarry trace.
pub fn trace_complete(path: &Path) -> bool {
    format::TraceReader::open(path).is_ok_and(|r| r.info().complete)
}
