//! VK_ARM_performance_counters_by_region round trip: a render pass begin chaining
//! `VkRenderPassPerformanceCountersByRegionBeginInfoARM`, captured in this process through the layer
//! on lavapipe (which ignores the unknown struct), lands in the trace as a `RegionCounters` record
//! with the exact addresses and indices; `quarry info` counts it; a replay on a GPU without the
//! extension says so and replays the rest.

use ash::vk;
use format::record::Record;
use quarry_tests::*;

#[repr(C)]
struct RegionBeginInfo {
    s_type: i32,
    p_next: *const std::ffi::c_void,
    counter_address_count: u32,
    p_counter_addresses: *const u64,
    serialize_regions: u32,
    counter_index_count: u32,
    p_counter_indices: *const u32,
}

#[test]
fn region_counters_round_trip() {
    if !require(&[]) {
        return;
    }
    let layer = layer();
    let trace = scratch("region.qtrace");
    capture_in_process(&layer, &trace, None);

    let addresses = [0x1_0000u64, 0x2_0000];
    let indices = [0u32, 3];
    unsafe {
        // The entry keeps the loader loaded while the instance lives.
        let (_entry, instance, pd) = first_gpu(c"quarry-region-test", vk::API_VERSION_1_3);
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default().dynamic_rendering(true);
        let device = queue0_device(&instance, pd, Some(&mut f13));
        let queue = device.get_device_queue(0, 0);
        let (pool, cb) = begin_primary(&device);
        let region = RegionBeginInfo {
            s_type: 1_000_605_004,
            p_next: std::ptr::null(),
            counter_address_count: addresses.len() as u32,
            p_counter_addresses: addresses.as_ptr(),
            serialize_regions: 1,
            counter_index_count: indices.len() as u32,
            p_counter_indices: indices.as_ptr(),
        };
        let mut info = vk::RenderingInfo::default()
            .render_area(vk::Rect2D {
                offset: vk::Offset2D::default(),
                extent: vk::Extent2D {
                    width: 16,
                    height: 16,
                },
            })
            .layer_count(1);
        info.p_next = &region as *const RegionBeginInfo as *const std::ffi::c_void;
        device.cmd_begin_rendering(cb, &info);
        device.cmd_end_rendering(cb);
        device.end_command_buffer(cb).unwrap();
        let cbs = [cb];
        device
            .queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                vk::Fence::null(),
            )
            .unwrap();
        device.queue_wait_idle(queue).unwrap();
        device.destroy_command_pool(pool, None);
        device.destroy_device(None);
        instance.destroy_instance(None);
    }

    let t = read_trace(&trace);
    assert!(t.info.complete);
    let begin = vkstream::command_id("vkCmdBeginRendering").unwrap();
    let begin_seq = t
        .records
        .iter()
        .find_map(|r| match r {
            Record::Call(c) if c.cmd == begin => Some(c.seq),
            _ => None,
        })
        .expect("the begin call is recorded");
    let regions: Vec<_> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::RegionCounters(rc) => Some(rc.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(regions.len(), 1, "{regions:?}");
    assert_eq!(regions[0].seq, begin_seq);
    assert_eq!(regions[0].counter_addresses, addresses);
    assert!(regions[0].serialize_regions);
    assert_eq!(regions[0].counter_indices, indices);
    // Captured by hand, so no "unknown sType" note for it.
    assert!(!t
        .records
        .iter()
        .any(|r| matches!(r, Record::Note(n) if n.message.contains("1000605004"))));
    assert_eq!(t.info.record_counts.get("RegionCounters"), Some(&1));

    // Replay without the layer: lavapipe lacks the extension; the replay says so and goes on.
    std::env::remove_var("VK_LOADER_LAYERS_ENABLE");
    std::env::remove_var("QUARRY_CAPTURE_FILE");
    let mut o = replayer::ReplayOptions::new(&trace);
    o.gpu = Some("llvmpipe".into());
    let s = replayer::replay(&o).unwrap();
    assert!(
        s.warnings.iter().any(|w| w
            .contains("1 render pass begin(s) asked for per-region performance counters")
            && w.contains("the replay GPU lacks the extension")),
        "{:?}",
        s.warnings
    );
}
