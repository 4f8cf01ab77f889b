//! The replay loop: reads the trace's records in order, re-executes calls, applies memory writes,
//! re-reads every query the capture read, and writes the results file.
//!
//! Layout: [`options`] (what to do), `scan` (a first pass over the trace), `run` (one pass
//! replaying it); this module runs the loops and counter passes and assembles the summary.
//! Dependencies point one way: engine → calls, results, session.

pub(crate) mod ahead;
mod options;
mod run;
mod scan;
mod stall;
mod watchdog;
pub use self::watchdog::{exit_now, gpu_abandoned};

use std::collections::HashMap;
use std::time::Instant;

use format::frames::FrameRange;
use format::record::{FileKind, Header, Record, ReplayInfo};
use format::{TraceReader, TraceWriter};

pub use self::options::{MemoryMode, NoProgress, PassInfo, Progress, ReplayOptions};
/// How long a query read or fence wait may take before the replay reports it never completed.
pub use crate::clock::WAIT_TIMEOUT;
use crate::clock::{now_ns, unix_ns};
use crate::compare::Comparison;
use crate::devices;
use crate::error::ReplayError;
use crate::inject::InjectState;
use crate::perf::Merge;
use crate::results::reread::{write_merged, QueryReads};
pub use crate::results::summary::{FrameTime, ReplaySummary};
use crate::session::Session;
use run::Run;
use scan::{scan, trace_err};

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
    if let Some(why) = crate::validate::spirv::unchecked() {
        warnings.push(why.to_string());
    }
    if !reader.has_footer() || reader.lost_bytes() > 0 {
        warnings.push(format!(
            "{}: the trace is incomplete ({} bytes lost, the writer did not finish); replaying every complete block",
            opts.trace.display(),
            reader.lost_bytes()
        ));
    }
    let scan = scan(&reader)?;
    let usage = std::sync::Arc::new(crate::portability::scan(&reader).map_err(trace_err)?);
    let memory_plan = crate::rebind::scan(&reader, opts.memory)?;
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
    warnings.extend(devices::target_warnings(&reader, &gpu));
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
    // First record: which trace these results belong to (FORMAT.md "Trace identity").
    if let Some(w) = &writer {
        w.write(&reader.identity_record())
            .map_err(|e| ReplayError::Results(e.to_string()))?;
    }

    // Results name one capture device; a trace whose instances chose different GPUs compares
    // as the same device only when every one of them is the replay GPU.
    let same = scan.capture_device.is_some()
        && scan
            .distinct_devices
            .iter()
            .all(|c| crate::compare::same_device(c, &gpu.summary));
    if scan.distinct_devices.len() > 1 {
        warnings.push(format!(
            "the capture's devices were created on {} different physical devices ({}); every one \
             is replayed on GPU {} ({}), and the results name the first as the capture device",
            scan.distinct_devices.len(),
            scan.distinct_devices
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            gpu.index,
            gpu.name
        ));
    }
    // The memory plan may create the trace's buffers and images ahead of their calls (to ask
    // their requirements), before the checks see them: those checks that need no state are
    // made on them here.
    if memory_plan.asked != MemoryMode::Remap {
        let checks = crate::validate::Validator::for_gpu(&gpu.profile);
        for c in &memory_plan.created {
            if let Err(message) = checks.check_alone(&c.call) {
                return Err(ReplayError::Invalid {
                    seq: scan.created_at.get(&c.handle).copied().unwrap_or(0),
                    command: c.call.name().to_string(),
                    message,
                });
            }
        }
    }
    let capture_devices = std::sync::Arc::new(scan.capture_devices.clone());
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
    let mut checks_ns_per_call = 0.0;
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
            session.memory.plan = memory_plan.clone();
            session.capture_devices = capture_devices.clone();
            session.perf.pass = pass;
            session.wsi.window = opts.window;
            session.drop.enabled = opts.drop_unsupported;
            session.drop.usage = Some(usage.clone());
            session.perf.forced = opts.passes;
            session.perf.pool_counters = pool_counters.clone();
            session.counters_injected = opts.inject.is_some();
            let mut run = Run {
                reader: &reader,
                session,
                inject: opts
                    .inject
                    .clone()
                    .map(|spec| InjectState::new(spec, pass, opts.passes)),
                reads: QueryReads {
                    writer: writer.as_ref(),
                    comparison: &mut comparison,
                    merge: &mut merge,
                    loop_index: l,
                    pass,
                    first_frame: opts.frames.map_or(0, |f| f.first),
                    queries: 0,
                    begins: Default::default(),
                },
                last_frame: opts.frames.and_then(|f| f.last),
                progress: &mut *progress,
                command_map: Vec::new(),
                command_names: Vec::new(),
                frame_start: 0,
                frame_ns: Vec::new(),
                dispatch_ns: 0,
                checks_ns: 0,
                calls: 0,
                trimmed: false,
                skipped_before_trim: 0,
                validator: crate::validate::Validator::for_gpu(&gpu.profile),
                abandoned: false,
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
            validation += messages;
            if first_messages.is_empty() {
                first_messages = msgs;
            }
            // After an error the GPU may still run what was submitted (a draw that never ends
            // made the wait time out): tearing down would wait for it, so such a session is
            // abandoned instead (`stall`), with the loader that the driver's threads run in.
            if let Err(e) = outcome {
                if run.abandoned || !stall::unsettled(&run.session, stall::AFTER_ERROR).is_empty() {
                    std::mem::forget(run);
                    std::mem::forget(entry);
                    watchdog::abandon();
                } else {
                    watchdog::watched_teardown(&mut run.session);
                }
                return Err(e);
            }
            // Objects a trace leaves alive (the app exited without destroying them) are cleaned up
            // here; what validation says about that is the app's, not the replay's, so it is not counted.
            watchdog::watched_teardown(&mut run.session);
            let inject_warnings = run
                .inject
                .as_mut()
                .map(|i| {
                    let mut w = std::mem::take(&mut i.warnings);
                    if i.beside_app_queries > 0 {
                        w.push(format!(
                            "counter injection: {} command buffer(s) or render pass(es) not measured: the app's own performance query was active there (one at a time is allowed)",
                            i.beside_app_queries
                        ));
                    }
                    w
                })
                .unwrap_or_default();
            let trim_skips = (run.skipped_before_trim > 0).then(|| {
                format!(
                    "{} query read(s) skipped: their queries ran before the trim point",
                    run.skipped_before_trim
                )
            });
            let dropped = (!run.session.drop.dropped.is_empty()).then(|| {
                format!(
                    "dropped device extension(s) the replay GPU lacks: {} ({} of their calls skipped)",
                    run.session.drop.dropped.join(", "),
                    run.session.drop.skipped_calls
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
                    checks_ns_per_call = run.checks_ns as f64 / run.calls as f64;
                }
                passes = passes
                    .max(run.session.perf.passes_needed)
                    .max(run.inject.as_ref().map_or(1, |i| i.passes_needed));
            }
            queries += run.reads.queries;
            injected += run.inject.as_ref().map_or(0, |i| i.measured);
            presented += run.session.wsi.presented;
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
                    run.reads.queries
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
        checks_ns_per_call,
        cpu_ns_per_call,
        validated: opts.validate,
        passes,
        pass_ns,
        injected,
        frame_range: opts.frames.is_some(),
        presented,
        memory: memory_plan.describe(),
    })
}
