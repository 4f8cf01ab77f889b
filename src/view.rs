//! `quarry view` (the desktop viewer) and `quarry export` (the viewer's table as CSV, JSON or a
//! Perfetto/Chrome trace), both from the `viewer` crate.

use std::path::PathBuf;

use viewer::{ExportFormat, Tab, ViewArgs};

#[derive(clap::Args)]
pub struct Args {
    /// Trace (`.qtrace`) and/or results (`.qres`) files.
    files: Vec<PathBuf>,
    /// Render the window once into this PNG and exit (works under Xvfb).
    #[arg(long, value_name = "OUT.png")]
    screenshot: Option<PathBuf>,
    /// Tab shown first: queries, timestamps, counters or files.
    #[arg(long, value_parser = parse_tab)]
    tab: Option<Tab>,
}

fn parse_tab(s: &str) -> Result<Tab, String> {
    Tab::parse(s).ok_or_else(|| format!("unknown tab '{s}' (queries, timestamps, counters, files)"))
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

fn check_inputs(files: &[PathBuf]) -> anyhow::Result<()> {
    for f in files {
        if !f.is_file() {
            crate::bad_input!("{}: no such file", f.display())
        }
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    check_inputs(&args.files)?;
    viewer::run(ViewArgs {
        files: args.files,
        screenshot: args.screenshot,
        tab: args.tab,
        ..Default::default()
    })?;
    Ok(0)
}

pub fn run_export(args: ExportArgs) -> anyhow::Result<u8> {
    check_inputs(&args.files)?;
    // Unreadable or damaged inputs are bad input (2); the viewer reports them as plain errors.
    for f in &args.files {
        format::TraceReader::open(f)?;
    }
    viewer::export(&args.files, args.format.0, &args.output)?;
    crate::say!("wrote {}", args.output.display());
    Ok(0)
}
