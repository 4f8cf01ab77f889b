//! The query table: columns, cell text (shared with CSV/JSON export), filtering, sorting and the
//! virtualized egui table.

use std::collections::HashMap;

use egui::{Color32, RichText};
use egui_extras::{Column, TableBuilder};

use crate::data::{Dataset, ValueColumn};
use crate::model;
use format::query::{NotCompared, Outcome};

/// One table column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Col {
    Frame,
    Queue,
    CommandBuffer,
    /// Debug-utils label path (only when the trace has labels).
    Label,
    Pool,
    Index,
    Type,
    Flags,
    Value(ValueColumn),
    Available,
    Replayed(usize),
    Diff(usize),
}

/// The columns a dataset shows, in order.
pub fn columns(ds: &Dataset) -> Vec<Col> {
    let mut cols = vec![
        Col::Frame,
        Col::Queue,
        Col::CommandBuffer,
        Col::Pool,
        Col::Index,
        Col::Type,
        Col::Flags,
    ];
    if ds.rows.iter().any(|r| r.label.is_some()) {
        cols.insert(3, Col::Label);
    }
    cols.extend(ds.value_columns.iter().copied().map(Col::Value));
    cols.push(Col::Available);
    for f in 0..ds.results.len() {
        cols.push(Col::Replayed(f));
        cols.push(Col::Diff(f));
    }
    cols
}

pub fn title(ds: &Dataset, col: Col) -> String {
    match col {
        Col::Frame => "Frame".into(),
        Col::Queue => "Queue".into(),
        Col::CommandBuffer => "Cmd buffer".into(),
        Col::Label => "Label".into(),
        Col::Pool => "Pool".into(),
        Col::Index => "Index".into(),
        Col::Type => "Type".into(),
        Col::Flags => "Flags".into(),
        Col::Value(v) => v.title(),
        Col::Available => "Avail".into(),
        Col::Replayed(f) => format!("Replayed: {}", ds.results[f].label),
        Col::Diff(f) => format!("Δ {}", ds.results[f].label),
    }
}

fn values_text(values: &[u64], available: bool) -> String {
    let mut s = values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if !available {
        s.push_str(" (not ready)");
    }
    s
}

/// Text of the difference between a replay and the capture; a query of a multiview begin says how
/// it was compared.
pub fn diff_text(ds: &Dataset, row: usize, f: usize) -> String {
    let Some(c) = ds.classified(row, f) else {
        return String::new();
    };
    let text = outcome_text(ds, row, f, c.outcome);
    match (c.multiview, c.outcome) {
        (_, Outcome::NotCompared(NotCompared::MultiviewInFirst)) | (None, _) => text,
        (Some(m), _) => format!("{text} ({})", m.note()),
    }
}

fn outcome_text(ds: &Dataset, row: usize, f: usize, outcome: Outcome) -> String {
    let r = &ds.rows[row];
    let rep = ds.replayed[f][row].as_ref();
    match outcome {
        Outcome::Clock => "(clock)".into(),
        Outcome::Match => "=".into(),
        Outcome::NotCompared(NotCompared::MultiviewInFirst) => {
            NotCompared::MultiviewInFirst.reason().into()
        }
        Outcome::NotCompared(_) => "not compared".into(),
        Outcome::Unavailable => "availability".into(),
        Outcome::Mismatch | Outcome::Variation => {
            let (c, rep) = (
                r.captured.as_ref().expect("compared"),
                rep.expect("compared"),
            );
            let diffs: Vec<i128> = c
                .values
                .iter()
                .zip(&rep.values.values)
                .map(|(a, b)| i128::from(*b) - i128::from(*a))
                .collect();
            if c.values.len() != rep.values.values.len() {
                return format!("{} vs {} values", c.values.len(), rep.values.values.len());
            }
            if diffs.len() == 1 {
                format!("{:+}", diffs[0])
            } else {
                let n = diffs.iter().filter(|d| **d != 0).count();
                let max = diffs.iter().copied().max_by_key(|d| d.abs()).unwrap_or(0);
                format!("{n}/{} differ, max {max:+}", diffs.len())
            }
        }
    }
}

/// A handle with its debug-utils name: `name (0x…)`, `0x…`, or `-` for none.
pub fn named(ds: &Dataset, h: u64) -> String {
    if h == 0 {
        model::handle_string(h)
    } else {
        ds.names.label(h)
    }
}

/// Text of one cell, as shown and exported.
pub fn cell_text(ds: &Dataset, row: usize, col: Col) -> String {
    let r = &ds.rows[row];
    let pool = ds.pool_of(r);
    match col {
        Col::Frame => r.frame.to_string(),
        Col::Queue => named(ds, r.queue),
        Col::CommandBuffer => named(ds, r.command_buffer),
        Col::Label => r.label.as_deref().unwrap_or_default().to_owned(),
        Col::Pool => pool.label(),
        Col::Index => r.query.to_string(),
        Col::Type => model::query_type_name(pool.query_type),
        Col::Flags => model::result_flags_string(r.flags),
        Col::Value(v) => match (v.slot(pool), r.captured.as_ref()) {
            (Some(s), Some(c)) => c.values.get(s).map(u64::to_string).unwrap_or_default(),
            _ => String::new(),
        },
        Col::Available => match &r.captured {
            Some(c) if c.available => "yes".into(),
            Some(_) => "no".into(),
            None => String::new(),
        },
        Col::Replayed(f) => ds.replayed[f][row]
            .as_ref()
            .map(|v| values_text(&v.values.values, v.values.available))
            .unwrap_or_default(),
        Col::Diff(f) => diff_text(ds, row, f),
    }
}

/// Filter settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub query_type: Option<i32>,
    pub pool: Option<u32>,
    pub frame_min: u64,
    /// `u64::MAX` = no upper bound.
    pub frame_max: u64,
    pub mismatches_only: bool,
    pub search: String,
}

impl Filter {
    pub fn all() -> Filter {
        Filter {
            frame_max: u64::MAX,
            ..Filter::default()
        }
    }
}

/// Table state: filter, sort, the visible row order and the selection.
#[derive(Debug, Clone)]
pub struct TableState {
    pub filter: Filter,
    pub sort: Option<(Col, bool)>,
    /// Row indices in display order.
    pub view: Vec<u32>,
    applied: Option<(Filter, Option<(Col, bool)>)>,
    /// Set when the selection changed elsewhere, so the table scrolls to it.
    pub scroll_to_selection: bool,
}

impl Default for TableState {
    fn default() -> Self {
        TableState {
            filter: Filter::all(),
            sort: None,
            view: Vec::new(),
            applied: None,
            scroll_to_selection: false,
        }
    }
}

/// Sort key of a cell: numbers compare as numbers, names by their rank.
fn sort_key(
    ds: &Dataset,
    row: usize,
    col: Col,
    pool_rank: &[u32],
    label_rank: &HashMap<&str, u32>,
) -> (i128, u32) {
    let r = &ds.rows[row];
    let pool = ds.pool_of(r);
    let none = (i128::MIN, 0);
    match col {
        Col::Frame => (r.frame.into(), 0),
        Col::Queue => (r.queue.into(), 0),
        Col::CommandBuffer => (r.command_buffer.into(), 0),
        Col::Label => r
            .label
            .as_deref()
            .and_then(|l| label_rank.get(l))
            .map_or(none, |&k| (k.into(), 0)),
        Col::Pool => (pool_rank[r.pool as usize].into(), r.query),
        Col::Index => (r.query.into(), 0),
        Col::Type => (pool.query_type.into(), 0),
        Col::Flags => (r.flags.into(), 0),
        Col::Value(v) => match (v.slot(pool), &r.captured) {
            (Some(s), Some(c)) => c.values.get(s).map(|x| ((*x).into(), 0)).unwrap_or(none),
            _ => none,
        },
        Col::Available => (
            r.captured
                .as_ref()
                .map(|c| i128::from(c.available))
                .unwrap_or(-1),
            0,
        ),
        Col::Replayed(f) => ds.replayed[f][row]
            .as_ref()
            .and_then(|v| v.values.values.first())
            .map(|x| ((*x).into(), 0))
            .unwrap_or(none),
        Col::Diff(f) => {
            let rep = ds.replayed[f][row].as_ref();
            let differs = |o: Outcome| match o {
                Outcome::Mismatch | Outcome::Variation | Outcome::Unavailable => Some(true),
                Outcome::Match | Outcome::Clock | Outcome::NotCompared(_) => Some(false),
            };
            match (ds.outcome(row, f).and_then(differs), &r.captured, rep) {
                (Some(true), Some(c), Some(rep)) => {
                    let d = c
                        .values
                        .iter()
                        .zip(&rep.values.values)
                        .map(|(a, b)| i128::from(*b) - i128::from(*a))
                        .max_by_key(|d| d.abs())
                        .unwrap_or(0);
                    // Mismatches sort after matches even when the numeric difference is 0
                    // (availability).
                    (d.abs(), 1)
                }
                (Some(false), _, _) => (0, 0),
                _ => none,
            }
        }
    }
}

impl TableState {
    /// Recomputes `view` when the filter or sort changed (or `force`).
    pub fn refresh(&mut self, ds: &Dataset, force: bool) {
        let key = (self.filter.clone(), self.sort);
        if !force && self.applied.as_ref() == Some(&key) {
            return;
        }
        self.applied = Some(key);
        let f = &self.filter;
        let needle = f.search.trim().to_lowercase();
        let number: Option<u64> = needle
            .strip_prefix("0x")
            .map_or_else(|| needle.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
        // Text matches per pool once, so a search over a million rows stays cheap.
        let pool_text: Vec<bool> = ds
            .pools
            .iter()
            .map(|p| {
                !needle.is_empty()
                    && (p.label().to_lowercase().contains(&needle)
                        || model::query_type_name(p.query_type)
                            .to_lowercase()
                            .contains(&needle))
            })
            .collect();
        let matches = |i: usize| -> bool {
            let r = &ds.rows[i];
            if f.mismatches_only && !ds.mismatch[i] {
                return false;
            }
            if r.frame < f.frame_min || r.frame > f.frame_max {
                return false;
            }
            if f.pool.is_some_and(|p| p != r.pool) {
                return false;
            }
            if f.query_type
                .is_some_and(|t| t != ds.pools[r.pool as usize].query_type)
            {
                return false;
            }
            if needle.is_empty() || pool_text[r.pool as usize] {
                return true;
            }
            // Labels and the names of queues and command buffers.
            let text = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(&needle));
            if text(r.label.as_deref())
                || text(ds.names.get(r.command_buffer))
                || text(ds.names.get(r.queue))
            {
                return true;
            }
            match number {
                Some(n) => {
                    r.frame == n
                        || u64::from(r.query) == n
                        || r.command_buffer == n
                        || r.queue == n
                        || r.captured.as_ref().is_some_and(|c| c.values.contains(&n))
                }
                None => false,
            }
        };
        let mut view: Vec<u32> = (0..ds.rows.len())
            .filter(|&i| matches(i))
            .map(|i| i as u32)
            .collect();
        if let Some((col, asc)) = self.sort {
            let mut rank: Vec<(String, usize)> =
                ds.pools.iter().map(|p| p.label()).zip(0..).collect();
            rank.sort();
            let mut pool_rank = vec![0u32; ds.pools.len()];
            for (r, (_, i)) in rank.iter().enumerate() {
                pool_rank[*i] = r as u32;
            }
            let mut labels: Vec<&str> = if col == Col::Label {
                ds.rows.iter().filter_map(|r| r.label.as_deref()).collect()
            } else {
                Vec::new()
            };
            labels.sort_unstable();
            labels.dedup();
            let label_rank: HashMap<&str, u32> = labels.into_iter().zip(0..).collect();
            // Precompute keys: a million comparisons through `sort_key` would redo the lookups.
            let mut keyed: Vec<((i128, u32), u32)> = view
                .iter()
                .map(|&i| (sort_key(ds, i as usize, col, &pool_rank, &label_rank), i))
                .collect();
            if asc {
                keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
            } else {
                keyed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            }
            view = keyed.into_iter().map(|(_, i)| i).collect();
        }
        self.view = view;
    }

    /// Clicking a header: sort ascending, then descending, then back to file order.
    pub fn toggle_sort(&mut self, col: Col) {
        self.sort = match self.sort {
            Some((c, true)) if c == col => Some((col, false)),
            Some((c, false)) if c == col => None,
            _ => Some((col, true)),
        };
    }
}

fn col_width(col: Col) -> Column {
    match col {
        Col::Frame | Col::Index | Col::Available => Column::initial(56.0).at_least(40.0),
        Col::Pool => Column::initial(170.0).at_least(60.0),
        Col::Label => Column::initial(210.0).at_least(60.0),
        Col::Type => Column::initial(130.0).at_least(60.0),
        Col::Replayed(_) => Column::initial(150.0).at_least(60.0),
        Col::Diff(_) => Column::initial(110.0).at_least(50.0),
        _ => Column::initial(92.0).at_least(40.0),
    }
    .clip(true)
    .resizable(true)
}

pub const MISMATCH_BG: Color32 = Color32::from_rgb(110, 30, 36);
pub const MISMATCH_FG: Color32 = Color32::from_rgb(255, 150, 150);

/// Draws the table; returns the row the user clicked, if any.
pub fn show(
    ui: &mut egui::Ui,
    ds: &Dataset,
    st: &mut TableState,
    selected: Option<usize>,
) -> Option<usize> {
    let cols = columns(ds);
    // Clicks on cell text select the row instead of starting a text selection.
    ui.style_mut().interaction.selectable_labels = false;
    let mut clicked = None;
    let mut sort_clicked = None;
    let row_h = 20.0;
    let mut builder = TableBuilder::new(ui)
        .id_salt("queries")
        .striped(true)
        .sense(egui::Sense::click())
        .cell_layout(egui::Layout::left_to_right(egui::Align::Center))
        .auto_shrink(false)
        .min_scrolled_height(0.0);
    for c in &cols {
        builder = builder.column(col_width(*c));
    }
    if st.scroll_to_selection {
        st.scroll_to_selection = false;
        if let Some(pos) = selected.and_then(|s| st.view.iter().position(|&v| v as usize == s)) {
            builder = builder.scroll_to_row(pos, Some(egui::Align::Center));
        }
    }
    builder
        .header(24.0, |mut header| {
            for c in &cols {
                header.col(|ui| {
                    if ui
                        .add(egui::Button::new(RichText::new(title(ds, *c)).strong()).frame(false))
                        .clicked()
                    {
                        sort_clicked = Some(*c);
                    }
                    // A painted triangle: the bundled fonts have no arrow glyphs.
                    if let Some((_, asc)) = st.sort.filter(|(s, _)| s == c) {
                        let (r, _) =
                            ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
                        let (cx, h) = (r.center().x, 4.0);
                        let (tip, base) = if asc {
                            (r.center().y - h, r.center().y + h)
                        } else {
                            (r.center().y + h, r.center().y - h)
                        };
                        let pts = vec![
                            egui::pos2(cx, tip),
                            egui::pos2(cx + h, base),
                            egui::pos2(cx - h, base),
                        ];
                        ui.painter().add(egui::Shape::convex_polygon(
                            pts,
                            ui.visuals().strong_text_color(),
                            egui::Stroke::NONE,
                        ));
                    }
                });
            }
        })
        .body(|body| {
            body.rows(row_h, st.view.len(), |mut row| {
                let i = st.view[row.index()] as usize;
                row.set_selected(selected == Some(i));
                for c in &cols {
                    row.col(|ui| {
                        let text = cell_text(ds, i, *c);
                        let bad = match c {
                            Col::Replayed(f) | Col::Diff(f) => {
                                ds.outcome(i, *f).is_some_and(Outcome::fails)
                            }
                            _ => false,
                        };
                        if bad {
                            ui.painter().rect_filled(
                                ui.max_rect().expand2(egui::vec2(4.0, 1.0)),
                                0.0,
                                MISMATCH_BG,
                            );
                            ui.label(RichText::new(text).color(MISMATCH_FG).monospace());
                        } else if matches!(c, Col::Value(_) | Col::Replayed(_) | Col::Diff(_)) {
                            ui.label(RichText::new(text).monospace());
                        } else {
                            ui.label(text);
                        }
                    });
                }
                if row.response().clicked() {
                    clicked = Some(i);
                }
            });
        });
    if let Some(c) = sort_clicked {
        st.toggle_sort(c);
        st.refresh(ds, false);
    }
    clicked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;
    use std::path::PathBuf;

    fn two_files() -> Dataset {
        let (ha, a) = synth::results(400, 3, "gpu-a", 5);
        let (hb, b) = synth::results(400, 3, "gpu-b", 0);
        Dataset::from_records(vec![
            (PathBuf::from("a.qres"), ha, a),
            (PathBuf::from("b.qres"), hb, b),
        ])
    }

    #[test]
    fn rows_match_across_results_files() {
        let ds = two_files();
        assert_eq!(ds.rows.len(), 400);
        assert!(ds.replayed.iter().all(|f| f.iter().all(Option::is_some)));
        let cols = columns(&ds);
        assert!(cols.contains(&Col::Diff(1)));
        // Three statistics bits in the fixture pool, each its own column.
        assert_eq!(
            cols.iter()
                .filter(|c| matches!(c, Col::Value(ValueColumn::Stat(_))))
                .count(),
            3
        );
    }

    #[test]
    fn filter_and_sort() {
        let ds = two_files();
        let mut st = TableState::default();
        st.refresh(&ds, true);
        assert_eq!(st.view.len(), 400);
        st.filter.mismatches_only = true;
        st.refresh(&ds, false);
        assert!(!st.view.is_empty() && st.view.len() < 400);
        assert!(st.view.iter().all(|&i| ds.mismatch[i as usize]));
        assert!(st
            .view
            .iter()
            .all(|&i| cell_text(&ds, i as usize, Col::Diff(0)) == "+1"));

        st.filter = Filter::all();
        st.filter.query_type = Some(model::QUERY_TYPE_TIMESTAMP);
        st.filter.frame_min = 2;
        st.filter.frame_max = 4;
        st.sort = Some((Col::Value(ValueColumn::Single), false));
        st.refresh(&ds, false);
        assert_eq!(st.view.len(), 3 * 8);
        let vals: Vec<u64> = st
            .view
            .iter()
            .map(|&i| {
                cell_text(&ds, i as usize, Col::Value(ValueColumn::Single))
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(vals.windows(2).all(|w| w[0] >= w[1]), "{vals:?}");

        st.filter = Filter::all();
        st.filter.search = "timestamp".into();
        st.sort = None;
        st.refresh(&ds, false);
        assert!(st
            .view
            .iter()
            .all(|&i| ds.pool_of(&ds.rows[i as usize]).query_type == 2));
    }

    #[test]
    fn toggle_sort_cycles() {
        let mut st = TableState::default();
        st.toggle_sort(Col::Frame);
        assert_eq!(st.sort, Some((Col::Frame, true)));
        st.toggle_sort(Col::Frame);
        assert_eq!(st.sort, Some((Col::Frame, false)));
        st.toggle_sort(Col::Frame);
        assert_eq!(st.sort, None);
    }
}
