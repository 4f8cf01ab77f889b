//! Physical-device queries under a target device (`crate::target`): features, properties, format
//! and image format properties, queue families and memory, each called down, reduced to what the
//! target offers too while recording with one, then recorded as the app received it. Without a
//! target they only record, as the generated intercepts did.
//!
//! Depends on: `runtime`, `target`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc)]

use crate::hooks::{next, raw, rec, Entry};
use crate::runtime::{self, guard};
use crate::target;
use ash::vk;
use layer_support::profile::{rules, DeviceProfile};
use std::ffi::c_void;

/// One hook: call down, apply `$apply` to the outputs when a target is active, record.
macro_rules! physical_hook {
    ($name:ident, ($($p:ident : $t:ty),*), |$target:ident| $apply:block) => {
        pub unsafe extern "system" fn $name(physical: vk::PhysicalDevice, $($p: $t),*) {
            let f = next!(runtime::instance_table(raw(physical)).$name);
            f(physical, $($p),*);
            guard(stringify!($name), || {
                if let Some($target) = target::active() {
                    let $target: &DeviceProfile = $target;
                    $apply
                }
                rec!($name, 0, |e| vkstream::encode::$name(e, physical, $($p),*));
            });
        }
    };
}

/// One hook for a command and its KHR alias, as [`physical_hook`]; `E` is the name the app
/// called (the next layer's function of that name, and the id it is recorded under).
macro_rules! physical_hook2 {
    ($name:ident, $pfn:ty, ($($p:ident : $t:ty),*), |$target:ident| $apply:block) => {
        pub unsafe fn $name<E: Entry<$pfn, vkstream::InstanceTable>>(
            physical: vk::PhysicalDevice,
            $($p: $t),*
        ) {
            let f = next!(E::next(runtime::instance_table(raw(physical))));
            f(physical, $($p),*);
            guard(stringify!($name), || {
                if let Some($target) = target::active() {
                    let $target: &DeviceProfile = $target;
                    $apply
                }
                rec!(E::ID, 0, |e| vkstream::encode::$name(e, physical, $($p),*));
            });
        }
    };
}

physical_hook!(vkGetPhysicalDeviceFeatures, (p_features: *mut vk::PhysicalDeviceFeatures), |t| {
    if let Some(f) = p_features.as_mut() {
        target::log_hidden("features", &rules::and_core_features(f, t));
    }
});

physical_hook2!(vkGetPhysicalDeviceFeatures2, vk::PFN_vkGetPhysicalDeviceFeatures2,
    (p_features: *mut vk::PhysicalDeviceFeatures2<'_>), |t| {
    target::log_hidden("features", &rules::and_features_chain(p_features as *mut c_void, t));
});

physical_hook!(vkGetPhysicalDeviceProperties, (p_properties: *mut vk::PhysicalDeviceProperties), |t| {
    if let Some(p) = p_properties.as_mut() {
        rules::clamp_properties(p, t);
    }
});

physical_hook2!(vkGetPhysicalDeviceProperties2, vk::PFN_vkGetPhysicalDeviceProperties2,
    (p_properties: *mut vk::PhysicalDeviceProperties2<'_>), |t| {
    rules::clamp_properties_chain(p_properties as *mut c_void, t);
});

physical_hook!(vkGetPhysicalDeviceFormatProperties,
    (format: vk::Format, p_props: *mut vk::FormatProperties), |t| {
    if let Some(p) = p_props.as_mut() {
        rules::and_format(format, p, t);
    }
});

physical_hook2!(vkGetPhysicalDeviceFormatProperties2, vk::PFN_vkGetPhysicalDeviceFormatProperties2,
    (format: vk::Format, p_props: *mut vk::FormatProperties2<'_>), |t| {
    rules::and_format_chain(format, p_props as *mut c_void, t);
});

physical_hook!(vkGetPhysicalDeviceQueueFamilyProperties,
    (p_count: *mut u32, p_props: *mut vk::QueueFamilyProperties), |t| {
    if !p_count.is_null() && !p_props.is_null() {
        for q in std::slice::from_raw_parts_mut(p_props, *p_count as usize) {
            rules::reduce_queue_family(q, t);
        }
    }
});

physical_hook2!(vkGetPhysicalDeviceQueueFamilyProperties2,
    vk::PFN_vkGetPhysicalDeviceQueueFamilyProperties2,
    (p_count: *mut u32, p_props: *mut vk::QueueFamilyProperties2<'_>), |t| {
    if !p_count.is_null() && !p_props.is_null() {
        for q in std::slice::from_raw_parts_mut(p_props, *p_count as usize) {
            rules::reduce_queue_family(&mut q.queue_family_properties, t);
        }
    }
});

physical_hook!(vkGetPhysicalDeviceMemoryProperties,
    (p_props: *mut vk::PhysicalDeviceMemoryProperties), |t| {
    if let Some(m) = p_props.as_mut() {
        rules::reduce_memory(m, t);
    }
});

physical_hook2!(vkGetPhysicalDeviceMemoryProperties2,
    vk::PFN_vkGetPhysicalDeviceMemoryProperties2,
    (p_props: *mut vk::PhysicalDeviceMemoryProperties2<'_>), |t| {
    if let Some(m) = p_props.as_mut() {
        rules::reduce_memory(&mut m.memory_properties, t);
    }
});

/// Image format support: a format the target lacks for the usage is `VK_ERROR_FORMAT_NOT_SUPPORTED`,
/// a supported one is clamped to the target's limits.
unsafe fn image_format(
    r: vk::Result,
    format: vk::Format,
    ty: vk::ImageType,
    tiling: vk::ImageTiling,
    usage: vk::ImageUsageFlags,
    props: *mut vk::ImageFormatProperties,
) -> vk::Result {
    let Some(t) = target::active() else { return r };
    if r != vk::Result::SUCCESS || props.is_null() {
        return r;
    }
    if !rules::image_format_ok(format, tiling, usage, t) {
        *props = vk::ImageFormatProperties::default();
        target::log_hidden(
            "image support",
            &[format!(
                "format {} for usage {:#x}",
                format.as_raw(),
                usage.as_raw()
            )],
        );
        return vk::Result::ERROR_FORMAT_NOT_SUPPORTED;
    }
    rules::clamp_image_format(&mut *props, ty, t);
    r
}

pub unsafe extern "system" fn vkGetPhysicalDeviceImageFormatProperties(
    physical: vk::PhysicalDevice,
    format: vk::Format,
    ty: vk::ImageType,
    tiling: vk::ImageTiling,
    usage: vk::ImageUsageFlags,
    flags: vk::ImageCreateFlags,
    p_props: *mut vk::ImageFormatProperties,
) -> vk::Result {
    let f = next!(
        runtime::instance_table(raw(physical)).vkGetPhysicalDeviceImageFormatProperties,
        vk::Result::ERROR_EXTENSION_NOT_PRESENT
    );
    let r = f(physical, format, ty, tiling, usage, flags, p_props);
    guard("vkGetPhysicalDeviceImageFormatProperties", || {
        let r = image_format(r, format, ty, tiling, usage, p_props);
        rec!(vkGetPhysicalDeviceImageFormatProperties, r.as_raw(), |e| {
            vkstream::encode::vkGetPhysicalDeviceImageFormatProperties(
                e, physical, format, ty, tiling, usage, flags, p_props,
            )
        });
        r
    })
    .unwrap_or(r)
}

/// Also `vkGetPhysicalDeviceImageFormatProperties2KHR` (`E` says which name the app called).
pub unsafe fn vkGetPhysicalDeviceImageFormatProperties2<
    E: Entry<vk::PFN_vkGetPhysicalDeviceImageFormatProperties2, vkstream::InstanceTable>,
>(
    physical: vk::PhysicalDevice,
    p_info: *const vk::PhysicalDeviceImageFormatInfo2<'_>,
    p_props: *mut vk::ImageFormatProperties2<'_>,
) -> vk::Result {
    let f = next!(
        E::next(runtime::instance_table(raw(physical))),
        vk::Result::ERROR_EXTENSION_NOT_PRESENT
    );
    let r = f(physical, p_info, p_props);
    guard("vkGetPhysicalDeviceImageFormatProperties2", || {
        let r = match (p_info.as_ref(), p_props.as_mut()) {
            (Some(i), Some(p)) => image_format(
                r,
                i.format,
                i.ty,
                i.tiling,
                i.usage,
                &mut p.image_format_properties,
            ),
            _ => r,
        };
        rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkGetPhysicalDeviceImageFormatProperties2(
                e, physical, p_info, p_props,
            )
        });
        r
    })
    .unwrap_or(r)
}
