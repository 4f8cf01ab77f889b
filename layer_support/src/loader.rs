//! The loader <-> layer interface structures from the Vulkan loader's `vk_layer.h`, declared here because
//! ash does not carry them. Only the fields the layers read are relied upon; layouts match the header.

use ash::vk;
use std::ffi::{c_char, c_void};

/// `PFN_GetPhysicalDeviceProcAddr`.
pub type PfnGetPhysicalDeviceProcAddr =
    Option<unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction>;

/// `VkNegotiateLayerStructType::LAYER_NEGOTIATE_INTERFACE_STRUCT`.
pub const LAYER_NEGOTIATE_INTERFACE_STRUCT: u32 = 1;

/// `VkNegotiateLayerInterface`.
#[repr(C)]
pub struct NegotiateLayerInterface {
    pub s_type: u32,
    pub p_next: *mut c_void,
    pub loader_layer_interface_version: u32,
    pub pfn_get_instance_proc_addr: Option<vk::PFN_vkGetInstanceProcAddr>,
    pub pfn_get_device_proc_addr: Option<vk::PFN_vkGetDeviceProcAddr>,
    pub pfn_get_physical_device_proc_addr: PfnGetPhysicalDeviceProcAddr,
}

/// `VkLayerFunction::VK_LAYER_LINK_INFO`: the create-info element that carries the next layer's entry points.
pub const LAYER_LINK_INFO: u32 = 0;

/// `VkLayerInstanceLink`.
#[repr(C)]
pub struct LayerInstanceLink {
    pub p_next: *mut LayerInstanceLink,
    pub pfn_next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub pfn_next_get_physical_device_proc_addr: PfnGetPhysicalDeviceProcAddr,
}

/// The union of `VkLayerInstanceCreateInfo` (largest member: two function pointers).
#[repr(C)]
pub union LayerInstanceCreateInfoU {
    pub p_layer_info: *mut LayerInstanceLink,
    pub raw: [*mut c_void; 2],
}

/// `VkLayerInstanceCreateInfo` (sType `VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO`).
#[repr(C)]
pub struct LayerInstanceCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: u32,
    pub u: LayerInstanceCreateInfoU,
}

/// `VkLayerDeviceLink`.
#[repr(C)]
pub struct LayerDeviceLink {
    pub p_next: *mut LayerDeviceLink,
    pub pfn_next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub pfn_next_get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
}

#[repr(C)]
pub union LayerDeviceCreateInfoU {
    pub p_layer_info: *mut LayerDeviceLink,
    pub raw: *mut c_void,
}

/// `VkLayerDeviceCreateInfo` (sType `VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO`).
#[repr(C)]
pub struct LayerDeviceCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: u32,
    pub u: LayerDeviceCreateInfoU,
}

/// The first `VkBaseInStructure`-shaped element of `chain` with `s_type` and the link-info function.
///
/// # Safety
/// `chain` must be a valid Vulkan pNext chain.
unsafe fn find_link(chain: *const c_void, s_type: vk::StructureType) -> *mut c_void {
    find_function(chain, s_type, LAYER_LINK_INFO)
}

/// `VkLayerFunction::VK_LOADER_DATA_CALLBACK`: the element whose union holds `pfnSetDeviceLoaderData`.
pub const LOADER_DATA_CALLBACK: u32 = 1;

/// `PFN_vkSetDeviceLoaderData`: gives a dispatchable object a layer created below the loader the
/// loader's dispatch pointer, so layers under this one can find their data through it.
pub type SetDeviceLoaderData = unsafe extern "system" fn(vk::Device, *mut c_void) -> vk::Result;

/// The loader's `pfnSetDeviceLoaderData` from a device create info, if the loader gave one.
///
/// # Safety
/// `create_info` must be the `VkDeviceCreateInfo` the loader passed to this layer.
pub unsafe fn device_loader_data_callback(
    create_info: *const vk::DeviceCreateInfo<'_>,
) -> Option<SetDeviceLoaderData> {
    let info = find_function(
        (*create_info).p_next,
        vk::StructureType::LOADER_DEVICE_CREATE_INFO,
        LOADER_DATA_CALLBACK,
    ) as *const LayerDeviceCreateInfo;
    if info.is_null() || (*info).u.raw.is_null() {
        return None;
    }
    Some(std::mem::transmute::<*mut c_void, SetDeviceLoaderData>(
        (*info).u.raw,
    ))
}

unsafe fn find_function(
    mut chain: *const c_void,
    s_type: vk::StructureType,
    function: u32,
) -> *mut c_void {
    while !chain.is_null() {
        let base = &*(chain as *const vk::BaseInStructure<'_>);
        if base.s_type == s_type {
            // Both loader create-info structs share the sType/pNext/function prefix.
            let info = &*(chain as *const LayerInstanceCreateInfo);
            if info.function == function {
                return chain as *mut c_void;
            }
        }
        chain = base.p_next as *const c_void;
    }
    std::ptr::null_mut()
}

/// Finds the instance link info, returns the next layer's `vkGetInstanceProcAddr`, and advances the link
/// so the next layer sees its own entry (as the loader interface requires).
///
/// # Safety
/// `create_info` must be the `VkInstanceCreateInfo` the loader passed to this layer.
pub unsafe fn take_instance_link(
    create_info: *const vk::InstanceCreateInfo<'_>,
) -> Option<vk::PFN_vkGetInstanceProcAddr> {
    let info = find_link(
        (*create_info).p_next,
        vk::StructureType::LOADER_INSTANCE_CREATE_INFO,
    ) as *mut LayerInstanceCreateInfo;
    if info.is_null() {
        return None;
    }
    let link = (*info).u.p_layer_info;
    if link.is_null() {
        return None;
    }
    let gipa = (*link).pfn_next_get_instance_proc_addr;
    (*info).u.p_layer_info = (*link).p_next;
    Some(gipa)
}

/// Device counterpart of [`take_instance_link`]: returns the next layer's gipa and gdpa.
///
/// # Safety
/// `create_info` must be the `VkDeviceCreateInfo` the loader passed to this layer.
pub unsafe fn take_device_link(
    create_info: *const vk::DeviceCreateInfo<'_>,
) -> Option<(vk::PFN_vkGetInstanceProcAddr, vk::PFN_vkGetDeviceProcAddr)> {
    let info = find_link(
        (*create_info).p_next,
        vk::StructureType::LOADER_DEVICE_CREATE_INFO,
    ) as *mut LayerDeviceCreateInfo;
    if info.is_null() {
        return None;
    }
    let link = (*info).u.p_layer_info;
    if link.is_null() {
        return None;
    }
    let next = (
        (*link).pfn_next_get_instance_proc_addr,
        (*link).pfn_next_get_device_proc_addr,
    );
    (*info).u.p_layer_info = (*link).p_next;
    Some(next)
}

/// The app's part of a create-info pNext chain: the loader puts its own elements (sType 47/48) in front,
/// and those must not reach the trace (they are process-local pointers the replayer cannot use).
///
/// # Safety
/// `chain` must be a valid pNext chain.
pub unsafe fn skip_loader_structs(mut chain: *const c_void) -> *const c_void {
    while !chain.is_null() {
        let base = &*(chain as *const vk::BaseInStructure<'_>);
        if base.s_type != vk::StructureType::LOADER_INSTANCE_CREATE_INFO
            && base.s_type != vk::StructureType::LOADER_DEVICE_CREATE_INFO
        {
            break;
        }
        chain = base.p_next as *const c_void;
    }
    chain
}

/// The loader stores its dispatch table pointer in the first word of every dispatchable object;
/// objects of one instance (or one device with its queues and command buffers) share it.
///
/// # Safety
/// `handle` must be a live dispatchable handle (non-null).
#[inline]
pub unsafe fn dispatch_key(handle: u64) -> usize {
    if handle == 0 {
        return 0;
    }
    *(handle as usize as *const usize)
}
