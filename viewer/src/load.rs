//! Reading files from disk into a [`Dataset`] through the format crate's reader.

use std::path::{Path, PathBuf};

use format::record::FileKind;
use format::TraceReader;

use crate::data::{Dataset, DatasetBuilder};

/// Damaged blocks are reported, not fatal; after this many the rest are only counted.
const MAX_BLOCK_ERRORS: usize = 20;

/// Opens every path (traces first, so results rows can borrow their timeline) and builds one
/// dataset. A file that cannot be opened is listed in `Dataset::failed`; the others still load.
pub fn load_paths(paths: &[PathBuf]) -> Dataset {
    let mut b = DatasetBuilder::default();
    let mut readers = Vec::new();
    for p in paths {
        match TraceReader::open(p) {
            Ok(r) => readers.push(r),
            Err(e) => b.failed(p, e.to_string()),
        }
    }
    readers.sort_by_key(|r| match r.kind() {
        FileKind::Trace => 0,
        FileKind::Results => 1,
    });
    for r in &readers {
        stream(&mut b, r);
    }
    b.finish()
}

/// Worker threads decoding blocks while the calling thread builds rows: one per core (the
/// builder shares them), at least one.
/// `QUARRY_VIEW_THREADS=N` overrides (1 decodes on the building thread, for comparisons).
pub fn decode_threads() -> usize {
    std::env::var("QUARRY_VIEW_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

fn stream(b: &mut DatasetBuilder, r: &TraceReader) {
    b.begin_file(r.path(), r.header().clone());
    if let Some(counts) = r.footer_record_counts() {
        let n = |name: &str| {
            counts
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, n)| *n as usize)
                .sum::<usize>()
        };
        b.reserve(n("QueryResult"), n("CounterValue"));
    }
    let mut errors = 0usize;
    let mut first_error = None;
    r.records_parallel(decode_threads(), |block| {
        for rec in block.records {
            match rec {
                Ok(rec) => b.record(rec),
                Err(e) => {
                    errors += 1;
                    if errors <= MAX_BLOCK_ERRORS {
                        b.note_current(format!("skipped damaged data: {e}"));
                    }
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
    });
    if r.lost_bytes() > 0 {
        b.note_current(format!(
            "{} bytes at the end of the file could not be read (unfinished write?)",
            r.lost_bytes()
        ));
    }
    let error = first_error.map(|e| {
        if errors > 1 {
            format!("{errors} damaged blocks; first: {e}")
        } else {
            e
        }
    });
    b.end_file(error);
}

/// Loads one file, failing (instead of listing it in `failed`) when it cannot be opened.
pub fn load_one(path: &Path) -> anyhow::Result<Dataset> {
    let ds = load_paths(&[path.to_path_buf()]);
    if let Some((_, e)) = ds.failed.first() {
        // The format error already names the file.
        anyhow::bail!("{e}");
    }
    Ok(ds)
}
