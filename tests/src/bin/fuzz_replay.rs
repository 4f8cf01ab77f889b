//! Structure-aware fuzzing of `quarry replay` on stable Rust (issue 22).
//!
//! Each case takes a trace of the corpus (`tests/fixtures/corpus/*.qtrace`, real demo and vkcube
//! captures), decodes its records (`format::forge::read_records`), applies one to three
//! mutations that keep the file well formed — a record deleted, duplicated or moved, a handle a
//! call names (found with the generated `vkstream::handles` walker) swapped for another of the
//! trace or a made-up one, an array count changed beside its array, a parameter word or a
//! call's captured result edited — writes it again with valid checksums, and runs `quarry
//! replay` on lavapipe in a subprocess with a time limit. Outcomes: `ok` (exit 0), `error`
//! (exit 1 or 2 with one `quarry:` line), `crash` (a signal, or an exit 2 without one line) and
//! `hang` (the time limit). Crashes and hangs are saved with their stderr; the run exits 1 when
//! it found any, unless `--report`.
//!
//! `cargo run -p quarry-tests --bin fuzz_replay -- --seconds 150` (scripts/test.sh runs a fixed
//! count of execs, the same traces on every machine, and fails on a crash or hang); options
//! (numbers decimal or 0x-hex): `--seconds N`, `--execs N` (per job; stops at whichever of the two
//! comes first), `--seed N`, `--jobs N`, `--limit N` (seconds per replay, default 30: a replay
//! bounds each wait by 10 s and each record by 15 s, and stops at the first that runs out),
//! `--report` (exit 0 even when it found crashes), `--out DIR` (crashers, default
//! `target/fuzz-crashers`), `--gpu NAME` (replay GPU, default `llvmpipe`), `--corpus DIR`, `-v`
//! (list the distinct checks). BENCHMARKS.md has the long run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use format::forge::{read_records, write_records};
use format::record::{Header, Record};
use quarry_tests::hostile::{call_name, corpus_dir, run_limited, Outcome};

/// xorshift64*: reproducible from `--seed`, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

struct Seed {
    name: String,
    header: Header,
    records: Vec<Record>,
    table: Vec<String>,
    /// Every handle the trace's calls name, to swap in.
    handles: Vec<u64>,
}

fn load(path: &Path) -> Seed {
    let (header, records) = read_records(path).expect("corpus trace");
    let table = records
        .iter()
        .find_map(|r| match r {
            Record::CommandTable(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let mut handles = BTreeSet::new();
    for r in &records {
        if let Some(call) = decode(&table, r) {
            vkstream::handles::call_handles(&call, &mut |_, h, _| {
                handles.insert(h);
            });
        }
    }
    Seed {
        name: path.file_name().unwrap().to_string_lossy().into_owned(),
        header,
        records,
        table,
        handles: handles.into_iter().collect(),
    }
}

fn decode(table: &[String], r: &Record) -> Option<vkstream::Call> {
    let Record::Call(c) = r else { return None };
    let id = vkstream::command_id(table.get(c.cmd as usize)?)?;
    vkstream::decode_call(id, &c.params).ok()
}

/// One mutation of `recs`; returns what it did (for the log) and the command it touched.
fn mutate(rng: &mut Rng, s: &Seed, recs: &mut Vec<Record>) -> (String, String) {
    let calls: Vec<usize> = (0..recs.len())
        .filter(|i| matches!(recs[*i], Record::Call(_)))
        .collect();
    let i = calls[rng.below(calls.len())];
    let name = match &recs[i] {
        Record::Call(c) => call_name(&s.table, c).to_string(),
        _ => unreachable!(),
    };
    let what = match rng.below(8) {
        0 => {
            recs.remove(i);
            "delete"
        }
        1 => {
            let r = recs[i].clone();
            let to = (i + 1 + rng.below(8)).min(recs.len());
            recs.insert(to, r);
            "duplicate"
        }
        2 => {
            let r = recs.remove(i);
            let to = if rng.below(2) == 0 {
                (i + rng.below(16)).min(recs.len())
            } else {
                i.saturating_sub(rng.below(16))
            };
            recs.insert(to, r);
            "move"
        }
        3 | 4 => {
            let Some(call) = decode(&s.table, &recs[i]) else {
                return ("none".into(), name);
            };
            let mut named = Vec::new();
            vkstream::handles::call_handles(&call, &mut |_, h, _| named.push(h));
            if named.is_empty() {
                return ("none".into(), name);
            }
            let from = named[rng.below(named.len())];
            let to = match rng.below(4) {
                0 => 0,
                1 => rng.next() | 1,
                _ => s.handles[rng.below(s.handles.len())],
            };
            if let Record::Call(c) = &mut recs[i] {
                replace_u64(&mut c.params, from, to);
            }
            "handle"
        }
        5 => {
            let Record::Call(c) = &mut recs[i] else {
                unreachable!()
            };
            // An array: a u32 count n, then the array's flag 1 and its u64 length n.
            let spots: Vec<(usize, u32)> = (0..c.params.len().saturating_sub(12))
                .filter_map(|o| {
                    let n = u32::from_le_bytes(c.params[o..o + 4].try_into().ok()?);
                    let len = u64::from_le_bytes(c.params[o + 5..o + 13].try_into().ok()?);
                    (n > 0 && n < 4096 && c.params[o + 4] == 1 && len == u64::from(n))
                        .then_some((o, n))
                })
                .collect();
            if spots.is_empty() {
                return ("none".into(), name);
            }
            let (o, n) = spots[rng.below(spots.len())];
            let m = [0, n - 1, n + 1, n * 2, u32::MAX][rng.below(5)];
            c.params[o..o + 4].copy_from_slice(&m.to_le_bytes());
            "count"
        }
        6 => {
            let Record::Call(c) = &mut recs[i] else {
                unreachable!()
            };
            if c.params.len() < 4 {
                return ("none".into(), name);
            }
            let o = rng.below(c.params.len() / 4) * 4;
            let v = match rng.below(3) {
                0 => rng.next() as u32,
                1 => 1 << rng.below(32),
                _ => u32::from_le_bytes(c.params[o..o + 4].try_into().unwrap()) ^ 1,
            };
            c.params[o..o + 4].copy_from_slice(&v.to_le_bytes());
            "word"
        }
        _ => {
            let Record::Call(c) = &mut recs[i] else {
                unreachable!()
            };
            c.result = [-1, 1, 2, -4, 1_000_000_001][rng.below(5)];
            "result"
        }
    };
    (what.into(), name)
}

fn replace_u64(b: &mut [u8], from: u64, to: u64) {
    let f = from.to_le_bytes();
    if let Some(o) = b.windows(8).position(|w| w == f) {
        b[o..o + 8].copy_from_slice(&to.to_le_bytes());
    }
}

#[derive(Default)]
struct Stats {
    execs: u64,
    outcomes: BTreeMap<&'static str, u64>,
    /// Mutation kind -> count.
    kinds: BTreeMap<String, u64>,
    /// Commands mutated.
    mutated: BTreeSet<String>,
    /// Commands named in clean errors, and the distinct error shapes (numbers stripped).
    error_sites: BTreeSet<String>,
    error_shapes: BTreeSet<String>,
    found: Vec<PathBuf>,
}

/// The error line with numbers and hex values blanked (one shape per kind of check).
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut last_digit = false;
    for w in line.split_whitespace() {
        let w = if w.starts_with("0x") || w.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            "#"
        } else {
            w
        };
        if w == "#" && last_digit {
            continue;
        }
        last_digit = w == "#";
        out.push_str(w);
        out.push(' ');
    }
    out.trim_end().to_string()
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            // Seeds are usually written in hex; a value that does not parse is an error, never
            // the default (a mistyped seed would silently rerun the default stream).
            let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            n.unwrap_or_else(|_| {
                eprintln!("fuzz_replay: {name} {v}: not a number (decimal or 0x-hex)");
                std::process::exit(2)
            })
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "fuzz_replay [--seconds N] [--execs N] [--seed N] [--jobs N] [--limit N] [--out DIR] [--gpu NAME] [--corpus DIR] [--report] [-v]\n\
             Numbers are decimal or 0x-hex; see the header of tests/src/bin/fuzz_replay.rs."
        );
        return;
    }
    let seconds = arg(&args, "--seconds", 150);
    // Execs per job, 0: until `--seconds`. With a seed, a count gives every machine the same
    // traces, which a time limit does not (CI's run must not depend on the machine's speed).
    let execs = arg(&args, "--execs", 0);
    let seed = arg(&args, "--seed", 0x5eed);
    let jobs = arg(&args, "--jobs", 2).max(1);
    let limit = Duration::from_secs(arg(&args, "--limit", 30));
    let exe_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let quarry = exe_dir.join("quarry");
    assert!(
        quarry.is_file(),
        "{} is not built: cargo build --workspace first",
        quarry.display()
    );
    let out_dir = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| exe_dir.join("../fuzz-crashers"));
    std::fs::create_dir_all(&out_dir).unwrap();
    let text_arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    // Another GPU than lavapipe (the H100 through the device tool: BENCHMARKS.md), and the corpus
    // of a checkout that moved.
    let gpu = text_arg("--gpu").unwrap_or_else(|| "llvmpipe".into());
    let corpus = text_arg("--corpus").map_or_else(corpus_dir, PathBuf::from);
    let mut seeds: Vec<Seed> = std::fs::read_dir(corpus)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "qtrace"))
        .map(|p| load(&p))
        .collect();
    seeds.sort_by(|a, b| a.name.cmp(&b.name));
    let seeds = Arc::new(seeds);
    let stats = Arc::new(Mutex::new(Stats::default()));
    let scratch = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..jobs)
        .map(|j| {
            let (seeds, stats, quarry, out_dir, gpu) = (
                seeds.clone(),
                stats.clone(),
                quarry.clone(),
                out_dir.clone(),
                gpu.clone(),
            );
            let dir = scratch.path().to_path_buf();
            std::thread::spawn(move || {
                // The seed shifted before the `| 1`: seeds 2n and 2n + 1 used to give one stream.
                let mut rng = Rng(((seed << 1) ^ (j + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
                let mut n = 0u64;
                while Instant::now() < deadline && (execs == 0 || n < execs) {
                    n += 1;
                    let s = &seeds[rng.below(seeds.len())];
                    let mut recs = s.records.clone();
                    let mut log = Vec::new();
                    for _ in 0..1 + rng.below(3) {
                        let (what, name) = mutate(&mut rng, s, &mut recs);
                        log.push(format!("{what} {name}"));
                    }
                    let p = dir.join(format!("case-{j}.qtrace"));
                    write_records(&p, s.header.clone(), &recs, 1 << 20).unwrap();
                    let mut c = Command::new(&quarry);
                    c.env(
                        "XDG_RUNTIME_DIR",
                        std::env::var_os("XDG_RUNTIME_DIR").unwrap_or("/tmp".into()),
                    )
                    .env_remove("VK_INSTANCE_LAYERS")
                    .env_remove("VK_LOADER_LAYERS_ENABLE")
                    .arg("replay")
                    .arg(&p)
                    .args(["--gpu", &gpu]);
                    let outcome = run_limited(&mut c, limit);
                    let (class, stderr) = match &outcome {
                        Outcome::Exit(0, o) => ("ok", o.stderr.clone()),
                        Outcome::Exit(1 | 2, o) => {
                            let e = String::from_utf8_lossy(&o.stderr);
                            let lines: Vec<&str> = e
                                .lines()
                                .filter(|l| {
                                    l.starts_with("quarry: ")
                                        && !l.starts_with("quarry: warning")
                                        && !l.starts_with("quarry: note")
                                })
                                .collect();
                            if lines.len() == 1 {
                                ("error", o.stderr.clone())
                            } else {
                                ("crash", o.stderr.clone())
                            }
                        }
                        Outcome::Exit(_, o) | Outcome::Signal(_, o) => ("crash", o.stderr.clone()),
                        Outcome::Hang(o) => ("hang", o.stderr.clone()),
                    };
                    let mut st = stats.lock().unwrap();
                    st.execs += 1;
                    *st.outcomes.entry(class).or_default() += 1;
                    for l in &log {
                        let mut w = l.split(' ');
                        *st.kinds
                            .entry(w.next().unwrap_or("").to_string())
                            .or_default() += 1;
                        st.mutated.insert(w.next().unwrap_or("").to_string());
                    }
                    let err = String::from_utf8_lossy(&stderr).to_string();
                    if class == "error" {
                        if let Some(l) = err.lines().find(|l| l.starts_with("quarry: call ")) {
                            if let Some(site) =
                                l.split('(').nth(1).and_then(|x| x.split(')').next())
                            {
                                st.error_sites.insert(site.to_string());
                            }
                            let why = l.split("): ").nth(1).unwrap_or(l);
                            st.error_shapes.insert(shape(why));
                        }
                    }
                    if class == "crash" || class == "hang" {
                        let keep = out_dir.join(format!("{class}-{seed:x}-{j}-{n}.qtrace"));
                        let _ = std::fs::copy(&p, &keep);
                        let _ = std::fs::write(
                            keep.with_extension("txt"),
                            format!("{outcome:?}\nmutations: {log:?}\n{err}"),
                        );
                        eprintln!("{class}: {} ({}) {log:?}", keep.display(), s.name);
                        st.found.push(keep);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let st = stats.lock().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let total: BTreeSet<&str> = seeds
        .iter()
        .flat_map(|s| {
            s.records.iter().filter_map(|r| match r {
                Record::Call(c) => Some(call_name(&s.table, c)),
                _ => None,
            })
        })
        .collect();
    println!(
        "fuzz_replay: {} execs in {secs:.0} s ({:.2} execs/s, {jobs} jobs, seed {seed:#x})",
        st.execs,
        st.execs as f64 / secs
    );
    println!("outcomes: {:?}", st.outcomes);
    println!("mutations: {:?}", st.kinds);
    println!(
        "coverage: {} of the corpus's {} commands mutated; clean errors named {} commands with {} distinct checks",
        st.mutated.len(),
        total.len(),
        st.error_sites.len(),
        st.error_shapes.len()
    );
    if args.iter().any(|a| a == "-v") {
        for s in &st.error_shapes {
            println!("  check: {s}");
        }
    }
    if !st.found.is_empty() {
        println!(
            "{} crash(es) or hang(s) saved in {}",
            st.found.len(),
            out_dir.display()
        );
        // `--report`: only report (long exploratory runs); the numbers and the saved crashers
        // come out either way.
        if !args.iter().any(|a| a == "--report") {
            std::process::exit(1);
        }
    }
}
