//! `quarry dump FILE [--json] [--frame N]`: one record per line.

use std::collections::HashSet;
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
    m.insert(
        "result".into(),
        viewer::model::vk_result_name(c.result).into(),
    );
    m.insert("host_ns".into(), c.host_ns.into());
    m.insert("params_len".into(), c.params.len().into());
    match name.as_deref().map(|n| (n, vkstream::command_id(n))) {
        Some((_, Some(id))) => match vkstream::decode_call(id, &c.params) {
            Ok(call) => match serde_json::from_str::<Value>(&call.to_json()) {
                Ok(mut v) => {
                    // The handles the call names, in hex like everywhere else.
                    let mut handles = HashSet::new();
                    vkstream::handles::call_handles(&call, &mut |_, h, _| {
                        handles.insert(h);
                    });
                    hex_handle_values(&mut v, &handles);
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

/// Replaces numbers that are one of `handles` by hex strings, recursively.
fn hex_handle_values(v: &mut Value, handles: &HashSet<u64>) {
    match v {
        Value::Number(n) => {
            if let Some(h) = n.as_u64().filter(|h| handles.contains(h)) {
                *v = Value::String(format!("{h:#x}"));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| hex_handle_values(x, handles)),
        Value::Object(m) => m.values_mut().for_each(|x| hex_handle_values(x, handles)),
        _ => {}
    }
}

/// Record fields that hold handles (`format::record::Handle`), written as hex.
const HANDLE_FIELDS: [&str; 8] = [
    "device",
    "pool",
    "queue",
    "command_buffer",
    "command_buffers",
    "handle",
    "memory",
    "dst_buffer",
];

/// `VkObjectType` by name (the core types and the extension types traces name).
fn object_type_name(t: i64) -> String {
    const CORE: [&str; 26] = [
        "UNKNOWN",
        "INSTANCE",
        "PHYSICAL_DEVICE",
        "DEVICE",
        "QUEUE",
        "SEMAPHORE",
        "COMMAND_BUFFER",
        "FENCE",
        "DEVICE_MEMORY",
        "BUFFER",
        "IMAGE",
        "EVENT",
        "QUERY_POOL",
        "BUFFER_VIEW",
        "IMAGE_VIEW",
        "SHADER_MODULE",
        "PIPELINE_CACHE",
        "PIPELINE_LAYOUT",
        "RENDER_PASS",
        "PIPELINE",
        "DESCRIPTOR_SET_LAYOUT",
        "SAMPLER",
        "DESCRIPTOR_POOL",
        "DESCRIPTOR_SET",
        "FRAMEBUFFER",
        "COMMAND_POOL",
    ];
    let name = match t {
        0..=25 => CORE[t as usize],
        1_000_156_000 => "SAMPLER_YCBCR_CONVERSION",
        1_000_085_000 => "DESCRIPTOR_UPDATE_TEMPLATE",
        1_000_295_000 => "PRIVATE_DATA_SLOT",
        1_000_000_000 => "SURFACE_KHR",
        1_000_001_000 => "SWAPCHAIN_KHR",
        1_000_128_000 => "DEBUG_UTILS_MESSENGER_EXT",
        1_000_150_000 => "ACCELERATION_STRUCTURE_KHR",
        1_000_023_000 => "VIDEO_SESSION_KHR",
        1_000_023_001 => "VIDEO_SESSION_PARAMETERS_KHR",
        1_000_268_000 => "DEFERRED_OPERATION_KHR",
        _ => return format!("VkObjectType({t})"),
    };
    name.to_owned()
}

/// Handles as hex and enums and flags by name in a record's serde fields. `query` is whether
/// `flags` there are `VkQueryResultFlags` (query reads and copies).
fn name_fields(m: &mut Map<String, Value>, query: bool) {
    for (k, v) in m.iter_mut() {
        let as_int = v.as_i64();
        match (k.as_str(), as_int) {
            (k, _) if HANDLE_FIELDS.contains(&k) => hex_all(v),
            ("object_type", Some(t)) => *v = object_type_name(t).into(),
            ("query_type", Some(t)) => {
                *v = format::query::QueryKind::from_raw(t as i32).name().into()
            }
            ("result", Some(r)) => *v = viewer::model::vk_result_name(r as i32).into(),
            ("flags", Some(f)) if query => *v = viewer::model::result_flags_string(f as u32).into(),
            ("unit", Some(u)) => *v = format::query::counter_unit_word(u as u32).into(),
            ("scope", Some(s)) => *v = format::query::counter_scope_name(s as u32).into(),
            ("counter", _) | ("perf_counters", _) | ("captured", _) | ("replayed", _) => {
                for inner in objects(v) {
                    name_fields(inner, false);
                }
            }
            ("storage", Some(s)) => {
                *v = match s {
                    0 => "int32",
                    1 => "int64",
                    2 => "uint32",
                    3 => "uint64",
                    4 => "float32",
                    5 => "float64",
                    _ => "?",
                }
                .into()
            }
            ("kind", _) => {
                // QueryOp kinds, externally tagged: only a copy's flags are result flags.
                for (variant, inner) in objects(v).into_iter().flat_map(|o| o.iter_mut()) {
                    if let Value::Object(f) = inner {
                        name_fields(f, variant == "Copy");
                    }
                }
            }
            _ => {}
        }
    }
}

/// The objects in `v` (itself, or the elements of an array).
fn objects(v: &mut Value) -> Vec<&mut Map<String, Value>> {
    match v {
        Value::Object(m) => vec![m],
        Value::Array(items) => items.iter_mut().filter_map(Value::as_object_mut).collect(),
        _ => Vec::new(),
    }
}

fn hex_all(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(h) = n.as_u64() {
                *v = Value::String(format!("{h:#x}"));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(hex_all),
        // A results row's `device` names its handle inside.
        Value::Object(m) => name_fields(m, false),
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
            f.insert("memory".into(), format!("{:#x}", w.memory).into());
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
    let mut fields = fields;
    if !matches!(
        rec,
        Record::Call(_) | Record::CommandTable(_) | Record::MemoryWrite(_)
    ) {
        let query = matches!(
            rec,
            Record::QueryResults(_) | Record::QueryCopy(_) | Record::QueryResult(_)
        );
        name_fields(&mut fields, query);
    }
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
        assert!(text_line(&v).starts_with(
            "[2] Call seq=4 thread=1 name=vkCmdDraw cmd=1 result=VK_SUCCESS host_ns=9"
        ));
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
        assert_eq!(v["params"]["command_buffer"], "0x55", "{v}");
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
        // Handles in hex, enums and flags by name.
        assert_eq!(v["pool"], "0x3");
        assert_eq!(v["device"], "0x2");
        assert_eq!(v["flags"], "64");
        assert_eq!(v["result"], "VK_SUCCESS");
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

    #[test]
    fn record_enums_flags_and_handles_read_by_name() {
        let d = record_json(
            &Record::DebugName(DebugName {
                handle: 0xabc,
                object_type: 18,
                name: "shadow".into(),
            }),
            None,
            0,
        );
        assert_eq!(d["handle"], "0xabc");
        assert_eq!(d["object_type"], "RENDER_PASS");
        let op = |kind| {
            record_json(
                &Record::QueryOp(QueryOp {
                    seq: 1,
                    command_buffer: 0xc0,
                    pool: 0x10,
                    kind,
                    host_ns: 0,
                }),
                None,
                0,
            )
        };
        // A begin's flags are VkQueryControlFlags (PRECISE), left as they are; a copy's are
        // result flags.
        let b = op(QueryOpKind::Begin {
            query: 0,
            flags: 1,
            index: 0,
        });
        assert_eq!(b["kind"]["Begin"]["flags"], 1);
        assert_eq!(b["command_buffer"], "0xc0");
        let c = op(QueryOpKind::Copy {
            first: 0,
            count: 1,
            dst_buffer: 0xb0,
            dst_offset: 0,
            stride: 16,
            flags: 3,
        });
        assert_eq!(c["kind"]["Copy"]["flags"], "64|WAIT");
        assert_eq!(c["kind"]["Copy"]["dst_buffer"], "0xb0");
        let s = record_json(
            &Record::Submit(Submit {
                seq: 2,
                queue: 0xa0,
                queue_family: 0,
                command_buffers: vec![0xc0, 0xc1],
                host_ns: 0,
                frame: 0,
                counter_pass: None,
            }),
            None,
            0,
        );
        assert_eq!(s["command_buffers"], json!(["0xc0", "0xc1"]));
        assert!(text_line(&s).contains("queue=0xa0"), "{}", text_line(&s));
        let v = record_json(
            &Record::CounterValue(CounterValue {
                counter: PerfCounterDesc {
                    uuid: [1; 16],
                    name: "time".into(),
                    category: String::new(),
                    description: String::new(),
                    unit: 2,
                    storage: 5,
                    scope: 1,
                },
                pass: 0,
                frame: 0,
                command_buffer: 0xc0,
                render_pass: Some(0),
                value: 1.0,
                captured: None,
            }),
            None,
            0,
        );
        assert_eq!(v["counter"]["unit"], "nanoseconds");
        assert_eq!(v["counter"]["storage"], "float64");
        assert_eq!(v["counter"]["scope"], "render-pass");
        assert_eq!(v["command_buffer"], "0xc0");
    }
}
