//! The hand-maintained inputs of the generator: everything that is a decision rather than
//! something read from vk.xml lives here, in one place.

/// Platforms (vk.xml `platform=`) whose extensions we generate; every other platform is skipped.
pub const ALLOWED_PLATFORMS: &[&str] = &["xlib", "xcb", "wayland"];

/// Commands the capture layer writes by hand (it still uses the generated `encode::*` to write
/// their `Call`); no intercept is generated for them.
pub const SPECIAL: &[&str] = &[
    "vkCreateInstance",
    "vkDestroyInstance",
    "vkEnumeratePhysicalDevices",
    "vkCreateDevice",
    "vkDestroyDevice",
    "vkGetInstanceProcAddr",
    "vkGetDeviceProcAddr",
    "vkEnumerateInstanceExtensionProperties",
    "vkEnumerateInstanceLayerProperties",
    "vkEnumerateDeviceExtensionProperties",
    "vkEnumerateDeviceLayerProperties",
    "vkAllocateMemory",
    "vkFreeMemory",
    "vkMapMemory",
    "vkMapMemory2KHR",
    "vkUnmapMemory",
    "vkUnmapMemory2KHR",
    "vkFlushMappedMemoryRanges",
    "vkQueueSubmit",
    "vkQueueSubmit2",
    "vkQueueSubmit2KHR",
    "vkQueuePresentKHR",
    "vkQueueWaitIdle",
    "vkDeviceWaitIdle",
    "vkWaitForFences",
    "vkGetFenceStatus",
    "vkCreateQueryPool",
    "vkDestroyQueryPool",
    "vkGetQueryPoolResults",
    "vkCmdCopyQueryPoolResults",
    "vkCmdBeginQuery",
    "vkCmdEndQuery",
    "vkCmdBeginQueryIndexedEXT",
    "vkCmdEndQueryIndexedEXT",
    "vkCmdWriteTimestamp",
    "vkCmdWriteTimestamp2",
    "vkCmdWriteTimestamp2KHR",
    "vkCmdResetQueryPool",
    "vkResetQueryPool",
    "vkResetQueryPoolEXT",
    "vkAcquireProfilingLockKHR",
    "vkReleaseProfilingLockKHR",
    "vkGetCalibratedTimestampsEXT",
    "vkSetDebugUtilsObjectNameEXT",
    "vkCreateSwapchainKHR",
    "vkGetSwapchainImagesKHR",
    "vkAcquireNextImageKHR",
    "vkUpdateDescriptorSetWithTemplate",
    "vkUpdateDescriptorSetWithTemplateKHR",
    "vkCmdPushDescriptorSetWithTemplateKHR",
    "vkCmdWriteAccelerationStructuresPropertiesKHR",
];

/// Commands whose `pData` layout depends on a descriptor update template: the registry gives no
/// size, so their encoders take an extra trailing `data_size: usize` that the layer computes from
/// the template it recorded at creation.
pub const TEMPLATE_DATA: &[(&str, &str)] = &[
    (
        "vkUpdateDescriptorSetWithTemplate",
        "pData layout depends on the descriptor update template",
    ),
    (
        "vkUpdateDescriptorSetWithTemplateKHR",
        "pData layout depends on the descriptor update template",
    ),
    (
        "vkCmdPushDescriptorSetWithTemplateKHR",
        "pData layout depends on the descriptor update template",
    ),
];

/// Struct members that the driver reads only under a condition on another member; outside it
/// the pointer may be garbage, so the encoder must not follow it. `(struct, member, rust
/// condition on `v`)`: the member is encoded as NULL when the condition is false.
pub const CONDITIONAL_MEMBERS: &[(&str, &str, &str)] = &[
    (
        "VkWriteDescriptorSet",
        "pImageInfo",
        "matches!(v.descriptor_type, vk::DescriptorType::SAMPLER | vk::DescriptorType::COMBINED_IMAGE_SAMPLER | vk::DescriptorType::SAMPLED_IMAGE | vk::DescriptorType::STORAGE_IMAGE | vk::DescriptorType::INPUT_ATTACHMENT | vk::DescriptorType::SAMPLE_WEIGHT_IMAGE_QCOM | vk::DescriptorType::BLOCK_MATCH_IMAGE_QCOM)",
    ),
    (
        "VkWriteDescriptorSet",
        "pBufferInfo",
        "matches!(v.descriptor_type, vk::DescriptorType::UNIFORM_BUFFER | vk::DescriptorType::STORAGE_BUFFER | vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC | vk::DescriptorType::STORAGE_BUFFER_DYNAMIC)",
    ),
    (
        "VkWriteDescriptorSet",
        "pTexelBufferView",
        "matches!(v.descriptor_type, vk::DescriptorType::UNIFORM_TEXEL_BUFFER | vk::DescriptorType::STORAGE_TEXEL_BUFFER)",
    ),
    // Queue family lists are read only for concurrent sharing; exclusive resources may leave them
    // uninitialised.
    ("VkBufferCreateInfo", "pQueueFamilyIndices", "v.sharing_mode == vk::SharingMode::CONCURRENT"),
    ("VkImageCreateInfo", "pQueueFamilyIndices", "v.sharing_mode == vk::SharingMode::CONCURRENT"),
    ("VkSwapchainCreateInfoKHR", "pQueueFamilyIndices", "v.image_sharing_mode == vk::SharingMode::CONCURRENT"),
    (
        "VkPhysicalDeviceImageDrmFormatModifierInfoEXT",
        "pQueueFamilyIndices",
        "v.sharing_mode == vk::SharingMode::CONCURRENT",
    ),
    (
        "VkDescriptorSetLayoutBinding",
        "pImmutableSamplers",
        "matches!(v.descriptor_type, vk::DescriptorType::SAMPLER | vk::DescriptorType::COMBINED_IMAGE_SAMPLER)",
    ),
];

/// Structs that exist in vk.xml 1.3.239 but whose layout ash 0.38 (1.3.281) changed, or that
/// ash does not define; treated as not encodable.
pub const SKIP_STRUCTS: &[&str] = &[];

/// Commands absent from or changed in ash 0.38.
pub const SKIP_COMMANDS: &[&str] = &[];

/// Commands that ash 0.38 knows under the name they were promoted to: their `PFN_vk*` type is
/// the one of the promoted command (same signature).
pub const ASH_PFN_RENAMES: &[(&str, &str)] = &[
    (
        "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT",
        "vkGetPhysicalDeviceCalibrateableTimeDomainsKHR",
    ),
    (
        "vkGetCalibratedTimestampsEXT",
        "vkGetCalibratedTimestampsKHR",
    ),
    ("vkCmdSetLineStippleEXT", "vkCmdSetLineStippleKHR"),
    (
        "vkGetImageSubresourceLayout2EXT",
        "vkGetImageSubresourceLayout2KHR",
    ),
];

/// The ash `PFN_vk*` type name for a canonical command.
pub fn ash_pfn(canonical: &str) -> String {
    let n = ASH_PFN_RENAMES
        .iter()
        .find(|(a, _)| *a == canonical)
        .map_or(canonical, |(_, b)| b);
    format!("vk::PFN_{n}")
}

/// Extensions whose commands encode, but whose replay needs data the encoders do not capture: the
/// video std-header structs (SPS/PPS and picture info) are opaque pointers in the registry. The layer
/// hides them like the extensions of unsupported commands, so an app never uses what cannot replay.
pub const UNREPLAYABLE_EXTENSIONS: &[&str] = &[
    "VK_KHR_video_queue",
    "VK_KHR_video_decode_queue",
    "VK_KHR_video_decode_h264",
    "VK_KHR_video_decode_h265",
];
