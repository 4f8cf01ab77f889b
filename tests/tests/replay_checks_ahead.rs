//! The checks run on a thread of their own, ahead of the replay, when the process may use more
//! than one CPU, and on the replay thread when it may use one (`taskset -c 0`). Both ways must
//! replay alike: the same comparison, the same refusal of a forged trace at the same call.

use std::process::{Command, Output};

use quarry_tests::hostile::{corpus, find, forged, forged_read_of_unsubmitted_work};
use quarry_tests::{lavapipe, quarry_exe, xdg_runtime_dir};

/// `quarry replay TRACE --gpu llvmpipe ARGS`, on one CPU or on any.
fn replay(trace: &std::path::Path, one_cpu: bool, args: &[&str]) -> Output {
    let mut c = if one_cpu {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(quarry_exe());
        c
    } else {
        Command::new(quarry_exe())
    };
    c.env("XDG_RUNTIME_DIR", xdg_runtime_dir())
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .arg("replay")
        .arg(trace)
        .args(["--gpu", "llvmpipe"])
        .args(args);
    c.output().expect("run quarry")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn can_run() -> bool {
    let taskset = Command::new("taskset")
        .args(["-c", "0", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !taskset {
        eprintln!("SKIP: taskset cannot pin this process to CPU 0");
    }
    taskset && lavapipe()
}

#[test]
fn one_cpu_and_several_replay_alike() {
    if !can_run() || std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return;
    }
    for name in ["demo.qtrace", "vkcube.qtrace"] {
        let trace = corpus(name);
        let ahead = json(&replay(&trace, false, &["--compare", "--json"]));
        let inline = json(&replay(&trace, true, &["--compare", "--json"]));
        assert_eq!(ahead["result"], "ok", "{ahead}");
        assert_eq!(inline["result"], "ok", "{inline}");
        // The two ways ran: only the first had a checks thread to measure.
        assert!(
            ahead["checks_thread_ns_per_call"].as_f64().unwrap() > 0.0,
            "{ahead}"
        );
        assert_eq!(
            inline["checks_thread_ns_per_call"].as_f64(),
            Some(0.0),
            "{inline}"
        );
        assert_eq!(ahead["calls"], inline["calls"]);
        assert_eq!(
            ahead["comparison"]["by_type"], inline["comparison"]["by_type"],
            "{name}"
        );
        if name == "demo.qtrace" {
            assert!(ahead["comparison"]["by_type"]["OCCLUSION"]["matches"].as_u64() > Some(0));
        }
    }
    // A replay cut short by `--frames` stops the checks thread with it.
    let cut = replay(
        &corpus("demo.qtrace"),
        false,
        &["--frames", "0-1", "--json"],
    );
    assert!(
        cut.status.success(),
        "{}",
        String::from_utf8_lossy(&cut.stderr)
    );
    let (cut, whole) = (
        json(&cut),
        json(&replay(&corpus("demo.qtrace"), false, &["--json"])),
    );
    assert!(cut["frames"].as_u64() < whole["frames"].as_u64(), "{cut}");
}

/// Refusals the checks make, and one the replay thread makes from what they found (a query read
/// that no replayed submission can make available), are the same either way.
#[test]
fn refusals_are_the_same_on_one_cpu() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let twice = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkDestroyFence", 0);
        let dup = recs[i].clone();
        recs.insert(i + 1, dup);
    });
    let unreachable = forged_read_of_unsubmitted_work(dir.path());
    for (trace, says) in [
        (&twice, "was destroyed at call"),
        (&unreachable, "never submitted in the replay"),
    ] {
        let ahead = replay(trace, false, &[]);
        let inline = replay(trace, true, &[]);
        let (a, i) = (
            String::from_utf8_lossy(&ahead.stderr),
            String::from_utf8_lossy(&inline.stderr),
        );
        assert_eq!(ahead.status.code(), Some(2), "{a}");
        assert_eq!(inline.status.code(), Some(2), "{i}");
        let line = |s: &str| {
            s.lines()
                .find(|l| l.starts_with("quarry: "))
                .unwrap_or_default()
                .to_string()
        };
        assert!(line(&a).contains(says), "{a}");
        assert_eq!(line(&a), line(&i));
    }
}
