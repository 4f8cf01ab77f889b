//! The Compare tab: the results files matched as `quarry compare` matches them
//! ([`format::runs`]), the first as baseline, rows sorted by largest change, each change with
//! its direction (faster / slower / more / fewer / higher / lower) and coloured by whether it is
//! better or worse. The counters tab's Δ column uses the same words, colours and threshold.

use egui::{Color32, RichText};
use egui_extras::{Column, TableBuilder};
use format::runs::{self, By, Item, Matching, Measure, Metric, Row, Run};

use crate::data::Dataset;
use crate::model;
use crate::plots::format_counter;
use crate::table::named;

/// Changes over this many percent are highlighted until the user sets another threshold.
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// How a change reads against the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Within the threshold (or no change).
    Unchanged,
    /// Over the threshold and better: less GPU time.
    Better,
    /// Over the threshold and worse (more GPU time), or a deterministic result that differs.
    Worse,
    /// Over the threshold, neither better nor worse (a count or a level).
    Changed,
}

impl Tone {
    /// The colour of a change; `text` is the theme's text colour.
    pub fn colour(self, text: Color32) -> Color32 {
        match self {
            Tone::Unchanged => text,
            Tone::Better => Color32::from_rgb(110, 200, 120),
            Tone::Worse => Color32::from_rgb(255, 130, 130),
            Tone::Changed => Color32::from_rgb(230, 180, 80),
        }
    }
}

/// The tone of a change of `pct` percent with sign `delta` in a value of `measure`.
pub fn tone(measure: Measure, delta: f64, pct: f64, threshold_pct: f64) -> Tone {
    if !runs::over_threshold(pct, threshold_pct) {
        return Tone::Unchanged;
    }
    match measure.better(delta) {
        Some(true) => Tone::Better,
        Some(false) => Tone::Worse,
        None => Tone::Changed,
    }
}

/// `+15.3 % slower`; a change from 0 has no percentage.
pub fn change_text(pct: f64, direction: &str) -> String {
    if pct.is_finite() {
        format!("{pct:+.1} % {direction}")
    } else {
        format!("from 0: {direction}")
    }
}

/// Run `i` of `row` against the baseline: text and tone (`None` where either lacks a value).
pub fn row_change(row: &Row, i: usize, threshold_pct: f64) -> Option<(String, Tone)> {
    let pct = row.change_pct.get(i).copied().flatten()?;
    let dir = row.direction(i)?;
    let delta = row.values[i]? - row.values[0]?;
    let t = if row.verdicts[i].fails() {
        Tone::Worse
    } else {
        tone(row.measure, delta, pct, threshold_pct)
    };
    Some((change_text(pct, dir), t))
}

/// The Compare tab's state: the runs (read from the results files when the tab first shows)
/// and the rows of the current grouping.
pub struct CompareState {
    pub by: By,
    pub threshold_pct: f64,
    /// Also list rows that did not change.
    pub all: bool,
    runs: Option<Result<Vec<Run>, String>>,
    matching: Option<Matching>,
    /// Rows for `rows_by`, sorted failing first, then by largest change.
    pub rows: Vec<Row>,
    rows_by: Option<By>,
}

impl Default for CompareState {
    fn default() -> Self {
        CompareState {
            by: By::Counter,
            threshold_pct: DEFAULT_THRESHOLD_PCT,
            all: false,
            runs: None,
            matching: None,
            rows: Vec::new(),
            rows_by: None,
        }
    }
}

const BY: [(By, &str); 5] = [
    (By::Query, "query"),
    (By::Counter, "counter"),
    (By::RenderPass, "render pass"),
    (By::CommandBuffer, "command buffer"),
    (By::Frame, "frame"),
];

/// Reads the dataset's results files as runs of one trace.
fn read_runs(ds: &Dataset) -> Result<Vec<Run>, String> {
    if ds.results.len() < 2 {
        return Err("Open two or more results files of one trace to compare them (the first is the baseline), or run `quarry compare`.".to_owned());
    }
    let runs = ds
        .results
        .iter()
        .map(|f| {
            let mut r = Run::read(&f.path).map_err(|e| e.to_string())?;
            r.label = f.label.clone();
            Ok(r)
        })
        .collect::<Result<Vec<Run>, String>>()?;
    check(&runs)?;
    Ok(runs)
}

fn check(runs: &[Run]) -> Result<(), String> {
    for r in runs.iter().skip(1) {
        runs::same_trace(&runs[0], r).map_err(|why| {
            format!(
                "{} and {} are results of different traces: {why}",
                runs[0].label, r.label
            )
        })?;
    }
    Ok(())
}

impl CompareState {
    /// A state over runs already read (tests; the viewer reads them from the results files).
    pub fn with_runs(runs: Vec<Run>) -> CompareState {
        CompareState {
            runs: Some(check(&runs).map(|()| runs)),
            ..CompareState::default()
        }
    }

    pub fn runs(&self) -> Option<&[Run]> {
        self.runs.as_ref()?.as_ref().ok().map(Vec::as_slice)
    }

    /// Reads the runs (once) and regroups the rows when the grouping changed.
    pub fn refresh(&mut self, ds: &Dataset) {
        let runs = self.runs.get_or_insert_with(|| read_runs(ds));
        let Ok(runs) = runs else { return };
        let matching = self
            .matching
            .get_or_insert_with(|| runs::match_runs(runs, &runs::classify_runs));
        if self.rows_by != Some(self.by) {
            self.rows = runs::rows(matching, self.by);
            self.rows_by = Some(self.by);
        }
    }
}

/// Whether a row changed at all, failed, or has values only some runs hold.
fn changed(row: &Row) -> bool {
    let present = row.values.iter().filter(|v| v.is_some()).count();
    row.fails() || row.largest_change() > 0.0 || (present > 0 && present < row.values.len())
}

/// What a row measures.
pub fn what(ds: &Dataset, row: &Row) -> String {
    let pool = |h: u64| match ds.names.get(h) {
        Some(n) => n.to_owned(),
        None => format!("pool {}", model::handle_string(h)),
    };
    match &row.key.metric {
        Metric::Counter { name, .. } => name.clone(),
        Metric::Interval { pool: p } => format!("{} timestamp interval", pool(*p)),
        Metric::Query {
            pool: p,
            query_type,
            slot,
        } => {
            let ty = model::query_type_name(*query_type);
            let slot = match slot {
                Some(b) if *query_type == model::QUERY_TYPE_PIPELINE_STATISTICS => {
                    format!(" {}", model::pipeline_statistic_name(*b))
                }
                Some(s) => format!(" value {s}"),
                None => String::new(),
            };
            format!("{} {ty}{slot}", pool(*p))
        }
    }
}

/// Where a row's values were measured.
pub fn place(ds: &Dataset, row: &Row) -> String {
    let k = &row.key;
    let mut parts = Vec::new();
    match k.item {
        Some(Item::Query(q)) => parts.push(format!("#{} seq {}", q.query, q.seq)),
        Some(Item::Interval { key, from }) => {
            parts.push(format!("#{from}→#{} seq {}", key.query, key.seq))
        }
        Some(Item::Counter) | None => {}
    }
    if let Some(f) = k.frame {
        parts.push(format!("frame {f}"));
    }
    if let Some(cb) = k.command_buffer {
        parts.push(format!("cb {}", named(ds, cb)));
    }
    match k.render_pass {
        Some(Some(rp)) => {
            let title = k.command_buffer.and_then(|cb| {
                ds.counters
                    .iter()
                    .find(|c| c.command_buffer == cb && c.render_pass == Some(rp))
                    .and_then(|c| c.render_pass_title())
            });
            parts.push(match title {
                Some(t) => format!("render pass {rp}: {t}"),
                None => format!("render pass {rp}"),
            });
        }
        Some(None) if matches!(k.metric, Metric::Counter { .. }) => {
            parts.push("whole command buffer".to_owned())
        }
        _ => {}
    }
    parts.join(" · ")
}

fn value_text(row: &Row, v: f64) -> String {
    match row.measure {
        Measure::Time => model::format_ns(v),
        Measure::Count | Measure::Level => format_counter(v),
    }
}

pub fn compare_ui(ui: &mut egui::Ui, ds: &Dataset, st: &mut CompareState) {
    ui.horizontal_wrapped(|ui| {
        let l = ui.label("Group by");
        let by_name = |b: By| BY.iter().find(|x| x.0 == b).map_or("?", |x| x.1);
        egui::ComboBox::from_id_salt("compare_by")
            .selected_text(by_name(st.by))
            .show_ui(ui, |ui| {
                for (b, name) in BY {
                    ui.selectable_value(&mut st.by, b, name);
                }
            })
            .response
            .labelled_by(l.id);
        let l = ui.label("Threshold %");
        ui.add(
            egui::DragValue::new(&mut st.threshold_pct)
                .range(0.0..=1000.0)
                .speed(0.5),
        )
        .labelled_by(l.id)
        .on_hover_text("changes over this are coloured: green better, red worse, amber neither");
        ui.checkbox(&mut st.all, "Unchanged rows too");
    });
    st.refresh(ds);
    let runs = match &st.runs {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            ui.weak(e.as_str());
            return;
        }
        None => return,
    };
    let shown: Vec<&Row> = st.rows.iter().filter(|r| st.all || changed(r)).collect();
    let over = |i: usize| {
        st.rows
            .iter()
            .filter(|r| r.change_pct[i].is_some_and(|p| runs::over_threshold(p, st.threshold_pct)))
            .count()
    };
    ui.label(format!(
        "Baseline {}. {} rows, {} changed.",
        runs[0].label,
        st.rows.len(),
        st.rows.iter().filter(|r| changed(r)).count()
    ));
    if let Some(m) = &st.matching {
        for (i, r) in runs.iter().enumerate().skip(1) {
            let differ: usize = m.query_verdicts[i]
                .iter()
                .filter(|(v, _)| v.fails())
                .map(|(_, n)| n)
                .sum();
            let text = format!(
                "{}: {} rows over {} %, {differ} deterministic result{} differ",
                r.label,
                over(i),
                st.threshold_pct,
                if differ == 1 { "" } else { "s" },
            );
            let col = if differ > 0 {
                Tone::Worse.colour(ui.visuals().text_color())
            } else {
                ui.visuals().text_color()
            };
            ui.label(RichText::new(text).color(col));
        }
    }
    let mut tb = TableBuilder::new(ui)
        .id_salt("compare_table")
        .striped(true)
        .auto_shrink(false)
        .column(Column::initial(220.0).resizable(true).clip(true))
        .column(Column::initial(260.0).resizable(true).clip(true))
        .column(Column::initial(110.0).resizable(true));
    for _ in 1..runs.len() {
        tb = tb
            .column(Column::initial(110.0).resizable(true))
            .column(Column::initial(140.0).resizable(true));
    }
    tb.column(Column::remainder())
        .header(22.0, |mut h| {
            h.col(|ui| {
                ui.strong("What");
            });
            h.col(|ui| {
                ui.strong("Where");
            });
            for (i, r) in runs.iter().enumerate() {
                h.col(|ui| {
                    ui.strong(&r.label).on_hover_text(
                        r.device
                            .as_ref()
                            .map_or("device unknown".to_owned(), |d| d.name.clone()),
                    );
                });
                if i > 0 {
                    h.col(|ui| {
                        ui.strong("Change");
                    });
                }
            }
            h.col(|ui| {
                ui.strong("Result");
            });
        })
        .body(|body| {
            body.rows(20.0, shown.len(), |mut tr| {
                let row = shown[tr.index()];
                tr.col(|ui| {
                    ui.label(what(ds, row));
                });
                tr.col(|ui| {
                    ui.label(place(ds, row));
                });
                for (i, v) in row.values.iter().enumerate() {
                    tr.col(|ui| {
                        ui.monospace(v.map_or("-".to_owned(), |v| value_text(row, v)));
                    });
                    if i > 0 {
                        tr.col(|ui| {
                            if let Some((text, t)) = row_change(row, i, st.threshold_pct) {
                                ui.label(
                                    RichText::new(text)
                                        .color(t.colour(ui.visuals().text_color()))
                                        .monospace(),
                                );
                            }
                        });
                    }
                }
                tr.col(|ui| {
                    let worst = row.verdicts.iter().skip(1).max().copied();
                    ui.label(worst.map_or("", |v| v.word()));
                });
            });
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;

    #[test]
    fn runs_are_read_from_the_results_files_and_must_be_of_one_trace() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, dev: &str, scale: f64, app: &str| {
            let (mut h, recs) = synth::render_pass_results(2, dev, scale);
            h.application = app.to_owned();
            let p = dir.path().join(name);
            let w = format::TraceWriter::create(&p, h).unwrap();
            for r in &recs {
                w.write(r).unwrap();
            }
            w.finish().unwrap();
            p
        };
        let a = write("a.qres", "gpu-a", 1.0, "app");
        let b = write("b.qres", "gpu-b", 0.5, "app");
        let ds = crate::load::load_paths(&[a.clone(), b]);
        let mut st = CompareState::default();
        st.refresh(&ds);
        let runs = st.runs().expect("two runs of one trace");
        assert_eq!(runs[1].label, "b.qres");
        // By counter: one row per counter, each 50 % lower (times faster, counts fewer).
        assert_eq!(st.rows.len(), synth::RP_COUNTERS.len());
        assert!(st.rows.iter().all(|r| r.change_pct[1] == Some(-50.0)));
        st.by = By::RenderPass;
        st.refresh(&ds);
        assert_eq!(
            st.rows.len(),
            synth::RP_COUNTERS.len() * synth::RP_CBS.len() * synth::RP_PER_CB as usize
        );
        // Another application's results are refused, naming both files.
        let c = write("c.qres", "gpu-c", 1.0, "other app");
        let ds = crate::load::load_paths(&[a.clone(), c]);
        let mut st = CompareState::default();
        st.refresh(&ds);
        assert!(st.runs().is_none());
        let Some(Err(e)) = &st.runs else { panic!() };
        assert!(
            e.contains("a.qres and c.qres are results of different traces"),
            "{e}"
        );
        let mut st = CompareState::default();
        st.refresh(&crate::load::load_paths(&[a]));
        assert!(st.runs().is_none());
    }
}
