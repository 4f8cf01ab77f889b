//! The hand-maintained inputs of the generator: everything that is a decision rather than
//! something read from vk.xml lives here, in one place.

/// Platforms (vk.xml `platform=`) whose extensions we generate; every other platform is skipped.
pub const ALLOWED_PLATFORMS: &[&str] = &["xlib", "xcb", "wayland"];

/// What a hand-written capture-layer hook does with its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    /// Calls down, returns what the driver returned, then records the call and keeps books
    /// (mapped memory, queues, pools, ...).
    PostCall,
    /// As `PostCall`, and also writes the command's `QueryOp` records under the same lock.
    Ops,
    /// The layer's own implementation: chain plumbing (proc addresses, instance and device
    /// creation) or a result the layer changes (hidden extensions).
    Replace,
}

/// A command the capture layer hooks by hand: `crate::<module>::<command>` in the layer, handed
/// out by the generated proc-address table (`hook_proc_addr`), typed against ash's `PFN_vk*`.
/// `command` is the canonical name; when vk.xml gives it aliases (core/KHR/EXT), the hook is
/// generic over `hooks::Entry` and codegen emits a thunk per name that passes its own entry (the
/// next layer's function and the command id of that name).
#[derive(Debug, Clone, Copy)]
pub struct LayerHook {
    pub command: &'static str,
    pub module: &'static str,
    pub kind: HookKind,
}

const fn hook(command: &'static str, module: &'static str, kind: HookKind) -> LayerHook {
    LayerHook {
        command,
        module,
        kind,
    }
}

use HookKind::{Ops, PostCall, Replace};

/// The physical-device query hooks of capture for a target device.
const PHYSICAL: &str = "chain::physical";

/// Every hand-written hook of the capture layer, the one list, each under its canonical name only
/// (aliases follow from vk.xml): a listed hook without its function does not compile, and a hook
/// function not listed is dead code (denied in the hook modules).
pub const LAYER_HOOKS: &[LayerHook] = &[
    hook("vkGetInstanceProcAddr", "chain", Replace),
    hook("vkGetDeviceProcAddr", "chain", Replace),
    hook("vkCreateInstance", "chain::instance", Replace),
    hook("vkDestroyInstance", "chain::instance", Replace),
    hook("vkEnumeratePhysicalDevices", "chain::instance", PostCall),
    hook(
        "vkEnumerateDeviceExtensionProperties",
        "chain::instance",
        Replace,
    ),
    hook(
        "vkEnumerateDeviceLayerProperties",
        "chain::instance",
        PostCall,
    ),
    hook("vkCreateDevice", "chain::device", Replace),
    hook("vkDestroyDevice", "chain::device", Replace),
    hook("vkGetDeviceQueue", "chain::device", PostCall),
    hook("vkGetDeviceQueue2", "chain::device", PostCall),
    hook("vkSetDebugUtilsObjectNameEXT", "chain::device", PostCall),
    // Capture for a target device: results reduced to what the target offers too.
    hook("vkGetPhysicalDeviceFeatures", PHYSICAL, Replace),
    hook("vkGetPhysicalDeviceFeatures2", PHYSICAL, Replace),
    hook("vkGetPhysicalDeviceProperties", PHYSICAL, Replace),
    hook("vkGetPhysicalDeviceProperties2", PHYSICAL, Replace),
    hook("vkGetPhysicalDeviceFormatProperties", PHYSICAL, Replace),
    hook("vkGetPhysicalDeviceFormatProperties2", PHYSICAL, Replace),
    hook(
        "vkGetPhysicalDeviceImageFormatProperties",
        PHYSICAL,
        Replace,
    ),
    hook(
        "vkGetPhysicalDeviceImageFormatProperties2",
        PHYSICAL,
        Replace,
    ),
    hook(
        "vkGetPhysicalDeviceQueueFamilyProperties",
        PHYSICAL,
        Replace,
    ),
    hook(
        "vkGetPhysicalDeviceQueueFamilyProperties2",
        PHYSICAL,
        Replace,
    ),
    hook("vkGetPhysicalDeviceMemoryProperties", PHYSICAL, Replace),
    hook("vkGetPhysicalDeviceMemoryProperties2", PHYSICAL, Replace),
    hook("vkAllocateMemory", "memory", PostCall),
    hook("vkFreeMemory", "memory", PostCall),
    hook("vkMapMemory", "memory", PostCall),
    hook("vkUnmapMemory", "memory", PostCall),
    hook("vkFlushMappedMemoryRanges", "memory", PostCall),
    hook("vkBindBufferMemory", "memory", PostCall),
    hook("vkBindBufferMemory2", "memory", PostCall),
    // Optimal-tiling images: where they are bound, the GPU's writes are not the host's.
    hook("vkCreateImage", "memory::images", PostCall),
    hook("vkDestroyImage", "memory::images", PostCall),
    hook("vkBindImageMemory", "memory::images", PostCall),
    hook("vkBindImageMemory2", "memory::images", PostCall),
    hook("vkBeginCommandBuffer", "submit", PostCall),
    hook("vkResetCommandBuffer", "submit", PostCall),
    hook("vkQueueSubmit", "submit", PostCall),
    hook("vkQueueSubmit2", "submit", PostCall),
    hook("vkQueueWaitIdle", "submit", PostCall),
    hook("vkDeviceWaitIdle", "submit", PostCall),
    hook("vkWaitForFences", "submit", PostCall),
    hook("vkGetFenceStatus", "submit", PostCall),
    hook("vkWaitSemaphores", "submit", PostCall),
    hook("vkGetSemaphoreCounterValue", "submit", PostCall),
    hook("vkCreateSwapchainKHR", "wsi", PostCall),
    hook("vkGetSwapchainImagesKHR", "wsi", PostCall),
    hook("vkAcquireNextImageKHR", "wsi", PostCall),
    hook("vkQueuePresentKHR", "wsi", PostCall),
    hook("vkCmdCopyQueryPoolResults", "query_copies", Ops),
    hook("vkCreateQueryPool", "queries::pools", PostCall),
    hook("vkDestroyQueryPool", "queries::pools", PostCall),
    hook("vkGetQueryPoolResults", "queries::pools", PostCall),
    hook("vkAcquireProfilingLockKHR", "queries::pools", PostCall),
    hook("vkReleaseProfilingLockKHR", "queries::pools", PostCall),
    hook("vkCmdBeginQuery", "queries::commands", Ops),
    hook("vkCmdEndQuery", "queries::commands", Ops),
    hook("vkCmdBeginQueryIndexedEXT", "queries::commands", Ops),
    hook("vkCmdEndQueryIndexedEXT", "queries::commands", Ops),
    hook("vkCmdWriteTimestamp", "queries::commands", Ops),
    hook("vkCmdWriteTimestamp2", "queries::commands", Ops),
    hook("vkCmdResetQueryPool", "queries::commands", Ops),
    hook("vkResetQueryPool", "queries::commands", Ops),
    hook(
        "vkCmdWriteAccelerationStructuresPropertiesKHR",
        "queries::commands",
        Ops,
    ),
    hook(
        "vkGetCalibratedTimestampsEXT",
        "queries::calibration",
        PostCall,
    ),
    hook("vkCmdBeginRenderPass", "queries::regions", PostCall),
    hook("vkCmdBeginRenderPass2", "queries::regions", PostCall),
    hook("vkCmdBeginRendering", "queries::regions", PostCall),
    hook("vkCreateDescriptorUpdateTemplate", "templates", PostCall),
    hook("vkUpdateDescriptorSetWithTemplate", "templates", PostCall),
    hook(
        "vkCmdPushDescriptorSetWithTemplateKHR",
        "templates",
        PostCall,
    ),
];

/// Commands the layer neither hooks nor intercepts with generated code: global commands (no
/// dispatchable handle: answered below the layer, unrecorded) and commands it hides until it
/// hooks them (vkMapMemory2KHR/vkUnmapMemory2KHR: their host writes would go unseen).
pub const LAYER_UNHOOKED: &[&str] = &[
    "vkEnumerateInstanceExtensionProperties",
    "vkEnumerateInstanceLayerProperties",
    "vkMapMemory2KHR",
    "vkUnmapMemory2KHR",
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

/// Inner lengths of arrays of arrays that vk.xml 1.3.239 leaves to the spec's prose (later
/// registries write them: `len="infoCount,pInfos[].geometryCount"`): (command, parameter, the
/// inner length). Ignored where the registry already gives two lengths.
pub const INNER_LENGTHS: &[(&str, &str, &str)] = &[
    (
        "vkBuildAccelerationStructuresKHR",
        "ppBuildRangeInfos",
        "pInfos[].geometryCount",
    ),
    (
        "vkCmdBuildAccelerationStructuresKHR",
        "ppBuildRangeInfos",
        "pInfos[].geometryCount",
    ),
    (
        "vkCmdBuildAccelerationStructuresIndirectKHR",
        "ppMaxPrimitiveCounts",
        "pInfos[].geometryCount",
    ),
];

/// Extensions whose commands encode, but whose replay needs data the encoders do not capture: the
/// video std-header structs (SPS/PPS and picture info) are opaque pointers in the registry. The layer
/// hides them like the extensions of unsupported commands, so an app never uses what cannot replay.
pub const UNREPLAYABLE_EXTENSIONS: &[&str] = &[
    "VK_KHR_video_queue",
    "VK_KHR_video_decode_queue",
    "VK_KHR_video_decode_h264",
    "VK_KHR_video_decode_h265",
];

/// How the replayer handles a command of [`REPLAY_OVERRIDES`].
pub enum Replay {
    /// By hand: `replayer::calls::<module>::<command>(session, call, params, record)`. Listed under
    /// the canonical name only: every vk.xml alias (KHR/EXT) gets an arm too, and the function is
    /// then generic over `calls::Entry`, which each arm sets to its own name (the replay device's
    /// function of the name the capture recorded).
    By(&'static str),
    /// Not re-executed, for the reason given: nothing replayed depends on it, or the engine re-does
    /// it elsewhere.
    Skip(&'static str),
}

const LOADER_QUERY: &str = "a query of the loader or driver the replay does not need";
const SURFACE_QUERY: &str =
    "a surface or presentation query: its answer is in the capture and nothing replayed depends on it";
const APP_CALLBACK: &str =
    "the app's debug callbacks point into the captured process and are never installed";

/// The replay overrides: every command the replayer does not send through the generated dispatch,
/// each under its canonical name (aliases follow from vk.xml, with the same handling).
/// `emit_replay` writes the replayer's `replay_call` from this list, one arm per name (everything
/// else goes to `calls::generic`), so a listed command without its function does not compile, and
/// a hand-written function not listed is dead code, which `replayer::calls` denies.
pub const REPLAY_OVERRIDES: &[(&str, Replay)] = &[
    // instance
    ("vkCreateInstance", Replay::By("instance")),
    ("vkDestroyInstance", Replay::By("instance")),
    ("vkEnumeratePhysicalDevices", Replay::By("instance")),
    ("vkEnumeratePhysicalDeviceGroups", Replay::By("instance")),
    ("vkCreateDebugUtilsMessengerEXT", Replay::By("instance")),
    ("vkCreateDebugReportCallbackEXT", Replay::By("instance")),
    (
        "vkDestroyDebugUtilsMessengerEXT",
        Replay::Skip(APP_CALLBACK),
    ),
    (
        "vkDestroyDebugReportCallbackEXT",
        Replay::Skip(APP_CALLBACK),
    ),
    ("vkSubmitDebugUtilsMessageEXT", Replay::Skip(APP_CALLBACK)),
    ("vkDebugReportMessageEXT", Replay::Skip(APP_CALLBACK)),
    (
        "vkEnumerateInstanceExtensionProperties",
        Replay::Skip(LOADER_QUERY),
    ),
    (
        "vkEnumerateInstanceLayerProperties",
        Replay::Skip(LOADER_QUERY),
    ),
    (
        "vkEnumerateDeviceExtensionProperties",
        Replay::Skip(LOADER_QUERY),
    ),
    (
        "vkEnumerateDeviceLayerProperties",
        Replay::Skip(LOADER_QUERY),
    ),
    ("vkGetInstanceProcAddr", Replay::Skip(LOADER_QUERY)),
    ("vkGetDeviceProcAddr", Replay::Skip(LOADER_QUERY)),
    // devices, queues, waits
    ("vkCreateDevice", Replay::By("device")),
    ("vkDestroyDevice", Replay::By("device")),
    ("vkGetDeviceQueue", Replay::By("device")),
    ("vkGetDeviceQueue2", Replay::By("device")),
    ("vkCreateCommandPool", Replay::By("device")),
    ("vkWaitForFences", Replay::By("device")),
    ("vkGetFenceStatus", Replay::By("device")),
    ("vkGetSemaphoreCounterValue", Replay::By("device")),
    ("vkQueueWaitIdle", Replay::By("device")),
    ("vkDeviceWaitIdle", Replay::By("device")),
    // memory
    ("vkAllocateMemory", Replay::By("memory")),
    ("vkFreeMemory", Replay::By("memory")),
    ("vkMapMemory", Replay::By("memory")),
    ("vkUnmapMemory", Replay::By("memory")),
    ("vkBindBufferMemory", Replay::By("memory")),
    ("vkBindImageMemory", Replay::By("memory")),
    ("vkBindBufferMemory2", Replay::By("memory")),
    ("vkBindImageMemory2", Replay::By("memory")),
    (
        "vkFlushMappedMemoryRanges",
        Replay::Skip("memory writes are flushed as they are applied"),
    ),
    (
        "vkInvalidateMappedMemoryRanges",
        Replay::Skip("invalidation only matters to the host"),
    ),
    // queries
    ("vkCreateQueryPool", Replay::By("queries")),
    ("vkDestroyQueryPool", Replay::By("queries")),
    ("vkResetQueryPool", Replay::By("queries")),
    ("vkCmdResetQueryPool", Replay::By("queries")),
    ("vkCmdBeginQuery", Replay::By("queries")),
    ("vkCmdEndQuery", Replay::By("queries")),
    ("vkCmdBeginQueryIndexedEXT", Replay::By("queries")),
    ("vkCmdEndQueryIndexedEXT", Replay::By("queries")),
    ("vkCmdWriteTimestamp", Replay::By("queries")),
    ("vkCmdWriteTimestamp2", Replay::By("queries")),
    ("vkCmdCopyQueryPoolResults", Replay::By("queries")),
    (
        "vkGetQueryPoolResults",
        Replay::Skip("re-done at the trace's QueryResults record, with the bytes the app got"),
    ),
    (
        "vkAcquireProfilingLockKHR",
        Replay::Skip(
            "the replayer holds the profiling lock itself from the first performance pool",
        ),
    ),
    (
        "vkReleaseProfilingLockKHR",
        Replay::Skip("the replayer holds the profiling lock until the device is destroyed"),
    ),
    (
        "vkGetCalibratedTimestampsEXT",
        Replay::Skip("clock samples have no effect the replay needs"),
    ),
    (
        "vkSetDebugUtilsObjectNameEXT",
        Replay::Skip("names only help tools, and need VK_EXT_debug_utils on the replay"),
    ),
    // submissions
    ("vkQueueSubmit", Replay::By("submit")),
    ("vkQueueSubmit2", Replay::By("submit")),
    // descriptor update templates
    (
        "vkCreateDescriptorUpdateTemplate",
        Replay::By("descriptors"),
    ),
    (
        "vkDestroyDescriptorUpdateTemplate",
        Replay::By("descriptors"),
    ),
    (
        "vkUpdateDescriptorSetWithTemplate",
        Replay::By("descriptors"),
    ),
    (
        "vkCmdPushDescriptorSetWithTemplateKHR",
        Replay::By("descriptors"),
    ),
    // the window system, emulated
    ("vkCreateXlibSurfaceKHR", Replay::By("wsi")),
    ("vkCreateXcbSurfaceKHR", Replay::By("wsi")),
    ("vkCreateWaylandSurfaceKHR", Replay::By("wsi")),
    ("vkCreateHeadlessSurfaceEXT", Replay::By("wsi")),
    ("vkCreateDisplayPlaneSurfaceKHR", Replay::By("wsi")),
    ("vkDestroySurfaceKHR", Replay::By("wsi")),
    ("vkCreateSwapchainKHR", Replay::By("wsi")),
    ("vkGetSwapchainImagesKHR", Replay::By("wsi")),
    ("vkDestroySwapchainKHR", Replay::By("wsi")),
    ("vkAcquireNextImageKHR", Replay::By("wsi")),
    ("vkAcquireNextImage2KHR", Replay::By("wsi")),
    ("vkQueuePresentKHR", Replay::By("wsi")),
    (
        "vkGetPhysicalDeviceSurfaceSupportKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceSurfaceCapabilitiesKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceSurfaceFormatsKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceSurfacePresentModesKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceSurfaceCapabilities2KHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceSurfaceCapabilities2EXT",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceSurfaceFormats2KHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceXlibPresentationSupportKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceXcbPresentationSupportKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDeviceWaylandPresentationSupportKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetPhysicalDevicePresentRectanglesKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetDeviceGroupSurfacePresentModesKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    (
        "vkGetDeviceGroupPresentCapabilitiesKHR",
        Replay::Skip(SURFACE_QUERY),
    ),
    ("vkGetSwapchainStatusKHR", Replay::Skip(SURFACE_QUERY)),
    ("vkWaitForPresentKHR", Replay::Skip(SURFACE_QUERY)),
    ("vkReleaseSwapchainImagesEXT", Replay::Skip(SURFACE_QUERY)),
];
