//! Memory-mapped reader. Opening reads the prefix, the header and the footer index (or, when
//! the footer is missing or damaged, scans block headers); records are decoded one block at a
//! time, so memory stays bounded by the largest block whatever the file size.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;

use crate::error::{FormatError, Problem};
use crate::index::{BlockEntry, FooterIndex};
use crate::layout::*;
use crate::record::{BlobId, FileKind, Header, Payload, Record};
use crate::{bincode_config, file_kind_from_byte, KNOWN_RECORD_VARIANTS, RECORD_NAMES};

/// zstd cannot expand a frame by more than this (an RLE block: 4 bytes for 128 KiB), so a
/// declared length above `stored * MAX_RATIO` is a lie and is refused before allocating.
const MAX_RATIO: u64 = 32 * 1024;

/// A region of the file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDamage {
    pub offset: u64,
    /// Bytes lost to it.
    pub len: u64,
    pub problem: String,
}

/// Summary for `quarry info`.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    pub kind: FileKind,
    pub format_version: (u16, u16),
    pub header: Header,
    pub records: u64,
    /// Type name -> count; variants unknown to this build appear as `unknown(N)`.
    pub record_counts: BTreeMap<String, u64>,
    /// `Frame` records.
    pub frames: u64,
    /// Blocks of every kind except the footer index.
    pub blocks: u64,
    pub record_blocks: u64,
    pub blob_blocks: u64,
    pub compressed_bytes: u64,
    pub uncompressed_bytes: u64,
    pub file_bytes: u64,
    pub lost_bytes: u64,
    /// Footer present and every block intact.
    pub complete: bool,
    /// Counts came from the footer (otherwise from decoding every block).
    pub from_footer: bool,
    pub damage: Vec<BlockDamage>,
}

impl Info {
    /// No footer, but nothing lost either: a writer that stopped between two blocks (killed,
    /// crashed). Every block it wrote is here and intact; blocks it never wrote cannot be told.
    pub fn recovered(&self) -> bool {
        !self.from_footer && self.damage.is_empty()
    }

    /// The first problem, as `(offset, text)`, when the file is not complete.
    pub fn first_problem(&self) -> Option<(u64, String)> {
        if let Some(d) = self.damage.first() {
            return Some((d.offset, d.problem.clone()));
        }
        if !self.complete {
            return Some((
                self.file_bytes,
                "no valid footer index (writer did not finish); complete blocks recovered".into(),
            ));
        }
        None
    }
}

pub struct TraceReader {
    path: PathBuf,
    map: Mmap,
    header: Header,
    version: (u16, u16),
    body_start: u64,
    /// Every block except index blocks, in file order.
    blocks: Vec<BlockEntry>,
    footer: Option<FooterIndex>,
    damage: Vec<BlockDamage>,
    lost_bytes: u64,
    /// The blocks of each blob (its pieces, in order).
    blob_blocks: HashMap<u64, Vec<usize>>,
    dict_blocks: HashMap<u64, usize>,
    /// Decompressed dictionaries, by id: each is read once per reader.
    dict_cache: Mutex<HashMap<u16, Arc<Vec<u8>>>>,
    /// A decompression context kept between `blob` calls (creating one costs more than
    /// decompressing a small blob).
    spare: Mutex<Option<Dctx>>,
}

/// Decompression contexts reused across the blocks of one pass.
#[derive(Default)]
pub(crate) struct Dctx {
    plain: Option<zstd::bulk::Decompressor<'static>>,
    dict: Option<(u16, zstd::bulk::Decompressor<'static>)>,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("blocks", &self.blocks.len())
            .field("complete", &self.footer.is_some())
            .finish()
    }
}

impl TraceReader {
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| FormatError::io(&path, 0, "cannot open", e))?;
        let len = file
            .metadata()
            .map_err(|e| FormatError::io(&path, 0, "cannot stat", e))?
            .len();
        if len == 0 {
            return Err(FormatError::new(&path, 0, Problem::Empty));
        }
        // SAFETY: the map is read-only; a writer appending to the file meanwhile only adds bytes
        // beyond the mapped length. A file truncated under us by another process is outside
        // what any mmap reader can defend against.
        let map =
            unsafe { Mmap::map(&file) }.map_err(|e| FormatError::io(&path, 0, "cannot map", e))?;
        let bytes: &[u8] = &map;
        let err = |offset: u64, p: Problem| FormatError::new(&path, offset, p);

        let magic_len = bytes.len().min(MAGIC.len());
        if bytes[..magic_len] != MAGIC[..magic_len] {
            return Err(err(0, Problem::BadMagic));
        }
        if bytes.len() < 12 {
            return Err(err(
                0,
                Problem::Truncated {
                    what: "file prefix",
                    need: PREFIX_LEN as u64,
                    have: len,
                },
            ));
        }
        // The version sits at a fixed place in every format version, so it is judged before
        // anything else that a newer major might have changed.
        let major = u16::from_le_bytes([bytes[8], bytes[9]]);
        let minor = u16::from_le_bytes([bytes[10], bytes[11]]);
        if major > VERSION_MAJOR {
            return Err(err(
                8,
                Problem::NewerMajor {
                    major,
                    minor,
                    supported: VERSION_MAJOR,
                },
            ));
        }
        if major < OLDEST_MAJOR {
            return Err(err(8, Problem::BadVersion { major, minor }));
        }
        if bytes.len() < PREFIX_LEN {
            return Err(err(
                0,
                Problem::Truncated {
                    what: "file prefix",
                    need: PREFIX_LEN as u64,
                    have: len,
                },
            ));
        }
        let p = Prefix::parse(&bytes[..PREFIX_LEN]);
        if p.header_len > MAX_HEADER_LEN {
            return Err(err(
                16,
                Problem::TooLarge {
                    what: "header",
                    len: p.header_len as u64,
                    max: MAX_HEADER_LEN as u64,
                },
            ));
        }
        let body_start = PREFIX_LEN as u64 + p.header_len as u64;
        if body_start > len {
            return Err(err(
                PREFIX_LEN as u64,
                Problem::Truncated {
                    what: "header",
                    need: p.header_len as u64,
                    have: len - PREFIX_LEN as u64,
                },
            ));
        }
        let hdr_bytes = &bytes[PREFIX_LEN..body_start as usize];
        if prefix_checksum(&bytes[..24], hdr_bytes) != p.checksum {
            return Err(err(24, Problem::Checksum("file header")));
        }
        let Some(kind) = file_kind_from_byte(p.kind) else {
            return Err(err(
                12,
                Problem::Corrupt(format!("unknown file kind {}", p.kind)),
            ));
        };
        let (header, _): (Header, usize) =
            bincode::serde::decode_from_slice(hdr_bytes, bincode_config()).map_err(|e| {
                err(
                    PREFIX_LEN as u64,
                    Problem::Decode {
                        what: "header",
                        detail: e.to_string(),
                    },
                )
            })?;
        if header.kind != kind {
            return Err(err(
                12,
                Problem::KindMismatch {
                    prefix: format!("{kind:?}"),
                    header: format!("{:?}", header.kind),
                },
            ));
        }

        let mut reader = TraceReader {
            path,
            map,
            header,
            version: (p.major, p.minor),
            body_start,
            blocks: Vec::new(),
            footer: None,
            damage: Vec::new(),
            lost_bytes: 0,
            blob_blocks: HashMap::new(),
            dict_blocks: HashMap::new(),
            dict_cache: Mutex::new(HashMap::new()),
            spare: Mutex::new(None),
        };
        match reader.read_footer() {
            Ok(mut footer) => {
                reader.blocks = std::mem::take(&mut footer.blocks);
                reader.footer = Some(footer);
            }
            Err(disagreement) => {
                reader.scan();
                // Block headers are checksummed, index entries only as a whole: the walk
                // is the truth, and the index that said otherwise is damage (after what the
                // walk found, which says more about what was lost).
                reader.damage.extend(disagreement);
            }
        }
        for (i, b) in reader.blocks.iter().enumerate() {
            match b.kind() {
                BlockKind::Blob => {
                    reader.blob_blocks.entry(b.aux).or_default().push(i);
                }
                BlockKind::Dict => {
                    reader.dict_blocks.entry(b.aux).or_insert(i);
                }
                _ => {}
            }
        }
        Ok(reader)
    }

    /// The block header at `offset`, parsed for this file's version.
    fn header_at(&self, offset: u64) -> Result<BlockHeader, &'static str> {
        let bytes: &[u8] = &self.map;
        match bytes.get(offset as usize..) {
            Some(b) => BlockHeader::parse_version(b, self.version.0),
            None => Err("truncated block header"),
        }
    }

    /// The footer index if the trailer, the index block and the block list all check out, and
    /// every entry agrees with its block's header. `Err(None)`: no usable footer (a writer that
    /// did not finish, damage to the footer itself); `Err(Some(d))`: an intact index that
    /// disagrees with the blocks.
    fn read_footer(&self) -> Result<FooterIndex, Option<BlockDamage>> {
        let bytes: &[u8] = &self.map;
        let len = bytes.len() as u64;
        if len < self.body_start + TRAILER_LEN as u64 {
            return Err(None);
        }
        let tpos = len - TRAILER_LEN as u64;
        let (ioff, ilen) = parse_trailer(&bytes[tpos as usize..]).ok_or(None)?;
        if ioff < self.body_start
            || ioff.checked_add(ilen) != Some(tpos)
            || ilen < BLOCK_HEADER_LEN as u64
        {
            return Err(None);
        }
        let h = self.header_at(ioff).map_err(|_| None)?;
        if h.kind != BlockKind::Index || h.total_len() != ilen {
            return Err(None);
        }
        let entry = BlockEntry::from_header(ioff, &h);
        let raw = self
            .block_bytes(&entry, &mut Dctx::default())
            .map_err(|_| None)?;
        let (mut footer, _): (FooterIndex, usize) =
            bincode::serde::decode_from_slice(&raw, bincode_config()).map_err(|_| None)?;
        let numbered = self.version.0 >= 2;
        let disagree = |offset: u64, what: String| {
            Err(Some(BlockDamage {
                offset,
                len: 0,
                problem: format!("the footer index disagrees with the file ({what}); blocks found by walking the file instead"),
            }))
        };
        if numbered && h.seq as usize != footer.blocks.len() {
            return disagree(
                ioff,
                format!(
                    "index block number {} after {} blocks",
                    h.seq,
                    footer.blocks.len()
                ),
            );
        }
        // The writer lays blocks end to end from the header to the index; anything else means
        // the index does not describe this file.
        let mut pos = self.body_start;
        for (i, b) in footer.blocks.iter_mut().enumerate() {
            if numbered {
                b.seq = i as u32;
            }
            if b.offset != pos || b.stored_len > len {
                return disagree(pos, format!("entry {i} is not where the blocks lie"));
            }
            // Each entry against the header it names: a forged entry (another kind, frame or
            // length) would otherwise hide or misplace a block without any checksum failing.
            match self.header_at(pos) {
                Ok(bh) if BlockEntry::from_header(pos, &bh) == *b => {}
                Ok(bh) if numbered && bh.seq != b.seq => {
                    return disagree(pos, format!("entry {i} names block number {}", bh.seq))
                }
                Ok(_) => return disagree(pos, format!("entry {i} differs from its block header")),
                Err(p) => return disagree(pos, format!("entry {i}: {p}")),
            }
            if let Some(p) = size_problem(b) {
                return disagree(pos, format!("entry {i}: {p}"));
            }
            pos = pos.checked_add(b.total_len()).ok_or(None)?;
        }
        if pos != ioff {
            return disagree(pos, "the index block does not follow the last block".into());
        }
        Ok(footer)
    }

    /// Rebuilds the block list by walking block headers; records damage and lost bytes.
    fn scan(&mut self) {
        let bytes: &[u8] = &self.map;
        let len = bytes.len() as u64;
        let mut pos = self.body_start;
        let mut blocks = Vec::new();
        let mut damage = Vec::new();
        let mut numbers = crate::index::Numbers::default();
        while pos < len {
            let rest = len - pos;
            if rest == TRAILER_LEN as u64 && parse_trailer(&bytes[pos as usize..]).is_some() {
                break;
            }
            if rest < BLOCK_HEADER_LEN as u64 {
                damage.push(BlockDamage {
                    offset: pos,
                    len: rest,
                    problem: format!(
                        "truncated block header: need {BLOCK_HEADER_LEN} bytes, {rest} available"
                    ),
                });
                break;
            }
            let h = match BlockHeader::parse_version(&bytes[pos as usize..], self.version.0) {
                Ok(h) => h,
                Err(problem) => {
                    let next = self.resync(pos + 1);
                    damage.push(BlockDamage {
                        offset: pos,
                        len: next - pos,
                        problem: problem.to_string(),
                    });
                    pos = next;
                    continue;
                }
            };
            let total = h.total_len();
            if total > rest {
                damage.push(BlockDamage {
                    offset: pos,
                    len: rest,
                    problem: format!(
                        "truncated {} block: need {total} bytes, {rest} available",
                        h.kind.name()
                    ),
                });
                break;
            }
            let payload = &bytes[(pos + BLOCK_HEADER_LEN as u64) as usize..(pos + total) as usize];
            let entry = BlockEntry::from_header(pos, &h);
            if payload_checksum(payload) != h.payload_checksum {
                damage.push(BlockDamage {
                    offset: pos,
                    len: total,
                    problem: "block payload checksum mismatch".into(),
                });
                numbers.damaged(h.seq, pos);
            } else if let Some(p) = size_problem(&entry) {
                damage.push(BlockDamage {
                    offset: pos,
                    len: total,
                    problem: p,
                });
                numbers.damaged(h.seq, pos);
            } else if h.kind == BlockKind::Index {
                numbers.damaged(h.seq, pos);
            } else {
                blocks.push(entry);
            }
            pos += total;
        }
        if self.version.0 >= 2 {
            numbers.check(&mut blocks, &mut damage);
        }
        damage.sort_by_key(|d| d.offset);
        self.lost_bytes = damage.iter().map(|d| d.len).sum();
        self.blocks = blocks;
        self.damage = damage;
    }

    /// Offset of the next plausible block (valid header, fits in the file) at or after `from`.
    fn resync(&self, from: u64) -> u64 {
        let bytes: &[u8] = &self.map;
        let len = bytes.len();
        let mut i = from as usize;
        while i + BLOCK_HEADER_LEN <= len {
            if bytes[i..i + 4] == BLOCK_MAGIC {
                if let Ok(h) = BlockHeader::parse_version(&bytes[i..], self.version.0) {
                    if (i as u64)
                        .checked_add(h.total_len())
                        .is_some_and(|end| end <= len as u64)
                    {
                        return i as u64;
                    }
                }
            }
            i += 1;
        }
        len as u64
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn kind(&self) -> FileKind {
        self.header.kind
    }

    /// `(major, minor)` of the file.
    pub fn format_version(&self) -> (u16, u16) {
        self.version
    }

    /// True when a valid footer index was found (the writer finished).
    pub fn has_footer(&self) -> bool {
        self.footer.is_some()
    }

    /// Bytes lost to truncation or damage found while opening (scan mode).
    pub fn lost_bytes(&self) -> u64 {
        self.lost_bytes
    }

    /// Damage found while opening.
    pub fn damage(&self) -> &[BlockDamage] {
        &self.damage
    }

    /// One line on what opening found, for a warning (`None`: footer present, no damage): the
    /// first damage (where, what) and how much was lost, or, for a file whose writer stopped
    /// between blocks, that every block it wrote is intact. Checks no payload: `info()` does.
    pub fn open_problems(&self) -> Option<String> {
        let path = self.path.display();
        match self.damage.first() {
            Some(d) => Some(format!(
                "{path}: offset {}: {} ({} damaged region(s), {} bytes lost)",
                d.offset,
                d.problem,
                self.damage.len(),
                self.lost_bytes
            )),
            None if self.footer.is_none() => Some(format!(
                "{path}: the writer did not finish (no footer index); all {} blocks it wrote are intact",
                self.blocks.len()
            )),
            None => None,
        }
    }

    /// All data blocks (records, blobs, unknown kinds) in file order.
    pub fn blocks(&self) -> &[BlockEntry] {
        &self.blocks
    }

    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    pub(crate) fn raw(&self) -> &[u8] {
        &self.map
    }

    pub(crate) fn body_start(&self) -> u64 {
        self.body_start
    }

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

    /// The footer index's record counts per type name (`None` without a footer).
    pub fn footer_record_counts(&self) -> Option<&[(String, u64)]> {
        self.footer.as_ref().map(|f| f.record_counts.as_slice())
    }

    /// The verified, decompressed payload of `blocks()[i]` (records or blob bytes).
    pub fn block_data(&self, i: usize) -> Result<Vec<u8>, FormatError> {
        let entry = self.blocks.get(i).ok_or_else(|| {
            FormatError::new(
                &self.path,
                0,
                Problem::Corrupt(format!("no block {i} (file has {})", self.blocks.len())),
            )
        })?;
        self.block_bytes(entry, &mut Dctx::default())
    }

    fn record_block_ids(&self, keep: impl Fn(&BlockEntry) -> bool) -> Vec<usize> {
        (0..self.blocks.len())
            .filter(|&i| self.blocks[i].kind() == BlockKind::Records && keep(&self.blocks[i]))
            .collect()
    }

    /// The contents of a blob.
    pub fn blob(&self, id: BlobId) -> Result<Vec<u8>, FormatError> {
        let Some(ids) = self.blob_blocks.get(&id.0).filter(|v| !v.is_empty()) else {
            return Err(FormatError::new(
                &self.path,
                self.file_len(),
                Problem::NoSuchBlob(id.0),
            ));
        };
        let mut dctx = self
            .spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        let r = match ids[..] {
            [i] => self.block_bytes(&self.blocks[i], &mut dctx),
            // A large blob in pieces (FORMAT.md): their data in block order.
            _ => ids.iter().try_fold(Vec::new(), |mut out, &i| {
                let b = &self.blocks[i];
                let part = self.block_bytes(b, &mut dctx)?;
                let total = out.len() as u64 + part.len() as u64;
                if total > MAX_BLOB_LEN {
                    return Err(FormatError::new(
                        &self.path,
                        b.offset,
                        Problem::TooLarge {
                            what: "blob",
                            len: total,
                            max: MAX_BLOB_LEN,
                        },
                    ));
                }
                out.try_reserve(part.len())
                    .map_err(|_| FormatError::new(&self.path, b.offset, Problem::Alloc(total)))?;
                out.extend_from_slice(&part);
                Ok(out)
            }),
        };
        *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(dctx);
        r
    }

    /// The bytes a payload stands for.
    pub fn payload_bytes(&self, p: &Payload) -> Result<Vec<u8>, FormatError> {
        match p {
            Payload::Inline(v) => Ok(v.clone()),
            Payload::Blob { id, len } => {
                let data = self.blob(*id)?;
                if data.len() as u64 != *len {
                    let off = self
                        .blob_blocks
                        .get(&id.0)
                        .and_then(|v| v.first())
                        .map(|&i| self.blocks[i].offset)
                        .unwrap_or(0);
                    return Err(FormatError::corrupt(
                        &self.path,
                        off,
                        format!(
                            "blob {} holds {} bytes, the record says {len}",
                            id.0,
                            data.len()
                        ),
                    ));
                }
                Ok(data)
            }
        }
    }

    /// The first `CommandTable` record (needed to name calls when reading from frame N).
    pub fn command_table(&self) -> Result<Option<Vec<String>>, FormatError> {
        for r in self.records() {
            match r? {
                Record::CommandTable(t) => return Ok(Some(t)),
                Record::Call(_) => return Ok(None),
                _ => {}
            }
        }
        Ok(None)
    }

    /// Checks the header and payload checksum of one block (cheap: no decompression).
    fn verify_block(&self, b: &BlockEntry) -> Result<(), FormatError> {
        self.payload_slice(b).map(|_| ())
    }

    fn payload_slice(&self, b: &BlockEntry) -> Result<&[u8], FormatError> {
        let bytes: &[u8] = &self.map;
        let len = bytes.len() as u64;
        let end = b
            .offset
            .checked_add(b.total_len())
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                FormatError::new(
                    &self.path,
                    b.offset,
                    Problem::Truncated {
                        what: "block",
                        need: b.total_len(),
                        have: len.saturating_sub(b.offset),
                    },
                )
            })?;
        let h = self
            .header_at(b.offset)
            .map_err(|p| FormatError::corrupt(&self.path, b.offset, p))?;
        if BlockEntry::from_header(b.offset, &h) != *b {
            return Err(FormatError::corrupt(
                &self.path,
                b.offset,
                "block header disagrees with the index",
            ));
        }
        let payload = &bytes[(b.offset + BLOCK_HEADER_LEN as u64) as usize..end as usize];
        if payload_checksum(payload) != h.payload_checksum {
            return Err(FormatError::new(
                &self.path,
                b.offset,
                Problem::Checksum("block payload"),
            ));
        }
        Ok(payload)
    }

    /// Verified, decompressed payload of a block.
    fn block_bytes(&self, b: &BlockEntry, dctx: &mut Dctx) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::new();
        self.block_bytes_into(b, dctx, &mut out)?;
        Ok(out)
    }

    fn block_bytes_into(
        &self,
        b: &BlockEntry,
        dctx: &mut Dctx,
        out: &mut Vec<u8>,
    ) -> Result<(), FormatError> {
        let payload = self.payload_slice(b)?;
        let ulen = b.uncompressed_len;
        let too_large = |max: u64| {
            FormatError::new(
                &self.path,
                b.offset + 24,
                Problem::TooLarge {
                    what: "block",
                    len: ulen,
                    max,
                },
            )
        };
        if ulen > MAX_BLOCK_LEN {
            return Err(too_large(MAX_BLOCK_LEN));
        }
        out.clear();
        match b.codec {
            CODEC_STORED => {
                if ulen != payload.len() as u64 {
                    return Err(FormatError::corrupt(
                        &self.path,
                        b.offset,
                        "stored block length mismatch",
                    ));
                }
                out.try_reserve_exact(payload.len())
                    .map_err(|_| FormatError::new(&self.path, b.offset, Problem::Alloc(ulen)))?;
                out.extend_from_slice(payload);
            }
            CODEC_ZSTD | CODEC_ZSTD_DICT => {
                let max = (payload.len() as u64).saturating_mul(MAX_RATIO);
                if ulen > max {
                    return Err(too_large(max));
                }
                out.try_reserve_exact(ulen as usize)
                    .map_err(|_| FormatError::new(&self.path, b.offset, Problem::Alloc(ulen)))?;
                let zerr = |e: std::io::Error| {
                    FormatError::new(&self.path, b.offset, Problem::Decompress(e.to_string()))
                };
                let d = if b.codec == CODEC_ZSTD {
                    if dctx.plain.is_none() {
                        dctx.plain = Some(zstd::bulk::Decompressor::new().map_err(zerr)?);
                    }
                    dctx.plain.as_mut()
                } else {
                    if dctx.dict.as_ref().map(|(id, _)| *id) != Some(b.dict) {
                        let bytes = self.dictionary(b)?;
                        let d = zstd::bulk::Decompressor::with_dictionary(&bytes).map_err(zerr)?;
                        dctx.dict = Some((b.dict, d));
                    }
                    dctx.dict.as_mut().map(|(_, d)| d)
                };
                let Some(d) = d else {
                    return Err(zerr(std::io::Error::other("no decompression context")));
                };
                let n = d.decompress_to_buffer(payload, out).map_err(|e| {
                    FormatError::new(
                        &self.path,
                        b.offset + BLOCK_HEADER_LEN as u64,
                        Problem::Decompress(e.to_string()),
                    )
                })?;
                if n as u64 != ulen {
                    return Err(FormatError::corrupt(
                        &self.path,
                        b.offset,
                        format!("block decompressed to {n} bytes, header says {ulen}"),
                    ));
                }
            }
            other => {
                return Err(FormatError::corrupt(
                    &self.path,
                    b.offset + 5,
                    format!("unknown codec {other}"),
                ));
            }
        }
        Ok(())
    }

    /// Contents of the dictionary block that block `user` was compressed with.
    fn dictionary(&self, user: &BlockEntry) -> Result<Arc<Vec<u8>>, FormatError> {
        let cached = self
            .dict_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&user.dict)
            .cloned();
        if let Some(d) = cached {
            return Ok(d);
        }
        let Some(&i) = self.dict_blocks.get(&u64::from(user.dict)) else {
            return Err(FormatError::corrupt(
                &self.path,
                user.offset,
                format!("dictionary {} of this block is missing", user.dict),
            ));
        };
        let d = &self.blocks[i];
        if d.codec == CODEC_ZSTD_DICT {
            return Err(FormatError::corrupt(
                &self.path,
                d.offset,
                "dictionary block needs a dictionary",
            ));
        }
        let bytes = Arc::new(self.block_bytes(d, &mut Dctx::default())?);
        self.dict_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(user.dict, bytes.clone());
        Ok(bytes)
    }

    /// Summary with per-type counts. Checks every block's checksum; without a footer the
    /// counts come from walking every record block (records are counted, not decoded).
    pub fn info(&self) -> Info {
        let mut damage = self.damage.clone();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut records = 0u64;
        let mut record_blocks = 0u64;
        let mut blob_blocks = 0u64;
        let mut compressed = 0u64;
        let mut uncompressed = 0u64;
        let mut dctx = Dctx::default();
        let mut buf = Vec::new();
        for b in &self.blocks {
            compressed += b.stored_len;
            uncompressed += b.uncompressed_len;
            match b.kind() {
                BlockKind::Records => record_blocks += 1,
                BlockKind::Blob => blob_blocks += 1,
                _ => {}
            }
            let checked = if self.footer.is_none() && b.kind() == BlockKind::Records {
                self.block_bytes_into(b, &mut dctx, &mut buf).and_then(|_| {
                    count_records(&buf, &mut counts)
                        .map_err(|p| FormatError::corrupt(&self.path, b.offset, p))
                })
            } else {
                self.verify_block(b)
            };
            if let Err(e) = checked {
                damage.push(BlockDamage {
                    offset: e.offset,
                    len: b.total_len(),
                    problem: e.problem.to_string(),
                });
            }
        }
        match &self.footer {
            Some(f) => {
                for (name, n) in &f.record_counts {
                    *counts.entry(name.clone()).or_default() += n;
                }
                records = f.records;
            }
            None => records += counts.values().sum::<u64>(),
        }
        let lost_bytes = damage.iter().map(|d| d.len).sum();
        Info {
            kind: self.header.kind,
            format_version: self.version,
            header: self.header.clone(),
            records,
            frames: counts.get("Frame").copied().unwrap_or(0),
            record_counts: counts,
            blocks: self.blocks.len() as u64,
            record_blocks,
            blob_blocks,
            compressed_bytes: compressed,
            uncompressed_bytes: uncompressed,
            file_bytes: self.file_len(),
            lost_bytes,
            complete: self.footer.is_some() && damage.is_empty(),
            from_footer: self.footer.is_some(),
            damage,
        }
    }
}

/// Why a block's declared uncompressed length cannot be true, checked before any allocation:
/// more than the format allows (FORMAT.md: no writer makes such a block), or more than zstd can
/// expand its stored bytes to.
fn size_problem(b: &BlockEntry) -> Option<String> {
    let ulen = b.uncompressed_len;
    if ulen > MAX_BLOCK_LEN {
        return Some(format!(
            "{} block declares {ulen} bytes uncompressed, more than the format's limit of {MAX_BLOCK_LEN}",
            b.kind().name()
        ));
    }
    let compressed = matches!(b.codec, CODEC_ZSTD | CODEC_ZSTD_DICT);
    if compressed && ulen > b.stored_len.saturating_mul(MAX_RATIO) {
        return Some(format!(
            "{} block declares {ulen} bytes uncompressed from {} stored, more than zstd can expand",
            b.kind().name(),
            b.stored_len
        ));
    }
    None
}

/// Counts records of a decompressed record block by their variant byte.
fn count_records(buf: &[u8], counts: &mut BTreeMap<String, u64>) -> Result<(), String> {
    let mut pos = 0usize;
    while pos < buf.len() {
        let (k, len, variant) = record_frame(buf, pos)?;
        let name = match RECORD_NAMES.get(variant as usize) {
            Some(n) => n.to_string(),
            None => format!("unknown({variant})"),
        };
        *counts.entry(name).or_default() += 1;
        pos += k + len;
    }
    Ok(())
}

/// `(prefix length, record length, variant byte)` of the length-prefixed record at `pos`.
fn record_frame(buf: &[u8], pos: usize) -> Result<(usize, usize, u8), String> {
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

/// A hand-written decoder for `Record::QueryResult`, the record results files hold most of.
mod fast;
