//! Vulkan query vocabulary for tables: names, labels and formatting.
//!
//! Kept free of egui. The query rules themselves (values per query, result layout, decoding,
//! timestamps, comparison) live in [`format::query`]; the names below are the viewer's handles on them.

use format::query::{PoolShape, QueryKind, ValueSlots};

pub const QUERY_TYPE_OCCLUSION: i32 = QueryKind::Occlusion.raw();
pub const QUERY_TYPE_PIPELINE_STATISTICS: i32 = QueryKind::PipelineStatistics.raw();
pub const QUERY_TYPE_TIMESTAMP: i32 = QueryKind::Timestamp.raw();
pub const QUERY_TYPE_RESULT_STATUS_ONLY_KHR: i32 = QueryKind::ResultStatusOnly.raw();
pub const QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT: i32 = QueryKind::TransformFeedbackStream.raw();
pub const QUERY_TYPE_PERFORMANCE_QUERY_KHR: i32 = QueryKind::PerformanceQuery.raw();
pub const QUERY_TYPE_PRIMITIVES_GENERATED_EXT: i32 = QueryKind::PrimitivesGenerated.raw();

pub use format::query::{
    RESULT_64 as RESULT_64_BIT, RESULT_PARTIAL, RESULT_WAIT, RESULT_WITH_AVAILABILITY,
    RESULT_WITH_STATUS as RESULT_WITH_STATUS_KHR,
};

/// Human name of a `VkQueryType`, or the raw number when unknown.
pub fn query_type_name(ty: i32) -> String {
    QueryKind::from_raw(ty).label()
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

fn shape(query_type: i32, pipeline_statistics: u32, perf_counters: usize) -> PoolShape {
    PoolShape {
        query_type,
        pipeline_statistics,
        perf_counters: u32::try_from(perf_counters).unwrap_or(u32::MAX),
    }
}

/// How many result values one query of this type writes (before any availability/status word).
pub fn values_per_query(query_type: i32, pipeline_statistics: u32, perf_counters: usize) -> usize {
    shape(query_type, pipeline_statistics, perf_counters).values_per_query() as usize
}

/// Labels of the value slots of one query, in the order the driver writes them.
pub fn value_labels(
    query_type: i32,
    pipeline_statistics: u32,
    perf_counters: usize,
) -> Vec<String> {
    let kind = QueryKind::from_raw(query_type);
    match kind.slots() {
        ValueSlots::StatusOnly => Vec::new(),
        ValueSlots::Statistics => (0..32)
            .filter(|b| pipeline_statistics & (1 << b) != 0)
            .map(pipeline_statistic_name)
            .collect(),
        ValueSlots::WrittenAndNeeded => {
            vec![
                "Primitives written".to_owned(),
                "Primitives needed".to_owned(),
            ]
        }
        ValueSlots::Counters => (0..perf_counters).map(|i| format!("Counter {i}")).collect(),
        ValueSlots::One if kind == QueryKind::Timestamp => vec!["Ticks".to_owned()],
        ValueSlots::One if kind == QueryKind::Occlusion => vec!["Samples".to_owned()],
        ValueSlots::One => vec!["Value".to_owned()],
    }
}

/// Position of statistic `bit` within a pipeline-statistics query's values, if the pool counts it.
pub fn statistic_slot(pipeline_statistics: u32, bit: u32) -> Option<usize> {
    if bit >= 32 || pipeline_statistics & (1 << bit) == 0 {
        return None;
    }
    Some((pipeline_statistics & ((1u32 << bit) - 1)).count_ones() as usize)
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

    #[test]
    fn labels_follow_the_shared_value_slots() {
        // Bits 0, 2 and 7: IA vertices, VS invocations, FS invocations.
        let stats = 0b1000_0101;
        assert_eq!(
            value_labels(1, stats, 0),
            vec!["IA vertices", "VS invocations", "FS invocations"]
        );
        assert_eq!(values_per_query(1, stats, 0), 3);
        assert_eq!(statistic_slot(stats, 7), Some(2));
        assert_eq!(statistic_slot(stats, 1), None);
        assert_eq!(
            value_labels(QUERY_TYPE_TRANSFORM_FEEDBACK_STREAM_EXT, 0, 0).len(),
            2
        );
        assert_eq!(
            value_labels(QUERY_TYPE_PERFORMANCE_QUERY_KHR, 0, 2).len(),
            2
        );
        // Status-only queries write no value (the viewer used to give them one).
        assert_eq!(values_per_query(QUERY_TYPE_RESULT_STATUS_ONLY_KHR, 0, 0), 0);
        assert!(value_labels(QUERY_TYPE_RESULT_STATUS_ONLY_KHR, 0, 0).is_empty());
        assert_eq!(value_labels(2, 0, 0), vec!["Ticks"]);
        assert_eq!(value_labels(1_000_150_000, 0, 0), vec!["Value"]);
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
