//! Classifying the queries of one read together, for multiview.
//!
//! A query begun inside a render pass instance with multiview enabled uses N consecutive queries
//! (N = the views of the subpass's view mask), and how its result is spread over them is the
//! implementation's (Vulkan spec, "Query Operation"): one GPU writes each view's count to its own
//! query, another the whole count to the first and zeros to the others (lavapipe never makes the
//! others available at all). Only the sum over the N is the query's result, so that is what
//! compares; one query alone compares only for equality.

use serde::Serialize;

use super::CONTROL_PRECISE;
use super::{classify, classify_values, Context, NotCompared, Outcome, QueryKind, Rule};
use crate::record::{QueryBegin, QueryValues};

impl QueryBegin {
    /// Begun with `VK_QUERY_CONTROL_PRECISE_BIT`.
    pub fn precise(&self) -> bool {
        self.flags & CONTROL_PRECISE != 0
    }

    /// Queries the begin uses: the views of its multiview render pass instance, else 1.
    pub fn views(&self) -> u32 {
        self.view_mask.count_ones().max(1)
    }

    /// Whether `query` is one of the queries this begin uses.
    pub fn covers(&self, query: u32) -> bool {
        query.wrapping_sub(self.first) < self.views()
    }
}

/// One query of a read, as [`classify_read`] takes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadQuery<'a> {
    pub query: u32,
    pub captured: Option<&'a QueryValues>,
    pub replayed: Option<&'a QueryValues>,
    /// How the trace began it (`QueryResult::begin`); `None` when not known.
    pub begin: Option<QueryBegin>,
}

/// What the classification of a read knows besides its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadContext {
    /// Both sides ran on the same device and driver.
    pub same_device: bool,
    /// How an occlusion query whose begin is not known reads (results files written before
    /// `QueryResult::begin`, with no trace at hand to say): each caller keeps its earlier reading.
    pub precise_if_unknown: bool,
}

impl ReadContext {
    fn of(self, begin: Option<QueryBegin>) -> Context {
        Context {
            precise: begin.map_or(self.precise_if_unknown, |b| b.precise()),
            same_device: self.same_device,
        }
    }
}

/// How a query of a multiview begin was compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Multiview {
    /// As the sum over the `views` queries of its begin, all in the read.
    Summed { views: u32 },
    /// Alone, as the read holds only some of its begin's `views` queries: equal or a
    /// variation, since how the result is spread is the implementation's.
    Alone { views: u32 },
}

impl Multiview {
    /// A short note for tables and summaries.
    pub fn note(self) -> String {
        match self {
            Multiview::Summed { views } => format!("multiview: sum of {views} queries"),
            Multiview::Alone { views } => {
                format!("multiview: 1 of {views} queries read, compared alone")
            }
        }
    }
}

/// The outcome of one query of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Classified {
    pub outcome: Outcome,
    /// Set for a query of a multiview begin.
    pub multiview: Option<Multiview>,
}

/// Classifies the queries of one read (of one pool), in the order given: the one rule for
/// `replay --compare`, `quarry compare`, the viewer and the exports.
///
/// A query of a multiview begin (`begin` with more than one view) whose begin's queries are all in
/// `read` takes the outcome of their sums: the captured sum over the queries the app got, the
/// replayed sum over those the replay got, under the begin's PRECISE flag. A query after the first
/// that the replay left unavailable is not compared (`MultiviewInFirst`): the first holds the
/// result. Other queries compare alone, as [`classify`] does.
pub fn classify_read(query_type: i32, read: &[ReadQuery<'_>], ctx: ReadContext) -> Vec<Classified> {
    let kind = QueryKind::from_raw(query_type);
    let available = |v: Option<&QueryValues>| v.is_some_and(|v| v.available);
    read.iter()
        .map(|q| {
            let Some(b) = q.begin.filter(|b| b.views() > 1 && b.covers(q.query)) else {
                return Classified {
                    outcome: classify(query_type, q.captured, q.replayed, ctx.of(q.begin)),
                    multiview: None,
                };
            };
            let views = b.views();
            // The begin's queries in the read, each once, by index from its first.
            let mut span: Vec<Option<&ReadQuery>> = vec![None; views as usize];
            for m in read
                .iter()
                .filter(|m| m.begin == Some(b) && b.covers(m.query))
            {
                span[(m.query - b.first) as usize].get_or_insert(m);
            }
            let head = q.query == b.first;
            let summed = span.iter().all(Option::is_some);
            let outcome = if !available(q.captured) {
                Outcome::NotCompared(NotCompared::CapturedUnavailable)
            } else if summed {
                let span: Vec<&ReadQuery> = span.into_iter().flatten().collect();
                if !available(span[0].captured) {
                    Outcome::NotCompared(NotCompared::CapturedUnavailable)
                } else if !available(span[0].replayed) {
                    Outcome::Unavailable
                } else if !head && !available(q.replayed) {
                    Outcome::NotCompared(NotCompared::MultiviewInFirst)
                } else {
                    let cap = sum(span.iter().filter_map(|m| m.captured));
                    let rep = sum(span.iter().filter_map(|m| m.replayed));
                    classify_values(kind, &cap, &rep, ctx.of(Some(b)))
                }
            } else if !available(q.replayed) {
                if head {
                    Outcome::Unavailable
                } else {
                    Outcome::NotCompared(NotCompared::MultiviewInFirst)
                }
            } else {
                let (c, r) = (q.captured.map(|v| &v.values), q.replayed.map(|v| &v.values));
                match kind.rule() {
                    Rule::Clock => Outcome::Clock,
                    _ if c == r => Outcome::Match,
                    _ => Outcome::Variation,
                }
            };
            Classified {
                outcome,
                multiview: Some(if summed {
                    Multiview::Summed { views }
                } else {
                    Multiview::Alone { views }
                }),
            }
        })
        .collect()
}

/// Element-wise sum of the available values (pipeline statistics sum per statistic).
fn sum<'a>(values: impl Iterator<Item = &'a QueryValues>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for v in values.filter(|v| v.available) {
        if out.len() < v.values.len() {
            out.resize(v.values.len(), 0);
        }
        for (o, x) in out.iter_mut().zip(&v.values) {
            *o = o.saturating_add(*x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OCCLUSION: i32 = 0;

    fn v(values: &[u64]) -> QueryValues {
        QueryValues {
            values: values.to_vec(),
            available: true,
            ..QueryValues::default()
        }
    }

    fn unavailable() -> QueryValues {
        QueryValues {
            available: false,
            ..v(&[0])
        }
    }

    /// A precise occlusion query begun at query 4 in a two-view render pass.
    const TWO_VIEWS: QueryBegin = QueryBegin {
        flags: CONTROL_PRECISE,
        view_mask: 0b11,
        first: 4,
    };
    const SAME: ReadContext = ReadContext {
        same_device: true,
        precise_if_unknown: true,
    };

    fn read<'a>(pairs: &'a [(QueryValues, QueryValues)], begin: QueryBegin) -> Vec<ReadQuery<'a>> {
        pairs
            .iter()
            .enumerate()
            .map(|(i, (c, r))| ReadQuery {
                query: begin.first + i as u32,
                captured: Some(c),
                replayed: Some(r),
                begin: Some(begin),
            })
            .collect()
    }

    fn outcomes(c: &[Classified]) -> Vec<Outcome> {
        c.iter().map(|c| c.outcome).collect()
    }

    #[test]
    fn two_views_compare_by_their_sum() {
        // One GPU spreads the count over the views, the other puts it all in the first.
        let spread = [(v(&[60]), v(&[120])), (v(&[60]), v(&[0]))];
        let c = classify_read(OCCLUSION, &read(&spread, TWO_VIEWS), SAME);
        assert_eq!(outcomes(&c), [Outcome::Match, Outcome::Match]);
        assert_eq!(c[0].multiview, Some(Multiview::Summed { views: 2 }));
        // Per index, the second would be a zero-vs-non-zero mismatch.
        assert_eq!(
            classify(
                OCCLUSION,
                Some(&spread[1].0),
                Some(&spread[1].1),
                Context::STRICT
            ),
            Outcome::Mismatch
        );
        // Sums that differ: a precise count on the same device is a mismatch on every query.
        let differ = [(v(&[60]), v(&[100])), (v(&[60]), v(&[0]))];
        let c = classify_read(OCCLUSION, &read(&differ, TWO_VIEWS), SAME);
        assert_eq!(outcomes(&c), [Outcome::Mismatch, Outcome::Mismatch]);
        // Not precise, or on another device: a changed count varies.
        let loose = QueryBegin {
            flags: 0,
            ..TWO_VIEWS
        };
        let c = classify_read(OCCLUSION, &read(&differ, loose), SAME);
        assert_eq!(outcomes(&c), [Outcome::Variation, Outcome::Variation]);
        // A sum that drops to zero is a mismatch everywhere.
        let zero = [(v(&[60]), v(&[0])), (v(&[60]), v(&[0]))];
        let other = ReadContext {
            same_device: false,
            ..SAME
        };
        let c = classify_read(OCCLUSION, &read(&zero, loose), other);
        assert_eq!(outcomes(&c), [Outcome::Mismatch, Outcome::Mismatch]);
    }

    #[test]
    fn a_second_view_the_replay_leaves_unavailable_is_not_a_failure() {
        // lavapipe: the whole count in the first query, the second never available.
        let lvp = [(v(&[60]), v(&[120])), (v(&[60]), unavailable())];
        let c = classify_read(OCCLUSION, &read(&lvp, TWO_VIEWS), SAME);
        assert_eq!(
            outcomes(&c),
            [
                Outcome::Match,
                Outcome::NotCompared(NotCompared::MultiviewInFirst)
            ]
        );
        assert!(c.iter().all(|c| !c.outcome.fails()));
        assert_eq!(
            NotCompared::MultiviewInFirst.reason(),
            "multiview: result in first query"
        );
        // The first query unavailable is the replay's failure.
        let none = [(v(&[60]), unavailable()), (v(&[60]), v(&[60]))];
        let c = classify_read(OCCLUSION, &read(&none, TWO_VIEWS), SAME);
        assert_eq!(outcomes(&c), [Outcome::Unavailable, Outcome::Unavailable]);
        // Captured on lavapipe: the app never got the second; the first holds the sum.
        let cap = [(v(&[120]), v(&[60])), (unavailable(), v(&[60]))];
        let c = classify_read(OCCLUSION, &read(&cap, TWO_VIEWS), SAME);
        assert_eq!(
            outcomes(&c),
            [
                Outcome::Match,
                Outcome::NotCompared(NotCompared::CapturedUnavailable)
            ]
        );
    }

    #[test]
    fn a_read_of_some_of_the_views_compares_each_alone() {
        let pairs = [(v(&[60]), v(&[120]))];
        let c = classify_read(OCCLUSION, &read(&pairs, TWO_VIEWS), SAME);
        assert_eq!(outcomes(&c), [Outcome::Variation]);
        assert_eq!(c[0].multiview, Some(Multiview::Alone { views: 2 }));
        let second = [ReadQuery {
            query: 5,
            captured: Some(&pairs[0].0),
            replayed: Some(&pairs[0].0),
            begin: Some(TWO_VIEWS),
        }];
        let c = classify_read(OCCLUSION, &second, SAME);
        assert_eq!(outcomes(&c), [Outcome::Match]);
        let u = unavailable();
        let second = [ReadQuery {
            replayed: Some(&u),
            ..second[0]
        }];
        let c = classify_read(OCCLUSION, &second, SAME);
        assert_eq!(
            outcomes(&c),
            [Outcome::NotCompared(NotCompared::MultiviewInFirst)]
        );
    }

    #[test]
    fn the_begin_decides_precision_and_unknown_keeps_the_callers_reading() {
        let (a, b) = (v(&[5]), v(&[6]));
        let one = |begin: Option<QueryBegin>, precise_if_unknown: bool| {
            let q = [ReadQuery {
                query: 0,
                captured: Some(&a),
                replayed: Some(&b),
                begin,
            }];
            let ctx = ReadContext {
                same_device: true,
                precise_if_unknown,
            };
            classify_read(OCCLUSION, &q, ctx)[0].outcome
        };
        let precise = QueryBegin {
            flags: CONTROL_PRECISE,
            ..QueryBegin::default()
        };
        for unknown in [false, true] {
            assert_eq!(one(Some(precise), unknown), Outcome::Mismatch);
            assert_eq!(
                one(Some(QueryBegin::default()), unknown),
                Outcome::Variation
            );
        }
        assert_eq!(one(None, true), Outcome::Mismatch);
        assert_eq!(one(None, false), Outcome::Variation);
    }
}
