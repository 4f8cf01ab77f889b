//! What every quarry layer exports to the loader, and the pNext-chain walk both layers use.
//!
//! A layer hands its own vkGetInstanceProcAddr/vkGetDeviceProcAddr to [`export_entry_points!`],
//! which exports `vkNegotiateLoaderLayerInterfaceVersion` (loader interface version 2) and the two
//! proc-address symbols for loaders that look them up instead of negotiating.

use crate::loader::{NegotiateLayerInterface, LAYER_NEGOTIATE_INTERFACE_STRUCT};
use ash::vk;
use std::ffi::c_void;

/// Loader/layer interface negotiation: the layer speaks version 2 and hands out `gipa`/`gdpa`.
///
/// # Safety
/// `p` is null or points to the loader's valid struct.
pub unsafe fn negotiate(
    p: *mut NegotiateLayerInterface,
    gipa: vk::PFN_vkGetInstanceProcAddr,
    gdpa: vk::PFN_vkGetDeviceProcAddr,
) -> vk::Result {
    let Some(s) = p.as_mut() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if s.s_type != LAYER_NEGOTIATE_INTERFACE_STRUCT || s.loader_layer_interface_version < 2 {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    s.loader_layer_interface_version = 2;
    s.pfn_get_instance_proc_addr = Some(gipa);
    s.pfn_get_device_proc_addr = Some(gdpa);
    s.pfn_get_physical_device_proc_addr = None;
    vk::Result::SUCCESS
}

/// Exports the loader entry points of a layer whose vkGetInstanceProcAddr and vkGetDeviceProcAddr
/// are `$gipa` and `$gdpa` (paths to `unsafe extern "system" fn`s of the calling crate). The
/// negotiation hands out those functions, not the exported symbols: taken by address inside the
/// library, the exported names may resolve to libvulkan's own exports.
#[macro_export]
macro_rules! export_entry_points {
    ($gipa:path, $gdpa:path) => {
        /// Exported for loaders that look the symbol up instead of negotiating.
        ///
        /// # Safety
        /// Vulkan entry point: valid handle (or null) and NUL-terminated name.
        #[no_mangle]
        pub unsafe extern "system" fn vkGetInstanceProcAddr(
            instance: $crate::ash::vk::Instance,
            p_name: *const ::std::ffi::c_char,
        ) -> $crate::ash::vk::PFN_vkVoidFunction {
            $gipa(instance, p_name)
        }

        /// Exported for loaders that look the symbol up instead of negotiating.
        ///
        /// # Safety
        /// Vulkan entry point: valid handle and NUL-terminated name.
        #[no_mangle]
        pub unsafe extern "system" fn vkGetDeviceProcAddr(
            device: $crate::ash::vk::Device,
            p_name: *const ::std::ffi::c_char,
        ) -> $crate::ash::vk::PFN_vkVoidFunction {
            $gdpa(device, p_name)
        }

        /// Loader/layer interface negotiation: this layer speaks version 2.
        ///
        /// # Safety
        /// Called by the loader with a valid struct.
        #[no_mangle]
        pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
            p: *mut $crate::loader::NegotiateLayerInterface,
        ) -> $crate::ash::vk::Result {
            $crate::entry::negotiate(p, $gipa, $gdpa)
        }
    };
}

/// The first element of a pNext chain with `s_type`, or null.
///
/// # Safety
/// `p` is null or the start of a valid chain.
pub unsafe fn find_in_chain(mut p: *const c_void, s_type: vk::StructureType) -> *const c_void {
    while !p.is_null() {
        let base = &*(p as *const vk::BaseInStructure<'_>);
        if base.s_type == s_type {
            return p;
        }
        p = base.p_next as *const c_void;
    }
    std::ptr::null()
}

/// [`find_in_chain`] for an output chain the caller fills in.
///
/// # Safety
/// `p` is null or the start of a valid chain.
pub unsafe fn find_in_chain_mut(p: *mut c_void, s_type: vk::StructureType) -> *mut c_void {
    find_in_chain(p, s_type) as *mut c_void
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "system" fn gipa(
        _: vk::Instance,
        _: *const std::ffi::c_char,
    ) -> vk::PFN_vkVoidFunction {
        None
    }
    unsafe extern "system" fn gdpa(
        _: vk::Device,
        _: *const std::ffi::c_char,
    ) -> vk::PFN_vkVoidFunction {
        None
    }

    #[test]
    fn negotiation_takes_version_2_and_refuses_older_loaders() {
        let mut s = NegotiateLayerInterface {
            s_type: LAYER_NEGOTIATE_INTERFACE_STRUCT,
            p_next: std::ptr::null_mut(),
            loader_layer_interface_version: 5,
            pfn_get_instance_proc_addr: None,
            pfn_get_physical_device_proc_addr: None,
            pfn_get_device_proc_addr: None,
        };
        assert_eq!(
            unsafe { negotiate(&mut s, gipa, gdpa) },
            vk::Result::SUCCESS
        );
        assert_eq!(s.loader_layer_interface_version, 2);
        assert!(s.pfn_get_instance_proc_addr.is_some() && s.pfn_get_device_proc_addr.is_some());
        s.loader_layer_interface_version = 1;
        assert_ne!(
            unsafe { negotiate(&mut s, gipa, gdpa) },
            vk::Result::SUCCESS
        );
        let null = unsafe { negotiate(std::ptr::null_mut(), gipa, gdpa) };
        assert_eq!(null, vk::Result::ERROR_INITIALIZATION_FAILED);
    }

    #[test]
    fn chain_walk_finds_the_first_match() {
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        id.p_next = &mut driver as *mut _ as *mut c_void;
        let head = &mut id as *mut _ as *mut c_void;
        unsafe {
            let found =
                find_in_chain_mut(head, vk::StructureType::PHYSICAL_DEVICE_DRIVER_PROPERTIES);
            assert_eq!(found, &mut driver as *mut _ as *mut c_void);
            assert!(find_in_chain(head, vk::StructureType::SUBMIT_INFO).is_null());
            assert!(find_in_chain(std::ptr::null(), vk::StructureType::SUBMIT_INFO).is_null());
        }
    }
}
