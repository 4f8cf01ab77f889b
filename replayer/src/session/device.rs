//! Replay devices: created on the chosen GPU with queue families mapped by capability and
//! extensions checked first; queues; the replay GPU's performance counters and profiling lock.

use std::collections::HashMap;
use std::ffi::{c_void, CString};

use ash::vk;
use ash::vk::Handle as _;
use format::record::MemoryTypeSummary;

use super::{read_dispatch_key, Session};
use crate::error::ReplayError;
use crate::mapping;
use crate::portability::{DeviceUsage, FeatureUse, Use};

/// A replayed device and what the translation of its commands needs.
pub struct DeviceState {
    pub captured: u64,
    /// Which of the trace's devices this is, in creation order from 0 (results name it).
    pub index: u32,
    /// The captured instance it was created in.
    pub instance: u64,
    pub device: ash::Device,
    /// Function pointers the generated dispatch calls through.
    pub table: vkstream::DeviceTable,
    /// Captured queue family -> replay queue family.
    pub families: HashMap<u32, u32>,
    /// Queues created per replay family (captured queue indices beyond it fold onto the last one).
    pub queue_counts: HashMap<u32, u32>,
    pub memory_types: Vec<MemoryTypeSummary>,
    pub non_coherent_atom: u64,
    /// Replayed queues retrieved so far, for emulated acquire and for waits.
    pub queues: Vec<vk::Queue>,
    /// Command pool per replay family for the replayer's own transfers.
    pub own_pools: HashMap<u32, vk::CommandPool>,
    pub queue_family_of: HashMap<u64, u32>,
}

impl Session<'_> {
    /// The replay GPU's performance counters on queue family `family` (`VK_KHR_performance_query`),
    /// described as a trace records them, read through captured device `device`'s instance.
    pub fn device_counter_descs(
        &self,
        device: u64,
        family: u32,
    ) -> Result<Vec<format::record::PerfCounterDesc>, ReplayError> {
        let inst = self.instance_of_device(device)?;
        let perf = ash::khr::performance_query::Instance::new(self.entry, &inst.instance);
        let err = |e| {
            ReplayError::vk(
                "vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR",
                e,
            )
        };
        // SAFETY: valid instance and physical device; the output slices have the reported length.
        unsafe {
            let n = perf
                .enumerate_physical_device_queue_family_performance_query_counters_len(
                    inst.pd, family,
                )
                .map_err(err)?;
            let mut counters = vec![vk::PerformanceCounterKHR::default(); n];
            let mut descs = vec![vk::PerformanceCounterDescriptionKHR::default(); n];
            perf.enumerate_physical_device_queue_family_performance_query_counters(
                inst.pd,
                family,
                &mut counters,
                &mut descs,
            )
            .map_err(err)?;
            Ok(counters
                .iter()
                .zip(&descs)
                .map(|(c, d)| format::record::PerfCounterDesc {
                    uuid: c.uuid,
                    name: crate::devices::c_array_str(&d.name),
                    category: crate::devices::c_array_str(&d.category),
                    description: crate::devices::c_array_str(&d.description),
                    unit: c.unit.as_raw() as u32,
                    storage: c.storage.as_raw() as u32,
                    scope: c.scope.as_raw() as u32,
                })
                .collect())
        }
    }

    /// The replay GPU's counters on `family` as the matcher sees them.
    pub fn device_counters(
        &self,
        device: u64,
        family: u32,
    ) -> Result<Vec<crate::perf::DeviceCounter>, ReplayError> {
        Ok(self
            .device_counter_descs(device, family)?
            .iter()
            .map(crate::perf::DeviceCounter::from)
            .collect())
    }

    /// Takes the profiling lock of captured device `device` unless the replay already holds it; it
    /// is released when the device is destroyed. `what` names the replay's need in the error.
    pub fn hold_profiling_lock(&mut self, device: u64, what: &str) -> Result<(), ReplayError> {
        if self.perf.locked.contains(&device) {
            return Ok(());
        }
        let d = self.device(device)?;
        let inst = self.instance_state(d.instance)?;
        let perf = ash::khr::performance_query::Device::new(&inst.instance, &d.device);
        let info = vk::AcquireProfilingLockInfoKHR::default().timeout(10_000_000_000);
        // SAFETY: valid device with VK_KHR_performance_query enabled (the caller's pools need it).
        unsafe { perf.acquire_profiling_lock(&info) }.map_err(|e| {
            ReplayError::Other(format!(
                "cannot acquire the profiling lock ({e}), which {what} need; is another process profiling this GPU?"
            ))
        })?;
        self.perf.locked.insert(device);
        Ok(())
    }

    /// Passes the replay GPU needs to measure `indices` on queue family `family` (asked through
    /// captured device `device`'s instance).
    pub fn perf_passes(&self, device: u64, family: u32, indices: &[u32]) -> u32 {
        let Ok(inst) = self.instance_of_device(device) else {
            return u32::MAX;
        };
        let perf = ash::khr::performance_query::Instance::new(self.entry, &inst.instance);
        let ci = vk::QueryPoolPerformanceCreateInfoKHR::default()
            .queue_family_index(family)
            .counter_indices(indices);
        // SAFETY: valid instance and physical device; ci lives across the call.
        unsafe { perf.get_physical_device_queue_family_performance_query_passes(inst.pd, &ci) }
    }

    /// Creates the replay device from a create info already translated except for queue families
    /// (its queue create infos hold captured family indices) and extensions (`extensions`, the
    /// captured names), on the replay GPU of the instance that captured physical device
    /// `physical` belongs to. Checks extensions and features first so everything missing is
    /// listed in one error.
    ///
    /// # Safety
    /// `create_info` must be valid, its chains made of writable structs (the replayer's own
    /// copies): features the GPU lacks are switched off in place.
    pub unsafe fn create_device(
        &mut self,
        captured: u64,
        physical: u64,
        create_info: &vk::DeviceCreateInfo<'_>,
        extensions: &[String],
    ) -> Result<(), ReplayError> {
        let queue_infos = queue_infos(create_info);
        let inst = self.instance_of(physical)?;
        let (instance, pd, instance_captured) = (inst.instance.clone(), inst.pd, inst.captured);
        // Swapchain support is kept when available (PRESENT_SRC layouts in the app's barriers
        // need it); the emulation never calls it.
        let available = crate::devices::device_extensions(&instance, pd);
        let mut ext: Vec<String> = extensions
            .iter()
            .filter(|e| e.as_str() != "VK_KHR_swapchain" || available.contains(e))
            .cloned()
            .collect();
        if self.wsi.window && !ext.iter().any(|e| e == "VK_KHR_swapchain") {
            ext.push("VK_KHR_swapchain".into());
        }
        // Counter injection measures with performance queries even when the app made none.
        if self.counters_injected && !ext.iter().any(|e| e == "VK_KHR_performance_query") {
            ext.push("VK_KHR_performance_query".into());
        }
        // What the trace uses of what it enables (`crate::portability`): enabled extensions and
        // features the GPU lacks are left out when the trace never uses them; used ones are an
        // error naming the first call that uses each, unless --drop-unsupported drops them anyway.
        let usage = self
            .drop
            .usage
            .as_ref()
            .and_then(|u| u.device(captured))
            .cloned();
        let mut pruned: Vec<String> = Vec::new();
        let mut forced: Vec<String> = Vec::new();
        let mut missing: Vec<String> = Vec::new();
        for e in ext.iter().filter(|e| !available.contains(e)) {
            match extension_state(usage.as_ref(), e) {
                ExtensionState::Unused => pruned.push(e.clone()),
                _ if self.drop.enabled => forced.push(e.clone()),
                state => missing.push(if e == "VK_KHR_performance_query" {
                    format!("device extension {e} (replay with --emulate-counters to measure the counters with VK_LAYER_QUARRY_counters)")
                } else if let ExtensionState::Used(u) = state {
                    format!("device extension {e}, first used by {u}")
                } else {
                    format!("device extension {e}")
                }),
            }
        }
        ext.retain(|e| !pruned.contains(e) && !forced.contains(e));
        self.drop.dropped.extend(forced.iter().cloned());
        // Structs of the left-out extensions leave the chain too (a struct of an extension that is
        // not enabled is invalid), unless a kept extension or a core version also adds them.
        let mut ci = *create_info;
        unlink_structs_of(&mut ci, &pruned, &forced, &ext);
        // Our own copy of the core features, so switching one off writes to memory we own.
        let mut core_features = ci.p_enabled_features.as_ref().copied();
        if let Some(f) = core_features.as_mut() {
            ci.p_enabled_features = f;
        }
        let mut pruned_features: Vec<String> = Vec::new();
        for f in crate::features::missing(&instance, pd, &ci) {
            let name = f.name();
            match usage.as_ref().map(|u| u.feature_use(f.structure, f.member)) {
                Some(FeatureUse::Unused) => {
                    f.disable();
                    pruned_features.push(name);
                }
                _ if self.drop.enabled => {
                    f.disable();
                    self.drop.dropped.push(format!("feature {name}"));
                }
                Some(FeatureUse::Used(u)) => {
                    missing.push(format!("feature {name}, first used by {u}"))
                }
                _ => missing.push(format!("feature {name}")),
            }
        }
        if !pruned.is_empty() || !pruned_features.is_empty() {
            let what: Vec<String> = pruned
                .iter()
                .cloned()
                .chain(pruned_features.iter().map(|f| format!("feature {f}")))
                .collect();
            // The engine reports these warnings in the summary.
            self.perf.warnings.push(format!(
                "left out what the trace enables but never uses and GPU {} lacks: {}",
                self.gpu.index,
                what.join(", ")
            ));
        }

        // Queue families by capability.
        let replay_families: Vec<_> = self.gpu.summary.queue_families.clone();
        let requested: Vec<u32> = queue_infos.iter().map(|q| q.family).collect();
        let captured_families = self
            .capture_device_of(captured)
            .map(|d| d.queue_families.clone())
            .unwrap_or_default();
        let families =
            match mapping::map_queue_families(&captured_families, &replay_families, &requested) {
                Ok(m) => m,
                Err(e) => {
                    missing.push(e);
                    HashMap::new()
                }
            };
        if !missing.is_empty() {
            let hint = if self.drop.enabled {
                String::new()
            } else {
                "\n  (--drop-unsupported leaves out what the GPU lacks even when the trace uses it, and skips \
                 the calls that need it: the replay may then differ from the capture)"
                    .to_string()
            };
            return Err(ReplayError::NoGpu(format!(
                "GPU {} ({}) lacks what the trace's device needs:\n  {}{hint}",
                self.gpu.index,
                self.gpu.name,
                missing.join("\n  ")
            )));
        }
        // Merge captured families that landed on one replay family (the first one's chain stays).
        let mut merged: Vec<QueueInfo> = Vec::new();
        for q in &queue_infos {
            let rf = families[&q.family];
            let max = replay_families
                .get(rf as usize)
                .map_or(1, |f| f.queue_count.max(1)) as usize;
            match merged
                .iter_mut()
                .find(|m| m.family == rf && m.flags == q.flags)
            {
                Some(m) => {
                    for p in &q.priorities {
                        if m.priorities.len() < max {
                            m.priorities.push(*p);
                        }
                    }
                }
                None => merged.push(QueueInfo {
                    family: rf,
                    priorities: q.priorities.iter().copied().take(max).collect(),
                    ..*q
                }),
            }
        }
        let qcis: Vec<vk::DeviceQueueCreateInfo<'_>> = merged
            .iter()
            .map(|m| {
                let mut q = vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(m.family)
                    .queue_priorities(&m.priorities)
                    .flags(m.flags);
                q.p_next = m.p_next;
                q
            })
            .collect();
        let ext_c: Vec<CString> = ext
            .iter()
            .map(|s| CString::new(s.as_str()).unwrap_or_default())
            .collect();
        let ext_p: Vec<*const i8> = ext_c.iter().map(|c| c.as_ptr()).collect();
        let mut perf_features = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default()
            .performance_counter_query_pools(true);
        if self.counters_injected && needs_perf_feature(ci.p_next) {
            perf_features.p_next = ci.p_next as *mut c_void;
            ci.p_next = &perf_features as *const _ as *const c_void;
        }
        ci.queue_create_info_count = qcis.len() as u32;
        ci.p_queue_create_infos = qcis.as_ptr();
        ci.enabled_extension_count = ext_p.len() as u32;
        ci.pp_enabled_extension_names = ext_p.as_ptr();
        // Device layers are deprecated and ignored.
        #[allow(deprecated)]
        {
            ci.enabled_layer_count = 0;
            ci.pp_enabled_layer_names = std::ptr::null();
        }
        // The queue families were read through another instance (`devices`); read them through
        // this one too, as the spec expects before queues of a family are asked for (validation
        // reports VUID-VkDeviceQueueCreateInfo-queueFamilyIndex-00381 otherwise).
        let _ = instance.get_physical_device_queue_family_properties(pd);
        let device = instance
            .create_device(pd, &ci, None)
            .map_err(|e| ReplayError::vk("vkCreateDevice", e))?;
        let props = instance.get_physical_device_properties(pd);
        let table =
            vkstream::DeviceTable::load(instance.fp_v1_0().get_device_proc_addr, device.handle());
        let state = DeviceState {
            captured,
            index: self.devices_made,
            instance: instance_captured,
            table,
            families,
            queue_counts: merged
                .iter()
                .map(|m| (m.family, m.priorities.len() as u32))
                .collect(),
            memory_types: self.gpu.summary.memory_types.clone(),
            non_coherent_atom: props.limits.non_coherent_atom_size.max(1),
            queues: Vec::new(),
            own_pools: HashMap::new(),
            queue_family_of: HashMap::new(),
            device,
        };
        let raw = state.device.handle().as_raw();
        if let Some(key) = read_dispatch_key(raw) {
            self.dispatch_keys.insert(key, captured);
        }
        self.devices.insert(captured, state);
        self.devices_made += 1;
        self.bind(vk::ObjectType::DEVICE, captured, raw);
        Ok(())
    }

    /// How results name captured device `device`: its handle, which of the trace's devices it
    /// is, and the GPU the capture made it on.
    pub fn query_device(&self, device: u64) -> format::record::QueryDevice {
        format::record::QueryDevice {
            handle: device,
            index: self.devices.get(&device).map_or(u32::MAX, |d| d.index),
            captured_on: self
                .capture_device_of(device)
                .map(|d| d.name.clone())
                .unwrap_or_default(),
        }
    }

    /// `vkGetDeviceQueue[2]` with the family translated.
    pub fn get_queue(
        &mut self,
        device: u64,
        family: u32,
        index: u32,
        flags: vk::DeviceQueueCreateFlags,
        captured_queue: u64,
    ) -> Result<(), ReplayError> {
        let d = self.device(device)?;
        let rf = d.families.get(&family).copied().unwrap_or(family);
        let count = d.queue_counts.get(&rf).copied().unwrap_or(1).max(1);
        let info = vk::DeviceQueueInfo2::default()
            .queue_family_index(rf)
            .queue_index(index.min(count - 1))
            .flags(flags);
        // SAFETY: valid device; the family and index were created with it.
        let q = unsafe { d.device.get_device_queue2(&info) };
        if q == vk::Queue::null() {
            return Err(ReplayError::Other(format!(
                "vkGetDeviceQueue2 returned no queue for family {rf}"
            )));
        }
        let d = self.devices.get_mut(&device).expect("checked above");
        if !d.queues.contains(&q) {
            d.queues.push(q);
        }
        d.queue_family_of.insert(q.as_raw(), rf);
        self.bind(vk::ObjectType::QUEUE, captured_queue, q.as_raw());
        Ok(())
    }

    /// Captured queue family index -> replay family for a device.
    pub fn map_family(&self, device: u64, family: u32) -> u32 {
        if family == vk::QUEUE_FAMILY_IGNORED
            || family == vk::QUEUE_FAMILY_EXTERNAL
            || family == vk::QUEUE_FAMILY_FOREIGN_EXT
        {
            return family;
        }
        self.devices
            .get(&device)
            .and_then(|d| d.families.get(&family).copied())
            .unwrap_or(family)
    }

    pub fn destroy_device(&mut self, captured: u64) -> Result<(), ReplayError> {
        // Emulated swapchains and our own objects first.
        let chains: Vec<u64> = self
            .wsi
            .swapchains
            .iter()
            .filter(|(_, s)| s.device == captured)
            .map(|(k, _)| *k)
            .collect();
        for c in chains {
            self.destroy_swapchain(c);
        }
        let mems: Vec<u64> = self
            .memory
            .memories
            .iter()
            .filter(|(_, m)| m.device == captured)
            .map(|(k, _)| *k)
            .collect();
        let pools: Vec<(u64, vk::QueryPool)> = self
            .tracked
            .live_pools
            .iter()
            .filter(|(_, (dev, _))| *dev == captured)
            .map(|(k, (_, p))| (*k, *p))
            .collect();
        if let Some(d) = self.devices.remove(&captured) {
            unsafe {
                let _ = d.device.device_wait_idle();
                if self.perf.locked.remove(&captured) {
                    if let Some(i) = self.instances.get(&d.instance) {
                        ash::khr::performance_query::Device::new(&i.instance, &d.device)
                            .release_profiling_lock();
                    }
                }
                // Pools the trace never destroyed (the app exited with them alive).
                for (c, p) in pools {
                    d.device.destroy_query_pool(p, None);
                    self.tracked.live_pools.remove(&c);
                }
                for m in &mems {
                    if let Some(ms) = self.memory.memories.remove(m) {
                        ms.free_all(&d.device);
                    }
                }
                for p in d.own_pools.values() {
                    d.device.destroy_command_pool(*p, None);
                }
                d.device.destroy_device(None);
            }
            self.dispatch_keys.retain(|_, v| *v != captured);
        }
        self.unbind(vk::ObjectType::DEVICE, captured);
        Ok(())
    }

    /// Destroys everything still alive (the trace may end without cleaning up).
    pub fn teardown(&mut self) {
        let devices: Vec<u64> = self.devices.keys().copied().collect();
        for d in devices {
            let _ = self.destroy_device(d);
        }
        for (_, i) in self.instances.drain() {
            i.destroy();
        }
        self.physical.clear();
        self.handles.clear();
    }
}

/// One queue create info of a device create info, its family still the captured one.
struct QueueInfo {
    family: u32,
    /// One per queue (captured priorities, 1.0 for any missing).
    priorities: Vec<f32>,
    flags: vk::DeviceQueueCreateFlags,
    /// Its chain (global priority, ...), as materialised.
    p_next: *const c_void,
}

/// The queue create infos of `ci`.
///
/// # Safety
/// `ci` must be valid.
unsafe fn queue_infos(ci: &vk::DeviceCreateInfo<'_>) -> Vec<QueueInfo> {
    let infos: &[vk::DeviceQueueCreateInfo<'_>] = match ci.p_queue_create_infos.is_null() {
        true => &[],
        false => {
            std::slice::from_raw_parts(ci.p_queue_create_infos, ci.queue_create_info_count as usize)
        }
    };
    infos
        .iter()
        .map(|q| {
            let n = q.queue_count.max(1) as usize;
            let mut priorities = match q.p_queue_priorities.is_null() {
                true => Vec::new(),
                false => std::slice::from_raw_parts(q.p_queue_priorities, q.queue_count as usize)
                    .to_vec(),
            };
            priorities.resize(n, 1.0);
            QueueInfo {
                family: q.queue_family_index,
                priorities,
                flags: q.flags,
                p_next: q.p_next,
            }
        })
        .collect()
}

/// What the trace does with an extension its device enables.
pub enum ExtensionState<'a> {
    /// Enabled, never used: the replay can leave it out.
    Unused,
    Used(&'a Use),
    /// Not enabled by the trace (the replay's own), or nothing is known of the trace's use.
    Unknown,
}

pub fn extension_state<'a>(usage: Option<&'a DeviceUsage>, ext: &str) -> ExtensionState<'a> {
    match usage {
        // What an extension unknown to the registry adds is not known: never "unused".
        Some(u)
            if u.extensions.iter().any(|e| e == ext)
                && crate::portability::usage::extension(ext).is_some() =>
        {
            match u.extension_use(ext) {
                Some(at) => ExtensionState::Used(at),
                None => ExtensionState::Unused,
            }
        }
        _ => ExtensionState::Unknown,
    }
}

/// Takes out of `ci`'s chain every struct that only the left-out extensions add (`pruned`,
/// `forced`); a struct that a kept extension (`kept`) or a core version adds stays.
///
/// # Safety
/// `ci.p_next` must be a valid chain of writable structs (the replayer's own copies).
unsafe fn unlink_structs_of(
    ci: &mut vk::DeviceCreateInfo<'_>,
    pruned: &[String],
    forced: &[String],
    kept: &[String],
) {
    if pruned.is_empty() && forced.is_empty() {
        return;
    }
    let left_out = |s_type: vk::StructureType| {
        let providers = crate::portability::usage::stype_providers(s_type.as_raw());
        providers
            .iter()
            .any(|p| pruned.iter().chain(forced).any(|x| x == p))
            && !providers
                .iter()
                .any(|p| p.starts_with("VK_VERSION_") || kept.iter().any(|k| k == p))
    };
    // Rebuild the chain from the structs that stay.
    let mut stay: Vec<*mut vk::BaseOutStructure<'_>> = Vec::new();
    let mut p = ci.p_next as *mut vk::BaseOutStructure<'_>;
    let mut guard = 0;
    while !p.is_null() && guard < vkstream::MAX_CHAIN {
        if !left_out((*p).s_type) {
            stay.push(p);
        }
        p = (*p).p_next;
        guard += 1;
    }
    for w in stay.windows(2) {
        (*w[0]).p_next = w[1];
    }
    if let Some(last) = stay.last() {
        (**last).p_next = std::ptr::null_mut();
    }
    ci.p_next = stay
        .first()
        .map_or(std::ptr::null(), |p| *p as *const c_void);
}

/// Whether a device create info's chain lacks the performance-query features struct, which
/// counter injection needs (the caller then chains one).
pub fn needs_perf_feature(chain: *const std::ffi::c_void) -> bool {
    let mut node = chain as *const vk::BaseInStructure<'_>;
    // SAFETY: a valid pNext chain of Vulkan structs materialised by the replayer.
    unsafe {
        while let Some(n) = node.as_ref() {
            if n.s_type == vk::StructureType::PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR {
                return false;
            }
            node = n.p_next;
        }
    }
    true
}
