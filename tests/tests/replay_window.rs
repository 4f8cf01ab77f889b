//! `quarry replay --window`: a vkcube trace replays into a real X11 window (Xvfb in CI) with every
//! frame presented and no validation messages; without a display the error says so.

use std::process::{Command, Output};

fn quarry(args: &[&str], display: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_quarry"));
    c.args(args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE");
    match display {
        Some(d) => c.env("DISPLAY", d),
        None => c.env_remove("DISPLAY"),
    };
    c.output().unwrap()
}

fn both(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn vkcube_replays_into_a_window() {
    let Some(display) = std::env::var("DISPLAY").ok().filter(|d| !d.is_empty()) else {
        eprintln!("SKIP: no DISPLAY (scripts/test.sh starts Xvfb)");
        return;
    };
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_quarry"));
    if !exe
        .parent()
        .unwrap()
        .join("libVkLayer_quarry_capture.so")
        .is_file()
        || Command::new("vkcube").arg("--help").output().is_err()
    {
        eprintln!("SKIP: vkcube or the capture layer is missing");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("quarry-window-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let t = tmp.join("cube.qtrace");
    let out = quarry(
        &[
            "capture",
            "-o",
            t.to_str().unwrap(),
            "--",
            "vkcube",
            "--c",
            "20",
        ],
        Some(&display),
    );
    assert!(out.status.success(), "{}", both(&out));

    let out = quarry(
        &["replay", t.to_str().unwrap(), "--window", "--validate"],
        Some(&display),
    );
    let text = both(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("presented 20 frames in a window"), "{text}");
    assert!(text.contains("validation: 0 messages"), "{text}");

    let out = quarry(&["replay", t.to_str().unwrap(), "--window"], None);
    let text = both(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("--window: cannot open the X11 display"),
        "{text}"
    );
    // Headless replay of the same trace still works without a display.
    let out = quarry(&["replay", t.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", both(&out));
    let _ = std::fs::remove_dir_all(&tmp);
}
