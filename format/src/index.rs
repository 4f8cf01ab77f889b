//! The footer index and the per-block summary both the writer and the reader use.

use serde::{Deserialize, Serialize};

use crate::layout::{BlockHeader, BlockKind};

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
}

impl BlockEntry {
    pub(crate) fn from_header(offset: u64, h: &BlockHeader) -> Self {
        BlockEntry {
            offset,
            kind: h.kind.to_u8(),
            codec: h.codec,
            dict: h.dict,
            records: h.records,
            aux: h.aux,
            uncompressed_len: h.uncompressed_len,
            stored_len: h.stored_len,
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
