//! `quarry view` (the desktop viewer) and `quarry export` (the viewer's table as CSV, JSON or a
//! Perfetto/Chrome trace), both from the `viewer` crate.

use std::path::PathBuf;

use format::record::FileKind;
use format::{check_results, Info, ResultsCheck, TraceReader};
use viewer::{ExportFormat, Tab, ViewArgs};

use crate::output;

#[derive(clap::Args)]
pub struct Args {
    /// Trace (`.qtrace`) and/or results (`.qres`) files.
    files: Vec<PathBuf>,
    /// Render the window once into this PNG and exit (works under Xvfb).
    #[arg(long, value_name = "OUT.png")]
    screenshot: Option<PathBuf>,
    /// Tab shown first: queries, timestamps, counters, compare or files.
    #[arg(long, value_parser = parse_tab)]
    tab: Option<Tab>,
    #[command(flatten)]
    salvage: output::Salvage,
}

fn parse_tab(s: &str) -> Result<Tab, String> {
    Tab::parse(s)
        .ok_or_else(|| format!("unknown tab '{s}' (queries, timestamps, counters, compare, files)"))
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Trace and/or results files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// csv, json or perfetto (Chrome trace JSON for ui.perfetto.dev).
    #[arg(long, value_parser = clap::value_parser!(ExportFormatArg))]
    format: ExportFormatArg,
    /// Output file.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
    #[command(flatten)]
    salvage: output::Salvage,
}

/// `ExportFormat` through its `FromStr`, so clap reports unknown formats as usage errors.
#[derive(Clone, Copy)]
struct ExportFormatArg(ExportFormat);

impl std::str::FromStr for ExportFormatArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse().map(ExportFormatArg)
    }
}

/// Opens every input (unreadable files are bad input), judges its damage as every command does,
/// and refuses results files of another trace than the one given.
fn check_inputs(files: &[PathBuf], salvage: output::Salvage) -> anyhow::Result<Vec<Info>> {
    let mut readers = Vec::new();
    for f in files {
        if !f.is_file() {
            crate::bad_input!("{}: no such file", f.display())
        }
        readers.push(TraceReader::open(f)?);
    }
    let mut infos = Vec::new();
    for r in &readers {
        let info = r.info();
        output::judge(&info, r.path(), &output::Met::default(), salvage)?;
        infos.push(info);
    }
    check_identities(&readers)?;
    Ok(infos)
}

/// Results files must be of the trace shown beside them: rows of another trace would appear
/// under this trace's calls. Results written before they named their trace are flagged.
fn check_identities(readers: &[TraceReader]) -> anyhow::Result<()> {
    let traces: Vec<&TraceReader> = readers
        .iter()
        .filter(|r| r.kind() == FileKind::Trace)
        .collect();
    if traces.is_empty() {
        return Ok(());
    }
    for res in readers.iter().filter(|r| r.kind() == FileKind::Results) {
        let checks: Vec<ResultsCheck> = traces.iter().map(|t| check_results(res, t)).collect();
        if checks.contains(&ResultsCheck::Same) {
            continue;
        }
        let names = traces
            .iter()
            .map(|t| t.path().display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if checks.contains(&ResultsCheck::Other) {
            crate::bad_input!(
                "{}: results of another trace, not of {names} (replay {names} for its results)",
                res.path().display()
            )
        }
        eprintln!(
            "quarry: warning: {}: names no trace (written before format 2.0, or its first block is lost); cannot check that it belongs to {names}",
            res.path().display()
        );
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    check_inputs(&args.files, args.salvage)?;
    viewer::run(ViewArgs {
        files: args.files,
        screenshot: args.screenshot,
        tab: args.tab,
        ..Default::default()
    })?;
    Ok(0)
}

pub fn run_export(args: ExportArgs) -> anyhow::Result<u8> {
    let infos = check_inputs(&args.files, args.salvage)?;
    let ds = viewer::load::load_paths(&args.files);
    if let Some((_, e)) = ds.failed.first() {
        // The message names the file.
        crate::bad_input!("{e}")
    }
    // Records that decode badly in blocks whose checksums hold: damage too (an export that
    // silently lacks rows would read as a complete one).
    for s in ds.trace.iter().chain(&ds.results) {
        let Some(e) = &s.error else { continue };
        let Some(i) = args.files.iter().position(|f| *f == s.path) else {
            continue;
        };
        if !infos[i].damage.is_empty() {
            // Already reported (and salvaged) above.
            continue;
        }
        let mut met = output::Met::default();
        met.text(&s.path, e);
        output::judge(&infos[i], &s.path, &met, args.salvage)?;
    }
    let rows: Vec<u32> = (0..ds.rows.len() as u32).collect();
    let (msg, failed) = viewer::app::export_view(&ds, &rows, args.format.0, &args.output);
    if failed {
        anyhow::bail!(msg);
    }
    crate::say!("wrote {}", args.output.display());
    Ok(0)
}
