//! The state tracker behind trimmed capture (`QUARRY_CAPTURE_FRAMES=A-B` with A > 0).
//!
//! Until frame A the layer writes nothing: every call is still encoded, and the tracker keeps only
//! what rebuilds the state alive at that moment, keyed by the call's `seq`:
//! - creation calls (any call that writes a handle), while one of the handles they made lives;
//! - calls that define an object's state, owned by it: memory bindings, descriptor updates, the
//!   current mapping, and the last recording of every command buffer (with its query records);
//! - `QueryPool`, `DebugName`, `Device` and `Note` records.
//!
//! Destroying an object drops its creation and what it owns, and the objects made from it (pool
//! children, everything of a destroyed device). Objects other creations may refer to after they
//! are gone (shader modules, layouts, render passes, samplers, caches, templates) keep their
//! creation and destroy calls, so a pipeline made from a deleted shader module still replays.
//! Submitted command buffers move image layouts (barriers and render-pass final layouts), so the
//! snapshot can put every image back in the layout the app left it in.
//!
//! Cost: one decode per creation/destroy/bind/update/submit call and a map insert per recorded
//! command; memory holds the encoded calls of live objects and current recordings.

use crate::runtime::{self, DeviceData};
use crate::state::{HandleHasher, HandleMap};
use ash::vk;
use ash::vk::Handle;
use format::record::{self, Record};
use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;
use vkstream::Call;

/// Handles the snapshot makes up for its own objects (a command pool and buffer); far above what
/// drivers hand out as pointers or small integers.
const SYNTHETIC_BASE: u64 = 0xFFFF_F000_0000_0000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// vkCmd*: owned by its command buffer.
    Cmd,
    BeginCb,
    ResetCb,
    ResetCommandPool,
    ResetDescriptorPool,
    Create,
    Destroy,
    Free,
    Bind,
    Update,
    Map,
    Unmap,
    Submit,
    /// Not state: submits' side effects are read at the snapshot instead (fences, memory).
    Drop,
}

fn classify(name: &str) -> Class {
    match name {
        "vkBeginCommandBuffer" => Class::BeginCb,
        "vkEndCommandBuffer" => Class::Cmd,
        "vkResetCommandBuffer" => Class::ResetCb,
        "vkResetCommandPool" => Class::ResetCommandPool,
        "vkResetDescriptorPool" => Class::ResetDescriptorPool,
        "vkUpdateDescriptorSets"
        | "vkUpdateDescriptorSetWithTemplate"
        | "vkUpdateDescriptorSetWithTemplateKHR" => Class::Update,
        "vkMapMemory" | "vkMapMemory2KHR" | "vkMapMemory2" => Class::Map,
        "vkUnmapMemory" | "vkUnmapMemory2KHR" | "vkUnmapMemory2" => Class::Unmap,
        "vkQueueSubmit" | "vkQueueSubmit2" | "vkQueueSubmit2KHR" => Class::Submit,
        "vkGetDeviceQueue"
        | "vkGetDeviceQueue2"
        | "vkGetSwapchainImagesKHR"
        | "vkEnumeratePhysicalDevices" => Class::Create,
        n if n.starts_with("vkCmd") => Class::Cmd,
        n if n.starts_with("vkCreate") || n.starts_with("vkAllocate") => Class::Create,
        n if n.starts_with("vkDestroy") => Class::Destroy,
        n if n.starts_with("vkFree") => Class::Free,
        n if n.starts_with("vkBind") && n.contains("Memory") => Class::Bind,
        _ => Class::Drop,
    }
}

fn class_of(cmd: u32) -> Class {
    static TABLE: OnceLock<Vec<Class>> = OnceLock::new();
    TABLE
        .get_or_init(|| vkstream::COMMANDS.iter().map(|n| classify(n)).collect())
        .get(cmd as usize)
        .copied()
        .unwrap_or(Class::Drop)
}

/// Whether command `cmd` can change image layouts (barriers and render pass begins): looked up once
/// per command in every recording submitted.
fn moves_layouts(cmd: u32) -> bool {
    static TABLE: OnceLock<Vec<bool>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            vkstream::COMMANDS
                .iter()
                .map(|n| {
                    n.starts_with("vkCmdPipelineBarrier") || n.starts_with("vkCmdBeginRenderPass")
                })
                .collect()
        })
        .get(cmd as usize)
        .copied()
        .unwrap_or(false)
}

/// Whether the tracker keeps anything of command `cmd` (the layer skips encoding the rest while
/// tracking).
pub fn wanted(cmd: u32) -> bool {
    class_of(cmd) != Class::Drop
}

/// Objects that later creations may name after the app destroyed them.
fn is_definition(ty: vk::ObjectType) -> bool {
    matches!(
        ty,
        vk::ObjectType::SHADER_MODULE
            | vk::ObjectType::PIPELINE_LAYOUT
            | vk::ObjectType::DESCRIPTOR_SET_LAYOUT
            | vk::ObjectType::RENDER_PASS
            | vk::ObjectType::SAMPLER
            | vk::ObjectType::PIPELINE_CACHE
            | vk::ObjectType::SAMPLER_YCBCR_CONVERSION
            | vk::ObjectType::DESCRIPTOR_UPDATE_TEMPLATE
    )
}

/// Containers a `vkFree*` call names besides what it frees (and the dispatchable parents).
fn is_parent(ty: vk::ObjectType) -> bool {
    matches!(
        ty,
        vk::ObjectType::COMMAND_POOL
            | vk::ObjectType::DESCRIPTOR_POOL
            | vk::ObjectType::SWAPCHAIN_KHR
            | vk::ObjectType::DEVICE
            | vk::ObjectType::INSTANCE
            | vk::ObjectType::PHYSICAL_DEVICE
    )
}

#[derive(Default, Clone, Debug)]
enum Info {
    #[default]
    None,
    Image {
        initial_layout: i32,
        format: i32,
        /// Layout after the last submitted command buffer that moved it.
        layout: Option<i32>,
        swapchain: bool,
    },
    View {
        image: u64,
    },
    Framebuffer {
        views: Vec<u64>,
    },
    RenderPass {
        finals: Vec<i32>,
    },
    Fence {
        created_signaled: bool,
    },
    Queue {
        family: u32,
    },
    /// A timeline semaphore and its initial value.
    Timeline {
        initial: u64,
    },
}

struct Obj {
    ty: vk::ObjectType,
    /// Key of the call that created it.
    creator: (u64, u32),
    /// The dispatchable handle its creation was called on (its device or instance).
    parent: u64,
    /// Keys of the records it owns (state-defining calls, query records).
    owned: Vec<(u64, u32)>,
    /// Command buffers: the current recording (calls and their query records), kept here rather
    /// than in the shared map because it is the hot path (one push per recorded command).
    recording: Recording,
    /// Objects made from it (pool children, a device's objects).
    children: Vec<u64>,
    /// Destroyed by the app, kept for creations that named it (definitions only).
    destroyed: bool,
    /// The current vkMapMemory call (memory objects).
    map_call: Option<(u64, u32)>,
    info: Info,
}

/// A call as the layer hands it over while tracking: the parameters borrowed from its encoder,
/// copied only where the tracker keeps them.
#[derive(Clone, Copy)]
pub struct CallRef<'a> {
    pub seq: u64,
    pub thread: u32,
    pub cmd: u32,
    pub host_ns: u64,
    pub result: i32,
    pub params: &'a [u8],
}

impl<'a> CallRef<'a> {
    pub fn of(c: &'a record::Call) -> Self {
        CallRef {
            seq: c.seq,
            thread: c.thread,
            cmd: c.cmd,
            host_ns: c.host_ns,
            result: c.result,
            params: &c.params,
        }
    }

    pub fn to_owned(self) -> record::Call {
        record::Call {
            seq: self.seq,
            thread: self.thread,
            cmd: self.cmd,
            host_ns: self.host_ns,
            result: self.result,
            params: self.params.to_vec(),
        }
    }
}

/// A command buffer's current recording. It is the tracker's hot path (one entry per recorded
/// command), so a call's parameters go into one buffer per command buffer instead of an
/// allocation each, and an entry is 40 bytes rather than a 256-byte `Record`.
#[derive(Default)]
struct Recording {
    entries: Vec<((u64, u32), Recorded)>,
    params: Vec<u8>,
    /// The query commands' records, in order.
    ops: Vec<record::QueryOp>,
}

enum Recorded {
    /// A call whose parameters are `params[at..at + len]`.
    Call {
        seq: u64,
        host_ns: u64,
        thread: u32,
        cmd: u32,
        result: i32,
        at: u32,
        len: u32,
    },
    /// `ops[i]`: a query command's record (several per frame in query-heavy apps).
    QueryOp(u32),
    /// A region record (rare).
    Other(Box<Record>),
}

impl Recording {
    fn clear(&mut self) {
        self.entries.clear();
        self.params.clear();
        self.ops.clear();
    }

    /// Bytes its buffers hold allocated.
    fn bytes(&self) -> usize {
        self.params.capacity()
            + self.entries.capacity() * std::mem::size_of::<((u64, u32), Recorded)>()
            + self.ops.capacity() * std::mem::size_of::<record::QueryOp>()
    }

    fn push_op(&mut self, key: (u64, u32), op: record::QueryOp) {
        match u32::try_from(self.ops.len()) {
            Ok(i) => {
                self.ops.push(op);
                self.entries.push((key, Recorded::QueryOp(i)));
            }
            Err(_) => self
                .entries
                .push((key, Recorded::Other(Box::new(Record::QueryOp(op))))),
        }
    }

    fn push_call(&mut self, c: CallRef<'_>) {
        let (Ok(at), Ok(len)) = (
            u32::try_from(self.params.len()),
            u32::try_from(c.params.len()),
        ) else {
            // Over 4 GiB of parameters in one recording: kept whole instead.
            self.push(
                (c.seq, 0),
                Recorded::Other(Box::new(Record::Call(c.to_owned()))),
            );
            return;
        };
        self.params.extend_from_slice(c.params);
        let rec = Recorded::Call {
            seq: c.seq,
            host_ns: c.host_ns,
            thread: c.thread,
            cmd: c.cmd,
            result: c.result,
            at,
            len,
        };
        self.entries.push(((c.seq, 0), rec));
    }

    fn push(&mut self, key: (u64, u32), rec: Recorded) {
        self.entries.push((key, rec));
    }

    fn call<'a>(&'a self, rec: &'a Recorded) -> Option<CallRef<'a>> {
        match rec {
            &Recorded::Call {
                seq,
                host_ns,
                thread,
                cmd,
                result,
                at,
                len,
            } => Some(CallRef {
                seq,
                thread,
                cmd,
                host_ns,
                result,
                // In range by construction: `push_call` appended them.
                params: self
                    .params
                    .get(at as usize..at as usize + len as usize)
                    .unwrap_or_default(),
            }),
            Recorded::QueryOp(_) => None,
            Recorded::Other(r) => match &**r {
                Record::Call(c) => Some(CallRef::of(c)),
                _ => None,
            },
        }
    }

    /// The calls, in order.
    fn calls(&self) -> impl Iterator<Item = CallRef<'_>> {
        self.entries.iter().filter_map(|(_, r)| self.call(r))
    }
}

/// A record the snapshot walks: one kept whole, or an entry of a recording.
#[derive(Clone, Copy)]
enum Entry<'a> {
    Kept(&'a Record),
    Recorded(&'a Recording, &'a Recorded),
}

impl<'a> Entry<'a> {
    fn as_call(self) -> Option<CallRef<'a>> {
        match self {
            Entry::Kept(Record::Call(c)) => Some(CallRef::of(c)),
            Entry::Kept(_) => None,
            Entry::Recorded(owner, r) => owner.call(r),
        }
    }

    fn to_record(self) -> Record {
        match self {
            Entry::Kept(r) => r.clone(),
            Entry::Recorded(_, Recorded::Other(r)) => (**r).clone(),
            Entry::Recorded(owner, &Recorded::QueryOp(i)) => match owner.ops.get(i as usize) {
                Some(op) => Record::QueryOp(op.clone()),
                None => unreachable!("a recording's query entry indexes its ops"),
            },
            Entry::Recorded(owner, r) => match owner.call(r) {
                Some(c) => Record::Call(c.to_owned()),
                None => unreachable!("a recording's entry is a call or a boxed record"),
            },
        }
    }
}

struct Kept {
    /// Boxed: the kept map is a B-tree, which shifts its values within a node at every insert and
    /// remove (a `Record` is 256 bytes).
    rec: Box<Record>,
    /// Handles the record lives for: creations until the last of them dies; owned records until
    /// every owner dies.
    holders: Vec<u64>,
}

#[derive(Default)]
pub struct Tracker {
    kept: BTreeMap<(u64, u32), Kept>,
    objects: HandleMap<Obj>,
    /// Per command buffer: image layouts its recording leaves (computed at the first submit).
    effects: HandleMap<Vec<(u64, i32)>>,
    /// Sub-key for records that carry no seq of their own (placed after the last call).
    sub: u32,
    last_seq: u64,
    /// Calls the tracker could not decode (kept as they are).
    pub undecodable: u64,
    /// Handles destroyed and not created again: state naming them cannot replay. Pruned (see
    /// `prune_dead`) so that an app destroying objects every frame does not grow it forever.
    dead: std::collections::HashSet<u64, BuildHasherDefault<HandleHasher>>,
    /// `dead`'s size that triggers the next prune.
    prune_at: usize,
    /// Recordings of freed command buffers, emptied, for the next ones allocated: apps that
    /// allocate a command buffer per frame would otherwise grow a new recording from nothing
    /// (reallocations, fresh pages) every frame.
    spare: Vec<Recording>,
}

/// `dead` is first pruned at this size.
const DEAD_PRUNE_MIN: usize = 4096;

/// At most this many spare recordings, each holding at most `SPARE_BYTES` allocated.
const SPARE: usize = 16;
const SPARE_BYTES: usize = 1 << 20;

fn decode(cmd: u32, params: &[u8]) -> Option<Call> {
    vkstream::decode_call(cmd, params).ok()
}

fn handles(call: &Call) -> Vec<(vk::ObjectType, u64, bool)> {
    let mut v = Vec::new();
    vkstream::handles::call_handles(call, &mut |t, h, c| v.push((t, h, c)));
    v
}

fn first_u64(params: &[u8]) -> u64 {
    params
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .unwrap_or(0)
}

impl Tracker {
    /// Offers one record written while tracking; keeps it when it builds state.
    pub fn offer(&mut self, rec: Record) {
        match rec {
            Record::Call(c) => {
                self.last_seq = c.seq;
                self.sub = 0;
                self.call(c);
            }
            Record::QueryPool(ref p) => {
                let owner = p.pool;
                self.keep_owned(rec, &[owner]);
            }
            Record::DebugName(ref n) => {
                let owner = n.handle;
                if self.objects.contains_key(&owner) {
                    self.keep_owned(rec, &[owner]);
                }
            }
            Record::QueryOp(op) if op.command_buffer != 0 => {
                let cb = op.command_buffer;
                let key = self.plain_key();
                if let Some(o) = self.objects.get_mut(&cb) {
                    o.recording.push_op(key, op);
                }
            }
            Record::RegionCounters(ref r) => {
                let cb = r.command_buffer;
                let key = self.plain_key();
                if let Some(o) = self.objects.get_mut(&cb) {
                    o.recording.push(key, Recorded::Other(Box::new(rec)));
                }
            }
            Record::Device(_) | Record::Note(_) => {
                let key = self.plain_key();
                self.kept.insert(
                    key,
                    Kept {
                        rec: Box::new(rec),
                        holders: Vec::new(),
                    },
                );
            }
            _ => {}
        }
    }

    fn plain_key(&mut self) -> (u64, u32) {
        self.sub += 1;
        (self.last_seq, self.sub)
    }

    /// Offers one call: what [`offer`](Self::offer) does with a `Record::Call`, without
    /// wrapping it (the hot path: every recorded command while tracking).
    pub fn offer_call(&mut self, c: CallRef<'_>) {
        self.last_seq = c.seq;
        self.sub = 0;
        if !self.recorded_call(c) {
            self.call(c.to_owned());
        }
    }

    /// Commands, begins and resets of command buffers, from the borrowed parameters; false for
    /// every other call.
    fn recorded_call(&mut self, c: CallRef<'_>) -> bool {
        let class = class_of(c.cmd);
        if class == Class::Drop || c.result < 0 {
            return true;
        }
        if class != Class::Cmd && class != Class::BeginCb && class != Class::ResetCb {
            return false;
        }
        let cb = first_u64(c.params);
        if class != Class::Cmd {
            self.effects.remove(&cb);
        }
        if let Some(o) = self.objects.get_mut(&cb) {
            if class != Class::Cmd {
                o.recording.clear();
            }
            if class != Class::ResetCb {
                o.recording.push_call(c);
            }
        }
        true
    }

    fn keep_owned(&mut self, rec: Record, owners: &[u64]) {
        let key = match &rec {
            Record::Call(c) => (c.seq, 0),
            _ => self.plain_key(),
        };
        let mut holders = Vec::new();
        for o in owners {
            if let Some(obj) = self.objects.get_mut(o) {
                obj.owned.push(key);
                holders.push(*o);
            }
        }
        if !holders.is_empty() {
            self.kept.insert(
                key,
                Kept {
                    rec: Box::new(rec),
                    holders,
                },
            );
        }
    }

    fn call(&mut self, c: record::Call) {
        if self.recorded_call(CallRef::of(&c)) {
            return;
        }
        let class = class_of(c.cmd);
        let Some(call) = decode(c.cmd, &c.params) else {
            self.undecodable += 1;
            return;
        };
        let hs = handles(&call);
        match class {
            Class::Create => self.create(c, &call, &hs),
            Class::Destroy => {
                if let Some(&(ty, h, _)) = hs.last() {
                    self.destroy(c, ty, h);
                }
            }
            Class::Free => {
                let dead: Vec<(vk::ObjectType, u64)> = hs
                    .iter()
                    .skip(1)
                    .filter(|(t, _, _)| !is_parent(*t))
                    .map(|(t, h, _)| (*t, *h))
                    .collect();
                for (_, h) in dead {
                    self.kill(h);
                }
            }
            Class::ResetCommandPool | Class::ResetDescriptorPool => {
                let pool = hs.get(1).map(|x| x.1).unwrap_or(0);
                let children = self
                    .objects
                    .get(&pool)
                    .map(|o| o.children.clone())
                    .unwrap_or_default();
                for ch in children {
                    if class == Class::ResetCommandPool {
                        if let Some(o) = self.objects.get_mut(&ch) {
                            o.recording.clear();
                        }
                        self.effects.remove(&ch);
                    } else {
                        self.kill(ch);
                    }
                }
            }
            Class::Bind => {
                let owners: Vec<u64> = hs
                    .iter()
                    .skip(1)
                    .filter(|(t, _, _)| *t != vk::ObjectType::DEVICE_MEMORY)
                    .map(|x| x.1)
                    .collect();
                self.keep_owned(Record::Call(c), &owners);
            }
            Class::Update => {
                let owners: Vec<u64> = hs
                    .iter()
                    .filter(|(t, _, _)| *t == vk::ObjectType::DESCRIPTOR_SET)
                    .map(|x| x.1)
                    .collect();
                self.keep_owned(Record::Call(c), &owners);
            }
            Class::Map => {
                let Some(mem) = hs
                    .iter()
                    .find(|x| x.0 == vk::ObjectType::DEVICE_MEMORY)
                    .map(|x| x.1)
                else {
                    return;
                };
                let key = (c.seq, 0);
                self.keep_owned(Record::Call(c), &[mem]);
                if let Some(o) = self.objects.get_mut(&mem) {
                    o.map_call = Some(key);
                }
            }
            Class::Unmap => {
                let Some(mem) = hs
                    .iter()
                    .find(|x| x.0 == vk::ObjectType::DEVICE_MEMORY)
                    .map(|x| x.1)
                else {
                    return;
                };
                if let Some(key) = self.objects.get_mut(&mem).and_then(|o| o.map_call.take()) {
                    self.release(key, mem);
                }
            }
            Class::Submit => self.submitted(&call),
            _ => {}
        }
    }

    fn create(&mut self, c: record::Call, call: &Call, hs: &[(vk::ObjectType, u64, bool)]) {
        let created: Vec<(vk::ObjectType, u64)> =
            hs.iter().filter(|x| x.2).map(|x| (x.0, x.1)).collect();
        if created.is_empty() {
            return;
        }
        // vkEnumeratePhysicalDevices, vkGetDeviceQueue and vkGetSwapchainImagesKHR hand out the same
        // handles every time: a repeat changes nothing.
        let name = vkstream::COMMANDS
            .get(c.cmd as usize)
            .copied()
            .unwrap_or("");
        let makes_new = name.starts_with("vkCreate") || name.starts_with("vkAllocate");
        if !makes_new && created.iter().all(|(_, h)| self.objects.contains_key(h)) {
            return;
        }
        let key = (c.seq, 0);
        let parent = hs.first().filter(|x| !x.2).map(|x| x.1).unwrap_or(0);
        // The pool (or swapchain) the new objects die with; an `oldSwapchain` is not one.
        let pools: Vec<u64> = hs
            .iter()
            .skip(1)
            .filter(|x| !x.2)
            .filter(|x| {
                created.iter().any(|(ty, _)| {
                    matches!(
                        (x.0, *ty),
                        (vk::ObjectType::COMMAND_POOL, vk::ObjectType::COMMAND_BUFFER)
                            | (
                                vk::ObjectType::DESCRIPTOR_POOL,
                                vk::ObjectType::DESCRIPTOR_SET
                            )
                            | (vk::ObjectType::SWAPCHAIN_KHR, vk::ObjectType::IMAGE)
                    )
                })
            })
            .map(|x| x.1)
            .collect();
        let info = creation_info(call);
        let mut holders = Vec::new();
        for &(ty, h) in &created {
            match self.objects.get(&h).map(|o| o.destroyed) {
                // A destroyed definition whose handle value the driver hands out again: its
                // creation and destroy calls stay in the snapshot (what was made from it needs
                // them, and replay runs them before this creation).
                Some(true) => {
                    self.objects.remove(&h);
                }
                Some(false) if !makes_new => continue,
                // A live handle created again: the old object is gone (missed destruction).
                Some(false) => self.kill(h),
                None => {}
            }
            self.dead.remove(&h);
            let info = info.clone();
            self.objects.insert(
                h,
                Obj {
                    ty,
                    creator: key,
                    parent,
                    owned: Vec::new(),
                    recording: if ty == vk::ObjectType::COMMAND_BUFFER {
                        self.spare.pop().unwrap_or_default()
                    } else {
                        Recording::default()
                    },
                    children: Vec::new(),
                    destroyed: false,
                    map_call: None,
                    info,
                },
            );
            holders.push(h);
            for p in pools.iter().chain(std::iter::once(&parent)) {
                if let Some(o) = self.objects.get_mut(p) {
                    o.children.push(h);
                }
            }
        }
        self.kept.insert(
            key,
            Kept {
                rec: Box::new(Record::Call(c)),
                holders,
            },
        );
    }

    fn destroy(&mut self, c: record::Call, ty: vk::ObjectType, h: u64) {
        if is_definition(ty) {
            if let Some(o) = self.objects.get_mut(&h) {
                if !o.destroyed {
                    o.destroyed = true;
                    let key = (c.seq, 0);
                    o.owned.push(key);
                    self.kept.insert(
                        key,
                        Kept {
                            rec: Box::new(Record::Call(c)),
                            holders: vec![h],
                        },
                    );
                    return;
                }
            }
        }
        self.kill(h);
    }

    /// Drops `key`'s hold by `h`; the record goes when nothing holds it.
    fn release(&mut self, key: (u64, u32), h: u64) {
        if let Some(k) = self.kept.get_mut(&key) {
            k.holders.retain(|x| *x != h);
            if k.holders.is_empty() {
                self.kept.remove(&key);
            }
        }
    }

    /// The object is gone: its creation (when no sibling lives), what it owns and its children.
    fn kill(&mut self, h: u64) {
        let mut stack = vec![h];
        while let Some(h) = stack.pop() {
            let Some(o) = self.objects.remove(&h) else {
                continue;
            };
            self.dead.insert(h);
            if o.ty == vk::ObjectType::COMMAND_BUFFER
                && self.spare.len() < SPARE
                && o.recording.bytes() <= SPARE_BYTES
            {
                let mut r = o.recording;
                r.clear();
                self.spare.push(r);
            }
            for key in o.owned {
                self.release(key, h);
            }
            self.release(o.creator, h);
            self.effects.remove(&h);
            stack.extend(o.children);
        }
        if self.dead.len() >= self.prune_at.max(DEAD_PRUNE_MIN) {
            self.prune_dead();
        }
    }

    /// Forgets the dead handles that no kept record or recording names: only those can make the
    /// snapshot leave a call out, and a call made later naming a destroyed handle would be the
    /// app's error. Decodes every kept call, so the next prune waits until `dead` has doubled
    /// and has grown past the number of kept records: amortized, at most a decode or two per
    /// object destroyed.
    fn prune_dead(&mut self) {
        let mut named =
            std::collections::HashSet::<u64, BuildHasherDefault<HandleHasher>>::default();
        let mut note = |c: CallRef<'_>| {
            if let Some(call) = decode(c.cmd, c.params) {
                vkstream::handles::call_handles(&call, &mut |_, h, created| {
                    if !created && self.dead.contains(&h) {
                        named.insert(h);
                    }
                });
            }
        };
        let mut records = 0;
        for k in self.kept.values() {
            if let Record::Call(c) = &*k.rec {
                note(CallRef::of(c));
                records += 1;
            }
        }
        for o in self.objects.values() {
            for c in o.recording.calls() {
                note(c);
                records += 1;
            }
        }
        self.dead.retain(|h| named.contains(h));
        self.prune_at = (2 * self.dead.len()).max(records);
    }

    /// Applies the layout changes of the submitted command buffers to their images.
    fn submitted(&mut self, call: &Call) {
        let cbs: Vec<u64> = match call {
            Call::vkQueueSubmit(p) => p
                .p_submits
                .iter()
                .flatten()
                .flat_map(|s| s.p_command_buffers.iter().flatten().copied())
                .collect(),
            Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) => p
                .p_submits
                .iter()
                .flatten()
                .flat_map(|s| {
                    s.p_command_buffer_infos
                        .iter()
                        .flatten()
                        .map(|i| i.command_buffer)
                })
                .collect(),
            _ => return,
        };
        for cb in cbs {
            if !self.effects.contains_key(&cb) {
                let e = self.layout_effects(cb);
                self.effects.insert(cb, e);
            }
            for (image, layout) in self.effects[&cb].clone() {
                if let Some(Obj {
                    info: Info::Image { layout: l, .. },
                    ..
                }) = self.objects.get_mut(&image)
                {
                    *l = Some(layout);
                }
            }
        }
    }

    /// (image, layout) in order, for the barriers and render passes `cb`'s recording holds.
    fn layout_effects(&self, cb: u64) -> Vec<(u64, i32)> {
        let Some(o) = self.objects.get(&cb) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for c in o.recording.calls() {
            if !moves_layouts(c.cmd) {
                continue;
            }
            let Some(call) = decode(c.cmd, c.params) else {
                continue;
            };
            match &call {
                Call::vkCmdPipelineBarrier(p) => {
                    for b in p.p_image_memory_barriers.iter().flatten() {
                        out.push((b.image, b.new_layout));
                    }
                }
                Call::vkCmdPipelineBarrier2(p) | Call::vkCmdPipelineBarrier2KHR(p) => {
                    for b in p
                        .p_dependency_info
                        .iter()
                        .flat_map(|d| d.p_image_memory_barriers.iter().flatten())
                    {
                        out.push((b.image, b.new_layout));
                    }
                }
                Call::vkCmdBeginRenderPass(p) => {
                    if let Some(b) = &p.p_render_pass_begin {
                        self.render_pass_finals(b.render_pass, b.framebuffer, &mut out);
                    }
                }
                Call::vkCmdBeginRenderPass2(p) | Call::vkCmdBeginRenderPass2KHR(p) => {
                    if let Some(b) = &p.p_render_pass_begin {
                        self.render_pass_finals(b.render_pass, b.framebuffer, &mut out);
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn render_pass_finals(&self, rp: u64, fb: u64, out: &mut Vec<(u64, i32)>) {
        let finals = match self.objects.get(&rp).map(|o| &o.info) {
            Some(Info::RenderPass { finals }) => finals,
            _ => return,
        };
        let views = match self.objects.get(&fb).map(|o| &o.info) {
            Some(Info::Framebuffer { views }) => views,
            _ => return,
        };
        for (view, layout) in views.iter().zip(finals) {
            if let Some(Info::View { image }) = self.objects.get(view).map(|o| &o.info) {
                out.push((*image, *layout));
            }
        }
    }
}

/// What the snapshot needs to know about an object beyond its creation call.
fn creation_info(call: &Call) -> Info {
    match call {
        Call::vkCreateImage(p) => match &p.p_create_info {
            Some(ci) => Info::Image {
                initial_layout: ci.initial_layout,
                format: ci.format,
                layout: None,
                swapchain: false,
            },
            None => Info::None,
        },
        Call::vkGetSwapchainImagesKHR(_) => Info::Image {
            initial_layout: 0,
            format: 0,
            layout: None,
            swapchain: true,
        },
        Call::vkCreateImageView(p) => Info::View {
            image: p.p_create_info.as_ref().map(|c| c.image).unwrap_or(0),
        },
        Call::vkCreateFramebuffer(p) => Info::Framebuffer {
            views: p
                .p_create_info
                .as_ref()
                .and_then(|c| c.p_attachments.clone())
                .unwrap_or_default(),
        },
        Call::vkCreateRenderPass(p) => Info::RenderPass {
            finals: p
                .p_create_info
                .iter()
                .flat_map(|c| c.p_attachments.iter().flatten().map(|a| a.final_layout))
                .collect(),
        },
        Call::vkCreateRenderPass2(p) | Call::vkCreateRenderPass2KHR(p) => Info::RenderPass {
            finals: p
                .p_create_info
                .iter()
                .flat_map(|c| c.p_attachments.iter().flatten().map(|a| a.final_layout))
                .collect(),
        },
        Call::vkCreateFence(p) => Info::Fence {
            created_signaled: p
                .p_create_info
                .as_ref()
                .is_some_and(|c| c.flags & vk::FenceCreateFlags::SIGNALED.as_raw() != 0),
        },
        Call::vkCreateSemaphore(p) => p
            .p_create_info
            .iter()
            .flat_map(|c| c.p_next.iter())
            .find_map(|e| match e {
                vkstream::PNext::VkSemaphoreTypeCreateInfo(t)
                    if t.semaphore_type == vk::SemaphoreType::TIMELINE.as_raw() =>
                {
                    Some(Info::Timeline {
                        initial: t.initial_value,
                    })
                }
                _ => None,
            })
            .unwrap_or_default(),
        Call::vkGetDeviceQueue(p) => Info::Queue {
            family: p.queue_family_index,
        },
        Call::vkGetDeviceQueue2(p) => Info::Queue {
            family: p
                .p_queue_info
                .as_ref()
                .map(|i| i.queue_family_index)
                .unwrap_or(0),
        },
        _ => Info::None,
    }
}

/// Aspect of an image format, for a whole-image barrier.
fn aspect(format: i32) -> vk::ImageAspectFlags {
    match vk::Format::from_raw(format) {
        vk::Format::D16_UNORM | vk::Format::X8_D24_UNORM_PACK32 | vk::Format::D32_SFLOAT => {
            vk::ImageAspectFlags::DEPTH
        }
        vk::Format::S8_UINT => vk::ImageAspectFlags::STENCIL,
        vk::Format::D16_UNORM_S8_UINT
        | vk::Format::D24_UNORM_S8_UINT
        | vk::Format::D32_SFLOAT_S8_UINT => {
            vk::ImageAspectFlags::DEPTH | vk::ImageAspectFlags::STENCIL
        }
        _ => vk::ImageAspectFlags::COLOR,
    }
}

/// The snapshot, ready to write: records in order, then what it could not restore.
pub struct Snapshot {
    pub records: Vec<SnapRecord>,
    pub objects: u64,
    pub gaps: Vec<String>,
}

/// A snapshot entry: a kept record (with its seq), memory contents, or a made-up call the writer
/// numbers.
pub enum SnapRecord {
    Kept(Box<Record>),
    Memory {
        memory: u64,
        offset: u64,
        bytes: Vec<u8>,
    },
    Made {
        cmd: u32,
        params: Vec<u8>,
    },
}

fn made(name: &str, encode: impl FnOnce(&mut vkstream::Encoder)) -> Option<SnapRecord> {
    let cmd = vkstream::command_id(name)?;
    let mut e = vkstream::Encoder::new();
    encode(&mut e);
    Some(SnapRecord::Made {
        cmd,
        params: e.into_bytes(),
    })
}

impl Tracker {
    /// Builds the snapshot. `memory` holds the contents of host-visible allocations, read by the
    /// caller; `fence_signaled` answers the current status of a live fence.
    pub fn snapshot(
        &self,
        memory: Vec<(u64, u64, Vec<u8>)>,
        mut gaps: Vec<String>,
        fence_signaled: &dyn Fn(u64, u64) -> Option<bool>,
        timeline_value: &dyn Fn(u64, u64) -> Option<u64>,
    ) -> Snapshot {
        let mut records = Vec::new();
        let mut dropped = 0u64;
        let mut first_dropped = None;
        // Kept records and command-buffer recordings, in original order.
        let mut all: Vec<(&(u64, u32), Entry)> = self
            .kept
            .iter()
            .map(|(k, v)| (k, Entry::Kept(&v.rec)))
            .collect();
        for o in self.objects.values() {
            let owner = &o.recording;
            all.extend(
                owner
                    .entries
                    .iter()
                    .map(move |(k, r)| (k, Entry::Recorded(owner, r))),
            );
        }
        all.sort_unstable_by_key(|(k, _)| **k);
        for (_, rec) in all {
            if let Some(c) = rec.as_call() {
                // A state call that names an object destroyed before the trim point (a descriptor
                // naming a deleted view, a recording that used a deleted staging buffer) cannot
                // replay; it is left out.
                if let Some(call) = decode(c.cmd, c.params) {
                    let dead = handles(&call)
                        .into_iter()
                        .find(|(_, h, created)| !created && self.dead.contains(h));
                    if let Some((ty, h, _)) = dead {
                        dropped += 1;
                        first_dropped.get_or_insert_with(|| {
                            format!(
                                "{} (seq {}) names {ty:?} {h:#x}",
                                vkstream::COMMANDS
                                    .get(c.cmd as usize)
                                    .copied()
                                    .unwrap_or("?"),
                                c.seq
                            )
                        });
                        continue;
                    }
                }
            }
            records.push(SnapRecord::Kept(Box::new(rec.to_record())));
        }
        if dropped > 0 {
            gaps.push(format!(
                "{dropped} recorded calls name objects destroyed before the trim point and were left out \
                 (first: {})",
                first_dropped.unwrap_or_default()
            ));
        }
        for (memory, offset, bytes) in memory {
            records.push(SnapRecord::Memory {
                memory,
                offset,
                bytes,
            });
        }
        // Fences: the app may wait on one that a submit before the trim point signaled.
        let queue_of = |device: u64| -> Option<(u64, u32)> {
            self.objects
                .iter()
                .filter(|(_, o)| o.parent == device)
                .filter_map(|(h, o)| match o.info {
                    Info::Queue { family } => Some((*h, family)),
                    _ => None,
                })
                .min()
        };
        let mut fences: Vec<(&u64, &Obj)> = self
            .objects
            .iter()
            .filter(|(_, o)| o.ty == vk::ObjectType::FENCE)
            .collect();
        fences.sort_by_key(|(h, _)| **h);
        for (&fence, o) in fences {
            let Info::Fence { created_signaled } = o.info else {
                continue;
            };
            let Some(signaled) = fence_signaled(o.parent, fence) else {
                continue;
            };
            let device = vk::Device::from_raw(o.parent);
            let f = vk::Fence::from_raw(fence);
            if created_signaled && !signaled {
                records.extend(made("vkResetFences", |e| unsafe {
                    vkstream::encode::vkResetFences(e, device, 1, &f)
                }));
            } else if signaled && !created_signaled {
                match queue_of(o.parent) {
                    Some((q, _)) => records.extend(made("vkQueueSubmit", |e| unsafe {
                        vkstream::encode::vkQueueSubmit(
                            e,
                            vk::Queue::from_raw(q),
                            0,
                            std::ptr::null(),
                            f,
                        )
                    })),
                    None => gaps.push(format!(
                        "fence {fence:#x}: signaled, but no queue to signal it on"
                    )),
                }
            }
        }
        // Timeline semaphores: the app may wait for a value signaled before the trim point.
        let mut timelines: Vec<(&u64, &Obj)> = self
            .objects
            .iter()
            .filter(|(_, o)| matches!(o.info, Info::Timeline { .. }))
            .collect();
        timelines.sort_by_key(|(h, _)| **h);
        for (&sem, o) in timelines {
            let Info::Timeline { initial } = o.info else {
                continue;
            };
            match timeline_value(o.parent, sem) {
                Some(v) if v > initial => {
                    let info = vk::SemaphoreSignalInfo::default()
                        .semaphore(vk::Semaphore::from_raw(sem))
                        .value(v);
                    let device = vk::Device::from_raw(o.parent);
                    records.extend(made("vkSignalSemaphore", |e| unsafe {
                        vkstream::encode::vkSignalSemaphore(e, device, &info)
                    }));
                }
                Some(_) => {}
                None => gaps.push(format!(
                    "timeline semaphore {sem:#x}: its value could not be read (vkGetSemaphoreCounterValue)"
                )),
            }
        }
        // Image layouts: one made-up command buffer per device moves every image from its initial
        // layout to the one the app left it in.
        let mut by_device: BTreeMap<u64, Vec<vk::ImageMemoryBarrier<'static>>> = BTreeMap::new();
        for (&image, o) in &self.objects {
            if let Info::Image {
                initial_layout,
                format,
                layout: Some(layout),
                swapchain: false,
            } = o.info
            {
                if layout == initial_layout || layout == vk::ImageLayout::UNDEFINED.as_raw() {
                    continue;
                }
                by_device.entry(o.parent).or_default().push(
                    vk::ImageMemoryBarrier::default()
                        .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
                        .dst_access_mask(
                            vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
                        )
                        .old_layout(vk::ImageLayout::from_raw(initial_layout))
                        .new_layout(vk::ImageLayout::from_raw(layout))
                        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                        .image(vk::Image::from_raw(image))
                        .subresource_range(vk::ImageSubresourceRange {
                            aspect_mask: aspect(format),
                            base_mip_level: 0,
                            level_count: vk::REMAINING_MIP_LEVELS,
                            base_array_layer: 0,
                            layer_count: vk::REMAINING_ARRAY_LAYERS,
                        }),
                );
            }
        }
        let mut synthetic = SYNTHETIC_BASE;
        for (device, mut barriers) in by_device {
            barriers.sort_by_key(|b| b.image.as_raw());
            let Some((queue, family)) = graphics_queue(device, &queue_of) else {
                gaps.push(format!(
                    "device {device:#x}: no queue to restore {} image layouts on",
                    barriers.len()
                ));
                continue;
            };
            records.extend(layout_calls(
                device,
                queue,
                family,
                &barriers,
                &mut synthetic,
            ));
        }
        Snapshot {
            records,
            objects: self.objects.values().filter(|o| !o.destroyed).count() as u64,
            gaps,
        }
    }
}

/// A queue of `device` whose family can run any barrier (graphics), else any queue.
fn graphics_queue(device: u64, queue_of: &dyn Fn(u64) -> Option<(u64, u32)>) -> Option<(u64, u32)> {
    let d = runtime::device_data(device)?;
    let graphics = |family: u32| {
        d.queue_families
            .get(family as usize)
            .is_some_and(|f| f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
    };
    let st = d.lock();
    st.queues
        .iter()
        .filter(|(_, f)| graphics(**f))
        .map(|(q, f)| (*q, *f))
        .min()
        .or_else(|| queue_of(device))
}

/// Made-up calls: a command pool and buffer, the barriers, a submit, a wait, the pool destroyed.
fn layout_calls(
    device: u64,
    queue: u64,
    family: u32,
    barriers: &[vk::ImageMemoryBarrier<'_>],
    synthetic: &mut u64,
) -> Vec<SnapRecord> {
    let dev = vk::Device::from_raw(device);
    let q = vk::Queue::from_raw(queue);
    let mut pool = vk::CommandPool::from_raw(*synthetic);
    let mut cb = vk::CommandBuffer::from_raw(*synthetic + 1);
    *synthetic += 2;
    let mut out = Vec::new();
    let pool_ci = vk::CommandPoolCreateInfo::default().queue_family_index(family);
    out.extend(made("vkCreateCommandPool", |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev, &pool_ci, std::ptr::null(), &mut pool)
    }));
    let alloc = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    out.extend(made("vkAllocateCommandBuffers", |e| unsafe {
        vkstream::encode::vkAllocateCommandBuffers(e, dev, &alloc, &mut cb)
    }));
    let begin =
        vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    out.extend(made("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
    }));
    out.extend(made("vkCmdPipelineBarrier", |e| unsafe {
        vkstream::encode::vkCmdPipelineBarrier(
            e,
            cb,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::DependencyFlags::empty(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            barriers.len() as u32,
            barriers.as_ptr(),
        )
    }));
    out.extend(made("vkEndCommandBuffer", |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    }));
    let cbs = [cb];
    let submit = vk::SubmitInfo::default().command_buffers(&cbs);
    out.extend(made("vkQueueSubmit", |e| unsafe {
        vkstream::encode::vkQueueSubmit(e, q, 1, &submit, vk::Fence::null())
    }));
    out.extend(made("vkQueueWaitIdle", |e| unsafe {
        vkstream::encode::vkQueueWaitIdle(e, q)
    }));
    out.extend(made("vkDestroyCommandPool", |e| unsafe {
        vkstream::encode::vkDestroyCommandPool(e, dev, pool, std::ptr::null())
    }));
    out
}

/// Reads the contents of every allocation of `d` into `out` as (memory, offset, bytes): host-visible
/// ones through the app's mapping when mapped (making the shadow equal to it, so later scans send only
/// changes) or a mapping of the layer's own; the others through the GPU (`gpu_read`). What cannot be
/// read is returned as gaps.
/// Whole allocations through `readback::Reader`.
///
/// # Safety
/// The allocations must be live and the device idle.
unsafe fn gpu_read_all(
    d: &DeviceData,
    queues: &[(u64, u32)],
    hidden: &[(u64, u64, u32)],
    out: &mut Vec<(u64, u64, Vec<u8>)>,
) -> Result<(), String> {
    let largest = hidden.iter().map(|h| h.1).max().unwrap_or(0);
    let mut reader = crate::readback::Reader::new(d, queues, largest)?;
    for &(handle, size, type_index) in hidden {
        out.push((handle, 0, reader.read(handle, size, type_index, 0, size)?));
    }
    Ok(())
}

pub fn read_memory(d: &DeviceData, out: &mut Vec<(u64, u64, Vec<u8>)>, gaps: &mut Vec<String>) {
    let force_gpu = crate::readback::forced();
    let mut st = d.lock();
    let mut unmapped = Vec::new();
    let mut hidden = Vec::new();
    for (&handle, m) in st.memories.iter_mut() {
        if !m.host_visible || force_gpu {
            hidden.push((handle, m.size, m.type_index));
            if let Some(map) = m.mapped.as_mut().filter(|map| !map.ptr.is_null()) {
                // SAFETY: the app's mapping is valid while the state lock is held.
                map.shadow =
                    unsafe { std::slice::from_raw_parts(map.ptr as *const u8, map.size as usize) }
                        .to_vec();
            }
            continue;
        }
        match m.mapped.as_mut() {
            Some(map) if !map.ptr.is_null() => {
                // SAFETY: the app's mapping is valid while the state lock is held.
                let live =
                    unsafe { std::slice::from_raw_parts(map.ptr as *const u8, map.size as usize) };
                map.shadow = live.to_vec();
                out.push((handle, map.offset, map.shadow.clone()));
                if map.offset > 0 || map.size < m.size {
                    gaps.push(format!(
                        "memory {handle:#x}: only its mapped range [{}, +{}) of {} bytes is in the snapshot",
                        map.offset, map.size, m.size
                    ));
                }
            }
            _ => unmapped.push((handle, m.size)),
        }
    }
    if let (Some(map), Some(unmap)) = (d.table.vkMapMemory, d.table.vkUnmapMemory) {
        for (handle, size) in unmapped {
            let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
            let mem = vk::DeviceMemory::from_raw(handle);
            // SAFETY: the allocation is live and not mapped by the app (the state lock is held,
            // and vkMapMemory takes it), so the layer may map it for this read.
            let r = unsafe {
                map(
                    d.handle,
                    mem,
                    0,
                    vk::WHOLE_SIZE,
                    vk::MemoryMapFlags::empty(),
                    &mut p,
                )
            };
            if r != vk::Result::SUCCESS || p.is_null() {
                gaps.push(format!("memory {handle:#x}: cannot map it to read ({r:?})"));
                continue;
            }
            // SAFETY: a whole-allocation mapping of `size` bytes.
            let bytes =
                unsafe { std::slice::from_raw_parts(p as *const u8, size as usize) }.to_vec();
            unsafe { unmap(d.handle, mem) };
            out.push((handle, 0, bytes));
        }
    }
    if !hidden.is_empty() {
        hidden.sort();
        // SAFETY: the allocations are live (the state lock is held) and the device is idle.
        let queues: Vec<(u64, u32)> = st.queues.iter().map(|(q, f)| (*q, *f)).collect();
        if let Err(e) = unsafe { gpu_read_all(d, &queues, &hidden, out) } {
            let bytes: u64 = hidden.iter().map(|h| h.1).sum();
            gaps.push(format!(
                "{} allocations ({bytes} bytes) the host cannot map were not read back: {e}",
                hidden.len()
            ));
        }
    }
    drop(st);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: u64 = 0x1000;

    struct Feed {
        t: Tracker,
        seq: u64,
    }

    impl Feed {
        fn new() -> Self {
            Feed {
                t: Tracker::default(),
                seq: 0,
            }
        }

        fn call(&mut self, name: &str, encode: impl FnOnce(&mut vkstream::Encoder)) -> u64 {
            let mut e = vkstream::Encoder::new();
            encode(&mut e);
            self.seq += 1;
            // The layer's path: calls offered borrowed, as `track_call` does.
            self.t.offer_call(CallRef {
                seq: self.seq,
                thread: 1,
                cmd: vkstream::command_id(name).unwrap(),
                host_ns: self.seq * 10,
                result: 0,
                params: e.as_bytes(),
            });
            self.seq
        }
        fn kept(&self) -> Vec<u64> {
            let mut v: Vec<u64> = self.t.kept.keys().map(|k| k.0).collect();
            for o in self.t.objects.values() {
                v.extend(o.recording.entries.iter().map(|(k, _)| k.0));
            }
            v.sort_unstable();
            v
        }
    }

    fn dev() -> vk::Device {
        vk::Device::from_raw(DEV)
    }

    /// A set layout, a pipeline layout made from it, the set layout destroyed: the three seqs.
    fn layout_then_destroyed(f: &mut Feed, set_layout: u64, pipeline_layout: u64) -> [u64; 3] {
        let ci = vk::DescriptorSetLayoutCreateInfo::default();
        let mut l = vk::DescriptorSetLayout::from_raw(set_layout);
        let layout = f.call("vkCreateDescriptorSetLayout", |e| unsafe {
            vkstream::encode::vkCreateDescriptorSetLayout(e, dev(), &ci, std::ptr::null(), &mut l)
        });
        let layouts = [l];
        let pci = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
        let mut pl = vk::PipelineLayout::from_raw(pipeline_layout);
        let made = f.call("vkCreatePipelineLayout", |e| unsafe {
            vkstream::encode::vkCreatePipelineLayout(e, dev(), &pci, std::ptr::null(), &mut pl)
        });
        let destroy = f.call("vkDestroyDescriptorSetLayout", |e| unsafe {
            vkstream::encode::vkDestroyDescriptorSetLayout(e, dev(), l, std::ptr::null())
        });
        [layout, made, destroy]
    }

    /// A buffer bound to memory the app frees afterwards (legal; the buffer is then unusable):
    /// kept state naming a dead handle.
    fn bind_to_freed_memory(f: &mut Feed, buffer: u64, memory: u64) {
        create_buffer(f, buffer);
        let ai = vk::MemoryAllocateInfo::default().allocation_size(4096);
        let mut m = vk::DeviceMemory::from_raw(memory);
        f.call("vkAllocateMemory", |e| unsafe {
            vkstream::encode::vkAllocateMemory(e, dev(), &ai, std::ptr::null(), &mut m)
        });
        f.call("vkBindBufferMemory", |e| unsafe {
            vkstream::encode::vkBindBufferMemory(e, dev(), vk::Buffer::from_raw(buffer), m, 0)
        });
        f.call("vkFreeMemory", |e| unsafe {
            vkstream::encode::vkFreeMemory(e, dev(), m, std::ptr::null())
        });
    }

    fn create_buffer(f: &mut Feed, h: u64) -> u64 {
        let ci = vk::BufferCreateInfo::default()
            .size(64)
            .usage(vk::BufferUsageFlags::UNIFORM_BUFFER);
        let mut b = vk::Buffer::from_raw(h);
        f.call("vkCreateBuffer", |e| unsafe {
            vkstream::encode::vkCreateBuffer(e, dev(), &ci, std::ptr::null(), &mut b)
        })
    }

    #[test]
    fn destroyed_objects_take_their_creation_and_state_with_them() {
        let mut f = Feed::new();
        let buf = create_buffer(&mut f, 0xB1);
        let ai = vk::MemoryAllocateInfo::default().allocation_size(4096);
        let mut m = vk::DeviceMemory::from_raw(0x31);
        let mem = f.call("vkAllocateMemory", |e| unsafe {
            vkstream::encode::vkAllocateMemory(e, dev(), &ai, std::ptr::null(), &mut m)
        });
        let bind = f.call("vkBindBufferMemory", |e| unsafe {
            vkstream::encode::vkBindBufferMemory(e, dev(), vk::Buffer::from_raw(0xB1), m, 0)
        });
        // Not state: dropped at once.
        f.call("vkDeviceWaitIdle", |e| unsafe {
            vkstream::encode::vkDeviceWaitIdle(e, dev())
        });
        assert_eq!(f.kept(), vec![buf, mem, bind]);
        f.call("vkDestroyBuffer", |e| unsafe {
            vkstream::encode::vkDestroyBuffer(
                e,
                dev(),
                vk::Buffer::from_raw(0xB1),
                std::ptr::null(),
            )
        });
        assert_eq!(f.kept(), vec![mem], "buffer creation and binding gone");
        // A mapping lives until the unmap.
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        let map = f.call("vkMapMemory", |e| unsafe {
            vkstream::encode::vkMapMemory(e, dev(), m, 0, 4096, vk::MemoryMapFlags::empty(), &mut p)
        });
        assert_eq!(f.kept(), vec![mem, map]);
        f.call("vkUnmapMemory", |e| unsafe {
            vkstream::encode::vkUnmapMemory(e, dev(), m)
        });
        assert_eq!(f.kept(), vec![mem]);
        f.call("vkFreeMemory", |e| unsafe {
            vkstream::encode::vkFreeMemory(e, dev(), m, std::ptr::null())
        });
        assert!(f.kept().is_empty());
    }

    #[test]
    fn definitions_outlive_their_destruction_for_what_was_made_from_them() {
        let mut f = Feed::new();
        let seqs = layout_then_destroyed(&mut f, 0x51, 0x52);
        assert_eq!(f.kept(), seqs.to_vec());
        // The snapshot keeps the pipeline layout: it names the set layout, which is created (and
        // destroyed) before it in the snapshot.
        let snap =
            f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None);
        assert_eq!(snap.records.len(), 3);
        assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
    }

    #[test]
    fn a_command_buffer_keeps_its_last_recording_and_dies_with_its_pool() {
        let mut f = Feed::new();
        let pci = vk::CommandPoolCreateInfo::default();
        let mut pool = vk::CommandPool::from_raw(0x61);
        let p = f.call("vkCreateCommandPool", |e| unsafe {
            vkstream::encode::vkCreateCommandPool(e, dev(), &pci, std::ptr::null(), &mut pool)
        });
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .command_buffer_count(1);
        let mut cb = vk::CommandBuffer::from_raw(0x62);
        let a = f.call("vkAllocateCommandBuffers", |e| unsafe {
            vkstream::encode::vkAllocateCommandBuffers(e, dev(), &ai, &mut cb)
        });
        let bi = vk::CommandBufferBeginInfo::default();
        let record = |f: &mut Feed| -> Vec<u64> {
            vec![
                f.call("vkBeginCommandBuffer", |e| unsafe {
                    vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
                }),
                f.call("vkCmdDraw", |e| unsafe {
                    vkstream::encode::vkCmdDraw(e, cb, 3, 1, 0, 0)
                }),
                f.call("vkEndCommandBuffer", |e| unsafe {
                    vkstream::encode::vkEndCommandBuffer(e, cb)
                }),
            ]
        };
        let first = record(&mut f);
        assert_eq!(f.kept(), [vec![p, a], first].concat());
        let second = record(&mut f);
        assert_eq!(
            f.kept(),
            [vec![p, a], second.clone()].concat(),
            "re-recording replaces"
        );
        f.call("vkResetCommandPool", |e| unsafe {
            vkstream::encode::vkResetCommandPool(e, dev(), pool, vk::CommandPoolResetFlags::empty())
        });
        assert_eq!(f.kept(), vec![p, a], "a pool reset empties its buffers");
        record(&mut f);
        f.call("vkDestroyCommandPool", |e| unsafe {
            vkstream::encode::vkDestroyCommandPool(e, dev(), pool, std::ptr::null())
        });
        assert!(f.kept().is_empty(), "{:?}", f.kept());
    }

    /// The snapshot gives a recording back as it was offered: calls with their parameters, and the
    /// query records between them, in order; a freed command buffer's recording, reused for the
    /// next one allocated, starts empty.
    #[test]
    fn recordings_come_back_whole_and_reused_ones_start_empty() {
        let mut f = Feed::new();
        let pci = vk::CommandPoolCreateInfo::default();
        let mut pool = vk::CommandPool::from_raw(0x91);
        f.call("vkCreateCommandPool", |e| unsafe {
            vkstream::encode::vkCreateCommandPool(e, dev(), &pci, std::ptr::null(), &mut pool)
        });
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .command_buffer_count(1);
        let bi = vk::CommandBufferBeginInfo::default();
        let op = |cb: u64, seq: u64| {
            Record::QueryOp(record::QueryOp {
                seq,
                command_buffer: cb,
                pool: 0x99,
                kind: record::QueryOpKind::Begin {
                    query: 3,
                    flags: 1,
                    index: 0,
                },
                host_ns: 5,
            })
        };
        let mut expect = Vec::new();
        for (n, raw) in [0x92u64, 0x93].into_iter().enumerate() {
            let mut cb = vk::CommandBuffer::from_raw(raw);
            f.call("vkAllocateCommandBuffers", |e| unsafe {
                vkstream::encode::vkAllocateCommandBuffers(e, dev(), &ai, &mut cb)
            });
            f.call("vkBeginCommandBuffer", |e| unsafe {
                vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
            });
            let draw = f.call("vkCmdDraw", |e| unsafe {
                vkstream::encode::vkCmdDraw(e, cb, 3 + n as u32, 1, 0, 0)
            });
            f.t.offer(op(raw, draw));
            f.call("vkCmdDraw", |e| unsafe {
                vkstream::encode::vkCmdDraw(e, cb, 7, 2, 0, 0)
            });
            if n == 0 {
                f.call("vkFreeCommandBuffers", |e| unsafe {
                    vkstream::encode::vkFreeCommandBuffers(e, dev(), pool, 1, &cb)
                });
                assert_eq!(f.t.spare.len(), 1, "the freed recording is kept for reuse");
            } else {
                assert!(f.t.spare.is_empty(), "the next allocation took it");
                expect = vec![
                    format!("vkBeginCommandBuffer {:?}", [raw.to_le_bytes()].concat()),
                    format!("vkCmdDraw {} 4 1", draw),
                    format!("QueryOp {raw:#x} {draw}"),
                    format!("vkCmdDraw {} 7 2", draw + 1),
                ];
            }
        }
        let snap =
            f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None);
        let cb_records: Vec<String> = snap
            .records
            .iter()
            .filter_map(|r| match r {
                SnapRecord::Kept(r) => Some(&**r),
                _ => None,
            })
            .filter_map(|r| match r {
                Record::Call(c) => match vkstream::COMMANDS[c.cmd as usize] {
                    "vkBeginCommandBuffer" => {
                        Some(format!("vkBeginCommandBuffer {:?}", &c.params[..8]))
                    }
                    "vkCmdDraw" => match vkstream::decode_call(c.cmd, &c.params) {
                        Ok(Call::vkCmdDraw(p)) => {
                            assert_eq!(c.host_ns, c.seq * 10, "the call's own fields");
                            Some(format!(
                                "vkCmdDraw {} {} {}",
                                c.seq, p.vertex_count, p.instance_count
                            ))
                        }
                        other => panic!("{other:?}"),
                    },
                    _ => None,
                },
                Record::QueryOp(op) => Some(format!("QueryOp {:#x} {}", op.command_buffer, op.seq)),
                _ => None,
            })
            .collect();
        assert_eq!(cb_records, expect);
    }

    /// Objects destroyed every frame do not grow the dead set forever, and a dead handle that
    /// kept state still names stays known, so the snapshot still leaves that state out.
    #[test]
    fn dead_handles_are_pruned_unless_kept_state_names_them() {
        let mut f = Feed::new();
        bind_to_freed_memory(&mut f, 0xB2, 0x999);
        let fci = vk::FenceCreateInfo::default();
        let fences = 3 * DEAD_PRUNE_MIN as u64;
        let mut most = 0;
        for i in 0..fences {
            // A new handle value each time, as a driver that never reuses them would give.
            let mut fence = vk::Fence::from_raw(0x10_0000 + i);
            f.call("vkCreateFence", |e| unsafe {
                vkstream::encode::vkCreateFence(e, dev(), &fci, std::ptr::null(), &mut fence)
            });
            f.call("vkDestroyFence", |e| unsafe {
                vkstream::encode::vkDestroyFence(e, dev(), fence, std::ptr::null())
            });
            most = most.max(f.t.dead.len());
        }
        assert!(
            most <= DEAD_PRUNE_MIN,
            "dead set grew to {most} for {fences} fences"
        );
        assert!(f.t.dead.contains(&0x999), "the bound memory is still named");
        let snap =
            f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None);
        assert!(
            snap.gaps.iter().any(|g| g.contains("vkBindBufferMemory")),
            "{:?}",
            snap.gaps
        );
    }

    #[test]
    fn snapshot_leaves_out_state_naming_dead_objects_and_restores_fences() {
        let mut f = Feed::new();
        let mut q = vk::Queue::from_raw(0x71);
        f.call("vkGetDeviceQueue", |e| unsafe {
            vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
        });
        let fci = vk::FenceCreateInfo::default();
        let mut fence = vk::Fence::from_raw(0x72);
        f.call("vkCreateFence", |e| unsafe {
            vkstream::encode::vkCreateFence(e, dev(), &fci, std::ptr::null(), &mut fence)
        });
        bind_to_freed_memory(&mut f, 0xB2, 0x999);
        let snap = f.t.snapshot(
            Vec::new(),
            Vec::new(),
            &|d, h| {
                assert_eq!((d, h), (DEV, 0x72));
                Some(true)
            },
            &|_, _| None,
        );
        let names: Vec<&str> = snap
            .records
            .iter()
            .map(|r| match r {
                SnapRecord::Kept(r) => match &**r {
                    Record::Call(c) => vkstream::COMMANDS[c.cmd as usize],
                    _ => "record",
                },
                SnapRecord::Made { cmd, .. } => vkstream::COMMANDS[*cmd as usize],
                SnapRecord::Memory { .. } => "memory",
            })
            .collect();
        assert_eq!(
            names,
            [
                "vkGetDeviceQueue",
                "vkCreateFence",
                "vkCreateBuffer",
                // the fence was signaled by a submit before the trim point
                "vkQueueSubmit"
            ]
        );
        assert!(
            snap.gaps.iter().any(|g| g.contains("vkBindBufferMemory")),
            "{:?}",
            snap.gaps
        );
    }

    #[test]
    fn repeated_gets_change_nothing_and_timelines_are_restored() {
        let mut f = Feed::new();
        let mut q = vk::Queue::from_raw(0x81);
        let get = f.call("vkGetDeviceQueue", |e| unsafe {
            vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
        });
        let mut tci = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(2);
        let sci = vk::SemaphoreCreateInfo::default().push_next(&mut tci);
        let mut sem = vk::Semaphore::from_raw(0x82);
        let create = f.call("vkCreateSemaphore", |e| unsafe {
            vkstream::encode::vkCreateSemaphore(e, dev(), &sci, std::ptr::null(), &mut sem)
        });
        f.call("vkGetDeviceQueue", |e| unsafe {
            vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
        });
        assert_eq!(f.kept(), vec![get, create], "the second get is not state");
        let snap = f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|d, h| {
            assert_eq!((d, h), (DEV, 0x82));
            Some(7)
        });
        let made: Vec<&str> = snap
            .records
            .iter()
            .filter_map(|r| match r {
                SnapRecord::Made { cmd, .. } => Some(vkstream::COMMANDS[*cmd as usize]),
                _ => None,
            })
            .collect();
        assert_eq!(made, ["vkSignalSemaphore"]);
        // Still at its initial value: nothing to restore.
        let snap =
            f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| Some(2));
        assert!(snap
            .records
            .iter()
            .all(|r| !matches!(r, SnapRecord::Made { .. })));
    }

    #[test]
    fn a_reused_handle_value_keeps_the_destroyed_definition_it_shadows() {
        let mut f = Feed::new();
        let [layout, made, destroy] = layout_then_destroyed(&mut f, 0x91, 0x92);
        // The driver hands the freed value to a buffer.
        let buffer = create_buffer(&mut f, 0x91);
        assert_eq!(f.kept(), vec![layout, made, destroy, buffer]);
        let snap =
            f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None);
        assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
        assert_eq!(snap.records.len(), 4);
    }
}
