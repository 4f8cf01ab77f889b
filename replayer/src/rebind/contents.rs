//! What a captured allocation holds under rebind. Pieces overlap where a resource was bound over
//! bytes a destroyed one held: each captured byte is held by the latest-bound piece covering it,
//! destroyed or not, else by the host bytes kept in `early`. Host writes go to that holder and
//! reads come from it. A buffer bound over bytes destroyed resources hold is given them by a GPU
//! copy at its bind: Zink recycles slab ranges and relies on what was written there, by the GPU
//! or by the host (whose page-diffed writes are not repeated where nothing changed). A destroyed
//! resource's allocation is freed once it holds no byte, or with its memory. Dependencies: the
//! session, like the rest of `rebind`.

use std::collections::BTreeSet;

use ash::vk;
use ash::vk::Handle as _;

use super::{take_range, Kind, Piece};
use crate::error::ReplayError;
use crate::session::Session;

/// `[start, end)` in runs, each with the index of the piece holding it (the latest bound of those
/// covering it and bound before call `before`), or `None` where none covers it.
pub fn owners(
    pieces: &[Piece],
    start: u64,
    end: u64,
    before: u64,
) -> Vec<(Option<usize>, u64, u64)> {
    // Where pieces start and end, swept in order; the latest bound of those open holds a run.
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, p) in pieces.iter().enumerate().filter(|(_, p)| p.bound < before) {
        if let Some((a, b)) = p.overlap(start, end) {
            events.push((a, true, i));
            events.push((b, false, i));
        }
    }
    events.sort_unstable_by_key(|e| e.0);
    let mut open = BTreeSet::new();
    let mut out: Vec<(Option<usize>, u64, u64)> = Vec::new();
    let (mut at, mut k) = (start, 0);
    while at < end {
        while let Some(&(_, starts, i)) = events.get(k).filter(|e| e.0 <= at) {
            let key = (pieces[i].bound, i);
            if starts {
                open.insert(key);
            } else {
                open.remove(&key);
            }
            k += 1;
        }
        let next = events.get(k).map_or(end, |e| e.0.min(end));
        let owner = open.last().map(|&(_, i)| i);
        match out.last_mut() {
            Some(run) if run.0 == owner => run.2 = next,
            _ => out.push((owner, at, next)),
        }
        at = next;
    }
    out
}

/// A replay allocation, as a copy between allocations needs it.
#[derive(Clone, Copy)]
struct Held {
    memory: vk::DeviceMemory,
    size: u64,
    type_index: u32,
    host_visible: bool,
    coherent: bool,
    mapped: *mut u8,
}

impl Held {
    fn of(p: &Piece) -> Held {
        Held {
            memory: p.memory,
            size: p.size,
            type_index: p.type_index,
            host_visible: p.host_visible,
            coherent: p.coherent,
            mapped: p.mapped,
        }
    }
}

/// `len` bytes at `from` of `src` go to `to` of the destination.
struct Run {
    src: Held,
    from: u64,
    to: u64,
    len: u64,
}

impl Session<'_> {
    /// Piece `new` of `memory` was just bound by call `seq`: gives it (a buffer) the bytes of its
    /// range that destroyed resources' allocations hold, then frees those that hold none any
    /// more. Returns `new`'s index after that.
    pub(super) fn inherit(
        &mut self,
        memory: u64,
        new: usize,
        seq: u64,
    ) -> Result<usize, ReplayError> {
        let m = &self.memory.memories[&memory];
        let n = &m.pieces[new];
        let (start, end) = (n.offset, n.end());
        let mut runs = Vec::new();
        // An image's bytes start undefined (and are the driver's layout anyway): only buffers
        // inherit. Live pieces bound before do not overlap it (aliases share or are refused).
        if n.kind == Kind::Buffer {
            for (owner, a, b) in owners(&m.pieces, start, end, seq) {
                let Some(s) = owner.map(|i| &m.pieces[i]) else {
                    continue;
                };
                let (from, to) = (a - s.offset, a - n.offset);
                let len = (b - a)
                    .min(s.size.saturating_sub(from))
                    .min(n.size.saturating_sub(to));
                if len > 0 {
                    runs.push(Run {
                        src: Held::of(s),
                        from,
                        to,
                        len,
                    });
                }
            }
        }
        if !runs.is_empty() {
            let (dst, resource, device) = (Held::of(n), n.resource, m.device);
            match self.copy_runs(device, dst, &runs) {
                Ok(()) => self.memory.rebound.inherited += 1,
                Err(e) => {
                    let w = format!(
                        "--memory rebind: buffer 0x{resource:x} is bound over bytes of memory \
                         0x{memory:x} that destroyed resources held, and did not get them ({e}); \
                         results that read them may differ"
                    );
                    if !self.perf.warnings.contains(&w) {
                        self.perf.warnings.push(w);
                    }
                }
            }
        }
        let m = self.memory.memories.get_mut(&memory).expect("exists");
        let holds_none = |i: usize| {
            let p = &m.pieces[i];
            i != new
                && p.dead_at(seq)
                && p.overlap(start, end).is_some()
                && !owners(&m.pieces, p.offset, p.end(), u64::MAX)
                    .iter()
                    .any(|r| r.0 == Some(i))
        };
        let gone: Vec<usize> = (0..m.pieces.len()).filter(|&i| holds_none(i)).collect();
        let mut new = new;
        let mut freed = Vec::new();
        for &i in gone.iter().rev() {
            freed.push(m.pieces.remove(i).memory);
            new -= usize::from(i < new);
        }
        let device = m.device;
        let d = self.device(device)?;
        for mem in freed {
            // SAFETY: its resources were destroyed by the trace, and no byte is left to it.
            unsafe { d.device.free_memory(mem, None) };
        }
        Ok(new)
    }

    /// Copies `runs` into `dst` once the GPU is done with all work submitted so far (the trace
    /// destroyed the sources after its own waits; this covers every queue): on the GPU, through
    /// buffers bound over both allocations, or through mappings before the trace has retrieved
    /// any queue (nothing ran on the GPU yet).
    fn copy_runs(&mut self, device: u64, dst: Held, runs: &[Run]) -> Result<(), ReplayError> {
        let d = self.device(device)?;
        let queue = d
            .queues
            .iter()
            .find_map(|q| Some((*q, *d.queue_family_of.get(&q.as_raw())?)));
        let Some((queue, family)) = queue else {
            // SAFETY: allocations of this device, unused by the GPU.
            return unsafe { host_copy(&d.device, dst, runs) };
        };
        let pool = self.own_pool(device, family)?;
        let dev = &self.device(device)?.device;
        // SAFETY: objects made on this device, a submission waited on before they go.
        unsafe {
            dev.device_wait_idle()
                .map_err(|e| ReplayError::vk("vkDeviceWaitIdle", e))?;
            gpu_copy(dev, queue, pool, dst, runs)
        }
    }

    /// The replayer's command pool for `family` (destroyed with the device).
    fn own_pool(&mut self, device: u64, family: u32) -> Result<vk::CommandPool, ReplayError> {
        let d = self.device(device)?;
        if let Some(p) = d.own_pools.get(&family) {
            return Ok(*p);
        }
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid device and create info.
        let p = unsafe { d.device.create_command_pool(&info, None) }
            .map_err(|e| ReplayError::vk("vkCreateCommandPool (replayer's own)", e))?;
        if let Some(d) = self.devices.get_mut(&device) {
            d.own_pools.insert(family, p);
        }
        Ok(p)
    }

    /// Rebind: applies host bytes written at captured `offset` of `memory` to the pieces holding
    /// them; the bytes none holds are kept for resources bound there later.
    pub(crate) fn write_pieces(
        &mut self,
        memory: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ReplayError> {
        let end = offset + data.len() as u64;
        let runs = owners(&self.memory.memories[&memory].pieces, offset, end, u64::MAX);
        for (owner, a, b) in runs {
            let bytes = &data[(a - offset) as usize..(b - offset) as usize];
            if let Some(i) = owner {
                self.write_piece(memory, i, a, bytes)?;
                continue;
            }
            let m = self.memory.memories.get_mut(&memory).expect("exists");
            // Later bytes replace earlier ones: what is kept never exceeds the allocation.
            m.early = take_range(std::mem::take(&mut m.early), a, b).1;
            m.early.push((a, bytes.to_vec()));
        }
        Ok(())
    }
    /// Writes `bytes` at captured offset `a` into piece `i` of `memory` (mapped, or uploaded
    /// through the GPU when the host cannot map its replay memory).
    pub(super) fn write_piece(
        &mut self,
        memory: u64,
        i: usize,
        a: u64,
        bytes: &[u8],
    ) -> Result<(), ReplayError> {
        let m = &self.memory.memories[&memory];
        let p = &m.pieces[i];
        let at = a - p.offset;
        let forced = std::env::var("QUARRY_REPLAY_UPLOAD").is_ok_and(|v| v == "gpu");
        // The capture GPU may have reported more bytes than this GPU needs: clip to the piece.
        let len = bytes.len().min(p.size.saturating_sub(at) as usize);
        if !p.host_visible || forced {
            let (kind, resource) = (p.kind, p.resource);
            let r = self.upload_to(
                m.device,
                p.memory,
                p.size,
                p.type_index,
                at,
                &bytes[..len],
                memory,
            );
            // An image's bytes are the capture driver's layout anyway: where this GPU cannot take
            // them through a transfer buffer, they are left out with a warning, not an error.
            if let (Err(e), Kind::Image) = (&r, kind) {
                let w = format!(
                    "--memory rebind: host bytes written over image 0x{resource:x} of memory \
                     0x{memory:x} were left out ({e})"
                );
                if !self.perf.warnings.contains(&w) {
                    self.perf.warnings.push(w);
                }
                return Ok(());
            }
            return r;
        }
        let d = self.device(m.device)?;
        // SAFETY: [at, at + len) lies inside the piece's allocation.
        unsafe {
            let ptr = if p.mapped.is_null() {
                d.device
                    .map_memory(p.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                    .map_err(|e| ReplayError::vk("vkMapMemory", e))? as *mut u8
            } else {
                p.mapped
            };
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.add(at as usize), len);
            if !p.coherent {
                let range = vk::MappedMemoryRange::default()
                    .memory(p.memory)
                    .offset(0)
                    .size(vk::WHOLE_SIZE);
                d.device
                    .flush_mapped_memory_ranges(&[range])
                    .map_err(|e| ReplayError::vk("vkFlushMappedMemoryRanges", e))?;
            }
            if p.mapped.is_null() {
                d.device.unmap_memory(p.memory);
            }
        }
        Ok(())
    }

    /// Rebind: `len` bytes at captured `offset` of `memory`, from the pieces holding them (the
    /// host's bytes, else zeros, where none does).
    pub(crate) fn read_pieces(
        &mut self,
        memory: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, ReplayError> {
        let mut out = vec![0u8; len as usize];
        let end = offset + len;
        let m = &self.memory.memories[&memory];
        for (o, data) in &m.early {
            let (a, b) = ((*o).max(offset), (o + data.len() as u64).min(end));
            if a < b {
                out[(a - offset) as usize..(b - offset) as usize]
                    .copy_from_slice(&data[(a - o) as usize..(b - o) as usize]);
            }
        }
        let d = self.device(m.device)?;
        for (owner, a, b) in owners(&m.pieces, offset, end, u64::MAX) {
            let Some(p) = owner.map(|i| &m.pieces[i]) else {
                continue;
            };
            if !p.host_visible {
                return Err(ReplayError::Other(format!(
                    "{} 0x{:x} of memory 0x{memory:x}: its replay memory cannot be read by the host",
                    p.kind.name(),
                    p.resource
                )));
            }
            let at = (a - p.offset) as usize;
            let n = ((b - a) as usize).min(p.size.saturating_sub(at as u64) as usize);
            // SAFETY: inside the piece's allocation; mapped here when not kept mapped.
            unsafe {
                let ptr = if p.mapped.is_null() {
                    d.device
                        .map_memory(p.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                        .map_err(|e| ReplayError::vk("vkMapMemory", e))?
                        as *mut u8
                } else {
                    p.mapped
                };
                if !p.coherent {
                    let range = vk::MappedMemoryRange::default()
                        .memory(p.memory)
                        .offset(0)
                        .size(vk::WHOLE_SIZE);
                    d.device
                        .invalidate_mapped_memory_ranges(&[range])
                        .map_err(|e| ReplayError::vk("vkInvalidateMappedMemoryRanges", e))?;
                }
                std::ptr::copy_nonoverlapping(
                    ptr.add(at),
                    out.as_mut_ptr().add((a - offset) as usize),
                    n,
                );
                if p.mapped.is_null() {
                    d.device.unmap_memory(p.memory);
                }
            }
        }
        Ok(out)
    }
}

/// The copy on the GPU: a buffer bound over each allocation, one submission, waited on.
///
/// # Safety
/// `dst` and the sources are allocations of `dev`, which the GPU no longer uses; `pool` is a
/// command pool of `queue`'s family.
unsafe fn gpu_copy(
    dev: &ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    dst: Held,
    runs: &[Run],
) -> Result<(), ReplayError> {
    let vkerr = |what: &'static str| move |e| ReplayError::vk(what, e);
    // Everything made here goes on every path out.
    struct Made<'a> {
        dev: &'a ash::Device,
        pool: vk::CommandPool,
        buffers: Vec<vk::Buffer>,
        cb: vk::CommandBuffer,
    }
    impl Drop for Made<'_> {
        fn drop(&mut self) {
            // SAFETY: objects of this device, idle (the queue was waited on) or never used.
            unsafe {
                if self.cb != vk::CommandBuffer::null() {
                    self.dev.free_command_buffers(self.pool, &[self.cb]);
                }
                for b in &self.buffers {
                    self.dev.destroy_buffer(*b, None);
                }
            }
        }
    }
    /// A transfer buffer over all of `h`.
    unsafe fn over(
        made: &mut Made<'_>,
        h: Held,
        usage: vk::BufferUsageFlags,
    ) -> Result<vk::Buffer, ReplayError> {
        let dev = made.dev;
        let info = vk::BufferCreateInfo::default().size(h.size).usage(usage);
        let b = dev
            .create_buffer(&info, None)
            .map_err(|e| ReplayError::vk("vkCreateBuffer (inherited bytes)", e))?;
        made.buffers.push(b);
        let r = dev.get_buffer_memory_requirements(b);
        if h.type_index >= 32 || r.memory_type_bits & (1 << h.type_index) == 0 || r.size > h.size {
            return Err(ReplayError::Other(format!(
                "a transfer buffer cannot be bound over a replay allocation of type {} and {} bytes",
                h.type_index, h.size
            )));
        }
        dev.bind_buffer_memory(b, h.memory, 0)
            .map_err(|e| ReplayError::vk("vkBindBufferMemory (inherited bytes)", e))?;
        Ok(b)
    }
    let mut made = Made {
        dev,
        pool,
        buffers: Vec::new(),
        cb: vk::CommandBuffer::null(),
    };
    let to = over(&mut made, dst, vk::BufferUsageFlags::TRANSFER_DST)?;
    // One source buffer per source allocation, with its regions.
    let mut sources: Vec<(vk::DeviceMemory, vk::Buffer, Vec<vk::BufferCopy>)> = Vec::new();
    for r in runs {
        let region = vk::BufferCopy {
            src_offset: r.from,
            dst_offset: r.to,
            size: r.len,
        };
        match sources.iter_mut().find(|s| s.0 == r.src.memory) {
            Some(s) => s.2.push(region),
            None => {
                let b = over(&mut made, r.src, vk::BufferUsageFlags::TRANSFER_SRC)?;
                sources.push((r.src.memory, b, vec![region]));
            }
        }
    }
    made.cb = dev
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .map_err(vkerr("vkAllocateCommandBuffers (inherited bytes)"))?[0];
    let cb = made.cb;
    dev.begin_command_buffer(
        cb,
        &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
    )
    .map_err(vkerr("vkBeginCommandBuffer (inherited bytes)"))?;
    let barrier = |src_stage, src, dst_stage, dst| {
        dev.cmd_pipeline_barrier(
            cb,
            src_stage,
            dst_stage,
            vk::DependencyFlags::empty(),
            &[vk::MemoryBarrier::default()
                .src_access_mask(src)
                .dst_access_mask(dst)],
            &[],
            &[],
        )
    };
    // Whatever wrote the sources, then the copy, then whatever reads the destination (the host
    // included: a query copy's read-back).
    barrier(
        vk::PipelineStageFlags::ALL_COMMANDS,
        vk::AccessFlags::MEMORY_WRITE,
        vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE,
    );
    for (_, from, regions) in &sources {
        dev.cmd_copy_buffer(cb, *from, to, regions);
    }
    barrier(
        vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::TRANSFER_WRITE,
        vk::PipelineStageFlags::ALL_COMMANDS | vk::PipelineStageFlags::HOST,
        vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE | vk::AccessFlags::HOST_READ,
    );
    dev.end_command_buffer(cb)
        .map_err(vkerr("vkEndCommandBuffer (inherited bytes)"))?;
    let cbs = [cb];
    dev.queue_submit(
        queue,
        &[vk::SubmitInfo::default().command_buffers(&cbs)],
        vk::Fence::null(),
    )
    .map_err(vkerr("vkQueueSubmit (inherited bytes)"))?;
    dev.queue_wait_idle(queue)
        .map_err(vkerr("vkQueueWaitIdle (inherited bytes)"))
}

/// The copy through mappings, where nothing ran on the GPU yet.
///
/// # Safety
/// `dst` and the sources are allocations of `dev`, mapped where `mapped` says so.
unsafe fn host_copy(dev: &ash::Device, dst: Held, runs: &[Run]) -> Result<(), ReplayError> {
    if !dst.host_visible || runs.iter().any(|r| !r.src.host_visible) {
        return Err(ReplayError::Other(
            "the trace has retrieved no queue yet, and the host cannot map these allocations"
                .into(),
        ));
    }
    let whole = |h: Held| {
        vk::MappedMemoryRange::default()
            .memory(h.memory)
            .offset(0)
            .size(vk::WHOLE_SIZE)
    };
    let map = |h: Held| -> Result<*mut u8, ReplayError> {
        if !h.mapped.is_null() {
            return Ok(h.mapped);
        }
        dev.map_memory(h.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            .map(|p| p as *mut u8)
            .map_err(|e| ReplayError::vk("vkMapMemory", e))
    };
    let unmap = |h: Held| {
        if h.mapped.is_null() {
            dev.unmap_memory(h.memory);
        }
    };
    let to = map(dst)?;
    for r in runs {
        let from = match map(r.src) {
            Ok(p) => p,
            Err(e) => {
                unmap(dst);
                return Err(e);
            }
        };
        if !r.src.coherent {
            // Host bytes only (no queue yet): nothing to wait for, a failure changes nothing.
            let _ = dev.invalidate_mapped_memory_ranges(&[whole(r.src)]);
        }
        std::ptr::copy_nonoverlapping(
            from.add(r.from as usize),
            to.add(r.to as usize),
            r.len as usize,
        );
        unmap(r.src);
    }
    let flushed = if dst.coherent {
        Ok(())
    } else {
        dev.flush_mapped_memory_ranges(&[whole(dst)])
            .map_err(|e| ReplayError::vk("vkFlushMappedMemoryRanges", e))
    };
    unmap(dst);
    flushed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer piece bound by call `bound` over captured `[offset, offset + extent)`, destroyed
    /// at `dies`.
    fn piece(bound: u64, offset: u64, extent: u64, dies: Option<u64>) -> Piece {
        Piece {
            kind: Kind::Buffer,
            resource: bound,
            offset,
            extent,
            bound,
            dies,
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
    fn the_latest_bound_piece_holds_each_byte() {
        // A [0, 64) destroyed at 5; B over its middle at 6; C beside both at 7.
        let pieces = [
            piece(1, 0, 64, Some(5)),
            piece(6, 16, 16, None),
            piece(7, 128, 64, None),
        ];
        assert_eq!(
            owners(&pieces, 0, 256, u64::MAX),
            vec![
                (Some(0), 0, 16),
                (Some(1), 16, 32),
                (Some(0), 32, 64),
                (None, 64, 128),
                (Some(2), 128, 192),
                (None, 192, 256),
            ]
        );
        // What B inherits at its bind: A's bytes (pieces bound from call 6 on left out).
        assert_eq!(owners(&pieces, 16, 32, 6), vec![(Some(0), 16, 32)]);
        // A part of a range, and nothing at all.
        assert_eq!(
            owners(&pieces, 20, 40, u64::MAX),
            vec![(Some(1), 20, 32), (Some(0), 32, 40)]
        );
        assert_eq!(owners(&[], 8, 9, u64::MAX), vec![(None, 8, 9)]);
        // Bind order decides, not position: C bound before A would be A's to hold.
        let older = [piece(7, 0, 64, Some(8)), piece(9, 32, 64, None)];
        assert_eq!(
            owners(&older, 0, 96, u64::MAX),
            vec![(Some(0), 0, 32), (Some(1), 32, 96)]
        );
        let newer = [piece(9, 0, 64, None), piece(7, 32, 64, Some(8))];
        assert_eq!(
            owners(&newer, 0, 96, u64::MAX),
            vec![(Some(0), 0, 64), (Some(1), 64, 96)]
        );
    }
}
