//! Device creation (the real device gets the features the emulation needs) and destruction, and the
//! profiling lock.

use super::instance::family_caps;
use super::*;

pub(super) unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    guard(vk::Result::ERROR_INITIALIZATION_FAILED, || {
        let (Some(ci), false) = (p_create_info.as_ref(), p_device.is_null()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(inst) = instance_of(pd.as_raw()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some((gipa, gdpa)) = loader::take_device_link(p_create_info) else {
            report("vkCreateDevice without loader link info");
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let Some(create) = gipa(inst.handle, c"vkCreateDevice".as_ptr()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let create: vk::PFN_vkCreateDevice = std::mem::transmute(create);

        let names: &[*const c_char] =
            if ci.enabled_extension_count == 0 || ci.pp_enabled_extension_names.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(
                    ci.pp_enabled_extension_names,
                    ci.enabled_extension_count as usize,
                )
            };
        let emulate = names
            .iter()
            .any(|&n| !n.is_null() && CStr::from_ptr(n) == PERF_EXT);
        let r = if emulate {
            create_stripped(create, &inst, pd, ci, names, p_allocator, p_device)
        } else {
            create(pd, p_create_info, p_allocator, p_device)
        };
        if r != vk::Result::SUCCESS {
            return r;
        }
        let handle = *p_device;
        let f = DeviceFns::load(|n| gdpa(handle, n.as_ptr()));
        let mut props = vk::PhysicalDeviceProperties::default();
        if let Some(gp) = inst.f.get_properties {
            gp(pd, &mut props);
        }
        let families = family_caps(&inst, pd);
        let valid_bits = {
            let mut n = 0u32;
            let mut v = Vec::new();
            if let Some(q) = inst.f.get_queue_family_properties {
                q(pd, &mut n, std::ptr::null_mut());
                let mut p = vec![vk::QueueFamilyProperties::default(); n as usize];
                q(pd, &mut n, p.as_mut_ptr());
                v = p.iter().map(|p| p.timestamp_valid_bits).collect();
            }
            v
        };
        let mut mem_props = vk::PhysicalDeviceMemoryProperties::default();
        if let Some(g) = inst.f.get_memory_properties {
            g(pd, &mut mem_props);
        }
        let copier = if emulate {
            match copy::Copier::new(handle, &f) {
                Ok(c) => Some(c),
                Err(e) => {
                    report(&format!(
                        "vkCmdCopyQueryPoolResults on performance pools will not work: {e}"
                    ));
                    None
                }
            }
        } else {
            None
        };
        let dev = Device {
            handle,
            gdpa,
            emulate,
            families,
            valid_bits,
            period: props.limits.timestamp_period,
            per_pass: per_pass().unwrap_or(counters::DEFAULT_PER_PASS),
            f,
            copier,
            mem_props,
            st: Mutex::new(DevState::default()),
        };
        devices()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(loader::dispatch_key(handle.as_raw()), Arc::new(dev));
        vk::Result::SUCCESS
    })
}

/// Creates the device without VK_KHR_performance_query (the driver may not know it) and with the
/// query features the emulation needs. The app's pNext chain is relinked around the performance
/// feature struct for the call and restored afterwards.
unsafe fn create_stripped(
    create: vk::PFN_vkCreateDevice,
    inst: &Instance,
    pd: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo<'_>,
    names: &[*const c_char],
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    let kept: Vec<*const c_char> = names
        .iter()
        .copied()
        .filter(|&n| n.is_null() || CStr::from_ptr(n) != PERF_EXT)
        .collect();
    let mut supported = vk::PhysicalDeviceFeatures::default();
    if let Some(f) = inst.f.get_features {
        f(pd, &mut supported);
    }
    let want = |f: &mut vk::PhysicalDeviceFeatures| {
        f.pipeline_statistics_query |= supported.pipeline_statistics_query;
        f.occlusion_query_precise |= supported.occlusion_query_precise;
    };

    // Walk the chain: unlink the performance feature structs, note every pNext we change.
    let mut ours = *ci;
    ours.enabled_extension_count = kept.len() as u32;
    ours.pp_enabled_extension_names = kept.as_ptr();
    let mut restore: Vec<(*mut vk::BaseOutStructure<'_>, *mut vk::BaseOutStructure<'_>)> =
        Vec::new();
    let mut features2: *mut vk::PhysicalDeviceFeatures2<'_> = std::ptr::null_mut();
    let mut prev: *mut vk::BaseOutStructure<'_> = std::ptr::null_mut();
    let mut node = ci.p_next as *mut vk::BaseOutStructure<'_>;
    while !node.is_null() {
        let next = (*node).p_next;
        if (*node).s_type == vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR {
            if prev.is_null() {
                ours.p_next = next as *const c_void;
            } else {
                restore.push((prev, (*prev).p_next));
                (*prev).p_next = next;
            }
        } else {
            if (*node).s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
                features2 = node as *mut vk::PhysicalDeviceFeatures2<'_>;
            }
            prev = node;
        }
        node = next;
    }
    let mut core;
    let saved2 = features2.as_ref().map(|f| f.features);
    if let Some(f2) = features2.as_mut() {
        want(&mut f2.features);
    } else {
        core = ci.p_enabled_features.as_ref().copied().unwrap_or_default();
        want(&mut core);
        ours.p_enabled_features = &core;
    }
    let r = create(pd, &ours, p_allocator, p_device);
    if let (Some(f2), Some(saved)) = (features2.as_mut(), saved2) {
        f2.features = saved;
    }
    for (p, old) in restore.into_iter().rev() {
        (*p).p_next = old;
    }
    r
}

pub(super) unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard((), || {
        let key = loader::dispatch_key(device.as_raw());
        let dev = devices()
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        let Some(dev) = dev else { return };
        // Pools the app leaked: their internal pools go with the device, the driver frees those; the
        // copy buffers and pipeline objects are the layer's to free.
        {
            let mut st = lock(&dev.st);
            for (_, p) in st.pools.drain() {
                if let Some(c) = p.copy {
                    c.destroy(&dev, p_allocator);
                }
            }
        }
        if let Some(c) = &dev.copier {
            c.destroy(&dev, p_allocator);
        }
        if let Some(f) = dev.f.destroy_device {
            f(device, p_allocator);
        }
    })
}

// ---- profiling lock -------------------------------------------------------------------------------

pub(super) unsafe extern "system" fn acquire_profiling_lock(
    device: vk::Device,
    _info: *const vk::AcquireProfilingLockInfoKHR<'_>,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(device.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        // The spec lets several actors hold the lock at once; nothing here ever contends, so the
        // timeout never expires.
        lock(&dev.st).lock_holders += 1;
        vk::Result::SUCCESS
    })
}

pub(super) unsafe extern "system" fn release_profiling_lock(device: vk::Device) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        let mut st = lock(&dev.st);
        if st.lock_holders == 0 {
            report("VUID-vkReleaseProfilingLockKHR-device-03235: vkReleaseProfilingLockKHR without a held profiling lock");
            return;
        }
        st.lock_holders -= 1;
        if st.lock_holders == 0 {
            st.lock_generation += 1;
        }
    })
}
