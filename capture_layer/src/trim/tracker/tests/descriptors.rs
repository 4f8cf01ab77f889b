//! Descriptor sets in the snapshot: the updates that give each set what it holds, no older ones.

use super::*;

fn set_in_pool(f: &mut Feed, pool: u64, set: u64) {
    let pci = vk::DescriptorPoolCreateInfo::default().max_sets(4);
    let mut p = vk::DescriptorPool::from_raw(pool);
    f.call("vkCreateDescriptorPool", |e| unsafe {
        vkstream::encode::vkCreateDescriptorPool(e, dev(), &pci, std::ptr::null(), &mut p)
    });
    let layouts = [vk::DescriptorSetLayout::from_raw(0x5100)];
    let ai = vk::DescriptorSetAllocateInfo::default()
        .descriptor_pool(p)
        .set_layouts(&layouts);
    let mut s = vk::DescriptorSet::from_raw(set);
    f.call("vkAllocateDescriptorSets", |e| unsafe {
        vkstream::encode::vkAllocateDescriptorSets(e, dev(), &ai, &mut s)
    });
}

fn view(f: &mut Feed, h: u64) -> u64 {
    let ci = vk::ImageViewCreateInfo::default().image(vk::Image::from_raw(0x1A));
    let mut v = vk::ImageView::from_raw(h);
    f.call("vkCreateImageView", |e| unsafe {
        vkstream::encode::vkCreateImageView(e, dev(), &ci, std::ptr::null(), &mut v)
    })
}

fn destroy_view(f: &mut Feed, h: u64) {
    f.call("vkDestroyImageView", |e| unsafe {
        vkstream::encode::vkDestroyImageView(e, dev(), vk::ImageView::from_raw(h), std::ptr::null())
    });
}

/// A template of one storage image at binding 0, and its data naming `view`.
fn template(f: &mut Feed, h: u64) {
    let entries = [vk::DescriptorUpdateTemplateEntry::default()
        .dst_binding(0)
        .descriptor_count(1)
        .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
        .offset(0)
        .stride(24)];
    let ci = vk::DescriptorUpdateTemplateCreateInfo::default().descriptor_update_entries(&entries);
    let mut t = vk::DescriptorUpdateTemplate::from_raw(h);
    f.call("vkCreateDescriptorUpdateTemplate", |e| unsafe {
        vkstream::encode::vkCreateDescriptorUpdateTemplate(e, dev(), &ci, std::ptr::null(), &mut t)
    });
}

fn template_update(f: &mut Feed, set: u64, template: u64, view: u64) -> u64 {
    let mut data = vec![0u8; 24];
    data[8..16].copy_from_slice(&view.to_le_bytes());
    data[16..20].copy_from_slice(&1i32.to_le_bytes());
    f.call("vkUpdateDescriptorSetWithTemplate", |e| {
        crate::compat::encode_template_call(e, &[DEV, set, template], None, &data)
    })
}

fn write(f: &mut Feed, set: u64, binding: u32, first: u32, views: &[u64]) -> u64 {
    let infos: Vec<vk::DescriptorImageInfo> = views
        .iter()
        .map(|v| {
            vk::DescriptorImageInfo::default()
                .image_view(vk::ImageView::from_raw(*v))
                .image_layout(vk::ImageLayout::GENERAL)
        })
        .collect();
    let w = [vk::WriteDescriptorSet::default()
        .dst_set(vk::DescriptorSet::from_raw(set))
        .dst_binding(binding)
        .dst_array_element(first)
        .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
        .image_info(&infos)];
    f.call("vkUpdateDescriptorSets", |e| unsafe {
        vkstream::encode::vkUpdateDescriptorSets(e, dev(), 1, w.as_ptr(), 0, std::ptr::null())
    })
}

fn snapshot(f: &Feed) -> (Vec<u64>, Vec<String>) {
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    let seqs = snap
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
    (seqs, snap.gaps)
}

/// ffmpeg's Vulkan filters update one set with a template every frame, each time naming the
/// frame's image views, destroyed afterwards: only the last update, whose views live, is kept.
#[test]
fn template_updates_overwritten_by_later_ones_leave_the_snapshot() {
    let mut f = Feed::new();
    set_in_pool(&mut f, 0x5000, 0x5E);
    template(&mut f, 0x7E);
    let v1 = view(&mut f, 0x71);
    let u1 = template_update(&mut f, 0x5E, 0x7E, 0x71);
    destroy_view(&mut f, 0x71);
    let v2 = view(&mut f, 0x72);
    let u2 = template_update(&mut f, 0x5E, 0x7E, 0x72);
    let (seqs, gaps) = snapshot(&f);
    assert!(!seqs.contains(&u1) && !seqs.contains(&v1), "{seqs:?}");
    assert!(seqs.contains(&u2) && seqs.contains(&v2), "{seqs:?}");
    assert!(gaps.is_empty(), "{gaps:?}");
    // The view inside the last update's data dies: the update names a dead object and is left
    // out (the generated walker does not see handles inside template data).
    destroy_view(&mut f, 0x72);
    let (seqs, gaps) = snapshot(&f);
    assert!(!seqs.contains(&u2), "{seqs:?}");
    assert!(
        gaps.iter()
            .any(|g| g.contains("vkUpdateDescriptorSetWithTemplate")),
        "{gaps:?}"
    );
}

/// Plain writes: an update stays while it still provides one descriptor of the set.
#[test]
fn descriptor_writes_stay_while_they_provide_a_descriptor() {
    let mut f = Feed::new();
    set_in_pool(&mut f, 0x5000, 0x5E);
    view(&mut f, 0x71);
    let both = write(&mut f, 0x5E, 0, 0, &[0x71, 0x71]);
    let second = write(&mut f, 0x5E, 0, 1, &[0x71]);
    let other_binding = write(&mut f, 0x5E, 1, 0, &[0x71]);
    let (seqs, _) = snapshot(&f);
    assert!(seqs.contains(&both) && seqs.contains(&second) && seqs.contains(&other_binding));
    let first = write(&mut f, 0x5E, 0, 0, &[0x71]);
    let (seqs, _) = snapshot(&f);
    assert!(!seqs.contains(&both), "{seqs:?}");
    assert!(seqs.contains(&first) && seqs.contains(&second) && seqs.contains(&other_binding));
}

/// A recording names a buffer the app destroyed afterwards; a new buffer took its handle value
/// (ffmpeg's download buffers): the command would name the new buffer before it exists.
#[test]
fn a_recording_naming_an_earlier_object_of_a_reused_handle_is_left_out() {
    let mut f = Feed::new();
    let cb = pool_with_a_buffer(&mut f, 0xC0, 0xCB);
    create_buffer(&mut f, 0xB5);
    let bi = vk::CommandBufferBeginInfo::default();
    let begin = f.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
    });
    let fill = f.call("vkCmdFillBuffer", |e| unsafe {
        vkstream::encode::vkCmdFillBuffer(e, cb, vk::Buffer::from_raw(0xB5), 0, 64, 7)
    });
    f.call("vkDestroyBuffer", |e| unsafe {
        vkstream::encode::vkDestroyBuffer(e, dev(), vk::Buffer::from_raw(0xB5), std::ptr::null())
    });
    let again = create_buffer(&mut f, 0xB5);
    let (seqs, gaps) = snapshot(&f);
    assert!(seqs.contains(&begin) && seqs.contains(&again), "{seqs:?}");
    assert!(!seqs.contains(&fill), "{seqs:?}");
    assert!(
        gaps.iter().any(|g| g.contains("vkCmdFillBuffer")),
        "{gaps:?}"
    );
}

/// A recording made before the trim point pushes descriptors (submitted after it, it must bind
/// them): the members the spec ignores, a push's dstSet and a sampled image's sampler, hold
/// stale values naming objects destroyed since. They do not make the push leave the snapshot
/// (the replay would dispatch with set 0 unbound); the view it reads does.
#[test]
fn pushed_descriptors_are_judged_by_what_they_read() {
    let mut f = Feed::new();
    set_in_pool(&mut f, 0x5000, 0x5E);
    f.call("vkFreeDescriptorSets", |e| unsafe {
        let sets = [vk::DescriptorSet::from_raw(0x5E)];
        vkstream::encode::vkFreeDescriptorSets(
            e,
            dev(),
            vk::DescriptorPool::from_raw(0x5000),
            1,
            sets.as_ptr(),
        )
    });
    let sci = vk::SamplerCreateInfo::default();
    let mut s = vk::Sampler::from_raw(0x5A);
    f.call("vkCreateSampler", |e| unsafe {
        vkstream::encode::vkCreateSampler(e, dev(), &sci, std::ptr::null(), &mut s)
    });
    f.call("vkDestroySampler", |e| unsafe {
        vkstream::encode::vkDestroySampler(e, dev(), s, std::ptr::null())
    });
    let cb = pool_with_a_buffer(&mut f, 0xC0, 0xCB);
    view(&mut f, 0x71);
    let bi = vk::CommandBufferBeginInfo::default();
    f.call("vkBeginCommandBuffer", |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
    });
    let push = |f: &mut Feed, view: u64| {
        let info = [vk::DescriptorImageInfo::default()
            .sampler(vk::Sampler::from_raw(0x5A))
            .image_view(vk::ImageView::from_raw(view))
            .image_layout(vk::ImageLayout::GENERAL)];
        let w = [vk::WriteDescriptorSet::default()
            .dst_set(vk::DescriptorSet::from_raw(0x5E))
            .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
            .image_info(&info)];
        f.call("vkCmdPushDescriptorSetKHR", |e| unsafe {
            vkstream::encode::vkCmdPushDescriptorSetKHR(
                e,
                cb,
                vk::PipelineBindPoint::COMPUTE,
                vk::PipelineLayout::from_raw(0x1A1),
                0,
                1,
                w.as_ptr(),
            )
        })
    };
    let kept = push(&mut f, 0x71);
    view(&mut f, 0x72);
    let stale = push(&mut f, 0x72);
    destroy_view(&mut f, 0x72);
    let (seqs, gaps) = snapshot(&f);
    assert!(seqs.contains(&kept), "{seqs:?} {gaps:?}");
    assert!(!seqs.contains(&stale), "{seqs:?}");
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert!(gaps[0].contains("IMAGE_VIEW"), "{gaps:?}");
}

/// A copy reads its source's descriptors when it runs: the write that provided them stays
/// though a later one overwrites them in the source (a copy within one set too).
#[test]
fn what_a_copy_read_stays_though_overwritten() {
    let mut f = Feed::new();
    set_in_pool(&mut f, 0x5000, 0x5E);
    view(&mut f, 0x71);
    let source = write(&mut f, 0x5E, 0, 0, &[0x71]);
    let copy = [vk::CopyDescriptorSet::default()
        .src_set(vk::DescriptorSet::from_raw(0x5E))
        .src_binding(0)
        .dst_set(vk::DescriptorSet::from_raw(0x5E))
        .dst_binding(1)
        .descriptor_count(1)];
    let copied = f.call("vkUpdateDescriptorSets", |e| unsafe {
        vkstream::encode::vkUpdateDescriptorSets(e, dev(), 0, std::ptr::null(), 1, copy.as_ptr())
    });
    let over = write(&mut f, 0x5E, 0, 0, &[0x71]);
    let (seqs, _) = snapshot(&f);
    assert!(
        [source, copied, over].iter().all(|s| seqs.contains(s)),
        "{seqs:?}"
    );
    // Overwritten where it was copied to, the copy goes; the source write stays pinned.
    let again = write(&mut f, 0x5E, 1, 0, &[0x71]);
    let (seqs, _) = snapshot(&f);
    assert!(!seqs.contains(&copied), "{seqs:?}");
    assert!(seqs.contains(&source) && seqs.contains(&again), "{seqs:?}");
}

/// One update writes two bindings; the view of one is destroyed (the app never uses that
/// binding again): the snapshot keeps the other write, re-encoded without it.
#[test]
fn an_update_keeps_its_writes_that_name_live_objects() {
    let mut f = Feed::new();
    set_in_pool(&mut f, 0x5000, 0x5E);
    view(&mut f, 0x71);
    view(&mut f, 0x72);
    let info = |v: u64| {
        [vk::DescriptorImageInfo::default()
            .image_view(vk::ImageView::from_raw(v))
            .image_layout(vk::ImageLayout::GENERAL)]
    };
    let (live, gone) = (info(0x71), info(0x72));
    let w = [
        vk::WriteDescriptorSet::default()
            .dst_set(vk::DescriptorSet::from_raw(0x5E))
            .dst_binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
            .image_info(&live),
        vk::WriteDescriptorSet::default()
            .dst_set(vk::DescriptorSet::from_raw(0x5E))
            .dst_binding(1)
            .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
            .image_info(&gone),
    ];
    let both = f.call("vkUpdateDescriptorSets", |e| unsafe {
        vkstream::encode::vkUpdateDescriptorSets(e, dev(), 2, w.as_ptr(), 0, std::ptr::null())
    });
    destroy_view(&mut f, 0x72);
    let snap =
        f.t.snapshot(Vec::new(), Vec::new(), &|_, _| None, &|_, _| None, &|_| {
            None
        });
    let update = snap
        .records
        .iter()
        .find_map(|r| match r {
            SnapRecord::Kept(r) => match &**r {
                Record::Call(c) if c.seq == both => vkstream::decode_call(c.cmd, &c.params).ok(),
                _ => None,
            },
            _ => None,
        })
        .expect("the update stays");
    let Call::vkUpdateDescriptorSets(p) = update else {
        panic!("{update:?}")
    };
    let writes = p.p_descriptor_writes.unwrap();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].dst_binding, 0);
    assert_eq!(writes[0].p_image_info.as_ref().unwrap()[0].image_view, 0x71);
    assert!(
        snap.gaps
            .iter()
            .any(|g| g.starts_with("1 descriptor writes")),
        "{:?}",
        snap.gaps
    );
}
