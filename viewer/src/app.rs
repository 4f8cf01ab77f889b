//! The eframe application: file handling, header panel, tabs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egui::{Color32, RichText};

use crate::browse::{self, FileBrowser, NativeDialog, NativeOutcome};
use crate::compare::CompareState;
use crate::data::{Dataset, FileSummary};
use crate::model;
use crate::plots::{self, CountersState, TimestampsState};
use crate::table::{self, TableState};
use crate::timeline::TimelineState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Queries,
    Timestamps,
    Counters,
    /// Results files matched as `quarry compare` matches them.
    Compare,
    Files,
}

impl Tab {
    pub fn parse(s: &str) -> Option<Tab> {
        match s.to_ascii_lowercase().as_str() {
            "queries" | "table" | "timeline" => Some(Tab::Queries),
            "timestamps" => Some(Tab::Timestamps),
            "counters" => Some(Tab::Counters),
            "compare" => Some(Tab::Compare),
            "files" => Some(Tab::Files),
            _ => None,
        }
    }
}

/// Recently opened files, one path per line in a small text file.
#[derive(Debug, Clone, Default)]
pub struct RecentFiles {
    /// Where the list lives; `None` keeps it in memory only (tests).
    pub store: Option<PathBuf>,
    pub items: Vec<PathBuf>,
}

const MAX_RECENT: usize = 12;

impl RecentFiles {
    /// `$XDG_CONFIG_HOME/quarry/recent-files` (or `~/.config/...`).
    pub fn default_store() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("quarry").join("recent-files"))
    }

    pub fn load(store: Option<PathBuf>) -> RecentFiles {
        let items = store
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|s| {
                s.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(PathBuf::from)
                    .take(MAX_RECENT)
                    .collect()
            })
            .unwrap_or_default();
        RecentFiles { store, items }
    }

    pub fn add(&mut self, paths: &[PathBuf]) {
        for p in paths.iter().rev() {
            let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            self.items.retain(|x| *x != p);
            self.items.insert(0, p);
        }
        self.items.truncate(MAX_RECENT);
        if let Some(store) = &self.store {
            // Losing the recent list is not worth an error dialog.
            if let Some(dir) = store.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let text: String = self
                .items
                .iter()
                .map(|p| format!("{}\n", p.display()))
                .collect();
            let _ = std::fs::write(store, text);
        }
    }
}

pub type Loader = Box<dyn Fn(&[PathBuf]) -> Dataset>;

pub struct ViewerApp {
    pub paths: Vec<PathBuf>,
    pub ds: Dataset,
    pub table: TableState,
    pub timeline: TimelineState,
    pub timestamps: TimestampsState,
    pub counters: CountersState,
    pub compare: CompareState,
    pub tab: Tab,
    /// Index into `ds.rows`.
    pub selected: Option<usize>,
    pub open_text: String,
    pub export_text: String,
    /// Last status message and whether it is an error.
    pub message: Option<(String, bool)>,
    pub recent: RecentFiles,
    pub load_time: Duration,
    /// The in-app file browser (File → Open when no desktop portal answers).
    pub browser: FileBrowser,
    /// A desktop file chooser waiting for the user.
    native: Option<NativeDialog>,
    loader: Loader,
}

impl ViewerApp {
    /// An app with `loader` reading files (tests pass in-memory loaders).
    pub fn new(loader: Loader, recent: RecentFiles) -> ViewerApp {
        ViewerApp {
            paths: Vec::new(),
            ds: Dataset::default(),
            table: TableState::default(),
            timeline: TimelineState::default(),
            timestamps: TimestampsState::default(),
            counters: CountersState::default(),
            compare: CompareState::default(),
            tab: Tab::Queries,
            selected: None,
            open_text: String::new(),
            export_text: "quarry-table.csv".to_owned(),
            message: None,
            recent,
            load_time: Duration::ZERO,
            browser: FileBrowser::default(),
            native: None,
            loader,
        }
    }

    /// Shows an already-built dataset (tests, benches).
    pub fn with_dataset(ds: Dataset) -> ViewerApp {
        let mut app = ViewerApp::new(
            Box::new(|_: &[PathBuf]| Dataset::default()),
            RecentFiles::default(),
        );
        app.set_dataset(ds);
        app
    }

    pub fn set_dataset(&mut self, ds: Dataset) {
        self.ds = ds;
        self.table = TableState::default();
        self.table.refresh(&self.ds, true);
        self.timeline.reset();
        self.timestamps = TimestampsState::default();
        self.counters = CountersState::default();
        self.compare = CompareState::default();
        self.selected = None;
        self.message = match self.ds.failed.len() {
            0 => None,
            n => Some((
                format!("{n} file(s) could not be opened: {}", self.ds.failed[0].1),
                true,
            )),
        };
    }

    /// Replaces the open files with `paths` and reloads.
    pub fn open(&mut self, paths: Vec<PathBuf>) {
        let t = Instant::now();
        let ds = (self.loader)(&paths);
        self.load_time = t.elapsed();
        let ok: Vec<PathBuf> = paths
            .iter()
            .filter(|p| !ds.failed.iter().any(|(f, _)| f == *p))
            .cloned()
            .collect();
        self.recent.add(&ok);
        self.paths = ok;
        self.set_dataset(ds);
        if self.message.is_none() {
            self.message = Some((
                format!(
                    "Loaded {} queries in {:.0} ms",
                    self.ds.rows.len(),
                    self.load_time.as_secs_f64() * 1e3
                ),
                false,
            ));
        }
    }

    /// Adds `path` to the open files.
    pub fn add(&mut self, path: PathBuf) {
        let mut paths = self.paths.clone();
        if !paths.contains(&path) {
            paths.push(path);
        }
        self.open(paths);
    }

    /// Where file choosers start: the directory of the first open file, else of the most
    /// recent one, else the current directory.
    pub fn start_dir(&self) -> Option<PathBuf> {
        self.paths
            .iter()
            .chain(&self.recent.items)
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .find(|d| d.is_dir())
    }

    /// File → Open: the desktop's chooser through the portal, or the built-in browser (saying
    /// why) when the portal cannot be reached.
    pub fn open_dialog(&mut self, ctx: &egui::Context) {
        if self.native.is_some() {
            return;
        }
        match browse::portal_unavailable() {
            Some(reason) => self.browser.show_in(self.start_dir(), Some(reason)),
            None => {
                self.native = Some(NativeDialog::start(self.start_dir(), Some(ctx.clone())));
            }
        }
    }

    /// The built-in browser, asked for by the user.
    pub fn open_browser(&mut self) {
        self.browser.show_in(self.start_dir(), None);
    }

    /// Opens what a chooser returned, adding to the open files.
    fn open_picked(&mut self, picked: Vec<PathBuf>) {
        let mut paths = self.paths.clone();
        for p in picked {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        self.open(paths);
    }

    fn poll_dialogs(&mut self, ctx: &egui::Context) {
        if let Some(outcome) = self.native.as_ref().and_then(NativeDialog::poll) {
            self.native = None;
            match outcome {
                NativeOutcome::Picked(paths) => self.open_picked(paths),
                NativeOutcome::Cancelled => {}
                NativeOutcome::Unavailable(reason) => {
                    self.browser.show_in(self.start_dir(), Some(reason))
                }
            }
        }
        if let Some(p) = self.browser.ui(ctx) {
            self.open_picked(vec![p]);
        }
    }

    fn select(&mut self, row: usize, from_table: bool) {
        self.selected = Some(row);
        if from_table {
            self.timeline.focus_row = Some(row);
        } else {
            self.table.scroll_to_selection = true;
        }
    }

    /// The whole UI; eframe calls this through [`eframe::App::ui`], tests call it directly.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let dropped: Vec<PathBuf> = ui.ctx().input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .collect()
        });
        if !dropped.is_empty() {
            self.open_picked(dropped);
        }
        if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::O)) {
            self.open_dialog(&ui.ctx().clone());
        }
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar(ui));
        egui::Panel::top("files").show(ui, |ui| self.files_strip(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status_bar(ui));
        egui::CentralPanel::default().show(ui, |ui| match self.tab {
            Tab::Queries => self.queries_tab(ui),
            Tab::Timestamps => plots::timestamps_ui(ui, &self.ds, &mut self.timestamps),
            Tab::Counters => plots::counters_ui(ui, &self.ds, &mut self.counters),
            Tab::Compare => crate::compare::compare_ui(ui, &self.ds, &mut self.compare),
            Tab::Files => self.files_tab(ui),
        });
        self.poll_dialogs(&ui.ctx().clone());
        if ui.ctx().input(|i| !i.raw.hovered_files.is_empty()) {
            let rect = ui.ctx().content_rect();
            let painter = ui.ctx().layer_painter(egui::LayerId::new(
                egui::Order::Foreground,
                egui::Id::unique("quarry-drop-overlay"),
            ));
            painter.rect_filled(rect, 0.0, Color32::from_black_alpha(160));
            painter.text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                "Drop traces or results files to open",
                egui::FontId::proportional(22.0),
                Color32::WHITE,
            );
        }
    }

    fn toolbar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.label(
                RichText::new("quarry")
                    .strong()
                    .size(17.0)
                    .color(Color32::from_rgb(230, 180, 80)),
            );
            ui.separator();
            ui.menu_button("File", |ui| {
                if ui
                    .add(egui::Button::new("Open…").shortcut_text("Ctrl+O"))
                    .on_hover_text(
                        "The desktop's file chooser (falls back to the built-in browser)",
                    )
                    .clicked()
                {
                    self.open_dialog(&ui.ctx().clone());
                    ui.close();
                }
                if ui.button("Open with the built-in browser…").clicked() {
                    self.open_browser();
                    ui.close();
                }
                ui.separator();
                ui.menu_button("Recent files", |ui| {
                    if self.recent.items.is_empty() {
                        ui.weak("No recent files");
                    }
                    for p in self.recent.items.clone() {
                        if ui.button(p.display().to_string()).clicked() {
                            self.add(p);
                            ui.close();
                        }
                    }
                });
            });
            ui.separator();
            for (tab, name) in [
                (Tab::Queries, "Queries"),
                (Tab::Timestamps, "Timestamps"),
                (Tab::Counters, "Counters"),
                (Tab::Compare, "Compare"),
                (Tab::Files, "Files"),
            ] {
                ui.selectable_value(&mut self.tab, tab, name);
            }
            ui.separator();
            let edit = ui.add(
                egui::TextEdit::singleline(&mut self.open_text)
                    .hint_text("path to a trace or results file")
                    .desired_width(260.0),
            );
            let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            if (ui.button("Open").clicked() || enter) && !self.open_text.trim().is_empty() {
                let p = PathBuf::from(self.open_text.trim());
                self.open_text.clear();
                self.add(p);
            }
            ui.menu_button("Recent", |ui| {
                if self.recent.items.is_empty() {
                    ui.weak("No recent files");
                }
                for p in self.recent.items.clone() {
                    if ui.button(p.display().to_string()).clicked() {
                        self.add(p);
                        ui.close();
                    }
                }
            });
            if !self.paths.is_empty() && ui.button("Close all").clicked() {
                self.paths.clear();
                self.set_dataset(Dataset::default());
            }
        });
    }

    fn files_strip(&mut self, ui: &mut egui::Ui) {
        if self.ds.is_empty() && self.ds.failed.is_empty() {
            ui.weak("No files open. Use File > Open (Ctrl+O), pass files on the command line, drop them here, or type a path above.");
            return;
        }
        let files: Vec<&FileSummary> = self.ds.trace.iter().chain(&self.ds.results).collect();
        egui::Grid::new("files_strip")
            .num_columns(5)
            .spacing([14.0, 2.0])
            .show(ui, |ui| {
                for f in files {
                    kind_badge(ui, f);
                    ui.label(RichText::new(&f.label).strong())
                        .on_hover_text(f.path.display().to_string());
                    let dev = f
                        .device
                        .as_ref()
                        .map(|d| format!("{} · {} {}", d.name, d.driver_name, d.driver_info))
                        .unwrap_or_else(|| "device unknown".into());
                    ui.label(dev);
                    let cap = f
                        .replay
                        .as_ref()
                        .and_then(|r| r.capture_device.as_ref())
                        .map(|d| format!("captured on {}", d.name))
                        .unwrap_or_default();
                    ui.weak(cap);
                    let mut s = format!("{} frames · {} queries", f.frames, f.queries);
                    if let Some(e) = &f.error {
                        s += &format!(" · damaged: {e}");
                    }
                    if f.error.is_some() {
                        ui.colored_label(Color32::from_rgb(255, 160, 100), s);
                    } else {
                        ui.weak(s);
                    }
                    ui.end_row();
                }
                for (p, e) in &self.ds.failed {
                    ui.label(
                        RichText::new(" ERROR ")
                            .background_color(Color32::from_rgb(150, 40, 40))
                            .color(Color32::WHITE)
                            .strong(),
                    );
                    ui.label(RichText::new(p.display().to_string()).strong());
                    ui.colored_label(Color32::from_rgb(255, 130, 130), e);
                    ui.label("");
                    ui.label("");
                    ui.end_row();
                }
            });
    }

    fn status_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            let mism = self.ds.mismatch.iter().filter(|m| **m).count();
            ui.label(format!(
                "{} of {} queries shown",
                self.table.view.len(),
                self.ds.rows.len()
            ));
            if !self.ds.results.is_empty() {
                ui.separator();
                let c = if mism > 0 {
                    Color32::from_rgb(255, 130, 130)
                } else {
                    Color32::from_rgb(120, 210, 120)
                };
                ui.colored_label(c, format!("{mism} mismatches"));
            }
            if let Some(sel) = self.selected.filter(|s| *s < self.ds.rows.len()) {
                ui.separator();
                let r = &self.ds.rows[sel];
                ui.label(format!(
                    "selected: {} #{} frame {}",
                    self.ds.pool_of(r).label(),
                    r.query,
                    r.frame
                ));
            }
            if self.native.is_some() {
                ui.separator();
                ui.label("Waiting for the desktop's file chooser…");
                if ui.small_button("Use the built-in browser").clicked() {
                    // The portal thread is left to finish on its own; its answer is dropped.
                    self.native = None;
                    self.open_browser();
                }
            }
            if let Some((m, err)) = &self.message {
                ui.separator();
                if *err {
                    ui.colored_label(Color32::from_rgb(255, 120, 120), m);
                } else {
                    ui.weak(m);
                }
            }
        });
    }

    fn filter_bar(&mut self, ui: &mut egui::Ui) {
        let ds = &self.ds;
        let f = &mut self.table.filter;
        ui.horizontal_wrapped(|ui| {
            let mut types: Vec<i32> = ds.pools.iter().map(|p| p.query_type).collect();
            types.sort_unstable();
            types.dedup();
            let ty_text = f
                .query_type
                .map(model::query_type_name)
                .unwrap_or_else(|| "All types".into());
            let type_label = ui.label("Type");
            egui::ComboBox::from_id_salt("type_filter")
                .selected_text(ty_text)
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut f.query_type, None, "All types");
                    for t in types {
                        ui.selectable_value(&mut f.query_type, Some(t), model::query_type_name(t));
                    }
                })
                .response
                .labelled_by(type_label.id);
            let pool_text = f
                .pool
                .map(|p| ds.pools[p as usize].label())
                .unwrap_or_else(|| "All pools".into());
            let pool_label = ui.label("Pool");
            egui::ComboBox::from_id_salt("pool_filter")
                .selected_text(pool_text)
                .width(170.0)
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut f.pool, None, "All pools");
                    for (i, p) in ds.pools.iter().enumerate() {
                        ui.selectable_value(&mut f.pool, Some(i as u32), p.label());
                    }
                })
                .response
                .labelled_by(pool_label.id);
            let (lo, hi) = ds.frame_range();
            let frames_label = ui.label("Frames");
            let mut max = f.frame_max.min(hi);
            ui.add(egui::DragValue::new(&mut f.frame_min).range(lo..=hi))
                .labelled_by(frames_label.id);
            let to_label = ui.label("to");
            if ui
                .add(egui::DragValue::new(&mut max).range(lo..=hi))
                .labelled_by(to_label.id)
                .changed()
            {
                f.frame_max = max;
            }
            ui.checkbox(&mut f.mismatches_only, "Mismatches only");
            ui.add(
                egui::TextEdit::singleline(&mut f.search)
                    .hint_text("Search pool, type, value, frame…")
                    .desired_width(190.0),
            );
            if ui.button("Reset filters").clicked() {
                *f = table::Filter::all();
            }
            ui.separator();
            let export_label = ui.label("Export to");
            ui.add(egui::TextEdit::singleline(&mut self.export_text).desired_width(150.0))
                .labelled_by(export_label.id);
            for (label, fmt) in [
                ("Export CSV", crate::export::ExportFormat::Csv),
                ("Export JSON", crate::export::ExportFormat::Json),
            ] {
                if ui.button(label).clicked() {
                    self.message = Some(export_view(
                        ds,
                        &self.table.view,
                        fmt,
                        Path::new(self.export_text.trim()),
                    ));
                }
            }
        });
        self.table.refresh(&self.ds, false);
    }

    fn queries_tab(&mut self, ui: &mut egui::Ui) {
        self.filter_bar(ui);
        ui.add_space(2.0);
        let mut clicked_tl = None;
        egui::Panel::bottom("timeline_panel")
            .resizable(true)
            .default_size(260.0)
            .show(ui, |ui| {
                ui.horizontal(|ui| {
                    ui.label(RichText::new("Availability timeline").strong());
                    crate::timeline::legend(ui);
                    ui.weak("wheel: lanes · ctrl+wheel: zoom · drag: pan · click: select");
                });
                clicked_tl = self.timeline.show(ui, &self.ds, self.selected);
            });
        if let Some(r) = clicked_tl {
            self.select(r, false);
        }
        egui::CentralPanel::no_frame().show(ui, |ui| {
            if let Some(r) = table::show(ui, &self.ds, &mut self.table, self.selected) {
                self.select(r, true);
            }
        });
    }

    fn files_tab(&mut self, ui: &mut egui::Ui) {
        egui::ScrollArea::vertical().show(ui, |ui| {
            for f in self.ds.trace.iter().chain(&self.ds.results) {
                file_details(ui, f);
                ui.add_space(8.0);
            }
            for (p, e) in &self.ds.failed {
                ui.colored_label(
                    Color32::from_rgb(255, 130, 130),
                    format!("{}: {e}", p.display()),
                );
            }
        });
    }
}

fn kind_badge(ui: &mut egui::Ui, f: &FileSummary) {
    let (text, color) = match f.header.kind {
        format::record::FileKind::Trace => (" TRACE ", Color32::from_rgb(50, 90, 150)),
        format::record::FileKind::Results => (" RESULTS ", Color32::from_rgb(40, 120, 100)),
    };
    ui.label(
        RichText::new(text)
            .background_color(color)
            .color(Color32::WHITE)
            .strong()
            .small(),
    );
}

fn version(v: u32) -> String {
    format!("{}.{}.{}", v >> 22, (v >> 12) & 0x3ff, v & 0xfff)
}

fn device_rows(ui: &mut egui::Ui, title: &str, d: &format::record::DeviceSummary) {
    ui.label(title);
    ui.strong(&d.name);
    ui.end_row();
    ui.label("Driver");
    ui.label(format!(
        "{} {} (driver id {}, version {:#x})",
        d.driver_name, d.driver_info, d.driver_id, d.driver_version
    ));
    ui.end_row();
    ui.label("Vulkan / IDs");
    ui.label(format!(
        "API {} · vendor {:#06x} device {:#06x} · timestamp period {} ns",
        version(d.api_version),
        d.vendor_id,
        d.device_id,
        d.timestamp_period_ns
    ));
    ui.end_row();
    ui.label("Queue families");
    let qf: Vec<String> = d
        .queue_families
        .iter()
        .map(|q| {
            format!(
                "flags {:#x}×{} ({} ts bits)",
                q.flags, q.queue_count, q.timestamp_valid_bits
            )
        })
        .collect();
    ui.label(qf.join(", "));
    ui.end_row();
}

fn file_details(ui: &mut egui::Ui, f: &FileSummary) {
    ui.horizontal(|ui| {
        kind_badge(ui, f);
        ui.heading(&f.label);
    });
    egui::Grid::new(("file", f.path.display().to_string()))
        .num_columns(2)
        .striped(true)
        .spacing([16.0, 3.0])
        .show(ui, |ui| {
            ui.label("Path");
            ui.monospace(f.path.display().to_string());
            ui.end_row();
            ui.label("Written by");
            ui.label(format!(
                "{} for \"{}\"",
                f.header.writer, f.header.application
            ));
            ui.end_row();
            ui.label("Contents");
            ui.label(format!(
                "{} records · {} frames · {} queries",
                f.records, f.frames, f.queries
            ));
            ui.end_row();
            if let Some(d) = &f.device {
                device_rows(
                    ui,
                    if f.header.kind == format::record::FileKind::Trace {
                        "Capture device"
                    } else {
                        "Replay device"
                    },
                    d,
                );
            }
            if let Some(r) = &f.replay {
                ui.label("Replayed trace");
                ui.label(format!(
                    "{} · {} loop(s) · {} pass(es) · replay {} vs capture {}",
                    r.trace,
                    r.loops,
                    r.passes,
                    model::format_ns(r.replay_ns as f64),
                    model::format_ns(r.capture_ns as f64)
                ));
                ui.end_row();
                if let Some(d) = &r.capture_device {
                    device_rows(ui, "Capture device", d);
                }
            }
            if let Some(e) = &f.error {
                ui.label("Damage");
                ui.colored_label(Color32::from_rgb(255, 160, 100), e);
                ui.end_row();
            }
        });
    if !f.notes.is_empty() {
        egui::CollapsingHeader::new(format!("{} note(s)", f.notes.len()))
            .id_salt(("notes", &f.label))
            .show(ui, |ui| {
                for n in &f.notes {
                    ui.label(n);
                }
            });
    }
}

/// Writes the current table view; returns the status message.
pub fn export_view(
    ds: &Dataset,
    view: &[u32],
    fmt: crate::export::ExportFormat,
    path: &Path,
) -> (String, bool) {
    let res = std::fs::File::create(path).and_then(|f| {
        let mut w = std::io::BufWriter::new(f);
        match fmt {
            crate::export::ExportFormat::Csv => crate::export::write_csv(ds, view, &mut w),
            crate::export::ExportFormat::Json => crate::export::write_json(ds, view, &mut w),
            crate::export::ExportFormat::Perfetto => crate::export::write_perfetto(ds, &mut w),
        }?;
        std::io::Write::flush(&mut w)
    });
    match res {
        Ok(()) => (
            format!("Exported {} rows to {}", view.len(), path.display()),
            false,
        ),
        Err(e) => (format!("Export to {} failed: {e}", path.display()), true),
    }
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        ViewerApp::ui(self, ui);
    }
}
