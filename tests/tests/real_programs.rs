//! Real programs nobody here wrote, from Debian (issue 31): D3D12 through vkd3d (`vkd3d-gears`,
//! `vkd3d-triangle`), ffmpeg 5.1's Vulkan filters (hwupload, `avgblur_vulkan`, `libplacebo`) and
//! OpenGL on Zink (glmark2, piglit's query programs). For each: the program prints the same under
//! `quarry capture` as without it, the trace replays on the capture GPU with `--compare` exit 0,
//! and a capture trimmed in the middle (`--frames A-B`) replays. Where the program reads queries
//! (libplacebo's timers, piglit's GL queries), the comparison compared every query the trace read,
//! each as its type's rule says. Runs are short (a second or two each on lavapipe).
//!
//! Skips (prints `SKIP`) when a program, Xvfb or lavapipe is missing; scripts/deps.sh installs them.
//! Python's packages have their own file: `real_programs_python.rs`.

use quarry_tests::real::*;
use quarry_tests::*;

fn same(s: &str) -> String {
    s.to_string()
}

// ---- vkd3d: D3D12 on Vulkan ---------------------------------------------------------------

/// vkd3d-gears renders until Escape; every frame presents.
fn gears(x: &Xvfb) -> App {
    App::new("vkd3d-gears", &["vkd3d-gears"]).window(&x.display, "Vkd3d Gears")
}

/// The whole capture is frames 0-19 (the trace ends there, the program runs on until Escape).
#[test]
fn vkd3d_gears_output_unchanged_and_replays() {
    if !require(&["vkd3d-gears", "Xvfb", "xdotool"]) {
        return;
    }
    let x = Xvfb::start();
    let app = gears(&x);
    let plain = app.plain();
    let trace = scratch("gears.qtrace");
    let captured = app.capture(&trace, &["--frames", "0-19"]);
    assert_same_output(&plain, &captured, same);
    assert_eq!(trace_frames(&trace).0, 20);
    let json = replay_compare(&trace);
    assert_eq!(json["frames"], 20, "{json}");
    // gears reads no query: nothing to compare, and nothing compared.
    assert_eq!(queries_read(&trace).len(), 0);
    assert_compared(&json, None, &[]);
}

#[test]
fn vkd3d_gears_trimmed_in_the_middle_replays() {
    if !require(&["vkd3d-gears", "Xvfb", "xdotool"]) {
        return;
    }
    let x = Xvfb::start();
    let app = gears(&x);
    let plain = app.plain();
    let trace = scratch("gears-trim.qtrace");
    let captured = app.capture(&trace, &["--frames", "10-19"]);
    assert_same_output(&plain, &captured, same);
    let (frames, info) = trace_frames(&trace);
    assert_eq!(frames, 10, "{info}");
    let json = replay_compare(&trace);
    assert_eq!(json["frames"], 10, "{json}");
}

/// vkd3d-triangle draws when its window is exposed, not in a loop: three frames (a fence wait,
/// the present, the end), so its middle is the present's frame.
#[test]
fn vkd3d_triangle_output_unchanged_replays_and_trims() {
    if !require(&["vkd3d-triangle", "Xvfb", "xdotool"]) {
        return;
    }
    let x = Xvfb::start();
    let app = App::new("vkd3d-triangle", &["vkd3d-triangle"]).window(&x.display, "Vkd3d Triangle");
    let plain = app.plain();
    let trace = scratch("triangle.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, same);
    let json = replay_compare(&trace);
    assert!(json["frames"].as_u64().unwrap() >= 2, "{json}");

    let trimmed = scratch("triangle-trim.qtrace");
    let captured = app.capture(&trimmed, &["--frames", "1-1"]);
    assert_same_output(&plain, &captured, same);
    assert_eq!(trace_frames(&trimmed).0, 1);
    replay_compare(&trimmed);
}

// ---- ffmpeg's Vulkan filters --------------------------------------------------------------

/// ffmpeg uploading 12 frames of a test pattern to a Vulkan device, filtering them there with
/// `filter` and downloading them; its output is each frame's MD5 (stdout).
fn ffmpeg(name: &'static str, filter: &str) -> App {
    let vf = format!("format=yuv420p,hwupload,{filter},hwdownload,format=yuv420p");
    App::new(
        name,
        &[
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-init_hw_device",
            "vulkan=vk:0",
            "-filter_hw_device",
            "vk",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=64x64:rate=10",
            "-frames:v",
            "12",
            "-vf",
            &vf,
            "-f",
            "framemd5",
            "-",
        ],
    )
}

fn blur() -> App {
    ffmpeg("ffmpeg-avgblur", "avgblur_vulkan=sizeX=3:sizeY=3")
}

/// libplacebo's dispatch times every shader pass with timestamp queries and reads them back.
fn placebo() -> App {
    ffmpeg("ffmpeg-libplacebo", "libplacebo=w=48:h=48:format=yuv420p")
}

/// The 12 frame MD5 lines ffmpeg printed.
fn frame_md5s(out: &std::process::Output) -> usize {
    app_output(out)
        .0
        .lines()
        .filter(|l| l.starts_with("0,"))
        .count()
}

#[test]
fn ffmpeg_avgblur_vulkan_output_unchanged_and_replays() {
    if !require(&["ffmpeg"]) {
        return;
    }
    let app = blur();
    let plain = app.plain();
    assert_eq!(frame_md5s(&plain), 12, "{}", output_text(&plain));
    let trace = scratch("avgblur.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, same);
    assert!(trace_frames(&trace).0 > 10);
    let json = replay_compare(&trace);
    assert_compared(&json, Some(&queries_read(&trace)), &[]);
}

#[test]
fn ffmpeg_avgblur_vulkan_trimmed_in_the_middle_replays() {
    if !require(&["ffmpeg"]) {
        return;
    }
    let app = blur();
    let plain = app.plain();
    let trace = scratch("avgblur-trim.qtrace");
    let captured = app.capture(&trace, &["--frames", "10-15"]);
    assert_same_output(&plain, &captured, same);
    assert_eq!(trace_frames(&trace).0, 6);
    replay_compare(&trace);
}

#[test]
fn ffmpeg_libplacebo_output_unchanged_and_its_timestamps_compared() {
    if !require(&["ffmpeg"]) {
        return;
    }
    let app = placebo();
    let plain = app.plain();
    assert_eq!(frame_md5s(&plain), 12, "{}", output_text(&plain));
    let trace = scratch("libplacebo.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, same);
    let read = queries_read(&trace);
    assert!(read.get("TIMESTAMP").is_some_and(|&n| n > 100), "{read:?}");
    let json = replay_compare(&trace);
    // Every timestamp libplacebo read was replayed and compared by the clock rule (the replay's
    // own GPU times, never equal), none left out.
    assert_compared(&json, Some(&read), &[("TIMESTAMP", Expect::Clock)]);
}

#[test]
#[ignore = "flaky: in about half the runs the trimmed frames 20-30 hold no timestamp read libplacebo compares (frame ends follow polls); issue 31 note"]
fn ffmpeg_libplacebo_trimmed_in_the_middle_replays_its_timestamps() {
    if !require(&["ffmpeg"]) {
        return;
    }
    let app = placebo();
    let plain = app.plain();
    let trace = scratch("libplacebo-trim.qtrace");
    let captured = app.capture(&trace, &["--frames", "20-30"]);
    assert_same_output(&plain, &captured, same);
    assert_eq!(trace_frames(&trace).0, 11);
    let json = replay_compare(&trace);
    // Reads in frame 20 of work submitted before it are skipped (the replay never ran it).
    assert_compared(&json, None, &[("TIMESTAMP", Expect::Clock)]);
}

// ---- OpenGL on Zink -----------------------------------------------------------------------

/// `program` with GL on Zink over lavapipe on `x`.
fn zink(name: &'static str, argv: &[&str], x: &Xvfb) -> App {
    App::new(name, argv)
        .env("DISPLAY", &x.display)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env("GALLIUM_DRIVER", "zink")
}

/// glmark2's lines less its frame rates, which differ from run to run.
fn glmark2_text(s: &str) -> String {
    s.lines()
        .map(|l| match l.split_once("FPS:") {
            Some((head, _)) => head.to_string(),
            None if l.contains("Score:") => "Score".to_string(),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn glmark2_on_zink_output_unchanged_replays_and_trims() {
    if !require(&["glmark2", "Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let mut argv = vec!["glmark2"];
    argv.extend(GLMARK_ARGS);
    let app = zink("glmark2", &argv, &x);
    let plain = app.plain();
    assert!(
        app_output(&plain).0.contains("[shading]"),
        "{}",
        output_text(&plain)
    );
    let trace = scratch("glmark2.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, glmark2_text);
    let (frames, _) = trace_frames(&trace);
    assert!(frames > 20, "{frames}");
    let json = replay_compare(&trace);
    assert_compared(&json, Some(&queries_read(&trace)), &[]);

    let trimmed = scratch("glmark2-trim.qtrace");
    let captured = app.capture(&trimmed, &["--frames", "20-25"]);
    assert_same_output(&plain, &captured, glmark2_text);
    assert_eq!(trace_frames(&trimmed).0, 6);
    replay_compare(&trimmed);
}

const PIGLIT: &str = "/usr/lib/x86_64-linux-gnu/piglit/bin";

/// A piglit program on Zink (`-auto -fbo`: no window, exits with its verdict), or `None` after
/// a `SKIP:` line when piglit is not installed.
fn piglit(name: &'static str, x: &Xvfb) -> Option<App> {
    let exe = format!("{PIGLIT}/{name}");
    if !std::path::Path::new(&exe).exists() {
        eprintln!("SKIP: {exe} not installed (Debian's piglit)");
        return None;
    }
    Some(zink(name, &[&exe, "-auto", "-fbo"], x))
}

fn piglit_passed(out: &std::process::Output) {
    let (o, _) = app_output(out);
    assert!(
        o.contains(r#"PIGLIT: {"result": "pass" }"#),
        "{}",
        output_text(out)
    );
}

/// GL timer queries (`GL_TIME_ELAPSED`) become Vulkan timestamps on Zink; the test waits for
/// them each frame (26 frames).
#[test]
fn piglit_timer_query_on_zink_compared_and_trimmed() {
    if !require(&["Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let Some(app) = piglit("ext_timer_query-time-elapsed", &x) else {
        return;
    };
    let plain = app.plain();
    piglit_passed(&plain);
    let trace = scratch("piglit-timer.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, same);
    let read = queries_read(&trace);
    let json = replay_compare(&trace);
    assert_compared(&json, Some(&read), &[("TIMESTAMP", Expect::Clock)]);

    let trimmed = scratch("piglit-timer-trim.qtrace");
    let captured = app.capture(&trimmed, &["--frames", "10-15"]);
    assert_same_output(&plain, &captured, same);
    let json = replay_compare(&trimmed);
    assert_compared(&json, None, &[("TIMESTAMP", Expect::Clock)]);
}

/// GL occlusion queries: samples passed, deterministic, so every one matches, trimmed too.
#[test]
fn piglit_occlusion_query_on_zink_matches_and_trims() {
    if !require(&["Xvfb"]) {
        return;
    }
    let x = Xvfb::start();
    let Some(app) = piglit("occlusion_query", &x) else {
        return;
    };
    let plain = app.plain();
    piglit_passed(&plain);
    let trace = scratch("piglit-occlusion.qtrace");
    let captured = app.capture(&trace, &[]);
    assert_same_output(&plain, &captured, same);
    let read = queries_read(&trace);
    let json = replay_compare(&trace);
    assert_compared(&json, Some(&read), &[("OCCLUSION", Expect::Matches)]);

    let trimmed = scratch("piglit-occlusion-trim.qtrace");
    let captured = app.capture(&trimmed, &["--frames", "2-3"]);
    assert_same_output(&plain, &captured, same);
    let json = replay_compare(&trimmed);
    assert_compared(&json, None, &[("OCCLUSION", Expect::Matches)]);
}
