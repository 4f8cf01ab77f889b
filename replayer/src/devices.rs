//! GPU enumeration for `quarry devices` and for choosing the replay GPU (`--gpu`).
//!
//! Everything here loads libvulkan at run time, so a machine with no loader or no ICD gets a clear
//! error instead of a link failure.

use std::ffi::{c_char, CStr};
use std::fmt::Write as _;

use ash::vk;
use format::record::{DeviceSummary, MemoryHeapSummary, MemoryTypeSummary, QueueFamilySummary};
use serde::Serialize;

use crate::error::ReplayError;
use layer_support::profile::DeviceProfile;

/// One queue family of a GPU, with what matters for queries.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct QueueFamilyInfo {
    pub index: u32,
    /// `VkQueueFlags` raw value.
    pub flags: u32,
    /// The flags by name (`GRAPHICS`, `COMPUTE`, ...).
    pub flag_names: Vec<String>,
    pub queue_count: u32,
    /// 0 means timestamps are not supported on this family.
    pub timestamp_valid_bits: u32,
    /// `VkPhysicalDeviceLimits::timestampPeriod`, shared by every family.
    pub timestamp_period_ns: f32,
    /// `VK_KHR_performance_query` counters this family exposes (0 without the extension).
    pub performance_counters: u32,
    /// Those counters (what `--counters` names).
    pub counters: Vec<CounterInfo>,
}

/// One performance counter of a queue family.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CounterInfo {
    pub name: String,
    /// `ns`, `bytes`, ... (empty for a plain number).
    pub unit: String,
    /// `command-buffer`, `render-pass` or `command`.
    pub scope: String,
    /// Provided by VK_LAYER_QUARRY_counters, not by the driver.
    pub emulated: bool,
}

/// Query-related capabilities of a GPU.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct QueryCaps {
    /// Names of the `VkQueryType`s the device can create pools for.
    pub query_types: Vec<String>,
    pub occlusion_query_precise: bool,
    pub pipeline_statistics_query: bool,
    pub inherited_queries: bool,
    pub timestamp_compute_and_graphics: bool,
    pub host_query_reset: bool,
    /// `VK_EXT_transform_feedback`: `maxTransformFeedbackStreams` (0 without the extension).
    pub transform_feedback_streams: u32,
    pub transform_feedback_queries: bool,
    pub primitives_generated_query: bool,
    /// `VK_EXT_mesh_shader` `meshShaderQueries`.
    pub mesh_shader_queries: bool,
    /// `VK_KHR_performance_query` `performanceCounterQueryPools`.
    pub performance_query: bool,
    pub calibrated_timestamps: bool,
}

/// One GPU as `quarry devices` shows it.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct GpuInfo {
    /// Index in `vkEnumeratePhysicalDevices` order (what `--gpu INDEX` selects).
    pub index: u32,
    pub name: String,
    pub device_type: String,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_id: u32,
    pub driver_name: String,
    pub driver_info: String,
    /// Raw `driverVersion`.
    pub driver_version: u32,
    /// Vulkan API version, `major.minor.patch`.
    pub api_version: String,
    /// `deviceUUID` as 32 hex digits (what `--gpu UUID` selects).
    pub uuid: String,
    pub queue_families: Vec<QueueFamilyInfo>,
    pub queries: QueryCaps,
    pub extensions: Vec<String>,
    /// Everything `quarry capture --target` needs (schema `quarry-device-profile`): extensions,
    /// features, limits, formats, queue families, memory.
    pub profile: DeviceProfile,
    /// The same facts in the record schema's form (results file headers, comparisons).
    #[serde(skip)]
    pub summary: DeviceSummary,
}

/// Layers every instance the replayer creates enables below its own (and validation): the
/// counters emulation layer under `--emulate-counters`. Process-wide because the loader's layer
/// search path (`VK_ADD_LAYER_PATH`) is too.
static EXTRA_LAYERS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Whether instances now load the counters emulation layer: the counters they list are its own.
fn emulated_counters() -> bool {
    EXTRA_LAYERS
        .lock()
        .map(|l| l.iter().any(|n| n == layer_support::counters::LAYER_NAME))
        .unwrap_or(false)
}

/// Enables layer `name` on every instance created from now on (found through `VK_ADD_LAYER_PATH`).
pub fn add_layer(name: &str) {
    if let Ok(mut v) = EXTRA_LAYERS.lock() {
        if !v.iter().any(|l| l == name) {
            v.push(name.to_string());
        }
    }
}

pub(crate) fn extra_layers() -> Vec<String> {
    EXTRA_LAYERS.lock().map(|v| v.clone()).unwrap_or_default()
}

/// Loads libvulkan, with an error that says what is missing.
pub(crate) fn load_entry() -> Result<ash::Entry, ReplayError> {
    // SAFETY: loading the system Vulkan loader runs its initialisers; that is what it is for.
    unsafe { ash::Entry::load() }.map_err(|e| {
        ReplayError::NoVulkan(format!(
            "cannot load the Vulkan loader (libvulkan.so.1): {e}; install libvulkan1 and a driver \
             (e.g. `apt-get install libvulkan1 mesa-vulkan-drivers`)"
        ))
    })
}

/// Highest instance API version the loader offers, capped at 1.3 (what ash 0.38 and the registry know).
pub(crate) fn instance_api_version(entry: &ash::Entry) -> u32 {
    // SAFETY: plain global query.
    let v = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    v.min(vk::API_VERSION_1_3)
}

/// Turns a fixed-size, NUL-terminated C string array into a `String` (lossy, never reads past the array).
pub(crate) fn c_array_str(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub(crate) fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn queue_flag_names(flags: vk::QueueFlags) -> Vec<String> {
    const NAMES: &[(vk::QueueFlags, &str)] = &[
        (vk::QueueFlags::GRAPHICS, "GRAPHICS"),
        (vk::QueueFlags::COMPUTE, "COMPUTE"),
        (vk::QueueFlags::TRANSFER, "TRANSFER"),
        (vk::QueueFlags::SPARSE_BINDING, "SPARSE_BINDING"),
        (vk::QueueFlags::PROTECTED, "PROTECTED"),
        (vk::QueueFlags::VIDEO_DECODE_KHR, "VIDEO_DECODE"),
        (vk::QueueFlags::VIDEO_ENCODE_KHR, "VIDEO_ENCODE"),
        (vk::QueueFlags::OPTICAL_FLOW_NV, "OPTICAL_FLOW"),
    ];
    NAMES
        .iter()
        .filter(|(f, _)| flags.contains(*f))
        .map(|(_, n)| (*n).to_string())
        .collect()
}

fn device_type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    }
}

/// Device extension names of `pd` (empty on error: a device that cannot list them offers none).
pub(crate) fn device_extensions(instance: &ash::Instance, pd: vk::PhysicalDevice) -> Vec<String> {
    // SAFETY: pd comes from this instance.
    unsafe { instance.enumerate_device_extension_properties(pd) }
        .map(|v| v.iter().map(|e| c_array_str(&e.extension_name)).collect())
        .unwrap_or_default()
}

/// Builds the summary and capabilities of one physical device.
///
/// # Safety
/// `pd` must belong to `instance`, created with API version >= 1.1.
pub(crate) unsafe fn describe(
    entry: &ash::Entry,
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    index: u32,
) -> GpuInfo {
    let props = instance.get_physical_device_properties(pd);
    let extensions = device_extensions(instance, pd);
    let has = |n: &CStr| extensions.iter().any(|e| e.as_bytes() == n.to_bytes());
    let api = props.api_version;
    let v11 = api >= vk::API_VERSION_1_1;
    let v12 = api >= vk::API_VERSION_1_2;

    // Properties: only chain structs the device supports (anything else is invalid usage).
    let mut id_props = vk::PhysicalDeviceIDProperties::default();
    let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
    let mut xfb_props = vk::PhysicalDeviceTransformFeedbackPropertiesEXT::default();
    let has_driver = v12 || has(ash::khr::driver_properties::NAME);
    let has_xfb = has(ash::ext::transform_feedback::NAME);
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default();
        if v11 {
            p2 = p2.push_next(&mut id_props);
        }
        if has_driver {
            p2 = p2.push_next(&mut driver_props);
        }
        if has_xfb {
            p2 = p2.push_next(&mut xfb_props);
        }
        if v11 {
            instance.get_physical_device_properties2(pd, &mut p2);
        }
    }

    let mut xfb_feat = vk::PhysicalDeviceTransformFeedbackFeaturesEXT::default();
    let mut mesh_feat = vk::PhysicalDeviceMeshShaderFeaturesEXT::default();
    let mut perf_feat = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default();
    let mut pgq_feat = vk::PhysicalDevicePrimitivesGeneratedQueryFeaturesEXT::default();
    let mut reset_feat = vk::PhysicalDeviceHostQueryResetFeatures::default();
    let has_mesh = has(ash::ext::mesh_shader::NAME);
    let has_perf = has(ash::khr::performance_query::NAME);
    let has_pgq = has(ash::ext::primitives_generated_query::NAME);
    let has_reset = v12 || has(ash::ext::host_query_reset::NAME);
    let features = {
        let mut f2 = vk::PhysicalDeviceFeatures2::default();
        if has_xfb {
            f2 = f2.push_next(&mut xfb_feat);
        }
        if has_mesh {
            f2 = f2.push_next(&mut mesh_feat);
        }
        if has_perf {
            f2 = f2.push_next(&mut perf_feat);
        }
        if has_pgq {
            f2 = f2.push_next(&mut pgq_feat);
        }
        if has_reset {
            f2 = f2.push_next(&mut reset_feat);
        }
        if v11 {
            instance.get_physical_device_features2(pd, &mut f2);
            f2.features
        } else {
            instance.get_physical_device_features(pd)
        }
    };

    let families = instance.get_physical_device_queue_family_properties(pd);
    let perf_fp = has_perf.then(|| ash::khr::performance_query::Instance::new(entry, instance));
    let queue_families: Vec<QueueFamilyInfo> = families
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut counters = 0u32;
            let mut listed = Vec::new();
            if let Some(perf) = &perf_fp {
                // The fp is called directly so a misbehaving driver cannot trip ash's asserts.
                let f = perf
                    .fp()
                    .enumerate_physical_device_queue_family_performance_query_counters_khr;
                let r = f(
                    pd,
                    i as u32,
                    &mut counters,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
                if r != vk::Result::SUCCESS {
                    counters = 0;
                }
                let mut cs = vec![vk::PerformanceCounterKHR::default(); counters as usize];
                let mut ds =
                    vec![vk::PerformanceCounterDescriptionKHR::default(); counters as usize];
                let mut n = counters;
                let r = f(pd, i as u32, &mut n, cs.as_mut_ptr(), ds.as_mut_ptr());
                if r == vk::Result::SUCCESS || r == vk::Result::INCOMPLETE {
                    let n = (n as usize).min(cs.len());
                    listed = cs[..n]
                        .iter()
                        .zip(&ds[..n])
                        .map(|(c, d)| CounterInfo {
                            name: c_array_str(&d.name),
                            unit: format::query::counter_unit_name(c.unit.as_raw() as u32).into(),
                            scope: format::query::counter_scope_name(c.scope.as_raw() as u32)
                                .into(),
                            emulated: emulated_counters(),
                        })
                        .collect();
                }
            }
            QueueFamilyInfo {
                index: i as u32,
                flags: f.queue_flags.as_raw(),
                flag_names: queue_flag_names(f.queue_flags),
                queue_count: f.queue_count,
                timestamp_valid_bits: f.timestamp_valid_bits,
                timestamp_period_ns: props.limits.timestamp_period,
                performance_counters: counters,
                counters: listed,
            }
        })
        .collect();

    let mut q = QueryCaps {
        occlusion_query_precise: features.occlusion_query_precise != 0,
        pipeline_statistics_query: features.pipeline_statistics_query != 0,
        inherited_queries: features.inherited_queries != 0,
        timestamp_compute_and_graphics: props.limits.timestamp_compute_and_graphics != 0,
        host_query_reset: reset_feat.host_query_reset != 0,
        transform_feedback_streams: if has_xfb {
            xfb_props.max_transform_feedback_streams
        } else {
            0
        },
        transform_feedback_queries: has_xfb && xfb_props.transform_feedback_queries != 0,
        primitives_generated_query: has_pgq && pgq_feat.primitives_generated_query != 0,
        mesh_shader_queries: has_mesh && mesh_feat.mesh_shader_queries != 0,
        performance_query: has_perf && perf_feat.performance_counter_query_pools != 0,
        calibrated_timestamps: has(ash::ext::calibrated_timestamps::NAME)
            || has(ash::khr::calibrated_timestamps::NAME),
        query_types: Vec::new(),
    };
    let mut types = vec!["OCCLUSION"];
    if q.pipeline_statistics_query {
        types.push("PIPELINE_STATISTICS");
    }
    if queue_families.iter().any(|f| f.timestamp_valid_bits > 0) {
        types.push("TIMESTAMP");
    }
    if q.transform_feedback_queries {
        types.push("TRANSFORM_FEEDBACK_STREAM_EXT");
    }
    if q.primitives_generated_query {
        types.push("PRIMITIVES_GENERATED_EXT");
    }
    if q.mesh_shader_queries {
        types.push("MESH_PRIMITIVES_GENERATED_EXT");
    }
    if q.performance_query {
        types.push("PERFORMANCE_QUERY_KHR");
    }
    if has(ash::khr::acceleration_structure::NAME) {
        types.push("ACCELERATION_STRUCTURE_COMPACTED_SIZE_KHR");
        types.push("ACCELERATION_STRUCTURE_SERIALIZATION_SIZE_KHR");
    }
    q.query_types = types.into_iter().map(String::from).collect();

    let mem = instance.get_physical_device_memory_properties(pd);
    let summary = DeviceSummary {
        name: c_array_str(&props.device_name),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        driver_id: if has_driver {
            driver_props.driver_id.as_raw() as u32
        } else {
            0
        },
        driver_name: if has_driver {
            c_array_str(&driver_props.driver_name)
        } else {
            String::new()
        },
        driver_info: if has_driver {
            c_array_str(&driver_props.driver_info)
        } else {
            String::new()
        },
        driver_version: props.driver_version,
        api_version: api,
        pipeline_cache_uuid: props.pipeline_cache_uuid,
        device_uuid: if v11 { id_props.device_uuid } else { [0; 16] },
        timestamp_period_ns: props.limits.timestamp_period,
        queue_families: families
            .iter()
            .map(|f| QueueFamilySummary {
                flags: f.queue_flags.as_raw(),
                queue_count: f.queue_count,
                timestamp_valid_bits: f.timestamp_valid_bits,
            })
            .collect(),
        memory_types: mem.memory_types
            [..(mem.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES)]
            .iter()
            .map(|t| MemoryTypeSummary {
                property_flags: t.property_flags.as_raw(),
                heap_index: t.heap_index,
            })
            .collect(),
        memory_heaps: mem.memory_heaps
            [..(mem.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS)]
            .iter()
            .map(|h| MemoryHeapSummary {
                size: h.size,
                flags: h.flags.as_raw(),
            })
            .collect(),
    };

    GpuInfo {
        index,
        name: summary.name.clone(),
        device_type: device_type_name(props.device_type).to_string(),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        driver_id: summary.driver_id,
        driver_name: summary.driver_name.clone(),
        driver_info: summary.driver_info.clone(),
        driver_version: props.driver_version,
        api_version: version_string(api),
        uuid: hex(&summary.device_uuid),
        queue_families,
        queries: q,
        extensions,
        profile: layer_support::profile::collect::collect(instance, pd),
        summary,
    }
}

/// A bare instance for enumeration (no layers, no extensions).
pub(crate) fn enumeration_instance(entry: &ash::Entry) -> Result<ash::Instance, ReplayError> {
    let app = vk::ApplicationInfo::default()
        .application_name(c"quarry")
        .engine_name(c"quarry")
        .api_version(instance_api_version(entry));
    // Portability enumeration lets non-conformant ICDs (MoltenVK-style) show up too.
    let portability = unsafe { entry.enumerate_instance_extension_properties(None) }
        .map(|v| {
            v.iter().any(|e| {
                c_array_str(&e.extension_name).as_bytes()
                    == ash::khr::portability_enumeration::NAME.to_bytes()
            })
        })
        .unwrap_or(false);
    let exts = [ash::khr::portability_enumeration::NAME.as_ptr()];
    let layers: Vec<std::ffi::CString> = extra_layers()
        .into_iter()
        .filter_map(|l| std::ffi::CString::new(l).ok())
        .collect();
    let layer_p: Vec<*const c_char> = layers.iter().map(|l| l.as_ptr()).collect();
    let mut ci = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&layer_p);
    if portability {
        ci = ci
            .enabled_extension_names(&exts)
            .flags(vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR);
    }
    // SAFETY: ci and everything it points to live across the call.
    unsafe { entry.create_instance(&ci, None) }.map_err(|e| {
        ReplayError::NoVulkan(format!(
            "vkCreateInstance failed ({e}): no usable Vulkan driver (ICD) is installed; \
             try `apt-get install mesa-vulkan-drivers`"
        ))
    })
}

/// Every GPU the Vulkan loader reports, in enumeration order.
pub fn devices() -> Result<Vec<GpuInfo>, ReplayError> {
    let entry = load_entry()?;
    let instance = enumeration_instance(&entry)?;
    // SAFETY: the instance is valid until destroyed below; nothing escapes.
    let result = unsafe {
        match instance.enumerate_physical_devices() {
            Ok(pds) => Ok(pds
                .iter()
                .enumerate()
                .map(|(i, &pd)| describe(&entry, &instance, pd, i as u32))
                .collect()),
            Err(e) => Err(ReplayError::NoVulkan(format!(
                "vkEnumeratePhysicalDevices failed: {e}"
            ))),
        }
    };
    // SAFETY: no child objects were created.
    unsafe { instance.destroy_instance(None) };
    result
}

/// Picks the GPU a `--gpu` selector names: an index, a UUID (32 hex digits, dashes allowed), or a
/// case-insensitive substring of the name. With no selector: the first discrete GPU, else the first.
pub fn select<'a>(gpus: &'a [GpuInfo], selector: Option<&str>) -> Result<&'a GpuInfo, ReplayError> {
    let listing = || {
        gpus.iter()
            .map(|g| format!("  {}: {} ({})", g.index, g.name, g.uuid))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if gpus.is_empty() {
        return Err(ReplayError::NoGpu(
            "the Vulkan loader reports no GPU".into(),
        ));
    }
    let Some(sel) = selector.map(str::trim) else {
        return Ok(gpus
            .iter()
            .find(|g| g.device_type == "discrete")
            .unwrap_or(&gpus[0]));
    };
    if let Ok(i) = sel.parse::<u32>() {
        return gpus.iter().find(|g| g.index == i).ok_or_else(|| {
            ReplayError::BadOption(format!(
                "--gpu: no GPU with index {i}; available:\n{}",
                listing()
            ))
        });
    }
    let uuid: String = sel
        .chars()
        .filter(|c| *c != '-')
        .collect::<String>()
        .to_ascii_lowercase();
    if uuid.len() == 32 && uuid.chars().all(|c| c.is_ascii_hexdigit()) {
        if let Some(g) = gpus.iter().find(|g| g.uuid == uuid) {
            return Ok(g);
        }
    }
    let needle = sel.to_lowercase();
    let matches: Vec<&GpuInfo> = gpus
        .iter()
        .filter(|g| g.name.to_lowercase().contains(&needle))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(ReplayError::BadOption(format!(
            "--gpu: no GPU matches '{sel}' (index, UUID or name); available:\n{}",
            listing()
        ))),
        [first, ..] => Ok(first),
    }
}

/// The replay-time check of a trace captured for a target device (`quarry capture --target`): a
/// warning when `gpu` lacks something the recorded profile offers (the app may have used it),
/// none when the trace has no target or `gpu` offers all of it. The record comes before the
/// first call, so only the trace's start is read.
pub fn target_warnings(reader: &format::TraceReader, gpu: &GpuInfo) -> Vec<String> {
    use format::record::Record;
    let target = reader
        .records()
        .take_while(|r| !matches!(r, Ok(Record::Call(_)) | Err(_)))
        .find_map(|r| match r {
            Ok(Record::TargetProfile(t)) => Some(t),
            _ => None,
        });
    let Some(t) = target else { return Vec::new() };
    match target_shortfalls(&t.profile, gpu) {
        Ok(s) if s.is_empty() => Vec::new(),
        Ok(s) => {
            const SHOWN: usize = 8;
            let more = s.len().saturating_sub(SHOWN);
            let mut list = s[..s.len().min(SHOWN)].join(", ");
            if more > 0 {
                list.push_str(&format!(" and {more} more"));
            }
            vec![format!(
                "the trace was captured for target device {} (profile {}); {} lacks what that \
                 target offers, which the app may have used: {list}",
                t.name, t.hash, gpu.name
            )]
        }
        Err(e) => vec![format!(
            "the trace was captured for target device {} but its profile does not read: {e}",
            t.name
        )],
    }
}

/// What a trace captured for a target profile (`profile_json`, its `TargetProfile` record) may use
/// that `gpu` lacks; empty when the GPU offers all the profile does. Err: the recorded profile
/// cannot be read.
pub fn target_shortfalls(profile_json: &str, gpu: &GpuInfo) -> Result<Vec<String>, String> {
    let target = layer_support::profile::parse(profile_json, None)?;
    Ok(layer_support::profile::rules::shortfalls(
        &target,
        &gpu.profile,
    ))
}

/// Human-readable listing for `quarry devices`.
pub fn to_text(gpus: &[GpuInfo]) -> String {
    let mut s = String::new();
    for g in gpus {
        let _ = writeln!(s, "GPU {}: {} ({})", g.index, g.name, g.device_type);
        let _ = writeln!(
            s,
            "  vendor 0x{:04x} device 0x{:04x}  driver {} ({}) version 0x{:x}  Vulkan {}",
            g.vendor_id, g.device_id, g.driver_name, g.driver_info, g.driver_version, g.api_version
        );
        let _ = writeln!(s, "  uuid {}", g.uuid);
        let _ = writeln!(s, "  query types: {}", g.queries.query_types.join(", "));
        let q = &g.queries;
        let _ = writeln!(
            s,
            "  occlusion precise: {}  pipeline statistics: {}  host reset: {}  calibrated timestamps: {}",
            yes(q.occlusion_query_precise),
            yes(q.pipeline_statistics_query),
            yes(q.host_query_reset),
            yes(q.calibrated_timestamps)
        );
        let _ = writeln!(
            s,
            "  transform feedback streams: {}  primitives generated: {}  mesh queries: {}  performance query: {}",
            q.transform_feedback_streams,
            yes(q.primitives_generated_query),
            yes(q.mesh_shader_queries),
            yes(q.performance_query)
        );
        for f in &g.queue_families {
            let _ = writeln!(
                s,
                "  queue family {}: {} x{}  timestampValidBits {}  period {} ns{}",
                f.index,
                f.flag_names.join("|"),
                f.queue_count,
                f.timestamp_valid_bits,
                f.timestamp_period_ns,
                if f.performance_counters > 0 {
                    format!("  {} perf counters", f.performance_counters)
                } else {
                    String::new()
                }
            );
            for c in &f.counters {
                let unit = if c.unit.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", c.unit)
                };
                let _ = writeln!(
                    s,
                    "    counter \"{}\"{unit}  {} scope{}",
                    c.name,
                    c.scope,
                    if c.emulated { "  (emulated)" } else { "" }
                );
            }
        }
    }
    s
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, name: &str, uuid: u8, ty: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            device_type: ty.into(),
            vendor_id: 0,
            device_id: 0,
            driver_id: 0,
            driver_name: String::new(),
            driver_info: String::new(),
            driver_version: 0,
            api_version: "1.3.0".into(),
            uuid: hex(&[uuid; 16]),
            queue_families: vec![],
            queries: QueryCaps::default(),
            extensions: vec![],
            profile: DeviceProfile::default(),
            summary: DeviceSummary::default(),
        }
    }

    #[test]
    fn select_by_index_name_uuid() {
        let gpus = vec![
            gpu(0, "llvmpipe (LLVM 15)", 1, "cpu"),
            gpu(1, "NVIDIA H100", 0xab, "discrete"),
        ];
        assert_eq!(select(&gpus, None).unwrap().index, 1, "discrete preferred");
        assert_eq!(select(&gpus, Some("0")).unwrap().index, 0);
        assert_eq!(select(&gpus, Some("h100")).unwrap().index, 1);
        assert_eq!(select(&gpus, Some(&"01".repeat(16))).unwrap().index, 0);
        let e = select(&gpus, Some("radeon")).unwrap_err().to_string();
        assert!(
            e.contains("no GPU matches 'radeon'") && e.contains("NVIDIA H100"),
            "{e}"
        );
        assert!(select(&gpus, Some("7")).is_err());
        assert!(select(&[], None).is_err());
    }
}
