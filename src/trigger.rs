//! `quarry trigger [--pid PID] [--frames N]`: asks a running capture on demand (`quarry capture
//! --trigger`, or an app run with `QUARRY_CAPTURE_TRIGGER=1`) to capture its next frames.
//!
//! Each such process has a datagram socket named by its pid in the user's runtime directory
//! (`capture_layer::control::sockets_dir`); sockets of processes that are gone are removed here.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use crate::bad_input;

#[derive(clap::Args)]
pub struct Args {
    /// The process to trigger (needed when several captures are running).
    #[arg(long)]
    pid: Option<u32>,
    /// Frames to capture (default: the capture's --trigger-frames).
    #[arg(long, value_name = "N")]
    frames: Option<u32>,
}

/// A running capture: its pid, program name and socket.
struct Running {
    pid: u32,
    name: String,
    socket: PathBuf,
}

/// The live captures of this user; sockets of dead processes are removed.
fn running(dir: &Path) -> Vec<Running> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut all = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let alive = unsafe { libc::kill(pid as i32, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let _ = std::fs::remove_file(e.path());
            continue;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        all.push(Running {
            pid,
            name,
            socket: e.path(),
        });
    }
    all.sort_by_key(|r| r.pid);
    all
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    if args.frames == Some(0) {
        bad_input!("--frames must be 1 or more")
    }
    let dir = capture_layer::control::sockets_dir();
    let all = running(&dir);
    let target = match args.pid {
        Some(pid) => match all.iter().find(|r| r.pid == pid) {
            Some(r) => r,
            None => bad_input!(
                "no capture on demand is running as pid {pid} (looked in {})",
                dir.display()
            ),
        },
        None => match all.as_slice() {
            [] => bad_input!(
                "no capture on demand is running (start one with `quarry capture --trigger -- \
                 PROGRAM`; looked in {})",
                dir.display()
            ),
            [one] => one,
            several => {
                let list: Vec<String> = several
                    .iter()
                    .map(|r| format!("{} ({})", r.pid, r.name))
                    .collect();
                bad_input!(
                    "{} captures are running: {}; choose one with --pid",
                    several.len(),
                    list.join(", ")
                )
            }
        },
    };
    let message = match args.frames {
        Some(n) => format!("trigger {n}"),
        None => "trigger".to_string(),
    };
    let sent = UnixDatagram::unbound().and_then(|s| s.send_to(message.as_bytes(), &target.socket));
    if let Err(e) = sent {
        let _ = std::fs::remove_file(&target.socket);
        anyhow::bail!(
            "cannot reach pid {} ({}): {e}; it no longer listens",
            target.pid,
            target.name
        )
    }
    let frames = match args.frames {
        Some(n) => format!("{n} frames"),
        None => "its trigger frames".to_string(),
    };
    crate::say!(
        "triggered pid {} ({}): capturing {frames} from its next frame",
        target.pid,
        target.name
    );
    Ok(0)
}
