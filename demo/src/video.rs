//! Result-status-only queries (VK_KHR_video_queue) on a video decode queue.
//!
//! One H.264 decode session decodes, every frame, a tiny IDR picture written
//! here bit by bit: one slice of I_PCM macroblocks, so the picture is its own
//! raw samples and the decoder has no prediction or transform to get wrong.
//! The decode sits inside a VK_QUERY_TYPE_RESULT_STATUS_ONLY_KHR query whose
//! status must be COMPLETE; a second query, only reset, must read NOT_READY.
//! Where the decode queue can copy, the decoded samples are read back and
//! compared with the bitstream's.

use crate::gpu::{Buffer, Gpu};
use crate::report::{Report, Rule};
use anyhow::{bail, Context as _, Result};
use ash::vk;
use ash::vk::native as sv;
use std::ffi::CStr;
use std::ptr;

mod probe;

pub use probe::probe;

pub const QUERY: &str = "result-status-only query";

/// Picture-order and frame-number fields are 4 bits wide (the minimum).
const LOG2_MAX_FRAME_NUM: u32 = 4;
const LOG2_MAX_POC_LSB: u32 = 4;

/// What the device offers for the H.264 decode path, found before the
/// device is created (its extensions and queue depend on it).
#[derive(Clone, Debug, Default)]
pub enum VideoSupport {
    #[default]
    Unchecked,
    /// What is missing, for the `skipped:` line.
    Missing(String),
    Ready(Box<Probe>),
}

#[derive(Clone, Debug)]
pub struct Probe {
    pub family: u32,
    pub family_flags: vk::QueueFlags,
    pub decode_families: usize,
    pub profile_idc: sv::StdVideoH264ProfileIdc,
    pub level_idc: sv::StdVideoH264LevelIdc,
    pub extent: vk::Extent2D,
    pub size_align: u64,
    /// DPB and output share one image (DPB_AND_OUTPUT_COINCIDE).
    pub coincide: bool,
    pub dpb_format: vk::Format,
    pub dst_format: vk::Format,
    /// The output image can be copied out (TRANSFER_SRC usage supported and
    /// the decode family has TRANSFER).
    pub readback: bool,
    pub header_name: String,
    pub header_version: u32,
}

/// Handles the device side needs; created with the device.
pub struct VideoDevice {
    pub family: u32,
    pub queue: vk::Queue,
    pub vq: ash::khr::video_queue::Device,
    pub dq: ash::khr::video_decode_queue::Device,
}

fn has(list: &[vk::ExtensionProperties], name: &CStr) -> bool {
    list.iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(name))
}

fn h264_profile(idc: sv::StdVideoH264ProfileIdc) -> vk::VideoDecodeH264ProfileInfoKHR<'static> {
    vk::VideoDecodeH264ProfileInfoKHR::default()
        .std_profile_idc(idc)
        .picture_layout(vk::VideoDecodeH264PictureLayoutFlagsKHR::PROGRESSIVE)
}

fn base_profile() -> vk::VideoProfileInfoKHR<'static> {
    vk::VideoProfileInfoKHR::default()
        .video_codec_operation(vk::VideoCodecOperationFlagsKHR::DECODE_H264)
        .chroma_subsampling(vk::VideoChromaSubsamplingFlagsKHR::TYPE_420)
        .luma_bit_depth(vk::VideoComponentBitDepthFlagsKHR::TYPE_8)
        .chroma_bit_depth(vk::VideoComponentBitDepthFlagsKHR::TYPE_8)
}

fn round_up(v: u32, to: u32) -> u32 {
    v.div_ceil(to.max(1)) * to.max(1)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Coded size: at least one macroblock and the device minimum, whole
/// macroblocks, and a multiple of the picture access granularity.
pub fn coded_extent(min: vk::Extent2D, granularity: vk::Extent2D) -> vk::Extent2D {
    let step = |g: u32| {
        let g = g.max(1);
        16 / gcd(16, g) * g
    };
    vk::Extent2D {
        width: round_up(min.width.max(16), step(granularity.width)),
        height: round_up(min.height.max(16), step(granularity.height)),
    }
}

struct VideoImage {
    image: vk::Image,
    memory: vk::DeviceMemory,
    view: vk::ImageView,
}

pub struct Video {
    probe: Probe,
    pool: vk::CommandPool,
    session: vk::VideoSessionKHR,
    session_memory: Vec<vk::DeviceMemory>,
    params: vk::VideoSessionParametersKHR,
    dst: VideoImage,
    /// Separate DPB image when DPB and output may not coincide.
    dpb: Option<VideoImage>,
    bitstream: Buffer,
    range: u64,
    queries: vk::QueryPool,
    readback: Option<Buffer>,
    /// Samples the bitstream carries: luma, then interleaved CbCr.
    expected: Vec<u8>,
}

impl Video {
    pub fn new(gpu: &Gpu, report: &mut Report) -> Result<Option<Self>> {
        let probe = match &gpu.support.video {
            VideoSupport::Ready(p) => (**p).clone(),
            VideoSupport::Missing(needs) => {
                report.skip(QUERY, needs);
                return Ok(None);
            }
            VideoSupport::Unchecked => {
                report.skip(QUERY, "a video decode probe (not run)");
                return Ok(None);
            }
        };
        let Some(vd) = &gpu.video else {
            bail!("video decode probed ready but no decode queue was created");
        };
        let d = &gpu.device;
        report.value(
            "video decode family: queryResultStatusSupport",
            1,
            Rule::Exact(1),
            "VkQueueFamilyQueryResultStatusPropertiesKHR of the chosen H.264 decode family",
        );
        report.info(format!(
            "video decode: family {} ({:?}) of {} decode famil(ies), H.264 profile_idc {}, {}x{}, \
             DPB and output {}, {:?}, {} v{}",
            probe.family,
            probe.family_flags,
            probe.decode_families,
            probe.profile_idc,
            probe.extent.width,
            probe.extent.height,
            if probe.coincide {
                "coincide"
            } else {
                "distinct"
            },
            probe.dst_format,
            probe.header_name,
            format_args!(
                "{}.{}.{}",
                vk::api_version_major(probe.header_version),
                vk::api_version_minor(probe.header_version),
                vk::api_version_patch(probe.header_version)
            ),
        ));

        let mut hp = h264_profile(probe.profile_idc);
        let mut profile = base_profile().push_next(&mut hp);
        let profiles = [profile];

        let pool = unsafe {
            d.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(vd.family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
        }
        .context("vkCreateCommandPool (video decode family)")?;

        // Everything below is owned by `v` as soon as it exists, so an error
        // part-way still frees what was made.
        let mut v = Video {
            probe: probe.clone(),
            pool,
            session: vk::VideoSessionKHR::null(),
            session_memory: Vec::new(),
            params: vk::VideoSessionParametersKHR::null(),
            dst: VideoImage {
                image: vk::Image::null(),
                memory: vk::DeviceMemory::null(),
                view: vk::ImageView::null(),
            },
            dpb: None,
            bitstream: Buffer {
                buffer: vk::Buffer::null(),
                memory: vk::DeviceMemory::null(),
                ptr: ptr::null_mut(),
                size: 0,
            },
            range: 0,
            queries: vk::QueryPool::null(),
            readback: None,
            expected: Vec::new(),
        };
        if let Err(e) = v.create(gpu, vd, &profiles, &mut profile) {
            v.destroy(gpu);
            return Err(e);
        }
        Ok(Some(v))
    }

    fn create(
        &mut self,
        gpu: &Gpu,
        vd: &VideoDevice,
        profiles: &[vk::VideoProfileInfoKHR],
        profile: &mut vk::VideoProfileInfoKHR,
    ) -> Result<()> {
        let d = &gpu.device;
        let p = &self.probe;
        let vq = vd.vq.fp();

        // Session and its memory.
        let mut header = vk::ExtensionProperties {
            spec_version: p.header_version,
            ..Default::default()
        };
        for (dst, src) in header
            .extension_name
            .iter_mut()
            .zip(p.header_name.as_bytes())
        {
            *dst = *src as std::ffi::c_char;
        }
        let sci = vk::VideoSessionCreateInfoKHR::default()
            .queue_family_index(vd.family)
            .video_profile(&profiles[0])
            .picture_format(p.dst_format)
            .max_coded_extent(p.extent)
            .reference_picture_format(p.dpb_format)
            .max_dpb_slots(1)
            .max_active_reference_pictures(1)
            .std_header_version(&header);
        let r = unsafe {
            (vq.create_video_session_khr)(d.handle(), &sci, ptr::null(), &mut self.session)
        };
        if r != vk::Result::SUCCESS {
            bail!("vkCreateVideoSessionKHR: {r}");
        }
        gpu.name_object(self.session, "h264 decode session");
        let mut n = 0u32;
        let r = unsafe {
            (vq.get_video_session_memory_requirements_khr)(
                d.handle(),
                self.session,
                &mut n,
                ptr::null_mut(),
            )
        };
        if r != vk::Result::SUCCESS {
            bail!("vkGetVideoSessionMemoryRequirementsKHR: {r}");
        }
        let mut reqs = vec![vk::VideoSessionMemoryRequirementsKHR::default(); n as usize];
        let r = unsafe {
            (vq.get_video_session_memory_requirements_khr)(
                d.handle(),
                self.session,
                &mut n,
                reqs.as_mut_ptr(),
            )
        };
        if r != vk::Result::SUCCESS {
            bail!("vkGetVideoSessionMemoryRequirementsKHR: {r}");
        }
        let mut binds = Vec::new();
        for req in &reqs {
            let mr = req.memory_requirements;
            let ty = gpu
                .memory_type(mr.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)
                .or_else(|_| {
                    gpu.memory_type(mr.memory_type_bits, vk::MemoryPropertyFlags::empty())
                })?;
            let mem = unsafe {
                d.allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(mr.size)
                        .memory_type_index(ty),
                    None,
                )
            }
            .context("vkAllocateMemory (video session)")?;
            self.session_memory.push(mem);
            binds.push(
                vk::BindVideoSessionMemoryInfoKHR::default()
                    .memory_bind_index(req.memory_bind_index)
                    .memory(mem)
                    .memory_offset(0)
                    .memory_size(mr.size),
            );
        }
        let r = unsafe {
            (vq.bind_video_session_memory_khr)(
                d.handle(),
                self.session,
                binds.len() as u32,
                binds.as_ptr(),
            )
        };
        if r != vk::Result::SUCCESS {
            bail!("vkBindVideoSessionMemoryKHR: {r}");
        }

        // Session parameters: the SPS and PPS the slice refers to (id 0).
        let mbs = (p.extent.width / 16, p.extent.height / 16);
        let sps = [std_sps(p.profile_idc, p.level_idc, mbs)];
        let pps = [std_pps()];
        let add = vk::VideoDecodeH264SessionParametersAddInfoKHR::default()
            .std_sp_ss(&sps)
            .std_pp_ss(&pps);
        let mut h264_params = vk::VideoDecodeH264SessionParametersCreateInfoKHR::default()
            .max_std_sps_count(1)
            .max_std_pps_count(1)
            .parameters_add_info(&add);
        let pci = vk::VideoSessionParametersCreateInfoKHR::default()
            .video_session(self.session)
            .push_next(&mut h264_params);
        let r = unsafe {
            (vq.create_video_session_parameters_khr)(
                d.handle(),
                &pci,
                ptr::null(),
                &mut self.params,
            )
        };
        if r != vk::Result::SUCCESS {
            bail!("vkCreateVideoSessionParametersKHR: {r}");
        }

        // Pictures.
        let mut usage = vk::ImageUsageFlags::VIDEO_DECODE_DST_KHR;
        if p.coincide {
            usage |= vk::ImageUsageFlags::VIDEO_DECODE_DPB_KHR;
        }
        if p.readback {
            usage |= vk::ImageUsageFlags::TRANSFER_SRC;
        }
        self.dst = video_image(gpu, profiles, p.dst_format, p.extent, usage, "h264 output")?;
        if !p.coincide {
            self.dpb = Some(video_image(
                gpu,
                profiles,
                p.dpb_format,
                p.extent,
                vk::ImageUsageFlags::VIDEO_DECODE_DPB_KHR,
                "h264 dpb",
            )?);
        }

        // Bitstream: one IDR slice NAL unit, padded to the size alignment.
        let (luma, cb, cr) = test_picture(p.extent.width as usize, p.extent.height as usize);
        let nal = h264::idr_slice(mbs.0, mbs.1, &luma, &cb, &cr);
        self.range = round_up(nal.len() as u32, p.size_align as u32) as u64;
        self.bitstream = bitstream_buffer(gpu, profiles, self.range)?;
        self.bitstream.write(&nal);
        self.expected = luma;
        self.expected
            .extend(cb.iter().zip(&cr).flat_map(|(&b, &r)| [b, r]));

        // Query 0 brackets the decode; query 1 is only ever reset.
        let qci = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::RESULT_STATUS_ONLY_KHR)
            .query_count(2)
            .push_next(profile);
        self.queries = unsafe { d.create_query_pool(&qci, None) }
            .context("vkCreateQueryPool (result status only)")?;
        gpu.name_object(self.queries, "video result status");

        if p.readback {
            self.readback = Some(gpu.buffer(
                self.expected.len() as u64,
                vk::BufferUsageFlags::TRANSFER_DST,
                "h264 output read-back",
            )?);
        }
        Ok(())
    }

    pub fn frame(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let Some(vd) = &gpu.video else {
            return Ok(());
        };
        let d = &gpu.device;
        let p = &self.probe;
        let cb = gpu.command_buffer(self.pool, vk::CommandBufferLevel::PRIMARY)?;
        let recorded = self.record(gpu, vd, cb);
        let result = recorded.and_then(|()| {
            let fence = gpu.submit(vd.queue, cb)?;
            gpu.wait(fence)
        });
        unsafe { d.free_command_buffers(self.pool, &[cb]) };
        result?;

        let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_STATUS_KHR;
        let (r, bytes) = gpu.results(self.queries, 0, 1, 8, flags | vk::QueryResultFlags::WAIT)?;
        let status = i64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        report.holds_exact(
            "result-status-only: H.264 IDR decode (WAIT)",
            "1 (COMPLETE)",
            format!("{status} ({})", status_name(status)),
            r == vk::Result::SUCCESS && status == vk::QueryResultStatusKHR::COMPLETE.as_raw() as i64,
            "spec: a decode that completes without error reports VK_QUERY_RESULT_STATUS_COMPLETE_KHR",
        );
        let (r, bytes) = gpu.results(self.queries, 1, 1, 8, flags)?;
        let word = i64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        report.holds_exact(
            "result-status-only: reset query, no WAIT",
            "NOT_READY",
            format!("{r:?}"),
            r == vk::Result::NOT_READY,
            "spec: an unavailable query without WAIT or PARTIAL returns VK_NOT_READY",
        );
        // The status word of an unavailable query must not claim completion. The spec
        // reads zero as "not yet available"; NVIDIA 580 writes -1 (ERROR) for a query
        // that was reset and never ran, so only "not COMPLETE" is portable.
        report.holds(
            "result-status-only: status word of the unavailable query",
            "<= 0 (not COMPLETE)",
            format!("{word} ({})", status_name(word)),
            word <= vk::QueryResultStatusKHR::NOT_READY.as_raw() as i64,
            "spec vkGetQueryPoolResults: zero means not yet available, negative an error; a reset query never completes",
        );
        if let Some(rb) = &self.readback {
            let got = rb.bytes();
            let same = got
                .iter()
                .zip(&self.expected)
                .filter(|(a, b)| a == b)
                .count();
            report.holds_exact(
                "H.264 decode output equals the I_PCM samples",
                "all samples equal",
                format!("{same}/{} samples", self.expected.len()),
                same == self.expected.len() && got.len() == self.expected.len(),
                &format!(
                    "I_PCM macroblocks carry raw samples; {}x{} picture, read back on the decode queue",
                    p.extent.width, p.extent.height
                ),
            );
        }
        Ok(())
    }

    fn record(&self, gpu: &Gpu, vd: &VideoDevice, cb: vk::CommandBuffer) -> Result<()> {
        let d = &gpu.device;
        let p = &self.probe;
        let vq = vd.vq.fp();
        unsafe {
            d.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
        }
        .context("vkBeginCommandBuffer (video)")?;
        if let Some(rb) = &self.readback {
            rb.zero();
        }
        unsafe { d.cmd_reset_query_pool(cb, self.queries, 0, 2) };

        // Each frame decodes an IDR picture from scratch, so earlier contents
        // are discarded (UNDEFINED).
        let color = crate::gpu::range(vk::ImageAspectFlags::COLOR, 1);
        let to = |image, layout| {
            vk::ImageMemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::NONE)
                .dst_stage_mask(vk::PipelineStageFlags2::VIDEO_DECODE_KHR)
                .dst_access_mask(
                    vk::AccessFlags2::VIDEO_DECODE_WRITE_KHR
                        | vk::AccessFlags2::VIDEO_DECODE_READ_KHR,
                )
                .old_layout(vk::ImageLayout::UNDEFINED)
                .new_layout(layout)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .image(image)
                .subresource_range(color)
        };
        let dst_layout = if p.coincide {
            vk::ImageLayout::VIDEO_DECODE_DPB_KHR
        } else {
            vk::ImageLayout::VIDEO_DECODE_DST_KHR
        };
        let mut barriers = vec![to(self.dst.image, dst_layout)];
        if let Some(dpb) = &self.dpb {
            barriers.push(to(dpb.image, vk::ImageLayout::VIDEO_DECODE_DPB_KHR));
        }
        unsafe {
            d.cmd_pipeline_barrier2(
                cb,
                &vk::DependencyInfo::default().image_memory_barriers(&barriers),
            )
        };

        let resource = |view| {
            vk::VideoPictureResourceInfoKHR::default()
                .coded_offset(vk::Offset2D { x: 0, y: 0 })
                .coded_extent(p.extent)
                .base_array_layer(0)
                .image_view_binding(view)
        };
        let dst_res = resource(self.dst.view);
        let dpb_res = resource(self.dpb.as_ref().map_or(self.dst.view, |i| i.view));

        // The picture becomes a reference in DPB slot 0; the slot is bound
        // inactive (-1) when coding begins and activated by the decode.
        let begin_slots = [vk::VideoReferenceSlotInfoKHR::default()
            .slot_index(-1)
            .picture_resource(&dpb_res)];
        let begin = vk::VideoBeginCodingInfoKHR::default()
            .video_session(self.session)
            .video_session_parameters(self.params)
            .reference_slots(&begin_slots);
        let std_pic = std_picture_info();
        let slice_offsets = [0u32];
        let mut pic = vk::VideoDecodeH264PictureInfoKHR::default()
            .std_picture_info(&std_pic)
            .slice_offsets(&slice_offsets);
        let std_ref = std_reference_info();
        let mut slot_info =
            vk::VideoDecodeH264DpbSlotInfoKHR::default().std_reference_info(&std_ref);
        let setup = vk::VideoReferenceSlotInfoKHR::default()
            .slot_index(0)
            .picture_resource(&dpb_res)
            .push_next(&mut slot_info);
        let decode = vk::VideoDecodeInfoKHR::default()
            .src_buffer(self.bitstream.buffer)
            .src_buffer_offset(0)
            .src_buffer_range(self.range)
            .dst_picture_resource(dst_res)
            .setup_reference_slot(&setup)
            .push_next(&mut pic);
        unsafe {
            (vq.cmd_begin_video_coding_khr)(cb, &begin);
            (vq.cmd_control_video_coding_khr)(
                cb,
                &vk::VideoCodingControlInfoKHR::default()
                    .flags(vk::VideoCodingControlFlagsKHR::RESET),
            );
            d.cmd_begin_query(cb, self.queries, 0, vk::QueryControlFlags::empty());
            (vd.dq.fp().cmd_decode_video_khr)(cb, &decode);
            d.cmd_end_query(cb, self.queries, 0);
            (vq.cmd_end_video_coding_khr)(cb, &vk::VideoEndCodingInfoKHR::default());
        }

        if let Some(rb) = &self.readback {
            let to_copy = [vk::ImageMemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::VIDEO_DECODE_KHR)
                .src_access_mask(vk::AccessFlags2::VIDEO_DECODE_WRITE_KHR)
                .dst_stage_mask(vk::PipelineStageFlags2::COPY)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)
                .old_layout(dst_layout)
                .new_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .image(self.dst.image)
                .subresource_range(color)];
            let (w, h) = (p.extent.width, p.extent.height);
            let plane = |aspect, offset, width, height| {
                vk::BufferImageCopy::default()
                    .buffer_offset(offset)
                    .image_subresource(vk::ImageSubresourceLayers {
                        aspect_mask: aspect,
                        mip_level: 0,
                        base_array_layer: 0,
                        layer_count: 1,
                    })
                    .image_extent(vk::Extent3D {
                        width,
                        height,
                        depth: 1,
                    })
            };
            let regions = [
                plane(vk::ImageAspectFlags::PLANE_0, 0, w, h),
                plane(
                    vk::ImageAspectFlags::PLANE_1,
                    u64::from(w * h),
                    w / 2,
                    h / 2,
                ),
            ];
            let to_host = [vk::MemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::COPY)
                .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::HOST)
                .dst_access_mask(vk::AccessFlags2::HOST_READ)];
            unsafe {
                d.cmd_pipeline_barrier2(
                    cb,
                    &vk::DependencyInfo::default().image_memory_barriers(&to_copy),
                );
                d.cmd_copy_image_to_buffer(
                    cb,
                    self.dst.image,
                    vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                    rb.buffer,
                    &regions,
                );
                d.cmd_pipeline_barrier2(
                    cb,
                    &vk::DependencyInfo::default().memory_barriers(&to_host),
                );
            }
        }
        unsafe { d.end_command_buffer(cb) }.context("vkEndCommandBuffer (video)")?;
        Ok(())
    }

    /// Frees everything created so far (null handles are skipped).
    pub fn destroy(&self, gpu: &Gpu) {
        let d = &gpu.device;
        unsafe {
            if let Some(vd) = &gpu.video {
                let vq = vd.vq.fp();
                if self.params != vk::VideoSessionParametersKHR::null() {
                    (vq.destroy_video_session_parameters_khr)(d.handle(), self.params, ptr::null());
                }
                if self.session != vk::VideoSessionKHR::null() {
                    (vq.destroy_video_session_khr)(d.handle(), self.session, ptr::null());
                }
            }
            for &m in &self.session_memory {
                d.free_memory(m, None);
            }
            for img in std::iter::once(&self.dst).chain(self.dpb.as_ref()) {
                d.destroy_image_view(img.view, None);
                d.destroy_image(img.image, None);
                d.free_memory(img.memory, None);
            }
            d.destroy_query_pool(self.queries, None);
            d.destroy_command_pool(self.pool, None);
        }
        if self.bitstream.buffer != vk::Buffer::null() {
            self.bitstream.destroy(d);
        } else if self.bitstream.memory != vk::DeviceMemory::null() {
            unsafe { d.free_memory(self.bitstream.memory, None) };
        }
        if let Some(rb) = &self.readback {
            rb.destroy(d);
        }
    }
}

fn status_name(s: i64) -> &'static str {
    match s {
        1 => "COMPLETE",
        0 => "NOT_READY",
        -1 => "ERROR",
        _ => "other",
    }
}

fn video_image(
    gpu: &Gpu,
    profiles: &[vk::VideoProfileInfoKHR],
    format: vk::Format,
    extent: vk::Extent2D,
    usage: vk::ImageUsageFlags,
    name: &str,
) -> Result<VideoImage> {
    let d = &gpu.device;
    let mut list = vk::VideoProfileListInfoKHR::default().profiles(profiles);
    let ci = vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(format)
        .extent(vk::Extent3D {
            width: extent.width,
            height: extent.height,
            depth: 1,
        })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(usage)
        .push_next(&mut list);
    let image =
        unsafe { d.create_image(&ci, None) }.with_context(|| format!("vkCreateImage ({name})"))?;
    gpu.name_object(image, name);
    let req = unsafe { d.get_image_memory_requirements(image) };
    let memory = gpu
        .memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)
        .or_else(|_| gpu.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::empty()))
        .and_then(|ty| {
            unsafe {
                d.allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(ty),
                    None,
                )
            }
            .with_context(|| format!("vkAllocateMemory ({name})"))
        });
    let memory = match memory {
        Ok(m) => m,
        Err(e) => {
            unsafe { d.destroy_image(image, None) };
            return Err(e);
        }
    };
    let view = unsafe { d.bind_image_memory(image, memory, 0) }
        .context("vkBindImageMemory (video)")
        .and_then(|()| {
            unsafe {
                d.create_image_view(
                    &vk::ImageViewCreateInfo::default()
                        .image(image)
                        .view_type(vk::ImageViewType::TYPE_2D)
                        .format(format)
                        .subresource_range(crate::gpu::range(vk::ImageAspectFlags::COLOR, 1)),
                    None,
                )
            }
            .with_context(|| format!("vkCreateImageView ({name})"))
        });
    match view {
        Ok(view) => Ok(VideoImage {
            image,
            memory,
            view,
        }),
        Err(e) => {
            unsafe {
                d.destroy_image(image, None);
                d.free_memory(memory, None);
            }
            Err(e)
        }
    }
}

/// Host-visible bitstream buffer; decode source buffers must name the
/// profile they are used with.
fn bitstream_buffer(gpu: &Gpu, profiles: &[vk::VideoProfileInfoKHR], size: u64) -> Result<Buffer> {
    let d = &gpu.device;
    let mut list = vk::VideoProfileListInfoKHR::default().profiles(profiles);
    let ci = vk::BufferCreateInfo::default()
        .size(size)
        .usage(vk::BufferUsageFlags::VIDEO_DECODE_SRC_KHR)
        .push_next(&mut list);
    let buffer = unsafe { d.create_buffer(&ci, None) }.context("vkCreateBuffer (bitstream)")?;
    gpu.name_object(buffer, "h264 bitstream");
    let req = unsafe { d.get_buffer_memory_requirements(buffer) };
    let mapped = gpu
        .memory_type(
            req.memory_type_bits,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        )
        .and_then(|ty| {
            unsafe {
                d.allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(ty),
                    None,
                )
            }
            .context("vkAllocateMemory (bitstream)")
        })
        .and_then(|memory| {
            let ptr = unsafe {
                d.bind_buffer_memory(buffer, memory, 0)
                    .context("vkBindBufferMemory (bitstream)")
                    .and_then(|()| {
                        d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                            .context("vkMapMemory (bitstream)")
                    })
            };
            match ptr {
                Ok(p) => Ok((memory, p as *mut u8)),
                Err(e) => {
                    unsafe { d.free_memory(memory, None) };
                    Err(e)
                }
            }
        });
    match mapped {
        Ok((memory, ptr)) => {
            // Padding after the NAL unit reads as trailing zero bytes.
            unsafe { std::ptr::write_bytes(ptr, 0, size as usize) };
            Ok(Buffer {
                buffer,
                memory,
                ptr,
                size,
            })
        }
        Err(e) => {
            unsafe { d.destroy_buffer(buffer, None) };
            Err(e)
        }
    }
}

/// Luma, Cb and Cr planes of a recognisable picture (a diagonal ramp; no
/// zero samples, which older H.264 revisions disallowed in I_PCM).
pub fn test_picture(w: usize, h: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let luma = (0..h)
        .flat_map(|y| (0..w).map(move |x| (16 + (x * 7 + y * 13) % 220) as u8))
        .collect();
    let cb = (0..h / 2)
        .flat_map(|y| (0..w / 2).map(move |x| (64 + (x * 9 + y * 3) % 128) as u8))
        .collect();
    let cr = (0..h / 2)
        .flat_map(|y| (0..w / 2).map(move |x| (192 - (x * 5 + y * 11) % 128) as u8))
        .collect();
    (luma, cb, cr)
}

fn std_sps(
    profile_idc: sv::StdVideoH264ProfileIdc,
    level_idc: sv::StdVideoH264LevelIdc,
    (w_mbs, h_mbs): (u32, u32),
) -> sv::StdVideoH264SequenceParameterSet {
    // SAFETY: a plain C struct of integers, bitfields and nullable pointers;
    // all-zero is a valid value (null pointers: no scaling lists, no VUI).
    let mut s: sv::StdVideoH264SequenceParameterSet = unsafe { std::mem::zeroed() };
    s.flags.set_frame_mbs_only_flag(1);
    s.flags.set_direct_8x8_inference_flag(1);
    s.profile_idc = profile_idc;
    s.level_idc = level_idc;
    s.chroma_format_idc = sv::StdVideoH264ChromaFormatIdc_STD_VIDEO_H264_CHROMA_FORMAT_IDC_420;
    s.log2_max_frame_num_minus4 = (LOG2_MAX_FRAME_NUM - 4) as u8;
    s.pic_order_cnt_type = sv::StdVideoH264PocType_STD_VIDEO_H264_POC_TYPE_0;
    s.log2_max_pic_order_cnt_lsb_minus4 = (LOG2_MAX_POC_LSB - 4) as u8;
    s.max_num_ref_frames = 1;
    s.pic_width_in_mbs_minus1 = w_mbs - 1;
    s.pic_height_in_map_units_minus1 = h_mbs - 1;
    s
}

fn std_pps() -> sv::StdVideoH264PictureParameterSet {
    // SAFETY: as for the SPS; zero means CAVLC, no weighted prediction, QP 26.
    let mut s: sv::StdVideoH264PictureParameterSet = unsafe { std::mem::zeroed() };
    // The slice header then carries disable_deblocking_filter_idc = 1.
    s.flags.set_deblocking_filter_control_present_flag(1);
    s
}

fn std_picture_info() -> sv::StdVideoDecodeH264PictureInfo {
    // SAFETY: plain C struct of integers and bitfields.
    let mut s: sv::StdVideoDecodeH264PictureInfo = unsafe { std::mem::zeroed() };
    s.flags.set_is_intra(1);
    s.flags.set_IdrPicFlag(1);
    s.flags.set_is_reference(1);
    s
}

fn std_reference_info() -> sv::StdVideoDecodeH264ReferenceInfo {
    // SAFETY: plain C struct; zero is a progressive frame, FrameNum 0, POC 0.
    unsafe { std::mem::zeroed() }
}

pub mod h264;

#[cfg(test)]
mod tests;
