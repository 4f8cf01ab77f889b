//! What the trace binds where, gathered in one pass before the replay (no driver calls): every
//! buffer and image bind with the resource's create call, the size the capture GPU reported for
//! it, the allocation it went to and when the resource was destroyed. `--memory auto` checks these
//! binds against the replay GPU at the first bind; `rebind` uses them to place resources.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use format::record::Record;
use format::TraceReader;
use vkstream::Call;

use crate::engine::MemoryMode;
use crate::error::ReplayError;

/// Buffer or image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Buffer,
    Image,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Buffer => "buffer",
            Kind::Image => "image",
        }
    }
}

/// One resource's life in the trace (a captured handle may be reused after a destroy).
#[derive(Debug, Clone)]
pub struct Created {
    pub kind: Kind,
    pub handle: u64,
    /// Its `vkCreateBuffer` / `vkCreateImage`.
    pub call: Call,
    /// `VkMemoryRequirements::size` the capture GPU reported for it, when the trace asked.
    pub captured_size: Option<u64>,
    /// `seq` of its destroy call.
    pub destroyed: Option<u64>,
}

/// One captured allocation.
#[derive(Debug, Clone, Copy)]
pub struct Allocation {
    pub size: u64,
    pub type_index: u32,
}

/// One bind of a resource to captured memory.
#[derive(Debug, Clone)]
pub struct Bind {
    pub seq: u64,
    pub device: u64,
    pub kind: Kind,
    pub resource: u64,
    pub memory: u64,
    pub offset: u64,
    /// Index into [`Plan::created`], when the trace holds the create call.
    pub created: Option<usize>,
    /// The allocation as the trace made it (the last `vkAllocateMemory` of that handle).
    pub allocation: Option<Allocation>,
}

/// The binds of a trace, and the decision `auto` takes once per trace.
#[derive(Debug, Default)]
pub struct Plan {
    pub asked: MemoryMode,
    pub created: Vec<Created>,
    pub binds: Vec<Bind>,
    /// (bind seq, resource) -> index into `binds`.
    by_bind: HashMap<(u64, u64), usize>,
    /// Set at the first bind of the first replay pass, read by later passes and the summary.
    pub decision: Mutex<Option<Decision>>,
    /// Under rebind, the most of one replay pass.
    pub counts: Mutex<Counts>,
}

/// What one rebind pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Own allocations made.
    pub own: u64,
    /// Resources bound into another's allocation.
    pub shared: u64,
    /// Resources bound over bytes destroyed resources held, given those bytes (Zink recycles its
    /// slab ranges this way, and relies on what was written there).
    pub inherited: u64,
}

/// What the replay does with memory, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub rebind: bool,
    /// Why `auto` chose rebind (the first resource whose placement does not fit), or why remap.
    pub reason: Option<String>,
}

impl Decision {
    /// `remap`, `rebind`, with `auto`'s reason.
    pub fn describe(&self, asked: MemoryMode) -> String {
        let mode = if self.rebind { "rebind" } else { "remap" };
        match (&self.reason, asked) {
            (Some(r), MemoryMode::Auto) => format!("{mode} (auto: {r})"),
            (None, MemoryMode::Auto) => format!("{mode} (auto)"),
            _ => mode.to_string(),
        }
    }
}

impl Plan {
    /// A plan that decides nothing by itself (`remap` or `rebind` asked, or no trace to scan).
    pub fn fixed(asked: MemoryMode) -> Arc<Plan> {
        Arc::new(Plan {
            asked,
            ..Default::default()
        })
    }

    /// The bind the call `seq` made of `resource`.
    pub fn bind(&self, seq: u64, resource: u64) -> Option<&Bind> {
        self.by_bind.get(&(seq, resource)).map(|i| &self.binds[*i])
    }

    pub fn created_of(&self, b: &Bind) -> Option<&Created> {
        b.created.map(|i| &self.created[i])
    }

    /// The decision taken so far (none before the first bind, or with `remap` asked).
    pub fn decided(&self) -> Option<Decision> {
        self.decision.lock().ok().and_then(|d| d.clone())
    }

    /// What a rebind pass did so far.
    pub fn count(&self, n: &Counts) {
        if let Ok(mut c) = self.counts.lock() {
            *c = Counts {
                own: c.own.max(n.own),
                shared: c.shared.max(n.shared),
                inherited: c.inherited.max(n.inherited),
            };
        }
    }

    /// What the summary reports.
    pub fn describe(&self) -> String {
        let c = self.counts.lock().map_or(Counts::default(), |c| *c);
        match (self.decided(), self.asked) {
            (Some(d), asked) if d.rebind => {
                let d = d.describe(asked);
                let mut counts = format!("{} own allocations, {} shared", c.own, c.shared);
                if c.inherited > 0 {
                    counts.push_str(&format!(
                        ", {} given the bytes of destroyed ones",
                        c.inherited
                    ));
                }
                match d.strip_suffix(')') {
                    Some(open) => format!("{open}; {counts})"),
                    None => format!("{d} ({counts})"),
                }
            }
            (Some(d), asked) => d.describe(asked),
            (None, MemoryMode::Rebind) => "rebind".into(),
            (None, MemoryMode::Auto) => "remap (auto: the trace binds no memory)".into(),
            (None, _) => "remap".into(),
        }
    }
}

const WATCHED: &[&str] = &[
    "vkAllocateMemory",
    "vkCreateBuffer",
    "vkCreateImage",
    "vkDestroyBuffer",
    "vkDestroyImage",
    "vkGetBufferMemoryRequirements",
    "vkGetImageMemoryRequirements",
    "vkGetBufferMemoryRequirements2",
    "vkGetBufferMemoryRequirements2KHR",
    "vkGetImageMemoryRequirements2",
    "vkGetImageMemoryRequirements2KHR",
    "vkBindBufferMemory",
    "vkBindImageMemory",
    "vkBindBufferMemory2",
    "vkBindBufferMemory2KHR",
    "vkBindImageMemory2",
    "vkBindImageMemory2KHR",
];

/// One pass over the trace: its creates, binds and allocations (only with `auto` or `rebind`).
pub fn scan(reader: &TraceReader, asked: MemoryMode) -> Result<Arc<Plan>, ReplayError> {
    if asked == MemoryMode::Remap {
        return Ok(Plan::fixed(asked));
    }
    let mut p = Plan {
        asked,
        ..Default::default()
    };
    let mut watched: HashMap<u32, u32> = HashMap::new();
    let mut live: HashMap<(Kind, u64), usize> = HashMap::new();
    let mut allocations: HashMap<u64, Allocation> = HashMap::new();
    for rec in reader.records() {
        // A damaged trace is reported by the replay itself, with the call it stopped at.
        let Ok(rec) = rec else { break };
        let c = match rec {
            Record::CommandTable(names) => {
                watched = names
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| WATCHED.contains(&n.as_str()))
                    .filter_map(|(i, n)| vkstream::command_id(n).map(|id| (i as u32, id)))
                    .collect();
                continue;
            }
            Record::Call(c) if c.result >= 0 => c,
            _ => continue,
        };
        let Some(Ok(call)) = watched
            .get(&c.cmd)
            .map(|id| vkstream::decode_call(*id, &c.params))
        else {
            continue;
        };
        let bind = |p: &mut Plan, device, kind, resource, memory, offset| {
            if memory == 0 {
                return; // swapchain memory
            }
            p.by_bind.insert((c.seq, resource), p.binds.len());
            p.binds.push(Bind {
                seq: c.seq,
                device,
                kind,
                resource,
                memory,
                offset,
                created: live.get(&(kind, resource)).copied(),
                allocation: allocations.get(&memory).copied(),
            });
        };
        let size_of = |p: &mut Plan, kind, handle, size| {
            if let Some(&i) = live.get(&(kind, handle)) {
                p.created[i].captured_size = Some(size);
            }
        };
        match &call {
            Call::vkAllocateMemory(a) => {
                if let (Some(m), Some(info)) = (a.p_memory, a.p_allocate_info.as_deref()) {
                    allocations.insert(
                        m,
                        Allocation {
                            size: info.allocation_size,
                            type_index: info.memory_type_index,
                        },
                    );
                }
            }
            Call::vkCreateBuffer(b) => {
                if let Some(h) = b.p_buffer {
                    live.insert((Kind::Buffer, h), p.created.len());
                    p.created.push(Created {
                        kind: Kind::Buffer,
                        handle: h,
                        call: call.clone(),
                        captured_size: None,
                        destroyed: None,
                    });
                }
            }
            Call::vkCreateImage(i) => {
                if let Some(h) = i.p_image {
                    live.insert((Kind::Image, h), p.created.len());
                    p.created.push(Created {
                        kind: Kind::Image,
                        handle: h,
                        call: call.clone(),
                        captured_size: None,
                        destroyed: None,
                    });
                }
            }
            Call::vkDestroyBuffer(d) => {
                if let Some(i) = live.remove(&(Kind::Buffer, d.buffer)) {
                    p.created[i].destroyed = Some(c.seq);
                }
            }
            Call::vkDestroyImage(d) => {
                if let Some(i) = live.remove(&(Kind::Image, d.image)) {
                    p.created[i].destroyed = Some(c.seq);
                }
            }
            Call::vkGetBufferMemoryRequirements(r) => {
                if let Some(m) = &r.p_memory_requirements {
                    size_of(&mut p, Kind::Buffer, r.buffer, m.size);
                }
            }
            Call::vkGetImageMemoryRequirements(r) => {
                if let Some(m) = &r.p_memory_requirements {
                    size_of(&mut p, Kind::Image, r.image, m.size);
                }
            }
            Call::vkGetBufferMemoryRequirements2(r)
            | Call::vkGetBufferMemoryRequirements2KHR(r) => {
                if let (Some(i), Some(m)) = (&r.p_info, &r.p_memory_requirements) {
                    size_of(&mut p, Kind::Buffer, i.buffer, m.memory_requirements.size);
                }
            }
            Call::vkGetImageMemoryRequirements2(r) | Call::vkGetImageMemoryRequirements2KHR(r) => {
                if let (Some(i), Some(m)) = (&r.p_info, &r.p_memory_requirements) {
                    size_of(&mut p, Kind::Image, i.image, m.memory_requirements.size);
                }
            }
            Call::vkBindBufferMemory(b) => bind(
                &mut p,
                b.device,
                Kind::Buffer,
                b.buffer,
                b.memory,
                b.memory_offset,
            ),
            Call::vkBindImageMemory(b) => bind(
                &mut p,
                b.device,
                Kind::Image,
                b.image,
                b.memory,
                b.memory_offset,
            ),
            Call::vkBindBufferMemory2(b) | Call::vkBindBufferMemory2KHR(b) => {
                for i in b.p_bind_infos.as_deref().unwrap_or(&[]) {
                    bind(
                        &mut p,
                        b.device,
                        Kind::Buffer,
                        i.buffer,
                        i.memory,
                        i.memory_offset,
                    );
                }
            }
            Call::vkBindImageMemory2(b) | Call::vkBindImageMemory2KHR(b) => {
                for i in b.p_bind_infos.as_deref().unwrap_or(&[]) {
                    bind(
                        &mut p,
                        b.device,
                        Kind::Image,
                        i.image,
                        i.memory,
                        i.memory_offset,
                    );
                }
            }
            _ => {}
        }
    }
    Ok(Arc::new(p))
}
