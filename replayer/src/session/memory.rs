//! Memory: a captured allocation is made on the replay device when first needed (bound, mapped or
//! written) so its type and size follow the replay device's requirements; writes go through a
//! mapping, or through the GPU when the host cannot map the replay's memory.

use std::ffi::c_void;

use ash::vk;
use ash::vk::Handle as _;
use vkstream::PNext;

use super::Session;
use crate::error::ReplayError;
use crate::generated::dispatch::{m_chain, Arena};
use crate::mapping;
use crate::rebind::Piece;

/// A captured allocation. The replay allocation is made when the memory is first needed (bound,
/// mapped or written), so its type and size can follow the replay device's requirements of the
/// first resource bound to it.
pub struct MemState {
    pub device: u64,
    pub size: u64,
    pub captured_flags: u32,
    pub replayed: vk::DeviceMemory,
    pub type_index: u32,
    pub coherent: bool,
    /// Whole-allocation replay mapping, kept while the capture has the memory mapped.
    pub mapped: *mut u8,
    pub persistent: bool,
    /// The captured allocate info's chain (flags, dedicated resource, priority, export, ...),
    /// re-created by the generated code when the replay allocation is made.
    pub chain: Vec<PNext>,
    /// `--memory rebind`: the resources bound to it, each in its own replay allocation, by offset.
    pub pieces: Vec<Piece>,
    /// `--memory rebind`: host bytes written where no resource was bound yet (offset, bytes).
    pub early: crate::rebind::Runs,
}

impl MemState {
    /// Frees every replay allocation made for this captured one (with its device).
    ///
    /// # Safety
    /// `device` is the replay device of this memory, and the GPU is done with it.
    pub unsafe fn free_all(&self, device: &ash::Device) {
        if self.replayed != vk::DeviceMemory::null() {
            device.free_memory(self.replayed, None);
        }
        for p in &self.pieces {
            device.free_memory(p.memory, None);
        }
    }
}

impl Session<'_> {
    pub fn allocate_memory(
        &mut self,
        device: u64,
        captured: u64,
        size: u64,
        captured_type: u32,
        chain: Vec<PNext>,
    ) -> Result<(), ReplayError> {
        self.device(device)?;
        let captured_flags = match self.capture_device_of(device) {
            Some(c) => c
                .memory_types
                .get(captured_type as usize)
                .map(|t| t.property_flags)
                .ok_or_else(|| {
                    ReplayError::Other(format!(
                        "memory type {captured_type} does not exist on the capture device"
                    ))
                })?,
            // No capture summary: assume the replay device's type of the same index.
            None => self
                .gpu
                .summary
                .memory_types
                .get(captured_type as usize)
                .map_or(0, |t| t.property_flags),
        };
        self.memory.memories.insert(
            captured,
            MemState {
                device,
                size,
                captured_flags,
                replayed: vk::DeviceMemory::null(),
                type_index: u32::MAX,
                coherent: true,
                mapped: std::ptr::null_mut(),
                persistent: false,
                chain,
                pieces: Vec::new(),
                early: Vec::new(),
            },
        );
        Ok(())
    }

    /// Makes the replay allocation of `captured` if not done yet, compatible with `type_bits` and
    /// at least `min_size` bytes.
    pub fn ensure_memory(
        &mut self,
        captured: u64,
        type_bits: u32,
        min_size: u64,
    ) -> Result<vk::DeviceMemory, ReplayError> {
        let host = self.memory.host_memories.contains(&captured);
        if self.memory.rebinding == Some(true) {
            return Err(ReplayError::Other(format!(
                "memory 0x{captured:x}: --memory rebind gave the resources bound to it their own \
                 allocations, and this command needs the captured allocation itself (try --memory remap)"
            )));
        }
        let m = self
            .memory
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?;
        if m.replayed != vk::DeviceMemory::null() {
            if m.type_index < 32 && type_bits & (1 << m.type_index) == 0 {
                return Err(ReplayError::Other(format!(
                    "memory 0x{captured:x} was allocated from replay type {} but a resource bound to it \
                     accepts only types {type_bits:#b}",
                    m.type_index
                )));
            }
            if min_size > m.size {
                return Err(ReplayError::Other(format!(
                    "memory 0x{captured:x} has {} bytes but the replay device needs {min_size} for a resource bound to it",
                    m.size
                )));
            }
            return Ok(m.replayed);
        }
        let d = self.device(m.device)?;
        let ti = mapping::pick_memory_type(m.captured_flags, &d.memory_types, type_bits, host)
            .ok_or_else(|| {
                ReplayError::NoGpu(format!(
                "no memory type of the replay GPU can stand in for capture memory 0x{captured:x} \
                 (flags {:?}, allowed types {type_bits:#b}{})",
                vk::MemoryPropertyFlags::from_raw(m.captured_flags),
                if host { ", host access needed" } else { "" }
            ))
            })?;
        let size = m.size.max(min_size);
        let (device, chain) = (m.device, m.chain.clone());
        let mut arena = Arena::new();
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(ti);
        // SAFETY: the chain is materialised into `arena`, which outlives the call.
        info.p_next = unsafe { m_chain(&chain, &mut arena, self) }? as *const c_void;
        let d = self.device(device)?;
        // SAFETY: valid device and allocate info.
        let mem = unsafe { d.device.allocate_memory(&info, None) }.map_err(|e| {
            ReplayError::vk(format!("vkAllocateMemory of {size} bytes (type {ti})"), e)
        })?;
        let coherent = d.memory_types.get(ti as usize).is_some_and(|t| {
            t.property_flags & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0
        });
        let m = self
            .memory
            .memories
            .get_mut(&captured)
            .expect("checked above");
        m.replayed = mem;
        m.type_index = ti;
        m.size = size;
        m.coherent = coherent;
        self.handles.insert(
            (vk::ObjectType::DEVICE_MEMORY.as_raw(), captured),
            mem.as_raw(),
        );
        Ok(mem)
    }

    pub fn free_memory(&mut self, captured: u64) -> Result<(), ReplayError> {
        // A query copy into this memory not read yet keeps what the replay GPU wrote.
        if self.tracked.copies.any_live() {
            self.save_copies_over(captured, 0, u64::MAX);
        }
        if let Some(m) = self.memory.memories.remove(&captured) {
            let d = self.device(m.device)?;
            // SAFETY: the memory belongs to this device and the trace frees it here.
            unsafe { m.free_all(&d.device) };
        }
        self.unbind(vk::ObjectType::DEVICE_MEMORY, captured);
        Ok(())
    }

    /// Host pointer to the start of the replayed allocation (mapped on demand).
    fn map_whole(&mut self, captured: u64) -> Result<*mut u8, ReplayError> {
        self.ensure_memory(captured, u32::MAX, 0)?;
        let m = &self.memory.memories[&captured];
        if !m.mapped.is_null() {
            return Ok(m.mapped);
        }
        let d = self.device(m.device)?;
        // SAFETY: memory from this device, host visible (ensured by the type choice for host-accessed memory).
        let p = unsafe {
            d.device
                .map_memory(m.replayed, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        }
        .map_err(|e| {
            ReplayError::vk(
                format!("vkMapMemory of replay memory for 0x{captured:x}"),
                e,
            )
        })?;
        let m = self.memory.memories.get_mut(&captured).expect("exists");
        m.mapped = p as *mut u8;
        Ok(m.mapped)
    }

    fn unmap_if_transient(&mut self, captured: u64) -> Result<(), ReplayError> {
        let Some(m) = self.memory.memories.get(&captured) else {
            return Ok(());
        };
        if m.persistent || m.mapped.is_null() {
            return Ok(());
        }
        let (mem, dev) = (m.replayed, m.device);
        let d = self.device(dev)?;
        // SAFETY: mapped above by us.
        unsafe { d.device.unmap_memory(mem) };
        self.memory
            .memories
            .get_mut(&captured)
            .expect("exists")
            .mapped = std::ptr::null_mut();
        Ok(())
    }

    /// The capture mapped this memory: keep a replay mapping for as long.
    pub fn map_memory(&mut self, captured: u64) -> Result<(), ReplayError> {
        if self.rebinding_for(captured)? {
            // Pieces the host touches stay mapped from their bind.
            return Ok(());
        }
        self.map_whole(captured)?;
        self.memory
            .memories
            .get_mut(&captured)
            .expect("mapped")
            .persistent = true;
        Ok(())
    }

    /// Whether captured memory `captured` is rebound (deciding it now when not yet decided).
    fn rebinding_for(&mut self, captured: u64) -> Result<bool, ReplayError> {
        if let Some(r) = self.memory.rebinding {
            return Ok(r);
        }
        let device = self
            .memory
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?
            .device;
        self.rebinding(device)
    }

    pub fn unmap_memory(&mut self, captured: u64) -> Result<(), ReplayError> {
        if let Some(m) = self.memory.memories.get_mut(&captured) {
            m.persistent = false;
        }
        self.unmap_if_transient(captured)
    }

    /// Applies a `MemoryWrite`: the bytes the app wrote at `offset` of its mapping.
    pub fn write_memory(
        &mut self,
        captured: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ReplayError> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| ReplayError::Other("memory write range overflows".into()))?;
        let size = self
            .memory
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?
            .size;
        if end > size {
            return Err(ReplayError::Other(format!(
                "memory write of {} bytes at offset {offset} is outside memory 0x{captured:x} of {size} bytes",
                data.len()
            )));
        }
        // Never write over a query copy's replayed result before it was compared.
        if self.tracked.copies.any_live() {
            self.save_copies_over(captured, offset, end);
        }
        if self.rebinding_for(captured)? {
            return self.write_pieces(captured, offset, data);
        }
        self.ensure_memory(captured, u32::MAX, 0)?;
        let m = &self.memory.memories[&captured];
        let host_visible = self
            .device(m.device)?
            .memory_types
            .get(m.type_index as usize)
            .is_some_and(|t| {
                t.property_flags & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() != 0
            });
        // `QUARRY_REPLAY_UPLOAD=gpu` takes the GPU path for every write (tests it on GPUs whose
        // memory is all host-visible).
        let forced = std::env::var("QUARRY_REPLAY_UPLOAD").is_ok_and(|v| v == "gpu");
        if !host_visible || forced {
            // Contents a trimmed capture's snapshot read back from memory the host could not map.
            let (device, mem, size, ti) = (m.device, m.replayed, m.size, m.type_index);
            return self.upload_to(device, mem, size, ti, offset, data, captured);
        }
        let p = self.map_whole(captured)?;
        // SAFETY: [offset, end) lies inside the mapped allocation (checked above).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.add(offset as usize), data.len()) };
        let m = &self.memory.memories[&captured];
        if !m.coherent {
            let d = self.device(m.device)?;
            let atom = d.non_coherent_atom;
            let start = offset / atom * atom;
            let range_end = end.div_ceil(atom).saturating_mul(atom);
            let size = if range_end >= m.size {
                vk::WHOLE_SIZE
            } else {
                range_end - start
            };
            let range = vk::MappedMemoryRange::default()
                .memory(m.replayed)
                .offset(start)
                .size(size);
            // SAFETY: the range is inside the mapped allocation.
            unsafe { d.device.flush_mapped_memory_ranges(&[range]) }
                .map_err(|e| ReplayError::vk("vkFlushMappedMemoryRanges", e))?;
        }
        self.unmap_if_transient(captured)
    }

    /// Writes `data` at `offset` of replay allocation `mem` (of `size` bytes, type `type_index`,
    /// holding capture memory `captured`) that the host cannot map: a host-visible staging buffer
    /// copied on the GPU into a transfer buffer bound over the whole allocation, waited on.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn upload_to(
        &self,
        device: u64,
        mem: vk::DeviceMemory,
        size: u64,
        type_index: u32,
        offset: u64,
        data: &[u8],
        captured: u64,
    ) -> Result<(), ReplayError> {
        let d = self.device(device)?;
        let Some((queue, family)) = d
            .queues
            .iter()
            .find_map(|q| Some((*q, *d.queue_family_of.get(&q.as_raw())?)))
        else {
            return Err(ReplayError::Other(format!(
                "memory 0x{captured:x}: its contents need a GPU upload, and the trace has retrieved no queue yet"
            )));
        };
        let dev = &d.device;
        let vkerr = |what: &'static str| move |e| ReplayError::vk(what, e);
        // Everything made here is destroyed on every path out.
        struct Made<'a> {
            dev: &'a ash::Device,
            buffers: Vec<vk::Buffer>,
            memory: vk::DeviceMemory,
            pool: vk::CommandPool,
        }
        impl Drop for Made<'_> {
            fn drop(&mut self) {
                // SAFETY: objects of this device, idle (the queue was waited on) or never used.
                unsafe {
                    for b in &self.buffers {
                        self.dev.destroy_buffer(*b, None);
                    }
                    if self.memory != vk::DeviceMemory::null() {
                        self.dev.free_memory(self.memory, None);
                    }
                    if self.pool != vk::CommandPool::null() {
                        self.dev.destroy_command_pool(self.pool, None);
                    }
                }
            }
        }
        let mut made = Made {
            dev,
            buffers: Vec::new(),
            memory: vk::DeviceMemory::null(),
            pool: vk::CommandPool::null(),
        };
        // SAFETY: plain object creation and a waited-on submission on this device.
        unsafe {
            let staging = dev
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(data.len().max(1) as u64)
                        .usage(vk::BufferUsageFlags::TRANSFER_SRC),
                    None,
                )
                .map_err(vkerr("vkCreateBuffer (upload staging)"))?;
            made.buffers.push(staging);
            let req = dev.get_buffer_memory_requirements(staging);
            let host = (vk::MemoryPropertyFlags::HOST_VISIBLE
                | vk::MemoryPropertyFlags::HOST_COHERENT)
                .as_raw();
            let ti = (0..d.memory_types.len())
                .find(|&i| {
                    req.memory_type_bits & (1 << i) != 0
                        && d.memory_types[i].property_flags & host == host
                })
                .ok_or_else(|| {
                    ReplayError::Other("no host-visible memory type for an upload".into())
                })?;
            made.memory = dev
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(ti as u32),
                    None,
                )
                .map_err(vkerr("vkAllocateMemory (upload staging)"))?;
            dev.bind_buffer_memory(staging, made.memory, 0)
                .map_err(vkerr("vkBindBufferMemory (upload staging)"))?;
            let p = dev
                .map_memory(made.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .map_err(vkerr("vkMapMemory (upload staging)"))?;
            std::ptr::copy_nonoverlapping(data.as_ptr(), p as *mut u8, data.len());
            let alias = dev
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(size)
                        .usage(vk::BufferUsageFlags::TRANSFER_DST),
                    None,
                )
                .map_err(vkerr("vkCreateBuffer (upload target)"))?;
            made.buffers.push(alias);
            let areq = dev.get_buffer_memory_requirements(alias);
            if areq.memory_type_bits & (1 << type_index) == 0 || areq.size > size {
                return Err(ReplayError::Other(format!(
                    "memory 0x{captured:x}: a transfer buffer cannot be bound over its replay allocation (type {type_index})"
                )));
            }
            dev.bind_buffer_memory(alias, mem, 0)
                .map_err(vkerr("vkBindBufferMemory (upload target)"))?;
            made.pool = dev
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default().queue_family_index(family),
                    None,
                )
                .map_err(vkerr("vkCreateCommandPool (upload)"))?;
            let cb = dev
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(made.pool)
                        .command_buffer_count(1),
                )
                .map_err(vkerr("vkAllocateCommandBuffers (upload)"))?[0];
            dev.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(vkerr("vkBeginCommandBuffer (upload)"))?;
            dev.cmd_copy_buffer(
                cb,
                staging,
                alias,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: offset,
                    size: data.len() as u64,
                }],
            );
            // Later work of any kind reads what was written.
            dev.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::DependencyFlags::empty(),
                &[vk::MemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                    .dst_access_mask(vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE)],
                &[],
                &[],
            );
            dev.end_command_buffer(cb)
                .map_err(vkerr("vkEndCommandBuffer (upload)"))?;
            let cbs = [cb];
            dev.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                vk::Fence::null(),
            )
            .map_err(vkerr("vkQueueSubmit (upload)"))?;
            dev.queue_wait_idle(queue)
                .map_err(vkerr("vkQueueWaitIdle (upload)"))?;
        }
        drop(made);
        Ok(())
    }

    /// Reads `len` bytes at `offset` of a captured allocation from its replay counterpart.
    pub fn read_memory(
        &mut self,
        captured: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, ReplayError> {
        let size = self
            .memory
            .memories
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE_MEMORY,
                handle: captured,
            })?
            .size;
        let end = offset.saturating_add(len);
        if end > size {
            return Err(ReplayError::Other(format!(
                "read of {len} bytes at {offset} is outside memory 0x{captured:x} of {size} bytes"
            )));
        }
        if self.rebinding_for(captured)? {
            return self.read_pieces(captured, offset, len);
        }
        let p = self.map_whole(captured)?;
        let m = &self.memory.memories[&captured];
        if !m.coherent {
            let d = self.device(m.device)?;
            let range = vk::MappedMemoryRange::default()
                .memory(m.replayed)
                .offset(0)
                .size(vk::WHOLE_SIZE);
            // SAFETY: whole mapped allocation.
            unsafe { d.device.invalidate_mapped_memory_ranges(&[range]) }
                .map_err(|e| ReplayError::vk("vkInvalidateMappedMemoryRanges", e))?;
        }
        let mut out = vec![0u8; len as usize];
        // SAFETY: inside the mapped allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(p.add(offset as usize), out.as_mut_ptr(), len as usize)
        };
        self.unmap_if_transient(captured)?;
        Ok(out)
    }

    /// Before a resource is bound: make its memory with the replay device's requirements.
    pub fn prepare_bind(
        &mut self,
        memory: u64,
        requirements: vk::MemoryRequirements,
        offset: u64,
    ) -> Result<(), ReplayError> {
        if requirements.alignment > 1 && !offset.is_multiple_of(requirements.alignment) {
            return Err(ReplayError::Other(format!(
                "the capture binds at offset {offset}, not a multiple of the replay device's alignment {}",
                requirements.alignment
            )));
        }
        self.ensure_memory(
            memory,
            requirements.memory_type_bits,
            offset.saturating_add(requirements.size),
        )?;
        Ok(())
    }
}
