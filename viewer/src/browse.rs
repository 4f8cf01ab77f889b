//! File → Open: the desktop's file chooser through the XDG desktop portal (D-Bus, via `rfd`
//! without GTK), and an in-app file browser for when no portal answers (Xvfb, SSH, no D-Bus
//! session) or the user asks for it. The browser says why the native chooser was not used.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;

use egui::{Color32, RichText};

/// Extensions the browser lists unless "Show all files" is ticked.
pub const EXTENSIONS: [&str; 2] = ["qtrace", "qres"];

/// One line of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub path: PathBuf,
    pub is_dir: bool,
    pub size: u64,
}

/// Lists `dir`: directories first, then files (only `*.qtrace` / `*.qres` unless `all`), each
/// sorted by name. Hidden entries (dot files) are left out.
pub fn list_dir(dir: &Path, all: bool) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let Ok(e) = e else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = e.path();
        // Follows symlinks, so a link to a directory is navigable.
        let meta = std::fs::metadata(&path).ok();
        let is_dir = meta.as_ref().is_some_and(|m| m.is_dir());
        if !is_dir && !all && !has_quarry_extension(&path) {
            continue;
        }
        out.push(Entry {
            name,
            path,
            is_dir,
            size: meta.map_or(0, |m| m.len()),
        });
    }
    out.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
}

pub fn has_quarry_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

fn human_size(n: u64) -> String {
    match n {
        0..=1023 => format!("{n} B"),
        1024..=1_048_575 => format!("{:.1} KiB", n as f64 / 1024.0),
        1_048_576..=1_073_741_823 => format!("{:.1} MiB", n as f64 / 1_048_576.0),
        _ => format!("{:.1} GiB", n as f64 / 1_073_741_824.0),
    }
}

/// The in-app file browser window.
#[derive(Debug, Default)]
pub struct FileBrowser {
    pub open: bool,
    pub dir: PathBuf,
    /// The path field: a directory (Enter goes there) or a file (Enter opens it).
    pub path_text: String,
    pub show_all: bool,
    pub entries: Vec<Entry>,
    /// Why the native chooser was not used (shown at the top), if it was not.
    pub reason: Option<String>,
    /// Listing problem of the current directory.
    pub error: Option<String>,
    /// Highlighted entry (single click); double click or Open opens it.
    pub highlighted: Option<PathBuf>,
}

impl FileBrowser {
    /// Opens the browser in `dir` (or the current directory), with `reason` shown at the top.
    pub fn show_in(&mut self, dir: Option<PathBuf>, reason: Option<String>) {
        let dir = dir
            .filter(|d| d.is_dir())
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        self.open = true;
        self.reason = reason;
        self.navigate(dir);
    }

    /// Lists `dir` and makes it current; on failure keeps the old listing and says why.
    pub fn navigate(&mut self, dir: PathBuf) {
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        match list_dir(&dir, self.show_all) {
            Ok(entries) => {
                self.entries = entries;
                self.error = None;
                self.path_text = dir.display().to_string();
                self.dir = dir;
                self.highlighted = None;
            }
            Err(e) => self.error = Some(format!("cannot list {}: {e}", dir.display())),
        }
    }

    fn refresh(&mut self) {
        let d = self.dir.clone();
        self.navigate(d);
    }

    /// What the path field asks for: a directory to go to, or a file to open.
    fn submit_path(&mut self) -> Option<PathBuf> {
        let text = self.path_text.trim();
        if text.is_empty() {
            return None;
        }
        let mut p = PathBuf::from(text);
        if p.is_relative() {
            p = self.dir.join(p);
        }
        if p.is_dir() {
            self.navigate(p);
            None
        } else {
            // A missing or bad file is the loader's to report, in the app's own words.
            self.open = false;
            Some(p)
        }
    }

    /// Draws the window when open; returns the file the user picked.
    pub fn ui(&mut self, ctx: &egui::Context) -> Option<PathBuf> {
        if !self.open {
            return None;
        }
        let mut picked = None;
        let mut open = self.open;
        egui::Window::new("Open a trace or results file")
            .open(&mut open)
            .pivot(egui::Align2::CENTER_CENTER)
            .default_pos(ctx.content_rect().center())
            .default_size([640.0, 460.0])
            .collapsible(false)
            .show(ctx, |ui| picked = self.contents(ui));
        // The close button, or a pick, closes it.
        self.open = open && self.open;
        picked
    }

    fn contents(&mut self, ui: &mut egui::Ui) -> Option<PathBuf> {
        let mut picked = None;
        if let Some(r) = &self.reason {
            ui.colored_label(
                Color32::from_rgb(230, 190, 110),
                format!("Built-in file browser: {r}"),
            );
            ui.separator();
        }
        ui.horizontal(|ui| {
            if ui.button("Up").on_hover_text("Parent directory").clicked() {
                if let Some(parent) = self.dir.parent().map(Path::to_path_buf) {
                    self.navigate(parent);
                }
            }
            let l = ui.label("Path");
            let edit = ui
                .add(
                    egui::TextEdit::singleline(&mut self.path_text)
                        .hint_text("a directory, or a file to open")
                        .desired_width(ui.available_width() - 70.0),
                )
                .labelled_by(l.id);
            let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            if ui.button("Go").clicked() || enter {
                picked = self.submit_path();
            }
        });
        ui.horizontal(|ui| {
            if ui
                .checkbox(&mut self.show_all, "Show all files")
                .on_hover_text("Otherwise only *.qtrace and *.qres files are listed")
                .changed()
            {
                self.refresh();
            }
            ui.weak(if self.show_all {
                "all files".to_owned()
            } else {
                format!(
                    "filter: {}",
                    EXTENSIONS.map(|e| format!("*.{e}")).join(", ")
                )
            });
        });
        if let Some(e) = &self.error {
            ui.colored_label(Color32::from_rgb(255, 130, 130), e);
        }
        ui.separator();
        let footer = 34.0;
        let mut go = None;
        let mut highlight = None;
        egui::ScrollArea::vertical()
            .max_height((ui.available_height() - footer).max(80.0))
            .auto_shrink([false, false])
            .show(ui, |ui| {
                if self.entries.is_empty() {
                    ui.weak(if self.show_all {
                        "This directory is empty."
                    } else {
                        "No directories or *.qtrace / *.qres files here."
                    });
                }
                for e in &self.entries {
                    let text = if e.is_dir {
                        format!("{}/", e.name)
                    } else {
                        e.name.clone()
                    };
                    let selected = self.highlighted.as_ref() == Some(&e.path);
                    ui.horizontal(|ui| {
                        let label = if e.is_dir {
                            RichText::new(text).strong()
                        } else {
                            RichText::new(text)
                        };
                        let r = ui.selectable_label(selected, label);
                        if !e.is_dir {
                            ui.weak(human_size(e.size));
                        }
                        if r.double_clicked() || (e.is_dir && r.clicked()) {
                            go = Some(e.clone());
                        } else if r.clicked() {
                            highlight = Some(e.path.clone());
                        }
                    });
                }
            });
        if highlight.is_some() {
            self.highlighted = highlight;
        }
        if let Some(e) = go {
            if e.is_dir {
                self.navigate(e.path);
            } else {
                self.open = false;
                picked = Some(e.path);
            }
        }
        ui.separator();
        ui.horizontal(|ui| {
            let can_open = self.highlighted.is_some();
            if ui
                .add_enabled(can_open, egui::Button::new("Open file"))
                .clicked()
            {
                if let Some(p) = self.highlighted.take() {
                    self.open = false;
                    picked = Some(p);
                }
            }
            if ui.button("Cancel").clicked() {
                self.open = false;
            }
            if let Some(h) = &self.highlighted {
                ui.weak(h.display().to_string());
            }
        });
        picked
    }
}

/// Why the desktop portal cannot be reached, checked before trying it (so the user is not left
/// waiting for a D-Bus timeout). `None` means it is worth trying.
pub fn portal_unavailable() -> Option<String> {
    if std::env::var_os("QUARRY_VIEW_NO_PORTAL").is_some() {
        return Some("QUARRY_VIEW_NO_PORTAL is set".to_owned());
    }
    let bus_env = std::env::var_os("DBUS_SESSION_BUS_ADDRESS").filter(|v| !v.is_empty());
    let runtime_bus = std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| PathBuf::from(d).join("bus"))
        .filter(|p| p.exists());
    if bus_env.is_none() && runtime_bus.is_none() {
        return Some(
            "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus does \
             not exist), so the desktop's file chooser portal cannot be reached"
                .to_owned(),
        );
    }
    None
}

/// Messages `rfd` logged on the thread that runs the native dialog: it returns `None` both when
/// the user cancels and when no portal answered, and only its log tells them apart.
static DIALOG_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

std::thread_local! {
    static CAPTURING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

struct DialogLogger;

impl log::Log for DialogLogger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn && m.target().starts_with("rfd")
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) && CAPTURING.with(|c| c.get()) {
            DIALOG_LOG
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

static LOGGER: DialogLogger = DialogLogger;

/// How a native dialog ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NativeOutcome {
    Picked(Vec<PathBuf>),
    Cancelled,
    /// No portal (nor its zenity fallback) answered; the text says what rfd reported.
    Unavailable(String),
}

/// A native dialog running on its own thread (the portal call blocks).
pub struct NativeDialog {
    rx: mpsc::Receiver<NativeOutcome>,
}

impl NativeDialog {
    /// Starts the desktop's file chooser; poll [`NativeDialog::poll`] every frame.
    pub fn start(dir: Option<PathBuf>, waker: Option<egui::Context>) -> NativeDialog {
        // Only the first logger of a process is installed; if another one is, rfd's messages
        // go there and a failed portal looks like a cancel (the browser stays one click away).
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Warn);
        }
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            CAPTURING.with(|c| c.set(true));
            let mut d = rfd::FileDialog::new()
                .set_title("Open quarry traces or results files")
                .add_filter("quarry traces and results", &EXTENSIONS)
                .add_filter("All files", &["*"]);
            if let Some(dir) = dir {
                d = d.set_directory(dir);
            }
            let before = DIALOG_LOG.lock().unwrap_or_else(|e| e.into_inner()).len();
            let r = d.pick_files();
            let log: Vec<String> = DIALOG_LOG
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(before..)
                .filter(|m| m != "Using zenity fallback")
                .collect();
            let outcome = match r {
                Some(paths) if !paths.is_empty() => NativeOutcome::Picked(paths),
                _ if !log.is_empty() => NativeOutcome::Unavailable(format!(
                    "no desktop file chooser answered ({})",
                    log.join("; ")
                )),
                _ => NativeOutcome::Cancelled,
            };
            let _ = tx.send(outcome);
            if let Some(w) = waker {
                w.request_repaint();
            }
        });
        NativeDialog { rx }
    }

    /// The outcome once the dialog closed.
    pub fn poll(&self) -> Option<NativeOutcome> {
        match self.rx.try_recv() {
            Ok(o) => Some(o),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => Some(NativeOutcome::Unavailable(
                "the file chooser thread ended without an answer".to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_filters_and_sorts() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("zdir")).unwrap();
        std::fs::create_dir(d.path().join("adir")).unwrap();
        for f in ["b.qres", "a.qtrace", "notes.txt", ".hidden.qres", "C.QRES"] {
            std::fs::write(d.path().join(f), b"x").unwrap();
        }
        let names = |all| -> Vec<String> {
            list_dir(d.path(), all)
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect()
        };
        assert_eq!(
            names(false),
            ["adir", "zdir", "C.QRES", "a.qtrace", "b.qres"]
        );
        assert_eq!(
            names(true),
            ["adir", "zdir", "C.QRES", "a.qtrace", "b.qres", "notes.txt"]
        );
        assert!(list_dir(&d.path().join("missing"), false).is_err());
    }

    #[test]
    fn path_field_navigates_to_directories_and_picks_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub").join("x.qres"), b"x").unwrap();
        let mut b = FileBrowser::default();
        b.show_in(Some(d.path().to_path_buf()), None);
        assert_eq!(b.entries.len(), 1);
        b.path_text = "sub".into();
        assert_eq!(b.submit_path(), None);
        assert!(b.dir.ends_with("sub"));
        assert_eq!(b.entries[0].name, "x.qres");
        b.path_text = "x.qres".into();
        assert_eq!(b.submit_path(), Some(b.dir.join("x.qres")));
        assert!(!b.open);
        // A directory that cannot be listed keeps the old listing and says why.
        b.open = true;
        b.navigate(d.path().join("nope"));
        assert!(b.error.as_deref().unwrap().contains("cannot list"));
        assert_eq!(b.entries[0].name, "x.qres");
    }
}
