//! Export of the query table (CSV, JSON) and of the timeline (Perfetto / Chrome trace events).

use std::io::{self, Write};

use serde_json::{json, Value};

use crate::data::Dataset;
use crate::table::{self, Col};
use crate::timeline::{captured_extent, replayed_extent};

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
            "json" => Ok(ExportFormat::Json),
            "perfetto" | "chrome" => Ok(ExportFormat::Perfetto),
            other => Err(format!(
                "unknown export format '{other}' (expected csv, json or perfetto)"
            )),
        }
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Writes `rows` (indices into `ds.rows`, in order) as CSV with the table's columns.
pub fn write_csv(ds: &Dataset, rows: &[u32], out: &mut dyn Write) -> io::Result<()> {
    let cols = table::columns(ds);
    let header: Vec<String> = cols
        .iter()
        .map(|c| csv_field(&table::title(ds, *c)))
        .collect();
    writeln!(out, "{}", header.join(","))?;
    for &i in rows {
        let line: Vec<String> = cols
            .iter()
            .map(|c| csv_field(&table::cell_text(ds, i as usize, *c)))
            .collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}

fn row_json(ds: &Dataset, i: usize) -> Value {
    let r = &ds.rows[i];
    let pool = ds.pool_of(r);
    let values = |v: &format::record::QueryValues| json!({"values": v.values, "available": v.available, "result": v.result});
    let replayed: Vec<Value> = ds
        .results
        .iter()
        .enumerate()
        .map(|(f, file)| {
            let rep = ds.replayed[f][i].as_ref();
            json!({
                "file": file.label,
                "values": rep.map(|r| values(&r.values)),
                "gpu_ns": rep.and_then(|r| r.gpu_ns),
                "diff": table::cell_text(ds, i, Col::Diff(f)),
            })
        })
        .collect();
    json!({
        "frame": r.frame,
        "queue": r.queue,
        "command_buffer": r.command_buffer,
        "pool": pool.handle,
        "pool_name": pool.name,
        "query": r.query,
        "type": crate::model::query_type_name(pool.query_type),
        "query_type": pool.query_type,
        "flags": r.flags,
        "seq": r.seq,
        "labels": crate::model::value_labels(pool.query_type, pool.pipeline_statistics, pool.perf_counters),
        "captured": r.captured.as_ref().map(values),
        "captured_gpu_ns": r.captured_gpu_ns,
        "replayed": replayed,
        "mismatch": ds.mismatch[i],
    })
}

/// Writes `rows` as a JSON document: `{"files": [...], "rows": [...]}`.
pub fn write_json(ds: &Dataset, rows: &[u32], out: &mut dyn Write) -> io::Result<()> {
    let files: Vec<Value> = ds
        .trace
        .iter()
        .chain(&ds.results)
        .map(|f| json!({"path": f.path.display().to_string(), "kind": format!("{:?}", f.header.kind)}))
        .collect();
    // Stream the rows: a million rows as one serde Value would double the memory.
    write!(
        out,
        "{{\"files\":{},\"rows\":[",
        serde_json::to_string(&files)?
    )?;
    for (k, &i) in rows.iter().enumerate() {
        if k > 0 {
            out.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *out, &row_json(ds, i as usize))?;
    }
    writeln!(out, "]}}")
}

/// Writes the timeline as Chrome trace-event JSON (opens in ui.perfetto.dev): one process for
/// the capture and one per replay, one track per pool, an async slice per query use from its
/// first event to first seen available.
pub fn write_perfetto(ds: &Dataset, out: &mut dyn Write) -> io::Result<()> {
    let lanes = crate::timeline::Lanes::build(ds);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let mut emit = |out: &mut dyn Write, v: Value| -> io::Result<()> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, &v)?;
        Ok(())
    };
    let sources: Vec<String> = std::iter::once("capture".to_owned())
        .chain(ds.results.iter().map(|f| format!("replay {}", f.label)))
        .collect();
    for (pid, name) in sources.iter().enumerate() {
        emit(
            out,
            json!({"ph": "M", "name": "process_name", "pid": pid + 1, "args": {"name": name}}),
        )?;
        for (t, pool) in ds.pools.iter().enumerate() {
            emit(
                out,
                json!({"ph": "M", "name": "thread_name", "pid": pid + 1, "tid": t + 1, "args": {"name": pool.label()}}),
            )?;
        }
    }
    let us = |ns: u64, origin: u64| ns.saturating_sub(origin) as f64 / 1000.0;
    for (i, r) in ds.rows.iter().enumerate() {
        let pool = ds.pool_of(r);
        let name = format!(
            "{} #{}",
            crate::model::query_type_name(pool.query_type),
            r.query
        );
        let mut spans = vec![(
            1usize,
            captured_extent(r),
            r.captured.as_ref().map(|c| c.values.clone()),
        )];
        for f in 0..ds.results.len() {
            spans.push((
                f + 2,
                replayed_extent(ds, f, i),
                ds.replayed[f][i].as_ref().map(|v| v.values.values.clone()),
            ));
        }
        for (pid, ext, values) in spans {
            let Some((s, e)) = ext else { continue };
            let o = lanes.origins[pid - 1];
            let common =
                json!({"cat": "query", "name": name, "id": i, "pid": pid, "tid": r.pool + 1});
            let mut b = common.clone();
            b["ph"] = "b".into();
            b["ts"] = us(s, o).into();
            b["args"] = json!({"frame": r.frame, "values": values, "mismatch": ds.mismatch[i]});
            emit(out, b)?;
            let mut en = common;
            en["ph"] = "e".into();
            en["ts"] = us(e, o).into();
            emit(out, en)?;
        }
    }
    out.write_all(b"\n]}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;
    use std::path::PathBuf;

    fn ds() -> Dataset {
        let (h, r) = synth::results(60, 2, "gpu, \"quoted\"", 4);
        Dataset::from_records(vec![(PathBuf::from("a,b.qres"), h, r)])
    }

    #[test]
    fn csv_has_header_and_one_line_per_row_with_quoting() {
        let ds = ds();
        let rows: Vec<u32> = (0..ds.rows.len() as u32).collect();
        let mut buf = Vec::new();
        write_csv(&ds, &rows, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 61);
        assert!(lines[0].starts_with("Frame,Queue,Cmd buffer,Pool,Index,Type,Flags,Value,"));
        // The file label has a comma, so its column titles are quoted.
        assert!(lines[0].contains("\"Replayed: a,b.qres\""), "{}", lines[0]);
    }

    #[test]
    fn json_and_perfetto_parse_back() {
        let ds = ds();
        let rows: Vec<u32> = vec![3, 1];
        let mut buf = Vec::new();
        write_json(&ds, &rows, &mut buf).unwrap();
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["rows"].as_array().unwrap().len(), 2);
        assert_eq!(v["rows"][0]["query"], ds.rows[3].query);
        let mut buf = Vec::new();
        write_perfetto(&ds, &mut buf).unwrap();
        let v: Value = serde_json::from_slice(&buf).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        let begins = ev.iter().filter(|e| e["ph"] == "b").count();
        let ends = ev.iter().filter(|e| e["ph"] == "e").count();
        assert_eq!((begins, ends), (120, 120));
        assert!(ev
            .iter()
            .filter(|e| e["ph"] == "b")
            .all(|e| e["ts"].as_f64().unwrap() >= 0.0));
    }
}
