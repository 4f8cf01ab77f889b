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
use crate::{bincode_config, file_kind_from_byte, RECORD_NAMES};

/// A hand-written decoder for `Record::QueryResult`, the record results files hold most of.
mod fast;
mod records;
mod recover;

use records::record_frame;
pub use records::{BlockRecords, Records};

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
