//! Reading device memory the host cannot map, through the GPU: a transfer-source buffer the layer
//! binds over the whole allocation (aliasing it, since the app's own buffers may lack
//! TRANSFER_SRC), copied in chunks into a host-visible staging buffer on a queue the app created.
//! Used for the trimmed-capture snapshot and for `vkCmdCopyQueryPoolResults` destinations.
//!
//! The calls go straight down the chain (never through the layer's intercepts), so they are not
//! in the trace. The command buffer gets the loader's dispatch pointer through the loader's
//! `vkSetDeviceLoaderData`, so layers below this one (validation) can look it up.
//!
//! Depends on: `tables` only (`state` keeps a `Reader` for query copies, so nothing here may
//! reach the layer's bookkeeping).

use crate::tables::DeviceInfo;
use ash::vk;
use ash::vk::Handle;

/// `QUARRY_CAPTURE_READBACK=gpu`: read through the GPU even memory the host could map (tests the
/// path on GPUs whose memory is all host-visible, such as lavapipe).
pub const ENV_READBACK: &str = "QUARRY_CAPTURE_READBACK";

pub fn forced() -> bool {
    // Read once: this is asked at every completed query copy.
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| std::env::var(ENV_READBACK).is_ok_and(|v| v == "gpu"))
}

/// Ranges read so far (reported in the trace's closing note).
pub static READS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Largest copy through the staging buffer at once.
const STAGING: u64 = 64 << 20;

fn need<F>(f: Option<F>, name: &str) -> Result<F, String> {
    f.ok_or_else(|| format!("{name} is missing"))
}

fn check(what: &str, r: vk::Result) -> Result<(), String> {
    if r == vk::Result::SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r:?}"))
    }
}

/// A command pool and buffer, a fence and a mapped staging buffer; destroyed on drop.
pub struct Reader<'a> {
    d: &'a DeviceInfo,
    queue: vk::Queue,
    pool: vk::CommandPool,
    cb: vk::CommandBuffer,
    fence: vk::Fence,
    staging: vk::Buffer,
    staging_memory: vk::DeviceMemory,
    staging_size: u64,
    mapped: *const u8,
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let (t, dev) = (&self.d.table, self.d.handle);
        // SAFETY: each object was made on this device by `new` and is idle (every copy was waited on).
        unsafe {
            if let (Some(f), false) = (t.vkDestroyBuffer, self.staging == vk::Buffer::null()) {
                f(dev, self.staging, std::ptr::null());
            }
            if let (Some(f), false) = (
                t.vkFreeMemory,
                self.staging_memory == vk::DeviceMemory::null(),
            ) {
                f(dev, self.staging_memory, std::ptr::null());
            }
            if let (Some(f), false) = (t.vkDestroyFence, self.fence == vk::Fence::null()) {
                f(dev, self.fence, std::ptr::null());
            }
            if let (Some(f), false) = (t.vkDestroyCommandPool, self.pool == vk::CommandPool::null())
            {
                f(dev, self.pool, std::ptr::null());
            }
        }
    }
}

impl<'a> Reader<'a> {
    /// Whether one chunk of `len` bytes fits the staging buffer.
    pub fn fits(&self, len: u64) -> bool {
        len <= self.staging_size
    }

    /// Sets up for reads of up to `largest` bytes per chunk (capped at 64 MiB) on one of `queues`
    /// (queue, family) that can copy.
    ///
    /// # Safety
    /// `d` must be a live device and the queues its own; nothing else may use the chosen queue
    /// while the reader copies.
    pub unsafe fn new(
        d: &'a DeviceInfo,
        queues: &[(u64, u32)],
        largest: u64,
    ) -> Result<Self, String> {
        let t = &d.table;
        let dev = d.handle;
        let copy_flags =
            vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE | vk::QueueFlags::TRANSFER;
        let (queue, family) = queues
            .iter()
            .copied()
            .filter(|(_, f)| {
                d.queue_families
                    .get(*f as usize)
                    .is_some_and(|p| p.queue_flags.intersects(copy_flags))
            })
            .min()
            .ok_or("the app created no queue that can copy")?;
        let staging_size = largest.clamp(1, STAGING);
        let mut r = Reader {
            d,
            queue: vk::Queue::from_raw(queue),
            pool: vk::CommandPool::null(),
            cb: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            staging: vk::Buffer::null(),
            staging_memory: vk::DeviceMemory::null(),
            staging_size,
            mapped: std::ptr::null(),
        };
        let pool_ci = vk::CommandPoolCreateInfo::default()
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
            .queue_family_index(family);
        check(
            "vkCreateCommandPool",
            need(t.vkCreateCommandPool, "vkCreateCommandPool")?(
                dev,
                &pool_ci,
                std::ptr::null(),
                &mut r.pool,
            ),
        )?;
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(r.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        check(
            "vkAllocateCommandBuffers",
            need(t.vkAllocateCommandBuffers, "vkAllocateCommandBuffers")?(dev, &ai, &mut r.cb),
        )?;
        // Made below the loader: give it the loader's dispatch pointer (the device's, as the
        // loader itself would when no callback is offered).
        match d.set_loader_data {
            Some(f) => check(
                "vkSetDeviceLoaderData",
                f(dev, r.cb.as_raw() as *mut std::ffi::c_void),
            )?,
            None => *(r.cb.as_raw() as *mut usize) = *(dev.as_raw() as *const usize),
        }
        check(
            "vkCreateFence",
            need(t.vkCreateFence, "vkCreateFence")?(
                dev,
                &vk::FenceCreateInfo::default(),
                std::ptr::null(),
                &mut r.fence,
            ),
        )?;
        let sci = vk::BufferCreateInfo::default()
            .size(staging_size)
            .usage(vk::BufferUsageFlags::TRANSFER_DST);
        check(
            "vkCreateBuffer",
            need(t.vkCreateBuffer, "vkCreateBuffer")?(dev, &sci, std::ptr::null(), &mut r.staging),
        )?;
        let mut req = vk::MemoryRequirements::default();
        need(
            t.vkGetBufferMemoryRequirements,
            "vkGetBufferMemoryRequirements",
        )?(dev, r.staging, &mut req);
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let types = &d.memory.memory_types[..d.memory.memory_type_count as usize];
        let ty = (0..types.len())
            .filter(|&i| {
                req.memory_type_bits & (1 << i) != 0 && types[i].property_flags.contains(host)
            })
            .max_by_key(|&i| {
                types[i]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::HOST_CACHED)
            })
            .ok_or("no host-visible, coherent memory type for the staging buffer")?;
        let mai = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(ty as u32);
        check(
            "vkAllocateMemory",
            need(t.vkAllocateMemory, "vkAllocateMemory")?(
                dev,
                &mai,
                std::ptr::null(),
                &mut r.staging_memory,
            ),
        )?;
        check(
            "vkBindBufferMemory",
            need(t.vkBindBufferMemory, "vkBindBufferMemory")?(dev, r.staging, r.staging_memory, 0),
        )?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        check(
            "vkMapMemory",
            need(t.vkMapMemory, "vkMapMemory")?(
                dev,
                r.staging_memory,
                0,
                vk::WHOLE_SIZE,
                vk::MemoryMapFlags::empty(),
                &mut p,
            ),
        )?;
        r.mapped = p as *const u8;
        Ok(r)
    }

    /// `len` bytes at `offset` of allocation `memory` (`size` bytes of memory type `type_index`).
    ///
    /// # Safety
    /// The allocation must be live and no GPU work may be writing the range.
    pub unsafe fn read(
        &mut self,
        memory: u64,
        size: u64,
        type_index: u32,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, String> {
        let t = &self.d.table;
        let dev = self.d.handle;
        let create_buffer = need(t.vkCreateBuffer, "vkCreateBuffer")?;
        let destroy_buffer = need(t.vkDestroyBuffer, "vkDestroyBuffer")?;
        let requirements = need(
            t.vkGetBufferMemoryRequirements,
            "vkGetBufferMemoryRequirements",
        )?;
        let bind = need(t.vkBindBufferMemory, "vkBindBufferMemory")?;
        if offset.saturating_add(len) > size {
            return Err(format!(
                "memory {memory:#x}: range [{offset}, +{len}) outside its {size} bytes"
            ));
        }
        let aci = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC);
        let mut alias = vk::Buffer::null();
        check(
            "vkCreateBuffer",
            create_buffer(dev, &aci, std::ptr::null(), &mut alias),
        )?;
        let mut areq = vk::MemoryRequirements::default();
        requirements(dev, alias, &mut areq);
        let result = if areq.memory_type_bits & (1 << type_index) == 0 || areq.size > size {
            Err(format!(
                "memory {memory:#x}: a transfer buffer cannot be bound over it (type {type_index})"
            ))
        } else {
            check(
                "vkBindBufferMemory",
                bind(dev, alias, vk::DeviceMemory::from_raw(memory), 0),
            )
            .and_then(|()| self.copy_out(alias, offset, len))
        };
        destroy_buffer(dev, alias, std::ptr::null());
        if result.is_ok() {
            READS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        result
    }

    unsafe fn copy_out(
        &mut self,
        src: vk::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, String> {
        let t = &self.d.table;
        let dev = self.d.handle;
        let begin = need(t.vkBeginCommandBuffer, "vkBeginCommandBuffer")?;
        let end = need(t.vkEndCommandBuffer, "vkEndCommandBuffer")?;
        let copy = need(t.vkCmdCopyBuffer, "vkCmdCopyBuffer")?;
        let barrier = need(t.vkCmdPipelineBarrier, "vkCmdPipelineBarrier")?;
        let submit = need(t.vkQueueSubmit, "vkQueueSubmit")?;
        let wait = need(t.vkWaitForFences, "vkWaitForFences")?;
        let reset = need(t.vkResetFences, "vkResetFences")?;
        let mut bytes = Vec::with_capacity(len as usize);
        let mut at = 0;
        while at < len {
            let n = (len - at).min(self.staging_size);
            let bi = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            check("vkBeginCommandBuffer", begin(self.cb, &bi))?;
            let region = vk::BufferCopy {
                src_offset: offset + at,
                dst_offset: 0,
                size: n,
            };
            // The app's writes (done: the device is idle or its submit signaled) made visible to
            // the copy, and the copy's writes to the host.
            let before = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ);
            barrier(
                self.cb,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                1,
                &before,
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            );
            copy(self.cb, src, self.staging, 1, &region);
            let after = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ);
            barrier(
                self.cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                1,
                &after,
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            );
            check("vkEndCommandBuffer", end(self.cb))?;
            let cbs = [self.cb];
            let si = vk::SubmitInfo::default().command_buffers(&cbs);
            check("vkQueueSubmit", submit(self.queue, 1, &si, self.fence))?;
            check(
                "vkWaitForFences",
                wait(dev, 1, &self.fence, vk::TRUE, 10_000_000_000),
            )?;
            check("vkResetFences", reset(dev, 1, &self.fence))?;
            bytes.extend_from_slice(std::slice::from_raw_parts(self.mapped, n as usize));
            at += n;
        }
        Ok(bytes)
    }
}
