//! Hostile traces: the checked-in fuzz corpus (real demo and vkcube traces), `quarry replay`
//! run with a time limit, and the outcome classified (used by `tests/replay_hostile.rs` and the
//! fuzz driver `src/bin/fuzz_replay.rs`), and the forging helpers of those tests.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use format::forge::{read_records, write_records};
use format::record::{Call, Record};

/// A trace of the checked-in corpus (`tests/fixtures/corpus/`).
pub fn corpus(name: &str) -> PathBuf {
    corpus_dir().join(name)
}

pub fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus")
}

/// The command name of a call from the trace's command table.
pub fn call_name<'t>(table: &'t [String], c: &Call) -> &'t str {
    table.get(c.cmd as usize).map_or("?", |s| s.as_str())
}

/// How one run ended.
#[derive(Debug)]
pub enum Outcome {
    /// Exited with this code.
    Exit(i32, Output),
    /// Killed by a signal (a crash).
    Signal(i32, Output),
    /// Still running at the time limit (killed).
    Hang(Output),
}

/// Runs `cmd` with piped output, killing it (and reporting a hang) after `limit`.
pub fn run_limited(cmd: &mut Command, limit: Duration) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let mut child: Child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let ro = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let re = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let mut hung = false;
    let status: ExitStatus = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            hung = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let output = Output {
        status,
        stdout: ro.join().unwrap_or_default(),
        stderr: re.join().unwrap_or_default(),
    };
    if hung {
        Outcome::Hang(output)
    } else if let Some(sig) = status.signal() {
        Outcome::Signal(sig, output)
    } else {
        Outcome::Exit(status.code().unwrap_or(-1), output)
    }
}

/// Whether lavapipe is there to replay on (asked once; prints `SKIP:` when not).
pub fn lavapipe() -> bool {
    static SEES: OnceLock<bool> = OnceLock::new();
    *SEES.get_or_init(crate::quarry_sees_lavapipe)
}

/// `quarry replay TRACE --gpu llvmpipe EXTRA...`: `None` (skip) without lavapipe; panics on a
/// crash or on a run still going after 60 s.
pub fn replay_trace(trace: &Path, extra: &[&str]) -> Option<Output> {
    if !lavapipe() {
        return None;
    }
    let mut c = crate::quarry_command();
    c.arg("replay")
        .arg(trace)
        .args(["--gpu", "llvmpipe"])
        .args(extra);
    match run_limited(&mut c, Duration::from_secs(60)) {
        Outcome::Exit(_, o) => Some(o),
        Outcome::Signal(s, o) => panic!(
            "replay of {} died of signal {s}: {}",
            trace.display(),
            crate::output_text(&o)
        ),
        Outcome::Hang(o) => panic!(
            "replay of {} still running after 60 s: {}",
            trace.display(),
            crate::output_text(&o)
        ),
    }
}

/// Longest a rejected replay may take (the checks answer at once; a debug build under load
/// replays the demo in about a second).
pub const FAST: Duration = Duration::from_secs(8);

/// The corpus trace `name` with `edit` applied to its records (command table given), written
/// as `forged-NAME` in `dir` with valid checksums.
pub fn forged(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<Record>, &[String])) -> PathBuf {
    forged_from(dir, &corpus(name), edit)
}

/// [`forged`] from any intact trace `src` (`tests/fixtures/hostile/`: a real app's trace that
/// reaches what the corpus does not), written as `forged-NAME` in `dir`.
pub fn forged_from(
    dir: &Path,
    src: &Path,
    edit: impl FnOnce(&mut Vec<Record>, &[String]),
) -> PathBuf {
    let (header, mut recs) = read_records(src).unwrap();
    let table = commands(&recs);
    edit(&mut recs, &table);
    let out = dir.join(format!(
        "forged-{}",
        src.file_name().unwrap().to_string_lossy()
    ));
    write_records(&out, header, &recs, 1 << 20).unwrap();
    out
}

/// A trace of `tests/fixtures/hostile/`.
pub fn hostile_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/hostile")
        .join(name)
}

/// The trace's command table.
pub fn commands(recs: &[Record]) -> Vec<String> {
    recs.iter()
        .find_map(|r| match r {
            Record::CommandTable(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap()
}

/// Index of the `nth` call named `name`.
pub fn find(recs: &[Record], table: &[String], name: &str, nth: usize) -> usize {
    recs.iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, Record::Call(c) if call_name(table, c) == name))
        .nth(nth)
        .unwrap_or_else(|| panic!("no call {name} #{nth}"))
        .0
}

pub fn call_mut(r: &mut Record) -> &mut Call {
    match r {
        Record::Call(c) => c,
        _ => panic!("not a call"),
    }
}

/// Asserts a replay refused the trace: exit 2, one `quarry:` line naming `call` and saying
/// `why`, quickly.
pub fn refused(out: &Output, took: Duration, call: &str, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("quarry: warning"))
        .collect();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(lines.len(), 1, "{err}");
    let l = lines[0];
    assert!(
        l.starts_with("quarry: call ") && l.contains(&format!("({call}")) && l.contains(why),
        "{l}"
    );
    assert!(took < FAST, "took {took:?}: {l}");
}

/// [`replay_trace`] with the time it took.
pub fn run(p: &Path, extra: &[&str]) -> Option<(Output, Duration)> {
    let t = Instant::now();
    let out = replay_trace(p, extra)?;
    Some((out, t.elapsed()))
}

/// The demo trace with the submit of its first query read's work removed, and the fence wait
/// after it: the read asks for queries no replayed submission can make available.
pub fn forged_read_of_unsubmitted_work(dir: &Path) -> PathBuf {
    forged(dir, "demo.qtrace", |recs, t| {
        let read = find(recs, t, "vkGetQueryPoolResults", 0);
        let is = |r: &Record, n: &str| matches!(r, Record::Call(c) if call_name(t, c) == n);
        let s = recs[..read]
            .iter()
            .rposition(|r| is(r, "vkQueueSubmit"))
            .unwrap();
        let w = s + recs[s..]
            .iter()
            .position(|r| is(r, "vkWaitForFences"))
            .unwrap();
        recs.remove(w);
        recs.remove(s);
    })
}

/// A directory for a test's forged traces; with `QUARRY_KEEP_FORGED=DIR`, DIR, so that they can be
/// replayed by hand.
pub fn scratch() -> PathBuf {
    match std::env::var_os("QUARRY_KEEP_FORGED") {
        Some(d) => {
            std::fs::create_dir_all(&d).unwrap();
            d.into()
        }
        None => tempfile::tempdir().unwrap().keep(),
    }
}
