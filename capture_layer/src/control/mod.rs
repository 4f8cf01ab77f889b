//! The layer's control thread: triggers for capture on demand, and the status channel to
//! `quarry capture`.
//!
//! - **Triggers** set [`REQUEST`] (frames asked for); the frame path reads it with one relaxed load
//!   at each boundary while tracking ([`take_request`]): no syscall, no lock of its own. Sources: a
//!   datagram on this process's control socket (`quarry trigger`), the launcher's channel, a
//!   trigger file appearing, the trigger-after delay, and the hotkey (`hotkey`), all watched here.
//! - **The status channel**: `QUARRY_CAPTURE_STATUS_FD` names an inherited socket whose other end
//!   the launcher holds. The layer writes one line per finished trace or write error
//!   ([`status`]); the thread blocks in poll on it, and EOF or a hang-up there means the launcher
//!   is gone, which finishes the trace in progress (`on_parent_death`).
//!
//! The control socket is `$XDG_RUNTIME_DIR/quarry/captures/<pid>` (`/tmp/quarry-<uid>/...`
//! without it), a datagram socket in a directory only the user can enter, removed at exit.
//!
//! Depends on: `settings`, `x11rb` (in `hotkey`). Below `runtime`, which passes it callbacks.

pub mod hotkey;

use crate::settings::Trigger;
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Names the launcher's end of the status channel, an inherited file descriptor.
pub const ENV_STATUS_FD: &str = "QUARRY_CAPTURE_STATUS_FD";
/// Directories of the launcher's temporary manifests (`:`-separated), removed if the launcher dies.
pub const ENV_MANIFEST_DIRS: &str = "QUARRY_CAPTURE_MANIFEST_DIRS";

/// Frames the latest trigger asked for; 0: none pending.
static REQUEST: AtomicU32 = AtomicU32::new(0);
/// When the pending trigger came (`monotonic_ns`).
static REQUEST_AT: AtomicU64 = AtomicU64::new(0);
/// What sent the pending trigger (for the trace's note).
static REQUEST_FROM: Mutex<String> = Mutex::new(String::new());
/// The status channel's descriptor, -1 when there is none.
static STATUS_FD: AtomicI32 = AtomicI32::new(-1);
static STARTED: AtomicBool = AtomicBool::new(false);
/// Whether the thread watches the hotkey only once the app presents (set by `runtime`).
pub static WINDOWED: AtomicBool = AtomicBool::new(false);

/// The frame path's check: frames a trigger asked for, taken (0: none).
#[inline]
pub fn take_request() -> u32 {
    if REQUEST.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    REQUEST.swap(0, Ordering::AcqRel)
}

/// What sent the trigger just taken, and when (`monotonic_ns`).
pub fn request_source() -> (String, u64) {
    let from = REQUEST_FROM.lock().map(|s| s.clone()).unwrap_or_default();
    (from, REQUEST_AT.load(Ordering::Relaxed))
}

/// CLOCK_MONOTONIC in ns (the runtime's `now_ns` clock): trigger-to-capture latencies.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Asks for a capture of `frames` frames at the next frame boundary (a pending one is replaced).
pub fn request(frames: u32, from: &str) {
    if let Ok(mut s) = REQUEST_FROM.lock() {
        *s = from.to_string();
    }
    REQUEST_AT.store(monotonic_ns(), Ordering::Relaxed);
    REQUEST.store(frames.max(1), Ordering::Release);
}

/// Sends one line to the launcher, if there is one; never blocks for long or raises SIGPIPE.
pub fn status(line: &str) {
    let fd = STATUS_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let text = format!("{}\n", line.replace('\n', " "));
    // SAFETY: a plain send on a descriptor the launcher gave us; MSG_NOSIGNAL: a dead launcher is an
    // error return, not a signal.
    unsafe {
        libc::send(
            fd,
            text.as_ptr().cast(),
            text.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
}

/// The directory of the control sockets of this user's captures.
pub fn sockets_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("quarry").join("captures"),
        // SAFETY: getuid cannot fail.
        None => {
            PathBuf::from(format!("/tmp/quarry-{}", unsafe { libc::getuid() })).join("captures")
        }
    }
}

/// What the control thread calls back into (the runtime sits above this module).
pub struct Hooks {
    /// The launcher is gone: finish the trace in progress.
    pub on_parent_death: fn(),
}

/// Starts the control thread once per process, when there is something to watch: trigger mode, or
/// a status channel. Errors are logged and leave the rest of the capture working.
pub fn start(trigger: Option<&Trigger>, hooks: Hooks, log: fn(&str)) {
    let status_fd = std::env::var(ENV_STATUS_FD)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        .filter(|&fd| fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0);
    if trigger.is_none() && status_fd.is_none() {
        return;
    }
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    if let Some(fd) = status_fd {
        // Not passed on to programs the app runs: they are not the launcher's child.
        // SAFETY: setting FD_CLOEXEC on our own descriptor.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        STATUS_FD.store(fd, Ordering::Relaxed);
    }
    let socket = trigger.and_then(|_| match bind() {
        Ok(s) => Some(s),
        Err(e) => {
            log(&format!("quarry trigger will not reach this process: {e}"));
            None
        }
    });
    let watch = Watch {
        trigger: trigger.cloned(),
        status_fd,
        socket,
        hooks,
        log,
    };
    let spawned = std::thread::Builder::new()
        .name("quarry-control".into())
        .spawn(move || watch.run());
    if let Err(e) = spawned {
        log(&format!("cannot start the layer's control thread: {e}"));
    }
}

/// Binds this process's control socket (a stale one of a dead process of the same pid is replaced).
fn bind() -> Result<UnixDatagram, String> {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = sockets_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(std::process::id().to_string());
    let _ = std::fs::remove_file(&path);
    let s =
        UnixDatagram::bind(&path).map_err(|e| format!("cannot bind {}: {e}", path.display()))?;
    *SOCKET_PATH.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    extern "C" fn remove_socket() {
        let _ = std::panic::catch_unwind(remove_endpoint);
    }
    // SAFETY: registering a plain extern "C" fn that never unwinds.
    unsafe { libc::atexit(remove_socket) };
    Ok(s)
}

static SOCKET_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Removes this process's control socket (at exit).
pub fn remove_endpoint() {
    if let Some(p) = SOCKET_PATH.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = std::fs::remove_file(p);
    }
}

/// A trigger message, `trigger [N]`: the frames asked for (0: the default).
fn parse_message(text: &str) -> Option<u32> {
    let mut words = text.split_whitespace();
    if words.next()? != "trigger" {
        return None;
    }
    Some(words.next().and_then(|n| n.parse().ok()).unwrap_or(0))
}

struct Watch {
    trigger: Option<Trigger>,
    status_fd: Option<i32>,
    socket: Option<UnixDatagram>,
    hooks: Hooks,
    log: fn(&str),
}

/// How often the periodic sources (trigger file, hotkey, the delay) are looked at.
const TICK: Duration = Duration::from_millis(40);

impl Watch {
    fn run(mut self) {
        let start = Instant::now();
        let mut after = self.trigger.as_ref().and_then(|t| t.after);
        let mut hotkey = HotkeyState::new(self.trigger.as_ref());
        let default_frames = self.trigger.as_ref().map_or(1, |t| t.frames);
        let mut line = Vec::new();
        loop {
            // Woken only when something must be looked at: sockets alone wait in poll.
            let periodic = self.trigger.as_ref().is_some_and(|t| t.file.is_some())
                || after.is_some()
                || hotkey.key.is_some();
            let mut fds = Vec::with_capacity(2);
            if let Some(fd) = self.status_fd {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            if let Some(s) = &self.socket {
                fds.push(libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            if fds.is_empty() && !periodic {
                return;
            }
            let timeout = if periodic {
                TICK.as_millis() as i32
            } else {
                -1
            };
            // SAFETY: `fds` is a valid array of pollfd for the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return;
            }
            for p in &fds {
                if p.revents == 0 {
                    continue;
                }
                if Some(p.fd) == self.status_fd {
                    self.status_ready(p.revents, &mut line, default_frames);
                } else if let Some(s) = &self.socket {
                    let mut buf = [0u8; 128];
                    if let Ok(n) = s.recv(&mut buf) {
                        if let Some(frames) = parse_message(&String::from_utf8_lossy(&buf[..n])) {
                            let frames = if frames == 0 { default_frames } else { frames };
                            request(frames, "quarry trigger");
                        }
                    }
                }
            }
            let Some(t) = &self.trigger else { continue };
            if let Some(file) = &t.file {
                if file.exists() && std::fs::remove_file(file).is_ok() {
                    request(t.frames, &format!("trigger file {}", file.display()));
                }
            }
            if after.is_some_and(|a| start.elapsed() >= a) {
                after = None;
                request(t.frames, "trigger-after");
            }
            if hotkey.pressed(self.log) {
                request(t.frames, "hotkey");
            }
        }
    }

    /// The launcher's end spoke or went away.
    fn status_ready(&mut self, revents: i16, line: &mut Vec<u8>, default_frames: u32) {
        let Some(fd) = self.status_fd else { return };
        let mut buf = [0u8; 256];
        // SAFETY: reading into a stack buffer from our own descriptor.
        let n = if revents & libc::POLLIN != 0 {
            unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) }
        } else {
            0
        };
        if n > 0 {
            line.extend_from_slice(&buf[..n as usize]);
            while let Some(end) = line.iter().position(|&b| b == b'\n') {
                let text: Vec<u8> = line.drain(..=end).collect();
                if let Some(f) = parse_message(&String::from_utf8_lossy(&text)) {
                    request(if f == 0 { default_frames } else { f }, "quarry capture");
                }
            }
            return;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock {
            return;
        }
        // EOF, a hang-up or an error: the launcher is gone.
        self.status_fd = None;
        STATUS_FD.store(-1, Ordering::Relaxed);
        (self.hooks.on_parent_death)();
        remove_manifests();
    }
}

/// The launcher died: its temporary manifests (only quarry's manifest files, then the emptied
/// directories) go with it, as it would have removed them.
fn remove_manifests() {
    let Ok(dirs) = std::env::var(ENV_MANIFEST_DIRS) else {
        return;
    };
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("VkLayer_quarry_") && name.ends_with(".json") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}

/// The hotkey, watched once the app presents to an X display.
struct HotkeyState {
    key: Option<hotkey::Key>,
    watcher: Option<hotkey::Watcher>,
}

impl HotkeyState {
    fn new(trigger: Option<&Trigger>) -> HotkeyState {
        let has_display = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty());
        let key = trigger
            .and_then(|t| t.hotkey.as_deref())
            .filter(|_| has_display)
            .and_then(hotkey::parse);
        HotkeyState { key, watcher: None }
    }

    fn pressed(&mut self, log: fn(&str)) -> bool {
        let Some(key) = &self.key else { return false };
        if !WINDOWED.load(Ordering::Relaxed) {
            return false;
        }
        if self.watcher.is_none() {
            match hotkey::Watcher::connect(key) {
                Ok(w) => self.watcher = Some(w),
                Err(e) => {
                    log(&format!("hotkey off: {e}"));
                    self.key = None;
                    return false;
                }
            }
        }
        let w = self.watcher.as_mut().expect("connected above");
        match w.pressed() {
            Ok(p) => p,
            Err(e) => {
                log(&format!("hotkey off: {e}"));
                (self.key, self.watcher) = (None, None);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_requests() {
        assert_eq!(parse_message("trigger"), Some(0));
        assert_eq!(parse_message("trigger 3\n"), Some(3));
        assert_eq!(parse_message("hello"), None);
        assert_eq!(take_request(), 0);
        request(2, "test");
        assert_eq!(take_request(), 2);
        assert_eq!(request_source().0, "test");
        assert_eq!(take_request(), 0);
    }
}
