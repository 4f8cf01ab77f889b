//! Vulkan per-command parameter encoding and decoding for quarry traces.
//!
//! Everything per command is generated from vk.xml by `codegen` (`src/generated/`, checked in):
//! [`encode`] deep-copies a call's arguments into an [`Encoder`], [`decode_call`] turns those bytes
//! back into an owned, typed [`Call`], and [`InstanceTable`]/[`DeviceTable`] hold the next
//! function pointers for the layer and the replayer. This file is the hand-written part: the
//! byte writer/reader and the JSON helper trait.
//!
//! Wire format (little-endian): scalars as their fixed-size integers (handles, `size_t`, pointer
//! values as u64; enums as i32); every pointer as a flag byte (0 NULL, 1 present) then its
//! contents; arrays with a u64 element count; strings as a u64 byte count and bytes; unions as
//! their raw bytes; pNext chains as tagged elements (see [`encode::pnext`]).

pub mod coverage;
pub mod descriptor;
mod generated;
pub mod multiview;

pub use generated::commands::{
    command_id, ids, COMMANDS, IS_DEVICE_LEVEL, SPECIAL, UNSUPPORTED, UNSUPPORTED_EXTENSIONS,
};
pub use generated::decode::{decode_call, params, Call, PNext};
pub use generated::encode;
pub use generated::handles;
pub use generated::tables::{DeviceTable, InstanceTable};

/// Owned struct types (`types::VkBufferCreateInfo`, ...), as produced by the decoders.
pub mod types {
    pub use crate::generated::decode::*;
}

use std::ffi::{c_char, CStr};

/// Longest pNext chain that is followed; a longer (or cyclic) chain is cut there.
pub const MAX_CHAIN: usize = 256;

/// Little-endian writer into a growable buffer.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    buf: Vec<u8>,
    /// sType of the first chained struct written as sType only since the last `clear`
    /// (0: none; 0 is VK_STRUCTURE_TYPE_APPLICATION_INFO, never unknown).
    unknown_stype: i32,
}

impl Encoder {
    pub fn new() -> Self {
        Self {
            buf: Vec::with_capacity(256),
            unknown_stype: 0,
        }
    }
    /// Notes a chained struct that the encoder could only write as its sType.
    #[cold]
    pub fn note_unknown_stype(&mut self, s_type: i32) {
        if self.unknown_stype == 0 {
            self.unknown_stype = s_type;
        }
    }
    /// The sType of the first chained struct this encoder could not serialize since the last
    /// `clear` (the capture layer asks after encoding each call).
    pub fn unknown_stype(&self) -> Option<i32> {
        (self.unknown_stype != 0).then_some(self.unknown_stype)
    }
    /// An encoder that appends to `buf` (the capture layer lends it its trace's open block).
    pub fn from_vec(buf: Vec<u8>) -> Self {
        Self {
            buf,
            unknown_stype: 0,
        }
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
    /// Empties the buffer but keeps its capacity (the layer reuses one encoder per thread).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.unknown_stype = 0;
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    #[inline]
    pub fn i8(&mut self, v: i8) {
        self.buf.push(v as u8);
    }
    #[inline]
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn f32(&mut self, v: f32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// An element count.
    #[inline]
    pub fn count(&mut self, n: usize) {
        self.u64(n as u64);
    }
    /// Bytes without a length (the caller wrote the count, or the size is fixed).
    #[inline]
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// The raw bytes of a value (used for C unions).
    ///
    /// # Safety
    /// `T` must be plain data without padding that matters (Vulkan unions are).
    #[inline]
    pub unsafe fn raw_of<T>(&mut self, v: &T) {
        let b = std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>());
        self.buf.extend_from_slice(b);
    }
    /// A length-prefixed string.
    pub fn str(&mut self, s: &[u8]) {
        self.count(s.len());
        self.raw(s);
    }
    /// A NUL-terminated C string (the caller wrote the NULL flag).
    ///
    /// # Safety
    /// `p` must point to a NUL-terminated string.
    pub unsafe fn cstr(&mut self, p: *const c_char) {
        self.str(CStr::from_ptr(p).to_bytes());
    }
    /// A possibly NULL C string: flag byte, then the string.
    ///
    /// # Safety
    /// `p` must be NULL or point to a NUL-terminated string.
    pub unsafe fn opt_cstr(&mut self, p: *const c_char) {
        if p.is_null() {
            self.u8(0);
        } else {
            self.u8(1);
            self.cstr(p);
        }
    }
    /// A fixed-size `char[N]` member, up to its first NUL.
    pub fn fixed_str(&mut self, a: &[c_char]) {
        let n = a.iter().position(|&c| c == 0).unwrap_or(a.len());
        // SAFETY: c_char and u8 have the same size and alignment.
        let b = unsafe { std::slice::from_raw_parts(a.as_ptr() as *const u8, n) };
        self.str(b);
    }
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated parameters: need {need} bytes at offset {at}, {left} left")]
    Truncated { at: usize, need: usize, left: usize },
    #[error("bad pointer flag {value} at offset {at} (expected 0 or 1)")]
    BadFlag { at: usize, value: u8 },
    #[error("element count {count} at offset {at} exceeds the {left} bytes left")]
    CountTooLarge { at: usize, count: u64, left: usize },
    #[error("bad pNext chain tag {tag} at offset {at}")]
    BadTag { at: usize, tag: u8 },
    #[error("unknown command id {0}")]
    UnknownCommand(u32),
    #[error("pNext element with VkStructureType {0} marked known but not known to this build")]
    UnknownSType(i32),
    #[error("{left} unexpected bytes after the parameters at offset {at}")]
    TrailingBytes { at: usize, left: usize },
}

/// Bounds-checked little-endian reader; every read returns a `Result`, nothing panics.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

macro_rules! read_le {
    ($($name:ident: $t:ty),*) => {$(
        #[inline]
        pub fn $name(&mut self) -> Result<$t, DecodeError> {
            let b = self.raw(std::mem::size_of::<$t>())?;
            let mut a = [0u8; std::mem::size_of::<$t>()];
            a.copy_from_slice(b);
            Ok(<$t>::from_le_bytes(a))
        }
    )*};
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Errors unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            left => Err(DecodeError::TrailingBytes { at: self.pos, left }),
        }
    }
    /// The next `n` bytes.
    pub fn raw(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                at: self.pos,
                need: n,
                left: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    read_le!(u8: u8, i8: i8, u16: u16, i16: i16, u32: u32, i32: i32, u64: u64, i64: i64, f32: f32, f64: f64);

    /// A pointer's NULL flag.
    pub fn flag(&mut self) -> Result<bool, DecodeError> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::BadFlag { at, value }),
        }
    }
    /// An element count; every element takes at least one byte, so a count above the bytes left
    /// is corrupt (this bounds allocations on bad input).
    pub fn count(&mut self) -> Result<usize, DecodeError> {
        let at = self.pos;
        let count = self.u64()?;
        if count > self.remaining() as u64 {
            return Err(DecodeError::CountTooLarge {
                at,
                count,
                left: self.remaining(),
            });
        }
        Ok(count as usize)
    }
    /// A fixed element count known from the type, checked against the bytes left like [`Self::count`].
    pub fn fixed_count(&mut self, n: usize) -> Result<usize, DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::CountTooLarge {
                at: self.pos,
                count: n as u64,
                left: self.remaining(),
            });
        }
        Ok(n)
    }
    /// `n` scalars read as one block: one bounds check and one allocation, then a conversion the
    /// compiler can vectorise (arrays of handles, offsets, counts, ...).
    #[inline]
    pub fn scalars<T: Scalar>(&mut self, n: usize) -> Result<Vec<T>, DecodeError> {
        let need = n.checked_mul(T::SIZE).ok_or(DecodeError::CountTooLarge {
            at: self.pos,
            count: n as u64,
            left: self.remaining(),
        })?;
        Ok(self
            .raw(need)?
            .chunks_exact(T::SIZE)
            .map(T::from_le)
            .collect())
    }
    /// A C union's raw bytes (fixed size, stored inline).
    #[inline]
    pub fn union<const N: usize>(&mut self) -> Result<Union<N>, DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.raw(N)?);
        Ok(Union(a))
    }
    /// Length-prefixed bytes.
    pub fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.count()?;
        Ok(self.raw(n)?.to_vec())
    }
    /// A length-prefixed string (invalid UTF-8 is replaced, never rejected).
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let n = self.count()?;
        Ok(String::from_utf8_lossy(self.raw(n)?).into_owned())
    }
}

/// The raw bytes of a C union (`VkClearValue`, ...), held inline so that decoding one allocates
/// nothing; derefs to `[u8]` and prints as a JSON array of bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Union<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Union<N> {
    fn default() -> Self {
        Union([0; N])
    }
}

impl<const N: usize> std::ops::Deref for Union<N> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl<const N: usize> std::fmt::Debug for Union<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<const N: usize> ToJson for Union<N> {
    fn to_json(&self, out: &mut String) {
        out.push('[');
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            v.to_json(out);
        }
        out.push(']');
    }
}

/// A fixed-size little-endian value that [`Decoder::scalars`] reads in bulk.
pub trait Scalar: Copy {
    const SIZE: usize;
    /// From exactly `SIZE` bytes.
    fn from_le(b: &[u8]) -> Self;
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
scalar!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

/// Compact JSON for `quarry dump`, hand-rolled so that the generated types need no serde.
pub trait ToJson {
    fn to_json(&self, out: &mut String);
    fn json(&self) -> String {
        let mut s = String::new();
        self.to_json(&mut s);
        s
    }
}

macro_rules! json_int {
    ($($t:ty),*) => {$(
        impl ToJson for $t {
            fn to_json(&self, out: &mut String) {
                use std::fmt::Write;
                let _ = write!(out, "{}", self);
            }
        }
    )*};
}
json_int!(u8, i8, u16, i16, u32, i32, u64, i64);

macro_rules! json_float {
    ($($t:ty),*) => {$(
        impl ToJson for $t {
            fn to_json(&self, out: &mut String) {
                use std::fmt::Write;
                if self.is_finite() {
                    let _ = write!(out, "{}", self);
                } else {
                    // JSON has no NaN/inf: keep the value readable as a string.
                    let _ = write!(out, "\"{}\"", self);
                }
            }
        }
    )*};
}
json_float!(f32, f64);

impl ToJson for String {
    fn to_json(&self, out: &mut String) {
        use std::fmt::Write;
        out.push('"');
        for c in self.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self, out: &mut String) {
        match self {
            Some(v) => v.to_json(out),
            None => out.push_str("null"),
        }
    }
}

impl<T: ToJson> ToJson for Box<T> {
    fn to_json(&self, out: &mut String) {
        (**self).to_json(out)
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self, out: &mut String) {
        out.push('[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            v.to_json(out);
        }
        out.push(']');
    }
}

impl std::fmt::Display for Call {
    /// `vkCmdDraw{"command_buffer":...,"vertex_count":3,...}`: the name then the parameters as JSON.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.name(), self.to_json())
    }
}
