//! The tracker's tests: fed encoded calls, checked for what it keeps and what its snapshot holds.

use super::*;

const DEV: u64 = 0x1000;

struct Feed {
    t: Tracker,
    seq: u64,
}

impl Feed {
    fn new() -> Self {
        Feed {
            t: Tracker::default(),
            seq: 0,
        }
    }

    fn call(&mut self, name: &str, encode: impl FnOnce(&mut vkstream::Encoder)) -> u64 {
        let mut e = vkstream::Encoder::new();
        encode(&mut e);
        self.seq += 1;
        // The layer's path: calls offered borrowed, as `track_call` does.
        self.t.offer_call(CallRef {
            seq: self.seq,
            thread: 1,
            cmd: vkstream::command_id(name).unwrap(),
            host_ns: self.seq * 10,
            result: 0,
            params: e.as_bytes(),
        });
        self.seq
    }
    fn kept(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.t.kept.keys().map(|k| k.0).collect();
        for o in self.t.objects.values() {
            v.extend(o.recording.entries.iter().map(|(k, _)| k.0));
        }
        v.sort_unstable();
        v
    }
}

fn dev() -> vk::Device {
    vk::Device::from_raw(DEV)
}

/// A set layout, a pipeline layout made from it, the set layout destroyed: the three seqs.
fn layout_then_destroyed(f: &mut Feed, set_layout: u64, pipeline_layout: u64) -> [u64; 3] {
    let ci = vk::DescriptorSetLayoutCreateInfo::default();
    let mut l = vk::DescriptorSetLayout::from_raw(set_layout);
    let layout = f.call("vkCreateDescriptorSetLayout", |e| unsafe {
        vkstream::encode::vkCreateDescriptorSetLayout(e, dev(), &ci, std::ptr::null(), &mut l)
    });
    let layouts = [l];
    let pci = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
    let mut pl = vk::PipelineLayout::from_raw(pipeline_layout);
    let made = f.call("vkCreatePipelineLayout", |e| unsafe {
        vkstream::encode::vkCreatePipelineLayout(e, dev(), &pci, std::ptr::null(), &mut pl)
    });
    let destroy = f.call("vkDestroyDescriptorSetLayout", |e| unsafe {
        vkstream::encode::vkDestroyDescriptorSetLayout(e, dev(), l, std::ptr::null())
    });
    [layout, made, destroy]
}

/// A buffer bound to memory the app frees afterwards (legal; the buffer is then unusable):
/// kept state naming a dead handle.
fn bind_to_freed_memory(f: &mut Feed, buffer: u64, memory: u64) {
    create_buffer(f, buffer);
    let ai = vk::MemoryAllocateInfo::default().allocation_size(4096);
    let mut m = vk::DeviceMemory::from_raw(memory);
    f.call("vkAllocateMemory", |e| unsafe {
        vkstream::encode::vkAllocateMemory(e, dev(), &ai, std::ptr::null(), &mut m)
    });
    f.call("vkBindBufferMemory", |e| unsafe {
        vkstream::encode::vkBindBufferMemory(e, dev(), vk::Buffer::from_raw(buffer), m, 0)
    });
    f.call("vkFreeMemory", |e| unsafe {
        vkstream::encode::vkFreeMemory(e, dev(), m, std::ptr::null())
    });
}

fn create_buffer(f: &mut Feed, h: u64) -> u64 {
    let ci = vk::BufferCreateInfo::default()
        .size(64)
        .usage(vk::BufferUsageFlags::UNIFORM_BUFFER);
    let mut b = vk::Buffer::from_raw(h);
    f.call("vkCreateBuffer", |e| unsafe {
        vkstream::encode::vkCreateBuffer(e, dev(), &ci, std::ptr::null(), &mut b)
    })
}

#[test]
fn destroying_a_null_handle_leaves_the_device_and_its_objects() {
    let mut f = Feed::new();
    let ci = vk::DeviceCreateInfo::default();
    let mut d = dev();
    let device = f.call("vkCreateDevice", |e| unsafe {
        vkstream::encode::vkCreateDevice(
            e,
            vk::PhysicalDevice::from_raw(0x10),
            &ci,
            std::ptr::null(),
            &mut d,
        )
    });
    let buf = create_buffer(&mut f, 0xB2);
    f.call("vkDestroyBuffer", |e| unsafe {
        vkstream::encode::vkDestroyBuffer(e, dev(), vk::Buffer::null(), std::ptr::null())
    });
    f.call("vkDestroySampler", |e| unsafe {
        vkstream::encode::vkDestroySampler(e, dev(), vk::Sampler::null(), std::ptr::null())
    });
    assert_eq!(f.kept(), vec![device, buf], "no-op destroys kill nothing");
    assert!(!f.t.dead.contains(&DEV));
    f.call("vkDestroyDevice", |e| unsafe {
        vkstream::encode::vkDestroyDevice(e, dev(), std::ptr::null())
    });
    assert!(
        f.kept().is_empty(),
        "the device's own destroy still takes it"
    );
}

#[test]
fn destroyed_objects_take_their_creation_and_state_with_them() {
    let mut f = Feed::new();
    let buf = create_buffer(&mut f, 0xB1);
    let ai = vk::MemoryAllocateInfo::default().allocation_size(4096);
    let mut m = vk::DeviceMemory::from_raw(0x31);
    let mem = f.call("vkAllocateMemory", |e| unsafe {
        vkstream::encode::vkAllocateMemory(e, dev(), &ai, std::ptr::null(), &mut m)
    });
    let bind = f.call("vkBindBufferMemory", |e| unsafe {
        vkstream::encode::vkBindBufferMemory(e, dev(), vk::Buffer::from_raw(0xB1), m, 0)
    });
    // Not state: dropped at once.
    f.call("vkDeviceWaitIdle", |e| unsafe {
        vkstream::encode::vkDeviceWaitIdle(e, dev())
    });
    assert_eq!(f.kept(), vec![buf, mem, bind]);
    f.call("vkDestroyBuffer", |e| unsafe {
        vkstream::encode::vkDestroyBuffer(e, dev(), vk::Buffer::from_raw(0xB1), std::ptr::null())
    });
    assert_eq!(f.kept(), vec![mem], "buffer creation and binding gone");
    // A mapping lives until the unmap.
    let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
    let map = f.call("vkMapMemory", |e| unsafe {
        vkstream::encode::vkMapMemory(e, dev(), m, 0, 4096, vk::MemoryMapFlags::empty(), &mut p)
    });
    assert_eq!(f.kept(), vec![mem, map]);
    f.call("vkUnmapMemory", |e| unsafe {
        vkstream::encode::vkUnmapMemory(e, dev(), m)
    });
    assert_eq!(f.kept(), vec![mem]);
    f.call("vkFreeMemory", |e| unsafe {
        vkstream::encode::vkFreeMemory(e, dev(), m, std::ptr::null())
    });
    assert!(f.kept().is_empty());
}

#[test]
fn definitions_outlive_their_destruction_for_what_was_made_from_them() {
    let mut f = Feed::new();
    let seqs = layout_then_destroyed(&mut f, 0x51, 0x52);
    assert_eq!(f.kept(), seqs.to_vec());
    // The snapshot keeps the pipeline layout: it names the set layout, which is created (and
    // destroyed) before it in the snapshot.
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    assert_eq!(snap.records.len(), 3);
    assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
}

#[test]
fn a_command_buffer_keeps_its_last_recording_and_dies_with_its_pool() {
    let mut f = Feed::new();
    let pci = vk::CommandPoolCreateInfo::default();
    let mut pool = vk::CommandPool::from_raw(0x61);
    let p = f.call("vkCreateCommandPool", |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev(), &pci, std::ptr::null(), &mut pool)
    });
    let ai = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .command_buffer_count(1);
    let mut cb = vk::CommandBuffer::from_raw(0x62);
    let a = f.call("vkAllocateCommandBuffers", |e| unsafe {
        vkstream::encode::vkAllocateCommandBuffers(e, dev(), &ai, &mut cb)
    });
    let bi = vk::CommandBufferBeginInfo::default();
    let record = |f: &mut Feed| -> Vec<u64> {
        vec![
            f.call("vkBeginCommandBuffer", |e| unsafe {
                vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
            }),
            f.call("vkCmdDraw", |e| unsafe {
                vkstream::encode::vkCmdDraw(e, cb, 3, 1, 0, 0)
            }),
            f.call("vkEndCommandBuffer", |e| unsafe {
                vkstream::encode::vkEndCommandBuffer(e, cb)
            }),
        ]
    };
    let first = record(&mut f);
    assert_eq!(f.kept(), [vec![p, a], first].concat());
    let second = record(&mut f);
    assert_eq!(
        f.kept(),
        [vec![p, a], second.clone()].concat(),
        "re-recording replaces"
    );
    f.call("vkResetCommandPool", |e| unsafe {
        vkstream::encode::vkResetCommandPool(e, dev(), pool, vk::CommandPoolResetFlags::empty())
    });
    assert_eq!(f.kept(), vec![p, a], "a pool reset empties its buffers");
    record(&mut f);
    f.call("vkDestroyCommandPool", |e| unsafe {
        vkstream::encode::vkDestroyCommandPool(e, dev(), pool, std::ptr::null())
    });
    assert!(f.kept().is_empty(), "{:?}", f.kept());
}

/// The snapshot gives a recording back as it was offered: calls with their parameters, and the
/// query records between them, in order; a freed command buffer's recording, reused for the
/// next one allocated, starts empty.
#[test]
fn recordings_come_back_whole_and_reused_ones_start_empty() {
    let mut f = Feed::new();
    let pci = vk::CommandPoolCreateInfo::default();
    let mut pool = vk::CommandPool::from_raw(0x91);
    f.call("vkCreateCommandPool", |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev(), &pci, std::ptr::null(), &mut pool)
    });
    let ai = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .command_buffer_count(1);
    let bi = vk::CommandBufferBeginInfo::default();
    let op = |cb: u64, seq: u64| {
        Record::QueryOp(record::QueryOp {
            seq,
            command_buffer: cb,
            pool: 0x99,
            kind: record::QueryOpKind::Begin {
                query: 3,
                flags: 1,
                index: 0,
            },
            host_ns: 5,
        })
    };
    let mut expect = Vec::new();
    for (n, raw) in [0x92u64, 0x93].into_iter().enumerate() {
        let mut cb = vk::CommandBuffer::from_raw(raw);
        f.call("vkAllocateCommandBuffers", |e| unsafe {
            vkstream::encode::vkAllocateCommandBuffers(e, dev(), &ai, &mut cb)
        });
        f.call("vkBeginCommandBuffer", |e| unsafe {
            vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
        });
        let draw = f.call("vkCmdDraw", |e| unsafe {
            vkstream::encode::vkCmdDraw(e, cb, 3 + n as u32, 1, 0, 0)
        });
        f.t.offer(op(raw, draw));
        f.call("vkCmdDraw", |e| unsafe {
            vkstream::encode::vkCmdDraw(e, cb, 7, 2, 0, 0)
        });
        if n == 0 {
            f.call("vkFreeCommandBuffers", |e| unsafe {
                vkstream::encode::vkFreeCommandBuffers(e, dev(), pool, 1, &cb)
            });
            assert_eq!(f.t.spare.len(), 1, "the freed recording is kept for reuse");
        } else {
            assert!(f.t.spare.is_empty(), "the next allocation took it");
            expect = vec![
                format!("vkBeginCommandBuffer {:?}", [raw.to_le_bytes()].concat()),
                format!("vkCmdDraw {} 4 1", draw),
                format!("QueryOp {raw:#x} {draw}"),
                format!("vkCmdDraw {} 7 2", draw + 1),
            ];
        }
    }
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    let cb_records: Vec<String> = snap
        .records
        .iter()
        .filter_map(|r| match r {
            SnapRecord::Kept(r) => Some(&**r),
            _ => None,
        })
        .filter_map(|r| match r {
            Record::Call(c) => match vkstream::COMMANDS[c.cmd as usize] {
                "vkBeginCommandBuffer" => {
                    Some(format!("vkBeginCommandBuffer {:?}", &c.params[..8]))
                }
                "vkCmdDraw" => match vkstream::decode_call(c.cmd, &c.params) {
                    Ok(Call::vkCmdDraw(p)) => {
                        assert_eq!(c.host_ns, c.seq * 10, "the call's own fields");
                        Some(format!(
                            "vkCmdDraw {} {} {}",
                            c.seq, p.vertex_count, p.instance_count
                        ))
                    }
                    other => panic!("{other:?}"),
                },
                _ => None,
            },
            Record::QueryOp(op) => Some(format!("QueryOp {:#x} {}", op.command_buffer, op.seq)),
            _ => None,
        })
        .collect();
    assert_eq!(cb_records, expect);
}

/// Objects destroyed every frame do not grow the dead set forever, and a dead handle that
/// kept state still names stays known, so the snapshot still leaves that state out.
#[test]
fn dead_handles_are_pruned_unless_kept_state_names_them() {
    let mut f = Feed::new();
    bind_to_freed_memory(&mut f, 0xB2, 0x999);
    let fci = vk::FenceCreateInfo::default();
    let fences = 3 * DEAD_PRUNE_MIN as u64;
    let mut most = 0;
    for i in 0..fences {
        // A new handle value each time, as a driver that never reuses them would give.
        let mut fence = vk::Fence::from_raw(0x10_0000 + i);
        f.call("vkCreateFence", |e| unsafe {
            vkstream::encode::vkCreateFence(e, dev(), &fci, std::ptr::null(), &mut fence)
        });
        f.call("vkDestroyFence", |e| unsafe {
            vkstream::encode::vkDestroyFence(e, dev(), fence, std::ptr::null())
        });
        most = most.max(f.t.dead.len());
    }
    assert!(
        most <= DEAD_PRUNE_MIN,
        "dead set grew to {most} for {fences} fences"
    );
    assert!(f.t.dead.contains(&0x999), "the bound memory is still named");
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    assert!(
        snap.gaps.iter().any(|g| g.contains("vkBindBufferMemory")),
        "{:?}",
        snap.gaps
    );
}

#[test]
fn snapshot_leaves_out_state_naming_dead_objects_and_restores_fences() {
    let mut f = Feed::new();
    let mut q = vk::Queue::from_raw(0x71);
    f.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
    });
    let fci = vk::FenceCreateInfo::default();
    let mut fence = vk::Fence::from_raw(0x72);
    f.call("vkCreateFence", |e| unsafe {
        vkstream::encode::vkCreateFence(e, dev(), &fci, std::ptr::null(), &mut fence)
    });
    bind_to_freed_memory(&mut f, 0xB2, 0x999);
    let snap = f.t.snapshot(
        Vec::new(),
        Vec::new(),
        &|d, h| {
            assert_eq!((d, h), (DEV, 0x72));
            Some(true)
        },
        &|_, _| None,
        &|_| None,
    );
    let names: Vec<&str> = snap
        .records
        .iter()
        .map(|r| match r {
            SnapRecord::Kept(r) => match &**r {
                Record::Call(c) => vkstream::COMMANDS[c.cmd as usize],
                _ => "record",
            },
            SnapRecord::Made { cmd, .. } => vkstream::COMMANDS[*cmd as usize],
            SnapRecord::Memory { .. } => "memory",
        })
        .collect();
    assert_eq!(
        names,
        [
            "vkGetDeviceQueue",
            "vkCreateFence",
            "vkCreateBuffer",
            // the fence was signaled by a submit before the trim point
            "vkQueueSubmit"
        ]
    );
    assert!(
        snap.gaps.iter().any(|g| g.contains("vkBindBufferMemory")),
        "{:?}",
        snap.gaps
    );
}

#[test]
fn repeated_gets_change_nothing_and_timelines_are_restored() {
    let mut f = Feed::new();
    let mut q = vk::Queue::from_raw(0x81);
    let get = f.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
    });
    let mut tci = vk::SemaphoreTypeCreateInfo::default()
        .semaphore_type(vk::SemaphoreType::TIMELINE)
        .initial_value(2);
    let sci = vk::SemaphoreCreateInfo::default().push_next(&mut tci);
    let mut sem = vk::Semaphore::from_raw(0x82);
    let create = f.call("vkCreateSemaphore", |e| unsafe {
        vkstream::encode::vkCreateSemaphore(e, dev(), &sci, std::ptr::null(), &mut sem)
    });
    f.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut q)
    });
    assert_eq!(f.kept(), vec![get, create], "the second get is not state");
    let snap = f.t.snapshot(
        Vec::new(),
        Vec::new(),
        &|_, _| None,
        &|d, h| {
            assert_eq!((d, h), (DEV, 0x82));
            Some(7)
        },
        &|_| None,
    );
    let made: Vec<&str> = snap
        .records
        .iter()
        .filter_map(|r| match r {
            SnapRecord::Made { cmd, .. } => Some(vkstream::COMMANDS[*cmd as usize]),
            _ => None,
        })
        .collect();
    assert_eq!(made, ["vkSignalSemaphore"]);
    // Still at its initial value: nothing to restore.
    let snap = f.t.snapshot(
        Vec::new(),
        Vec::new(),
        &|_, _| None,
        &|_, _| Some(2),
        &|_| None,
    );
    assert!(snap
        .records
        .iter()
        .all(|r| !matches!(r, SnapRecord::Made { .. })));
}

#[test]
fn a_reused_handle_value_keeps_the_destroyed_definition_it_shadows() {
    let mut f = Feed::new();
    let [layout, made, destroy] = layout_then_destroyed(&mut f, 0x91, 0x92);
    // The driver hands the freed value to a buffer.
    let buffer = create_buffer(&mut f, 0x91);
    assert_eq!(f.kept(), vec![layout, made, destroy, buffer]);
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
    assert_eq!(snap.records.len(), 4);
}

/// The reused value dies in its turn (lavapipe hands heap addresses out again, wgpu destroys its
/// shader modules right after making pipelines from them): the handle is dead now, but the
/// pipeline layout was made while the definition it names lived, so it stays whole.
#[test]
fn a_reused_handle_value_that_dies_does_not_take_the_earlier_definition_with_it() {
    let mut f = Feed::new();
    let [layout, made, destroy] = layout_then_destroyed(&mut f, 0x91, 0x92);
    create_buffer(&mut f, 0x91);
    f.call("vkDestroyBuffer", |e| unsafe {
        vkstream::encode::vkDestroyBuffer(e, dev(), vk::Buffer::from_raw(0x91), std::ptr::null())
    });
    assert_eq!(f.kept(), vec![layout, made, destroy]);
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    assert!(snap.gaps.is_empty(), "{:?}", snap.gaps);
    assert_eq!(snap.records.len(), 3);
}

/// A command pool `pool` and one command buffer `cb` allocated from it.
fn pool_with_a_buffer(f: &mut Feed, pool: u64, cb: u64) -> vk::CommandBuffer {
    let pci = vk::CommandPoolCreateInfo::default();
    let mut pool = vk::CommandPool::from_raw(pool);
    f.call("vkCreateCommandPool", |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev(), &pci, std::ptr::null(), &mut pool)
    });
    let ai = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .command_buffer_count(1);
    let mut cb = vk::CommandBuffer::from_raw(cb);
    f.call("vkAllocateCommandBuffers", |e| unsafe {
        vkstream::encode::vkAllocateCommandBuffers(e, dev(), &ai, &mut cb)
    });
    cb
}

/// A light command buffer (one-time, begun while tracking): open until submitted, then left out
/// of the snapshot, while its barrier still moves its image's layout. Begun again in full, it
/// is tracked as any other.
#[test]
fn light_recordings_count_open_until_submitted_and_stay_out_of_snapshots() {
    let mut f = Feed::new();
    let cb = pool_with_a_buffer(&mut f, 0xa1, 0xa2);
    let ici = vk::ImageCreateInfo::default().initial_layout(vk::ImageLayout::UNDEFINED);
    let mut image = vk::Image::from_raw(0xa3);
    f.call("vkCreateImage", |e| unsafe {
        vkstream::encode::vkCreateImage(e, dev(), &ici, std::ptr::null(), &mut image)
    });
    let bi =
        vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    f.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
    });
    f.t.mark_light(cb.as_raw());
    assert_eq!(f.t.open_light(), (1, 0), "begun light, not submitted");
    // The layer sends a light buffer's layout-moving commands only.
    let barrier = [vk::ImageMemoryBarrier::default()
        .image(image)
        .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)];
    f.call("vkCmdPipelineBarrier", |e| unsafe {
        vkstream::encode::vkCmdPipelineBarrier(
            e,
            cb,
            vk::PipelineStageFlags::TOP_OF_PIPE,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            1,
            barrier.as_ptr(),
        )
    });
    f.call("vkEndCommandBuffer", |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    });
    assert_eq!(f.t.open_light(), (0, 1), "ended, not submitted");
    let cbs = [cb];
    let si = [vk::SubmitInfo::default().command_buffers(&cbs)];
    f.call("vkQueueSubmit", |e| unsafe {
        vkstream::encode::vkQueueSubmit(
            e,
            vk::Queue::from_raw(0xa4),
            1,
            si.as_ptr(),
            vk::Fence::null(),
        )
    });
    assert_eq!(f.t.open_light(), (0, 0), "submitted");
    let names = |f: &Feed| -> Vec<&'static str> {
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        })
        .records
        .iter()
        .filter_map(|r| match r {
            SnapRecord::Kept(r) => match &**r {
                Record::Call(c) => Some(vkstream::COMMANDS[c.cmd as usize]),
                _ => None,
            },
            _ => None,
        })
        .collect()
    };
    let snap = names(&f);
    assert!(!snap.contains(&"vkBeginCommandBuffer"), "{snap:?}");
    assert!(!snap.contains(&"vkCmdPipelineBarrier"), "{snap:?}");
    match &f.t.objects[&image.as_raw()].info {
        Info::Image { layout, .. } => {
            assert_eq!(
                *layout,
                Some(vk::ImageLayout::TRANSFER_DST_OPTIMAL.as_raw())
            )
        }
        _ => panic!("an image"),
    }
    // Begun again without the mark: a full recording, in the snapshot.
    f.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
    });
    assert_eq!(f.t.open_light(), (0, 0));
    assert!(names(&f).contains(&"vkBeginCommandBuffer"));
    // Light and open at the snapshot: named in its gaps.
    f.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
    });
    f.t.mark_light(cb.as_raw());
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    assert!(
        snap.gaps
            .iter()
            .any(|g| g.contains("1 one-time command buffers")),
        "{:?}",
        snap.gaps
    );
}

/// A binary semaphore a submit signaled and nothing waited for yet is signaled again by the
/// snapshot (wgpu chains its submits through such semaphores); one a present waited for is not.
#[test]
fn snapshot_signals_the_binary_semaphores_left_signaled() {
    let mut f = Feed::new();
    let mut queue = vk::Queue::from_raw(0xb1);
    f.call("vkGetDeviceQueue", |e| unsafe {
        vkstream::encode::vkGetDeviceQueue(e, dev(), 0, 0, &mut queue)
    });
    let sci = vk::SemaphoreCreateInfo::default();
    let (mut relay, mut rendered) = (vk::Semaphore::from_raw(0xb2), vk::Semaphore::from_raw(0xb3));
    for s in [&mut relay, &mut rendered] {
        f.call("vkCreateSemaphore", |e| unsafe {
            vkstream::encode::vkCreateSemaphore(e, dev(), &sci, std::ptr::null(), s)
        });
    }
    let signals = [relay, rendered];
    let si = [vk::SubmitInfo::default().signal_semaphores(&signals)];
    f.call("vkQueueSubmit", |e| unsafe {
        vkstream::encode::vkQueueSubmit(e, queue, 1, si.as_ptr(), vk::Fence::null())
    });
    let waits = [rendered];
    let pi = vk::PresentInfoKHR::default().wait_semaphores(&waits);
    f.call("vkQueuePresentKHR", |e| unsafe {
        vkstream::encode::vkQueuePresentKHR(e, queue, &pi)
    });
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    let made: Vec<Vec<u8>> = snap
        .records
        .iter()
        .filter_map(|r| match r {
            SnapRecord::Made { cmd, params }
                if vkstream::COMMANDS[*cmd as usize] == "vkQueueSubmit" =>
            {
                Some(params.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(made.len(), 1, "one made-up submit");
    let Some(Call::vkQueueSubmit(p)) =
        decode(vkstream::command_id("vkQueueSubmit").unwrap(), &made[0])
    else {
        panic!("a submit");
    };
    let signaled: Vec<u64> = p
        .p_submits
        .iter()
        .flatten()
        .flat_map(|s| s.p_signal_semaphores.iter().flatten().copied())
        .collect();
    assert_eq!(signaled, [relay.as_raw()]);
}

/// Layouts moved inside a secondary command buffer (a barrier, then an event wait) reach the
/// image when the primary that executes it is submitted; recorded again with another layout, the
/// secondary's new effect counts at the primary's next submit (the primary's effects are not
/// cached).
#[test]
fn secondaries_and_event_waits_move_layouts_at_the_primarys_submit() {
    let mut f = Feed::new();
    let primary = pool_with_a_buffer(&mut f, 0xc1, 0xc2);
    let secondary = vk::CommandBuffer::from_raw(0xc3);
    let ai = vk::CommandBufferAllocateInfo::default()
        .command_pool(vk::CommandPool::from_raw(0xc1))
        .level(vk::CommandBufferLevel::SECONDARY)
        .command_buffer_count(1);
    let mut s = secondary;
    f.call("vkAllocateCommandBuffers", |e| unsafe {
        vkstream::encode::vkAllocateCommandBuffers(e, dev(), &ai, &mut s)
    });
    let ici = vk::ImageCreateInfo::default().initial_layout(vk::ImageLayout::UNDEFINED);
    let mut image = vk::Image::from_raw(0xc4);
    f.call("vkCreateImage", |e| unsafe {
        vkstream::encode::vkCreateImage(e, dev(), &ici, std::ptr::null(), &mut image)
    });
    let bi = vk::CommandBufferBeginInfo::default();
    let record_secondary = |f: &mut Feed, layout: vk::ImageLayout| {
        f.call("vkBeginCommandBuffer", |e| unsafe {
            vkstream::encode::vkBeginCommandBuffer(e, secondary, &bi)
        });
        let barrier = [vk::ImageMemoryBarrier2::default()
            .image(image)
            .new_layout(layout)];
        let deps = [vk::DependencyInfo::default().image_memory_barriers(&barrier)];
        let events = [vk::Event::from_raw(0xc5)];
        f.call("vkCmdWaitEvents2", |e| unsafe {
            vkstream::encode::vkCmdWaitEvents2(e, secondary, 1, events.as_ptr(), deps.as_ptr())
        });
        f.call("vkEndCommandBuffer", |e| unsafe {
            vkstream::encode::vkEndCommandBuffer(e, secondary)
        });
    };
    let layout_now = |f: &Feed| match &f.t.objects[&image.as_raw()].info {
        Info::Image { layout, .. } => *layout,
        _ => panic!("an image"),
    };
    record_secondary(&mut f, vk::ImageLayout::GENERAL);
    f.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, primary, &bi)
    });
    let secondaries = [secondary];
    f.call("vkCmdExecuteCommands", |e| unsafe {
        vkstream::encode::vkCmdExecuteCommands(e, primary, 1, secondaries.as_ptr())
    });
    f.call("vkEndCommandBuffer", |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, primary)
    });
    let submit = |f: &mut Feed| {
        let cbs = [primary];
        let si = [vk::SubmitInfo::default().command_buffers(&cbs)];
        f.call("vkQueueSubmit", |e| unsafe {
            vkstream::encode::vkQueueSubmit(
                e,
                vk::Queue::from_raw(0xc6),
                1,
                si.as_ptr(),
                vk::Fence::null(),
            )
        });
    };
    assert_eq!(layout_now(&f), None, "not submitted yet");
    submit(&mut f);
    assert_eq!(layout_now(&f), Some(vk::ImageLayout::GENERAL.as_raw()));
    record_secondary(&mut f, vk::ImageLayout::TRANSFER_SRC_OPTIMAL);
    submit(&mut f);
    assert_eq!(
        layout_now(&f),
        Some(vk::ImageLayout::TRANSFER_SRC_OPTIMAL.as_raw())
    );
}

mod descriptors;
mod state;
