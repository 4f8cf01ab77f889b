//! One damage policy across `info`, `dump`, `export` and `view`, through the built binary:
//! damage is one `quarry:` line and exit 2 unless `--salvage`; a trace whose writer stopped
//! between blocks is exit 0 with a note; results of another trace are refused. The damaged
//! files are forged with valid checksums by the format tests' helper.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use format::forge::Forge;
use format::layout::BlockKind;
use format::record::*;
use format::{TraceReader, TraceWriter, WriterOptions};

fn quarry(args: &[&str]) -> Output {
    Command::new(quarry_tests::quarry_exe())
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn header(kind: FileKind) -> Header {
    Header {
        kind,
        writer: "damage-cli".into(),
        created_unix_ns: 1_700_000_000_000_000_000,
        device: None,
        application: "damage".into(),
    }
}

fn opts() -> WriterOptions {
    WriterOptions {
        block_size: 512,
        dictionary_bytes: 0,
        ..Default::default()
    }
}

/// Three frames of calls, a query pool; `salt` makes traces of different content.
fn write_trace(path: &Path, salt: u64) {
    let w = TraceWriter::create_with(path, header(FileKind::Trace), opts()).unwrap();
    w.write(&Record::CommandTable(vec!["vkCmdDraw".into()]))
        .unwrap();
    let mut seq = 0;
    for f in 0..3u64 {
        for _ in 0..40 {
            w.write(&Record::Call(Call {
                seq,
                thread: 0,
                cmd: 0,
                host_ns: seq + salt,
                result: 0,
                params: vec![7; 12],
            }))
            .unwrap();
            seq += 1;
        }
        w.write(&Record::Frame(Frame {
            index: f,
            last_seq: seq - 1,
            host_ns: seq,
            boundary: FrameBoundary::Present,
        }))
        .unwrap();
        w.end_frame(f).unwrap();
    }
    w.finish().unwrap();
}

fn values(v: u64) -> QueryValues {
    QueryValues {
        values: vec![v],
        available: true,
        result: 0,
        host_ns: 5,
    }
}

/// 200 query rows, naming `trace` (when given) as the replayer does.
fn write_results(path: &Path, trace: Option<&Path>) {
    let w = TraceWriter::create_with(path, header(FileKind::Results), opts()).unwrap();
    if let Some(t) = trace {
        w.write(&TraceReader::open(t).unwrap().identity_record())
            .unwrap();
    }
    for q in 0..200u32 {
        w.write(&Record::QueryResult(QueryResult {
            pool: 0x10,
            query: q,
            query_type: 0,
            pipeline_statistics: 0,
            frame: u64::from(q % 3),
            queue: 1,
            command_buffer: 2,
            loop_index: 0,
            pass: 0,
            seq: u64::from(q),
            flags: 1,
            captured: Some(values(u64::from(q))),
            replayed: Some(values(u64::from(q))),
            submit_ns: 1,
            available_ns: 2,
            captured_gpu_ns: None,
            replayed_gpu_ns: None,
            begin: None,
            device: None,
        }))
        .unwrap();
    }
    w.finish().unwrap();
}

struct Files {
    dir: tempfile::TempDir,
    trace: PathBuf,
    results: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.qtrace");
        let results = dir.path().join("t.qres");
        write_trace(&trace, 0);
        write_results(&results, Some(&trace));
        Files {
            dir,
            trace,
            results,
        }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn out(&self) -> String {
        self.dir.path().join("out.csv").display().to_string()
    }
}

/// Every reading command on `file` (a results file comes with its trace for export): exit 2
/// with one `quarry:` line holding `expect`, and exit 0 with one warning under `--salvage`.
fn assert_refused_unless_salvaged(f: &Files, file: &Path, expect: &str) {
    let p = file.to_str().unwrap();
    let out = f.out();
    let mut export = vec!["export", "--format", "csv", "-o", &out];
    let trace = f.trace.display().to_string();
    if p != trace {
        export.push(&trace);
    }
    export.push(p);
    for cmd in [vec!["info", p], vec!["dump", p], export] {
        let o = quarry(&cmd);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{cmd:?}: {err}");
        assert!(err.starts_with(&format!("quarry: {p}: offset ")), "{err}");
        assert!(err.contains(expect), "{cmd:?}: {err}");
        assert!(err.contains("--salvage"), "{err}");
        let mut salvaged = cmd.clone();
        salvaged.push("--salvage");
        let o = quarry(&salvaged);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{salvaged:?}: {err}");
        assert!(err.starts_with("quarry: warning: "), "{err}");
        assert!(err.contains(expect), "{err}");
    }
}

#[test]
fn intact_files_exit_0_quietly() {
    let f = Files::new();
    let (t, r) = (f.trace.to_str().unwrap(), f.results.to_str().unwrap());
    let out = f.out();
    for cmd in [
        vec!["info", t],
        vec!["dump", r],
        vec!["export", "--format", "csv", "-o", &out, t, r],
    ] {
        let o = quarry(&cmd);
        assert_eq!(o.status.code(), Some(0), "{cmd:?}: {}", stderr(&o));
        assert!(stderr(&o).is_empty(), "{cmd:?}: {}", stderr(&o));
    }
    let csv = std::fs::read_to_string(&out).unwrap();
    assert_eq!(csv.lines().count(), 201, "{csv}");
}

#[test]
fn a_trace_recovered_whole_after_a_kill_exits_0_with_a_note() {
    let f = Files::new();
    let killed = f.write(
        "killed.qtrace",
        &Forge::parse(&std::fs::read(&f.trace).unwrap()).bytes(),
    );
    let p = killed.to_str().unwrap();
    for cmd in [vec!["info", p], vec!["dump", p]] {
        let o = quarry(&cmd);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{cmd:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("quarry: note: "), "{err}");
        assert!(err.contains("the writer did not finish"), "{err}");
    }
    let o = quarry(&["info", p, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["recovered"], true);
    assert_eq!(v["lost_bytes"], 0);
}

#[test]
fn forged_blocks_exit_2_unless_salvaged() {
    let f = Files::new();
    let bytes = std::fs::read(&f.trace).unwrap();
    let base = Forge::parse(&bytes);
    let recs = base.of_kind(BlockKind::Records);

    let mut dup = base.clone();
    dup.duplicate(recs[1]);
    let p = f.write("dup.qtrace", &dup.bytes_with_index(|_| {}));
    assert_refused_unless_salvaged(&f, &p, "repeats the block at offset");

    let mut del = base.clone();
    del.delete(recs[2]);
    let p = f.write("del.qtrace", &del.bytes());
    assert_refused_unless_salvaged(&f, &p, "is missing");

    let mut swap = base.clone();
    swap.swap(recs[1], recs[2]);
    let p = f.write("swap.qtrace", &swap.bytes());
    assert_refused_unless_salvaged(&f, &p, "out of order");

    let mut huge = base.clone();
    huge.edit(recs[0], |h| h.uncompressed_len = u64::from(u32::MAX));
    let p = f.write("huge.qtrace", &huge.bytes_with_index(|_| {}));
    assert_refused_unless_salvaged(&f, &p, "more than the format's limit");

    let p = f.write(
        "index.qtrace",
        &base.bytes_with_index(|ix| ix.blocks[recs[3]].kind = 99),
    );
    assert_refused_unless_salvaged(&f, &p, "the footer index disagrees with the file");
    // Salvaged, the hidden block is read all the same: no frame goes missing.
    let o = quarry(&["dump", p.to_str().unwrap(), "--salvage"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 124);
}

/// One flipped bit in a results file: export no longer writes a short CSV with exit 0.
#[test]
fn a_damaged_results_file_fails_export() {
    let f = Files::new();
    let mut bytes = std::fs::read(&f.results).unwrap();
    let first = TraceReader::open(&f.results).unwrap().blocks()[0];
    bytes[first.offset as usize + 60] ^= 0x04;
    let p = f.write("flip.qres", &bytes);
    assert_refused_unless_salvaged(&f, &p, "checksum");
}

/// Records that fail to decode in a block whose checksums hold (forged): damage too.
#[test]
fn forged_records_fail_export() {
    let f = Files::new();
    let mut forge = Forge::parse(&std::fs::read(&f.results).unwrap());
    let i = forge.of_kind(BlockKind::Records)[1];
    // One record: variant QueryResult, then bytes that are no QueryResult.
    forge.set_payload(i, vec![3, 15, 0xff, 0xff], 1);
    let p = f.write("forged.qres", &forge.bytes_with_index(|_| {}));
    let out = f.out();
    let args = ["export", "--format", "csv", "-o", &out];
    let o = quarry(&[&args[..], &[f.trace.to_str().unwrap(), p.to_str().unwrap()]].concat());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--salvage"), "{err}");
}

#[test]
fn results_of_another_trace_are_refused() {
    let f = Files::new();
    let other = f.dir.path().join("other.qtrace");
    write_trace(&other, 1000);
    let (o_path, r) = (other.to_str().unwrap(), f.results.to_str().unwrap());
    let out = f.out();
    for cmd in [
        vec!["export", "--format", "csv", "-o", &out, o_path, r],
        vec!["view", o_path, r],
    ] {
        let o = quarry(&cmd);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("results of another trace"), "{err}");
    }
    // Results written before they named their trace: shown, with a warning.
    let old = f.dir.path().join("old.qres");
    write_results(&old, None);
    let o = quarry(&[
        "export",
        "--format",
        "csv",
        "-o",
        &out,
        o_path,
        old.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("cannot check that it belongs to"), "{err}");
}
