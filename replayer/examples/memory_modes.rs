//! `cargo run --release -p replayer --example memory_modes -- TRACE [RUNS] [LOOPS] [GPU]`: replay
//! time of one trace with `--memory remap` against `--memory rebind`, measured in the same run.
//!
//! RUNS (default 5) replays of LOOPS loops (default 4) per mode, the modes alternated run by run
//! so both see the same machine; the first loop of every replay is left out (pipeline compiles and
//! first allocations). Prints each mode's per-loop times (ms), their medians and rebind/remap,
//! with the spread of the per-run ratios.
use replayer::{MemoryMode, ReplayOptions};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(trace) = args.next() else {
        eprintln!("usage: memory_modes TRACE [RUNS] [LOOPS] [GPU]");
        std::process::exit(2);
    };
    let runs: u32 = args.next().map_or(5, |a| a.parse().expect("RUNS"));
    let loops: u32 = args.next().map_or(4, |a| a.parse().expect("LOOPS")).max(2);
    let gpu = args.next();
    let mut per_mode: Vec<(MemoryMode, Vec<f64>)> = vec![
        (MemoryMode::Remap, Vec::new()),
        (MemoryMode::Rebind, Vec::new()),
    ];
    let mut run_ratios = Vec::new();
    let mut device = String::new();
    let mut layouts = [String::new(), String::new()];
    for _ in 0..runs {
        let mut medians = Vec::new();
        for (k, (mode, times)) in per_mode.iter_mut().enumerate() {
            let mut o = ReplayOptions::new(&trace);
            o.gpu = gpu.clone();
            o.loops = loops;
            o.memory = *mode;
            let s = replayer::replay(&o).unwrap_or_else(|e| {
                eprintln!("quarry: --memory {}: {e}", mode.name());
                std::process::exit(1);
            });
            device = format!("{} ({})", s.gpu.name, s.gpu.driver_info);
            layouts[k] = s.memory.clone();
            let mut these: Vec<f64> = s.loop_ns[1..].iter().map(|n| *n as f64 / 1e6).collect();
            times.extend(&these);
            medians.push(median(&mut these));
        }
        run_ratios.push(medians[1] / medians[0]);
    }
    println!(
        "{trace} on {device}: {runs} runs x {} loops per mode (first loop of each left out)",
        loops - 1
    );
    let mut m = Vec::new();
    for (k, (mode, times)) in per_mode.iter_mut().enumerate() {
        let list: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
        println!("{} [{}]: {}", mode.name(), layouts[k], list.join(" "));
        m.push(median(times));
    }
    let lo = run_ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = run_ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    println!(
        "median per loop: remap {:.2} ms, rebind {:.2} ms; rebind/remap {:.3} (per-run ratios {lo:.3}-{hi:.3})",
        m[0],
        m[1],
        m[1] / m[0]
    );
}
