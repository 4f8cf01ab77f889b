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

/// vkCmdCopyQueryPoolResults (allowCommandBufferQueryCopies): after every pass was submitted, a
/// copy recorded in another command buffer writes the bytes vkGetQueryPoolResults returns, at the
/// app's offset and stride, and nothing between the rows. Two queries in one recording, 3 and 1
/// render pass instances: the render-pass sum and both durations are resolved on the GPU.
#[test]
fn a_copy_writes_what_get_returns_after_every_pass() {
    let c = ctx();
    let (_, names) = c.counters();
    let mut pq = vk::PhysicalDevicePerformanceQueryPropertiesKHR::default();
    let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut pq);
    unsafe { c.instance.get_physical_device_properties2(c.pdev, &mut p2) };
    assert_eq!(pq.allow_command_buffer_query_copies, vk::TRUE);
    // Every counter of the family, in an order unlike the catalog's: 10 at 3 per pass, 4 passes.
    let mut idx: Vec<u32> = (0..names.len() as u32).rev().collect();
    idx.swap(0, 4);
    assert_eq!(c.passes(&idx), 4);
    let n = idx.len();
    let row = 8 * n as u64;
    let (offset, stride, queries) = (16u64, row + 8, 2u32);
    let d = &c.device;
    unsafe {
        let mut pci = vk::QueryPoolPerformanceCreateInfoKHR::default()
            .queue_family_index(0)
            .counter_indices(&idx);
        let pool = d
            .create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::PERFORMANCE_QUERY_KHR)
                    .query_count(queries)
                    .push_next(&mut pci),
                None,
            )
            .expect("perf pool");
        d.reset_query_pool(pool, 0, queries);
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
        // Host-visible destination, filled with a pattern the copy must leave between the rows.
        let size = offset + stride * queries as u64;
        let buf = d
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size)
                    .usage(vk::BufferUsageFlags::TRANSFER_DST),
                None,
            )
            .unwrap();
        let req = d.get_buffer_memory_requirements(buf);
        let mp = c.instance.get_physical_device_memory_properties(c.pdev);
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let ty = (0..mp.memory_type_count)
            .find(|&i| {
                req.memory_type_bits & (1 << i) != 0
                    && mp.memory_types[i as usize].property_flags.contains(host)
            })
            .unwrap();
        let mem = d
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
            .unwrap();
        d.bind_buffer_memory(buf, mem, 0).unwrap();
        let ptr = d
            .map_memory(mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            .unwrap() as *mut u8;
        std::ptr::write_bytes(ptr, 0xab, size as usize);

        c.perf_d
            .acquire_profiling_lock(&vk::AcquireProfilingLockInfoKHR::default().timeout(u64::MAX))
            .unwrap();
        let cb = c.cb();
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        for (q, render_passes) in [(0u32, 3), (1, 1)] {
            d.cmd_begin_query(cb, pool, q, vk::QueryControlFlags::empty());
            for _ in 0..render_passes {
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
            d.cmd_end_query(cb, pool, q);
        }
        d.end_command_buffer(cb).unwrap();
        for pass in 0..4 {
            c.submit(cb, pass).unwrap();
        }
        c.perf_d.release_profiling_lock();

        let copy = c.cb();
        d.begin_command_buffer(copy, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_copy_query_pool_results(
            copy,
            pool,
            0,
            queries,
            buf,
            offset,
            stride,
            vk::QueryResultFlags::WAIT,
        );
        d.cmd_pipeline_barrier(
            copy,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &[vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ)],
            &[],
            &[],
        );
        d.end_command_buffer(copy).unwrap();
        c.submit(copy, 0).unwrap();

        let mut got = vec![0u8; (stride * queries as u64) as usize];
        let r = (d.fp_v1_0().get_query_pool_results)(
            d.handle(),
            pool,
            0,
            queries,
            got.len(),
            got.as_mut_ptr().cast(),
            stride,
            vk::QueryResultFlags::WAIT,
        );
        assert_eq!(r, vk::Result::SUCCESS);
        let copied = std::slice::from_raw_parts(ptr, size as usize);
        assert!(copied[..offset as usize].iter().all(|&b| b == 0xab));
        for q in 0..queries as usize {
            let at = offset as usize + q * stride as usize;
            let want = &got[q * stride as usize..][..row as usize];
            assert_eq!(&copied[at..at + row as usize], want, "query {q}");
            assert!(
                copied[at + row as usize..at + stride as usize]
                    .iter()
                    .all(|&b| b == 0xab),
                "bytes between rows untouched"
            );
        }
        let value = |q: usize, name: &str| {
            let k = idx.iter().position(|&i| names[i as usize] == name).unwrap();
            let at = offset as usize + q * stride as usize + 8 * k;
            u64::from_le_bytes(copied[at..at + 8].try_into().unwrap())
        };
        for q in 0..2 {
            let (rp_ns, cb_ns) = (
                value(q, "Render pass duration"),
                value(q, "Command buffer duration"),
            );
            assert!(rp_ns > 0 && cb_ns >= rp_ns, "query {q}: {rp_ns} {cb_ns}");
        }

        d.free_command_buffers(c.pool, &[cb, copy]);
        d.unmap_memory(mem);
        d.destroy_buffer(buf, None);
        d.free_memory(mem, None);
        d.destroy_framebuffer(fb, None);
        d.destroy_render_pass(rp, None);
        d.destroy_query_pool(pool, None);
    }
}

/// The app's compute shader for the state-restore test (glslangValidator --target-env vulkan1.0):
/// ```glsl
/// #version 450
/// layout(local_size_x = 1) in;
/// layout(set = 0, binding = 0) buffer O { uint v[]; };
/// layout(push_constant) uniform P { uint value; uint index; } pc;
/// void main() { v[pc.index] = pc.value; }
/// ```
const APP_CS: &[u32] = &[
    0x07230203, 0x00010000, 0x0008000b, 0x0000001b, 0x00000000, 0x00020011, 0x00000001, 0x0006000b,
    0x00000001, 0x4c534c47, 0x6474732e, 0x3035342e, 0x00000000, 0x0003000e, 0x00000000, 0x00000001,
    0x0005000f, 0x00000005, 0x00000004, 0x6e69616d, 0x00000000, 0x00060010, 0x00000004, 0x00000011,
    0x00000001, 0x00000001, 0x00000001, 0x00030003, 0x00000002, 0x000001c2, 0x00040005, 0x00000004,
    0x6e69616d, 0x00000000, 0x00030005, 0x00000008, 0x0000004f, 0x00040006, 0x00000008, 0x00000000,
    0x00000076, 0x00030005, 0x0000000a, 0x00000000, 0x00030005, 0x0000000d, 0x00000050, 0x00050006,
    0x0000000d, 0x00000000, 0x756c6176, 0x00000065, 0x00050006, 0x0000000d, 0x00000001, 0x65646e69,
    0x00000078, 0x00030005, 0x0000000f, 0x00006370, 0x00040047, 0x00000007, 0x00000006, 0x00000004,
    0x00050048, 0x00000008, 0x00000000, 0x00000023, 0x00000000, 0x00030047, 0x00000008, 0x00000003,
    0x00040047, 0x0000000a, 0x00000022, 0x00000000, 0x00040047, 0x0000000a, 0x00000021, 0x00000000,
    0x00050048, 0x0000000d, 0x00000000, 0x00000023, 0x00000000, 0x00050048, 0x0000000d, 0x00000001,
    0x00000023, 0x00000004, 0x00030047, 0x0000000d, 0x00000002, 0x00040047, 0x0000001a, 0x0000000b,
    0x00000019, 0x00020013, 0x00000002, 0x00030021, 0x00000003, 0x00000002, 0x00040015, 0x00000006,
    0x00000020, 0x00000000, 0x0003001d, 0x00000007, 0x00000006, 0x0003001e, 0x00000008, 0x00000007,
    0x00040020, 0x00000009, 0x00000002, 0x00000008, 0x0004003b, 0x00000009, 0x0000000a, 0x00000002,
    0x00040015, 0x0000000b, 0x00000020, 0x00000001, 0x0004002b, 0x0000000b, 0x0000000c, 0x00000000,
    0x0004001e, 0x0000000d, 0x00000006, 0x00000006, 0x00040020, 0x0000000e, 0x00000009, 0x0000000d,
    0x0004003b, 0x0000000e, 0x0000000f, 0x00000009, 0x0004002b, 0x0000000b, 0x00000010, 0x00000001,
    0x00040020, 0x00000011, 0x00000009, 0x00000006, 0x00040020, 0x00000016, 0x00000002, 0x00000006,
    0x00040017, 0x00000018, 0x00000006, 0x00000003, 0x0004002b, 0x00000006, 0x00000019, 0x00000001,
    0x0006002c, 0x00000018, 0x0000001a, 0x00000019, 0x00000019, 0x00000019, 0x00050036, 0x00000002,
    0x00000004, 0x00000000, 0x00000003, 0x000200f8, 0x00000005, 0x00050041, 0x00000011, 0x00000012,
    0x0000000f, 0x00000010, 0x0004003d, 0x00000006, 0x00000013, 0x00000012, 0x00050041, 0x00000011,
    0x00000014, 0x0000000f, 0x0000000c, 0x0004003d, 0x00000006, 0x00000015, 0x00000014, 0x00060041,
    0x00000016, 0x00000017, 0x0000000a, 0x0000000c, 0x00000013, 0x0003003e, 0x00000017, 0x00000015,
    0x000100fd, 0x00010038,
];

/// A host-visible, coherent, mapped buffer.
unsafe fn host_buffer(
    c: &Ctx,
    size: u64,
    usage: vk::BufferUsageFlags,
) -> (vk::Buffer, vk::DeviceMemory, *mut u8) {
    let d = &c.device;
    let buf = d
        .create_buffer(
            &vk::BufferCreateInfo::default().size(size).usage(usage),
            None,
        )
        .unwrap();
    let req = d.get_buffer_memory_requirements(buf);
    let mp = c.instance.get_physical_device_memory_properties(c.pdev);
    let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let ty = (0..mp.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && mp.memory_types[i as usize].property_flags.contains(host)
        })
        .unwrap();
    let mem = d
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty),
            None,
        )
        .unwrap();
    d.bind_buffer_memory(buf, mem, 0).unwrap();
    let ptr = d
        .map_memory(mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        .unwrap() as *mut u8;
    std::ptr::write_bytes(ptr, 0, size as usize);
    (buf, mem, ptr)
}

/// The copy's dispatch binds the layer's compute pipeline, descriptor set and push constants; the
/// app's are put back, so a dispatch after the copy without rebinding runs the app's shader with
/// the app's set and push constants.
#[test]
fn a_copy_keeps_the_apps_compute_bindings() {
    let c = ctx();
    let d = &c.device;
    unsafe {
        let pool = c.perf_pool(&[0]);
        let binding = [vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        let dsl = d
            .create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
                None,
            )
            .unwrap();
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(8)];
        let layout = d
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .set_layouts(&[dsl])
                    .push_constant_ranges(&ranges),
                None,
            )
            .unwrap();
        let module = d
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(APP_CS), None)
            .unwrap();
        let pipeline = d
            .create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .stage(
                        vk::PipelineShaderStageCreateInfo::default()
                            .stage(vk::ShaderStageFlags::COMPUTE)
                            .module(module)
                            .name(c"main"),
                    )
                    .layout(layout)],
                None,
            )
            .unwrap()[0];
        let dpool = d
            .create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&[vk::DescriptorPoolSize {
                        ty: vk::DescriptorType::STORAGE_BUFFER,
                        descriptor_count: 1,
                    }]),
                None,
            )
            .unwrap();
        let set = d
            .allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(dpool)
                    .set_layouts(&[dsl]),
            )
            .unwrap()[0];
        let (app_buf, app_mem, app_ptr) = host_buffer(&c, 16, vk::BufferUsageFlags::STORAGE_BUFFER);
        d.update_descriptor_sets(
            &[vk::WriteDescriptorSet::default()
                .dst_set(set)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&[vk::DescriptorBufferInfo {
                    buffer: app_buf,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }])],
            &[],
        );
        let (dst, dst_mem, dst_ptr) = host_buffer(&c, 8, vk::BufferUsageFlags::TRANSFER_DST);

        c.perf_d
            .acquire_profiling_lock(&vk::AcquireProfilingLockInfoKHR::default().timeout(u64::MAX))
            .unwrap();
        let cb = c.cb();
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        d.cmd_end_query(cb, pool, 0);
        d.end_command_buffer(cb).unwrap();
        c.submit(cb, 0).unwrap();
        c.perf_d.release_profiling_lock();

        let work = c.cb();
        d.begin_command_buffer(work, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_bind_pipeline(work, vk::PipelineBindPoint::COMPUTE, pipeline);
        d.cmd_bind_descriptor_sets(work, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
        let push: [u32; 2] = [7, 1];
        d.cmd_push_constants(
            work,
            layout,
            vk::ShaderStageFlags::COMPUTE,
            0,
            std::slice::from_raw_parts(push.as_ptr() as *const u8, 8),
        );
        d.cmd_copy_query_pool_results(work, pool, 0, 1, dst, 0, 8, vk::QueryResultFlags::WAIT);
        d.cmd_dispatch(work, 1, 1, 1);
        d.cmd_pipeline_barrier(
            work,
            vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &[vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ)],
            &[],
            &[],
        );
        d.end_command_buffer(work).unwrap();
        c.submit(work, 0).unwrap();

        let app: Vec<u32> = std::slice::from_raw_parts(app_ptr as *const u32, 4).to_vec();
        assert_eq!(
            app,
            [0, 7, 0, 0],
            "the app's pipeline, set and push constants ran"
        );
        let mut got = [0u64; 1];
        let r = (d.fp_v1_0().get_query_pool_results)(
            d.handle(),
            pool,
            0,
            1,
            8,
            got.as_mut_ptr().cast(),
            8,
            vk::QueryResultFlags::WAIT,
        );
        assert_eq!(r, vk::Result::SUCCESS);
        assert_eq!(std::ptr::read_unaligned(dst_ptr as *const u64), got[0]);
        assert!(got[0] > 0);

        d.free_command_buffers(c.pool, &[cb, work]);
        for (b, m) in [(app_buf, app_mem), (dst, dst_mem)] {
            d.destroy_buffer(b, None);
            d.free_memory(m, None);
        }
        d.destroy_descriptor_pool(dpool, None);
        d.destroy_pipeline(pipeline, None);
        d.destroy_shader_module(module, None);
        d.destroy_pipeline_layout(layout, None);
        d.destroy_descriptor_set_layout(dsl, None);
        d.destroy_query_pool(pool, None);
    }
}

/// A copy recorded right after the query in the one recording that is submitted once per pass: each
/// submit copies that submit's measurement, so after the last pass the copy equals the get path.
/// (The layer notes VUID-vkCmdCopyQueryPoolResults-queryType-03234 for the earlier passes.)
#[test]
fn a_copy_in_the_measured_recording_is_right_after_the_last_pass() {
    let c = ctx();
    let (_, names) = c.counters();
    let idx: Vec<u32> = [
        "Command buffer duration",
        "Render pass duration",
        "Input assembly vertices",
        "Samples passed",
    ]
    .iter()
    .map(|n| index_of(&names, n))
    .collect();
    assert_eq!(c.passes(&idx), 2);
    let pool = c.perf_pool(&idx);
    let d = &c.device;
    unsafe {
        let (dst, mem, ptr) = host_buffer(&c, 32, vk::BufferUsageFlags::TRANSFER_DST);
        c.perf_d
            .acquire_profiling_lock(&vk::AcquireProfilingLockInfoKHR::default().timeout(u64::MAX))
            .unwrap();
        let cb = c.cb();
        d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        d.cmd_begin_query(cb, pool, 0, vk::QueryControlFlags::empty());
        d.cmd_end_query(cb, pool, 0);
        d.cmd_copy_query_pool_results(cb, pool, 0, 1, dst, 0, 32, vk::QueryResultFlags::WAIT);
        d.cmd_pipeline_barrier(
            cb,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &[vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ)],
            &[],
            &[],
        );
        d.end_command_buffer(cb).unwrap();
        c.submit(cb, 0).unwrap();
        let after_first: Vec<u8> = std::slice::from_raw_parts(ptr, 32).to_vec();
        c.submit(cb, 1).unwrap();
        c.perf_d.release_profiling_lock();
        let mut got = [0u8; 32];
        let r = (d.fp_v1_0().get_query_pool_results)(
            d.handle(),
            pool,
            0,
            1,
            32,
            got.as_mut_ptr().cast(),
            32,
            vk::QueryResultFlags::WAIT,
        );
        assert_eq!(r, vk::Result::SUCCESS);
        let copied = std::slice::from_raw_parts(ptr, 32);
        assert_eq!(copied, &got[..]);
        // No render pass: its duration is 0 both ways; the command buffer took some time.
        assert_eq!(&copied[8..16], &[0; 8]);
        assert_ne!(&copied[..8], &[0; 8]);
        // The first pass's copy measured its own submit (a distinct, nonzero duration).
        assert_ne!(&after_first[..8], &[0; 8]);
        d.free_command_buffers(c.pool, &[cb]);
        d.destroy_buffer(dst, None);
        d.free_memory(mem, None);
        d.destroy_query_pool(pool, None);
    }
}
