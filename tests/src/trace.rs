//! Reading a trace back and checking what every trace must hold.

use format::record::Record;
use format::{Info, TraceReader};
use std::path::Path;

/// A trace read whole: its summary, its records, and the reader for blob payloads.
pub struct Trace {
    pub info: Info,
    pub records: Vec<Record>,
    pub reader: TraceReader,
}

/// Reads `path` whole; records that do not decode are left out ([`Trace::check_structure`] and the
/// counts show what is missing).
pub fn read_trace(path: &Path) -> Trace {
    let reader = TraceReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let info = reader.info();
    let records: Vec<Record> = reader.records().filter_map(|r| r.ok()).collect();
    Trace {
        info,
        records,
        reader,
    }
}

impl Trace {
    /// The `QueryResult` records of a results file, in order.
    pub fn query_results(self) -> Vec<format::record::QueryResult> {
        self.records
            .into_iter()
            .filter_map(|r| match r {
                Record::QueryResult(q) => Some(q),
                _ => None,
            })
            .collect()
    }

    /// Records of type `name` (`Frame`, `Submit`, ...).
    pub fn count(&self, name: &str) -> usize {
        self.records
            .iter()
            .filter(|r| r.type_name() == name)
            .count()
    }

    /// `Call` records of `command`.
    pub fn calls_of(&self, command: &str) -> usize {
        let id = vkstream::command_id(command).unwrap();
        self.records
            .iter()
            .filter(|r| matches!(r, Record::Call(c) if c.cmd == id))
            .count()
    }

    /// Checks the invariants every trace has: the command table first, then calls with strictly
    /// increasing seq in file order, every call's parameters decodable.
    pub fn check_structure(&self) {
        match self.records.first() {
            Some(Record::CommandTable(t)) => {
                assert_eq!(t.len(), vkstream::COMMANDS.len());
                assert_eq!(t[0], vkstream::COMMANDS[0]);
            }
            other => panic!("first record is not the command table: {other:?}"),
        }
        let mut last: Option<u64> = None;
        let mut undecodable = Vec::new();
        for r in &self.records {
            let seq = match r {
                Record::Call(c) => {
                    if let Err(e) = vkstream::decode_call(c.cmd, &c.params) {
                        if undecodable.len() < 5 {
                            undecodable
                                .push(format!("{}: {e}", vkstream::COMMANDS[c.cmd as usize]));
                        }
                    }
                    Some(c.seq)
                }
                Record::MemoryWrite(m) => Some(m.seq),
                _ => None,
            };
            if let Some(s) = seq {
                if let Some(l) = last {
                    assert!(s > l, "seq {s} after {l}: file order must be seq order");
                }
                last = Some(s);
            }
        }
        assert!(
            undecodable.is_empty(),
            "calls that do not decode: {undecodable:?}"
        );
    }
}
