//! Reading records: the iterator over a set of record blocks (whole file, one frame, from a
//! frame on), one block's records, and the parallel decode that hands blocks over in file order.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{fast, Dctx, TraceReader};
use crate::error::{FormatError, Problem};
use crate::index::BlockEntry;
use crate::layout::*;
use crate::record::Record;
use crate::{bincode_config, KNOWN_RECORD_VARIANTS};

impl TraceReader {
    /// Every record in file order, one block decoded at a time.
    pub fn records(&self) -> Records<'_> {
        let ids = self.record_block_ids(|_| true);
        Records::new(self, ids)
    }

    /// Records of frame `n` only (frames as numbered by `TraceWriter::end_frame`).
    pub fn frame_records(&self, n: u64) -> Records<'_> {
        let ids = self.record_block_ids(|b| b.aux == n);
        Records::new(self, ids)
    }

    /// Records from the start of frame `n` to the end of the file.
    pub fn records_from_frame(&self, n: u64) -> Records<'_> {
        let mut ids = self.record_block_ids(|_| true);
        let first = ids
            .iter()
            .position(|&i| self.blocks[i].aux >= n)
            .unwrap_or(ids.len());
        ids.drain(..first);
        Records::new(self, ids)
    }

    /// Records of one block (`blocks()[i]`), for parallel or random access.
    pub fn block_records(&self, i: usize) -> Result<Vec<Record>, FormatError> {
        let entry = self.blocks.get(i).ok_or_else(|| {
            FormatError::new(
                &self.path,
                0,
                Problem::Corrupt(format!("no block {i} (file has {})", self.blocks.len())),
            )
        })?;
        if entry.kind() != BlockKind::Records {
            return Err(FormatError::corrupt(
                &self.path,
                entry.offset,
                format!("block {i} is a {} block", entry.kind().name()),
            ));
        }
        Records::new(self, vec![i]).collect()
    }

    /// Every record of the file, decoded by `threads` worker threads and handed to `sink` on
    /// the calling thread one block at a time, in file order. Yields exactly what
    /// [`records`](Self::records) yields, grouped by block (a damaged block is one error; records
    /// newer than this build are skipped and counted in [`BlockRecords::unknown_skipped`]).
    /// Blocks are independent zstd frames, so workers decode later blocks while `sink` consumes
    /// earlier ones; at most `2 * threads` decoded blocks wait for `sink` at any time.
    /// `threads == 0` decodes on the calling thread.
    pub fn records_parallel(&self, threads: usize, mut sink: impl FnMut(BlockRecords)) {
        let ids = self.record_block_ids(|_| true);
        let threads = threads.min(ids.len());
        if threads == 0 {
            let mut dctx = Dctx::default();
            for &i in &ids {
                sink(self.decode_block(i, &mut dctx));
            }
            return;
        }
        let window = 2 * threads;
        let state = Mutex::new(ParState {
            next: 0,
            consumed: 0,
            done: BTreeMap::new(),
            stop: false,
        });
        let produced = std::sync::Condvar::new();
        let room = std::sync::Condvar::new();
        let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut dctx = Dctx::default();
                    loop {
                        let k = {
                            let mut st = lock();
                            loop {
                                if st.stop || st.next >= ids.len() {
                                    return;
                                }
                                if st.next < st.consumed + window {
                                    break;
                                }
                                st = room.wait(st).unwrap_or_else(|e| e.into_inner());
                            }
                            st.next += 1;
                            st.next - 1
                        };
                        let i = ids[k];
                        // Decoding never panics on bad input; should it all the same, the block
                        // becomes an error instead of leaving the consumer waiting for it.
                        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            self.decode_block(i, &mut dctx)
                        }))
                        .unwrap_or_else(|_| {
                            dctx = Dctx::default();
                            let b = &self.blocks[i];
                            BlockRecords {
                                offset: b.offset,
                                frame: b.aux,
                                records: vec![Err(FormatError::corrupt(
                                    &self.path,
                                    b.offset,
                                    "internal error while decoding this block",
                                ))],
                                unknown_skipped: 0,
                            }
                        });
                        lock().done.insert(k, out);
                        produced.notify_one();
                    }
                });
            }
            // Stops the workers however the consumer leaves (a panicking sink included), so
            // the scope's join cannot wait forever.
            struct Stop<'a, F: Fn()>(&'a F);
            impl<F: Fn()> Drop for Stop<'_, F> {
                fn drop(&mut self) {
                    (self.0)()
                }
            }
            let stop = || {
                lock().stop = true;
                room.notify_all();
            };
            let _stop = Stop(&stop);
            for k in 0..ids.len() {
                let out = {
                    let mut st = lock();
                    loop {
                        if let Some(o) = st.done.remove(&k) {
                            st.consumed = k + 1;
                            break o;
                        }
                        st = produced.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                };
                room.notify_all();
                sink(out);
            }
        });
    }

    /// Records of record block `blocks()[i]`, with the same checks as [`Records`].
    fn decode_block(&self, i: usize, dctx: &mut Dctx) -> BlockRecords {
        let mut it = Records::new(self, vec![i]);
        it.dctx = std::mem::take(dctx);
        // The count is the file's word: each record takes at least 2 bytes, and the rest grows
        // as needed.
        let b = &self.blocks[i];
        let cap = u64::from(b.records)
            .min(b.uncompressed_len / 2)
            .min(1 << 16);
        let mut records = Vec::with_capacity(cap as usize);
        records.extend(&mut it);
        *dctx = std::mem::take(&mut it.dctx);
        BlockRecords {
            offset: self.blocks[i].offset,
            frame: self.blocks[i].aux,
            records,
            unknown_skipped: it.unknown,
        }
    }

    fn record_block_ids(&self, keep: impl Fn(&BlockEntry) -> bool) -> Vec<usize> {
        (0..self.blocks.len())
            .filter(|&i| self.blocks[i].kind() == BlockKind::Records && keep(&self.blocks[i]))
            .collect()
    }
}

/// `(prefix length, record length, variant byte)` of the length-prefixed record at `pos`.
pub(super) fn record_frame(buf: &[u8], pos: usize) -> Result<(usize, usize, u8), String> {
    let Some((len, k)) = get_varint(&buf[pos..]) else {
        return Err(format!(
            "record at block byte {pos} has a bad length prefix"
        ));
    };
    let len = len as usize;
    let rest = buf.len() - pos - k;
    if len == 0 || len > rest {
        return Err(format!(
            "record at block byte {pos} declares {len} bytes, {rest} remain"
        ));
    }
    Ok((k, len, buf[pos + k]))
}

/// The records of one block, as [`TraceReader::records_parallel`] hands them over.
#[derive(Debug)]
pub struct BlockRecords {
    /// File offset of the block.
    pub offset: u64,
    /// Frame number of the block.
    pub frame: u64,
    pub records: Vec<Result<Record, FormatError>>,
    /// Records skipped because their variant is newer than this build.
    pub unknown_skipped: u64,
}

struct ParState {
    /// Next block (position in the id list) a worker takes.
    next: usize,
    /// Blocks handed to the sink so far.
    consumed: usize,
    done: BTreeMap<usize, BlockRecords>,
    stop: bool,
}

/// Iterator over records of a set of blocks. A damaged block yields one error and is skipped;
/// records of variants newer than this build are skipped silently (see `unknown_skipped`).
pub struct Records<'a> {
    reader: &'a TraceReader,
    ids: Vec<usize>,
    next_block: usize,
    buf: Vec<u8>,
    pos: usize,
    block_offset: u64,
    declared: u32,
    seen: u32,
    dctx: Dctx,
    unknown: u64,
}

impl<'a> Records<'a> {
    fn new(reader: &'a TraceReader, ids: Vec<usize>) -> Self {
        Records {
            reader,
            ids,
            next_block: 0,
            buf: Vec::new(),
            pos: 0,
            block_offset: 0,
            declared: 0,
            seen: 0,
            dctx: Dctx::default(),
            unknown: 0,
        }
    }

    /// Records skipped because their variant is newer than this build.
    pub fn unknown_skipped(&self) -> u64 {
        self.unknown
    }

    /// File offset of the block the last record came from.
    pub fn block_offset(&self) -> u64 {
        self.block_offset
    }

    /// Frame number of the block the last record came from.
    pub fn block_frame(&self) -> u64 {
        self.next_block
            .checked_sub(1)
            .and_then(|i| self.ids.get(i))
            .map(|&i| self.reader.blocks[i].aux)
            .unwrap_or(0)
    }

    fn err(&self, p: impl std::fmt::Display) -> FormatError {
        FormatError::corrupt(&self.reader.path, self.block_offset, p)
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Record, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.pos < self.buf.len() {
                let (k, len, variant) = match record_frame(&self.buf, self.pos) {
                    Ok(x) => x,
                    Err(p) => {
                        self.pos = self.buf.len();
                        return Some(Err(self.err(p)));
                    }
                };
                let body = &self.buf[self.pos + k..self.pos + k + len];
                let at = self.pos;
                self.pos += k + len;
                self.seen += 1;
                if variant >= KNOWN_RECORD_VARIANTS {
                    self.unknown += 1;
                    continue;
                }
                if variant == fast::QUERY_RESULT_VARIANT {
                    if let Some(q) = fast::query_result(&body[1..]) {
                        return Some(Ok(Record::QueryResult(q)));
                    }
                }
                // Bytes after the decoded value are fields a newer minor version appended.
                return Some(
                    bincode::serde::decode_from_slice::<Record, _>(body, bincode_config())
                        .map(|(r, _)| r)
                        .map_err(|e| {
                            self.err(format!("record at block byte {at}: cannot decode: {e}"))
                        }),
                );
            }
            if self.seen != self.declared {
                let msg = format!(
                    "block holds {} records, its header says {}",
                    self.seen, self.declared
                );
                self.seen = self.declared;
                return Some(Err(self.err(msg)));
            }
            let &i = self.ids.get(self.next_block)?;
            self.next_block += 1;
            let b = self.reader.blocks[i];
            self.block_offset = b.offset;
            self.pos = 0;
            self.seen = 0;
            self.declared = 0;
            let mut buf = std::mem::take(&mut self.buf);
            let res = self.reader.block_bytes_into(&b, &mut self.dctx, &mut buf);
            self.buf = buf;
            if let Err(e) = res {
                self.buf.clear();
                return Some(Err(e));
            }
            self.declared = b.records;
        }
    }
}
