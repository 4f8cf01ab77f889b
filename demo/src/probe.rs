//! `--probe-instance`: before its real work, the demo looks the GPUs over with an instance of its
//! own and throws it away, as engines and compute frameworks do (enumerate, read properties, make
//! and destroy a device), so that a capture must follow the process past that first instance.

use anyhow::{anyhow, Context, Result};
use ash::vk;

/// What the probe saw: the GPUs and their names.
pub struct Probed {
    pub gpus: usize,
    pub names: Vec<String>,
}

pub fn probe() -> Result<Probed> {
    let entry = unsafe { ash::Entry::load() }
        .map_err(|e| anyhow!("cannot load the Vulkan loader (libvulkan.so.1): {e}"))?;
    let app = vk::ApplicationInfo::default()
        .application_name(c"quarry-demo")
        .engine_name(c"quarry-probe")
        .api_version(vk::API_VERSION_1_1);
    let ci = vk::InstanceCreateInfo::default().application_info(&app);
    let instance =
        unsafe { entry.create_instance(&ci, None) }.context("vkCreateInstance (probe)")?;
    let result = unsafe { look(&instance) };
    unsafe { instance.destroy_instance(None) };
    result
}

unsafe fn look(instance: &ash::Instance) -> Result<Probed> {
    let pds = instance
        .enumerate_physical_devices()
        .context("vkEnumeratePhysicalDevices (probe)")?;
    let mut names = Vec::new();
    for &pd in &pds {
        let props = instance.get_physical_device_properties(pd);
        names.push(
            props
                .device_name_as_c_str()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        let _ = instance.get_physical_device_memory_properties(pd);
        let _ = instance.get_physical_device_features(pd);
    }
    // A device made and destroyed on the first GPU, as a framework checks it can open one.
    if let Some(&pd) = pds.first() {
        let families = instance.get_physical_device_queue_family_properties(pd);
        if !families.is_empty() {
            let prio = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(0)
                .queue_priorities(&prio)];
            let ci = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
            let device = instance
                .create_device(pd, &ci, None)
                .context("vkCreateDevice (probe)")?;
            device.destroy_device(None);
        }
    }
    Ok(Probed {
        gpus: pds.len(),
        names,
    })
}
