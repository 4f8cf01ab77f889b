//! `quarry info FILE [--json]`.

use std::io::Write;
use std::path::PathBuf;

use format::record::{DeviceSummary, FileKind};
use format::{Info, TraceReader};
use serde_json::{json, Value};

use crate::output::{self, human_bytes, utc, vk_version};

#[derive(clap::Args)]
pub struct Args {
    /// Trace or results file; without one, what this build can capture of the registry.
    file: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    salvage: output::Salvage,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(file) = &args.file else {
        return coverage(args.json);
    };
    let reader = TraceReader::open(file)?;
    let mut info = reader.info();
    if info.header.device.is_none() && info.record_counts.contains_key("Device") {
        // The capture layer learns the device after the header is written: the first Device
        // record names it.
        info.header.device = first_device(&reader);
    }
    let mut out = output::stdout();
    let replay = (info.kind == FileKind::Results)
        .then(|| replay_info(&reader))
        .flatten();
    let snapshot = info
        .record_counts
        .contains_key("StateBegin")
        .then(|| state_snapshot(&reader))
        .flatten();
    // What the trace's devices use of what they enable (a damaged trace: what could be read).
    let usage = (info.kind == FileKind::Trace)
        .then(|| replayer::portability::scan(&reader).ok())
        .flatten();
    let target = info
        .record_counts
        .contains_key("TargetProfile")
        .then(|| target_profile(&reader))
        .flatten();
    if args.json {
        let mut v = to_json(&info);
        if let Some(o) = v.as_object_mut() {
            let kinds: serde_json::Map<String, Value> = frame_boundaries(&reader, &info)
                .into_iter()
                .map(|(k, n)| (k.to_string(), json!(n)))
                .collect();
            o.insert("frame_boundaries".into(), Value::Object(kinds));
        }
        if let (Some(r), Some(o)) = (&replay, v.as_object_mut()) {
            let mut rv = serde_json::to_value(r).unwrap_or(Value::Null);
            // The capture device in the notation of the trace's own `device`.
            if let (Some(d), Some(m)) = (&r.capture_device, rv.as_object_mut()) {
                m.insert("capture_device".into(), device_json(d));
            }
            o.insert("replay".into(), rv);
        }
        if let (Some(sn), Some(o)) = (&snapshot, v.as_object_mut()) {
            o.insert(
                "state_snapshot".into(),
                serde_json::to_value(sn).unwrap_or(Value::Null),
            );
        }
        if let (Some(u), Some(o)) = (&usage, v.as_object_mut()) {
            o.insert("device_use".into(), usage_json(u));
        }
        if let (Some(t), Some(o)) = (&target, v.as_object_mut()) {
            o.insert("target".into(), json!({"name": t.name, "hash": t.hash}));
        }
        writeln!(out, "{v}")?;
    } else {
        write_text(&mut out, &reader, &info)?;
        if let Some(u) = &usage {
            write_usage(&mut out, u)?;
        }
        if let Some(sn) = &snapshot {
            writeln!(
                out,
                "trimmed:      starts at frame {} with a state snapshot ({} calls, {} objects, {} of memory)",
                sn.first_frame,
                sn.calls,
                sn.objects,
                human_bytes(sn.memory_bytes)
            )?;
            for g in &sn.gaps {
                writeln!(out, "  snapshot gap: {g}")?;
            }
        }
        if let Some(t) = &target {
            writeln!(
                out,
                "target:       {} (profile {}): captured showing the app what both GPUs offer",
                t.name, t.hash
            )?;
        }
        if let Some(r) = &replay {
            writeln!(
                out,
                "replayed:     {} ({} loop(s), {} counter pass(es))",
                r.trace, r.loops, r.passes
            )?;
        }
    }
    output::flush(&mut out)?;
    // What could be read is printed; a damaged file still exits with 2 (unless --salvage).
    output::judge(&info, reader.path(), &output::Met::default(), args.salvage)
}

/// Per device the trace creates: enabled extensions it never uses (`enabled_unused`), the ones it
/// uses with the first call that uses each (`used`), and the same for features.
fn usage_json(u: &replayer::portability::TraceUsage) -> Value {
    use replayer::portability::FeatureUse;
    let use_json = |name: String, at: &replayer::portability::Use| json!({"name": name, "seq": at.seq, "call": at.call, "what": at.what});
    let devices: Vec<Value> = u
        .devices
        .iter()
        .map(|d| {
            let mut features_unused = Vec::new();
            let mut features_used = Vec::new();
            let mut features_unknown = Vec::new();
            for (s, m) in &d.features {
                let name = format!("{s}.{m}");
                match d.feature_use(s, m) {
                    FeatureUse::Used(at) => features_used.push(use_json(name, at)),
                    FeatureUse::Unused => features_unused.push(json!(name)),
                    FeatureUse::Unknown => features_unknown.push(json!(name)),
                }
            }
            json!({
                "device": format!("{:#x}", d.device),
                "created_at": d.created_at,
                "enabled_unused": d.unused_extensions(),
                "enabled_unknown": d.unknown_extensions(),
                "used": d.used_extensions.iter().map(|(e, at)| use_json(e.clone(), at)).collect::<Vec<_>>(),
                "features_enabled_unused": features_unused,
                "features_used": features_used,
                "features_use_unknown": features_unknown,
            })
        })
        .collect();
    Value::Array(devices)
}

/// One line of unused and one of used extensions per device.
fn write_usage(out: &mut impl Write, u: &replayer::portability::TraceUsage) -> std::io::Result<()> {
    for d in &u.devices {
        let unused = d.unused_extensions();
        writeln!(
            out,
            "device {:#x}:  enables {} extension(s); unused: {}",
            d.device,
            d.extensions.len(),
            if unused.is_empty() {
                "none".to_string()
            } else {
                unused.join(", ")
            }
        )?;
        let used: Vec<String> = d
            .used_extensions
            .iter()
            .map(|(e, at)| format!("{e} ({} call {})", at.call, at.seq))
            .collect();
        writeln!(
            out,
            "  used: {}",
            if used.is_empty() {
                "none".to_string()
            } else {
                used.join(", ")
            }
        )?;
    }
    Ok(())
}

/// A results file's summary of the replay that wrote it (its last record), if readable.
fn replay_info(reader: &TraceReader) -> Option<format::record::ReplayInfo> {
    let mut found = None;
    for rec in reader.records() {
        match rec {
            Ok(format::record::Record::ReplayInfo(r)) => found = Some(r),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    found
}

/// The device profile a trace was captured for (`quarry capture --target`).
fn target_profile(reader: &TraceReader) -> Option<format::record::TargetProfile> {
    reader.records().find_map(|r| match r {
        Ok(format::record::Record::TargetProfile(t)) => Some(t),
        _ => None,
    })
}

/// The `StateEnd` of a trimmed trace (near the start of the file).
fn state_snapshot(reader: &TraceReader) -> Option<format::record::StateEnd> {
    for rec in reader.records() {
        match rec {
            Ok(format::record::Record::StateEnd(e)) => return Some(e),
            Ok(format::record::Record::Frame(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
    None
}

/// How many frames each boundary rule ended (`FrameBoundary` names), most first.
fn frame_boundaries(reader: &TraceReader, info: &Info) -> Vec<(&'static str, u64)> {
    use format::record::FrameBoundary as B;
    let mut counts: Vec<(&'static str, u64)> = Vec::new();
    if info.frames == 0 {
        return counts;
    }
    for rec in reader.records() {
        let Ok(format::record::Record::Frame(f)) = rec else {
            continue;
        };
        let name = match f.boundary {
            B::Present => "present",
            B::QueueWaitIdle => "queue_wait_idle",
            B::DeviceWaitIdle => "device_wait_idle",
            B::FenceWait => "fence_wait",
            B::End => "end",
            B::SemaphoreWait => "semaphore_wait",
            B::StatusPoll => "status_poll",
        };
        match counts.iter_mut().find(|(k, _)| *k == name) {
            Some((_, n)) => *n += 1,
            None => counts.push((name, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
}

/// A boundary rule's name in the text summary.
fn boundary_words(kind: &str, n: u64) -> &'static str {
    let one = n == 1;
    match (kind, one) {
        ("present", true) => "present",
        ("present", false) => "presents",
        ("queue_wait_idle", true) => "queue wait idle",
        ("queue_wait_idle", false) => "queue wait idles",
        ("device_wait_idle", true) => "device wait idle",
        ("device_wait_idle", false) => "device wait idles",
        ("fence_wait", true) => "fence wait",
        ("fence_wait", false) => "fence waits",
        ("semaphore_wait", true) => "semaphore wait",
        ("semaphore_wait", false) => "semaphore waits",
        ("status_poll", true) => "status poll",
        ("status_poll", false) => "status polls",
        _ => "end",
    }
}

fn kind_name(k: FileKind) -> &'static str {
    match k {
        FileKind::Trace => "trace",
        FileKind::Results => "results",
    }
}

fn ratio(info: &Info) -> f64 {
    if info.compressed_bytes == 0 {
        0.0
    } else {
        info.uncompressed_bytes as f64 / info.compressed_bytes as f64
    }
}

/// The first `Device` record that can be read.
fn first_device(reader: &TraceReader) -> Option<DeviceSummary> {
    reader.records().find_map(|r| match r {
        Ok(format::record::Record::Device(d)) => Some(d),
        _ => None,
    })
}

pub fn to_json(info: &Info) -> Value {
    let h = &info.header;
    json!({
        "kind": kind_name(info.kind),
        "format_version": format!("{}.{}", info.format_version.0, info.format_version.1),
        "writer": h.writer,
        "created_unix_ns": h.created_unix_ns,
        "application": h.application,
        "device": h.device.as_ref().map(device_json),
        "frames": info.frames,
        "records": info.records,
        "blocks": info.blocks,
        "record_blocks": info.record_blocks,
        "blob_blocks": info.blob_blocks,
        "record_counts": info.record_counts,
        "compressed_bytes": info.compressed_bytes,
        "uncompressed_bytes": info.uncompressed_bytes,
        "compression_ratio": ratio(info),
        "file_bytes": info.file_bytes,
        "lost_bytes": info.lost_bytes,
        "complete": info.complete,
        "recovered": info.recovered(),
        "damage": info.damage.iter().map(|d| json!({"offset": d.offset, "len": d.len, "problem": d.problem})).collect::<Vec<_>>(),
    })
}

fn device_json(d: &DeviceSummary) -> Value {
    let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert(
            "pipeline_cache_uuid".into(),
            output::hex(&d.pipeline_cache_uuid).into(),
        );
        m.insert("device_uuid".into(), output::hex(&d.device_uuid).into());
        m.insert("api_version_text".into(), vk_version(d.api_version).into());
    }
    v
}

fn queue_flags(f: u32) -> String {
    let names = [
        (1, "GRAPHICS"),
        (2, "COMPUTE"),
        (4, "TRANSFER"),
        (8, "SPARSE"),
        (16, "PROTECTED"),
    ];
    let mut parts: Vec<String> = names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let rest = f & !31;
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join("|")
    }
}

fn write_text(out: &mut impl Write, reader: &TraceReader, info: &Info) -> std::io::Result<()> {
    let h = &info.header;
    writeln!(out, "file:         {}", reader.path().display())?;
    writeln!(out, "kind:         {}", kind_name(info.kind))?;
    writeln!(
        out,
        "format:       {}.{}",
        info.format_version.0, info.format_version.1
    )?;
    writeln!(out, "writer:       {}", h.writer)?;
    writeln!(out, "created:      {}", utc(h.created_unix_ns))?;
    writeln!(out, "application:  {}", h.application)?;
    match &h.device {
        None => writeln!(out, "device:       unknown")?,
        Some(d) => {
            writeln!(
                out,
                "device:       {} (vendor {:#06x}, device {:#06x})",
                d.name, d.vendor_id, d.device_id
            )?;
            let driver = format!("{} {}", d.driver_name, d.driver_info);
            let driver = if driver.trim().is_empty() {
                "unknown"
            } else {
                driver.trim()
            };
            writeln!(
                out,
                "driver:       {} (id {}, version {:#x}), Vulkan {}",
                driver,
                d.driver_id,
                d.driver_version,
                vk_version(d.api_version)
            )?;
            writeln!(out, "device uuid:  {}", output::hex(&d.device_uuid))?;
            writeln!(out, "timestamp:    {} ns per tick", d.timestamp_period_ns)?;
            for (i, q) in d.queue_families.iter().enumerate() {
                writeln!(
                    out,
                    "queue family {i}: {} x{}, timestamp valid bits {}",
                    queue_flags(q.flags),
                    q.queue_count,
                    q.timestamp_valid_bits
                )?;
            }
            for (i, m) in d.memory_heaps.iter().enumerate() {
                writeln!(
                    out,
                    "memory heap {i}: {} flags {:#x}",
                    human_bytes(m.size),
                    m.flags
                )?;
            }
            for (i, m) in d.memory_types.iter().enumerate() {
                writeln!(
                    out,
                    "memory type {i}: heap {} flags {:#x}",
                    m.heap_index, m.property_flags
                )?;
            }
        }
    }
    writeln!(out, "records:      {}", info.records)?;
    let kinds = frame_boundaries(reader, info);
    if kinds.is_empty() {
        writeln!(out, "frames:       {}", info.frames)?;
    } else {
        let why: Vec<String> = kinds
            .iter()
            .map(|(k, n)| format!("{n} {}", boundary_words(k, *n)))
            .collect();
        writeln!(out, "frames:       {} ({})", info.frames, why.join(", "))?;
    }
    writeln!(
        out,
        "blocks:       {} ({} record, {} blob)",
        info.blocks, info.record_blocks, info.blob_blocks
    )?;
    writeln!(
        out,
        "size:         {} in file, {} compressed, {} uncompressed (ratio {:.2})",
        human_bytes(info.file_bytes),
        human_bytes(info.compressed_bytes),
        human_bytes(info.uncompressed_bytes),
        ratio(info)
    )?;
    writeln!(out, "lost bytes:   {}", info.lost_bytes)?;
    let complete = if info.complete {
        "yes"
    } else if info.recovered() {
        "no footer (the writer did not finish); every block written is intact"
    } else {
        "no (damaged)"
    };
    writeln!(out, "complete:     {complete}")?;
    for d in &info.damage {
        writeln!(
            out,
            "damage:       offset {}, {} bytes lost: {}",
            d.offset, d.len, d.problem
        )?;
    }
    writeln!(out, "record counts:")?;
    for (name, n) in &info.record_counts {
        writeln!(out, "  {name:<16} {n}")?;
    }
    Ok(())
}

/// `quarry info` without a file: the capturable share of the registry, from the generated tables,
/// and what the capture layer hides.
fn coverage(json: bool) -> anyhow::Result<()> {
    let c = vkstream::coverage::coverage();
    let mut out = output::stdout();
    let (platform, other): (Vec<_>, Vec<_>) = c
        .hidden
        .iter()
        .partition(|(_, why)| why.contains(": platform "));
    if json {
        let hidden: serde_json::Map<String, Value> = c
            .hidden
            .iter()
            .map(|(e, why)| (e.to_string(), json!(why)))
            .collect();
        let v = json!({
            "registry": c.registry,
            "commands": c.commands,
            "commands_total": c.commands_total,
            "extensions": c.extensions,
            "extensions_total": c.extensions_total,
            "hidden": hidden,
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    writeln!(out, "{}", c.line())?;
    writeln!(
        out,
        "hidden while capturing: {} extensions, {} of them platform-only ({})",
        c.hidden.len(),
        platform.len(),
        platform
            .iter()
            .map(|(e, _)| *e)
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    for (e, why) in other {
        writeln!(out, "  {e}: {why}")?;
    }
    Ok(())
}
