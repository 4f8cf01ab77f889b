//! How each replayed row compares with the captured values: the shared rule of
//! [`format::query::classify_read`], computed once when the dataset is finished, for the table,
//! its highlights and the exports alike.

use std::collections::HashMap;

use format::query::{self, Classified, Outcome, ReadContext, ReadQuery};
use format::record::{QueryBegin, QueryValues};

use super::{Dataset, Pool, Replayed, Row};

impl Dataset {
    /// How results file `f` compares with the captured values of row `row` (`None` where either
    /// is missing).
    pub fn classified(&self, row: usize, f: usize) -> Option<Classified> {
        self.replayed.get(f)?.get(row)?.as_ref()?.classified
    }

    /// [`Dataset::classified`]'s outcome.
    pub fn outcome(&self, row: usize, f: usize) -> Option<Outcome> {
        self.classified(row, f).map(|c| c.outcome)
    }
}

/// How the viewer reads an occlusion query whose begin neither the results file nor an open trace
/// records: as precise, so on the capture device it flags what `replay --compare` flags for
/// precise queries.
const PRECISE_IF_UNKNOWN: bool = true;

/// How `replayed` compares with `captured` when the query is read alone, under the shared rule
/// ([`format::query::classify_read`]); `None` when either side is missing. "Same device" comes
/// from the results file, as `replay --compare` decides it; `begin` says whether an occlusion
/// query was precise. Timestamps are clock values, a changed performance counter a variation.
/// Tables and exports take [`Dataset::outcome`], which also compares the queries of a multiview
/// begin by their sum.
pub fn outcome(
    query_type: i32,
    captured: Option<&QueryValues>,
    replayed: Option<&Replayed>,
    begin: Option<QueryBegin>,
) -> Option<Outcome> {
    let (c, r) = (captured?, replayed?);
    let q = ReadQuery {
        query: begin.map_or(0, |b| b.first),
        captured: Some(c),
        replayed: Some(&r.values),
        begin,
    };
    let ctx = ReadContext {
        same_device: r.same_device,
        precise_if_unknown: PRECISE_IF_UNKNOWN,
    };
    Some(query::classify_read(query_type, &[q], ctx)[0].outcome)
}

/// Classifies every row one results file replayed (`col`, indexed like `rows`): each row alone,
/// except that the queries of one multiview begin in one read compare together.
pub(super) fn classify_rows(rows: &[Row], pools: &[Pool], col: &mut [Option<Replayed>]) {
    type Span = (u64, u32, u32, u32, QueryBegin);
    let mut spans: HashMap<Span, Vec<usize>> = HashMap::new();
    let classify = |members: &[usize], col: &mut [Option<Replayed>]| {
        let ty = pools[rows[members[0]].pool as usize].query_type;
        let read: Vec<ReadQuery> = members
            .iter()
            .map(|&i| ReadQuery {
                query: rows[i].query,
                captured: rows[i].captured.as_ref(),
                replayed: col[i].as_ref().map(|r| &r.values),
                begin: rows[i].begin,
            })
            .collect();
        let ctx = ReadContext {
            same_device: col[members[0]].as_ref().is_some_and(|r| r.same_device),
            precise_if_unknown: PRECISE_IF_UNKNOWN,
        };
        let classified = query::classify_read(ty, &read, ctx);
        for (&i, c) in members.iter().zip(classified) {
            if let Some(r) = col[i].as_mut() {
                r.classified = Some(c);
            }
        }
    };
    for (i, row) in rows.iter().enumerate() {
        if row.captured.is_none() || col[i].is_none() {
            continue;
        }
        match row.begin.filter(|b| b.views() > 1) {
            Some(b) => spans
                .entry((row.seq, row.pool, row.loop_index, row.pass, b))
                .or_default()
                .push(i),
            None => classify(&[i], col),
        }
    }
    for members in spans.values() {
        classify(members, col);
    }
}
