//! Edits of pNext chains the generated code materialised (the replayer's own, writable copies):
//! the hand-written replay changes the few members it must (a performance pool's counters, a
//! dedicated allocation's resource) after everything else went through the generated code.

use std::ffi::c_void;

use ash::vk;

/// The struct of type `s_type` in a chain the generated code materialised, if chained.
///
/// # Safety
/// `head` must be a valid chain of writable structs (the replayer's own copies).
pub(crate) unsafe fn chained<T>(head: *const c_void, s_type: vk::StructureType) -> Option<*mut T> {
    let mut p = head as *mut vk::BaseOutStructure<'_>;
    let mut left = vkstream::MAX_CHAIN;
    while !p.is_null() && left > 0 {
        if (*p).s_type == s_type {
            return Some(p as *mut T);
        }
        p = (*p).p_next;
        left -= 1;
    }
    None
}

/// Takes every struct of type `s_type` out of the chain that starts at `*head`.
///
/// # Safety
/// As [`chained`].
pub(crate) unsafe fn unchain(head: &mut *const c_void, s_type: vk::StructureType) {
    let mut link = head as *mut *const c_void;
    let mut left = vkstream::MAX_CHAIN;
    while !(*link).is_null() && left > 0 {
        let p = *link as *mut vk::BaseOutStructure<'_>;
        if (*p).s_type == s_type {
            *link = (*p).p_next as *const c_void;
        } else {
            link = &mut (*p).p_next as *mut *mut vk::BaseOutStructure<'_> as *mut *const c_void;
        }
        left -= 1;
    }
}
