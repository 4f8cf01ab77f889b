//! The layer loaded into this test process (through ash on lavapipe): many threads recording at once
//! lose nothing, and queries, host memory writes, query copies and fence frames are captured with the
//! exact bytes the app saw. One test per process: the loader reads the layer settings from the
//! environment once.

use ash::vk;
use format::record::{FrameBoundary, QueryOpKind, Record};
use quarry_tests::*;
use std::collections::HashMap;

const THREADS: usize = 8;
const PER_THREAD: usize = 2000;

struct Gpu {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    memory_types: vk::PhysicalDeviceMemoryProperties,
}

unsafe fn gpu() -> Gpu {
    let (entry, instance, pd) = first_gpu(c"quarry-capture-test", vk::API_VERSION_1_2);
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(true);
    let device = queue0_device(&instance, pd, Some(&mut f12));
    let queue = device.get_device_queue(0, 0);
    let memory_types = instance.get_physical_device_memory_properties(pd);
    Gpu {
        _entry: entry,
        instance,
        device,
        queue,
        memory_types,
    }
}

unsafe fn host_buffer(
    g: &Gpu,
    size: u64,
    usage: vk::BufferUsageFlags,
) -> (vk::Buffer, vk::DeviceMemory, *mut u8) {
    let buffer = g
        .device
        .create_buffer(
            &vk::BufferCreateInfo::default().size(size).usage(usage),
            None,
        )
        .unwrap();
    let req = g.device.get_buffer_memory_requirements(buffer);
    let want = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let ty = (0..g.memory_types.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && g.memory_types.memory_types[i as usize]
                    .property_flags
                    .contains(want)
        })
        .unwrap();
    let memory = g
        .device
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty),
            None,
        )
        .unwrap();
    g.device.bind_buffer_memory(buffer, memory, 0).unwrap();
    let ptr = g
        .device
        .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        .unwrap() as *mut u8;
    (buffer, memory, ptr)
}

/// Each thread records PER_THREAD vkCmdSetViewport calls into its own command buffer.
unsafe fn stress(g: &Gpu) {
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let device = g.device.clone();
            s.spawn(move || {
                let (pool, _) = record_viewports(&device, PER_THREAD);
                device.destroy_command_pool(pool, None);
            });
        }
    });
}

struct QueryRun {
    pool: vk::QueryPool,
    results: Vec<u8>,
    copied: Vec<u8>,
    pattern_memory: vk::DeviceMemory,
}

unsafe fn queries(g: &Gpu) -> QueryRun {
    let d = &g.device;
    let pool = d
        .create_query_pool(
            &vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(4),
            None,
        )
        .unwrap();
    let (dst, _dst_mem, dst_ptr) = host_buffer(g, 256, vk::BufferUsageFlags::TRANSFER_DST);
    let (_up, up_mem, up_ptr) = host_buffer(g, 3 * 4096, vk::BufferUsageFlags::TRANSFER_SRC);
    let (cpool, cb) = begin_primary(d);
    d.cmd_reset_query_pool(cb, pool, 0, 4);
    d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, pool, 0);
    d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, 1);
    d.cmd_copy_query_pool_results(
        cb,
        pool,
        0,
        2,
        dst,
        0,
        16,
        vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
    );
    d.end_command_buffer(cb).unwrap();

    // Host writes into the middle page only, right before the submit.
    for i in 0..4096 {
        *up_ptr.add(4096 + i) = (i % 251) as u8;
    }
    let fence = d
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .unwrap();
    let cbs = [cb];
    d.queue_submit(
        g.queue,
        &[vk::SubmitInfo::default().command_buffers(&cbs)],
        fence,
    )
    .unwrap();
    d.wait_for_fences(&[fence], true, u64::MAX).unwrap();

    let mut out = [[0u64; 2]; 2];
    d.get_query_pool_results(
        pool,
        0,
        &mut out,
        vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
    )
    .unwrap();
    let results = std::slice::from_raw_parts(out.as_ptr() as *const u8, 32).to_vec();
    let copied = std::slice::from_raw_parts(dst_ptr as *const u8, 24).to_vec();
    d.reset_query_pool(pool, 2, 2);
    d.destroy_fence(fence, None);
    d.destroy_command_pool(cpool, None);
    QueryRun {
        pool,
        results,
        copied,
        pattern_memory: up_mem,
    }
}

#[test]
fn threads_and_queries_in_process() {
    if !require(&[]) {
        return;
    }
    let layer = layer();
    let trace = scratch("inprocess.qtrace");
    capture_in_process(&layer, &trace, None);

    let (run, pool_raw) = unsafe {
        let g = gpu();
        stress(&g);
        let run = queries(&g);
        g.device.device_wait_idle().unwrap();
        use ash::vk::Handle;
        let pool_raw = run.pool.as_raw();
        g.device.destroy_device(None);
        g.instance.destroy_instance(None);
        (run, pool_raw)
    };

    let t = read_trace(&trace);
    assert!(t.info.complete, "finalized at vkDestroyInstance");
    t.check_structure();
    assert_eq!(t.info.header.application, "quarry-capture-test");

    // Threads: every call of every thread, each thread's calls under its own id.
    let vp = vkstream::command_id("vkCmdSetViewport").unwrap();
    let mut per_thread: HashMap<u32, usize> = HashMap::new();
    for r in &t.records {
        if let Record::Call(c) = r {
            if c.cmd == vp {
                *per_thread.entry(c.thread).or_default() += 1;
            }
        }
    }
    assert_eq!(
        per_thread.len(),
        THREADS,
        "one thread id per recording thread"
    );
    assert!(
        per_thread.values().all(|&n| n == PER_THREAD),
        "{per_thread:?}"
    );

    // Queries.
    let pool_rec = t
        .records
        .iter()
        .find_map(|r| {
            if let Record::QueryPool(p) = r {
                Some(p.clone())
            } else {
                None
            }
        })
        .expect("QueryPool record");
    assert_eq!(
        (pool_rec.pool, pool_rec.query_type, pool_rec.query_count),
        (pool_raw, vk::QueryType::TIMESTAMP.as_raw(), 4)
    );
    let ops: Vec<_> = t
        .records
        .iter()
        .filter_map(|r| {
            if let Record::QueryOp(o) = r {
                Some(o.clone())
            } else {
                None
            }
        })
        .collect();
    assert!(ops
        .iter()
        .any(|o| o.command_buffer != 0 && o.kind == QueryOpKind::Reset { first: 0, count: 4 }));
    assert!(
        ops.iter()
            .any(|o| o.command_buffer == 0 && o.kind == QueryOpKind::Reset { first: 2, count: 2 }),
        "host reset"
    );
    assert_eq!(
        ops.iter()
            .filter(|o| matches!(o.kind, QueryOpKind::Timestamp { sync2: false, .. }))
            .count(),
        2
    );
    assert!(ops.iter().any(|o| matches!(
        o.kind,
        QueryOpKind::Copy {
            first: 0,
            count: 2,
            stride: 16,
            ..
        }
    )));

    let results = t
        .records
        .iter()
        .find_map(|r| {
            if let Record::QueryResults(q) = r {
                Some(q.clone())
            } else {
                None
            }
        })
        .expect("QueryResults record");
    assert_eq!(
        results.data, run.results,
        "exactly the bytes the app received"
    );
    assert_eq!(
        (results.first, results.count, results.stride, results.result),
        (0, 2, 16, 0)
    );
    let avail: Vec<u32> = t
        .records
        .iter()
        .filter_map(|r| {
            if let Record::QueryAvailable(a) = r {
                Some(a.query)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(avail, vec![0, 1], "first availability of each query, once");

    let copy = t
        .records
        .iter()
        .find_map(|r| {
            if let Record::QueryCopy(c) = r {
                Some(c.clone())
            } else {
                None
            }
        })
        .expect("QueryCopy");
    assert_eq!(
        copy.data, run.copied,
        "read-back equals what the app finds in its buffer"
    );
    assert_eq!(copy.data.len(), 24);

    // Host memory: the written page reaches the trace before the submit that lets the GPU read it.
    use ash::vk::Handle;
    let submit_id = vkstream::command_id("vkQueueSubmit").unwrap();
    let submit_at = t
        .records
        .iter()
        .position(|r| matches!(r, Record::Call(c) if c.cmd == submit_id))
        .unwrap();
    let write_at = t
        .records
        .iter()
        .position(|r| matches!(r, Record::MemoryWrite(m) if m.memory == run.pattern_memory.as_raw() && m.offset == 4096))
        .expect("MemoryWrite of the changed page");
    assert!(write_at < submit_at);
    if let Record::MemoryWrite(m) = &t.records[write_at] {
        let bytes = t.reader.payload_bytes(&m.data).unwrap();
        assert_eq!(bytes.len(), 4096, "only the changed page");
        assert!(bytes.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }
    assert_eq!(t.count("Submit"), 1);
    let frames: Vec<_> = t
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Frame(f) = r {
                Some(f.boundary)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        frames,
        vec![FrameBoundary::FenceWait],
        "no swapchain: the fence wait after the submit ends frame 0"
    );
}
