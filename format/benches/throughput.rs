//! Write/read throughput and size of a synthetic command-stream-like trace, against plain
//! zstd level 3 over the same bincode bytes (measured in the same run).
//!
//! `cargo bench -p format` (1 GiB); `QUARRY_BENCH_MB=256` for a smaller run;
//! `QUARRY_BENCH_DIR` for where the file goes (default: the system temp dir).
//! `QUARRY_BENCH_WORKERS` compression threads (default: the writer's default).

use std::collections::HashSet;
use std::io::Write;
use std::time::Instant;

use format::record::*;
use format::{TraceReader, TraceWriter, WriterOptions};
use xxhash_rust::xxh3::xxh3_128;

/// Deterministic xorshift, so the baseline pass sees exactly the bytes the writer saw.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[allow(clippy::large_enum_variant)] // a benchmark pool, built once
enum Item {
    Rec(Record),
    /// A host write of `data` (inline or blob, decided by the writer).
    Mem {
        seq: u64,
        memory: u64,
        offset: u64,
        data: Vec<u8>,
    },
    EndFrame(u64),
}

/// Per-command parameter sizes, like a real mix: many small draw/bind calls, a few large ones.
const CMD_SIZES: [usize; 24] = [
    8, 12, 16, 16, 20, 24, 24, 28, 32, 32, 40, 48, 48, 56, 64, 72, 80, 96, 112, 128, 160, 200, 256,
    384,
];

fn params(rng: &mut Rng, cmd: usize, handles: &[u64]) -> Vec<u8> {
    let n = CMD_SIZES[cmd % CMD_SIZES.len()];
    let mut p = Vec::with_capacity(n);
    while p.len() < n {
        match rng.below(4) {
            // Handles repeat a lot in real streams.
            0 | 1 => p.extend_from_slice(
                &handles[rng.below(handles.len() as u64) as usize].to_le_bytes(),
            ),
            2 => p.extend_from_slice(&(rng.below(64) as u32).to_le_bytes()),
            _ => p.extend_from_slice(&((rng.below(1000) as f32) * 0.25).to_le_bytes()),
        }
    }
    p.truncate(n);
    p
}

fn payload(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    if rng.below(10) == 0 {
        // Already compressed data (e.g. BCn textures): incompressible.
        while v.len() < len {
            v.extend_from_slice(&rng.next().to_le_bytes());
        }
    } else {
        // Vertex-like: smooth floats with small noise, a different curve per payload.
        let phase = rng.below(10_000) as f32;
        let step = 0.001 + rng.below(100) as f32 * 0.0005;
        let mut i = 0u32;
        while v.len() < len {
            let x = ((phase + i as f32) * step).sin() * 100.0 + (rng.below(8) as f32) * 0.001;
            v.extend_from_slice(&x.to_le_bytes());
            i += 1;
        }
    }
    v.truncate(len);
    v
}

/// About `bytes` of encoded records and payloads.
fn pool(bytes: usize) -> Vec<Item> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let handles: Vec<u64> = (0..96).map(|i| 0x5555_0000_0000 + i * 0x40).collect();
    let mut items = vec![Item::Rec(Record::CommandTable(
        (0..64).map(|i| format!("vkCmdSynthetic{i}")).collect(),
    ))];
    let mut size = 0usize;
    let mut seq = 0u64;
    let mut host_ns = 1_000_000u64;
    let mut frame = 0u64;
    let mut recent: Vec<Vec<u8>> = Vec::new();
    // Records per frame, on average: a frame ends with probability frame_every / 100000.
    let frame_every =
        (100_000 / env_usize("QUARRY_BENCH_FRAME_RECORDS", 2000).clamp(1, 100_000)) as u64;
    while size < bytes {
        seq += 1;
        host_ns += 200 + rng.below(3000);
        let roll = rng.below(100_000);
        let thread = rng.below(4) as u32;
        if roll < 93_000 {
            // Zipf-like command choice: low ids dominate.
            let cmd = (rng.below(64) * rng.below(64) / 64) as u32;
            let p = params(&mut rng, cmd as usize, &handles);
            size += p.len() + 16;
            let result = if rng.below(50) == 0 { 1 } else { 0 };
            items.push(Item::Rec(Record::Call(Call {
                seq,
                thread,
                cmd,
                host_ns,
                result,
                params: p,
            })));
        } else if roll < 96_000 {
            let kind = match rng.below(3) {
                0 => QueryOpKind::Timestamp {
                    query: rng.below(64) as u32,
                    stage: 0x2000,
                    sync2: false,
                },
                1 => QueryOpKind::Begin {
                    query: rng.below(64) as u32,
                    flags: 0,
                    index: 0,
                },
                _ => QueryOpKind::End {
                    query: rng.below(64) as u32,
                    index: 0,
                },
            };
            size += 40;
            items.push(Item::Rec(Record::QueryOp(QueryOp {
                seq,
                command_buffer: handles[rng.below(8) as usize],
                pool: handles[90],
                kind,
                host_ns,
            })));
        } else if roll < 97_000 {
            let count = 1 + rng.below(16) as u32;
            let mut data = Vec::new();
            for i in 0..count {
                data.extend_from_slice(&(host_ns * 3 + i as u64 * 977).to_le_bytes());
            }
            size += data.len() + 48;
            items.push(Item::Rec(Record::QueryResults(QueryResults {
                seq,
                thread,
                device: handles[0],
                pool: handles[90],
                first: 0,
                count,
                stride: 8,
                flags: 1,
                result: 0,
                host_ns,
                data,
            })));
        } else if roll < 98_500 {
            size += 48;
            items.push(Item::Rec(Record::Submit(Submit {
                seq,
                queue: handles[1],
                queue_family: 0,
                command_buffers: vec![handles[rng.below(8) as usize]],
                host_ns,
                frame,
                counter_pass: None,
            })));
        } else if roll < 100_000 - frame_every {
            // Host writes: mostly small, some large; a few re-upload earlier contents.
            let len = if rng.below(40) == 0 {
                16 << 10 << rng.below(6)
            } else {
                64 << rng.below(6)
            };
            let data = if len > 8192 && !recent.is_empty() && rng.below(5) == 0 {
                recent[rng.below(recent.len() as u64) as usize].clone()
            } else {
                payload(&mut rng, len)
            };
            if data.len() > 8192 {
                recent.push(data.clone());
                if recent.len() > 16 {
                    recent.remove(0);
                }
            }
            size += data.len() + 32;
            items.push(Item::Mem {
                seq,
                memory: handles[50 + rng.below(8) as usize],
                offset: rng.below(1 << 20),
                data,
            });
        } else {
            size += 32;
            items.push(Item::Rec(Record::Frame(Frame {
                index: frame,
                last_seq: seq,
                host_ns,
                boundary: FrameBoundary::Present,
            })));
            items.push(Item::EndFrame(frame));
            frame += 1;
        }
    }
    items
}

/// CPU seconds of this process (all threads) or of the calling thread.
fn cpu_s(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Counts compressed bytes, so the baseline pays for no output buffer growth.
struct Counter(u64);
impl Write for Counter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Makes the payloads of pass `pass` differ from earlier passes, so that cycling the pool does
/// not turn into free deduplication.
fn salted(data: &[u8], pass: u64) -> Vec<u8> {
    let mut d = data.to_vec();
    let n = d.len().min(8);
    let salt = pass.to_le_bytes();
    for i in 0..n {
        d[i] ^= salt[i];
    }
    d
}

fn main() {
    let total_mb = env_usize("QUARRY_BENCH_MB", 1024);
    let total = total_mb << 20;
    let pool_bytes = total.min(96 << 20);
    let dir = std::env::var("QUARRY_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let path = dir.join(format!("quarry-bench-{}.qtrace", std::process::id()));
    let mut opts = WriterOptions::default();
    opts.workers = env_usize("QUARRY_BENCH_WORKERS", opts.workers);
    opts.block_size = env_usize("QUARRY_BENCH_BLOCK_KB", opts.block_size >> 10) << 10;
    opts.dictionary_bytes = env_usize("QUARRY_BENCH_DICT_KB", opts.dictionary_bytes >> 10) << 10;
    let threshold = opts.inline_threshold;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);

    eprintln!("generating a {} MiB pool...", pool_bytes >> 20);
    let items = pool(pool_bytes);
    let passes = total.div_ceil(pool_bytes) as u64;

    // ---- write ----------------------------------------------------------------------------
    let header = Header {
        kind: FileKind::Trace,
        writer: "format-bench".into(),
        created_unix_ns: 0,
        device: None,
        application: "bench".into(),
    };
    let t = Instant::now();
    let c = cpu_s(libc::CLOCK_PROCESS_CPUTIME_ID);
    let w = TraceWriter::create_with(&path, header, opts.clone()).expect("create");
    for pass in 0..passes {
        for it in &items {
            match it {
                Item::Rec(r) => w.write(r).expect("write"),
                Item::Mem {
                    seq,
                    memory,
                    offset,
                    data,
                } => {
                    let data = if data.len() >= threshold {
                        w.payload(&salted(data, pass))
                    } else {
                        w.payload(data)
                    };
                    let r = Record::MemoryWrite(MemoryWrite {
                        seq: *seq,
                        memory: *memory,
                        offset: *offset,
                        data: data.expect("payload"),
                    });
                    w.write(&r).expect("write");
                }
                Item::EndFrame(f) => w.end_frame(pass * 1_000_000 + f).expect("end_frame"),
            }
        }
    }
    let summary = w.finish().expect("finish");
    let write_s = t.elapsed().as_secs_f64();
    let write_cpu = cpu_s(libc::CLOCK_PROCESS_CPUTIME_ID) - c;

    // ---- read -----------------------------------------------------------------------------
    // Best of QUARRY_BENCH_READ_LOOPS passes: a shared machine only ever makes a pass slower.
    let (mut read_s, mut read_cpu) = (f64::MAX, f64::MAX);
    let mut records = 0u64;
    let mut blob_bytes = 0u64;
    for _ in 0..env_usize("QUARRY_BENCH_READ_LOOPS", 1).max(1) {
        let t = Instant::now();
        let c = cpu_s(libc::CLOCK_THREAD_CPUTIME_ID);
        let r = TraceReader::open(&path).expect("open");
        records = 0;
        blob_bytes = 0;
        for rec in r.records() {
            let rec = rec.expect("record");
            if let Record::MemoryWrite(MemoryWrite {
                data: p @ Payload::Blob { .. },
                ..
            }) = &rec
            {
                blob_bytes += r.payload_bytes(p).expect("blob").len() as u64;
            }
            records += 1;
        }
        read_s = read_s.min(t.elapsed().as_secs_f64());
        read_cpu = read_cpu.min(cpu_s(libc::CLOCK_THREAD_CPUTIME_ID) - c);
    }
    let r = TraceReader::open(&path).expect("open");
    let t = Instant::now();
    let mut raw = 0u64;
    for i in 0..r.blocks().len() {
        raw += r.block_data(i).expect("block").len() as u64;
    }
    let decompress_s = t.elapsed().as_secs_f64();
    let info = r.info();
    assert!(info.complete && records == summary.records);

    // ---- baseline: zstd -3 over the same bincode bytes (records as written, each distinct
    // blob once), in one stream on one thread -------------------------------------------------
    let t = Instant::now();
    let c = cpu_s(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut enc = zstd::stream::Encoder::new(Counter(0), 3).expect("zstd");
    let mut seen = HashSet::new();
    let mut next_blob = 0u64;
    let mut plain = 0u64;
    let cfg = bincode::config::standard();
    let mut buf = Vec::new();
    for pass in 0..passes {
        for it in &items {
            buf.clear();
            match it {
                Item::Rec(rec) => {
                    bincode::serde::encode_into_std_write(rec, &mut buf, cfg).expect("encode");
                }
                Item::Mem {
                    seq,
                    memory,
                    offset,
                    data,
                } => {
                    let payload = if data.len() >= threshold {
                        let d = salted(data, pass);
                        let h = xxh3_128(&d);
                        if seen.insert(h) {
                            enc.write_all(&d).expect("zstd");
                            plain += d.len() as u64;
                            next_blob += 1;
                        }
                        Payload::Blob {
                            id: BlobId(next_blob),
                            len: d.len() as u64,
                        }
                    } else {
                        Payload::Inline(data.clone())
                    };
                    let rec = Record::MemoryWrite(MemoryWrite {
                        seq: *seq,
                        memory: *memory,
                        offset: *offset,
                        data: payload,
                    });
                    bincode::serde::encode_into_std_write(&rec, &mut buf, cfg).expect("encode");
                }
                Item::EndFrame(_) => {}
            }
            enc.write_all(&buf).expect("zstd");
            plain += buf.len() as u64;
        }
    }
    let baseline = enc.finish().expect("zstd").0;
    let base_s = t.elapsed().as_secs_f64();
    let base_cpu = cpu_s(libc::CLOCK_THREAD_CPUTIME_ID) - c;
    let _ = std::fs::remove_file(&path);

    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    println!("quarry format benchmark: {} MiB of records+payloads, {} records, {} frames, {} blocks, {} blobs ({} dedup hits)",
        mb(summary.uncompressed_bytes) as u64, summary.records, summary.frames, summary.blocks, summary.blobs, summary.blob_dedup_hits);
    println!(
        "cores available: {cores}, compression workers: {}",
        opts.workers
    );
    println!(
        "block size: {} KiB, dictionary {} KiB, load average: {}",
        opts.block_size >> 10,
        opts.dictionary_bytes >> 10,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!("write: {:.2} s wall, {:.0} MiB/s of records; {:.2} CPU s over all threads, {:.0} MiB per CPU-second",
        write_s, mb(summary.uncompressed_bytes) / write_s, write_cpu, mb(summary.uncompressed_bytes) / write_cpu);
    println!("read:  {:.2} s wall, {:.0} MiB/s decompressed and decoded on one thread ({:.0} MiB/s per CPU-second; {:.0} MiB via blobs)",
        read_s, mb(info.uncompressed_bytes) / read_s, mb(info.uncompressed_bytes) / read_cpu, mb(blob_bytes));
    let (mut rec_stored, mut rec_raw, mut blob_stored, mut blob_raw) = (0u64, 0u64, 0u64, 0u64);
    for b in r.blocks() {
        if b.kind == 1 {
            rec_stored += b.stored_len;
            rec_raw += b.uncompressed_len;
        } else {
            blob_stored += b.stored_len;
            blob_raw += b.uncompressed_len;
        }
    }
    println!(
        "       record blocks {:.1} -> {:.1} MiB, blob blocks {:.1} -> {:.1} MiB",
        mb(rec_raw),
        mb(rec_stored),
        mb(blob_raw),
        mb(blob_stored)
    );
    println!(
        "       decompression alone: {:.0} MiB/s",
        mb(raw) / decompress_s
    );
    println!(
        "size:  file {:.1} MiB, ratio {:.2}",
        mb(summary.file_bytes),
        summary.uncompressed_bytes as f64 / summary.file_bytes as f64
    );
    println!("baseline zstd -3 (one stream, one thread): {:.1} MiB of {:.1} MiB bincode, ratio {:.2}, {:.0} MiB/s wall, {:.0} MiB per CPU-second (incl. encoding)",
        mb(baseline), mb(plain), plain as f64 / baseline as f64, mb(plain) / base_s, mb(plain) / base_cpu);
    println!(
        "file / baseline: {:.3} ({:+.1}%)",
        summary.file_bytes as f64 / baseline as f64,
        (summary.file_bytes as f64 / baseline as f64 - 1.0) * 100.0
    );
}
