//! A fast hasher for the replay's handle maps, which are looked up several times per call.
//!
//! The keys are Vulkan handles (driver pointers or small integers) and object types: not chosen
//! by an adversary, so SipHash's DoS resistance buys nothing and costs ~20 ns per lookup. This is
//! a multiply-xorshift over 64-bit words; `finish` folds the high half in so that the low bits,
//! which pick the bucket, depend on every bit of pointer-like keys (low bits zero by alignment).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl HandleHasher {
    #[inline(always)]
    fn word(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(K);
    }
}

impl Hasher for HandleHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            self.word(u64::from_le_bytes(a));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(a) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline(always)]
    fn write_u8(&mut self, i: u8) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_u16(&mut self, i: u16) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_u32(&mut self, i: u32) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_i32(&mut self, i: i32) {
        self.word(i as u32 as u64);
    }
    #[inline(always)]
    fn write_u64(&mut self, i: u64) {
        self.word(i);
    }
    #[inline(always)]
    fn write_usize(&mut self, i: usize) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

pub type BuildHandleHasher = BuildHasherDefault<HandleHasher>;
/// A `HashMap` keyed by handles; build with `HandleMap::default()`.
pub type HandleMap<K, V> = HashMap<K, V, BuildHandleHasher>;
pub type HandleSet<K> = HashSet<K, BuildHandleHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_pointers_spread_over_buckets() {
        use std::hash::BuildHasher;
        let b = BuildHandleHasher::default();
        let mut low: HashSet<u64> = HashSet::new();
        for i in 0..1024u64 {
            let h = b.hash_one((17i32, 0x5555_0000_0000 + i * 64));
            low.insert(h & 1023);
        }
        // A good spread hits most of 1024 buckets with 1024 keys (random: ~647).
        assert!(low.len() > 550, "{} buckets", low.len());
    }

    #[test]
    fn map_works() {
        let mut m: HandleMap<(i32, u64), u64> = HandleMap::default();
        for i in 0..10_000u64 {
            m.insert((i as i32 % 7, i * 16), i);
        }
        for i in 0..10_000u64 {
            assert_eq!(m[&(i as i32 % 7, i * 16)], i);
        }
    }
}
