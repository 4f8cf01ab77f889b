//! Finding the blocks of a file: the footer index checked against every block it names, and,
//! when the footer is missing or lies, a scan of block headers that resynchronises past damage.

use super::{size_problem, BlockDamage, Dctx, TraceReader};
use crate::bincode_config;
use crate::index::{BlockEntry, FooterIndex};
use crate::layout::*;

impl TraceReader {
    /// The block header at `offset`, parsed for this file's version.
    pub(super) fn header_at(&self, offset: u64) -> Result<BlockHeader, &'static str> {
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
    pub(super) fn read_footer(&self) -> Result<FooterIndex, Option<BlockDamage>> {
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
    pub(super) fn scan(&mut self) {
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
}
