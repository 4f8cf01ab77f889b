//! Captured-vs-replayed query comparison (`quarry replay --compare`).
//!
//! The rule itself lives in [`format::query`] (one table for the replayer, the viewer and the
//! exports). Each query read is compared once both sides have data; the outcome is one of:
//!
//! * **match**: every value equal.
//! * **mismatch**: a *deterministic* result differs. This makes `--compare` exit non-zero.
//! * **variation**: values differ in a way the Vulkan spec allows, or a measurement changed.
//! * **clock**: a timestamp: a clock value is never a match, on the same device too.
//! * **not compared**: the capture had no data for the query (it was not available to the app, or
//!   the trace holds no or too few captured bytes for the read: the reason is listed).
//! * **unavailable**: the capture had data but the replay never got the query available within the
//!   timeout; counted as a mismatch.
//!
//! Which results are deterministic:
//!
//! | query type | same device and driver | another device or driver |
//! |---|---|---|
//! | `TIMESTAMP` | clock | clock |
//! | `PERFORMANCE_QUERY` (KHR, INTEL) | variation (measurement) | variation (measurement) |
//! | `OCCLUSION` with `PRECISE` | exact | zero vs non-zero exact; counts vary (rasterization precision and sample placement are implementation-defined) |
//! | `OCCLUSION` without `PRECISE` | zero vs non-zero exact; any non-zero value allowed | same |
//! | `PIPELINE_STATISTICS` | exact | variation (the spec lets invocation counts vary, e.g. vertex reuse, early fragment tests, clipping) |
//! | `PRIMITIVES_GENERATED`, `TRANSFORM_FEEDBACK_STREAM`, `MESH_PRIMITIVES_GENERATED`, `RESULT_STATUS_ONLY` | exact | exact (they count what the draws specify) |
//! | acceleration-structure and micromap sizes, video encode feedback, other types | exact | variation |
//!
//! "Same device and driver" means equal vendor id, device id, driver id, driver version and device
//! name in the two `DeviceSummary`s. `PRECISE` comes from the query's begin in the trace
//! (`results::begins`), which the results file records too.
//!
//! The queries of a begin inside a multiview render pass instance (one per view) compare by their
//! sum, since how the result spreads over them is the implementation's; one after the first that
//! the replay left unavailable is *not compared* ("multiview: result in first query"). Reads are
//! classified whole ([`classify_read`]) for this.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use format::query::{self, Classified, QueryBegin, QueryKind, ReadContext};
use format::record::QueryResult;
use serde::Serialize;

pub use format::query::{NotCompared, Outcome};

use crate::queries::type_name;

/// Whether two device summaries describe the same device running the same driver (one rule for
/// `replay --compare`, `quarry compare` and the viewer).
pub use format::runs::same_device;

/// Classifies one query read alone (see the module documentation for the rule).
/// `precise` is whether an occlusion query was begun with `VK_QUERY_CONTROL_PRECISE_BIT`.
pub fn classify(q: &QueryResult, precise: bool, same_device: bool) -> Outcome {
    let q = begun(q, precise);
    classify_read(std::slice::from_ref(&q), same_device)[0].outcome
}

/// `q` as begun outside multiview, PRECISE or not.
fn begun(q: &QueryResult, precise: bool) -> QueryResult {
    let begin = QueryBegin {
        flags: if precise { query::CONTROL_PRECISE } else { 0 },
        view_mask: 0,
        first: q.query,
    };
    QueryResult {
        begin: Some(begin),
        ..q.clone()
    }
}

/// Classifies the queries of one read together, through the rule the viewer and `quarry compare`
/// use too ([`query::classify_read`]): each query's begin (in the record) says whether it was
/// PRECISE and whether it is one of a multiview begin's queries, which compare by their sum.
/// A record without a begin reads as non-precise.
pub fn classify_read(read: &[QueryResult], same_device: bool) -> Vec<Classified> {
    let Some(first) = read.first() else {
        return Vec::new();
    };
    let queries: Vec<_> = read.iter().map(format::runs::read_query).collect();
    let ctx = ReadContext {
        same_device,
        precise_if_unknown: false,
    };
    query::classify_read(first.query_type, &queries, ctx)
}

/// Lines listed in the text summary for reads that were not compared (the count is always whole).
const LISTED_NOT_COMPARED: usize = 20;

/// Per-type counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TypeSummary {
    pub queries: u64,
    pub matches: u64,
    pub mismatches: u64,
    pub variations: u64,
    /// Clock values (timestamps): never a match.
    pub clock: u64,
    pub not_compared: u64,
    pub unavailable: u64,
}

/// The whole comparison: per-type counts and every failing query.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Comparison {
    pub same_device: bool,
    pub by_type: BTreeMap<String, TypeSummary>,
    /// Human-readable lines, one per mismatch or unavailable query.
    pub mismatches: Vec<String>,
    /// Human-readable lines, one per read not compared (captured data missing or short, or a read
    /// the replay could not make).
    pub not_compared: Vec<String>,
    /// Timestamps are never compared by value; what is checked is their masked order within one
    /// read: one line per pair that ran in the other order in the replay (a note, not a failure:
    /// queues and stages may legitimately overlap differently on another run or GPU).
    pub clock_order: Vec<String>,
}

impl Comparison {
    /// Adds one query read alone (performance queries, tests).
    pub fn add(&mut self, q: &QueryResult, precise: bool) {
        let q = begun(q, precise);
        let c = classify_read(std::slice::from_ref(&q), self.same_device)[0];
        self.add_classified(&q, c.outcome, c.multiview);
    }

    /// Adds the queries of one read, classified together (see [`classify_read`]).
    pub fn add_read(&mut self, read: &[QueryResult]) {
        for (q, c) in read.iter().zip(classify_read(read, self.same_device)) {
            self.add_classified(q, c.outcome, c.multiview);
        }
    }

    fn add_classified(
        &mut self,
        q: &QueryResult,
        outcome: Outcome,
        multiview: Option<query::Multiview>,
    ) {
        let precise = q.begin.is_some_and(|b| b.precise());
        let t = self.by_type.entry(type_name(q.query_type)).or_default();
        t.queries += 1;
        match outcome {
            Outcome::Match => t.matches += 1,
            Outcome::Mismatch => t.mismatches += 1,
            Outcome::Variation => t.variations += 1,
            Outcome::Clock => t.clock += 1,
            Outcome::NotCompared(_) => t.not_compared += 1,
            Outcome::Unavailable => t.unavailable += 1,
        }
        if matches!(outcome, Outcome::Mismatch | Outcome::Unavailable) {
            let vals = |v: &Option<format::record::QueryValues>| {
                v.as_ref()
                    .map_or("none".to_string(), |v| format!("{:?}", v.values))
            };
            self.mismatches.push(format!(
                "{} pool 0x{:x} query {} ({}) frame {} loop {} read seq {}: captured {} replayed {}{}{}",
                if outcome == Outcome::Unavailable { "UNAVAILABLE" } else { "MISMATCH" },
                q.pool,
                q.query,
                type_name(q.query_type),
                q.frame,
                q.loop_index,
                q.seq,
                vals(&q.captured),
                vals(&q.replayed),
                if QueryKind::from_raw(q.query_type) == QueryKind::Occlusion && precise { " (precise)" } else { "" },
                multiview.map_or(String::new(), |m| format!(" ({})", m.note())),
            ));
        }
        if let Outcome::NotCompared(why @ NotCompared::MultiviewInFirst) = outcome {
            let first = q.begin.map_or(q.query, |b| b.first);
            self.not_compared.push(format!(
                "NOT COMPARED pool 0x{:x} query {} ({}) frame {} loop {} read seq {}: {} (query {first}): the replay left this query unavailable",
                q.pool,
                q.query,
                type_name(q.query_type),
                q.frame,
                q.loop_index,
                q.seq,
                why.reason(),
            ));
        }
    }

    /// A read of `count` queries whose captured bytes cannot be compared (none, or fewer than the
    /// read covers): counted as not compared with `reason`, and the replay goes on.
    pub fn add_not_compared(&mut self, query_type: i32, count: u32, reason: String) {
        let t = self.by_type.entry(type_name(query_type)).or_default();
        t.queries += u64::from(count);
        t.not_compared += u64::from(count);
        // The reason names its side itself (`captured query copy: ...`, `replayed ...`).
        self.not_compared.push(format!(
            "NOT COMPARED {count} {} queries: {reason}",
            type_name(query_type)
        ));
    }

    /// Checks the order of the timestamps one read returned: `stamps` holds (query, captured
    /// ticks, captured valid bits, replayed ticks, replayed valid bits) of the queries both runs saw
    /// available, in query order. Consecutive pairs are compared by the sign of their masked
    /// difference (the shorter way round a wrap).
    pub fn check_clock_order(&mut self, seq: u64, pool: u64, stamps: &[(u32, u64, u32, u64, u32)]) {
        use format::query::timestamp_offset_ticks;
        for w in stamps.windows(2) {
            let (a, b) = (w[0], w[1]);
            let cap = timestamp_offset_ticks(a.1, b.1, a.2.min(b.2));
            let rep = timestamp_offset_ticks(a.3, b.3, a.4.min(b.4));
            if let (Some(c), Some(r)) = (cap, rep) {
                if c.signum() * r.signum() < 0 {
                    self.clock_order.push(format!(
                        "CLOCK ORDER seq {seq} pool 0x{pool:x}: queries {} and {} were written {} in the capture, {} in the replay",
                        a.0,
                        b.0,
                        if c > 0 { "in query order" } else { "in reverse order" },
                        if r > 0 { "in query order" } else { "in reverse order" },
                    ));
                }
            }
        }
    }

    /// Whether a deterministic result differed (the `--compare` exit status).
    pub fn failed(&self) -> bool {
        self.by_type
            .values()
            .any(|t| t.mismatches + t.unavailable > 0)
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "comparison ({}):",
            if self.same_device {
                "same device and driver"
            } else {
                "different device or driver"
            }
        );
        let _ = writeln!(
            s,
            "  {:<28} {:>8} {:>8} {:>10} {:>10} {:>8} {:>13} {:>12}",
            "query type",
            "queries",
            "match",
            "mismatch",
            "variation",
            "clock",
            "not compared",
            "unavailable"
        );
        for (name, t) in &self.by_type {
            let _ = writeln!(
                s,
                "  {:<28} {:>8} {:>8} {:>10} {:>10} {:>8} {:>13} {:>12}",
                name,
                t.queries,
                t.matches,
                t.mismatches,
                t.variations,
                t.clock,
                t.not_compared,
                t.unavailable
            );
        }
        for m in &self.mismatches {
            let _ = writeln!(s, "  {m}");
        }
        for m in self.not_compared.iter().take(LISTED_NOT_COMPARED) {
            let _ = writeln!(s, "  {m}");
        }
        if self.not_compared.len() > LISTED_NOT_COMPARED {
            let _ = writeln!(
                s,
                "  ... and {} more reads not compared",
                self.not_compared.len() - LISTED_NOT_COMPARED
            );
        }
        if !self.clock_order.is_empty() {
            let _ = writeln!(
                s,
                "  note: {} pair(s) of timestamps read together ran in the other order in the replay",
                self.clock_order.len()
            );
            for m in self.clock_order.iter().take(LISTED_NOT_COMPARED) {
                let _ = writeln!(s, "  {m}");
            }
        }
        let _ = writeln!(
            s,
            "result: {}",
            if self.failed() {
                "deterministic results differ"
            } else {
                "all deterministic results match"
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk;
    use format::record::QueryValues;

    fn q(ty: i32, captured: Option<Vec<u64>>, replayed: Option<Vec<u64>>) -> QueryResult {
        let v = |x: Option<Vec<u64>>| {
            x.map(|values| QueryValues {
                values,
                available: true,
                result: 0,
                host_ns: 0,
            })
        };
        QueryResult {
            pool: 1,
            query: 0,
            query_type: ty,
            pipeline_statistics: 0,
            frame: 0,
            queue: 0,
            command_buffer: 0,
            loop_index: 0,
            pass: 0,
            seq: 9,
            flags: 0,
            captured: v(captured),
            replayed: v(replayed),
            submit_ns: 0,
            available_ns: 0,
            captured_gpu_ns: None,
            replayed_gpu_ns: None,
            begin: None,
            device: None,
        }
    }

    #[test]
    fn rules() {
        let occ = vk::QueryType::OCCLUSION.as_raw();
        let stats = vk::QueryType::PIPELINE_STATISTICS.as_raw();
        let ts = vk::QueryType::TIMESTAMP.as_raw();
        let prims = vk::QueryType::PRIMITIVES_GENERATED_EXT.as_raw();
        assert_eq!(
            classify(&q(occ, Some(vec![5]), Some(vec![5])), true, false),
            Outcome::Match
        );
        assert_eq!(
            classify(&q(occ, Some(vec![5]), Some(vec![6])), true, true),
            Outcome::Mismatch
        );
        assert_eq!(
            classify(&q(occ, Some(vec![5]), Some(vec![6])), true, false),
            Outcome::Variation
        );
        assert_eq!(
            classify(&q(occ, Some(vec![5]), Some(vec![6])), false, true),
            Outcome::Variation
        );
        assert_eq!(
            classify(&q(occ, Some(vec![5]), Some(vec![0])), false, false),
            Outcome::Mismatch
        );
        assert_eq!(
            classify(&q(stats, Some(vec![1, 2]), Some(vec![1, 3])), false, true),
            Outcome::Mismatch
        );
        assert_eq!(
            classify(&q(stats, Some(vec![1, 2]), Some(vec![1, 3])), false, false),
            Outcome::Variation
        );
        // Timestamps are clock values: never a match, equal or not, on the same device too.
        assert_eq!(
            classify(&q(ts, Some(vec![1]), Some(vec![2])), false, true),
            Outcome::Clock
        );
        assert_eq!(
            classify(&q(ts, Some(vec![1]), Some(vec![1])), true, true),
            Outcome::Clock
        );
        // A changed performance counter is a variation (the viewer says the same).
        let perf = vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw();
        assert_eq!(
            classify(&q(perf, Some(vec![1, 2]), Some(vec![1, 3])), true, true),
            Outcome::Variation
        );
        assert_eq!(
            classify(&q(prims, Some(vec![3]), Some(vec![4])), false, false),
            Outcome::Mismatch
        );
        assert_eq!(
            classify(&q(prims, None, Some(vec![4])), false, false),
            Outcome::NotCompared(NotCompared::CapturedUnavailable)
        );
        assert_eq!(
            classify(&q(prims, Some(vec![4]), None), false, false),
            Outcome::Unavailable
        );
    }

    #[test]
    fn summary_fails_only_on_deterministic_differences() {
        let mut c = Comparison {
            same_device: false,
            ..Default::default()
        };
        c.add(
            &q(
                vk::QueryType::TIMESTAMP.as_raw(),
                Some(vec![1]),
                Some(vec![2]),
            ),
            false,
        );
        assert!(!c.failed());
        c.add(
            &q(
                vk::QueryType::PRIMITIVES_GENERATED_EXT.as_raw(),
                Some(vec![3]),
                Some(vec![4]),
            ),
            false,
        );
        assert!(c.failed());
        assert_eq!(c.mismatches.len(), 1);
        let text = c.to_text();
        assert!(
            text.contains("PRIMITIVES_GENERATED") && text.contains("captured [3] replayed [4]"),
            "{text}"
        );
    }

    /// A two-view multiview occlusion query compares by its sum: one GPU putting the whole count in
    /// the first query and leaving the second unavailable (lavapipe) is not a failure of the
    /// replay, and says so; sums that differ are.
    #[test]
    fn multiview_queries_compare_by_their_sum() {
        let occ = vk::QueryType::OCCLUSION.as_raw();
        let begin = QueryBegin {
            flags: query::CONTROL_PRECISE,
            view_mask: 0b11,
            first: 0,
        };
        let member = |query: u32, captured: u64, replayed: Option<u64>| {
            let mut r = q(occ, Some(vec![captured]), Some(vec![replayed.unwrap_or(0)]));
            r.query = query;
            r.begin = Some(begin);
            r.replayed.as_mut().unwrap().available = replayed.is_some();
            r
        };
        let mut c = Comparison {
            same_device: true,
            ..Default::default()
        };
        c.add_read(&[member(0, 60, Some(120)), member(1, 60, None)]);
        assert!(!c.failed(), "{}", c.to_text());
        let t = &c.by_type["OCCLUSION"];
        assert_eq!((t.matches, t.not_compared), (1, 1));
        assert!(c.to_text().contains("multiview: result in first query"));
        c.add_read(&[member(0, 60, Some(100)), member(1, 60, Some(0))]);
        assert!(c.failed());
        assert_eq!(c.mismatches.len(), 2);
        assert!(c.mismatches[0].contains("(precise) (multiview: sum of 2 queries)"));
    }

    #[test]
    fn missing_captured_data_is_counted_not_compared_with_its_reason() {
        let mut c = Comparison {
            same_device: true,
            ..Default::default()
        };
        c.add(
            &q(
                vk::QueryType::TIMESTAMP.as_raw(),
                Some(vec![7]),
                Some(vec![7]),
            ),
            false,
        );
        c.add_not_compared(
            vk::QueryType::OCCLUSION.as_raw(),
            3,
            "seq 9 pool 0x1: captured query copy: 0 bytes hold fewer than 3 queries".into(),
        );
        assert!(!c.failed());
        let ts = &c.by_type["TIMESTAMP"];
        assert_eq!((ts.queries, ts.matches, ts.clock), (1, 0, 1));
        let occ = &c.by_type["OCCLUSION"];
        assert_eq!((occ.queries, occ.not_compared), (3, 3));
        let text = c.to_text();
        assert!(
            text.contains("NOT COMPARED 3 OCCLUSION queries")
                && text.contains("0 bytes hold fewer than 3 queries"),
            "{text}"
        );
    }

    #[test]
    fn clock_order_notes_pairs_that_ran_the_other_way() {
        let mut c = Comparison::default();
        // Query order kept (values differ, as clocks do): nothing to say.
        c.check_clock_order(1, 0xa, &[(0, 100, 64, 5_000, 64), (1, 150, 64, 9_000, 64)]);
        assert!(c.clock_order.is_empty());
        // Across a 32-bit wrap the masked difference is still forward.
        c.check_clock_order(
            2,
            0xa,
            &[(0, 0xffff_fff0, 32, 10, 32), (1, 0x10, 32, 20, 32)],
        );
        assert!(c.clock_order.is_empty(), "{:?}", c.clock_order);
        // The second query written first in the replay: one note, and no failure.
        c.check_clock_order(3, 0xa, &[(0, 100, 64, 9_000, 64), (1, 150, 64, 5_000, 64)]);
        assert_eq!(c.clock_order.len(), 1);
        assert!(c.clock_order[0].contains("seq 3") && c.clock_order[0].contains("queries 0 and 1"));
        assert!(!c.failed());
        assert!(c.to_text().contains("ran in the other order"));
    }
}
