//! Deciding whether the device can drive a result-status-only query on a decode queue: the
//! extensions, an H.264 decode profile with usable capabilities and image formats.

use super::*;

/// Decides whether the result-status query can be driven, and how.
pub fn probe(
    entry: &ash::Entry,
    instance: &ash::Instance,
    pdev: vk::PhysicalDevice,
    families: &[vk::QueueFamilyProperties],
    dev_exts: &[vk::ExtensionProperties],
) -> Result<VideoSupport> {
    let missing = |s: &str| Ok(VideoSupport::Missing(s.to_string()));
    let decode_families = families
        .iter()
        .filter(|f| f.queue_flags.contains(vk::QueueFlags::VIDEO_DECODE_KHR))
        .count();
    if decode_families == 0 {
        return missing("VK_KHR_video_decode_queue (a video decode queue family)");
    }
    for ext in [
        ash::khr::video_queue::NAME,
        ash::khr::video_decode_queue::NAME,
        ash::khr::video_decode_h264::NAME,
    ] {
        if !has(dev_exts, ext) {
            return missing(&ext.to_string_lossy());
        }
    }

    // Codec operations and result-status support per family; these
    // structures may only be chained now that VK_KHR_video_queue exists.
    let n = unsafe { instance.get_physical_device_queue_family_properties2_len(pdev) };
    let mut video = vec![vk::QueueFamilyVideoPropertiesKHR::default(); n];
    let mut status = vec![vk::QueueFamilyQueryResultStatusPropertiesKHR::default(); n];
    let flags: Vec<vk::QueueFlags> = {
        let mut p2: Vec<vk::QueueFamilyProperties2> = video
            .iter_mut()
            .zip(status.iter_mut())
            .map(|(v, s)| {
                vk::QueueFamilyProperties2::default()
                    .push_next(v)
                    .push_next(s)
            })
            .collect();
        unsafe { instance.get_physical_device_queue_family_properties2(pdev, &mut p2) };
        p2.iter()
            .map(|p| p.queue_family_properties.queue_flags)
            .collect()
    };
    let h264: Vec<u32> = (0..n)
        .filter(|&i| {
            flags[i].contains(vk::QueueFlags::VIDEO_DECODE_KHR)
                && video[i]
                    .video_codec_operations
                    .contains(vk::VideoCodecOperationFlagsKHR::DECODE_H264)
        })
        .map(|i| i as u32)
        .collect();
    if h264.is_empty() {
        return missing(
            "VK_KHR_video_decode_h264 (VK_VIDEO_CODEC_OPERATION_DECODE_H264_BIT_KHR on a decode queue family)",
        );
    }
    // Prefer a family that can also copy, so the decoded picture can be checked.
    let with_status: Vec<u32> = h264
        .iter()
        .copied()
        .filter(|&i| status[i as usize].query_result_status_support == vk::TRUE)
        .collect();
    let Some(family) = with_status
        .iter()
        .copied()
        .find(|&i| flags[i as usize].contains(vk::QueueFlags::TRANSFER))
        .or_else(|| with_status.first().copied())
    else {
        return missing(
            "VkQueueFamilyQueryResultStatusPropertiesKHR::queryResultStatusSupport on an H.264 decode queue family",
        );
    };
    let family_flags = flags[family as usize];

    let vq = ash::khr::video_queue::Instance::new(entry, instance);
    let profiles = [
        sv::StdVideoH264ProfileIdc_STD_VIDEO_H264_PROFILE_IDC_HIGH,
        sv::StdVideoH264ProfileIdc_STD_VIDEO_H264_PROFILE_IDC_MAIN,
        sv::StdVideoH264ProfileIdc_STD_VIDEO_H264_PROFILE_IDC_BASELINE,
    ];
    for idc in profiles {
        let mut hp = h264_profile(idc);
        let profile = base_profile().push_next(&mut hp);
        let mut h264_caps = vk::VideoDecodeH264CapabilitiesKHR::default();
        let mut dec_caps = vk::VideoDecodeCapabilitiesKHR::default();
        let mut caps = vk::VideoCapabilitiesKHR::default()
            .push_next(&mut dec_caps)
            .push_next(&mut h264_caps);
        let r = unsafe {
            (vq.fp().get_physical_device_video_capabilities_khr)(pdev, &profile, &mut caps)
        };
        match r {
            vk::Result::SUCCESS => {}
            vk::Result::ERROR_VIDEO_PROFILE_OPERATION_NOT_SUPPORTED_KHR
            | vk::Result::ERROR_VIDEO_PROFILE_FORMAT_NOT_SUPPORTED_KHR
            | vk::Result::ERROR_VIDEO_PICTURE_LAYOUT_NOT_SUPPORTED_KHR
            | vk::Result::ERROR_VIDEO_PROFILE_CODEC_NOT_SUPPORTED_KHR
            | vk::Result::ERROR_VIDEO_STD_VERSION_NOT_SUPPORTED_KHR => continue,
            e => bail!("vkGetPhysicalDeviceVideoCapabilitiesKHR (H.264 profile_idc {idc}): {e}"),
        }
        // Copy what is needed so the chained structures can be read.
        let caps = Caps {
            min: caps.min_coded_extent,
            max: caps.max_coded_extent,
            granularity: caps.picture_access_granularity,
            max_dpb_slots: caps.max_dpb_slots,
            size_align: caps.min_bitstream_buffer_size_alignment,
            header: caps.std_header_version,
        };
        if caps.max_dpb_slots < 1 {
            return missing("VkVideoCapabilitiesKHR::maxDpbSlots >= 1 for H.264 decode");
        }
        let extent = coded_extent(caps.min, caps.granularity);
        if extent.width > caps.max.width || extent.height > caps.max.height {
            return missing("an H.264 decode maxCodedExtent of at least one macroblock");
        }
        let coincide = dec_caps
            .flags
            .contains(vk::VideoDecodeCapabilityFlagsKHR::DPB_AND_OUTPUT_COINCIDE);
        if !coincide
            && !dec_caps
                .flags
                .contains(vk::VideoDecodeCapabilityFlagsKHR::DPB_AND_OUTPUT_DISTINCT)
        {
            bail!("VkVideoDecodeCapabilitiesKHR has neither DPB_AND_OUTPUT_COINCIDE nor DPB_AND_OUTPUT_DISTINCT");
        }
        let copy = family_flags.contains(vk::QueueFlags::TRANSFER);
        let (dst_use, dpb_use) = if coincide {
            let u = vk::ImageUsageFlags::VIDEO_DECODE_DST_KHR
                | vk::ImageUsageFlags::VIDEO_DECODE_DPB_KHR;
            (u, u)
        } else {
            (
                vk::ImageUsageFlags::VIDEO_DECODE_DST_KHR,
                vk::ImageUsageFlags::VIDEO_DECODE_DPB_KHR,
            )
        };
        let formats = |usage| video_formats(&vq, pdev, idc, usage);
        let mut readback = false;
        let mut dst_format = None;
        if copy {
            dst_format = pick_format(&formats(dst_use | vk::ImageUsageFlags::TRANSFER_SRC)?);
            readback = dst_format == Some(vk::Format::G8_B8R8_2PLANE_420_UNORM);
        }
        if !readback {
            dst_format = pick_format(&formats(dst_use)?);
        }
        let dpb_format = if coincide {
            dst_format
        } else {
            pick_format(&formats(dpb_use)?)
        };
        let (Some(dst_format), Some(dpb_format)) = (dst_format, dpb_format) else {
            return missing(
                "an H.264 decode picture format (vkGetPhysicalDeviceVideoFormatPropertiesKHR)",
            );
        };
        let header_name = caps
            .header
            .extension_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(VideoSupport::Ready(Box::new(Probe {
            family,
            family_flags,
            decode_families,
            profile_idc: idc,
            level_idc: h264_caps
                .max_level_idc
                .min(sv::StdVideoH264LevelIdc_STD_VIDEO_H264_LEVEL_IDC_4_1),
            extent,
            size_align: caps.size_align.max(1),
            coincide,
            dpb_format,
            dst_format,
            readback,
            header_name,
            header_version: caps.header.spec_version,
        })));
    }
    missing("VK_KHR_video_decode_h264 (a 4:2:0 8-bit progressive H.264 decode profile accepted by vkGetPhysicalDeviceVideoCapabilitiesKHR)")
}

struct Caps {
    min: vk::Extent2D,
    max: vk::Extent2D,
    granularity: vk::Extent2D,
    max_dpb_slots: u32,
    size_align: u64,
    header: vk::ExtensionProperties,
}

fn pick_format(list: &[vk::Format]) -> Option<vk::Format> {
    list.iter()
        .copied()
        .find(|&f| f == vk::Format::G8_B8R8_2PLANE_420_UNORM)
        .or_else(|| list.first().copied())
}

fn video_formats(
    vq: &ash::khr::video_queue::Instance,
    pdev: vk::PhysicalDevice,
    idc: sv::StdVideoH264ProfileIdc,
    usage: vk::ImageUsageFlags,
) -> Result<Vec<vk::Format>> {
    let mut hp = h264_profile(idc);
    let profiles = [base_profile().push_next(&mut hp)];
    let mut list = vk::VideoProfileListInfoKHR::default().profiles(&profiles);
    let info = vk::PhysicalDeviceVideoFormatInfoKHR::default()
        .image_usage(usage)
        .push_next(&mut list);
    let f = vq.fp().get_physical_device_video_format_properties_khr;
    let mut count = 0u32;
    match unsafe { f(pdev, &info, &mut count, ptr::null_mut()) } {
        vk::Result::SUCCESS => {}
        // The usage combination is not supported at all.
        vk::Result::ERROR_FORMAT_NOT_SUPPORTED
        | vk::Result::ERROR_IMAGE_USAGE_NOT_SUPPORTED_KHR => return Ok(Vec::new()),
        e => bail!("vkGetPhysicalDeviceVideoFormatPropertiesKHR ({usage:?}): {e}"),
    }
    let mut props = vec![vk::VideoFormatPropertiesKHR::default(); count as usize];
    let r = unsafe { f(pdev, &info, &mut count, props.as_mut_ptr()) };
    if r != vk::Result::SUCCESS && r != vk::Result::INCOMPLETE {
        bail!("vkGetPhysicalDeviceVideoFormatPropertiesKHR ({usage:?}): {r}");
    }
    props.truncate(count as usize);
    Ok(props
        .iter()
        .filter(|p| {
            p.image_type == vk::ImageType::TYPE_2D && p.image_tiling == vk::ImageTiling::OPTIMAL
        })
        .map(|p| p.format)
        .collect())
}
