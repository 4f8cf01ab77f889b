//! Timestamps view (GPU time between timestamp pairs) and counters view.

use std::collections::{BTreeMap, HashMap};

use egui::{Color32, RichText};
use egui_extras::{Column, TableBuilder};
use egui_plot::{Bar, BarChart, GridInput, GridMark, Legend, Line, Plot, PlotPoints};

use crate::data::{timestamp_span_ns, Dataset};
use crate::model;
use crate::table::named;

/// GPU durations of timestamp pairs: per frame, per pair, for the capture (source 0) and each
/// replay (1..). Pairs are consecutive timestamp queries of one pool in one frame, by index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimestampPairs {
    /// (frame, pool, first query) of each pair, sorted.
    pub pairs: Vec<(u64, u32, u32)>,
    /// `durations[source][pair]` in ns.
    pub durations: Vec<Vec<Option<f64>>>,
    pub frames: Vec<u64>,
}

impl TimestampPairs {
    pub fn build(ds: &Dataset) -> TimestampPairs {
        let n_src = 1 + ds.results.len();
        // (frame, pool) -> [(query, row)]
        let mut groups: BTreeMap<(u64, u32), Vec<(u32, usize)>> = BTreeMap::new();
        for (i, r) in ds.rows.iter().enumerate() {
            if ds.pools[r.pool as usize].query_type == model::QUERY_TYPE_TIMESTAMP {
                groups
                    .entry((r.frame, r.pool))
                    .or_default()
                    .push((r.query, i));
            }
        }
        let mut out = TimestampPairs {
            durations: vec![Vec::new(); n_src],
            ..Default::default()
        };
        for ((frame, pool), mut qs) in groups {
            qs.sort_unstable();
            qs.dedup_by_key(|q| q.0);
            for pair in qs.chunks_exact(2) {
                let (a, b) = (pair[0].1, pair[1].1);
                out.pairs.push((frame, pool, pair[0].0));
                let (ra, rb) = (&ds.rows[a], &ds.rows[b]);
                // In integer ticks with each side's clock (valid bits, wrap), then ns.
                out.durations[0].push(timestamp_span_ns(
                    (ra.captured.as_ref(), ra.captured_gpu_ns),
                    (rb.captured.as_ref(), rb.captured_gpu_ns),
                    ra.captured_clock.or(rb.captured_clock),
                ));
                for f in 0..ds.results.len() {
                    let (xa, xb) = (ds.replayed[f][a].as_ref(), ds.replayed[f][b].as_ref());
                    out.durations[f + 1].push(timestamp_span_ns(
                        (xa.map(|r| &r.values), xa.and_then(|r| r.gpu_ns)),
                        (xb.map(|r| &r.values), xb.and_then(|r| r.gpu_ns)),
                        xa.and_then(|r| r.clock).or(xb.and_then(|r| r.clock)),
                    ));
                }
            }
            if out.frames.last() != Some(&frame) {
                out.frames.push(frame);
            }
        }
        out
    }

    /// Sum of paired GPU time per frame for one source: (frame, ns).
    pub fn per_frame(&self, source: usize) -> Vec<(u64, f64)> {
        let mut m: BTreeMap<u64, f64> = BTreeMap::new();
        for (p, d) in self.pairs.iter().zip(&self.durations[source]) {
            if let Some(d) = d {
                *m.entry(p.0).or_default() += d;
            }
        }
        m.into_iter().collect()
    }
}

pub fn source_names(ds: &Dataset) -> Vec<String> {
    std::iter::once("capture".to_owned())
        .chain(ds.results.iter().map(|f| format!("replay {}", f.label)))
        .collect()
}

pub const PALETTE: [Color32; 6] = [
    Color32::from_rgb(86, 156, 214),
    Color32::from_rgb(78, 201, 176),
    Color32::from_rgb(220, 160, 80),
    Color32::from_rgb(197, 134, 192),
    Color32::from_rgb(220, 100, 100),
    Color32::from_rgb(180, 180, 90),
];

#[derive(Debug, Clone, Default)]
pub struct TimestampsState {
    pub pairs: Option<TimestampPairs>,
    pub frame: u64,
}

pub fn timestamps_ui(ui: &mut egui::Ui, ds: &Dataset, st: &mut TimestampsState) {
    let pairs = st.pairs.get_or_insert_with(|| TimestampPairs::build(ds));
    if pairs.pairs.is_empty() {
        ui.weak("No timestamp pairs: this file has fewer than two available timestamp queries per pool and frame.");
        return;
    }
    let names = source_names(ds);
    let (lo, hi) = (
        *pairs.frames.first().unwrap_or(&0),
        *pairs.frames.last().unwrap_or(&0),
    );
    st.frame = st.frame.clamp(lo, hi);
    ui.horizontal(|ui| {
        let l = ui.label("Frame");
        ui.add(egui::Slider::new(&mut st.frame, lo..=hi))
            .labelled_by(l.id);
        ui.weak(format!(
            "{} pairs in {} frames",
            pairs.pairs.len(),
            pairs.frames.len()
        ));
    });
    let avail = ui.available_height();
    ui.label(RichText::new(format!("GPU time per timestamp pair, frame {}", st.frame)).strong());
    Plot::new("ts_bars")
        .height(avail * 0.45)
        .legend(Legend::default())
        .y_axis_label("ms")
        .x_axis_label("pair")
        .show(ui, |plot| {
            let n_src = names.len() as f64;
            let width = 0.8 / n_src;
            for (s, name) in names.iter().enumerate() {
                let bars: Vec<Bar> = pairs
                    .pairs
                    .iter()
                    .zip(&pairs.durations[s])
                    .filter(|(p, _)| p.0 == st.frame)
                    .enumerate()
                    .filter_map(|(k, (p, d))| {
                        d.map(|d| {
                            Bar::new(k as f64 + (s as f64 - (n_src - 1.0) / 2.0) * width, d / 1e6)
                                .width(width * 0.95)
                                .name(format!(
                                    "{} #{}-{}",
                                    ds.pools[p.1 as usize].label(),
                                    p.2,
                                    p.2 + 1
                                ))
                        })
                    })
                    .collect();
                plot.bar_chart(BarChart::new(name.clone(), bars).color(PALETTE[s % PALETTE.len()]));
            }
        });
    ui.add_space(6.0);
    ui.label(RichText::new("Paired GPU time per frame").strong());
    Plot::new("ts_frames")
        .legend(Legend::default())
        .y_axis_label("ms")
        .x_axis_label("frame")
        .show(ui, |plot| {
            for (s, name) in names.iter().enumerate() {
                let pts: Vec<[f64; 2]> = pairs
                    .per_frame(s)
                    .into_iter()
                    .map(|(f, ns)| [f as f64, ns / 1e6])
                    .collect();
                plot.line(
                    Line::new(name.clone(), PlotPoints::new(pts)).color(PALETTE[s % PALETTE.len()]),
                );
            }
        });
}

/// `VkPerformanceCounterUnitKHR` names.
pub fn counter_unit(unit: u32) -> &'static str {
    format::query::counter_unit_name(unit)
}

/// How the counters view groups samples of one counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterGrouping {
    /// One row per frame (all command buffers and render passes of it).
    Frame,
    /// One row per command buffer.
    CommandBuffer,
    /// One row per render pass: (command buffer, render pass index); command-buffer-scoped
    /// samples form a "whole command buffer" row.
    RenderPass,
    /// One row per counter pass.
    Pass,
    /// Every sample on its own row.
    Sample,
}

impl CounterGrouping {
    pub const ALL: [CounterGrouping; 5] = [
        CounterGrouping::Frame,
        CounterGrouping::CommandBuffer,
        CounterGrouping::RenderPass,
        CounterGrouping::Pass,
        CounterGrouping::Sample,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CounterGrouping::Frame => "Frame",
            CounterGrouping::CommandBuffer => "Command buffer",
            CounterGrouping::RenderPass => "Render pass",
            CounterGrouping::Pass => "Counter pass",
            CounterGrouping::Sample => "Every sample",
        }
    }
}

/// What one row of the grouped counters table stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupKey {
    Frame(u64),
    CommandBuffer(u64),
    /// Command buffer and render pass index (`None`: scoped to the whole command buffer).
    RenderPass(u64, Option<u32>),
    Pass(u32),
    /// Index into `Dataset::counters`.
    Sample(usize),
}

/// One row of the grouped counters table: the samples of one counter in one group, summed (or
/// averaged for rates, see [`counter_is_rate`]) per source.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterGroup {
    pub key: GroupKey,
    pub label: String,
    pub samples: usize,
    /// Counter passes the samples were collected in.
    pub passes: Vec<u32>,
    pub captured: Option<f64>,
    /// Per results file, indexed like `Dataset::results`.
    pub values: Vec<Option<f64>>,
}

/// Units whose samples are averaged when grouped (percentages, temperatures, power, voltage,
/// current, frequency, throughput); others (counts, ns, bytes, cycles) are summed.
pub fn counter_is_rate(unit: u32) -> bool {
    matches!(unit, 1 | 4 | 5 | 6 | 7 | 8 | 9)
}

#[derive(Default, Clone, Copy)]
struct Acc {
    sum: f64,
    n: u32,
}

impl Acc {
    fn add(&mut self, v: Option<f64>) {
        if let Some(v) = v {
            self.sum += v;
            self.n += 1;
        }
    }
    fn get(self, mean: bool) -> Option<f64> {
        match (self.n, mean) {
            (0, _) => None,
            (n, true) => Some(self.sum / f64::from(n)),
            (_, false) => Some(self.sum),
        }
    }
}

/// Samples of counter `name` grouped by `grouping`, restricted to `frame` when given (ignored
/// when grouping by frame), in key order.
pub fn group_counters(
    ds: &Dataset,
    name: &str,
    grouping: CounterGrouping,
    frame: Option<u64>,
) -> Vec<CounterGroup> {
    let n_files = ds.results.len();
    let mut groups: BTreeMap<GroupKey, (usize, Vec<u32>, Acc, Vec<Acc>)> = BTreeMap::new();
    let mut unit = 0;
    for (i, c) in ds.counters.iter().enumerate() {
        if c.name != name {
            continue;
        }
        if grouping != CounterGrouping::Frame && frame.is_some_and(|f| f != c.frame) {
            continue;
        }
        unit = c.unit;
        let key = match grouping {
            CounterGrouping::Frame => GroupKey::Frame(c.frame),
            CounterGrouping::CommandBuffer => GroupKey::CommandBuffer(c.command_buffer),
            CounterGrouping::RenderPass => GroupKey::RenderPass(c.command_buffer, c.render_pass),
            CounterGrouping::Pass => GroupKey::Pass(c.pass),
            CounterGrouping::Sample => GroupKey::Sample(i),
        };
        let g = groups
            .entry(key)
            .or_insert_with(|| (0, Vec::new(), Acc::default(), vec![Acc::default(); n_files]));
        g.0 += 1;
        if !g.1.contains(&c.pass) {
            g.1.push(c.pass);
        }
        g.2.add(c.captured);
        for (acc, v) in g.3.iter_mut().zip(&c.values) {
            acc.add(*v);
        }
    }
    let mean = counter_is_rate(unit);
    // Render passes by their debug-utils name or label (from the trace), first seen wins.
    let mut render_pass_titles: HashMap<(u64, u32), &str> = HashMap::new();
    for c in ds.counters.iter().filter(|c| c.name == name) {
        if let (Some(rp), Some(t)) = (c.render_pass, c.render_pass_title()) {
            render_pass_titles
                .entry((c.command_buffer, rp))
                .or_insert(t);
        }
    }
    groups
        .into_iter()
        .map(|(key, (samples, mut passes, cap, vals))| {
            passes.sort_unstable();
            let label = match key {
                GroupKey::Frame(f) => format!("frame {f}"),
                GroupKey::CommandBuffer(cb) => format!("cb {}", named(ds, cb)),
                GroupKey::RenderPass(cb, Some(rp)) => match render_pass_titles.get(&(cb, rp)) {
                    Some(t) => format!("cb {} · render pass {rp}: {t}", named(ds, cb)),
                    None => format!("cb {} · render pass {rp}", named(ds, cb)),
                },
                GroupKey::RenderPass(cb, None) => {
                    format!("cb {} · whole command buffer", named(ds, cb))
                }
                GroupKey::Pass(p) => format!("pass {p}"),
                GroupKey::Sample(i) => {
                    let c = &ds.counters[i];
                    let rp = c
                        .render_pass
                        .map(|r| format!(" · rp {r}"))
                        .unwrap_or_default();
                    let title = c
                        .render_pass_title()
                        .map(|t| format!(": {t}"))
                        .unwrap_or_default();
                    format!(
                        "frame {} · cb {}{rp}{title}",
                        c.frame,
                        named(ds, c.command_buffer)
                    )
                }
            };
            CounterGroup {
                key,
                label,
                samples,
                passes,
                captured: cap.get(mean),
                values: vals.into_iter().map(|a| a.get(mean)).collect(),
            }
        })
        .collect()
}

/// Short name of a group under its bar.
fn axis_label(ds: &Dataset, g: &CounterGroup) -> String {
    match g.key {
        GroupKey::Frame(f) => f.to_string(),
        GroupKey::CommandBuffer(cb) => model::handle_string(cb),
        GroupKey::RenderPass(cb, Some(rp)) => format!("{} rp {rp}", model::handle_string(cb)),
        GroupKey::RenderPass(cb, None) => format!("{} (cb)", model::handle_string(cb)),
        GroupKey::Pass(p) => format!("pass {p}"),
        GroupKey::Sample(i) => {
            let c = &ds.counters[i];
            format!("f{} {}", c.frame, model::handle_string(c.command_buffer))
        }
    }
}

/// Groups drawn as bars (the table lists them all).
const MAX_BARS: usize = 2000;

/// Compact number for counter cells: integers without decimals, others with 3.
pub fn format_counter(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Category, description and unit of a counter, for the line under the selector.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterAbout {
    pub category: String,
    pub description: String,
    pub unit: u32,
}

/// What the counters view needs from all samples, gathered once per dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterFacts {
    /// Distinct counter names, sorted; `about` is indexed alike.
    pub names: Vec<String>,
    pub about: Vec<CounterAbout>,
    /// First name (sorted) of a counter with render-pass samples.
    pub first_rp_name: Option<String>,
    /// Lowest and highest frame of any sample.
    pub frames: (u64, u64),
}

impl CounterFacts {
    pub fn of(ds: &Dataset) -> CounterFacts {
        let mut by_name: BTreeMap<&str, (CounterAbout, bool)> = BTreeMap::new();
        let mut frames = (u64::MAX, 0);
        for c in &ds.counters {
            frames = (frames.0.min(c.frame), frames.1.max(c.frame));
            let e = by_name.entry(c.name.as_str()).or_insert_with(|| {
                (
                    CounterAbout {
                        category: c.category.clone(),
                        description: c.description.clone(),
                        unit: c.unit,
                    },
                    false,
                )
            });
            e.1 |= c.render_pass.is_some();
        }
        if frames.0 > frames.1 {
            frames = (0, 0);
        }
        CounterFacts {
            first_rp_name: by_name
                .iter()
                .find(|(_, (_, rp))| *rp)
                .map(|(n, _)| (*n).to_owned()),
            names: by_name.keys().map(|n| (*n).to_owned()).collect(),
            about: by_name.into_values().map(|(a, _)| a).collect(),
            frames,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct CountersState {
    pub facts: Option<CounterFacts>,
    pub selected: Option<String>,
    /// `None` until the view first shows: then by render pass when the files have render-pass
    /// samples, else by frame.
    pub grouping: Option<CounterGrouping>,
    /// Only this frame (grouping other than by frame).
    pub frame: Option<u64>,
    /// The rows on screen, for the current selection.
    pub groups: Vec<CounterGroup>,
    /// List the table in group order instead of by largest change.
    pub group_order: bool,
    /// Δ over this many percent is coloured (`None`: [`crate::compare::DEFAULT_THRESHOLD_PCT`]).
    pub threshold_pct: Option<f64>,
    cache_key: Option<(String, CounterGrouping, Option<u64>)>,
}

impl CountersState {
    fn refresh(&mut self, ds: &Dataset, name: &str, grouping: CounterGrouping) {
        let key = (name.to_owned(), grouping, self.frame);
        if self.cache_key.as_ref() != Some(&key) {
            self.groups = group_counters(ds, name, grouping, self.frame);
            self.cache_key = Some(key);
        }
    }
}

pub fn counters_ui(ui: &mut egui::Ui, ds: &Dataset, st: &mut CountersState) {
    if ds.counters.is_empty() {
        ui.weak("No performance counters in these files (CounterValue records come from `quarry replay --counters`).");
        return;
    }
    // Facts about all samples, computed once per dataset (render-pass scope makes millions).
    let facts = st.facts.get_or_insert_with(|| CounterFacts::of(ds)).clone();
    let names = &facts.names;
    let sel = st
        .selected
        .get_or_insert_with(|| {
            // Start on a counter with render-pass samples when there is one.
            facts
                .first_rp_name
                .clone()
                .unwrap_or_else(|| names[0].clone())
        })
        .clone();
    let grouping = *st.grouping.get_or_insert(if facts.first_rp_name.is_some() {
        CounterGrouping::RenderPass
    } else {
        CounterGrouping::Frame
    });
    let first = facts
        .names
        .iter()
        .position(|n| *n == sel)
        .map(|i| &facts.about[i]);
    let unit = first.map_or(0, |c| c.unit);
    let (f_lo, f_hi) = facts.frames;
    ui.horizontal_wrapped(|ui| {
        let l = ui.label("Counter");
        egui::ComboBox::from_id_salt("counter_pick")
            .selected_text(&sel)
            .width(200.0)
            .show_ui(ui, |ui| {
                for n in names {
                    if ui.selectable_label(sel == *n, n).clicked() {
                        st.selected = Some(n.clone());
                    }
                }
            })
            .response
            .labelled_by(l.id);
        let l = ui.label("Group by");
        let mut g = grouping;
        egui::ComboBox::from_id_salt("counter_grouping")
            .selected_text(g.name())
            .show_ui(ui, |ui| {
                for opt in CounterGrouping::ALL {
                    ui.selectable_value(&mut g, opt, opt.name());
                }
            })
            .response
            .labelled_by(l.id);
        st.grouping = Some(g);
        ui.add_enabled_ui(g != CounterGrouping::Frame, |ui| {
            let mut all = st.frame.is_none();
            if ui.checkbox(&mut all, "All frames").changed() {
                st.frame = if all { None } else { Some(f_lo) };
            }
            if let Some(f) = st.frame.as_mut() {
                let l = ui.label("Frame");
                ui.add(egui::DragValue::new(f).range(f_lo..=f_hi))
                    .labelled_by(l.id);
            }
        });
        if let Some(c) = first {
            let agg = if counter_is_rate(unit) {
                "averaged"
            } else {
                "summed"
            };
            ui.weak(format!(
                "{} · {} · unit {} · samples {agg} per group",
                c.category,
                c.description,
                match counter_unit(unit) {
                    "" => "count",
                    u => u,
                }
            ));
        }
    });
    let grouping = st.grouping.unwrap_or(grouping);
    st.refresh(ds, &sel, grouping);
    let groups = &st.groups;
    let sources = source_names(ds);
    let avail = ui.available_height();
    let plot_h = (avail * 0.42).max(120.0);
    let mut title = format!("{sel} per {}", grouping.name().to_ascii_lowercase());
    if grouping != CounterGrouping::Frame && groups.len() > MAX_BARS {
        title += &format!(" (plot: first {MAX_BARS} of {} groups)", groups.len());
    }
    ui.label(RichText::new(title).strong());
    let value_of = |g: &CounterGroup, s: usize| {
        if s == 0 {
            g.captured
        } else {
            g.values[s - 1]
        }
    };
    let x_label = match grouping {
        CounterGrouping::Frame => "frame",
        CounterGrouping::CommandBuffer => "command buffer",
        CounterGrouping::RenderPass => "command buffer / render pass",
        CounterGrouping::Pass => "counter pass",
        CounterGrouping::Sample => "sample (table row)",
    };
    let mut plot = Plot::new(("counter_plot", grouping as u8))
        .height(plot_h)
        .allow_scroll(false);
    if grouping != CounterGrouping::Frame {
        // Bars stand at 0, 1, 2, ...: name them after their group.
        let ticks: Vec<String> = groups.iter().map(|g| axis_label(ds, g)).collect();
        let n = ticks.len() as f64;
        plot = plot
            .x_grid_spacer(move |input: GridInput| {
                let lo = input.bounds.0.ceil().max(0.0);
                let hi = input.bounds.1.floor().min(n - 1.0);
                let step = ((hi - lo) / 12.0).ceil().max(1.0);
                let mut marks = Vec::new();
                let mut v = lo;
                while v <= hi {
                    marks.push(GridMark {
                        value: v,
                        step_size: step,
                    });
                    v += step;
                }
                marks
            })
            .x_axis_formatter(move |m, _| {
                let k = m.value.round();
                if (m.value - k).abs() < 1e-6 && k >= 0.0 {
                    ticks.get(k as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            });
    }
    plot.legend(Legend::default().position(egui_plot::Corner::LeftTop))
        .x_axis_label(x_label)
        .y_axis_label(counter_unit(unit))
        .show(ui, |plot| {
            if grouping == CounterGrouping::Frame {
                for (s, name) in sources.iter().enumerate() {
                    let pts: Vec<[f64; 2]> = groups
                        .iter()
                        .filter_map(|g| match g.key {
                            GroupKey::Frame(f) => value_of(g, s).map(|v| [f as f64, v]),
                            _ => None,
                        })
                        .collect();
                    plot.line(
                        Line::new(name.clone(), PlotPoints::new(pts))
                            .color(PALETTE[s % PALETTE.len()]),
                    );
                }
                return;
            }
            let n_src = sources.len() as f64;
            let width = 0.8 / n_src;
            for (s, name) in sources.iter().enumerate() {
                let bars: Vec<Bar> = groups
                    .iter()
                    .enumerate()
                    .take(MAX_BARS)
                    .filter_map(|(k, g)| {
                        value_of(g, s).map(|v| {
                            Bar::new(k as f64 + (s as f64 - (n_src - 1.0) / 2.0) * width, v)
                                .width(width * 0.95)
                                .name(g.label.clone())
                        })
                    })
                    .collect();
                plot.bar_chart(BarChart::new(name.clone(), bars).color(PALETTE[s % PALETTE.len()]));
            }
        });
    ui.add_space(4.0);
    // Δ compares with the captured value, or with the first results file when nothing was
    // captured (comparing GPUs with each other), in `quarry compare`'s words and colours.
    let has_captured = groups.iter().any(|g| g.captured.is_some());
    let measure = format::runs::Measure::of_counter(unit);
    let threshold = *st
        .threshold_pct
        .get_or_insert(crate::compare::DEFAULT_THRESHOLD_PCT);
    let reference_of = |g: &CounterGroup| {
        if has_captured {
            g.captured
        } else {
            g.values.first().copied().flatten()
        }
    };
    let change = |g: &CounterGroup, v: Option<f64>| {
        let (v, r) = (v?, reference_of(g)?);
        Some((format::runs::change_pct(r, v), v - r))
    };
    ui.horizontal(|ui| {
        ui.checkbox(&mut st.group_order, "Group order")
            .on_hover_text("list the table in group order instead of by largest change");
        let l = ui.label("Threshold %");
        ui.add(
            egui::DragValue::new(st.threshold_pct.get_or_insert(threshold))
                .range(0.0..=1000.0)
                .speed(0.5),
        )
        .labelled_by(l.id)
        .on_hover_text("changes over this are coloured: green better, red worse, amber neither");
    });
    let groups = &st.groups;
    // Largest change first (over every results file), as `quarry compare` sorts.
    let mut order: Vec<usize> = (0..groups.len()).collect();
    if !st.group_order {
        let largest = |g: &CounterGroup| {
            g.values
                .iter()
                .filter_map(|v| change(g, *v))
                .map(|(p, _)| p.abs())
                .filter(|p| !p.is_nan())
                .fold(0.0, f64::max)
        };
        let keys: Vec<f64> = groups.iter().map(largest).collect();
        order.sort_by(|a, b| keys[*b].total_cmp(&keys[*a]));
    }
    let mut tb = TableBuilder::new(ui)
        .id_salt("counters_table")
        .striped(true)
        .auto_shrink(false)
        .column(Column::initial(230.0).resizable(true).clip(true))
        .column(Column::initial(64.0).resizable(true))
        .column(Column::initial(70.0).resizable(true))
        .column(Column::initial(110.0).resizable(true));
    for _ in &ds.results {
        tb = tb
            .column(Column::initial(120.0).resizable(true))
            .column(Column::initial(110.0).resizable(true));
    }
    tb.header(22.0, |mut h| {
        for t in [grouping.name(), "Samples", "Pass", "Captured"] {
            h.col(|ui| {
                ui.strong(t);
            });
        }
        for (i, f) in ds.results.iter().enumerate() {
            let dev = f
                .device
                .as_ref()
                .map(|d| d.name.clone())
                .unwrap_or_else(|| "device unknown".into());
            h.col(|ui| {
                ui.strong(&f.label).on_hover_text(dev);
            });
            h.col(|ui| {
                ui.strong(if has_captured || i > 0 {
                    "Δ %"
                } else {
                    "(reference)"
                })
                .on_hover_text(if has_captured {
                    "difference from the captured value"
                } else {
                    "difference from the first results file"
                });
            });
        }
    })
    .body(|body| {
        body.rows(20.0, groups.len(), |mut row| {
            let g = &groups[order[row.index()]];
            row.col(|ui| {
                ui.label(&g.label);
            });
            row.col(|ui| {
                ui.label(g.samples.to_string());
            });
            row.col(|ui| {
                let p: Vec<String> = g.passes.iter().map(|p| p.to_string()).collect();
                ui.label(p.join(", "));
            });
            row.col(|ui| {
                ui.monospace(g.captured.map(format_counter).unwrap_or_default());
            });
            for (i, v) in g.values.iter().enumerate() {
                row.col(|ui| {
                    ui.monospace(v.map(format_counter).unwrap_or_default());
                });
                row.col(|ui| {
                    if !has_captured && i == 0 {
                        return;
                    }
                    if let Some((pct, delta)) = change(g, *v).filter(|(p, _)| p.is_finite()) {
                        let col = crate::compare::tone(measure, delta, pct, threshold)
                            .colour(ui.visuals().text_color());
                        ui.horizontal(|ui| {
                            ui.label(RichText::new(format!("{pct:+.1}")).color(col).monospace());
                            ui.label(RichText::new(measure.direction(delta)).color(col));
                        });
                    }
                });
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;
    use std::path::PathBuf;

    fn two_gpus() -> Dataset {
        let (ha, a) = synth::render_pass_results(4, "gpu-a", 2.0);
        let (hb, b) = synth::render_pass_results(4, "gpu-b", 0.5);
        Dataset::from_records(vec![
            (PathBuf::from("a.qres"), ha, a),
            (PathBuf::from("b.qres"), hb, b),
        ])
    }

    #[test]
    fn counters_group_by_render_pass_command_buffer_frame_and_pass() {
        let ds = two_gpus();
        let name = synth::RP_COUNTERS[0].0;
        let by_rp = group_counters(&ds, name, CounterGrouping::RenderPass, None);
        assert_eq!(by_rp.len(), synth::RP_CBS.len() * synth::RP_PER_CB as usize);
        // cb 0xc1, render pass 2, summed over frames 0..4.
        let g = by_rp
            .iter()
            .find(|g| g.key == GroupKey::RenderPass(0xc1, Some(2)))
            .unwrap();
        let expect = |scale: f64| -> f64 {
            (0..4)
                .map(|f| synth::render_pass_value(0, 1, 2, f, scale))
                .sum()
        };
        assert_eq!(g.samples, 4);
        assert_eq!(g.captured, Some(expect(1.0)));
        assert_eq!(g.values, vec![Some(expect(2.0)), Some(expect(0.5))]);
        assert_eq!(g.label, "cb 0xc1 · render pass 2");
        assert_eq!(g.passes, vec![0]);

        // One frame only: the sample itself.
        let f2 = group_counters(&ds, name, CounterGrouping::RenderPass, Some(2));
        assert_eq!(f2.len(), 6);
        assert!(f2.iter().all(|g| g.samples == 1));
        let g = f2
            .iter()
            .find(|g| g.key == GroupKey::RenderPass(0xc0, Some(1)))
            .unwrap();
        assert_eq!(g.values[0], Some(synth::render_pass_value(0, 0, 1, 2, 2.0)));

        let by_cb = group_counters(&ds, name, CounterGrouping::CommandBuffer, None);
        assert_eq!(by_cb.len(), 2);
        assert_eq!(by_cb.iter().map(|g| g.samples).sum::<usize>(), 24);
        let by_frame = group_counters(&ds, name, CounterGrouping::Frame, Some(1));
        assert_eq!(
            by_frame.len(),
            4,
            "the frame filter does not apply to frame grouping"
        );
        let by_pass = group_counters(&ds, synth::RP_COUNTERS[2].0, CounterGrouping::Pass, None);
        assert_eq!(by_pass.len(), 1);
        assert_eq!(by_pass[0].key, GroupKey::Pass(1));
        // "Shader busy" is a percentage: averaged, not summed.
        let mean_cap: f64 = (0..4)
            .flat_map(|f| (0..2).flat_map(move |cb| (0..3).map(move |rp| (f, cb, rp))))
            .map(|(f, cb, rp)| synth::render_pass_value(2, cb, rp, f, 1.0))
            .sum::<f64>()
            / 24.0;
        assert!((by_pass[0].captured.unwrap() - mean_cap).abs() < 1e-9);
        assert_eq!(
            group_counters(&ds, name, CounterGrouping::Sample, None).len(),
            24
        );
    }

    #[test]
    fn timestamp_pairs_from_results_and_trace() {
        let (h, r) = synth::results(200, 4, "gpu", 0);
        let ds = Dataset::from_records(vec![(PathBuf::from("a"), h, r)]);
        let p = TimestampPairs::build(&ds);
        assert!(!p.pairs.is_empty());
        // Synth pairs last 0.5-3 ms captured, 0.45-2.45 ms replayed.
        assert!(
            p.durations[0]
                .iter()
                .flatten()
                .all(|d| (500_000.0..=3_000_000.0).contains(d)),
            "{:?}",
            p.durations[0]
        );
        assert!(p.durations[1]
            .iter()
            .flatten()
            .all(|d| (450_000.0..=2_450_000.0).contains(d)));
        assert_eq!(p.per_frame(0).len(), p.frames.len());

        let (h, r) = synth::trace(4);
        let ds = Dataset::from_records(vec![(PathBuf::from("t"), h, r)]);
        let p = TimestampPairs::build(&ds);
        assert_eq!(p.pairs.len(), 4 * 4);
        // Trace pairs: 1 ms + 10 µs per frame index, period 1 ns.
        assert_eq!(p.durations[0][0], Some(1_000_000.0));
        assert_eq!(p.per_frame(0)[1], (1, 4.0 * 1_010_000.0));
    }
}
