//! Exercises the replayer's generated dispatch (replayer/src/generated/dispatch.rs) end to end
//! without a GPU: encode a call, decode it, replay it through a table of fake driver functions,
//! and check what the "driver" received (translated handles, rebuilt structures and chains)
//! and which created handles were bound. Compiled here because the dispatch only needs ash,
//! vkstream and a `ReplayError` with an `Unavailable(String)` variant.

use ash::vk;
use ash::vk::Handle;
use std::collections::HashMap;
use std::sync::Mutex;
use vkstream::{decode_call, encode, ids, DeviceTable, Encoder, InstanceTable};

mod error {
    #[derive(Debug)]
    pub enum ReplayError {
        Unknown(u64),
        /// A command the replay device does not provide (the dispatch's `missing`).
        Unavailable(String),
    }
}

#[path = "../../replayer/src/generated/dispatch.rs"]
#[allow(dead_code)]
mod dispatch;

use dispatch::{Remap, ReplayContext};
use error::ReplayError;

/// Replay handles are the captured ones plus this offset.
const OFFSET: u64 = 0x1000_0000;

#[derive(Default)]
struct Ctx {
    known: HashMap<(i32, u64), u64>,
    bound: Vec<(vk::ObjectType, u64, u64)>,
    device: DeviceTable,
    instance: InstanceTable,
}

impl Remap for Ctx {
    fn handle(&mut self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
        self.known
            .get(&(ty.as_raw(), captured))
            .copied()
            .ok_or(ReplayError::Unknown(captured))
    }
    fn bind(&mut self, ty: vk::ObjectType, captured: u64, replayed: u64) {
        self.bound.push((ty, captured, replayed));
        self.known.insert((ty.as_raw(), captured), replayed);
    }
}

impl ReplayContext for Ctx {
    fn remap(&mut self) -> &mut dyn Remap {
        self
    }
    fn instance_table(&mut self, _captured: u64) -> Result<&InstanceTable, ReplayError> {
        Ok(&self.instance)
    }
    fn device_table(&mut self, _captured: u64) -> Result<&DeviceTable, ReplayError> {
        Ok(&self.device)
    }
}

impl Ctx {
    fn know(&mut self, ty: vk::ObjectType, captured: u64) {
        self.known
            .insert((ty.as_raw(), captured), captured + OFFSET);
    }
}

/// What the fake driver functions saw.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "system" fn fake_create_buffer(
    device: vk::Device,
    info: *const vk::BufferCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Buffer,
) -> vk::Result {
    let i = &*info;
    let ext = &*(i.p_next as *const vk::ExternalMemoryBufferCreateInfo<'_>);
    SEEN.lock().unwrap().push(format!(
        "create_buffer device={:#x} stype={:?} size={} usage={:?} families={:?} chain={:?}/{:?}/{} alloc_null={}",
        device.as_raw(),
        i.s_type,
        i.size,
        i.usage,
        std::slice::from_raw_parts(i.p_queue_family_indices, i.queue_family_index_count as usize),
        ext.s_type,
        ext.handle_types,
        ext.p_next.is_null(),
        alloc.is_null()
    ));
    *out = vk::Buffer::from_raw(0xB0B);
    vk::Result::SUCCESS
}

unsafe extern "system" fn fake_update_sets(
    _device: vk::Device,
    n: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
    copies_n: u32,
    copies: *const vk::CopyDescriptorSet<'_>,
) {
    let w = &std::slice::from_raw_parts(writes, n as usize)[0];
    let b = &*w.p_buffer_info;
    SEEN.lock().unwrap().push(format!(
        "update set={:#x} buffer={:#x} range={} image_info_null={} copies={} {}",
        w.dst_set.as_raw(),
        b.buffer.as_raw(),
        b.range,
        w.p_image_info.is_null(),
        copies_n,
        copies.is_null()
    ));
}

unsafe extern "system" fn fake_bind_sets(
    cb: vk::CommandBuffer,
    bp: vk::PipelineBindPoint,
    layout: vk::PipelineLayout,
    first: u32,
    n: u32,
    sets: *const vk::DescriptorSet,
    dn: u32,
    dyn_offsets: *const u32,
) {
    let sets: Vec<u64> = std::slice::from_raw_parts(sets, n as usize)
        .iter()
        .map(|s| s.as_raw())
        .collect();
    SEEN.lock().unwrap().push(format!(
        "bind cb={:#x} bp={bp:?} layout={:#x} first={first} sets={sets:x?} offsets={:?}",
        cb.as_raw(),
        layout.as_raw(),
        std::slice::from_raw_parts(dyn_offsets, dn as usize)
    ));
}

fn take_seen() -> Vec<String> {
    std::mem::take(&mut *SEEN.lock().unwrap())
}

// The three scenarios share SEEN, so they run in one test.
#[test]
fn generated_dispatch_translates_rebuilds_and_binds() {
    let mut ctx = Ctx::default();
    ctx.device.vkCreateBuffer = Some(fake_create_buffer);
    ctx.device.vkUpdateDescriptorSets = Some(fake_update_sets);
    ctx.device.vkCmdBindDescriptorSets = Some(fake_bind_sets);
    ctx.know(vk::ObjectType::DEVICE, 0xD);

    // vkCreateBuffer with a pNext chain: the created handle is bound captured -> replayed.
    let families = [0u32, 2];
    let mut ext = vk::ExternalMemoryBufferCreateInfo::default()
        .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let ci = vk::BufferCreateInfo::default()
        .size(4096)
        .usage(vk::BufferUsageFlags::UNIFORM_BUFFER)
        .sharing_mode(vk::SharingMode::CONCURRENT)
        .queue_family_indices(&families)
        .push_next(&mut ext);
    let captured_buffer = vk::Buffer::from_raw(0x55);
    let mut e = Encoder::new();
    unsafe {
        encode::vkCreateBuffer(
            &mut e,
            vk::Device::from_raw(0xD),
            &ci,
            std::ptr::null(),
            &captured_buffer as *const _ as *mut _,
        )
    };
    let call = decode_call(ids::vkCreateBuffer, e.as_bytes()).unwrap();
    let r = unsafe { dispatch::replay(&call, &mut ctx) }.unwrap();
    assert_eq!(r, vk::Result::SUCCESS);
    assert_eq!(
        take_seen(),
        vec![format!(
            "create_buffer device={:#x} stype=BUFFER_CREATE_INFO size=4096 usage=UNIFORM_BUFFER families=[0, 2] chain=EXTERNAL_MEMORY_BUFFER_CREATE_INFO/OPAQUE_FD/true alloc_null=true",
            0xD + OFFSET
        )]
    );
    assert_eq!(ctx.bound, vec![(vk::ObjectType::BUFFER, 0x55, 0xB0B)]);

    // vkUpdateDescriptorSets: handles inside arrays of structs are translated.
    ctx.know(vk::ObjectType::DESCRIPTOR_SET, 0x30);
    let infos = [vk::DescriptorBufferInfo {
        buffer: captured_buffer,
        offset: 0,
        range: 64,
    }];
    let w = [vk::WriteDescriptorSet::default()
        .dst_set(vk::DescriptorSet::from_raw(0x30))
        .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
        .buffer_info(&infos)];
    let mut e = Encoder::new();
    unsafe {
        encode::vkUpdateDescriptorSets(
            &mut e,
            vk::Device::from_raw(0xD),
            1,
            w.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    let call = decode_call(ids::vkUpdateDescriptorSets, e.as_bytes()).unwrap();
    assert_eq!(
        unsafe { dispatch::replay(&call, &mut ctx) }.unwrap(),
        vk::Result::SUCCESS
    );
    assert_eq!(
        take_seen(),
        vec![format!(
            "update set={:#x} buffer=0xb0b range=64 image_info_null=true copies=0 true",
            0x30 + OFFSET
        )]
    );

    // vkCmdBindDescriptorSets: handle arrays; null handles stay null without a lookup.
    ctx.know(vk::ObjectType::COMMAND_BUFFER, 0xC);
    ctx.know(vk::ObjectType::PIPELINE_LAYOUT, 0x9);
    let sets = [vk::DescriptorSet::from_raw(0x30), vk::DescriptorSet::null()];
    let offs = [16u32];
    let mut e = Encoder::new();
    unsafe {
        encode::vkCmdBindDescriptorSets(
            &mut e,
            vk::CommandBuffer::from_raw(0xC),
            vk::PipelineBindPoint::COMPUTE,
            vk::PipelineLayout::from_raw(0x9),
            1,
            2,
            sets.as_ptr(),
            1,
            offs.as_ptr(),
        )
    };
    let call = decode_call(ids::vkCmdBindDescriptorSets, e.as_bytes()).unwrap();
    assert_eq!(
        unsafe { dispatch::replay(&call, &mut ctx) }.unwrap(),
        vk::Result::SUCCESS
    );
    assert_eq!(
        take_seen(),
        vec![format!(
            "bind cb={:#x} bp=COMPUTE layout={:#x} first=1 sets=[{:x}, 0] offsets=[16]",
            0xC + OFFSET,
            0x9 + OFFSET,
            0x30 + OFFSET
        )]
    );

    // An unknown handle is an error from Remap, and the driver is not called.
    let mut e = Encoder::new();
    unsafe {
        encode::vkCmdBindDescriptorSets(
            &mut e,
            vk::CommandBuffer::from_raw(0xC),
            vk::PipelineBindPoint::COMPUTE,
            vk::PipelineLayout::from_raw(0x999),
            0,
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        )
    };
    let call = decode_call(ids::vkCmdBindDescriptorSets, e.as_bytes()).unwrap();
    assert!(matches!(
        unsafe { dispatch::replay(&call, &mut ctx) },
        Err(ReplayError::Unknown(0x999))
    ));
    assert!(take_seen().is_empty());

    // A command the replay device lacks is an error, not a crash.
    let mut e = Encoder::new();
    unsafe { encode::vkCmdDraw(&mut e, vk::CommandBuffer::from_raw(0xC), 3, 1, 0, 0) };
    let call = decode_call(ids::vkCmdDraw, e.as_bytes()).unwrap();
    match unsafe { dispatch::replay(&call, &mut ctx) } {
        Err(ReplayError::Unavailable(m)) => assert!(m.contains("vkCmdDraw"), "{m}"),
        other => panic!("expected a missing-function error, got {other:?}"),
    }
}
