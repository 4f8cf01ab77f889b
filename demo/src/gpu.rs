//! Instance, device and the small helpers every scene uses. Plain core
//! Vulkan 1.3 plus optional extensions, so that the capture layer sees
//! ordinary calls (vkAllocateMemory, vkMapMemory, vkGetQueryPoolResults).

use anyhow::{anyhow, bail, Context as _, Result};
use ash::vk;
use std::ffi::{c_void, CStr, CString};
use std::sync::Mutex;

/// Messages collected by the debug-utils messenger (validation runs).
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    let text = if data.is_null() || (*data).p_message.is_null() {
        String::from("(no message text)")
    } else {
        CStr::from_ptr((*data).p_message)
            .to_string_lossy()
            .into_owned()
    };
    // The loader reports through the same messenger (e.g. "layer forced
    // enabled by env var"); only the layers' validation and performance
    // findings, and errors of any kind, count.
    let counts = kind.intersects(
        vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
            | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
    ) || severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR);
    if !counts {
        return vk::FALSE;
    }
    if let Ok(mut m) = MESSAGES.lock() {
        m.push(format!("[{severity:?} {kind:?}] {text}"));
    }
    vk::FALSE
}

/// Takes the messages gathered so far.
pub fn take_messages() -> Vec<String> {
    MESSAGES
        .lock()
        .map(|mut m| std::mem::take(&mut *m))
        .unwrap_or_default()
}

/// What the chosen device offers, decided once at start-up.
#[derive(Default, Clone, Debug)]
pub struct Support {
    pub debug_utils: bool,
    pub pipeline_statistics: bool,
    pub occlusion_precise: bool,
    pub geometry: bool,
    pub tessellation: bool,
    pub inherited_queries: bool,
    pub multiview: bool,
    pub host_query_reset: bool,
    pub xfb: bool,
    pub xfb_queries: bool,
    pub xfb_streams: u32,
    pub xfb_buffers: u32,
    pub geometry_streams: bool,
    pub pg_query: bool,
    pub pg_discard: bool,
    pub pg_nonzero_streams: bool,
    pub calibrated: bool,
    pub mesh: bool,
    pub mesh_queries: bool,
    pub perf_query: bool,
    pub accel: bool,
    pub rt_maintenance1: bool,
    /// H.264 decode with result-status queries (see video.rs).
    pub video: crate::video::VideoSupport,
    /// VK_KHR_swapchain enabled (windowed mode).
    pub swapchain: bool,
}

pub struct Gpu {
    pub _entry: ash::Entry,
    pub instance: ash::Instance,
    pub messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub pdev: vk::PhysicalDevice,
    pub props: vk::PhysicalDeviceProperties,
    pub mem_props: vk::PhysicalDeviceMemoryProperties,
    pub families: Vec<vk::QueueFamilyProperties>,
    pub device: ash::Device,
    pub family: u32,
    pub queue: vk::Queue,
    /// A second queue family with timestamps, when the device has one.
    pub second: Option<(u32, vk::Queue)>,
    pub support: Support,
    pub name: String,
    pub driver: String,
    pub debug: Option<ash::ext::debug_utils::Device>,
    pub xfb_fn: Option<ash::ext::transform_feedback::Device>,
    pub calib: Option<(
        ash::ext::calibrated_timestamps::Instance,
        ash::ext::calibrated_timestamps::Device,
    )>,
    pub mesh_fn: Option<ash::ext::mesh_shader::Device>,
    pub perf: Option<(
        ash::khr::performance_query::Instance,
        ash::khr::performance_query::Device,
    )>,
    pub accel_fn: Option<ash::khr::acceleration_structure::Device>,
    /// The video decode queue, when `support.video` is ready.
    pub video: Option<crate::video::VideoDevice>,
    pub pool: vk::CommandPool,
}

pub struct Options<'a> {
    pub gpu: Option<&'a str>,
    pub validate: bool,
    /// Instance extensions a window needs (empty when headless).
    pub surface_extensions: &'a [&'a CStr],
    /// Enable VK_KHR_swapchain (windowed mode).
    pub swapchain: bool,
    /// Probe for and enable VK_KHR_acceleration_structure when the device has it.
    pub accel: bool,
    /// Probe for and enable the video decode extensions and queue when the device has them.
    pub video: bool,
}

fn has(list: &[vk::ExtensionProperties], name: &CStr) -> bool {
    list.iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(name))
}

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
            perf,
            accel_fn,
            video,
            pool,
        })
    }

    /// Gives an object a VK_EXT_debug_utils name (the viewer shows them).
    pub fn name_object<H: vk::Handle>(&self, handle: H, name: &str) {
        if let (Some(du), Ok(n)) = (&self.debug, CString::new(name)) {
            let info = vk::DebugUtilsObjectNameInfoEXT::default()
                .object_handle(handle)
                .object_name(&n);
            // Naming is cosmetic; a failure must not stop the workload.
            let _ = unsafe { du.set_debug_utils_object_name(&info) };
        }
    }

    pub fn query_pool(
        &self,
        ty: vk::QueryType,
        count: u32,
        stats: vk::QueryPipelineStatisticFlags,
        name: &str,
    ) -> Result<vk::QueryPool> {
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(ty)
            .query_count(count)
            .pipeline_statistics(stats);
        let pool = unsafe { self.device.create_query_pool(&ci, None) }
            .with_context(|| format!("vkCreateQueryPool ({name})"))?;
        self.name_object(pool, name);
        Ok(pool)
    }

    pub fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> Result<u32> {
        (0..self.mem_props.memory_type_count)
            .find(|&i| {
                bits & (1 << i) != 0
                    && self.mem_props.memory_types[i as usize]
                        .property_flags
                        .contains(want)
            })
            .ok_or_else(|| anyhow!("no memory type with {want:?} for mask {bits:#x}"))
    }

    /// A host-visible, coherent buffer, persistently mapped.
    pub fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, name: &str) -> Result<Buffer> {
        let device = &self.device;
        let buffer = unsafe {
            device.create_buffer(
                &vk::BufferCreateInfo::default().size(size).usage(usage),
                None,
            )
        }
        .with_context(|| format!("vkCreateBuffer ({name})"))?;
        self.name_object(buffer, name);
        let req = unsafe { device.get_buffer_memory_requirements(buffer) };
        let ty = self.memory_type(
            req.memory_type_bits,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        )?;
        let mut flags =
            vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut ai = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(ty);
        if usage.contains(vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS) {
            ai = ai.push_next(&mut flags);
        }
        let memory = unsafe { device.allocate_memory(&ai, None) }
            .with_context(|| format!("vkAllocateMemory ({name})"))?;
        unsafe { device.bind_buffer_memory(buffer, memory, 0) }.context("vkBindBufferMemory")?;
        let ptr =
            unsafe { device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .context("vkMapMemory")? as *mut u8;
        // Start from zero so read-backs never see stale memory.
        unsafe { std::ptr::write_bytes(ptr, 0, size as usize) };
        Ok(Buffer {
            buffer,
            memory,
            ptr,
            size,
        })
    }

    /// A device-local image with one view.
    pub fn image(
        &self,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        aspect: vk::ImageAspectFlags,
        extent: vk::Extent2D,
        layers: u32,
        name: &str,
    ) -> Result<Image> {
        self.image_ms(
            format,
            usage,
            aspect,
            extent,
            layers,
            vk::SampleCountFlags::TYPE_1,
            name,
        )
    }

    /// Like `image`, with a sample count.
    #[allow(clippy::too_many_arguments)]
    pub fn image_ms(
        &self,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        aspect: vk::ImageAspectFlags,
        extent: vk::Extent2D,
        layers: u32,
        samples: vk::SampleCountFlags,
        name: &str,
    ) -> Result<Image> {
        let device = &self.device;
        let image = unsafe {
            device.create_image(
                &vk::ImageCreateInfo::default()
                    .image_type(vk::ImageType::TYPE_2D)
                    .format(format)
                    .extent(vk::Extent3D {
                        width: extent.width,
                        height: extent.height,
                        depth: 1,
                    })
                    .mip_levels(1)
                    .array_layers(layers)
                    .samples(samples)
                    .tiling(vk::ImageTiling::OPTIMAL)
                    .usage(usage),
                None,
            )
        }
        .with_context(|| format!("vkCreateImage ({name})"))?;
        self.name_object(image, name);
        let req = unsafe { device.get_image_memory_requirements(image) };
        let ty = self
            .memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)
            .or_else(|_| {
                self.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::empty())
            })?;
        let memory = unsafe {
            device.allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
        }
        .with_context(|| format!("vkAllocateMemory ({name})"))?;
        unsafe { device.bind_image_memory(image, memory, 0) }.context("vkBindImageMemory")?;
        let view = unsafe {
            device.create_image_view(
                &vk::ImageViewCreateInfo::default()
                    .image(image)
                    .view_type(if layers > 1 {
                        vk::ImageViewType::TYPE_2D_ARRAY
                    } else {
                        vk::ImageViewType::TYPE_2D
                    })
                    .format(format)
                    .subresource_range(range(aspect, layers)),
                None,
            )
        }
        .context("vkCreateImageView")?;
        Ok(Image {
            image,
            memory,
            view,
            aspect,
            layers,
        })
    }

    pub fn shader(&self, code: &[u8]) -> Result<vk::ShaderModule> {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(code))
            .context("embedded SPIR-V is malformed")?;
        unsafe {
            self.device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
        }
        .context("vkCreateShaderModule")
    }

    pub fn command_buffer(
        &self,
        pool: vk::CommandPool,
        level: vk::CommandBufferLevel,
    ) -> Result<vk::CommandBuffer> {
        let cbs = unsafe {
            self.device.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(level)
                    .command_buffer_count(1),
            )
        }
        .context("vkAllocateCommandBuffers")?;
        Ok(cbs[0])
    }

    /// Records `f` into a fresh primary command buffer of the main family.
    pub fn record(
        &self,
        f: impl FnOnce(&ash::Device, vk::CommandBuffer) -> Result<()>,
    ) -> Result<vk::CommandBuffer> {
        let cb = self.command_buffer(self.pool, vk::CommandBufferLevel::PRIMARY)?;
        unsafe {
            self.device.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
        }
        .context("vkBeginCommandBuffer")?;
        f(&self.device, cb)?;
        unsafe { self.device.end_command_buffer(cb) }.context("vkEndCommandBuffer")?;
        Ok(cb)
    }

    pub fn fence(&self) -> Result<vk::Fence> {
        unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .context("vkCreateFence")
    }

    /// Submits and returns the fence to wait on.
    pub fn submit(&self, queue: vk::Queue, cb: vk::CommandBuffer) -> Result<vk::Fence> {
        let fence = self.fence()?;
        let cbs = [cb];
        unsafe {
            self.device.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                fence,
            )
        }
        .context("vkQueueSubmit")?;
        Ok(fence)
    }

    pub fn wait(&self, fence: vk::Fence) -> Result<()> {
        unsafe {
            self.device
                .wait_for_fences(&[fence], true, 20_000_000_000)
                .context("vkWaitForFences (20 s)")?;
            self.device.destroy_fence(fence, None);
        }
        Ok(())
    }

    pub fn submit_wait(&self, cb: vk::CommandBuffer) -> Result<()> {
        let fence = self.submit(self.queue, cb)?;
        self.wait(fence)?;
        unsafe { self.device.free_command_buffers(self.pool, &[cb]) };
        Ok(())
    }

    /// vkGetQueryPoolResults with an explicit stride, returning the raw
    /// VkResult (NOT_READY is an answer here, not an error) and the bytes.
    pub fn results(
        &self,
        pool: vk::QueryPool,
        first: u32,
        count: u32,
        stride: usize,
        flags: vk::QueryResultFlags,
    ) -> Result<(vk::Result, Vec<u8>)> {
        let mut data = vec![0u8; stride * count as usize];
        let r = unsafe {
            (self.device.fp_v1_0().get_query_pool_results)(
                self.device.handle(),
                pool,
                first,
                count,
                data.len(),
                data.as_mut_ptr().cast(),
                stride as u64,
                flags,
            )
        };
        match r {
            vk::Result::SUCCESS | vk::Result::NOT_READY => Ok((r, data)),
            e => Err(anyhow!("vkGetQueryPoolResults: {e}")),
        }
    }

    /// 64-bit results of `count` queries with `per` values each, waiting.
    pub fn results64(
        &self,
        pool: vk::QueryPool,
        first: u32,
        count: u32,
        per: usize,
    ) -> Result<Vec<u64>> {
        let (r, bytes) = self.results(
            pool,
            first,
            count,
            per * 8,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
        )?;
        if r != vk::Result::SUCCESS {
            bail!(
                "vkGetQueryPoolResults with WAIT returned {r} (pool {pool:?}, queries {first}..{})",
                first + count
            );
        }
        Ok(u64s(&bytes))
    }
}

pub fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk")))
        .collect()
}

pub fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4-byte chunk")))
        .collect()
}

pub fn range(aspect: vk::ImageAspectFlags, layers: u32) -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: aspect,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: layers,
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

pub struct Buffer {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub ptr: *mut u8,
    pub size: u64,
}

impl Buffer {
    pub fn write<T: Copy>(&self, data: &[T]) {
        let bytes = std::mem::size_of_val(data);
        assert!(bytes as u64 <= self.size, "buffer write past the end");
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), self.ptr, bytes) };
    }

    pub fn bytes(&self) -> Vec<u8> {
        unsafe { std::slice::from_raw_parts(self.ptr, self.size as usize).to_vec() }
    }

    pub fn zero(&self) {
        unsafe { std::ptr::write_bytes(self.ptr, 0, self.size as usize) };
    }

    pub fn destroy(&self, device: &ash::Device) {
        unsafe {
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
    }
}

pub struct Image {
    pub image: vk::Image,
    pub memory: vk::DeviceMemory,
    pub view: vk::ImageView,
    pub aspect: vk::ImageAspectFlags,
    pub layers: u32,
}

impl Image {
    pub fn destroy(&self, device: &ash::Device) {
        unsafe {
            device.destroy_image_view(self.view, None);
            device.destroy_image(self.image, None);
            device.free_memory(self.memory, None);
        }
    }
}
