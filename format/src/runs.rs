//! Matching the results of several runs (replays) of one trace: which query read and which
//! counter sample of one results file is which of another, and how much each changed.
//!
//! Used by `quarry compare`; the viewer can use the same matching. Plain integers only: which
//! differences are allowed (the deterministic/variation rule) comes in as a [`Classify`]
//! function, so this module needs no Vulkan.
//!
//! # Matching
//! * A **query read** is keyed by its pool, query index, the `seq` of the capture's read that
//!   returned it, and its occurrence among reads with that key in one loop (a command buffer
//!   copying results each time it is submitted yields one read per submit, same `seq`).
//! * A **counter sample** is keyed by counter name and unit (UUIDs differ between drivers),
//!   frame, command buffer, render pass and occurrence in one loop.
//! * A run replayed with `--loop N` contributes, per key, the lower median of its N values
//!   (an actual measured value, not an average).
//! * Timestamps are absolute clock values that never match between runs: each timestamp query
//!   instead yields the GPU time since the previous timestamp query (by query index) of the same
//!   pool and frame, subtracted in integer ticks masked to the replay device's valid bits.
//! * Performance-query reads are compared through their `CounterValue` records, not raw words.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::query::{self, QueryKind};
use crate::record::{
    CounterValue, DeviceSummary, FileKind, Handle, Header, PerfCounterDesc, QueryResult,
    QueryValues, Record, ReplayInfo,
};
use crate::{FormatError, TraceReader};

// Query types by the one home of the query rules.
const QUERY_TYPE_TIMESTAMP: i32 = QueryKind::Timestamp.raw();
const QUERY_TYPE_PIPELINE_STATISTICS: i32 = QueryKind::PipelineStatistics.raw();
const QUERY_TYPE_PERFORMANCE_QUERY_KHR: i32 = QueryKind::PerformanceQuery.raw();

/// `VkPerformanceCounterUnitKHR` values that add up over scopes (generic, ns, bytes, cycles).
const ADDITIVE_UNITS: [u32; 4] = [0, 2, 3, 10];
/// `VK_PERFORMANCE_COUNTER_UNIT_NANOSECONDS_KHR`.
const UNIT_NANOSECONDS: u32 = 2;

/// Why a results file cannot take part in a comparison.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("{0}: is a trace, not a results file (replay it with `quarry replay --results`)")]
    NotResults(String),
    #[error("{0}: no ReplayInfo record (the replay that wrote it did not finish)")]
    NoReplayInfo(String),
    #[error("{a} and {b} are results of different traces: {why}")]
    DifferentTraces { a: String, b: String, why: String },
}

/// How one value of another run relates to the baseline's, under the deterministic rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// The baseline had no available value: nothing to compare.
    NotCompared,
    Same,
    /// Different in a way the Vulkan spec allows (timing, implementation-defined counts).
    Varies,
    /// A deterministic result differs.
    Differs,
    /// The baseline had a value; this run never got the query available.
    Unavailable,
}

impl Verdict {
    /// Whether this makes a comparison fail.
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Differs | Verdict::Unavailable)
    }

    pub fn word(self) -> &'static str {
        match self {
            Verdict::NotCompared => "not compared",
            Verdict::Same => "same",
            Verdict::Varies => "varies",
            Verdict::Differs => "DIFFERS",
            Verdict::Unavailable => "UNAVAILABLE",
        }
    }
}

/// The deterministic/variation rule for query `i` of `read`, the queries one read returned (for
/// a query of a multiview begin, every query of the begin both runs have; else the query alone):
/// `captured` holds the baseline's replayed values, `replayed` the other run's, and the two devices
/// are the runs' replay devices.
pub type Classify<'a> =
    &'a dyn Fn(&[QueryResult], usize, Option<&DeviceSummary>, Option<&DeviceSummary>) -> Verdict;

/// Identifies one query read across runs of one trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueryKey {
    pub pool: Handle,
    pub query: u32,
    /// `seq` of the capture's read (or copy) that returned the query.
    pub seq: u64,
    /// Occurrence among reads with the same pool, query and seq in one loop.
    pub occurrence: u32,
}

/// Identifies one counter sample across runs of one trace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterKey {
    pub name: String,
    pub unit: u32,
    pub frame: u64,
    pub command_buffer: Handle,
    pub render_pass: Option<u32>,
    pub occurrence: u32,
}

/// One query read of one run, loops merged.
#[derive(Debug, Clone)]
pub struct QueryEntry {
    /// The first loop's record, with `replayed.values` replaced by the median over loops.
    pub result: QueryResult,
    /// Timestamps: GPU ns since the previous timestamp of the pool and frame (median over loops).
    pub interval_ns: Option<f64>,
    /// The previous timestamp query `interval_ns` is measured from.
    pub interval_from: Option<u32>,
}

/// One counter sample of one run, loops merged.
#[derive(Debug, Clone)]
pub struct CounterEntry {
    pub counter: PerfCounterDesc,
    /// Median over loops.
    pub value: f64,
    pub captured: Option<f64>,
}

/// What a results file says about the trace it replayed. `same_trace` compares these.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayedTrace {
    /// The trace's content hash (format 2.0 results: the `TraceIdentity` record).
    pub id: Option<[u8; 16]>,
    /// The trace path as given to `quarry replay`.
    pub trace: String,
    pub application: String,
    pub capture_device: Option<DeviceSummary>,
}

/// One results file, ready to match.
#[derive(Debug, Clone)]
pub struct Run {
    /// How messages and tables name the file.
    pub label: String,
    /// The replay device (results header).
    pub device: Option<DeviceSummary>,
    pub info: ReplayInfo,
    pub trace: ReplayedTrace,
    pub queries: BTreeMap<QueryKey, QueryEntry>,
    pub counters: BTreeMap<CounterKey, CounterEntry>,
}

impl Run {
    /// Reads a results file; any damage is an error (a partial run compares misleadingly).
    pub fn read(path: &Path) -> Result<Run, RunError> {
        let reader = TraceReader::open(path)?;
        if let Some(d) = reader.damage().first() {
            return Err(FormatError::new(
                path,
                d.offset,
                crate::Problem::Corrupt(d.problem.clone()),
            )
            .into());
        }
        let records = reader.records().collect::<Result<Vec<_>, _>>()?;
        Run::from_records(&path.display().to_string(), reader.header(), records)
    }

    /// Builds a run from a results file's header and records.
    pub fn from_records(
        label: &str,
        header: &Header,
        records: impl IntoIterator<Item = Record>,
    ) -> Result<Run, RunError> {
        if header.kind != FileKind::Results {
            return Err(RunError::NotResults(label.to_owned()));
        }
        let mut info = None;
        let mut by_loop: BTreeMap<u32, Vec<QueryResult>> = BTreeMap::new();
        let mut counters: Vec<CounterValue> = Vec::new();
        let mut id = None;
        for r in records {
            match r {
                Record::TraceIdentity(t) => id = Some(t.trace_id),
                Record::ReplayInfo(i) => info = Some(i),
                Record::QueryResult(q) if q.query_type != QUERY_TYPE_PERFORMANCE_QUERY_KHR => {
                    by_loop.entry(q.loop_index).or_default().push(q)
                }
                Record::CounterValue(c) => counters.push(c),
                _ => {}
            }
        }
        let info = info.ok_or_else(|| RunError::NoReplayInfo(label.to_owned()))?;
        let (mask, period) = timestamp_scale(header.device.as_ref());
        let loops: Vec<_> = by_loop
            .into_values()
            .map(|qs| keyed_loop(qs, mask, period))
            .collect();
        Ok(Run {
            label: label.to_owned(),
            device: header.device.clone(),
            trace: ReplayedTrace {
                id,
                trace: info.trace.clone(),
                application: header.application.clone(),
                capture_device: info.capture_device.clone(),
            },
            queries: merge_query_loops(loops),
            counters: merge_counter_loops(counters, info.loops),
            info,
        })
    }
}

/// The mask of the smallest non-zero timestamp valid-bit count of the device's queue families
/// (results do not say which family a query ran on) and its period in ns.
fn timestamp_scale(dev: Option<&DeviceSummary>) -> (u64, f64) {
    let bits = dev.map_or(64, |d| query::device_valid_bits(&d.queue_families));
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let period = dev
        .map(|d| f64::from(d.timestamp_period_ns))
        .filter(|p| *p > 0.0)
        .unwrap_or(1.0);
    (mask, period)
}

/// GPU ns from tick `a` to tick `b`, wrapping within `mask`; `None` when `b` is before `a`.
pub fn ticks_to_ns(a: u64, b: u64, mask: u64, period_ns: f64) -> Option<f64> {
    let d = b.wrapping_sub(a) & mask;
    (d <= mask / 2).then_some(d as f64 * period_ns)
}

type LoopEntries = HashMap<QueryKey, (QueryResult, Option<(u32, f64)>)>;
/// Available timestamps of one pool and frame: (query, key, ticks).
type Stamps = Vec<(u32, QueryKey, u64)>;

/// One loop's reads keyed, with timestamp intervals computed inside the loop.
fn keyed_loop(qs: Vec<QueryResult>, mask: u64, period: f64) -> LoopEntries {
    let mut seen: HashMap<(Handle, u32, u64), u32> = HashMap::new();
    let mut out: LoopEntries = HashMap::with_capacity(qs.len());
    let mut stamps: BTreeMap<(Handle, u64), Stamps> = BTreeMap::new();
    for q in qs {
        let n = seen.entry((q.pool, q.query, q.seq)).or_default();
        let key = QueryKey {
            pool: q.pool,
            query: q.query,
            seq: q.seq,
            occurrence: *n,
        };
        *n += 1;
        if q.query_type == QUERY_TYPE_TIMESTAMP {
            if let Some(t) = q
                .replayed
                .as_ref()
                .filter(|v| v.available)
                .and_then(|v| v.values.first())
            {
                stamps
                    .entry((q.pool, q.frame))
                    .or_default()
                    .push((q.query, key, *t));
            }
        }
        out.insert(key, (q, None));
    }
    for mut group in stamps.into_values() {
        group.sort_by_key(|(query, key, _)| (*query, *key));
        for w in group.windows(2) {
            let ((from, _, a), (_, key, b)) = (w[0], w[1]);
            if let (Some(ns), Some(e)) = (ticks_to_ns(a, b, mask, period), out.get_mut(&key)) {
                e.1 = Some((from, ns));
            }
        }
    }
    out
}

/// Lower median (an element of `v`); `None` when empty.
fn lower_median<T: Copy + PartialOrd>(mut v: Vec<T>) -> Option<T> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len().saturating_sub(1) / 2).copied()
}

fn merge_query_loops(mut loops: Vec<LoopEntries>) -> BTreeMap<QueryKey, QueryEntry> {
    let mut out = BTreeMap::new();
    if loops.is_empty() {
        return out;
    }
    let rest = loops.split_off(1);
    for (key, (mut result, interval)) in loops.pop().unwrap_or_default() {
        let others: Vec<_> = rest.iter().filter_map(|l| l.get(&key)).collect();
        if let Some(first) = result.replayed.as_ref().filter(|r| r.available) {
            let width = first.values.len();
            let all: Vec<&QueryValues> = std::iter::once(first)
                .chain(others.iter().filter_map(|o| o.0.replayed.as_ref()))
                .filter(|v| v.available && v.values.len() == width)
                .collect();
            if all.len() > 1 {
                let merged = (0..width)
                    .map(|i| lower_median(all.iter().map(|v| v.values[i]).collect()).unwrap_or(0))
                    .collect();
                if let Some(r) = result.replayed.as_mut() {
                    r.values = merged;
                }
            }
        }
        let interval_ns = lower_median(
            std::iter::once(interval)
                .chain(others.iter().map(|o| o.1))
                .flatten()
                .map(|(_, ns)| ns)
                .collect(),
        );
        out.insert(
            key,
            QueryEntry {
                result,
                interval_ns,
                interval_from: interval.map(|(from, _)| from),
            },
        );
    }
    out
}

/// Counter records carry no loop index: a replay writes each loop's samples in the same order,
/// so with `loops` loops and `n` samples of one key, sample `i` is occurrence `i % (n / loops)`.
fn merge_counter_loops(
    values: Vec<CounterValue>,
    loops: u32,
) -> BTreeMap<CounterKey, CounterEntry> {
    let mut groups: BTreeMap<CounterKey, Vec<CounterValue>> = BTreeMap::new();
    for c in values {
        let key = CounterKey {
            name: c.counter.name.clone(),
            unit: c.counter.unit,
            frame: c.frame,
            command_buffer: c.command_buffer,
            render_pass: c.render_pass,
            occurrence: 0,
        };
        groups.entry(key).or_default().push(c);
    }
    let mut out = BTreeMap::new();
    let loops = loops.max(1) as usize;
    for (key, samples) in groups {
        let per_loop = if samples.len() % loops == 0 {
            samples.len() / loops
        } else {
            samples.len()
        };
        for occ in 0..per_loop {
            let picked: Vec<&CounterValue> = samples.iter().skip(occ).step_by(per_loop).collect();
            let value = lower_median(picked.iter().map(|c| c.value).collect()).unwrap_or(0.0);
            let first = picked[0];
            out.insert(
                CounterKey {
                    occurrence: occ as u32,
                    ..key.clone()
                },
                CounterEntry {
                    counter: first.counter.clone(),
                    value,
                    captured: first.captured,
                },
            );
        }
    }
    out
}

fn captured(q: &QueryEntry) -> Option<&[u64]> {
    q.result.captured.as_ref().map(|c| &c.values[..])
}

/// Whether two runs replayed the same trace; `Err` says how they differ.
///
/// Until results files carry a hash of the trace's content, this compares what they do carry:
/// the application, the capture device, and the captured values (which come from the trace,
/// whatever the replay device) of every query read and counter sample both runs have; runs with
/// queries must share at least one read. The trace path is not compared: traces get copied and
/// renamed.
pub fn same_trace(a: &Run, b: &Run) -> Result<(), String> {
    let (ta, tb) = (&a.trace, &b.trace);
    // The content hash settles it where both files carry one; older results fall back on what
    // they say about the trace.
    if let (Some(x), Some(y)) = (ta.id, tb.id) {
        return if x == y {
            Ok(())
        } else {
            Err("they were replayed from traces with different contents".into())
        };
    }
    if ta.application != tb.application {
        return Err(format!(
            "application \"{}\" vs \"{}\"",
            ta.application, tb.application
        ));
    }
    let dev = |d: &Option<DeviceSummary>| {
        d.as_ref().map(|d| {
            (
                d.name.clone(),
                d.vendor_id,
                d.device_id,
                d.driver_version,
                d.device_uuid,
            )
        })
    };
    if dev(&ta.capture_device) != dev(&tb.capture_device) {
        let name = |d: &Option<DeviceSummary>| {
            d.as_ref()
                .map_or("an unknown device".to_owned(), |d| d.name.clone())
        };
        return Err(format!(
            "captured on {} vs {}",
            name(&ta.capture_device),
            name(&tb.capture_device)
        ));
    }
    let mut common = 0usize;
    for (key, qa) in &a.queries {
        let Some(qb) = b.queries.get(key) else {
            continue;
        };
        common += 1;
        if qa.result.query_type != qb.result.query_type || captured(qa) != captured(qb) {
            return Err(format!(
                "pool {:#x} query {} read at seq {} was captured differently",
                key.pool, key.query, key.seq
            ));
        }
    }
    if common == 0 && !a.queries.is_empty() && !b.queries.is_empty() {
        return Err("no query read in common".to_owned());
    }
    for (key, ca) in &a.counters {
        if let Some(cb) = b.counters.get(key) {
            if let (Some(x), Some(y)) = (ca.captured, cb.captured) {
                if x.to_bits() != y.to_bits() {
                    return Err(format!(
                        "counter \"{}\" frame {} was captured differently",
                        key.name, key.frame
                    ));
                }
            }
        }
    }
    Ok(())
}

/// What a compared value measures, which decides its direction words and how it aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    /// GPU time (ns): more is slower. Sums over a group.
    Time,
    /// A count (samples, invocations, bytes, cycles): sums over a group.
    Count,
    /// A level (percentage, rate, temperature, ...): averages over a group.
    Level,
}

impl Measure {
    /// What a performance counter of `VkPerformanceCounterUnitKHR` `unit` measures.
    pub fn of_counter(unit: u32) -> Measure {
        if unit == UNIT_NANOSECONDS {
            Measure::Time
        } else if ADDITIVE_UNITS.contains(&unit) {
            Measure::Count
        } else {
            Measure::Level
        }
    }

    /// The word for a change of sign `delta` ("same" for none).
    pub fn direction(self, delta: f64) -> &'static str {
        match (self, delta.partial_cmp(&0.0)) {
            (_, Some(std::cmp::Ordering::Equal)) | (_, None) => "same",
            (Measure::Time, Some(std::cmp::Ordering::Greater)) => "slower",
            (Measure::Time, _) => "faster",
            (Measure::Count, Some(std::cmp::Ordering::Greater)) => "more",
            (Measure::Count, _) => "fewer",
            (Measure::Level, Some(std::cmp::Ordering::Greater)) => "higher",
            (Measure::Level, _) => "lower",
        }
    }

    /// Whether a change of sign `delta` is an improvement: `Some(true)` for less GPU time,
    /// `Some(false)` for more; `None` where more is neither better nor worse (counts, levels)
    /// or nothing changed.
    pub fn better(self, delta: f64) -> Option<bool> {
        match self {
            Measure::Time if delta < 0.0 => Some(true),
            Measure::Time if delta > 0.0 => Some(false),
            Measure::Time | Measure::Count | Measure::Level => None,
        }
    }
}

/// Whether a change of `change_pct` percent crosses a threshold of `threshold_pct` percent
/// (`compare --threshold`; the viewer highlights with it).
pub fn over_threshold(change_pct: f64, threshold_pct: f64) -> bool {
    change_pct.abs() > threshold_pct
}

/// Whether two device summaries describe the same device running the same driver (the rule
/// `replay --compare` uses to decide whether deterministic results must match exactly).
pub fn same_device(a: &DeviceSummary, b: &DeviceSummary) -> bool {
    a.vendor_id == b.vendor_id
        && a.device_id == b.device_id
        && a.driver_id == b.driver_id
        && a.driver_version == b.driver_version
        && a.name == b.name
}

/// The deterministic/variation rule for runs, for [`match_runs`]: [`query::classify_read`] with
/// "same device" from the runs' replay devices. An occlusion query reads as precise when its
/// begin says so; results files that do not record the begin read as non-precise (zero vs
/// non-zero is exact). Timestamps compare through their intervals, so a clock difference only
/// varies.
pub fn classify_runs(
    read: &[QueryResult],
    i: usize,
    a: Option<&DeviceSummary>,
    b: Option<&DeviceSummary>,
) -> Verdict {
    use query::{Outcome, ReadContext, ReadQuery};
    let Some(q) = read.get(i) else {
        return Verdict::NotCompared;
    };
    let ctx = ReadContext {
        same_device: a.zip(b).is_some_and(|(a, b)| same_device(a, b)),
        precise_if_unknown: false,
    };
    let queries: Vec<ReadQuery> = read.iter().map(read_query).collect();
    match query::classify_read(q.query_type, &queries, ctx)[i].outcome {
        Outcome::Match => Verdict::Same,
        Outcome::Mismatch => Verdict::Differs,
        Outcome::Variation | Outcome::Clock => Verdict::Varies,
        Outcome::NotCompared(_) => Verdict::NotCompared,
        Outcome::Unavailable => Verdict::Unavailable,
    }
}

/// A results record as [`query::classify_read`] takes it.
pub fn read_query(q: &QueryResult) -> query::ReadQuery<'_> {
    query::ReadQuery {
        query: q.query,
        captured: q.captured.as_ref(),
        replayed: q.replayed.as_ref(),
        begin: q.begin,
    }
}

/// What a value is, independent of where it was measured: the series a grouping sums.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// One value slot of a query of `pool` (`slot` is the pipeline-statistics bit for
    /// statistics pools, else the index in the query's values; `None` for single-value queries).
    Query {
        pool: Handle,
        query_type: i32,
        slot: Option<u32>,
    },
    /// GPU time between consecutive timestamps of `pool`.
    Interval { pool: Handle },
    /// A performance counter.
    Counter { name: String, unit: u32 },
}

/// Where a compared value was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Item {
    Query(QueryKey),
    /// A timestamp query and the previous one of its pool and frame.
    Interval {
        key: QueryKey,
        from: u32,
    },
    Counter,
}

/// One value matched across runs (the baseline is run 0).
#[derive(Debug, Clone)]
pub struct Matched {
    pub metric: Metric,
    pub item: Item,
    /// Occurrence key of counter samples (`None` for queries).
    pub counter: Option<CounterKey>,
    pub frame: u64,
    pub command_buffer: Handle,
    pub render_pass: Option<u32>,
    pub measure: Measure,
    /// Per run; `None` where the run lacks the value.
    pub values: Vec<Option<f64>>,
    /// Per run against the baseline (`Same` for the baseline itself).
    pub verdicts: Vec<Verdict>,
}

/// Every matched value, and what only some runs had.
#[derive(Debug, Clone, Default)]
pub struct Matching {
    pub values: Vec<Matched>,
    /// Per run: query reads in this run that the baseline lacks / the baseline has that it lacks.
    pub queries_only_here: Vec<usize>,
    pub queries_missing: Vec<usize>,
    pub counters_only_here: Vec<usize>,
    pub counters_missing: Vec<usize>,
    /// Per run: per-query verdict counts against the baseline (queries, not value slots).
    pub query_verdicts: Vec<BTreeMap<Verdict, usize>>,
}

/// Pipeline-statistics bit of the `i`-th value of a query with `flags`.
fn statistic_bit(flags: u32, i: usize) -> Option<u32> {
    (0..32).filter(|b| flags & (1 << b) != 0).nth(i)
}

/// Matches every query read and counter sample of `runs[1..]` with the baseline `runs[0]`.
pub fn match_runs(runs: &[Run], classify: Classify) -> Matching {
    let n = runs.len();
    let mut m = Matching {
        queries_only_here: vec![0; n],
        queries_missing: vec![0; n],
        counters_only_here: vec![0; n],
        counters_missing: vec![0; n],
        query_verdicts: vec![BTreeMap::new(); n],
        ..Matching::default()
    };
    let Some(base) = runs.first() else {
        return m;
    };
    for (i, r) in runs.iter().enumerate().skip(1) {
        m.queries_only_here[i] = r
            .queries
            .keys()
            .filter(|k| !base.queries.contains_key(k))
            .count();
        m.counters_only_here[i] = r
            .counters
            .keys()
            .filter(|k| !base.counters.contains_key(k))
            .count();
    }
    for (key, q) in &base.queries {
        let entries: Vec<Option<&QueryEntry>> = runs.iter().map(|r| r.queries.get(key)).collect();
        let is_timestamp = q.result.query_type == QUERY_TYPE_TIMESTAMP;
        let verdicts: Vec<Verdict> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| match e {
                _ if i == 0 => Verdict::Same,
                None => Verdict::NotCompared,
                Some(e) => {
                    // The begin from whichever file records it (results written before it do not).
                    let pair = |q: &QueryEntry, e: &QueryEntry| QueryResult {
                        captured: q.result.replayed.clone(),
                        replayed: e.result.replayed.clone(),
                        begin: q.result.begin.or(e.result.begin),
                        ..q.result.clone()
                    };
                    // The queries of a multiview begin compare together (see `query::classify_read`).
                    let (read, at) = match q
                        .result
                        .begin
                        .or(e.result.begin)
                        .filter(|b| b.views() > 1 && b.covers(key.query))
                    {
                        Some(b) => {
                            let mut read = Vec::new();
                            let mut at = 0;
                            for query in b.first..b.first.saturating_add(b.views()) {
                                let k = QueryKey { query, ..*key };
                                if let (Some(x), Some(y)) =
                                    (base.queries.get(&k), runs[i].queries.get(&k))
                                {
                                    if query == key.query {
                                        at = read.len();
                                    }
                                    read.push(pair(x, y));
                                }
                            }
                            (read, at)
                        }
                        None => (vec![pair(q, e)], 0),
                    };
                    let v = classify(&read, at, base.device.as_ref(), runs[i].device.as_ref());
                    // A timestamp's clock value always varies; what compares is its interval.
                    if is_timestamp && v == Verdict::Varies && e.interval_ns == q.interval_ns {
                        Verdict::Same
                    } else {
                        v
                    }
                }
            })
            .collect();
        for (i, (e, v)) in entries.iter().zip(&verdicts).enumerate().skip(1) {
            match e {
                None => m.queries_missing[i] += 1,
                Some(_) => *m.query_verdicts[i].entry(*v).or_default() += 1,
            }
        }
        let r = &q.result;
        let value_of = |e: &Option<&QueryEntry>, slot: usize| {
            e.and_then(|e| e.result.replayed.as_ref())
                .filter(|v| v.available)
                .and_then(|v| v.values.get(slot))
                .map(|x| *x as f64)
        };
        // A query's verdict, except that a value equal to the baseline's is the same.
        let common = |metric, item, measure, values: Vec<Option<f64>>| Matched {
            verdicts: verdicts
                .iter()
                .zip(&values)
                .map(|(v, x)| match x {
                    Some(x) if values[0] == Some(*x) => Verdict::Same,
                    _ => *v,
                })
                .collect(),
            metric,
            item,
            counter: None,
            frame: r.frame,
            command_buffer: r.command_buffer,
            render_pass: None,
            measure,
            values,
        };
        if r.query_type == QUERY_TYPE_TIMESTAMP {
            if let Some(from) = q.interval_from {
                let values = entries
                    .iter()
                    .map(|e| e.and_then(|e| e.interval_ns))
                    .collect();
                m.values.push(common(
                    Metric::Interval { pool: r.pool },
                    Item::Interval { key: *key, from },
                    Measure::Time,
                    values,
                ));
            }
            continue;
        }
        let slots = r
            .replayed
            .as_ref()
            .or(r.captured.as_ref())
            .map_or(0, |v| v.values.len());
        for s in 0..slots {
            let slot = if r.query_type == QUERY_TYPE_PIPELINE_STATISTICS {
                statistic_bit(r.pipeline_statistics, s)
            } else {
                (slots > 1).then_some(s as u32)
            };
            let metric = Metric::Query {
                pool: r.pool,
                query_type: r.query_type,
                slot,
            };
            let values = entries.iter().map(|e| value_of(e, s)).collect();
            m.values
                .push(common(metric, Item::Query(*key), Measure::Count, values));
        }
    }
    for (key, c) in &base.counters {
        let entries: Vec<Option<&CounterEntry>> =
            runs.iter().map(|r| r.counters.get(key)).collect();
        for (i, e) in entries.iter().enumerate().skip(1) {
            if e.is_none() {
                m.counters_missing[i] += 1;
            }
        }
        let values: Vec<Option<f64>> = entries.iter().map(|e| e.map(|e| e.value)).collect();
        // Counters are measurements: never deterministic.
        let verdicts = values
            .iter()
            .map(|v| match v {
                None => Verdict::NotCompared,
                Some(x) if Some(*x) == values[0] => Verdict::Same,
                Some(_) => Verdict::Varies,
            })
            .collect();
        m.values.push(Matched {
            metric: Metric::Counter {
                name: key.name.clone(),
                unit: key.unit,
            },
            item: Item::Counter,
            counter: Some(key.clone()),
            frame: key.frame,
            command_buffer: key.command_buffer,
            render_pass: key.render_pass,
            measure: Measure::of_counter(c.counter.unit),
            values,
            verdicts,
        });
    }
    m
}

/// How `compare` groups matched values into rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum By {
    /// One row per query value and counter sample.
    Query,
    /// One row per metric (pool value slot, timestamp intervals of a pool, counter).
    Counter,
    /// Per metric, command buffer and render pass.
    RenderPass,
    /// Per metric and command buffer.
    CommandBuffer,
    /// Per metric and frame.
    Frame,
}

/// Where a row's values were measured; `None` where the grouping spans them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub metric: Metric,
    /// `By::Query` only.
    pub item: Option<Item>,
    pub counter_occurrence: Option<u32>,
    pub frame: Option<u64>,
    pub command_buffer: Option<Handle>,
    /// `Some(None)`: grouped per render pass, outside any render pass.
    pub render_pass: Option<Option<u32>>,
}

/// One row of a comparison: values per run and changes against the baseline.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: RowKey,
    pub measure: Measure,
    /// Matched values the row aggregates (those every run has).
    pub samples: usize,
    pub values: Vec<Option<f64>>,
    /// Per run: relative change against the baseline in percent (`None` for the baseline or
    /// where a value is missing; infinite when the baseline is 0).
    pub change_pct: Vec<Option<f64>>,
    /// Per run: the worst verdict of the row's values.
    pub verdicts: Vec<Verdict>,
}

impl Row {
    /// The largest absolute change over the runs.
    pub fn largest_change(&self) -> f64 {
        self.change_pct
            .iter()
            .flatten()
            .map(|c| c.abs())
            .fold(0.0, f64::max)
    }

    pub fn fails(&self) -> bool {
        self.verdicts.iter().any(|v| v.fails())
    }

    /// Run `i`'s change against the baseline in words (`faster`, `more`, ...), when both have
    /// a value.
    pub fn direction(&self, i: usize) -> Option<&'static str> {
        let (a, b) = (
            self.values.first().copied().flatten()?,
            self.values.get(i).copied().flatten()?,
        );
        Some(self.measure.direction(b - a))
    }

    /// Whether run `i`'s change is an improvement ([`Measure::better`]).
    pub fn better(&self, i: usize) -> Option<bool> {
        let (a, b) = (
            self.values.first().copied().flatten()?,
            self.values.get(i).copied().flatten()?,
        );
        self.measure.better(b - a)
    }
}

/// Relative change of `b` against `a` in percent.
pub fn change_pct(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else if a == 0.0 {
        f64::INFINITY.copysign(b)
    } else {
        (b - a) / a.abs() * 100.0
    }
}

/// Groups matched values into rows, sorted with failing rows first, then by largest change.
pub fn rows(matching: &Matching, by: By) -> Vec<Row> {
    let mut groups: BTreeMap<RowKey, Row> = BTreeMap::new();
    for v in &matching.values {
        let key = RowKey {
            metric: v.metric.clone(),
            item: (by == By::Query).then_some(v.item),
            counter_occurrence: v
                .counter
                .as_ref()
                .filter(|_| by == By::Query)
                .map(|c| c.occurrence),
            frame: matches!(by, By::Query | By::Frame).then_some(v.frame),
            command_buffer: matches!(by, By::Query | By::CommandBuffer | By::RenderPass)
                .then_some(v.command_buffer),
            render_pass: matches!(by, By::Query | By::RenderPass).then_some(v.render_pass),
        };
        let n = v.values.len();
        let row = groups.entry(key.clone()).or_insert_with(|| Row {
            key,
            measure: v.measure,
            samples: 0,
            values: vec![None; n],
            change_pct: vec![None; n],
            verdicts: vec![Verdict::NotCompared; n],
        });
        for (w, x) in row.verdicts.iter_mut().zip(&v.verdicts) {
            *w = (*w).max(*x);
        }
        // Sums only over values every run has, so the totals stay comparable.
        if v.values.iter().all(Option::is_some) || by == By::Query {
            row.samples += 1;
            for (acc, x) in row.values.iter_mut().zip(&v.values) {
                if let Some(x) = x {
                    *acc = Some(acc.unwrap_or(0.0) + x);
                }
            }
        }
    }
    let mut out: Vec<Row> = groups.into_values().collect();
    for row in &mut out {
        if row.measure == Measure::Level && row.samples > 1 {
            for x in row.values.iter_mut().flatten() {
                *x /= row.samples as f64;
            }
        }
        let base = row.values[0];
        for i in 1..row.values.len() {
            row.change_pct[i] = base.zip(row.values[i]).map(|(a, b)| change_pct(a, b));
        }
    }
    out.sort_by(|a, b| {
        b.fails()
            .cmp(&a.fails())
            .then(b.largest_change().total_cmp(&a.largest_change()))
    });
    out
}
