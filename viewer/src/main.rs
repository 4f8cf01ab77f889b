//! `quarry-view`: the viewer on its own, for development (the `quarry view` subcommand is the
//! user-facing entry point).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use viewer::{Tab, ViewArgs};

const USAGE: &str = "usage:
  quarry-view [--screenshot OUT.png] [--tab queries|timestamps|counters|compare|files] [--browse DIR] FILES...
  quarry-view --export csv|json|perfetto OUT FILES...
  quarry-view --synth N OUT [--trace FRAMES] [--seed S] [--device NAME] [--mismatch-every K]
                            [--rp-counters SCALE]   (adds render-pass-scoped counters, replayed x SCALE)
  quarry-view --bench FILE
  quarry-view --bench-open FILE [RUNS]";

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quarry-view: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn value(args: &mut impl Iterator<Item = String>, flag: &str) -> anyhow::Result<String> {
    args.next()
        .with_context(|| format!("{flag} needs a value\n{USAGE}"))
}

fn real_main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut view = ViewArgs::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--screenshot" => view.screenshot = Some(value(&mut args, &a)?.into()),
            "--tab" => {
                let t = value(&mut args, &a)?;
                view.tab =
                    Some(Tab::parse(&t).with_context(|| format!("unknown tab '{t}'\n{USAGE}"))?);
            }
            "--browse" => view.browse = Some(value(&mut args, &a)?.into()),
            "--bench" => {
                let file = PathBuf::from(value(&mut args, &a)?);
                let r = viewer::bench::run(&file)?;
                println!("file: {} ({} queries)", file.display(), r.rows);
                println!(
                    "read records only (format crate): {} records in {:.1} ms",
                    r.records,
                    r.read_only.as_secs_f64() * 1e3
                );
                println!(
                    "open (read + decode + build rows): {:.1} ms",
                    r.open.as_secs_f64() * 1e3
                );
                println!(
                    "table view (filters, order): {:.1} ms",
                    r.table_view.as_secs_f64() * 1e3
                );
                println!(
                    "first frame (builds timeline lanes): {:.1} ms",
                    r.first_frame.as_secs_f64() * 1e3
                );
                println!("table scrolling:   {}", r.scroll);
                println!("timeline zoom/pan: {}", r.zoom);
                return Ok(());
            }
            "--bench-open" => {
                let file = PathBuf::from(value(&mut args, &a)?);
                let runs: usize = match args.next() {
                    Some(n) => n.parse().context("RUNS must be a number")?,
                    None => 5,
                };
                let t = viewer::bench::open_times(&file, runs)?;
                let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
                let opens: Vec<String> = t.iter().map(|x| format!("{:.0}", ms(x.1))).collect();
                let mut reads: Vec<f64> = t.iter().map(|x| ms(x.0)).collect();
                reads.sort_by(f64::total_cmp);
                println!(
                    "open {} runs (ms, sorted): {}; median {:.0} ms; format reader alone median {:.0} ms; {} decode threads",
                    t.len(),
                    opens.join(" "),
                    ms(t[t.len() / 2].1),
                    reads[reads.len() / 2],
                    viewer::load::decode_threads()
                );
                return Ok(());
            }
            "--export" => {
                let fmt: viewer::ExportFormat =
                    value(&mut args, &a)?.parse().map_err(anyhow::Error::msg)?;
                let out = PathBuf::from(value(&mut args, &a)?);
                let files: Vec<PathBuf> = args.map(PathBuf::from).collect();
                return viewer::export(&files, fmt, &out);
            }
            "--synth" => return synth(args),
            f if f.starts_with('-') => bail!("unknown option '{f}'\n{USAGE}"),
            f => view.files.push(f.into()),
        }
    }
    viewer::run(view)
}

fn synth(mut args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let n: usize = value(&mut args, "--synth")?
        .parse()
        .context("N must be a number")?;
    let out = PathBuf::from(value(&mut args, "--synth")?);
    let (mut trace, mut seed, mut device, mut every) =
        (None, 1u64, "llvmpipe (replay)".to_owned(), 997u64);
    let mut rp_scale = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--trace" => {
                trace = Some(
                    value(&mut args, &a)?
                        .parse::<u64>()
                        .context("FRAMES must be a number")?,
                )
            }
            "--seed" => {
                seed = value(&mut args, &a)?
                    .parse()
                    .context("seed must be a number")?
            }
            "--device" => device = value(&mut args, &a)?,
            "--mismatch-every" => {
                every = value(&mut args, &a)?
                    .parse()
                    .context("K must be a number")?
            }
            "--rp-counters" => {
                rp_scale = Some(
                    value(&mut args, &a)?
                        .parse::<f64>()
                        .context("SCALE must be a number")?,
                )
            }
            other => bail!("unknown option '{other}'\n{USAGE}"),
        }
    }
    let (header, mut records) = match trace {
        Some(frames) => viewer::synth::trace(frames),
        None => viewer::synth::results(n, seed, &device, every),
    };
    if let Some(scale) = rp_scale {
        records.extend(viewer::synth::render_pass_counters(4, scale));
    }
    let w = format::TraceWriter::create(&out, header)
        .with_context(|| format!("creating {}", out.display()))?;
    for r in &records {
        w.write(r)?;
    }
    w.finish()?;
    println!("wrote {} records to {}", records.len(), out.display());
    Ok(())
}
