//! Limits of the replay GPU that a call's numbers must respect (a driver indexes fixed arrays
//! with them): vertex input bindings and attributes, viewports and scissors, transform feedback
//! streams of indexed queries, descriptor counts of a set layout; and storage no larger than the GPU's memory
//! (memory allocations, buffers, query pools, whose results a driver allocates and clears at
//! creation). Each closed a lavapipe crash or stall the fuzzer found (part of [`Compat`]). The
//! values come from the replay GPU's profile; a limit it does not state is not checked.

use layer_support::profile::DeviceProfile;
use vkstream::Call;

use super::compat::Compat;
use super::Validator;

#[derive(Clone, Copy)]
pub(super) struct Limits {
    vertex_bindings: u32,
    vertex_attributes: u32,
    /// Transform feedback streams (1 without the extension: index 0 only).
    streams: u32,
    /// Transform feedback buffer bindings (0 without the extension).
    xfb_buffers: u32,
    /// The largest per-set descriptor count of any type (update-after-bind ones included): no
    /// binding may hold more.
    descriptors: u64,
    inline_bytes: u64,
    push_constants: u64,
    /// Viewports (and scissors) a command buffer holds.
    viewports: u32,
    /// maxMultiviewViewCount (0 without multiview).
    views: u32,
    /// The largest memory heap (device-local where there is one), in bytes.
    heap: u64,
    max_buffer: u64,
    /// The replay GPU is lavapipe (its quirks are refused: `lavapipe_query`).
    lavapipe: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            vertex_bindings: u32::MAX,
            vertex_attributes: u32::MAX,
            streams: u32::MAX,
            xfb_buffers: u32::MAX,
            descriptors: u64::MAX,
            inline_bytes: u64::MAX,
            push_constants: u64::MAX,
            viewports: u32::MAX,
            views: u32::MAX,
            heap: u64::MAX,
            max_buffer: u64::MAX,
            lavapipe: false,
        }
    }
}

const TRANSFORM_FEEDBACK_STREAM: i32 = 1_000_028_004;
const PRIMITIVES_GENERATED: i32 = 1_000_382_000;
const INLINE_UNIFORM_BLOCK: i32 = 1_000_138_000;

impl Validator {
    /// A validator that also checks the limits of the replay GPU described by `profile`.
    pub fn for_gpu(profile: &DeviceProfile) -> Self {
        let get = |s: &str, m: &str| {
            profile
                .properties
                .get(s)
                .and_then(|x| x.get(m))
                .and_then(|v| v.as_u64())
        };
        let limit = |m: &str| get("VkPhysicalDeviceLimits", m);
        let descriptors = [
            "maxDescriptorSetSamplers",
            "maxDescriptorSetUniformBuffers",
            "maxDescriptorSetStorageBuffers",
            "maxDescriptorSetSampledImages",
            "maxDescriptorSetStorageImages",
            "maxDescriptorSetInputAttachments",
        ]
        .iter()
        .filter_map(|m| limit(m))
        .chain(
            [
                "maxDescriptorSetUpdateAfterBindSamplers",
                "maxDescriptorSetUpdateAfterBindUniformBuffers",
                "maxDescriptorSetUpdateAfterBindStorageBuffers",
                "maxDescriptorSetUpdateAfterBindSampledImages",
                "maxDescriptorSetUpdateAfterBindStorageImages",
                "maxDescriptorSetUpdateAfterBindInputAttachments",
            ]
            .iter()
            .filter_map(|m| get("VkPhysicalDeviceVulkan12Properties", m)),
        )
        .max();
        let mut v = Self::default();
        v.compat.limits = Limits {
            vertex_bindings: limit("maxVertexInputBindings").map_or(u32::MAX, |x| x as u32),
            vertex_attributes: limit("maxVertexInputAttributes").map_or(u32::MAX, |x| x as u32),
            streams: get(
                "VkPhysicalDeviceTransformFeedbackPropertiesEXT",
                "maxTransformFeedbackStreams",
            )
            .map_or(1, |x| x.max(1) as u32),
            xfb_buffers: get(
                "VkPhysicalDeviceTransformFeedbackPropertiesEXT",
                "maxTransformFeedbackBuffers",
            )
            .map_or(0, |x| x as u32),
            descriptors: descriptors.unwrap_or(u64::MAX),
            inline_bytes: get(
                "VkPhysicalDeviceInlineUniformBlockProperties",
                "maxInlineUniformBlockSize",
            )
            .or_else(|| {
                get(
                    "VkPhysicalDeviceVulkan13Properties",
                    "maxInlineUniformBlockSize",
                )
            })
            .unwrap_or(u64::MAX),
            push_constants: limit("maxPushConstantsSize").unwrap_or(u64::MAX),
            viewports: limit("maxViewports").map_or(u32::MAX, |x| x as u32),
            views: get(
                "VkPhysicalDeviceVulkan11Properties",
                "maxMultiviewViewCount",
            )
            .or_else(|| {
                get(
                    "VkPhysicalDeviceMultiviewProperties",
                    "maxMultiviewViewCount",
                )
            })
            .map_or(u32::MAX, |x| x as u32),
            heap: largest_heap(&profile.memory_heaps),
            max_buffer: get("VkPhysicalDeviceVulkan13Properties", "maxBufferSize")
                .or_else(|| get("VkPhysicalDeviceMaintenance4Properties", "maxBufferSize"))
                .unwrap_or(u64::MAX),
            lavapipe: profile.driver_name == "llvmpipe",
        };
        v
    }
}

/// The largest device-local heap, or the largest heap when none is (u64::MAX: none stated).
fn largest_heap(heaps: &[layer_support::profile::MemoryHeap]) -> u64 {
    const DEVICE_LOCAL: u32 = 0x1;
    let local = heaps.iter().filter(|h| h.flags & DEVICE_LOCAL != 0);
    local
        .map(|h| h.size)
        .max()
        .or_else(|| heaps.iter().map(|h| h.size).max())
        .unwrap_or(u64::MAX)
}

impl Validator {
    /// The checks of `call` that need nothing the trace did before it (buffer and image
    /// creation against the replay GPU): for creations made ahead of their call.
    pub fn check_alone(&self, call: &Call) -> Result<(), String> {
        let l = &self.compat.limits;
        match call {
            Call::vkCreateBuffer(p) => l.buffer(p),
            Call::vkCreateImage(p) => l.image(p),
            _ => Ok(()),
        }
    }
}

impl Limits {
    /// Memory no heap of the replay GPU can hold (VUID-vkAllocateMemory-pAllocateInfo-01713
    /// bounds it by its heap's size; the replay may pick another type, so by the largest).
    pub(super) fn allocation(&self, p: &vkstream::params::vkAllocateMemory) -> Result<(), String> {
        let size = p.p_allocate_info.as_ref().map_or(0, |i| i.allocation_size);
        if size > self.heap {
            return Err(format!(
                "allocationSize {size} is larger than the replay GPU's largest memory heap \
                 ({} bytes)",
                self.heap
            ));
        }
        Ok(())
    }

    pub(super) fn buffer(&self, p: &vkstream::params::vkCreateBuffer) -> Result<(), String> {
        let size = p.p_create_info.as_ref().map_or(0, |i| i.size);
        if size > self.max_buffer {
            return Err(format!(
                "buffer size {size} is over the replay GPU's maxBufferSize {}",
                self.max_buffer
            ));
        }
        Ok(())
    }

    /// A query pool whose results cannot fit in the replay GPU's memory: a driver allocates and
    /// clears them when the pool is made (3.4 billion queries kept lavapipe busy for minutes).
    pub(super) fn query_pool(&self, p: &vkstream::params::vkCreateQueryPool) -> Result<(), String> {
        let Some(i) = &p.p_create_info else {
            return Ok(());
        };
        let values = match i.query_type {
            1 => u64::from(i.pipeline_statistics.count_ones()).max(1),
            TRANSFORM_FEEDBACK_STREAM => 2,
            _ => 1,
        };
        // 64-bit values and an availability word per query, at the least.
        let bytes = u64::from(i.query_count).saturating_mul((values + 1) * 8);
        if bytes > self.heap {
            return Err(format!(
                "a query pool of {} queries needs at least {bytes} bytes of results, more than \
                 the replay GPU's largest memory heap ({} bytes)",
                i.query_count, self.heap
            ));
        }
        Ok(())
    }

    /// An image's numbers that cannot describe one (VUID-VkImageCreateInfo-extent-00944..00946,
    /// -mipLevels-00947, -arrayLayers-00948, -mipLevels-00958): lavapipe sizes its level table
    /// by them (8192 levels of a 256x256 image corrupted the heap).
    pub(super) fn image(&self, p: &vkstream::params::vkCreateImage) -> Result<(), String> {
        let Some(i) = &p.p_create_info else {
            return Ok(());
        };
        let e = &i.extent;
        if e.width == 0 || e.height == 0 || e.depth == 0 || i.array_layers == 0 {
            return Err(format!(
                "an image of {}x{}x{} with {} layers is empty",
                e.width, e.height, e.depth, i.array_layers
            ));
        }
        let largest = e.width.max(e.height).max(e.depth);
        let most = 32 - largest.leading_zeros();
        if i.mip_levels == 0 || i.mip_levels > most {
            return Err(format!(
                "mipLevels is {}, but an image of {}x{}x{} has 1 to {most}",
                i.mip_levels, e.width, e.height, e.depth
            ));
        }
        Ok(())
    }

    /// Viewports or scissors `first..+count` within the replay GPU's maxViewports
    /// (VUID-vkCmdSetViewport-firstViewport-01223, vkCmdSetScissor-firstScissor-00592,
    /// VkPipelineViewportStateCreateInfo-viewportCount-01218, -scissorCount-01219): lavapipe
    /// writes them into a fixed array (a first viewport of 2^30 crashed it).
    fn viewports(&self, what: &str, first: u32, count: u32) -> Result<(), String> {
        if u64::from(first) + u64::from(count) > u64::from(self.viewports) {
            return Err(format!(
                "{what} {first}..+{count} exceed the replay GPU's maxViewports {}",
                self.viewports
            ));
        }
        Ok(())
    }

    /// A view mask's views within the replay GPU's maxMultiviewViewCount
    /// (VUID-VkRenderingInfo-viewMask-06128, VkRenderPassMultiviewCreateInfo-pViewMasks-06697,
    /// VkSubpassDescription2-viewMask-06706, VkGraphicsPipelineCreateInfo-renderPass-06578):
    /// lavapipe renders each view to a layer (view 14 of a 1-layer attachment crashed it).
    pub(super) fn view_mask(&self, mask: u32) -> Result<(), String> {
        let views = views_of(mask);
        if views > self.views {
            return Err(format!(
                "view mask 0x{mask:x} names view {}, but the replay GPU's maxMultiviewViewCount \
                 is {}",
                views - 1,
                self.views
            ));
        }
        Ok(())
    }

    fn bindings(&self, first: u32, count: u32) -> Result<(), String> {
        if u64::from(first) + u64::from(count) > u64::from(self.vertex_bindings) {
            return Err(format!(
                "vertex input bindings {first}..+{count} exceed the replay GPU's {}",
                self.vertex_bindings
            ));
        }
        Ok(())
    }

    pub(super) fn pipelines(
        &self,
        p: &vkstream::params::vkCreateGraphicsPipelines,
    ) -> Result<(), String> {
        for ci in p.p_create_infos.iter().flatten() {
            for n in &ci.p_next {
                if let vkstream::PNext::VkPipelineRenderingCreateInfo(r) = n {
                    self.view_mask(r.view_mask)?;
                }
            }
            // Dynamic states vk.xml does not define are refused by the generated enum checks
            // (`checks::counts_and_handles`): lavapipe indexed its state table with a forged one.
            static_viewports(ci)?;
            // One of VkSampleCountFlagBits (-rasterizationSamples-parameter): lavapipe sized
            // its sample arrays by a forged 16384 and crashed.
            if let Some(m) = &ci.p_multisample_state {
                let n = m.rasterization_samples;
                if n.count_ones() != 1 || n > 64 {
                    return Err(format!("rasterizationSamples {n} is not a sample count"));
                }
            }
            if let Some(v) = &ci.p_viewport_state {
                self.viewports("viewports", 0, v.viewport_count)?;
                self.viewports("scissors", 0, v.scissor_count)?;
            }
            let Some(v) = &ci.p_vertex_input_state else {
                continue;
            };
            for b in v.p_vertex_binding_descriptions.iter().flatten() {
                self.bindings(b.binding, 1)?;
            }
            for a in v.p_vertex_attribute_descriptions.iter().flatten() {
                self.bindings(a.binding, 1)?;
                if a.location >= self.vertex_attributes {
                    return Err(format!(
                        "vertex attribute location {} exceeds the replay GPU's {}",
                        a.location, self.vertex_attributes
                    ));
                }
            }
        }
        Ok(())
    }

    fn index(&self, ty: Option<&i32>, index: u32) -> Result<(), String> {
        let max = match ty {
            Some(&TRANSFORM_FEEDBACK_STREAM | &PRIMITIVES_GENERATED) => self.streams,
            Some(_) => 1,
            None => return Ok(()),
        };
        if index >= max {
            return Err(format!(
                "query index {index} is not below {max} (transform feedback streams of the \
                 replay GPU, 1 for other query types)"
            ));
        }
        Ok(())
    }
}

/// Whether `flags` are VK_SHADER_STAGE_ALL or stage bits vk.xml defines.
fn known_stages(flags: u32) -> bool {
    use crate::portability::generated::registry::FLAG_BITS;
    const ALL: u32 = 0x7fff_ffff;
    let known = FLAG_BITS
        .iter()
        .filter(|b| b.0 == "VkShaderStageFlagBits")
        .fold(0x3f, |m, b| m | b.1 as u32);
    flags == ALL || flags & !known == 0
}

/// One past the highest view a view mask names (0: none).
pub(super) fn views_of(mask: u32) -> u32 {
    32 - mask.leading_zeros()
}

const TIMESTAMP: i32 = 2;

/// A query of this pool's type may be begun (timestamps are written, not begun).
fn begun(ty: Option<&i32>, pool: u64) -> Result<(), String> {
    if ty == Some(&TIMESTAMP) {
        return Err(format!(
            "query pool 0x{pool:x} holds timestamps, which are written, not begun"
        ));
    }
    Ok(())
}

impl Compat {
    /// A transform feedback binding: a buffer made for it, the range within the buffer
    /// (lavapipe writes there unchecked).
    fn xfb_binding(
        &self,
        k: usize,
        b: u64,
        offset: Option<u64>,
        size: Option<&u64>,
    ) -> Result<(), String> {
        let Some(&have) = self.buffers.get(&b) else {
            return Ok(());
        };
        if !self.xfb_buffers.contains(&b) {
            return Err(format!(
                "pBuffers {k} (buffer 0x{b:x}) was not created with \
                 VK_BUFFER_USAGE_TRANSFORM_FEEDBACK_BUFFER_BIT_EXT"
            ));
        }
        let offset = offset.unwrap_or(0);
        let end = match size.copied() {
            None | Some(u64::MAX) => Some(offset),
            Some(n) => offset.checked_add(n),
        };
        if offset >= have || end.is_none_or(|e| e > have) {
            return Err(format!(
                "transform feedback binding {k}: bytes {offset}..{} are outside buffer 0x{b:x}, \
                 which holds {have}",
                end.map_or("beyond 2^64".into(), |e| e.to_string())
            ));
        }
        Ok(())
    }

    pub(super) fn limits_before(&self, call: &Call) -> Result<(), String> {
        let l = &self.limits;
        match call {
            Call::vkCmdBindVertexBuffers(p) => l.bindings(p.first_binding, p.binding_count),
            Call::vkCmdBindVertexBuffers2(p) | Call::vkCmdBindVertexBuffers2EXT(p) => {
                l.bindings(p.first_binding, p.binding_count)
            }
            Call::vkCmdBindTransformFeedbackBuffersEXT(p) => {
                if u64::from(p.first_binding) + u64::from(p.binding_count)
                    > u64::from(l.xfb_buffers)
                {
                    return Err(format!(
                        "transform feedback bindings {}..+{} exceed the replay GPU's {}",
                        p.first_binding, p.binding_count, l.xfb_buffers
                    ));
                }
                let offsets = p.p_offsets.as_deref().unwrap_or(&[]);
                let sizes = p.p_sizes.as_deref();
                let buffers = p.p_buffers.iter().flatten().take(p.binding_count as usize);
                for (k, &b) in buffers.enumerate() {
                    if b == 0 {
                        return Err(format!("pBuffers {k} is VK_NULL_HANDLE"));
                    }
                    self.xfb_binding(k, b, offsets.get(k).copied(), sizes.and_then(|s| s.get(k)))?;
                }
                Ok(())
            }
            Call::vkCmdBeginQueryIndexedEXT(p) => {
                begun(self.query_types.get(&p.query_pool), p.query_pool)?;
                self.lavapipe_query(p.command_buffer, p.query_pool, p.query)?;
                l.index(self.query_types.get(&p.query_pool), p.index)
            }
            Call::vkCmdBeginQuery(p) => {
                begun(self.query_types.get(&p.query_pool), p.query_pool)?;
                self.lavapipe_query(p.command_buffer, p.query_pool, p.query)
            }
            Call::vkCmdCopyQueryPoolResults(p) if p.query_count > 0 => {
                let pool = p.query_pool;
                let (Some(&ty), Some(&stats)) =
                    (self.query_types.get(&pool), self.query_stats.get(&pool))
                else {
                    return Ok(());
                };
                let values: u64 = match ty {
                    0 | 2 | PRIMITIVES_GENERATED => 1,
                    1 => u64::from(stats.count_ones()),
                    TRANSFORM_FEEDBACK_STREAM => 2,
                    _ => return Ok(()),
                };
                // Availability and result status each add one value; 64-bit values are 8 bytes.
                let extra = u64::from(p.flags & 0x4 != 0) + u64::from(p.flags & 0x10 != 0);
                let size = if p.flags & 0x1 != 0 { 8 } else { 4 };
                let need = p
                    .stride
                    .checked_mul(u64::from(p.query_count - 1))
                    .and_then(|x| x.checked_add((values + extra) * size))
                    .and_then(|x| x.checked_add(p.dst_offset));
                match self.buffers.get(&p.dst_buffer) {
                    Some(&have) if need.is_none_or(|n| n > have) => Err(format!(
                        "the results of queries {}..+{} need bytes up to {} of buffer 0x{:x}, \
                         which holds {have}",
                        p.first_query,
                        p.query_count,
                        need.map_or("beyond 2^64".into(), |n| n.to_string()),
                        p.dst_buffer
                    )),
                    _ => Ok(()),
                }
            }
            // SPIR-V read before the driver compiles it (`shaders::check_code`).
            Call::vkCreateShaderModule(_) => self.shaders_before(call),
            Call::vkCmdSetViewport(p) => {
                l.viewports("viewports", p.first_viewport, p.viewport_count)
            }
            Call::vkCmdSetScissor(p) => l.viewports("scissors", p.first_scissor, p.scissor_count),
            Call::vkCmdSetViewportWithCount(p) | Call::vkCmdSetViewportWithCountEXT(p) => {
                l.viewports("viewports", 0, p.viewport_count)
            }
            Call::vkCmdSetScissorWithCount(p) | Call::vkCmdSetScissorWithCountEXT(p) => {
                l.viewports("scissors", 0, p.scissor_count)
            }
            Call::vkCmdPushConstants(p) => {
                let end = u64::from(p.offset) + u64::from(p.size);
                if end > l.push_constants {
                    return Err(format!(
                        "push constant bytes {}..+{} exceed the replay GPU's {}",
                        p.offset, p.size, l.push_constants
                    ));
                }
                Ok(())
            }
            Call::vkCmdEndQueryIndexedEXT(p) => {
                l.index(self.query_types.get(&p.query_pool), p.index)
            }
            Call::vkCreateDescriptorSetLayout(p) => {
                for b in p
                    .p_create_info
                    .iter()
                    .flat_map(|i| i.p_bindings.iter().flatten())
                {
                    // Stages vk.xml defines (-descriptorCount-00283; types are the generated enum
                    // checks'): forged ones crashed lavapipe.
                    if b.descriptor_count > 0 && !known_stages(b.stage_flags) {
                        return Err(format!(
                            "binding {} has stage flags 0x{:x}, not shader stages",
                            b.binding, b.stage_flags
                        ));
                    }
                    let n = u64::from(b.descriptor_count);
                    let max = if b.descriptor_type == INLINE_UNIFORM_BLOCK {
                        l.inline_bytes
                    } else {
                        l.descriptors
                    };
                    if n > max {
                        return Err(format!(
                            "binding {} holds {n} descriptors, over the replay GPU's {max}",
                            b.binding
                        ));
                    }
                    if b.p_immutable_samplers
                        .as_ref()
                        .is_some_and(|s| s.len() < b.descriptor_count as usize)
                    {
                        return Err(format!(
                            "binding {} has fewer immutable samplers than descriptors",
                            b.binding
                        ));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A driver quirk, refused on lavapipe only: a query begun inside a render pass instance
    /// before any graphics pipeline is bound crashes its queue thread (valid usage as far as
    /// the specification says; the fuzzer found it with occlusion and transform feedback
    /// stream queries).
    fn lavapipe_query(&self, cb: u64, pool: u64, query: u32) -> Result<(), String> {
        if self.limits.lavapipe && self.no_pipeline_in_pass(cb) {
            return Err(format!(
                "begins query {query} of pool 0x{pool:x} inside a render pass instance before \
                 any graphics pipeline is bound: a lavapipe quirk (its queue thread crashes), so \
                 the replay refuses it on this GPU"
            ));
        }
        Ok(())
    }

    pub(super) fn limits_after(&mut self, call: &Call) {
        if let Call::vkCreateQueryPool(p) = call {
            if let (Some(i), Some(h)) = (&p.p_create_info, p.p_query_pool) {
                self.query_types.insert(h, i.query_type);
                self.query_stats.insert(h, i.pipeline_statistics);
            }
        }
    }
}

/// Viewports and scissors a rasterizing pipeline does not take as dynamic state are read from its
/// viewport state, so they must be there (VUID-VkPipelineViewportStateCreateInfo-pViewports-04130,
/// -pScissors-04131; vk.xml cannot say it): a dynamicStateCount cut by one left vkcube's scissor
/// static with pScissors NULL, and lavapipe read it at the draw.
fn static_viewports(ci: &vkstream::types::VkGraphicsPipelineCreateInfo) -> Result<(), String> {
    const VIEWPORT: i32 = 0;
    const SCISSOR: i32 = 1;
    const VIEWPORT_WITH_COUNT: i32 = 1_000_267_003;
    const SCISSOR_WITH_COUNT: i32 = 1_000_267_004;
    const DISCARD: i32 = 1_000_377_001;
    let dynamic: Vec<i32> = ci
        .p_dynamic_state
        .iter()
        .flat_map(|d| {
            let n = d.dynamic_state_count as usize;
            d.p_dynamic_states.iter().flatten().take(n).copied()
        })
        .collect();
    let has = |s: i32| dynamic.contains(&s);
    let discards = !has(DISCARD)
        && ci
            .p_rasterization_state
            .as_ref()
            .is_some_and(|r| r.rasterizer_discard_enable != 0);
    let Some(vs) = ci.p_viewport_state.as_ref().filter(|_| !discards) else {
        return Ok(());
    };
    let viewports = vs.p_viewports.as_ref().map_or(0, |v| v.len());
    if !has(VIEWPORT) && !has(VIEWPORT_WITH_COUNT) && viewports < vs.viewport_count as usize {
        return Err(format!(
            "viewports are not dynamic state, but pViewports holds {viewports} of its viewportCount {}",
            vs.viewport_count
        ));
    }
    let scissors = vs.p_scissors.as_ref().map_or(0, |v| v.len());
    if !has(SCISSOR) && !has(SCISSOR_WITH_COUNT) && scissors < vs.scissor_count as usize {
        return Err(format!(
            "scissors are not dynamic state, but pScissors holds {scissors} of its scissorCount {}",
            vs.scissor_count
        ));
    }
    Ok(())
}
