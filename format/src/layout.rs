//! Fixed byte layouts of the container (see FORMAT.md): file prefix, block header, trailer.
//! Everything here is little-endian and independent of bincode, so a reader can find its way
//! through a file (and a newer reader through an older file) without decoding any record.

use xxhash_rust::xxh3::xxh3_64;

/// First 8 bytes of every quarry file. The high bit and CR/LF/^Z catch text-mode transfers.
pub const MAGIC: [u8; 8] = *b"\x89QRY\r\n\x1a\n";
/// Major version: readers refuse a newer major. 2: block numbers and the block size bound.
pub const VERSION_MAJOR: u16 = 2;
/// Minor version: additions an older reader of the same major can skip.
pub const VERSION_MINOR: u16 = 0;
/// Oldest major this reader still reads (1.x: no block numbers, 8-byte uncompressed lengths).
pub const OLDEST_MAJOR: u16 = 1;

/// Length of the fixed file prefix that precedes the bincode `Header`.
pub const PREFIX_LEN: usize = 32;
/// Upper bound on the encoded `Header` (it holds a device summary, a few KiB at most).
pub const MAX_HEADER_LEN: u32 = 16 << 20;

pub const BLOCK_MAGIC: [u8; 4] = *b"QBLK";
pub const BLOCK_HEADER_LEN: usize = 48;

pub const TRAILER_MAGIC: [u8; 8] = *b"QRYTAIL\n";
pub const TRAILER_LEN: usize = 32;

/// Largest single encoded record; also the bincode decode limit, so a crafted length inside a
/// record can never make the decoder allocate more than this.
pub const MAX_RECORD_LEN: usize = 256 << 20;
/// Largest block size a writer takes (`WriterOptions::block_size` is clamped to it).
pub const MAX_BLOCK_SIZE: usize = 64 << 20;
/// Blobs larger than this are stored as several blob blocks of at most this many bytes.
pub const BLOB_PIECE: usize = 64 << 20;
/// Largest uncompressed block a reader accepts, and the most a writer produces: a records block
/// is sealed once it reaches the block size, so it holds less than `MAX_BLOCK_SIZE` plus one
/// record with its length prefix; blob pieces, dictionaries and indexes are smaller.
pub const MAX_BLOCK_LEN: u64 = (MAX_BLOCK_SIZE + MAX_RECORD_LEN + 8) as u64;
/// Largest blob a writer stores (in pieces of `BLOB_PIECE`).
pub const MAX_BLOB_LEN: u64 = 4 << 30;

/// Block kinds. Readers skip kinds they do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Records,
    Blob,
    Index,
    Dict,
    Unknown(u8),
}

impl BlockKind {
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => BlockKind::Records,
            2 => BlockKind::Blob,
            3 => BlockKind::Index,
            4 => BlockKind::Dict,
            other => BlockKind::Unknown(other),
        }
    }
    pub fn to_u8(self) -> u8 {
        match self {
            BlockKind::Records => 1,
            BlockKind::Blob => 2,
            BlockKind::Index => 3,
            BlockKind::Dict => 4,
            BlockKind::Unknown(v) => v,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Records => "records",
            BlockKind::Blob => "blob",
            BlockKind::Index => "index",
            BlockKind::Dict => "dictionary",
            BlockKind::Unknown(_) => "unknown",
        }
    }
}

/// Payload codecs.
pub const CODEC_STORED: u8 = 0;
pub const CODEC_ZSTD: u8 = 1;
/// zstd with the raw-content dictionary held by the dictionary block named in the header.
pub const CODEC_ZSTD_DICT: u8 = 2;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The fixed file prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub major: u16,
    pub minor: u16,
    pub kind: u8,
    pub header_len: u32,
    pub checksum: u64,
}

impl Prefix {
    /// Prefix bytes with the checksum computed over bytes 0..24 followed by the header bytes.
    pub fn encode(kind: u8, header: &[u8]) -> [u8; PREFIX_LEN] {
        let mut b = [0u8; PREFIX_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION_MAJOR.to_le_bytes());
        b[10..12].copy_from_slice(&VERSION_MINOR.to_le_bytes());
        b[12] = kind;
        b[16..20].copy_from_slice(&(header.len() as u32).to_le_bytes());
        let sum = prefix_checksum(&b[..24], header);
        b[24..32].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Fields only; magic, version and checksum are judged by the caller in that order, so that
    /// a newer major version is reported as such even if the rest of its prefix changed.
    pub fn parse(b: &[u8]) -> Prefix {
        Prefix {
            major: u16_at(b, 8),
            minor: u16_at(b, 10),
            kind: b[12],
            header_len: u32_at(b, 16),
            checksum: u64_at(b, 24),
        }
    }
}

pub fn prefix_checksum(first24: &[u8], header: &[u8]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(first24);
    h.update(header);
    h.digest()
}

/// A block header as stored in front of each block payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub kind: BlockKind,
    pub codec: u8,
    /// Dictionary id for `CODEC_ZSTD_DICT`, else 0.
    pub dict: u16,
    pub records: u32,
    /// Frame index (record blocks), blob id (blob blocks), 0 otherwise.
    pub aux: u64,
    pub uncompressed_len: u64,
    pub stored_len: u64,
    pub payload_checksum: u64,
    /// Block number: the block's position among the file's blocks (format 2; 0 in 1.x files).
    pub seq: u32,
}

impl BlockHeader {
    pub fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut b = [0u8; BLOCK_HEADER_LEN];
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        b[4] = self.kind.to_u8();
        b[5] = self.codec;
        b[6..8].copy_from_slice(&self.dict.to_le_bytes());
        b[8..12].copy_from_slice(&self.records.to_le_bytes());
        b[16..24].copy_from_slice(&self.aux.to_le_bytes());
        // Writers never exceed MAX_BLOCK_LEN, which fits in 32 bits.
        b[24..28].copy_from_slice(&(self.uncompressed_len as u32).to_le_bytes());
        b[28..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.stored_len.to_le_bytes());
        b[40..48].copy_from_slice(&self.payload_checksum.to_le_bytes());
        let sum = block_header_checksum(&b);
        b[12..16].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Parses and checks magic and header checksum of a format-2 header; `Err` names the problem.
    pub fn parse(b: &[u8]) -> Result<BlockHeader, &'static str> {
        Self::parse_version(b, VERSION_MAJOR)
    }

    /// As [`parse`](Self::parse), for a file of format `major` (1: an 8-byte uncompressed length
    /// at 24 and no block number).
    pub fn parse_version(b: &[u8], major: u16) -> Result<BlockHeader, &'static str> {
        if b.len() < BLOCK_HEADER_LEN {
            return Err("truncated block header");
        }
        if b[0..4] != BLOCK_MAGIC {
            return Err("bad block magic");
        }
        if u32_at(b, 12) != block_header_checksum(&b[..BLOCK_HEADER_LEN]) {
            return Err("block header checksum mismatch");
        }
        Ok(BlockHeader {
            kind: BlockKind::from_u8(b[4]),
            codec: b[5],
            dict: u16_at(b, 6),
            records: u32_at(b, 8),
            aux: u64_at(b, 16),
            uncompressed_len: if major < 2 {
                u64_at(b, 24)
            } else {
                u64::from(u32_at(b, 24))
            },
            stored_len: u64_at(b, 32),
            payload_checksum: u64_at(b, 40),
            seq: if major < 2 { 0 } else { u32_at(b, 28) },
        })
    }

    pub fn total_len(&self) -> u64 {
        (BLOCK_HEADER_LEN as u64).saturating_add(self.stored_len)
    }
}

/// Low 32 bits of xxh3-64 over the 48 header bytes with the checksum field (12..16) zeroed.
fn block_header_checksum(b: &[u8]) -> u32 {
    let mut tmp = [0u8; BLOCK_HEADER_LEN];
    tmp.copy_from_slice(&b[..BLOCK_HEADER_LEN]);
    tmp[12..16].fill(0);
    xxh3_64(&tmp) as u32
}

pub fn payload_checksum(payload: &[u8]) -> u64 {
    xxh3_64(payload)
}

/// The fixed trailer at the very end of a cleanly closed file.
pub fn encode_trailer(index_offset: u64, index_len: u64) -> [u8; TRAILER_LEN] {
    let mut b = [0u8; TRAILER_LEN];
    b[0..8].copy_from_slice(&index_offset.to_le_bytes());
    b[8..16].copy_from_slice(&index_len.to_le_bytes());
    let sum = xxh3_64(&b[0..16]);
    b[16..24].copy_from_slice(&sum.to_le_bytes());
    b[24..32].copy_from_slice(&TRAILER_MAGIC);
    b
}

/// `(index block offset, index block total length)` when the trailer is intact.
pub fn parse_trailer(b: &[u8]) -> Option<(u64, u64)> {
    if b.len() != TRAILER_LEN || b[24..32] != TRAILER_MAGIC {
        return None;
    }
    if u64_at(b, 16) != xxh3_64(&b[0..16]) {
        return None;
    }
    Some((u64_at(b, 0), u64_at(b, 8)))
}

/// LEB128 of `v` into `out`; returns the byte count (1..=5).
pub fn put_varint(out: &mut [u8; 5], mut v: u32) -> usize {
    let mut i = 0;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = b;
            return i + 1;
        }
        out[i] = b | 0x80;
        i += 1;
    }
}

/// `(value, bytes used)` of the LEB128 at the start of `b`, at most 5 bytes.
pub fn get_varint(b: &[u8]) -> Option<(u32, usize)> {
    let mut v: u64 = 0;
    for (i, &byte) in b.iter().take(5).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return u32::try_from(v).ok().map(|v| (v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn varints_round_trip() {
        for v in [0u32, 1, 127, 128, 300, 16383, 16384, 1 << 28, u32::MAX] {
            let mut b = [0u8; 5];
            let n = put_varint(&mut b, v);
            assert_eq!(get_varint(&b[..n]), Some((v, n)));
        }
        assert_eq!(get_varint(&[0x80, 0x80]), None);
        assert_eq!(get_varint(&[0xff; 6]), None);
    }

    use super::*;

    #[test]
    fn block_header_roundtrip_and_checksum() {
        let h = BlockHeader {
            kind: BlockKind::Records,
            codec: CODEC_ZSTD,
            dict: 0,
            records: 7,
            aux: 3,
            uncompressed_len: 1000,
            stored_len: 100,
            payload_checksum: 42,
            seq: 9,
        };
        let mut b = h.encode();
        assert_eq!(BlockHeader::parse(&b), Ok(h));
        b[30] ^= 1;
        assert_eq!(
            BlockHeader::parse(&b),
            Err("block header checksum mismatch")
        );
    }

    #[test]
    fn trailer_roundtrip() {
        let mut t = encode_trailer(1234, 99);
        assert_eq!(parse_trailer(&t), Some((1234, 99)));
        t[3] ^= 0x10;
        assert_eq!(parse_trailer(&t), None);
    }
}
