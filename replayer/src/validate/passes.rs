//! Images, their views, render passes and framebuffers: a view within its image (subresource
//! range, view type, format, aspect), a render pass's attachment references within its
//! attachments, a framebuffer's views matching its render pass and large enough, and a render
//! pass begun with a framebuffer made for a compatible one over an area inside it, dynamic
//! rendering's attachments made for their roles, of one sample count and covering the render
//! area and layers, and a layout query's subresource within its image. Each closed a lavapipe
//! crash the fuzzer found (part of [`Compat`]).

use vkstream::types::{VkImageSubresource, VkImageViewCreateInfo, VkRenderPassBeginInfo};
use vkstream::{Call, PNext};

use super::compat::{backed, Compat, Live, Memory};
use super::limits::views_of;

#[derive(Clone, Copy, Debug)]
pub(super) struct Image {
    ty: i32,
    format: i32,
    flags: u32,
    mips: u32,
    layers: u32,
    extent: [u32; 3],
    samples: u32,
    /// Its usage (with its separate stencil usage, if any).
    usage: u32,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct View {
    image: u64,
    format: i32,
    samples: u32,
    /// Width and height of its first mip level, and its layer count.
    extent: [u32; 2],
    layers: u32,
}

/// Attachment (format, samples) lists are compared for render pass compatibility.
pub(super) struct Pass {
    attachments: Box<[(i32, u32)]>,
    /// Attachments a subpass uses (the first 64): these must cover the framebuffer.
    used: u64,
    /// Clear values a begin must give (one past the last attachment that clears).
    clears: u32,
    /// One past the highest view of its subpasses' view masks (0: not multiview).
    views: u32,
    subpasses: u32,
}

pub(super) struct Framebuffer {
    attachments: Box<[(i32, u32)]>,
    views: Box<[u64]>,
    width: u32,
    height: u32,
    imageless: bool,
}

const UNUSED: u32 = !0;
const REMAINING: u32 = !0;
const MUTABLE_FORMAT: u32 = 0x8;
const CUBE_COMPATIBLE: u32 = 0x10;
const ARRAY_2D_COMPATIBLE: u32 = 0x20;
const VIEW_2D_COMPATIBLE: u32 = 0x2_0000;
const SWAPCHAIN_MUTABLE_FORMAT: u32 = 0x4;
const IMAGELESS: u32 = 0x1;
const LOAD_OP_CLEAR: i32 = 1;
const COLOR: u32 = 0x1;
const DEPTH: u32 = 0x2;
const STENCIL: u32 = 0x4;
const COLOR_ATTACHMENT: u32 = 0x10;
const DEPTH_STENCIL_ATTACHMENT: u32 = 0x20;
/// VK_IMAGE_ASPECT_MEMORY_PLANE_0..3_BIT_EXT.
const MEMORY_PLANES: u32 = 0x780;
/// First multi-planar (YCbCr) format: their aspects are planes, not checked here.
const PLANAR: i32 = 1_000_156_000;

/// `count` (or REMAINING) from `base` within `n`; the resolved count.
fn span(base: u32, count: u32, n: u32) -> Option<u32> {
    if base >= n {
        return None;
    }
    let c = if count == REMAINING { n - base } else { count };
    (c > 0 && u64::from(base) + u64::from(c) <= u64::from(n)).then_some(c)
}

/// Aspects a format has, where known: depth and stencil formats, other core formats are color.
fn aspects(format: i32) -> Option<u32> {
    match format {
        0 => None,
        124..=126 => Some(DEPTH),
        127 => Some(STENCIL),
        128..=130 => Some(DEPTH | STENCIL),
        f if f < PLANAR => Some(COLOR),
        _ => None,
    }
}

impl Compat {
    pub(super) fn passes_before(
        &self,
        call: &Call,
        live: &Live,
        memory: &Memory,
    ) -> Result<(), String> {
        match call {
            Call::vkCreateImageView(p) => match &p.p_create_info {
                Some(ci) if ci.image == 0 => Err("image is VK_NULL_HANDLE".into()),
                Some(ci) => {
                    backed("image", ci.image, live, memory)?;
                    self.view(ci).map(|_| ())
                }
                None => Ok(()),
            },
            Call::vkCreateRenderPass(p) => {
                let Some(ci) = &p.p_create_info else {
                    return Ok(());
                };
                no_subpasses(ci.subpass_count)?;
                for n in &ci.p_next {
                    if let PNext::VkRenderPassMultiviewCreateInfo(m) = n {
                        for &mask in m.p_view_masks.iter().flatten() {
                            self.limits.view_mask(mask)?;
                        }
                    }
                }
                let n = ci.p_attachments.as_ref().map_or(0, Vec::len) as u32;
                for s in ci.p_subpasses.iter().flatten() {
                    let refs = s.p_input_attachments.iter().flatten();
                    let refs = refs.chain(s.p_color_attachments.iter().flatten());
                    let refs = refs.chain(s.p_resolve_attachments.iter().flatten());
                    let refs = refs.chain(s.p_depth_stencil_attachment.as_deref());
                    for r in refs {
                        check_ref(r.attachment, n)?;
                    }
                    for a in s.p_preserve_attachments.iter().flatten() {
                        check_ref(*a, n)?;
                    }
                }
                Ok(())
            }
            Call::vkCreateRenderPass2(p) | Call::vkCreateRenderPass2KHR(p) => {
                let Some(ci) = &p.p_create_info else {
                    return Ok(());
                };
                no_subpasses(ci.subpass_count)?;
                let n = ci.p_attachments.as_ref().map_or(0, Vec::len) as u32;
                for s in ci.p_subpasses.iter().flatten() {
                    self.limits.view_mask(s.view_mask)?;
                    let refs = s.p_input_attachments.iter().flatten();
                    let refs = refs.chain(s.p_color_attachments.iter().flatten());
                    let refs = refs.chain(s.p_resolve_attachments.iter().flatten());
                    let refs = refs.chain(s.p_depth_stencil_attachment.as_deref());
                    for r in refs {
                        check_ref(r.attachment, n)?;
                    }
                    for a in s.p_preserve_attachments.iter().flatten() {
                        check_ref(*a, n)?;
                    }
                }
                Ok(())
            }
            Call::vkCreateFramebuffer(p) => {
                let Some(ci) = &p.p_create_info else {
                    return Ok(());
                };
                if ci.render_pass == 0 {
                    return Err("renderPass is VK_NULL_HANDLE".into());
                }
                let Some(rp) = self.passes.get(&ci.render_pass) else {
                    return Ok(());
                };
                if ci.flags & IMAGELESS != 0 {
                    return Ok(());
                }
                let views = ci.p_attachments.as_deref().unwrap_or(&[]);
                if ci.attachment_count as usize != rp.attachments.len() {
                    return Err(format!(
                        "attachmentCount is {} but render pass 0x{:x} has {} attachments",
                        ci.attachment_count,
                        ci.render_pass,
                        rp.attachments.len()
                    ));
                }
                for (k, (v, a)) in views.iter().zip(rp.attachments.iter()).enumerate() {
                    let Some(view) = self.views.get(v) else {
                        if *v == 0 {
                            return Err(format!("attachment {k} is VK_NULL_HANDLE"));
                        }
                        continue;
                    };
                    if (view.format, view.samples) != *a {
                        return Err(format!(
                            "attachment {k} (image view 0x{v:x}, format {} with {} samples) does \
                             not match render pass 0x{:x} (format {} with {} samples)",
                            view.format, view.samples, ci.render_pass, a.0, a.1
                        ));
                    }
                    let used = k >= 64 || rp.used & (1 << k) != 0;
                    // A multiview pass renders each view to its layer
                    // (VUID-VkFramebufferCreateInfo-renderPass-04536).
                    let layers = if rp.views == 0 { ci.layers } else { rp.views };
                    let small = view.extent[0] < ci.width
                        || view.extent[1] < ci.height
                        || view.layers < layers;
                    if used && small {
                        return Err(format!(
                            "attachment {k} (image view 0x{v:x}, {}x{} with {} layers) is \
                             smaller than the framebuffer ({}x{} with {layers} layers)",
                            view.extent[0], view.extent[1], view.layers, ci.width, ci.height,
                        ));
                    }
                }
                Ok(())
            }
            Call::vkCmdBeginRenderPass(p) => {
                self.begin(p.p_render_pass_begin.as_deref(), live, memory)
            }
            Call::vkCmdBeginRendering(p) | Call::vkCmdBeginRenderingKHR(p) => {
                let Some(r) = &p.p_rendering_info else {
                    return Ok(());
                };
                let colors = r.p_color_attachments.iter().flatten();
                for (k, a) in colors.clone().enumerate() {
                    self.attachment(a.image_view, COLOR_ATTACHMENT, None)
                        .map_err(|e| format!("color attachment {k}: {e}"))?;
                }
                if let Some(a) = &r.p_depth_attachment {
                    self.attachment(a.image_view, DEPTH_STENCIL_ATTACHMENT, Some(DEPTH))
                        .map_err(|e| format!("depth attachment: {e}"))?;
                }
                if let Some(a) = &r.p_stencil_attachment {
                    self.attachment(a.image_view, DEPTH_STENCIL_ATTACHMENT, Some(STENCIL))
                        .map_err(|e| format!("stencil attachment: {e}"))?;
                }
                let views = (colors.enumerate())
                    .map(|(k, a)| (k as u32, a))
                    .chain(r.p_depth_attachment.as_deref().map(|a| (DEPTH_ROLE, a)))
                    .chain(r.p_stencil_attachment.as_deref().map(|a| (STENCIL_ROLE, a)))
                    .map(|(role, a)| (role, a.image_view));
                let a = &r.render_area;
                let right = i64::from(a.offset.x) + i64::from(a.extent.width);
                let bottom = i64::from(a.offset.y) + i64::from(a.extent.height);
                let group = r
                    .p_next
                    .iter()
                    .any(|n| matches!(n, PNext::VkDeviceGroupRenderPassBeginInfo(_)));
                self.limits.view_mask(r.view_mask)?;
                // Each view is rendered to the attachments' layer of its index.
                let layers = match r.view_mask {
                    0 => r.layer_count,
                    m => views_of(m),
                };
                // The first attachment's (role, view, samples).
                let mut first: Option<(u32, u64, u32)> = None;
                for (role, v) in views {
                    let Some(view) = self.views.get(&v) else {
                        continue;
                    };
                    match first {
                        None => first = Some((role, v, view.samples)),
                        Some((r0, v0, s0)) if s0 != view.samples && !self.mixed_samples => {
                            return Err(samples_differ((role, v, view.samples), (r0, v0, s0)));
                        }
                        _ => {}
                    }
                    if layers > view.layers {
                        return Err(format!(
                            "renders {layers} layers to image view 0x{v:x} of {}",
                            view.layers
                        ));
                    }
                    let [w, h] = view.extent;
                    if !group
                        && (a.offset.x < 0
                            || a.offset.y < 0
                            || right > i64::from(w)
                            || bottom > i64::from(h))
                    {
                        return Err(format!(
                            "render area ({},{})+{}x{} is outside image view 0x{v:x} of {w}x{h}",
                            a.offset.x, a.offset.y, a.extent.width, a.extent.height
                        ));
                    }
                }
                Ok(())
            }
            Call::vkCmdBeginRenderPass2(p) | Call::vkCmdBeginRenderPass2KHR(p) => {
                self.begin(p.p_render_pass_begin.as_deref(), live, memory)
            }
            Call::vkGetImageSubresourceLayout(p) => {
                self.subresource(p.image, p.p_subresource.as_deref())
            }
            Call::vkGetImageSubresourceLayout2EXT(p) => self.subresource(
                p.image,
                p.p_subresource.as_deref().map(|s| &s.image_subresource),
            ),
            _ => self.cmds_before(call),
        }
    }

    /// A view's checks; its record when they pass.
    fn view(&self, ci: &VkImageViewCreateInfo) -> Result<Option<View>, String> {
        let Some(img) = self.images.get(&ci.image) else {
            return Ok(None);
        };
        let r = &ci.subresource_range;
        if span(r.base_mip_level, r.level_count, img.mips).is_none() {
            return Err(format!(
                "mip levels {}..+{} are outside image 0x{:x} of {} levels",
                r.base_mip_level, r.level_count as i32, ci.image, img.mips
            ));
        }
        let (vt, it) = (ci.view_type, img.ty);
        // 1D image: 1D, 1D array; 2D: 2D, 2D array, cube(s) if cube compatible; 3D: 3D, 2D
        // (array) if 2D compatible.
        let ok = match it {
            0 => matches!(vt, 0 | 4),
            1 => matches!(vt, 1 | 5) || (matches!(vt, 3 | 6) && img.flags & CUBE_COMPATIBLE != 0),
            2 => {
                vt == 2
                    || (matches!(vt, 1 | 5)
                        && img.flags & (ARRAY_2D_COMPATIBLE | VIEW_2D_COMPATIBLE) != 0)
            }
            _ => true,
        };
        if !ok {
            return Err(format!(
                "view type {vt} does not fit image 0x{:x} of type {it}",
                ci.image
            ));
        }
        let depth = img.extent[2] >> r.base_mip_level.min(31);
        let layers_of = if it == 2 && vt != 2 {
            depth.max(1)
        } else {
            img.layers
        };
        let Some(layers) = span(r.base_array_layer, r.layer_count, layers_of) else {
            return Err(format!(
                "array layers {}..+{} are outside image 0x{:x} of {layers_of} layers",
                r.base_array_layer, r.layer_count as i32, ci.image
            ));
        };
        if img.flags & MUTABLE_FORMAT == 0 && ci.format != img.format && ci.format != 0 {
            return Err(format!(
                "format {} differs from image 0x{:x}'s {} (not created mutable)",
                ci.format, ci.image, img.format
            ));
        }
        if let Some(a) = aspects(img.format) {
            if r.aspect_mask == 0 || r.aspect_mask & !a != 0 {
                return Err(format!(
                    "aspect mask 0x{:x} does not fit image 0x{:x}'s format {}",
                    r.aspect_mask, ci.image, img.format
                ));
            }
        }
        let mip = r.base_mip_level.min(31);
        Ok(Some(View {
            image: ci.image,
            format: if ci.format == 0 {
                img.format
            } else {
                ci.format
            },
            samples: img.samples,
            extent: [(img.extent[0] >> mip).max(1), (img.extent[1] >> mip).max(1)],
            layers,
        }))
    }

    /// An attachment of dynamic rendering made for its role: its image has `usage`
    /// (VUID-VkRenderingInfo-colorAttachmentCount-06087, -pDepthAttachment-06088,
    /// -pStencilAttachment-06089) and its format the `aspect` (-pDepthAttachment-06547,
    /// -pStencilAttachment-06548). A depth view rendered as color crashed lavapipe.
    fn attachment(&self, view: u64, usage: u32, aspect: Option<u32>) -> Result<(), String> {
        let Some(v) = self.views.get(&view) else {
            return Ok(());
        };
        if let Some(img) = self.images.get(&v.image) {
            if img.usage & usage == 0 {
                let role = if usage == COLOR_ATTACHMENT {
                    "VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT"
                } else {
                    "VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT"
                };
                return Err(format!(
                    "image view 0x{view:x} is of image 0x{:x}, which was not created with {role}",
                    v.image
                ));
            }
        }
        if let (Some(want), Some(has)) = (aspect, aspects(v.format)) {
            if has & want == 0 {
                return Err(format!(
                    "image view 0x{view:x} has format {}, without the {} aspect",
                    v.format,
                    if want == DEPTH { "depth" } else { "stencil" }
                ));
            }
        }
        Ok(())
    }

    /// A pipeline made for a subpass of its render pass (VUID-VkGraphicsPipelineCreateInfo-
    /// renderPass-06046): lavapipe read subpass 4194304 of a pass with one and crashed.
    pub(super) fn pipeline_subpass(&self, render_pass: u64, subpass: u32) -> Result<(), String> {
        match self.passes.get(&render_pass) {
            Some(rp) if subpass >= rp.subpasses => Err(format!(
                "subpass {subpass} is not one of render pass 0x{render_pass:x}'s {}",
                rp.subpasses
            )),
            _ => Ok(()),
        }
    }

    /// The subresource a layout query names lies in its image and is one aspect of its format
    /// (VUID-vkGetImageSubresourceLayout-mipLevel-01716, -arrayLayer-01717, -aspectMask-00997,
    /// -format-04461..04464): lavapipe indexes its levels with it (a fuzz crash).
    fn subresource(&self, image: u64, s: Option<&VkImageSubresource>) -> Result<(), String> {
        let (Some(img), Some(s)) = (self.images.get(&image), s) else {
            return Ok(());
        };
        if s.mip_level >= img.mips {
            return Err(format!(
                "mip level {} is outside image 0x{image:x} of {} levels",
                s.mip_level, img.mips
            ));
        }
        if s.array_layer >= img.layers {
            return Err(format!(
                "array layer {} is outside image 0x{image:x} of {} layers",
                s.array_layer, img.layers
            ));
        }
        if s.aspect_mask.count_ones() != 1 {
            return Err(format!(
                "aspect mask 0x{:x} must name exactly one aspect",
                s.aspect_mask
            ));
        }
        // Memory planes (DRM format modifiers) are the tiling's, not the format's.
        let plane = s.aspect_mask & MEMORY_PLANES != 0;
        if let Some(a) = aspects(img.format).filter(|_| !plane) {
            if s.aspect_mask & !a != 0 {
                return Err(format!(
                    "aspect mask 0x{:x} does not fit image 0x{image:x}'s format {}",
                    s.aspect_mask, img.format
                ));
            }
        }
        Ok(())
    }

    fn begin(
        &self,
        b: Option<&VkRenderPassBeginInfo>,
        live: &Live,
        memory: &Memory,
    ) -> Result<(), String> {
        let Some(b) = b else {
            return Ok(());
        };
        if b.render_pass == 0 || b.framebuffer == 0 {
            return Err("the render pass or framebuffer to begin is VK_NULL_HANDLE".into());
        }
        let (Some(rp), Some(fb)) = (
            self.passes.get(&b.render_pass),
            self.framebuffers.get(&b.framebuffer),
        ) else {
            return Ok(());
        };
        // The memory of an attachment freed since the framebuffer was made.
        for v in fb.views.iter() {
            if let Some(view) = self.views.get(v) {
                backed("the image of an attachment", view.image, live, memory)?;
            }
        }
        if fb.attachments != rp.attachments {
            return Err(format!(
                "framebuffer 0x{:x} was made for a render pass not compatible with render pass \
                 0x{:x} (attachments differ)",
                b.framebuffer, b.render_pass
            ));
        }
        let mut group = false;
        for n in &b.p_next {
            match n {
                PNext::VkRenderPassAttachmentBeginInfo(a) => {
                    let views = a.p_attachments.as_deref().unwrap_or(&[]);
                    if views.len() != rp.attachments.len() {
                        return Err(format!(
                            "gives {} attachments for a render pass of {}",
                            views.len(),
                            rp.attachments.len()
                        ));
                    }
                    for (k, v) in views.iter().enumerate() {
                        match self.views.get(v) {
                            None if *v == 0 => {
                                return Err(format!("attachment {k} is VK_NULL_HANDLE"))
                            }
                            Some(view) if (view.format, view.samples) != rp.attachments[k] => {
                                return Err(format!(
                                    "attachment {k} (image view 0x{v:x}) does not match render \
                                     pass 0x{:x}",
                                    b.render_pass
                                ))
                            }
                            _ => {}
                        }
                    }
                }
                PNext::VkDeviceGroupRenderPassBeginInfo(_) => group = true,
                _ => {}
            }
        }
        if fb.imageless
            && !b
                .p_next
                .iter()
                .any(|n| matches!(n, PNext::VkRenderPassAttachmentBeginInfo(_)))
        {
            return Err(format!(
                "framebuffer 0x{:x} is imageless but no attachments are given",
                b.framebuffer
            ));
        }
        let a = &b.render_area;
        let right = i64::from(a.offset.x) + i64::from(a.extent.width);
        let bottom = i64::from(a.offset.y) + i64::from(a.extent.height);
        if !group
            && (a.offset.x < 0
                || a.offset.y < 0
                || right > i64::from(fb.width)
                || bottom > i64::from(fb.height))
        {
            return Err(format!(
                "render area ({},{})+{}x{} is outside framebuffer 0x{:x} of {}x{}",
                a.offset.x,
                a.offset.y,
                a.extent.width,
                a.extent.height,
                b.framebuffer,
                fb.width,
                fb.height
            ));
        }
        if b.clear_value_count < rp.clears {
            return Err(format!(
                "clearValueCount is {} but render pass 0x{:x} clears attachment {}",
                b.clear_value_count,
                b.render_pass,
                rp.clears - 1
            ));
        }
        Ok(())
    }

    pub(super) fn passes_after(&mut self, call: &Call) {
        match call {
            Call::vkCreateImage(p) => {
                if let (Some(i), Some(h)) = (&p.p_create_info, p.p_image) {
                    let e = &i.extent;
                    self.images.insert(
                        h,
                        Image {
                            ty: i.image_type,
                            format: i.format,
                            flags: i.flags,
                            mips: i.mip_levels,
                            layers: i.array_layers,
                            extent: [e.width, e.height, e.depth],
                            samples: i.samples,
                            usage: i.usage
                                | i.p_next
                                    .iter()
                                    .map(|n| match n {
                                        PNext::VkImageStencilUsageCreateInfo(u) => u.stencil_usage,
                                        _ => 0,
                                    })
                                    .fold(0, |a, b| a | b),
                        },
                    );
                }
            }
            Call::vkCreateSwapchainKHR(p) => {
                if let (Some(i), Some(h)) = (&p.p_create_info, p.p_swapchain) {
                    let e = &i.image_extent;
                    let mutable = i.flags & SWAPCHAIN_MUTABLE_FORMAT != 0;
                    self.swapchains.insert(
                        h,
                        Image {
                            ty: 1,
                            format: i.image_format,
                            flags: if mutable { MUTABLE_FORMAT } else { 0 },
                            mips: 1,
                            layers: i.image_array_layers,
                            extent: [e.width, e.height, 1],
                            samples: 1,
                            usage: i.image_usage,
                        },
                    );
                }
            }
            Call::vkGetSwapchainImagesKHR(p) => {
                if let Some(&img) = self.swapchains.get(&p.swapchain) {
                    for h in p.p_swapchain_images.iter().flatten() {
                        self.images.insert(*h, img);
                    }
                }
            }
            Call::vkCreateDevice(p) => {
                let ci = p.p_create_info.as_deref();
                let names = ci.iter().flat_map(|i| i.pp_enabled_extension_names.iter());
                let ext = names.flatten().any(|n| {
                    n == "VK_AMD_mixed_attachment_samples" || n == "VK_NV_framebuffer_mixed_samples"
                });
                let feature = ci.iter().flat_map(|i| i.p_next.iter()).any(|n| {
                    matches!(n, PNext::VkPhysicalDeviceMultisampledRenderToSingleSampledFeaturesEXT(f)
                        if f.multisampled_render_to_single_sampled != 0)
                });
                self.mixed_samples |= ext || feature;
                self.cmds_after(call);
            }
            Call::vkCreateImageView(p) => {
                if let (Some(ci), Some(h)) = (&p.p_create_info, p.p_view) {
                    if let Ok(Some(v)) = self.view(ci) {
                        self.views.insert(h, v);
                    }
                }
            }
            Call::vkCreateRenderPass(p) => {
                let (Some(ci), Some(h)) = (&p.p_create_info, p.p_render_pass) else {
                    return;
                };
                let atts = ci.p_attachments.iter().flatten();
                let atts = atts.take(ci.attachment_count as usize);
                let mut pass = Pass {
                    subpasses: ci.subpass_count,
                    attachments: atts.clone().map(|a| (a.format, a.samples)).collect(),
                    used: 0,
                    clears: clears(atts.map(|a| (a.format, a.load_op, a.stencil_load_op))),
                    views: ci
                        .p_next
                        .iter()
                        .filter_map(|n| match n {
                            PNext::VkRenderPassMultiviewCreateInfo(m) => m.p_view_masks.as_ref(),
                            _ => None,
                        })
                        .flatten()
                        .map(|&m| views_of(m))
                        .max()
                        .unwrap_or(0),
                };
                for s in ci.p_subpasses.iter().flatten() {
                    let refs = s.p_input_attachments.iter().flatten();
                    let refs = refs.chain(s.p_color_attachments.iter().flatten());
                    let refs = refs.chain(s.p_resolve_attachments.iter().flatten());
                    let refs = refs.chain(s.p_depth_stencil_attachment.as_deref());
                    pass.used |= refs.fold(0, |m, r| m | bit(r.attachment));
                }
                self.passes.insert(h, pass);
            }
            Call::vkCreateRenderPass2(p) | Call::vkCreateRenderPass2KHR(p) => {
                let (Some(ci), Some(h)) = (&p.p_create_info, p.p_render_pass) else {
                    return;
                };
                let atts = ci.p_attachments.iter().flatten();
                let atts = atts.take(ci.attachment_count as usize);
                let mut pass = Pass {
                    subpasses: ci.subpass_count,
                    attachments: atts.clone().map(|a| (a.format, a.samples)).collect(),
                    used: 0,
                    clears: clears(atts.map(|a| (a.format, a.load_op, a.stencil_load_op))),
                    views: ci
                        .p_subpasses
                        .iter()
                        .flatten()
                        .map(|s| views_of(s.view_mask))
                        .max()
                        .unwrap_or(0),
                };
                for s in ci.p_subpasses.iter().flatten() {
                    let refs = s.p_input_attachments.iter().flatten();
                    let refs = refs.chain(s.p_color_attachments.iter().flatten());
                    let refs = refs.chain(s.p_resolve_attachments.iter().flatten());
                    let refs = refs.chain(s.p_depth_stencil_attachment.as_deref());
                    pass.used |= refs.fold(0, |m, r| m | bit(r.attachment));
                }
                self.passes.insert(h, pass);
            }
            Call::vkCreateFramebuffer(p) => {
                let (Some(ci), Some(h)) = (&p.p_create_info, p.p_framebuffer) else {
                    return;
                };
                if let Some(rp) = self.passes.get(&ci.render_pass) {
                    let fb = Framebuffer {
                        attachments: rp.attachments.clone(),
                        views: ci
                            .p_attachments
                            .iter()
                            .flatten()
                            .take(ci.attachment_count as usize)
                            .copied()
                            .collect(),
                        width: ci.width,
                        height: ci.height,
                        imageless: ci.flags & IMAGELESS != 0,
                    };
                    self.framebuffers.insert(h, fb);
                }
            }
            _ => self.cmds_after(call),
        }
    }
}

/// Roles of dynamic rendering's attachments other than color (color: its index).
const DEPTH_ROLE: u32 = u32::MAX - 1;
const STENCIL_ROLE: u32 = u32::MAX;

fn role(r: u32) -> String {
    match r {
        DEPTH_ROLE => "depth attachment".into(),
        STENCIL_ROLE => "stencil attachment".into(),
        k => format!("color attachment {k}"),
    }
}

/// The error for attachment `(role, view, samples)` of a dynamic render pass instance whose
/// sample count is not that of an earlier one: without mixed samples enabled they must be
/// equal (VUID-VkRenderingInfo-multisampledRenderToSingleSampled-06857). lavapipe rendered 4
/// samples into a 1-sample depth view swapped in under 4-sample color, writing past its image
/// (heap corruption, SIGSEGV in its queue thread).
fn samples_differ(a: (u32, u64, u32), first: (u32, u64, u32)) -> String {
    format!(
        "{}: image view 0x{:x} has sample count {}, but {} (image view 0x{:x}) has sample \
         count {}: the attachments of a render pass instance have one sample count",
        role(a.0),
        a.1,
        a.2,
        role(first.0),
        first.1,
        first.2
    )
}

/// A render pass has a subpass (VUID-VkRenderPassCreateInfo-subpassCount-arraylength,
/// VkRenderPassCreateInfo2-subpassCount-arraylength): lavapipe crashed making one with none.
fn no_subpasses(n: u32) -> Result<(), String> {
    if n == 0 {
        return Err("subpassCount is 0: a render pass has at least one subpass".into());
    }
    Ok(())
}

fn check_ref(a: u32, n: u32) -> Result<(), String> {
    if a != UNUSED && a >= n {
        return Err(format!(
            "a subpass refers to attachment {a} of a render pass with {n}"
        ));
    }
    Ok(())
}

fn bit(a: u32) -> u64 {
    if a < 64 {
        1 << a
    } else {
        0
    }
}

/// One past the last attachment that clears (its stencil counts where its format has one).
fn clears(ops: impl Iterator<Item = (i32, i32, i32)>) -> u32 {
    let mut n = 0;
    for (k, (format, load, stencil)) in ops.enumerate() {
        let stencil = stencil == LOAD_OP_CLEAR && aspects(format).is_some_and(|a| a & STENCIL != 0);
        if load == LOAD_OP_CLEAR || stencil {
            n = k as u32 + 1;
        }
    }
    n
}
