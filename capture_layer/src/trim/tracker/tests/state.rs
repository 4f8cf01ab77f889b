//! Pipeline libraries and query pools in the snapshot.

use super::*;

fn pipeline(f: &mut Feed, h: u64, flags: vk::PipelineCreateFlags, libraries: &[u64]) -> u64 {
    let libs: Vec<vk::Pipeline> = libraries
        .iter()
        .map(|l| vk::Pipeline::from_raw(*l))
        .collect();
    let mut link = vk::PipelineLibraryCreateInfoKHR::default().libraries(&libs);
    let mut ci = vk::GraphicsPipelineCreateInfo::default().flags(flags);
    if !libs.is_empty() {
        ci = ci.push_next(&mut link);
    }
    let mut p = vk::Pipeline::from_raw(h);
    f.call("vkCreateGraphicsPipelines", |e| unsafe {
        vkstream::encode::vkCreateGraphicsPipelines(
            e,
            dev(),
            vk::PipelineCache::null(),
            1,
            &ci,
            std::ptr::null(),
            &mut p,
        )
    })
}

fn destroy_pipeline(f: &mut Feed, h: u64) -> u64 {
    f.call("vkDestroyPipeline", |e| unsafe {
        vkstream::encode::vkDestroyPipeline(e, dev(), vk::Pipeline::from_raw(h), std::ptr::null())
    })
}

/// VK_EXT_graphics_pipeline_library: apps destroy the libraries once the pipeline is linked.
/// The linked pipeline's creation names them, so they outlive their destruction as definitions
/// do; a pipeline that is no library dies with its destruction.
#[test]
fn pipeline_libraries_outlive_their_destruction_for_linked_pipelines() {
    let mut f = Feed::new();
    let lib = vk::PipelineCreateFlags::LIBRARY_KHR;
    let vertex = pipeline(&mut f, 0x91, lib, &[]);
    let fragment = pipeline(&mut f, 0x92, lib, &[]);
    let linked = pipeline(
        &mut f,
        0x93,
        vk::PipelineCreateFlags::empty(),
        &[0x91, 0x92],
    );
    let gone = [
        destroy_pipeline(&mut f, 0x91),
        destroy_pipeline(&mut f, 0x92),
    ];
    let plain = pipeline(&mut f, 0x94, vk::PipelineCreateFlags::empty(), &[]);
    destroy_pipeline(&mut f, 0x94);
    assert_eq!(
        f.kept(),
        vec![vertex, fragment, linked, gone[0], gone[1]],
        "a plain pipeline destroyed leaves nothing ({plain})"
    );
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
    assert_eq!(snap.records.len(), 5);
}

fn query_pool(f: &mut Feed, h: u64, ty: vk::QueryType, count: u32) {
    let ci = vk::QueryPoolCreateInfo::default()
        .query_type(ty)
        .query_count(count);
    let mut p = vk::QueryPool::from_raw(h);
    f.call("vkCreateQueryPool", |e| unsafe {
        vkstream::encode::vkCreateQueryPool(e, dev(), &ci, std::ptr::null(), &mut p)
    });
}

/// An app that resets its queries before the trim point and begins them after it: the snapshot
/// resets every query of the live pools (performance pools excepted), in its made-up command
/// buffer, even when no image layout needs restoring.
#[test]
fn snapshot_resets_the_queries_of_live_pools() {
    let mut f = Feed::new();
    let mut q = vk::Queue::from_raw(0x71);
    f.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
    });
    query_pool(&mut f, 0xA1, vk::QueryType::OCCLUSION, 8);
    query_pool(&mut f, 0xA2, vk::QueryType::TIMESTAMP, 4);
    query_pool(&mut f, 0xA3, vk::QueryType::PERFORMANCE_QUERY_KHR, 1);
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            Some(vec![(0x71, 0)])
        });
    let mut resets = Vec::new();
    let mut submitted = false;
    for r in &snap.records {
        if let SnapRecord::Made { cmd, params } = r {
            match vkstream::decode_call(*cmd, params).unwrap() {
                Call::vkCmdResetQueryPool(p) => {
                    resets.push((p.query_pool, p.first_query, p.query_count))
                }
                Call::vkQueueSubmit(p) => submitted |= p.queue == 0x71,
                _ => {}
            }
        }
    }
    assert_eq!(resets, [(0xA1, 0, 8), (0xA2, 0, 4)]);
    assert!(submitted, "the resets are submitted on the device's queue");
    assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
}

/// libplacebo records its timestamps into one-time command buffers: one submitted before the
/// trim point cannot run again, and its recording in the snapshot would make the replay think
/// its queries ran there (compared as unavailable). Left out; a reusable recording stays.
#[test]
fn submitted_one_time_recordings_leave_the_snapshot() {
    let mut f = Feed::new();
    let mut q = vk::Queue::from_raw(0x71);
    f.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
    });
    query_pool(&mut f, 0xA2, vk::QueryType::TIMESTAMP, 4);
    let once = pool_with_a_buffer(&mut f, 0xC0, 0xCB);
    let again = pool_with_a_buffer(&mut f, 0xC1, 0xCC);
    let record = |f: &mut Feed, cb: vk::CommandBuffer, flags| {
        let bi = vk::CommandBufferBeginInfo::default().flags(flags);
        let begin = f.call("vkBeginCommandBuffer", |e| unsafe {
            vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
        });
        f.call("vkCmdWriteTimestamp", |e| unsafe {
            vkstream::encode::vkCmdWriteTimestamp(
                e,
                cb,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                vk::QueryPool::from_raw(0xA2),
                0,
            )
        });
        f.call("vkEndCommandBuffer", |e| unsafe {
            vkstream::encode::vkEndCommandBuffer(e, cb)
        });
        let cbs = [cb];
        let submit = vk::SubmitInfo::default().command_buffers(&cbs);
        f.call("vkQueueSubmit", |e| unsafe {
            vkstream::encode::vkQueueSubmit(e, q, 1, &submit, vk::Fence::null())
        });
        begin
    };
    let one_time = record(&mut f, once, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    let reusable = record(&mut f, again, vk::CommandBufferUsageFlags::empty());
    let seqs: Vec<u64> =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        })
        .records
        .iter()
        .filter_map(|r| match r {
            SnapRecord::Kept(r) => match &**r {
                Record::Call(c) => Some(c.seq),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert!(!seqs.contains(&one_time), "{seqs:?}");
    assert!(
        (reusable..reusable + 3).all(|s| seqs.contains(&s)),
        "{seqs:?}"
    );
}
