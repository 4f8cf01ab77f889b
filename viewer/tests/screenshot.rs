//! `quarry-view --screenshot` renders a real window (glow on Mesa software GL) to a PNG.
//!
//! Uses $DISPLAY when set, else starts its own Xvfb; skips (with a message) only when neither
//! exists.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use viewer::synth;

struct Xvfb(Child);

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.is_file())
}

/// A display to draw on: the caller's, or a private Xvfb kept alive by the returned guard.
fn display() -> Option<(String, Option<Xvfb>)> {
    if let Some(d) = std::env::var("DISPLAY").ok().filter(|d| !d.is_empty()) {
        return Some((d, None));
    }
    let xvfb = which("Xvfb")?;
    // A display number unlikely to clash with other test runs on the machine.
    let n = 200 + std::process::id() % 700;
    let child = Command::new(xvfb)
        .args([
            format!(":{n}"),
            "-screen".into(),
            "0".into(),
            "1600x1000x24".into(),
            "-nolisten".into(),
            "tcp".into(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let guard = Xvfb(child);
    let socket = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
    let t = Instant::now();
    while !socket.exists() {
        if t.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((format!(":{n}"), Some(guard)))
}

fn write(path: &Path, (header, records): (format::record::Header, Vec<format::record::Record>)) {
    let w = format::TraceWriter::create(path, header).unwrap();
    for r in &records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn screenshot_renders_table_and_timeline_to_png() {
    let Some((display, _guard)) = display() else {
        println!("SKIPPED: no DISPLAY and no Xvfb binary; install xvfb to run the screenshot test");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("gpu-a.qres");
    let b = dir.path().join("gpu-b.qres");
    write(&a, synth::results(2000, 1, "RADV NAVI21", 23));
    write(&b, synth::results(2000, 1, "llvmpipe", 0));
    let out = dir.path().join("shot.png");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quarry-view"))
        .arg("--screenshot")
        .arg(&out)
        .arg(&a)
        .arg(&b)
        .env("DISPLAY", &display)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env("XDG_CONFIG_HOME", dir.path())
        .env_remove("WAYLAND_DISPLAY")
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("quarry-view --screenshot did not finish in 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "quarry-view --screenshot failed: {status}"
    );

    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&out).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert!(
        info.width >= 1000 && info.height >= 600,
        "{}x{}",
        info.width,
        info.height
    );
    let px: Vec<[u8; 4]> = buf[..info.buffer_size()]
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let mut distinct: Vec<[u8; 4]> = px.iter().step_by(7).copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        distinct.len() > 200,
        "a real UI has text and colors, got {} colors",
        distinct.len()
    );
    // The selected mismatching row shows the mismatch highlight in the table.
    let near = |p: &[u8; 4], c: [u8; 3]| p.iter().zip(c).all(|(a, b)| a.abs_diff(b) <= 6);
    let mismatch = px.iter().filter(|p| near(p, [110, 30, 36])).count();
    assert!(mismatch > 100, "mismatch highlight pixels: {mismatch}");
    // Replay spans of the timeline.
    let replay = px.iter().filter(|p| near(p, [78, 201, 176])).count();
    assert!(replay > 100, "timeline replay-span pixels: {replay}");
}
