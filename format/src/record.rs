//! The records a trace or results file holds: plain serde data, no Vulkan dispatch.
//!
//! This module is the contract between the crates: the capture layer writes these, the replayer reads
//! trace records and writes results records, `quarry info`/`dump` and the viewer read both.
//! Vulkan handles are stored as the `u64` the capturing process saw; enums and flags as their raw
//! integer values (`VkQueryType`, `VkQueryResultFlags`, ...), so that this crate needs no Vulkan bindings.
//!
//! Compatibility rule (see FORMAT.md): variants and fields are only ever appended; a change that
//! alters the encoding of an existing variant bumps the format's major version.
//! `#[serde(with = "serde_bytes")]` on `Vec<u8>` fields only changes how serde hands the bytes to
//! bincode (one slice instead of one call per byte): bincode writes the same length prefix and
//! bytes, which `format/tests/byte_fields.rs` checks.

use serde::{Deserialize, Serialize};

/// A Vulkan handle value as seen by the capturing process (dispatchable handles as pointers).
pub type Handle = u64;

/// Content-addressed large payload stored in its own block (memory contents, uploads, read-backs).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobId(pub u64);

/// Bytes either inline in the record (small) or in a deduplicated blob block (large).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    Inline(#[serde(with = "serde_bytes")] Vec<u8>),
    Blob { id: BlobId, len: u64 },
}

/// What a file is.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Trace,
    Results,
}

/// Summary of the physical device a trace was captured on (or a results file replayed on).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct DeviceSummary {
    pub name: String,
    pub vendor_id: u32,
    pub device_id: u32,
    /// `VkDriverId` raw value, 0 when unknown.
    pub driver_id: u32,
    pub driver_name: String,
    pub driver_info: String,
    pub driver_version: u32,
    pub api_version: u32,
    pub pipeline_cache_uuid: [u8; 16],
    /// `VkPhysicalDeviceIDProperties::deviceUUID`, zero when unknown.
    pub device_uuid: [u8; 16],
    pub timestamp_period_ns: f32,
    pub queue_families: Vec<QueueFamilySummary>,
    pub memory_types: Vec<MemoryTypeSummary>,
    pub memory_heaps: Vec<MemoryHeapSummary>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct QueueFamilySummary {
    /// `VkQueueFlags`.
    pub flags: u32,
    pub queue_count: u32,
    pub timestamp_valid_bits: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MemoryTypeSummary {
    /// `VkMemoryPropertyFlags`.
    pub property_flags: u32,
    pub heap_index: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MemoryHeapSummary {
    pub size: u64,
    /// `VkMemoryHeapFlags`.
    pub flags: u32,
}

/// The file header (after the fixed magic/version prefix described in FORMAT.md).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Header {
    pub kind: FileKind,
    /// e.g. "quarry-capture 0.1.0".
    pub writer: String,
    /// Unix time in ns when the file was created.
    pub created_unix_ns: u64,
    /// The capture device (trace) or replay device (results); `None` when not known at creation.
    pub device: Option<DeviceSummary>,
    /// Name of the captured application (`VkApplicationInfo::pApplicationName` or the executable).
    pub application: String,
}

/// Why a frame ended.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameBoundary {
    Present,
    QueueWaitIdle,
    DeviceWaitIdle,
    FenceWait,
    /// The process exited (or the device was destroyed) with commands after the last boundary.
    End,
    /// A successful vkWaitSemaphores (a host wait on timeline semaphores), in an app without a
    /// swapchain, after a submit since the previous boundary.
    SemaphoreWait,
    /// A status poll (`vkGetSemaphoreCounterValue`, `vkGetFenceStatus`) that saw the latest submit's
    /// timeline signal or fence reached, in an app without a swapchain, after a submit since the
    /// previous boundary (wgpu polls instead of waiting when its work is already done).
    StatusPoll,
}

/// One record. New variants are appended at the end only.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Record {
    // ---- trace records -------------------------------------------------------------------
    /// Names of the encoded commands, index = `Call::cmd`. Written once before the first `Call`,
    /// so a trace stays decodable when a newer registry renumbers commands.
    CommandTable(Vec<String>),
    /// One API call; `params` is produced by the generated encoder in `vkstream`.
    Call(Call),
    /// Host writes into mapped memory, recorded before the GPU can read them.
    MemoryWrite(MemoryWrite),
    /// A frame ended (after the call that ended it).
    Frame(Frame),
    /// The capture device, when it became known (also in the header when known at creation).
    Device(DeviceSummary),
    /// A query pool was created.
    QueryPool(QueryPoolInfo),
    /// A query-affecting command (reset/begin/end/timestamp/copy), recorded or executed on the host.
    QueryOp(QueryOp),
    /// `vkGetQueryPoolResults`: what the app asked for and exactly the bytes it received.
    QueryResults(QueryResults),
    /// `vkCmdCopyQueryPoolResults` destination bytes, read back after the submit completed.
    QueryCopy(QueryCopy),
    /// First host time a query was seen available.
    QueryAvailable(QueryAvailable),
    /// A queue submission (Submit and Submit2 alike), with host time.
    Submit(Submit),
    /// GPU/host clock correlation from `vkGetCalibratedTimestamps*`.
    Calibration(Calibration),
    /// A debug-utils object name.
    DebugName(DebugName),
    /// A message from the writer (e.g. the layer stopped capturing after an internal error).
    Note(Note),

    // ---- results records -----------------------------------------------------------------
    /// What was replayed: the trace, passes and loops.
    ReplayInfo(ReplayInfo),
    /// One query: captured vs replayed.
    QueryResult(QueryResult),
    /// A performance counter description and its value in one pass.
    CounterValue(CounterValue),

    // ---- trace records (appended later) ---------------------------------------------------
    /// `VkRenderPassPerformanceCountersByRegionBeginInfoARM` chained to a render pass begin
    /// (VK_ARM_performance_counters_by_region, newer than the registry the encoders come from).
    RegionCounters(RegionCounters),
    /// The trace starts mid-run (trimmed capture): the records up to `StateEnd` are a state
    /// snapshot that rebuilds what the app had built when frame `first_frame` began.
    StateBegin(StateBegin),
    /// End of the state snapshot; frame `first_frame` of the capture follows.
    StateEnd(StateEnd),

    // ---- results records (appended later) -------------------------------------------------
    /// The trace a results file was replayed from (its first record; format 2.0).
    TraceIdentity(TraceIdentity),

    // ---- trace records (appended later) ---------------------------------------------------
    /// The capture showed the app only what both its GPU and this target device offer
    /// (`quarry capture --target`); written once, before the first `Device`.
    TargetProfile(TargetProfile),
}

impl Record {
    /// Stable human-readable name of the variant (used for per-type counts in `quarry info`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Record::CommandTable(_) => "CommandTable",
            Record::Call(_) => "Call",
            Record::MemoryWrite(_) => "MemoryWrite",
            Record::Frame(_) => "Frame",
            Record::Device(_) => "Device",
            Record::QueryPool(_) => "QueryPool",
            Record::QueryOp(_) => "QueryOp",
            Record::QueryResults(_) => "QueryResults",
            Record::QueryCopy(_) => "QueryCopy",
            Record::QueryAvailable(_) => "QueryAvailable",
            Record::Submit(_) => "Submit",
            Record::Calibration(_) => "Calibration",
            Record::DebugName(_) => "DebugName",
            Record::Note(_) => "Note",
            Record::ReplayInfo(_) => "ReplayInfo",
            Record::QueryResult(_) => "QueryResult",
            Record::CounterValue(_) => "CounterValue",
            Record::RegionCounters(_) => "RegionCounters",
            Record::StateBegin(_) => "StateBegin",
            Record::StateEnd(_) => "StateEnd",
            Record::TraceIdentity(_) => "TraceIdentity",
            Record::TargetProfile(_) => "TargetProfile",
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Call {
    /// Global call order across threads.
    pub seq: u64,
    pub thread: u32,
    /// Index into the `CommandTable`.
    pub cmd: u32,
    /// CLOCK_MONOTONIC ns when the call returned. The capture layer takes it from the TSC,
    /// scaled from CLOCK_MONOTONIC readings at frame ends, where the TSC is invariant (within
    /// tens of ns of the clock); submits, frames, results and availability read the clock itself.
    pub host_ns: u64,
    /// `VkResult` (0 for void commands).
    pub result: i32,
    /// Parameters, encoded by `vkstream`.
    #[serde(with = "serde_bytes")]
    pub params: Vec<u8>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MemoryWrite {
    pub seq: u64,
    pub memory: Handle,
    pub offset: u64,
    pub data: Payload,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Frame {
    /// 0-based index of the frame that ended.
    pub index: u64,
    /// `seq` of the last call in the frame.
    pub last_seq: u64,
    pub host_ns: u64,
    pub boundary: FrameBoundary,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PerfCounterDesc {
    pub uuid: [u8; 16],
    pub name: String,
    pub category: String,
    pub description: String,
    /// `VkPerformanceCounterUnitKHR`.
    pub unit: u32,
    /// `VkPerformanceCounterStorageKHR`.
    pub storage: u32,
    /// `VkPerformanceCounterScopeKHR`.
    pub scope: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QueryPoolInfo {
    pub seq: u64,
    pub device: Handle,
    pub pool: Handle,
    /// `VkQueryType` raw value.
    pub query_type: i32,
    pub query_count: u32,
    /// `VkQueryPipelineStatisticFlags` (pipeline statistics pools), else 0.
    pub pipeline_statistics: u32,
    /// Performance query pools: queue family and chosen counters.
    pub perf_queue_family: Option<u32>,
    pub perf_counters: Vec<PerfCounterDesc>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum QueryOpKind {
    /// `vkCmdResetQueryPool` (or host `vkResetQueryPool` when `command_buffer` is 0).
    Reset {
        first: u32,
        count: u32,
    },
    /// `vkCmdBeginQuery[IndexedEXT]`; `flags` is `VkQueryControlFlags`.
    Begin {
        query: u32,
        flags: u32,
        index: u32,
    },
    End {
        query: u32,
        index: u32,
    },
    /// `vkCmdWriteTimestamp[2]`; `stage` is the raw (64-bit for sync2) stage mask.
    Timestamp {
        query: u32,
        stage: u64,
        sync2: bool,
    },
    /// `vkCmdCopyQueryPoolResults`.
    Copy {
        first: u32,
        count: u32,
        dst_buffer: Handle,
        dst_offset: u64,
        stride: u64,
        flags: u32,
    },
    /// `vkCmdWriteAccelerationStructuresPropertiesKHR` and similar writes of one query.
    Write {
        query: u32,
    },
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QueryOp {
    pub seq: u64,
    /// 0 for host operations.
    pub command_buffer: Handle,
    pub pool: Handle,
    pub kind: QueryOpKind,
    pub host_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QueryResults {
    pub seq: u64,
    pub thread: u32,
    pub device: Handle,
    pub pool: Handle,
    pub first: u32,
    pub count: u32,
    pub stride: u64,
    /// `VkQueryResultFlags`.
    pub flags: u32,
    /// The `VkResult` returned to the app.
    pub result: i32,
    /// Host time the call returned.
    pub host_ns: u64,
    /// Exactly the bytes the app received (`dataSize` bytes).
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QueryCopy {
    /// `seq` of the `vkCmdCopyQueryPoolResults` call.
    pub seq: u64,
    pub command_buffer: Handle,
    pub pool: Handle,
    pub first: u32,
    pub count: u32,
    pub dst_buffer: Handle,
    pub dst_offset: u64,
    pub stride: u64,
    pub flags: u32,
    /// Host time the read-back happened (after the submit completed).
    pub host_ns: u64,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QueryAvailable {
    pub pool: Handle,
    pub query: u32,
    pub host_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Submit {
    pub seq: u64,
    pub queue: Handle,
    pub queue_family: u32,
    pub command_buffers: Vec<Handle>,
    pub host_ns: u64,
    /// Frame the submit belongs to.
    pub frame: u64,
    /// `VkPerformanceQuerySubmitInfoKHR::counterPassIndex`, when chained.
    pub counter_pass: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Calibration {
    pub device: Handle,
    /// Host CLOCK_MONOTONIC ns at the sample.
    pub host_ns: u64,
    /// GPU timestamp ticks (`VK_TIME_DOMAIN_DEVICE`).
    pub gpu_ticks: u64,
    pub max_deviation_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DebugName {
    pub handle: Handle,
    /// `VkObjectType`.
    pub object_type: i32,
    pub name: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Note {
    pub host_ns: u64,
    pub message: String,
}

/// Identity of a trace: xxh3-128 of its header and block headers (`TraceReader::identity`,
/// FORMAT.md "Trace identity"), little-endian.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceIdentity {
    pub trace_id: [u8; 16],
}

/// The device profile a capture was made for (`quarry capture --target`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TargetProfile {
    /// The target device's name, from the profile.
    pub name: String,
    /// FNV-1a 64 of `profile` as 16 hex digits (`layer_support::profile::DeviceProfile::hash`).
    pub hash: String,
    /// The profile, JSON of schema `quarry-device-profile` (FORMAT.md "Target profile").
    pub profile: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ReplayInfo {
    pub trace: String,
    /// The capture device, copied from the trace.
    pub capture_device: Option<DeviceSummary>,
    pub loops: u32,
    pub passes: u32,
    pub replay_ns: u64,
    pub capture_ns: u64,
    pub frames: u64,
}

/// Values of one query as read by `vkGetQueryPoolResults` (64-bit), one per result slot
/// (pipeline statistics: one per enabled bit, in bit order; transform feedback: written, needed).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct QueryValues {
    pub values: Vec<u64>,
    pub available: bool,
    /// `VkResult` of the read.
    pub result: i32,
    /// Host time the values were read / first seen available.
    pub host_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub pool: Handle,
    pub query: u32,
    /// `VkQueryType` raw value.
    pub query_type: i32,
    pub pipeline_statistics: u32,
    pub frame: u64,
    pub queue: Handle,
    pub command_buffer: Handle,
    /// Which replay loop and counter pass produced `replayed`.
    pub loop_index: u32,
    pub pass: u32,
    /// The `seq` of the capture's results call (or copy) this compares with.
    pub seq: u64,
    pub flags: u32,
    pub captured: Option<QueryValues>,
    pub replayed: Option<QueryValues>,
    /// Host times during the replay.
    pub submit_ns: u64,
    pub available_ns: u64,
    /// Timestamp queries: GPU time in ns (masked with valid bits, converted with the period).
    pub captured_gpu_ns: Option<f64>,
    pub replayed_gpu_ns: Option<f64>,
    /// How the trace began the query (appended in 2.0; FORMAT.md "Query begin"). `None`: not
    /// known, which is what results files written before the field decode to.
    #[serde(default, deserialize_with = "appended")]
    pub begin: Option<QueryBegin>,
    /// The device the query ran on (appended in 2.0; FORMAT.md "Query device"). `None`: not
    /// known, which is what results files written before the field decode to.
    #[serde(default, deserialize_with = "appended")]
    pub device: Option<QueryDevice>,
}

/// The captured device a query's pool belongs to. A trace may hold several devices, at once or
/// one after another, in one instance or several; the replay re-creates each of them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct QueryDevice {
    /// The trace's `VkDevice` handle.
    pub handle: Handle,
    /// Which of the trace's successful `vkCreateDevice` calls made it, from 0 (a driver may hand
    /// a later device the same handle).
    pub index: u32,
    /// The physical device the capture made it on (its `Device` record's name; empty when the
    /// trace has none). The replay GPU is the results file's header device.
    pub captured_on: String,
}

/// How a query was begun, as the trace says: its control flags and the multiview render pass
/// instance it was begun in.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueryBegin {
    /// `VkQueryControlFlags` of the `vkCmdBeginQuery[IndexedEXT]` (0 for timestamps and writes).
    pub flags: u32,
    /// View mask of the subpass or dynamic rendering the query was begun in (0 outside one, or
    /// without multiview). With N bits set, the begin uses queries `first..first + N`.
    pub view_mask: u32,
    /// The query index the app began: `query` itself, or where its multiview queries start.
    pub first: u32,
}

/// A field appended to a record after files were written without it, decoded as absent where the
/// record's bytes end before it. bincode cannot say why a read failed, so any bytes that do not
/// decode read as absent too: the field is the record's last, nothing after it depends on where
/// the read stopped, and the block's checksum already covers damage.
fn appended<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d).unwrap_or(None))
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CounterValue {
    pub counter: PerfCounterDesc,
    pub pass: u32,
    pub frame: u64,
    pub command_buffer: Handle,
    /// Render pass index within the command buffer, when scoped to render passes.
    pub render_pass: Option<u32>,
    /// Value as f64 whatever the storage (exact for integers below 2^53).
    pub value: f64,
    pub captured: Option<f64>,
}

/// Per-region performance counters asked for at a render pass begin (`vkCmdBeginRenderPass*` or
/// `vkCmdBeginRendering*` with `seq`): where the device writes each region's values and which
/// counters.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RegionCounters {
    pub seq: u64,
    pub command_buffer: Handle,
    /// `pCounterAddresses`: device addresses the values are written to.
    pub counter_addresses: Vec<u64>,
    pub serialize_regions: bool,
    /// `pCounterIndices`: indices into the queue family's by-region counter list.
    pub counter_indices: Vec<u32>,
}

/// Start of a state snapshot. What follows until `StateEnd`: the calls that created the objects
/// alive at the trim point (in their original order, with their original `seq`), the calls that
/// still define their state (memory bindings, descriptor updates, the last recording of every
/// command buffer, mappings), `QueryPool`/`DebugName` records, then `MemoryWrite`s with the
/// contents of host-visible memory and calls the layer made up (`thread` 0) to restore fence
/// states and image layouts.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StateBegin {
    /// Capture frame index the trace resumes at (frames are numbered from the app's first frame).
    pub first_frame: u64,
    pub host_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StateEnd {
    pub first_frame: u64,
    pub host_ns: u64,
    /// Calls in the snapshot (recorded and made up).
    pub calls: u64,
    /// Objects alive at the trim point.
    pub objects: u64,
    /// Bytes of memory contents in the snapshot.
    pub memory_bytes: u64,
    /// What the snapshot could not restore (e.g. contents of memory the host cannot map).
    pub gaps: Vec<String>,
}
