//! Checks every decoded call against what the trace has done so far, before the driver sees it:
//! a trace from anywhere (damaged, forged, cut) must end in one clear error naming the call, never
//! in a crash or a hang inside the driver.
//!
//! What is checked, and where:
//! - array counts against their arrays (generated from vk.xml: `generated::checks::counts`);
//! - every handle a call names (generated walker `vkstream::handles`) is live: created earlier in
//!   the trace and not destroyed since, of the named type, and of the call's device (here);
//! - command buffer states, fence and semaphore signals, and outstanding submissions (`sync`);
//! - objects that must fit together and limits of the replay GPU: descriptors against layouts,
//!   views, render passes and framebuffers, what shaders use, recorded queries and draws
//!   (`compat`, `passes`, `shaders`, `cmds`, `limits`).
//!
//! The validator calls no driver: where safety needs the GPU idle (a pending command buffer
//! recorded again, an object destroyed while submitted work may still use it) it asks the engine
//! for a wait ([`Action`]). Failures are plain strings; the engine adds the call's seq and name.

mod cmds;
mod compat;
mod limits;
mod passes;
mod record;
mod shaders;
mod sync;
#[cfg(test)]
mod tests;

use ash::vk;
use vkstream::Call;

use crate::fasthash::HandleMap;
use crate::generated::checks;
pub use sync::Action;

/// A live captured object.
#[derive(Debug, Clone, Copy)]
struct Obj {
    /// Creations not yet destroyed (drivers may hand out one non-dispatchable value twice).
    refs: u32,
    /// Captured device it belongs to (0: instance-level).
    device: u64,
    /// Pool or swapchain it came from (0: none); ended with it.
    parent: u64,
}

/// Shadow of the trace's objects and synchronisation, kept call by call.
#[derive(Default)]
pub struct Validator {
    objs: HandleMap<(i32, u64), Obj>,
    /// Objects destroyed, with the seq of the call that did it (for messages).
    dead: HandleMap<(i32, u64), u64>,
    /// Parent (pool, swapchain) -> objects allocated from it (some may be gone already).
    children: HandleMap<u64, Vec<(i32, u64)>>,
    sync: sync::Sync,
    record: record::Recording,
    compat: compat::Compat,
    /// The current call's first handle (the command buffer of a vkCmd*), and its kind.
    first: u64,
    kind: u8,
    /// Handles the current call creates (reused between calls).
    created: Vec<(vk::ObjectType, u64)>,
    /// The current call's device (0: instance-level or none).
    device: u64,
    /// Seconds of GPU idle waits the validator asked for, and how many.
    pub waits: u64,
}

const MEMORY: i32 = vk::ObjectType::DEVICE_MEMORY.as_raw();

fn ty_name(ty: vk::ObjectType) -> String {
    format!("{ty:?}").to_lowercase().replace('_', " ")
}

impl Validator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `call` (captured result `result`) before it is replayed. `Ok` carries a wait the
    /// engine must do first; the message of an `Err` says what is wrong with the call.
    pub fn before(&mut self, call: &Call, result: i32) -> Result<Action, String> {
        checks::counts(call)?;
        self.created.clear();
        self.device = 0;
        let mut err: Option<String> = None;
        let mut first = 0u64;
        let kind = checks::kind(call);
        self.kind = kind;
        let record = kind >= checks::RECORD;
        let (objs, dead, created, device, rec) = (
            &self.objs,
            &self.dead,
            &mut self.created,
            &mut self.device,
            &self.record,
        );
        vkstream::handles::call_handles(call, &mut |ty, h, out| {
            if err.is_some() {
                return;
            }
            if out {
                created.push((ty, h));
                return;
            }
            let Some(o) = objs.get(&(ty.as_raw(), h)) else {
                err = Some(match dead.get(&(ty.as_raw(), h)) {
                    Some(seq) => format!("{} 0x{h:x} was destroyed at call {seq}", ty_name(ty)),
                    None => format!("{} 0x{h:x} was never created in the trace", ty_name(ty)),
                });
                return;
            };
            if record && matches!(ty, vk::ObjectType::BUFFER | vk::ObjectType::IMAGE) {
                match rec.memory_of(h) {
                    None => {
                        err = Some(format!("{} 0x{h:x} has no memory bound", ty_name(ty)));
                        return;
                    }
                    Some(m) if m != 0 && !objs.contains_key(&(MEMORY, m)) => {
                        err = Some(format!(
                            "{} 0x{h:x} is bound to memory 0x{m:x}, which was freed",
                            ty_name(ty)
                        ));
                        return;
                    }
                    _ => {}
                }
            }
            if first == 0 {
                first = h;
                *device = match ty {
                    vk::ObjectType::DEVICE => h,
                    vk::ObjectType::QUEUE | vk::ObjectType::COMMAND_BUFFER => o.device,
                    _ => 0,
                };
            } else if o.device != 0 && *device != 0 && o.device != *device {
                err = Some(format!(
                    "{} 0x{h:x} belongs to device 0x{:x}, not to this call's device 0x{:x}",
                    ty_name(ty),
                    o.device,
                    *device
                ));
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        self.first = first;
        let action = self.sync.before(call, result, self.device, first, kind)?;
        self.record.before(call, first, kind)?;
        let live = |k| self.objs.contains_key(&k);
        self.compat
            .before(call, &live, &|h| self.record.memory_of(h))?;
        Ok(action)
    }

    /// Records what `call` did, once it was replayed without error.
    pub fn after(&mut self, call: &Call, result: i32, seq: u64) {
        let kind = self.kind;
        if !self.created.is_empty() && (kind != checks::CREATE || result >= 0) {
            let parent = parent_of(call);
            let device = match call {
                Call::vkCreateDevice(_) => 0,
                _ => self.device,
            };
            for i in 0..self.created.len() {
                let (ty, h) = self.created[i];
                let key = (ty.as_raw(), h);
                self.dead.remove(&key);
                let dev = if ty == vk::ObjectType::DEVICE {
                    h
                } else {
                    device
                };
                let o = self.objs.entry(key).or_insert(Obj {
                    refs: 0,
                    device: dev,
                    parent,
                });
                // Queues, physical devices and swapchain images are fetched again and again.
                if kind == checks::CREATE || o.refs == 0 {
                    o.refs += 1;
                }
                if parent != 0 {
                    self.children.entry(parent).or_default().push(key);
                }
                self.sync.created(call, ty, h);
            }
        }
        if kind == checks::DESTROY {
            let mut gone = Vec::new();
            checks::destroyed(call, &mut |ty, h| gone.push((ty, h)));
            for (ty, h) in gone {
                self.destroy(ty, h, seq);
            }
        } else if let Call::vkResetDescriptorPool(p) = call {
            self.end_children(p.descriptor_pool, seq);
        } else if let Call::vkResetCommandPool(p) = call {
            for k in self.children.get(&p.command_pool).into_iter().flatten() {
                if self.objs.get(k).is_some_and(|o| o.parent == p.command_pool) {
                    self.sync.reset_cb(k.1);
                }
            }
        }
        self.sync.after(call, result, self.device);
        if kind != checks::CREATE || result >= 0 {
            self.record.after(call, self.first, kind);
            self.compat.after(call);
        }
    }

    fn destroy(&mut self, ty: vk::ObjectType, h: u64, seq: u64) {
        let key = (ty.as_raw(), h);
        let Some(o) = self.objs.get_mut(&key) else {
            return;
        };
        o.refs = o.refs.saturating_sub(1);
        if o.refs > 0 {
            return;
        }
        self.objs.remove(&key);
        self.dead.insert(key, seq);
        self.sync.destroyed(ty, h);
        self.record.destroyed(h);
        self.compat.destroyed(h);
        match ty {
            vk::ObjectType::DEVICE => {
                let gone: Vec<(i32, u64)> = self
                    .objs
                    .iter()
                    .filter(|(_, o)| o.device == h)
                    .map(|(k, _)| *k)
                    .collect();
                for k in gone {
                    self.objs.remove(&k);
                    self.dead.insert(k, seq);
                    self.sync.destroyed(vk::ObjectType::from_raw(k.0), k.1);
                }
            }
            vk::ObjectType::INSTANCE => {
                for (k, _) in self.objs.drain() {
                    self.dead.insert(k, seq);
                }
                self.sync = sync::Sync::default();
            }
            _ => self.end_children(h, seq),
        }
    }

    /// Ends what was allocated from a pool or swapchain (destroyed or reset).
    fn end_children(&mut self, parent: u64, seq: u64) {
        for k in self.children.remove(&parent).unwrap_or_default() {
            if self.objs.get(&k).is_some_and(|o| o.parent == parent) {
                self.objs.remove(&k);
                self.dead.insert(k, seq);
                self.sync.destroyed(vk::ObjectType::from_raw(k.0), k.1);
            }
        }
    }

    /// The engine did the wait an [`Action`] asked for.
    pub fn waited(&mut self, action: Action) {
        self.waits += 1;
        self.sync.waited(action);
    }

    /// Whether a replayed submission ran `command_buffer` (directly or as a secondary).
    pub fn ever_submitted(&self, command_buffer: u64) -> bool {
        self.sync.ever_submitted(command_buffer)
    }
}

/// The pool or swapchain whose end ends the objects `call` creates.
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
