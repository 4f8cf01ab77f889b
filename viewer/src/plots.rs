//! Timestamps view (GPU time between timestamp pairs) and counters view.

use std::collections::BTreeMap;

use egui::{Color32, RichText};
use egui_extras::{Column, TableBuilder};
use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};

use crate::data::Dataset;
use crate::model;

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
                out.durations[0].push(match (ra.captured_gpu_ns, rb.captured_gpu_ns) {
                    (Some(x), Some(y)) => Some(y - x),
                    _ => None,
                });
                for f in 0..ds.results.len() {
                    let g = |i: usize| ds.replayed[f][i].as_ref().and_then(|r| r.gpu_ns);
                    out.durations[f + 1].push(match (g(a), g(b)) {
                        (Some(x), Some(y)) => Some(y - x),
                        _ => None,
                    });
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
    match unit {
        0 => "",
        1 => "%",
        2 => "ns",
        3 => "bytes",
        4 => "bytes/s",
        5 => "K",
        6 => "W",
        7 => "V",
        8 => "A",
        9 => "Hz",
        10 => "cycles",
        _ => "?",
    }
}

#[derive(Debug, Clone, Default)]
pub struct CountersState {
    pub selected: Option<String>,
}

pub fn counters_ui(ui: &mut egui::Ui, ds: &Dataset, st: &mut CountersState) {
    if ds.counters.is_empty() {
        ui.weak("No performance counters in these files (CounterValue records come from `quarry replay --counters`).");
        return;
    }
    let mut names: Vec<&str> = ds.counters.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let sel = st
        .selected
        .get_or_insert_with(|| names[0].to_owned())
        .clone();
    ui.horizontal(|ui| {
        let l = ui.label("Counter");
        egui::ComboBox::from_id_salt("counter_pick")
            .selected_text(&sel)
            .show_ui(ui, |ui| {
                for n in &names {
                    if ui.selectable_label(sel == *n, *n).clicked() {
                        st.selected = Some((*n).to_owned());
                    }
                }
            })
            .response
            .labelled_by(l.id);
        if let Some(c) = ds.counters.iter().find(|c| c.name == sel) {
            ui.weak(format!("{} — {}", c.category, c.description));
        }
    });
    let sources = source_names(ds);
    let avail = ui.available_height();
    Plot::new("counter_plot")
        .height(avail * 0.45)
        .legend(Legend::default())
        .x_axis_label("frame")
        .y_axis_label(counter_unit(
            ds.counters
                .iter()
                .find(|c| c.name == sel)
                .map_or(0, |c| c.unit),
        ))
        .show(ui, |plot| {
            let rows: Vec<_> = ds.counters.iter().filter(|c| c.name == sel).collect();
            for (s, name) in sources.iter().enumerate() {
                let mut pts: Vec<[f64; 2]> = rows
                    .iter()
                    .filter_map(|c| {
                        let v = if s == 0 { c.captured } else { c.values[s - 1] };
                        v.map(|v| [c.frame as f64, v])
                    })
                    .collect();
                pts.sort_by(|a, b| a[0].total_cmp(&b[0]));
                plot.line(
                    Line::new(name.clone(), PlotPoints::new(pts)).color(PALETTE[s % PALETTE.len()]),
                );
            }
        });
    ui.add_space(4.0);
    let n_files = ds.results.len();
    let mut tb = TableBuilder::new(ui)
        .id_salt("counters_table")
        .striped(true)
        .auto_shrink(false)
        .column(Column::initial(180.0).resizable(true).clip(true))
        .columns(Column::initial(60.0).resizable(true), 5)
        .column(Column::initial(100.0).resizable(true));
    for _ in 0..n_files {
        tb = tb
            .column(Column::initial(110.0).resizable(true))
            .column(Column::initial(70.0).resizable(true));
    }
    tb.header(22.0, |mut h| {
        for t in [
            "Counter",
            "Unit",
            "Pass",
            "Frame",
            "Cmd buffer",
            "Render pass",
            "Captured",
        ] {
            h.col(|ui| {
                ui.strong(t);
            });
        }
        for f in &ds.results {
            h.col(|ui| {
                ui.strong(&f.label);
            });
            h.col(|ui| {
                ui.strong("Δ %");
            });
        }
    })
    .body(|body| {
        body.rows(20.0, ds.counters.len(), |mut row| {
            let c = &ds.counters[row.index()];
            row.col(|ui| {
                ui.label(&c.name).on_hover_text(&c.description);
            });
            row.col(|ui| {
                ui.label(counter_unit(c.unit));
            });
            row.col(|ui| {
                ui.label(c.pass.to_string());
            });
            row.col(|ui| {
                ui.label(c.frame.to_string());
            });
            row.col(|ui| {
                ui.label(model::handle_string(c.command_buffer));
            });
            row.col(|ui| {
                ui.label(c.render_pass.map(|r| r.to_string()).unwrap_or_default());
            });
            row.col(|ui| {
                ui.monospace(c.captured.map(|v| format!("{v:.3}")).unwrap_or_default());
            });
            for v in &c.values {
                row.col(|ui| {
                    ui.monospace(v.map(|v| format!("{v:.3}")).unwrap_or_default());
                });
                row.col(|ui| {
                    if let (Some(v), Some(cap)) = (v, c.captured) {
                        if cap != 0.0 {
                            let pct = (v - cap) / cap * 100.0;
                            let col = if pct.abs() > 5.0 {
                                Color32::from_rgb(255, 150, 150)
                            } else {
                                ui.visuals().text_color()
                            };
                            ui.label(RichText::new(format!("{pct:+.1}")).color(col).monospace());
                        }
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
