//! Trimmed capture with the layer in this process: eight threads record command buffers at once
//! before the trim point; the snapshot must hold every recording whole and in each thread's order,
//! and the frame after it must replay them. One test per process (the loader reads the environment
//! once).

use ash::vk;
use ash::vk::Handle;
use format::record::Record;
use quarry_tests::*;
use std::collections::HashMap;

const THREADS: usize = 8;
const PER_THREAD: usize = 1500;

#[test]
fn recordings_made_on_many_threads_before_the_trim_point_are_whole_in_the_snapshot() {
    if !require(&[]) {
        return;
    }
    let layer = layer();
    let trace = scratch("trim-threads.qtrace");
    capture_in_process(&layer, &trace, Some("1-1"));

    let cbs: Vec<u64> = unsafe {
        let (_entry, instance, device) = plain_device(c"quarry-trim-threads");
        let queue = device.get_device_queue(0, 0);
        // Frame 0: every thread records its own command buffer at once.
        let made: Vec<(vk::CommandPool, vk::CommandBuffer)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    let device = device.clone();
                    s.spawn(move || record_viewports(&device, PER_THREAD))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let all: Vec<vk::CommandBuffer> = made.iter().map(|m| m.1).collect();
        let submit = |cbs: &[vk::CommandBuffer]| {
            device
                .queue_submit(
                    queue,
                    &[vk::SubmitInfo::default().command_buffers(cbs)],
                    vk::Fence::null(),
                )
                .unwrap();
            device.queue_wait_idle(queue).unwrap();
        };
        submit(&all[..1]); // frame 0 ends here; the snapshot is taken
        submit(&all); // frame 1: runs the recordings made before it
        for (pool, _) in &made {
            device.destroy_command_pool(*pool, None);
        }
        device.destroy_device(None);
        instance.destroy_instance(None);
        all.iter().map(|c| c.as_raw()).collect()
    };

    let t = read_trace(&trace);
    assert!(t.info.complete);
    t.check_structure();
    let (mut begin, mut end) = (None, None);
    for (i, r) in t.records.iter().enumerate() {
        match r {
            Record::StateBegin(_) => begin = Some(i),
            Record::StateEnd(e) => {
                end = Some(i);
                assert!(e.gaps.is_empty(), "{:?}", e.gaps);
            }
            _ => {}
        }
    }
    let (begin, end) = (begin.expect("StateBegin"), end.expect("StateEnd"));
    // Per command buffer: the viewports' x in snapshot order.
    let vp = vkstream::command_id("vkCmdSetViewport").unwrap();
    let mut xs: HashMap<u64, Vec<f32>> = HashMap::new();
    for r in &t.records[begin..end] {
        if let Record::Call(c) = r {
            if c.cmd == vp {
                let Ok(vkstream::Call::vkCmdSetViewport(p)) = vkstream::decode_call(vp, &c.params)
                else {
                    panic!("undecodable vkCmdSetViewport");
                };
                let x = p.p_viewports.as_ref().unwrap()[0].x;
                xs.entry(p.command_buffer).or_default().push(x);
            }
        }
    }
    assert_eq!(xs.len(), THREADS, "one recording per thread");
    for cb in &cbs {
        let v = &xs[cb];
        assert_eq!(v.len(), PER_THREAD, "recording of {cb:#x} whole");
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "recording of {cb:#x} in its thread's order"
        );
    }
    // Frame 1 submits all of them; nothing of frame 0 but the snapshot is in the trace.
    assert_eq!(t.calls_of("vkCmdSetViewport"), THREADS * PER_THREAD);
    let frames: Vec<u64> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Frame(f) => Some(f.index),
            _ => None,
        })
        .collect();
    assert_eq!(frames, [1]);
}
