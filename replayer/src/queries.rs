//! Decoding the bytes of `vkGetQueryPoolResults` / `vkCmdCopyQueryPoolResults` into per-query values.
//!
//! Layout (Vulkan spec, "Query Operation"): for each query, at `stride` bytes apart, the query type's
//! result values, each 32 or 64 bits (`VK_QUERY_RESULT_64_BIT`), followed by one availability word
//! (`WITH_AVAILABILITY`) or one status word (`WITH_STATUS_KHR`) of the same width. Performance queries
//! always use one 8-byte `VkPerformanceCounterResultKHR` per counter and carry no availability word.

use ash::vk;

pub const RESULT_64: u32 = vk::QueryResultFlags::TYPE_64.as_raw();
pub const RESULT_WAIT: u32 = vk::QueryResultFlags::WAIT.as_raw();
pub const RESULT_AVAILABILITY: u32 = vk::QueryResultFlags::WITH_AVAILABILITY.as_raw();
pub const RESULT_PARTIAL: u32 = vk::QueryResultFlags::PARTIAL.as_raw();
pub const RESULT_STATUS: u32 = vk::QueryResultFlags::WITH_STATUS_KHR.as_raw();

/// What a pool's queries hold, as far as decoding their results needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolShape {
    /// `VkQueryType` raw value.
    pub query_type: i32,
    /// `VkQueryPipelineStatisticFlags` for pipeline-statistics pools.
    pub pipeline_statistics: u32,
    /// Counters per query for performance pools.
    pub perf_counters: u32,
}

impl PoolShape {
    /// Result values per query (before the availability/status word).
    pub fn values_per_query(&self) -> usize {
        match vk::QueryType::from_raw(self.query_type) {
            vk::QueryType::PIPELINE_STATISTICS => self.pipeline_statistics.count_ones() as usize,
            // Primitives written and primitives needed.
            vk::QueryType::TRANSFORM_FEEDBACK_STREAM_EXT => 2,
            vk::QueryType::PERFORMANCE_QUERY_KHR => self.perf_counters as usize,
            // Status-only queries hold nothing but the status word.
            vk::QueryType::RESULT_STATUS_ONLY_KHR => 0,
            _ => 1,
        }
    }

    fn is_perf(&self) -> bool {
        vk::QueryType::from_raw(self.query_type) == vk::QueryType::PERFORMANCE_QUERY_KHR
    }

    /// Bytes one query's results occupy with these flags.
    pub fn bytes_per_query(&self, flags: u32) -> usize {
        if self.is_perf() {
            return 8 * self.values_per_query();
        }
        let word = if flags & RESULT_64 != 0 { 8 } else { 4 };
        let extra = usize::from(flags & (RESULT_AVAILABILITY | RESULT_STATUS) != 0);
        word * (self.values_per_query() + extra)
    }
}

/// One query's decoded results.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decoded {
    pub values: Vec<u64>,
    pub available: bool,
}

/// Decodes `count` queries from `data` laid out with `stride` and `flags`.
///
/// `call_result` is the `VkResult` of the read: without an availability/status word, a query counts
/// as available only when the whole read returned `VK_SUCCESS`.
pub fn decode(
    data: &[u8],
    count: u32,
    stride: u64,
    flags: u32,
    shape: PoolShape,
    call_result: i32,
) -> Result<Vec<Decoded>, String> {
    let per = shape.bytes_per_query(flags);
    let stride = usize::try_from(stride).map_err(|_| format!("stride {stride} too large"))?;
    if count > 1 && stride < per {
        return Err(format!(
            "stride {stride} is smaller than one query's {per} bytes"
        ));
    }
    let n = count as usize;
    let need = if n == 0 {
        0
    } else {
        stride.saturating_mul(n - 1).saturating_add(per)
    };
    if data.len() < need {
        return Err(format!(
            "{} bytes hold fewer than {count} queries of {per} bytes at stride {stride} (need {need})",
            data.len()
        ));
    }
    let wide = flags & RESULT_64 != 0 || shape.is_perf();
    let word = if wide { 8 } else { 4 };
    let read = |at: usize| -> u64 {
        let b = &data[at..at + word];
        if wide {
            u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        } else {
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64
        }
    };
    let k = shape.values_per_query();
    let mut out = Vec::with_capacity(n);
    for q in 0..n {
        let base = q * stride;
        let values: Vec<u64> = (0..k).map(|i| read(base + i * word)).collect();
        let available = if shape.is_perf() {
            call_result == vk::Result::SUCCESS.as_raw()
        } else if flags & RESULT_STATUS != 0 {
            // Positive status = complete, negative = error, zero = not ready.
            let s = read(base + k * word);
            let s = if wide {
                s as i64
            } else {
                s as u32 as i32 as i64
            };
            s > 0
        } else if flags & RESULT_AVAILABILITY != 0 {
            read(base + k * word) != 0
        } else {
            call_result == vk::Result::SUCCESS.as_raw()
        };
        out.push(Decoded { values, available });
    }
    Ok(out)
}

/// A raw GPU timestamp in ns: masked to the queue family's valid bits, scaled by the device's period.
pub fn timestamp_ns(ticks: u64, valid_bits: u32, period_ns: f32) -> f64 {
    let masked = if valid_bits >= 64 {
        ticks
    } else if valid_bits == 0 {
        0
    } else {
        ticks & ((1u64 << valid_bits) - 1)
    };
    masked as f64 * period_ns as f64
}

/// A `VkPerformanceCounterResultKHR` (8 raw bytes read as a little-endian u64) as f64, read
/// according to the counter's `VkPerformanceCounterStorageKHR`.
pub fn counter_value(raw: u64, storage: u32) -> f64 {
    match storage {
        0 => raw as u32 as i32 as f64,
        1 => raw as i64 as f64,
        2 => raw as u32 as f64,
        4 => f32::from_bits(raw as u32) as f64,
        5 => f64::from_bits(raw),
        _ => raw as f64,
    }
}

/// Printable name of a `VkQueryType`.
pub fn type_name(query_type: i32) -> String {
    match vk::QueryType::from_raw(query_type) {
        vk::QueryType::OCCLUSION => "OCCLUSION".into(),
        vk::QueryType::PIPELINE_STATISTICS => "PIPELINE_STATISTICS".into(),
        vk::QueryType::TIMESTAMP => "TIMESTAMP".into(),
        vk::QueryType::TRANSFORM_FEEDBACK_STREAM_EXT => "TRANSFORM_FEEDBACK_STREAM".into(),
        vk::QueryType::PRIMITIVES_GENERATED_EXT => "PRIMITIVES_GENERATED".into(),
        vk::QueryType::MESH_PRIMITIVES_GENERATED_EXT => "MESH_PRIMITIVES_GENERATED".into(),
        vk::QueryType::PERFORMANCE_QUERY_KHR => "PERFORMANCE_QUERY".into(),
        vk::QueryType::RESULT_STATUS_ONLY_KHR => "RESULT_STATUS_ONLY".into(),
        vk::QueryType::ACCELERATION_STRUCTURE_COMPACTED_SIZE_KHR => "AS_COMPACTED_SIZE".into(),
        vk::QueryType::ACCELERATION_STRUCTURE_SERIALIZATION_SIZE_KHR => {
            "AS_SERIALIZATION_SIZE".into()
        }
        other => format!("QUERY_TYPE_{}", other.as_raw()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OCC: PoolShape = PoolShape {
        query_type: 0,
        pipeline_statistics: 0,
        perf_counters: 0,
    };

    #[test]
    fn occlusion_64_with_availability() {
        let mut data = Vec::new();
        for (v, a) in [(1234u64, 1u64), (0, 0), (u64::MAX, 1)] {
            data.extend_from_slice(&v.to_le_bytes());
            data.extend_from_slice(&a.to_le_bytes());
        }
        let d = decode(&data, 3, 16, RESULT_64 | RESULT_AVAILABILITY, OCC, 5).unwrap();
        assert_eq!(
            d[0],
            Decoded {
                values: vec![1234],
                available: true
            }
        );
        assert_eq!(
            d[1],
            Decoded {
                values: vec![0],
                available: false
            }
        );
        assert_eq!(d[2].values, vec![u64::MAX]);
    }

    #[test]
    fn pipeline_statistics_32_bit_with_padding_stride() {
        let shape = PoolShape {
            query_type: 1,
            pipeline_statistics: 0b1011,
            perf_counters: 0,
        };
        assert_eq!(shape.values_per_query(), 3);
        let mut data = vec![0u8; 32 * 2];
        for q in 0..2u32 {
            for i in 0..3u32 {
                let at = (q * 32 + i * 4) as usize;
                data[at..at + 4].copy_from_slice(&(q * 10 + i).to_le_bytes());
            }
        }
        // No availability flag and NOT_READY: values present, availability unknown = false.
        let d = decode(&data, 2, 32, 0, shape, vk::Result::NOT_READY.as_raw()).unwrap();
        assert_eq!(d[1].values, vec![10, 11, 12]);
        assert!(!d[1].available);
        let d = decode(&data, 2, 32, 0, shape, 0).unwrap();
        assert!(d[0].available);
    }

    #[test]
    fn transform_feedback_two_values_and_status_word() {
        let shape = PoolShape {
            query_type: 1000028004,
            pipeline_statistics: 0,
            perf_counters: 0,
        };
        let mut data = Vec::new();
        for w in [7u32, 9, (-1i32) as u32] {
            data.extend_from_slice(&w.to_le_bytes());
        }
        let d = decode(&data, 1, 12, RESULT_STATUS, shape, 0).unwrap();
        assert_eq!(d[0].values, vec![7, 9]);
        assert!(
            !d[0].available,
            "negative status is an error, not available"
        );
    }

    #[test]
    fn short_or_bad_layout_is_an_error() {
        assert_eq!(
            decode(&[0u8; 12], 2, 8, 0, OCC, 0).unwrap().len(),
            2,
            "last query needs no padding"
        );
        assert!(decode(&[0u8; 7], 2, 4, 0, OCC, 0).is_err());
        assert!(decode(&[0u8; 64], 2, 4, RESULT_64, OCC, 0)
            .unwrap_err()
            .contains("stride"));
        assert!(decode(&[], 0, 0, 0, OCC, 0).unwrap().is_empty());
    }

    #[test]
    fn counter_storage() {
        assert_eq!(counter_value((-5i32) as u32 as u64, 0), -5.0);
        assert_eq!(counter_value((-5i64) as u64, 1), -5.0);
        assert_eq!(counter_value(0xFFFF_FFFF_0000_0007, 2), 7.0);
        assert_eq!(counter_value(1.5f32.to_bits() as u64, 4), 1.5);
        assert_eq!(counter_value(2.25f64.to_bits(), 5), 2.25);
        assert_eq!(counter_value(42, 3), 42.0);
    }

    #[test]
    fn timestamps_masked_and_scaled() {
        assert_eq!(timestamp_ns(0xFF00_0000_0000_0010, 36, 1.0), 16.0);
        assert_eq!(timestamp_ns(100, 64, 2.5), 250.0);
        assert_eq!(timestamp_ns(100, 0, 1.0), 0.0);
    }
}
