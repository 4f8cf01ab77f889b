//! `quarry replay --check-only`: whether a GPU can replay a trace, without replaying it: the
//! extensions and features the trace's devices use that the GPU lacks, its queue families,
//! memory types and image formats, with the rules device creation applies (unused extensions and
//! features are left out), and which options would help.

use ash::vk;
use format::record::FileKind;
use format::TraceReader;
use layer_support::generated::features::{self, CORE_FEATURES};

use super::usage::{extension, scan, DeviceUsage, FeatureUse, TraceUsage};
use crate::devices::{self, GpuInfo};
use crate::error::ReplayError;
use crate::mapping;

/// What one GPU lacks for a trace.
#[derive(Debug, Clone, Default)]
pub struct GpuCheck {
    pub index: u32,
    pub name: String,
    /// What it lacks that the trace uses (or may use): each a phrase with the first use.
    pub missing: Vec<String>,
    /// Enabled but unused extensions and features it lacks: the replay leaves them out.
    pub left_out: Vec<String>,
    /// Every missing item is an extension or feature that `--drop-unsupported` would drop (not
    /// a queue family, memory type or image format).
    pub droppable: bool,
    /// VK_KHR_performance_query is missing (`--emulate-counters` provides it).
    pub needs_counters: bool,
}

impl GpuCheck {
    pub fn can_replay(&self) -> bool {
        self.missing.is_empty()
    }
}

/// The check of the chosen GPU, and the other GPUs that can replay the trace.
#[derive(Debug, Clone)]
pub struct Check {
    pub trace: std::path::PathBuf,
    pub gpu: GpuCheck,
    pub others_that_can: Vec<(u32, String)>,
    /// `--drop-unsupported` is already given.
    pub dropping: bool,
}

impl Check {
    /// One line: can or cannot, what is missing, what would help.
    pub fn line(&self) -> String {
        let g = &self.gpu;
        let trace = self.trace.display();
        let left_out = if g.left_out.is_empty() {
            String::new()
        } else {
            format!(
                "; left out as unused by the trace: {}",
                g.left_out.join(", ")
            )
        };
        if g.can_replay() {
            return format!("GPU {} ({}) can replay {trace}{left_out}", g.index, g.name);
        }
        let mut help: Vec<String> = self
            .others_that_can
            .iter()
            .map(|(i, n)| format!("--gpu {i} ({n})"))
            .collect();
        if g.needs_counters {
            help.push(
                "--emulate-counters (VK_KHR_performance_query through VK_LAYER_QUARRY_counters)"
                    .into(),
            );
        }
        if g.droppable && !self.dropping {
            help.push(
                "--drop-unsupported (leaves them out and skips the calls that use them: results may differ)"
                    .into(),
            );
        }
        let help = if help.is_empty() {
            String::new()
        } else {
            format!("; try {}", help.join(", or "))
        };
        format!(
            "GPU {} ({}) cannot replay {trace}: it lacks {}{left_out}{help}",
            g.index,
            g.name,
            g.missing.join(", ")
        )
    }
}

/// Checks `trace` against the GPU `selector` picks (as `--gpu` does) and against the others.
/// `dropping`: `--drop-unsupported` is given (then used extensions and features do not stop it).
pub fn check(
    trace: &std::path::Path,
    selector: Option<&str>,
    dropping: bool,
) -> Result<Check, ReplayError> {
    let reader = TraceReader::open(trace).map_err(|e| ReplayError::Trace(e.to_string()))?;
    if reader.kind() != FileKind::Trace {
        return Err(ReplayError::Trace(format!(
            "{}: this is a results file, not a trace",
            trace.display()
        )));
    }
    let usage = scan(&reader).map_err(ReplayError::Trace)?;
    if usage.devices.is_empty() {
        return Err(ReplayError::Trace(format!(
            "{}: the trace creates no device",
            trace.display()
        )));
    }
    let gpus = devices::devices()?;
    let chosen = devices::select(&gpus, selector)?.index;
    let entry = devices::load_entry()?;
    let instance = devices::enumeration_instance(&entry)?;
    // SAFETY: the instance lives until destroyed below; nothing created from it escapes.
    let pds = unsafe { instance.enumerate_physical_devices() }.unwrap_or_default();
    let mut checks = Vec::new();
    for g in &gpus {
        let pd = pds.get(g.index as usize).copied();
        // SAFETY: `pd` belongs to `instance`.
        checks.push(unsafe { check_gpu(&usage, g, &instance, pd, dropping) });
    }
    // SAFETY: no child objects were created.
    unsafe { instance.destroy_instance(None) };
    let gpu = checks
        .iter()
        .find(|c| c.index == chosen)
        .cloned()
        .unwrap_or_default();
    Ok(Check {
        trace: trace.to_path_buf(),
        others_that_can: checks
            .iter()
            .filter(|c| c.index != chosen && c.can_replay())
            .map(|c| (c.index, c.name.clone()))
            .collect(),
        gpu,
        dropping,
    })
}

/// # Safety
/// `pd` must be a physical device of `instance`.
unsafe fn check_gpu(
    usage: &TraceUsage,
    g: &GpuInfo,
    instance: &ash::Instance,
    pd: Option<vk::PhysicalDevice>,
    dropping: bool,
) -> GpuCheck {
    let mut c = GpuCheck {
        index: g.index,
        name: g.name.clone(),
        droppable: true,
        ..Default::default()
    };
    for d in &usage.devices {
        let dropped = check_extensions(d, g, dropping, &mut c);
        if let Some(pd) = pd {
            check_features(d, instance, pd, &dropped, dropping, &mut c);
            check_images(d, instance, pd, &mut c);
        }
        let captured = usage
            .capture_device
            .as_ref()
            .map(|s| s.queue_families.clone())
            .unwrap_or_default();
        if let Err(e) =
            mapping::map_queue_families(&captured, &g.summary.queue_families, &d.queue_families)
        {
            c.missing.push(e);
            c.droppable = false;
        }
        let types = usage
            .capture_device
            .as_ref()
            .map(|s| s.memory_types.as_slice())
            .unwrap_or(&[]);
        for &t in &d.memory_types {
            let Some(ty) = types.get(t as usize) else {
                continue;
            };
            let host = ty.property_flags & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() != 0;
            if mapping::pick_memory_type(ty.property_flags, &g.summary.memory_types, u32::MAX, host)
                .is_none()
            {
                c.missing.push(format!(
                    "a memory type like captured type {t} ({:?})",
                    vk::MemoryPropertyFlags::from_raw(ty.property_flags)
                ));
                c.droppable = false;
            }
        }
    }
    c.missing.dedup();
    c
}

/// Extensions of `d` that `g` lacks; returns the ones the replay leaves out.
fn check_extensions(d: &DeviceUsage, g: &GpuInfo, dropping: bool, c: &mut GpuCheck) -> Vec<String> {
    let mut left_out = Vec::new();
    for e in &d.extensions {
        // The replay emulates swapchains: it keeps the extension only where the GPU has it.
        if e == "VK_KHR_swapchain" || g.extensions.contains(e) {
            continue;
        }
        let known = extension(e).is_some();
        match d.extension_use(e) {
            None if known => {
                c.left_out.push(e.clone());
                left_out.push(e.clone());
            }
            _ if dropping => left_out.push(e.clone()),
            Some(u) => c
                .missing
                .push(format!("device extension {e} (first used by {u})")),
            None => c.missing.push(format!("device extension {e}")),
        }
        if e == "VK_KHR_performance_query" && !left_out.contains(e) {
            c.needs_counters = true;
        }
    }
    left_out
}

/// Features of `d` that `pd` lacks (those of left-out extensions' structs are left out with them).
///
/// # Safety
/// `pd` must be a physical device of `instance`.
unsafe fn check_features(
    d: &DeviceUsage,
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    dropped: &[String],
    dropping: bool,
    c: &mut GpuCheck,
) {
    let core = instance.get_physical_device_features(pd);
    let core_words = std::slice::from_raw_parts(
        &core as *const vk::PhysicalDeviceFeatures as *const u32,
        CORE_FEATURES.len(),
    );
    let mut structs: std::collections::HashMap<&str, Vec<u32>> = Default::default();
    for (s, m) in &d.features {
        let have = if s == "VkPhysicalDeviceFeatures" {
            CORE_FEATURES
                .iter()
                .position(|x| x == m)
                .is_some_and(|i| core_words[i] != 0)
        } else {
            let Some(fs) = features::by_name(s) else {
                continue;
            };
            // Its struct leaves the chain with the extensions that add it.
            let enabled_by: Vec<&str> = fs
                .origins
                .iter()
                .copied()
                .filter(|p| d.extensions.iter().any(|e| e == p))
                .collect();
            let only_dropped = !fs.origins.iter().any(|p| p.starts_with("VK_VERSION_"))
                && !enabled_by.is_empty()
                && enabled_by.iter().all(|p| dropped.iter().any(|x| x == p));
            if only_dropped {
                continue;
            }
            let words = structs
                .entry(fs.name)
                .or_insert_with(|| crate::features::supported_words(instance, pd, fs));
            fs.members
                .iter()
                .position(|x| x == m)
                .is_some_and(|i| words.get(4 + i).is_some_and(|w| *w != 0))
        };
        if have {
            continue;
        }
        let name = if s == "VkPhysicalDeviceFeatures" {
            m.clone()
        } else {
            format!("{s}.{m}")
        };
        match d.feature_use(s, m) {
            FeatureUse::Unused => c.left_out.push(format!("feature {name}")),
            _ if dropping => {}
            FeatureUse::Used(u) => c
                .missing
                .push(format!("feature {name} (first used by {u})")),
            FeatureUse::Unknown => c.missing.push(format!("feature {name}")),
        }
    }
}

/// Image formats (with the type, tiling, usage and flags the trace creates them with) `pd` does
/// not support, once per format. Images with DRM format modifiers are not checked (their
/// support depends on the modifier, in the create info's chain).
///
/// # Safety
/// `pd` must be a physical device of `instance`.
unsafe fn check_images(
    d: &DeviceUsage,
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    c: &mut GpuCheck,
) {
    let mut reported = std::collections::HashSet::new();
    for (&(format, ty, tiling, usage, flags), &seq) in &d.images {
        if tiling == vk::ImageTiling::DRM_FORMAT_MODIFIER_EXT.as_raw() || reported.contains(&format)
        {
            continue;
        }
        let r = instance.get_physical_device_image_format_properties(
            pd,
            vk::Format::from_raw(format),
            vk::ImageType::from_raw(ty),
            vk::ImageTiling::from_raw(tiling),
            vk::ImageUsageFlags::from_raw(usage),
            vk::ImageCreateFlags::from_raw(flags),
        );
        if matches!(r, Err(vk::Result::ERROR_FORMAT_NOT_SUPPORTED)) {
            reported.insert(format);
            c.missing.push(format!(
                "image format {:?} ({:?} tiling, usage {:?}; first used by vkCreateImage call {seq})",
                vk::Format::from_raw(format),
                vk::ImageTiling::from_raw(tiling),
                vk::ImageUsageFlags::from_raw(usage)
            ));
            c.droppable = false;
        }
    }
}
