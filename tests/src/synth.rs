//! Synthetic traces written call by call from ash structs through the generated encoders, for
//! replay tests that need a trace no program makes.

use std::path::Path;

use format::record::{self, FileKind, Header, Record};
use format::TraceWriter;
use vkstream::Encoder;

/// The records of one synthetic trace, its command table first.
pub struct Records {
    pub records: Vec<Record>,
    pub seq: u64,
    application: &'static str,
}

impl Records {
    pub fn new(application: &'static str) -> Self {
        let names = vkstream::COMMANDS.iter().map(|s| s.to_string()).collect();
        Records {
            records: vec![Record::CommandTable(names)],
            seq: 0,
            application,
        }
    }

    /// Appends call `name` (captured result VK_SUCCESS) with the parameters `encode` writes;
    /// gives its seq.
    pub fn call(&mut self, name: &str, encode: impl FnOnce(&mut Encoder)) -> u64 {
        let mut e = Encoder::new();
        encode(&mut e);
        self.seq += 1;
        self.records.push(Record::Call(record::Call {
            seq: self.seq,
            thread: 1,
            cmd: vkstream::command_id(name).expect("known command"),
            host_ns: 1_000_000 * self.seq,
            result: 0,
            params: e.into_bytes(),
        }));
        self.seq
    }

    pub fn write(&self, path: &Path) {
        let w = TraceWriter::create(
            path,
            Header {
                kind: FileKind::Trace,
                writer: "replay test".into(),
                created_unix_ns: 0,
                device: None,
                application: self.application.into(),
            },
        )
        .unwrap();
        for r in &self.records {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
    }
}
