//! Whether the objects a call combines fit together, where each is live and of the right type
//! but a driver would still read past what one of them holds (each rule here closed a lavapipe
//! crash the fuzzer found in a trace the other checks accepted):
//! - descriptors: writes and copies against the destination set's layout (binding exists, type
//!   matches, the element range fits, the array the type reads is there, a sampler where one is
//!   needed, buffer ranges within the buffer), sets bound against their pipeline layout, every
//!   binding of a bound set written;
//! - arrays of created handles exactly as long as their count (the driver writes `count`);
//! - buffers and images created again while live (one captured handle, two replayed objects);
//! - null handles inside the arrays of submits and fence calls, and command buffer levels.
//!
//! Images, views, render passes and framebuffers are in `passes`, recording state (queries,
//! draws, transform feedback) in `cmds`, what shaders use in `shaders`, device limits in `limits`.
//! Only the commands named below are looked at; nothing here allocates per checked call except
//! the records kept at creation.

use ash::vk;
use vkstream::types::VkWriteDescriptorSet;
use vkstream::{Call, PNext};

use crate::fasthash::{HandleMap, HandleSet};

/// One binding of a descriptor set layout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Binding {
    pub binding: u32,
    pub ty: i32,
    pub count: u32,
    pub immutable: bool,
    /// Partially bound or update-after-bind: may be unwritten when the set is bound.
    pub lax: bool,
}

#[derive(Debug)]
pub(super) struct Layout {
    /// Sorted by binding number.
    pub bindings: Box<[Binding]>,
    pub push: bool,
    /// Dynamic uniform and storage buffer descriptors (one dynamic offset each).
    pub dynamic: u32,
}

/// A descriptor set: its layout, and which of its bindings (by index in the layout, the
/// first 64) were written.
#[derive(Clone, Copy)]
pub(super) struct Set {
    layout: u64,
    written: u64,
}

impl Compat {
    /// Whether binding `binding` of descriptor set `set` may be read: written, or allowed to be
    /// unwritten (partially bound, update after bind, variable count), or not followed here.
    pub(super) fn readable(&self, set: u64, binding: u32) -> bool {
        let Some(s) = self.sets.get(&set) else {
            return true;
        };
        let Some(l) = self.layouts.get(&s.layout) else {
            return true;
        };
        match l.bindings.iter().position(|b| b.binding == binding) {
            Some(i) if i < 64 => {
                let b = &l.bindings[i];
                b.count == 0 || b.lax || s.written & (1 << i) != 0
            }
            _ => true,
        }
    }
}

#[derive(Default)]
pub(super) struct Compat {
    pub(super) layouts: HandleMap<u64, Layout>,
    pub(super) sets: HandleMap<u64, Set>,
    /// Pipeline layout -> its set layouts.
    pub(super) pipeline_layouts: HandleMap<u64, Box<[u64]>>,
    /// Shader module -> what its entry points use.
    pub(super) modules: HandleMap<u64, super::shaders::Module>,
    /// Pipeline -> the descriptor sets its shaders use (bit per set).
    pub(super) used_sets: HandleMap<u64, super::shaders::Used>,
    /// Buffer -> size.
    pub(super) buffers: HandleMap<u64, u64>,
    /// Buffers made with `VK_BUFFER_USAGE_TRANSFORM_FEEDBACK_BUFFER_BIT_EXT`.
    pub(super) xfb_buffers: HandleSet<u64>,
    secondary: HandleSet<u64>,
    pub(super) images: HandleMap<u64, super::passes::Image>,
    pub(super) views: HandleMap<u64, super::passes::View>,
    pub(super) passes: HandleMap<u64, super::passes::Pass>,
    pub(super) framebuffers: HandleMap<u64, super::passes::Framebuffer>,
    pub(super) swapchains: HandleMap<u64, super::passes::Image>,
    /// Query pool -> query type.
    pub(super) query_types: HandleMap<u64, i32>,
    /// Query pool -> its pipeline statistics flags.
    pub(super) query_stats: HandleMap<u64, u32>,
    pub(super) limits: super::limits::Limits,
    pub(super) cmds: super::cmds::Cmds,
    /// A device enabled attachments of mixed sample counts (VK_AMD_mixed_attachment_samples,
    /// VK_NV_framebuffer_mixed_samples or multisampledRenderToSingleSampled).
    pub(super) mixed_samples: bool,
    /// Descriptor update template -> its entries (where its data holds which descriptors).
    pub(super) templates: HandleMap<u64, Box<[crate::templates::Entry]>>,
}

/// `VK_BUFFER_USAGE_TRANSFORM_FEEDBACK_BUFFER_BIT_EXT`.
const XFB_USAGE: u32 = 0x800;
const SAMPLER: i32 = 0;
const COMBINED: i32 = 1;
const SAMPLED_IMAGE: i32 = 2;
const STORAGE_IMAGE: i32 = 3;
const UNIFORM_TEXEL: i32 = 4;
const STORAGE_TEXEL: i32 = 5;
const UNIFORM_BUFFER: i32 = 6;
const STORAGE_BUFFER_DYNAMIC: i32 = 9;
const UNIFORM_BUFFER_DYNAMIC: i32 = 8;
const INPUT_ATTACHMENT: i32 = 10;
const INLINE_UNIFORM_BLOCK: i32 = 1_000_138_000;
const MUTABLE: i32 = 1_000_351_000;
const WHOLE_SIZE: u64 = u64::MAX;
const PUSH_DESCRIPTOR: u32 = 0x1;
const UPDATE_AFTER_BIND: u32 = 0x1;
const PARTIALLY_BOUND: u32 = 0x4;
const VARIABLE_COUNT: u32 = 0x8;
const SECONDARY: i32 = 1;

/// Whether `count` descriptors from element `first` of binding index `i` fit in the binding and
/// the consecutive ones of the same type that follow it (descriptor updates run over into them).
fn fits(b: &[Binding], mut i: usize, first: u32, count: u32) -> bool {
    let mut left = u64::from(first) + u64::from(count);
    let ty = b[i].ty;
    loop {
        if left <= u64::from(b[i].count) {
            return true;
        }
        left -= u64::from(b[i].count);
        i += 1;
        while i < b.len() && b[i].count == 0 {
            i += 1;
        }
        if i == b.len() || b[i].ty != ty {
            return false;
        }
    }
}

/// A bit per binding index that a write of `count` elements from `first` of binding index `i` reaches.
fn touched(b: &[Binding], mut i: usize, first: u32, count: u32) -> u64 {
    let mut m = 0u64;
    let mut left = u64::from(first) + u64::from(count);
    while i < b.len() {
        if b[i].count > 0 && i < 64 {
            m |= 1 << i;
        }
        if left <= u64::from(b[i].count) {
            break;
        }
        left -= u64::from(b[i].count);
        i += 1;
    }
    m
}

fn nonnull<'a>(what: &str, hs: impl IntoIterator<Item = &'a u64>) -> Result<(), String> {
    match hs.into_iter().position(|h| *h == 0) {
        Some(k) => Err(format!("{what} {k} is VK_NULL_HANDLE")),
        None => Ok(()),
    }
}

/// An array of created handles as long as its count (the replay maps one captured handle per
/// handle the driver returns). A capture without the array (a failed call) has nothing to map.
fn created(what: &str, out: Option<usize>, count: u32) -> Result<(), String> {
    let Some(n) = out else {
        return Ok(());
    };
    if n != count as usize {
        return Err(format!("{what} holds {n} handles for a count of {count}"));
    }
    Ok(())
}

impl Compat {
    /// Checks `call` (live handles of the right types already checked); `live` says whether a
    /// (type, handle) is live, `memory` what memory a buffer or image is bound to.
    pub(super) fn before(&self, call: &Call, live: &Live, memory: &Memory) -> Result<(), String> {
        match call {
            Call::vkAllocateDescriptorSets(p) => {
                if p.p_allocate_info
                    .as_ref()
                    .is_some_and(|i| i.descriptor_pool == 0)
                {
                    return Err("descriptorPool is VK_NULL_HANDLE".into());
                }
                let n = p
                    .p_allocate_info
                    .as_ref()
                    .map_or(0, |i| i.descriptor_set_count);
                created(
                    "pDescriptorSets",
                    p.p_descriptor_sets.as_ref().map(Vec::len),
                    n,
                )?;
                let layouts = p
                    .p_allocate_info
                    .iter()
                    .flat_map(|i| i.p_set_layouts.iter());
                for l in layouts.flatten() {
                    if self.layouts.get(l).is_some_and(|l| l.push) {
                        return Err(format!(
                            "descriptor set layout 0x{l:x} is for push descriptors"
                        ));
                    }
                }
                nonnull(
                    "pSetLayouts",
                    p.p_allocate_info
                        .iter()
                        .flat_map(|i| i.p_set_layouts.iter().flatten()),
                )
            }
            Call::vkAllocateCommandBuffers(p) => {
                if p.p_allocate_info
                    .as_ref()
                    .is_some_and(|i| i.command_pool == 0)
                {
                    return Err("commandPool is VK_NULL_HANDLE".into());
                }
                let n = p
                    .p_allocate_info
                    .as_ref()
                    .map_or(0, |i| i.command_buffer_count);
                created(
                    "pCommandBuffers",
                    p.p_command_buffers.as_ref().map(Vec::len),
                    n,
                )
            }
            Call::vkCreateGraphicsPipelines(p) => {
                created(
                    "pPipelines",
                    p.p_pipelines.as_ref().map(Vec::len),
                    p.create_info_count,
                )?;
                self.shaders_before(call)?;
                self.limits.pipelines(p)
            }
            Call::vkCreateComputePipelines(p) => {
                created(
                    "pPipelines",
                    p.p_pipelines.as_ref().map(Vec::len),
                    p.create_info_count,
                )?;
                self.shaders_before(call)
            }
            Call::vkCreateBuffer(p) => self.limits.buffer(p),
            Call::vkCreateImage(p) => self.limits.image(p),
            Call::vkAllocateMemory(p) => self.limits.allocation(p),
            Call::vkCreateQueryPool(p) => self.limits.query_pool(p),
            Call::vkCreateBufferView(p) => match &p.p_create_info {
                Some(i) => backed("buffer", i.buffer, live, memory),
                None => Ok(()),
            },
            Call::vkUpdateDescriptorSets(p) => {
                for w in p.p_descriptor_writes.iter().flatten() {
                    let Some(set) = self.sets.get(&w.dst_set) else {
                        if w.dst_set == 0 {
                            return Err("a write's dstSet is VK_NULL_HANDLE".into());
                        }
                        continue;
                    };
                    if let Some(l) = self.layouts.get(&set.layout) {
                        self.write(l, w, &format!("descriptor set 0x{:x}", w.dst_set))?;
                    }
                    for b in w.p_buffer_info.iter().flatten().filter(|b| b.buffer != 0) {
                        if self.buffers.contains_key(&b.buffer) {
                            backed("buffer", b.buffer, live, memory)?;
                        }
                    }
                }
                for c in p.p_descriptor_copies.iter().flatten() {
                    self.copy(
                        c.src_set,
                        c.src_binding,
                        c.src_array_element,
                        c.descriptor_count,
                    )?;
                    self.copy(
                        c.dst_set,
                        c.dst_binding,
                        c.dst_array_element,
                        c.descriptor_count,
                    )?;
                    let ty = |s: u64, b: u32| {
                        let l = self.layouts.get(&self.sets.get(&s)?.layout)?;
                        l.bindings.iter().find(|x| x.binding == b).map(|x| x.ty)
                    };
                    if let (Some(a), Some(b)) =
                        (ty(c.src_set, c.src_binding), ty(c.dst_set, c.dst_binding))
                    {
                        if a != b && a != MUTABLE && b != MUTABLE {
                            return Err(format!(
                                "copies descriptors of type {a} into binding {} of type {b}",
                                c.dst_binding
                            ));
                        }
                    }
                }
                Ok(())
            }
            Call::vkCmdPushDescriptorSetKHR(p) => {
                let Some(l) = self
                    .pipeline_layouts
                    .get(&p.layout)
                    .and_then(|s| s.get(p.set as usize))
                    .and_then(|l| self.layouts.get(l))
                else {
                    return Ok(());
                };
                if !l.push {
                    return Err(format!(
                        "set {} of pipeline layout 0x{:x} is not for push descriptors",
                        p.set, p.layout
                    ));
                }
                for w in p.p_descriptor_writes.iter().flatten() {
                    self.write(l, w, &format!("push descriptor set {}", p.set))?;
                }
                Ok(())
            }
            Call::vkCmdBindDescriptorSets(p) => self.bind_sets(p),
            Call::vkQueueSubmit(p) => {
                for s in p.p_submits.iter().flatten() {
                    nonnull("a wait semaphore", s.p_wait_semaphores.iter().flatten())?;
                    nonnull("a signal semaphore", s.p_signal_semaphores.iter().flatten())?;
                    self.primaries(s.p_command_buffers.iter().flatten())?;
                }
                Ok(())
            }
            Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) => {
                for s in p.p_submits.iter().flatten() {
                    let w = s.p_wait_semaphore_infos.iter().flatten();
                    nonnull("a wait semaphore", w.map(|x| &x.semaphore))?;
                    let sg = s.p_signal_semaphore_infos.iter().flatten();
                    nonnull("a signal semaphore", sg.map(|x| &x.semaphore))?;
                    let cbs = s.p_command_buffer_infos.iter().flatten();
                    self.primaries(cbs.map(|x| &x.command_buffer))?;
                }
                Ok(())
            }
            Call::vkCmdExecuteCommands(p) => {
                nonnull("pCommandBuffers", p.p_command_buffers.iter().flatten())?;
                for cb in p.p_command_buffers.iter().flatten() {
                    if !self.secondary.contains(cb) {
                        return Err(format!("command buffer 0x{cb:x} is not a secondary"));
                    }
                }
                Ok(())
            }
            Call::vkCmdPipelineBarrier(p) => {
                let b = p.p_buffer_memory_barriers.iter().flatten();
                nonnull("buffer memory barrier", b.map(|x| &x.buffer))?;
                let i = p.p_image_memory_barriers.iter().flatten();
                nonnull("image memory barrier", i.map(|x| &x.image))
            }
            Call::vkCmdPipelineBarrier2(p) | Call::vkCmdPipelineBarrier2KHR(p) => {
                let d = p.p_dependency_info.iter();
                let b = d
                    .clone()
                    .flat_map(|d| d.p_buffer_memory_barriers.iter().flatten());
                nonnull("buffer memory barrier", b.map(|x| &x.buffer))?;
                let i = d.flat_map(|d| d.p_image_memory_barriers.iter().flatten());
                nonnull("image memory barrier", i.map(|x| &x.image))
            }
            Call::vkBindBufferMemory2(p) | Call::vkBindBufferMemory2KHR(p) => {
                let b = p.p_bind_infos.iter().flatten();
                nonnull("the buffer of bind info", b.clone().map(|x| &x.buffer))?;
                nonnull("the memory of bind info", b.map(|x| &x.memory))
            }
            Call::vkBindImageMemory2(p) | Call::vkBindImageMemory2KHR(p) => {
                let b = p.p_bind_infos.iter().flatten();
                nonnull("the image of bind info", b.map(|x| &x.image))
            }
            Call::vkCreateSampler(p) => match &p.p_create_info {
                Some(i) => sampler(i),
                None => Ok(()),
            },
            Call::vkResetFences(p) => nonnull("pFences", p.p_fences.iter().flatten()),
            Call::vkWaitForFences(p) => nonnull("pFences", p.p_fences.iter().flatten()),
            _ => self.passes_before(call, live, memory),
        }
    }

    fn primaries<'a>(&self, cbs: impl Iterator<Item = &'a u64>) -> Result<(), String> {
        for (k, cb) in cbs.enumerate() {
            if *cb == 0 {
                return Err(format!("command buffer {k} of a batch is VK_NULL_HANDLE"));
            }
            if self.secondary.contains(cb) {
                return Err(format!(
                    "command buffer 0x{cb:x} is a secondary, submitted directly"
                ));
            }
        }
        Ok(())
    }

    /// A descriptor write against layout `l` (of `what`, for messages).
    fn write(&self, l: &Layout, w: &VkWriteDescriptorSet, what: &str) -> Result<(), String> {
        let Some(i) = l.bindings.iter().position(|b| b.binding == w.dst_binding) else {
            return Err(format!("{what} has no binding {}", w.dst_binding));
        };
        let b = l.bindings[i];
        let ty = w.descriptor_type;
        if b.ty != ty && b.ty != MUTABLE {
            return Err(format!(
                "writes descriptors of type {ty} to binding {} of {what}, which holds type {}",
                w.dst_binding, b.ty
            ));
        }
        let n = w.descriptor_count;
        let ok = if ty == INLINE_UNIFORM_BLOCK {
            u64::from(w.dst_array_element) + u64::from(n) <= u64::from(b.count)
        } else {
            n == 0 || fits(&l.bindings, i, w.dst_array_element, n)
        };
        if !ok {
            return Err(format!(
                "writes elements {}..+{n} of binding {} of {what}, which holds {}",
                w.dst_array_element, w.dst_binding, b.count
            ));
        }
        let need = |a: bool, name: &str| {
            if a || n == 0 {
                Ok(())
            } else {
                Err(format!("a write of type {ty} to {what} has no {name}"))
            }
        };
        match ty {
            SAMPLER | COMBINED | SAMPLED_IMAGE | STORAGE_IMAGE | INPUT_ATTACHMENT => {
                need(w.p_image_info.is_some(), "pImageInfo")?;
                if matches!(ty, SAMPLER | COMBINED) && !b.immutable {
                    let images = w.p_image_info.iter().flatten();
                    nonnull("the sampler of descriptor", images.map(|x| &x.sampler))?;
                }
            }
            UNIFORM_TEXEL | STORAGE_TEXEL => {
                need(w.p_texel_buffer_view.is_some(), "pTexelBufferView")?
            }
            UNIFORM_BUFFER..=STORAGE_BUFFER_DYNAMIC => {
                need(w.p_buffer_info.is_some(), "pBufferInfo")?;
                for d in w.p_buffer_info.iter().flatten() {
                    self.buffer_range(d.buffer, d.offset, d.range)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Bytes `offset..+range` of a buffer descriptor's buffer lie within it (a buffer not
    /// followed here passes).
    pub(super) fn buffer_range(&self, buffer: u64, offset: u64, range: u64) -> Result<(), String> {
        let Some(&size) = self.buffers.get(&buffer) else {
            return Ok(());
        };
        let end = if range == WHOLE_SIZE {
            Some(offset)
        } else {
            offset.checked_add(range)
        };
        if offset >= size || end.is_none_or(|e| e > size) {
            return Err(format!(
                "bytes {offset}..+{range} of buffer 0x{buffer:x} of {size} bytes are outside it"
            ));
        }
        Ok(())
    }

    /// The entries and data of a descriptor update through a template the trace created:
    /// the handles in the data, which the generated handle pass cannot see (`Validator::before`
    /// checks them as it checks a call's own).
    pub(super) fn template_before<'a>(
        &'a self,
        call: &'a Call,
    ) -> Option<(&'a [crate::templates::Entry], &'a [u8])> {
        let (template, data) = match call {
            Call::vkUpdateDescriptorSetWithTemplate(p)
            | Call::vkUpdateDescriptorSetWithTemplateKHR(p) => {
                (p.descriptor_update_template, p.p_data.as_deref())
            }
            Call::vkCmdPushDescriptorSetWithTemplateKHR(p) => {
                (p.descriptor_update_template, p.p_data.as_deref())
            }
            _ => return None,
        };
        Some((self.templates.get(&template)?, data.unwrap_or(&[])))
    }

    fn copy(&self, set: u64, binding: u32, first: u32, count: u32) -> Result<(), String> {
        let Some(l) = self
            .sets
            .get(&set)
            .and_then(|s| self.layouts.get(&s.layout))
        else {
            return Ok(());
        };
        let Some(i) = l.bindings.iter().position(|b| b.binding == binding) else {
            return Err(format!("descriptor set 0x{set:x} has no binding {binding}"));
        };
        if count > 0 && !fits(&l.bindings, i, first, count) {
            return Err(format!(
                "copies elements {first}..+{count} of binding {binding} of descriptor set \
                 0x{set:x}, which holds {}",
                l.bindings[i].count
            ));
        }
        Ok(())
    }

    fn bind_sets(&self, p: &vkstream::params::vkCmdBindDescriptorSets) -> Result<(), String> {
        let Some(pl) = self.pipeline_layouts.get(&p.layout) else {
            return Ok(());
        };
        let sets = p.p_descriptor_sets.as_deref().unwrap_or(&[]);
        if p.first_set as usize + sets.len() > pl.len() {
            return Err(format!(
                "binds sets {}..+{} but pipeline layout 0x{:x} has {}",
                p.first_set,
                sets.len(),
                p.layout,
                pl.len()
            ));
        }
        let mut dynamic = 0u64;
        for (k, s) in sets.iter().enumerate() {
            let Some(set) = self.sets.get(s) else {
                continue;
            };
            let want = pl[p.first_set as usize + k];
            let (Some(have), Some(l)) = (self.layouts.get(&set.layout), self.layouts.get(&want))
            else {
                continue;
            };
            if set.layout != want && (have.bindings != l.bindings || have.push != l.push) {
                return Err(format!(
                    "descriptor set 0x{s:x} (layout 0x{:x}) does not fit set {} of pipeline \
                     layout 0x{:x} (layout 0x{want:x})",
                    set.layout,
                    p.first_set as usize + k,
                    p.layout
                ));
            }
            dynamic += u64::from(have.dynamic);
        }
        if u64::from(p.dynamic_offset_count) != dynamic
            && sets.iter().all(|s| self.sets.contains_key(s))
        {
            return Err(format!(
                "gives {} dynamic offsets for sets holding {dynamic} dynamic descriptors",
                p.dynamic_offset_count
            ));
        }
        Ok(())
    }

    /// Records what a call replayed without error created or changed.
    pub(super) fn after(&mut self, call: &Call) {
        self.shaders_after(call);
        match call {
            Call::vkCreateDescriptorSetLayout(p) => {
                let (Some(i), Some(h)) = (&p.p_create_info, p.p_set_layout) else {
                    return;
                };
                let flags = i.p_next.iter().find_map(|n| match n {
                    PNext::VkDescriptorSetLayoutBindingFlagsCreateInfo(f) => {
                        f.p_binding_flags.as_deref()
                    }
                    _ => None,
                });
                let mut bindings: Vec<Binding> = i
                    .p_bindings
                    .iter()
                    .flatten()
                    .take(i.binding_count as usize)
                    .enumerate()
                    .map(|(k, b)| Binding {
                        binding: b.binding,
                        ty: b.descriptor_type,
                        count: b.descriptor_count,
                        immutable: b.p_immutable_samplers.is_some(),
                        lax: flags.and_then(|f| f.get(k)).is_some_and(|f| {
                            f & (UPDATE_AFTER_BIND | PARTIALLY_BOUND | VARIABLE_COUNT) != 0
                        }),
                    })
                    .collect();
                bindings.sort_by_key(|b| b.binding);
                let dynamic = bindings
                    .iter()
                    .filter(|b| matches!(b.ty, UNIFORM_BUFFER_DYNAMIC | STORAGE_BUFFER_DYNAMIC))
                    .map(|b| b.count)
                    .fold(0u32, u32::saturating_add);
                self.layouts.insert(
                    h,
                    Layout {
                        bindings: bindings.into(),
                        push: i.flags & PUSH_DESCRIPTOR != 0,
                        dynamic,
                    },
                );
            }
            Call::vkAllocateDescriptorSets(p) => {
                let layouts = p
                    .p_allocate_info
                    .iter()
                    .flat_map(|i| i.p_set_layouts.iter());
                for (s, l) in p.p_descriptor_sets.iter().flatten().zip(layouts.flatten()) {
                    self.sets.insert(
                        *s,
                        Set {
                            layout: *l,
                            written: 0,
                        },
                    );
                }
            }
            Call::vkUpdateDescriptorSets(p) => {
                let n = p.descriptor_write_count as usize;
                for w in p.p_descriptor_writes.iter().flatten().take(n) {
                    self.written(
                        w.dst_set,
                        w.dst_binding,
                        w.dst_array_element,
                        w.descriptor_count,
                    );
                }
                let n = p.descriptor_copy_count as usize;
                for c in p.p_descriptor_copies.iter().flatten().take(n) {
                    self.written(
                        c.dst_set,
                        c.dst_binding,
                        c.dst_array_element,
                        c.descriptor_count,
                    );
                }
            }
            // Template updates are not followed entry by entry: the set counts as written.
            Call::vkUpdateDescriptorSetWithTemplate(p)
            | Call::vkUpdateDescriptorSetWithTemplateKHR(p) => {
                if let Some(s) = self.sets.get_mut(&p.descriptor_set) {
                    s.written = !0;
                }
            }
            Call::vkCreateDescriptorUpdateTemplate(p)
            | Call::vkCreateDescriptorUpdateTemplateKHR(p) => {
                if let (Some(i), Some(h)) = (&p.p_create_info, p.p_descriptor_update_template) {
                    let entries = i.p_descriptor_update_entries.iter().flatten();
                    let n = i.descriptor_update_entry_count as usize;
                    let entries = entries.take(n).map(|e| crate::templates::Entry {
                        descriptor_type: e.descriptor_type,
                        count: e.descriptor_count,
                        offset: e.offset,
                        stride: e.stride,
                    });
                    self.templates.insert(h, entries.collect());
                }
            }
            Call::vkCreatePipelineLayout(p) => {
                if let (Some(i), Some(h)) = (&p.p_create_info, p.p_pipeline_layout) {
                    let sets = i.p_set_layouts.iter().flatten();
                    let n = i.set_layout_count as usize;
                    self.pipeline_layouts
                        .insert(h, sets.take(n).copied().collect());
                }
            }
            Call::vkCreateBuffer(p) => {
                if let (Some(i), Some(b)) = (&p.p_create_info, p.p_buffer) {
                    self.buffers.insert(b, i.size);
                    if i.usage & XFB_USAGE != 0 {
                        self.xfb_buffers.insert(b);
                    }
                }
            }
            Call::vkAllocateCommandBuffers(p) => {
                if p.p_allocate_info
                    .as_ref()
                    .is_some_and(|i| i.level == SECONDARY)
                {
                    self.secondary
                        .extend(p.p_command_buffers.iter().flatten().copied());
                }
            }
            _ => self.passes_after(call),
        }
    }

    /// Marks the bindings a write or copy reaches as written.
    fn written(&mut self, set: u64, binding: u32, first: u32, count: u32) {
        let Some(s) = self.sets.get(&set) else {
            return;
        };
        let Some(l) = self.layouts.get(&s.layout) else {
            return;
        };
        if let Some(i) = l.bindings.iter().position(|b| b.binding == binding) {
            let m = touched(&l.bindings, i, first, count);
            if let Some(s) = self.sets.get_mut(&set) {
                s.written |= m;
            }
        }
    }

    /// Object (`ty`, `h`) ended: only the records of its type are dropped (two objects of
    /// different types may share a handle value).
    pub(super) fn destroyed(&mut self, ty: vk::ObjectType, h: u64) {
        use vk::ObjectType as T;
        match ty {
            T::DESCRIPTOR_SET_LAYOUT => {
                self.layouts.remove(&h);
            }
            T::DESCRIPTOR_SET => {
                self.sets.remove(&h);
            }
            T::PIPELINE_LAYOUT => {
                self.pipeline_layouts.remove(&h);
            }
            T::DESCRIPTOR_UPDATE_TEMPLATE => {
                self.templates.remove(&h);
            }
            T::BUFFER => {
                self.buffers.remove(&h);
                self.xfb_buffers.remove(&h);
            }
            T::COMMAND_BUFFER => {
                self.secondary.remove(&h);
            }
            T::IMAGE => {
                self.images.remove(&h);
            }
            T::IMAGE_VIEW => {
                self.views.remove(&h);
            }
            T::RENDER_PASS => {
                self.passes.remove(&h);
            }
            T::FRAMEBUFFER => {
                self.framebuffers.remove(&h);
            }
            T::SWAPCHAIN_KHR => {
                self.swapchains.remove(&h);
            }
            T::QUERY_POOL => {
                self.query_types.remove(&h);
                self.query_stats.remove(&h);
            }
            T::SHADER_MODULE => {
                self.modules.remove(&h);
            }
            T::PIPELINE => {
                self.cmds_destroyed(h);
                self.used_sets.remove(&h);
            }
            _ => {}
        }
    }
}

/// A sampler's enumerants are ones the driver knows (it indexes tables with them).
fn sampler(i: &vkstream::types::VkSamplerCreateInfo) -> Result<(), String> {
    const CUBIC: i32 = 1_000_015_000;
    const CUSTOM_BORDER: std::ops::RangeInclusive<i32> = 1_000_287_003..=1_000_287_004;
    let filter = |f: i32| matches!(f, 0 | 1 | CUBIC);
    let address = |a: i32| (0..=4).contains(&a);
    let ok = filter(i.mag_filter)
        && filter(i.min_filter)
        && (0..=1).contains(&i.mipmap_mode)
        && address(i.address_mode_u)
        && address(i.address_mode_v)
        && address(i.address_mode_w)
        && (i.compare_enable == 0 || (0..=7).contains(&i.compare_op))
        && ((0..=5).contains(&i.border_color) || CUSTOM_BORDER.contains(&i.border_color))
        && i.anisotropy_enable <= 1
        && i.compare_enable <= 1
        && i.unnormalized_coordinates <= 1;
    if !ok {
        return Err(
            "a filter, address mode, compare op, border color or boolean is not a \
                    valid value"
                .into(),
        );
    }
    Ok(())
}

/// Whether a (type, handle) is live.
pub(super) type Live<'a> = dyn Fn((i32, u64)) -> bool + 'a;
/// The memory a buffer or image is bound to (`Some(0)`: needs none, `None`: not bound).
pub(super) type Memory<'a> = dyn Fn(u64) -> Option<u64> + 'a;

/// A buffer or image a descriptor, view or attachment reads is bound to live memory.
pub(super) fn backed(what: &str, h: u64, live: &Live, memory: &Memory) -> Result<(), String> {
    match memory(h) {
        None => Err(format!("{what} 0x{h:x} has no memory bound")),
        Some(m) if m != 0 && !live((MEMORY, m)) => Err(format!(
            "{what} 0x{h:x} is bound to memory 0x{m:x}, which was freed"
        )),
        _ => Ok(()),
    }
}

const MEMORY: i32 = ash::vk::ObjectType::DEVICE_MEMORY.as_raw();
