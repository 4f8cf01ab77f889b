//! Host writes into mapped memory, with the layer loaded into this process (ash on lavapipe): writes
//! at page boundaries, into guarded (256 KiB and more) and compared mappings, from several threads
//! and through `read(2)` into a mapped pointer, with the app's own SIGSEGV handler installed. The
//! trace rebuilds every mapping byte for byte, records only pages the app wrote, and leaves out
//! what the GPU wrote into an optimal image in mapped memory (until the image is destroyed: then the
//! range is the host's again); the app sees no difference (its
//! system calls and signal handler work as without the layer). One test per process.

use ash::vk;
use ash::vk::Handle;
use format::record::Record;
use quarry_tests::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

const PAGE: usize = 4096;

static APP_FAULTS: AtomicUsize = AtomicUsize::new(0);
static APP_PAGE: AtomicUsize = AtomicUsize::new(0);

/// The app's own handler: its page is PROT_NONE until touched once.
extern "C" fn app_handler(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel's siginfo; mprotect is async-signal-safe.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let page = APP_PAGE.load(Ordering::Relaxed);
        if addr >= page && addr < page + PAGE {
            APP_FAULTS.fetch_add(1, Ordering::Relaxed);
            libc::mprotect(page as *mut _, PAGE, libc::PROT_READ | libc::PROT_WRITE);
        } else {
            libc::abort();
        }
    }
}

/// Touches the app's page after protecting it: its handler must run (returns the fault count).
unsafe fn app_fault() -> usize {
    let page = APP_PAGE.load(Ordering::Relaxed) as *mut u8;
    libc::mprotect(page as *mut _, PAGE, libc::PROT_NONE);
    std::ptr::write_volatile(page, 1);
    APP_FAULTS.load(Ordering::Relaxed)
}

struct Gpu {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    types: vk::PhysicalDeviceMemoryProperties,
}

unsafe fn host_memory(g: &Gpu, size: u64) -> (vk::DeviceMemory, *mut u8) {
    let want = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let ty = (0..g.types.memory_type_count)
        .find(|&i| {
            g.types.memory_types[i as usize]
                .property_flags
                .contains(want)
        })
        .unwrap();
    let memory = g
        .device
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(size)
                .memory_type_index(ty),
            None,
        )
        .unwrap();
    let ptr = g
        .device
        .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        .unwrap() as *mut u8;
    (memory, ptr)
}

unsafe fn submit(g: &Gpu, cbs: &[vk::CommandBuffer]) {
    let fence = g
        .device
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .unwrap();
    g.device
        .queue_submit(
            g.queue,
            &[vk::SubmitInfo::default().command_buffers(cbs)],
            fence,
        )
        .unwrap();
    g.device.wait_for_fences(&[fence], true, u64::MAX).unwrap();
    g.device.destroy_fence(fence, None);
}

/// Reads `len` bytes of a pattern through a pipe into `dst` (a mapped pointer): the app's system
/// call must see no difference.
unsafe fn read_into(dst: *mut u8, len: usize, seed: u8) {
    let mut fds = [0; 2];
    assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
    let writer = std::thread::spawn(move || {
        let mut at = 0;
        while at < data.len() {
            let n = libc::write(fds[1], data[at..].as_ptr() as *const _, data.len() - at);
            assert!(n > 0);
            at += n as usize;
        }
        libc::close(fds[1]);
    });
    let mut at = 0;
    while at < len {
        let n = libc::read(fds[0], dst.add(at) as *mut _, len - at);
        assert!(
            n > 0,
            "read(2) into mapped memory: {}",
            std::io::Error::last_os_error()
        );
        at += n as usize;
    }
    libc::close(fds[0]);
    writer.join().unwrap();
}

type Wrote = Vec<Vec<(u64, usize, usize)>>;

/// Writes `len` bytes from `v` on at `at` of a mapping and notes them in round `r`.
unsafe fn put(
    wrote: &mut Wrote,
    m: vk::DeviceMemory,
    p: *mut u8,
    at: usize,
    len: usize,
    v: u8,
    r: usize,
) {
    for i in 0..len {
        p.add(at + i).write_volatile(v.wrapping_add(i as u8));
    }
    wrote[r].push((m.as_raw(), at, at + len));
}

#[test]
fn host_writes_reach_the_trace_and_nothing_else_does() {
    if !require(&[]) {
        return;
    }
    let layer = layer();
    let trace = scratch("host-memory.qtrace");
    capture_in_process(&layer, &trace, None);

    // SAFETY: a test process of its own; the handler only touches its page.
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        APP_PAGE.store(page as usize, Ordering::Relaxed);
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = app_handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
        assert_eq!(app_fault(), 1);
    }

    // Mapping sizes: compared (16 KiB), guarded (256 KiB, 1 MiB, the image's 384 KiB).
    let sizes = [16 << 10, 256 << 10, 1 << 20];
    let mut expected: HashMap<u64, Vec<u8>> = HashMap::new();
    // (memory, first byte, one past the last) the app wrote after mapping, per round.
    let mut wrote: Wrote = vec![Vec::new(), Vec::new(), Vec::new()];
    let (image_memory, image_range, reused) = unsafe {
        let (entry, instance, pd) = first_gpu(c"quarry-host-memory-test", vk::API_VERSION_1_2);
        let device = queue0_device(
            &instance,
            pd,
            None::<&mut vk::PhysicalDeviceVulkan12Features>,
        );
        let g = Gpu {
            queue: device.get_device_queue(0, 0),
            types: instance.get_physical_device_memory_properties(pd),
            _entry: entry,
            instance,
            device,
        };
        let maps: Vec<(vk::DeviceMemory, *mut u8, usize)> = sizes
            .iter()
            .map(|&s| {
                let (m, p) = host_memory(&g, s as u64);
                (m, p, s)
            })
            .collect();

        // An optimal image in mapped memory, cleared by the GPU and read by the host.
        let image = g
            .device
            .create_image(
                &vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(vk::Format::R8G8B8A8_UNORM)
                    .extent(vk::Extent3D {
                        width: 256,
                        height: 256,
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
        let req = g.device.get_image_memory_requirements(image);
        let image_offset = (64u64 << 10).next_multiple_of(req.alignment);
        let image_size = (image_offset + req.size).next_multiple_of(PAGE as u64) + (64 << 10);
        let (img_mem, img_ptr) = host_memory(&g, image_size);
        g.device
            .bind_image_memory(image, img_mem, image_offset)
            .unwrap();
        let (pool, cb) = begin_primary(&g.device);
        let range = vk::ImageSubresourceRange::default()
            .aspect_mask(vk::ImageAspectFlags::COLOR)
            .level_count(1)
            .layer_count(1);
        g.device.cmd_pipeline_barrier(
            cb,
            vk::PipelineStageFlags::TOP_OF_PIPE,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            &[],
            &[],
            &[vk::ImageMemoryBarrier::default()
                .image(image)
                .subresource_range(range)
                .old_layout(vk::ImageLayout::UNDEFINED)
                .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
                .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)],
        );
        g.device.cmd_clear_color_image(
            cb,
            image,
            vk::ImageLayout::TRANSFER_DST_OPTIMAL,
            &vk::ClearColorValue {
                float32: [0.25, 0.5, 0.75, 1.0],
            },
            &[range],
        );
        g.device.end_command_buffer(cb).unwrap();

        // Round 0: boundaries, threads, read(2); the image cleared meanwhile.
        let (m0, p0, s0) = maps[0];
        let (m1, p1, s1) = maps[1];
        let (m2, p2, s2) = maps[2];
        put(&mut wrote, m0, p0, PAGE - 2, 4, 11, 0); // across a page boundary of the compared mapping
        put(&mut wrote, m1, p1, 0, 1, 12, 0); // first byte
        put(&mut wrote, m1, p1, 5 * PAGE - 1, 2, 13, 0); // across a boundary of the guarded one
        put(&mut wrote, m1, p1, s1 - 1, 1, 14, 0); // last byte
        read_into(p1.add(20 * PAGE - 7), 2 * PAGE + 14, 3); // a system call across three pages
        wrote[0].push((m1.as_raw(), 20 * PAGE - 7, 22 * PAGE + 7));
        // Four threads, each its own pages of the 1 MiB mapping.
        let base = p2 as usize;
        std::thread::scope(|s| {
            for t in 0..4usize {
                s.spawn(move || {
                    for k in 0..8 {
                        let at = (t * 64 + k * 7) * PAGE + t * 100;
                        for i in 0..300 {
                            ((base + at + i) as *mut u8).write_volatile((t * 31 + k + i) as u8);
                        }
                    }
                });
            }
        });
        for t in 0..4usize {
            for k in 0..8 {
                let at = (t * 64 + k * 7) * PAGE + t * 100;
                wrote[0].push((m2.as_raw(), at, at + 300));
            }
        }
        put(&mut wrote, img_mem, img_ptr, 10, 3, 15, 0); // the image's memory, outside the image
        submit(&g, &[cb]);
        // The host reads what the GPU wrote (a read-back): no write.
        let texel = std::slice::from_raw_parts(img_ptr.add(image_offset as usize), 64);
        assert!(
            texel.iter().any(|&b| b != 0),
            "the clear reached the memory"
        );

        // Round 1: the same pages again, a flush and an unmap.
        put(&mut wrote, m0, p0, s0 - 3, 3, 21, 1);
        put(&mut wrote, m1, p1, 5 * PAGE, 1, 22, 1);
        read_into(p2.add(s2 - 5000), 5000, 9);
        wrote[1].push((m2.as_raw(), s2 - 5000, s2));
        put(
            &mut wrote,
            img_mem,
            img_ptr,
            image_size as usize - 1,
            1,
            23,
            1,
        );
        g.device
            .flush_mapped_memory_ranges(&[vk::MappedMemoryRange::default()
                .memory(m0)
                .size(vk::WHOLE_SIZE)])
            .unwrap();
        for &(m, p, s) in &maps {
            expected.insert(m.as_raw(), std::slice::from_raw_parts(p, s).to_vec());
        }
        expected.insert(
            img_mem.as_raw(),
            std::slice::from_raw_parts(img_ptr, image_size as usize).to_vec(),
        );
        g.device.unmap_memory(m2);
        submit(&g, &[]);
        assert_eq!(app_fault(), 2, "the app's own SIGSEGV handler still runs");

        // Round 2: the image destroyed, its range is the host's again.
        g.device.destroy_image(image, None);
        let reused = image_offset as usize + 2 * PAGE + 5;
        put(&mut wrote, img_mem, img_ptr, reused, 2, 31, 2);
        expected.insert(
            img_mem.as_raw(),
            std::slice::from_raw_parts(img_ptr, image_size as usize).to_vec(),
        );
        submit(&g, &[]);

        g.device.destroy_command_pool(pool, None);
        for (m, ..) in maps {
            g.device.free_memory(m, None);
        }
        g.device.free_memory(img_mem, None);
        g.device.destroy_device(None);
        g.instance.destroy_instance(None);
        (
            img_mem.as_raw(),
            image_offset as usize..(image_offset + req.size) as usize,
            reused,
        )
    };

    let t = read_trace(&trace);
    assert!(t.info.complete);
    t.check_structure();
    let submit_id = vkstream::command_id("vkQueueSubmit").unwrap();
    let map_id = vkstream::command_id("vkMapMemory").unwrap();
    // Replays the writes: each mapping's bytes, and which writes came after its map, per round.
    let mut rebuilt: HashMap<u64, Vec<u8>> = expected
        .iter()
        .map(|(&m, v)| (m, vec![0xEE; v.len()]))
        .collect();
    let mut round = 0usize;
    let mut mapped = 0;
    let mut reused_seen = false;
    for r in &t.records {
        match r {
            Record::Call(c) if c.cmd == submit_id => round += 1,
            Record::Call(c) if c.cmd == map_id => mapped += 1,
            Record::MemoryWrite(m) => {
                let bytes = t.reader.payload_bytes(&m.data).unwrap();
                let Some(mem) = rebuilt.get_mut(&m.memory) else {
                    continue;
                };
                let at = m.offset as usize;
                mem[at..at + bytes.len()].copy_from_slice(&bytes);
                let initial = at == 0 && bytes.len() == mem.len() && round == 0;
                if initial {
                    continue;
                }
                assert!(round < 3, "a write after the last submit: {m:?}");
                // Every recorded page holds a byte the app wrote in this round.
                for page in (at / PAGE)..(at + bytes.len()).div_ceil(PAGE) {
                    let (a, b) = (page * PAGE, (page + 1) * PAGE);
                    assert!(
                        wrote[round]
                            .iter()
                            .any(|&(wm, wa, wb)| wm == m.memory && wa < b && wb > a),
                        "round {round}: memory {:#x} page {page} recorded, not written by the app",
                        m.memory
                    );
                }
                if m.memory == image_memory && round == 2 {
                    reused_seen |= at <= reused && reused < at + bytes.len();
                } else if m.memory == image_memory {
                    assert!(
                        at + bytes.len() <= image_range.start || at >= image_range.end,
                        "the GPU's clear recorded as a host write: [{at}, +{})",
                        bytes.len()
                    );
                }
            }
            _ => {}
        }
    }
    assert_eq!(mapped, 4);
    assert!(
        reused_seen,
        "a host write where a destroyed image was is recorded"
    );
    for (m, want) in &expected {
        let got = &rebuilt[m];
        // The image's texels are the GPU's: not in the trace.
        let bad = (0..want.len())
            .find(|&i| got[i] != want[i] && !(*m == image_memory && image_range.contains(&i)));
        assert_eq!(bad, None, "memory {m:#x} differs from the app's bytes");
    }
    if let Some(out) = quarry_tests::hostile::replay_trace(&trace, &[]) {
        assert!(out.status.success(), "replay: {}", output_text(&out));
    }
}
