//! The validator's one table of live objects: liveness, type, device and pool, and the state the
//! checks keep per object (fence and semaphore signals, command buffer and recording states,
//! buffer sizes and memory bindings, query counts, pipelines' vertex inputs) in the same slot,
//! so that a handle a call names is looked up once, not once per check.
//!
//! Slots live in a `Vec`, found by (object type, handle) through a hash map, and in front of it a
//! direct-mapped cache of recently found handles: a call mostly names what the calls
//! before it named (its device, queue, command buffer, fence), so most lookups are a compare.
//! A cache entry is cleared when its object ends, so that a hit is trusted without reading the
//! slot (it holds the device too: what the handle checks of a call need).
//!
//! A command buffer's state (its `sync` state, its recording as `record` and `compat` follow it,
//! the query ranges it uses) is larger than any other: its slot holds an index into a table of
//! such states (entries reused), so that every other slot stays small. A recorded command finds
//! it through the slot the handle pass found for its command buffer (`cb_at`).

use std::cell::Cell;

use crate::fasthash::HandleMap;

use super::cmds::CbCmds;
use super::record::Rec;
use super::sync::{CbState, FenceState, Sem};

/// A free slot's type.
const FREE: i32 = i32::MIN;
/// `Obj::memory` of a buffer or image with no memory bound yet.
pub(super) const UNBOUND: u64 = u64::MAX;
/// Cache lines (a power of two).
const CACHE: usize = 256;

/// A live captured object.
pub(super) struct Obj {
    /// `VkObjectType` (FREE: the slot is free).
    pub ty: i32,
    /// Creations not yet destroyed (drivers may hand out one non-dispatchable value twice).
    pub refs: u32,
    pub h: u64,
    /// Captured device it belongs to (0: instance-level).
    pub device: u64,
    /// Pool or swapchain it came from (0: none); ended with it.
    pub parent: u64,
    /// Buffers and images: the memory bound (UNBOUND: none yet; 0: needs none), and the slot
    /// that memory had when bound (to check it is still live without a lookup).
    pub memory: u64,
    pub memory_slot: u32,
    /// Buffer: its size; query pool: its query count; graphics pipeline: the vertex bindings it
    /// reads, below binding 63 (compute pipeline: bit 63). `None`: not known (checks that need it pass).
    pub info: Option<u64>,
    pub st: St,
    /// Named by a call `Compat` recorded (its `after`): it may keep records keyed by this handle,
    /// to be dropped when the object ends. Others end without asking it (a dozen map removals).
    pub compat: Cell<bool>,
}

/// What the synchronisation and recording checks keep per object.
pub(super) enum St {
    None,
    Fence(FenceState),
    Sem(Sem),
    /// Index into `Table::cbs` (kept apart, so that every other slot stays small).
    Cb(u32),
}

/// A command buffer: its state and its recording.
pub(super) struct Cb {
    pub state: CbState,
    /// Begun with SIMULTANEOUS_USE (may be submitted while pending).
    pub simultaneous: bool,
    /// Secondaries it executes (they run when it runs).
    pub secondaries: Vec<u64>,
    /// Queue of its last submission.
    pub queue: u64,
    /// A replayed submission ran it.
    pub ran: bool,
    /// The recording since its last begin (`None`: never begun).
    pub rec: Option<Rec>,
    /// What `Compat` follows of the recording (queries, passes, bound pipelines, sets and
    /// buffers: `cmds`).
    pub cmds: CbCmds,
    /// The query ranges the recording uses: (pool, first, end) (`sync`'s host resets).
    pub queries: Vec<(u64, u32, u32)>,
}

impl Cb {
    fn new() -> Self {
        Cb {
            state: CbState::Initial,
            simultaneous: false,
            secondaries: Vec::new(),
            queue: 0,
            ran: false,
            rec: None,
            cmds: CbCmds::default(),
            queries: Vec::new(),
        }
    }
}

pub(super) struct Table {
    ids: HandleMap<(i32, u64), u32>,
    slots: Vec<Obj>,
    free: Vec<u32>,
    /// Command buffers' state (`St::Cb` indexes it), and the entries free for reuse.
    cbs: Vec<Cb>,
    cbs_free: Vec<u32>,
    /// (type, handle, slot, device) of recently found live objects, by handle bits.
    cache: [Cell<(i32, u64, u32, u64)>; CACHE],
}

impl Default for Table {
    fn default() -> Self {
        // Sized for a typical trace's live objects, so that they do not grow step by step.
        Table {
            ids: HandleMap::with_capacity_and_hasher(256, Default::default()),
            slots: Vec::with_capacity(256),
            free: Vec::new(),
            cbs: Vec::new(),
            cbs_free: Vec::new(),
            cache: std::array::from_fn(|_| Cell::new((FREE, 0, 0, 0))),
        }
    }
}

#[inline(always)]
fn line(ty: i32, h: u64) -> usize {
    // Handles are pointers (low bits aligned, nearby objects close together) or small
    // integers: a multiply spreads every bit into the top ones, which pick the line.
    let x = (h ^ (ty as u64).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> (64 - CACHE.trailing_zeros())) as usize
}

impl Table {
    /// The slot of live object (`ty`, `h`).
    #[inline]
    pub(super) fn find(&self, ty: i32, h: u64) -> Option<u32> {
        self.find_dev(ty, h).map(|(i, _)| i)
    }

    /// The slot of live object (`ty`, `h`) and its device, from the cache when it is there
    /// (without touching the slot: a cache line is cleared when its object ends).
    #[inline]
    pub(super) fn find_dev(&self, ty: i32, h: u64) -> Option<(u32, u64)> {
        let c = &self.cache[line(ty, h)];
        let (t, x, i, d) = c.get();
        if t == ty && x == h {
            return Some((i, d));
        }
        let i = *self.ids.get(&(ty, h))?;
        let d = self.slots[i as usize].device;
        c.set((ty, h, i, d));
        Some((i, d))
    }

    /// Whether `slot` still holds live object (`ty`, `h`).
    #[inline]
    pub(super) fn holds(&self, slot: u32, ty: i32, h: u64) -> bool {
        self.slots
            .get(slot as usize)
            .is_some_and(|o| o.ty == ty && o.h == h)
    }

    #[inline]
    pub(super) fn at(&self, slot: u32) -> &Obj {
        &self.slots[slot as usize]
    }

    #[inline]
    pub(super) fn at_mut(&mut self, slot: u32) -> &mut Obj {
        &mut self.slots[slot as usize]
    }

    #[inline]
    pub(super) fn get(&self, ty: i32, h: u64) -> Option<&Obj> {
        self.find(ty, h).map(|i| self.at(i))
    }

    #[inline]
    pub(super) fn get_mut(&mut self, ty: i32, h: u64) -> Option<&mut Obj> {
        self.find(ty, h).map(|i| self.at_mut(i))
    }

    /// The slot of (`ty`, `h`), made (with no creation counted yet) when it is not live.
    pub(super) fn create(&mut self, ty: i32, h: u64, device: u64, parent: u64) -> u32 {
        if let Some(i) = self.find(ty, h) {
            return i;
        }
        let o = Obj {
            ty,
            refs: 0,
            h,
            device,
            parent,
            memory: UNBOUND,
            memory_slot: u32::MAX,
            info: None,
            st: St::None,
            compat: Cell::new(false),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = o;
                i
            }
            None => {
                self.slots.push(o);
                (self.slots.len() - 1) as u32
            }
        };
        self.ids.insert((ty, h), i);
        self.cache[line(ty, h)].set((ty, h, i, device));
        i
    }

    /// Gives the command buffer in `slot` its state (initial).
    pub(super) fn new_cb(&mut self, slot: u32) {
        let i = match self.cbs_free.pop() {
            Some(i) => {
                self.cbs[i as usize] = Cb::new();
                i
            }
            None => {
                self.cbs.push(Cb::new());
                (self.cbs.len() - 1) as u32
            }
        };
        self.slots[slot as usize].st = St::Cb(i);
    }

    /// A command buffer's state by its `St::Cb` index (one just ended stays readable until
    /// another command buffer is made).
    #[inline]
    pub(super) fn cb_data(&self, i: u32) -> &Cb {
        &self.cbs[i as usize]
    }

    /// Ends the object in `slot`; its checks' state is handed back.
    pub(super) fn remove(&mut self, slot: u32) -> St {
        let o = &mut self.slots[slot as usize];
        self.ids.remove(&(o.ty, o.h));
        let c = &self.cache[line(o.ty, o.h)];
        if c.get().0 == o.ty && c.get().1 == o.h {
            c.set((FREE, 0, 0, 0));
        }
        o.ty = FREE;
        self.free.push(slot);
        let st = std::mem::replace(&mut o.st, St::None);
        if let St::Cb(i) = st {
            self.cbs_free.push(i);
        }
        st
    }

    /// Slots of the live objects `f` picks.
    pub(super) fn live_where(&self, mut f: impl FnMut(&Obj) -> bool) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|i| {
                let o = &self.slots[*i as usize];
                o.ty != FREE && f(o)
            })
            .collect()
    }

    /// The command buffer in `slot` (a slot the handle pass found).
    #[inline]
    pub(super) fn cb_at(&self, slot: u32) -> Option<&Cb> {
        match self.slots.get(slot as usize)?.st {
            St::Cb(i) => Some(&self.cbs[i as usize]),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn cb_at_mut(&mut self, slot: u32) -> Option<&mut Cb> {
        match self.slots.get(slot as usize)?.st {
            St::Cb(i) => Some(&mut self.cbs[i as usize]),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn cb(&self, h: u64) -> Option<&Cb> {
        self.cb_at(self.find(CB, h)?)
    }

    #[inline]
    pub(super) fn cb_mut(&mut self, h: u64) -> Option<&mut Cb> {
        self.cb_at_mut(self.find(CB, h)?)
    }

    #[inline]
    pub(super) fn fence(&self, h: u64) -> Option<FenceState> {
        match self.get(FENCE, h)?.st {
            St::Fence(f) => Some(f),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn fence_mut(&mut self, h: u64) -> Option<&mut FenceState> {
        match &mut self.get_mut(FENCE, h)?.st {
            St::Fence(f) => Some(f),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn sem(&self, h: u64) -> Option<Sem> {
        match self.get(SEMAPHORE, h)?.st {
            St::Sem(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn sem_mut(&mut self, h: u64) -> Option<&mut Sem> {
        match &mut self.get_mut(SEMAPHORE, h)?.st {
            St::Sem(s) => Some(s),
            _ => None,
        }
    }

    /// `info` of live object (`ty`, `h`).
    #[inline]
    pub(super) fn info(&self, ty: i32, h: u64) -> Option<u64> {
        self.get(ty, h)?.info
    }
}

use ash::vk::ObjectType as T;
pub(super) const CB: i32 = T::COMMAND_BUFFER.as_raw();
pub(super) const FENCE: i32 = T::FENCE.as_raw();
pub(super) const SEMAPHORE: i32 = T::SEMAPHORE.as_raw();
pub(super) const BUFFER: i32 = T::BUFFER.as_raw();
pub(super) const IMAGE: i32 = T::IMAGE.as_raw();
pub(super) const MEMORY: i32 = T::DEVICE_MEMORY.as_raw();
pub(super) const QUERY_POOL: i32 = T::QUERY_POOL.as_raw();
pub(super) const PIPELINE: i32 = T::PIPELINE.as_raw();
