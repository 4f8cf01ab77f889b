//! Lock-free lookup from a loader dispatch key to per-instance / per-device data.
//!
//! Every intercepted call does one lookup, so reads take no lock: a fixed array of (key, pointer) slots
//! scanned with acquire loads. Inserts and removals are rare and serialised by a mutex. Values are leaked
//! `&'static` data: a call racing with vkDestroyDevice on another thread is an app bug, but must still not
//! touch freed memory in the layer.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

const SLOTS: usize = 256;

/// A key next to its value: a lookup reads one cache line, not one in each of two arrays.
struct Slot<T: 'static> {
    key: AtomicUsize,
    value: AtomicPtr<T>,
}

pub struct KeyMap<T: 'static> {
    slots: [Slot<T>; SLOTS],
    lock: Mutex<()>,
}

impl<T: 'static> KeyMap<T> {
    pub const fn new() -> Self {
        KeyMap {
            slots: [const {
                Slot {
                    key: AtomicUsize::new(0),
                    value: AtomicPtr::new(std::ptr::null_mut()),
                }
            }; SLOTS],
            lock: Mutex::new(()),
        }
    }

    #[inline]
    pub fn get(&self, key: usize) -> Option<&'static T> {
        if key == 0 {
            return None;
        }
        for i in 0..SLOTS {
            if self.slots[i].key.load(Ordering::Acquire) == key {
                let p = self.slots[i].value.load(Ordering::Acquire);
                // SAFETY: values are leaked boxes, never freed.
                return unsafe { p.as_ref() };
            }
        }
        None
    }

    /// Inserts (or replaces) `key`; returns false when every slot is taken.
    pub fn insert(&self, key: usize, value: &'static T) -> bool {
        if key == 0 {
            return false;
        }
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let ptr = value as *const T as *mut T;
        for i in 0..SLOTS {
            if self.slots[i].key.load(Ordering::Relaxed) == key {
                self.slots[i].value.store(ptr, Ordering::Release);
                return true;
            }
        }
        for i in 0..SLOTS {
            if self.slots[i].key.load(Ordering::Relaxed) == 0 {
                self.slots[i].value.store(ptr, Ordering::Release);
                self.slots[i].key.store(key, Ordering::Release);
                return true;
            }
        }
        false
    }

    pub fn remove(&self, key: usize) -> Option<&'static T> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        for i in 0..SLOTS {
            if key != 0 && self.slots[i].key.load(Ordering::Relaxed) == key {
                self.slots[i].key.store(0, Ordering::Release);
                let p = self.slots[i].value.load(Ordering::Acquire);
                return unsafe { p.as_ref() };
            }
        }
        None
    }

    /// All live values (for process-exit finalisation).
    pub fn values(&self) -> Vec<&'static T> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        (0..SLOTS)
            .filter(|&i| self.slots[i].key.load(Ordering::Relaxed) != 0)
            .filter_map(|i| unsafe { self.slots[i].value.load(Ordering::Acquire).as_ref() })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove() {
        static M: KeyMap<u32> = KeyMap::new();
        let a: &'static u32 = Box::leak(Box::new(7));
        let b: &'static u32 = Box::leak(Box::new(9));
        assert!(M.get(1).is_none());
        assert!(M.insert(1, a));
        assert!(M.insert(2, b));
        assert_eq!(M.get(1), Some(&7));
        assert_eq!(M.get(2), Some(&9));
        assert_eq!(M.remove(1), Some(&7));
        assert!(M.get(1).is_none());
        assert_eq!(M.values(), vec![&9]);
        assert!(!M.insert(0, a), "key 0 means empty and is refused");
    }
}
