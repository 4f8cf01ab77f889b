//! The writer's background threads: the ticker that seals an idle open block, the compression
//! workers, and the output thread that writes finished blocks in seal order and then the footer.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

use super::encode::CALL_VARIANT;
use super::{lock, BlockJob, Done, DoneBlock, Job, Shared, WriteSummary, DICT_ID, TINY_BLOCK};
use crate::error::{FormatError, Problem};
use crate::index::{BlockEntry, FooterIndex};
use crate::layout::*;

pub(super) fn ticker_loop(sh: &Shared) {
    // Sealing at half the interval, polled every quarter, keeps a block's age at the file
    // under the interval including compression time.
    let interval = sh.opts.seal_interval.max(Duration::from_millis(4));
    let poll = interval / 4;
    let mut st = lock(&sh.state);
    loop {
        if st.stop {
            return;
        }
        let (guard, _) = sh
            .ticker_cond
            .wait_timeout(st, poll)
            .unwrap_or_else(|e| e.into_inner());
        st = guard;
        if st.stop {
            return;
        }
        drop(st);
        {
            let mut open = sh.open.lock();
            // An error is stored in the pipeline state and reported by the next call.
            if open.opened.is_some_and(|t| t.elapsed() >= interval / 2) {
                let _ = sh.seal(&mut open, false);
            }
        }
        let _ = sh.drain();
        st = lock(&sh.state);
    }
}

pub(super) fn compress_loop(
    sh: &Shared,
    rx: &Mutex<Receiver<Job>>,
    tx: &Sender<Result<Done, FormatError>>,
) {
    let mut comp = zstd::bulk::Compressor::new(sh.opts.level).ok();
    // With the dictionary: [at `level`, at `dict_level` for tiny blocks], made at first use.
    let mut with_dict: [Option<zstd::bulk::Compressor<'static>>; 2] = [None, None];
    loop {
        let job = match lock(rx).recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        let mut blocks = Vec::with_capacity(job.blocks.len());
        let mut failed = None;
        for block in job.blocks {
            let done = match &block.dict {
                Some(d) => {
                    let tiny = block.data.len() < TINY_BLOCK;
                    let slot = &mut with_dict[tiny as usize];
                    if slot.is_none() {
                        let level = if tiny {
                            sh.opts.dict_level
                        } else {
                            sh.opts.level
                        };
                        *slot = zstd::bulk::Compressor::with_dictionary(level, d).ok();
                    }
                    match slot.as_mut() {
                        Some(c) => compress_block(sh, Some((c, DICT_ID)), block),
                        None => compress_block(sh, comp.as_mut().map(|c| (c, 0)), block),
                    }
                }
                None => compress_block(sh, comp.as_mut().map(|c| (c, 0)), block),
            };
            match done {
                Ok(d) => blocks.push(d),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let done = match failed {
            Some(e) => Err(e),
            None => Ok(Done {
                seq: job.seq,
                blocks,
                input_len: job.bytes,
            }),
        };
        if tx.send(done).is_err() {
            return;
        }
    }
}

fn compress_block(
    sh: &Shared,
    comp: Option<(&mut zstd::bulk::Compressor<'static>, u16)>,
    job: BlockJob,
) -> Result<DoneBlock, FormatError> {
    let input_len = job.data.len();
    let mut codec = CODEC_STORED;
    let mut dict = 0;
    let mut stored = Vec::new();
    if let Some((comp, dict_id)) = comp {
        let bound = zstd::zstd_safe::compress_bound(input_len);
        if input_len <= sh.opts.block_size * 2 {
            stored = sh.take_buf(bound);
        }
        if stored.capacity() < bound && stored.try_reserve_exact(bound).is_err() {
            return Err(FormatError::new(&sh.path, 0, Problem::Alloc(bound as u64)));
        }
        match comp.compress_to_buffer(&job.data, &mut stored) {
            Ok(n) if n < input_len => {
                (codec, dict) = if dict_id == 0 {
                    (CODEC_ZSTD, 0)
                } else {
                    (CODEC_ZSTD_DICT, dict_id)
                };
            }
            Ok(_) => {}
            Err(e) => return Err(FormatError::io(&sh.path, 0, "zstd compression failed", e)),
        }
    }
    if codec == CODEC_STORED {
        sh.give_buf(std::mem::replace(&mut stored, job.data));
    } else {
        sh.give_buf(job.data);
    }
    let header = BlockHeader {
        kind: job.kind,
        codec,
        dict,
        records: job.records,
        aux: job.aux,
        uncompressed_len: input_len as u64,
        stored_len: stored.len() as u64,
        payload_checksum: payload_checksum(&stored),
        // Numbered by the output thread, in file order.
        seq: 0,
    };
    Ok(DoneBlock { header, stored })
}

/// Staged output above this is written before the next block is added.
const OUT_STAGE: usize = 1 << 20;

/// The output thread's side of the file: blocks in seal order, staged so that a batch of small
/// blocks goes out in one write.
struct Output {
    file: Box<dyn Write + Send>,
    offset: u64,
    stage: Vec<u8>,
    /// Headers of the blocks in `stage`, indexed once they are in the file.
    staged: Vec<BlockHeader>,
    index: FooterIndex,
    summary: WriteSummary,
    broken: bool,
}

impl Output {
    /// Adds one block, writing what is staged first when the stage would grow too large; a
    /// large payload goes out from its own buffer rather than through the stage.
    fn add(&mut self, sh: &Shared, b: &DoneBlock) {
        let big = b.stored.len() >= OUT_STAGE / 4;
        if !self.stage.is_empty() && (big || self.stage.len() + b.stored.len() > OUT_STAGE) {
            self.write(sh, &[]);
        }
        if self.broken {
            return;
        }
        let mut header = b.header;
        header.seq = (self.index.blocks.len() + self.staged.len()) as u32;
        self.stage.extend_from_slice(&header.encode());
        self.staged.push(header);
        if big {
            self.write(sh, &b.stored);
        } else {
            self.stage.extend_from_slice(&b.stored);
        }
    }

    /// Writes the stage (then `tail`, the last staged block's payload) and indexes its blocks;
    /// on failure records the error and stops writing (the blocks are not indexed).
    fn write(&mut self, sh: &Shared, tail: &[u8]) {
        if self.broken || self.staged.is_empty() {
            self.stage.clear();
            self.staged.clear();
            return;
        }
        let res = self
            .file
            .write_all(&self.stage)
            .and_then(|_| self.file.write_all(tail));
        self.stage.clear();
        if self.stage.capacity() > 4 * OUT_STAGE {
            self.stage = Vec::new();
        }
        match res {
            Ok(()) => {
                for h in self.staged.drain(..) {
                    self.index
                        .blocks
                        .push(BlockEntry::from_header(self.offset, &h));
                    self.offset += h.total_len();
                    self.summary.blocks += 1;
                    self.summary.uncompressed_bytes += h.uncompressed_len;
                    self.summary.compressed_bytes += h.stored_len;
                }
            }
            Err(e) => {
                self.staged.clear();
                self.broken = true;
                let mut st = lock(&sh.state);
                sh.fail(
                    &mut st,
                    FormatError::io(&sh.path, self.offset, "cannot write block", e),
                );
            }
        }
    }
}

pub(super) fn output_loop(
    sh: &Shared,
    file: Box<dyn Write + Send>,
    body_start: u64,
    rx: Receiver<Result<Done, FormatError>>,
) -> Result<WriteSummary, FormatError> {
    let mut out = Output {
        file,
        offset: body_start,
        stage: Vec::new(),
        staged: Vec::new(),
        index: FooterIndex::default(),
        summary: WriteSummary::default(),
        broken: false,
    };
    let mut next = 0u64;
    let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
    for done in rx {
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                out.broken = true;
                let mut st = lock(&sh.state);
                sh.fail(&mut st, e);
                sh.cond.notify_all();
                continue;
            }
        };
        pending.insert(done.seq, done);
        // Every job now in order goes out together (a batch of small blocks in one write), and
        // counts as written only once it is in the file.
        let (mut freed, first) = (0usize, next);
        while let Some(d) = pending.remove(&next) {
            for b in d.blocks {
                out.add(sh, &b);
                sh.give_buf(b.stored);
            }
            next += 1;
            freed += d.input_len;
        }
        if next == first {
            continue;
        }
        out.write(sh, &[]);
        let mut st = lock(&sh.state);
        st.in_flight_bytes = st.in_flight_bytes.saturating_sub(freed);
        st.written_upto = next;
        sh.cond.notify_all();
    }
    let Output {
        mut file,
        offset,
        mut index,
        mut summary,
        broken,
        ..
    } = out;
    if broken {
        let st = lock(&sh.state);
        return Err(match &st.error {
            Some(e) => e.duplicate(),
            None => FormatError::new(&sh.path, offset, Problem::WriterFailed("unknown".into())),
        });
    }
    {
        let open = sh.open.lock();
        index.records = open.total_records;
        index.frames_ended = open.frames_ended;
        let mut counts = open.counts.clone();
        let call = CALL_VARIANT as usize;
        if counts.len() <= call {
            counts.resize(call + 1, (0, ""));
        }
        counts[call] = (open.calls, "Call");
        index.record_counts = counts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, name)| (name.to_string(), *n))
            .collect();
        let blobs = lock(&sh.blobs);
        index.blobs = blobs.next;
        index.blob_dedup_hits = blobs.dedup_hits;
    }
    summary.records = index.records;
    summary.frames = index.frames_ended;
    summary.blobs = index.blobs;
    summary.blob_dedup_hits = index.blob_dedup_hits;

    let block = index
        .encode_block(index.blocks.len() as u32)
        .map_err(|e| FormatError::new(&sh.path, offset, Problem::Encode(e)))?;
    let trailer = encode_trailer(offset, block.len() as u64);
    file.write_all(&block)
        .and_then(|_| file.write_all(&trailer))
        .and_then(|_| file.flush())
        .map_err(|e| FormatError::io(&sh.path, offset, "cannot write footer", e))?;
    summary.file_bytes = offset + block.len() as u64 + TRAILER_LEN as u64;
    Ok(summary)
}
