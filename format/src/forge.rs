//! Test support: forges damage that checksums cannot see: whole blocks duplicated, deleted,
//! reordered or re-sealed with other fields, and index entries that lie, every checksum valid.
//! Used by the format tests and the CLI damage tests; uses only the crate's public API.

use crate::layout::*;
use crate::{BlockEntry, FooterIndex};

#[derive(Clone, Debug)]
pub struct Block {
    pub header: BlockHeader,
    pub payload: Vec<u8>,
}

/// A file taken apart into its head (prefix and header) and its blocks.
#[derive(Clone, Debug)]
pub struct Forge {
    pub head: Vec<u8>,
    /// Every block but the index, in file order.
    pub blocks: Vec<Block>,
    /// The writer's index (counts and totals), reused by [`Forge::bytes_with_index`].
    pub index: FooterIndex,
    /// The index block's number.
    pub index_seq: u32,
}

impl Forge {
    /// Takes apart a file written by `TraceWriter` (intact: every block header must parse).
    pub fn parse(bytes: &[u8]) -> Forge {
        let hlen = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
        let mut pos = PREFIX_LEN + hlen;
        let head = bytes[..pos].to_vec();
        let mut blocks = Vec::new();
        let mut index = FooterIndex::default();
        let mut index_seq = 0;
        while pos + BLOCK_HEADER_LEN <= bytes.len() {
            let Ok(h) = BlockHeader::parse(&bytes[pos..]) else {
                break;
            };
            let end = pos + h.total_len() as usize;
            let payload = bytes[pos + BLOCK_HEADER_LEN..end].to_vec();
            if h.kind == BlockKind::Index {
                index = FooterIndex::decode_block(&h, &payload).expect("index block");
                index_seq = h.seq;
            } else {
                index_seq = h.seq + 1;
                blocks.push(Block { header: h, payload });
            }
            pos = end;
        }
        index.blocks.clear();
        Forge {
            head,
            blocks,
            index,
            index_seq,
        }
    }

    /// Positions of the blocks of `kind`.
    pub fn of_kind(&self, kind: BlockKind) -> Vec<usize> {
        (0..self.blocks.len())
            .filter(|&i| self.blocks[i].header.kind == kind)
            .collect()
    }

    /// Block `i` appears twice in a row.
    pub fn duplicate(&mut self, i: usize) -> &mut Self {
        let b = self.blocks[i].clone();
        self.blocks.insert(i + 1, b);
        self
    }

    pub fn delete(&mut self, i: usize) -> &mut Self {
        self.blocks.remove(i);
        self
    }

    pub fn swap(&mut self, i: usize, j: usize) -> &mut Self {
        self.blocks.swap(i, j);
        self
    }

    /// Changes header fields of block `i`; its header checksum is recomputed on output.
    pub fn edit(&mut self, i: usize, f: impl FnOnce(&mut BlockHeader)) -> &mut Self {
        f(&mut self.blocks[i].header);
        self
    }

    /// Replaces block `i`'s payload by `data` stored uncompressed (codec 0), `records` records,
    /// with a valid payload checksum: forged records.
    pub fn set_payload(&mut self, i: usize, data: Vec<u8>, records: u32) -> &mut Self {
        let h = &mut self.blocks[i].header;
        h.codec = CODEC_STORED;
        h.dict = 0;
        h.records = records;
        h.uncompressed_len = data.len() as u64;
        h.stored_len = data.len() as u64;
        h.payload_checksum = payload_checksum(&data);
        self.blocks[i].payload = data;
        self
    }

    /// Numbers the blocks by their position, as a writer would have: the result is a
    /// consistent file (what a forger who knows the format makes).
    pub fn renumber(&mut self) -> &mut Self {
        for (i, b) in self.blocks.iter_mut().enumerate() {
            b.header.seq = i as u32;
        }
        self.index_seq = self.blocks.len() as u32;
        self
    }

    /// The file without footer (as a killed writer leaves it).
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.head.clone();
        for b in &self.blocks {
            out.extend_from_slice(&b.header.encode());
            out.extend_from_slice(&b.payload);
        }
        out
    }

    /// The file with an index of its blocks as laid out, changed by `edit` (a forged index
    /// entry), and the trailer.
    pub fn bytes_with_index(&self, edit: impl FnOnce(&mut FooterIndex)) -> Vec<u8> {
        let mut out = self.bytes();
        let mut index = self.index.clone();
        let mut off = self.head.len() as u64;
        index.blocks = self
            .blocks
            .iter()
            .map(|b| {
                let e = BlockEntry::from_header(off, &b.header);
                off += b.header.total_len();
                e
            })
            .collect();
        edit(&mut index);
        let block = index.encode_block(self.index_seq).unwrap();
        out.extend_from_slice(&block);
        out.extend_from_slice(&encode_trailer(off, block.len() as u64));
        out
    }
}

/// Copies trace `src` to `dst` record by record (blobs stored again), letting `edit` change each
/// call, given its command name, and return calls to write right after it (tests make traces
/// of real captures with, say, one more device extension enabled this way).
pub fn rewrite_calls(
    src: &std::path::Path,
    dst: &std::path::Path,
    mut edit: impl FnMut(&str, &mut crate::record::Call) -> Vec<crate::record::Call>,
) -> Result<(), crate::FormatError> {
    use crate::record::{Payload, Record};
    let reader = crate::TraceReader::open(src)?;
    let writer = crate::TraceWriter::create(dst, reader.header().clone())?;
    let mut names: Vec<String> = Vec::new();
    for rec in reader.records() {
        match rec? {
            Record::CommandTable(t) => {
                names = t.clone();
                writer.write(&Record::CommandTable(t))?;
            }
            Record::Call(mut c) => {
                let name = names.get(c.cmd as usize).cloned().unwrap_or_default();
                let more = edit(&name, &mut c);
                writer.write(&Record::Call(c))?;
                for m in more {
                    writer.write(&Record::Call(m))?;
                }
            }
            Record::MemoryWrite(mut w) => {
                if let Payload::Blob { .. } = w.data {
                    let bytes = reader.payload_bytes(&w.data)?;
                    w.data = writer.payload(&bytes)?;
                }
                writer.write(&Record::MemoryWrite(w))?;
            }
            r => writer.write(&r)?,
        }
    }
    writer.finish()?;
    Ok(())
}

/// Record-level forgery: every record of an intact file, with memory contents resolved inline,
/// so a test can delete, duplicate, reorder or edit records and write a file again whose every
/// checksum is valid ([`write_records`]).
pub fn read_records(
    path: &std::path::Path,
) -> Result<(crate::record::Header, Vec<crate::record::Record>), crate::FormatError> {
    use crate::record::{Payload, Record};
    let r = crate::TraceReader::open(path)?;
    let mut out = Vec::new();
    for rec in r.records() {
        let mut rec = rec?;
        if let Record::MemoryWrite(w) = &mut rec {
            if matches!(w.data, Payload::Blob { .. }) {
                w.data = Payload::Inline(r.payload_bytes(&w.data)?);
            }
        }
        out.push(rec);
    }
    Ok((r.header().clone(), out))
}

/// Writes `records` as a new file: large inline memory contents become blobs again and each
/// `Frame` record ends its frame, as the capture layer writes them. `block_size` small makes a
/// file of many blocks (for deleting one).
pub fn write_records(
    path: &std::path::Path,
    header: crate::record::Header,
    records: &[crate::record::Record],
    block_size: usize,
) -> Result<(), crate::FormatError> {
    use crate::record::{Payload, Record};
    let w = crate::TraceWriter::create_with(
        path,
        header,
        crate::WriterOptions {
            block_size,
            dictionary_bytes: 0,
            ..Default::default()
        },
    )?;
    for rec in records {
        match rec {
            Record::MemoryWrite(m) => {
                let mut m = m.clone();
                if let Payload::Inline(b) = &m.data {
                    m.data = w.payload(b)?;
                }
                w.write(&Record::MemoryWrite(m))?;
            }
            Record::Frame(f) => {
                w.write(rec)?;
                w.end_frame(f.index)?;
            }
            _ => w.write(rec)?,
        }
    }
    w.finish().map(|_| ())
}
