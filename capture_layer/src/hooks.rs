//! What every hand-written intercept uses: `rec!`/`rec_ops!` to record a call (and its query ops)
//! with the generated encoder, `next!` to fetch the next layer's function, and small pointer helpers.
//!
//! Pattern of a hand-written intercept: call down first and return exactly what the driver
//! returned; bookkeeping runs afterwards inside `runtime::guard`, so a layer bug stops capturing
//! instead of reaching the app.
//!
//! Depends on: `runtime`. Every intercept folder (`chain`, `memory`, `submit`, `queries`,
//! `query_copies`, `wsi`, `templates`) builds on it.

use ash::vk;
use ash::vk::Handle;
use std::ffi::{c_char, CStr};

pub use layer_support::entry::find_in_chain;

/// Records the generic `Call` of `$name` with the generated encoder; evaluates to the call's seq.
/// `$name` is a command name, or an id expression (`E::ID` of a hook shared by aliases).
macro_rules! rec {
    ($name:ident, $result:expr, |$e:ident| $body:expr) => {
        $crate::hooks::rec!(vkstream::ids::$name, $result, |$e| $body)
    };
    ($id:expr, $result:expr, |$e:ident| $body:expr) => {{
        // The generated constant, not a lookup by name cached in a static: one cache line
        // fewer for every call recorded here.
        $crate::runtime::record_call($id, $result, |$e| {
            #[allow(unused_unsafe)]
            unsafe {
                $body
            }
        })
    }};
}

/// Records the `Call` of `$name` and its `QueryOp`s (`$kinds` on `$pool`, recorded in `$cb`, 0
/// for a host command) under one lock; evaluates to the call's seq.
macro_rules! rec_ops {
    ($name:ident, $result:expr, |$e:ident| $body:expr, $cb:expr, $pool:expr, $kinds:expr) => {
        $crate::hooks::rec_ops!(
            vkstream::ids::$name,
            $result,
            |$e| $body,
            $cb,
            $pool,
            $kinds
        )
    };
    ($id:expr, $result:expr, |$e:ident| $body:expr, $cb:expr, $pool:expr, $kinds:expr) => {{
        $crate::runtime::record_call_ops(
            $id,
            $result,
            |$e| {
                #[allow(unused_unsafe)]
                unsafe {
                    $body
                }
            },
            $cb,
            $pool,
            $kinds,
        )
    }};
}

/// `rec!` for a command recorded into command buffer `$cb`: skipped while tracking when `$cb` is
/// light (`runtime::light`).
macro_rules! rec_cmd {
    ($id:expr, $cb:expr, |$e:ident| $body:expr) => {{
        $crate::runtime::record_cmd($id, $cb, 0, |$e| {
            #[allow(unused_unsafe)]
            unsafe {
                $body
            }
        })
    }};
}

pub(crate) use {rec, rec_cmd, rec_ops};

/// The next layer's function, or return `$ret` when the chain below does not provide it.
macro_rules! next {
    ($f:expr) => {
        match $f {
            Some(f) => f,
            None => return,
        }
    };
    ($f:expr, $ret:expr) => {
        match $f {
            Some(f) => f,
            None => return $ret,
        }
    };
}

pub(crate) use next;

/// One name of a command that vk.xml names more than once (core, KHR, EXT). A hook serving
/// several names is generic over it, and codegen's thunk of each name passes that name's entry,
/// so the hook calls down the function of the name the app called (on a device older than the
/// core version the extension's may be the only one loaded) and records the call under it (the
/// replay calls the same name). `T` is the dispatch table the function comes from.
pub trait Entry<F, T = vkstream::DeviceTable> {
    /// `vkstream::ids::<name>`.
    const ID: u32;
    /// The next layer's function of this name.
    fn next(t: &T) -> Option<F>;
}

pub const NOT_PRESENT: vk::Result = vk::Result::ERROR_EXTENSION_NOT_PRESENT;

pub fn raw<H: Handle>(h: H) -> u64 {
    h.as_raw()
}

pub unsafe fn slice<'a, T>(p: *const T, n: u32) -> &'a [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n as usize)
    }
}

pub unsafe fn cstr_list(p: *const *const c_char, n: u32) -> Vec<String> {
    slice(p, n)
        .iter()
        .filter(|s| !s.is_null())
        .map(|&s| CStr::from_ptr(s).to_string_lossy().into_owned())
        .collect()
}

/// A fixed-size C string field (device and counter names).
pub fn cstr_field(bytes: &[c_char]) -> String {
    let b: Vec<u8> = bytes
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}
