//! Vulkan query vocabulary and decoding of raw `vkGetQueryPoolResults` bytes.
//!
//! Kept free of egui so the replayer and the CLI can reuse it: everything here works on the raw
//! integers the format stores (`VkQueryType`, `VkQueryResultFlags`, statistic bit masks).

use std::fmt;

pub const QUERY_TYPE_OCCLUSION: i32 = 0;
pub const QUERY_TYPE_PIPELINE_STATISTICS: i32 = 1;
pub const QUERY_TYPE_TIMESTAMP: i32 = 2;
pub const QUERY_TYPE_RESULT_STATUS_ONLY_KHR: i32 = 1_000_023_000;
pub const QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT: i32 = 1_000_028_004;
pub const QUERY_TYPE_PERFORMANCE_QUERY_KHR: i32 = 1_000_116_000;
pub const QUERY_TYPE_PRIMITIVES_GENERATED_EXT: i32 = 1_000_382_000;

pub const RESULT_64_BIT: u32 = 0x1;
pub const RESULT_WAIT: u32 = 0x2;
pub const RESULT_WITH_AVAILABILITY: u32 = 0x4;
pub const RESULT_PARTIAL: u32 = 0x8;
pub const RESULT_WITH_STATUS_KHR: u32 = 0x10;

/// Human name of a `VkQueryType` (registry 1.3.239), or the raw number when unknown.
pub fn query_type_name(ty: i32) -> String {
    let name = match ty {
        0 => "Occlusion",
        1 => "Pipeline statistics",
        2 => "Timestamp",
        1_000_023_000 => "Result status only",
        1_000_028_004 => "Transform feedback stream",
        1_000_116_000 => "Performance (KHR)",
        1_000_150_000 => "AS compacted size",
        1_000_150_001 => "AS serialization size",
        1_000_165_000 => "AS compacted size (NV)",
        1_000_210_000 => "Performance (INTEL)",
        1_000_299_000 => "Video encode bitstream range",
        1_000_328_000 => "Mesh primitives generated",
        1_000_382_000 => "Primitives generated",
        1_000_386_000 => "AS serialization BLAS pointers",
        1_000_386_001 => "AS size",
        1_000_396_000 => "Micromap serialization size",
        1_000_396_001 => "Micromap compacted size",
        other => return format!("VkQueryType({other})"),
    };
    name.to_owned()
}

/// Short names of the `VkQueryPipelineStatisticFlagBits`, indexed by bit position.
pub const PIPELINE_STATISTIC_NAMES: [&str; 14] = [
    "IA vertices",
    "IA primitives",
    "VS invocations",
    "GS invocations",
    "GS primitives",
    "Clip invocations",
    "Clip primitives",
    "FS invocations",
    "TCS patches",
    "TES invocations",
    "CS invocations",
    "Task invocations",
    "Mesh invocations",
    "Cluster culling invocations",
];

/// Name of one pipeline-statistics bit position.
pub fn pipeline_statistic_name(bit: u32) -> String {
    PIPELINE_STATISTIC_NAMES
        .get(bit as usize)
        .map(|s| (*s).to_owned())
        .unwrap_or_else(|| format!("Statistic bit {bit}"))
}

/// `VkQueryResultFlags` as `64|WAIT|AVAIL|...`, empty flags as `0`.
pub fn result_flags_string(flags: u32) -> String {
    const NAMES: [(u32, &str); 5] = [
        (RESULT_64_BIT, "64"),
        (RESULT_WAIT, "WAIT"),
        (RESULT_WITH_AVAILABILITY, "AVAIL"),
        (RESULT_PARTIAL, "PARTIAL"),
        (RESULT_WITH_STATUS_KHR, "STATUS"),
    ];
    let mut parts: Vec<String> = NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect();
    let rest = flags & !0x1f;
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        "0".to_owned()
    } else {
        parts.join("|")
    }
}

/// Name of a `VkResult` value the viewer is likely to meet.
pub fn vk_result_name(result: i32) -> String {
    let name = match result {
        0 => "VK_SUCCESS",
        1 => "VK_NOT_READY",
        2 => "VK_TIMEOUT",
        5 => "VK_INCOMPLETE",
        -1 => "VK_ERROR_OUT_OF_HOST_MEMORY",
        -2 => "VK_ERROR_OUT_OF_DEVICE_MEMORY",
        -4 => "VK_ERROR_DEVICE_LOST",
        other => return format!("VkResult({other})"),
    };
    name.to_owned()
}

/// How many result values one query of this type writes (before any availability/status word).
pub fn values_per_query(query_type: i32, pipeline_statistics: u32, perf_counters: usize) -> usize {
    match query_type {
        QUERY_TYPE_PIPELINE_STATISTICS => pipeline_statistics.count_ones() as usize,
        QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT => 2,
        QUERY_TYPE_PERFORMANCE_QUERY_KHR => perf_counters,
        _ => 1,
    }
}

/// Labels of the value slots of one query, in the order the driver writes them.
pub fn value_labels(
    query_type: i32,
    pipeline_statistics: u32,
    perf_counters: usize,
) -> Vec<String> {
    match query_type {
        QUERY_TYPE_PIPELINE_STATISTICS => (0..32)
            .filter(|b| pipeline_statistics & (1 << b) != 0)
            .map(pipeline_statistic_name)
            .collect(),
        QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT => {
            vec![
                "Primitives written".to_owned(),
                "Primitives needed".to_owned(),
            ]
        }
        QUERY_TYPE_PERFORMANCE_QUERY_KHR => {
            (0..perf_counters).map(|i| format!("Counter {i}")).collect()
        }
        QUERY_TYPE_TIMESTAMP => vec!["Ticks".to_owned()],
        QUERY_TYPE_OCCLUSION => vec!["Samples".to_owned()],
        _ => vec!["Value".to_owned()],
    }
}

/// Position of statistic `bit` within a pipeline-statistics query's values, if the pool counts it.
pub fn statistic_slot(pipeline_statistics: u32, bit: u32) -> Option<usize> {
    if bit >= 32 || pipeline_statistics & (1 << bit) == 0 {
        return None;
    }
    Some((pipeline_statistics & ((1u32 << bit) - 1)).count_ones() as usize)
}

/// Everything needed to decode one `vkGetQueryPoolResults` (or copy) buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultLayout {
    pub query_type: i32,
    pub pipeline_statistics: u32,
    /// Number of counters of a `VK_KHR_performance_query` pool (ignored otherwise).
    pub perf_counters: usize,
    pub flags: u32,
    pub count: u32,
    pub stride: u64,
}

/// One query decoded from the raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedQuery {
    pub values: Vec<u64>,
    /// The availability (or status) word when the flags asked for one.
    pub availability: Option<u64>,
}

impl DecodedQuery {
    /// Available when an availability word says so; without one, the caller must look at the
    /// call's `VkResult` (VK_SUCCESS means all queries were available).
    pub fn available(&self) -> Option<bool> {
        self.availability.map(|w| w != 0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends inside query `query` (relative to `first`).
    Truncated { query: u32, needed: u64, len: usize },
    /// A stride smaller than one query's results, or not a multiple of the element size.
    BadStride {
        stride: u64,
        element: u64,
        per_query: u64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { query, needed, len } => write!(
                f,
                "query results truncated: query {query} needs bytes up to {needed} but the buffer has {len}"
            ),
            DecodeError::BadStride { stride, element, per_query } => write!(
                f,
                "invalid stride {stride}: one query needs {per_query} bytes of {element}-byte elements"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes `layout.count` queries from `data` as the driver laid them out.
///
/// Element width is 8 bytes with `VK_QUERY_RESULT_64_BIT` and for performance queries (their
/// `VkPerformanceCounterResultKHR` is always 8 bytes), else 4. An availability/status word
/// follows the values when `WITH_AVAILABILITY` or `WITH_STATUS_KHR` is set.
pub fn decode_query_results(
    layout: &ResultLayout,
    data: &[u8],
) -> Result<Vec<DecodedQuery>, DecodeError> {
    let perf = layout.query_type == QUERY_TYPE_PERFORMANCE_QUERY_KHR;
    let element: u64 = if perf || layout.flags & RESULT_64_BIT != 0 {
        8
    } else {
        4
    };
    let n_values = values_per_query(
        layout.query_type,
        layout.pipeline_statistics,
        layout.perf_counters,
    );
    let has_avail =
        !perf && layout.flags & (RESULT_WITH_AVAILABILITY | RESULT_WITH_STATUS_KHR) != 0;
    let words = n_values as u64 + u64::from(has_avail);
    let per_query = words * element;
    // A single query may come with any stride (the app passes the buffer size); more need room.
    if layout.count > 1 && (layout.stride < per_query || !layout.stride.is_multiple_of(element)) {
        return Err(DecodeError::BadStride {
            stride: layout.stride,
            element,
            per_query,
        });
    }
    let read = |off: u64| -> u64 {
        let o = off as usize;
        if element == 8 {
            u64::from_le_bytes(data[o..o + 8].try_into().expect("8-byte slice"))
        } else {
            u64::from(u32::from_le_bytes(
                data[o..o + 4].try_into().expect("4-byte slice"),
            ))
        }
    };
    let mut out = Vec::with_capacity(layout.count as usize);
    for q in 0..layout.count {
        let base = u64::from(q) * layout.stride;
        let end = base + per_query;
        if end > data.len() as u64 {
            return Err(DecodeError::Truncated {
                query: q,
                needed: end,
                len: data.len(),
            });
        }
        let values = (0..n_values as u64)
            .map(|i| read(base + i * element))
            .collect();
        let availability = has_avail.then(|| read(base + n_values as u64 * element));
        out.push(DecodedQuery {
            values,
            availability,
        });
    }
    Ok(out)
}

/// Masks a raw timestamp to the queue family's `timestampValidBits`; `None` when the family has
/// no timestamps (0 valid bits).
pub fn mask_timestamp(ticks: u64, valid_bits: u32) -> Option<u64> {
    match valid_bits {
        0 => None,
        64.. => Some(ticks),
        b => Some(ticks & ((1u64 << b) - 1)),
    }
}

/// GPU time in ns between two masked timestamps, handling one wrap of the valid-bit counter.
pub fn timestamp_delta_ns(start: u64, end: u64, valid_bits: u32, period_ns: f64) -> Option<f64> {
    let s = mask_timestamp(start, valid_bits)?;
    let e = mask_timestamp(end, valid_bits)?;
    let ticks = if e >= s {
        e - s
    } else if valid_bits < 64 {
        // The counter wrapped once between the two writes.
        (1u64 << valid_bits) - s + e
    } else {
        return None;
    };
    Some(ticks as f64 * period_ns)
}

/// Compact rendering of a handle for tables (`0` stays `-`).
pub fn handle_string(h: u64) -> String {
    if h == 0 {
        "-".to_owned()
    } else {
        format!("{h:#x}")
    }
}

/// ns formatted with a unit that keeps 3-4 significant digits.
pub fn format_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(query_type: i32, stats: u32, flags: u32, count: u32, stride: u64) -> ResultLayout {
        ResultLayout {
            query_type,
            pipeline_statistics: stats,
            perf_counters: 0,
            flags,
            count,
            stride,
        }
    }

    fn bytes32(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn bytes64(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn occlusion_32bit_no_availability() {
        let d = decode_query_results(&layout(0, 0, 0, 3, 4), &bytes32(&[7, 8, 9])).unwrap();
        assert_eq!(
            d.iter().map(|q| q.values[0]).collect::<Vec<_>>(),
            vec![7, 8, 9]
        );
        assert!(d.iter().all(|q| q.availability.is_none()));
    }

    #[test]
    fn timestamp_64bit_with_availability_and_padding_stride() {
        // Stride 24: value, availability, 8 bytes of padding the decoder must skip.
        let data = bytes64(&[1 << 40, 1, 0xdead, 5, 0, 0xbeef]);
        let d = decode_query_results(
            &layout(2, 0, RESULT_64_BIT | RESULT_WITH_AVAILABILITY, 2, 24),
            &data,
        )
        .unwrap();
        assert_eq!(d[0].values, vec![1 << 40]);
        assert_eq!(d[0].available(), Some(true));
        assert_eq!(d[1].values, vec![5]);
        assert_eq!(d[1].available(), Some(false));
    }

    #[test]
    fn pipeline_statistics_one_value_per_set_bit() {
        // Bits 0, 2 and 7: IA vertices, VS invocations, FS invocations; 32-bit + availability.
        let stats = 0b1000_0101;
        let data = bytes32(&[10, 20, 30, 1, 11, 21, 31, 0]);
        let d = decode_query_results(&layout(1, stats, RESULT_WITH_AVAILABILITY, 2, 16), &data)
            .unwrap();
        assert_eq!(d[0].values, vec![10, 20, 30]);
        assert_eq!(d[1].values, vec![11, 21, 31]);
        assert_eq!(d[1].available(), Some(false));
        assert_eq!(
            value_labels(1, stats, 0),
            vec!["IA vertices", "VS invocations", "FS invocations"]
        );
        assert_eq!(statistic_slot(stats, 7), Some(2));
        assert_eq!(statistic_slot(stats, 1), None);
    }

    #[test]
    fn transform_feedback_has_two_values() {
        let d = decode_query_results(
            &layout(
                QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT,
                0,
                RESULT_64_BIT,
                1,
                16,
            ),
            &bytes64(&[3, 4]),
        )
        .unwrap();
        assert_eq!(d[0].values, vec![3, 4]);
    }

    #[test]
    fn performance_query_elements_are_8_bytes_without_64_bit_flag() {
        let l = ResultLayout {
            perf_counters: 2,
            ..layout(QUERY_TYPE_PERFORMANCE_QUERY_KHR, 0, 0, 1, 16)
        };
        let d = decode_query_results(&l, &bytes64(&[u64::MAX, 42])).unwrap();
        assert_eq!(d[0].values, vec![u64::MAX, 42]);
        assert_eq!(d[0].availability, None);
    }

    #[test]
    fn truncated_and_bad_stride_are_errors() {
        let err = decode_query_results(&layout(0, 0, RESULT_64_BIT, 2, 8), &[0u8; 12]).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Truncated {
                query: 1,
                needed: 16,
                len: 12
            }
        );
        let err = decode_query_results(
            &layout(0, 0, RESULT_64_BIT | RESULT_WITH_AVAILABILITY, 2, 8),
            &[0u8; 32],
        )
        .unwrap_err();
        assert!(
            matches!(err, DecodeError::BadStride { per_query: 16, .. }),
            "{err}"
        );
        // One query with stride 0 is what apps pass for a single result.
        assert!(decode_query_results(&layout(0, 0, 0, 1, 0), &[1, 0, 0, 0]).is_ok());
    }

    #[test]
    fn timestamps_are_masked_and_wrap() {
        assert_eq!(mask_timestamp(0xffff_0000_0000_0010, 36), Some(0x10));
        assert_eq!(mask_timestamp(5, 0), None);
        assert_eq!(timestamp_delta_ns(100, 300, 64, 2.5), Some(500.0));
        // 8 valid bits: 250 -> 4 wraps through 256: 10 ticks.
        assert_eq!(timestamp_delta_ns(250, 4, 8, 1.0), Some(10.0));
    }

    #[test]
    fn names() {
        assert_eq!(query_type_name(2), "Timestamp");
        assert_eq!(query_type_name(77), "VkQueryType(77)");
        assert_eq!(
            result_flags_string(RESULT_64_BIT | RESULT_WITH_AVAILABILITY),
            "64|AVAIL"
        );
        assert_eq!(result_flags_string(0), "0");
        assert_eq!(format_ns(1_500_000.0), "1.500 ms");
    }
}
