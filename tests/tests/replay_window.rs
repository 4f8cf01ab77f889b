//! `quarry replay --window`: a vkcube trace replays into a real X11 window (Xvfb in CI) with every
//! frame presented and no validation messages; without a display the error says so.

use quarry_tests::*;

#[test]
fn vkcube_replays_into_a_window() {
    let Some(display) = display_or_skip() else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !have_all(&["vkcube"]) {
        return;
    }
    let tmp = scratch_dir("window");
    let t = tmp.join("cube.qtrace");
    let out = run_quarry_on(
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
    assert!(out.status.success(), "{}", output_text(&out));

    let out = run_quarry_on(
        &["replay", t.to_str().unwrap(), "--window", "--validate"],
        Some(&display),
    );
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("presented 20 frames in a window"), "{text}");
    assert!(text.contains("validation: 0 messages"), "{text}");

    let out = run_quarry_on(&["replay", t.to_str().unwrap(), "--window"], None);
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("--window: cannot open the X11 display"),
        "{text}"
    );
    // Headless replay of the same trace still works without a display.
    let out = run_quarry_on(&["replay", t.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", output_text(&out));
    let _ = std::fs::remove_dir_all(&tmp);
}
