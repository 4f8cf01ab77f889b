//! The replay loop: reads the trace's records in order, re-executes calls, applies memory writes,
//! re-reads every query the capture read, and writes the results file.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ash::vk;
use ash::vk::Handle as _;
use format::frames::FrameRange;
use format::record::{
    self, CounterValue, DeviceSummary, FileKind, Header, QueryOpKind, QueryResult, QueryValues,
    Record, ReplayInfo,
};
use format::{TraceReader, TraceWriter};

use crate::clock::{now_ns, unix_ns};
use crate::compare::Comparison;
use crate::devices::{self, GpuInfo};
use crate::error::ReplayError;
use crate::perf::{self, Merge};
use crate::queries::{self, Decoded, PoolShape, RESULT_WAIT};
use crate::session::{PoolState, Session, SubmitInfo};

/// How long a query read or fence wait may take before the replay reports it never completed.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `quarry replay` was asked to do.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub trace: PathBuf,
    /// `INDEX`, `UUID` or a name substring; `None` picks the first discrete GPU, else the first.
    pub gpu: Option<String>,
    /// Full re-executions of the trace (at least 1).
    pub loops: u32,
    pub results: Option<PathBuf>,
    pub compare: bool,
    /// Enable `VK_LAYER_KHRONOS_validation` and count its messages.
    pub validate: bool,
    /// Print one progress line per loop to stderr.
    pub progress: bool,
    /// `--passes N` for performance pools; `None` ("auto") takes as many as the replay GPU needs.
    pub passes: Option<u32>,
    /// `--counters`: measure counters around every command buffer or render pass.
    pub inject: Option<crate::inject::InjectSpec>,
    /// `--window`: show presented frames in an X11 window instead of discarding them.
    pub window: bool,
    /// `--drop-unsupported`: leave out safe-to-drop device extensions the replay GPU lacks.
    pub drop_unsupported: bool,
    /// `--frames A-B`: replay from the trace's start through frame B (inclusive, 0-based) and
    /// report only frames A..=B (timings, query results); `None` is the whole trace.
    pub frames: Option<FrameRange>,
}

/// Which pass of which loop a replay is in (see [`Progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassInfo {
    /// 0-based loop and pass; `loops` and `passes` are the totals known so far (the passes a
    /// trace's performance counters need are known after the first pass).
    pub loop_index: u32,
    pub loops: u32,
    pub pass: u32,
    pub passes: u32,
    /// Calls in the trace.
    pub calls: u64,
}

/// Where a replay reports how far it got while it runs (the `quarry` CLI draws a bar); every
/// method does nothing by default.
pub trait Progress {
    /// A pass over the trace begins.
    fn pass_begun(&mut self, _pass: &PassInfo) {}
    /// `calls` calls of the current pass replayed so far (reported every 1024 calls).
    fn calls_replayed(&mut self, _calls: u64) {}
    /// The current pass ended, successfully or not.
    fn pass_ended(&mut self) {}
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}

impl ReplayOptions {
    pub fn new(trace: impl Into<PathBuf>) -> Self {
        ReplayOptions {
            trace: trace.into(),
            gpu: None,
            loops: 1,
            results: None,
            compare: false,
            validate: false,
            progress: false,
            passes: None,
            inject: None,
            frames: None,
            window: false,
            drop_unsupported: false,
        }
    }
}

/// Per-frame timing: the capture's frame time and the replay's in each loop.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameTime {
    pub frame: u64,
    pub capture_ns: u64,
    pub replay_ns: Vec<u64>,
}

/// What a replay did.
#[derive(Debug, Clone)]
pub struct ReplaySummary {
    pub gpu: GpuInfo,
    pub capture_device: Option<DeviceSummary>,
    pub calls: u64,
    pub frames: u64,
    pub loops: u32,
    /// Wall time of each loop.
    pub loop_ns: Vec<u64>,
    /// From the first call to the last frame boundary of the capture.
    pub capture_ns: u64,
    pub frame_times: Vec<FrameTime>,
    /// Query reads re-done (one per query per read per loop).
    pub queries: u64,
    pub comparison: Comparison,
    pub validation_messages: u64,
    pub first_messages: Vec<String>,
    pub results: Option<PathBuf>,
    /// Things worth telling the user that did not stop the replay.
    pub warnings: Vec<String>,
    /// CPU time per call (first loop) decoding parameters only, and decoding plus replaying
    /// (materialising, translating handles and the driver's own time).
    pub decode_ns_per_call: f64,
    pub cpu_ns_per_call: f64,
    /// Whether validation was enabled (then `validation_messages` is meaningful).
    pub validated: bool,
    /// Replay passes per loop (more than 1 when performance counters need several).
    pub passes: u32,
    /// Wall time of each pass of the first loop.
    pub pass_ns: Vec<u64>,
    /// `--counters`: command buffers or render passes measured (all passes and loops).
    pub injected: u64,
    /// `--frames` limited the report to a frame range (frame_times holds only those frames).
    pub frame_range: bool,
    /// `--window`: frames shown in a window (all loops and passes).
    pub presented: u64,
}

/// Facts gathered by one pass over the trace before replaying it.
pub(crate) struct Scan {
    pub capture_device: Option<DeviceSummary>,
    pub host_memories: HashSet<u64>,
    /// (frame index, host_ns of its end).
    pub frames: Vec<(u64, u64)>,
    pub first_call_ns: Option<u64>,
    pub calls: u64,
    pub application: String,
    /// `seq` of each performance pool's vkCreateQueryPool -> the counters the capture chose.
    pub perf_pools: HashMap<u64, Vec<record::PerfCounterDesc>>,
    /// Render pass begins that asked for per-region counters (VK_ARM_performance_counters_by_region).
    pub region_counters: u64,
    /// A trimmed trace: the frame its state snapshot rebuilds, and what the snapshot lacks.
    pub trimmed: Option<(u64, Vec<String>)>,
}

fn trace_err(e: impl std::fmt::Display) -> ReplayError {
    ReplayError::Trace(e.to_string())
}

fn scan(reader: &TraceReader) -> Result<Scan, ReplayError> {
    let header = reader.header();
    let mut s = Scan {
        capture_device: header.device.clone(),
        host_memories: HashSet::new(),
        frames: Vec::new(),
        first_call_ns: None,
        calls: 0,
        application: header.application.clone(),
        perf_pools: HashMap::new(),
        region_counters: 0,
        trimmed: None,
    };
    // Trace command id -> vkstream id, for the few commands the scan looks into.
    let mut interesting: HashMap<u32, u32> = HashMap::new();
    // Captured buffer -> memory, so memory holding query-copy destinations is known to be read
    // by the host (the replay reads it back) even when the app never maps it.
    let mut buffer_memory: HashMap<u64, u64> = HashMap::new();
    let mut seen_table = false;
    let mut last_seq = None;
    let mut in_snapshot = false;
    for rec in reader.records() {
        let rec = rec.map_err(|e| {
            ReplayError::Trace(match last_seq {
                Some(seq) => format!("{e} (after call {seq})"),
                None => e.to_string(),
            })
        })?;
        match rec {
            Record::CommandTable(names) => {
                seen_table = true;
                interesting = names
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| {
                        matches!(
                            n.as_str(),
                            "vkMapMemory"
                                | "vkBindBufferMemory"
                                | "vkBindBufferMemory2"
                                | "vkBindBufferMemory2KHR"
                        )
                    })
                    .filter_map(|(i, n)| vkstream::command_id(n).map(|id| (i as u32, id)))
                    .collect();
            }
            Record::Call(c) => {
                if !seen_table {
                    return Err(ReplayError::Trace(format!(
                        "{}: call {} comes before the command table; the trace is damaged",
                        reader.path().display(),
                        c.seq
                    )));
                }
                s.calls += 1;
                last_seq = Some(c.seq);
                s.first_call_ns.get_or_insert(c.host_ns);
                // Undecodable parameters are reported when the call is replayed.
                match interesting
                    .get(&c.cmd)
                    .map(|id| vkstream::decode_call(*id, &c.params))
                {
                    Some(Ok(vkstream::Call::vkMapMemory(p))) => {
                        s.host_memories.insert(p.memory);
                    }
                    Some(Ok(vkstream::Call::vkBindBufferMemory(p))) => {
                        buffer_memory.insert(p.buffer, p.memory);
                    }
                    Some(Ok(
                        vkstream::Call::vkBindBufferMemory2(p)
                        | vkstream::Call::vkBindBufferMemory2KHR(p),
                    )) => {
                        for b in p.p_bind_infos.as_deref().unwrap_or(&[]) {
                            buffer_memory.insert(b.buffer, b.memory);
                        }
                    }
                    _ => {}
                }
            }
            // Contents in a trimmed trace's snapshot may be for memory the host cannot map: those
            // are uploaded through the GPU, so they do not need a host-visible replay type.
            Record::MemoryWrite(w) if !in_snapshot => {
                s.host_memories.insert(w.memory);
            }
            Record::StateBegin(b) => {
                in_snapshot = true;
                s.trimmed = Some((b.first_frame, Vec::new()));
            }
            Record::QueryCopy(q) => {
                if let Some(m) = buffer_memory.get(&q.dst_buffer) {
                    s.host_memories.insert(*m);
                }
            }
            Record::Frame(f) => s.frames.push((f.index, f.host_ns)),
            Record::QueryPool(p)
                if p.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() =>
            {
                s.perf_pools.insert(p.seq, p.perf_counters);
            }
            Record::RegionCounters(_) => s.region_counters += 1,
            Record::StateEnd(e) => {
                in_snapshot = false;
                // The snapshot's calls carry the times the app made them, long before; the
                // captured frames start here.
                s.first_call_ns = Some(e.host_ns);
                s.trimmed = Some((e.first_frame, e.gaps));
            }
            Record::Device(d) if s.capture_device.is_none() => s.capture_device = Some(d),
            _ => {}
        }
    }
    Ok(s)
}

/// Replays `opts.trace` (see the crate documentation for what each step does).
pub fn replay(opts: &ReplayOptions) -> Result<ReplaySummary, ReplayError> {
    replay_with_progress(opts, &mut NoProgress)
}

/// [`replay`], reporting each pass's progress to `progress`.
pub fn replay_with_progress(
    opts: &ReplayOptions,
    progress: &mut dyn Progress,
) -> Result<ReplaySummary, ReplayError> {
    let reader = TraceReader::open(&opts.trace).map_err(trace_err)?;
    if reader.kind() != FileKind::Trace {
        return Err(ReplayError::Trace(format!(
            "{}: this is a results file, not a trace",
            opts.trace.display()
        )));
    }
    let mut warnings = Vec::new();
    if !reader.has_footer() || reader.lost_bytes() > 0 {
        warnings.push(format!(
            "{}: the trace is incomplete ({} bytes lost, the writer did not finish); replaying every complete block",
            opts.trace.display(),
            reader.lost_bytes()
        ));
    }
    let scan = scan(&reader)?;
    if scan.calls == 0 {
        return Err(ReplayError::Trace(format!(
            "{}: the trace holds no calls",
            opts.trace.display()
        )));
    }
    if let Some(FrameRange { first: a, last: b }) = opts.frames {
        // A trimmed trace numbers its frames from where the capture started.
        let lo = scan.frames.first().map_or(0, |f| f.0);
        let hi = scan.frames.last().map_or(0, |f| f.0);
        if scan.frames.is_empty() || a < lo || a > hi || b.is_some_and(|b| b < lo || b > hi) {
            return Err(ReplayError::Trace(format!(
                "--frames {a}-{}: {} holds frames {lo} to {hi} only",
                b.map(|b| b.to_string()).unwrap_or_default(),
                opts.trace.display(),
            )));
        }
    }
    if let Some((first, gaps)) = &scan.trimmed {
        warnings.push(format!(
            "trimmed trace: a state snapshot rebuilds what the app had made when frame {first} began; \
             query reads of work submitted before that are skipped"
        ));
        for g in gaps {
            warnings.push(format!("state snapshot: {g}"));
        }
    }
    let entry = devices::load_entry()?;
    let gpus = devices::devices()?;
    let gpu = devices::select(&gpus, opts.gpu.as_deref())?.clone();
    if scan.region_counters > 0 {
        const ARM: &str = "VK_ARM_performance_counters_by_region";
        let why = if gpu.extensions.iter().any(|e| e == ARM) {
            "their values go to buffers by device address, which the replay does not remap yet"
        } else {
            "the replay GPU lacks the extension"
        };
        warnings.push(format!(
            "{} render pass begin(s) asked for per-region performance counters ({ARM}); they are replayed without them: {why}",
            scan.region_counters
        ));
    }

    let mut writer = match &opts.results {
        Some(path) => Some(
            TraceWriter::create(
                path,
                Header {
                    kind: FileKind::Results,
                    writer: format!("quarry-replay {}", env!("CARGO_PKG_VERSION")),
                    created_unix_ns: unix_ns(),
                    device: Some(gpu.summary.clone()),
                    application: scan.application.clone(),
                },
            )
            .map_err(|e| ReplayError::Results(e.to_string()))?,
        ),
        None => None,
    };

    let same = scan
        .capture_device
        .as_ref()
        .is_some_and(|c| crate::compare::same_device(c, &gpu.summary));
    let mut comparison = Comparison {
        same_device: same,
        ..Default::default()
    };
    let loops = opts.loops.max(1);
    let mut loop_ns = Vec::new();
    let mut per_frame: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut queries = 0u64;
    let mut validation = 0u64;
    let mut first_messages = Vec::new();
    let mut cpu_ns_per_call = 0.0;
    let mut decode_ns_per_call = 0.0;
    let pool_counters = std::sync::Arc::new(scan.perf_pools.clone());
    let mut passes = opts.passes.unwrap_or(1).max(1);
    let mut pass_ns = Vec::new();
    let mut injected = 0u64;
    let mut presented = 0u64;
    for l in 0..loops {
        let mut merge = Merge::default();
        let mut loop_elapsed = 0u64;
        let mut pass = 0;
        while pass < passes {
            let mut session = Session::new(
                &entry,
                &gpu,
                scan.capture_device.as_ref(),
                &scan.host_memories,
                opts.validate,
            );
            session.perf.pass = pass;
            session.window = opts.window;
            session.drop_unsupported = opts.drop_unsupported;
            session.perf.forced = opts.passes;
            session.perf.pool_counters = pool_counters.clone();
            session.inject = opts
                .inject
                .clone()
                .map(|spec| crate::inject::InjectState::new(spec, pass, opts.passes));
            let mut run = Run {
                reader: &reader,
                session,
                writer: writer.as_ref(),
                comparison: &mut comparison,
                loop_index: l,
                pass,
                first_frame: opts.frames.map_or(0, |f| f.first),
                last_frame: opts.frames.and_then(|f| f.last),
                progress: &mut *progress,
                merge: &mut merge,
                command_map: Vec::new(),
                command_names: Vec::new(),
                queries: 0,
                frame_start: 0,
                frame_ns: Vec::new(),
                dispatch_ns: 0,
                decode_ns: 0,
                calls: 0,
                trimmed: false,
                skipped_before_trim: 0,
            };
            run.progress.pass_begun(&PassInfo {
                loop_index: l,
                loops,
                pass,
                passes,
                calls: scan.calls,
            });
            let start = Instant::now();
            run.frame_start = now_ns();
            let outcome = run.run();
            run.progress.pass_ended();
            let elapsed = start.elapsed().as_nanos() as u64;
            let messages = run.session.validation_messages();
            let msgs = run
                .session
                .messages
                .as_ref()
                .and_then(|m| m.first.lock().ok().map(|v| v.clone()))
                .unwrap_or_default();
            // Objects a trace leaves alive (the app exited without destroying them) are cleaned up
            // here; what validation says about that is the app's, not the replay's, so it is not counted.
            run.session.teardown();
            validation += messages;
            if first_messages.is_empty() {
                first_messages = msgs;
            }
            outcome?;
            let inject_warnings = run
                .session
                .inject
                .as_mut()
                .map(|i| std::mem::take(&mut i.warnings))
                .unwrap_or_default();
            let trim_skips = (run.skipped_before_trim > 0).then(|| {
                format!(
                    "{} query read(s) skipped: their queries ran before the trim point",
                    run.skipped_before_trim
                )
            });
            let dropped = (!run.session.dropped.is_empty()).then(|| {
                format!(
                    "dropped device extension(s) the replay GPU lacks: {} ({} of their calls skipped)",
                    run.session.dropped.join(", "),
                    run.session.skipped_calls
                )
            });
            for w in run
                .session
                .perf
                .warnings
                .drain(..)
                .chain(inject_warnings)
                .chain(trim_skips)
                .chain(dropped)
            {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            if l == 0 && pass == 0 {
                if run.calls > 0 {
                    cpu_ns_per_call = run.dispatch_ns as f64 / run.calls as f64;
                    decode_ns_per_call = run.decode_ns as f64 / run.calls as f64;
                }
                passes = passes
                    .max(run.session.perf.passes_needed)
                    .max(run.session.inject.as_ref().map_or(1, |i| i.passes_needed));
            }
            queries += run.queries;
            injected += run.session.inject.as_ref().map_or(0, |i| i.measured);
            presented += run.session.presented;
            if pass == 0 {
                for (f, ns) in &run.frame_ns {
                    per_frame.entry(*f).or_default().push(*ns);
                }
            }
            if l == 0 {
                pass_ns.push(elapsed);
            }
            loop_elapsed += elapsed;
            if opts.progress || passes > 1 {
                eprintln!(
                    "loop {}/{loops} pass {}/{passes}: {:.1} ms, {} calls, {} query reads",
                    l + 1,
                    pass + 1,
                    elapsed as f64 / 1e6,
                    run.calls,
                    run.queries
                );
            }
            pass += 1;
        }
        queries += write_merged(merge, writer.as_ref(), &mut comparison)?;
        loop_ns.push(loop_elapsed);
    }
    let whole = match (scan.first_call_ns, scan.frames.last()) {
        (Some(first), Some((_, last))) => last.saturating_sub(first),
        _ => 0,
    };
    let mut frame_times = Vec::new();
    let mut prev = scan.first_call_ns.unwrap_or(0);
    let in_range = |f: u64| opts.frames.is_none_or(|r| r.contains(f));
    for (index, end) in &scan.frames {
        if !in_range(*index) {
            prev = *end;
            continue;
        }
        frame_times.push(FrameTime {
            frame: *index,
            capture_ns: end.saturating_sub(prev),
            replay_ns: per_frame.remove(index).unwrap_or_default(),
        });
        prev = *end;
    }
    // With --frames the capture time is that of the frames reported.
    let capture_ns = if opts.frames.is_some() {
        frame_times.iter().map(|f| f.capture_ns).sum()
    } else {
        whole
    };

    if let Some(w) = writer.take() {
        w.write(&Record::ReplayInfo(ReplayInfo {
            trace: opts.trace.display().to_string(),
            capture_device: scan.capture_device.clone(),
            loops,
            passes,
            replay_ns: loop_ns.iter().sum(),
            capture_ns,
            frames: frame_times.len() as u64,
        }))
        .map_err(|e| ReplayError::Results(e.to_string()))?;
        w.finish()
            .map_err(|e| ReplayError::Results(e.to_string()))?;
    }

    Ok(ReplaySummary {
        gpu,
        capture_device: scan.capture_device,
        calls: scan.calls,
        frames: frame_times.len() as u64,
        loops,
        loop_ns,
        capture_ns,
        frame_times,
        queries,
        comparison,
        validation_messages: validation,
        first_messages,
        results: opts.results.clone(),
        warnings,
        decode_ns_per_call,
        cpu_ns_per_call,
        validated: opts.validate,
        passes,
        pass_ns,
        injected,
        frame_range: opts.frames.is_some(),
        presented,
    })
}

/// Writes one loop's merged performance-query results: a `CounterValue` per measured counter
/// (with the pass that measured it) and the query itself; returns how many queries it wrote.
fn write_merged(
    merge: Merge,
    writer: Option<&TraceWriter>,
    comparison: &mut Comparison,
) -> Result<u64, ReplayError> {
    let mut n = 0;
    for m in merge.finish() {
        let q = m.result;
        let captured = q.captured.as_ref().filter(|v| v.available);
        if let Some(w) = writer {
            for (i, (counter, v)) in m.counters.iter().zip(&m.values).enumerate() {
                let Some((raw, pass)) = v else { continue };
                w.write(&Record::CounterValue(CounterValue {
                    counter: counter.clone(),
                    pass: *pass,
                    frame: q.frame,
                    command_buffer: q.command_buffer,
                    render_pass: None,
                    value: queries::counter_value(*raw, counter.storage),
                    captured: captured
                        .and_then(|c| c.values.get(i))
                        .map(|c| queries::counter_value(*c, counter.storage)),
                }))
                .map_err(|e| ReplayError::Results(e.to_string()))?;
            }
        }
        comparison.add(&q, false);
        n += 1;
        if let Some(w) = writer {
            w.write(&Record::QueryResult(q))
                .map_err(|e| ReplayError::Results(e.to_string()))?;
        }
    }
    Ok(n)
}

/// One loop over the trace.
struct Run<'r, 's> {
    reader: &'r TraceReader,
    session: Session<'s>,
    writer: Option<&'r TraceWriter>,
    comparison: &'r mut Comparison,
    loop_index: u32,
    /// Counter pass (see `crate::perf`); only pass 0 writes results other than performance queries.
    pass: u32,
    /// First frame reported and last frame replayed (`--frames`).
    first_frame: u64,
    last_frame: Option<u64>,
    progress: &'r mut dyn Progress,
    merge: &'r mut Merge,
    /// Trace command id -> vkstream command id.
    command_map: Vec<Option<u32>>,
    command_names: Vec<String>,
    queries: u64,
    frame_start: u64,
    frame_ns: Vec<(u64, u64)>,
    dispatch_ns: u64,
    decode_ns: u64,
    calls: u64,
    /// The trace starts with a state snapshot (trimmed capture).
    trimmed: bool,
    /// Query reads left out because their queries ran before the trim point.
    skipped_before_trim: u64,
}

impl Run<'_, '_> {
    fn run(&mut self) -> Result<(), ReplayError> {
        let mut last: Option<(u64, String)> = None;
        for rec in self.reader.records() {
            let rec = rec.map_err(|e| {
                ReplayError::Trace(match &last {
                    Some((seq, name)) => format!("{e} (the last call replayed was {seq} {name})"),
                    None => e.to_string(),
                })
            })?;
            match rec {
                Record::CommandTable(names) => {
                    self.command_map = names.iter().map(|n| vkstream::command_id(n)).collect();
                    self.command_names = names;
                }
                Record::Call(c) => {
                    let name = self
                        .command_names
                        .get(c.cmd as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("command #{}", c.cmd));
                    self.call(&c, &name)?;
                    last = Some((c.seq, name));
                    if self.calls.is_multiple_of(1024) {
                        self.progress.calls_replayed(self.calls);
                    }
                }
                Record::MemoryWrite(w) => {
                    let bytes =
                        self.reader
                            .payload_bytes(&w.data)
                            .map_err(|e| ReplayError::Call {
                                seq: w.seq,
                                command: "memory write".into(),
                                message: format!("memory contents missing from the trace: {e}"),
                            })?;
                    self.session
                        .write_memory(w.memory, w.offset, &bytes)
                        .map_err(|e| e.at(w.seq, "memory write"))?;
                }
                Record::Frame(f) => {
                    let now = now_ns();
                    if f.index >= self.first_frame {
                        self.frame_ns
                            .push((f.index, now.saturating_sub(self.frame_start)));
                    }
                    self.frame_start = now;
                    self.session.frame = f.index + 1;
                    if self.last_frame.is_some_and(|l| f.index >= l) {
                        break;
                    }
                }
                Record::QueryPool(p) => {
                    self.session.pools.insert(
                        p.pool,
                        PoolState {
                            shape: PoolShape {
                                query_type: p.query_type,
                                pipeline_statistics: p.pipeline_statistics,
                                perf_counters: p.perf_counters.len() as u32,
                            },
                            counters: p.perf_counters.clone(),
                        },
                    );
                }
                Record::QueryOp(op) => match op.kind {
                    QueryOpKind::Begin { query, flags, .. } => {
                        let precise = flags & vk::QueryControlFlags::PRECISE.as_raw() != 0;
                        self.session
                            .query_owner
                            .insert((op.pool, query), (op.command_buffer, precise));
                    }
                    QueryOpKind::Timestamp { query, .. } | QueryOpKind::Write { query } => {
                        self.session
                            .query_owner
                            .insert((op.pool, query), (op.command_buffer, false));
                    }
                    _ => {}
                },
                Record::Submit(s) => {
                    let now = now_ns();
                    for cb in &s.command_buffers {
                        self.session.cmdbuf_submit.insert(
                            *cb,
                            SubmitInfo {
                                queue: s.queue,
                                family: s.queue_family,
                                submit_ns: now,
                                frame: s.frame,
                            },
                        );
                    }
                }
                Record::StateBegin(b) => {
                    self.trimmed = true;
                    self.session.frame = b.first_frame;
                }
                // The first frame's time excludes rebuilding the state.
                Record::StateEnd(_) => self.frame_start = now_ns(),
                Record::QueryResults(r)
                    if self.trimmed && !self.ran_in_replay(r.pool, r.first, r.count) =>
                {
                    self.skipped_before_trim += 1;
                }
                Record::QueryCopy(c)
                    if self.trimmed
                        && !self.session.cmdbuf_submit.contains_key(&c.command_buffer) =>
                {
                    self.skipped_before_trim += 1;
                }
                Record::QueryResults(r) => self
                    .reread(&r)
                    .map_err(|e| e.at(r.seq, "vkGetQueryPoolResults"))?,
                Record::QueryCopy(c) => self
                    .read_copy(&c)
                    .map_err(|e| e.at(c.seq, "vkCmdCopyQueryPoolResults"))?,
                _ => {}
            }
        }
        self.session.wait_all_devices()
    }

    fn call(&mut self, c: &record::Call, name: &str) -> Result<(), ReplayError> {
        let err = |message: String| ReplayError::Call {
            seq: c.seq,
            command: name.to_string(),
            message,
        };
        let Some(&id) = self.command_map.get(c.cmd as usize) else {
            return Err(err(format!(
                "command id {} is not in the trace's command table",
                c.cmd
            )));
        };
        let Some(id) = id else {
            return Err(err(
                "this command is unknown to this replayer (trace from a newer quarry?)".into(),
            ));
        };
        let t0 = Instant::now();
        let call = vkstream::decode_call(id, &c.params)
            .map_err(|e| err(format!("cannot decode parameters: {e}")))?;
        self.decode_ns += t0.elapsed().as_nanos() as u64;
        let session = &mut self.session;
        // A panic below (e.g. a function pointer the driver does not provide) becomes an error
        // naming the call rather than unwinding out of the replay.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the call's handles are translated through the session; everything the
            // driver reads is materialised for the duration of the call.
            unsafe {
                if session.inject.is_none() {
                    return crate::calls::replay_call(session, &call, c);
                }
                crate::inject::before(session, &call)?;
                crate::calls::replay_call(session, &call, c)?;
                crate::inject::after(session, &call)
            }
        }))
        .unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ReplayError::Other(format!(
                "internal error while replaying: {what}"
            )))
        });
        self.dispatch_ns += t0.elapsed().as_nanos() as u64;
        self.calls += 1;
        if let Some(i) = self.session.inject.as_mut() {
            if !i.records.is_empty() {
                let records = std::mem::take(&mut i.records);
                if let Some(w) = self.writer {
                    for v in records {
                        w.write(&Record::CounterValue(v))
                            .map_err(|e| ReplayError::Results(e.to_string()))?;
                    }
                }
            }
        }
        r.map_err(|e| e.at(c.seq, name))
    }

    fn pool(&self, pool: u64) -> Result<PoolShape, ReplayError> {
        self.session
            .pools
            .get(&pool)
            .map(|p| p.shape)
            .ok_or_else(|| {
                ReplayError::Other(format!(
                    "query pool 0x{pool:x} has no QueryPool record in the trace"
                ))
            })
    }

    fn emit(&mut self, q: QueryResult) -> Result<(), ReplayError> {
        if self.session.frame < self.first_frame {
            return Ok(());
        }
        if q.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() {
            let Some(plan) = self.session.perf.plans.get(&q.pool) else {
                return Err(ReplayError::Other(format!(
                    "performance query pool 0x{:x} was read before it was created",
                    q.pool
                )));
            };
            if !plan.measures_in(self.pass) {
                return Ok(());
            }
            let counters = self
                .session
                .pools
                .get(&q.pool)
                .map(|p| p.counters.clone())
                .unwrap_or_default();
            let mut full = vec![None; counters.len()];
            let raw = q.replayed.as_ref().map_or(&[][..], |v| &v.values[..]);
            perf::scatter(plan, self.pass, raw, &mut full);
            self.merge.add(q, full, &counters);
            return Ok(());
        }
        if self.pass > 0 {
            return Ok(());
        }
        let precise = self
            .session
            .query_owner
            .get(&(q.pool, q.query))
            .is_some_and(|o| o.1);
        self.comparison.add(&q, precise);
        self.queries += 1;
        if let Some(w) = self.writer {
            w.write(&Record::QueryResult(q))
                .map_err(|e| ReplayError::Results(e.to_string()))?;
        }
        Ok(())
    }

    /// How the replay lays out the results of `pool`: performance pools measure only this pass's
    /// counters, so their shape and (for reads the replay makes itself) stride shrink to that.
    fn replay_shape(&self, pool: u64, shape: PoolShape) -> PoolShape {
        match self.session.perf.plans.get(&pool) {
            Some(plan) if shape.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() => {
                PoolShape {
                    perf_counters: plan.indices_for(self.pass).len() as u32,
                    ..shape
                }
            }
            _ => shape,
        }
    }

    /// Builds the results of queries `first..first+count` of `pool` read at capture seq `seq`.
    #[allow(clippy::too_many_arguments)]
    fn results(
        &mut self,
        seq: u64,
        pool: u64,
        first: u32,
        flags: u32,
        shape: PoolShape,
        captured: &[Decoded],
        captured_meta: (i32, u64),
        replayed: &[Decoded],
        replayed_meta: (i32, u64),
        available_ns: &[u64],
    ) -> Result<(), ReplayError> {
        let cap_dev = self.session.capture_device.cloned();
        for (i, (c, r)) in captured.iter().zip(replayed).enumerate() {
            let query = first + i as u32;
            let owner = self.session.query_owner.get(&(pool, query)).copied();
            let submit = owner.and_then(|(cb, _)| self.session.cmdbuf_submit.get(&cb).copied());
            let is_ts = shape.query_type == vk::QueryType::TIMESTAMP.as_raw();
            let (cap_ts, rep_ts) = if is_ts {
                let fam = submit.map_or(0, |s| s.family);
                let cap_bits = cap_dev
                    .as_ref()
                    .and_then(|d| {
                        d.queue_families
                            .get(fam as usize)
                            .map(|f| f.timestamp_valid_bits)
                    })
                    .unwrap_or(64);
                let cap_period = cap_dev.as_ref().map_or(1.0, |d| d.timestamp_period_ns);
                let rep_fam = submit
                    .and_then(|s| self.session.lookup(vk::ObjectType::QUEUE, s.queue).ok())
                    .and_then(|q| {
                        self.session
                            .device_for(q)
                            .ok()
                            .and_then(|d| d.queue_family_of.get(&q).copied())
                    })
                    .unwrap_or(0);
                let rep_bits = self
                    .session
                    .gpu
                    .summary
                    .queue_families
                    .get(rep_fam as usize)
                    .map_or(64, |f| f.timestamp_valid_bits);
                let rep_period = self.session.gpu.summary.timestamp_period_ns;
                (
                    (c.available && !c.values.is_empty())
                        .then(|| queries::timestamp_ns(c.values[0], cap_bits, cap_period)),
                    (r.available && !r.values.is_empty())
                        .then(|| queries::timestamp_ns(r.values[0], rep_bits, rep_period)),
                )
            } else {
                (None, None)
            };
            self.emit(QueryResult {
                pool,
                query,
                query_type: shape.query_type,
                pipeline_statistics: shape.pipeline_statistics,
                frame: submit.map_or(self.session.frame, |s| s.frame),
                queue: submit.map_or(0, |s| s.queue),
                command_buffer: owner.map_or(0, |o| o.0),
                loop_index: self.loop_index,
                pass: self.pass,
                seq,
                flags,
                captured: Some(QueryValues {
                    values: c.values.clone(),
                    available: c.available,
                    result: captured_meta.0,
                    host_ns: captured_meta.1,
                }),
                replayed: Some(QueryValues {
                    values: r.values.clone(),
                    available: r.available,
                    result: replayed_meta.0,
                    host_ns: replayed_meta.1,
                }),
                submit_ns: submit.map_or(0, |s| s.submit_ns),
                available_ns: available_ns.get(i).copied().unwrap_or(0),
                captured_gpu_ns: cap_ts,
                replayed_gpu_ns: rep_ts,
            })?;
        }
        Ok(())
    }

    /// Re-does a captured `vkGetQueryPoolResults` with the captured flags, stride and count.
    /// Whether every query of the range was written by a command buffer this replay submitted
    /// (in a trimmed trace, work submitted before the trim point never runs).
    fn ran_in_replay(&self, pool: u64, first: u32, count: u32) -> bool {
        (first..first.saturating_add(count)).all(|q| {
            self.session
                .query_owner
                .get(&(pool, q))
                .is_some_and(|(cb, _)| self.session.cmdbuf_submit.contains_key(cb))
        })
    }

    fn reread(&mut self, r: &record::QueryResults) -> Result<(), ReplayError> {
        let shape = self.pool(r.pool)?;
        let captured = queries::decode(&r.data, r.count, r.stride, r.flags, shape, r.result)
            .map_err(|e| ReplayError::Trace(format!("captured query results: {e}")))?;
        let pool = self.session.lookup(vk::ObjectType::QUERY_POOL, r.pool)?;
        let device = &self.session.device(r.device)?.device;
        // Poll without WAIT so a replay that diverged cannot hang; keep polling only for queries
        // the capture saw available.
        let flags = r.flags & !RESULT_WAIT;
        let rshape = self.replay_shape(r.pool, shape);
        let (rstride, rlen) = if rshape == shape {
            (r.stride, r.data.len())
        } else {
            let per = rshape.bytes_per_query(flags);
            (per as u64, per * r.count as usize)
        };
        let mut buf = vec![0u8; rlen];
        let mut available_ns = vec![0u64; r.count as usize];
        let start = Instant::now();
        let (replayed, result, host_ns) = loop {
            // SAFETY: buf holds data.len() bytes, the size the capture passed with the same stride/count.
            let res = unsafe {
                (device.fp_v1_0().get_query_pool_results)(
                    device.handle(),
                    vk::QueryPool::from_raw(pool),
                    r.first,
                    r.count,
                    buf.len(),
                    buf.as_mut_ptr().cast(),
                    rstride,
                    vk::QueryResultFlags::from_raw(flags),
                )
            };
            let now = now_ns();
            if res != vk::Result::SUCCESS && res != vk::Result::NOT_READY {
                return Err(ReplayError::vk("vkGetQueryPoolResults", res));
            }
            let d = queries::decode(&buf, r.count, rstride, flags, rshape, res.as_raw())
                .map_err(ReplayError::Other)?;
            for (i, q) in d.iter().enumerate() {
                if q.available && available_ns[i] == 0 {
                    available_ns[i] = now;
                }
            }
            let done = captured
                .iter()
                .zip(&d)
                .all(|(c, q)| !c.available || q.available);
            if done || start.elapsed() > WAIT_TIMEOUT {
                break (d, res.as_raw(), now);
            }
            std::thread::sleep(Duration::from_micros(100));
        };
        self.results(
            r.seq,
            r.pool,
            r.first,
            r.flags,
            shape,
            &captured,
            (r.result, r.host_ns),
            &replayed,
            (result, host_ns),
            &available_ns,
        )
    }

    /// Reads back a `vkCmdCopyQueryPoolResults` destination once its submission completed.
    fn read_copy(&mut self, c: &record::QueryCopy) -> Result<(), ReplayError> {
        let shape = self.pool(c.pool)?;
        let rshape = self.replay_shape(c.pool, shape);
        let per = rshape.bytes_per_query(c.flags) as u64;
        let len = if c.count == 0 {
            0
        } else {
            c.stride
                .saturating_mul(c.count as u64 - 1)
                .saturating_add(per)
        };
        // With no availability word a copied query is taken as written.
        let ok = vk::Result::SUCCESS.as_raw();
        let captured = queries::decode(&c.data, c.count, c.stride, c.flags, shape, ok)
            .map_err(|e| ReplayError::Trace(format!("captured query copy: {e}")))?;
        match self.session.cmdbuf_submit.get(&c.command_buffer) {
            Some(s) => self.session.wait_device_of_queue(s.queue)?,
            None => self.session.wait_all_devices()?,
        }
        let (memory, bind_offset) =
            *self
                .session
                .buffer_memory
                .get(&c.dst_buffer)
                .ok_or_else(|| {
                    ReplayError::Other(format!(
                        "query copy destination buffer 0x{:x} is not bound to memory",
                        c.dst_buffer
                    ))
                })?;
        let bytes =
            self.session
                .read_memory(memory, bind_offset.saturating_add(c.dst_offset), len)?;
        let now = now_ns();
        let replayed = queries::decode(&bytes, c.count, c.stride, c.flags, rshape, ok)
            .map_err(ReplayError::Other)?;
        let avail: Vec<u64> = replayed
            .iter()
            .map(|q| if q.available { now } else { 0 })
            .collect();
        self.results(
            c.seq,
            c.pool,
            c.first,
            c.flags,
            shape,
            &captured,
            (ok, c.host_ns),
            &replayed,
            (ok, now),
            &avail,
        )
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl ReplaySummary {
    /// The text `quarry replay` prints; `compare` adds the comparison of every query type.
    pub fn to_text(&self, compare: bool) -> String {
        let s = self;
        let mut o = String::new();
        for w in &s.warnings {
            let _ = writeln!(o, "warning: {w}");
        }
        let _ = writeln!(
            o,
            "replayed on GPU {}: {} ({})",
            s.gpu.index, s.gpu.name, s.gpu.driver_info
        );
        if let Some(c) = &s.capture_device {
            let _ = writeln!(o, "captured on: {} ({})", c.name, c.driver_info);
        }
        let _ = writeln!(
            o,
            "calls {}  frames {}  loops {}  query reads {}",
            s.calls, s.frames, s.loops, s.queries
        );
        if s.presented > 0 {
            let _ = writeln!(o, "presented {} frames in a window", s.presented);
        }
        if s.injected > 0 {
            let _ = writeln!(
                o,
                "counters measured around {} command buffers / render passes",
                s.injected
            );
        }
        if s.passes > 1 {
            let _ = writeln!(
                o,
                "counter passes {} ({} ms each)",
                s.passes,
                s.pass_ns
                    .iter()
                    .map(|p| format!("{:.1}", ms(*p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            o,
            "cpu per call: decode {:.0} ns, decode+replay (incl. driver) {:.0} ns",
            s.decode_ns_per_call, s.cpu_ns_per_call
        );
        if !s.frame_times.is_empty() {
            let _ = writeln!(
                o,
                "{:>6} {:>12} {:>12} {:>7}",
                "frame", "capture ms", "replay ms", "ratio"
            );
            for f in &s.frame_times {
                let replay = if f.replay_ns.is_empty() {
                    0
                } else {
                    f.replay_ns.iter().sum::<u64>() / f.replay_ns.len() as u64
                };
                let ratio = if f.capture_ns > 0 {
                    replay as f64 / f.capture_ns as f64
                } else {
                    0.0
                };
                let _ = writeln!(
                    o,
                    "{:>6} {:>12.3} {:>12.3} {:>7.2}",
                    f.frame,
                    ms(f.capture_ns),
                    ms(replay),
                    ratio
                );
            }
        }
        if s.frame_range {
            let replay: u64 = s
                .frame_times
                .iter()
                .map(|f| f.replay_ns.iter().sum::<u64>() / f.replay_ns.len().max(1) as u64)
                .sum();
            let capture: u64 = s.frame_times.iter().map(|f| f.capture_ns).sum();
            let _ = writeln!(
                o,
                "frames {}-{}: capture {:.3} ms, replay {:.3} ms per loop",
                s.frame_times.first().map_or(0, |f| f.frame),
                s.frame_times.last().map_or(0, |f| f.frame),
                ms(capture),
                ms(replay)
            );
        }
        let total: u64 = s.loop_ns.iter().sum();
        let mean = if s.loop_ns.is_empty() {
            0
        } else {
            total / s.loop_ns.len() as u64
        };
        let _ = writeln!(
            o,
            "total: capture {:.3} ms, replay {:.3} ms per loop ({})",
            ms(s.capture_ns),
            ms(mean),
            s.loop_ns
                .iter()
                .map(|l| format!("{:.3}", ms(*l)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if s.validated || s.validation_messages > 0 {
            let _ = writeln!(o, "validation: {} messages", s.validation_messages);
            for m in &s.first_messages {
                let _ = writeln!(o, "  {m}");
            }
        }
        if let Some(r) = &s.results {
            let _ = writeln!(o, "results: {}", r.display());
        }
        if compare {
            o.push_str(&s.comparison.to_text());
        }
        o
    }
}
