//! The real-programs tier (`tests/tests/real_programs*.rs`): programs nobody here wrote (vkd3d,
//! ffmpeg's Vulkan filters, Vulkan compute packages from PyPI, GL on Zink, wgpu), each run without
//! the layer, under `quarry capture` (whole and trimmed) and replayed with `--compare`.
//!
//! [`App`] says how to run one; [`App::plain`] and [`App::capture`] run it to its end (a program
//! that runs until its window gets Escape gets it once its window is up, or once a capture's
//! `--frames` range has ended), [`app_output`] is what the program itself printed under capture,
//! [`replay_compare`] replays a trace on lavapipe, and [`queries_read`] / [`assert_compared`] hold
//! the comparison to the queries the trace read.

use format::query::QueryKind;
use format::record::Record;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::{
    find_layer_library, output_text, quarry_exe, read_trace, text, trace_complete, vulkan_command,
    wait_until,
};

/// How long a program may take before the test calls it hung (each runs for seconds).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A program that runs until Escape reaches its window (vkd3d's demos).
#[derive(Clone)]
pub struct Window {
    /// The X display it runs on.
    pub display: String,
    /// Its window's title (`xdotool search --name`).
    pub title: &'static str,
}

/// One program, as the tests run it.
#[derive(Clone)]
pub struct App {
    /// A short name for scratch files.
    pub name: &'static str,
    pub argv: Vec<String>,
    pub env: Vec<(&'static str, String)>,
    /// Variables the program must not see (on top of [`vulkan_command`]'s).
    pub env_remove: Vec<&'static str>,
    pub window: Option<Window>,
}

impl App {
    pub fn new(name: &'static str, argv: &[&str]) -> App {
        App {
            name,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            env_remove: Vec::new(),
            window: None,
        }
    }

    pub fn env(mut self, k: &'static str, v: &str) -> App {
        self.env.push((k, v.to_string()));
        self
    }

    pub fn env_remove(mut self, k: &'static str) -> App {
        self.env_remove.push(k);
        self
    }

    pub fn window(mut self, display: &str, title: &'static str) -> App {
        self.env.push(("DISPLAY", display.to_string()));
        self.window = Some(Window {
            display: display.to_string(),
            title,
        });
        self
    }

    /// `program` on lavapipe with this app's environment.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = vulkan_command(program);
        c.env_remove("VK_ADD_LAYER_PATH")
            .env_remove("QUARRY_CAPTURE_FILE");
        if self.window.is_none() {
            c.env_remove("DISPLAY");
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for k in &self.env_remove {
            c.env_remove(k);
        }
        c
    }

    /// The program without the layer, to its end.
    pub fn plain(&self) -> Output {
        let mut c = self.command(&self.argv[0]);
        c.args(&self.argv[1..]);
        let out = self.finish(c, None);
        assert!(
            out.status.success(),
            "{} failed without the layer: {}",
            self.name,
            output_text(&out)
        );
        out
    }

    /// `quarry capture --force [capture_args] -o TRACE -- program`, to its end; asserts the
    /// capture succeeded and the trace is complete.
    pub fn capture(&self, trace: &Path, capture_args: &[&str]) -> Output {
        let library =
            find_layer_library().expect("build the layer first: cargo build -p capture_layer");
        let mut c = self.command(quarry_exe());
        c.env("QUARRY_CAPTURE_LAYER_LIBRARY", &library)
            .arg("capture")
            .arg("--force")
            .args(capture_args)
            .arg("-o")
            .arg(trace)
            .arg("--")
            .args(&self.argv);
        let ranged = capture_args.contains(&"--frames");
        let out = self.finish(c, ranged.then_some(trace));
        let t = output_text(&out);
        assert!(out.status.success(), "capture of {} failed: {t}", self.name);
        assert!(t.contains("trace complete"), "{t}");
        out
    }

    /// Runs `c` to its end. A windowed program gets Escape once its window is up (and, when
    /// `complete` names a trace, once that trace is finished: a capture's `--frames` range ended).
    fn finish(&self, mut c: Command, complete: Option<&Path>) -> Output {
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.name));
        let pid = child.id();
        // Collect output on threads so a chatty program never blocks on a full pipe.
        let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let o = std::thread::spawn(move || {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut so, &mut b).ok();
            b
        });
        let e = std::thread::spawn(move || {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut se, &mut b).ok();
            b
        });
        if let Some(w) = &self.window {
            // A program that ended first (it failed) is judged by its status below.
            let mut gone = false;
            let up = wait_until(RUN_LIMIT, || {
                gone = child.try_wait().ok().flatten().is_some();
                gone || (complete.is_none_or(trace_complete) && window_id(w).is_some())
            });
            if up && !gone {
                // A few frames on screen before a plain run or a whole capture ends.
                if complete.is_none() {
                    std::thread::sleep(Duration::from_millis(700));
                }
                press_escape(w);
            }
        }
        let mut status = None;
        let ended = wait_until(RUN_LIMIT, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        if !ended {
            // `quarry capture` runs the program as its child: end both.
            for c in crate::children_of(pid) {
                crate::signal(c, libc::SIGKILL);
            }
            crate::signal(pid, libc::SIGKILL);
            let _ = child.wait();
            panic!("{} ran past {RUN_LIMIT:?}", self.name);
        }
        Output {
            status: status.unwrap(),
            stdout: o.join().unwrap(),
            stderr: e.join().unwrap(),
        }
    }
}

/// The X id of `w`'s window, once it is mapped.
fn window_id(w: &Window) -> Option<String> {
    let out = Command::new("xdotool")
        .env("DISPLAY", &w.display)
        .args(["search", "--name", w.title])
        .output()
        .ok()?;
    text(&out.stdout).lines().next().map(str::to_string)
}

fn press_escape(w: &Window) {
    if let Some(id) = window_id(w) {
        // xdotool reports an X error once the window is gone after the key: not ours to judge.
        let _ = Command::new("xdotool")
            .env("DISPLAY", &w.display)
            .args(["key", "--window", &id, "Escape"])
            .stderr(Stdio::null())
            .status();
    }
}

/// Lines quarry itself prints around a captured program: its summary on stdout, its `quarry:`
/// lines (the launcher's and the layer's) on stderr.
fn quarry_line(l: &str) -> bool {
    l.starts_with("quarry: ")
        || l.starts_with("trace: ")
        || l.starts_with("trace complete: ")
        || (l.starts_with("frames ") && l.contains(" calls ") && l.contains(" query reads "))
}

/// What the program itself printed, stdout then stderr, from a run with or without capture.
pub fn app_output(o: &Output) -> (String, String) {
    let keep = |b: &[u8]| {
        text(b)
            .lines()
            .filter(|l| !quarry_line(l))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    (keep(&o.stdout), keep(&o.stderr))
}

/// Asserts the program printed the same under capture as without, each stream put through
/// `normalize` first (for figures that differ from run to run: frame rates, timings).
pub fn assert_same_output(plain: &Output, captured: &Output, normalize: impl Fn(&str) -> String) {
    let (p, c) = (app_output(plain), app_output(captured));
    assert_eq!(
        normalize(&c.0),
        normalize(&p.0),
        "stdout changed under capture"
    );
    assert_eq!(
        normalize(&c.1),
        normalize(&p.1),
        "stderr changed under capture"
    );
}

/// `quarry replay --compare --json TRACE` on lavapipe: asserts exit 0 and a verdict of `ok`,
/// returns the JSON.
pub fn replay_compare(trace: &Path) -> serde_json::Value {
    let out = vulkan_command(quarry_exe())
        .env_remove("DISPLAY")
        .args(["replay", "--compare", "--json"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "replay --compare of {}: {}",
        trace.display(),
        output_text(&out)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("replay --json: {e}: {}", output_text(&out)));
    assert_eq!(json["result"], "ok", "{json}");
    assert_eq!(json["comparison"]["same_device"], true, "{json}");
    json
}

/// Queries the trace read, by query type name (`TIMESTAMP`, ...): every query of each
/// `vkGetQueryPoolResults` and of each query copy the layer recorded bytes for.
pub fn queries_read(trace: &Path) -> BTreeMap<String, u64> {
    let t = read_trace(trace);
    let kinds: HashMap<u64, i32> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::QueryPool(p) => Some((p.pool, p.query_type)),
            _ => None,
        })
        .collect();
    let mut by = BTreeMap::new();
    let mut add = |pool: u64, n: u32| {
        if let Some(&k) = kinds.get(&pool) {
            *by.entry(QueryKind::from_raw(k).name()).or_insert(0) += u64::from(n);
        }
    };
    for r in &t.records {
        match r {
            Record::QueryResults(q) => add(q.pool, q.count),
            Record::QueryCopy(c) if !c.data.is_empty() => add(c.pool, c.count),
            _ => {}
        }
    }
    by
}

/// How the comparison should classify each query of a type on the capture GPU.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// Deterministic: every query matches.
    Matches,
    /// Timestamps: every one compared by clock (the replay produced its own).
    Clock,
}

/// Asserts the comparison of `json` compared exactly the query types of `expected`, as many
/// queries of each as `read` (the trace's reads; `None`: at least one), each classified as
/// expected, none left out, none unavailable.
pub fn assert_compared(
    json: &serde_json::Value,
    read: Option<&BTreeMap<String, u64>>,
    expected: &[(&str, Expect)],
) {
    let by_type = json["comparison"]["by_type"]
        .as_object()
        .unwrap_or_else(|| panic!("no comparison: {json}"));
    let types: Vec<&str> = by_type.keys().map(String::as_str).collect();
    let want: Vec<&str> = expected.iter().map(|(t, _)| *t).collect();
    assert_eq!(types, want, "query types compared: {json}");
    for (ty, how) in expected {
        let row = &by_type[*ty];
        let queries = row["queries"].as_u64().unwrap();
        match read {
            Some(r) => assert_eq!(
                Some(&queries),
                r.get(*ty),
                "{ty}: compared vs read by the trace {r:?}"
            ),
            None => assert!(queries > 0, "{ty}: {row}"),
        }
        let (field, other) = match how {
            Expect::Matches => ("matches", "clock"),
            Expect::Clock => ("clock", "matches"),
        };
        assert_eq!(row[field], queries, "{ty} {how:?}: {row}");
        assert_eq!(row[other], 0, "{ty}: {row}");
        for f in ["mismatches", "variations", "not_compared", "unavailable"] {
            assert_eq!(row[f], 0, "{ty} {f}: {row}");
        }
    }
    assert_eq!(json["comparison"]["mismatches"], serde_json::json!([]));
}

/// A trace's frame count and whether it is trimmed, from `quarry info --json`.
pub fn trace_frames(trace: &Path) -> (u64, serde_json::Value) {
    let out = crate::run_quarry(&["info", "--json", trace.to_str().unwrap()]);
    assert!(out.status.success(), "{}", output_text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (json["frames"].as_u64().unwrap_or(0), json)
}

/// Whether Python can import `module` (a PyPI package scripts/test.sh installs); prints a
/// `SKIP:` line when it cannot.
pub fn python_module(module: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIP: Python's {module} package is not installed (scripts/test.sh installs it)");
    }
    ok
}

/// A script of `tests/apps/`.
pub fn app_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("apps")
        .join(name)
}
