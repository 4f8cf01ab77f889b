#![allow(non_snake_case)]
//! VK_KHR_performance_query as VK_LAYER_QUARRY_counters offers it on lavapipe, called in-process:
//! what is advertised, the pass count formula, per-pass availability, values for a render pass with
//! no draws, and the profiling-lock rule (VUID-vkCmdBeginQuery-queryPool-03223).
//!
//! The loader reads the layer variables when the instance is created, so they are set once for this
//! test binary (QUARRY_COUNTERS_PER_PASS=3) before any Vulkan call; tests share one lock.

use ash::vk;
use std::sync::{Mutex, OnceLock};
use VkLayer_quarry_counters::counters::CATALOG;
use VkLayer_quarry_counters::launch::LayerDir;

const PER_PASS: u32 = 3;

struct Ctx {
    _layer: LayerDir,
    _entry: ash::Entry,
    instance: ash::Instance,
    pdev: vk::PhysicalDevice,
    device: ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    perf_i: ash::khr::performance_query::Instance,
    perf_d: ash::khr::performance_query::Device,
}

fn ctx() -> std::sync::MutexGuard<'static, Ctx> {
    static C: OnceLock<Mutex<Ctx>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(unsafe { setup() }))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

unsafe fn setup() -> Ctx {
    let layer = LayerDir::for_built_layer().expect("counters layer built");
    for (k, v) in layer.env_values(None, None) {
        std::env::set_var(k, v);
    }
    std::env::set_var("QUARRY_COUNTERS_PER_PASS", PER_PASS.to_string());
    std::env::remove_var("VK_INSTANCE_LAYERS");
    let entry = ash::Entry::load().expect("libvulkan");
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .expect("instance");
    let pdev = instance.enumerate_physical_devices().unwrap()[0];
    let exts = instance
        .enumerate_device_extension_properties(pdev)
        .unwrap();
    assert!(
        exts.iter()
            .any(|e| e.extension_name_as_c_str() == Ok(ash::khr::performance_query::NAME)),
        "the layer advertises VK_KHR_performance_query"
    );
    let mut fperf = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut fperf);
    instance.get_physical_device_features2(pdev, &mut f2);
    assert_eq!(fperf.performance_counter_query_pools, vk::TRUE);
    assert_eq!(fperf.performance_counter_multiple_query_pools, vk::FALSE);

    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let names = [ash::khr::performance_query::NAME.as_ptr()];
    let mut enable = vk::PhysicalDevicePerformanceQueryFeaturesKHR::default()
        .performance_counter_query_pools(true);
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(true);
    let dci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&qci)
        .enabled_extension_names(&names)
        .push_next(&mut enable)
        .push_next(&mut f12);
    let device = instance.create_device(pdev, &dci, None).expect("device");
    let queue = device.get_device_queue(0, 0);
    let pool = device
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(0)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
        .unwrap();
    let perf_i = ash::khr::performance_query::Instance::new(&entry, &instance);
    let perf_d = ash::khr::performance_query::Device::new(&instance, &device);
    Ctx {
        _layer: layer,
        _entry: entry,
        instance,
        pdev,
        device,
        queue,
        pool,
        perf_i,
        perf_d,
    }
}

impl Ctx {
    fn counters(&self) -> (Vec<vk::PerformanceCounterKHR<'static>>, Vec<String>) {
        unsafe {
            let n = self
                .perf_i
                .enumerate_physical_device_queue_family_performance_query_counters_len(self.pdev, 0)
                .unwrap();
            let mut c = vec![vk::PerformanceCounterKHR::default(); n];
            let mut d = vec![vk::PerformanceCounterDescriptionKHR::default(); n];
            self.perf_i
                .enumerate_physical_device_queue_family_performance_query_counters(
                    self.pdev, 0, &mut c, &mut d,
                )
                .unwrap();
            let names = d
                .iter()
                .map(|d| d.name_as_c_str().unwrap().to_string_lossy().into_owned())
                .collect();
            (c, names)
        }
    }

    fn passes(&self, idx: &[u32]) -> u32 {
        let ci = vk::QueryPoolPerformanceCreateInfoKHR::default()
            .queue_family_index(0)
            .counter_indices(idx);
        unsafe {
            self.perf_i
                .get_physical_device_queue_family_performance_query_passes(self.pdev, &ci)
        }
    }

    fn perf_pool(&self, idx: &[u32]) -> vk::QueryPool {
        let mut pci = vk::QueryPoolPerformanceCreateInfoKHR::default()
            .queue_family_index(0)
            .counter_indices(idx);
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::PERFORMANCE_QUERY_KHR)
            .query_count(1)
            .push_next(&mut pci);
        let p = unsafe { self.device.create_query_pool(&ci, None) }.expect("perf pool");
        unsafe { self.device.reset_query_pool(p, 0, 1) };
        p
    }

    fn cb(&self) -> vk::CommandBuffer {
        unsafe {
            self.device
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(self.pool)
                        .command_buffer_count(1),
                )
                .unwrap()[0]
        }
    }

    fn submit(&self, cb: vk::CommandBuffer, pass: u32) -> Result<(), vk::Result> {
        let cbs = [cb];
        let mut pinfo = vk::PerformanceQuerySubmitInfoKHR::default().counter_pass_index(pass);
        let s = vk::SubmitInfo::default()
            .command_buffers(&cbs)
            .push_next(&mut pinfo);
        unsafe {
            self.device
                .queue_submit(self.queue, &[s], vk::Fence::null())?;
            self.device.queue_wait_idle(self.queue)
        }
    }
}

fn index_of(names: &[String], name: &str) -> u32 {
    names.iter().position(|n| n == name).expect(name) as u32
}

#[test]
fn counters_have_catalog_units_scopes_and_stable_uuids() {
    let c = ctx();
    let (counters, names) = c.counters();
    // lavapipe's graphics family has timestamps, pipeline statistics and precise occlusion.
    assert_eq!(counters.len(), CATALOG.len());
    for (k, (got, name)) in counters.iter().zip(&names).enumerate() {
        let want = &CATALOG[k];
        assert_eq!(name, want.name);
        assert_eq!(got.unit, want.unit);
        assert_eq!(got.scope, want.scope);
        assert_eq!(got.storage, vk::PerformanceCounterStorageKHR::UINT64);
        assert_eq!(got.uuid, VkLayer_quarry_counters::counters::uuid_for(name));
    }
    let ns = index_of(&names, "Command buffer duration") as usize;
    assert_eq!(
        counters[ns].unit,
        vk::PerformanceCounterUnitKHR::NANOSECONDS
    );
    assert_eq!(
        counters[ns].scope,
        vk::PerformanceCounterScopeKHR::COMMAND_BUFFER
    );
}

#[test]
fn pass_count_is_ceil_of_distinct_counters_over_per_pass() {
    let c = ctx();
    let n = c.counters().0.len() as u32;
    for k in 1..=n {
        let idx: Vec<u32> = (0..k).collect();
        assert_eq!(c.passes(&idx), k.div_ceil(PER_PASS), "{k} counters");
    }
    assert_eq!(c.passes(&[4, 4, 4, 4]), 1, "repeats cost nothing");
}

#[test]
fn a_query_is_available_only_after_every_pass_and_measures_an_empty_render_pass() {
    let c = ctx();
    let (_, names) = c.counters();
    // 7 counters at 3 per pass: 3 passes.
    let idx: Vec<u32> = [
        "Render pass duration",
        "Command buffer duration",
        "Vertex shader invocations",
        "Fragment shader invocations",
        "Samples passed",
        "Compute shader invocations",
        "Input assembly vertices",
    ]
    .iter()
    .map(|n| index_of(&names, n))
    .collect();
    assert_eq!(c.passes(&idx), 3);
    let pool = c.perf_pool(&idx);
    let d = &c.device;
    unsafe {
        let rp = d
            .create_render_pass(
                &vk::RenderPassCreateInfo::default()
                    .subpasses(&[vk::SubpassDescription::default()
                        .pipeline_bind_point(vk::PipelineBindPoint::GRAPHICS)]),
                None,
            )
            .unwrap();
        let fb = d
            .create_framebuffer(
                &vk::FramebufferCreateInfo::default()
                    .render_pass(rp)
                    .width(16)
                    .height(16)
                    .layers(1),
                None,
            )
            .unwrap();
        c.perf_d
            .acquire_profiling_lock(&vk::AcquireProfilingLockInfoKHR::default().timeout(u64::MAX))
            .unwrap();
        let cb = c.cb();
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        for _ in 0..2 {
            d.cmd_begin_render_pass(
                cb,
                &vk::RenderPassBeginInfo::default()
                    .render_pass(rp)
                    .framebuffer(fb)
                    .render_area(vk::Rect2D {
                        offset: vk::Offset2D::default(),
                        extent: vk::Extent2D {
                            width: 16,
                            height: 16,
                        },
                    }),
                vk::SubpassContents::INLINE,
            );
            d.cmd_end_render_pass(cb);
        }
        d.cmd_end_query(cb, pool, 0);
        d.end_command_buffer(cb).expect("recorded under the lock");

        let mut out = vec![0u64; idx.len()];
        let read = |out: &mut Vec<u64>, flags| {
            let bytes = std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, out.len() * 8);
            (d.fp_v1_0().get_query_pool_results)(
                d.handle(),
                pool,
                0,
                1,
                bytes.len(),
                bytes.as_mut_ptr().cast(),
                bytes.len() as u64,
                flags,
            )
        };
        for pass in [0, 2] {
            c.submit(cb, pass).unwrap();
            assert_eq!(
                read(&mut out, vk::QueryResultFlags::empty()),
                vk::Result::NOT_READY,
                "pass 1 not submitted yet"
            );
        }
        c.submit(cb, 1).unwrap();
        assert_eq!(
            read(&mut out, vk::QueryResultFlags::WAIT),
            vk::Result::SUCCESS
        );
        let [rp_ns, cb_ns, vs, fs, samples, cs, ia] = out[..] else {
            unreachable!()
        };
        assert!(rp_ns > 0, "two render pass instances took some time");
        assert!(
            cb_ns >= rp_ns,
            "command buffer {cb_ns} ns >= render passes {rp_ns} ns"
        );
        assert_eq!(
            (vs, fs, samples, cs, ia),
            (0, 0, 0, 0, 0),
            "nothing was drawn"
        );
        // A reset makes it unavailable again.
        d.reset_query_pool(pool, 0, 1);
        assert_eq!(
            read(&mut out, vk::QueryResultFlags::empty()),
            vk::Result::NOT_READY
        );
        c.perf_d.release_profiling_lock();
        d.free_command_buffers(c.pool, &[cb]);
        d.destroy_framebuffer(fb, None);
        d.destroy_render_pass(rp, None);
        d.destroy_query_pool(pool, None);
    }
}

#[test]
fn recording_without_the_profiling_lock_is_refused() {
    let c = ctx();
    let pool = c.perf_pool(&[0]);
    let d = &c.device;
    unsafe {
        let cb = c.cb();
        // Not held at vkBeginCommandBuffer: VUID-vkCmdBeginQuery-queryPool-03223.
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        d.cmd_end_query(cb, pool, 0);
        assert_eq!(d.end_command_buffer(cb), Err(vk::Result::ERROR_UNKNOWN));
        assert_eq!(c.submit(cb, 0), Err(vk::Result::ERROR_UNKNOWN));

        // Acquired after vkBeginCommandBuffer does not count either.
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        c.perf_d
            .acquire_profiling_lock(&vk::AcquireProfilingLockInfoKHR::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        d.cmd_end_query(cb, pool, 0);
        assert_eq!(d.end_command_buffer(cb), Err(vk::Result::ERROR_UNKNOWN));

        // Held from begin to end: accepted, and the query completes.
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        d.cmd_end_query(cb, pool, 0);
        d.end_command_buffer(cb).unwrap();
        c.submit(cb, 0).unwrap();
        let mut v = [0u64; 1];
        let bytes = std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, 8);
        let r = (d.fp_v1_0().get_query_pool_results)(
            d.handle(),
            pool,
            0,
            1,
            8,
            bytes.as_mut_ptr().cast(),
            8,
            vk::QueryResultFlags::WAIT,
        );
        assert_eq!(r, vk::Result::SUCCESS);

        // Released while recording: VUID-vkQueueSubmit-pCommandBuffers-03220.
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        c.perf_d.release_profiling_lock();
        d.cmd_end_query(cb, pool, 0);
        assert_eq!(d.end_command_buffer(cb), Err(vk::Result::ERROR_UNKNOWN));
        d.free_command_buffers(c.pool, &[cb]);
        d.destroy_query_pool(pool, None);
    }
    let _ = &c.instance;
}
