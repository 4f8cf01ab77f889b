//! Creating the instance and the device: layers and extensions asked for, the physical device
//! picked, the optional features and queues (second queue, video decode) probed and enabled.

use super::*;

impl Gpu {
    pub fn new(opts: &Options) -> Result<Self> {
        // Loading at run time gives a readable error instead of a link failure
        // on machines without a Vulkan loader.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| {
            anyhow!("cannot load the Vulkan loader (libvulkan.so.1): {e}; install libvulkan1 and a driver (e.g. mesa-vulkan-drivers)")
        })?;
        let inst_exts = unsafe { entry.enumerate_instance_extension_properties(None) }
            .context("vkEnumerateInstanceExtensionProperties")?;
        let layers = unsafe { entry.enumerate_instance_layer_properties() }
            .context("vkEnumerateInstanceLayerProperties")?;
        let debug_utils = has(&inst_exts, ash::ext::debug_utils::NAME);

        let mut ext_names: Vec<*const i8> = Vec::new();
        if debug_utils {
            ext_names.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        for e in opts.surface_extensions {
            if !has(&inst_exts, e) {
                bail!("instance extension {} is missing", e.to_string_lossy());
            }
            ext_names.push(e.as_ptr());
        }
        let validation = c"VK_LAYER_KHRONOS_validation";
        let mut layer_names: Vec<*const i8> = Vec::new();
        if opts.validate {
            if !debug_utils {
                bail!("--validate needs VK_EXT_debug_utils to count messages");
            }
            let present = layers
                .iter()
                .any(|l| l.layer_name_as_c_str().ok() == Some(validation));
            if !present {
                bail!("--validate needs VK_LAYER_KHRONOS_validation (Debian: vulkan-validationlayers)");
            }
            layer_names.push(validation.as_ptr());
        }

        let app = vk::ApplicationInfo::default()
            .application_name(c"quarry-demo")
            .application_version(1)
            .engine_name(c"quarry")
            .api_version(vk::API_VERSION_1_3);
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message));
        let mut ci = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_extension_names(&ext_names)
            .enabled_layer_names(&layer_names);
        if opts.validate {
            // Also catches messages from vkCreateInstance itself.
            ci = ci.push_next(&mut messenger_info);
        }
        let instance = unsafe { entry.create_instance(&ci, None) }.context("vkCreateInstance")?;
        let messenger = if opts.validate {
            let du = ash::ext::debug_utils::Instance::new(&entry, &instance);
            let m = unsafe { du.create_debug_utils_messenger(&messenger_info, None) }
                .context("vkCreateDebugUtilsMessengerEXT")?;
            Some((du, m))
        } else {
            None
        };

        let pdevs = unsafe { instance.enumerate_physical_devices() }
            .context("vkEnumeratePhysicalDevices")?;
        if pdevs.is_empty() {
            bail!("no Vulkan physical device found (is a driver such as mesa-vulkan-drivers installed?)");
        }
        let pdev = pick_device(&instance, &pdevs, opts.gpu)?;
        let props = unsafe { instance.get_physical_device_properties(pdev) };
        let name = props
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if props.api_version < vk::API_VERSION_1_3 {
            bail!(
                "{name} supports Vulkan {}.{} but quarry-demo needs 1.3 (dynamic rendering, synchronization2)",
                vk::api_version_major(props.api_version),
                vk::api_version_minor(props.api_version)
            );
        }
        let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver_props);
        unsafe { instance.get_physical_device_properties2(pdev, &mut props2) };
        let driver = format!(
            "{} {}",
            driver_props
                .driver_name_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            driver_props
                .driver_info_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        let mem_props = unsafe { instance.get_physical_device_memory_properties(pdev) };
        let families = unsafe { instance.get_physical_device_queue_family_properties(pdev) };
        let dev_exts = unsafe { instance.enumerate_device_extension_properties(pdev) }
            .context("vkEnumerateDeviceExtensionProperties")?;

        // Main family: graphics + compute with timestamps if possible.
        let gc = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(gc) && f.timestamp_valid_bits > 0)
            .or_else(|| families.iter().position(|f| f.queue_flags.contains(gc)))
            .ok_or_else(|| anyhow!("{name} has no graphics+compute queue family"))?
            as u32;
        // Prefer a compute-capable second family so command-buffer resets work
        // there too; any family with timestamps will do otherwise.
        let second_family = families
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                *i as u32 != family
                    && f.timestamp_valid_bits > 0
                    && f.queue_count > 0
                    && f.queue_flags.intersects(
                        vk::QueueFlags::GRAPHICS
                            | vk::QueueFlags::COMPUTE
                            | vk::QueueFlags::TRANSFER,
                    )
            })
            .max_by_key(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .map(|(i, _)| i as u32);

        // Query which optional features exist, chaining only structures of
        // extensions the device has.
        let e = |n: &CStr| has(&dev_exts, n);
        let has_xfb = e(ash::ext::transform_feedback::NAME);
        let has_pg = e(ash::ext::primitives_generated_query::NAME);
        let has_mesh = e(ash::ext::mesh_shader::NAME);
        let has_md = e(ash::ext::multi_draw::NAME);
        let has_perf = e(ash::khr::performance_query::NAME);
        let has_accel = opts.accel
            && e(ash::khr::acceleration_structure::NAME)
            && e(ash::khr::deferred_host_operations::NAME);
        let has_rtm1 = has_accel && e(ash::khr::ray_tracing_maintenance1::NAME);
        let has_calib = e(ash::ext::calibrated_timestamps::NAME);
        let video = if opts.video {
            crate::video::probe(&entry, &instance, pdev, &families, &dev_exts)?
        } else {
            crate::video::VideoSupport::Missing(
                "the video workload (left out by --no-video)".into(),
            )
        };

        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut fxfb = vk::PhysicalDeviceTransformFeedbackFeaturesEXT::default();
        let mut fpg = vk::PhysicalDevicePrimitivesGeneratedQueryFeaturesEXT::default();
        let mut fmesh = vk::PhysicalDeviceMeshShaderFeaturesEXT::default();
        let mut fmd = vk::PhysicalDeviceMultiDrawFeaturesEXT::default();
        let mut fperf = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default();
        let mut faccel = vk::PhysicalDeviceAccelerationStructureFeaturesKHR::default();
        let mut frtm1 = vk::PhysicalDeviceRayTracingMaintenance1FeaturesKHR::default();
        {
            let mut f2 = vk::PhysicalDeviceFeatures2::default()
                .push_next(&mut f11)
                .push_next(&mut f12)
                .push_next(&mut f13);
            if has_xfb {
                f2 = f2.push_next(&mut fxfb);
            }
            if has_pg {
                f2 = f2.push_next(&mut fpg);
            }
            if has_mesh {
                f2 = f2.push_next(&mut fmesh);
            }
            if has_md {
                f2 = f2.push_next(&mut fmd);
            }
            if has_perf {
                f2 = f2.push_next(&mut fperf);
            }
            if has_accel {
                f2 = f2.push_next(&mut faccel);
            }
            if has_rtm1 {
                f2 = f2.push_next(&mut frtm1);
            }
            unsafe { instance.get_physical_device_features2(pdev, &mut f2) };
            let core = f2.features;
            let on = |b: vk::Bool32| b == vk::TRUE;
            if !on(f13.dynamic_rendering)
                || !on(f13.synchronization2)
                || !on(f12.timeline_semaphore)
            {
                bail!("{name} lacks dynamicRendering, synchronization2 or timelineSemaphore (Vulkan 1.3 core features)");
            }
            let mut xfb_props = vk::PhysicalDeviceTransformFeedbackPropertiesEXT::default();
            if has_xfb {
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut xfb_props);
                unsafe { instance.get_physical_device_properties2(pdev, &mut p2) };
            }
            let support = Support {
                debug_utils,
                pipeline_statistics: on(core.pipeline_statistics_query),
                occlusion_precise: on(core.occlusion_query_precise),
                geometry: on(core.geometry_shader),
                tessellation: on(core.tessellation_shader),
                inherited_queries: on(core.inherited_queries),
                multiview: on(f11.multiview),
                host_query_reset: on(f12.host_query_reset),
                xfb: has_xfb && on(fxfb.transform_feedback),
                xfb_queries: has_xfb && on(xfb_props.transform_feedback_queries),
                xfb_streams: xfb_props.max_transform_feedback_streams,
                xfb_buffers: xfb_props.max_transform_feedback_buffers,
                geometry_streams: has_xfb && on(fxfb.geometry_streams),
                pg_query: has_pg && on(fpg.primitives_generated_query),
                pg_discard: has_pg && on(fpg.primitives_generated_query_with_rasterizer_discard),
                pg_nonzero_streams: has_pg
                    && on(fpg.primitives_generated_query_with_non_zero_streams),
                calibrated: has_calib,
                mesh: has_mesh && on(fmesh.mesh_shader) && on(fmesh.task_shader),
                mesh_queries: has_mesh && on(fmesh.mesh_shader_queries),
                multi_draw: has_md && on(fmd.multi_draw),
                perf_query: has_perf && on(fperf.performance_counter_query_pools),
                accel: has_accel
                    && on(faccel.acceleration_structure)
                    && on(f12.buffer_device_address),
                rt_maintenance1: has_rtm1 && on(frtm1.ray_tracing_maintenance1),
                video,
                swapchain: opts.swapchain,
            };
            if opts.swapchain && !has(&dev_exts, ash::khr::swapchain::NAME) {
                bail!("{name} lacks VK_KHR_swapchain; use --headless");
            }
            Self::create_device(
                entry,
                instance,
                messenger,
                pdev,
                props,
                mem_props,
                families,
                family,
                second_family,
                support,
                name,
                driver,
            )
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create_device(
        entry: ash::Entry,
        instance: ash::Instance,
        messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
        pdev: vk::PhysicalDevice,
        props: vk::PhysicalDeviceProperties,
        mem_props: vk::PhysicalDeviceMemoryProperties,
        families: Vec<vk::QueueFamilyProperties>,
        family: u32,
        second_family: Option<u32>,
        support: Support,
        name: String,
        driver: String,
    ) -> Result<Self> {
        let s = &support;
        let b = |x: bool| if x { vk::TRUE } else { vk::FALSE };
        let features = vk::PhysicalDeviceFeatures {
            pipeline_statistics_query: b(s.pipeline_statistics),
            occlusion_query_precise: b(s.occlusion_precise),
            geometry_shader: b(s.geometry),
            tessellation_shader: b(s.tessellation),
            inherited_queries: b(s.inherited_queries),
            ..Default::default()
        };
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default().multiview(s.multiview);
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default()
            .host_query_reset(s.host_query_reset)
            .timeline_semaphore(true)
            .buffer_device_address(s.accel);
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
            .dynamic_rendering(true)
            .synchronization2(true);
        let mut fxfb = vk::PhysicalDeviceTransformFeedbackFeaturesEXT::default()
            .transform_feedback(s.xfb)
            .geometry_streams(s.geometry_streams);
        let mut fpg = vk::PhysicalDevicePrimitivesGeneratedQueryFeaturesEXT::default()
            .primitives_generated_query(s.pg_query)
            .primitives_generated_query_with_rasterizer_discard(s.pg_discard)
            .primitives_generated_query_with_non_zero_streams(s.pg_nonzero_streams);
        let mut fmesh = vk::PhysicalDeviceMeshShaderFeaturesEXT::default()
            .mesh_shader(s.mesh)
            .task_shader(s.mesh)
            .mesh_shader_queries(s.mesh && s.mesh_queries);
        let mut fmd = vk::PhysicalDeviceMultiDrawFeaturesEXT::default().multi_draw(s.multi_draw);
        let mut fperf = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default()
            .performance_counter_query_pools(s.perf_query);
        let mut faccel = vk::PhysicalDeviceAccelerationStructureFeaturesKHR::default()
            .acceleration_structure(s.accel);
        let mut frtm1 = vk::PhysicalDeviceRayTracingMaintenance1FeaturesKHR::default()
            .ray_tracing_maintenance1(s.rt_maintenance1);

        let mut exts: Vec<&CStr> = Vec::new();
        if s.xfb {
            exts.push(ash::ext::transform_feedback::NAME);
        }
        if s.pg_query {
            exts.push(ash::ext::primitives_generated_query::NAME);
        }
        if s.calibrated {
            exts.push(ash::ext::calibrated_timestamps::NAME);
        }
        if s.mesh {
            exts.push(ash::ext::mesh_shader::NAME);
        }
        if s.multi_draw {
            exts.push(ash::ext::multi_draw::NAME);
        }
        if s.perf_query {
            exts.push(ash::khr::performance_query::NAME);
        }
        if s.accel {
            exts.push(ash::khr::acceleration_structure::NAME);
            exts.push(ash::khr::deferred_host_operations::NAME);
        }
        if s.rt_maintenance1 {
            exts.push(ash::khr::ray_tracing_maintenance1::NAME);
        }
        if s.swapchain {
            exts.push(ash::khr::swapchain::NAME);
        }
        let video_family = match &s.video {
            crate::video::VideoSupport::Ready(p) => {
                exts.push(ash::khr::video_queue::NAME);
                exts.push(ash::khr::video_decode_queue::NAME);
                exts.push(ash::khr::video_decode_h264::NAME);
                Some(p.family)
            }
            _ => None,
        };
        let ext_ptrs: Vec<*const i8> = exts.iter().map(|e| e.as_ptr()).collect();

        let prio = [1.0f32];
        let mut queues = vec![vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        if let Some(f2) = second_family {
            queues.push(
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(f2)
                    .queue_priorities(&prio),
            );
        }
        if let Some(vf) = video_family {
            if vf != family && Some(vf) != second_family {
                queues.push(
                    vk::DeviceQueueCreateInfo::default()
                        .queue_family_index(vf)
                        .queue_priorities(&prio),
                );
            }
        }
        let mut ci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&ext_ptrs)
            .enabled_features(&features)
            .push_next(&mut f11)
            .push_next(&mut f12)
            .push_next(&mut f13);
        if s.xfb {
            ci = ci.push_next(&mut fxfb);
        }
        if s.pg_query {
            ci = ci.push_next(&mut fpg);
        }
        if s.mesh {
            ci = ci.push_next(&mut fmesh);
        }
        if s.multi_draw {
            ci = ci.push_next(&mut fmd);
        }
        if s.perf_query {
            ci = ci.push_next(&mut fperf);
        }
        if s.accel {
            ci = ci.push_next(&mut faccel);
        }
        if s.rt_maintenance1 {
            ci = ci.push_next(&mut frtm1);
        }
        let device =
            unsafe { instance.create_device(pdev, &ci, None) }.context("vkCreateDevice")?;
        let queue = unsafe { device.get_device_queue(family, 0) };
        let second = second_family.map(|f| (f, unsafe { device.get_device_queue(f, 0) }));
        let debug = support
            .debug_utils
            .then(|| ash::ext::debug_utils::Device::new(&instance, &device));
        let xfb_fn = support
            .xfb
            .then(|| ash::ext::transform_feedback::Device::new(&instance, &device));
        let calib = support.calibrated.then(|| {
            (
                ash::ext::calibrated_timestamps::Instance::new(&entry, &instance),
                ash::ext::calibrated_timestamps::Device::new(&instance, &device),
            )
        });
        let mesh_fn = support
            .mesh
            .then(|| ash::ext::mesh_shader::Device::new(&instance, &device));
        let multi_draw_fn = support
            .multi_draw
            .then(|| ash::ext::multi_draw::Device::new(&instance, &device));
        let perf = support.perf_query.then(|| {
            (
                ash::khr::performance_query::Instance::new(&entry, &instance),
                ash::khr::performance_query::Device::new(&instance, &device),
            )
        });
        let accel_fn = support
            .accel
            .then(|| ash::khr::acceleration_structure::Device::new(&instance, &device));
        let video = video_family.map(|vf| crate::video::VideoDevice {
            family: vf,
            queue: unsafe { device.get_device_queue(vf, 0) },
            vq: ash::khr::video_queue::Device::new(&instance, &device),
            dq: ash::khr::video_decode_queue::Device::new(&instance, &device),
        });
        let pool = unsafe {
            device.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
        }
        .context("vkCreateCommandPool")?;
        Ok(Gpu {
            _entry: entry,
            instance,
            messenger,
            pdev,
            props,
            mem_props,
            families,
            device,
            family,
            queue,
            second,
            support,
            name,
            driver,
            debug,
            xfb_fn,
            calib,
            mesh_fn,
            multi_draw_fn,
            perf,
            accel_fn,
            video,
            pool,
        })
    }
}

fn pick_device(
    instance: &ash::Instance,
    pdevs: &[vk::PhysicalDevice],
    want: Option<&str>,
) -> Result<vk::PhysicalDevice> {
    let named: Vec<(vk::PhysicalDevice, String, vk::PhysicalDeviceType)> = pdevs
        .iter()
        .map(|&p| {
            let pr = unsafe { instance.get_physical_device_properties(p) };
            let n = pr
                .device_name_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (p, n, pr.device_type)
        })
        .collect();
    let list = || {
        named
            .iter()
            .enumerate()
            .map(|(i, (_, n, _))| format!("  {i}: {n}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match want {
        Some(w) => {
            if let Ok(i) = w.parse::<usize>() {
                return named
                    .get(i)
                    .map(|d| d.0)
                    .ok_or_else(|| anyhow!("--gpu {i}: no such device; available:\n{}", list()));
            }
            let lw = w.to_lowercase();
            named
                .iter()
                .find(|(_, n, _)| n.to_lowercase().contains(&lw))
                .map(|d| d.0)
                .ok_or_else(|| {
                    anyhow!(
                        "--gpu {w}: no device name contains it; available:\n{}",
                        list()
                    )
                })
        }
        None => Ok(named
            .iter()
            .find(|d| d.2 == vk::PhysicalDeviceType::DISCRETE_GPU)
            .or_else(|| {
                named
                    .iter()
                    .find(|d| d.2 == vk::PhysicalDeviceType::INTEGRATED_GPU)
            })
            .unwrap_or(&named[0])
            .0),
    }
}
