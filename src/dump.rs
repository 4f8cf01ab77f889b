//! `quarry dump FILE [--json] [--frame N]`: one record per line.

use std::io::Write;
use std::path::PathBuf;

use format::record::{Call, Payload, Record};
use format::TraceReader;
use serde_json::{json, Map, Value};

use crate::output::{self, hex};

#[derive(clap::Args)]
pub struct Args {
    /// Trace or results file.
    file: PathBuf,
    /// JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Only the records of this frame (0-based).
    #[arg(long, value_name = "N")]
    frame: Option<u64>,
    #[command(flatten)]
    salvage: output::Salvage,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let reader = TraceReader::open(&args.file)?;
    let mut table = match args.frame {
        Some(_) => reader.command_table().ok().flatten(),
        None => None,
    };
    let mut records = match args.frame {
        Some(n) => reader.frame_records(n),
        None => reader.records(),
    };
    let mut out = output::stdout();
    let mut met = output::Met::default();
    let mut printed = 0u64;
    while let Some(rec) = records.next() {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                met.error(records.block_offset(), &e);
                continue;
            }
        };
        if let Record::CommandTable(t) = &rec {
            table = Some(t.clone());
        }
        let v = record_json(&rec, table.as_deref(), records.block_frame());
        if args.json {
            writeln!(out, "{v}")?;
        } else {
            writeln!(out, "{}", text_line(&v))?;
        }
        printed += 1;
    }
    output::flush(&mut out)?;
    if let (Some(n), 0) = (args.frame, printed) {
        let frames = reader.info().frames;
        crate::bad_input!(
            "{}: has no frame {n} (it has {frames} frame{})",
            args.file.display(),
            if frames == 1 { "" } else { "s" }
        )
    }
    output::judge(&reader.info(), reader.path(), &met, args.salvage)
}

/// A `Call` as JSON fields, its parameters decoded by the generated `vkstream` decoder. The trace's
/// own `CommandTable` names the command and the name picks this build's decoder, so traces written
/// against another registry version still decode; commands this build does not know, and bytes
/// that do not decode, stay opaque (hex plus the reason).
pub fn call_json(c: &Call, table: Option<&[String]>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("seq".into(), c.seq.into());
    m.insert("thread".into(), c.thread.into());
    m.insert("cmd".into(), c.cmd.into());
    let name = table.and_then(|t| t.get(c.cmd as usize)).cloned();
    m.insert("result".into(), c.result.into());
    m.insert("host_ns".into(), c.host_ns.into());
    m.insert("params_len".into(), c.params.len().into());
    match name.as_deref().map(|n| (n, vkstream::command_id(n))) {
        Some((_, Some(id))) => match vkstream::decode_call(id, &c.params) {
            Ok(call) => match serde_json::from_str::<Value>(&call.to_json()) {
                Ok(v) => {
                    m.insert("params".into(), v);
                }
                Err(e) => opaque(&mut m, c, &format!("decoder wrote invalid JSON: {e}")),
            },
            Err(e) => opaque(&mut m, c, &e.to_string()),
        },
        Some((_, None)) => opaque(&mut m, c, "command unknown to this build"),
        None => opaque(&mut m, c, "no command table entry"),
    }
    m.insert("name".into(), name.map(Value::from).unwrap_or(Value::Null));
    m
}

fn opaque(m: &mut Map<String, Value>, c: &Call, why: &str) {
    m.insert("params_hex".into(), hex(&c.params).into());
    m.insert("opaque".into(), why.into());
}

/// Field names whose byte arrays print as hex.
const BYTE_FIELDS: [&str; 7] = [
    "data",
    "uuid",
    "device_uuid",
    "pipeline_cache_uuid",
    "Inline",
    "params",
    "trace_id",
];

/// Replaces byte arrays under known field names by hex strings, recursively.
fn hexify(v: &mut Value, key: Option<&str>) {
    match v {
        Value::Array(items) => {
            let is_bytes = key.is_some_and(|k| BYTE_FIELDS.contains(&k))
                && items.iter().all(|x| x.as_u64().is_some_and(|n| n <= 255));
            if is_bytes {
                let bytes: Vec<u8> = items
                    .iter()
                    .filter_map(|x| x.as_u64())
                    .map(|n| n as u8)
                    .collect();
                *v = Value::String(hex(&bytes));
            } else {
                for x in items {
                    hexify(x, None);
                }
            }
        }
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                hexify(x, Some(k));
            }
        }
        _ => {}
    }
}

/// One record as a flat JSON object: `type`, `frame`, then the record's fields.
pub fn record_json(rec: &Record, table: Option<&[String]>, frame: u64) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), rec.type_name().into());
    m.insert("frame".into(), frame.into());
    let fields = match rec {
        Record::Call(c) => call_json(c, table),
        Record::CommandTable(names) => {
            let mut f = Map::new();
            f.insert("count".into(), names.len().into());
            f.insert("names".into(), json!(names));
            f
        }
        Record::MemoryWrite(w) => {
            let mut f = Map::new();
            f.insert("seq".into(), w.seq.into());
            f.insert("memory".into(), w.memory.into());
            f.insert("offset".into(), w.offset.into());
            match &w.data {
                Payload::Inline(d) => {
                    f.insert("len".into(), d.len().into());
                    f.insert("data".into(), hex(d).into());
                }
                Payload::Blob { id, len } => {
                    f.insert("len".into(), (*len).into());
                    f.insert("blob".into(), id.0.into());
                }
            }
            f
        }
        other => {
            let mut v = serde_json::to_value(other).unwrap_or(Value::Null);
            hexify(&mut v, None);
            // Externally tagged: {"Variant": inner}.
            match v {
                Value::Object(outer) => match outer.into_iter().next() {
                    Some((_, Value::Object(inner))) => inner,
                    Some((_, inner)) => {
                        let mut f = Map::new();
                        f.insert("value".into(), inner);
                        f
                    }
                    None => Map::new(),
                },
                other => {
                    let mut f = Map::new();
                    f.insert("value".into(), other);
                    f
                }
            }
        }
    };
    m.extend(fields);
    Value::Object(m)
}

/// `[frame] Type key=value ...`, long strings shortened.
pub fn text_line(v: &Value) -> String {
    let Value::Object(m) = v else {
        return v.to_string();
    };
    let mut s = format!(
        "[{}] {}",
        m.get("frame").map(|f| f.to_string()).unwrap_or_default(),
        m.get("type").and_then(Value::as_str).unwrap_or("?")
    );
    // serde_json maps are sorted; the identifying fields go first.
    const LEAD: [&str; 5] = ["seq", "thread", "name", "cmd", "result"];
    let lead = LEAD.iter().filter_map(|k| m.get_key_value(*k));
    let rest = m
        .iter()
        .filter(|(k, _)| !LEAD.contains(&k.as_str()) && *k != "type" && *k != "frame");
    for (k, x) in lead.chain(rest) {
        let text = match x {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        };
        let text = if text.chars().count() > 96 {
            let head: String = text.chars().take(64).collect();
            format!("{head}...({} chars)", text.chars().count())
        } else {
            text
        };
        if text.contains(' ') || text.is_empty() {
            s.push_str(&format!(" {k}={text:?}"));
        } else {
            s.push_str(&format!(" {k}={text}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::record::*;

    #[test]
    fn call_lines_name_the_command_and_count_params() {
        let c = Record::Call(Call {
            seq: 4,
            thread: 1,
            cmd: 1,
            host_ns: 9,
            result: 0,
            params: vec![1, 2, 3],
        });
        let table = vec!["vkA".to_string(), "vkCmdDraw".to_string()];
        let v = record_json(&c, Some(&table), 2);
        assert_eq!(v["name"], "vkCmdDraw");
        assert_eq!(v["params_len"], 3);
        assert_eq!(v["frame"], 2);
        // Three bytes are too short for vkCmdDraw: opaque, with the reason.
        assert_eq!(v["params_hex"], "010203");
        assert!(v["opaque"].is_string());
        assert!(text_line(&v)
            .starts_with("[2] Call seq=4 thread=1 name=vkCmdDraw cmd=1 result=0 host_ns=9"));
        let v = record_json(&c, None, 0);
        assert_eq!(v["name"], Value::Null);
        assert_eq!(v["opaque"], "no command table entry");
    }

    #[test]
    fn calls_decode_through_vkstream_by_name() {
        // vkCmdDraw: the command buffer handle (u64) then four u32s.
        let mut e = vkstream::Encoder::new();
        e.u64(0x55);
        for v in [3u32, 1, 0, 0] {
            e.u32(v);
        }
        let params = e.into_bytes();
        let call = |cmd| {
            Record::Call(Call {
                seq: 1,
                thread: 0,
                cmd,
                host_ns: 0,
                result: 0,
                params: params.clone(),
            })
        };
        // Index 7 in this trace's table, whatever vkstream's own id is.
        let mut table: Vec<String> = (0..7).map(|i| format!("vkUnknown{i}")).collect();
        table.push("vkCmdDraw".into());
        let v = record_json(&call(7), Some(&table), 0);
        assert!(v.get("opaque").is_none(), "{v}");
        assert_eq!(v["params"]["vertex_count"], 3, "{v}");
        assert_eq!(v["params"]["instance_count"], 1, "{v}");
        let u = record_json(&call(0), Some(&table), 0);
        assert_eq!(u["opaque"], "command unknown to this build");
        assert_eq!(u["params_hex"], hex(&params));
    }

    #[test]
    fn byte_fields_print_as_hex() {
        let r = Record::QueryResults(QueryResults {
            seq: 1,
            thread: 0,
            device: 2,
            pool: 3,
            first: 0,
            count: 1,
            stride: 8,
            flags: 1,
            result: 0,
            host_ns: 5,
            data: vec![0xde, 0xad, 0, 0, 0, 0, 0, 0],
        });
        let v = record_json(&r, None, 0);
        assert_eq!(v["data"], "dead000000000000");
        assert_eq!(v["pool"], 3);
        let n = record_json(
            &Record::Note(Note {
                host_ns: 1,
                message: "two words".into(),
            }),
            None,
            0,
        );
        assert_eq!(text_line(&n), "[0] Note host_ns=1 message=\"two words\"");
    }
}
