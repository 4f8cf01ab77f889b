//! Query rules, in one place for the layer, the replayer, the viewer and the exports: what a query of
//! each `VkQueryType` holds, how `vkGetQueryPoolResults` / `vkCmdCopyQueryPoolResults` lay it out,
//! how those bytes decode, and how a captured value and a replayed one are classified.
//!
//! Plain integers only (the raw `VkQueryType`, `VkQueryResultFlags`, statistic masks), no Vulkan
//! bindings. Adding a query type: add a [`QueryKind`] variant and its raw value in [`QueryKind::from_raw`];
//! every `match` below is exhaustive, so the compiler names each rule the new type needs.
//!
//! Layout (Vulkan spec, "Query Operation"): for each query, `stride` bytes apart, the type's result
//! values, each 32 or 64 bits (`VK_QUERY_RESULT_64_BIT`), then one availability word
//! (`WITH_AVAILABILITY`) or one status word (`WITH_STATUS_KHR`) of the same width. Performance queries
//! (`VK_KHR_performance_query`) always use one 8-byte `VkPerformanceCounterResultKHR` per counter
//! and carry no availability word.

use std::fmt;

use serde::Serialize;

use crate::record::{DeviceSummary, QueryValues, QueueFamilySummary};

mod read;

pub use crate::record::QueryBegin;
pub use read::{classify_read, Classified, Multiview, ReadContext, ReadQuery};

/// `VK_QUERY_RESULT_64_BIT`.
pub const RESULT_64: u32 = 0x1;
/// `VK_QUERY_RESULT_WAIT_BIT`.
pub const RESULT_WAIT: u32 = 0x2;
/// `VK_QUERY_RESULT_WITH_AVAILABILITY_BIT`.
pub const RESULT_WITH_AVAILABILITY: u32 = 0x4;
/// `VK_QUERY_RESULT_PARTIAL_BIT`.
pub const RESULT_PARTIAL: u32 = 0x8;
/// `VK_QUERY_RESULT_WITH_STATUS_BIT_KHR`.
pub const RESULT_WITH_STATUS: u32 = 0x10;
/// `VK_QUERY_CONTROL_PRECISE_BIT` (a `vkCmdBeginQuery` flag).
pub const CONTROL_PRECISE: u32 = 0x1;
/// `VK_SUCCESS`.
const SUCCESS: i32 = 0;

/// A `VkQueryType`. Raw values no variant names stay [`QueryKind::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueryKind {
    Occlusion,
    PipelineStatistics,
    Timestamp,
    /// `VK_KHR_video_queue`: nothing but the status word.
    ResultStatusOnly,
    /// `VK_EXT_transform_feedback`: primitives written, primitives needed.
    TransformFeedbackStream,
    /// `VK_KHR_performance_query`: one counter result per counter of the pool.
    PerformanceQuery,
    AccelerationStructureCompactedSize,
    AccelerationStructureSerializationSize,
    AccelerationStructureCompactedSizeNv,
    /// `VK_INTEL_performance_query`: an opaque result read as one value.
    PerformanceQueryIntel,
    /// `VK_KHR_video_encode_queue` feedback (was the bitstream buffer range): read as one value,
    /// since the pool's enabled feedback flags are not recorded.
    VideoEncodeFeedback,
    MeshPrimitivesGenerated,
    PrimitivesGenerated,
    AccelerationStructureSerializationBottomLevelPointers,
    AccelerationStructureSize,
    MicromapSerializationSize,
    MicromapCompactedSize,
    Unknown(i32),
}

/// Every named kind, for tests and menus.
pub const KNOWN_KINDS: [QueryKind; 17] = [
    QueryKind::Occlusion,
    QueryKind::PipelineStatistics,
    QueryKind::Timestamp,
    QueryKind::ResultStatusOnly,
    QueryKind::TransformFeedbackStream,
    QueryKind::PerformanceQuery,
    QueryKind::AccelerationStructureCompactedSize,
    QueryKind::AccelerationStructureSerializationSize,
    QueryKind::AccelerationStructureCompactedSizeNv,
    QueryKind::PerformanceQueryIntel,
    QueryKind::VideoEncodeFeedback,
    QueryKind::MeshPrimitivesGenerated,
    QueryKind::PrimitivesGenerated,
    QueryKind::AccelerationStructureSerializationBottomLevelPointers,
    QueryKind::AccelerationStructureSize,
    QueryKind::MicromapSerializationSize,
    QueryKind::MicromapCompactedSize,
];

impl QueryKind {
    pub const fn from_raw(raw: i32) -> QueryKind {
        use QueryKind::*;
        match raw {
            0 => Occlusion,
            1 => PipelineStatistics,
            2 => Timestamp,
            1_000_023_000 => ResultStatusOnly,
            1_000_028_004 => TransformFeedbackStream,
            1_000_116_000 => PerformanceQuery,
            1_000_150_000 => AccelerationStructureCompactedSize,
            1_000_150_001 => AccelerationStructureSerializationSize,
            1_000_165_000 => AccelerationStructureCompactedSizeNv,
            1_000_210_000 => PerformanceQueryIntel,
            1_000_299_000 => VideoEncodeFeedback,
            1_000_328_000 => MeshPrimitivesGenerated,
            1_000_382_000 => PrimitivesGenerated,
            1_000_386_000 => AccelerationStructureSerializationBottomLevelPointers,
            1_000_386_001 => AccelerationStructureSize,
            1_000_396_000 => MicromapSerializationSize,
            1_000_396_001 => MicromapCompactedSize,
            other => Unknown(other),
        }
    }

    pub const fn raw(self) -> i32 {
        use QueryKind::*;
        match self {
            Occlusion => 0,
            PipelineStatistics => 1,
            Timestamp => 2,
            ResultStatusOnly => 1_000_023_000,
            TransformFeedbackStream => 1_000_028_004,
            PerformanceQuery => 1_000_116_000,
            AccelerationStructureCompactedSize => 1_000_150_000,
            AccelerationStructureSerializationSize => 1_000_150_001,
            AccelerationStructureCompactedSizeNv => 1_000_165_000,
            PerformanceQueryIntel => 1_000_210_000,
            VideoEncodeFeedback => 1_000_299_000,
            MeshPrimitivesGenerated => 1_000_328_000,
            PrimitivesGenerated => 1_000_382_000,
            AccelerationStructureSerializationBottomLevelPointers => 1_000_386_000,
            AccelerationStructureSize => 1_000_386_001,
            MicromapSerializationSize => 1_000_396_000,
            MicromapCompactedSize => 1_000_396_001,
            Unknown(raw) => raw,
        }
    }

    /// Stable upper-case name: the key of comparison summaries and CLI output.
    pub fn name(self) -> String {
        use QueryKind::*;
        let s = match self {
            Occlusion => "OCCLUSION",
            PipelineStatistics => "PIPELINE_STATISTICS",
            Timestamp => "TIMESTAMP",
            ResultStatusOnly => "RESULT_STATUS_ONLY",
            TransformFeedbackStream => "TRANSFORM_FEEDBACK_STREAM",
            PerformanceQuery => "PERFORMANCE_QUERY",
            AccelerationStructureCompactedSize => "AS_COMPACTED_SIZE",
            AccelerationStructureSerializationSize => "AS_SERIALIZATION_SIZE",
            AccelerationStructureCompactedSizeNv => "AS_COMPACTED_SIZE_NV",
            PerformanceQueryIntel => "PERFORMANCE_QUERY_INTEL",
            VideoEncodeFeedback => "VIDEO_ENCODE_FEEDBACK",
            MeshPrimitivesGenerated => "MESH_PRIMITIVES_GENERATED",
            PrimitivesGenerated => "PRIMITIVES_GENERATED",
            AccelerationStructureSerializationBottomLevelPointers => {
                "AS_SERIALIZATION_BLAS_POINTERS"
            }
            AccelerationStructureSize => "AS_SIZE",
            MicromapSerializationSize => "MICROMAP_SERIALIZATION_SIZE",
            MicromapCompactedSize => "MICROMAP_COMPACTED_SIZE",
            Unknown(raw) => return format!("QUERY_TYPE_{raw}"),
        };
        s.to_owned()
    }

    /// Human name for tables and exports.
    pub fn label(self) -> String {
        use QueryKind::*;
        let s = match self {
            Occlusion => "Occlusion",
            PipelineStatistics => "Pipeline statistics",
            Timestamp => "Timestamp",
            ResultStatusOnly => "Result status only",
            TransformFeedbackStream => "Transform feedback stream",
            PerformanceQuery => "Performance (KHR)",
            AccelerationStructureCompactedSize => "AS compacted size",
            AccelerationStructureSerializationSize => "AS serialization size",
            AccelerationStructureCompactedSizeNv => "AS compacted size (NV)",
            PerformanceQueryIntel => "Performance (INTEL)",
            VideoEncodeFeedback => "Video encode feedback",
            MeshPrimitivesGenerated => "Mesh primitives generated",
            PrimitivesGenerated => "Primitives generated",
            AccelerationStructureSerializationBottomLevelPointers => {
                "AS serialization BLAS pointers"
            }
            AccelerationStructureSize => "AS size",
            MicromapSerializationSize => "Micromap serialization size",
            MicromapCompactedSize => "Micromap compacted size",
            Unknown(raw) => return format!("VkQueryType({raw})"),
        };
        s.to_owned()
    }

    /// What each query of this kind writes before its availability/status word.
    pub fn slots(self) -> ValueSlots {
        use QueryKind::*;
        match self {
            PipelineStatistics => ValueSlots::Statistics,
            TransformFeedbackStream => ValueSlots::WrittenAndNeeded,
            PerformanceQuery => ValueSlots::Counters,
            ResultStatusOnly => ValueSlots::StatusOnly,
            Occlusion
            | Timestamp
            | AccelerationStructureCompactedSize
            | AccelerationStructureSerializationSize
            | AccelerationStructureCompactedSizeNv
            | PerformanceQueryIntel
            | VideoEncodeFeedback
            | MeshPrimitivesGenerated
            | PrimitivesGenerated
            | AccelerationStructureSerializationBottomLevelPointers
            | AccelerationStructureSize
            | MicromapSerializationSize
            | MicromapCompactedSize
            | Unknown(_) => ValueSlots::One,
        }
    }

    /// How a replayed value of this kind compares with the captured one.
    pub fn rule(self) -> Rule {
        use QueryKind::*;
        match self {
            Timestamp => Rule::Clock,
            PerformanceQuery | PerformanceQueryIntel => Rule::Measurement,
            Occlusion => Rule::Occlusion,
            // They count what the draws specify.
            PrimitivesGenerated
            | TransformFeedbackStream
            | MeshPrimitivesGenerated
            | ResultStatusOnly => Rule::Exact,
            // The spec lets invocation counts vary (vertex reuse, early fragment tests, clipping);
            // sizes and encoder feedback are the implementation's choice.
            PipelineStatistics
            | AccelerationStructureCompactedSize
            | AccelerationStructureSerializationSize
            | AccelerationStructureCompactedSizeNv
            | VideoEncodeFeedback
            | AccelerationStructureSerializationBottomLevelPointers
            | AccelerationStructureSize
            | MicromapSerializationSize
            | MicromapCompactedSize
            | Unknown(_) => Rule::ExactOnSameDevice,
        }
    }

    /// Whether results are `VkPerformanceCounterResultKHR`s: always 8 bytes, no availability word.
    fn counter_results(self) -> bool {
        self == QueryKind::PerformanceQuery
    }
}

/// The values one query writes, in the order the driver writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSlots {
    /// Nothing but the status word.
    StatusOnly,
    One,
    /// One per bit of the pool's `VkQueryPipelineStatisticFlags`, in bit order.
    Statistics,
    /// Primitives written, primitives needed.
    WrittenAndNeeded,
    /// One per counter of the pool.
    Counters,
}

/// What a pool's queries hold, as far as their results' layout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolShape {
    /// `VkQueryType` raw value.
    pub query_type: i32,
    /// `VkQueryPipelineStatisticFlags` of pipeline-statistics pools.
    pub pipeline_statistics: u32,
    /// Counters per query of performance pools.
    pub perf_counters: u32,
}

impl PoolShape {
    pub fn kind(&self) -> QueryKind {
        QueryKind::from_raw(self.query_type)
    }

    /// Result values per query, before the availability/status word.
    #[inline]
    pub fn values_per_query(&self) -> u32 {
        match self.kind().slots() {
            ValueSlots::StatusOnly => 0,
            ValueSlots::One => 1,
            ValueSlots::Statistics => self.pipeline_statistics.count_ones(),
            ValueSlots::WrittenAndNeeded => 2,
            ValueSlots::Counters => self.perf_counters,
        }
    }

    /// Bytes of one result element with these flags.
    pub fn element_bytes(&self, flags: u32) -> u64 {
        if self.kind().counter_results() || flags & RESULT_64 != 0 {
            8
        } else {
            4
        }
    }

    /// Whether an availability or status word follows the values.
    pub fn has_word(&self, flags: u32) -> bool {
        !self.kind().counter_results()
            && flags & (RESULT_WITH_AVAILABILITY | RESULT_WITH_STATUS) != 0
    }

    /// Bytes one query's results occupy with these flags.
    #[inline]
    pub fn bytes_per_query(&self, flags: u32) -> u64 {
        let words = u64::from(self.values_per_query()) + u64::from(self.has_word(flags));
        words * self.element_bytes(flags)
    }

    /// Bytes `count` queries occupy at `stride` (the last one needs no padding).
    pub fn bytes_for(&self, count: u32, stride: u64, flags: u32) -> u64 {
        match count {
            0 => 0,
            n => stride
                .saturating_mul(u64::from(n) - 1)
                .saturating_add(self.bytes_per_query(flags)),
        }
    }
}

/// One query decoded from results bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecodedQuery {
    pub values: Vec<u64>,
    /// The availability word, when the flags asked for one.
    pub availability: Option<u64>,
    /// The status word (`WITH_STATUS_KHR`), sign-extended: positive complete, negative error,
    /// zero not ready.
    pub status: Option<i64>,
    /// Whether the query's values are final: from the word when there is one, else from the
    /// read's `VkResult` (`VK_SUCCESS` means every query was available).
    pub available: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes end inside query `query` (relative to the first) of `count`.
    Truncated {
        query: u32,
        count: u32,
        needed: u64,
        len: usize,
    },
    /// Several queries with a stride smaller than one query's results or not a multiple of the
    /// element size (both invalid usage).
    BadStride {
        stride: u64,
        element: u64,
        per_query: u64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated {
                query,
                count,
                needed,
                len,
            } => write!(
                f,
                "{len} bytes hold fewer than {count} queries: query {query} needs bytes up to {needed}"
            ),
            DecodeError::BadStride {
                stride,
                element,
                per_query,
            } => write!(
                f,
                "invalid stride {stride}: one query needs {per_query} bytes of {element}-byte elements"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes `count` queries of a pool of `shape` from `data`, laid out with `stride` and `flags`;
/// `call_result` is the read's `VkResult` (a copy read back after its submit: `VK_SUCCESS`).
pub fn decode(
    shape: PoolShape,
    data: &[u8],
    count: u32,
    stride: u64,
    flags: u32,
    call_result: i32,
) -> Result<Vec<DecodedQuery>, DecodeError> {
    let element = shape.element_bytes(flags);
    let per_query = shape.bytes_per_query(flags);
    // A single query may come with any stride (apps pass the buffer size); more need room.
    if count > 1 && (stride < per_query || !stride.is_multiple_of(element)) {
        return Err(DecodeError::BadStride {
            stride,
            element,
            per_query,
        });
    }
    let read = |at: u64| -> u64 {
        let at = at as usize;
        if element == 8 {
            u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"))
        } else {
            u64::from(u32::from_le_bytes(
                data[at..at + 4].try_into().expect("4 bytes"),
            ))
        }
    };
    let n_values = u64::from(shape.values_per_query());
    let word = shape.has_word(flags);
    // The count comes from the file: reserve no more than the bytes can hold.
    let fits = data.len() as u64 / per_query.max(1) + 1;
    let mut out = Vec::with_capacity(u64::from(count).min(fits) as usize);
    for q in 0..count {
        let base = u64::from(q).saturating_mul(stride);
        let needed = base.saturating_add(per_query);
        if needed > data.len() as u64 {
            return Err(DecodeError::Truncated {
                query: q,
                count,
                needed,
                len: data.len(),
            });
        }
        let values = (0..n_values).map(|i| read(base + i * element)).collect();
        let w = word.then(|| read(base + n_values * element));
        let (availability, status) = match w {
            Some(w) if flags & RESULT_WITH_STATUS != 0 => {
                let s = if element == 8 {
                    w as i64
                } else {
                    i64::from(w as u32 as i32)
                };
                (None, Some(s))
            }
            Some(w) => (Some(w), None),
            None => (None, None),
        };
        let available = match (availability, status) {
            (_, Some(s)) => s > 0,
            (Some(a), None) => a != 0,
            (None, None) => call_result == SUCCESS,
        };
        out.push(DecodedQuery {
            values,
            availability,
            status,
            available,
        });
    }
    Ok(out)
}

// ---- timestamps ------------------------------------------------------------------------------

/// A raw timestamp masked to the queue family's `timestampValidBits`; `None` when the family
/// writes no timestamps (0 valid bits).
pub fn mask_timestamp(ticks: u64, valid_bits: u32) -> Option<u64> {
    match valid_bits {
        0 => None,
        64.. => Some(ticks),
        b => Some(ticks & ((1u64 << b) - 1)),
    }
}

/// A raw timestamp in ns: masked, scaled by the device's period (0 when the family has none).
pub fn timestamp_ns(ticks: u64, valid_bits: u32, period_ns: f32) -> f64 {
    mask_timestamp(ticks, valid_bits).unwrap_or(0) as f64 * f64::from(period_ns)
}

/// Ticks from `start` to `end`, both masked, counting one wrap of the valid-bit counter when
/// `end` is below `start`. Integer all the way: ticks near 2^60 lose whole microseconds in f64.
pub fn timestamp_delta_ticks(start: u64, end: u64, valid_bits: u32) -> Option<u64> {
    let s = mask_timestamp(start, valid_bits)?;
    let e = mask_timestamp(end, valid_bits)?;
    Some(e.wrapping_sub(s) & mask_of(valid_bits))
}

/// ns from `start` to `end` (see [`timestamp_delta_ticks`]), scaled after subtracting.
pub fn timestamp_delta_ns(start: u64, end: u64, valid_bits: u32, period_ns: f64) -> Option<f64> {
    Some(timestamp_delta_ticks(start, end, valid_bits)? as f64 * period_ns)
}

/// Signed ticks from `from` to `to` (masked), taking the shorter way round the wrap: for placing a
/// timestamp relative to a calibration sample that may come before or after it.
pub fn timestamp_offset_ticks(from: u64, to: u64, valid_bits: u32) -> Option<i64> {
    let d = timestamp_delta_ticks(from, to, valid_bits)?;
    let span = 1i128 << valid_bits.min(64);
    let d = i128::from(d);
    Some((if d >= span / 2 { d - span } else { d }) as i64)
}

fn mask_of(valid_bits: u32) -> u64 {
    if valid_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << valid_bits) - 1
    }
}

/// The valid bits of a device's timestamps when the queue family is not known: the fewest of
/// its families that write timestamps (64 when none says). Masking to fewer bits than a family
/// has still gives right differences (they wrap), where more bits would keep undefined ones.
pub fn device_valid_bits(families: &[QueueFamilySummary]) -> u32 {
    families
        .iter()
        .map(|f| f.timestamp_valid_bits)
        .filter(|b| *b > 0)
        .min()
        .unwrap_or(64)
}

/// How one queue's timestamps read: valid bits and the device's period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimestampClock {
    pub valid_bits: u32,
    pub period_ns: f64,
}

impl TimestampClock {
    /// A device's clock when the queue family is not known (see [`device_valid_bits`]).
    pub fn of_device(d: &DeviceSummary) -> TimestampClock {
        TimestampClock {
            valid_bits: device_valid_bits(&d.queue_families),
            period_ns: f64::from(d.timestamp_period_ns),
        }
    }

    /// ns from `start` to `end`: subtracted in masked integer ticks (the shorter way round a
    /// wrap, so an end written before its start reads negative), then scaled.
    pub fn delta_ns(&self, start: u64, end: u64) -> Option<f64> {
        Some(timestamp_offset_ticks(start, end, self.valid_bits)? as f64 * self.period_ns)
    }
}

/// A `VkPerformanceCounterUnitKHR` as its symbol (`ns`, `bytes`, ...; empty for generic).
pub fn counter_unit_name(unit: u32) -> &'static str {
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

/// A `VkPerformanceCounterUnitKHR` as a word for exports and tables (`nanoseconds`, ...; values
/// past the known ones as `unit_N`).
pub fn counter_unit_word(unit: u32) -> String {
    const NAMES: [&str; 11] = [
        "generic",
        "percentage",
        "nanoseconds",
        "bytes",
        "bytes_per_second",
        "kelvin",
        "watts",
        "volts",
        "amps",
        "hertz",
        "cycles",
    ];
    NAMES
        .get(unit as usize)
        .map_or_else(|| format!("unit_{unit}"), |s| (*s).to_owned())
}

/// A `VkPerformanceCounterScopeKHR` by name.
pub fn counter_scope_name(scope: u32) -> &'static str {
    match scope {
        0 => "command-buffer",
        1 => "render-pass",
        2 => "command",
        _ => "?",
    }
}

/// A `VkPerformanceCounterResultKHR` (8 raw bytes as a little-endian u64) as f64, read
/// according to the counter's `VkPerformanceCounterStorageKHR`.
pub fn counter_value(raw: u64, storage: u32) -> f64 {
    match storage {
        0 => raw as u32 as i32 as f64,
        1 => raw as i64 as f64,
        2 => raw as u32 as f64,
        4 => f64::from(f32::from_bits(raw as u32)),
        5 => f64::from_bits(raw),
        _ => raw as f64,
    }
}

// ---- comparison ------------------------------------------------------------------------------

/// How a kind's captured and replayed values relate (see [`QueryKind::rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Rule {
    /// Deterministic everywhere: any difference is a mismatch.
    Exact,
    /// Exact on the same device and driver, a variation elsewhere.
    ExactOnSameDevice,
    /// Zero vs non-zero is exact; counts are exact only for `PRECISE` queries on the same device
    /// and driver (without `PRECISE` any non-zero count is allowed).
    Occlusion,
    /// A clock value: never equal by meaning, never "match"; only masked ordering and deltas can
    /// be checked.
    Clock,
    /// A measurement (performance counters): a change is a variation.
    Measurement,
}

/// Why a query was not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum NotCompared {
    /// The app never got the value (not available when it read it).
    CapturedUnavailable,
    /// The trace holds no captured data, or less than the queries the read covers.
    CapturedMissing,
    /// A query after the first of a multiview begin that the replay left unavailable: the replay
    /// GPU put the whole result in the first query (its value is compared there).
    MultiviewInFirst,
}

impl NotCompared {
    pub fn reason(self) -> &'static str {
        match self {
            NotCompared::CapturedUnavailable => "not available to the app",
            NotCompared::CapturedMissing => "captured data missing or short",
            NotCompared::MultiviewInFirst => "multiview: result in first query",
        }
    }
}

/// The outcome of comparing one query read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// Every value equal (never for clock values).
    Match,
    /// A deterministic result differs: `--compare` fails.
    Mismatch,
    /// Values differ in a way the spec allows, or a measurement changed.
    Variation,
    /// A clock value (timestamps): not compared for equality.
    Clock,
    /// The capture had data but the replay never got the query available: counted as a failure.
    Unavailable,
    NotCompared(NotCompared),
}

impl Outcome {
    /// Whether this outcome fails `--compare` (and is highlighted in the viewer).
    pub fn fails(self) -> bool {
        matches!(self, Outcome::Mismatch | Outcome::Unavailable)
    }
}

/// What the classification knows about the two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// An occlusion query begun with `VK_QUERY_CONTROL_PRECISE_BIT`.
    pub precise: bool,
    /// Capture and replay on the same device and driver.
    pub same_device: bool,
}

impl Context {
    /// The strictest reading: for callers that know neither (the viewer), every difference a
    /// precise query replayed on the capture device would fail on is flagged.
    pub const STRICT: Context = Context {
        precise: true,
        same_device: true,
    };
}

/// Classifies one query: `captured` and `replayed` as read (`None`: no read).
pub fn classify(
    query_type: i32,
    captured: Option<&QueryValues>,
    replayed: Option<&QueryValues>,
    ctx: Context,
) -> Outcome {
    let Some(c) = captured.filter(|c| c.available) else {
        return Outcome::NotCompared(NotCompared::CapturedUnavailable);
    };
    let Some(r) = replayed.filter(|r| r.available) else {
        return Outcome::Unavailable;
    };
    classify_values(QueryKind::from_raw(query_type), &c.values, &r.values, ctx)
}

/// Classifies two available reads of one query.
pub fn classify_values(
    kind: QueryKind,
    captured: &[u64],
    replayed: &[u64],
    ctx: Context,
) -> Outcome {
    let rule = kind.rule();
    if rule == Rule::Clock {
        return Outcome::Clock;
    }
    if captured == replayed {
        return Outcome::Match;
    }
    let exact = |deterministic: bool| {
        if deterministic {
            Outcome::Mismatch
        } else {
            Outcome::Variation
        }
    };
    match rule {
        Rule::Exact => Outcome::Mismatch,
        Rule::ExactOnSameDevice => exact(ctx.same_device),
        Rule::Occlusion => {
            let zero = |v: &[u64]| v.iter().map(|x| *x == 0).collect::<Vec<_>>();
            if captured.len() != replayed.len() || zero(captured) != zero(replayed) {
                Outcome::Mismatch
            } else {
                exact(ctx.precise && ctx.same_device)
            }
        }
        Rule::Measurement => Outcome::Variation,
        Rule::Clock => Outcome::Clock,
    }
}
