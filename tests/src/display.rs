//! X displays for windowed programs: the caller's `DISPLAY`, or an Xvfb server of the test's own.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `$DISPLAY` when set; otherwise prints a `SKIP:` line and gives `None`.
pub fn display_or_skip() -> Option<String> {
    let display = std::env::var("DISPLAY").ok().filter(|d| !d.is_empty());
    if display.is_none() {
        eprintln!("SKIP: no DISPLAY (scripts/test.sh starts Xvfb)");
    }
    display
}

/// An Xvfb server on a display of its own, killed on drop.
pub struct Xvfb {
    child: Child,
    pub display: String,
}

impl Xvfb {
    pub fn start() -> Xvfb {
        // Distinct displays per test process (tests in several files run at once) and per test in
        // one process (tests of one file run on threads at once).
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = 100
            + (std::process::id() % 400)
            + 50 * NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for d in n..n + 50 {
            if display_in_use(d) {
                continue;
            }
            // A socket left by a killed server would read as ready before ours starts.
            let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{d}"));
            let child = Command::new("Xvfb")
                .arg(format!(":{d}"))
                .args(["-screen", "0", "640x480x24", "-nolisten", "tcp"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start Xvfb");
            let mut x = Xvfb {
                child,
                display: format!(":{d}"),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                // Our server exited: the display was taken by someone else; try the next one.
                if let Ok(Some(_)) = x.child.try_wait() {
                    break;
                }
                if Path::new(&format!("/tmp/.X11-unix/X{d}")).exists() {
                    return x;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = x.child.kill();
            let _ = x.child.wait();
        }
        panic!("could not start Xvfb");
    }
}

/// Whether a live X server holds display `d`: its lock file names a running process. A socket or
/// lock left by a server that was killed does not count (Xvfb replaces them), so stale files from
/// earlier runs do not use up the displays.
fn display_in_use(d: u32) -> bool {
    let Ok(lock) = std::fs::read_to_string(format!("/tmp/.X{d}-lock")) else {
        // No lock: a server still starting has one; a bare socket is left over.
        return false;
    };
    match lock.trim().parse::<u32>() {
        Ok(pid) => Path::new(&format!("/proc/{pid}")).exists(),
        // Unreadable: assume someone else's server.
        Err(_) => true,
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
