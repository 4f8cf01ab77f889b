//! Instance-level intercepts: instance creation, the extension and its features and properties
//! advertised, and the counters and passes enumerated per queue family.

use super::*;

pub(super) unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    guard(vk::Result::ERROR_INITIALIZATION_FAILED, || {
        if p_create_info.is_null() || p_instance.is_null() {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        if let Err(e) = per_pass() {
            report(&e);
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        let Some(gipa) = loader::take_instance_link(p_create_info) else {
            report("vkCreateInstance without loader link info; is the layer loaded by the loader?");
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(create) = gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let create: vk::PFN_vkCreateInstance = std::mem::transmute(create);
        let r = create(p_create_info, p_allocator, p_instance);
        if r != vk::Result::SUCCESS {
            return r;
        }
        let handle = *p_instance;
        let f = InstanceFns::load(|n| gipa(handle, n.as_ptr()));
        let key = loader::dispatch_key(handle.as_raw());
        instances()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, Arc::new(Instance { handle, gipa, f }));
        vk::Result::SUCCESS
    })
}

pub(super) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard((), || {
        let key = loader::dispatch_key(instance.as_raw());
        let inst = instances()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Some(f) = inst.and_then(|i| i.f.destroy_instance) {
            f(instance, p_allocator);
        }
    })
}

/// What each queue family of `pd` can measure (the feature bits the layer turns on when it emulates).
pub(super) unsafe fn family_caps(inst: &Instance, pd: vk::PhysicalDevice) -> Vec<Capabilities> {
    let (Some(qfp), Some(feat)) = (inst.f.get_queue_family_properties, inst.f.get_features) else {
        return Vec::new();
    };
    let mut n = 0u32;
    qfp(pd, &mut n, std::ptr::null_mut());
    let mut props = vec![vk::QueueFamilyProperties::default(); n as usize];
    qfp(pd, &mut n, props.as_mut_ptr());
    props.truncate(n as usize);
    let mut f = vk::PhysicalDeviceFeatures::default();
    feat(pd, &mut f);
    props
        .iter()
        .map(|p| Capabilities {
            graphics: p.queue_flags.contains(vk::QueueFlags::GRAPHICS),
            compute: p.queue_flags.contains(vk::QueueFlags::COMPUTE),
            timestamps: p.timestamp_valid_bits > 0,
            pipeline_statistics: f.pipeline_statistics_query == vk::TRUE,
            occlusion: f.occlusion_query_precise == vk::TRUE,
        })
        .collect()
}

/// The standard two-call array protocol.
unsafe fn write_array<T: Copy>(items: &[T], p_count: *mut u32, p_out: *mut T) -> vk::Result {
    if p_out.is_null() {
        *p_count = items.len() as u32;
        return vk::Result::SUCCESS;
    }
    let n = (*p_count as usize).min(items.len());
    std::ptr::copy_nonoverlapping(items.as_ptr(), p_out, n);
    *p_count = n as u32;
    if n < items.len() {
        vk::Result::INCOMPLETE
    } else {
        vk::Result::SUCCESS
    }
}

fn perf_extension() -> vk::ExtensionProperties {
    let mut e = vk::ExtensionProperties {
        spec_version: 1,
        ..Default::default()
    };
    counters::fill_c_chars(&mut e.extension_name, "VK_KHR_performance_query");
    e
}

pub(super) unsafe extern "system" fn enumerate_device_extension_properties(
    pd: vk::PhysicalDevice,
    p_layer_name: *const c_char,
    p_count: *mut u32,
    p_props: *mut vk::ExtensionProperties,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        if p_count.is_null() {
            return vk::Result::ERROR_UNKNOWN;
        }
        if !p_layer_name.is_null()
            && CStr::from_ptr(p_layer_name).to_bytes() == crate::LAYER_NAME.as_bytes()
        {
            return write_array(&[perf_extension()], p_count, p_props);
        }
        let Some(inst) = instance_of(pd.as_raw()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(next) = inst.f.enumerate_device_extension_properties else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        if !p_layer_name.is_null() {
            return next(pd, p_layer_name, p_count, p_props);
        }
        let mut n = 0u32;
        let r = next(pd, std::ptr::null(), &mut n, std::ptr::null_mut());
        if r != vk::Result::SUCCESS {
            return r;
        }
        let mut list = vec![vk::ExtensionProperties::default(); n as usize];
        let r = next(pd, std::ptr::null(), &mut n, list.as_mut_ptr());
        if r.as_raw() < 0 {
            return r;
        }
        list.truncate(n as usize);
        if !list
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(PERF_EXT))
        {
            list.push(perf_extension());
        }
        write_array(&list, p_count, p_props)
    })
}

unsafe fn fill_features(p: *mut vk::PhysicalDeviceFeatures2<'_>) {
    let f = find_in_chain_mut(
        (*p).p_next,
        vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR,
    ) as *mut vk::PhysicalDevicePerformanceQueryFeaturesKHR<'_>;
    if let Some(f) = f.as_mut() {
        f.performance_counter_query_pools = vk::TRUE;
        // Internal queries of one type cannot be active twice in a command buffer.
        f.performance_counter_multiple_query_pools = vk::FALSE;
    }
}

pub(super) unsafe extern "system" fn get_features2(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_features2) {
            f(pd, p);
            fill_features(p);
        }
    })
}

pub(super) unsafe extern "system" fn get_features2_khr(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_features2_khr) {
            f(pd, p);
            fill_features(p);
        }
    })
}

unsafe fn fill_properties(p: *mut vk::PhysicalDeviceProperties2<'_>) {
    let q = find_in_chain_mut(
        (*p).p_next,
        vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_PROPERTIES_KHR,
    ) as *mut vk::PhysicalDevicePerformanceQueryPropertiesKHR<'_>;
    if let Some(q) = q.as_mut() {
        // Durations are differences of two timestamps: a copy resolves them with a compute dispatch.
        q.allow_command_buffer_query_copies = vk::TRUE;
    }
}

pub(super) unsafe extern "system" fn get_properties2(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_properties2) {
            f(pd, p);
            fill_properties(p);
        }
    })
}

pub(super) unsafe extern "system" fn get_properties2_khr(
    pd: vk::PhysicalDevice,
    p: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    guard((), || {
        if let Some(f) = instance_of(pd.as_raw()).and_then(|i| i.f.get_properties2_khr) {
            f(pd, p);
            fill_properties(p);
        }
    })
}

pub(super) unsafe extern "system" fn enumerate_counters(
    pd: vk::PhysicalDevice,
    family: u32,
    p_count: *mut u32,
    p_counters: *mut vk::PerformanceCounterKHR<'_>,
    p_descs: *mut vk::PerformanceCounterDescriptionKHR<'_>,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(inst) = instance_of(pd.as_raw()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        if p_count.is_null() {
            return vk::Result::ERROR_UNKNOWN;
        }
        let caps = family_caps(&inst, pd);
        let Some(c) = caps.get(family as usize) else {
            report(&format!(
                "vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR: queue family {family} does not exist (the device has {})",
                caps.len()
            ));
            *p_count = 0;
            return vk::Result::SUCCESS;
        };
        let list = visible_counters(c);
        if p_counters.is_null() && p_descs.is_null() {
            *p_count = list.len() as u32;
            return vk::Result::SUCCESS;
        }
        let n = (*p_count as usize).min(list.len());
        for (k, &ci) in list.iter().take(n).enumerate() {
            let c = &CATALOG[ci];
            if let Some(out) = p_counters.add(k).as_mut() {
                // sType/pNext belong to the app.
                out.unit = c.unit;
                out.scope = c.scope;
                out.storage = c.storage;
                out.uuid = c.uuid();
            }
            if !p_descs.is_null() {
                let d = &mut *p_descs.add(k);
                d.flags = vk::PerformanceCounterDescriptionFlagsKHR::empty();
                counters::fill_c_chars(&mut d.name, c.name);
                counters::fill_c_chars(&mut d.category, c.category);
                counters::fill_c_chars(&mut d.description, c.description);
            }
        }
        *p_count = n as u32;
        if n < list.len() {
            vk::Result::INCOMPLETE
        } else {
            vk::Result::SUCCESS
        }
    })
}

/// Catalog indices for the app's counter indices on `family`, or a message naming the bad one.
pub(super) unsafe fn resolve_counters(
    caps: &[Capabilities],
    family: u32,
    indices: &[u32],
) -> Result<Vec<usize>, String> {
    let Some(c) = caps.get(family as usize) else {
        return Err(format!(
            "queue family {family} does not exist (the device has {})",
            caps.len()
        ));
    };
    let list = visible_counters(c);
    indices
        .iter()
        .map(|&i| {
            list.get(i as usize).copied().ok_or_else(|| {
                format!(
                    "VUID-VkQueryPoolPerformanceCreateInfoKHR-pCounterIndices-03321: counter index {i} is not below the {} counters of queue family {family}",
                    list.len()
                )
            })
        })
        .collect()
}

pub(super) unsafe fn counter_indices<'a>(
    info: &'a vk::QueryPoolPerformanceCreateInfoKHR<'_>,
) -> &'a [u32] {
    if info.counter_index_count == 0 || info.p_counter_indices.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(info.p_counter_indices, info.counter_index_count as usize)
    }
}

pub(super) unsafe extern "system" fn get_passes(
    pd: vk::PhysicalDevice,
    p_info: *const vk::QueryPoolPerformanceCreateInfoKHR<'_>,
    p_passes: *mut u32,
) {
    guard((), || {
        let (Some(inst), Some(info), Some(out)) =
            (instance_of(pd.as_raw()), p_info.as_ref(), p_passes.as_mut())
        else {
            return;
        };
        let caps = family_caps(&inst, pd);
        match resolve_counters(&caps, info.queue_family_index, counter_indices(info)) {
            Ok(set) => {
                *out = PassPlan::new(&set, per_pass().unwrap_or(counters::DEFAULT_PER_PASS)).passes
            }
            Err(e) => {
                report(&format!(
                    "vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR: {e}"
                ));
                *out = 0;
            }
        }
    })
}
