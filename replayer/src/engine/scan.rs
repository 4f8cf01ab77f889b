//! One pass over the trace before replaying it: the facts the replay needs up front (capture
//! device, memory the host touches, frames, performance pools, trimming).

use std::collections::{HashMap, HashSet};

use ash::vk;
use format::record::{self, DeviceSummary, Record};
use format::TraceReader;

use crate::error::ReplayError;

/// Facts gathered by one pass over the trace before replaying it.
pub(crate) struct Scan {
    pub capture_device: Option<DeviceSummary>,
    /// Captured device -> the physical device it was created on (the `Device` record the layer
    /// writes just before each vkCreateDevice).
    pub capture_devices: HashMap<u64, DeviceSummary>,
    /// The distinct physical devices of the capture, in order of first use (more than one when
    /// the app's instances chose different GPUs).
    pub distinct_devices: Vec<DeviceSummary>,
    pub host_memories: HashSet<u64>,
    /// (frame index, host_ns of its end).
    pub frames: Vec<(u64, u64)>,
    pub first_call_ns: Option<u64>,
    pub calls: u64,
    pub application: String,
    /// `seq` of each performance pool's vkCreateQueryPool -> the counters the capture chose.
    pub perf_pools: HashMap<u64, Vec<record::PerfCounterDesc>>,
    /// Render pass begins that asked for per-region counters (VK_ARM_performance_counters_by_region).
    pub region_counters: u64,
    /// A trimmed trace: the frame its state snapshot rebuilds, and what the snapshot lacks.
    pub trimmed: Option<(u64, Vec<String>)>,
    /// Buffer or image -> the seq of its first creation (for errors about creations that the
    /// memory plan makes ahead of their call).
    pub created_at: HashMap<u64, u64>,
}

pub(super) fn trace_err(e: impl std::fmt::Display) -> ReplayError {
    ReplayError::Trace(e.to_string())
}

pub(super) fn scan(reader: &TraceReader) -> Result<Scan, ReplayError> {
    let header = reader.header();
    let mut s = Scan {
        capture_device: header.device.clone(),
        capture_devices: HashMap::new(),
        distinct_devices: header.device.iter().cloned().collect(),
        host_memories: HashSet::new(),
        frames: Vec::new(),
        first_call_ns: None,
        calls: 0,
        application: header.application.clone(),
        perf_pools: HashMap::new(),
        region_counters: 0,
        trimmed: None,
        created_at: HashMap::new(),
    };
    // Trace command id -> vkstream id, for the few commands the scan looks into.
    let mut interesting: HashMap<u32, u32> = HashMap::new();
    // Captured buffer -> memory, so memory holding query-copy destinations is known to be read
    // by the host (the replay reads it back) even when the app never maps it.
    let mut buffer_memory: HashMap<u64, u64> = HashMap::new();
    let mut seen_table = false;
    let mut last_seq = None;
    let mut in_snapshot = false;
    // The last `Device` record, for the vkCreateDevice that follows it.
    let mut pending_device: Option<DeviceSummary> = None;
    for rec in reader.records() {
        let rec = rec.map_err(|e| {
            ReplayError::Trace(match last_seq {
                Some(seq) => format!("{e} (after call {seq})"),
                None => e.to_string(),
            })
        })?;
        match rec {
            Record::CommandTable(names) => {
                seen_table = true;
                interesting = names
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| {
                        matches!(
                            n.as_str(),
                            "vkMapMemory"
                                | "vkCreateDevice"
                                | "vkBindBufferMemory"
                                | "vkBindBufferMemory2"
                                | "vkBindBufferMemory2KHR"
                                | "vkCreateBuffer"
                                | "vkCreateImage"
                        )
                    })
                    .filter_map(|(i, n)| vkstream::command_id(n).map(|id| (i as u32, id)))
                    .collect();
            }
            Record::Call(c) => {
                if !seen_table {
                    return Err(ReplayError::Trace(format!(
                        "{}: call {} comes before the command table; the trace is damaged",
                        reader.path().display(),
                        c.seq
                    )));
                }
                s.calls += 1;
                last_seq = Some(c.seq);
                s.first_call_ns.get_or_insert(c.host_ns);
                // Undecodable parameters are reported when the call is replayed.
                match interesting
                    .get(&c.cmd)
                    .map(|id| vkstream::decode_call(*id, &c.params))
                {
                    Some(Ok(vkstream::Call::vkMapMemory(p))) => {
                        s.host_memories.insert(p.memory);
                    }
                    Some(Ok(vkstream::Call::vkCreateDevice(p))) if c.result >= 0 => {
                        if let (Some(d), Some(summary)) = (p.p_device, pending_device.take()) {
                            s.capture_devices.insert(d, summary);
                        }
                    }
                    Some(Ok(vkstream::Call::vkCreateBuffer(
                        vkstream::params::vkCreateBuffer {
                            p_buffer: Some(h), ..
                        },
                    )))
                    | Some(Ok(vkstream::Call::vkCreateImage(vkstream::params::vkCreateImage {
                        p_image: Some(h),
                        ..
                    }))) => {
                        s.created_at.entry(h).or_insert(c.seq);
                    }
                    Some(Ok(vkstream::Call::vkBindBufferMemory(p))) => {
                        buffer_memory.insert(p.buffer, p.memory);
                    }
                    Some(Ok(
                        vkstream::Call::vkBindBufferMemory2(p)
                        | vkstream::Call::vkBindBufferMemory2KHR(p),
                    )) => {
                        for b in p.p_bind_infos.as_deref().unwrap_or(&[]) {
                            buffer_memory.insert(b.buffer, b.memory);
                        }
                    }
                    _ => {}
                }
            }
            // Contents in a trimmed trace's snapshot may be for memory the host cannot map: those
            // are uploaded through the GPU, so they do not need a host-visible replay type.
            Record::MemoryWrite(w) if !in_snapshot => {
                s.host_memories.insert(w.memory);
            }
            Record::StateBegin(b) => {
                in_snapshot = true;
                s.trimmed = Some((b.first_frame, Vec::new()));
            }
            Record::QueryCopy(q) => {
                if let Some(m) = buffer_memory.get(&q.dst_buffer) {
                    s.host_memories.insert(*m);
                }
            }
            Record::Frame(f) => s.frames.push((f.index, f.host_ns)),
            Record::QueryPool(p)
                if p.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() =>
            {
                s.perf_pools.insert(p.seq, p.perf_counters);
            }
            Record::RegionCounters(_) => s.region_counters += 1,
            Record::StateEnd(e) => {
                in_snapshot = false;
                // The snapshot's calls carry the times the app made them, long before; the
                // captured frames start here.
                s.first_call_ns = Some(e.host_ns);
                s.trimmed = Some((e.first_frame, e.gaps));
            }
            Record::Device(d) => {
                if s.capture_device.is_none() {
                    s.capture_device = Some(d.clone());
                }
                if !s.distinct_devices.iter().any(|o| same_physical(o, &d)) {
                    s.distinct_devices.push(d.clone());
                }
                pending_device = Some(d);
            }
            _ => {}
        }
    }
    Ok(s)
}

fn same_physical(a: &DeviceSummary, b: &DeviceSummary) -> bool {
    (
        a.device_uuid,
        &a.name,
        a.vendor_id,
        a.device_id,
        a.driver_version,
    ) == (
        b.device_uuid,
        &b.name,
        b.vendor_id,
        b.device_id,
        b.driver_version,
    )
}
