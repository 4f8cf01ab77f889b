//! Host-memory change detection, the two approaches side by side, in one run:
//!
//! - **shadow** (what the layer does below 256 KiB): keep a copy of each mapped range; at a submit
//!   compare page by page and send the pages that differ (`state::diff_pages`).
//! - **page guard** (GFXReconstruct's approach): write-protect the mapping; the app's first write to
//!   a page faults, a SIGSEGV handler marks the page dirty and unprotects it; at a submit send the
//!   dirty pages and protect them again.
//!
//! The layer guards mappings of 256 KiB and more with userfaultfd's asynchronous write-protect
//! instead (`mapped::uffd`: no signal, the kernel resolves the fault in ~1-3 µs and system calls into
//! the mapping work), which this bench does not time.
//!
//! One cycle = the app writes one byte into each of `k` pages, then one scan finds and copies them.
//! Reported: median ns per cycle over the repetitions, for mapping sizes and dirty-page counts, and
//! page guard / shadow. Run: `cargo bench -p capture_layer --bench host_memory`.
//! Anonymous memory stands in for a driver mapping (some drivers' mappings cannot be protected at
//! all, which is a cost of the page guard this does not show).

use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::time::Instant;
use VkLayer_quarry_capture::state::{diff_pages, PAGE};

static BASE: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
static DIRTY: AtomicPtr<AtomicU8> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn on_fault(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo; only atomics and mprotect (async-signal-safe).
    unsafe {
        let addr = (*info).si_addr() as usize;
        let base = BASE.load(Ordering::Relaxed);
        if addr < base || addr >= base + LEN.load(Ordering::Relaxed) {
            // Not ours: back to the default action, which the retried access then takes.
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            return;
        }
        let page = (addr - base) / PAGE;
        (*DIRTY.load(Ordering::Relaxed).add(page)).store(1, Ordering::Relaxed);
        libc::mprotect(
            (base + page * PAGE) as *mut libc::c_void,
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
        );
    }
}

struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Self {
        // SAFETY: a fresh anonymous private mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // Touch every page so first-touch faults do not count.
        unsafe { std::ptr::write_bytes(p as *mut u8, 1, len) };
        Mapping {
            ptr: p as *mut u8,
            len,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our mapping.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The pages written in one cycle: `k` spread evenly.
fn pages(total: usize, k: usize) -> Vec<usize> {
    (0..k).map(|i| i * total / k.max(1)).collect()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn shadow_cycle(m: &Mapping, shadow: &mut [u8], written: &[usize], round: u8) -> (u64, usize) {
    let t = Instant::now();
    for &p in written {
        // SAFETY: inside the mapping.
        unsafe { std::ptr::write_volatile(m.ptr.add(p * PAGE + 7), round) };
    }
    // SAFETY: the mapping is `m.len` bytes.
    let live = unsafe { std::slice::from_raw_parts(m.ptr, m.len) };
    let out = diff_pages(live, shadow);
    let bytes = out.iter().map(|(_, b)| b.len()).sum();
    (t.elapsed().as_nanos() as u64, bytes)
}

fn guard_cycle(m: &Mapping, dirty: &[AtomicU8], written: &[usize], round: u8) -> (u64, usize) {
    let t = Instant::now();
    for &p in written {
        // SAFETY: inside the mapping; a protected page faults once and is unprotected.
        unsafe { std::ptr::write_volatile(m.ptr.add(p * PAGE + 7), round) };
    }
    // The scan: copy runs of dirty pages, protect them again.
    let mut out: Vec<(usize, Vec<u8>)> = Vec::new();
    let n = dirty.len();
    let mut i = 0;
    while i < n {
        if dirty[i].load(Ordering::Relaxed) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && dirty[i].load(Ordering::Relaxed) != 0 {
            dirty[i].store(0, Ordering::Relaxed);
            i += 1;
        }
        // SAFETY: pages [start, i) of the mapping.
        unsafe {
            let p = m.ptr.add(start * PAGE);
            out.push((
                start * PAGE,
                std::slice::from_raw_parts(p, (i - start) * PAGE).to_vec(),
            ));
            libc::mprotect(p as *mut libc::c_void, (i - start) * PAGE, libc::PROT_READ);
        }
    }
    let bytes = out.iter().map(|(_, b)| b.len()).sum();
    (t.elapsed().as_nanos() as u64, bytes)
}

fn main() {
    // SAFETY: installing a handler that only touches atomics and calls mprotect.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_fault as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
    }
    let reps = std::env::var("REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15usize);
    println!("host-memory change detection, median of {reps} cycles (write k pages, then scan)");
    println!(
        "{:>10} {:>8} {:>14} {:>14} {:>8}",
        "mapping", "dirty", "shadow ns", "page guard ns", "guard/shadow"
    );
    for &size in &[64usize << 10, 1 << 20, 16 << 20, 256 << 20] {
        let npages = size / PAGE;
        let m = Mapping::new(size);
        let mut shadow = unsafe { std::slice::from_raw_parts(m.ptr, size) }.to_vec();
        let dirty: Vec<AtomicU8> = (0..npages).map(|_| AtomicU8::new(0)).collect();
        BASE.store(m.ptr as usize, Ordering::Relaxed);
        LEN.store(size, Ordering::Relaxed);
        DIRTY.store(dirty.as_ptr() as *mut AtomicU8, Ordering::Relaxed);
        let mut ks = vec![0usize, 1, npages / 100, npages / 10, npages];
        ks.sort_unstable();
        ks.dedup();
        for k in ks {
            let written = pages(npages, k);
            let mut s = Vec::new();
            let mut g = Vec::new();
            for r in 0..reps {
                let round = (r % 250) as u8 + 2;
                let (ns, bytes_s) = shadow_cycle(&m, &mut shadow, &written, round);
                s.push(ns);
                // Start every guard cycle from a protected mapping whose pages are clean.
                unsafe { libc::mprotect(m.ptr as *mut libc::c_void, size, libc::PROT_READ) };
                let (ns, bytes_g) = guard_cycle(&m, &dirty, &written, round.wrapping_add(100));
                g.push(ns);
                unsafe {
                    libc::mprotect(
                        m.ptr as *mut libc::c_void,
                        size,
                        libc::PROT_READ | libc::PROT_WRITE,
                    )
                };
                // The shadow must see the guard cycle's writes as already sent.
                shadow.copy_from_slice(unsafe { std::slice::from_raw_parts(m.ptr, size) });
                assert_eq!(bytes_s, bytes_g, "both find the same pages");
            }
            let (s, g) = (median(s), median(g));
            println!(
                "{:>9}K {:>8} {:>14} {:>14} {:>7.2}x",
                size >> 10,
                k,
                s,
                g,
                g as f64 / s.max(1) as f64
            );
        }
    }
}
