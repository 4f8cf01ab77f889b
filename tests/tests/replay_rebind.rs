//! `--memory rebind|auto` (issue 21 part 2) on lavapipe: synthetic traces whose captured
//! placements (bind offsets, allocation sizes) came from a GPU with other requirements replay with
//! rebind, and `auto` picks it; `remap` fails on them with its clear error; aliased resources are
//! refused under rebind, naming both; buffers bound over a destroyed one's bytes start with what
//! was written there (Zink's recycled slab ranges); a real capture of quarry-demo replays with
//! rebind forced and every deterministic query still matches.
//!
//! The synthetic trace checks memory contents through a query copy: the host writes a value into
//! a source buffer (a `MemoryWrite` at the captured offset), the GPU copies it over the second
//! slot of an occlusion query copy's destination, and the copy's re-read must give both the
//! query's 0 samples and the host's value, in a buffer placed elsewhere by the rebind.

use std::path::Path;

use ash::vk;
use ash::vk::Handle as _;
use format::record::{self, FileKind, Header, Record};
use format::TraceWriter;
use quarry_tests::*;
use replayer::{MemoryMode, ReplayOptions};
use vkstream::Encoder;

const INSTANCE: u64 = 0x1000;
const PHYSICAL: u64 = 0x2000;
const DEVICE: u64 = 0x3000;
const QUEUE: u64 = 0x4000;
const POOL: u64 = 0x5000;
const SRC: u64 = 0x6000;
const DST: u64 = 0x6100;
const IMAGE: u64 = 0x6200;
const MEM: u64 = 0x7000;
const MEM2: u64 = 0x7100;
const VALUE: u64 = 0x0123_4567_89ab_cdef;

struct Trace {
    records: Vec<Record>,
    seq: u64,
}

impl Trace {
    fn new() -> Self {
        let names = vkstream::COMMANDS.iter().map(|s| s.to_string()).collect();
        Trace {
            records: vec![Record::CommandTable(names)],
            seq: 0,
        }
    }

    fn call(&mut self, name: &str, encode: impl FnOnce(&mut Encoder)) -> u64 {
        let mut e = Encoder::new();
        encode(&mut e);
        self.seq += 1;
        self.records.push(Record::Call(record::Call {
            seq: self.seq,
            thread: 1,
            cmd: vkstream::command_id(name).expect("known command"),
            host_ns: 1_000_000 * self.seq,
            result: 0,
            params: e.into_bytes(),
        }));
        self.seq
    }

    /// Writes the trace; with `QUARRY_KEEP_TRACES=DIR` a copy goes there too, to replay on
    /// another GPU (`quarry replay DIR/misaligned.qtrace --compare`).
    fn write(&self, path: &Path) {
        self.write_only(path);
        if let Some(dir) = std::env::var_os("QUARRY_KEEP_TRACES") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(path, Path::new(&dir).join(path.file_name().unwrap())).unwrap();
        }
    }

    fn buffer(&mut self, dev: vk::Device, handle: u64, size: u64, usage: vk::BufferUsageFlags) {
        let bci = vk::BufferCreateInfo::default().size(size).usage(usage);
        let mut b = vk::Buffer::from_raw(handle);
        self.call("vkCreateBuffer", |e| unsafe {
            vkstream::encode::vkCreateBuffer(e, dev, &bci, std::ptr::null(), &mut b)
        });
    }

    fn bind(&mut self, dev: vk::Device, buffer: u64, memory: u64, offset: u64) {
        let (b, m) = (
            vk::Buffer::from_raw(buffer),
            vk::DeviceMemory::from_raw(memory),
        );
        self.call("vkBindBufferMemory", |e| unsafe {
            vkstream::encode::vkBindBufferMemory(e, dev, b, m, offset)
        });
    }

    fn destroy_buffer(&mut self, dev: vk::Device, buffer: u64) {
        self.call("vkDestroyBuffer", |e| unsafe {
            vkstream::encode::vkDestroyBuffer(
                e,
                dev,
                vk::Buffer::from_raw(buffer),
                std::ptr::null(),
            )
        });
    }

    fn write_only(&self, path: &Path) {
        let w = TraceWriter::create(
            path,
            Header {
                kind: FileKind::Trace,
                writer: "replay_rebind test".into(),
                created_unix_ns: 0,
                device: None,
                application: "synthetic".into(),
            },
        )
        .unwrap();
        for r in &self.records {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
    }
}

/// Where the "capture GPU" put things: offsets of the two buffers in `MEM` and its size, and,
/// when set, an image at `.0` of a second allocation of `.1` bytes after a buffer-sized gap.
#[derive(Clone, Copy)]
struct Layout {
    src: u64,
    dst: u64,
    size: u64,
    image: Option<(u64, u64)>,
    /// Bind the destination buffer before the source.
    dst_first: bool,
}

/// The trace's instance, device, queue and an occlusion pool of `queries` queries.
fn preamble(t: &mut Trace, queries: u32) -> (vk::Instance, vk::Device, vk::Queue, vk::QueryPool) {
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let ci = vk::InstanceCreateInfo::default().application_info(&app);
    let mut inst = vk::Instance::from_raw(INSTANCE);
    t.call("vkCreateInstance", |e| unsafe {
        vkstream::encode::vkCreateInstance(e, &ci, std::ptr::null(), &mut inst)
    });
    let (mut count, mut pd) = (1u32, vk::PhysicalDevice::from_raw(PHYSICAL));
    t.call("vkEnumeratePhysicalDevices", |e| unsafe {
        vkstream::encode::vkEnumeratePhysicalDevices(e, inst, &mut count, &mut pd)
    });
    let prio = [1.0f32];
    let q = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let dci = vk::DeviceCreateInfo::default().queue_create_infos(&q);
    let mut dev = vk::Device::from_raw(DEVICE);
    t.call("vkCreateDevice", |e| unsafe {
        vkstream::encode::vkCreateDevice(e, pd, &dci, std::ptr::null(), &mut dev)
    });
    let mut queue = vk::Queue::from_raw(QUEUE);
    t.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev, 0, 0, &mut queue)
    });
    let pci = vk::QueryPoolCreateInfo::default()
        .query_type(vk::QueryType::OCCLUSION)
        .query_count(queries);
    let mut pool = vk::QueryPool::from_raw(POOL);
    let seq = t.call("vkCreateQueryPool", |e| unsafe {
        vkstream::encode::vkCreateQueryPool(e, dev, &pci, std::ptr::null(), &mut pool)
    });
    t.records.push(Record::QueryPool(record::QueryPoolInfo {
        seq,
        device: DEVICE,
        pool: POOL,
        query_type: vk::QueryType::OCCLUSION.as_raw(),
        query_count: queries,
        pipeline_statistics: 0,
        perf_queue_family: None,
        perf_counters: vec![],
    }));
    (inst, dev, queue, pool)
}

/// The trace described in the module documentation, on the layout given.
fn trace(l: Layout, mem_type: u32) -> Trace {
    let mut t = Trace::new();
    let (inst, dev, queue, pool) = preamble(&mut t, 2);
    for (h, size, usage) in [
        (SRC, 8, vk::BufferUsageFlags::TRANSFER_SRC),
        (DST, 16, vk::BufferUsageFlags::TRANSFER_DST),
    ] {
        let bci = vk::BufferCreateInfo::default().size(size).usage(usage);
        let mut b = vk::Buffer::from_raw(h);
        t.call("vkCreateBuffer", |e| unsafe {
            vkstream::encode::vkCreateBuffer(e, dev, &bci, std::ptr::null(), &mut b)
        });
    }
    let mut mem = vk::DeviceMemory::from_raw(MEM);
    let mai = vk::MemoryAllocateInfo::default()
        .allocation_size(l.size)
        .memory_type_index(mem_type);
    t.call("vkAllocateMemory", |e| unsafe {
        vkstream::encode::vkAllocateMemory(e, dev, &mai, std::ptr::null(), &mut mem)
    });
    let (src, dst) = (vk::Buffer::from_raw(SRC), vk::Buffer::from_raw(DST));
    let mut binds = [(src, l.src), (dst, l.dst)];
    if l.dst_first {
        binds.reverse();
    }
    for (b, offset) in binds {
        t.call("vkBindBufferMemory", |e| unsafe {
            vkstream::encode::vkBindBufferMemory(e, dev, b, mem, offset)
        });
    }
    if let Some((at, size)) = l.image {
        // An image the capture GPU packed tighter than lavapipe can, after a small buffer.
        let ici = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(vk::Format::R8G8B8A8_UNORM)
            .extent(vk::Extent3D {
                width: 4,
                height: 4,
                depth: 1,
            })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(vk::ImageUsageFlags::TRANSFER_DST);
        let mut img = vk::Image::from_raw(IMAGE);
        t.call("vkCreateImage", |e| unsafe {
            vkstream::encode::vkCreateImage(e, dev, &ici, std::ptr::null(), &mut img)
        });
        let mut reqs = vk::MemoryRequirements {
            size,
            alignment: 16,
            memory_type_bits: 1 << mem_type,
        };
        t.call("vkGetImageMemoryRequirements", |e| unsafe {
            vkstream::encode::vkGetImageMemoryRequirements(e, dev, img, &mut reqs)
        });
        let mut mem2 = vk::DeviceMemory::from_raw(MEM2);
        let mai = vk::MemoryAllocateInfo::default()
            .allocation_size(at + size)
            .memory_type_index(mem_type);
        t.call("vkAllocateMemory", |e| unsafe {
            vkstream::encode::vkAllocateMemory(e, dev, &mai, std::ptr::null(), &mut mem2)
        });
        let bci = vk::BufferCreateInfo::default()
            .size(at.min(64))
            .usage(vk::BufferUsageFlags::TRANSFER_SRC);
        let mut b = vk::Buffer::from_raw(0x6300);
        t.call("vkCreateBuffer", |e| unsafe {
            vkstream::encode::vkCreateBuffer(e, dev, &bci, std::ptr::null(), &mut b)
        });
        t.call("vkBindBufferMemory", |e| unsafe {
            vkstream::encode::vkBindBufferMemory(e, dev, b, mem2, 0)
        });
        t.call("vkBindImageMemory", |e| unsafe {
            vkstream::encode::vkBindImageMemory(e, dev, img, mem2, at)
        });
    }
    let mut ptr = std::ptr::null_mut();
    t.call("vkMapMemory", |e| unsafe {
        vkstream::encode::vkMapMemory(
            e,
            dev,
            mem,
            0,
            vk::WHOLE_SIZE,
            vk::MemoryMapFlags::empty(),
            &mut ptr,
        )
    });
    // The app cleared its mapping (one write over both buffers and the bytes between them, as a
    // page diff reports it), then wrote VALUE into the source buffer in two halves (the second
    // lands inside the buffer, not at its start).
    let v = VALUE.to_le_bytes();
    for (offset, data) in [
        (0, vec![0u8; l.size as usize]),
        (l.src, v[..4].to_vec()),
        (l.src + 4, v[4..].to_vec()),
    ] {
        t.records.push(Record::MemoryWrite(record::MemoryWrite {
            seq: t.seq,
            memory: MEM,
            offset,
            data: record::Payload::Inline(data),
        }));
    }
    let (cpool, cb) = command_buffer(&mut t, dev);
    let begin = vk::CommandBufferBeginInfo::default();
    t.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
    });
    t.call("vkCmdResetQueryPool", |e| unsafe {
        vkstream::encode::vkCmdResetQueryPool(e, cb, pool, 0, 2)
    });
    for query in 0..2 {
        t.call("vkCmdBeginQuery", |e| unsafe {
            vkstream::encode::vkCmdBeginQuery(e, cb, pool, query, vk::QueryControlFlags::empty())
        });
        t.call("vkCmdEndQuery", |e| unsafe {
            vkstream::encode::vkCmdEndQuery(e, cb, pool, query)
        });
    }
    let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT;
    let copy_seq = t.call("vkCmdCopyQueryPoolResults", |e| unsafe {
        vkstream::encode::vkCmdCopyQueryPoolResults(e, cb, pool, 0, 2, dst, 0, 8, flags)
    });
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)];
    t.call("vkCmdPipelineBarrier", |e| unsafe {
        vkstream::encode::vkCmdPipelineBarrier(
            e,
            cb,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            1,
            barrier.as_ptr(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        )
    });
    // The host's value over the second query's slot.
    let region = [vk::BufferCopy {
        src_offset: 0,
        dst_offset: 8,
        size: 8,
    }];
    t.call("vkCmdCopyBuffer", |e| unsafe {
        vkstream::encode::vkCmdCopyBuffer(e, cb, src, dst, 1, region.as_ptr())
    });
    t.call("vkEndCommandBuffer", |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    });
    let cbs = [cb];
    let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
    t.call("vkQueueSubmit", |e| unsafe {
        vkstream::encode::vkQueueSubmit(e, queue, 1, submit.as_ptr(), vk::Fence::null())
    });
    t.call("vkQueueWaitIdle", |e| unsafe {
        vkstream::encode::vkQueueWaitIdle(e, queue)
    });
    let mut data = 0u64.to_le_bytes().to_vec();
    data.extend(VALUE.to_le_bytes());
    t.records.push(Record::QueryCopy(record::QueryCopy {
        seq: copy_seq,
        command_buffer: cb.as_raw(),
        pool: POOL,
        first: 0,
        count: 2,
        dst_buffer: DST,
        dst_offset: 0,
        stride: 8,
        flags: flags.as_raw(),
        host_ns: 9,
        data,
    }));
    let mut buffers = vec![SRC, DST];
    let mut memories = vec![MEM];
    if l.image.is_some() {
        buffers.push(0x6300);
        memories.push(MEM2);
        t.call("vkDestroyImage", |e| unsafe {
            vkstream::encode::vkDestroyImage(e, dev, vk::Image::from_raw(IMAGE), std::ptr::null())
        });
    }
    teardown(&mut t, (inst, dev, cpool, pool), &buffers, &memories);
    t
}

/// A command pool (its buffers may be begun again) and one primary command buffer from it.
fn command_buffer(t: &mut Trace, dev: vk::Device) -> (vk::CommandPool, vk::CommandBuffer) {
    let cpci = vk::CommandPoolCreateInfo::default()
        .queue_family_index(0)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    let mut cpool = vk::CommandPool::from_raw(0x8000);
    t.call("vkCreateCommandPool", |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev, &cpci, std::ptr::null(), &mut cpool)
    });
    let cbai = vk::CommandBufferAllocateInfo::default()
        .command_pool(cpool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    let mut cb = vk::CommandBuffer::from_raw(0x9000);
    t.call("vkAllocateCommandBuffers", |e| unsafe {
        vkstream::encode::vkAllocateCommandBuffers(e, dev, &cbai, &mut cb)
    });
    (cpool, cb)
}

/// The frame's end, then everything destroyed, so validation has nothing to say about the trace
/// itself.
fn teardown(
    t: &mut Trace,
    (inst, dev, cpool, pool): (vk::Instance, vk::Device, vk::CommandPool, vk::QueryPool),
    buffers: &[u64],
    memories: &[u64],
) {
    t.records.push(Record::Frame(record::Frame {
        index: 0,
        last_seq: t.seq,
        host_ns: 1_000_000 * (t.seq + 1),
        boundary: record::FrameBoundary::DeviceWaitIdle,
    }));
    t.call("vkDestroyCommandPool", |e| unsafe {
        vkstream::encode::vkDestroyCommandPool(e, dev, cpool, std::ptr::null())
    });
    t.call("vkDestroyQueryPool", |e| unsafe {
        vkstream::encode::vkDestroyQueryPool(e, dev, pool, std::ptr::null())
    });
    for &b in buffers {
        t.destroy_buffer(dev, b);
    }
    for &m in memories {
        t.call("vkFreeMemory", |e| unsafe {
            vkstream::encode::vkFreeMemory(e, dev, vk::DeviceMemory::from_raw(m), std::ptr::null())
        });
    }
    t.call("vkDestroyDevice", |e| unsafe {
        vkstream::encode::vkDestroyDevice(e, dev, std::ptr::null())
    });
    t.call("vkDestroyInstance", |e| unsafe {
        vkstream::encode::vkDestroyInstance(e, inst, std::ptr::null())
    });
}

/// Lavapipe's requirements for the trace's source buffer and its 4x4 image, and a host-visible
/// coherent memory type; `None` (after a `SKIP:` line) without lavapipe.
fn lavapipe_requirements() -> Option<(vk::MemoryRequirements, vk::MemoryRequirements, u32)> {
    if !lavapipe() {
        return None;
    }
    let gpu = replayer::devices().ok()?.into_iter().next()?;
    let host =
        (vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT).as_raw();
    let ty = gpu
        .summary
        .memory_types
        .iter()
        .position(|t| t.property_flags & host == host)? as u32;
    // SAFETY: plain object creation on the first GPU (lavapipe in CI), destroyed below.
    unsafe {
        let (_entry, instance, device) = plain_device(c"replay_rebind");
        let b = device
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(8)
                    .usage(vk::BufferUsageFlags::TRANSFER_SRC),
                None,
            )
            .unwrap();
        let i = device
            .create_image(
                &vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(vk::Format::R8G8B8A8_UNORM)
                    .extent(vk::Extent3D {
                        width: 4,
                        height: 4,
                        depth: 1,
                    })
                    .mip_levels(1)
                    .array_layers(1)
                    .samples(vk::SampleCountFlags::TYPE_1)
                    .tiling(vk::ImageTiling::OPTIMAL)
                    .usage(vk::ImageUsageFlags::TRANSFER_DST),
                None,
            )
            .unwrap();
        let r = (
            device.get_buffer_memory_requirements(b),
            device.get_image_memory_requirements(i),
            ty,
        );
        device.destroy_image(i, None);
        device.destroy_buffer(b, None);
        device.destroy_device(None);
        instance.destroy_instance(None);
        Some(r)
    }
}

fn replay(path: &Path, memory: MemoryMode) -> Result<replayer::ReplaySummary, String> {
    let mut o = ReplayOptions::new(path);
    o.gpu = Some("llvmpipe".into());
    o.compare = true;
    o.validate = validation_layer();
    o.memory = memory;
    replayer::replay(&o).map_err(|e| e.to_string())
}

/// Both occlusion values of the query copy match: the query's 0 samples, and the host's VALUE
/// copied by the GPU from the source buffer, each read from where rebind put them.
fn assert_contents_right(s: &replayer::ReplaySummary) {
    let text = s.comparison.to_text();
    let occ = &s.comparison.by_type["OCCLUSION"];
    assert_eq!((occ.queries, occ.matches), (2, 2), "{text}");
    assert!(!s.comparison.failed(), "{text}");
    assert_eq!(s.validation_messages, 0, "{:?}", s.first_messages);
}

/// Offsets from a GPU aligning buffers to 4 bytes: lavapipe's larger alignment rejects them.
#[test]
fn misaligned_placements_replay_with_rebind_and_auto_picks_it() {
    let Some((buf, _, ty)) = lavapipe_requirements() else {
        return;
    };
    assert!(
        buf.alignment > 4,
        "lavapipe aligns buffers to {}",
        buf.alignment
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("misaligned.qtrace");
    let l = Layout {
        src: 4,
        dst: 12,
        size: 28,
        image: None,
        dst_first: false,
    };
    trace(l, ty).write(&path);

    let s = replay(&path, MemoryMode::Rebind).expect("rebind replays it");
    assert_eq!(s.memory, "rebind (2 own allocations, 0 shared)");
    assert_contents_right(&s);
    assert!(s.to_text(false).contains("memory: rebind (2 own"));

    let s = replay(&path, MemoryMode::Auto).expect("auto replays it");
    assert!(
        s.memory
            .starts_with("rebind (auto: buffer 0x6000 is bound at offset 4 of memory 0x7000")
            && s.memory.contains(&format!("alignment {}", buf.alignment)),
        "{}",
        s.memory
    );
    assert_contents_right(&s);

    let e = replay(&path, MemoryMode::Remap).expect_err("remap cannot place it");
    assert!(
        e.contains("vkBindBufferMemory")
            && e.contains(&format!(
                "the capture binds at offset 4, not a multiple of the replay device's alignment {}",
                buf.alignment
            )),
        "{e}"
    );
}

/// An image the capture GPU packed into fewer bytes than lavapipe needs, at the end of its
/// allocation: remap runs out of memory for it, rebind gives it its own.
#[test]
fn short_placements_replay_with_rebind_and_auto_picks_it() {
    let Some((buf, img, ty)) = lavapipe_requirements() else {
        return;
    };
    assert!(
        img.size > 16,
        "lavapipe needs {} bytes for a 4x4 image",
        img.size
    );
    let a = buf.alignment.max(img.alignment);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.qtrace");
    // Everything aligned for lavapipe; only the image's size differs.
    let l = Layout {
        src: 0,
        dst: a,
        size: 2 * a + 64,
        image: Some((a, 16)),
        dst_first: false,
    };
    trace(l, ty).write(&path);

    let s = replay(&path, MemoryMode::Rebind).expect("rebind replays it");
    assert_contents_right(&s);
    let s = replay(&path, MemoryMode::Auto).expect("auto replays it");
    assert!(
        s.memory.starts_with(&format!(
            "rebind (auto: image 0x6200 needs {} bytes at offset {a} of memory 0x7100, which has {}",
            img.size,
            a + 16
        )),
        "{}",
        s.memory
    );
    assert_contents_right(&s);
    let e = replay(&path, MemoryMode::Remap).expect_err("remap cannot place it");
    assert!(
        e.contains("vkBindImageMemory")
            && e.contains(&format!(
                "memory 0x7100 has {} bytes but the replay device needs {}",
                a + 16,
                a + img.size
            )),
        "{e}"
    );
}

/// A trace whose placements fit lavapipe: auto keeps remap, and rebind gives the same answers.
#[test]
fn fitting_placements_keep_remap_under_auto() {
    let Some((buf, _, ty)) = lavapipe_requirements() else {
        return;
    };
    let a = buf.alignment;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fits.qtrace");
    let l = Layout {
        src: 0,
        dst: a,
        size: 2 * a + 64,
        image: None,
        dst_first: false,
    };
    trace(l, ty).write(&path);
    let s = replay(&path, MemoryMode::Auto).expect("auto");
    assert_eq!(s.memory, "remap (auto)");
    assert_contents_right(&s);
    let s = replay(&path, MemoryMode::Rebind).expect("rebind");
    assert_eq!(s.memory, "rebind (2 own allocations, 0 shared)");
    assert_contents_right(&s);
}

/// The source buffer bound inside the destination's bytes, after it (as Zink binds a second
/// buffer over one resource): rebind binds it into the destination's allocation, and the replay
/// gives what remap gives; auto keeps remap since the placement fits.
#[test]
fn aliased_resource_inside_another_shares_its_allocation() {
    let Some((_, _, ty)) = lavapipe_requirements() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.qtrace");
    let l = Layout {
        src: 0,
        dst: 0,
        size: 256,
        image: None,
        dst_first: true,
    };
    trace(l, ty).write(&path);
    let remap = replay(&path, MemoryMode::Auto).expect("auto");
    assert_eq!(remap.memory, "remap (auto)");
    let rebind = replay(&path, MemoryMode::Rebind).expect("rebind shares the allocation");
    assert_eq!(rebind.memory, "rebind (1 own allocations, 1 shared)");
    assert_eq!(rebind.validation_messages, 0, "{:?}", rebind.first_messages);
    // The GPU copied the source (over the first query's slot, hence 0) into the second slot:
    // the captured VALUE is not what either replay wrote, identically.
    let (a, b) = (
        &remap.comparison.by_type["OCCLUSION"],
        &rebind.comparison.by_type["OCCLUSION"],
    );
    assert_eq!((a.matches, a.mismatches), (1, 1));
    assert_eq!((b.matches, b.mismatches), (a.matches, a.mismatches));
}

/// Overlapping buffers where neither lies inside the other's allocation: remap replays that as
/// the capture did (auto keeps it when the placement fits), rebind refuses it naming both
/// buffers, and a misaligned aliased trace is refused under auto with remap's reason too.
#[test]
fn aliased_resources_are_refused_by_rebind_naming_both() {
    let Some((buf, _, ty)) = lavapipe_requirements() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = buf.alignment;
    // Fits lavapipe: the destination (16 bytes) starts on the source's 8 (both at offset 0).
    let path = dir.path().join("aliased.qtrace");
    let l = Layout {
        src: 0,
        dst: 0,
        size: a + 64,
        image: None,
        dst_first: false,
    };
    trace(l, ty).write(&path);
    let s =
        replay(&path, MemoryMode::Auto).expect("auto keeps remap for an aliased trace that fits");
    assert_eq!(s.memory, "remap (auto)");
    let e = replay(&path, MemoryMode::Rebind).expect_err("rebind refuses aliasing");
    assert!(
        e.contains("--memory rebind: buffer 0x6100 (bytes 0..16) and buffer 0x6000 (bytes 0..8) are bound to overlapping ranges of memory 0x7000")
            && e.contains("replay with --memory remap"),
        "{e}"
    );
    // Misaligned and aliased: neither mode can replay it, and the error says why for both.
    let path = dir.path().join("aliased-misaligned.qtrace");
    let l = Layout {
        src: 4,
        dst: 8,
        size: 64,
        image: None,
        dst_first: false,
    };
    trace(l, ty).write(&path);
    let e = replay(&path, MemoryMode::Auto).expect_err("neither mode");
    assert!(
        e.contains("buffer 0x6100 (bytes 8..24) and buffer 0x6000 (bytes 4..12)")
            && e.contains("remap cannot replay this trace on this GPU either: buffer 0x6000 is bound at offset 4"),
        "{e}"
    );
}

/// quarry-demo captured on lavapipe replays with rebind forced: every resource in its own
/// allocation, and every deterministic query still matches (the same as remap).
#[test]
fn demo_capture_replays_with_rebind_forced() {
    let Some(trace) = capture_demo_on_lavapipe("replay_rebind", "3") else {
        return;
    };
    let s = replay(&trace, MemoryMode::Rebind).expect("rebind replay of the demo");
    let text = s.comparison.to_text();
    assert!(s.memory.starts_with("rebind ("), "{}", s.memory);
    assert!(!s.memory.contains("destroyed one"), "{}", s.memory);
    assert!(!s.comparison.failed(), "{text}");
    let matched = |name: &str| s.comparison.by_type.get(name).map_or(0, |t| t.matches);
    for ty in ["OCCLUSION", "PIPELINE_STATISTICS", "PRIMITIVES_GENERATED"] {
        assert!(matched(ty) > 0, "no {ty} query matched:\n{text}");
    }
    let remap = replay(&trace, MemoryMode::Auto).expect("auto replay of the demo");
    assert_eq!(remap.memory, "remap (auto)", "lavapipe to lavapipe fits");
    for (ty, t) in &remap.comparison.by_type {
        assert_eq!(
            s.comparison.by_type[ty].matches, t.matches,
            "{ty}: rebind and remap agree"
        );
    }
}

/// glmark2 on Zink (which sub-allocates buffers from slabs and binds several buffers over the
/// same bytes) captured on lavapipe replays with rebind forced, with no validation message
/// remap does not have (the trace's own leaks at exit).
#[test]
fn zink_glmark2_replays_with_rebind_forced() {
    if !have_all(&["glmark2"]) {
        return;
    }
    let Some(display) = display_or_skip() else {
        return;
    };
    let trace = scratch_dir("replay_rebind_zink").join("glmark2.qtrace");
    capture_glmark2(&display, &trace, &[]);
    let rebind = replay(&trace, MemoryMode::Rebind).expect("rebind replay of glmark2");
    let remap = replay(&trace, MemoryMode::Remap).expect("remap replay of glmark2");
    assert!(
        rebind.memory.starts_with("rebind (") && !rebind.memory.contains(", 0 shared"),
        "Zink binds buffers over one another's bytes: {}",
        rebind.memory
    );
    assert_eq!(rebind.calls, remap.calls);
    assert_eq!(
        rebind.validation_messages, remap.validation_messages,
        "{:?}",
        rebind.first_messages
    );
    assert!(
        !rebind.comparison.failed(),
        "{}",
        rebind.comparison.to_text()
    );
}

/// A trimmed capture of quarry-demo (frames 8-14): its state snapshot's memory contents reach the
/// resources through rebind, written through mappings and, with `QUARRY_REPLAY_UPLOAD=gpu`,
/// uploaded through the GPU into each resource's own allocation; the queries still match and the
/// `--json` summary names the mode.
#[test]
fn trimmed_demo_snapshot_uploads_reach_rebound_resources() {
    let Some(demo) = built_or_skip(QUARRY_DEMO) else {
        return;
    };
    if built_or_skip(CAPTURE_LAYER_LIBRARY).is_none() || !quarry_sees_lavapipe() {
        return;
    }
    let trace = scratch_dir("replay_rebind_trim").join("trim.qtrace");
    let out = run_quarry(&[
        "capture",
        "--frames",
        "8-14",
        "-o",
        trace.to_str().unwrap(),
        "--",
        demo.to_str().unwrap(),
        "--headless",
        "--frames",
        "20",
        "--gpu",
        "llvmpipe",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    for upload in ["map", "gpu"] {
        let out = quarry_command()
            .env("QUARRY_REPLAY_UPLOAD", upload)
            .args(["replay", trace.to_str().unwrap(), "--gpu", "llvmpipe"])
            .args(["--memory", "rebind", "--compare", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{upload}: {}", output_text(&out));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            j["memory"]
                .as_str()
                .is_some_and(|m| m.starts_with("rebind (")),
            "{j}"
        );
        assert_eq!(j["result"], "ok", "{j}");
        let occ = &j["comparison"]["by_type"]["OCCLUSION"];
        assert!(occ["matches"].as_u64() > Some(0), "{upload}: {j}");
    }
}

/// Buffers bound over bytes of a destroyed one, as Zink recycles slab ranges: buffer A (large,
/// at 0 of `MEM`) is filled by the GPU over `[0, 2a)`, gets an occlusion query copy with its
/// availability at `2a` and a host write of VALUE at `3a`; A is destroyed, then B (8 bytes at
/// `a`), C (16 at `2a`) and D (8 at `3a`) are bound over its bytes, and the GPU copies them
/// behind a query copy's first slot in DST. Both copies' read-backs (the first one's comes after
/// the rebinds, through A's recycled range) must give what the capture saw.
fn recycled_trace(a: u64, mem_type: u32) -> Trace {
    const A: u64 = 0x6a00;
    const B: u64 = 0x6b00;
    const C: u64 = 0x6c00;
    const D: u64 = 0x6d00;
    const FILL: u32 = 0xa5a5_a5a5;
    // Past glibc's mmap threshold, so no later allocation gets A's old bytes by chance.
    const BIG: u64 = 256 << 10;
    let mut t = Trace::new();
    let (inst, dev, queue, pool) = preamble(&mut t, 4);
    use vk::BufferUsageFlags as U;
    t.buffer(dev, A, BIG, U::TRANSFER_DST);
    t.buffer(dev, DST, 32, U::TRANSFER_DST);
    let mai = vk::MemoryAllocateInfo::default()
        .allocation_size(BIG + a.max(32))
        .memory_type_index(mem_type);
    let mut mem = vk::DeviceMemory::from_raw(MEM);
    t.call("vkAllocateMemory", |e| unsafe {
        vkstream::encode::vkAllocateMemory(e, dev, &mai, std::ptr::null(), &mut mem)
    });
    t.bind(dev, A, MEM, 0);
    t.bind(dev, DST, MEM, BIG);
    let mut ptr = std::ptr::null_mut();
    t.call("vkMapMemory", |e| unsafe {
        vkstream::encode::vkMapMemory(e, dev, mem, 0, vk::WHOLE_SIZE, Default::default(), &mut ptr)
    });
    t.records.push(Record::MemoryWrite(record::MemoryWrite {
        seq: t.seq,
        memory: MEM,
        offset: 3 * a,
        data: record::Payload::Inline(VALUE.to_le_bytes().to_vec()),
    }));
    let (cpool, cb) = command_buffer(&mut t, dev);
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)];
    let transfer = vk::PipelineStageFlags::TRANSFER;
    // One submission of `queries` empty occlusion queries, a copy of their results to `dst` at
    // `offset` and `then`, waited on; the copy's seq.
    let submit = |t: &mut Trace, queries, dst, offset, flags, then: &dyn Fn(&mut Trace)| {
        let begin = vk::CommandBufferBeginInfo::default();
        t.call("vkBeginCommandBuffer", |e| unsafe {
            vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
        });
        t.call("vkCmdResetQueryPool", |e| unsafe {
            vkstream::encode::vkCmdResetQueryPool(e, cb, pool, 0, queries)
        });
        for query in 0..queries {
            t.call("vkCmdBeginQuery", |e| unsafe {
                vkstream::encode::vkCmdBeginQuery(e, cb, pool, query, Default::default())
            });
            t.call("vkCmdEndQuery", |e| unsafe {
                vkstream::encode::vkCmdEndQuery(e, cb, pool, query)
            });
        }
        let dst = vk::Buffer::from_raw(dst);
        let seq = t.call("vkCmdCopyQueryPoolResults", |e| unsafe {
            vkstream::encode::vkCmdCopyQueryPoolResults(
                e, cb, pool, 0, queries, dst, offset, 8, flags,
            )
        });
        t.call("vkCmdPipelineBarrier", |e| unsafe {
            vkstream::encode::vkCmdPipelineBarrier(
                e,
                cb,
                transfer,
                transfer,
                Default::default(),
                1,
                barrier.as_ptr(),
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        });
        then(t);
        t.call("vkEndCommandBuffer", |e| unsafe {
            vkstream::encode::vkEndCommandBuffer(e, cb)
        });
        let cbs = [cb];
        let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
        t.call("vkQueueSubmit", |e| unsafe {
            vkstream::encode::vkQueueSubmit(e, queue, 1, submit.as_ptr(), vk::Fence::null())
        });
        t.call("vkQueueWaitIdle", |e| unsafe {
            vkstream::encode::vkQueueWaitIdle(e, queue)
        });
        seq
    };
    use vk::QueryResultFlags as F;
    let avail = F::TYPE_64 | F::WAIT | F::WITH_AVAILABILITY;
    let first = submit(&mut t, 1, A, 2 * a, avail, &|t| {
        t.call("vkCmdFillBuffer", |e| unsafe {
            vkstream::encode::vkCmdFillBuffer(e, cb, vk::Buffer::from_raw(A), 0, 2 * a, FILL)
        });
    });
    t.destroy_buffer(dev, A);
    for (h, size, offset) in [(B, 8, a), (C, 16, 2 * a), (D, 8, 3 * a)] {
        t.buffer(dev, h, size, U::TRANSFER_SRC);
        t.bind(dev, h, MEM, offset);
    }
    let plain = F::TYPE_64 | F::WAIT;
    let second = submit(&mut t, 4, DST, 0, plain, &|t| {
        // Behind the first query's slot: B's fill bytes, C's availability word, D's VALUE.
        for (src, from, to) in [(B, 0, 8), (C, 8, 16), (D, 0, 24)] {
            let region = [vk::BufferCopy {
                src_offset: from,
                dst_offset: to,
                size: 8,
            }];
            t.call("vkCmdCopyBuffer", |e| unsafe {
                vkstream::encode::vkCmdCopyBuffer(
                    e,
                    cb,
                    vk::Buffer::from_raw(src),
                    vk::Buffer::from_raw(DST),
                    1,
                    region.as_ptr(),
                )
            });
        }
    });
    let fill = u64::from(FILL) << 32 | u64::from(FILL);
    for (seq, dst, offset, count, flags, values) in [
        (first, A, 2 * a, 1, avail, vec![0, 1]),
        (second, DST, 0, 4, plain, vec![0, fill, 1, VALUE]),
    ] {
        t.records.push(Record::QueryCopy(record::QueryCopy {
            seq,
            command_buffer: cb.as_raw(),
            pool: POOL,
            first: 0,
            count,
            dst_buffer: dst,
            dst_offset: offset,
            stride: 8,
            flags: flags.as_raw(),
            host_ns: 9,
            data: values.iter().flat_map(|v: &u64| v.to_le_bytes()).collect(),
        }));
    }
    teardown(&mut t, (inst, dev, cpool, pool), &[B, C, D, DST], &[MEM]);
    t
}

/// Buffers bound over a destroyed buffer's bytes start with what the GPU and the host wrote
/// there through it, under rebind as under remap (Zink's recycled slab ranges: the
/// arb_query_buffer_object piglit trace mismatched under rebind without it), with no
/// validation message.
#[test]
fn buffers_bound_over_a_destroyed_ones_bytes_inherit_them() {
    let Some((buf, _, ty)) = lavapipe_requirements() else {
        return;
    };
    let a = buf.alignment.max(64);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recycled.qtrace");
    recycled_trace(a, ty).write(&path);
    for mode in [MemoryMode::Remap, MemoryMode::Rebind] {
        let s = replay(&path, mode).expect("replays");
        let text = s.comparison.to_text();
        let occ = &s.comparison.by_type["OCCLUSION"];
        assert_eq!((occ.queries, occ.matches), (5, 5), "{mode:?}: {text}");
        assert!(!s.comparison.failed(), "{mode:?}: {text}");
        assert_eq!(s.validation_messages, 0, "{mode:?}: {:?}", s.first_messages);
        assert!(s.warnings.is_empty(), "{mode:?}: {:?}", s.warnings);
        if mode == MemoryMode::Rebind {
            assert_eq!(
                s.memory,
                "rebind (5 own allocations, 0 shared, 3 given the bytes of destroyed ones)"
            );
        }
    }
}
