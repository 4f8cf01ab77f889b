//! Checks every decoded call against what the trace has done so far, before the driver sees it:
//! a trace from anywhere (damaged, forged, cut) must end in one clear error naming the call, never
//! in a crash or a hang inside the driver.
//!
//! What is checked, and where:
//! - array counts against their arrays, and every handle a call names is live (one generated
//!   pass, `generated::checks::counts_and_handles`): created earlier in the trace and not
//!   destroyed since, of the named type, and of the call's device (here);
//! - command buffer states, fence and semaphore signals, and outstanding submissions (`sync`);
//! - objects that must fit together and limits of the replay GPU: descriptors against layouts,
//!   views, render passes and framebuffers, what shaders use, recorded queries and draws
//!   (`compat`, `passes`, `shaders`, `cmds`, `limits`).
//!
//! A call goes only to the modules that look at it: a generated table (`checks::flags`) that
//! codegen reads from the modules' own sources (every `Call::vk*` named in a function whose name
//! ends in `before` or `after`, others on both sides, plus what `sync` and `record` handle by
//! kind). A rule for a new command is thus seen once `cargo run -p codegen` has run again; until
//! then codegen's freshness test fails.
//!
//! The validator calls no driver: where safety needs the GPU idle (a pending command buffer
//! recorded again, an object destroyed while submitted work may still use it) it asks the engine
//! for a wait ([`Action`]). Failures are plain strings; the engine adds the call's seq and name.

mod cmds;
mod compat;
mod gpuwait;
mod limits;
mod objects;
mod passes;
mod record;
mod shaders;
pub mod spirv;
mod sync;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gpuwait;

use ash::vk;
use vkstream::Call;

use crate::fasthash::HandleMap;
use crate::generated::checks;
use objects::{Table, UNBOUND};
pub use sync::Action;

/// Shadow of the trace's objects and synchronisation, kept call by call.
#[derive(Default)]
pub struct Validator {
    /// Live objects and what the checks keep per object (`objects`).
    t: Table,
    /// Objects destroyed, with the seq of the call that did it (for messages).
    dead: HandleMap<(i32, u64), u64>,
    /// Parent (pool, swapchain) -> objects allocated from it (some may be gone already).
    children: HandleMap<u64, Vec<(i32, u64)>>,
    /// Instance-level objects and devices -> the instance they belong to (several may be alive).
    instance_of: HandleMap<(i32, u64), u64>,
    /// The current call's first handle's type.
    first_ty: i32,
    sync: sync::Sync,
    record: record::Recording,
    compat: compat::Compat,
    /// The current call's first handle (the command buffer of a vkCmd*), and its
    /// `checks::flags` (kind, and which modules look at it).
    first: u64,
    /// Its slot in the object table when it is a command buffer (else `u32::MAX`).
    first_slot: u32,
    flags: u16,
    /// Handles the current call creates, and those it destroys (both reused between calls).
    created: Vec<(vk::ObjectType, u64)>,
    gone: Vec<(vk::ObjectType, u64)>,
    /// A recorded command's handles after its command buffer, with their slots (type, handle,
    /// slot), as the handle pass found them: what the recording names (`sync`).
    named: Vec<(i32, u64, u32)>,
    /// The current call's device (0: instance-level or none).
    device: u64,
    /// Seconds of GPU idle waits the validator asked for, and how many.
    pub waits: u64,
}

fn ty_name(ty: vk::ObjectType) -> String {
    format!("{ty:?}").to_lowercase().replace('_', " ")
}

/// Why a handle a call names is not a live object (off the hot path).
#[cold]
#[inline(never)]
fn not_live(dead: &HandleMap<(i32, u64), u64>, ty: vk::ObjectType, h: u64) -> String {
    match dead.get(&(ty.as_raw(), h)) {
        Some(seq) => format!("{} 0x{h:x} was destroyed at call {seq}", ty_name(ty)),
        None => format!("{} 0x{h:x} was never created in the trace", ty_name(ty)),
    }
}

/// Whether a buffer or image bound to `memory` (through `slot`) may be used: bound, and to
/// memory still live (0: needs none).
#[inline]
fn memory_live(t: &Table, memory: u64, slot: u32) -> bool {
    match memory {
        UNBOUND => false,
        0 => true,
        m => t.holds(slot, objects::MEMORY, m) || t.find(objects::MEMORY, m).is_some(),
    }
}

#[cold]
#[inline(never)]
fn no_memory(ty: vk::ObjectType, h: u64, memory: u64) -> String {
    match memory {
        UNBOUND => format!("{} 0x{h:x} has no memory bound", ty_name(ty)),
        m => format!(
            "{} 0x{h:x} is bound to memory 0x{m:x}, which was freed",
            ty_name(ty)
        ),
    }
}

/// Objects whose handles a driver cannot hand out twice while live: each holds mutable state
/// (the spec lets only functionally identical, immutable objects share a handle value).
fn has_state(ty: vk::ObjectType) -> bool {
    matches!(
        ty,
        vk::ObjectType::INSTANCE
            | vk::ObjectType::DEVICE
            | vk::ObjectType::DEVICE_MEMORY
            | vk::ObjectType::BUFFER
            | vk::ObjectType::IMAGE
            | vk::ObjectType::FENCE
            | vk::ObjectType::SEMAPHORE
            | vk::ObjectType::EVENT
            | vk::ObjectType::QUERY_POOL
            | vk::ObjectType::COMMAND_POOL
            | vk::ObjectType::COMMAND_BUFFER
            | vk::ObjectType::DESCRIPTOR_POOL
            | vk::ObjectType::DESCRIPTOR_SET
            | vk::ObjectType::SWAPCHAIN_KHR
            | vk::ObjectType::ACCELERATION_STRUCTURE_KHR
    )
}

#[cold]
#[inline(never)]
fn still_live(ty: vk::ObjectType, h: u64) -> String {
    format!(
        "{} 0x{h:x} is created again while it is live (never destroyed)",
        ty_name(ty)
    )
}

#[cold]
#[inline(never)]
fn other_device(ty: vk::ObjectType, h: u64, its: u64, call: u64) -> String {
    format!(
        "{} 0x{h:x} belongs to device 0x{its:x}, not to this call's device 0x{call:x}",
        ty_name(ty)
    )
}

impl Validator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `call` (captured result `result`) before it is replayed. `Ok` carries a wait the
    /// engine must do first; the message of an `Err` says what is wrong with the call.
    pub fn before(&mut self, call: &Call, result: i32) -> Result<Action, String> {
        self.created.clear();
        self.named.clear();
        self.device = 0;
        self.first_slot = u32::MAX;
        let mut err: Option<String> = None;
        let mut first = 0u64;
        let mut first_ty = 0;
        let mut first_slot = u32::MAX;
        let flags = checks::flags(call);
        self.flags = flags;
        let kind = flags as u8;
        let record = kind >= checks::RECORD;
        // Compat may key records by any handle a call it records names (`Obj::compat`); what
        // it keeps of a recorded command is in its command buffer's slot (`cmds::CbCmds`).
        let mark = flags & checks::COMPAT_AFTER != 0 && !record;
        let (t, dead, created, device) = (&self.t, &self.dead, &mut self.created, &mut self.device);
        let named = &mut self.named;
        // Counts first (an error there ends the pass), then every handle: one generated pass.
        checks::counts_and_handles(call, &mut |ty, h, out| {
            if err.is_some() {
                return;
            }
            if out {
                // An object with state of its own created under a handle that is still live:
                // the replay would hold two objects for one captured handle (what was bound to
                // or written into the first is not in the second, which lavapipe then reads:
                // a never written descriptor set crashed its queue thread; destroying both frees
                // one twice). Immutable definitions (samplers, layouts) may legally share a value
                // (counted in `refs`); fetches (queues, swapchain images) are not creations;
                // objects of another device may share a value.
                if kind == checks::CREATE && has_state(ty) {
                    let live = t
                        .find_dev(ty.as_raw(), h)
                        .is_some_and(|(_, its)| its == *device || ty == vk::ObjectType::DEVICE);
                    if live || created.iter().any(|c| c.1 == h) {
                        err = Some(still_live(ty, h));
                        return;
                    }
                }
                created.push((ty, h));
                return;
            }
            // Slot and device from the object cache: most handles need nothing else.
            let Some((i, its)) = t.find_dev(ty.as_raw(), h) else {
                err = Some(not_live(dead, ty, h));
                return;
            };
            if mark {
                t.at(i).compat.set(true);
            }
            if record && matches!(ty, vk::ObjectType::BUFFER | vk::ObjectType::IMAGE) {
                let o = t.at(i);
                if !memory_live(t, o.memory, o.memory_slot) {
                    err = Some(no_memory(ty, h, o.memory));
                    return;
                }
            }
            if record && first != 0 {
                named.push((ty.as_raw(), h, i));
            }
            if first == 0 {
                first = h;
                first_ty = ty.as_raw();
                first_slot = i;
                *device = match ty {
                    vk::ObjectType::DEVICE => h,
                    vk::ObjectType::QUEUE | vk::ObjectType::COMMAND_BUFFER => its,
                    _ => 0,
                };
            } else if its != 0 && *device != 0 && its != *device {
                err = Some(other_device(ty, h, its, *device));
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if let Call::vkDestroyImage(p) = call {
            swapchain_image(&self.t, p.image)?;
        }
        if flags & checks::COMPAT_BEFORE != 0 {
            if let Some((entries, data)) = self.compat.template_before(call) {
                let (t, dead, compat) = (&self.t, &self.dead, &self.compat);
                let (device, named) = (self.device, &mut self.named);
                template_handles(
                    t,
                    dead,
                    compat,
                    entries,
                    data,
                    device,
                    record.then_some(named),
                )?;
            }
        }
        self.first = first;
        self.first_ty = first_ty;
        self.first_slot = if first_ty == objects::CB {
            first_slot
        } else {
            u32::MAX
        };
        // Each module only for the commands it looks at (generated table, `checks::flags`).
        let action = if flags & checks::SYNC_BEFORE != 0 {
            self.sync.before(
                &self.t,
                call,
                result,
                self.device,
                (first, self.first_slot, &self.named),
                kind,
            )?
        } else {
            Action::None
        };
        if flags & checks::RECORDING_BEFORE != 0 {
            self.record.before(&self.t, call, self.first_slot, kind)?;
        }
        if flags & checks::COMPAT_BEFORE == 0 {
            return Ok(action);
        }
        let t = &self.t;
        let live = |k: (i32, u64)| t.find(k.0, k.1).is_some();
        // The memory a buffer or image is bound to (`Some(0)`: needs none; `None`: not bound).
        let memory_of = |h: u64| {
            t.get(vk::ObjectType::BUFFER.as_raw(), h)
                .or_else(|| t.get(vk::ObjectType::IMAGE.as_raw(), h))
                .map(|o| o.memory)
                .filter(|&m| m != objects::UNBOUND)
        };
        match t.cb_at(self.first_slot) {
            Some(cb) => {
                self.compat
                    .recorded_before(call, first, Some(&cb.cmds), &live, &memory_of)?
            }
            None => self.compat.before(call, &live, &memory_of)?,
        }
        Ok(action)
    }

    /// Records what `call` did, once it was replayed without error.
    pub fn after(&mut self, call: &Call, result: i32, seq: u64) {
        let flags = self.flags;
        let kind = flags as u8;
        if !self.created.is_empty() && (kind != checks::CREATE || result >= 0) {
            let parent = parent_of(call);
            let device = match call {
                Call::vkCreateDevice(_) => 0,
                _ => self.device,
            };
            for i in 0..self.created.len() {
                let (ty, h) = self.created[i];
                // A `dead` entry of an earlier object of this handle is left: it is read only
                // while no such object is live, and the next end overwrites it.
                let key = (ty.as_raw(), h);
                let dev = if ty == vk::ObjectType::DEVICE {
                    h
                } else {
                    device
                };
                let slot = self.t.create(key.0, h, dev, parent);
                let o = self.t.at_mut(slot);
                if flags & checks::COMPAT_AFTER != 0 {
                    o.compat.set(true);
                }
                // Queues, physical devices and swapchain images are fetched again and again.
                if kind == checks::CREATE || o.refs == 0 {
                    o.refs += 1;
                }
                if parent != 0 {
                    self.children.entry(parent).or_default().push(key);
                }
                if dev == 0 || ty == vk::ObjectType::DEVICE {
                    let inst = match ty {
                        vk::ObjectType::INSTANCE => Some(h),
                        _ => self.instance_of.get(&(self.first_ty, self.first)).copied(),
                    };
                    if let Some(i) = inst {
                        self.instance_of.insert(key, i);
                    }
                }
                self.sync.created(&mut self.t, call, ty, slot);
            }
        }
        if kind == checks::DESTROY {
            let mut gone = std::mem::take(&mut self.gone);
            checks::destroyed(call, &mut |ty, h| gone.push((ty, h)));
            for &(ty, h) in &gone {
                self.destroy(ty, h, seq);
            }
            gone.clear();
            self.gone = gone;
        } else if let Call::vkResetDescriptorPool(p) = call {
            self.end_children(p.descriptor_pool, seq);
        } else if let Call::vkResetCommandPool(p) = call {
            for k in self.children.get(&p.command_pool).into_iter().flatten() {
                if self
                    .t
                    .get(k.0, k.1)
                    .is_some_and(|o| o.parent == p.command_pool)
                {
                    self.sync.reset_cb(&mut self.t, k.1);
                }
            }
        }
        if flags & checks::SYNC_AFTER != 0 {
            let slot = self.first_slot;
            self.sync.after(
                &mut self.t,
                call,
                result,
                self.device,
                (self.first, slot),
                seq,
            );
        }
        if kind != checks::CREATE || result >= 0 {
            if flags & checks::RECORDING_AFTER != 0 {
                self.record.after(&mut self.t, call, self.first_slot, kind);
            }
            if flags & checks::COMPAT_AFTER != 0 {
                match self.t.cb_at_mut(self.first_slot) {
                    Some(cb) => self.compat.recorded_after(call, Some(&mut cb.cmds)),
                    None => self.compat.after(call),
                }
            }
        }
    }

    fn destroy(&mut self, ty: vk::ObjectType, h: u64, seq: u64) {
        let key = (ty.as_raw(), h);
        let Some(slot) = self.t.find(key.0, h) else {
            return;
        };
        let o = self.t.at_mut(slot);
        o.refs = o.refs.saturating_sub(1);
        if o.refs > 0 {
            return;
        }
        self.end(slot, seq);
        match ty {
            vk::ObjectType::DEVICE => {
                for slot in self.t.live_where(|o| o.device == h) {
                    self.end(slot, seq);
                }
            }
            vk::ObjectType::INSTANCE => {
                const INSTANCE: i32 = vk::ObjectType::INSTANCE.as_raw();
                if self.t.live_where(|o| o.ty == INSTANCE).is_empty() {
                    for slot in self.t.live_where(|_| true) {
                        self.end(slot, seq);
                    }
                    self.instance_of.clear();
                    return;
                }
                // Other instances go on: only this one's objects end (those of its devices too).
                const DEVICE: i32 = vk::ObjectType::DEVICE.as_raw();
                let instance_of = &self.instance_of;
                let gone = self.t.live_where(|o| {
                    let owner = if o.device != 0 {
                        (DEVICE, o.device)
                    } else {
                        (o.ty, o.h)
                    };
                    instance_of.get(&owner) == Some(&h)
                });
                for slot in gone {
                    self.end(slot, seq);
                }
                self.instance_of.retain(|k, i| *i != h && *k != key);
            }
            // Only pools and swapchains have children (`parent_of`).
            vk::ObjectType::COMMAND_POOL
            | vk::ObjectType::DESCRIPTOR_POOL
            | vk::ObjectType::SWAPCHAIN_KHR => self.end_children(h, seq),
            _ => {}
        }
    }

    /// The object in `slot` is gone (destroyed, or ended with its pool, device or instance).
    fn end(&mut self, slot: u32, seq: u64) {
        let o = self.t.at(slot);
        let (ty, h, compat) = (o.ty, o.h, o.compat.get());
        let st = self.t.remove(slot);
        self.dead.insert((ty, h), seq);
        self.sync
            .destroyed(&self.t, vk::ObjectType::from_raw(ty), h, st);
        if compat {
            self.compat.destroyed(vk::ObjectType::from_raw(ty), h);
        }
    }

    /// Ends what was allocated from a pool or swapchain (destroyed or reset).
    fn end_children(&mut self, parent: u64, seq: u64) {
        for k in self.children.remove(&parent).unwrap_or_default() {
            if let Some(slot) = self.t.find(k.0, k.1) {
                if self.t.at(slot).parent == parent {
                    self.end(slot, seq);
                }
            }
        }
    }

    /// The engine did the wait an [`Action`] asked for.
    pub fn waited(&mut self, action: Action) {
        self.waits += 1;
        self.sync.waited(&mut self.t, action);
    }

    /// The captured devices where submitted work may still run (with repeats).
    pub fn busy_devices(&self) -> impl Iterator<Item = u64> + '_ {
        self.sync.outstanding_devices()
    }

    /// Whether a replayed submission ran `command_buffer` (directly or as a secondary).
    pub fn ever_submitted(&self, command_buffer: u64) -> bool {
        self.sync.ever_submitted(&self.t, command_buffer)
    }
}

/// The handles in a template update's data (`entries` say where), checked as the handle pass
/// checks a call's own: each live and of the call's `device`; a buffer bound to live memory
/// (VUID-VkWriteDescriptorSet-descriptorType-00329: a uniform buffer pushed with no memory bound
/// corrupted lavapipe's heap at the draw) and the bytes it names within it. A push (`named`: the recording's handles, else `None`) names them in its recording, so
/// that the command buffer is invalid once one is gone. The sampler of a combined image sampler
/// is not checked (ignored with immutable samplers, where apps leave garbage).
fn template_handles(
    t: &Table,
    dead: &HandleMap<(i32, u64), u64>,
    compat: &compat::Compat,
    entries: &[crate::templates::Entry],
    data: &[u8],
    device: u64,
    mut named: Option<&mut Vec<(i32, u64, u32)>>,
) -> Result<(), String> {
    const COMBINED: i32 = vk::DescriptorType::COMBINED_IMAGE_SAMPLER.as_raw();
    crate::templates::each_handle(entries, data, |k, i, info, ty, h| {
        if ty == vk::ObjectType::SAMPLER && entries[k].descriptor_type == COMBINED {
            return Ok(());
        }
        let at = || format!("descriptor {i} of template entry {k}");
        let Some((slot, its)) = t.find_dev(ty.as_raw(), h) else {
            return Err(format!("{}: {}", at(), not_live(dead, ty, h)));
        };
        if its != 0 && device != 0 && its != device {
            return Err(format!("{}: {}", at(), other_device(ty, h, its, device)));
        }
        if ty == vk::ObjectType::BUFFER {
            let o = t.at(slot);
            if !memory_live(t, o.memory, o.memory_slot) {
                return Err(format!("{}: {}", at(), no_memory(ty, h, o.memory)));
            }
            let word = |n: usize| crate::templates::word(data, info.saturating_add(n));
            if let (Some(offset), Some(range)) = (word(8), word(16)) {
                compat
                    .buffer_range(h, offset, range)
                    .map_err(|e| format!("{}: {e}", at()))?;
            }
        }
        if let Some(n) = named.as_deref_mut() {
            n.push((ty.as_raw(), h, slot));
        }
        Ok(())
    })
}

/// The pool or swapchain whose end ends the objects `call` creates (`Validator::destroy` ends
/// children only for these types).
/// A swapchain's image is destroyed with its swapchain, never by vkDestroyImage (the driver
/// would free it twice).
fn swapchain_image(t: &Table, image: u64) -> Result<(), String> {
    match t.get(vk::ObjectType::IMAGE.as_raw(), image) {
        Some(o) if o.parent != 0 => Err(format!(
            "image 0x{image:x} belongs to swapchain 0x{:x}, which destroys it; it must not be \
             destroyed by vkDestroyImage",
            o.parent
        )),
        _ => Ok(()),
    }
}

fn parent_of(call: &Call) -> u64 {
    match call {
        Call::vkAllocateCommandBuffers(p) => {
            p.p_allocate_info.as_ref().map_or(0, |i| i.command_pool)
        }
        Call::vkAllocateDescriptorSets(p) => {
            p.p_allocate_info.as_ref().map_or(0, |i| i.descriptor_pool)
        }
        Call::vkGetSwapchainImagesKHR(p) => p.swapchain,
        _ => 0,
    }
}
