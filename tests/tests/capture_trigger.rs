//! Capture on demand (`quarry capture --trigger`): the layer tracks a running program and writes a
//! trimmed trace of the next frames at each trigger — `quarry trigger` from another terminal, the
//! X11 hotkey, a trigger file — and every trace replays with `--compare`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use quarry_tests::*;

/// A `quarry capture --trigger` run in the background, its stdout and stderr in files.
struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    /// `XDG_RUNTIME_DIR` of this test alone: its control sockets are the only ones there.
    runtime: PathBuf,
}

impl Running {
    fn start(
        dir: &Path,
        display: Option<&str>,
        capture_args: &[&str],
        program: &[&str],
    ) -> Running {
        let runtime = dir.join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        let (out, err) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
        let mut c = quarry_command();
        c.env("XDG_RUNTIME_DIR", &runtime)
            .arg("capture")
            .arg("--trigger")
            .args(capture_args)
            .arg("--")
            .args(program)
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&err).unwrap());
        match display {
            Some(d) => c.env("DISPLAY", d),
            None => c.env_remove("DISPLAY"),
        };
        Running {
            child: c.spawn().unwrap(),
            out,
            err,
            runtime,
        }
    }

    fn sockets(&self) -> PathBuf {
        self.runtime.join("quarry").join("captures")
    }

    /// Waits until the layer listens (its control socket exists), then `settle` more.
    fn wait_listening(&mut self, settle: Duration) {
        let dir = self.sockets();
        let up = wait_until(Duration::from_secs(60), || {
            std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some())
        });
        assert!(up, "the layer never listened: {}", self.text());
        std::thread::sleep(settle);
    }

    fn trigger(&self, args: &[&str]) -> Output {
        quarry_command()
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .arg("trigger")
            .args(args)
            .output()
            .unwrap()
    }

    fn text(&self) -> String {
        format!(
            "{}{}",
            std::fs::read_to_string(&self.out).unwrap_or_default(),
            std::fs::read_to_string(&self.err).unwrap_or_default()
        )
    }

    /// SIGTERM to quarry, which passes it to the program; the exit status, stdout's last line
    /// and all output.
    fn stop(self) -> (Option<i32>, String, String) {
        signal(self.child.id(), libc::SIGTERM);
        self.wait()
    }

    /// Waits for the program to end by itself.
    fn wait(mut self) -> (Option<i32>, String, String) {
        let status = self.child.wait().unwrap();
        let out = std::fs::read_to_string(&self.out).unwrap_or_default();
        let last = out.lines().last().unwrap_or_default().to_string();
        (status.code(), last, self.text())
    }
}

fn frames(trace: &Path) -> u64 {
    format::TraceReader::open(trace).unwrap().info().frames
}

/// `quarry replay --compare --validate` on lavapipe succeeds with no validation message.
fn replays_exactly(trace: &Path) -> String {
    let o = run_quarry_on(
        &[
            "replay",
            trace.to_str().unwrap(),
            "--gpu",
            "llvmpipe",
            "--compare",
            "--validate",
        ],
        None,
    );
    let text = output_text(&o);
    assert!(o.status.success(), "{}: {text}", trace.display());
    assert!(text.contains("validation: 0 messages"), "{text}");
    assert!(text.contains("all deterministic results match"), "{text}");
    text
}

fn vkcube_ready() -> bool {
    require(&["vkcube", "Xvfb"])
        && built_or_skip(CAPTURE_LAYER_LIBRARY).is_some()
        && quarry_sees_lavapipe()
}

/// vkcube runs on; `quarry trigger` twice, 1 s apart (the second asks for 3 frames): two traces,
/// of 1 and 3 frames, each a snapshot and its frames, both replay exactly. `quarry trigger` with
/// no capture running, or several, is one `quarry:` line and exit 2.
#[test]
fn vkcube_triggered_twice_from_another_terminal() {
    if !vkcube_ready() {
        return;
    }
    let x = Xvfb::start();
    let dir = scratch_dir("trigger-vkcube");
    let out = dir.join("cube.qtrace");
    let mut run = Running::start(
        &dir,
        Some(&x.display),
        &["--hotkey", "none", "-o", out.to_str().unwrap()],
        &["vkcube", "--c", "100000"],
    );
    // Before the layer listens: nothing to trigger.
    std::fs::create_dir_all(run.sockets()).unwrap();
    let none = run.trigger(&[]);
    assert_eq!(none.status.code(), Some(2), "{}", output_text(&none));
    let err = text(&none.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no capture on demand is running"), "{err}");

    run.wait_listening(Duration::from_secs(2));
    // A second capture (this test's own socket): quarry trigger asks which.
    let fake = run.sockets().join(std::process::id().to_string());
    let socket = std::os::unix::net::UnixDatagram::bind(&fake).unwrap();
    let several = run.trigger(&[]);
    assert_eq!(several.status.code(), Some(2), "{}", output_text(&several));
    let err = text(&several.stderr);
    assert!(
        err.starts_with("quarry: 2 captures are running: ") && err.contains("--pid"),
        "{err}"
    );
    assert!(err.contains("(vkcube)"), "{err}");
    drop(socket);
    std::fs::remove_file(&fake).unwrap();

    let first = run.trigger(&[]);
    assert!(first.status.success(), "{}", output_text(&first));
    assert!(
        text(&first.stdout).contains("triggered pid"),
        "{}",
        output_text(&first)
    );
    std::thread::sleep(Duration::from_secs(1));
    let second = run.trigger(&["--frames", "3"]);
    assert!(second.status.success(), "{}", output_text(&second));
    let (t1, t2) = (dir.join("cube_1.qtrace"), dir.join("cube_2.qtrace"));
    let done = wait_until(Duration::from_secs(60), || {
        trace_complete(&t1) && trace_complete(&t2)
    });
    assert!(done, "two traces: {}", run.text());
    let (code, last, text) = run.stop();
    // vkcube does not catch SIGTERM: killed by it, 128 + 15.
    assert_eq!(code, Some(143), "{text}");
    assert!(text.contains(&format!("trace: {}", t1.display())), "{text}");
    assert!(last.starts_with("2 traces complete: "), "{text}");
    assert_eq!(frames(&t1), 1);
    assert_eq!(frames(&t2), 3);
    assert!(!dir.join("cube_3.qtrace").exists());
    for t in [&t1, &t2] {
        let info = output_text(&run_quarry_on(&["info", t.to_str().unwrap()], None));
        assert!(info.contains("trimmed:"), "{info}");
        replays_exactly(t);
    }
    assert!(
        std::fs::read_dir(dir.join("runtime/quarry/captures"))
            .unwrap()
            .next()
            .is_none(),
        "the control socket is removed"
    );
}

/// The hotkey (F12, pressed through XTEST as a user would) triggers `--trigger-frames 3` frames;
/// the app's own input is not touched (vkcube keeps running).
#[test]
fn hotkey_triggers_vkcube() {
    if !vkcube_ready() || !require(&["xdotool"]) {
        return;
    }
    let x = Xvfb::start();
    let dir = scratch_dir("trigger-hotkey");
    let out = dir.join("hk.qtrace");
    let mut run = Running::start(
        &dir,
        Some(&x.display),
        &["--trigger-frames", "3", "-o", out.to_str().unwrap()],
        &["vkcube", "--c", "100000"],
    );
    run.wait_listening(Duration::from_secs(2));
    let press = Command::new("sh")
        .args([
            "-c",
            "xdotool keydown F12 && sleep 0.3 && xdotool keyup F12",
        ])
        .env("DISPLAY", &x.display)
        .status()
        .unwrap();
    assert!(press.success());
    let t1 = dir.join("hk_1.qtrace");
    let done = wait_until(Duration::from_secs(60), || trace_complete(&t1));
    assert!(done, "the hotkey made no trace: {}", run.text());
    let (code, last, text) = run.stop();
    assert_eq!(code, Some(143), "{text}");
    assert_eq!(
        last,
        format!("1 trace complete: {}", t1.display()),
        "held 0.3 s, the key triggers once: {text}"
    );
    assert_eq!(frames(&t1), 3);
    replays_exactly(&t1);
}

/// quarry-demo on lavapipe, headless, under `quarry capture --trigger-file DIR/go` writing
/// `DIR/demo_N.qtrace` of `trigger_frames` frames each, started and listening (None: skipped).
fn demo_by_file(
    name: &str,
    trigger_frames: &str,
    demo_args: &[&str],
) -> Option<(std::path::PathBuf, std::path::PathBuf, Running)> {
    let demo = built_or_skip(QUARRY_DEMO)?;
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return None;
    }
    let dir = scratch_dir(name);
    let out = dir.join("demo.qtrace");
    let go = dir.join("go");
    let mut program = vec![demo.to_str().unwrap(), "--headless", "--gpu", "llvmpipe"];
    program.extend_from_slice(demo_args);
    let mut run = Running::start(
        &dir,
        None,
        &[
            "--trigger-frames",
            trigger_frames,
            "--trigger-file",
            go.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &program,
    );
    run.wait_listening(Duration::from_millis(500));
    Some((dir, go, run))
}

/// quarry-demo, headless (frames end at its fence waits), triggered by a file: the trace replays
/// and its deterministic queries match the captured values, which the demo's `--check` compared
/// with its known answers.
#[test]
fn headless_demo_triggered_by_a_file() {
    let Some((dir, go, run)) = demo_by_file("trigger-file", "8", &["--frames", "3000", "--check"])
    else {
        return;
    };
    std::fs::write(&go, b"").unwrap();
    let t1 = dir.join("demo_1.qtrace");
    let (code, last, text) = run.wait();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("check: all"), "{text}");
    assert!(!go.exists(), "the layer removes the trigger file");
    assert_eq!(
        last,
        format!("1 trace complete: {}", t1.display()),
        "{text}"
    );
    assert_eq!(frames(&t1), 8);
    let replay = replays_exactly(&t1);
    // Queries were compared, not only skipped as work from before the trim point.
    let compared = replay
        .lines()
        .find(|l| l.trim_start().starts_with("OCCLUSION"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(compared > 0, "{replay}");
}

/// Two triggers of the headless demo, the second after the first trace is finished: the tracking
/// between them makes no query copy pending and the second snapshot drops what the first trace
/// left pending, so the second trace's copies are its own, read back whole, and both replay.
#[test]
fn headless_demo_triggered_twice_by_a_file() {
    let Some((dir, go, run)) = demo_by_file("trigger-file-twice", "4", &["--frames", "100000"])
    else {
        return;
    };
    let (t1, t2) = (dir.join("demo_1.qtrace"), dir.join("demo_2.qtrace"));
    std::fs::write(&go, b"").unwrap();
    let first = wait_until(Duration::from_secs(60), || trace_complete(&t1));
    assert!(first, "first trace: {}", run.text());
    // Some tracked frames between the traces.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&go, b"").unwrap();
    let second = wait_until(Duration::from_secs(60), || trace_complete(&t2));
    assert!(second, "second trace: {}", run.text());
    let (_, last, text) = run.stop();
    assert!(last.starts_with("2 traces complete: "), "{text}");
    for t in [&t1, &t2] {
        assert_eq!(frames(t), 4);
        let (mut copies, mut empty) = (0, 0);
        for rec in format::TraceReader::open(t).unwrap().records() {
            if let format::record::Record::QueryCopy(c) = rec.unwrap() {
                copies += 1;
                empty += c.data.is_empty() as u32;
            }
        }
        // Whether 4 frames hold copies depends on where the trigger lands: not asserted.
        assert_eq!(empty, 0, "{}: {copies} copies, {empty} empty", t.display());
        replays_exactly(t);
    }
}

/// `--trigger-frame`, a run no trigger reaches, and options quarry refuses before the program runs.
#[test]
fn trigger_frame_no_trigger_and_bad_options() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("trigger-frame");
    let demo_args = [
        demo.to_str().unwrap(),
        "--headless",
        "--frames",
        "3",
        "--gpu",
        "llvmpipe",
    ];
    let capture = |args: &[&str]| {
        let mut all = vec!["capture", "--trigger"];
        all.extend_from_slice(args);
        all.push("--");
        all.extend_from_slice(&demo_args);
        run_quarry_on(&all, None)
    };
    let out = dir.join("at.qtrace");
    let o = capture(&[
        "--trigger-frame",
        "6",
        "--trigger-frames",
        "2",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let t1 = dir.join("at_1.qtrace");
    assert!(text(&o.stdout).contains(&format!("trace: {} (frames 6-7)", t1.display())));
    assert_eq!(frames(&t1), 2);
    // The same name again: the first trace is kept, the new one numbered after it.
    let o = capture(&["--trigger-frame", "6", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(frames(&t1), 2);
    assert_eq!(frames(&dir.join("at_2.qtrace")), 1);

    let never = dir.join("never.qtrace");
    let o = capture(&["-o", never.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        text(&o.stderr).contains("quarry: no trigger came"),
        "{}",
        output_text(&o)
    );
    assert!(!dir.join("never_1.qtrace").exists());

    let marker = dir.join("ran");
    for bad in [
        &["capture", "--trigger", "--trigger-frames", "0"][..],
        &["capture", "--trigger", "--frames", "1-2"],
        &["capture", "--trigger", "--hotkey", "F99"],
        &["capture", "--trigger", "--trigger-frame", "0"],
        &["capture", "--trigger-after", "1"],
    ] {
        let mut args = bad.to_vec();
        args.extend(["--", "touch", marker.to_str().unwrap()]);
        let o = run_quarry_on(&args, None);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", output_text(&o));
        let err = text(&o.stderr);
        assert!(
            err.starts_with("quarry: ") && err.lines().count() == 1,
            "{err}"
        );
        assert!(!marker.exists(), "{bad:?} ran the program");
    }
}

/// While tracking, the demo's one-time command buffers are light (their commands are not
/// encoded): with light tracking off (`QUARRY_CAPTURE_LIGHT=0`) the same trigger records more
/// calls on the app's threads (the layer's own count, `QUARRY_CAPTURE_PROFILE=1`), and both traces
/// replay exactly, with nothing missing from their snapshots.
#[test]
fn one_time_command_buffers_are_not_tracked_and_both_traces_replay() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("trigger-light");
    let recorded_calls = |light: &str| -> u64 {
        let out = dir.join(format!("light{light}.qtrace"));
        let o = quarry_command()
            .env_remove("DISPLAY")
            .env("QUARRY_CAPTURE_LIGHT", light)
            .env("QUARRY_CAPTURE_PROFILE", "1")
            .args(["capture", "--trigger", "--trigger-frame", "6", "--force"])
            .args(["-o", out.to_str().unwrap(), "--"])
            .args([demo.to_str().unwrap(), "--headless", "--frames", "9"])
            .args(["--gpu", "llvmpipe"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
        let trace = dir.join(format!("light{light}_1.qtrace"));
        replays_exactly(&trace);
        let mut calls = None;
        for rec in format::TraceReader::open(&trace).unwrap().records() {
            match rec.unwrap() {
                format::record::Record::StateEnd(e) => {
                    assert!(e.gaps.is_empty(), "{:?}", e.gaps)
                }
                format::record::Record::Note(n) => {
                    if let Some(rest) = n.message.split("calls recorded ").nth(1) {
                        calls = rest.split(' ').next().and_then(|c| c.parse().ok());
                    }
                }
                _ => {}
            }
        }
        calls.expect("the profile's count of recorded calls")
    };
    let (light, full) = (recorded_calls("1"), recorded_calls("0"));
    assert!(
        light * 10 < full * 8,
        "calls recorded: light {light}, full {full}"
    );
}
