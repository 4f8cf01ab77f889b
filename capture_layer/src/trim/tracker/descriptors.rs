//! Descriptor sets' contents while tracking: which update call last wrote each descriptor of a
//! set, so the snapshot keeps exactly the updates that give every live set what it holds at the
//! trim point. An update whose every descriptor a later one overwrote is dropped: apps that
//! update a set every frame (ffmpeg's Vulkan filters, with a template) would otherwise keep every
//! update, the old ones naming image views destroyed since, which cannot replay.
//!
//! Template updates write what their template's entries say, and the handles inside their data
//! count as named handles (the snapshot leaves out state naming dead objects).

use super::*;
use std::collections::HashMap;

/// A descriptor update template's entry, as far as the tracker needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TplEntry {
    binding: u32,
    element: u32,
    count: u32,
    ty: i32,
    offset: u64,
    stride: u64,
}

/// The entries of a template creation call.
pub(super) fn template_entries(call: &Call) -> Option<Vec<TplEntry>> {
    let ci = match call {
        Call::vkCreateDescriptorUpdateTemplate(p)
        | Call::vkCreateDescriptorUpdateTemplateKHR(p) => p.p_create_info.as_ref()?,
        _ => return None,
    };
    Some(
        ci.p_descriptor_update_entries
            .iter()
            .flatten()
            .map(|e| TplEntry {
                binding: e.dst_binding,
                element: e.dst_array_element,
                count: e.descriptor_count,
                ty: e.descriptor_type,
                offset: e.offset,
                stride: e.stride,
            })
            .collect(),
    )
}

/// The handles one descriptor of type `ty` holds in its info (`vkstream::descriptor`), without
/// acceleration structures: not objects the tracker follows.
fn handle_fields(ty: vk::DescriptorType) -> &'static [(usize, vk::ObjectType)] {
    match ty {
        vk::DescriptorType::ACCELERATION_STRUCTURE_KHR => &[],
        _ => vkstream::descriptor::handle_fields(ty),
    }
}

/// Calls `f` with every non-null handle the template data `data` holds.
fn template_handles(entries: &[TplEntry], data: &[u8], f: &mut impl FnMut(vk::ObjectType, u64)) {
    for e in entries {
        let fields = handle_fields(vk::DescriptorType::from_raw(e.ty));
        for i in 0..u64::from(if fields.is_empty() { 0 } else { e.count }) {
            let Some(base) = i
                .checked_mul(e.stride)
                .and_then(|o| o.checked_add(e.offset))
                .and_then(|o| usize::try_from(o).ok())
            else {
                break;
            };
            for &(at, ty) in fields {
                let h = base
                    .checked_add(at)
                    .and_then(|s| data.get(s..s.checked_add(8)?))
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .unwrap_or(0);
                if h != 0 {
                    f(ty, h);
                }
            }
        }
    }
}

/// Which update call provides each descriptor of one set: ranges of array elements per binding.
#[derive(Default)]
pub(super) struct Slots {
    /// (binding, first element) -> (end element, update call).
    ranges: BTreeMap<(u32, u32), (u32, (u64, u32))>,
    /// Ranges each update call still provides.
    counts: HashMap<(u64, u32), u32>,
    /// Calls a copy read descriptors from: kept while the set lives, however overwritten.
    pinned: std::collections::HashSet<(u64, u32)>,
}

impl Slots {
    /// `key` wrote elements `[first, first + count)` of `binding`; pushes onto `gone` the calls
    /// that no longer provide any descriptor of the set.
    fn write(
        &mut self,
        binding: u32,
        first: u32,
        count: u32,
        key: (u64, u32),
        gone: &mut Vec<(u64, u32)>,
    ) {
        if count == 0 {
            return;
        }
        let end = first.saturating_add(count);
        let over: Vec<(u32, u32, (u64, u32))> = self
            .ranges
            .range((binding, 0)..(binding, end))
            .filter(|(_, (e, _))| *e > first)
            .map(|(&(_, s), &(e, k))| (s, e, k))
            .collect();
        for (s, e, k) in over {
            self.ranges.remove(&(binding, s));
            let mut n = self.counts.get(&k).copied().unwrap_or(1) - 1;
            if s < first {
                self.ranges.insert((binding, s), (first, k));
                n += 1;
            }
            if e > end {
                self.ranges.insert((binding, end), (e, k));
                n += 1;
            }
            if n == 0 {
                self.counts.remove(&k);
                if k != key && !self.pinned.contains(&k) {
                    gone.push(k);
                }
            } else {
                self.counts.insert(k, n);
            }
        }
        self.ranges.insert((binding, first), (end, key));
        *self.counts.entry(key).or_default() += 1;
    }

    /// A copy reads elements `[first, first + count)` of `binding`: the calls that provide them
    /// must replay before it, so they stay.
    fn pin(&mut self, binding: u32, first: u32, count: u32) {
        let end = first.saturating_add(count);
        let keys: Vec<(u64, u32)> = self
            .ranges
            .range((binding, 0)..(binding, end))
            .filter(|(_, (e, _))| *e > first)
            .map(|(_, &(_, k))| k)
            .collect();
        self.pinned.extend(keys);
    }
}

/// The handles a descriptor write reads, by its type, and its set unless pushed: the spec ignores
/// the other members (the sampler of a sampled image, a push's dstSet), where apps leave stale
/// values that may name objects destroyed since.
fn write_handles(
    w: &vkstream::types::VkWriteDescriptorSet,
    push: bool,
    out: &mut Vec<(vk::ObjectType, u64, bool)>,
) {
    if !push && w.dst_set != 0 {
        out.push((vk::ObjectType::DESCRIPTOR_SET, w.dst_set, false));
    }
    let n = w.descriptor_count as usize;
    let ty = vk::DescriptorType::from_raw(w.descriptor_type);
    let mut add = |t: vk::ObjectType, h: u64| {
        if h != 0 {
            out.push((t, h, false));
        }
    };
    for i in w.p_image_info.iter().flatten().take(n) {
        for &(at, t) in handle_fields(ty) {
            match (at, t) {
                (0, vk::ObjectType::SAMPLER) => add(t, i.sampler),
                (8, vk::ObjectType::IMAGE_VIEW) => add(t, i.image_view),
                _ => {}
            }
        }
    }
    if handle_fields(ty) == [(0, vk::ObjectType::BUFFER)] {
        for b in w.p_buffer_info.iter().flatten().take(n) {
            add(vk::ObjectType::BUFFER, b.buffer);
        }
    }
    if handle_fields(ty) == [(0, vk::ObjectType::BUFFER_VIEW)] {
        for &v in w.p_texel_buffer_view.iter().flatten().take(n) {
            add(vk::ObjectType::BUFFER_VIEW, v);
        }
    }
}

/// The parameters of `call` (`vkUpdateDescriptorSets`) without the writes and copies that name a
/// handle `unusable` rejects, and how many were left out; none when nothing is left out or left,
/// or a write carries a pNext chain (not re-encoded here).
pub(super) fn update_without(
    call: &Call,
    unusable: &dyn Fn(&u64) -> bool,
) -> Option<(Vec<u8>, usize)> {
    let Call::vkUpdateDescriptorSets(p) = call else {
        return None;
    };
    let mut left = 0;
    let mut writes = Vec::new();
    for w in p.p_descriptor_writes.iter().flatten() {
        let mut hs = Vec::new();
        write_handles(w, false, &mut hs);
        if hs.iter().any(|(_, h, _)| unusable(h)) {
            left += 1;
        } else if !w.p_next.is_empty() {
            return None;
        } else {
            writes.push(w);
        }
    }
    let mut copies = Vec::new();
    for k in p.p_descriptor_copies.iter().flatten() {
        if unusable(&k.src_set) || unusable(&k.dst_set) {
            left += 1;
        } else {
            copies.push(vk::CopyDescriptorSet {
                src_set: vk::DescriptorSet::from_raw(k.src_set),
                src_binding: k.src_binding,
                src_array_element: k.src_array_element,
                dst_set: vk::DescriptorSet::from_raw(k.dst_set),
                dst_binding: k.dst_binding,
                dst_array_element: k.dst_array_element,
                descriptor_count: k.descriptor_count,
                ..Default::default()
            });
        }
    }
    if left == 0 || writes.is_empty() && copies.is_empty() {
        return None;
    }
    // The arrays the writes point into, each as long as its descriptor count (the encoder reads
    // that many).
    let n = |w: &&vkstream::types::VkWriteDescriptorSet| w.descriptor_count as usize;
    let mut images = Vec::new();
    let mut buffers = Vec::new();
    let mut views = Vec::new();
    for w in &writes {
        let i: Vec<vk::DescriptorImageInfo> = w
            .p_image_info
            .iter()
            .flatten()
            .take(n(w))
            .map(|i| vk::DescriptorImageInfo {
                sampler: vk::Sampler::from_raw(i.sampler),
                image_view: vk::ImageView::from_raw(i.image_view),
                image_layout: vk::ImageLayout::from_raw(i.image_layout),
            })
            .collect();
        let b: Vec<vk::DescriptorBufferInfo> = w
            .p_buffer_info
            .iter()
            .flatten()
            .take(n(w))
            .map(|b| vk::DescriptorBufferInfo {
                buffer: vk::Buffer::from_raw(b.buffer),
                offset: b.offset,
                range: b.range,
            })
            .collect();
        let v: Vec<vk::BufferView> = w
            .p_texel_buffer_view
            .iter()
            .flatten()
            .take(n(w))
            .map(|v| vk::BufferView::from_raw(*v))
            .collect();
        let short = |present: bool, len: usize| present && len < n(w);
        if short(w.p_image_info.is_some(), i.len())
            || short(w.p_buffer_info.is_some(), b.len())
            || short(w.p_texel_buffer_view.is_some(), v.len())
        {
            return None;
        }
        images.push(i);
        buffers.push(b);
        views.push(v);
    }
    let ptr = |present: bool, p: *const u8| if present { p } else { std::ptr::null() };
    let ws: Vec<vk::WriteDescriptorSet> = writes
        .iter()
        .enumerate()
        .map(|(k, w)| vk::WriteDescriptorSet {
            dst_set: vk::DescriptorSet::from_raw(w.dst_set),
            dst_binding: w.dst_binding,
            dst_array_element: w.dst_array_element,
            descriptor_count: w.descriptor_count,
            descriptor_type: vk::DescriptorType::from_raw(w.descriptor_type),
            p_image_info: ptr(w.p_image_info.is_some(), images[k].as_ptr().cast()).cast(),
            p_buffer_info: ptr(w.p_buffer_info.is_some(), buffers[k].as_ptr().cast()).cast(),
            p_texel_buffer_view: ptr(w.p_texel_buffer_view.is_some(), views[k].as_ptr().cast())
                .cast(),
            ..Default::default()
        })
        .collect();
    let mut e = vkstream::Encoder::new();
    // SAFETY: every pointer above points into a vector alive here, as long as its count.
    unsafe {
        vkstream::encode::vkUpdateDescriptorSets(
            &mut e,
            vk::Device::from_raw(p.device),
            ws.len() as u32,
            if ws.is_empty() {
                std::ptr::null()
            } else {
                ws.as_ptr()
            },
            copies.len() as u32,
            if copies.is_empty() {
                std::ptr::null()
            } else {
                copies.as_ptr()
            },
        )
    };
    Some((e.into_bytes(), left))
}

impl Tracker {
    /// Every handle a call names: the generated walker's, those inside template data, and for
    /// descriptor writes only those their descriptor type reads.
    pub(super) fn named_handles(&self, call: &Call) -> Vec<(vk::ObjectType, u64, bool)> {
        let mut hs = Vec::new();
        match call {
            Call::vkUpdateDescriptorSets(p) => {
                hs.push((vk::ObjectType::DEVICE, p.device, false));
                for w in p.p_descriptor_writes.iter().flatten() {
                    write_handles(w, false, &mut hs);
                }
                for k in p.p_descriptor_copies.iter().flatten() {
                    hs.push((vk::ObjectType::DESCRIPTOR_SET, k.src_set, false));
                    hs.push((vk::ObjectType::DESCRIPTOR_SET, k.dst_set, false));
                }
                return hs;
            }
            Call::vkCmdPushDescriptorSetKHR(p) => {
                hs.push((vk::ObjectType::COMMAND_BUFFER, p.command_buffer, false));
                hs.push((vk::ObjectType::PIPELINE_LAYOUT, p.layout, false));
                for w in p.p_descriptor_writes.iter().flatten() {
                    write_handles(w, true, &mut hs);
                }
                return hs;
            }
            _ => {}
        }
        let mut hs = handles(call);
        let (template, data) = match call {
            Call::vkUpdateDescriptorSetWithTemplate(p)
            | Call::vkUpdateDescriptorSetWithTemplateKHR(p) => {
                (p.descriptor_update_template, &p.p_data)
            }
            Call::vkCmdPushDescriptorSetWithTemplateKHR(p) => {
                (p.descriptor_update_template, &p.p_data)
            }
            _ => return hs,
        };
        if let (Some(entries), Some(data)) = (self.template(template), data) {
            template_handles(entries, data, &mut |ty, h| hs.push((ty, h, false)));
        }
        hs
    }

    fn template(&self, h: u64) -> Option<&[TplEntry]> {
        match &self.objects.get(&h)?.info {
            Info::Template(e) => Some(e),
            _ => None,
        }
    }

    /// A descriptor update: kept while a set it wrote lives and holds one of its descriptors.
    pub(super) fn update(&mut self, c: record::Call, call: &Call) {
        let key = (c.seq, 0);
        // (set, binding, first element, count) written, and copied from.
        let mut writes: Vec<(u64, u32, u32, u32)> = Vec::new();
        let mut copies: Vec<(u64, u32, u32, u32)> = Vec::new();
        match call {
            Call::vkUpdateDescriptorSets(p) => {
                for w in p.p_descriptor_writes.iter().flatten() {
                    writes.push((
                        w.dst_set,
                        w.dst_binding,
                        w.dst_array_element,
                        w.descriptor_count,
                    ));
                }
                for k in p.p_descriptor_copies.iter().flatten() {
                    writes.push((
                        k.dst_set,
                        k.dst_binding,
                        k.dst_array_element,
                        k.descriptor_count,
                    ));
                    copies.push((
                        k.src_set,
                        k.src_binding,
                        k.src_array_element,
                        k.descriptor_count,
                    ));
                }
            }
            Call::vkUpdateDescriptorSetWithTemplate(p)
            | Call::vkUpdateDescriptorSetWithTemplateKHR(p) => {
                match self.template(p.descriptor_update_template) {
                    Some(entries) => writes.extend(
                        entries
                            .iter()
                            .map(|e| (p.descriptor_set, e.binding, e.element, e.count)),
                    ),
                    // A template the tracker did not see made: kept while the set lives.
                    None => writes.push((p.descriptor_set, u32::MAX, 0, 0)),
                }
            }
            _ => return,
        }
        let mut owners: Vec<u64> = writes.iter().map(|w| w.0).collect();
        owners.sort_unstable();
        owners.dedup();
        self.keep_owned(Record::Call(c), &owners);
        // What a copy reads must replay before it, however the source is updated later (a
        // copy within one set included).
        for (src, binding, first, count) in copies {
            if let Some(s) = self.slots.get_mut(&src) {
                s.pin(binding, first, count);
            }
        }
        let mut gone = Vec::new();
        for (set, binding, first, count) in writes {
            if !self.objects.contains_key(&set) {
                continue;
            }
            gone.clear();
            self.slots
                .entry(set)
                .or_default()
                .write(binding, first, count, key, &mut gone);
            for &k in &gone {
                self.release(k, set);
                if let Some(o) = self.objects.get_mut(&set) {
                    o.owned.retain(|x| *x != k);
                }
            }
        }
    }
}
