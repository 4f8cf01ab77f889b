//! The quarry trace and results container (specified byte by byte in `FORMAT.md`).
//!
//! A file is a fixed prefix and a bincode [`record::Header`], then self-delimiting blocks, each an
//! independent zstd frame of length-prefixed bincode [`record::Record`]s or one content-addressed
//! blob, then a footer index. [`TraceWriter`] streams records from many threads;
//! [`TraceReader`] reads through a memory map one block at a time and recovers every complete
//! block of a file whose writer was killed.
pub mod record;

mod error;
pub mod forge;
pub mod frames;
mod identity;
mod index;
pub mod layout;
pub mod query;
mod reader;
pub mod runs;
mod writer;

pub use error::{FormatError, Problem};
pub use identity::{check_results, ResultsCheck};
pub use index::{BlockEntry, FooterIndex};
pub use reader::{BlockDamage, BlockRecords, Info, Records, TraceReader};
pub use writer::{is_writer_thread, QueryResultsRef, TraceWriter, WriteSummary, WriterOptions};

use record::FileKind;

/// Number of `Record` variants this build knows. Records whose variant index is at or above this
/// come from a newer writer and are skipped. A unit test fails when a variant is appended without
/// bumping it.
pub const KNOWN_RECORD_VARIANTS: u8 = 22;

/// The bincode configuration of every encoded structure in the file. The limit only affects
/// decoding: it bounds what a crafted length can make the decoder allocate.
pub(crate) fn bincode_config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<{ layout::MAX_RECORD_LEN }>,
> {
    bincode::config::standard().with_limit::<{ layout::MAX_RECORD_LEN }>()
}

/// `Record::type_name` of each variant index (the bincode variant byte), checked by a test.
pub const RECORD_NAMES: [&str; KNOWN_RECORD_VARIANTS as usize] = [
    "CommandTable",
    "Call",
    "MemoryWrite",
    "Frame",
    "Device",
    "QueryPool",
    "QueryOp",
    "QueryResults",
    "QueryCopy",
    "QueryAvailable",
    "Submit",
    "Calibration",
    "DebugName",
    "Note",
    "ReplayInfo",
    "QueryResult",
    "CounterValue",
    "RegionCounters",
    "StateBegin",
    "StateEnd",
    "TraceIdentity",
    "TargetProfile",
];

pub(crate) fn file_kind_byte(kind: FileKind) -> u8 {
    match kind {
        FileKind::Trace => 0,
        FileKind::Results => 1,
    }
}

pub(crate) fn file_kind_from_byte(b: u8) -> Option<FileKind> {
    match b {
        0 => Some(FileKind::Trace),
        1 => Some(FileKind::Results),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::*;

    fn encode(r: &Record) -> Vec<u8> {
        bincode::serde::encode_to_vec(r, bincode_config()).unwrap()
    }

    #[test]
    fn variant_byte_is_first_and_known_count_matches_the_enum() {
        let last = Record::TargetProfile(TargetProfile {
            name: String::new(),
            hash: String::new(),
            profile: String::new(),
        });
        assert_eq!(encode(&last)[0], KNOWN_RECORD_VARIANTS - 1);
        assert_eq!(encode(&Record::CommandTable(vec![]))[0], 0);
        // The first unknown index must not decode: if it does, a variant was appended and
        // KNOWN_RECORD_VARIANTS must grow with it.
        let mut bytes = vec![KNOWN_RECORD_VARIANTS];
        bytes.resize(4096, 0);
        assert!(bincode::serde::decode_from_slice::<Record, _>(&bytes, bincode_config()).is_err());
        for (i, name) in RECORD_NAMES.iter().enumerate() {
            bytes[0] = i as u8;
            let (r, _) =
                bincode::serde::decode_from_slice::<Record, _>(&bytes, bincode_config()).unwrap();
            assert_eq!(r.type_name(), *name, "variant {i}");
        }
    }
}
