//! The viewer's data model: one row per query use, built from a trace and/or results files.
//!
//! Records stream through [`DatasetBuilder`] one at a time so a million-query file never sits in
//! memory twice (once as records, once as rows). Everything here is plain data: no egui.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use format::record::{
    DeviceSummary, FileKind, Handle, Header, QueryBegin, QueryValues, Record, ReplayInfo,
};

use format::query::{self, Classified, PoolShape, QueryKind, TimestampClock, ValueSlots};

use crate::export::Names;
use crate::labels::LabelTracker;
use crate::model;

mod outcomes;
#[cfg(test)]
mod outcomes_tests;
mod results;

use outcomes::classify_rows;
pub use outcomes::outcome;

/// One opened file, as the header panel shows it.
#[derive(Debug, Clone)]
pub struct FileSummary {
    pub path: PathBuf,
    /// Short name used in column headers.
    pub label: String,
    pub header: Header,
    /// The header's device, or a later `Device` record.
    pub device: Option<DeviceSummary>,
    pub replay: Option<ReplayInfo>,
    pub frames: u64,
    pub records: u64,
    pub queries: u64,
    /// Messages from the writer (`Note`) and problems met while reading (bad query bytes, ...).
    pub notes: Vec<String>,
    /// Set when reading stopped early; what was read before stays usable.
    pub error: Option<String>,
}

/// A query pool as the table shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub handle: Handle,
    pub query_type: i32,
    pub pipeline_statistics: u32,
    pub perf_counters: usize,
    /// Debug-utils name when the app set one.
    pub name: Option<String>,
}

impl Pool {
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{n} ({:#x})", self.handle),
            None => format!("{:#x}", self.handle),
        }
    }
}

/// Host times (CLOCK_MONOTONIC ns) of one query use; 0 = not known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Times {
    pub reset: u64,
    pub begin: u64,
    pub end: u64,
    pub submit: u64,
    pub available: u64,
    /// A timestamp query's GPU time moved to the host clock through a calibration sample.
    pub gpu: u64,
}

/// One use of one query: captured values and where it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub frame: u64,
    pub queue: Handle,
    pub command_buffer: Handle,
    /// Index into [`Dataset::pools`].
    pub pool: u32,
    pub query: u32,
    pub seq: u64,
    pub loop_index: u32,
    pub pass: u32,
    /// `VkQueryResultFlags` the app read with.
    pub flags: u32,
    pub captured: Option<QueryValues>,
    /// Timestamps: GPU time in ns (masked, period applied).
    pub captured_gpu_ns: Option<f64>,
    /// Timestamps: how the captured ticks read (valid bits, period), for differences in ticks.
    pub captured_clock: Option<TimestampClock>,
    pub times: Times,
    /// Debug-utils label path around the query's begin (queue labels at the submit, then the
    /// command buffer's), from the trace.
    pub label: Option<Arc<str>>,
    /// How the query was begun: from the results file, else the trace's begin flags (without
    /// its view mask); `None` when neither says.
    pub begin: Option<QueryBegin>,
}

/// What one results file replayed for one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub values: QueryValues,
    pub gpu_ns: Option<f64>,
    /// Timestamps: how the replayed ticks read (the replay device's valid bits and period).
    pub clock: Option<TimestampClock>,
    pub submit_ns: u64,
    pub available_ns: u64,
    /// Whether the file's replay device is the capture device with the same driver
    /// (`format::runs::same_device`); true until the file's replay info says otherwise.
    pub same_device: bool,
    /// How it compares with the captured values, set when the dataset is finished (`None` where
    /// the row has no captured values).
    pub classified: Option<Classified>,
}

/// One column of captured values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueColumn {
    /// The single value of occlusion, timestamp and most other types.
    Single,
    /// One pipeline-statistics bit.
    Stat(u32),
    XfbWritten,
    XfbNeeded,
    /// One counter of a performance query.
    Perf(usize),
}

impl ValueColumn {
    pub fn title(&self) -> String {
        match self {
            ValueColumn::Single => "Value".to_owned(),
            ValueColumn::Stat(b) => model::pipeline_statistic_name(*b),
            ValueColumn::XfbWritten => "XFB written".to_owned(),
            ValueColumn::XfbNeeded => "XFB needed".to_owned(),
            ValueColumn::Perf(i) => format!("Counter {i}"),
        }
    }

    /// The slot of `values` this column shows for a query of `pool`, if any.
    pub fn slot(&self, pool: &Pool) -> Option<usize> {
        let slots = QueryKind::from_raw(pool.query_type).slots();
        match (self, slots) {
            (ValueColumn::Stat(b), ValueSlots::Statistics) => {
                model::statistic_slot(pool.pipeline_statistics, *b)
            }
            (ValueColumn::XfbWritten, ValueSlots::WrittenAndNeeded) => Some(0),
            (ValueColumn::XfbNeeded, ValueSlots::WrittenAndNeeded) => Some(1),
            (ValueColumn::Perf(i), ValueSlots::Counters) => Some(*i),
            (ValueColumn::Single, ValueSlots::One) => Some(0),
            (
                ValueColumn::Single,
                ValueSlots::StatusOnly
                | ValueSlots::Statistics
                | ValueSlots::WrittenAndNeeded
                | ValueSlots::Counters,
            )
            | (
                ValueColumn::Stat(_)
                | ValueColumn::XfbWritten
                | ValueColumn::XfbNeeded
                | ValueColumn::Perf(_),
                _,
            ) => None,
        }
    }
}

/// One performance-counter sample, captured and per results file.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterRow {
    pub name: String,
    pub category: String,
    pub description: String,
    pub unit: u32,
    pub pass: u32,
    pub frame: u64,
    pub command_buffer: Handle,
    pub render_pass: Option<u32>,
    pub captured: Option<f64>,
    /// Indexed like [`Dataset::results`].
    pub values: Vec<Option<f64>>,
    /// Debug-utils name of the `VkRenderPass` (from the trace), render-pass samples only.
    pub render_pass_name: Option<String>,
    /// Command-buffer label path at the render pass's begin (from the trace).
    pub label: Option<Arc<str>>,
}

impl CounterRow {
    /// The render pass's debug-utils name, else the innermost label around its begin.
    pub fn render_pass_title(&self) -> Option<&str> {
        self.render_pass_name
            .as_deref()
            .or_else(|| self.label.as_deref().and_then(|l| l.rsplit('/').next()))
    }
}

/// Everything the viewer shows.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    pub trace: Option<FileSummary>,
    pub results: Vec<FileSummary>,
    /// Files that could not be opened at all: (path, message).
    pub failed: Vec<(PathBuf, String)>,
    pub pools: Vec<Pool>,
    pub rows: Vec<Row>,
    /// `replayed[file][row]`, file indexed like `results`.
    pub replayed: Vec<Vec<Option<Replayed>>>,
    /// Any results file disagrees with the captured values of the row.
    pub mismatch: Vec<bool>,
    pub value_columns: Vec<ValueColumn>,
    pub counters: Vec<CounterRow>,
    /// (lowest, highest) frame of the rows.
    pub frames: (u64, u64),
    /// Debug-utils object names of the trace (queues, command buffers, pools, render passes).
    pub names: Names,
}

/// ns between two timestamps, subtracted in masked integer ticks when their clock is known
/// (GPU times near 2^60 ticks lose whole microseconds in f64), else from the converted times.
pub fn timestamp_span_ns(
    start: (Option<&QueryValues>, Option<f64>),
    end: (Option<&QueryValues>, Option<f64>),
    clock: Option<TimestampClock>,
) -> Option<f64> {
    let (Some(a), Some(b)) = (start.1, end.1) else {
        return None;
    };
    let ticks = |v: Option<&QueryValues>| v.and_then(|v| v.values.first().copied());
    match (clock, ticks(start.0), ticks(end.0)) {
        (Some(c), Some(s), Some(e)) => c.delta_ns(s, e),
        _ => Some(b - a),
    }
}

impl Dataset {
    /// Builds a dataset from in-memory files (tests, fixtures); `quarry view` streams from disk.
    pub fn from_records(files: Vec<(PathBuf, Header, Vec<Record>)>) -> Dataset {
        let mut b = DatasetBuilder::default();
        for (path, header, records) in files {
            b.begin_file(&path, header);
            for r in records {
                b.record(r);
            }
            b.end_file(None);
        }
        b.finish()
    }

    pub fn pool_of(&self, row: &Row) -> &Pool {
        &self.pools[row.pool as usize]
    }

    /// Labels of results files, for column headers.
    pub fn result_labels(&self) -> Vec<String> {
        self.results.iter().map(|f| f.label.clone()).collect()
    }

    /// Lowest and highest frame of any row (computed once in `finish`: the UI asks every frame).
    pub fn frame_range(&self) -> (u64, u64) {
        self.frames
    }

    pub fn is_empty(&self) -> bool {
        self.trace.is_none() && self.results.is_empty()
    }
}

/// Per (pool, query) state while walking a trace.
#[derive(Default, Clone)]
struct QueryState {
    generation: u32,
    times: Times,
    frame: u64,
    queue: Handle,
    queue_family: u32,
    command_buffer: Handle,
    /// Label paths: the command buffer's at the begin, the queue's at the submit.
    cb_label: Option<Arc<str>>,
    queue_label: Option<Arc<str>>,
    /// Row made for the current generation, so repeated polling updates one row.
    row: Option<(u32, u32)>,
    /// Its begin in the trace: control flags (0 for timestamps and writes) and view mask.
    begin: Option<QueryBegin>,
}

#[derive(Default)]
struct CbState {
    submitted: bool,
    queries: Vec<(Handle, u32)>,
}

#[derive(Default)]
struct TracePass {
    states: HashMap<(Handle, u32), QueryState>,
    cbs: HashMap<Handle, CbState>,
    calibration: Option<(u64, u64)>,
    labels: LabelTracker,
    rows: Vec<Row>,
    by_seq: HashMap<(Handle, u32, u64), u32>,
}

/// A counter sample's identity: counter name (an index into `counter_names`) and unit, frame,
/// command buffer, render pass.
type CounterKey = (u32, u32, u64, Handle, Option<u32>);

/// Kind of the file currently being read.
enum Current {
    None,
    Trace,
    Results(usize),
}

/// Streams records of several files into a [`Dataset`].
///
/// Give the trace (if any) first: results rows take their timeline and names from it.
pub struct DatasetBuilder {
    ds: Dataset,
    current: Current,
    summary: Option<FileSummary>,
    pool_index: HashMap<Handle, u32>,
    names: Names,
    trace: TracePass,
    /// Rows from results files, keyed to match the same query across files.
    result_rows: Vec<Row>,
    result_types: Vec<i32>,
    result_key: HashMap<(u64, Handle, u32, u32, u32), u32>,
    counter_key: HashMap<CounterKey, usize>,
    counter_names: HashMap<String, u32>,
    /// How many rows the current results file has produced (for the same-order fast path).
    file_row_cursor: usize,
    /// The pool `pool_for` returned last.
    last_pool: Option<u32>,
}

impl Default for DatasetBuilder {
    fn default() -> Self {
        DatasetBuilder {
            ds: Dataset::default(),
            current: Current::None,
            summary: None,
            pool_index: HashMap::new(),
            names: Names::default(),
            trace: TracePass::default(),
            result_rows: Vec::new(),
            result_types: Vec::new(),
            result_key: HashMap::new(),
            counter_key: HashMap::new(),
            counter_names: HashMap::new(),
            file_row_cursor: 0,
            last_pool: None,
        }
    }
}

fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Cap on queries touched by one reset, so a corrupt count cannot stall the viewer.
const MAX_RESET_SPAN: u32 = 1 << 16;

impl DatasetBuilder {
    /// Starts a file. A second trace replaces the role of the first (its summary is kept as
    /// a note on the new one).
    pub fn begin_file(&mut self, path: &Path, header: Header) {
        let device = header.device.clone();
        self.current = match header.kind {
            FileKind::Trace => Current::Trace,
            FileKind::Results => {
                self.ds.replayed.push(Vec::new());
                Current::Results(self.ds.replayed.len() - 1)
            }
        };
        self.file_row_cursor = 0;
        self.summary = Some(FileSummary {
            path: path.to_path_buf(),
            label: file_label(path),
            header,
            device,
            replay: None,
            frames: 0,
            records: 0,
            queries: 0,
            notes: Vec::new(),
            error: None,
        });
    }

    /// Room for `queries` more results rows and `counters` more counter samples of the file
    /// being read (from the footer's counts), so a million rows are not copied while growing.
    pub fn reserve(&mut self, queries: usize, counters: usize) {
        // A file replayed from the same trace as an earlier one adds no rows.
        // The counts come from the file: capped, and an allocation failure only means growing
        // as usual later.
        let queries = queries.min(1 << 24);
        let rows = queries.saturating_sub(self.result_rows.len());
        let _ = self.result_rows.try_reserve(rows);
        let _ = self.result_types.try_reserve(rows);
        if let Current::Results(fi) = self.current {
            let _ = self.ds.replayed[fi].try_reserve_exact(queries.max(self.result_rows.len()));
        }
        let _ = self.ds.counters.try_reserve(counters.min(1 << 20));
    }

    /// A file that could not be opened at all.
    pub fn failed(&mut self, path: &Path, message: String) {
        self.ds.failed.push((path.to_path_buf(), message));
    }

    /// Ends the current file; `error` is why reading stopped early, if it did.
    pub fn end_file(&mut self, error: Option<String>) {
        let Some(mut s) = self.summary.take() else {
            return;
        };
        s.error = error;
        match self.current {
            Current::Trace => {
                if let Some(old) = self.ds.trace.replace(s) {
                    if let Some(t) = self.ds.trace.as_mut() {
                        t.notes.push(format!(
                            "replaces trace {} opened before it",
                            old.path.display()
                        ));
                    }
                }
            }
            Current::Results(_) => self.ds.results.push(s),
            Current::None => {}
        }
        self.current = Current::None;
    }

    fn pool_for(
        &mut self,
        handle: Handle,
        query_type: i32,
        pipeline_statistics: u32,
        perf_counters: usize,
    ) -> u32 {
        // Consecutive records mostly name the same pool: skip the hash lookup then.
        let last = self.last_pool.filter(|&i| {
            self.ds
                .pools
                .get(i as usize)
                .is_some_and(|p| p.handle == handle)
        });
        if let Some(i) = last.or_else(|| self.pool_index.get(&handle).copied()) {
            self.last_pool = Some(i);
            let p = &mut self.ds.pools[i as usize];
            // A trace's QueryPool record is authoritative; results only fill unknowns.
            if p.perf_counters == 0 {
                p.perf_counters = perf_counters;
            }
            return i;
        }
        let i = self.ds.pools.len() as u32;
        self.ds.pools.push(Pool {
            handle,
            query_type,
            pipeline_statistics,
            perf_counters,
            name: None,
        });
        self.pool_index.insert(handle, i);
        i
    }

    /// Adds a message to the file being read (shown in the Files view).
    pub fn note_current(&mut self, msg: String) {
        self.note(msg);
    }

    fn note(&mut self, msg: String) {
        if let Some(s) = self.summary.as_mut() {
            // Bad data tends to repeat; keep the list readable.
            if s.notes.len() < 200 {
                s.notes.push(msg);
            }
        }
    }

    pub fn record(&mut self, record: Record) {
        let Some(s) = self.summary.as_mut() else {
            return;
        };
        s.records += 1;
        match record {
            Record::Device(d) => s.device = Some(d),
            Record::Frame(_) => s.frames += 1,
            Record::Note(n) => self.note(n.message),
            Record::DebugName(d) => {
                self.names.insert(d.handle, &d.name);
            }
            Record::CommandTable(t) if matches!(self.current, Current::Trace) => {
                self.trace.labels.command_table(&t);
            }
            Record::Call(c) if matches!(self.current, Current::Trace) => {
                self.trace.labels.call(&c);
            }
            Record::ReplayInfo(r) => {
                s.frames = s.frames.max(r.frames);
                s.replay = Some(r);
            }
            Record::QueryPool(p) => {
                let i = self.pool_for(
                    p.pool,
                    p.query_type,
                    p.pipeline_statistics,
                    p.perf_counters.len(),
                );
                let pool = &mut self.ds.pools[i as usize];
                pool.query_type = p.query_type;
                pool.pipeline_statistics = p.pipeline_statistics;
                pool.perf_counters = p.perf_counters.len();
            }
            Record::Calibration(c) => {
                if self.trace.calibration.is_none() {
                    self.trace.calibration = Some((c.host_ns, c.gpu_ticks));
                }
            }
            Record::QueryOp(op) => self.trace_op(op),
            Record::Submit(sub) => self.trace_submit(sub),
            Record::QueryAvailable(a) => {
                let st = self.trace.states.entry((a.pool, a.query)).or_default();
                if st.times.available == 0 {
                    st.times.available = a.host_ns;
                }
                if let Some((row, gen)) = st.row {
                    if gen == st.generation {
                        let t = &mut self.trace.rows[row as usize].times;
                        if t.available == 0 {
                            t.available = a.host_ns;
                        }
                    }
                }
            }
            Record::QueryResults(r) => {
                let layout_of = (r.first, r.count, r.stride, r.flags);
                self.trace_results(
                    r.pool, layout_of, r.seq, r.result, r.host_ns, &r.data, r.device,
                );
            }
            Record::QueryCopy(c) => {
                // Read back after the submit completed: VK_SUCCESS as far as the app can tell.
                self.trace_results(
                    c.pool,
                    (c.first, c.count, c.stride, c.flags),
                    c.seq,
                    0,
                    c.host_ns,
                    &c.data,
                    0,
                );
            }
            Record::QueryResult(q) => self.result_query(q),
            Record::CounterValue(c) => self.result_counter(c),
            // Per-region counter requests hold no values the viewer shows (yet).
            Record::CommandTable(_)
            | Record::Call(_)
            | Record::MemoryWrite(_)
            | Record::RegionCounters(_)
            | Record::StateBegin(_)
            | Record::StateEnd(_)
            | Record::TraceIdentity(_)
            | Record::TargetProfile(_) => {}
        }
    }

    fn trace_op(&mut self, op: format::record::QueryOp) {
        use format::record::QueryOpKind as K;
        let cb = op.command_buffer;
        if cb != 0 {
            let c = self.trace.cbs.entry(cb).or_default();
            // A command after a submit means the buffer is being recorded again.
            if c.submitted {
                c.submitted = false;
                c.queries.clear();
            }
        }
        let touch = |this: &mut Self, q: u32, f: &dyn Fn(&mut QueryState)| {
            let st = this.trace.states.entry((op.pool, q)).or_default();
            f(st);
            if cb != 0 {
                st.command_buffer = cb;
                let list = &mut this.trace.cbs.entry(cb).or_default().queries;
                if list.last() != Some(&(op.pool, q)) {
                    list.push((op.pool, q));
                }
            }
        };
        let t = op.host_ns;
        // The command buffer's labels where the query begins (or is written).
        let label = match op.kind {
            K::Begin { .. } | K::Timestamp { .. } | K::Write { .. } if cb != 0 => {
                self.trace.labels.cb_label(cb)
            }
            _ => None,
        };
        match op.kind {
            K::Reset { first, count } => {
                for q in first..first.saturating_add(count.min(MAX_RESET_SPAN)) {
                    let st = self.trace.states.entry((op.pool, q)).or_default();
                    st.generation += 1;
                    st.times = Times {
                        reset: t,
                        ..Times::default()
                    };
                }
            }
            K::Begin { query, flags, .. } => {
                let begin = QueryBegin {
                    flags,
                    view_mask: self.trace.labels.view_mask(cb),
                    first: query,
                };
                touch(self, query, &|st| {
                    if st.times.end != 0 {
                        // Begin without a reset in between: a new use as far as rows go.
                        st.generation += 1;
                        st.times = Times {
                            reset: st.times.reset,
                            ..Times::default()
                        };
                    }
                    st.times.begin = t;
                    st.cb_label = label.clone();
                    st.begin = Some(begin);
                });
                // A multiview begin uses one query per view; the others read as its own.
                for i in 1..begin.views() {
                    let q = query.saturating_add(i);
                    self.trace.states.entry((op.pool, q)).or_default().begin = Some(begin);
                }
            }
            K::End { query, .. } => touch(self, query, &|st| st.times.end = t),
            K::Timestamp { query, .. } | K::Write { query } => touch(self, query, &|st| {
                st.times.begin = t;
                st.times.end = t;
                st.cb_label = label.clone();
                st.begin = Some(QueryBegin {
                    flags: 0,
                    view_mask: 0,
                    first: query,
                });
            }),
            K::Copy { .. } => {}
        }
    }

    fn trace_submit(&mut self, sub: format::record::Submit) {
        self.trace.labels.submit(&sub);
        let queue_label = self.trace.labels.queue_label(sub.queue);
        for cb in &sub.command_buffers {
            let Some(c) = self.trace.cbs.get_mut(cb) else {
                continue;
            };
            c.submitted = true;
            for key in &c.queries {
                if let Some(st) = self.trace.states.get_mut(key) {
                    st.times.submit = sub.host_ns;
                    st.frame = sub.frame;
                    st.queue = sub.queue;
                    st.queue_family = sub.queue_family;
                    st.command_buffer = *cb;
                    st.queue_label = queue_label.clone();
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn trace_results(
        &mut self,
        pool: Handle,
        (first, count, stride, flags): (u32, u32, u64, u32),
        seq: u64,
        result: i32,
        host_ns: u64,
        data: &[u8],
        _device: Handle,
    ) {
        let Some(&pi) = self.pool_index.get(&pool) else {
            self.note(format!(
                "seq {seq}: results for unknown query pool {pool:#x}"
            ));
            return;
        };
        let p = self.ds.pools[pi as usize].clone();
        let shape = PoolShape {
            query_type: p.query_type,
            pipeline_statistics: p.pipeline_statistics,
            perf_counters: u32::try_from(p.perf_counters).unwrap_or(u32::MAX),
        };
        let decoded = match query::decode(shape, data, count, stride, flags, result) {
            Ok(d) => d,
            Err(e) => {
                self.note(format!("seq {seq}: pool {pool:#x}: {e}"));
                return;
            }
        };
        let device = self.summary.as_ref().and_then(|s| s.device.clone());
        let period = device
            .as_ref()
            .map(|d| f64::from(d.timestamp_period_ns))
            .unwrap_or(1.0);
        if let Some(s) = self.summary.as_mut() {
            s.queries += u64::from(count);
        }
        for (i, d) in decoded.into_iter().enumerate() {
            let q = first + i as u32;
            let st = self.trace.states.entry((pool, q)).or_default();
            // The trace's own begin (PRECISE, multiview) for results files that lack it.
            let begin = st.begin;
            let label = match (&st.queue_label, &st.cb_label) {
                (None, None) => None,
                (None, Some(c)) => Some(c.clone()),
                (q, c) => self.trace.labels.join(q.as_ref(), c.as_ref()),
            };
            let available = d.available;
            let mut values = QueryValues {
                values: d.values,
                available,
                result,
                host_ns,
            };
            let mut times = st.times;
            if times.available == 0 && available {
                times.available = host_ns;
            }
            let mut gpu_ns = None;
            let mut clock = None;
            if p.query_type == model::QUERY_TYPE_TIMESTAMP && available {
                let bits = device
                    .as_ref()
                    .and_then(|d| d.queue_families.get(st.queue_family as usize))
                    .map(|f| f.timestamp_valid_bits)
                    .unwrap_or(64);
                if let Some(ticks) = values
                    .values
                    .first()
                    .and_then(|v| query::mask_timestamp(*v, bits))
                {
                    values.values[0] = ticks;
                    gpu_ns = Some(ticks as f64 * period);
                    clock = Some(TimestampClock {
                        valid_bits: bits,
                        period_ns: period,
                    });
                    if let Some((cal_host, cal_ticks)) = self.trace.calibration {
                        // In ticks from the calibration sample (either side of it), then ns.
                        let delta = query::timestamp_offset_ticks(cal_ticks, ticks, bits)
                            .unwrap_or(0) as f64
                            * period;
                        times.gpu = (cal_host as f64 + delta).max(0.0) as u64;
                    }
                }
            }
            let current = st.row.filter(|(_, g)| *g == st.generation).map(|(r, _)| r);
            let row_idx = match current {
                Some(r) => {
                    let row = &mut self.trace.rows[r as usize];
                    let old_avail = row.captured.as_ref().is_some_and(|c| c.available);
                    // Keep the first available answer; a not-ready poll never overwrites it.
                    if !old_avail {
                        row.captured = Some(values);
                        row.captured_gpu_ns = gpu_ns;
                        row.captured_clock = clock;
                        row.times = times;
                        row.flags = flags;
                        row.label = label;
                        row.begin = begin;
                    }
                    r
                }
                None => {
                    let r = self.trace.rows.len() as u32;
                    self.trace.rows.push(Row {
                        frame: st.frame,
                        queue: st.queue,
                        command_buffer: st.command_buffer,
                        pool: pi,
                        query: q,
                        seq,
                        loop_index: 0,
                        pass: 0,
                        flags,
                        captured: Some(values),
                        captured_gpu_ns: gpu_ns,
                        captured_clock: clock,
                        times,
                        label,
                        begin,
                    });
                    st.row = Some((r, st.generation));
                    r
                }
            };
            self.trace.by_seq.insert((pool, q, seq), row_idx);
        }
    }

    /// Finishes the dataset: picks the row source, applies names, computes mismatches.
    pub fn finish(mut self) -> Dataset {
        if self.summary.is_some() {
            self.end_file(None);
        }
        let mut ds = self.ds;
        for p in &mut ds.pools {
            p.name = self.names.get(p.handle).map(str::to_owned);
        }
        // Counter samples of render passes: the pass's name and labels from the trace.
        let labels = &self.trace.labels;
        if !labels.is_empty() {
            for c in &mut ds.counters {
                match c.render_pass {
                    Some(i) => {
                        if let Some(rp) = labels.render_pass(c.frame, c.command_buffer, i) {
                            c.render_pass_name = self.names.get(rp.handle).map(str::to_owned);
                            c.label = rp.label.clone();
                        }
                    }
                    // A whole command buffer: the queue's labels at its submit.
                    None => c.label = labels.submit_label(c.frame, c.command_buffer).cloned(),
                }
            }
        }
        ds.names = self.names;
        let n_files = ds.replayed.len();
        if n_files == 0 {
            ds.rows = self.trace.rows;
        } else {
            ds.rows = self.result_rows;
            // Give results rows the trace's timeline where the trace is loaded too.
            if !self.trace.by_seq.is_empty() {
                for row in &mut ds.rows {
                    let handle = ds.pools[row.pool as usize].handle;
                    if let Some(&t) = self.trace.by_seq.get(&(handle, row.query, row.seq)) {
                        let tr = &self.trace.rows[t as usize];
                        let avail = row.times.available;
                        row.times = tr.times;
                        if row.times.available == 0 {
                            row.times.available = avail;
                        }
                        if row.captured.is_none() {
                            row.captured = tr.captured.clone();
                            row.captured_gpu_ns = tr.captured_gpu_ns;
                        }
                        row.label = tr.label.clone();
                        // Results written before they recorded the begin: the trace's says.
                        if row.begin.is_none() {
                            row.begin = tr.begin;
                        }
                        // The trace knows the queue family's valid bits.
                        if tr.captured_clock.is_some() {
                            row.captured_clock = tr.captured_clock;
                        }
                    }
                }
            }
        }
        let n = ds.rows.len();
        for col in &mut ds.replayed {
            col.resize(n, None);
        }
        for c in &mut ds.counters {
            c.values.resize(n_files, None);
        }
        // Timestamps of results rows read with their device's clock: the capture device from
        // the replay info (unless the trace gave the row its family's), the replay device per file.
        let capture_clock = ds
            .results
            .iter()
            .find_map(|f| f.replay.as_ref()?.capture_device.as_ref())
            .map(TimestampClock::of_device);
        let replay_clocks: Vec<Option<TimestampClock>> = ds
            .results
            .iter()
            .map(|f| f.device.as_ref().map(TimestampClock::of_device))
            .collect();
        // Deterministic on the capture device only (pipeline statistics, ...): per file.
        let same: Vec<bool> = ds
            .results
            .iter()
            .map(|f| {
                let capture = f.replay.as_ref().and_then(|r| r.capture_device.as_ref());
                capture
                    .zip(f.device.as_ref())
                    .is_none_or(|(a, b)| format::runs::same_device(a, b))
            })
            .collect();
        for (col, &same) in ds.replayed.iter_mut().zip(&same) {
            for r in col.iter_mut().flatten() {
                r.same_device = same;
            }
        }
        for (i, row) in ds.rows.iter_mut().enumerate() {
            if ds.pools[row.pool as usize].query_type != model::QUERY_TYPE_TIMESTAMP {
                continue;
            }
            if row.captured_clock.is_none() && row.captured_gpu_ns.is_some() {
                row.captured_clock = capture_clock;
            }
            for (f, col) in ds.replayed.iter_mut().enumerate() {
                if let Some(r) = col[i].as_mut().filter(|r| r.gpu_ns.is_some()) {
                    r.clock = replay_clocks[f];
                }
            }
        }
        for col in &mut ds.replayed {
            classify_rows(&ds.rows, &ds.pools, col);
        }
        ds.mismatch = (0..n)
            .map(|i| {
                ds.replayed.iter().any(|f| {
                    f[i].as_ref()
                        .and_then(|r| r.classified)
                        .is_some_and(|c| c.outcome.fails())
                })
            })
            .collect();
        // Columns: one per value kind actually present, statistics in bit order.
        let mut stats = 0u32;
        let (mut single, mut xfb, mut perf) = (false, false, 0usize);
        for p in &ds.pools {
            match QueryKind::from_raw(p.query_type).slots() {
                ValueSlots::Statistics => stats |= p.pipeline_statistics,
                ValueSlots::WrittenAndNeeded => xfb = true,
                ValueSlots::Counters => perf = perf.max(p.perf_counters),
                ValueSlots::One => single = true,
                ValueSlots::StatusOnly => {}
            }
        }
        let mut cols = Vec::new();
        if single {
            cols.push(ValueColumn::Single);
        }
        cols.extend(
            (0..32)
                .filter(|b| stats & (1 << b) != 0)
                .map(ValueColumn::Stat),
        );
        if xfb {
            cols.extend([ValueColumn::XfbWritten, ValueColumn::XfbNeeded]);
        }
        cols.extend((0..perf).map(ValueColumn::Perf));
        ds.value_columns = cols;
        ds.frames = (
            ds.rows.iter().map(|r| r.frame).min().unwrap_or(0),
            ds.rows.iter().map(|r| r.frame).max().unwrap_or(0),
        );
        ds
    }
}
