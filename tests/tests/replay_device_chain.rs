//! Device creation re-creates every struct of the captured chains through generated code (issue
//! 31): traces written by hand whose `vkCreateDevice` chains feature structs the replayer once
//! listed by hand and refused otherwise, and structs of an extension lavapipe lacks, used and
//! unused, through the portability rules.

use ash::vk;
use ash::vk::Handle as _;
use quarry_tests::synth::Records;
use replayer::ReplayOptions;

const INSTANCE: u64 = 0x1000;
const PHYSICAL: u64 = 0x2000;
const DEVICE: u64 = 0x3000;
const QUEUE: u64 = 0x4000;
const POOL: u64 = 0x5000;
const CB: u64 = 0x6000;

fn have_vulkan() -> bool {
    match replayer::devices() {
        Ok(g) if !g.is_empty() => true,
        other => {
            eprintln!("skipping: no Vulkan GPU ({other:?})");
            false
        }
    }
}

fn has_extension(name: &str) -> bool {
    replayer::devices()
        .ok()
        .and_then(|g| g.into_iter().next())
        .is_some_and(|g| g.extensions.iter().any(|e| e == name))
}

/// A synthetic trace (`quarry_tests::synth`) and the calls these tests make of it.
struct Trace(Records);

impl std::ops::Deref for Trace {
    type Target = Records;
    fn deref(&self) -> &Records {
        &self.0
    }
}

impl std::ops::DerefMut for Trace {
    fn deref_mut(&mut self) -> &mut Records {
        &mut self.0
    }
}

impl Trace {
    fn new() -> Self {
        Trace(Records::new("device chain"))
    }

    /// Instance, the first GPU, and a device with one queue of family 0 created from `dci`
    /// (queue infos filled in here).
    fn device(&mut self, dci: vk::DeviceCreateInfo<'_>) {
        let app = vk::ApplicationInfo::default()
            .application_name(c"device chain")
            .api_version(vk::API_VERSION_1_2);
        let ci = vk::InstanceCreateInfo::default().application_info(&app);
        let mut inst = vk::Instance::from_raw(INSTANCE);
        self.call("vkCreateInstance", |e| unsafe {
            vkstream::encode::vkCreateInstance(e, &ci, std::ptr::null(), &mut inst)
        });
        let mut count = 1u32;
        let mut pd = vk::PhysicalDevice::from_raw(PHYSICAL);
        self.call("vkEnumeratePhysicalDevices", |e| unsafe {
            vkstream::encode::vkEnumeratePhysicalDevices(e, inst, &mut count, &mut pd)
        });
        let prio = [1.0f32];
        let q = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&prio)];
        let dci = dci.queue_create_infos(&q);
        let mut dev = vk::Device::from_raw(DEVICE);
        self.call("vkCreateDevice", |e| unsafe {
            vkstream::encode::vkCreateDevice(e, pd, &dci, std::ptr::null(), &mut dev)
        });
        let mut queue = vk::Queue::from_raw(QUEUE);
        self.call("vkGetDeviceQueue", |e| unsafe {
            vkstream::encode::vkGetDeviceQueue(e, dev, 0, 0, &mut queue)
        });
    }

    /// A command buffer recording `record` (its commands encoded by the caller), then the end of
    /// the device and instance. Returns the seq of the first recorded command.
    fn record_and_end(&mut self, record: impl FnOnce(&mut Trace) -> u64) -> u64 {
        let dev = vk::Device::from_raw(DEVICE);
        let pci = vk::CommandPoolCreateInfo::default().queue_family_index(0);
        let mut pool = vk::CommandPool::from_raw(POOL);
        self.call("vkCreateCommandPool", |e| unsafe {
            vkstream::encode::vkCreateCommandPool(e, dev, &pci, std::ptr::null(), &mut pool)
        });
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        let mut cb = vk::CommandBuffer::from_raw(CB);
        self.call("vkAllocateCommandBuffers", |e| unsafe {
            vkstream::encode::vkAllocateCommandBuffers(e, dev, &ai, &mut cb)
        });
        let bi = vk::CommandBufferBeginInfo::default();
        self.call("vkBeginCommandBuffer", |e| unsafe {
            vkstream::encode::vkBeginCommandBuffer(e, cb, &bi)
        });
        let first = record(self);
        self.call("vkEndCommandBuffer", |e| unsafe {
            vkstream::encode::vkEndCommandBuffer(e, cb)
        });
        self.call("vkDestroyCommandPool", |e| unsafe {
            vkstream::encode::vkDestroyCommandPool(e, dev, pool, std::ptr::null())
        });
        self.end();
        first
    }

    fn end(&mut self) {
        let dev = vk::Device::from_raw(DEVICE);
        self.call("vkDestroyDevice", |e| unsafe {
            vkstream::encode::vkDestroyDevice(e, dev, std::ptr::null())
        });
        let inst = vk::Instance::from_raw(INSTANCE);
        self.call("vkDestroyInstance", |e| unsafe {
            vkstream::encode::vkDestroyInstance(e, inst, std::ptr::null())
        });
    }
}

fn validation_installed() -> bool {
    std::process::Command::new("vulkaninfo")
        .arg("--summary")
        .env_remove("DISPLAY")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("VK_LAYER_KHRONOS_validation"))
        .unwrap_or(false)
}

/// VkPhysicalDeviceTexelBufferAlignmentFeaturesEXT (vkd3d) and
/// VkPhysicalDeviceShaderAtomicFloat2FeaturesEXT (a compute framework) were refused by the old
/// hand list. Both reach the driver now: the replay is valid under the validation layer, and a
/// feature of the second that lavapipe lacks and the trace never uses is switched off, named in
/// the warnings (it was read from the materialised chain).
#[test]
fn feature_structs_of_any_extension_are_recreated() {
    if !have_vulkan() {
        return;
    }
    for e in [
        "VK_EXT_texel_buffer_alignment",
        "VK_EXT_shader_atomic_float",
        "VK_EXT_shader_atomic_float2",
    ] {
        if !has_extension(e) {
            eprintln!("skipping: the GPU lacks {e}");
            return;
        }
    }
    let ext = [
        c"VK_EXT_texel_buffer_alignment".as_ptr(),
        c"VK_EXT_shader_atomic_float".as_ptr(),
        c"VK_EXT_shader_atomic_float2".as_ptr(),
    ];
    let mut texel =
        vk::PhysicalDeviceTexelBufferAlignmentFeaturesEXT::default().texel_buffer_alignment(true);
    // lavapipe has 32-bit min/max but no 16-bit float atomics.
    let mut atomics = vk::PhysicalDeviceShaderAtomicFloat2FeaturesEXT::default()
        .shader_buffer_float32_atomic_min_max(true)
        .shader_buffer_float16_atomics(true);
    let dci = vk::DeviceCreateInfo::default()
        .enabled_extension_names(&ext)
        .push_next(&mut texel)
        .push_next(&mut atomics);
    let mut t = Trace::new();
    t.device(dci);
    t.end();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.qtrace");
    t.write(&trace);
    let mut opts = ReplayOptions::new(&trace);
    opts.validate = validation_installed();
    let s = replayer::replay(&opts).unwrap_or_else(|e| panic!("replay: {e}"));
    let warnings = s.warnings.join("\n");
    assert!(
        warnings.contains(
            "feature VkPhysicalDeviceShaderAtomicFloat2FeaturesEXT.shaderBufferFloat16Atomics"
        ),
        "{warnings}"
    );
    assert!(
        !warnings.contains("shaderBufferFloat32AtomicMinMax")
            && !warnings.contains("texelBufferAlignment"),
        "{warnings}"
    );
    assert_eq!(s.validation_messages, 0, "{:#?}", s.first_messages);
}

/// The trace enables VK_KHR_fragment_shading_rate, which lavapipe lacks, and chains its features
/// struct. Never used: the extension is left out and its struct unlinked (the device is valid).
/// Used by a recorded command: one error naming that call.
#[test]
fn structs_of_an_extension_the_gpu_lacks_follow_the_portability_rules() {
    const EXT: &str = "VK_KHR_fragment_shading_rate";
    if !have_vulkan() {
        return;
    }
    if has_extension(EXT) {
        eprintln!("skipping: the GPU has {EXT}");
        return;
    }
    let trace_with = |use_it: bool| {
        let ext = [
            c"VK_KHR_fragment_shading_rate".as_ptr(),
            c"VK_KHR_create_renderpass2".as_ptr(),
        ];
        let mut rate = vk::PhysicalDeviceFragmentShadingRateFeaturesKHR::default()
            .pipeline_fragment_shading_rate(true);
        let dci = vk::DeviceCreateInfo::default()
            .enabled_extension_names(&ext)
            .push_next(&mut rate);
        let mut t = Trace::new();
        t.device(dci);
        let first = t.record_and_end(|t| {
            if !use_it {
                return 0;
            }
            let size = vk::Extent2D {
                width: 1,
                height: 1,
            };
            let ops = [vk::FragmentShadingRateCombinerOpKHR::KEEP; 2];
            let cb = vk::CommandBuffer::from_raw(CB);
            t.call("vkCmdSetFragmentShadingRateKHR", |e| unsafe {
                vkstream::encode::vkCmdSetFragmentShadingRateKHR(e, cb, &size, &ops)
            })
        });
        (t, first)
    };
    let dir = tempfile::tempdir().unwrap();

    let (t, _) = trace_with(false);
    let unused = dir.path().join("unused.qtrace");
    t.write(&unused);
    let mut opts = ReplayOptions::new(&unused);
    opts.validate = validation_installed();
    let s = replayer::replay(&opts).unwrap_or_else(|e| panic!("replay: {e}"));
    let warnings = s.warnings.join("\n");
    assert!(
        warnings.contains("left out") && warnings.contains(EXT),
        "{warnings}"
    );
    // A struct of an extension that is not enabled would be reported by the validation layer.
    assert_eq!(s.validation_messages, 0, "{:#?}", s.first_messages);

    let (t, seq) = trace_with(true);
    let used = dir.path().join("used.qtrace");
    t.write(&used);
    let e = replayer::replay(&ReplayOptions::new(&used))
        .expect_err("a used extension the GPU lacks")
        .to_string();
    assert!(e.contains("(vkCreateDevice)"), "{e}");
    assert!(
        e.contains(&format!(
            "device extension {EXT}, first used by vkCmdSetFragmentShadingRateKHR (call {seq})"
        )),
        "{e}"
    );
}
