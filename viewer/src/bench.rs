//! `quarry-view --bench`: time to open a file and CPU frame time while scrolling the table and
//! zooming/panning the timeline, measured headless (egui pass + tessellation, no GPU upload).

use std::path::Path;
use std::time::{Duration, Instant};

use egui::{
    pos2, vec2, Event, Modifiers, MouseWheelSource, MouseWheelUnit, RawInput, Rect, TouchPhase,
};

use crate::app::ViewerApp;
use crate::WINDOW_SIZE;

#[derive(Debug, Clone)]
pub struct FrameStats {
    pub frames: usize,
    pub mean: Duration,
    pub p95: Duration,
    pub max: Duration,
}

impl FrameStats {
    fn from(mut v: Vec<Duration>) -> FrameStats {
        v.sort_unstable();
        let n = v.len().max(1);
        let sum: Duration = v.iter().sum();
        FrameStats {
            frames: v.len(),
            mean: sum / n as u32,
            p95: v
                .get((v.len() * 95 / 100).min(v.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default(),
            max: v.last().copied().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for FrameStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "{} frames, mean {:.2} ms, p95 {:.2} ms, max {:.2} ms",
            self.frames,
            ms(self.mean),
            ms(self.p95),
            ms(self.max)
        )
    }
}

#[derive(Debug, Clone)]
pub struct BenchReport {
    /// Records in the file and the time the format reader alone needs for them.
    pub records: usize,
    pub read_only: Duration,
    pub rows: usize,
    pub open: Duration,
    /// Showing the opened dataset: the table's row list (filters, order).
    pub table_view: Duration,
    pub first_frame: Duration,
    pub scroll: FrameStats,
    pub zoom: FrameStats,
}

fn wheel(delta: egui::Vec2, modifiers: Modifiers) -> Event {
    Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta,
        phase: TouchPhase::Move,
        source: MouseWheelSource::Unknown,
        modifiers,
    }
}

/// Runs frames of `app` headless; `events(i)` gives frame i's input. Returns per-frame times.
pub fn frames(
    app: &mut ViewerApp,
    n: usize,
    mut events: impl FnMut(usize) -> Vec<Event>,
) -> Vec<Duration> {
    let ctx = egui::Context::default();
    let screen = Rect::from_min_size(pos2(0.0, 0.0), vec2(WINDOW_SIZE[0], WINDOW_SIZE[1]));
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let input = RawInput {
            screen_rect: Some(screen),
            time: Some(i as f64 / 60.0),
            predicted_dt: 1.0 / 60.0,
            events: events(i),
            ..Default::default()
        };
        let t = Instant::now();
        let out = ctx.run_ui(input, |ui| app.ui(ui));
        let prims = ctx.tessellate(out.shapes, out.pixels_per_point);
        std::hint::black_box(prims);
        times.push(t.elapsed());
    }
    times
}

/// Opening `path` `runs` times: (format reader alone, full open) per run, sorted by full open.
/// Each run reads the file as the viewer does (`load::load_one`); the reader-alone figure
/// decodes every record through `TraceReader::records_parallel` with the viewer's threads.
/// `QUARRY_BENCH_OPEN_ONLY=1` skips the reader-alone pass (reported as zero), so that the
/// process's CPU time is the opens' alone.
pub fn open_times(path: &Path, runs: usize) -> anyhow::Result<Vec<(Duration, Duration)>> {
    let open_only = std::env::var_os("QUARRY_BENCH_OPEN_ONLY").is_some();
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        if open_only {
            let t = Instant::now();
            let ds = crate::load::load_one(path)?;
            out.push((Duration::ZERO, t.elapsed()));
            drop(ds);
            continue;
        }
        let t = Instant::now();
        let reader = format::TraceReader::open(path)?;
        let mut n = 0usize;
        reader.records_parallel(crate::load::decode_threads(), |b| {
            n += b.records.iter().filter(|r| r.is_ok()).count();
        });
        std::hint::black_box(n);
        let read = t.elapsed();
        drop(reader);
        let t = Instant::now();
        let ds = crate::load::load_one(path)?;
        let open = t.elapsed();
        drop(ds);
        out.push((read, open));
    }
    out.sort_by_key(|x| x.1);
    Ok(out)
}

pub fn run(path: &Path) -> anyhow::Result<BenchReport> {
    // Reading and decoding records alone, to split the open time between format and viewer.
    let t = Instant::now();
    let reader = format::TraceReader::open(path)?;
    let mut n = 0usize;
    reader.records_parallel(crate::load::decode_threads(), |b| {
        n += b.records.iter().filter(|r| r.is_ok()).count();
    });
    let read_only = t.elapsed();
    drop(reader);
    let t = Instant::now();
    let ds = crate::load::load_one(path)?;
    let open = t.elapsed();
    let rows = ds.rows.len();
    let t = Instant::now();
    let mut app = ViewerApp::with_dataset(ds);
    let table_view = t.elapsed();
    // The first frame builds the timeline's lanes (deferred from opening).
    let first_frame = frames(&mut app, 1, |_| Vec::new())[0];
    frames(&mut app, 10, |_| Vec::new());
    // The table fills the upper part of the window; the timeline panel the lower part.
    let table_pos = pos2(WINDOW_SIZE[0] / 2.0, 250.0);
    let tl_pos = pos2(WINDOW_SIZE[0] / 2.0, WINDOW_SIZE[1] - 140.0);
    let scroll = frames(&mut app, 300, |i| {
        let dy = if i < 150 { -2400.0 } else { 2400.0 };
        vec![
            Event::PointerMoved(table_pos),
            wheel(vec2(0.0, dy), Modifiers::NONE),
        ]
    });
    let zoom = frames(&mut app, 300, |i| {
        let e = match i % 60 {
            0..=19 => Event::Zoom(1.15),
            20..=39 => Event::Zoom(1.0 / 1.15),
            _ => wheel(vec2(-300.0, -40.0), Modifiers::NONE),
        };
        vec![Event::PointerMoved(tl_pos), e]
    });
    Ok(BenchReport {
        records: n,
        read_only,
        rows,
        open,
        table_view,
        first_frame,
        scroll: FrameStats::from(scroll),
        zoom: FrameStats::from(zoom),
    })
}
