//! The query rules of `format::query`, one table row per query type.

use format::query::*;
use format::record::QueryValues;

fn shape(kind: QueryKind, stats: u32, counters: u32) -> PoolShape {
    PoolShape {
        query_type: kind.raw(),
        pipeline_statistics: stats,
        perf_counters: counters,
    }
}

fn bytes32(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn bytes64(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// (kind, statistics mask, counters, values per query, name, rule)
#[rustfmt::skip]
const TABLE: [(QueryKind, u32, u32, u32, &str, Rule); 18] = {
    use QueryKind::*;
    [
        (Occlusion, 0, 0, 1, "OCCLUSION", Rule::Occlusion),
        (PipelineStatistics, 0b1000_0101, 0, 3, "PIPELINE_STATISTICS", Rule::ExactOnSameDevice),
        (Timestamp, 0, 0, 1, "TIMESTAMP", Rule::Clock),
        (ResultStatusOnly, 0, 0, 0, "RESULT_STATUS_ONLY", Rule::Exact),
        (TransformFeedbackStream, 0, 0, 2, "TRANSFORM_FEEDBACK_STREAM", Rule::Exact),
        (PerformanceQuery, 0, 3, 3, "PERFORMANCE_QUERY", Rule::Measurement),
        (AccelerationStructureCompactedSize, 0, 0, 1, "AS_COMPACTED_SIZE", Rule::ExactOnSameDevice),
        (AccelerationStructureSerializationSize, 0, 0, 1, "AS_SERIALIZATION_SIZE", Rule::ExactOnSameDevice),
        (AccelerationStructureCompactedSizeNv, 0, 0, 1, "AS_COMPACTED_SIZE_NV", Rule::ExactOnSameDevice),
        (PerformanceQueryIntel, 0, 0, 1, "PERFORMANCE_QUERY_INTEL", Rule::Measurement),
        (VideoEncodeFeedback, 0, 0, 1, "VIDEO_ENCODE_FEEDBACK", Rule::ExactOnSameDevice),
        (MeshPrimitivesGenerated, 0, 0, 1, "MESH_PRIMITIVES_GENERATED", Rule::Exact),
        (PrimitivesGenerated, 0, 0, 1, "PRIMITIVES_GENERATED", Rule::Exact),
        (AccelerationStructureSerializationBottomLevelPointers, 0, 0, 1, "AS_SERIALIZATION_BLAS_POINTERS", Rule::ExactOnSameDevice),
        (AccelerationStructureSize, 0, 0, 1, "AS_SIZE", Rule::ExactOnSameDevice),
        (MicromapSerializationSize, 0, 0, 1, "MICROMAP_SERIALIZATION_SIZE", Rule::ExactOnSameDevice),
        (MicromapCompactedSize, 0, 0, 1, "MICROMAP_COMPACTED_SIZE", Rule::ExactOnSameDevice),
        (Unknown(77), 0, 0, 1, "QUERY_TYPE_77", Rule::ExactOnSameDevice),
    ]
};

#[test]
fn every_kind_is_in_the_table_and_round_trips() {
    for k in KNOWN_KINDS {
        assert!(TABLE.iter().any(|t| t.0 == k), "{k:?} missing from TABLE");
        assert_eq!(QueryKind::from_raw(k.raw()), k);
        assert!(!matches!(k, QueryKind::Unknown(_)));
    }
    assert_eq!(QueryKind::from_raw(77), QueryKind::Unknown(77));
    assert_eq!(QueryKind::Unknown(77).raw(), 77);
    assert_eq!(QueryKind::Timestamp.label(), "Timestamp");
    assert_eq!(QueryKind::Unknown(77).label(), "VkQueryType(77)");
}

#[test]
fn names_values_and_rules_per_kind() {
    for (kind, stats, counters, values, name, rule) in TABLE {
        let s = shape(kind, stats, counters);
        assert_eq!(kind.name(), name);
        assert_eq!(s.values_per_query(), values, "{name}");
        let slots = match kind.slots() {
            ValueSlots::StatusOnly => 0,
            ValueSlots::One => 1,
            ValueSlots::Statistics => stats.count_ones(),
            ValueSlots::WrittenAndNeeded => 2,
            ValueSlots::Counters => counters,
        };
        assert_eq!(slots, values, "{name}");
        assert_eq!(kind.rule(), rule, "{name}");
    }
}

#[test]
fn bytes_per_query_for_every_kind_and_flag_set() {
    let flag_sets = [
        0,
        RESULT_64,
        RESULT_WITH_AVAILABILITY,
        RESULT_64 | RESULT_WITH_AVAILABILITY,
        RESULT_WITH_STATUS,
        RESULT_64 | RESULT_WITH_STATUS | RESULT_WAIT | RESULT_PARTIAL,
    ];
    for (kind, stats, counters, values, name, _) in TABLE {
        let s = shape(kind, stats, counters);
        for flags in flag_sets {
            let expected = if kind == QueryKind::PerformanceQuery {
                // Always 8-byte counter results, never an availability word.
                8 * u64::from(values)
            } else {
                let word = if flags & RESULT_64 != 0 { 8 } else { 4 };
                let extra = u64::from(flags & (RESULT_WITH_AVAILABILITY | RESULT_WITH_STATUS) != 0);
                word * (u64::from(values) + extra)
            };
            assert_eq!(
                s.bytes_per_query(flags),
                expected,
                "{name} flags {flags:#x}"
            );
        }
    }
    let occ = shape(QueryKind::Occlusion, 0, 0);
    assert_eq!(occ.bytes_for(3, 16, RESULT_64), 40);
    assert_eq!(occ.bytes_for(0, 16, RESULT_64), 0);
}

#[test]
fn decode_every_kind_with_availability_and_status() {
    for (kind, stats, counters, values, name, _) in TABLE {
        let s = shape(kind, stats, counters);
        let perf = kind == QueryKind::PerformanceQuery;
        // 64-bit with availability: query 0 available, query 1 not, stride with 8 bytes padding.
        let flags = RESULT_64 | RESULT_WITH_AVAILABILITY;
        let stride = s.bytes_per_query(flags) + 8;
        let mut words = Vec::new();
        for q in 0..2u64 {
            words.extend((0..u64::from(values)).map(|i| 100 * q + i + 1));
            if !perf {
                words.push(1 - q);
            }
            words.push(0xdead);
        }
        let d = decode(s, &bytes64(&words), 2, stride, flags, 1).unwrap();
        assert_eq!(d.len(), 2, "{name}");
        assert_eq!(
            d[1].values,
            (0..u64::from(values)).map(|i| 101 + i).collect::<Vec<_>>(),
            "{name}"
        );
        if perf {
            // No word: the read's VK_NOT_READY makes it unavailable.
            assert_eq!((d[0].availability, d[0].available), (None, false), "{name}");
        } else {
            assert_eq!(
                (d[0].availability, d[0].available),
                (Some(1), true),
                "{name}"
            );
            assert_eq!(
                (d[1].availability, d[1].available),
                (Some(0), false),
                "{name}"
            );
        }
        // 32-bit with status: complete, error (negative), not ready.
        let flags = RESULT_WITH_STATUS;
        let per = s.bytes_per_query(flags);
        let mut words = Vec::new();
        for st in [1i32, -1, 0] {
            words.extend((0..values).map(|i| i + 7));
            if !perf {
                words.push(st as u32);
            }
        }
        if perf {
            // Counter results are 8 bytes whatever the flags.
            words = (0..3 * values)
                .map(|i| i % values + 7)
                .flat_map(|v| [v, 0])
                .collect();
        }
        let d = decode(s, &bytes32(&words), 3, per, flags, 0).unwrap();
        assert_eq!(
            d[2].values,
            (0..u64::from(values)).map(|i| i + 7).collect::<Vec<_>>(),
            "{name}"
        );
        if perf {
            assert!(
                d.iter().all(|q| q.available && q.status.is_none()),
                "{name}"
            );
        } else {
            let st: Vec<_> = d.iter().map(|q| (q.status, q.available)).collect();
            assert_eq!(
                st,
                [(Some(1), true), (Some(-1), false), (Some(0), false)],
                "{name}"
            );
        }
        // No word: availability comes from the call's result.
        let per = s.bytes_per_query(0);
        let data = vec![0u8; per as usize];
        assert!(
            decode(s, &data, 1, per, 0, 0).unwrap()[0].available,
            "{name}"
        );
        assert!(
            !decode(s, &data, 1, per, 0, 1).unwrap()[0].available,
            "{name}"
        );
    }
}

#[test]
fn status_word_is_sign_extended_at_64_bits_too() {
    let s = shape(QueryKind::ResultStatusOnly, 0, 0);
    let d = decode(
        s,
        &bytes64(&[(-3i64) as u64]),
        1,
        8,
        RESULT_64 | RESULT_WITH_STATUS,
        0,
    )
    .unwrap();
    assert_eq!(
        (d[0].values.len(), d[0].status, d[0].available),
        (0, Some(-3), false)
    );
}

#[test]
fn short_data_and_bad_strides_are_errors() {
    let occ = shape(QueryKind::Occlusion, 0, 0);
    // The last query needs no padding.
    assert_eq!(decode(occ, &[0u8; 12], 2, 8, 0, 0).unwrap().len(), 2);
    assert_eq!(
        decode(occ, &[0u8; 12], 2, 8, RESULT_64, 0).unwrap_err(),
        DecodeError::Truncated {
            query: 1,
            count: 2,
            needed: 16,
            len: 12
        }
    );
    let empty = decode(occ, &[], 3, 8, RESULT_64, 0).unwrap_err();
    assert!(
        empty
            .to_string()
            .contains("0 bytes hold fewer than 3 queries"),
        "{empty}"
    );
    assert!(matches!(
        decode(
            occ,
            &[0u8; 32],
            2,
            8,
            RESULT_64 | RESULT_WITH_AVAILABILITY,
            0
        ),
        Err(DecodeError::BadStride { per_query: 16, .. })
    ));
    assert!(matches!(
        decode(occ, &[0u8; 32], 2, 6, 0, 0),
        Err(DecodeError::BadStride { element: 4, .. })
    ));
    // A count from a damaged file fails at the first query the bytes do not hold.
    assert!(matches!(
        decode(occ, &[0u8; 8], u32::MAX, 4, 0, 0),
        Err(DecodeError::Truncated { query: 2, .. })
    ));
    // One query with stride 0 is what apps pass for a single result.
    assert_eq!(
        decode(occ, &[1, 0, 0, 0], 1, 0, 0, 0).unwrap()[0].values,
        [1]
    );
    assert!(decode(occ, &[], 0, 0, 0, 0).unwrap().is_empty());
}

fn v(values: &[u64]) -> QueryValues {
    QueryValues {
        values: values.to_vec(),
        available: true,
        result: 0,
        host_ns: 0,
    }
}

const ANY: [Context; 4] = [
    Context {
        precise: false,
        same_device: false,
    },
    Context {
        precise: true,
        same_device: false,
    },
    Context {
        precise: false,
        same_device: true,
    },
    Context {
        precise: true,
        same_device: true,
    },
];

#[test]
fn classification_per_kind() {
    use Outcome::*;
    let same = Context {
        precise: false,
        same_device: true,
    };
    let other = Context {
        precise: false,
        same_device: false,
    };
    for (kind, _, _, _, name, rule) in TABLE {
        let t = kind.raw();
        let (a, b) = (v(&[5]), v(&[6]));
        let equal = classify(t, Some(&a), Some(&a), same);
        let differ_same = classify(t, Some(&a), Some(&b), same);
        let differ_other = classify(t, Some(&a), Some(&b), other);
        let expected = match rule {
            // Timestamps are clock values even when equal, on the same device too.
            Rule::Clock => (Clock, Clock, Clock),
            Rule::Measurement => (Match, Variation, Variation),
            Rule::Exact => (Match, Mismatch, Mismatch),
            Rule::ExactOnSameDevice => (Match, Mismatch, Variation),
            // Not precise: any non-zero count.
            Rule::Occlusion => (Match, Variation, Variation),
        };
        assert_eq!((equal, differ_same, differ_other), expected, "{name}");
        for ctx in ANY {
            let unavailable = QueryValues {
                available: false,
                ..v(&[5])
            };
            assert_eq!(
                classify(t, Some(&unavailable), Some(&a), ctx),
                NotCompared(format::query::NotCompared::CapturedUnavailable),
                "{name}"
            );
            assert_eq!(
                classify(t, None, Some(&a), ctx),
                NotCompared(format::query::NotCompared::CapturedUnavailable)
            );
            assert_eq!(
                classify(t, Some(&a), Some(&unavailable), ctx),
                Unavailable,
                "{name}"
            );
            assert_eq!(classify(t, Some(&a), None, ctx), Unavailable, "{name}");
        }
    }
}

#[test]
fn occlusion_zero_ness_is_exact_and_counts_only_when_precise_on_the_same_device() {
    use Outcome::*;
    let occ = QueryKind::Occlusion;
    for ctx in ANY {
        assert_eq!(classify_values(occ, &[5], &[0], ctx), Mismatch);
        assert_eq!(classify_values(occ, &[0], &[5], ctx), Mismatch);
        let counts = if ctx.precise && ctx.same_device {
            Mismatch
        } else {
            Variation
        };
        assert_eq!(classify_values(occ, &[5], &[6], ctx), counts, "{ctx:?}");
    }
    assert_eq!(classify_values(occ, &[5], &[6], Context::STRICT), Mismatch);
}

#[test]
fn only_mismatch_and_unavailable_fail() {
    use Outcome::*;
    let all = [
        Match,
        Mismatch,
        Variation,
        Clock,
        Unavailable,
        NotCompared(format::query::NotCompared::CapturedMissing),
    ];
    let fails: Vec<_> = all.iter().map(|o| o.fails()).collect();
    assert_eq!(fails, [false, true, false, false, true, false]);
}

#[test]
fn timestamps_subtract_in_masked_integer_ticks() {
    assert_eq!(mask_timestamp(0xffff_0000_0000_0010, 36), Some(0x10));
    assert_eq!(mask_timestamp(5, 0), None);
    assert_eq!(timestamp_ns(0xFF00_0000_0000_0010, 36, 1.0), 16.0);
    assert_eq!(timestamp_ns(100, 64, 2.5), 250.0);
    assert_eq!(timestamp_ns(100, 0, 1.0), 0.0);
    assert_eq!(timestamp_delta_ns(100, 300, 64, 2.5), Some(500.0));
    // 8 valid bits: 250 -> 4 wraps through 256: 10 ticks.
    assert_eq!(timestamp_delta_ticks(250, 4, 8), Some(10));
    assert_eq!(timestamp_delta_ns(250, 4, 8, 1.0), Some(10.0));
    assert_eq!(timestamp_delta_ns(1, 2, 0, 1.0), None);
    // 1.7e18 ticks: 1000 ticks apart stay 1000 ns (in f64 before subtracting they read 1024).
    let t = 1_700_000_000_000_000_123u64;
    assert_eq!(timestamp_delta_ns(t, t + 1000, 64, 1.0), Some(1000.0));
    assert_eq!(timestamp_delta_ticks(u64::MAX - 1, 3, 64), Some(5));
    // Signed offsets from a calibration sample, either side, across a wrap.
    assert_eq!(timestamp_offset_ticks(300, 100, 64), Some(-200));
    assert_eq!(timestamp_offset_ticks(250, 4, 8), Some(10));
    assert_eq!(timestamp_offset_ticks(4, 250, 8), Some(-10));
    let fam = |b| format::record::QueueFamilySummary {
        flags: 0,
        queue_count: 1,
        timestamp_valid_bits: b,
    };
    assert_eq!(device_valid_bits(&[fam(0), fam(36)]), 36);
    assert_eq!(device_valid_bits(&[]), 64);
    assert_eq!(device_valid_bits(&[fam(64), fam(36), fam(0)]), 36);
    let clock = TimestampClock {
        valid_bits: 8,
        period_ns: 2.0,
    };
    assert_eq!(clock.delta_ns(250, 4), Some(20.0));
    assert_eq!(clock.delta_ns(4, 250), Some(-20.0));
    let dev = format::record::DeviceSummary {
        timestamp_period_ns: 2.0,
        queue_families: vec![fam(36)],
        ..Default::default()
    };
    assert_eq!(
        TimestampClock::of_device(&dev),
        TimestampClock {
            valid_bits: 36,
            period_ns: 2.0
        }
    );
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
