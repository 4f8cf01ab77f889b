//! What the tracker learns of an object from its creation call, beyond the call itself.

use super::*;

/// The pipelines a creation call makes as libraries (`VK_PIPELINE_CREATE_LIBRARY_BIT_KHR`).
pub(super) fn library_pipelines(call: &Call) -> Vec<u64> {
    const LIBRARY: u32 = vk::PipelineCreateFlags::LIBRARY_KHR.as_raw();
    let (flags, made): (Vec<u32>, _) = match call {
        Call::vkCreateGraphicsPipelines(p) => (
            p.p_create_infos.iter().flatten().map(|c| c.flags).collect(),
            &p.p_pipelines,
        ),
        Call::vkCreateRayTracingPipelinesKHR(p) => (
            p.p_create_infos.iter().flatten().map(|c| c.flags).collect(),
            &p.p_pipelines,
        ),
        _ => return Vec::new(),
    };
    flags
        .iter()
        .zip(made.iter().flatten())
        .filter(|(f, _)| *f & LIBRARY != 0)
        .map(|(_, h)| *h)
        .collect()
}

/// What the snapshot needs to know about an object beyond its creation call.
pub(super) fn creation_info(call: &Call) -> Info {
    match call {
        Call::vkCreateImage(p) => match &p.p_create_info {
            Some(ci) => Info::Image {
                initial_layout: ci.initial_layout,
                format: ci.format,
                layout: None,
                swapchain: false,
            },
            None => Info::None,
        },
        Call::vkGetSwapchainImagesKHR(_) => Info::Image {
            initial_layout: 0,
            format: 0,
            layout: None,
            swapchain: true,
        },
        Call::vkCreateImageView(p) => Info::View {
            image: p.p_create_info.as_ref().map(|c| c.image).unwrap_or(0),
        },
        Call::vkCreateFramebuffer(p) => Info::Framebuffer {
            views: p
                .p_create_info
                .as_ref()
                .and_then(|c| c.p_attachments.clone())
                .unwrap_or_default(),
        },
        Call::vkCreateRenderPass(p) => Info::RenderPass {
            finals: p
                .p_create_info
                .iter()
                .flat_map(|c| c.p_attachments.iter().flatten().map(|a| a.final_layout))
                .collect(),
        },
        Call::vkCreateRenderPass2(p) | Call::vkCreateRenderPass2KHR(p) => Info::RenderPass {
            finals: p
                .p_create_info
                .iter()
                .flat_map(|c| c.p_attachments.iter().flatten().map(|a| a.final_layout))
                .collect(),
        },
        Call::vkCreateFence(p) => Info::Fence {
            created_signaled: p
                .p_create_info
                .as_ref()
                .is_some_and(|c| c.flags & vk::FenceCreateFlags::SIGNALED.as_raw() != 0),
        },
        Call::vkCreateSemaphore(p) => p
            .p_create_info
            .iter()
            .flat_map(|c| c.p_next.iter())
            .find_map(|e| match e {
                vkstream::PNext::VkSemaphoreTypeCreateInfo(t)
                    if t.semaphore_type == vk::SemaphoreType::TIMELINE.as_raw() =>
                {
                    Some(Info::Timeline {
                        initial: t.initial_value,
                    })
                }
                _ => None,
            })
            .unwrap_or(Info::Binary { signaled: false }),
        Call::vkCreateDescriptorUpdateTemplate(_)
        | Call::vkCreateDescriptorUpdateTemplateKHR(_) => {
            descriptors::template_entries(call).map_or(Info::None, Info::Template)
        }
        Call::vkCreateQueryPool(p) => match &p.p_create_info {
            Some(ci) => Info::QueryPool {
                count: ci.query_count,
                resettable: matches!(
                    vk::QueryType::from_raw(ci.query_type),
                    vk::QueryType::OCCLUSION
                        | vk::QueryType::PIPELINE_STATISTICS
                        | vk::QueryType::TIMESTAMP
                        | vk::QueryType::TRANSFORM_FEEDBACK_STREAM_EXT
                        | vk::QueryType::PRIMITIVES_GENERATED_EXT
                        | vk::QueryType::MESH_PRIMITIVES_GENERATED_EXT
                ),
            },
            None => Info::None,
        },
        Call::vkGetDeviceQueue(p) => Info::Queue {
            family: p.queue_family_index,
        },
        Call::vkGetDeviceQueue2(p) => Info::Queue {
            family: p
                .p_queue_info
                .as_ref()
                .map(|i| i.queue_family_index)
                .unwrap_or(0),
        },
        _ => Info::None,
    }
}
