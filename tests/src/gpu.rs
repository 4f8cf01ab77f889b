//! Vulkan objects through ash for tests and benches that call Vulkan in their own process.

/// An instance named `app` asking for Vulkan `api_version`, and the first GPU it enumerates.
///
/// # Safety
/// Loads and calls into the Vulkan loader.
pub unsafe fn first_gpu(
    app: &std::ffi::CStr,
    api_version: u32,
) -> (ash::Entry, ash::Instance, ash::vk::PhysicalDevice) {
    use ash::vk;
    let entry = ash::Entry::load().expect("libvulkan");
    let info = vk::ApplicationInfo::default()
        .application_name(app)
        .api_version(api_version);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&info),
            None,
        )
        .unwrap();
    let pd = instance.enumerate_physical_devices().unwrap()[0];
    (entry, instance, pd)
}

/// A device on `pd` with one queue of family 0 and `features` chained into its create info.
///
/// # Safety
/// `instance` and `pd` must be live; the features must be supported.
pub unsafe fn queue0_device<T: ash::vk::ExtendsDeviceCreateInfo + ?Sized>(
    instance: &ash::Instance,
    pd: ash::vk::PhysicalDevice,
    features: Option<&mut T>,
) -> ash::Device {
    use ash::vk;
    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let mut dci = vk::DeviceCreateInfo::default().queue_create_infos(&qci);
    if let Some(f) = features {
        dci = dci.push_next(f);
    }
    instance.create_device(pd, &dci, None).unwrap()
}

/// An instance (Vulkan 1.2, named `app`) and a device with one queue of family 0 on the first
/// GPU, no features: for tests and benches that need nothing more.
///
/// # Safety
/// Loads and calls into the Vulkan loader.
pub unsafe fn plain_device(app: &std::ffi::CStr) -> (ash::Entry, ash::Instance, ash::Device) {
    let (entry, instance, pd) = first_gpu(app, ash::vk::API_VERSION_1_2);
    let device = queue0_device(
        &instance,
        pd,
        None::<&mut ash::vk::PhysicalDeviceVulkan12Features>,
    );
    (entry, instance, device)
}

/// A new command pool on queue family 0 and one primary command buffer of it, recording.
///
/// # Safety
/// `device` must be live, with queue family 0.
pub unsafe fn begin_primary(
    device: &ash::Device,
) -> (ash::vk::CommandPool, ash::vk::CommandBuffer) {
    use ash::vk;
    let pool = device
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default().queue_family_index(0),
            None,
        )
        .unwrap();
    let cb = device
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .unwrap()[0];
    device
        .begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
        .unwrap();
    (pool, cb)
}

/// Records `n` `vkCmdSetViewport` (x = 0, 1, ...) into a new command buffer of its own pool, on the
/// calling thread: the multi-threaded capture tests run one per thread.
///
/// # Safety
/// `device` must be live, with queue family 0.
pub unsafe fn record_viewports(
    device: &ash::Device,
    n: usize,
) -> (ash::vk::CommandPool, ash::vk::CommandBuffer) {
    use ash::vk;
    let (pool, cb) = begin_primary(device);
    for i in 0..n {
        let vp = vk::Viewport {
            x: i as f32,
            y: 0.0,
            width: 16.0,
            height: 16.0,
            min_depth: 0.0,
            max_depth: 1.0,
        };
        device.cmd_set_viewport(cb, 0, &[vp]);
    }
    device.end_command_buffer(cb).unwrap();
    (pool, cb)
}
