//! `--memory rebind|auto`: memory portability between GPUs.
//!
//! Apps sub-allocate: they bind many resources into one allocation at offsets computed from the
//! capture GPU's alignments and sizes, which another GPU may reject (`remap` replays them as
//! they are). Under `rebind` each buffer and image gets its own allocation, sized by the replay
//! GPU's requirements, from a type that keeps the captured type's property flags; the resource's
//! captured range (its offset in the captured allocation, and the size the capture GPU reported)
//! is a [`Piece`] of that allocation. Every captured (memory, offset) a host write, a read-back or
//! a snapshot upload names is translated to the pieces holding it; bytes written where no resource
//! is bound yet are kept and applied when one is.
//!
//! Recycled ranges (a resource bound over bytes a destroyed one was bound to; Zink does this with
//! its slab ranges and relies on what was written there): the destroyed resource's allocation is
//! kept while it holds bytes no later piece covers, and a buffer bound over them gets them by a
//! GPU copy at its bind, so it starts with what the GPU and the host wrote through the old one, as
//! under remap (`contents`). Grouping such resources into one allocation laid out as captured
//! would be remap again for Zink's slabs, and fail where remap fails.
//!
//! Aliasing (two live resources bound to overlapping captured ranges): a resource whose captured
//! range lies inside one already placed is bound into that resource's allocation, at the same
//! distance from its start, when this GPU's alignment, size and type bits accept it there (Zink
//! binds several buffers over the same bytes). Any other overlap is refused under rebind with one
//! error naming both resources: separate allocations cannot share contents. `auto` keeps remap
//! whenever every placement fits, so such traces still replay where the requirements agree.
//!
//! `plan` gathers the binds before the replay; this module decides at the first bind and places
//! the pieces; `contents` says which piece holds which bytes and reads, writes and carries them.
//! Dependencies: session and mapping, never the calls or the engine.

mod contents;
mod plan;

use std::ffi::c_void;

use ash::vk;
use ash::vk::Handle as _;

pub use self::plan::{scan, Allocation, Bind, Counts, Created, Decision, Kind, Plan};
use crate::chain::chained;
use crate::engine::MemoryMode;
use crate::error::ReplayError;
use crate::generated::dispatch::{m_chain, Arena};
use crate::mapping;
use crate::session::Session;

/// A resource's captured range of a captured allocation, and the replay allocation that holds it.
pub struct Piece {
    pub kind: Kind,
    /// Captured buffer or image.
    pub resource: u64,
    /// Offset of the range in the captured allocation.
    pub offset: u64,
    /// Captured bytes the resource covers.
    pub extent: u64,
    /// `seq` of the bind that made the piece: where pieces overlap, the latest bound holds the
    /// bytes (see `contents`).
    pub bound: u64,
    /// `seq` of the resource's destroy (of the last one, with sharers). A destroyed resource's
    /// allocation is kept while it holds bytes no later piece covers: a resource bound over
    /// them later starts with them.
    pub dies: Option<u64>,
    /// Other resources bound inside this piece's allocation (aliases that fit there).
    pub sharers: u32,
    pub memory: vk::DeviceMemory,
    pub size: u64,
    pub type_index: u32,
    pub host_visible: bool,
    pub coherent: bool,
    /// Kept mapped from the bind when the trace touches this memory from the host.
    pub mapped: *mut u8,
}

impl Piece {
    /// Whether the trace destroyed this piece's resources before call `seq`.
    pub fn dead_at(&self, seq: u64) -> bool {
        self.dies.is_some_and(|d| d < seq)
    }

    fn end(&self) -> u64 {
        self.offset.saturating_add(self.extent)
    }

    /// The part of captured `[start, end)` this piece covers, as (captured start, captured end).
    pub fn overlap(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let (a, b) = (start.max(self.offset), end.min(self.end()));
        (a < b).then_some((a, b))
    }
}

/// A resource's placement as the capture made it and the replay GPU's requirements for it.
#[derive(Debug, Clone)]
pub struct Placement {
    pub kind: Kind,
    pub resource: u64,
    pub memory: u64,
    pub offset: u64,
    pub allocation: Allocation,
    pub requirements: vk::MemoryRequirements,
}

/// Why `remap` cannot replay these placements (in bind order), as the first resource that does
/// not fit: its offset breaks the replay alignment, it ends beyond its allocation, or the memory
/// type remap picks for the allocation's first resource does not suit it. `pick` chooses the
/// type of an allocation (captured memory) from a resource's `memoryTypeBits`, as remap does.
pub fn first_misfit(
    placements: &[Placement],
    mut pick: impl FnMut(u64, u32, u32) -> Option<u32>,
) -> Option<String> {
    use std::collections::HashMap;
    let mut binds_per_memory: HashMap<u64, usize> = HashMap::new();
    for p in placements {
        *binds_per_memory.entry(p.memory).or_default() += 1;
    }
    // Captured memory -> (replay size, replay type), as remap makes it at its first bind.
    let mut made: HashMap<u64, (u64, Option<u32>)> = HashMap::new();
    for p in placements {
        let (what, r) = (
            format!("{} 0x{:x}", p.kind.name(), p.resource),
            p.requirements,
        );
        if r.alignment > 1 && !p.offset.is_multiple_of(r.alignment) {
            return Some(format!(
                "{what} is bound at offset {} of memory 0x{:x}, not a multiple of the replay GPU's alignment {}",
                p.offset, p.memory, r.alignment
            ));
        }
        let end = p.offset.saturating_add(r.size);
        let &mut (size, ty) = made.entry(p.memory).or_insert_with(|| {
            (
                p.allocation.size.max(end),
                pick(p.memory, p.allocation.type_index, r.memory_type_bits),
            )
        });
        if end > size && binds_per_memory[&p.memory] > 1 {
            return Some(format!(
                "{what} needs {} bytes at offset {} of memory 0x{:x}, which has {size}",
                r.size, p.offset, p.memory
            ));
        }
        match ty {
            None => {
                return Some(format!(
                    "no memory type of the replay GPU suits {what} and the captured type of memory 0x{:x}",
                    p.memory
                ))
            }
            Some(t) if t >= 32 || r.memory_type_bits & (1 << t) == 0 => {
                return Some(format!(
                    "{what} cannot use replay memory type {t}, which memory 0x{:x} gets for the resource bound first",
                    p.memory
                ))
            }
            _ => {}
        }
    }
    None
}

/// Host bytes at captured offsets: `(offset, bytes)`.
pub type Runs = Vec<(u64, Vec<u8>)>;

/// Splits byte runs into those inside `[start, end)` and the rest.
pub fn take_range(runs: Runs, start: u64, end: u64) -> (Runs, Runs) {
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for (o, d) in runs {
        let e = o + d.len() as u64;
        let (a, b) = (o.max(start), e.min(end));
        if a >= b {
            outside.push((o, d));
            continue;
        }
        if o < a {
            outside.push((o, d[..(a - o) as usize].to_vec()));
        }
        inside.push((a, d[(a - o) as usize..(b - o) as usize].to_vec()));
        if b < e {
            outside.push((b, d[(b - o) as usize..].to_vec()));
        }
    }
    (inside, outside)
}

/// Overlapping captured ranges of live resources: the piece alive at call `seq` that
/// `offset..offset+extent` collides with.
pub fn aliased(pieces: &[Piece], offset: u64, extent: u64, seq: u64) -> Option<usize> {
    pieces
        .iter()
        .position(|p| !p.dead_at(seq) && p.overlap(offset, offset.saturating_add(extent)).is_some())
}

/// Where a resource aliasing `p` can be bound in `p`'s allocation: its captured range lies inside
/// `p`'s, and at the same distance from `p`'s start this GPU's alignment, size and memory type
/// bits accept it.
pub fn shared_offset(
    p: &Piece,
    offset: u64,
    extent: u64,
    req: &vk::MemoryRequirements,
) -> Option<u64> {
    let inside = offset >= p.offset && offset.saturating_add(extent) <= p.end();
    let at = offset.checked_sub(p.offset)?;
    let fits = inside
        && (req.alignment <= 1 || at.is_multiple_of(req.alignment))
        && at.saturating_add(req.size) <= p.size
        && p.type_index < 32
        && req.memory_type_bits & (1 << p.type_index) != 0;
    fits.then_some(at)
}

impl Session<'_> {
    /// Whether this replay rebinds, deciding it the first time it is asked (at the first bind,
    /// map or write, once `device` exists).
    pub fn rebinding(&mut self, device: u64) -> Result<bool, ReplayError> {
        if let Some(r) = self.memory.rebinding {
            return Ok(r);
        }
        let plan = self.memory.plan.clone();
        let decision = match (plan.asked, plan.decided()) {
            (MemoryMode::Remap, _) => Decision {
                rebind: false,
                reason: None,
            },
            (MemoryMode::Rebind, _) => Decision {
                rebind: true,
                reason: None,
            },
            (MemoryMode::Auto, Some(d)) => d,
            (MemoryMode::Auto, None) => {
                let reason = self.check_placements(device, &plan)?;
                Decision {
                    rebind: reason.is_some(),
                    reason,
                }
            }
        };
        if let Ok(mut d) = plan.decision.lock() {
            d.get_or_insert(decision.clone());
        }
        self.memory.rebinding = Some(decision.rebind);
        Ok(decision.rebind)
    }

    /// `auto`: the first placement of the trace that remap cannot replay on this GPU, found by
    /// creating each bound resource once (identical create infos once) and asking its requirements.
    fn check_placements(
        &mut self,
        device: u64,
        plan: &Plan,
    ) -> Result<Option<String>, ReplayError> {
        let mut seen: std::collections::HashMap<String, vk::MemoryRequirements> =
            Default::default();
        let mut placements = Vec::new();
        for b in plan.binds.iter().filter(|b| b.device == device) {
            let (Some(c), Some(allocation)) = (plan.created_of(b), b.allocation) else {
                continue;
            };
            // Identical create infos have identical requirements: one temporary resource each.
            let mut unnamed = c.call.clone();
            match &mut unnamed {
                vkstream::Call::vkCreateBuffer(p) => p.p_buffer = None,
                vkstream::Call::vkCreateImage(p) => p.p_image = None,
                _ => {}
            }
            let key = format!("{unnamed:?}");
            let requirements = match seen.get(&key) {
                Some(r) => *r,
                None => match self.requirements_of(device, c) {
                    Ok(r) => {
                        seen.insert(key, r);
                        r
                    }
                    Err(e) => {
                        return Ok(Some(format!(
                            "{} 0x{:x} could not be checked ({e})",
                            c.kind.name(),
                            c.handle
                        )))
                    }
                },
            };
            placements.push(Placement {
                kind: b.kind,
                resource: b.resource,
                memory: b.memory,
                offset: b.offset,
                allocation,
                requirements,
            });
        }
        let d = self.device(device)?;
        let types = d.memory_types.clone();
        let flags_of = |ti: u32| {
            self.capture_device
                .and_then(|c| c.memory_types.get(ti as usize))
                .or_else(|| self.gpu.summary.memory_types.get(ti as usize))
                .map_or(0, |t| t.property_flags)
        };
        let host = self.memory.host_memories;
        Ok(first_misfit(&placements, |mem, ti, bits| {
            mapping::pick_memory_type(flags_of(ti), &types, bits, host.contains(&mem))
        }))
    }

    /// The replay GPU's requirements for a resource the trace creates: a temporary copy made
    /// through the generated dispatch (handles and chains translated), asked, destroyed.
    fn requirements_of(
        &mut self,
        device: u64,
        c: &Created,
    ) -> Result<vk::MemoryRequirements, ReplayError> {
        let fake = self.fake_handle();
        let mut call = c.call.clone();
        let ty = match &mut call {
            vkstream::Call::vkCreateBuffer(p) => {
                p.device = device;
                p.p_buffer = Some(fake);
                vk::ObjectType::BUFFER
            }
            vkstream::Call::vkCreateImage(p) => {
                p.device = device;
                p.p_image = Some(fake);
                vk::ObjectType::IMAGE
            }
            _ => return Err(ReplayError::Other("not a create call".into())),
        };
        // SAFETY: a create call of this trace, its handles translated by the dispatch.
        let r = unsafe { crate::glue::dispatch(self, &call) }?;
        if r.as_raw() < 0 {
            return Err(ReplayError::vk(call.name().to_string(), r));
        }
        let h = self.lookup(ty, fake)?;
        self.unbind(ty, fake);
        let d = &self.device(device)?.device;
        // SAFETY: the resource just made on this device, never used.
        unsafe {
            Ok(if ty == vk::ObjectType::BUFFER {
                let b = vk::Buffer::from_raw(h);
                let r = d.get_buffer_memory_requirements(b);
                d.destroy_buffer(b, None);
                r
            } else {
                let i = vk::Image::from_raw(h);
                let r = d.get_image_memory_requirements(i);
                d.destroy_image(i, None);
                r
            })
        }
    }

    /// Rebind: gives the replayed `resource` (captured `captured`, bound by call `seq` at
    /// `offset` of captured `memory`) its own allocation and binds it there.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_own(
        &mut self,
        device: u64,
        kind: Kind,
        captured: u64,
        resource: u64,
        memory: u64,
        offset: u64,
        req: vk::MemoryRequirements,
        seq: u64,
    ) -> Result<(), ReplayError> {
        let plan = self.memory.plan.clone();
        let created = plan.bind(seq, captured).and_then(|b| plan.created_of(b));
        let m = self
            .memory
            .memories
            .get(&memory)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: memory,
            })?;
        // What the capture GPU said the resource covers; else its own size (a buffer) or what
        // the replay GPU needs (an image, whose contents are the driver's layout anyway).
        let extent = created
            .and_then(|c| c.captured_size)
            .or_else(|| match created.map(|c| &c.call) {
                Some(vkstream::Call::vkCreateBuffer(p)) => p.p_create_info.as_ref().map(|i| i.size),
                _ => None,
            })
            .unwrap_or(req.size)
            .min(m.size.saturating_sub(offset));
        let dies = created.and_then(|c| c.destroyed);
        if let Some(i) = aliased(&m.pieces, offset, extent, seq) {
            let other = &m.pieces[i];
            if let Some(at) = shared_offset(other, offset, extent, &req) {
                // Inside a resource already placed, where this GPU accepts it: the two share
                // that allocation as they shared the captured one (Zink binds a second buffer
                // over the same bytes for other usages).
                let mem = other.memory;
                let d = &self.device(device)?.device;
                // SAFETY: a resource of this device, bound once, inside the allocation.
                unsafe {
                    match kind {
                        Kind::Buffer => {
                            d.bind_buffer_memory(vk::Buffer::from_raw(resource), mem, at)
                        }
                        Kind::Image => d.bind_image_memory(vk::Image::from_raw(resource), mem, at),
                    }
                }
                .map_err(|e| ReplayError::vk("binding into a shared allocation", e))?;
                let p = &mut self
                    .memory
                    .memories
                    .get_mut(&memory)
                    .expect("checked")
                    .pieces[i];
                // The allocation lives as long as the last resource in it.
                p.dies = p.dies.zip(dies).map(|(a, b)| a.max(b));
                p.sharers += 1;
                self.memory.rebound.shared += 1;
                plan.count(&self.memory.rebound);
                return Ok(());
            }
            let why = match plan.decided().and_then(|d| d.reason) {
                Some(r) => format!("remap cannot replay this trace on this GPU either: {r}"),
                None => "replay with --memory remap".into(),
            };
            return Err(ReplayError::Other(format!(
                "--memory rebind: {} 0x{captured:x} (bytes {offset}..{}) and {} 0x{:x} (bytes {}..{}) \
                 are bound to overlapping ranges of memory 0x{memory:x}, and the first does not fit \
                 inside the second's allocation on this GPU; aliased resources share their \
                 contents, which separate allocations cannot; {why}",
                kind.name(),
                offset + extent,
                other.kind.name(),
                other.resource,
                other.offset,
                other.end(),
            )));
        }
        let host = self.memory.host_memories.contains(&memory);
        let (flags, chain) = (m.captured_flags, m.chain.clone());
        // The captured chain through the generated code, before the device is borrowed.
        let mut arena = Arena::new();
        // SAFETY: materialised into `arena`, which outlives the allocation below.
        let chain = unsafe { m_chain(&chain, &mut arena, self) }? as *const c_void;
        let d = self.device(device)?;
        // Host-visible where the trace touches this memory from the host, when this resource can
        // have it (an optimal image on a discrete GPU cannot: its bytes are then uploaded).
        let ti = mapping::pick_memory_type(flags, &d.memory_types, req.memory_type_bits, host)
            .or_else(|| {
                mapping::pick_memory_type(flags, &d.memory_types, req.memory_type_bits, false)
            })
            .ok_or_else(|| {
                ReplayError::NoGpu(format!(
                    "no memory type of the replay GPU can hold {} 0x{captured:x} of capture memory \
                     0x{memory:x} (flags {:?}, allowed types {:#b}{})",
                    kind.name(),
                    vk::MemoryPropertyFlags::from_raw(flags),
                    req.memory_type_bits,
                    if host { ", host access needed" } else { "" }
                ))
            })?;
        let t = d.memory_types[ti as usize].property_flags;
        let host_visible = t & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() != 0;
        let coherent = t & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0;
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(ti);
        info.p_next = chain;
        // A dedicated capture allocation stays dedicated, to this resource.
        let dedicated = vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO;
        // SAFETY: the chain is the replayer's own, writable.
        if let Some(ded) =
            unsafe { chained::<vk::MemoryDedicatedAllocateInfo<'_>>(chain, dedicated) }
        {
            // SAFETY: as above.
            unsafe {
                (*ded).buffer = vk::Buffer::null();
                (*ded).image = vk::Image::null();
                match kind {
                    Kind::Buffer => (*ded).buffer = vk::Buffer::from_raw(resource),
                    Kind::Image => (*ded).image = vk::Image::from_raw(resource),
                }
            }
        }
        let dev = &d.device;
        // SAFETY: valid device, allocate info and resource of this device, bound once.
        let (mem, mapped) = unsafe {
            let mem = dev.allocate_memory(&info, None).map_err(|e| {
                ReplayError::vk(
                    format!("vkAllocateMemory of {} bytes (type {ti})", req.size),
                    e,
                )
            })?;
            let bound = match kind {
                Kind::Buffer => dev.bind_buffer_memory(vk::Buffer::from_raw(resource), mem, 0),
                Kind::Image => dev.bind_image_memory(vk::Image::from_raw(resource), mem, 0),
            };
            if let Err(e) = bound {
                dev.free_memory(mem, None);
                return Err(ReplayError::vk("binding to its own allocation", e));
            }
            let mapped = if host && host_visible {
                dev.map_memory(mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                    .map_err(|e| ReplayError::vk("vkMapMemory", e))? as *mut u8
            } else {
                std::ptr::null_mut()
            };
            (mem, mapped)
        };
        let piece = Piece {
            kind,
            resource: captured,
            offset,
            extent,
            bound: seq,
            dies,
            sharers: 0,
            memory: mem,
            size: req.size,
            type_index: ti,
            host_visible,
            coherent,
            mapped,
        };
        self.memory.rebound.own += 1;
        // A query copy's pending result in bytes this resource takes over is read first, from
        // where it is now (as before a host write over it).
        if self.tracked.copies.any_live() {
            self.save_copies_over(memory, offset, offset + extent);
        }
        let m = self.memory.memories.get_mut(&memory).expect("checked");
        let at = m.pieces.partition_point(|p| p.offset <= offset);
        m.pieces.insert(at, piece);
        // What destroyed resources' allocations hold of these bytes, and what the trace wrote
        // here while no resource was bound, goes to it (and only to it).
        let at = self.inherit(memory, at, seq)?;
        plan.count(&self.memory.rebound);
        let m = self.memory.memories.get_mut(&memory).expect("checked");
        let (mine, rest) = take_range(std::mem::take(&mut m.early), offset, offset + extent);
        m.early = rest;
        for (o, data) in mine {
            self.write_piece(memory, at, o, &data)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(resource: u64, memory: u64, offset: u64, align: u64, size: u64) -> Placement {
        Placement {
            kind: Kind::Buffer,
            resource,
            memory,
            offset,
            allocation: Allocation {
                size: 1024,
                type_index: 0,
            },
            requirements: vk::MemoryRequirements {
                size,
                alignment: align,
                memory_type_bits: 0b11,
            },
        }
    }

    #[test]
    fn misfits_are_found_in_bind_order() {
        let any = |_, _, bits: u32| Some(bits.trailing_zeros());
        // Everything aligned and inside the allocation: remap fits.
        let ok = [place(1, 9, 0, 64, 256), place(2, 9, 256, 64, 256)];
        assert_eq!(first_misfit(&ok, any), None);
        // The capture GPU's 16-byte alignment, the replay's 64.
        let r = first_misfit(&[place(1, 9, 0, 64, 16), place(2, 9, 16, 64, 16)], any).unwrap();
        assert!(
            r.contains("buffer 0x2 is bound at offset 16") && r.contains("alignment 64"),
            "{r}"
        );
        // A resource the replay GPU needs larger runs past the allocation.
        let r = first_misfit(&[place(1, 9, 0, 64, 512), place(2, 9, 768, 64, 512)], any).unwrap();
        assert!(r.contains("needs 512 bytes at offset 768"), "{r}");
        // Alone in its allocation, it grows instead (remap makes the allocation at least that big).
        assert_eq!(first_misfit(&[place(1, 9, 0, 64, 4096)], any), None);
        // No type for the allocation.
        let r = first_misfit(&[place(1, 9, 0, 1, 16)], |_, _, _| None).unwrap();
        assert!(r.contains("no memory type"), "{r}");
        // The type picked for the first resource does not suit the second.
        let mut second = place(2, 9, 64, 1, 16);
        second.requirements.memory_type_bits = 0b10;
        let r = first_misfit(&[place(1, 9, 0, 1, 16), second], any).unwrap();
        assert!(r.contains("cannot use replay memory type 0"), "{r}");
    }

    fn piece(resource: u64, offset: u64, extent: u64) -> Piece {
        Piece {
            kind: Kind::Image,
            resource,
            offset,
            extent,
            bound: resource,
            dies: None,
            sharers: 0,
            memory: vk::DeviceMemory::null(),
            size: extent,
            type_index: 0,
            host_visible: true,
            coherent: true,
            mapped: std::ptr::null_mut(),
        }
    }

    #[test]
    fn overlaps_and_aliasing() {
        let p = piece(1, 100, 50);
        assert_eq!(p.overlap(0, 100), None);
        assert_eq!(p.overlap(0, 120), Some((100, 120)));
        assert_eq!(p.overlap(140, 400), Some((140, 150)));
        assert_eq!(p.overlap(150, 400), None);
        let pieces = [piece(1, 0, 64), piece(2, 128, 64)];
        assert!(
            aliased(&pieces, 64, 64, 9).is_none(),
            "the gap between them"
        );
        assert_eq!(aliased(&pieces, 100, 64, 9), Some(1));
        // A destroyed resource's bytes are no alias.
        let mut dead = piece(3, 100, 64);
        dead.dies = Some(5);
        assert_eq!(aliased(&[dead], 100, 64, 9), None);
    }

    #[test]
    fn aliases_share_an_allocation_where_they_fit() {
        let p = piece(1, 100, 64);
        let req = |alignment, size| vk::MemoryRequirements {
            size,
            alignment,
            memory_type_bits: 1,
        };
        // The same bytes (Zink's second buffer over one resource).
        assert_eq!(shared_offset(&p, 100, 64, &req(16, 64)), Some(0));
        assert_eq!(shared_offset(&p, 132, 16, &req(16, 16)), Some(32));
        // Misaligned at that distance, too large for the allocation, reaching outside, wrong type.
        assert_eq!(shared_offset(&p, 104, 16, &req(16, 16)), None);
        assert_eq!(shared_offset(&p, 132, 16, &req(16, 64)), None);
        assert_eq!(shared_offset(&p, 90, 16, &req(1, 16)), None);
        assert_eq!(shared_offset(&p, 132, 32, &req(1, 32)), Some(32));
        let mut other = req(1, 16);
        other.memory_type_bits = 0b10;
        assert_eq!(shared_offset(&p, 100, 16, &other), None);
    }

    #[test]
    fn early_bytes_split_at_a_bound_range() {
        let runs = vec![(0, vec![1, 2, 3, 4]), (10, vec![5, 6]), (20, vec![7])];
        let (inside, outside) = take_range(runs, 2, 11);
        assert_eq!(inside, vec![(2, vec![3, 4]), (10, vec![5])]);
        assert_eq!(outside, vec![(0, vec![1, 2]), (11, vec![6]), (20, vec![7])]);
    }
}
