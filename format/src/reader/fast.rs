//! A hand-written decoder for `Record::QueryResult`, the record a results file holds one of per
//! query (a million in a large file), where bincode's serde path spends most of the reading time.
//!
//! It reads the bytes exactly as bincode 2's standard configuration lays them out (varint
//! integers, zigzag `i32`, one-byte `bool` and `Option` tags, fixed 8-byte `f64`, fields in
//! declaration order) and returns `None` at anything unusual; the caller then decodes with serde,
//! which gives the same value or the same error as before. A test checks it against serde on
//! random records and on damaged bytes.

use crate::record::{QueryBegin, QueryDevice, QueryResult, QueryValues};

/// Variant index of `Record::QueryResult`.
pub(super) const QUERY_RESULT_VARIANT: u8 = 15;

struct Cur<'a>(&'a [u8]);

impl Cur<'_> {
    #[inline]
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (a, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*a)
    }
    #[inline]
    fn byte(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    #[inline]
    fn u64(&mut self) -> Option<u64> {
        match self.byte()? {
            b @ 0..=250 => Some(u64::from(b)),
            251 => self.take().map(|b| u64::from(u16::from_le_bytes(b))),
            252 => self.take().map(|b| u64::from(u32::from_le_bytes(b))),
            253 => self.take().map(u64::from_le_bytes),
            _ => None,
        }
    }
    #[inline]
    fn u32(&mut self) -> Option<u32> {
        match self.byte()? {
            b @ 0..=250 => Some(u32::from(b)),
            251 => self.take().map(|b| u32::from(u16::from_le_bytes(b))),
            252 => self.take().map(u32::from_le_bytes),
            _ => None,
        }
    }
    #[inline]
    fn i32(&mut self) -> Option<i32> {
        let n = self.u32()?;
        Some(if n % 2 == 0 {
            (n / 2) as i32
        } else {
            !(n / 2) as i32
        })
    }
    #[inline]
    fn bool(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    #[inline]
    fn f64(&mut self) -> Option<f64> {
        self.take().map(f64::from_le_bytes)
    }
    #[inline]
    fn option<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.byte()? {
            0 => Some(None),
            1 => f(self).map(Some),
            _ => None,
        }
    }
    fn begin(&mut self) -> Option<QueryBegin> {
        Some(QueryBegin {
            flags: self.u32()?,
            view_mask: self.u32()?,
            first: self.u32()?,
        })
    }
    fn device(&mut self) -> Option<QueryDevice> {
        let handle = self.u64()?;
        let index = self.u32()?;
        let n = self.u64()?;
        if n > self.0.len() as u64 {
            return None;
        }
        let (name, rest) = self.0.split_at(n as usize);
        let captured_on = std::str::from_utf8(name).ok()?.to_string();
        self.0 = rest;
        Some(QueryDevice {
            handle,
            index,
            captured_on,
        })
    }
    fn values(&mut self) -> Option<QueryValues> {
        let n = self.u64()?;
        // Every value takes at least one byte: a longer list is damage (serde reports it).
        if n > self.0.len() as u64 {
            return None;
        }
        let mut values = Vec::with_capacity(n as usize);
        for _ in 0..n {
            values.push(self.u64()?);
        }
        Some(QueryValues {
            values,
            available: self.bool()?,
            result: self.i32()?,
            host_ns: self.u64()?,
        })
    }
}

/// Decodes the fields of a `QueryResult` (the bytes after the variant index). Bytes after
/// the last field are ignored, as the serde path ignores them (fields of a newer minor).
pub(super) fn query_result(bytes: &[u8]) -> Option<QueryResult> {
    let mut c = Cur(bytes);
    Some(QueryResult {
        pool: c.u64()?,
        query: c.u32()?,
        query_type: c.i32()?,
        pipeline_statistics: c.u32()?,
        frame: c.u64()?,
        queue: c.u64()?,
        command_buffer: c.u64()?,
        loop_index: c.u32()?,
        pass: c.u32()?,
        seq: c.u64()?,
        flags: c.u32()?,
        captured: c.option(Cur::values)?,
        replayed: c.option(Cur::values)?,
        submit_ns: c.u64()?,
        available_ns: c.u64()?,
        captured_gpu_ns: c.option(Cur::f64)?,
        replayed_gpu_ns: c.option(Cur::f64)?,
        // Appended in 2.0: absent where the bytes end, as the serde path reads them. Bytes
        // that do not decode are left to serde (where a damaged `begin` stops, the next
        // field's read starts).
        begin: match c.option(Cur::begin) {
            Some(b) => b,
            None if c.0.is_empty() => None,
            None => return None,
        },
        device: c.option(Cur::device).unwrap_or(None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bincode_config;
    use crate::record::Record;
    use proptest::prelude::*;

    fn values() -> impl Strategy<Value = Option<QueryValues>> {
        proptest::option::of(
            (
                proptest::collection::vec(
                    prop_oneof![0u64..300, 0u64..70_000, any::<u64>()],
                    0..12,
                ),
                any::<bool>(),
                any::<i32>(),
                any::<u64>(),
            )
                .prop_map(|(values, available, result, host_ns)| QueryValues {
                    values,
                    available,
                    result,
                    host_ns,
                }),
        )
    }

    fn small_or_any_u64() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..300, 0u64..70_000, 0u64..(1 << 33), any::<u64>()]
    }

    fn small_or_any_u32() -> impl Strategy<Value = u32> {
        prop_oneof![0u32..300, 0u32..70_000, any::<u32>()]
    }

    prop_compose! {
        fn any_query_result()(
            ints in proptest::collection::vec(small_or_any_u64(), 7),
            smalls in proptest::collection::vec(small_or_any_u32(), 5),
            signed in any::<i32>(),
            captured in values(),
            replayed in values(),
            cg in proptest::option::of(any::<f64>()),
            rg in proptest::option::of(any::<f64>()),
            begin in proptest::option::of((small_or_any_u32(), small_or_any_u32(), small_or_any_u32())),
            device in proptest::option::of((small_or_any_u64(), small_or_any_u32(), "[a-zA-Z0-9 ()]{0,24}")),
        ) -> QueryResult {
            QueryResult {
                pool: ints[0],
                query: smalls[0],
                query_type: signed,
                pipeline_statistics: smalls[1],
                frame: ints[1],
                queue: ints[2],
                command_buffer: ints[3],
                loop_index: smalls[2],
                pass: smalls[3],
                seq: ints[4],
                flags: smalls[4],
                captured,
                replayed,
                submit_ns: ints[5],
                available_ns: ints[6],
                captured_gpu_ns: cg,
                replayed_gpu_ns: rg,
                begin: begin.map(|(flags, view_mask, first)| QueryBegin { flags, view_mask, first }),
                device: device.map(|(handle, index, captured_on)| QueryDevice { handle, index, captured_on }),
            }
        }
    }

    fn serde(bytes: &[u8]) -> Option<Record> {
        bincode::serde::decode_from_slice::<Record, _>(bytes, bincode_config())
            .ok()
            .map(|(r, _)| r)
    }

    /// `Debug` compares NaN payload-insensitively but still distinguishes NaN from numbers.
    fn same(a: &Record, b: &Record) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn decodes_what_bincode_encodes(q in any_query_result(), extra in proptest::collection::vec(any::<u8>(), 0..4)) {
            let rec = Record::QueryResult(q);
            let mut bytes = bincode::serde::encode_to_vec(&rec, bincode_config()).unwrap();
            prop_assert_eq!(bytes[0], QUERY_RESULT_VARIANT);
            // Appended bytes stand for fields of a newer minor version.
            bytes.extend(extra);
            let fast = Record::QueryResult(query_result(&bytes[1..]).expect("fast decode"));
            prop_assert!(same(&fast, &serde(&bytes).unwrap()));
        }

        #[test]
        fn damaged_bytes_decode_as_serde_does_or_fall_back(
            q in any_query_result(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let rec = Record::QueryResult(q);
            let mut bytes = bincode::serde::encode_to_vec(&rec, bincode_config()).unwrap();
            for (i, b) in flips {
                let i = i.index(bytes.len() - 1) + 1;
                bytes[i] = b;
            }
            let bytes = &bytes[..1 + cut.index(bytes.len())];
            if let Some(f) = query_result(&bytes[1..]) {
                let s = serde(bytes);
                prop_assert!(s.is_some(), "fast decoded what serde refuses");
                prop_assert!(same(&Record::QueryResult(f), &s.unwrap()));
            }
        }
    }

    /// Results written before `QueryResult::begin` end after `replayed_gpu_ns`: both decoders
    /// read them with the field absent; a file with it reads it back.
    #[test]
    fn results_before_the_begin_field_read_as_unknown() {
        let mut b = vec![QUERY_RESULT_VARIANT, 7];
        b.extend([0; 10]);
        b.extend([0, 0, 0, 0, 0, 0]);
        let fast = query_result(&b[1..]).unwrap();
        let Some(Record::QueryResult(slow)) = serde(&b) else {
            panic!("serde refuses an old record")
        };
        assert_eq!((fast.pool, fast.begin), (7, None));
        assert_eq!(slow, fast);
        let begin = QueryBegin {
            flags: 1,
            view_mask: 0b11,
            first: 4,
        };
        let new = Record::QueryResult(QueryResult {
            begin: Some(begin),
            ..fast
        });
        let bytes = bincode::serde::encode_to_vec(&new, bincode_config()).unwrap();
        assert_eq!(query_result(&bytes[1..]).unwrap().begin, Some(begin));
        assert!(same(&serde(&bytes).unwrap(), &new));
    }

    /// Results written with `begin` but before `QueryResult::device` read the device as
    /// unknown; a file with it reads it back, with either decoder.
    #[test]
    fn results_before_the_device_field_read_as_unknown() {
        let mut b = vec![QUERY_RESULT_VARIANT, 7];
        b.extend([0; 10]);
        b.extend([0, 0, 0, 0, 0, 0]);
        let old = QueryResult {
            begin: Some(QueryBegin {
                flags: 1,
                view_mask: 0,
                first: 2,
            }),
            device: None,
            ..query_result(&b[1..]).unwrap()
        };
        let mut bytes =
            bincode::serde::encode_to_vec(Record::QueryResult(old.clone()), bincode_config())
                .unwrap();
        // Without the device field: its `None` tag is the record's last byte.
        assert_eq!(bytes.pop(), Some(0));
        assert_eq!(query_result(&bytes[1..]).unwrap(), old);
        assert!(same(
            &serde(&bytes).unwrap(),
            &Record::QueryResult(old.clone())
        ));
        let device = QueryDevice {
            handle: 0x55aa,
            index: 1,
            captured_on: "llvmpipe (LLVM 19.1.7, 256 bits)".into(),
        };
        let new = QueryResult {
            device: Some(device.clone()),
            ..old
        };
        let rec = Record::QueryResult(new.clone());
        let bytes = bincode::serde::encode_to_vec(&rec, bincode_config()).unwrap();
        assert_eq!(query_result(&bytes[1..]).unwrap().device, Some(device));
        assert!(same(&serde(&bytes).unwrap(), &rec));
    }

    #[test]
    fn non_canonical_and_bad_tags() {
        // 5 as a u16 varint is accepted by bincode, and so here.
        let mut b = vec![251, 5, 0];
        b.extend([0; 10]);
        b.extend([0, 0, 0, 0, 0, 0]);
        let q = query_result(&b).unwrap();
        assert_eq!(q.pool, 5);
        // An Option tag of 2 and a bool of 2 are refused (serde refuses them too).
        let mut bad = b.clone();
        bad[13] = 2;
        assert!(query_result(&bad).is_none());
        assert!(serde(&[&[QUERY_RESULT_VARIANT][..], &bad].concat()).is_none());
        // A u128 marker in a u64 field.
        assert!(query_result(&[254, 0]).is_none());
    }
}
