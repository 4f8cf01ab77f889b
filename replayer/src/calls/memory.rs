//! Memory: allocations are deferred until first use (`Session::ensure_memory`) so their type and
//! size follow the replay device's requirements; binds record which memory backs each buffer.
//! What the app wrote through its mappings arrives as `MemoryWrite` records, not as calls.

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, Call};

use super::{generic, other, Entry};
use crate::error::ReplayError;
use crate::rebind::Kind;
use crate::session::Session;

pub(crate) unsafe fn vkAllocateMemory(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkAllocateMemory,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let info = p
        .p_allocate_info
        .as_deref()
        .ok_or_else(|| other("no allocate info"))?;
    // Imports name a file descriptor, handle or host pointer of the captured process: the replay
    // allocates its own memory instead (what the app wrote arrives as memory writes).
    let chain = info
        .p_next
        .iter()
        .filter(|n| !n.name().starts_with("VkImport"))
        .cloned()
        .collect();
    let mem = p
        .p_memory
        .ok_or_else(|| other("the capture recorded no memory handle"))?;
    s.allocate_memory(
        p.device,
        mem,
        info.allocation_size,
        info.memory_type_index,
        chain,
    )
}

pub(crate) unsafe fn vkFreeMemory(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkFreeMemory,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.free_memory(p.memory)
}

pub(crate) unsafe fn vkMapMemory(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkMapMemory,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result >= 0 {
        s.map_memory(p.memory)?;
    }
    Ok(())
}

pub(crate) unsafe fn vkUnmapMemory(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkUnmapMemory,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.unmap_memory(p.memory)
}

pub(crate) unsafe fn vkBindBufferMemory(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkBindBufferMemory,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if !bind_buffer(s, p.device, p.buffer, p.memory, p.memory_offset, rec.seq)? {
        generic(s, call, rec)?;
    }
    Ok(())
}

pub(crate) unsafe fn vkBindImageMemory(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkBindImageMemory,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if !bind_image(s, p.device, p.image, p.memory, p.memory_offset, rec.seq)? {
        generic(s, call, rec)?;
    }
    Ok(())
}

/// Also `vkBindBufferMemory2KHR`. Under rebind each resource is bound to its own allocation by
/// hand; the rest go through the generated dispatch. `E` names the entry point recorded; unused
/// here, as [`generic`] replays the call under its own name.
pub(crate) unsafe fn vkBindBufferMemory2<E: Entry<vk::PFN_vkBindBufferMemory2>>(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkBindBufferMemory2,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    let mut rest = Vec::new();
    for b in p.p_bind_infos.as_deref().unwrap_or(&[]) {
        if !b.p_next.is_empty() && s.rebinding(p.device)? {
            return Err(unsupported_chain(call));
        }
        if !bind_buffer(s, p.device, b.buffer, b.memory, b.memory_offset, rec.seq)? {
            rest.push(b.clone());
        }
    }
    dispatch_rest(s, call, rec, rest, p.bind_info_count)
}

/// Also `vkBindImageMemory2KHR`.
/// `E` names the entry point recorded; unused here, as [`generic`] replays the call under its own
/// name.
pub(crate) unsafe fn vkBindImageMemory2<E: Entry<vk::PFN_vkBindImageMemory2>>(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkBindImageMemory2,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    let mut rest = Vec::new();
    for b in p.p_bind_infos.as_deref().unwrap_or(&[]) {
        // Binding to swapchain memory (memory 0) comes with a chained swapchain info.
        if b.memory == 0 {
            rest.push(b.clone());
            continue;
        }
        if !b.p_next.is_empty() && s.rebinding(p.device)? {
            return Err(unsupported_chain(call));
        }
        if !bind_image(s, p.device, b.image, b.memory, b.memory_offset, rec.seq)? {
            rest.push(b.clone());
        }
    }
    dispatch_rest(s, call, rec, rest, p.bind_info_count)
}

fn unsupported_chain(call: &Call) -> ReplayError {
    other(format!(
        "{}: --memory rebind cannot bind with a chained struct (planes, device groups) yet; \
         try --memory remap",
        call.name()
    ))
}

/// The generated dispatch for the bind infos not bound by hand (all of them unless rebinding).
unsafe fn dispatch_rest<T: Clone>(
    s: &mut Session<'_>,
    call: &Call,
    rec: &record::Call,
    rest: Vec<T>,
    count: u32,
) -> Result<(), ReplayError>
where
    Call: WithInfos<T>,
{
    if rest.len() == count as usize {
        return generic(s, call, rec);
    }
    if rest.is_empty() {
        return Ok(());
    }
    generic(s, &call.with_infos(rest), rec)
}

/// A bind call carrying only some of its bind infos.
trait WithInfos<T> {
    fn with_infos(&self, infos: Vec<T>) -> Call;
}

impl WithInfos<vkstream::types::VkBindBufferMemoryInfo> for Call {
    fn with_infos(&self, infos: Vec<vkstream::types::VkBindBufferMemoryInfo>) -> Call {
        let mut c = self.clone();
        if let Call::vkBindBufferMemory2(p) | Call::vkBindBufferMemory2KHR(p) = &mut c {
            p.bind_info_count = infos.len() as u32;
            p.p_bind_infos = Some(infos);
        }
        c
    }
}

impl WithInfos<vkstream::types::VkBindImageMemoryInfo> for Call {
    fn with_infos(&self, infos: Vec<vkstream::types::VkBindImageMemoryInfo>) -> Call {
        let mut c = self.clone();
        if let Call::vkBindImageMemory2(p) | Call::vkBindImageMemory2KHR(p) = &mut c {
            p.bind_info_count = infos.len() as u32;
            p.p_bind_infos = Some(infos);
        }
        c
    }
}

/// Prepares a buffer bind; `true` when it was bound here (rebind: its own allocation).
unsafe fn bind_buffer(
    s: &mut Session<'_>,
    device: u64,
    buffer: u64,
    memory: u64,
    offset: u64,
    seq: u64,
) -> Result<bool, ReplayError> {
    let b = vk::Buffer::from_raw(s.lookup(vk::ObjectType::BUFFER, buffer)?);
    let req = s.device(device)?.device.get_buffer_memory_requirements(b);
    s.memory.buffer_memory.insert(buffer, (memory, offset));
    if s.rebinding(device)? {
        s.bind_own(
            device,
            Kind::Buffer,
            buffer,
            b.as_raw(),
            memory,
            offset,
            req,
            seq,
        )?;
        return Ok(true);
    }
    s.prepare_bind(memory, req, offset)?;
    Ok(false)
}

/// Prepares an image bind; `true` when it was bound here (rebind: its own allocation).
unsafe fn bind_image(
    s: &mut Session<'_>,
    device: u64,
    image: u64,
    memory: u64,
    offset: u64,
    seq: u64,
) -> Result<bool, ReplayError> {
    let i = vk::Image::from_raw(s.lookup(vk::ObjectType::IMAGE, image)?);
    let req = s.device(device)?.device.get_image_memory_requirements(i);
    if s.rebinding(device)? {
        s.bind_own(
            device,
            Kind::Image,
            image,
            i.as_raw(),
            memory,
            offset,
            req,
            seq,
        )?;
        return Ok(true);
    }
    s.prepare_bind(memory, req, offset)?;
    Ok(false)
}
