//! Where the layer spends app-thread time, measured only when `QUARRY_CAPTURE_PROFILE=1` (two clock
//! reads per span otherwise skipped) and written in the closing note.
//!
//! Depends on: `statics` (the profile flag), `clock`.

use super::clock::now_ns;
use super::statics::HOT;
use std::sync::atomic::{AtomicU64, Ordering};

pub const CALL: usize = 0;
pub const SUBMIT: usize = 1;
pub const WAIT: usize = 2;
pub const FRAME: usize = 3;
pub const RESULTS: usize = 4;
const NAMES: [&str; 5] = [
    "calls recorded",
    "submit bookkeeping",
    "copy read-backs at waits",
    "frame ends",
    "query results recorded",
];

static NS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
static N: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
/// Per command: (ns, calls) of recorded calls, for the costliest commands in the summary.
static BY_CMD: std::sync::Mutex<Vec<(u64, u64)>> = std::sync::Mutex::new(Vec::new());

/// As `end(CALL, t0)`, also counted for `cmd`.
#[inline(always)]
pub fn end_call(cmd: u32, t0: u64) {
    if t0 != 0 {
        count_call(cmd, t0);
    }
}

#[cold]
#[inline(never)]
fn count_call(cmd: u32, t0: u64) {
    let ns = add(CALL, t0);
    let mut by = BY_CMD.lock().unwrap_or_else(|e| e.into_inner());
    let i = cmd as usize;
    if by.len() <= i {
        by.resize(i + 1, (0, 0));
    }
    by[i].0 += ns;
    by[i].1 += 1;
}

#[inline]
pub fn start() -> u64 {
    if HOT.profile.load(Ordering::Relaxed) {
        now_ns()
    } else {
        0
    }
}

#[inline]
pub fn end(kind: usize, t0: u64) {
    if t0 != 0 {
        add(kind, t0);
    }
}

/// Counts one span of `kind` that began at `t0`; returns its length.
fn add(kind: usize, t0: u64) -> u64 {
    let ns = now_ns().saturating_sub(t0);
    NS[kind].fetch_add(ns, Ordering::Relaxed);
    N[kind].fetch_add(1, Ordering::Relaxed);
    ns
}

/// "; app-thread time: ..." for the closing note, empty when not measured.
pub fn summary() -> String {
    if !HOT.profile.load(Ordering::Relaxed) {
        return String::new();
    }
    let parts: Vec<String> = (0..NAMES.len())
        .map(|k| {
            let (ns, n) = (NS[k].load(Ordering::Relaxed), N[k].load(Ordering::Relaxed));
            format!(
                "{} {n} x {} ns = {} us",
                NAMES[k],
                ns.checked_div(n).unwrap_or(0),
                ns / 1000
            )
        })
        .collect();
    let mut by: Vec<(usize, u64, u64)> = BY_CMD
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .enumerate()
        .filter(|(_, c)| c.1 > 0)
        .map(|(i, c)| (i, c.0, c.1))
        .collect();
    by.sort_by_key(|c| std::cmp::Reverse(c.1));
    let top: Vec<String> = by
        .iter()
        .take(12)
        .map(|&(i, ns, n)| {
            let name = vkstream::COMMANDS.get(i).copied().unwrap_or("?");
            format!("{name} {n} x {} ns", ns / n)
        })
        .collect();
    format!(
        "; app-thread time (QUARRY_CAPTURE_PROFILE): {}; costliest commands recorded: {}; writer threads' CPU time: {}",
        parts.join(", "),
        top.join(", "),
        writer_threads_cpu()
    )
}

/// CPU time of the trace writer's threads so far, from the kernel's
/// per-thread scheduler statistics: what the capture costs off the app's threads.
fn writer_threads_cpu() -> String {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return "unknown".into();
    };
    let mut threads: Vec<(String, u64)> = tasks
        .flatten()
        .filter_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            let comm = comm.trim();
            if !format::is_writer_thread(comm) {
                return None;
            }
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            let ns = stat.split_whitespace().next()?.parse().ok()?;
            Some((comm.to_string(), ns))
        })
        .collect();
    threads.sort();
    let total: u64 = threads.iter().map(|t| t.1).sum();
    let each: Vec<String> = threads
        .iter()
        .map(|(name, ns)| format!("{name} {} us", ns / 1000))
        .collect();
    format!("{} us ({})", total / 1000, each.join(", "))
}
