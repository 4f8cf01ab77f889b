//! Availability timeline: one lane per pool/query on a real ns axis, the capture and each replay
//! in sub-lanes side by side, each relative to its own first event.

use egui::{pos2, vec2, Align2, Color32, FontId, Pos2, Rect, Sense, Stroke};

use crate::data::{Dataset, Row};
use crate::model;

/// One span drawn in a sub-lane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub row: u32,
    /// ns relative to the sub-lane's origin.
    pub start: f64,
    pub end: f64,
}

/// A pool/query lane: spans of the capture (sub-lane 0) and each replay (1..).
#[derive(Debug, Clone, Default)]
pub struct Lane {
    pub pool: u32,
    pub query: u32,
    /// `sub[k]` sorted by start.
    pub sub: Vec<Vec<Span>>,
    /// Longest span per sub-lane, to bound the binary search for spans crossing the view start.
    pub longest: Vec<f64>,
}

/// Lanes with origins; built once per dataset (lazily, when the timeline is first shown).
#[derive(Debug, Clone, Default)]
pub struct Lanes {
    pub lanes: Vec<Lane>,
    /// Absolute host ns of time 0 of the capture and of each replay.
    pub origins: Vec<u64>,
    /// Lane and sub-lane span index of every row (capture sub-lane), for selection.
    pub row_lane: Vec<u32>,
    pub t_max: f64,
}

fn nz(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Start and end (absolute ns) of a row's capture span.
pub fn captured_extent(r: &Row) -> Option<(u64, u64)> {
    let t = &r.times;
    let c_host = r.captured.as_ref().map(|c| c.host_ns).unwrap_or(0);
    let start = [
        t.reset,
        t.begin,
        t.end,
        t.submit,
        t.gpu,
        t.available,
        c_host,
    ]
    .into_iter()
    .filter(|v| *v != 0)
    .min()?;
    let end = [t.end, t.submit, t.gpu, t.available, c_host]
        .into_iter()
        .max()
        .unwrap_or(start)
        .max(start);
    Some((start, end))
}

/// Start and end (absolute ns) of a replay span.
pub fn replayed_extent(ds: &Dataset, f: usize, row: usize) -> Option<(u64, u64)> {
    let r = ds.replayed[f][row].as_ref()?;
    let start = nz(r.submit_ns)
        .or(nz(r.available_ns))
        .or(nz(r.values.host_ns))?;
    let end = r.available_ns.max(r.values.host_ns).max(start);
    Some((start, end))
}

impl Lanes {
    pub fn build(ds: &Dataset) -> Lanes {
        let n_sub = 1 + ds.results.len();
        let mut origins = vec![u64::MAX; n_sub];
        for (i, r) in ds.rows.iter().enumerate() {
            if let Some((s, _)) = captured_extent(r) {
                origins[0] = origins[0].min(s);
            }
            for f in 0..ds.results.len() {
                if let Some((s, _)) = replayed_extent(ds, f, i) {
                    origins[f + 1] = origins[f + 1].min(s);
                }
            }
        }
        for o in &mut origins {
            if *o == u64::MAX {
                *o = 0;
            }
        }
        // Lanes in (pool, query) order: the distinct keys are few, so they are sorted, not
        // the million rows; rows then go to their lane in row order.
        // Query indices below DENSE look up a per-pool table; others (corrupt files) a map.
        const DENSE: u32 = 1 << 16;
        let mut dense: Vec<Vec<u32>> = vec![Vec::new(); ds.pools.len()];
        let mut sparse: std::collections::HashMap<(u32, u32), u32> =
            std::collections::HashMap::new();
        let mut seen_keys: Vec<(u32, u32)> = Vec::new();
        let mut row_key = Vec::with_capacity(ds.rows.len());
        for r in &ds.rows {
            let key = (r.pool, r.query);
            let slot = match dense.get_mut(r.pool as usize) {
                Some(d) if r.query < DENSE => {
                    let q = r.query as usize;
                    if d.len() <= q {
                        d.resize(q + 1, u32::MAX);
                    }
                    &mut d[q]
                }
                _ => sparse.entry(key).or_insert(u32::MAX),
            };
            if *slot == u32::MAX {
                *slot = seen_keys.len() as u32;
                seen_keys.push(key);
            }
            row_key.push(*slot);
        }
        let mut keys: Vec<((u32, u32), u32)> = seen_keys
            .into_iter()
            .enumerate()
            .map(|(n, k)| (k, n as u32))
            .collect();
        keys.sort_unstable();
        // First-seen lane number -> lane index in key order.
        let mut order = vec![0u32; keys.len()];
        let mut lanes: Vec<Lane> = keys
            .iter()
            .enumerate()
            .map(|(li, &((pool, query), seen))| {
                order[seen as usize] = li as u32;
                Lane {
                    pool,
                    query,
                    sub: vec![Vec::new(); n_sub],
                    longest: vec![0.0; n_sub],
                }
            })
            .collect();
        let mut row_lane = vec![0u32; ds.rows.len()];
        let mut t_max = 0.0f64;
        for (i, seen) in row_key.into_iter().enumerate() {
            let i = i as u32;
            let li = order[seen as usize] as usize;
            row_lane[i as usize] = li as u32;
            let lane = &mut lanes[li];
            let mut push = |k: usize, ext: Option<(u64, u64)>| {
                if let Some((s, e)) = ext {
                    let span = Span {
                        row: i,
                        start: s.saturating_sub(origins[k]) as f64,
                        end: e.saturating_sub(origins[k]) as f64,
                    };
                    t_max = t_max.max(span.end);
                    lane.longest[k] = lane.longest[k].max(span.end - span.start);
                    lane.sub[k].push(span);
                }
            };
            push(0, captured_extent(&ds.rows[i as usize]));
            for f in 0..ds.results.len() {
                push(f + 1, replayed_extent(ds, f, i as usize));
            }
        }
        for lane in &mut lanes {
            for s in &mut lane.sub {
                s.sort_by(|a, b| a.start.total_cmp(&b.start));
            }
        }
        Lanes {
            lanes,
            origins,
            row_lane,
            t_max,
        }
    }
}

/// View state of the timeline.
#[derive(Debug, Clone)]
pub struct TimelineState {
    pub lanes: Option<Lanes>,
    /// Visible time window start and width (ns).
    pub t0: f64,
    pub span: f64,
    /// First visible lane (fractional, for smooth scrolling).
    pub lane_scroll: f32,
    /// Center the view on this row next frame.
    pub focus_row: Option<usize>,
    /// Screen rects of spans drawn last frame (tests click on them).
    pub drawn: Vec<(Rect, u32)>,
}

impl Default for TimelineState {
    fn default() -> Self {
        TimelineState {
            lanes: None,
            t0: 0.0,
            span: 0.0,
            lane_scroll: 0.0,
            focus_row: None,
            drawn: Vec::new(),
        }
    }
}

const GUTTER: f32 = 230.0;
const AXIS_H: f32 = 22.0;
const SUB_H: f32 = 13.0;
const LANE_GAP: f32 = 5.0;

const COL_CAPTURE: Color32 = Color32::from_rgb(86, 156, 214);
const COL_REPLAY: Color32 = Color32::from_rgb(78, 201, 176);
const COL_SELECTED: Color32 = Color32::from_rgb(255, 200, 60);
const COL_MISMATCH: Color32 = Color32::from_rgb(220, 80, 80);

/// Event markers: (name, color, shape: 0 tick, 1 dot, 2 diamond).
const MARKERS: [(&str, Color32, u8); 6] = [
    ("reset", Color32::GRAY, 0),
    ("begin", Color32::from_rgb(120, 220, 120), 0),
    ("end", Color32::from_rgb(230, 230, 230), 0),
    ("GPU time", Color32::from_rgb(255, 160, 60), 2),
    ("submit", Color32::from_rgb(200, 140, 255), 1),
    ("available", Color32::from_rgb(255, 235, 120), 1),
];

fn marker(painter: &egui::Painter, c: Pos2, color: Color32, shape: u8) {
    match shape {
        0 => {
            painter.line_segment(
                [c - vec2(0.0, 5.0), c + vec2(0.0, 5.0)],
                Stroke::new(1.5, color),
            );
        }
        1 => {
            painter.circle_filled(c, 2.6, color);
        }
        _ => {
            let pts = vec![
                c + vec2(0.0, -4.0),
                c + vec2(4.0, 0.0),
                c + vec2(0.0, 4.0),
                c + vec2(-4.0, 0.0),
            ];
            painter.add(egui::Shape::convex_polygon(pts, color, Stroke::NONE));
        }
    }
}

/// A one-line legend of span colors and markers.
pub fn legend(ui: &mut egui::Ui) {
    let swatch = |ui: &mut egui::Ui, color: Color32, text: &str| {
        let (r, _) = ui.allocate_exact_size(vec2(14.0, 10.0), Sense::hover());
        ui.painter().rect_filled(r, 2.0, color);
        ui.weak(text);
    };
    swatch(ui, COL_CAPTURE, "capture");
    swatch(ui, COL_REPLAY, "replay");
    swatch(ui, COL_MISMATCH, "mismatch");
    swatch(ui, COL_SELECTED, "selected");
    for (name, color, shape) in MARKERS {
        let (r, _) = ui.allocate_exact_size(vec2(10.0, 12.0), Sense::hover());
        marker(ui.painter(), r.center(), color, shape);
        ui.weak(name);
    }
}

/// A "nice" tick step (1, 2, 5 × 10^k ns) for roughly `target` ns.
fn tick_step(target: f64) -> f64 {
    let p = 10f64.powf(target.max(1.0).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= target)
        .unwrap_or(10.0 * p)
}

impl TimelineState {
    pub fn reset(&mut self) {
        *self = TimelineState::default();
    }

    fn lane_h(n_sub: usize) -> f32 {
        SUB_H * n_sub as f32 + LANE_GAP
    }

    /// Makes sure lanes exist and the view covers something.
    pub fn prepare(&mut self, ds: &Dataset) -> &Lanes {
        if self.lanes.is_none() {
            let lanes = Lanes::build(ds);
            self.t0 = 0.0;
            // Start on the first ~3 frames' worth rather than the whole run: spans stay visible.
            let first_frame = ds.frame_range().0;
            let first_frames = ds
                .rows
                .iter()
                .filter(|r| r.frame <= first_frame + 2)
                .filter_map(captured_extent)
                .map(|(_, e)| e.saturating_sub(lanes.origins[0]) as f64)
                .fold(0.0, f64::max);
            self.span = if first_frames > 0.0 {
                first_frames * 1.05
            } else {
                lanes.t_max.max(1000.0) * 1.05
            };
            self.lanes = Some(lanes);
        }
        self.lanes.as_ref().expect("built above")
    }

    /// Draws the timeline; returns the row the user clicked.
    pub fn show(
        &mut self,
        ui: &mut egui::Ui,
        ds: &Dataset,
        selected: Option<usize>,
    ) -> Option<usize> {
        if ds.rows.is_empty() {
            ui.weak("No queries to show.");
            return None;
        }
        self.prepare(ds);
        let lanes = self.lanes.take().expect("prepared");
        let out = self.draw(ui, ds, &lanes, selected);
        self.lanes = Some(lanes);
        out
    }

    fn draw(
        &mut self,
        ui: &mut egui::Ui,
        ds: &Dataset,
        lanes: &Lanes,
        selected: Option<usize>,
    ) -> Option<usize> {
        let n_sub = 1 + ds.results.len();
        let lane_h = Self::lane_h(n_sub);
        let (rect, resp) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        let plot = Rect::from_min_max(pos2(rect.left() + GUTTER, rect.top() + AXIS_H), rect.max);
        let visible_lanes = (plot.height() / lane_h).max(1.0);
        let max_scroll = (lanes.lanes.len() as f32 - visible_lanes + 1.0).max(0.0);

        if let Some(row) = self.focus_row.take() {
            if let Some(&li) = lanes.row_lane.get(row) {
                let li = li as f32;
                if li < self.lane_scroll || li > self.lane_scroll + visible_lanes - 1.0 {
                    self.lane_scroll = (li - visible_lanes / 2.0).clamp(0.0, max_scroll);
                }
                let lane = &lanes.lanes[li as usize];
                if let Some(s) = lane.sub[0].iter().find(|s| s.row as usize == row) {
                    if s.start < self.t0 || s.end > self.t0 + self.span {
                        self.t0 = (s.start + s.end) / 2.0 - self.span / 2.0;
                    }
                }
            }
        }

        // Input: wheel scrolls lanes, ctrl/pinch zooms around the pointer, drag pans.
        let ns_per_px = self.span / f64::from(plot.width().max(1.0));
        if resp.hovered() {
            let (zoom, scroll, pointer) =
                ui.input(|i| (i.zoom_delta(), i.smooth_scroll_delta, i.pointer.hover_pos()));
            if zoom != 1.0 {
                let px = pointer
                    .map(|p| p.x - plot.left())
                    .unwrap_or(plot.width() / 2.0)
                    .max(0.0);
                let t_at = self.t0 + f64::from(px) * ns_per_px;
                self.span =
                    (self.span / f64::from(zoom)).clamp(100.0, lanes.t_max.max(1000.0) * 4.0);
                self.t0 = t_at - f64::from(px) * self.span / f64::from(plot.width().max(1.0));
            } else {
                self.lane_scroll = (self.lane_scroll - scroll.y / lane_h).clamp(0.0, max_scroll);
                self.t0 -= f64::from(scroll.x) * ns_per_px;
            }
        }
        if resp.dragged() {
            let d = resp.drag_delta();
            self.t0 -= f64::from(d.x) * ns_per_px;
            self.lane_scroll = (self.lane_scroll - d.y / lane_h).clamp(0.0, max_scroll);
        }
        let ns_per_px = self.span / f64::from(plot.width().max(1.0));
        let x_of = |t: f64| plot.left() + ((t - self.t0) / ns_per_px) as f32;

        let painter = ui.painter_at(rect);
        let visuals = ui.visuals().clone();
        painter.rect_filled(rect, 0.0, visuals.extreme_bg_color);
        let text_col = visuals.text_color();
        let weak = visuals.weak_text_color();
        let font = FontId::proportional(11.0);

        // Time axis.
        let step = tick_step(ns_per_px * 110.0);
        let mut t = (self.t0 / step).floor() * step;
        while t < self.t0 + self.span {
            let x = x_of(t);
            if x >= plot.left() {
                painter.line_segment(
                    [pos2(x, rect.top() + AXIS_H - 5.0), pos2(x, rect.bottom())],
                    Stroke::new(1.0, visuals.faint_bg_color),
                );
                painter.text(
                    pos2(x + 3.0, rect.top() + 3.0),
                    Align2::LEFT_TOP,
                    model::format_ns(t),
                    font.clone(),
                    weak,
                );
            }
            t += step;
        }
        painter.line_segment(
            [
                pos2(rect.left(), plot.top()),
                pos2(rect.right(), plot.top()),
            ],
            Stroke::new(1.0, weak),
        );

        // Lanes.
        self.drawn.clear();
        let first = self.lane_scroll.floor() as usize;
        let frac = self.lane_scroll - first as f32;
        let mut hover: Option<(u32, usize)> = None;
        let pointer = ui.input(|i| i.pointer.hover_pos());
        let sub_names: Vec<String> = std::iter::once("capture".to_owned())
            .chain(ds.results.iter().map(|f| shorten(&f.label, 14)))
            .collect();
        for (k, li) in (first..lanes.lanes.len()).enumerate() {
            let top = plot.top() + (k as f32 - frac) * lane_h + 2.0;
            if top > plot.bottom() {
                break;
            }
            let lane = &lanes.lanes[li];
            let pool = &ds.pools[lane.pool as usize];
            if top >= plot.top() - 1.0 {
                let name = pool
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{:#x}", pool.handle));
                painter.text(
                    pos2(rect.left() + 6.0, top + 1.0),
                    Align2::LEFT_TOP,
                    format!("{} #{}", shorten(&name, 18), lane.query),
                    font.clone(),
                    text_col,
                );
                painter.text(
                    pos2(rect.left() + 6.0, top + SUB_H),
                    Align2::LEFT_TOP,
                    model::query_type_name(pool.query_type),
                    FontId::proportional(9.5),
                    weak,
                );
            }
            for (s, spans) in lane.sub.iter().enumerate() {
                let y0 = top + s as f32 * SUB_H;
                if y0 < plot.top() - SUB_H || y0 > plot.bottom() {
                    continue;
                }
                let base = if s == 0 { COL_CAPTURE } else { COL_REPLAY };
                if n_sub > 1 && y0 >= plot.top() - 1.0 {
                    painter.text(
                        pos2(plot.left() - 4.0, y0 + SUB_H / 2.0),
                        Align2::RIGHT_CENTER,
                        &sub_names[s],
                        FontId::proportional(9.0),
                        base.gamma_multiply(0.9),
                    );
                }
                // First span that can reach into the window.
                let from = spans.partition_point(|sp| sp.start < self.t0 - lane.longest[s]);
                let mut last_px = f32::NEG_INFINITY;
                let mut i = from;
                while i < spans.len() {
                    let sp = spans[i];
                    if sp.start > self.t0 + self.span {
                        break;
                    }
                    let x0 = x_of(sp.start).max(plot.left());
                    let x1 = x_of(sp.end).min(plot.right());
                    if x1 < plot.left() {
                        i += 1;
                        continue;
                    }
                    if x1 < last_px + 1.0 && Some(sp.row as usize) != selected {
                        // Many spans per pixel: skip ahead to the next pixel column instead of
                        // drawing thousands of overlapping rects.
                        let t_next = self.t0 + f64::from(last_px + 1.0 - plot.left()) * ns_per_px;
                        let j = spans[i..].partition_point(|q| q.start < t_next) + i;
                        i = j.max(i + 1);
                        continue;
                    }
                    last_px = x1;
                    let r = Rect::from_min_max(
                        pos2(x0, y0 + 1.5),
                        pos2(x1.max(x0 + 2.0), y0 + SUB_H - 1.5),
                    );
                    let is_sel = selected == Some(sp.row as usize);
                    let bad = ds.mismatch.get(sp.row as usize).copied().unwrap_or(false);
                    let fill = if is_sel {
                        COL_SELECTED
                    } else if bad {
                        COL_MISMATCH
                    } else {
                        base
                    };
                    painter.rect_filled(r, 2.0, fill);
                    if s == 0 {
                        self.draw_markers(&painter, ds, lanes, sp.row as usize, y0, &x_of, plot);
                    }
                    self.drawn.push((r, sp.row));
                    if pointer.is_some_and(|p| r.expand(1.0).contains(p)) {
                        hover = Some((sp.row, s));
                    }
                    i += 1;
                }
            }
            painter.line_segment(
                [
                    pos2(rect.left(), top + lane_h - 2.5),
                    pos2(rect.right(), top + lane_h - 2.5),
                ],
                Stroke::new(0.5, visuals.faint_bg_color),
            );
        }
        // Gutter background over spans that scrolled left of the plot.
        painter.line_segment(
            [
                pos2(plot.left(), rect.top()),
                pos2(plot.left(), rect.bottom()),
            ],
            Stroke::new(1.0, weak),
        );

        let mut clicked = None;
        if let Some((row, s)) = hover {
            let tip = tooltip(ds, lanes, row as usize, s);
            resp.clone().on_hover_ui_at_pointer(|ui| {
                ui.label(tip);
            });
            if resp.clicked() {
                clicked = Some(row as usize);
            }
        }
        clicked
    }

    #[allow(clippy::too_many_arguments)]
    fn draw_markers(
        &self,
        painter: &egui::Painter,
        ds: &Dataset,
        lanes: &Lanes,
        row: usize,
        y0: f32,
        x_of: &dyn Fn(f64) -> f32,
        plot: Rect,
    ) {
        let t = ds.rows[row].times;
        let o = lanes.origins[0];
        let mark = |v: u64, (_, color, shape): (&str, Color32, u8)| {
            if v == 0 {
                return;
            }
            let x = x_of(v.saturating_sub(o) as f64);
            if x >= plot.left() && x <= plot.right() {
                marker(painter, Pos2::new(x, y0 + SUB_H / 2.0), color, shape);
            }
        };
        for (v, m) in [t.reset, t.begin, t.end, t.gpu, t.submit, t.available]
            .into_iter()
            .zip(MARKERS)
        {
            mark(v, m);
        }
    }
}

/// `label` cut to `max` characters with an ellipsis.
fn shorten(label: &str, max: usize) -> String {
    if label.chars().count() <= max {
        label.to_owned()
    } else {
        format!("{}…", label.chars().take(max - 1).collect::<String>())
    }
}

fn rel(v: u64, origin: u64) -> String {
    if v == 0 {
        "—".into()
    } else {
        model::format_ns(v.saturating_sub(origin) as f64)
    }
}

fn tooltip(ds: &Dataset, lanes: &Lanes, row: usize, sub: usize) -> String {
    let r = &ds.rows[row];
    let pool = ds.pool_of(r);
    let mut s = format!(
        "{} #{} — {}\nframe {}  queue {}  cmd buffer {}  seq {}\n",
        pool.label(),
        r.query,
        model::query_type_name(pool.query_type),
        r.frame,
        crate::table::named(ds, r.queue),
        crate::table::named(ds, r.command_buffer),
        r.seq
    );
    if let Some(l) = &r.label {
        s += &format!("label {l}\n");
    }
    if sub == 0 {
        let o = lanes.origins[0];
        let t = r.times;
        s += &format!(
            "capture: reset {}  begin {}  end {}\n         submit {}  available {}",
            rel(t.reset, o),
            rel(t.begin, o),
            rel(t.end, o),
            rel(t.submit, o),
            rel(t.available, o)
        );
        if t.gpu != 0 {
            s += &format!("\n         GPU timestamp at {}", rel(t.gpu, o));
        }
        if let Some(c) = &r.captured {
            s += &format!(
                "\nvalues {:?}{}",
                c.values,
                if c.available { "" } else { " (not available)" }
            );
        }
    } else {
        let f = sub - 1;
        let o = lanes.origins[sub];
        if let Some(rep) = &ds.replayed[f][row] {
            s += &format!(
                "replay {}: submit {}  available {}\nvalues {:?}{}",
                ds.results[f].label,
                rel(rep.submit_ns, o),
                rel(rep.available_ns, o),
                rep.values.values,
                if rep.values.available {
                    ""
                } else {
                    " (not available)"
                }
            );
            if let Some(g) = rep.gpu_ns {
                s += &format!("\nGPU time {}", model::format_ns(g));
            }
        }
    }
    if ds.mismatch.get(row).copied().unwrap_or(false) {
        s += "\nMISMATCH between capture and replay";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;
    use std::path::PathBuf;

    #[test]
    fn lanes_cover_every_row_and_are_sorted() {
        let (h, r) = synth::results(300, 9, "gpu", 0);
        let ds = Dataset::from_records(vec![(PathBuf::from("a"), h, r)]);
        let lanes = Lanes::build(&ds);
        let spans: usize = lanes.lanes.iter().map(|l| l.sub[0].len()).sum();
        assert_eq!(spans, 300);
        // One lane per (pool, query), in that order, holding exactly that query's rows.
        assert!(lanes
            .lanes
            .windows(2)
            .all(|w| (w[0].pool, w[0].query) < (w[1].pool, w[1].query)));
        for (i, r) in ds.rows.iter().enumerate() {
            let l = &lanes.lanes[lanes.row_lane[i] as usize];
            assert_eq!((l.pool, l.query), (r.pool, r.query));
        }
        for l in &lanes.lanes {
            assert!(l.sub[1].windows(2).all(|w| w[0].start <= w[1].start));
            for sp in &l.sub[0] {
                assert_eq!(
                    lanes.row_lane[sp.row as usize] as usize,
                    lanes.lanes.iter().position(|x| std::ptr::eq(x, l)).unwrap()
                );
            }
        }
        // Each sub-lane is relative to its own origin: both start at 0.
        let min0 = lanes
            .lanes
            .iter()
            .flat_map(|l| &l.sub[0])
            .map(|s| s.start)
            .fold(f64::MAX, f64::min);
        let min1 = lanes
            .lanes
            .iter()
            .flat_map(|l| &l.sub[1])
            .map(|s| s.start)
            .fold(f64::MAX, f64::min);
        assert_eq!((min0, min1), (0.0, 0.0));
    }

    #[test]
    fn tick_steps_are_nice() {
        assert_eq!(tick_step(3.0), 5.0);
        assert_eq!(tick_step(1100.0), 2000.0);
        assert_eq!(tick_step(10.0), 10.0);
    }
}
