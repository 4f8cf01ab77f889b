//! VK_KHR_performance_query: enumerate counters, choose a set, hold the
//! profiling lock, and submit the same command buffer once per pass with
//! VkPerformanceQuerySubmitInfoKHR. Counter values are implementation-defined,
//! so the checks are structural (one finite value per chosen counter). When
//! the device allows command-buffer copies, the results are also copied with
//! vkCmdCopyQueryPoolResults and must equal vkGetQueryPoolResults' bytes.

use crate::gpu::{Buffer, Gpu};
use crate::report::{Report, Rule};
use crate::scene::Scene;
use anyhow::{Context as _, Result};
use ash::vk;

/// At most this many counters and passes, so a run stays short.
const MAX_COUNTERS: usize = 8;
const MAX_PASSES: u32 = 4;

/// What the selection needs to know about a counter.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterInfo {
    pub name: String,
    pub uuid: [u8; 16],
    pub storage: vk::PerformanceCounterStorageKHR,
    pub unit: vk::PerformanceCounterUnitKHR,
    pub scope: vk::PerformanceCounterScopeKHR,
}

/// Chooses counter indices: distinct UUIDs, enumeration order, at most
/// `MAX_COUNTERS`, then drops from the end until `passes(set)` is at most
/// `MAX_PASSES` (a set needing more passes than that is not worth a demo).
/// Always keeps at least one counter when any exists.
pub fn select_counters(counters: &[CounterInfo], passes: impl Fn(&[u32]) -> u32) -> Vec<u32> {
    let mut chosen: Vec<u32> = Vec::new();
    for (i, c) in counters.iter().enumerate() {
        if chosen.len() == MAX_COUNTERS {
            break;
        }
        if chosen.iter().any(|&j| counters[j as usize].uuid == c.uuid) {
            continue;
        }
        chosen.push(i as u32);
    }
    while chosen.len() > 1 && passes(&chosen) > MAX_PASSES {
        chosen.pop();
    }
    chosen
}

/// Decodes one 8-byte VkPerformanceCounterResultKHR by its storage type.
pub fn decode(storage: vk::PerformanceCounterStorageKHR, raw: [u8; 8]) -> Option<f64> {
    let lo = [raw[0], raw[1], raw[2], raw[3]];
    Some(match storage {
        vk::PerformanceCounterStorageKHR::INT32 => i32::from_le_bytes(lo) as f64,
        vk::PerformanceCounterStorageKHR::INT64 => i64::from_le_bytes(raw) as f64,
        vk::PerformanceCounterStorageKHR::UINT32 => u32::from_le_bytes(lo) as f64,
        vk::PerformanceCounterStorageKHR::UINT64 => u64::from_le_bytes(raw) as f64,
        vk::PerformanceCounterStorageKHR::FLOAT32 => f32::from_le_bytes(lo) as f64,
        vk::PerformanceCounterStorageKHR::FLOAT64 => f64::from_le_bytes(raw),
        _ => return None,
    })
}

/// Known answers for the counters VK_LAYER_QUARRY_counters lists, over `Scene::record_draws`
/// (the occluder and the target quad, 6 vertices each; see the geometry in scene.rs). Other
/// drivers' counters have implementation-defined meanings and get structural checks only.
fn known_answer(name: &str) -> Option<(Rule, &'static str)> {
    use crate::scene::{OCCLUDER_PX, VISIBLE_PX};
    Some(match name {
        "Samples passed" => (
            Rule::Exact(OCCLUDER_PX + VISIBLE_PX),
            "2048 occluder pixels + 512 visible target pixels (precise occlusion)",
        ),
        "Input assembly vertices" => (Rule::Exact(12), "two draws of 6 vertices"),
        "Input assembly primitives" => (Rule::Exact(4), "two draws of 2 triangles"),
        "Clipping invocations" => (Rule::Exact(4), "every triangle reaches the clipper"),
        "Vertex shader invocations" => {
            (Rule::AtLeast(12), "spec: each of 12 vertices at least once")
        }
        _ => return None,
    })
}

pub struct Perf {
    pool: vk::QueryPool,
    chosen: Vec<CounterInfo>,
    passes: u32,
    /// Host-visible destination of vkCmdCopyQueryPoolResults, when
    /// allowCommandBufferQueryCopies is VK_TRUE.
    copy: Option<Buffer>,
}

impl Perf {
    pub fn new(gpu: &Gpu, report: &mut Report) -> Result<Option<Self>> {
        let Some((inst, _)) = &gpu.perf else {
            report.skip(
                "performance query",
                "VK_KHR_performance_query (VkPhysicalDevicePerformanceQueryFeaturesKHR::performanceCounterQueryPools)",
            );
            return Ok(None);
        };
        let n = unsafe {
            inst.enumerate_physical_device_queue_family_performance_query_counters_len(
                gpu.pdev, gpu.family,
            )
        }
        .context("vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR")?;
        let mut counters = vec![vk::PerformanceCounterKHR::default(); n];
        let mut descs = vec![vk::PerformanceCounterDescriptionKHR::default(); n];
        unsafe {
            inst.enumerate_physical_device_queue_family_performance_query_counters(
                gpu.pdev,
                gpu.family,
                &mut counters,
                &mut descs,
            )
        }
        .context("vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR")?;
        let infos: Vec<CounterInfo> = counters
            .iter()
            .zip(&descs)
            .map(|(c, d)| CounterInfo {
                name: d
                    .name_as_c_str()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                uuid: c.uuid,
                storage: c.storage,
                unit: c.unit,
                scope: c.scope,
            })
            .collect();
        report.info(format!(
            "performance counters on queue family {}: {}",
            gpu.family,
            infos.len()
        ));
        if infos.is_empty() {
            report.skip(
                "performance query",
                "at least one counter on the graphics queue family",
            );
            return Ok(None);
        }
        let passes_for = |idx: &[u32]| {
            let ci = vk::QueryPoolPerformanceCreateInfoKHR::default()
                .queue_family_index(gpu.family)
                .counter_indices(idx);
            unsafe { inst.get_physical_device_queue_family_performance_query_passes(gpu.pdev, &ci) }
        };
        let idx = select_counters(&infos, passes_for);
        let passes = passes_for(&idx);
        let mut pci = vk::QueryPoolPerformanceCreateInfoKHR::default()
            .queue_family_index(gpu.family)
            .counter_indices(&idx);
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::PERFORMANCE_QUERY_KHR)
            .query_count(1)
            .push_next(&mut pci);
        let pool = unsafe { gpu.device.create_query_pool(&ci, None) }
            .context("vkCreateQueryPool (performance)")?;
        gpu.name_object(pool, "performance counters");
        let chosen: Vec<CounterInfo> = idx.iter().map(|&i| infos[i as usize].clone()).collect();
        report.info(format!(
            "performance counters chosen ({passes} pass(es)): {}",
            chosen
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let mut props = vk::PhysicalDevicePerformanceQueryPropertiesKHR::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
        unsafe {
            gpu.instance
                .get_physical_device_properties2(gpu.pdev, &mut p2)
        };
        let copy = if props.allow_command_buffer_query_copies == vk::TRUE {
            Some(gpu.buffer(
                8 * chosen.len() as u64,
                vk::BufferUsageFlags::TRANSFER_DST,
                "performance query copy",
            )?)
        } else {
            report.skip(
                "performance query copy",
                "VkPhysicalDevicePerformanceQueryPropertiesKHR::allowCommandBufferQueryCopies",
            );
            None
        };
        Ok(Some(Perf {
            pool,
            chosen,
            passes,
            copy,
        }))
    }

    pub fn frame(&mut self, gpu: &Gpu, scene: &Scene, report: &mut Report) -> Result<()> {
        let Some((_, dev)) = &gpu.perf else {
            return Ok(());
        };
        let d = &gpu.device;
        unsafe {
            dev.acquire_profiling_lock(
                &vk::AcquireProfilingLockInfoKHR::default().timeout(u64::MAX),
            )
        }
        .context("vkAcquireProfilingLockKHR")?;
        let result = self.passes_locked(gpu, scene, report);
        unsafe { dev.release_profiling_lock() };
        let _ = d;
        result
    }

    fn passes_locked(&self, gpu: &Gpu, scene: &Scene, report: &mut Report) -> Result<()> {
        let d = &gpu.device;
        // The reset must not share a command buffer with the query's begin.
        if gpu.support.host_query_reset {
            unsafe { d.reset_query_pool(self.pool, 0, 1) };
        } else {
            let cb = gpu.record(|d, cb| unsafe {
                d.cmd_reset_query_pool(cb, self.pool, 0, 1);
                Ok(())
            })?;
            gpu.submit_wait(cb)?;
        }
        // Recorded once and submitted once per pass, so not ONE_TIME_SUBMIT;
        // the query brackets the whole command buffer, which every counter
        // scope (command, render pass, command buffer) accepts.
        let cb = gpu.command_buffer(gpu.pool, vk::CommandBufferLevel::PRIMARY)?;
        unsafe {
            d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
                .context("vkBeginCommandBuffer")?;
            d.cmd_begin_query(cb, self.pool, 0, vk::QueryControlFlags::empty());
            scene.record_draws(d, cb);
            d.cmd_end_query(cb, self.pool, 0);
            d.end_command_buffer(cb).context("vkEndCommandBuffer")?;
        }
        for pass in 0..self.passes {
            let mut pinfo = vk::PerformanceQuerySubmitInfoKHR::default().counter_pass_index(pass);
            let cbs = [cb];
            let submit = vk::SubmitInfo::default()
                .command_buffers(&cbs)
                .push_next(&mut pinfo);
            let fence = gpu.fence()?;
            unsafe { d.queue_submit(gpu.queue, &[submit], fence) }
                .with_context(|| format!("vkQueueSubmit (performance pass {pass})"))?;
            gpu.wait(fence)?;
        }
        unsafe { d.free_command_buffers(gpu.pool, &[cb]) };
        let stride = 8 * self.chosen.len();
        let (r, bytes) = gpu.results(self.pool, 0, 1, stride, vk::QueryResultFlags::WAIT)?;
        report.holds(
            "performance query passes submitted",
            ">= 1 and <= 4",
            format!("{} ({r:?})", self.passes),
            r == vk::Result::SUCCESS && (1..=MAX_PASSES).contains(&self.passes),
            "vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR",
        );
        if let Some(buf) = &self.copy {
            self.copy_results(gpu, buf, r, &bytes, report)?;
        }
        for (c, raw) in self.chosen.iter().zip(bytes.chunks_exact(8)) {
            let raw: [u8; 8] = raw.try_into().expect("8-byte chunk");
            let v = decode(c.storage, raw);
            if let (Some((rule, why)), Some(x)) = (known_answer(&c.name), v) {
                report.value(
                    &format!("performance counter: {}", c.name),
                    x as u64,
                    rule,
                    why,
                );
                continue;
            }
            let ok = v.is_some_and(f64::is_finite);
            report.holds(
                &format!("performance counter: {} ({:?})", c.name, c.unit),
                &format!("finite {:?}", c.storage),
                v.map(|x| format!("{x}"))
                    .unwrap_or_else(|| "undecodable".into()),
                ok,
                "spec: counter values are implementation-defined",
            );
        }
        Ok(())
    }

    /// After every pass was submitted: vkCmdCopyQueryPoolResults (WAIT) into
    /// a host-visible buffer, in a command buffer of its own, must give the
    /// bytes `got` of vkGetQueryPoolResults.
    fn copy_results(
        &self,
        gpu: &Gpu,
        buf: &Buffer,
        get: vk::Result,
        got: &[u8],
        report: &mut Report,
    ) -> Result<()> {
        buf.zero();
        let stride = 8 * self.chosen.len() as u64;
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_copy_query_pool_results(
                cb,
                self.pool,
                0,
                1,
                buf.buffer,
                0,
                stride,
                vk::QueryResultFlags::WAIT,
            );
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
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        let copied = buf.bytes();
        let same = get == vk::Result::SUCCESS && copied == got;
        let hex = |b: &[u8]| {
            b.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk")).to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        report.holds_exact(
            "performance query copy",
            "vkCmdCopyQueryPoolResults bytes == vkGetQueryPoolResults bytes",
            if same {
                format!("equal ({} counters)", self.chosen.len())
            } else {
                format!("copy [{}] get [{}] ({get:?})", hex(&copied), hex(got))
            },
            same,
            "spec: both retrieve the same results once every pass was submitted",
        );
        Ok(())
    }

    pub fn destroy(&self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_query_pool(self.pool, None) };
        if let Some(b) = &self.copy {
            b.destroy(&gpu.device);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(name: &str, uuid: u8) -> CounterInfo {
        CounterInfo {
            name: name.into(),
            uuid: [uuid; 16],
            storage: vk::PerformanceCounterStorageKHR::UINT64,
            unit: vk::PerformanceCounterUnitKHR::GENERIC,
            scope: vk::PerformanceCounterScopeKHR::COMMAND,
        }
    }

    #[test]
    fn selection_dedups_caps_and_respects_passes() {
        let list: Vec<CounterInfo> = (0..12)
            .map(|i| counter(&format!("c{i}"), i as u8))
            .collect();
        // One pass per counter beyond the second: only 2 + 4 = 6 fit... no:
        // passes(n) = n - 2, so at most 6 counters give <= 4 passes.
        let got = select_counters(&list, |s| (s.len() as u32).saturating_sub(2));
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
        let mut dup = list.clone();
        dup[1].uuid = dup[0].uuid;
        let got = select_counters(&dup, |_| 1);
        assert_eq!(got, vec![0, 2, 3, 4, 5, 6, 7, 8]);
        // Never empties the set even if every set needs many passes.
        assert_eq!(select_counters(&list, |_| 99), vec![0]);
        assert!(select_counters(&[], |_| 1).is_empty());
    }

    #[test]
    fn decode_by_storage() {
        use vk::PerformanceCounterStorageKHR as S;
        assert_eq!(
            decode(S::INT32, (-5i32 as u32 as u64).to_le_bytes()),
            Some(-5.0)
        );
        assert_eq!(decode(S::UINT64, 7u64.to_le_bytes()), Some(7.0));
        assert_eq!(decode(S::FLOAT64, 2.5f64.to_le_bytes()), Some(2.5));
        let mut f = [0u8; 8];
        f[..4].copy_from_slice(&1.5f32.to_le_bytes());
        assert_eq!(decode(S::FLOAT32, f), Some(1.5));
        assert_eq!(decode(S::from_raw(99), [0; 8]), None);
    }
}
