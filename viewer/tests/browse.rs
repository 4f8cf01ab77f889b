//! File → Open without a desktop portal: the built-in browser, drag-and-drop and recent files,
//! through egui_kittest.

use std::path::{Path, PathBuf};

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use viewer::app::RecentFiles;
use viewer::{synth, ViewerApp};

fn harness(app: ViewerApp) -> Harness<'static, ViewerApp> {
    let mut h = Harness::builder()
        .with_size(egui::vec2(1440.0, 900.0))
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), app);
    h.run();
    h
}

fn write_results(path: &Path, n: usize, device: &str) {
    let (h, recs) = synth::results(n, 3, device, 0);
    let w = format::TraceWriter::create(path, h).unwrap();
    for r in &recs {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

/// dir/ with sub/good.qres, sub/bad.qres (garbage), sub/notes.txt and top.qtrace-less noise.
fn fixture() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    write_results(&sub.join("good.qres"), 300, "gpu-good");
    std::fs::write(sub.join("bad.qres"), b"this is not a quarry file").unwrap();
    std::fs::write(sub.join("notes.txt"), b"notes").unwrap();
    std::fs::write(d.path().join("readme.md"), b"#").unwrap();
    d
}

fn app(recent: RecentFiles) -> ViewerApp {
    ViewerApp::new(Box::new(viewer::load::load_paths), recent)
}

#[test]
fn browser_navigates_a_directory_and_opens_the_picked_file() {
    let d = fixture();
    let mut a = app(RecentFiles::default());
    a.browser.show_in(
        Some(d.path().to_path_buf()),
        Some("no portal in this test".into()),
    );
    let mut h = harness(a);
    // The reason the native chooser was not used is on screen.
    assert!(h
        .query_by_label_contains("Built-in file browser: no portal in this test")
        .is_some());
    // Only directories and quarry files are listed: not readme.md.
    assert!(h.query_by_label("sub/").is_some());
    assert!(h.query_by_label("readme.md").is_none());
    h.get_by_label("sub/").click();
    h.run();
    let sub = std::fs::canonicalize(d.path().join("sub")).unwrap();
    assert_eq!(h.state().browser.dir, sub);
    assert!(h.query_by_label("good.qres").is_some());
    assert!(h.query_by_label("bad.qres").is_some());
    assert!(h.query_by_label("notes.txt").is_none(), "filtered out");
    // "Show all files" lists it.
    h.get_by_label("Show all files").click();
    h.run();
    assert!(h.query_by_label("notes.txt").is_some());
    // Pick good.qres and open it.
    h.get_by_label("good.qres").click();
    h.run();
    assert_eq!(h.state().browser.highlighted, Some(sub.join("good.qres")));
    assert!(
        h.state().ds.results.is_empty(),
        "a single click only highlights"
    );
    h.get_by_label("Open file").click();
    h.run();
    let st = h.state();
    assert!(!st.browser.open, "the browser closes after a pick");
    assert!(st.ds.failed.is_empty());
    assert_eq!(st.ds.results.len(), 1);
    assert_eq!(st.ds.rows.len(), 300);
    assert_eq!(st.paths, vec![sub.join("good.qres")]);
    assert!(h.query_all_by_label("good.qres").count() > 0, "file strip");
    // Up goes back to the parent.
    h.state_mut().browser.open = true;
    h.run();
    h.get_by_label("Up").click();
    h.run();
    assert_eq!(
        h.state().browser.dir,
        std::fs::canonicalize(d.path()).unwrap()
    );
}

#[test]
fn a_bad_file_picked_in_the_browser_shows_a_clear_message() {
    let d = fixture();
    let mut a = app(RecentFiles::default());
    a.browser.show_in(Some(d.path().join("sub")), None);
    let mut h = harness(a);
    assert!(h.query_by_label_contains("Built-in file browser").is_none());
    // A name typed into the path field, relative to the listed directory.
    h.state_mut().browser.path_text.clear();
    h.run();
    let field = h.get_by(|n| n.placeholder() == Some("a directory, or a file to open"));
    field.focus();
    field.type_text("bad.qres");
    h.run();
    h.get_by_label("Go").click();
    h.run();
    let st = h.state();
    assert!(!st.browser.open);
    assert_eq!(st.ds.failed.len(), 1);
    assert!(st.ds.failed[0].0.ends_with("bad.qres"));
    assert!(
        st.ds.failed[0].1.contains("not a quarry file"),
        "{}",
        st.ds.failed[0].1
    );
    assert!(h.query_by_label_contains("could not be opened").is_some());
    assert_eq!(h.query_all_by_label(" ERROR ").count(), 1);
    assert!(
        st.recent.items.is_empty(),
        "a file that failed is not remembered"
    );
}

#[test]
fn file_open_without_a_portal_falls_back_to_the_browser_and_says_why() {
    // Only the viewer's portal check reads this variable.
    std::env::set_var("QUARRY_VIEW_NO_PORTAL", "1");
    let mut h = harness(app(RecentFiles::default()));
    h.get_by_label("File").click();
    h.run();
    h.get_by(|n| {
        n.label().is_some_and(|l| l.starts_with("Open…"))
            && n.role() == egui::accesskit::Role::Button
    })
    .click();
    h.run();
    let st = h.state();
    assert!(st.browser.open);
    assert!(st
        .browser
        .reason
        .as_deref()
        .is_some_and(|r| r.contains("QUARRY_VIEW_NO_PORTAL")));
    assert!(h
        .query_by_label_contains("Built-in file browser: QUARRY_VIEW_NO_PORTAL is set")
        .is_some());
}

/// A file as the window system hands it over.
#[derive(Debug)]
struct Dropped(PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn dropped_files_open_together() {
    let d = fixture();
    let a_path = d.path().join("a.qres");
    let b_path = d.path().join("b.qres");
    write_results(&a_path, 200, "gpu-a");
    write_results(&b_path, 200, "gpu-b");
    let mut h = harness(app(RecentFiles::default()));
    for p in [&a_path, &b_path] {
        h.input_mut()
            .dropped_files
            .push(std::sync::Arc::new(Dropped(p.clone())));
    }
    h.run();
    let st = h.state();
    assert_eq!(st.ds.results.len(), 2, "both dropped files are open");
    assert_eq!(st.paths, vec![a_path.clone(), b_path.clone()]);
    assert!(st.ds.failed.is_empty());
}

#[test]
fn recent_files_are_stored_and_reopen_from_the_file_menu() {
    let d = fixture();
    let store = d.path().join("config").join("recent-files");
    let good = d.path().join("sub").join("good.qres");
    {
        let mut a = app(RecentFiles::load(Some(store.clone())));
        a.open(vec![good.clone()]);
        assert_eq!(a.ds.results.len(), 1);
    }
    let text = std::fs::read_to_string(&store).unwrap();
    let canonical = std::fs::canonicalize(&good).unwrap();
    assert_eq!(text.lines().next(), Some(canonical.to_str().unwrap()));

    // A new session reads the list; File → Recent files → the path opens it.
    let mut h = harness(app(RecentFiles::load(Some(store.clone()))));
    assert!(h.state().ds.results.is_empty());
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Recent files").hover();
    h.run();
    h.get_by_label(&canonical.display().to_string()).click();
    h.run();
    let st = h.state();
    assert_eq!(st.ds.results.len(), 1);
    assert_eq!(st.paths, vec![canonical.clone()]);
}

/// The desktop chooser where no portal answers (no session bus, or a bus without
/// xdg-desktop-portal, as under `dbus-run-session`): reported as unavailable, not as a cancel.
/// Ignored by default because on a desktop it would open a real dialog.
#[test]
#[ignore]
fn native_dialog_without_a_portal_reports_why() {
    let d = viewer::browse::NativeDialog::start(None, None);
    let t = std::time::Instant::now();
    let outcome = loop {
        if let Some(o) = d.poll() {
            break o;
        }
        assert!(t.elapsed().as_secs() < 60, "no answer in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    eprintln!("outcome: {outcome:?} after {:?}", t.elapsed());
    assert!(matches!(
        outcome,
        viewer::browse::NativeOutcome::Unavailable(_)
    ));
}
