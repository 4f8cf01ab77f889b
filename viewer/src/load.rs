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
    load_paths_with(paths, decode_threads())
}

/// [`load_paths`] with `threads` decoding workers (0: decode on this thread).
pub fn load_paths_with(paths: &[PathBuf], threads: usize) -> Dataset {
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
    let traces = readers
        .iter()
        .filter(|r| r.kind() == FileKind::Trace)
        .count();
    for r in &readers {
        // Results rows of another trace would show under this trace's calls: left out.
        let checks = (r.kind() == FileKind::Results).then(|| {
            readers[..traces]
                .iter()
                .map(|t| format::check_results(r, t))
                .collect::<Vec<_>>()
        });
        let note = match checks {
            Some(c) if !c.is_empty() && !c.contains(&format::ResultsCheck::Same) => {
                if c.contains(&format::ResultsCheck::Other) {
                    b.failed(
                        r.path(),
                        format!(
                            "{}: results of another trace; not shown",
                            r.path().display()
                        ),
                    );
                    continue;
                }
                Some("names no trace (written before format 2.0, or its first block is lost): cannot check that it belongs to this trace".to_string())
            }
            _ => None,
        };
        stream(&mut b, r, threads, note);
    }
    b.finish()
}

/// Threads decoding blocks while the calling thread builds rows; 0 decodes on the building
/// thread. Decoding on workers costs ~15 % more CPU in all (records cross threads), so it only
/// pays when a core is idle: on a machine whose 1-minute load average (Linux) leaves no core
/// free, and on one core, blocks decode on the building thread. Building takes a little over
/// half the work, so more than two workers never help. `QUARRY_VIEW_THREADS=N` overrides.
pub fn decode_threads() -> usize {
    if let Some(n) = std::env::var("QUARRY_VIEW_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        return 0;
    }
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    match load {
        Some(l) if l > cores as f64 - 1.0 => 0,
        _ => (cores - 1).min(2),
    }
}

fn stream(b: &mut DatasetBuilder, r: &TraceReader, threads: usize, note: Option<String>) {
    b.begin_file(r.path(), r.header().clone());
    if let Some(n) = note {
        b.note_current(n);
    }
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
    let mut take = |rec: Result<format::record::Record, format::FormatError>| match rec {
        Ok(rec) => b.record(rec),
        Err(e) => {
            errors += 1;
            if errors <= MAX_BLOCK_ERRORS {
                b.note_current(format!("skipped damaged data: {e}"));
            }
            first_error.get_or_insert_with(|| e.to_string());
        }
    };
    match threads {
        // On this thread: records stream straight from the decoder (no block-sized batches).
        0 => r.records().for_each(&mut take),
        n => r.records_parallel(n, |block| block.records.into_iter().for_each(&mut take)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Results rows of another trace are not shown under this one; results naming no trace
    /// are shown with a note.
    #[test]
    fn results_of_another_trace_are_left_out() {
        use format::record::{FileKind, Header, Record};
        let dir = tempfile::tempdir().unwrap();
        let trace = |name: &str, seq: u64| {
            let p = dir.path().join(name);
            let h = Header {
                kind: FileKind::Trace,
                writer: "t".into(),
                created_unix_ns: 0,
                device: None,
                application: "a".into(),
            };
            let w = format::TraceWriter::create(&p, h).unwrap();
            w.write(&Record::Frame(format::record::Frame {
                index: 0,
                last_seq: seq,
                host_ns: 0,
                boundary: format::record::FrameBoundary::Present,
            }))
            .unwrap();
            w.finish().unwrap();
            p
        };
        let (mine, other) = (trace("mine.qtrace", 1), trace("other.qtrace", 2));
        let results = |name: &str, of: Option<&Path>| {
            let (h, recs) = crate::synth::results(10, 1, "gpu", 0);
            let p = dir.path().join(name);
            let w = format::TraceWriter::create(&p, h).unwrap();
            if let Some(t) = of {
                w.write(&TraceReader::open(t).unwrap().identity_record())
                    .unwrap();
            }
            for r in &recs {
                w.write(r).unwrap();
            }
            w.finish().unwrap();
            p
        };
        let res = results("r.qres", Some(&mine));
        let ds = load_paths_with(&[mine.clone(), res.clone()], 0);
        assert!(ds.failed.is_empty(), "{:?}", ds.failed);
        assert_eq!(ds.results.len(), 1);
        let ds = load_paths_with(&[other.clone(), res.clone()], 0);
        assert_eq!(ds.results.len(), 0);
        assert!(ds.failed[0].1.contains("results of another trace"));
        let old = results("old.qres", None);
        let ds = load_paths_with(&[mine, old], 0);
        assert_eq!(ds.results.len(), 1);
        assert!(ds.results[0]
            .notes
            .iter()
            .any(|n| n.contains("names no trace")));
    }

    #[test]
    fn worker_threads_build_the_same_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (name, dev, every) in [("a.qres", "gpu-a", 7), ("b.qres", "gpu-b", 0)] {
            let (h, mut recs) = crate::synth::results(20_000, 9, dev, every);
            recs.extend(crate::synth::render_pass_counters(3, 1.5));
            let p = dir.path().join(name);
            let opts = format::WriterOptions {
                block_size: 16 << 10,
                ..Default::default()
            };
            let w = format::TraceWriter::create_with(&p, h, opts).unwrap();
            for r in &recs {
                w.write(r).unwrap();
            }
            w.finish().unwrap();
            paths.push(p);
        }
        let one = load_paths_with(&paths, 0);
        assert_eq!(one.rows.len(), 20_000);
        assert!(one.failed.is_empty());
        for threads in [1, 2, 3] {
            let par = load_paths_with(&paths, threads);
            assert_eq!(par.rows, one.rows, "threads {threads}");
            assert_eq!(par.replayed, one.replayed);
            assert_eq!(par.mismatch, one.mismatch);
            assert_eq!(par.counters, one.counters);
        }
    }
}
