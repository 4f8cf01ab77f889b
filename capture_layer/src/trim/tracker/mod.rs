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
//! are gone (shader modules, layouts, render passes, samplers, caches, templates, pipeline
//! libraries) keep their creation and destroy calls, so a pipeline made from a deleted shader
//! module or linked from deleted libraries still replays. A descriptor update stays while it
//! provides a descriptor its set holds (`descriptors`).
//! Submitted command buffers move image layouts (barriers and render-pass final layouts), so the
//! snapshot can put every image back in the layout the app left it in.
//!
//! Cost: one decode per creation/destroy/bind/update/submit call and a map insert per recorded
//! command; memory holds the encoded calls of live objects and current recordings.
//!
//! Bookkeeping only: nothing here calls Vulkan. What the snapshot needs from the live devices
//! (memory contents, fence and timeline states, queues) comes from the snapshot writer
//! (`trim::snapshot`) as arguments. Depends on: `state` (handle maps), `vkstream`, `format`;
//! `runtime` offers it every call before a trimmed capture's first frame.

use crate::state::{HandleHasher, HandleMap};
use ash::vk;
use ash::vk::Handle;
use format::record::{self, Record};
use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;
use vkstream::Call;

/// Handles the snapshot makes up for its own objects (a command pool and buffer); far above what
/// drivers hand out as pointers or small integers.
const SYNTHETIC_BASE: u64 = 0xFFFF_F000_0000_0000;

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
    /// A binary semaphore: whether the last submit, acquire or present that named it left it
    /// signaled (a snapshot signals it again: the first captured wait may be for it).
    Binary {
        signaled: bool,
    },
    /// A descriptor update template's entries.
    Template(Vec<descriptors::TplEntry>),
    /// A pipeline library (VK_KHR_pipeline_library): pipelines linked from it name it in their
    /// creation, so it is kept past its destruction as definitions are.
    Library,
    /// A query pool: its size, and whether the snapshot resets it (not performance queries,
    /// whose resets need the profiling lock's rules, nor video result queries).
    QueryPool {
        count: u32,
        resettable: bool,
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

/// A call whose parameters are `params[at..at + len]` of a buffer held beside it (a recording's,
/// or the tracking queue's).
#[derive(Clone, Copy)]
pub struct CallAt {
    pub seq: u64,
    pub host_ns: u64,
    pub thread: u32,
    pub cmd: u32,
    pub result: i32,
    pub at: u32,
    pub len: u32,
}

impl CallAt {
    /// The call with its parameters in `params` (empty when the range is not in it).
    pub fn with<'a>(&self, params: &'a [u8]) -> CallRef<'a> {
        CallRef {
            seq: self.seq,
            thread: self.thread,
            cmd: self.cmd,
            host_ns: self.host_ns,
            result: self.result,
            params: params
                .get(self.at as usize..self.at as usize + self.len as usize)
                .unwrap_or_default(),
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
    /// Begun light (`runtime::light`): only its begin and layout-moving commands were tracked, so
    /// it is left out of snapshots. Reset by the next begin.
    light: bool,
    /// Submitted since it was begun.
    submitted: bool,
    /// Ended since it was begun.
    ended: bool,
    /// Begun `ONE_TIME_SUBMIT`: once submitted it cannot run again, so it is left out of
    /// snapshots (its query commands would claim queries that only the work before the trim
    /// point wrote).
    one_time: bool,
}

enum Recorded {
    /// A call whose parameters are in the recording's `params`.
    Call(CallAt),
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
        self.light = false;
        self.submitted = false;
        self.ended = false;
        self.one_time = false;
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
        let rec = Recorded::Call(CallAt {
            seq: c.seq,
            host_ns: c.host_ns,
            thread: c.thread,
            cmd: c.cmd,
            result: c.result,
            at,
            len,
        });
        self.entries.push(((c.seq, 0), rec));
    }

    fn push(&mut self, key: (u64, u32), rec: Recorded) {
        self.entries.push((key, rec));
    }

    fn call<'a>(&'a self, rec: &'a Recorded) -> Option<CallRef<'a>> {
        match rec {
            // In range by construction: `push_call` appended them.
            Recorded::Call(c) => Some(c.with(&self.params)),
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
    /// Per descriptor set: which update call provides each of its descriptors.
    slots: HandleMap<descriptors::Slots>,
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
            Record::Device(_) | Record::Note(_) | Record::TargetProfile(_) => {
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
            if class == Class::BeginCb {
                // One decode per recording begun.
                o.recording.one_time = matches!(
                    decode(c.cmd, c.params),
                    Some(Call::vkBeginCommandBuffer(p)) if p.p_begin_info.as_ref().is_some_and(
                        |b| b.flags & vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT.as_raw() != 0
                    )
                );
            }
            if is_end(c.cmd) {
                o.recording.ended = true;
            }
        }
        true
    }

    /// The command buffer `cb`, just begun, is light (`runtime::light`).
    pub fn mark_light(&mut self, cb: u64) {
        if let Some(o) = self.objects.get_mut(&cb) {
            o.recording.light = true;
        }
    }

    /// Light command buffers begun and not submitted since: a snapshot now would miss the
    /// commands of any that is submitted after it. (still recording, ended)
    pub fn open_light(&self) -> (usize, usize) {
        let open = self
            .objects
            .values()
            .map(|o| &o.recording)
            .filter(|r| r.light && !r.submitted);
        open.fold((0, 0), |(recording, ended), r| {
            (recording + !r.ended as usize, ended + r.ended as usize)
        })
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
                // Destroying VK_NULL_HANDLE is a legal no-op (Zink does it): the walker lists no
                // handle for it, and the last one left is the device or instance the call goes
                // through, which must not die with it.
                let whole = c.cmd == vkstream::ids::vkDestroyDevice
                    || c.cmd == vkstream::ids::vkDestroyInstance;
                if let Some(&(ty, h, _)) = hs.last().filter(|_| whole || hs.len() > 1) {
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
            Class::Update => self.update(c, &call),
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
        let libraries = library_pipelines(call);
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
            let info = if libraries.contains(&h) {
                Info::Library
            } else {
                info.clone()
            };
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
        let library = self
            .objects
            .get(&h)
            .is_some_and(|o| matches!(o.info, Info::Library));
        if is_definition(ty) || library {
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
            self.slots.remove(&h);
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
                for (_, h, created) in self.named_handles(&call) {
                    if !created && self.dead.contains(&h) {
                        named.insert(h);
                    }
                }
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

    /// Applies the layout changes of the submitted command buffers to their images, and what
    /// submits, acquires and presents do to binary semaphores.
    fn submitted(&mut self, call: &Call) {
        self.binary_semaphores(call);
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
            if let Some(o) = self.objects.get_mut(&cb) {
                o.recording.submitted = true;
            }
            let effects = match self.effects.get(&cb) {
                Some(e) => e.clone(),
                None => {
                    let (e, whole) = self.layout_effects(cb, 0);
                    // A buffer that executes secondaries is not cached: they may be recorded
                    // again without it.
                    if whole {
                        self.effects.insert(cb, e.clone());
                    }
                    e
                }
            };
            for (image, layout) in effects {
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
}

mod class;
mod descriptors;
mod effects;
mod info;
mod restore;
#[cfg(test)]
mod tests;

use class::{class_of, is_end, moves_layouts, Class};
pub use class::{light_skips, wanted};
use info::{creation_info, library_pipelines};
pub use restore::{SnapRecord, Snapshot};
