//! `quarry export` and the viewer's File → Export: every query and counter of the loaded files as
//! long ("tidy") CSV or JSON lines with one fixed schema ([`tidy`]), or the runs' timelines as
//! Chrome trace-event JSON for Perfetto ([`perfetto`]).
//!
//! Handles are written in hex (`0x…`), enums and flags by name, and objects by the debug-utils name
//! the application gave them (`DebugName` records of a trace among the inputs).

pub mod perfetto;
pub mod tidy;

use std::collections::HashMap;
use std::io::{self, Write};

use format::record::{Handle, Record};

use crate::data::Dataset;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Csv,
    Json,
    Perfetto,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "csv" => Ok(ExportFormat::Csv),
            "json" | "jsonl" => Ok(ExportFormat::Json),
            "perfetto" | "chrome" => Ok(ExportFormat::Perfetto),
            other => Err(format!(
                "unknown export format '{other}' (expected csv, json or perfetto)"
            )),
        }
    }
}

/// Debug-utils object names by handle (pools, command buffers, queues, render passes, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    by_handle: HashMap<Handle, String>,
}

impl Names {
    /// Names from `DebugName` records (the last name given to a handle wins, as in Vulkan).
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a Record>) -> Names {
        let mut n = Names::default();
        for r in records {
            if let Record::DebugName(d) = r {
                n.insert(d.handle, &d.name);
            }
        }
        n
    }

    /// The names the dataset's trace gave (`DebugName` records streamed with it), plus pool
    /// names (results files carry none: names come from the trace).
    pub fn of_dataset(ds: &Dataset) -> Names {
        let mut n = ds.names.clone();
        for p in &ds.pools {
            if let (None, Some(name)) = (n.get(p.handle), &p.name) {
                n.insert(p.handle, name);
            }
        }
        n
    }

    pub fn insert(&mut self, handle: Handle, name: &str) {
        if handle == 0 {
            return;
        }
        if name.is_empty() {
            // An empty name removes the object's name.
            self.by_handle.remove(&handle);
        } else {
            self.by_handle.insert(handle, name.to_owned());
        }
    }

    pub fn get(&self, handle: Handle) -> Option<&str> {
        self.by_handle.get(&handle).map(String::as_str)
    }

    /// `name (0x…)`, or the hex handle alone when it has no name.
    pub fn label(&self, handle: Handle) -> String {
        match self.get(handle) {
            Some(n) => format!("{n} ({})", hex(handle)),
            None => hex(handle),
        }
    }
}

/// A handle as exports write it: `0x` and lower-case hex.
pub fn hex(h: Handle) -> String {
    format!("{h:#x}")
}

/// Writes the query rows `rows` (indices into `ds.rows`) and every counter sample as CSV
/// ([`tidy::COLUMNS`]).
pub fn write_csv(ds: &Dataset, rows: &[u32], out: &mut dyn Write) -> io::Result<()> {
    tidy::write_csv(ds, &Names::of_dataset(ds), rows, out)
}

/// Writes the query rows `rows` and every counter sample as JSON lines ([`tidy::COLUMNS`]).
pub fn write_json(ds: &Dataset, rows: &[u32], out: &mut dyn Write) -> io::Result<()> {
    tidy::write_jsonl(ds, &Names::of_dataset(ds), rows, out)
}

/// Writes the runs' timelines as Chrome trace-event JSON (see [`perfetto`]).
pub fn write_perfetto(ds: &Dataset, out: &mut dyn Write) -> io::Result<()> {
    perfetto::write(ds, &Names::of_dataset(ds), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;
    use serde_json::Value;
    use std::path::PathBuf;

    fn ds() -> Dataset {
        let (h, r) = synth::results(60, 2, "gpu, \"quoted\"", 4);
        Dataset::from_records(vec![(PathBuf::from("a,b.qres"), h, r)])
    }

    #[test]
    fn csv_has_fixed_header_and_one_line_per_value_with_quoting() {
        let ds = ds();
        let rows: Vec<u32> = (0..ds.rows.len() as u32).collect();
        let mut buf = Vec::new();
        write_csv(&ds, &rows, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], tidy::COLUMNS.join(","));
        // 60 queries: 24 occlusion, 24 timestamps, 12 statistics of 3 values; 2 counters × 3 frames.
        let queries = lines[1..].iter().filter(|l| l.contains(",query,")).count();
        assert_eq!(queries, 24 + 24 + 12 * 3);
        assert_eq!(lines.len(), 1 + queries + 2 * 3);
        // The file label and device have commas and quotes: quoted fields.
        assert!(
            lines[1].starts_with("\"a,b.qres\",\"gpu, \"\"quoted\"\"\",query,"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn json_lines_and_perfetto_parse_back() {
        let ds = ds();
        let mut buf = Vec::new();
        write_json(&ds, &[3, 1], &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let rows: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[0]["query"], ds.rows[3].query);
        assert_eq!(rows[0]["pool"], hex(ds.pool_of(&ds.rows[3]).handle));
        assert!(rows.iter().any(|r| r["record"] == "counter"));
        let mut buf = Vec::new();
        write_perfetto(&ds, &mut buf).unwrap();
        let v: Value = serde_json::from_slice(&buf).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev.iter().filter(|e| e["ph"] == "X").count(), 60);
        assert!(ev
            .iter()
            .filter(|e| e["ph"] != "M")
            .all(|e| e["ts"].as_f64().unwrap() >= 0.0));
    }

    #[test]
    fn names_follow_the_last_debug_name() {
        let mut n = Names::default();
        n.insert(0xc0, "a");
        n.insert(0xc0, "b");
        n.insert(0, "null handle");
        assert_eq!(n.label(0xc0), "b (0xc0)");
        assert_eq!(n.label(0xc1), "0xc1");
        n.insert(0xc0, "");
        assert_eq!(n.get(0xc0), None);
    }
}
