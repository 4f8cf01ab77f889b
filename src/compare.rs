//! `quarry compare A.qres B.qres [C.qres ...]`: the matched queries and counters of runs of one
//! trace, the first run as baseline, sorted by largest change. Matching lives in
//! `format::runs`; this module reads the files, renders, and sets the exit status.

use std::io::Write;
use std::path::PathBuf;

use format::runs::{self, By, Item, Matching, Measure, Metric, Row, Run, RunError, Verdict};
use serde_json::{json, Value};

use crate::output::{self, BadInput};

#[derive(clap::Args)]
pub struct Args {
    /// Results files (`.qres`) of one trace; the first is the baseline.
    #[arg(required = true, num_args = 2.., value_name = "RESULTS")]
    runs: Vec<PathBuf>,
    /// One row per query value and counter sample (`query`), or summed per counter / metric,
    /// render pass, command buffer or frame.
    #[arg(long, value_enum, default_value = "query")]
    by: ByArg,
    /// Exit 1 when a value changes by more than this against the baseline: `5%` or `5`.
    #[arg(long, value_name = "PCT", value_parser = parse_threshold)]
    threshold: Option<f64>,
    /// Print one JSON object instead of the table (every row, changed or not).
    #[arg(long)]
    json: bool,
    /// Also list rows that did not change.
    #[arg(long)]
    all: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ByArg {
    Query,
    Counter,
    RenderPass,
    CommandBuffer,
    Frame,
}

impl ByArg {
    fn by(self) -> By {
        match self {
            ByArg::Query => By::Query,
            ByArg::Counter => By::Counter,
            ByArg::RenderPass => By::RenderPass,
            ByArg::CommandBuffer => By::CommandBuffer,
            ByArg::Frame => By::Frame,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ByArg::Query => "query",
            ByArg::Counter => "counter",
            ByArg::RenderPass => "render-pass",
            ByArg::CommandBuffer => "command-buffer",
            ByArg::Frame => "frame",
        }
    }
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let n = s.trim().trim_end_matches('%').trim();
    match n.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a percentage (e.g. 5% or 0.5)")),
    }
}

fn read(path: &std::path::Path) -> anyhow::Result<Run> {
    Run::read(path).map_err(|e| match e {
        RunError::Format(f) => f.into(),
        other => BadInput(other.to_string()).into(),
    })
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let runs = args
        .runs
        .iter()
        .map(|p| read(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for r in &runs[1..] {
        if let Err(why) = runs::same_trace(&runs[0], r) {
            let e = RunError::DifferentTraces {
                a: runs[0].label.clone(),
                b: r.label.clone(),
                why,
            };
            return Err(BadInput(e.to_string()).into());
        }
    }
    let matching = runs::match_runs(&runs, &runs::classify_runs);
    let rows = runs::rows(&matching, args.by.by());
    let report = Report {
        runs: &runs,
        matching: &matching,
        rows: &rows,
        threshold: args.threshold,
    };
    let mut out = output::stdout();
    if args.json {
        writeln!(out, "{}", report.json(args.by))?;
    } else {
        report.text(&mut out, args.by, args.all)?;
    }
    output::flush(&mut out)?;
    Ok(u8::from(
        report.deterministic_differences() > 0 || report.over_threshold() > 0,
    ))
}

struct Report<'a> {
    runs: &'a [Run],
    matching: &'a Matching,
    rows: &'a [Row],
    threshold: Option<f64>,
}

impl Report<'_> {
    fn deterministic_differences(&self) -> usize {
        self.matching
            .query_verdicts
            .iter()
            .flat_map(|v| v.iter())
            .filter(|(v, _)| v.fails())
            .map(|(_, n)| n)
            .sum()
    }

    fn over(&self, row: &Row) -> bool {
        self.threshold.is_some_and(|t| {
            row.change_pct
                .iter()
                .flatten()
                .any(|&c| runs::over_threshold(c, t))
        })
    }

    fn over_threshold(&self) -> usize {
        self.rows.iter().filter(|r| self.over(r)).count()
    }

    /// Failing, changed, or a value only some runs have (rows no run has a value for are not).
    fn changed(row: &Row) -> bool {
        let present = row.values.iter().filter(|v| v.is_some()).count();
        row.fails() || row.largest_change() > 0.0 || (present > 0 && present < row.values.len())
    }

    fn text(&self, out: &mut impl Write, by: ByArg, all: bool) -> anyhow::Result<()> {
        let base = &self.runs[0];
        writeln!(
            out,
            "{} runs of {} (application \"{}\"), baseline {}",
            self.runs.len(),
            base.trace.trace,
            base.trace.application,
            base.label
        )?;
        for r in self.runs {
            writeln!(
                out,
                "  {}: replayed on {}, {} loop{}",
                r.label,
                r.device.as_ref().map_or("an unknown device", |d| &d.name),
                r.info.loops,
                if r.info.loops == 1 { "" } else { "s (medians)" }
            )?;
        }
        let shown: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| all || Self::changed(r))
            .collect();
        writeln!(
            out,
            "by {}: {} rows, {} changed{}",
            by.name(),
            self.rows.len(),
            self.rows.iter().filter(|r| Self::changed(r)).count(),
            if all || shown.len() == self.rows.len() {
                String::new()
            } else {
                " (unchanged rows not shown; --all lists them)".to_owned()
            }
        )?;
        if !shown.is_empty() {
            let mut table = vec![self.header()];
            table.extend(shown.iter().map(|r| self.cells(r)));
            write_table(out, &table)?;
        }
        for (i, r) in self.runs.iter().enumerate().skip(1) {
            self.summary_line(out, i, r)?;
        }
        let (det, over) = (self.deterministic_differences(), self.over_threshold());
        let limit = self
            .threshold
            .map(|t| format!("{} %", num(t)))
            .unwrap_or_default();
        let line = match (det, over, self.threshold.is_some()) {
            (0, 0, false) => "ok: deterministic results match".to_owned(),
            (0, 0, true) => format!("ok: deterministic results match, no change over {limit}"),
            _ => {
                let mut parts = Vec::new();
                if det > 0 {
                    parts.push(format!(
                        "{det} deterministic result{} differ{}",
                        if det == 1 { "" } else { "s" },
                        if det == 1 { "s" } else { "" }
                    ));
                }
                if over > 0 {
                    parts.push(format!(
                        "{over} row{} changed by more than {limit}",
                        if over == 1 { "" } else { "s" }
                    ));
                }
                format!("FAIL: {}", parts.join("; "))
            }
        };
        writeln!(out, "result: {line}")?;
        Ok(())
    }

    fn header(&self) -> Vec<String> {
        let mut h = vec!["what".to_owned(), "where".to_owned()];
        for (i, r) in self.runs.iter().enumerate() {
            h.push(r.label.clone());
            if i > 0 {
                h.push("change".to_owned());
            }
        }
        h.push("result".to_owned());
        h
    }

    fn cells(&self, row: &Row) -> Vec<String> {
        let mut c = vec![what(row), place(row)];
        for (i, v) in row.values.iter().enumerate() {
            c.push(v.map_or("-".to_owned(), |v| value(row, v)));
            if i > 0 {
                c.push(match (row.change_pct[i], row.values[0], *v) {
                    (Some(p), Some(a), Some(b)) => {
                        format!("{} {}", pct(p), row.measure.direction(b - a))
                    }
                    _ => "-".to_owned(),
                });
            }
        }
        let worst = row.verdicts.iter().skip(1).max().copied();
        let mut result = worst.map_or("", |v| v.word()).to_owned();
        if self.over(row) {
            result.push_str(" OVER");
        }
        c.push(result);
        c
    }

    fn summary_line(&self, out: &mut impl Write, i: usize, r: &Run) -> anyhow::Result<()> {
        let m = self.matching;
        let v = &m.query_verdicts[i];
        let n = |x: Verdict| v.get(&x).copied().unwrap_or(0);
        let base = &self.runs[0].label;
        writeln!(
            out,
            "{} vs {base}: {} query reads matched ({} same, {} vary, {} differ, {} unavailable, \
             {} not compared), {} counter samples; only in {}: {} reads, {} samples; only in {base}: {} reads, {} samples",
            r.label,
            v.values().sum::<usize>(),
            n(Verdict::Same),
            n(Verdict::Varies),
            n(Verdict::Differs),
            n(Verdict::Unavailable),
            n(Verdict::NotCompared),
            self.runs[0].counters.len() - m.counters_missing[i],
            r.label,
            m.queries_only_here[i],
            m.counters_only_here[i],
            m.queries_missing[i],
            m.counters_missing[i],
        )?;
        let largest = self
            .rows
            .iter()
            .filter_map(|row| row.change_pct[i].map(|p| (p, row)))
            .filter(|(p, _)| *p != 0.0)
            .reduce(|a, b| if b.0.abs() > a.0.abs() { b } else { a });
        if let Some((p, row)) = largest {
            let delta = row.values[i].unwrap_or(0.0) - row.values[0].unwrap_or(0.0);
            writeln!(
                out,
                "  largest change: {} {} ({}{})",
                pct(p),
                row.measure.direction(delta),
                what(row),
                Some(place(row))
                    .filter(|p| !p.is_empty())
                    .map_or(String::new(), |p| format!(", {p}"))
            )?;
        }
        Ok(())
    }

    fn json(&self, by: ByArg) -> Value {
        let runs: Vec<Value> = self
            .runs
            .iter()
            .map(|r| {
                json!({
                    "file": r.label,
                    "device": r.device.as_ref().map(|d| d.name.clone()),
                    "driver": r.device.as_ref().map(|d| d.driver_name.clone()),
                    "loops": r.info.loops,
                    "trace": r.trace.trace,
                    "application": r.trace.application,
                })
            })
            .collect();
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let k = &row.key;
                json!({
                    "what": what(row),
                    "metric": metric_json(&k.metric),
                    "item": k.item.map(item_json),
                    "counter_occurrence": k.counter_occurrence,
                    "frame": k.frame,
                    "command_buffer": k.command_buffer.map(|h| format!("{h:#x}")),
                    "render_pass": k.render_pass.flatten(),
                    "measure": match row.measure {
                        Measure::Time => "time_ns",
                        Measure::Count => "count",
                        Measure::Level => "level",
                    },
                    "samples": row.samples,
                    "values": row.values,
                    "change_pct": row.change_pct.iter().map(|c| c.filter(|c| c.is_finite())).collect::<Vec<_>>(),
                    "direction": row.values.iter().enumerate().map(|(i, v)| {
                        (i > 0).then(|| v.zip(row.values[0]).map(|(b, a)| row.measure.direction(b - a))).flatten()
                    }).collect::<Vec<_>>(),
                    "verdict": row.verdicts.iter().map(|v| v.word().to_lowercase()).collect::<Vec<_>>(),
                    "over_threshold": self.over(row),
                })
            })
            .collect();
        let summary: Vec<Value> = (1..self.runs.len())
            .map(|i| {
                let m = self.matching;
                let v = &m.query_verdicts[i];
                let n = |x: Verdict| v.get(&x).copied().unwrap_or(0);
                json!({
                    "file": self.runs[i].label,
                    "query_reads": v.values().sum::<usize>(),
                    "same": n(Verdict::Same),
                    "vary": n(Verdict::Varies),
                    "differ": n(Verdict::Differs),
                    "unavailable": n(Verdict::Unavailable),
                    "not_compared": n(Verdict::NotCompared),
                    "counter_samples": self.runs[0].counters.len() - m.counters_missing[i],
                    "reads_only_here": m.queries_only_here[i],
                    "samples_only_here": m.counters_only_here[i],
                    "reads_only_in_baseline": m.queries_missing[i],
                    "samples_only_in_baseline": m.counters_missing[i],
                })
            })
            .collect();
        json!({
            "baseline": self.runs[0].label,
            "by": by.name(),
            "threshold_pct": self.threshold,
            "runs": runs,
            "rows": rows,
            "summary": summary,
            "deterministic_differences": self.deterministic_differences(),
            "over_threshold": self.over_threshold(),
            "failed": self.deterministic_differences() > 0 || self.over_threshold() > 0,
        })
    }
}

fn metric_json(m: &Metric) -> Value {
    match m {
        Metric::Query {
            pool,
            query_type,
            slot,
        } => json!({
            "kind": "query",
            "pool": format!("{pool:#x}"),
            "query_type": replayer::queries::type_name(*query_type),
            "slot": slot,
        }),
        Metric::Interval { pool } => {
            json!({"kind": "timestamp_interval", "pool": format!("{pool:#x}")})
        }
        Metric::Counter { name, unit } => {
            json!({"kind": "counter", "name": name, "unit": unit_name(*unit)})
        }
    }
}

fn item_json(i: Item) -> Value {
    match i {
        Item::Query(k) => json!({"query": k.query, "seq": k.seq, "occurrence": k.occurrence}),
        Item::Interval { key, from } => {
            json!({"query": key.query, "from_query": from, "seq": key.seq, "occurrence": key.occurrence})
        }
        Item::Counter => Value::Null,
    }
}

/// `VkPerformanceCounterUnitKHR` by name.
fn unit_name(unit: u32) -> String {
    format::query::counter_unit_word(unit)
}

/// What a row measures: the metric, and for `--by query` which query or sample.
fn what(row: &Row) -> String {
    let k = &row.key;
    let mut s = match &k.metric {
        Metric::Query {
            pool,
            query_type,
            slot,
        } => {
            let mut s = format!(
                "{} pool {pool:#x}",
                replayer::queries::type_name(*query_type)
            );
            if let Some(slot) = slot {
                s.push_str(&format!(" [{}]", slot_name(*query_type, *slot)));
            }
            s
        }
        Metric::Interval { pool } => format!("GPU time pool {pool:#x}"),
        Metric::Counter { name, .. } => format!("\"{name}\""),
    };
    match k.item {
        Some(Item::Query(q)) => s.push_str(&format!(" q{} seq {}", q.query, q.seq)),
        Some(Item::Interval { key, from }) => {
            s.push_str(&format!(" q{from}->q{} seq {}", key.query, key.seq))
        }
        _ => {}
    }
    let occurrence = match k.item {
        Some(Item::Query(q) | Item::Interval { key: q, .. }) => q.occurrence,
        _ => k.counter_occurrence.unwrap_or(0),
    };
    if occurrence > 0 {
        s.push_str(&format!(" #{occurrence}"));
    }
    s
}

fn slot_name(query_type: i32, slot: u32) -> String {
    use viewer::model::{
        pipeline_statistic_name, QUERY_TYPE_PIPELINE_STATISTICS,
        QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT,
    };
    match (query_type, slot) {
        (QUERY_TYPE_PIPELINE_STATISTICS, bit) => pipeline_statistic_name(bit),
        (QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT, 0) => "written".to_owned(),
        (QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT, 1) => "needed".to_owned(),
        (_, s) => format!("value {s}"),
    }
}

/// Where a row was measured: the dimensions its grouping keeps.
fn place(row: &Row) -> String {
    let k = &row.key;
    let mut parts = Vec::new();
    if let Some(f) = k.frame {
        parts.push(format!("frame {f}"));
    }
    if let Some(cb) = k.command_buffer {
        parts.push(format!("cb {cb:#x}"));
    }
    if let Some(Some(rp)) = k.render_pass {
        parts.push(format!("rp {rp}"));
    }
    parts.join(" ")
}

fn value(row: &Row, v: f64) -> String {
    match row.measure {
        Measure::Time => time(v),
        Measure::Count => num(v),
        Measure::Level => {
            let pct = matches!(row.key.metric, Metric::Counter { unit: 1, .. });
            format!("{:.2}{}", v, if pct { " %" } else { "" })
        }
    }
}

/// Integers as integers, fractions with three decimals.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn time(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.3} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn pct(p: f64) -> String {
    if p.is_infinite() {
        "new".to_owned()
    } else {
        format!("{p:+.1} %")
    }
}

/// Left-aligned text columns, right-aligned value columns, two spaces apart.
fn write_table(out: &mut impl Write, rows: &[Vec<String>]) -> anyhow::Result<()> {
    let cols = rows[0].len();
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::from(" ");
        for (c, cell) in r.iter().enumerate() {
            let pad = width[c] - cell.chars().count();
            line.push(' ');
            if c < 2 || c == cols - 1 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
            line.push(' ');
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
