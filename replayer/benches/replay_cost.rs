//! CPU cost per call of the replayer, on real traces: `cargo bench -p replayer [-- TRACE...]`
//! (default traces: `$QUARRY_BENCH_TRACES`, comma-separated, else `/tmp/vkcube.qtrace` and
//! `/tmp/demo.qtrace`; missing ones are skipped). Every figure is a batch measurement (the wall time
//! of whole passes over the trace's calls divided by the calls), never a timer around one call.
//!
//! Columns, ns per call (CPU time of the benchmarking thread, so that time the thread spends
//! preempted on a shared machine is not counted; the last column is wall time):
//! - `read`: the baseline, `format` reading the records (zstd + bincode) — what any replay pays
//!   before it sees a call;
//! - `decode`: `vkstream::decode_call` of every call's parameters;
//! - `validate`: what `replayer::validate` adds to decoding (its checks and state tracking
//!   before and after each call: decode+validate minus decode);
//! - `decode+dispatch`: decode, handle translation through a real replay session, materialisation
//!   and the call through the dispatch table, into a null driver (`replayer::nulldrv`): the
//!   replayer's own cost, the figure the < 100 ns target is about;
//! - `replay (driver)`: a real replay on the first GPU (`replayer::replay`, 3 loops, the first
//!   dropped), wall time per call including the driver and the GPU waits the trace asks for.
//!
//! `QUARRY_BENCH_MIN_MS` (default 300) is the least time each measurement runs.
//! `QUARRY_BENCH_ONLY` runs one part: `ahead` (the replay's two threads into the null driver, with
//! the checks and without: what they cost the replay thread), `dispatch` (the null-driver loop), `validate` (decode, and
//! validation with and without decoding), `checks` (the checks alone over calls decoded
//! beforehand: for a profiler) or `checks-per-cmd` (where the checks' time goes, by command).
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use format::record::Record;
use format::TraceReader;
use replayer::nulldrv::{self, thread_cpu_ns};

/// The validator's verdicts are counted, not passed through `black_box` one by one: copying each
/// whole `Result` out reads it back before its stores have landed (a store-forwarding stall of
/// several ns per call that the engine, which only matches on it, never pays).
///
/// Runs `f` (one pass over `n` calls) until `min` has passed; ns per call of the best of 5 batches,
/// in CPU time of this thread (time preempted by other processes is not counted).
fn per_call(n: usize, min: Duration, mut f: impl FnMut()) -> f64 {
    f(); // warm: caches, the arena's chunks, the allocator's free lists
    let mut best = f64::MAX;
    let budget = (min / 5).as_nanos() as u64;
    for _ in 0..5 {
        let start = thread_cpu_ns();
        let mut passes = 0u64;
        while thread_cpu_ns() - start < budget || passes == 0 {
            f();
            passes += 1;
        }
        let ns = (thread_cpu_ns() - start) as f64 / (passes as f64 * n.max(1) as f64);
        best = best.min(ns);
    }
    best
}

fn bench(trace: &Path, min: Duration) -> Result<(), String> {
    let reader = TraceReader::open(trace).map_err(|e| e.to_string())?;
    let calls = nulldrv::Calls::load(trace).map_err(|e| e.to_string())?;
    let n = calls.calls.len();
    if n == 0 {
        return Err("no calls".into());
    }
    if std::env::var("QUARRY_BENCH_ONLY").as_deref() == Ok("dispatch") {
        // For a profiler: the null-driver loop alone.
        let m = nulldrv::dispatch(&calls, 2000, 0).map_err(|e| e.to_string())?;
        println!("{}: {:.1} ns per call", trace.display(), m.ns_per_call());
        return Ok(());
    }
    if std::env::var("QUARRY_BENCH_ONLY").as_deref() == Ok("ahead") {
        return ahead(trace, &reader, min);
    }
    if let Ok(only @ ("checks" | "checks-per-cmd")) = std::env::var("QUARRY_BENCH_ONLY").as_deref()
    {
        return checks_alone(trace, &calls, min, only == "checks-per-cmd");
    }
    let decode = per_call(n, min, || {
        for (id, c) in &calls.calls {
            let _ = black_box(vkstream::decode_call(*id, black_box(&c.params)));
        }
    });
    let decode_validate = per_call(n, min, || {
        let mut v = replayer::validate::Validator::new();
        let mut refused = 0u32;
        for (id, c) in &calls.calls {
            if let Ok(call) = vkstream::decode_call(*id, black_box(&c.params)) {
                refused += u32::from(v.before(&call, c.result).is_err());
                v.after(&call, c.result, c.seq);
            }
        }
        black_box(refused);
    });
    let validate = decode_validate - decode;
    if std::env::var("QUARRY_BENCH_ONLY").as_deref() == Ok("validate") {
        // Decode and validate alone (quick, and for a profiler), and the checks alone over
        // calls decoded beforehand (no subtraction of two noisy figures).
        let decoded: Vec<(vkstream::Call, &format::record::Call)> = calls
            .calls
            .iter()
            .filter_map(|(id, c)| Some((vkstream::decode_call(*id, &c.params).ok()?, c)))
            .collect();
        let alone = per_call(n, min, || {
            let mut v = replayer::validate::Validator::new();
            let mut refused = 0u32;
            for (call, c) in &decoded {
                refused += u32::from(v.before(black_box(call), c.result).is_err());
                v.after(call, c.result, c.seq);
            }
            black_box(refused);
        });
        println!(
            "{}: decode {decode:.1}, validate {validate:.1} (checks alone {alone:.1}) ns per call",
            trace.display()
        );
        return Ok(());
    }
    let read = per_call(n, min, || {
        for r in reader.records() {
            if let Ok(Record::Call(c)) = r {
                black_box(&c);
            }
        }
    });
    if std::env::var_os("QUARRY_BENCH_PER_CMD").is_some() {
        // Decode cost per command, batch-measured per command: where the decode time goes.
        let mut by: std::collections::BTreeMap<u32, Vec<&[u8]>> = Default::default();
        for (id, c) in &calls.calls {
            by.entry(*id).or_default().push(&c.params);
        }
        let mut rows: Vec<(f64, f64, usize, &str)> = by
            .iter()
            .map(|(id, ps)| {
                let ns = per_call(ps.len(), min / 20, || {
                    for p in ps {
                        let _ = black_box(vkstream::decode_call(*id, black_box(p)));
                    }
                });
                let name = vkstream::COMMANDS.get(*id as usize).copied().unwrap_or("?");
                (ns * ps.len() as f64, ns, ps.len(), name)
            })
            .collect();
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (total, ns, count, name) in rows.iter().take(12) {
            println!(
                "    decode {name:<40} {count:>5} calls {ns:>9.1} ns/call  {:>5.1}% of the trace's decode time",
                100.0 * total / (decode * n as f64)
            );
        }
    }
    // The null-driver loop builds a session per pass: give it enough passes to amortise that.
    let warm = nulldrv::dispatch(&calls, 1, 0).map_err(|e| e.to_string())?;
    // Batches of `loops` passes, the best of 5 kept (the machine may be shared: the least time
    // is the one least disturbed).
    let loops =
        ((min.as_nanos() as f64 / 5.0 / warm.ns.max(1) as f64).ceil() as u32).clamp(2, 10_000);
    if std::env::var_os("QUARRY_BENCH_ERRORS").is_some() {
        for e in &warm.first_errors {
            println!("    null-driver error: {e}");
        }
    }
    // Recorded commands alone: each vkCmd* call done EXTRA more times; the added time over the
    // added calls, from the best batch of each kind (interleaved, so that load hits both alike).
    const EXTRA: u32 = 10;
    let cmds = calls.cmd_calls();
    let mut null: Option<nulldrv::Measured> = None;
    let mut more_ns = u64::MAX;
    for _ in 0..5 {
        let base = nulldrv::dispatch(&calls, loops, 0).map_err(|e| e.to_string())?;
        match &null {
            Some(b) if b.ns <= base.ns => {}
            _ => null = Some(base),
        }
        if cmds >= 100 {
            let more = nulldrv::dispatch(&calls, loops, EXTRA).map_err(|e| e.to_string())?;
            more_ns = more_ns.min(more.ns);
        }
    }
    let null = null.expect("5 batches");
    let mut cmd_ns = f64::NAN;
    let mut cmd_decode = f64::NAN;
    // Too few recorded commands (vkcube records its command buffers once) give only noise.
    if cmds >= 100 {
        cmd_ns = (more_ns as f64 - null.ns as f64) / (loops as f64 * EXTRA as f64 * cmds as f64);
        let only: Vec<&(u32, format::record::Call)> = calls
            .calls
            .iter()
            .filter(|(id, _)| calls.is_cmd(*id))
            .collect();
        cmd_decode = per_call(only.len(), min, || {
            for (id, c) in &only {
                let _ = black_box(vkstream::decode_call(*id, black_box(&c.params)));
            }
        });
    }

    let mut opts = replayer::ReplayOptions::new(trace);
    opts.loops = 3;
    let real = replayer::replay(&opts).map_err(|e| e.to_string());
    let (real_ns, gpu) = match &real {
        Ok(s) => {
            let later: Vec<u64> = s.loop_ns.iter().skip(1).copied().collect();
            let mean = later.iter().sum::<u64>() as f64 / later.len().max(1) as f64;
            (
                format!("{:.0}", mean / s.calls.max(1) as f64),
                s.gpu.name.clone(),
            )
        }
        Err(e) => ("-".into(), format!("replay failed: {e}")),
    };
    let name = trace.file_name().unwrap_or_default().to_string_lossy();
    println!(
        "{:<28} {:>6} {:>8.1} {:>8.1} {:>9.1} {:>16.1} {:>16}   null-driver errors {}/{}; driver: {}",
        name,
        n,
        read,
        decode,
        validate,
        null.ns_per_call(),
        real_ns,
        null.errors,
        null.calls,
        gpu
    );
    if cmds >= 100 {
        println!(
            "{:<28} {:>6} {:>8} {:>8.1} {:>9} {:>16.1} {:>16}",
            "  vkCmd* calls only", cmds, "", cmd_decode, "", cmd_ns, ""
        );
    }
    Ok(())
}

/// The replay's pipeline into the null driver (`nulldrv::dispatch_ahead`), with the checks and
/// without them (the checks thread only reading and decoding), batches alternated, the best of 5
/// kept: what the checks cost the replay thread, the checks thread and the wall clock.
fn ahead(trace: &Path, reader: &TraceReader, min: Duration) -> Result<(), String> {
    let warm = nulldrv::dispatch_ahead(reader, 1, true).map_err(|e| e.to_string())?;
    let loops = ((min.as_nanos() as f64 / 10.0 / warm.wall_ns.max(1) as f64).ceil() as u32)
        .clamp(1, 10_000);
    let best = |a: &mut Option<nulldrv::MeasuredAhead>, m: nulldrv::MeasuredAhead| match a {
        Some(b) if b.replay_ns <= m.replay_ns => {
            b.checks_ns = b.checks_ns.min(m.checks_ns);
            b.wall_ns = b.wall_ns.min(m.wall_ns);
        }
        _ => {
            if let Some(b) = a.as_ref() {
                let (c, w) = (b.checks_ns.min(m.checks_ns), b.wall_ns.min(m.wall_ns));
                *a = Some(nulldrv::MeasuredAhead {
                    checks_ns: c,
                    wall_ns: w,
                    ..m
                });
            } else {
                *a = Some(m);
            }
        }
    };
    let (mut with, mut without) = (None, None);
    for _ in 0..5 {
        best(
            &mut with,
            nulldrv::dispatch_ahead(reader, loops, true).map_err(|e| e.to_string())?,
        );
        best(
            &mut without,
            nulldrv::dispatch_ahead(reader, loops, false).map_err(|e| e.to_string())?,
        );
    }
    let (w, o) = (with.expect("5 batches"), without.expect("5 batches"));
    println!(
        "{}: checks ahead, ns per call with / without checks: replay thread {:.1} / {:.1}, \
         checks thread {:.1} / {:.1}, wall {:.1} / {:.1}",
        trace.display(),
        w.per_call(w.replay_ns),
        o.per_call(o.replay_ns),
        w.per_call(w.checks_ns),
        o.per_call(o.checks_ns),
        w.per_call(w.wall_ns),
        o.per_call(o.wall_ns),
    );
    Ok(())
}

/// `QUARRY_BENCH_ONLY=checks`: the validator's checks alone over calls decoded beforehand (for a
/// profiler: nothing else runs). `checks-per-cmd`: where that time goes by command, each call
/// timed with a clock read on both sides (less the cost of the clock reads themselves, so rough:
/// a guide to what to look at, not a figure to quote).
fn checks_alone(
    trace: &Path,
    calls: &nulldrv::Calls,
    min: Duration,
    per_cmd: bool,
) -> Result<(), String> {
    let decoded: Vec<(u32, vkstream::Call, &format::record::Call)> = calls
        .calls
        .iter()
        .filter_map(|(id, c)| Some((*id, vkstream::decode_call(*id, &c.params).ok()?, c)))
        .collect();
    let n = decoded.len();
    if !per_cmd {
        let alone = per_call(n, min, || {
            let mut v = replayer::validate::Validator::new();
            let mut refused = 0u32;
            for (_, call, c) in &decoded {
                refused += u32::from(v.before(black_box(call), c.result).is_err());
                v.after(call, c.result, c.seq);
            }
            black_box(refused);
        });
        println!("{}: checks alone {alone:.1} ns per call", trace.display());
        return Ok(());
    }
    let clock = || std::time::Instant::now();
    // The cost of the two clock reads, measured the same way around nothing.
    let mut empty = u128::MAX;
    for _ in 0..1000 {
        let a = clock();
        let b = black_box(clock());
        empty = empty.min((b - a).as_nanos());
    }
    {
        // Calls the checks refuse (errors cost a message each): named, so that the figures
        // are read knowing them.
        let mut v = replayer::validate::Validator::new();
        for (id, call, c) in &decoded {
            if let Err(e) = v.before(call, c.result) {
                let name = vkstream::COMMANDS.get(*id as usize).copied().unwrap_or("?");
                println!("    refused: seq {} {name}: {e}", c.seq);
            }
            v.after(call, c.result, c.seq);
        }
    }
    // Per call position the least time over 200 passes (time preempted lands in one pass).
    let mut least = vec![u128::MAX; n];
    let mut new_ns = u128::MAX;
    for _ in 0..200 {
        let a = clock();
        let mut v = black_box(replayer::validate::Validator::new());
        let mut made = (clock() - a).as_nanos();
        for (k, (_, call, c)) in decoded.iter().enumerate() {
            let a = clock();
            let _ = black_box(v.before(black_box(call), c.result));
            v.after(call, c.result, c.seq);
            let ns = (clock() - a).as_nanos().saturating_sub(empty);
            least[k] = least[k].min(ns);
        }
        let a = clock();
        drop(v);
        made += (clock() - a).as_nanos();
        new_ns = new_ns.min(made);
    }
    // Command -> (ns, calls).
    let mut by: std::collections::BTreeMap<u32, (u128, u64)> = Default::default();
    for (k, (id, _, _)) in decoded.iter().enumerate() {
        let e = by.entry(*id).or_default();
        e.0 += least[k];
        e.1 += 1;
    }
    let total: u128 = by.values().map(|x| x.0).sum::<u128>() + new_ns;
    let mut rows: Vec<_> = by.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .0));
    println!(
        "{}: {:.1} ns per call in all (clock reads of {empty} ns taken off); validator made and dropped: {:.1} ns per call",
        trace.display(),
        total as f64 / n as f64,
        new_ns as f64 / n as f64
    );
    for (id, (ns, count)) in rows.iter().take(25) {
        let name = vkstream::COMMANDS
            .get(**id as usize)
            .copied()
            .unwrap_or("?");
        println!(
            "    {name:<40} {:>5} calls {:>9.1} ns/call {:>5.1}%",
            count,
            *ns as f64 / *count as f64,
            100.0 * *ns as f64 / total as f64
        );
    }
    Ok(())
}

fn main() {
    let mut traces: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .collect();
    if traces.is_empty() {
        traces = match std::env::var("QUARRY_BENCH_TRACES") {
            Ok(v) if !v.is_empty() => v.split(',').map(PathBuf::from).collect(),
            _ => vec!["/tmp/vkcube.qtrace".into(), "/tmp/demo.qtrace".into()],
        };
    }
    let min = Duration::from_millis(
        std::env::var("QUARRY_BENCH_MIN_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
    );
    println!(
        "size of a decoded call: {} bytes",
        std::mem::size_of::<vkstream::Call>()
    );
    println!(
        "{:<28} {:>6} {:>8} {:>8} {:>9} {:>16} {:>16}   (ns per call)",
        "trace", "calls", "read", "decode", "validate", "decode+dispatch", "replay (driver)"
    );
    for t in &traces {
        if !t.is_file() {
            eprintln!("{}: not found, skipped", t.display());
            continue;
        }
        if let Err(e) = bench(t, min) {
            eprintln!("{}: {e}", t.display());
        }
    }
}
