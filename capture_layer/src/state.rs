//! Per-device state the layer tracks: mapped memory and how writes into it are found, buffer bindings, query pools,
//! what each command buffer does to queries, queues and the submits whose query copies await read-back.
//!
//! Kept cheap and from the start of the process, so a later trimming mode can snapshot it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by Vulkan handles. They come from the app's own driver, not from an adversary, so
/// the default SipHash (tens of ns per lookup, on every submit, wait and query command) buys nothing.
pub type HandleMap<V> = HashMap<u64, V, BuildHasherDefault<HandleHasher>>;

/// Hashes one `u64` by a folded multiply (the 128-bit product's halves xored): handles are
/// aligned pointers or small counters, and both ends of the hash, which the table uses for the
/// bucket and the tag, then depend on every bit of the key.
#[derive(Default)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        let p = u128::from(self.0 ^ n) * 0x9e37_79b9_7f4a_7c15;
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

/// Compare granularity: changed ranges are reported in whole pages (shared with `mapped::track`).
pub use crate::mapped::track::{diff_pages, PAGE};

#[derive(Default)]
pub struct DeviceState {
    pub memories: HandleMap<Memory>,
    /// The memories in `memories` that are mapped now: every submit scans these, and walking the
    /// whole map (a cache line per allocation) cost more than the compare on the H100 box.
    pub mapped: Vec<u64>,
    /// buffer -> (memory, offset in memory)
    pub buffers: HandleMap<(u64, u64)>,
    /// Live optimal-tiling images -> the memory they are bound to (0 until bound): what the GPU
    /// writes there is never a host write (`memory::images`).
    pub optimal_images: HandleMap<u64>,
    pub pools: HandleMap<Pool>,
    pub cmdbufs: HandleMap<CmdQueries>,
    /// queue -> family
    pub queues: HandleMap<u32>,
    pub pending: Vec<PendingCopy>,
    /// descriptor update template -> entries
    pub templates: HandleMap<Vec<TemplateEntry>>,
    /// fence -> (queue, submit order) of the last submit that signals it
    pub fences: HandleMap<(u64, u64)>,
    pub submit_order: u64,
    /// Submits (batches) whose semaphore signals or waits may still prove a pending copy's submit
    /// done, in submit order; emptied whenever nothing is pending.
    pub nodes: Vec<SubmitNode>,
    /// Reads `vkCmdCopyQueryPoolResults` destinations the host cannot map; kept from read to
    /// read (it owns a command pool, a fence and staging memory), dropped before the device is.
    pub copy_reader: Option<crate::readback::Reader<'static>>,
}

impl DeviceState {
    /// Sets or clears `memory`'s mapping, keeping `mapped` in step.
    pub fn set_mapping(&mut self, memory: u64, mapping: Option<Mapping>) {
        let Some(m) = self.memories.get_mut(&memory) else {
            return;
        };
        let now = mapping.is_some();
        m.mapped = mapping;
        self.mapped.retain(|&h| h != memory);
        if now {
            self.mapped.push(memory);
        }
    }

    /// Forgets a freed memory (and its mapping).
    pub fn remove_memory(&mut self, memory: u64) {
        self.memories.remove(&memory);
        self.mapped.retain(|&h| h != memory);
    }
}

pub struct Memory {
    pub size: u64,
    pub type_index: u32,
    pub host_visible: bool,
    /// Made from the app's own host memory (VK_EXT_external_memory_host): the app owns the
    /// pages and may free them before the allocation, so the layer never reads them itself.
    pub imported_host: bool,
    pub mapped: Option<Mapping>,
    /// Ranges query copies write (the GPU's bytes, not the host's): kept out of `MemoryWrite`s.
    pub gpu_ranges: Vec<GpuRange>,
    /// (image, offset, size) of the optimal-tiling images bound here: the host cannot address their
    /// texels, so what changes there is the GPU's (render targets in a mapped slab): kept out too.
    pub images: Vec<(u64, u64, u64)>,
}

/// A query copy destination in a host-visible memory (offsets in the memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuRange {
    pub start: u64,
    pub len: u64,
    /// Submitted copies into it not yet completed: the GPU may write it any time.
    pub pending: u32,
    /// The digest of what the last completed copy left there (`mapped::track::digest`; 0: none).
    pub left: u64,
}

/// Most copy destinations remembered per memory (Zink and wgpu reuse a few offsets).
const GPU_RANGES_MAX: usize = 256;

impl Memory {
    /// A copy into `start..start + len` was submitted.
    pub fn gpu_range_submitted(&mut self, start: u64, len: u64) {
        if let Some(r) = self
            .gpu_ranges
            .iter_mut()
            .find(|r| r.start == start && r.len == len)
        {
            r.pending += 1;
            return;
        }
        if self.gpu_ranges.len() >= GPU_RANGES_MAX {
            if let Some(i) = self.gpu_ranges.iter().position(|r| r.pending == 0) {
                self.gpu_ranges.remove(i);
            }
        }
        self.gpu_ranges.push(GpuRange {
            start,
            len,
            pending: 1,
            left: 0,
        });
    }

    /// A copy into `start..start + len` completed and was read back as `data`: the diff baseline
    /// takes the GPU's bytes.
    pub fn gpu_range_completed(&mut self, start: u64, len: u64, data: &[u8]) {
        if let Some(r) = self
            .gpu_ranges
            .iter_mut()
            .find(|r| r.start == start && r.len == len)
        {
            r.pending = r.pending.saturating_sub(1);
            r.left = crate::mapped::track::digest(data);
        }
        let Some(map) = self.mapped.as_mut() else {
            return;
        };
        if data.len() as u64 != len || start < map.offset || start + len > map.offset + map.size {
            return;
        }
        map.track.gpu_wrote((start - map.offset) as usize, data);
    }
}

pub struct Mapping {
    pub ptr: *mut u8,
    pub offset: u64,
    pub size: u64,
    /// How writes into it are found; `Unseen` while nothing is written.
    pub track: crate::mapped::track::Track,
}

/// What the log says, once, when a mapping is compared because the kernel refused to protect it.
pub fn unguarded(e: &str) -> String {
    format!("host memory: write protection unavailable ({e}); comparing mappings instead")
}

impl Mapping {
    /// The trace now holds what the mapping holds: later scans report what changes. An error says
    /// why it is compared rather than write-protected.
    pub fn baseline(&mut self) -> Result<(), String> {
        if self.ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the app's mapping, valid while the state lock (held by whoever has `&mut self`) is.
        let live = unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.size as usize) };
        self.track.baseline(live, crate::mapped::track::method())
    }
}

// SAFETY: `ptr` is the app's mapping, only read while the device state lock is held.
unsafe impl Send for Mapping {}

pub struct Pool {
    pub query_type: i32,
    pub count: u32,
    pub pipeline_statistics: u32,
    /// Number of counters (performance query pools).
    pub counters: u32,
    /// Queries already reported available since their last reset.
    pub seen_available: Vec<bool>,
}

impl Pool {
    /// What the pool's queries hold, for the result layout rules of [`format::query`].
    pub fn shape(&self) -> format::query::PoolShape {
        format::query::PoolShape {
            query_type: self.query_type,
            pipeline_statistics: self.pipeline_statistics,
            perf_counters: self.counters,
        }
    }

    /// Result values per query (excluding availability/status words), as vkGetQueryPoolResults lays them out.
    pub fn values_per_query(&self) -> u32 {
        self.shape().values_per_query()
    }

    pub fn reset(&mut self, first: u32, count: u32) {
        let end = (first as usize)
            .saturating_add(count as usize)
            .min(self.seen_available.len());
        for a in self
            .seen_available
            .get_mut(first as usize..end)
            .into_iter()
            .flatten()
        {
            *a = false;
        }
    }
}

/// Query work recorded into one command buffer (cleared at vkBeginCommandBuffer / reset).
#[derive(Default, Clone)]
pub struct CmdQueries {
    pub copies: Vec<CopyOp>,
    /// (pool, first, count) resets, applied to availability tracking when the buffer is submitted.
    pub resets: Vec<(u64, u32, u32)>,
}

#[derive(Clone, Debug)]
pub struct CopyOp {
    pub seq: u64,
    pub command_buffer: u64,
    pub pool: u64,
    pub first: u32,
    pub count: u32,
    pub dst_buffer: u64,
    pub dst_offset: u64,
    pub stride: u64,
    pub flags: u32,
}

/// A submitted copy waiting for its submit to complete.
pub struct PendingCopy {
    pub op: CopyOp,
    pub queue: u64,
    pub fence: u64,
    /// Submission order on the device (a fence covers every earlier submit on its queue).
    pub order: u64,
    /// (memory, offset in memory, length) of a host-visible destination.
    pub host_range: Option<(u64, u64, u64)>,
}

/// One submitted batch's semaphore signals and the batches its waits depend on.
pub struct SubmitNode {
    pub queue: u64,
    pub order: u64,
    /// (semaphore, value); a binary semaphore's value is whatever the app passed (ignored).
    pub signals: smallvec::SmallVec<[(u64, u64); 2]>,
    /// (queue, order) of the batches whose signals this one waited for.
    pub deps: smallvec::SmallVec<[(u64, u64); 2]>,
}

impl DeviceState {
    /// The latest batch signaling `sem` with a value up to `value` (a timeline wait), else its
    /// latest signal of any value (a binary wait, whose value means nothing).
    pub fn signaler(&self, sem: u64, value: u64) -> Option<(u64, u64)> {
        let mut any = None;
        for n in self.nodes.iter().rev() {
            for &(s, v) in &n.signals {
                if s == sem {
                    if v <= value {
                        return Some((n.queue, n.order));
                    }
                    any.get_or_insert((n.queue, n.order));
                }
            }
        }
        any
    }

    /// Batches proven complete by `seeds` ((queue, order): that batch and, by queue order, every
    /// earlier one on its queue), closed over semaphore waits: returns, per queue, the latest
    /// order proven done. Nodes proven done are dropped.
    pub fn prove_done(
        &mut self,
        seeds: impl IntoIterator<Item = (u64, u64)>,
    ) -> smallvec::SmallVec<[(u64, u64); 4]> {
        let mut done: smallvec::SmallVec<[(u64, u64); 4]> = smallvec::SmallVec::new();
        let mut work: smallvec::SmallVec<[(u64, u64); 8]> = seeds.into_iter().collect();
        while let Some((queue, order)) = work.pop() {
            match done.iter_mut().find(|(q, _)| *q == queue) {
                Some((_, o)) if *o >= order => continue,
                Some((_, o)) => *o = order,
                None => done.push((queue, order)),
            }
            for n in &self.nodes {
                if n.queue == queue && n.order <= order {
                    work.extend(n.deps.iter().copied());
                }
            }
        }
        self.nodes
            .retain(|n| !done.iter().any(|&(q, o)| n.queue == q && n.order <= o));
        done
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplateEntry {
    pub binding: u32,
    pub array_element: u32,
    pub count: u32,
    /// `VkDescriptorType` raw.
    pub descriptor_type: i32,
    pub offset: usize,
    pub stride: usize,
}

impl TemplateEntry {
    /// Bytes the entry reads from the app's pData, from its offset.
    pub fn span(&self) -> usize {
        if self.count == 0 {
            return 0;
        }
        let elem = match self.descriptor_type {
            // VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK: descriptorCount is a byte count
            1000138000 => return self.count as usize,
            // UNIFORM_TEXEL_BUFFER, STORAGE_TEXEL_BUFFER: VkBufferView
            4 | 5 => 8,
            // UNIFORM/STORAGE BUFFER (_DYNAMIC): VkDescriptorBufferInfo
            6..=9 => 24,
            // ACCELERATION_STRUCTURE_KHR / _NV: a handle
            1000150000 | 1000165000 => 8,
            // samplers and images: VkDescriptorImageInfo
            _ => 24,
        };
        self.stride * (self.count as usize - 1) + elem
    }
}

/// Size of the data a template update reads (max over entries of offset + span).
pub fn template_data_size(entries: &[TemplateEntry]) -> usize {
    entries
        .iter()
        .filter(|e| e.count > 0)
        .map(|e| e.offset + e.span())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mapped_list_follows_map_unmap_and_free() {
        let mut st = DeviceState::default();
        for h in [1u64, 2, 3] {
            st.memories.insert(
                h,
                Memory {
                    size: 64,
                    type_index: 0,
                    host_visible: true,
                    imported_host: false,
                    mapped: None,
                    gpu_ranges: Vec::new(),
                    images: Vec::new(),
                },
            );
        }
        let mapping = || Mapping {
            ptr: std::ptr::null_mut(),
            offset: 0,
            size: 64,
            track: Default::default(),
        };
        st.set_mapping(1, Some(mapping()));
        st.set_mapping(3, Some(mapping()));
        // Mapping again (an app bug the driver reports) lists it once.
        st.set_mapping(3, Some(mapping()));
        // Unknown memory: ignored.
        st.set_mapping(9, Some(mapping()));
        assert_eq!(st.mapped, [1, 3]);
        st.set_mapping(1, None);
        assert_eq!(st.mapped, [3]);
        assert!(st.memories[&1].mapped.is_none());
        st.remove_memory(3);
        assert!(st.mapped.is_empty() && !st.memories.contains_key(&3));
    }

    #[test]
    fn diff_coalesces_dirty_pages() {
        let mut shadow = vec![0u8; PAGE * 5 + 100];
        let mut live = shadow.clone();
        assert!(diff_pages(&live, &mut shadow).is_empty());
        live[10] = 1; // page 0
        live[PAGE + 5] = 2; // page 1 (adjacent: same run)
        live[PAGE * 3] = 3; // page 3
        live[PAGE * 5 + 99] = 4; // partial last page
        let d = diff_pages(&live, &mut shadow);
        let spans: Vec<(usize, usize)> = d.iter().map(|(o, b)| (*o, b.len())).collect();
        assert_eq!(
            spans,
            vec![(0, 2 * PAGE), (3 * PAGE, PAGE), (5 * PAGE, 100)]
        );
        assert_eq!(d[0].1[10], 1);
        assert_eq!(d[2].1[99], 4);
        assert_eq!(shadow, live, "shadow updated");
        assert!(
            diff_pages(&live, &mut shadow).is_empty(),
            "second scan finds nothing"
        );
    }

    #[test]
    fn template_sizes() {
        let e = |ty, count, offset, stride| TemplateEntry {
            binding: 0,
            array_element: 0,
            count,
            descriptor_type: ty,
            offset,
            stride,
        };
        assert_eq!(e(6, 1, 0, 24).span(), 24);
        assert_eq!(e(1, 3, 16, 32).span(), 2 * 32 + 24);
        assert_eq!(e(4, 2, 0, 8).span(), 16);
        assert_eq!(e(1000138000, 64, 8, 1).span(), 64);
        assert_eq!(
            template_data_size(&[e(6, 1, 0, 24), e(1, 3, 16, 32)]),
            16 + 88
        );
        assert_eq!(template_data_size(&[e(6, 0, 100, 24)]), 0);
    }

    #[test]
    fn pool_layout() {
        let mut p = Pool {
            query_type: 1,
            count: 4,
            pipeline_statistics: 0b1011,
            counters: 0,
            seen_available: vec![true; 4],
        };
        assert_eq!(p.values_per_query(), 3);
        p.reset(1, 10);
        assert_eq!(p.seen_available, vec![true, false, false, false]);
        p.query_type = 0;
        assert_eq!(p.values_per_query(), 1);
        // VK_QUERY_TYPE_RESULT_STATUS_ONLY_KHR: only the status word.
        p.query_type = 1_000_023_000;
        assert_eq!(p.values_per_query(), 0);
        // VK_QUERY_TYPE_PERFORMANCE_QUERY_KHR: one result per counter.
        p.query_type = 1_000_116_000;
        p.counters = 5;
        assert_eq!(p.values_per_query(), 5);
    }

    #[test]
    fn handle_hashes_spread_at_both_ends() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<HandleHasher>::default();
        // Page-aligned pointers and small counters, as drivers hand out handles.
        for keys in [
            (1..=512u64)
                .map(|k| 0x7f00_0000_0000 + k * 4096)
                .collect::<Vec<_>>(),
            (1..=512u64).collect(),
        ] {
            let hashes: Vec<u64> = keys.iter().map(|k| build.hash_one(k)).collect();
            let low: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 0x7f).collect();
            let high: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
            assert!(low.len() > 100, "bucket bits take {} values", low.len());
            assert!(high.len() > 100, "tag bits take {} values", high.len());
        }
        let mut m: HandleMap<u32> = HandleMap::default();
        m.insert(0x7f00_0000_1000, 1);
        m.insert(0x7f00_0000_2000, 2);
        assert_eq!(
            (m.get(&0x7f00_0000_1000), m.get(&0x7f00_0000_2000)),
            (Some(&1), Some(&2))
        );
    }
}
