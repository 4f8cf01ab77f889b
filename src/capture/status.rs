//! The launcher's end of the layer's status channel: a socket pair whose other end the program
//! inherits (named by `QUARRY_CAPTURE_STATUS_FD`). The layer writes one line per finished trace
//! (`trace FIRST FRAMES PATH`), trigger trace opened (`open PATH`) or write error
//! (`error MESSAGE`), and takes quarry's death (EOF on
//! its end) as the sign to finish the trace; quarry can send `trigger N` lines the other way.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// One line from the layer.
#[derive(Debug, Clone)]
pub enum Status {
    /// A trace was finished: its first frame, frame count and path.
    Trace {
        first: u64,
        frames: u64,
        path: PathBuf,
    },
    /// The layer stopped writing, and why.
    Error(String),
    /// A trigger's trace was opened (it is finished unless the program ends first).
    Open(PathBuf),
}

impl Status {
    fn parse(line: &str) -> Option<Status> {
        if let Some(p) = line.strip_prefix("open ") {
            return Some(Status::Open(PathBuf::from(p)));
        }
        if let Some(m) = line.strip_prefix("error ") {
            return Some(Status::Error(m.to_string()));
        }
        let rest = line.strip_prefix("trace ")?;
        let mut parts = rest.splitn(3, ' ');
        Some(Status::Trace {
            first: parts.next()?.parse().ok()?,
            frames: parts.next()?.parse().ok()?,
            path: PathBuf::from(parts.next()?),
        })
    }
}

/// quarry's end, and the lines read from it so far.
pub struct Channel {
    ours: UnixStream,
    /// The program's end, until the program is started.
    theirs: Option<UnixStream>,
    lines: mpsc::Receiver<Status>,
    sender: Option<mpsc::Sender<Status>>,
}

impl Channel {
    pub fn new() -> std::io::Result<Channel> {
        let (ours, theirs) = UnixStream::pair()?;
        let (sender, lines) = mpsc::channel();
        Ok(Channel {
            ours,
            theirs: Some(theirs),
            lines,
            sender: Some(sender),
        })
    }

    /// Hands the program its end (kept open across exec) and names it in the environment; the
    /// temporary manifest directories are named too, for the layer to remove if quarry dies.
    pub fn apply(&self, cmd: &mut Command, manifest_dirs: &[&std::path::Path]) {
        let Some(theirs) = &self.theirs else { return };
        let fd = theirs.as_raw_fd();
        cmd.env(capture_layer::control::ENV_STATUS_FD, fd.to_string());
        let dirs: Vec<String> = manifest_dirs
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        cmd.env(capture_layer::control::ENV_MANIFEST_DIRS, dirs.join(":"));
        // SAFETY: only fcntl (async-signal-safe) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The program runs: quarry closes its copy of the program's end (so the program's exit is
    /// EOF here) and reads lines on a thread, each passed to `each` as it comes.
    pub fn started(&mut self, mut each: impl FnMut(&Status) + Send + 'static) {
        self.theirs = None;
        let Some(sender) = self.sender.take() else {
            return;
        };
        let Ok(read) = self.ours.try_clone() else {
            return;
        };
        std::thread::spawn(move || {
            for line in BufReader::new(read).lines() {
                let Ok(line) = line else { break };
                if let Some(s) = Status::parse(line.trim_end()) {
                    each(&s);
                    if sender.send(s).is_err() {
                        break;
                    }
                }
            }
        });
    }

    /// A handle that sends triggers from another thread.
    pub fn sender(&self) -> Sender {
        Sender(self.ours.try_clone().ok())
    }

    /// Every line read, once the program has exited (lines still in flight get a moment; a
    /// process the program started may hold the channel open, so no waiting for EOF).
    pub fn finish(&self) -> Vec<Status> {
        let mut all = Vec::new();
        while let Ok(s) = self.lines.recv_timeout(Duration::from_millis(300)) {
            all.push(s);
        }
        all
    }
}

/// Sends triggers to the layer.
pub struct Sender(Option<UnixStream>);

impl Sender {
    /// Asks the layer for a trigger of `frames` frames.
    pub fn trigger(&self, frames: u32) {
        if let Some(mut s) = self.0.as_ref() {
            let _ = s.write_all(format!("trigger {frames}\n").as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        match Status::parse("trace 12 3 /a b/c_1.qtrace") {
            Some(Status::Trace {
                first: 12,
                frames: 3,
                path,
            }) => assert_eq!(path, PathBuf::from("/a b/c_1.qtrace")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Status::parse("error disk full"),
            Some(Status::Error(m)) if m == "disk full"
        ));
        assert!(Status::parse("hello").is_none());
    }
}
