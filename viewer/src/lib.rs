//! quarry viewer: query tables, availability timelines, timestamps and counters of traces and
//! results files, in an eframe window (or rendered once to a PNG).
//!
//! The viewer never needs a Vulkan device: everything comes from the files.

pub mod app;
pub mod bench;
pub mod browse;
pub mod compare;
pub mod data;
pub mod export;
pub mod labels;
pub mod load;
pub mod model;
pub mod plots;
pub mod synth;
pub mod table;
pub mod timeline;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context as _};

pub use app::{Tab, ViewerApp};
pub use export::ExportFormat;

/// Arguments of `quarry view`.
#[derive(Debug, Clone, Default)]
pub struct ViewArgs {
    /// A trace and/or results files.
    pub files: Vec<PathBuf>,
    /// Render once to this PNG and exit.
    pub screenshot: Option<PathBuf>,
    /// Tab shown first (`queries`, `timestamps`, `counters`, `compare`, `files`); Queries when `None`.
    pub tab: Option<Tab>,
    /// Start with the built-in file browser open in this directory.
    pub browse: Option<PathBuf>,
}

/// Window size, also the screenshot size (logical points).
pub const WINDOW_SIZE: [f32; 2] = [1440.0, 900.0];

fn make_app(args: &ViewArgs) -> ViewerApp {
    let mut app = ViewerApp::new(
        Box::new(load::load_paths),
        app::RecentFiles::load(app::RecentFiles::default_store()),
    );
    if !args.files.is_empty() {
        app.open(args.files.clone());
    }
    if let Some(t) = args.tab {
        app.tab = t;
    }
    if let Some(d) = &args.browse {
        app.browser.show_in(
            Some(d.clone()),
            browse::portal_unavailable().map(|r| format!("{r} (opened with --browse)")),
        );
    }
    app
}

fn native_options() -> eframe::NativeOptions {
    eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_inner_size(WINDOW_SIZE)
            .with_min_inner_size([640.0, 400.0])
            .with_title("quarry view")
            .with_app_id("quarry-view")
            .with_drag_and_drop(true),
        ..Default::default()
    }
}

/// Opens the viewer window (or, with `screenshot`, renders one frame to a PNG and exits).
pub fn run(args: ViewArgs) -> anyhow::Result<()> {
    if let Some(out) = args.screenshot.clone() {
        return screenshot(args, &out);
    }
    let app = make_app(&args);
    eframe::run_native(
        "quarry view",
        native_options(),
        Box::new(move |_cc| Ok(Box::new(app))),
    )
    .map_err(|e| anyhow::anyhow!("could not open the viewer window: {e} (is DISPLAY set?)"))
}

/// Frames to run before taking the screenshot: lets layout, fonts and plot bounds settle.
const SETTLE_FRAMES: u32 = 4;
/// Give up when no screenshot arrived after this many frames.
const MAX_FRAMES: u32 = 200;

type Shot = Arc<Mutex<Option<Arc<egui::ColorImage>>>>;

struct ScreenshotApp {
    inner: ViewerApp,
    frames: u32,
    requested: bool,
    shot: Shot,
    out: PathBuf,
    result: Arc<Mutex<Option<anyhow::Result<()>>>>,
}

impl eframe::App for ScreenshotApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.inner.ui(ui);
        let ctx = ui.ctx().clone();
        self.frames += 1;
        if self.frames >= SETTLE_FRAMES && !self.requested {
            self.requested = true;
            let shot = self.shot.clone();
            let waker = ctx.clone();
            ctx.request_screenshot(move |img| {
                *shot.lock().unwrap_or_else(|e| e.into_inner()) = Some(img);
                waker.request_repaint();
            });
        }
        let img = self.shot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(img) = img {
            let r = write_png(&self.out, &img);
            *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        } else if self.frames > MAX_FRAMES {
            *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(anyhow::anyhow!(
                "no screenshot after {MAX_FRAMES} frames"
            )));
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
        ctx.request_repaint();
    }
}

fn screenshot(args: ViewArgs, out: &Path) -> anyhow::Result<()> {
    let mut inner = make_app(&args);
    // Show a selected row so the screenshot demonstrates the table/timeline link.
    if inner.selected.is_none() && !inner.ds.rows.is_empty() {
        let pick = inner.ds.mismatch.iter().position(|m| *m).unwrap_or(0);
        inner.selected = Some(pick);
        inner.timeline.focus_row = Some(pick);
        inner.table.scroll_to_selection = true;
    }
    let result = Arc::new(Mutex::new(None));
    let app = ScreenshotApp {
        inner,
        frames: 0,
        requested: false,
        shot: Arc::default(),
        out: out.to_path_buf(),
        result: result.clone(),
    };
    let mut opts = native_options();
    // Fixed size so screenshots are reproducible.
    opts.viewport = opts.viewport.with_resizable(false);
    opts.persist_window = false;
    eframe::run_native("quarry view", opts, Box::new(move |_cc| Ok(Box::new(app)))).map_err(
        |e| {
            anyhow::anyhow!(
                "could not open a window for the screenshot: {e} (is DISPLAY set? try Xvfb)"
            )
        },
    )?;
    let r = result.lock().unwrap_or_else(|e| e.into_inner()).take();
    match r {
        Some(r) => r,
        None => bail!("the window closed before the screenshot was taken"),
    }
}

/// Writes an egui image as an 8-bit RGBA PNG.
pub fn write_png(path: &Path, img: &egui::ColorImage) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let [w, h] = img.size;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc.write_header().context("writing PNG header")?;
    let bytes: Vec<u8> = img.pixels.iter().flat_map(|c| c.to_array()).collect();
    wr.write_image_data(&bytes).context("writing PNG data")?;
    wr.finish().context("finishing PNG")?;
    Ok(())
}

/// `quarry export`: the query table of `files` (a trace and/or results files) as CSV or JSON, or
/// their timeline as Perfetto/Chrome trace-event JSON.
pub fn export(files: &[PathBuf], format: ExportFormat, out: &Path) -> anyhow::Result<()> {
    if files.is_empty() {
        bail!("no input files");
    }
    let ds = load::load_paths(files);
    if let Some((_, e)) = ds.failed.first() {
        // The format error already names the file.
        bail!("{e}");
    }
    let rows: Vec<u32> = (0..ds.rows.len() as u32).collect();
    let (msg, err) = app::export_view(&ds, &rows, format, out);
    if err {
        bail!(msg);
    }
    Ok(())
}
