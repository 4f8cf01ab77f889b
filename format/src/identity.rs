//! Which trace a results file belongs to (FORMAT.md "Trace identity").

use xxhash_rust::xxh3::Xxh3;

use crate::layout::{BLOCK_HEADER_LEN, PREFIX_LEN};
use crate::record::{FileKind, Record, TraceIdentity};
use crate::TraceReader;

/// A results file holds its `TraceIdentity` first; a few records in, it has none.
const LOOK_AHEAD: usize = 16;

impl TraceReader {
    /// The trace's identity: xxh3-128 of prefix bytes 0..24, the header bytes and the header of
    /// every block read (not the index), in block order. Reads no payload: each block header
    /// holds its payload's checksum.
    pub fn identity(&self) -> [u8; 16] {
        let bytes = self.raw();
        let mut h = Xxh3::new();
        h.update(&bytes[..24]);
        h.update(&bytes[PREFIX_LEN..self.body_start() as usize]);
        for b in self.blocks() {
            let at = b.offset as usize;
            // Every block in the list was checked to lie within the file.
            if let Some(header) = bytes.get(at..at + BLOCK_HEADER_LEN) {
                h.update(header);
            }
        }
        h.digest128().to_le_bytes()
    }

    /// The record a results file written from this trace starts with.
    pub fn identity_record(&self) -> Record {
        Record::TraceIdentity(TraceIdentity {
            trace_id: self.identity(),
        })
    }

    /// The identity of the trace this results file was replayed from, if it records one
    /// (results written before format 2.0 do not).
    pub fn recorded_trace(&self) -> Option<[u8; 16]> {
        self.records().take(LOOK_AHEAD).find_map(|r| match r {
            Ok(Record::TraceIdentity(t)) => Some(t.trace_id),
            _ => None,
        })
    }
}

/// Whether a results file was replayed from a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultsCheck {
    /// It names this trace.
    Same,
    /// It names another trace: its rows must not be shown as this trace's.
    Other,
    /// It names no trace (written before format 2.0, or its first block is lost): cannot tell.
    Unknown,
}

/// Checks `results` against `trace` (either argument order is accepted).
pub fn check_results(results: &TraceReader, trace: &TraceReader) -> ResultsCheck {
    let (results, trace) = match (results.kind(), trace.kind()) {
        (FileKind::Trace, FileKind::Results) => (trace, results),
        _ => (results, trace),
    };
    match results.recorded_trace() {
        Some(id) if id == trace.identity() => ResultsCheck::Same,
        Some(_) => ResultsCheck::Other,
        None => ResultsCheck::Unknown,
    }
}
