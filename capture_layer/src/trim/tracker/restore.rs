//! What the tracker's snapshot holds: its kept records in original order, the memory contents the
//! snapshot writer read, and the calls it makes up to restore fence states, timeline values and
//! image layouts. Still bookkeeping: what only the driver knows comes in as arguments.

use super::*;

/// The snapshot, ready to write: records in order, then what it could not restore.
pub struct Snapshot {
    pub records: Vec<SnapRecord>,
    pub objects: u64,
    pub gaps: Vec<String>,
}

/// A snapshot entry: a kept record (with its seq), memory contents, or a made-up call the writer
/// numbers.
pub enum SnapRecord {
    Kept(Box<Record>),
    Memory {
        memory: u64,
        offset: u64,
        bytes: Vec<u8>,
    },
    Made {
        cmd: u32,
        params: Vec<u8>,
    },
}

fn made(name: &str, encode: impl FnOnce(&mut vkstream::Encoder)) -> Option<SnapRecord> {
    let cmd = vkstream::command_id(name)?;
    let mut e = vkstream::Encoder::new();
    encode(&mut e);
    Some(SnapRecord::Made {
        cmd,
        params: e.into_bytes(),
    })
}

impl Tracker {
    /// Builds the snapshot. `memory` holds the contents of host-visible allocations, read by the
    /// caller; `fence_signaled` answers the current status of a live fence, `timeline_value` a
    /// timeline semaphore's value, `graphics_queues` a live device's graphics queues.
    pub fn snapshot(
        &self,
        memory: Vec<(u64, u64, Vec<u8>)>,
        mut gaps: Vec<String>,
        fence_signaled: &dyn Fn(u64, u64) -> Option<bool>,
        timeline_value: &dyn Fn(u64, u64) -> Option<u64>,
        graphics_queues: &dyn Fn(u64) -> Option<Vec<(u64, u32)>>,
    ) -> Snapshot {
        let mut records = Vec::new();
        let mut dropped = 0u64;
        let mut partial = 0usize;
        let mut first_dropped = None;
        // Kept records and command-buffer recordings, in original order.
        let mut all: Vec<(&(u64, u32), Entry)> = self
            .kept
            .iter()
            .map(|(k, v)| (k, Entry::Kept(&v.rec)))
            .collect();
        let (recording, ended) = self.open_light();
        let open_light = recording + ended;
        if open_light > 0 {
            gaps.push(format!(
                "{open_light} one-time command buffers were begun before the snapshot and not \
                 submitted (their commands were not tracked): should the app submit one, the \
                 replay stops there with an error"
            ));
        }
        // Light recordings (`runtime::light`) hold only some of their commands, and one-time
        // recordings already submitted cannot run again: left out.
        for o in self
            .objects
            .values()
            .filter(|o| !(o.recording.light || o.recording.one_time && o.recording.submitted))
        {
            let owner = &o.recording;
            all.extend(
                owner
                    .entries
                    .iter()
                    .map(move |(k, r)| (k, Entry::Recorded(owner, r))),
            );
        }
        all.sort_unstable_by_key(|(k, _)| **k);
        // Dead handles that a kept creation earlier in the walk made and no kept destruction has
        // ended yet: a destroyed definition whose value the driver handed out again, to an object
        // that died since, is dead by value but lives at this point of the replay.
        let mut made_here: std::collections::HashSet<u64> = Default::default();
        // Live objects whose creation the walk has passed.
        let mut live_here: std::collections::HashSet<u64> = Default::default();
        for (key, rec) in all {
            if let Some(c) = rec.as_call() {
                // A state call that names an object destroyed before the trim point (a descriptor
                // naming a deleted view, a recording that used a deleted staging buffer) cannot
                // replay; it is left out. So is one that names an earlier object whose handle
                // value a live object created after the call took (ffmpeg frees a download
                // buffer after the copy into it and makes the next one at the same address).
                if let Some(call) = decode(c.cmd, c.params) {
                    let hs = self.named_handles(&call);
                    for &(_, h, created) in &hs {
                        if created && self.dead.contains(&h) {
                            made_here.insert(h);
                        }
                        if created {
                            live_here.insert(h);
                        }
                    }
                    let unusable = |h: &u64| {
                        (self.dead.contains(h) && !made_here.contains(h))
                            || (!live_here.contains(h)
                                && self.objects.get(h).is_some_and(|o| o.creator > *key))
                    };
                    let dead = hs
                        .iter()
                        .copied()
                        .find(|(_, h, created)| !created && unusable(h));
                    // An update of several descriptors keeps those that name live objects.
                    let part = dead.and_then(|_| descriptors::update_without(&call, &unusable));
                    if class_of(c.cmd) == Class::Destroy {
                        if let Some((_, h, _)) = hs.last() {
                            made_here.remove(h);
                        }
                    }
                    if let Some((params, left)) = part {
                        partial += left;
                        records.push(SnapRecord::Kept(Box::new(Record::Call(record::Call {
                            params,
                            ..c.to_owned()
                        }))));
                        continue;
                    }
                    if let Some((ty, h, _)) = dead {
                        dropped += 1;
                        first_dropped.get_or_insert_with(|| {
                            format!(
                                "{} (seq {}) names {ty:?} {h:#x}",
                                vkstream::COMMANDS
                                    .get(c.cmd as usize)
                                    .copied()
                                    .unwrap_or("?"),
                                c.seq
                            )
                        });
                        continue;
                    }
                }
            }
            records.push(SnapRecord::Kept(Box::new(rec.to_record())));
        }
        if partial > 0 {
            gaps.push(format!(
                "{partial} descriptor writes or copies name objects destroyed before the trim point \
                 and were left out of their updates"
            ));
        }
        if dropped > 0 {
            gaps.push(format!(
                "{dropped} recorded calls name objects destroyed before the trim point and were left out \
                 (first: {})",
                first_dropped.unwrap_or_default()
            ));
        }
        for (memory, offset, bytes) in memory {
            records.push(SnapRecord::Memory {
                memory,
                offset,
                bytes,
            });
        }
        // Fences: the app may wait on one that a submit before the trim point signaled.
        let queue_of = |device: u64| -> Option<(u64, u32)> {
            self.objects
                .iter()
                .filter(|(_, o)| o.parent == device)
                .filter_map(|(h, o)| match o.info {
                    Info::Queue { family } => Some((*h, family)),
                    _ => None,
                })
                .min()
        };
        let mut fences: Vec<(&u64, &Obj)> = self
            .objects
            .iter()
            .filter(|(_, o)| o.ty == vk::ObjectType::FENCE)
            .collect();
        fences.sort_by_key(|(h, _)| **h);
        for (&fence, o) in fences {
            let Info::Fence { created_signaled } = o.info else {
                continue;
            };
            let Some(signaled) = fence_signaled(o.parent, fence) else {
                continue;
            };
            let device = vk::Device::from_raw(o.parent);
            let f = vk::Fence::from_raw(fence);
            if created_signaled && !signaled {
                records.extend(made("vkResetFences", |e| unsafe {
                    vkstream::encode::vkResetFences(e, device, 1, &f)
                }));
            } else if signaled && !created_signaled {
                match queue_of(o.parent) {
                    Some((q, _)) => records.extend(made("vkQueueSubmit", |e| unsafe {
                        vkstream::encode::vkQueueSubmit(
                            e,
                            vk::Queue::from_raw(q),
                            0,
                            std::ptr::null(),
                            f,
                        )
                    })),
                    None => gaps.push(format!(
                        "fence {fence:#x}: signaled, but no queue to signal it on"
                    )),
                }
            }
        }
        // Timeline semaphores: the app may wait for a value signaled before the trim point.
        let mut timelines: Vec<(&u64, &Obj)> = self
            .objects
            .iter()
            .filter(|(_, o)| matches!(o.info, Info::Timeline { .. }))
            .collect();
        timelines.sort_by_key(|(h, _)| **h);
        for (&sem, o) in timelines {
            let Info::Timeline { initial } = o.info else {
                continue;
            };
            match timeline_value(o.parent, sem) {
                Some(v) if v > initial => {
                    let info = vk::SemaphoreSignalInfo::default()
                        .semaphore(vk::Semaphore::from_raw(sem))
                        .value(v);
                    let device = vk::Device::from_raw(o.parent);
                    records.extend(made("vkSignalSemaphore", |e| unsafe {
                        vkstream::encode::vkSignalSemaphore(e, device, &info)
                    }));
                }
                Some(_) => {}
                None => gaps.push(format!(
                    "timeline semaphore {sem:#x}: its value could not be read (vkGetSemaphoreCounterValue)"
                )),
            }
        }
        // Binary semaphores a submit before the trim point left signaled (wgpu chains its submits
        // through them): the first captured submit may wait for one.
        let mut binaries: Vec<(&u64, &Obj)> = self
            .objects
            .iter()
            .filter(|(_, o)| matches!(o.info, Info::Binary { signaled: true }) && !o.destroyed)
            .collect();
        binaries.sort_by_key(|(h, _)| **h);
        for (&sem, o) in binaries {
            let Some((q, _)) = queue_of(o.parent) else {
                gaps.push(format!(
                    "semaphore {sem:#x}: signaled, but no queue to signal it on"
                ));
                continue;
            };
            let signal = [vk::Semaphore::from_raw(sem)];
            let submit = vk::SubmitInfo::default().signal_semaphores(&signal);
            records.extend(made("vkQueueSubmit", |e| unsafe {
                vkstream::encode::vkQueueSubmit(
                    e,
                    vk::Queue::from_raw(q),
                    1,
                    &submit,
                    vk::Fence::null(),
                )
            }));
        }
        // Image layouts: one made-up command buffer per device moves every image from its initial
        // layout to the one the app left it in.
        let mut by_device: BTreeMap<u64, Vec<vk::ImageMemoryBarrier<'static>>> = BTreeMap::new();
        for (&image, o) in &self.objects {
            if let Info::Image {
                initial_layout,
                format,
                layout: Some(layout),
                swapchain: false,
            } = o.info
            {
                if layout == initial_layout || layout == vk::ImageLayout::UNDEFINED.as_raw() {
                    continue;
                }
                by_device.entry(o.parent).or_default().push(
                    vk::ImageMemoryBarrier::default()
                        .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
                        .dst_access_mask(
                            vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
                        )
                        .old_layout(vk::ImageLayout::from_raw(initial_layout))
                        .new_layout(vk::ImageLayout::from_raw(layout))
                        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                        .image(vk::Image::from_raw(image))
                        .subresource_range(vk::ImageSubresourceRange {
                            aspect_mask: aspect(format),
                            base_mip_level: 0,
                            level_count: vk::REMAINING_MIP_LEVELS,
                            base_array_layer: 0,
                            layer_count: vk::REMAINING_ARRAY_LAYERS,
                        }),
                );
            }
        }
        // Query pools: every query starts the captured frames reset, as the app's resets before
        // the trim point left those it begins next (their results were read before it, or are
        // reads of work that did not replay, which replay skips).
        let mut resets: BTreeMap<u64, Vec<(u64, u32)>> = BTreeMap::new();
        for (&pool, o) in &self.objects {
            if let Info::QueryPool { count, resettable } = o.info {
                if resettable && count > 0 && !o.destroyed {
                    resets.entry(o.parent).or_default().push((pool, count));
                    by_device.entry(o.parent).or_default();
                }
            }
        }
        let mut synthetic = SYNTHETIC_BASE;
        for (device, mut barriers) in by_device {
            barriers.sort_by_key(|b| b.image.as_raw());
            let mut resets = resets.remove(&device).unwrap_or_default();
            resets.sort_unstable();
            let Some((queue, family)) = graphics_queue(device, graphics_queues, &queue_of) else {
                gaps.push(format!(
                    "device {device:#x}: no queue to restore {} image layouts and reset {} query \
                     pools on",
                    barriers.len(),
                    resets.len()
                ));
                continue;
            };
            records.extend(layout_calls(
                device,
                queue,
                family,
                &barriers,
                &resets,
                &mut synthetic,
            ));
        }
        Snapshot {
            records,
            objects: self.objects.values().filter(|o| !o.destroyed).count() as u64,
            gaps,
        }
    }
}

/// A queue of `device` whose family can run any barrier (graphics), else any queue; none when the
/// layer knows no such device (`graphics_queues` gives (queue, family) of a live device's graphics
/// queues).
fn graphics_queue(
    device: u64,
    graphics_queues: &dyn Fn(u64) -> Option<Vec<(u64, u32)>>,
    queue_of: &dyn Fn(u64) -> Option<(u64, u32)>,
) -> Option<(u64, u32)> {
    graphics_queues(device)?
        .into_iter()
        .min()
        .or_else(|| queue_of(device))
}

/// Made-up calls: a command pool and buffer, the barriers, the query pool resets, a submit, a
/// wait, the pool destroyed.
fn layout_calls(
    device: u64,
    queue: u64,
    family: u32,
    barriers: &[vk::ImageMemoryBarrier<'_>],
    resets: &[(u64, u32)],
    synthetic: &mut u64,
) -> Vec<SnapRecord> {
    let dev = vk::Device::from_raw(device);
    let q = vk::Queue::from_raw(queue);
    let mut pool = vk::CommandPool::from_raw(*synthetic);
    let mut cb = vk::CommandBuffer::from_raw(*synthetic + 1);
    *synthetic += 2;
    let mut out = Vec::new();
    let pool_ci = vk::CommandPoolCreateInfo::default().queue_family_index(family);
    out.extend(made("vkCreateCommandPool", |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev, &pool_ci, std::ptr::null(), &mut pool)
    }));
    let alloc = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    out.extend(made("vkAllocateCommandBuffers", |e| unsafe {
        vkstream::encode::vkAllocateCommandBuffers(e, dev, &alloc, &mut cb)
    }));
    let begin =
        vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    out.extend(made("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
    }));
    if !barriers.is_empty() {
        out.extend(made("vkCmdPipelineBarrier", |e| unsafe {
            vkstream::encode::vkCmdPipelineBarrier(
                e,
                cb,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::DependencyFlags::empty(),
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
                barriers.len() as u32,
                barriers.as_ptr(),
            )
        }));
    }
    for &(pool, count) in resets {
        out.extend(made("vkCmdResetQueryPool", |e| unsafe {
            vkstream::encode::vkCmdResetQueryPool(e, cb, vk::QueryPool::from_raw(pool), 0, count)
        }));
    }
    out.extend(made("vkEndCommandBuffer", |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    }));
    let cbs = [cb];
    let submit = vk::SubmitInfo::default().command_buffers(&cbs);
    out.extend(made("vkQueueSubmit", |e| unsafe {
        vkstream::encode::vkQueueSubmit(e, q, 1, &submit, vk::Fence::null())
    }));
    out.extend(made("vkQueueWaitIdle", |e| unsafe {
        vkstream::encode::vkQueueWaitIdle(e, q)
    }));
    out.extend(made("vkDestroyCommandPool", |e| unsafe {
        vkstream::encode::vkDestroyCommandPool(e, dev, pool, std::ptr::null())
    }));
    out
}

/// Aspect of an image format, for a whole-image barrier.
fn aspect(format: i32) -> vk::ImageAspectFlags {
    match vk::Format::from_raw(format) {
        vk::Format::D16_UNORM | vk::Format::X8_D24_UNORM_PACK32 | vk::Format::D32_SFLOAT => {
            vk::ImageAspectFlags::DEPTH
        }
        vk::Format::S8_UINT => vk::ImageAspectFlags::STENCIL,
        vk::Format::D16_UNORM_S8_UINT
        | vk::Format::D24_UNORM_S8_UINT
        | vk::Format::D32_SFLOAT_S8_UINT => {
            vk::ImageAspectFlags::DEPTH | vk::ImageAspectFlags::STENCIL
        }
        _ => vk::ImageAspectFlags::COLOR,
    }
}
