//! Instances: each created by the replay's own rules (`Session::create_instance`), physical devices
//! bound to their instance's replay GPU, destroyed one by one, and the app's debug callbacks never
//! installed (they point into the captured process).

use ash::vk;
use format::record;
use vkstream::{params, Call};

use super::{other, Entry};
use crate::error::ReplayError;
use crate::session::Session;

pub(crate) unsafe fn vkCreateInstance(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateInstance,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let ci = p
        .p_create_info
        .as_deref()
        .ok_or_else(|| other("no create info"))?;
    let app = ci.p_application_info.as_deref().map(|a| {
        (
            a.p_application_name.as_deref().unwrap_or(""),
            a.application_version,
            a.p_engine_name.as_deref().unwrap_or(""),
            a.engine_version,
            a.api_version,
        )
    });
    let layers = ci.pp_enabled_layer_names.clone().unwrap_or_default();
    let exts = ci.pp_enabled_extension_names.clone().unwrap_or_default();
    s.create_instance(p.p_instance.unwrap_or(0), app, &layers, &exts)
}

pub(crate) unsafe fn vkDestroyInstance(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkDestroyInstance,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.destroy_instance(p.instance);
    Ok(())
}

pub(crate) unsafe fn vkEnumeratePhysicalDevices(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkEnumeratePhysicalDevices,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    s.bind_physical_devices(p.instance, p.p_physical_devices.as_deref().unwrap_or(&[]))
}

/// Like `vkEnumeratePhysicalDevices`: every physical device of every group the capture saw is the
/// instance's replay GPU (the driver is not asked; its groups are the replay GPU's own).
pub(crate) unsafe fn vkEnumeratePhysicalDeviceGroups<
    E: Entry<vk::PFN_vkEnumeratePhysicalDeviceGroups, vkstream::InstanceTable>,
>(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkEnumeratePhysicalDeviceGroups,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let pds: Vec<u64> = p
        .p_physical_device_group_properties
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .flat_map(|g| {
            let n = (g.physical_device_count as usize).min(g.physical_devices.len());
            g.physical_devices[..n].iter().copied()
        })
        .collect();
    s.bind_physical_devices(p.instance, &pds)
}

pub(crate) unsafe fn vkCreateDebugUtilsMessengerEXT(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateDebugUtilsMessengerEXT,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let fake = s.fake_handle();
    s.bind(
        vk::ObjectType::DEBUG_UTILS_MESSENGER_EXT,
        p.p_messenger.unwrap_or(0),
        fake,
    );
    Ok(())
}

pub(crate) unsafe fn vkCreateDebugReportCallbackEXT(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCreateDebugReportCallbackEXT,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let fake = s.fake_handle();
    s.bind(
        vk::ObjectType::DEBUG_REPORT_CALLBACK_EXT,
        p.p_callback.unwrap_or(0),
        fake,
    );
    Ok(())
}
