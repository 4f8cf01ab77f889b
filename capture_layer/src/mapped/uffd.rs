//! Which pages of a range were written, as the kernel tells it: userfaultfd's asynchronous
//! write-protect (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7) marks a range read-only in the page tables; the
//! first write to a page is resolved by the kernel itself (no signal, no handler thread, ~0.8 µs
//! here) and leaves the page "written"; `PAGEMAP_SCAN` on `/proc/self/pagemap` lists the written
//! pages and protects them again in one call. A system call writing into the range (`read(2)` into a
//! mapped pointer) succeeds as without it: the kernel resolves its fault the same way (a
//! `mprotect` guard would make it fail with EFAULT). Reads never fault. Soft-dirty bits would need
//! `CONFIG_MEM_SOFT_DIRTY` and clear the whole process at once; this kernel has no soft-dirty.
//! Works on anonymous and shmem memory (CPU drivers such as lavapipe); device mappings (VM_PFNMAP)
//! refuse the registration and stay with shadow compare.
//!
//! Depends on nothing but libc (a leaf). Constants from the kernel's uapi headers (6.7): the
//! system headers here predate them.

use std::sync::OnceLock;

const PAGE: usize = 4096;
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
// _IOWR(0xAA, 0x3F, struct uffdio_api), _IOWR(0xAA, 0x00, struct uffdio_register),
// _IOR(0xAA, 0x01, struct uffdio_range), _IOWR(0xAA, 0x06, struct uffdio_writeprotect).
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
const UFFDIO_UNREGISTER: libc::c_ulong = 0x8010_AA01;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xC018_AA06;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1;
// _IOWR('f', 16, struct pm_scan_arg)
const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
const PM_SCAN_WP_MATCHING: u64 = 1;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// The process's one userfaultfd (registrations live as long as it is open) and pagemap file.
struct Kernel {
    uffd: libc::c_int,
    pagemap: libc::c_int,
}

static KERNEL: OnceLock<Result<Kernel, String>> = OnceLock::new();

fn kernel() -> Result<&'static Kernel, String> {
    KERNEL.get_or_init(open).as_ref().map_err(Clone::clone)
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn open() -> Result<Kernel, String> {
    // User-mode-only faults need no privilege (vm.unprivileged_userfaultfd=0); asynchronous faults are
    // resolved by the kernel whatever their mode, system calls' included.
    // SAFETY: plain system calls on fds this function owns.
    unsafe {
        let uffd = libc::syscall(
            libc::SYS_userfaultfd,
            libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
        ) as libc::c_int;
        if uffd < 0 {
            return Err(format!("userfaultfd: {}", errno()));
        }
        let want = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
        let mut api = UffdioApi {
            api: UFFD_API,
            features: want,
            ioctls: 0,
        };
        if libc::ioctl(uffd, UFFDIO_API, &mut api) != 0 || api.features & want != want {
            let e = errno();
            libc::close(uffd);
            return Err(format!("userfaultfd asynchronous write-protect: {e}"));
        }
        let pagemap = libc::open(
            c"/proc/self/pagemap".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if pagemap < 0 {
            let e = errno();
            libc::close(uffd);
            return Err(format!("/proc/self/pagemap: {e}"));
        }
        Ok(Kernel { uffd, pagemap })
    }
}

/// A write-protected, page-aligned range `[start, start + len)`; unregistered when dropped.
#[derive(Debug)]
pub struct Guard {
    start: usize,
    len: usize,
}

impl Guard {
    /// Registers and protects the range (page-aligned, non-empty). Errors name what the kernel refused.
    ///
    /// # Safety
    /// The range must stay mapped until the guard is dropped.
    pub unsafe fn new(start: usize, len: usize) -> Result<Guard, String> {
        debug_assert!(start.is_multiple_of(PAGE) && len.is_multiple_of(PAGE) && len > 0);
        let k = kernel()?;
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        if libc::ioctl(k.uffd, UFFDIO_REGISTER, &mut reg) != 0 {
            return Err(format!("registering the mapping: {}", errno()));
        }
        let g = Guard { start, len };
        let mut wp = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_WRITEPROTECT_MODE_WP,
        };
        if libc::ioctl(k.uffd, UFFDIO_WRITEPROTECT, &mut wp) != 0 {
            return Err(format!("write-protecting the mapping: {}", errno()));
        }
        Ok(g)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends the runs of pages written since the last call (offsets from the range's start,
    /// adjacent runs merged) and protects them again, leaving out the whole pages inside `skip`
    /// (sorted offset ranges): those stay unprotected once written, costing no fault again.
    pub fn take_written(
        &self,
        skip: &[(usize, usize)],
        out: &mut Vec<(usize, usize)>,
    ) -> Result<(), String> {
        let mut at = 0;
        for &(a, b) in skip {
            let (a, b) = (a.div_ceil(PAGE) * PAGE, (b / PAGE * PAGE).min(self.len));
            if a >= b || a < at {
                continue;
            }
            self.scan(at, a, Some(out))?;
            at = b;
        }
        self.scan(at, self.len, Some(out))
    }

    /// Protects again the whole pages inside `[off, off + len)` without reporting them: what they
    /// hold now is known otherwise.
    pub fn forget(&self, off: usize, len: usize) -> Result<(), String> {
        let a = off.div_ceil(PAGE) * PAGE;
        let b = ((off + len) / PAGE * PAGE).min(self.len);
        if a >= b {
            return Ok(());
        }
        self.scan(a, b, None)
    }

    fn scan(
        &self,
        from: usize,
        to: usize,
        mut out: Option<&mut Vec<(usize, usize)>>,
    ) -> Result<(), String> {
        let k = kernel()?;
        let mut vec = [PageRegion::default(); 64];
        let end = (self.start + to) as u64;
        let mut at = (self.start + from) as u64;
        while at < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                start: at,
                end,
                walk_end: 0,
                vec: vec.as_mut_ptr() as u64,
                vec_len: vec.len() as u64,
                max_pages: 0,
                category_inverted: 0,
                category_mask: PAGE_IS_WRITTEN,
                category_anyof_mask: 0,
                return_mask: PAGE_IS_WRITTEN,
            };
            // SAFETY: `arg` and `vec` outlive the call; the kernel writes at most `vec_len` regions.
            let n = unsafe { libc::ioctl(k.pagemap, PAGEMAP_SCAN, &mut arg) };
            if n < 0 {
                return Err(format!("PAGEMAP_SCAN: {}", errno()));
            }
            if let Some(out) = out.as_deref_mut() {
                for r in &vec[..n as usize] {
                    let (a, b) = (r.start as usize - self.start, r.end as usize - self.start);
                    match out.last_mut() {
                        Some(last) if last.1 == a => last.1 = b,
                        _ => out.push((a, b)),
                    }
                }
            }
            if arg.walk_end <= at {
                return Err("PAGEMAP_SCAN made no progress".into());
            }
            at = arg.walk_end;
        }
        Ok(())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Ok(k) = kernel() else { return };
        let mut range = UffdioRange {
            start: self.start as u64,
            len: self.len as u64,
        };
        // SAFETY: unregisters the range this guard registered (write protection goes with it).
        unsafe { libc::ioctl(k.uffd, UFFDIO_UNREGISTER, &mut range) };
    }
}

/// Whether this process can guard anonymous memory (the error says why not).
#[cfg(test)]
pub fn available() -> Result<(), String> {
    kernel().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Anon(*mut u8, usize);
    impl Anon {
        fn new(len: usize) -> Anon {
            // SAFETY: a fresh private anonymous mapping.
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
            Anon(p as *mut u8, len)
        }
    }
    impl Drop for Anon {
        fn drop(&mut self) {
            // SAFETY: unmaps what `new` mapped.
            unsafe { libc::munmap(self.0 as *mut _, self.1) };
        }
    }

    #[test]
    fn written_pages_and_system_call_writes_are_reported_once() {
        if let Err(e) = available() {
            eprintln!("skipped: {e}");
            return;
        }
        let m = Anon::new(64 * PAGE);
        // SAFETY: writes inside the mapping, which outlives the guard.
        unsafe {
            m.0.add(3 * PAGE).write(1);
            let g = Guard::new(m.0 as usize, m.1).unwrap();
            let mut w = Vec::new();
            g.take_written(&[], &mut w).unwrap();
            assert!(w.is_empty(), "protection starts clean: {w:?}");
            m.0.add(5).write(7);
            m.0.add(10 * PAGE - 1).write(7);
            m.0.add(10 * PAGE).write(7);
            let _ = *m.0.add(40 * PAGE); // reads are not writes
            let mut fds = [0; 2];
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            assert_eq!(libc::write(fds[1], b"abc".as_ptr() as *const _, 3), 3);
            let n = libc::read(fds[0], m.0.add(20 * PAGE + 4095) as *mut _, 3);
            assert_eq!(n, 3, "read(2) into a guarded page succeeds");
            libc::close(fds[0]);
            libc::close(fds[1]);
            g.take_written(&[], &mut w).unwrap();
            assert_eq!(
                w,
                vec![(0, PAGE), (9 * PAGE, 11 * PAGE), (20 * PAGE, 22 * PAGE)]
            );
            w.clear();
            g.take_written(&[], &mut w).unwrap();
            assert!(w.is_empty(), "protected again: {w:?}");
            m.0.add(30 * PAGE).write(1);
            g.forget(29 * PAGE + 1, 2 * PAGE).unwrap();
            g.take_written(&[], &mut w).unwrap();
            assert!(w.is_empty(), "forgotten: {w:?}");
            drop(g);
            m.0.add(30 * PAGE).write(2);
        }
    }
}
