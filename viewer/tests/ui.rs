//! Interaction tests of the viewer UI through egui_kittest (headless, no rendering).

use std::path::PathBuf;

use egui::accesskit::Role;
use egui::{Event, Modifiers, PointerButton};
use egui_kittest::kittest::{NodeT, Queryable};
use egui_kittest::Harness;
use viewer::data::{Dataset, ValueColumn};
use viewer::table::{cell_text, Col};
use viewer::{synth, ViewerApp};

fn two_results() -> Dataset {
    let (ha, a) = synth::results(600, 5, "gpu-a", 6);
    let (hb, b) = synth::results(600, 5, "gpu-b", 0);
    Dataset::from_records(vec![
        (PathBuf::from("a.qres"), ha, a),
        (PathBuf::from("b.qres"), hb, b),
    ])
}

fn harness(app: ViewerApp) -> Harness<'static, ViewerApp> {
    let mut h = Harness::builder()
        .with_size(egui::vec2(1440.0, 900.0))
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), app);
    h.run();
    h
}

fn click_at(h: &mut Harness<'_, ViewerApp>, pos: egui::Pos2) {
    h.event(Event::PointerMoved(pos));
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos,
            button: PointerButton::Primary,
            pressed,
            modifiers: Modifiers::default(),
        });
    }
    h.run();
}

#[test]
fn mismatches_only_checkbox_filters_the_table() {
    let mut h = harness(ViewerApp::with_dataset(two_results()));
    assert_eq!(h.state().table.view.len(), 600);
    let plus_before = h.query_all_by_label("+1").count();
    h.get_by_label("Mismatches only").click();
    h.run();
    let st = h.state();
    assert!(!st.table.view.is_empty() && st.table.view.len() < 600);
    assert!(st.table.view.iter().all(|&i| st.ds.mismatch[i as usize]));
    // Only mismatching rows are on screen now: each shows '+1' in the first file's Δ column.
    let shown = h.query_all_by_label("+1").count();
    assert!(
        shown > plus_before && shown >= st.table.view.len().min(20),
        "{plus_before} -> {shown}"
    );
}

#[test]
fn clicking_a_header_sorts_and_reverses() {
    let mut h = harness(ViewerApp::with_dataset(two_results()));
    let values = |h: &Harness<'_, ViewerApp>| -> Vec<i64> {
        let st = h.state();
        st.table
            .view
            .iter()
            .map(|&i| {
                cell_text(&st.ds, i as usize, Col::Value(ValueColumn::Single))
                    .parse::<i64>()
                    .unwrap_or(-1)
            })
            .collect()
    };
    h.get_by_label("Value").click();
    h.run();
    let asc = values(&h);
    assert!(asc.windows(2).all(|w| w[0] <= w[1]), "ascending");
    h.get_by_label("Value").click();
    h.run();
    let desc = values(&h);
    assert!(desc.windows(2).all(|w| w[0] >= w[1]), "descending");
    assert_eq!(desc.first(), asc.last());
    // The largest value is on screen at the top of the table.
    let top = desc[0].to_string();
    assert!(h.query_all_by_label(&top).count() > 0);
}

#[test]
fn type_filter_combo_keeps_one_type() {
    let mut h = harness(ViewerApp::with_dataset(two_results()));
    h.get_all_by_label("Type")
        .find(|n| n.accesskit_node().role() == Role::ComboBox)
        .expect("type combo")
        .click();
    h.run();
    // The popup's option, not one of the table's "Occlusion" cells (plain labels).
    let opt = h
        .get_all_by_label("Occlusion")
        .find(|n| n.accesskit_node().role() != Role::Label)
        .expect("an Occlusion option");
    opt.click();
    h.run();
    let st = h.state();
    assert!(!st.table.view.is_empty());
    assert!(st
        .table
        .view
        .iter()
        .all(|&i| st.ds.pool_of(&st.ds.rows[i as usize]).query_type == 0));
    assert_eq!(st.table.filter.query_type, Some(0));
}

#[test]
fn search_box_filters_by_text() {
    let mut h = harness(ViewerApp::with_dataset(two_results()));
    let search = h.get_by(|n| n.placeholder() == Some("Search pool, type, value, frame…"));
    search.focus();
    search.type_text("timestamp");
    h.run();
    let st = h.state();
    assert!(!st.table.view.is_empty());
    assert!(st
        .table
        .view
        .iter()
        .all(|&i| st.ds.pool_of(&st.ds.rows[i as usize]).query_type == 2));
}

#[test]
fn timeline_click_selects_table_row_and_back() {
    let mut h = harness(ViewerApp::with_dataset(two_results()));
    // Timeline -> table: a capture span of a row that the table does not show yet.
    let (rect, row) = {
        let st = h.state();
        let visible_in_table: Vec<String> = (0..25)
            .map(|i| cell_text(&st.ds, i, Col::Value(ValueColumn::Single)))
            .collect();
        *st.timeline
            .drawn
            .iter()
            .find(|(_, r)| {
                let text = cell_text(&st.ds, *r as usize, Col::Value(ValueColumn::Single));
                let unique = (0..st.ds.rows.len())
                    .filter(|&i| cell_text(&st.ds, i, Col::Value(ValueColumn::Single)) == text)
                    .count()
                    == 1;
                *r >= 40 && !text.is_empty() && unique && !visible_in_table.contains(&text)
            })
            .expect("a span of an off-screen table row")
    };
    let value = cell_text(&h.state().ds, row as usize, Col::Value(ValueColumn::Single));
    assert_eq!(
        h.query_all_by_label(&value).count(),
        0,
        "row {row} should start off-screen in the table"
    );
    click_at(&mut h, rect.center());
    assert_eq!(h.state().selected, Some(row as usize));
    h.run();
    assert!(
        h.query_all_by_label(&value).count() > 0,
        "the table scrolled to the selected row"
    );

    // Table -> timeline: a pipeline-statistics row whose lane is below the visible lanes.
    let (row, text) = {
        let st = h.state();
        let r = st
            .table
            .view
            .iter()
            .map(|&i| i as usize)
            .find(|&i| st.ds.pools[st.ds.rows[i].pool as usize].query_type == 1)
            .unwrap();
        (r, cell_text(&st.ds, r, Col::Value(ValueColumn::Stat(7))))
    };
    // Scroll the table back to the top where that row is.
    h.state_mut().table.scroll_to_selection = false;
    h.state_mut().selected = Some(0);
    h.state_mut().table.scroll_to_selection = true;
    h.run();
    assert!(
        !h.state()
            .timeline
            .drawn
            .iter()
            .any(|(_, r)| *r as usize == row),
        "lane starts off-screen"
    );
    h.get_all_by_label(&text)
        .next()
        .expect("the row is on screen")
        .click();
    h.run();
    assert_eq!(h.state().selected, Some(row));
    assert!(
        h.state()
            .timeline
            .drawn
            .iter()
            .any(|(_, r)| *r as usize == row),
        "timeline scrolled to the row"
    );
}

#[test]
fn bad_files_show_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.qres");
    std::fs::write(&garbage, b"definitely not a quarry file").unwrap();
    let missing = dir.path().join("missing.qtrace");

    // A good file cut short: what was readable still shows, with a damage note.
    let (h0, recs) = synth::results(5000, 1, "gpu", 0);
    let good = dir.path().join("cut.qres");
    // Small blocks, so that a cut file still has whole blocks to read.
    let opts = format::WriterOptions {
        block_size: 4096,
        ..Default::default()
    };
    let w = format::TraceWriter::create_with(&good, h0, opts).unwrap();
    for r in &recs {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&good, &bytes[..bytes.len() * 2 / 3]).unwrap();

    let mut app = ViewerApp::new(
        Box::new(viewer::load::load_paths),
        viewer::app::RecentFiles::default(),
    );
    app.open(vec![garbage.clone(), missing.clone()]);
    let mut h = harness(app);
    assert_eq!(h.state().ds.failed.len(), 2);
    assert!(h.query_by_label_contains("could not be opened").is_some());
    assert_eq!(h.query_all_by_label(" ERROR ").count(), 2);
    assert!(h.query_by_label(&garbage.display().to_string()).is_some());

    // Opening through the path box adds the cut file; the failed ones are not retried.
    let path_box = h.get_by(|n| n.placeholder() == Some("path to a trace or results file"));
    path_box.focus();
    path_box.type_text(&good.display().to_string());
    h.run();
    h.get_by_label("Open").click();
    h.run();
    let st = h.state();
    assert!(st.ds.failed.is_empty());
    let f = &st.ds.results[0];
    assert!(
        f.queries > 0 && f.queries < 5000,
        "partial file read: {}",
        f.queries
    );
    assert!(!st.ds.rows.is_empty());
    assert_eq!(
        st.recent.items.len(),
        1,
        "only the file that opened is remembered"
    );
}

#[test]
fn every_tab_renders_with_trace_and_results() {
    // The harness fails on glyphs the bundled fonts lack, so this also guards against tofu.
    let (ht, t) = synth::trace(5);
    let (ha, a) = synth::results(400, 2, "gpu-a", 9);
    let ds = Dataset::from_records(vec![
        (PathBuf::from("t.qtrace"), ht, t),
        (PathBuf::from("a.qres"), ha, a),
    ]);
    let mut h = harness(ViewerApp::with_dataset(ds));
    for tab in ["Timestamps", "Counters", "Files", "Queries"] {
        h.get_by_label(tab).click();
        h.run();
    }
    assert!(
        h.query_by_label_contains("Capture device").is_none(),
        "Files tab left"
    );
    h.get_by_label("Files").click();
    h.run();
    assert!(h.query_all_by_label("Capture device").count() > 0);
    assert!(
        h.query_all_by_label("t.qtrace").count() >= 2,
        "strip and Files tab heading"
    );
}

#[test]
fn counters_grouped_by_render_pass_show_one_row_per_render_pass() {
    use viewer::plots::{format_counter, CounterGrouping};
    // Two GPUs replaying the same render-pass-scoped counters, scaled x2 and x0.5.
    let (ha, a) = synth::render_pass_results(4, "gpu-a", 2.0);
    let (hb, b) = synth::render_pass_results(4, "gpu-b", 0.5);
    let ds = Dataset::from_records(vec![
        (PathBuf::from("a.qres"), ha, a),
        (PathBuf::from("b.qres"), hb, b),
    ]);
    let mut h = harness(ViewerApp::with_dataset(ds));
    h.get_by_label("Counters").click();
    h.run();
    // Files with render-pass samples open grouped by render pass.
    assert_eq!(
        h.state().counters.grouping,
        Some(CounterGrouping::RenderPass)
    );
    // Switch to command buffers and back through the selector.
    let pick = |h: &mut Harness<'_, ViewerApp>, option: &str| {
        h.get_all_by_label("Group by")
            .find(|n| n.accesskit_node().role() == Role::ComboBox)
            .expect("grouping combo")
            .click();
        h.run();
        h.get_all_by_label(option)
            .find(|n| n.accesskit_node().role() != Role::Label)
            .expect("grouping option")
            .click();
        h.run();
    };
    pick(&mut h, "Command buffer");
    assert_eq!(h.state().counters.groups.len(), synth::RP_CBS.len());
    assert!(h.query_by_label("cb 0xc0 · render pass 0").is_none());
    pick(&mut h, "Render pass");
    let st = h.state();
    let rows = synth::RP_CBS.len() * synth::RP_PER_CB as usize;
    assert_eq!(st.counters.groups.len(), rows);
    // One table row per render pass, each with the right captured and per-GPU sums.
    let counter = synth::RP_COUNTERS[0].0;
    assert_eq!(st.counters.selected.as_deref(), Some(counter));
    for (ci, cb) in synth::RP_CBS.iter().enumerate() {
        for rp in 0..synth::RP_PER_CB {
            let label = format!("cb {cb:#x} · render pass {rp}");
            assert_eq!(
                h.query_all_by_label(&label).count(),
                1,
                "one row for {label}"
            );
            let sum = |scale: f64| -> f64 {
                (0..4)
                    .map(|f| synth::render_pass_value(0, ci, rp, f, scale))
                    .sum()
            };
            for scale in [1.0, 2.0, 0.5] {
                let text = format_counter(sum(scale));
                assert!(
                    h.query_all_by_label(&text).count() >= 1,
                    "{label}: value {text} (scale {scale}) on screen"
                );
            }
        }
    }
    // Replays differ from the capture by +100 % and -50 %.
    assert_eq!(h.query_all_by_label("+100.0").count(), rows);
    assert_eq!(h.query_all_by_label("-50.0").count(), rows);
}

#[test]
fn compare_tab_and_counters_colour_changes_by_direction_of_goodness() {
    use format::record::*;
    use format::runs::{By, Run};
    use viewer::compare::{row_change, CompareState, Tone};
    use viewer::Tab;
    let sample = |name: &str, unit: u32, rp: u32, value: f64| {
        Record::CounterValue(CounterValue {
            counter: PerfCounterDesc {
                uuid: [unit as u8; 16],
                name: name.to_owned(),
                category: "Render pass".to_owned(),
                description: String::new(),
                unit,
                storage: 5,
                scope: 1,
            },
            pass: 0,
            frame: 0,
            command_buffer: 0xc0,
            render_pass: Some(rp),
            value,
            captured: None,
        })
    };
    let file = |dev: &str, rp0: f64, rp1: f64, frags: f64| {
        let (h, mut recs) = synth::render_pass_results(0, dev, 1.0);
        recs.extend([
            sample("Render pass time", 2, 0, rp0),
            sample("Render pass time", 2, 1, rp1),
            sample("Fragments shaded", 0, 0, frags),
        ]);
        (h, recs)
    };
    // The second GPU: render pass 0 15 % faster, render pass 1 32 % slower, 50 % more fragments.
    let (ha, a) = file("gpu-a", 1000.0, 1000.0, 100.0);
    let (hb, b) = file("gpu-b", 850.0, 1320.0, 150.0);
    let runs = vec![
        Run::from_records("a.qres", &ha, a.clone()).unwrap(),
        Run::from_records("b.qres", &hb, b.clone()).unwrap(),
    ];
    let ds = Dataset::from_records(vec![
        (PathBuf::from("a.qres"), ha, a),
        (PathBuf::from("b.qres"), hb, b),
    ]);
    let mut app = ViewerApp::with_dataset(ds);
    app.compare = CompareState::with_runs(runs);
    app.compare.by = By::RenderPass;
    app.tab = Tab::Compare;
    let h = harness(app);
    for text in ["-15.0 % faster", "+32.0 % slower", "+50.0 % more"] {
        assert_eq!(h.query_all_by_label(text).count(), 1, "{text} on screen");
    }
    // Sorted by largest change, coloured by whether the change is better or worse.
    let st = &h.state().compare;
    let changes: Vec<(String, Tone)> = st
        .rows
        .iter()
        .map(|r| row_change(r, 1, st.threshold_pct).unwrap())
        .collect();
    assert_eq!(
        changes,
        [
            ("+50.0 % more".to_owned(), Tone::Changed),
            ("+32.0 % slower".to_owned(), Tone::Worse),
            ("-15.0 % faster".to_owned(), Tone::Better),
        ]
    );
    let text = egui::Color32::GRAY;
    let (green, red) = (Tone::Better.colour(text), Tone::Worse.colour(text));
    assert!(
        green.g() > green.r() && red.r() > red.g(),
        "{green:?} {red:?}"
    );
    assert_eq!(Tone::Unchanged.colour(text), text);
    // Under a 40 % threshold nothing is highlighted.
    assert_eq!(row_change(&st.rows[1], 1, 40.0).unwrap().1, Tone::Unchanged);

    // The counters tab says the same, against the first results file.
    let mut h = h;
    h.get_by_label("Counters").click();
    h.run();
    let st = h.state();
    assert_eq!(st.counters.selected.as_deref(), Some("Fragments shaded"));
    h.get_all_by_label("Counter")
        .find(|n| n.accesskit_node().role() == Role::ComboBox)
        .expect("counter combo")
        .click();
    h.run();
    h.get_all_by_label("Render pass time")
        .find(|n| n.accesskit_node().role() != Role::Label)
        .expect("counter option")
        .click();
    h.run();
    assert_eq!(
        h.state().counters.selected.as_deref(),
        Some("Render pass time")
    );
    for text in ["-15.0", "faster", "+32.0", "slower"] {
        assert_eq!(h.query_all_by_label(text).count(), 1, "{text} on screen");
    }
}
