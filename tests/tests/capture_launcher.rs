//! `quarry capture` as a launcher: it never overwrites a trace without `--force`, refuses an output
//! it cannot write before the program starts, passes signals to the program, exits with the
//! program's status, ends with a line naming the trace's state and leaves no temporary manifest.
//! Also `quarry layer install|uninstall|status` into a temporary HOME.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use format::TraceReader;
use quarry_tests::*;

/// `quarry capture` with its temporary manifests under `tmp` (so a test can see they are gone).
fn capture_command(tmp: &Path) -> Command {
    let mut c = quarry_command();
    c.env("TMPDIR", tmp).arg("capture");
    c
}

fn last_line(bytes: &[u8]) -> String {
    text(bytes).lines().last().unwrap_or_default().to_owned()
}

/// Entries of `dir` (the temporary manifest directories quarry made there).
fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn existing_trace_is_kept_unless_force() {
    let dir = scratch_dir("launcher-existing");
    let tmp = scratch_dir("launcher-existing-tmp");
    let trace = dir.join("precious.qtrace");
    std::fs::write(&trace, b"the user's earlier trace").unwrap();
    let marker = dir.join("ran");
    let out = capture_command(&tmp)
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "touch \"$0\""])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("quarry: ") && err.contains("--force"),
        "{err}"
    );
    assert!(!marker.exists(), "the program must not run");
    assert_eq!(std::fs::read(&trace).unwrap(), b"the user's earlier trace");
    assert!(entries(&tmp).is_empty());

    // --force replaces it with this run's trace.
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let out = capture_command(&tmp)
        .env_remove("DISPLAY")
        .args(["--force", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&demo)
        .args(["--headless", "--frames", "1", "--gpu", "llvmpipe"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(
        last_line(&out.stdout),
        format!("trace complete: {}", trace.display())
    );
    assert!(TraceReader::open(&trace).unwrap().info().complete);
    assert!(entries(&tmp).is_empty(), "temporary manifests removed");
}

#[test]
fn unwritable_output_is_refused_before_the_program_starts() {
    let dir = scratch_dir("launcher-unwritable");
    let tmp = scratch_dir("launcher-unwritable-tmp");
    let marker = dir.join("ran");
    // A read-only place: root writes through permissions, but not into /sys.
    // SAFETY: getuid has no preconditions.
    let read_only = if unsafe { libc::getuid() } == 0 {
        PathBuf::from("/sys/quarry-launcher-test.qtrace")
    } else {
        let ro = dir.join("ro");
        std::fs::create_dir(&ro).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        ro.join("t.qtrace")
    };
    let cases = [
        (dir.clone(), "is a directory"),
        (dir.join("missing/t.qtrace"), "does not exist"),
        (read_only, "cannot write"),
    ];
    for (output, expect) in cases {
        let out = capture_command(&tmp)
            .arg("-o")
            .arg(&output)
            .args(["--", "sh", "-c", "touch \"$0\""])
            .arg(&marker)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", output.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("quarry: ") && err.contains(expect), "{err}");
        assert!(!marker.exists(), "the program ran for {}", output.display());
        assert!(!output.is_file());
    }
    assert!(entries(&tmp).is_empty());
}

/// The program's exit status is quarry's; the default name carries a timestamp; the manifest the
/// program was given is gone afterwards.
#[test]
fn exit_status_is_the_programs_and_the_manifest_is_removed() {
    let dir = scratch_dir("launcher-status");
    let tmp = scratch_dir("launcher-status-tmp");
    let seen = dir.join("layer-path");
    let out = capture_command(&tmp)
        .current_dir(&dir)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"$VK_ADD_LAYER_PATH\" > \"$0\"; exit 3",
        ])
        .arg(&seen)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    let last = last_line(&out.stderr);
    assert!(last.starts_with("quarry: sh wrote no trace to "), "{last}");
    // `sh_YYYYmmdd_HHMMSS.qtrace`
    let name = last
        .split('/')
        .next_back()
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let stamp = name
        .strip_prefix("sh_")
        .and_then(|n| n.strip_suffix(".qtrace"))
        .unwrap_or_else(|| panic!("default name {name}"));
    assert_eq!(stamp.len(), 15, "{name}");
    assert!(stamp.chars().all(|c| c.is_ascii_digit() || c == '_'));
    let layer_dir = PathBuf::from(std::fs::read_to_string(&seen).unwrap().trim());
    assert!(layer_dir.starts_with(&tmp), "{}", layer_dir.display());
    assert!(!layer_dir.exists(), "temporary manifest left behind");
    assert!(entries(&tmp).is_empty());

    // Killed by a signal: 128 + signal.
    let out = capture_command(&tmp)
        .arg("-o")
        .arg(dir.join("k.qtrace"))
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + 15), "{}", output_text(&out));
}

/// Waits for `child` up to `secs` seconds; kills it on timeout.
fn wait_for(child: &mut std::process::Child, secs: u64) -> Output {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("quarry did not exit within {secs} s of the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    use std::io::Read as _;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut out.stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut out.stderr)
        .unwrap();
    out
}

/// SIGTERM to quarry reaches the program; quarry outlives it and cleans up.
#[test]
fn sigterm_is_passed_to_the_program() {
    let dir = scratch_dir("launcher-sigterm");
    let tmp = scratch_dir("launcher-sigterm-tmp");
    let seen = dir.join("layer-path");
    let mut child = capture_command(&tmp)
        .arg("-o")
        .arg(dir.join("t.qtrace"))
        .args([
            "--",
            "sh",
            "-c",
            "echo \"$VK_ADD_LAYER_PATH\" > \"$0\"; exec sleep 60",
        ])
        .arg(&seen)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.is_file() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // quarry waits for sleep, which only ends if the signal was passed on.
    let out = wait_for(&mut child, 20);
    assert_eq!(out.status.code(), Some(128 + 15), "{}", output_text(&out));
    assert!(
        text(&out.stderr).contains("was killed by SIGTERM"),
        "{}",
        output_text(&out)
    );
    let layer_dir = PathBuf::from(std::fs::read_to_string(&seen).unwrap().trim());
    assert!(!layer_dir.exists(), "temporary manifest left behind");
    assert!(entries(&tmp).is_empty());
}

/// Ctrl-C (SIGINT sent to quarry) during a long capture: the program stops, the trace reads back
/// and the last line says it was recovered, with its frame count.
#[test]
fn sigint_leaves_a_readable_trace_and_names_its_state() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("launcher-sigint");
    let tmp = scratch_dir("launcher-sigint-tmp");
    let trace = dir.join("demo.qtrace");
    let mut child = capture_command(&tmp)
        .env_remove("DISPLAY")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&demo)
        .args(["--headless", "--frames", "100000", "--gpu", "llvmpipe"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if std::fs::metadata(&trace).is_ok_and(|m| m.len() > 256 * 1024) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        entries(&tmp).len(),
        1,
        "one manifest directory while running"
    );
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_for(&mut child, 60);
    assert_eq!(out.status.code(), Some(128 + 2), "{}", output_text(&out));
    let last = last_line(&out.stderr);
    let info = TraceReader::open(&trace).unwrap().info();
    assert!(info.frames > 0, "{last}");
    assert!(
        last.starts_with(&format!(
            "quarry: trace recovered with {} frames: {}",
            info.frames,
            trace.display()
        )),
        "{}",
        output_text(&out)
    );
    assert!(last.contains("SIGINT"), "{last}");
    assert!(entries(&tmp).is_empty(), "temporary manifest left behind");
}

/// `quarry layer install --user` into a temporary HOME: the loader lists the layer and captures
/// through it; `uninstall` removes it. XDG_DATA_HOME wins over HOME.
#[test]
fn layer_install_and_uninstall_in_a_temporary_home() {
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() {
        return;
    }
    let home = scratch_dir("launcher-home");
    let layer = |args: &[&str], data_home: Option<&Path>| {
        let mut c = quarry_command();
        c.env("HOME", &home).arg("layer").args(args);
        match data_home {
            Some(d) => c.env("XDG_DATA_HOME", d),
            None => c.env_remove("XDG_DATA_HOME"),
        };
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        text(&out.stdout)
    };
    let dir = home.join(".local/share/vulkan/explicit_layer.d");
    let manifest = dir.join("VkLayer_quarry_capture.json");
    let said = layer(&["install", "--user"], None);
    assert!(said.contains(&manifest.display().to_string()), "{said}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(json["layer"]["name"], "VK_LAYER_QUARRY_capture");
    let lib = json["layer"]["library_path"].as_str().unwrap();
    assert!(
        Path::new(lib).is_absolute() && Path::new(lib).is_file(),
        "{lib}"
    );
    let status = layer(&["status"], None);
    assert!(status.contains(&manifest.display().to_string()), "{status}");

    if have("vulkaninfo") && lavapipe() {
        // The summary needs no window system: without DISPLAY it cannot fail on the test
        // display (CI once saw vulkaninfo give up on an XCB connection there and list nothing).
        let out = vulkan_command("vulkaninfo")
            .arg("--summary")
            .env("HOME", &home)
            .env_remove("XDG_DATA_HOME")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .unwrap();
        assert!(
            text(&out.stdout).contains("VK_LAYER_QUARRY_capture"),
            "the loader does not list the installed layer: {}",
            output_text(&out)
        );
    }
    if let Some(demo) = built(QUARRY_DEMO).filter(|_| lavapipe()) {
        let trace = home.join("installed.qtrace");
        let out = vulkan_command(&demo)
            .args(["--headless", "--frames", "1"])
            .env("HOME", &home)
            .env_remove("XDG_DATA_HOME")
            .env_remove("DISPLAY")
            .env("VK_LOADER_LAYERS_ENABLE", "VK_LAYER_QUARRY_capture")
            .env("QUARRY_CAPTURE_FILE", &trace)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        assert!(TraceReader::open(&trace).unwrap().info().complete);
    }

    let said = layer(&["uninstall", "--user"], None);
    assert!(said.contains("removed"), "{said}");
    assert!(!manifest.exists() && !dir.join("VkLayer_quarry_counters.json").exists());

    let data = home.join("data");
    layer(&["install", "--user"], Some(&data));
    let elsewhere = data.join("vulkan/explicit_layer.d/VkLayer_quarry_capture.json");
    assert!(elsewhere.is_file() && !manifest.exists());
    layer(&["uninstall", "--user"], Some(&data));
    assert!(!elsewhere.exists());
}

/// A write that fails (here: the file size limit, as a full disk would) is not success: the exit
/// status is 1 although the program succeeded, and the last line says the trace stopped early.
#[test]
fn failed_write_is_not_success() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("launcher-full");
    let tmp = scratch_dir("launcher-full-tmp");
    let trace = dir.join("limited.qtrace");
    // 512 KiB at most (`ulimit -f` counts 512-byte blocks); writes past it fail with EFBIG.
    let script =
        "trap '' XFSZ; ulimit -f 1024; exec \"$0\" --headless --frames 3000 --gpu llvmpipe";
    let out = capture_command(&tmp)
        .env_remove("DISPLAY")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", script])
        .arg(&demo)
        .output()
        .unwrap();
    let all = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("writing the trace failed"), "{all}");
    let last = last_line(&out.stderr);
    let info = TraceReader::open(&trace).unwrap().info();
    assert!(
        last.starts_with(&format!(
            "quarry: trace stopped early: {} frames readable in {}",
            info.frames,
            trace.display()
        )),
        "{all}"
    );
    assert!(!last.contains("did not destroy"), "{last}");
    assert!(entries(&tmp).is_empty());
}

/// The launcher killed with SIGKILL (#22): the layer sees its status channel close, finishes the
/// trace (complete, readable) and removes the temporary manifests; the program runs on uncaptured.
#[test]
fn launcher_death_finishes_the_trace() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let dir = scratch_dir("launcher-death");
    let tmp = scratch_dir("launcher-death-tmp");
    let trace = dir.join("orphan.qtrace");
    let mut quarry = capture_command(&tmp)
        .env_remove("DISPLAY")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&demo)
        .args(["--headless", "--frames", "1000000", "--gpu", "llvmpipe"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = wait_until(Duration::from_secs(60), || {
        trace.metadata().is_ok_and(|m| m.len() > 0)
    });
    let program = children_of(quarry.id());
    assert!(started && program.len() == 1, "{program:?}");
    let program = program[0];
    std::thread::sleep(Duration::from_millis(500));
    quarry.kill().unwrap();
    quarry.wait().unwrap();
    let finished = wait_until(Duration::from_secs(20), || {
        TraceReader::open(&trace).is_ok_and(|r| r.info().complete)
    });
    let running = alive(program);
    signal(program, libc::SIGKILL);
    assert!(
        finished,
        "the layer finished the trace after the launcher died"
    );
    assert!(running, "the program runs on");
    let r = TraceReader::open(&trace).unwrap();
    assert!(r.info().frames > 0);
    assert!(wait_until(Duration::from_secs(5), || entries(&tmp).is_empty()));
}
