//! The footer index and the per-block summary both the writer and the reader use.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::reader::BlockDamage;

use crate::bincode_config;
use crate::layout::{payload_checksum, BlockHeader, BlockKind, CODEC_ZSTD, MAX_BLOCK_LEN};

/// One block of a file, as listed in the footer index or found by scanning.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// File offset of the block header.
    pub offset: u64,
    /// Raw block kind (1 records, 2 blob, 3 index; others are skipped).
    pub kind: u8,
    pub codec: u8,
    /// Dictionary block id (aux of a kind-4 block) when `codec` is 2.
    pub dict: u16,
    pub records: u32,
    /// Frame index for record blocks, blob id for blob blocks.
    pub aux: u64,
    pub uncompressed_len: u64,
    pub stored_len: u64,
    /// Block number (format 2). Not in the index's encoding: there it is the entry's position.
    #[serde(skip)]
    pub seq: u32,
}

impl BlockEntry {
    pub fn from_header(offset: u64, h: &BlockHeader) -> Self {
        BlockEntry {
            offset,
            kind: h.kind.to_u8(),
            codec: h.codec,
            dict: h.dict,
            records: h.records,
            aux: h.aux,
            uncompressed_len: h.uncompressed_len,
            stored_len: h.stored_len,
            seq: h.seq,
        }
    }

    pub fn kind(&self) -> BlockKind {
        BlockKind::from_u8(self.kind)
    }

    /// Header plus payload.
    pub fn total_len(&self) -> u64 {
        (crate::layout::BLOCK_HEADER_LEN as u64).saturating_add(self.stored_len)
    }
}

/// Contents of the index block written on close.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct FooterIndex {
    /// Every block before the index block, in file order.
    pub blocks: Vec<BlockEntry>,
    /// Records per type name, in first-seen order.
    pub record_counts: Vec<(String, u64)>,
    pub records: u64,
    /// `end_frame` calls.
    pub frames_ended: u64,
    pub blobs: u64,
    pub blob_dedup_hits: u64,
}

impl FooterIndex {
    /// The index block (header and payload) for this index, block number `seq`.
    pub fn encode_block(&self, seq: u32) -> Result<Vec<u8>, String> {
        let raw =
            bincode::serde::encode_to_vec(self, bincode_config()).map_err(|e| e.to_string())?;
        let stored = zstd::bulk::compress(&raw, 3).map_err(|e| e.to_string())?;
        let header = BlockHeader {
            kind: BlockKind::Index,
            codec: CODEC_ZSTD,
            dict: 0,
            records: 0,
            aux: 0,
            uncompressed_len: raw.len() as u64,
            stored_len: stored.len() as u64,
            payload_checksum: payload_checksum(&stored),
            seq,
        };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(&stored);
        Ok(out)
    }

    /// The index an index block's payload holds (checksum and lengths checked).
    pub fn decode_block(h: &BlockHeader, payload: &[u8]) -> Option<FooterIndex> {
        if h.kind != BlockKind::Index
            || h.codec != CODEC_ZSTD
            || payload_checksum(payload) != h.payload_checksum
            || h.uncompressed_len > MAX_BLOCK_LEN
        {
            return None;
        }
        let raw = zstd::bulk::decompress(payload, h.uncompressed_len as usize).ok()?;
        let (mut index, _): (FooterIndex, usize) =
            bincode::serde::decode_from_slice(&raw, bincode_config()).ok()?;
        for (i, b) in index.blocks.iter_mut().enumerate() {
            b.seq = i as u32;
        }
        Some(index)
    }
}

/// The block-number check of a file walked block by block (format 2, FORMAT.md "Reading").
#[derive(Default)]
pub(crate) struct Numbers {
    /// `(number, offset)` of blocks with a valid header that hold no data (index blocks,
    /// damaged payloads): not missing, but not read either.
    known: Vec<(u32, u64)>,
}

impl Numbers {
    pub(crate) fn damaged(&mut self, seq: u32, offset: u64) {
        self.known.push((seq, offset));
    }

    /// Drops duplicated blocks, puts the rest in block-number order, and reports duplicates,
    /// blocks out of order and numbers missing in between.
    pub(crate) fn check(&self, blocks: &mut Vec<BlockEntry>, damage: &mut Vec<BlockDamage>) {
        let mut first: HashMap<u32, u64> = self.known.iter().copied().collect();
        let mut kept = Vec::with_capacity(blocks.len());
        let mut highest: Option<u32> = None;
        for b in blocks.drain(..) {
            if let Some(&at) = first.get(&b.seq) {
                damage.push(BlockDamage {
                    offset: b.offset,
                    len: b.total_len(),
                    problem: format!(
                        "{} block number {} repeats the block at offset {at}; skipped",
                        b.kind().name(),
                        b.seq
                    ),
                });
                continue;
            }
            first.insert(b.seq, b.offset);
            if let Some(h) = highest.filter(|&h| b.seq < h) {
                damage.push(BlockDamage {
                    offset: b.offset,
                    len: 0,
                    problem: format!(
                        "{} block number {} comes after block {h}: out of order, read in block-number order",
                        b.kind().name(),
                        b.seq
                    ),
                });
            }
            highest = highest.max(Some(b.seq));
            kept.push(b);
        }
        kept.sort_by_key(|b| b.seq);
        *blocks = kept;
        let mut numbers: Vec<(u32, u64)> = first.into_iter().collect();
        numbers.sort_unstable();
        let mut expect = 0u32;
        for (n, at) in numbers {
            if n > expect {
                let which = if n - expect == 1 {
                    format!("block {expect} is missing")
                } else {
                    format!("blocks {expect} to {} are missing", n - 1)
                };
                damage.push(BlockDamage {
                    offset: at,
                    len: 0,
                    problem: format!("{which} (before block {n}, whose data is kept)"),
                });
            }
            expect = n.saturating_add(1);
        }
    }
}
