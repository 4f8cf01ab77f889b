//! The long ("tidy") export: one row per run × query × value and one per run × counter sample,
//! with the fixed columns of [`COLUMNS`], as CSV or as JSON lines (same fields, same order).
//!
//! Integers are written as integers, reals always with a decimal point, handles as `0x…` strings,
//! enums and flags by name; a field that does not apply to a row is empty (CSV) or `null` (JSON).

use std::io::{self, Write};

use format::query::{NotCompared, Outcome, QueryKind};

use super::{hex, Names};
use crate::data::Dataset;
use crate::model;

/// The columns, in order. docs/USAGE.md describes each; `tests/export_tidy.rs` holds them fixed.
pub const COLUMNS: [&str; 32] = [
    "file",
    "device",
    "record",
    "run",
    "pass",
    "frame",
    "queue",
    "queue_name",
    "command_buffer",
    "command_buffer_name",
    "render_pass",
    "render_pass_name",
    "label",
    "pool",
    "pool_name",
    "query",
    "seq",
    "query_type",
    "flags",
    "value_index",
    "value_name",
    "unit",
    "captured",
    "replayed",
    "captured_available",
    "replayed_available",
    "real_unit",
    "captured_real",
    "replayed_real",
    "outcome",
    "submit_ns",
    "available_ns",
];

/// One field of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Empty,
    Int(u64),
    Real(f64),
    Bool(bool),
    Text(String),
}

impl Cell {
    fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    fn opt_text(s: Option<&str>) -> Cell {
        s.map_or(Cell::Empty, Cell::text)
    }
    fn handle(h: u64) -> Cell {
        if h == 0 {
            Cell::Empty
        } else {
            Cell::Text(hex(h))
        }
    }
    /// Host times: 0 means not known.
    fn time(ns: u64) -> Cell {
        if ns == 0 {
            Cell::Empty
        } else {
            Cell::Int(ns)
        }
    }
    fn real(v: Option<f64>) -> Cell {
        match v {
            Some(v) if v.is_finite() => Cell::Real(v),
            _ => Cell::Empty,
        }
    }

    fn write_csv(&self, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Cell::Empty => Ok(()),
            Cell::Int(v) => write!(out, "{v}"),
            Cell::Real(v) => write!(out, "{}", real_text(*v)),
            Cell::Bool(b) => write!(out, "{b}"),
            Cell::Text(s) => out.write_all(csv_field(s).as_bytes()),
        }
    }

    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Cell::Empty => out.write_all(b"null"),
            Cell::Int(v) => write!(out, "{v}"),
            Cell::Real(v) => write!(out, "{}", real_text(*v)),
            Cell::Bool(b) => write!(out, "{b}"),
            Cell::Text(s) => serde_json::to_writer(&mut *out, s).map_err(io::Error::from),
        }
    }
}

/// A finite real with a decimal point always, so readers never take a real column for integers.
fn real_text(v: f64) -> String {
    let s = format!("{v}");
    if s.contains(['.', 'e', 'E', 'N', 'i']) {
        s
    } else {
        format!("{s}.0")
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Name of a comparison outcome, as in `quarry compare`.
pub fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Match => "match",
        Outcome::Mismatch => "mismatch",
        Outcome::Variation => "variation",
        Outcome::Clock => "clock",
        Outcome::Unavailable => "unavailable",
        Outcome::NotCompared(NotCompared::CapturedUnavailable) => "not_compared_unavailable",
        Outcome::NotCompared(NotCompared::CapturedMissing) => "not_compared_missing",
        Outcome::NotCompared(NotCompared::MultiviewInFirst) => "not_compared_multiview",
    }
}

/// What the integer values of a query count.
pub fn query_unit(query_type: i32) -> &'static str {
    use QueryKind::*;
    match QueryKind::from_raw(query_type) {
        Timestamp => "ticks",
        Occlusion => "samples",
        PipelineStatistics => "invocations",
        TransformFeedbackStream | PrimitivesGenerated | MeshPrimitivesGenerated => "primitives",
        AccelerationStructureCompactedSize
        | AccelerationStructureSerializationSize
        | AccelerationStructureCompactedSizeNv
        | AccelerationStructureSize
        | MicromapSerializationSize
        | MicromapCompactedSize => "bytes",
        AccelerationStructureSerializationBottomLevelPointers => "pointers",
        ResultStatusOnly => "status",
        PerformanceQuery | PerformanceQueryIntel | VideoEncodeFeedback | Unknown(_) => "raw",
    }
}

/// `VkPerformanceCounterUnitKHR` by name.
pub fn counter_unit_name(unit: u32) -> String {
    format::query::counter_unit_word(unit)
}

/// Calls `emit` with every row of the export, in order: the query rows `rows` (indices into
/// `ds.rows`) of each results file in turn (or of the trace alone), then every counter sample
/// of each results file.
pub fn for_each_row(
    ds: &Dataset,
    names: &Names,
    rows: &[u32],
    emit: &mut dyn FnMut(&[Cell]) -> io::Result<()>,
) -> io::Result<()> {
    let device_of = |f: &crate::data::FileSummary| f.device.as_ref().map(|d| d.name.clone());
    let mut cells: Vec<Cell> = Vec::with_capacity(COLUMNS.len());
    let base = |file: &crate::data::FileSummary, record: &str| {
        let mut c = Vec::with_capacity(COLUMNS.len());
        c.push(Cell::text(file.label.as_str()));
        c.push(Cell::opt_text(device_of(file).as_deref()));
        c.push(Cell::text(record));
        c
    };
    // Query rows from results files, else from the trace.
    let sources: Vec<(Option<usize>, &crate::data::FileSummary)> = if ds.results.is_empty() {
        ds.trace.iter().map(|t| (None, t)).collect()
    } else {
        ds.results
            .iter()
            .enumerate()
            .map(|(f, s)| (Some(f), s))
            .collect()
    };
    for &(f, file) in &sources {
        for &i in rows {
            let i = i as usize;
            let r = &ds.rows[i];
            let pool = ds.pool_of(r);
            let labels = model::value_labels(
                pool.query_type,
                pool.pipeline_statistics,
                pool.perf_counters,
            );
            let is_ts = pool.query_type == model::QUERY_TYPE_TIMESTAMP;
            let rep = match f {
                Some(f) => match ds.replayed[f][i].as_ref() {
                    Some(rep) => Some(rep),
                    // The query is not in this file (results of another trace).
                    None => continue,
                },
                None => None,
            };
            let cap = r.captured.as_ref();
            let n = cap
                .map_or(0, |c| c.values.len())
                .max(rep.map_or(0, |p| p.values.values.len()))
                .max(labels.len());
            let (submit, available) = match rep {
                Some(p) => (p.submit_ns, p.available_ns),
                None => (r.times.submit, r.times.available),
            };
            let outcome = f
                .and_then(|f| ds.outcome(i, f))
                .map_or(Cell::Empty, |o| Cell::text(outcome_name(o)));
            for v in 0..n.max(1) {
                cells.clear();
                cells.extend(base(file, "query"));
                cells.extend([
                    Cell::Int(u64::from(r.loop_index)),
                    Cell::Int(u64::from(r.pass)),
                    Cell::Int(r.frame),
                    Cell::handle(r.queue),
                    Cell::opt_text(names.get(r.queue)),
                    Cell::handle(r.command_buffer),
                    Cell::opt_text(names.get(r.command_buffer)),
                    Cell::Empty,
                    Cell::Empty,
                    Cell::opt_text(r.label.as_deref()),
                    Cell::handle(pool.handle),
                    Cell::opt_text(names.get(pool.handle).or(pool.name.as_deref())),
                    Cell::Int(u64::from(r.query)),
                    Cell::Int(r.seq),
                    Cell::text(QueryKind::from_raw(pool.query_type).name()),
                    Cell::text(model::result_flags_string(r.flags)),
                    Cell::Int(v as u64),
                ]);
                let name = if n == 0 {
                    "status".to_owned()
                } else {
                    labels
                        .get(v)
                        .cloned()
                        .unwrap_or_else(|| format!("value {v}"))
                };
                cells.push(Cell::Text(name));
                cells.push(Cell::text(query_unit(pool.query_type)));
                let value = |q: Option<&format::record::QueryValues>| {
                    q.and_then(|q| q.values.get(v))
                        .map_or(Cell::Empty, |x| Cell::Int(*x))
                };
                cells.push(value(cap));
                cells.push(value(rep.map(|p| &p.values)));
                cells.push(cap.map_or(Cell::Empty, |c| Cell::Bool(c.available)));
                cells.push(rep.map_or(Cell::Empty, |p| Cell::Bool(p.values.available)));
                if is_ts && v == 0 {
                    cells.push(Cell::text("ns"));
                    cells.push(Cell::real(r.captured_gpu_ns));
                    cells.push(Cell::real(rep.and_then(|p| p.gpu_ns)));
                } else {
                    cells.extend([Cell::Empty, Cell::Empty, Cell::Empty]);
                }
                cells.push(outcome.clone());
                cells.push(Cell::time(submit));
                cells.push(Cell::time(available));
                emit(&cells)?;
            }
        }
    }
    for (f, file) in ds.results.iter().enumerate() {
        for c in &ds.counters {
            let Some(value) = c.values.get(f).copied().flatten() else {
                continue;
            };
            cells.clear();
            cells.extend(base(file, "counter"));
            cells.extend([
                Cell::Int(0),
                Cell::Int(u64::from(c.pass)),
                Cell::Int(c.frame),
                Cell::Empty,
                Cell::Empty,
                Cell::handle(c.command_buffer),
                Cell::opt_text(names.get(c.command_buffer)),
                c.render_pass
                    .map_or(Cell::Empty, |p| Cell::Int(u64::from(p))),
                Cell::opt_text(c.render_pass_name.as_deref()),
                Cell::opt_text(c.label.as_deref()),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Int(0),
                Cell::text(c.name.as_str()),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Text(counter_unit_name(c.unit)),
                Cell::real(c.captured),
                Cell::real(Some(value)),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
            ]);
            emit(&cells)?;
        }
    }
    Ok(())
}

/// CSV with a header line of [`COLUMNS`].
pub fn write_csv(ds: &Dataset, names: &Names, rows: &[u32], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", COLUMNS.join(","))?;
    for_each_row(ds, names, rows, &mut |cells| {
        debug_assert_eq!(cells.len(), COLUMNS.len());
        for (k, c) in cells.iter().enumerate() {
            if k > 0 {
                out.write_all(b",")?;
            }
            c.write_csv(out)?;
        }
        out.write_all(b"\n")
    })
}

/// JSON lines: one object per row, keys [`COLUMNS`] in order.
pub fn write_jsonl(
    ds: &Dataset,
    names: &Names,
    rows: &[u32],
    out: &mut dyn Write,
) -> io::Result<()> {
    for_each_row(ds, names, rows, &mut |cells| {
        debug_assert_eq!(cells.len(), COLUMNS.len());
        out.write_all(b"{")?;
        for (k, (name, c)) in COLUMNS.iter().zip(cells).enumerate() {
            if k > 0 {
                out.write_all(b",")?;
            }
            write!(out, "\"{name}\":")?;
            c.write_json(out)?;
        }
        out.write_all(b"}\n")
    })
}
