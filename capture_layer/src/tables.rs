//! What the layer keeps of each instance and device from the chain: the next layer's dispatch
//! tables and the properties read at creation. Plain data, found through `runtime`'s dispatch maps.
//!
//! Depends on: `loader` only. A leaf: `readback` reads devices through `DeviceInfo` without
//! seeing the layer's per-device bookkeeping (`state`), which holds a `readback::Reader`.

use ash::vk;
use vkstream::{DeviceTable, InstanceTable};

/// Per-instance data, found through the dispatch key of a VkInstance or VkPhysicalDevice.
pub struct InstanceData {
    pub handle: vk::Instance,
    /// The next layer's vkGetInstanceProcAddr.
    pub gipa: vk::PFN_vkGetInstanceProcAddr,
    pub table: InstanceTable,
    /// `VkApplicationInfo::apiVersion` (1.0 when absent).
    pub api_version: u32,
    pub extensions: Vec<String>,
}

/// Per-device data from the chain (`runtime::DeviceData` adds the layer's bookkeeping).
pub struct DeviceInfo {
    pub handle: vk::Device,
    pub physical: vk::PhysicalDevice,
    pub instance: &'static InstanceData,
    pub gdpa: vk::PFN_vkGetDeviceProcAddr,
    pub table: DeviceTable,
    pub extensions: Vec<String>,
    /// The app enabled VK_EXT_calibrated_timestamps, so the layer may call vkGetCalibratedTimestampsEXT.
    pub calibrated: bool,
    pub memory: vk::PhysicalDeviceMemoryProperties,
    pub queue_families: Vec<vk::QueueFamilyProperties>,
    /// The loader's callback for dispatchable objects the layer creates itself (command buffers
    /// of the snapshot's GPU read-back).
    pub set_loader_data: Option<crate::loader::SetDeviceLoaderData>,
}

// SAFETY: the raw pointers inside ash structs held here (none are dereferenced across threads) are
// plain data.
unsafe impl Sync for DeviceInfo {}
unsafe impl Send for DeviceInfo {}
unsafe impl Sync for InstanceData {}
unsafe impl Send for InstanceData {}
