//! The way Zink, wgpu and DXVK read queries: no fences and no vkGetQueryPoolResults. Each round
//! makes two submissions that signal a timeline semaphore (vkQueueSubmit with
//! VkTimelineSemaphoreSubmitInfo, then vkQueueSubmit2 with VkSemaphoreSubmitInfo); the host waits
//! for the first with vkWaitSemaphores and polls vkGetSemaphoreCounterValue for the second, then
//! reads results that vkCmdCopyQueryPoolResults wrote
//!
//! * into one persistently mapped host-visible allocation at several offsets, the same offsets
//!   every round (sub-allocated, as Zink does), and
//! * into device-local memory, moved by vkCmdCopyBuffer into a host-visible staging buffer.
//!
//! A demo frame runs [`ROUNDS`] rounds back to back, with no fence or idle wait between them, so
//! the later round's copies overwrite the earlier one's before anything but a semaphore wait has
//! proved the earlier done (a tool that reads copies only at fences sees the wrong round). Every
//! round draws a different, known number of pixels and primitives, so a value left over from
//! another round (a copy read before it landed, or restored from elsewhere) is a mismatch.

use crate::gpu::{range, u32s, u64s, Buffer, Gpu, Image};
use crate::report::{ts_delta, ts_mask, Report, Rule};
use crate::scene::{self, Scene, H, W};
use anyhow::{bail, Context as _, Result};
use ash::vk;
use std::time::{Duration, Instant};

/// Occlusion queries: 0..4 in the first submission, 4 and 5 in the second.
const OCC_QUERIES: u32 = 6;
/// Host-visible copy buffer layout (bytes).
const AT_OCC: u64 = 0; // queries 0..4, stride 16: u64 value, u64 availability
const AT_TS: u64 = 64; // timestamps 0..2, stride 16: u64 value, u64 availability
const AT_STATS: u64 = 96; // 3 statistics + availability, u64 each
const AT_OCC2: u64 = 128; // query 4, 32-bit: u32 value, u32 availability
const COPIES_SIZE: u64 = 256;
/// Device-local buffer: query 5 as u64 value + u64 availability at 0, as u32 + u32 at 16.
const DL_SIZE: u64 = 24;
const WAIT_NS: u64 = 20_000_000_000;

/// Pipeline statistics with a known answer for the plain quad pipeline, in result order.
const STATS: [(vk::QueryPipelineStatisticFlags, &str, u64); 3] = [
    (
        vk::QueryPipelineStatisticFlags::INPUT_ASSEMBLY_VERTICES,
        "input assembly vertices",
        6,
    ),
    (
        vk::QueryPipelineStatisticFlags::INPUT_ASSEMBLY_PRIMITIVES,
        "input assembly primitives",
        2,
    ),
    (
        vk::QueryPipelineStatisticFlags::CLIPPING_INVOCATIONS,
        "clipping invocations",
        2,
    ),
];

/// Rounds per demo frame.
pub const ROUNDS: u64 = 2;

/// Rows of pixels (all 64 columns) that occlusion query `k` covers in round `i`: 1..=64, distinct
/// for the six queries of a round (offsets 13k mod 64) and different from the previous round's.
fn rows(i: u64, k: u32) -> u64 {
    1 + (i + shift(k)) % 64
}

fn shift(k: u32) -> u64 {
    13 * u64::from(k) % 64
}

/// A wrapped timestamp difference as the table shows it.
fn ticks(d: Option<u64>) -> String {
    d.map_or_else(|| "negative".to_string(), |d| format!("+{d} ticks"))
}

/// Quads drawn inside the statistics query in round `i`.
fn stat_quads(i: u64) -> u64 {
    1 + i % 4
}

/// Quad `r - 1` covers pixel rows 0..r over the full width at depth 0.5: its edges lie on pixel
/// boundaries, so exactly 64 * r pixel centres are inside.
fn vertices() -> Vec<[f32; 4]> {
    let mut v = Vec::with_capacity(64 * 6);
    for r in 1..=H {
        let y1 = -1.0 + 2.0 * r as f32 / H as f32;
        let (x0, x1, y0, z) = (-1.0, 1.0, -1.0, 0.5);
        v.extend([
            [x0, y0, z, 1.0],
            [x1, y0, z, 1.0],
            [x1, y1, z, 1.0],
            [x0, y0, z, 1.0],
            [x1, y1, z, 1.0],
            [x0, y1, z, 1.0],
        ]);
    }
    v
}

pub struct Timeline {
    semaphore: vk::Semaphore,
    /// The value the last submission signalled.
    value: u64,
    round: u64,
    /// The second timestamp of the previous round, masked.
    last_ts: Option<u64>,
    occ: vk::QueryPool,
    ts: Option<vk::QueryPool>,
    stats: Option<vk::QueryPool>,
    precise: bool,
    ts_bits: u32,
    color: Image,
    depth: Image,
    vbuf: Buffer,
    copies: Buffer,
    staging: Buffer,
    dl: (vk::Buffer, vk::DeviceMemory),
    cbs: [vk::CommandBuffer; 2],
}

impl Timeline {
    pub fn new(gpu: &Gpu, report: &mut Report) -> Result<Self> {
        let d = &gpu.device;
        let s = &gpu.support;
        let mut type_info = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let semaphore = unsafe {
            d.create_semaphore(
                &vk::SemaphoreCreateInfo::default().push_next(&mut type_info),
                None,
            )
        }
        .context("vkCreateSemaphore (timeline)")?;
        gpu.name_object(semaphore, "timeline");
        let occ = gpu.query_pool(
            vk::QueryType::OCCLUSION,
            OCC_QUERIES,
            Default::default(),
            "timeline occlusion",
        )?;
        let ts_bits = gpu.families[gpu.family as usize].timestamp_valid_bits;
        let ts = if ts_bits > 0 {
            Some(gpu.query_pool(
                vk::QueryType::TIMESTAMP,
                2,
                Default::default(),
                "timeline timestamps",
            )?)
        } else {
            report.skip(
                "timeline: timestamps via copy",
                "timestampValidBits > 0 on the graphics queue family",
            );
            None
        };
        let stats = if s.pipeline_statistics {
            let flags = STATS
                .iter()
                .fold(vk::QueryPipelineStatisticFlags::empty(), |a, (f, _, _)| {
                    a | *f
                });
            Some(gpu.query_pool(
                vk::QueryType::PIPELINE_STATISTICS,
                1,
                flags,
                "timeline pipeline statistics",
            )?)
        } else {
            report.skip(
                "timeline: pipeline statistics via copy",
                "VkPhysicalDeviceFeatures::pipelineStatisticsQuery",
            );
            None
        };
        if !s.occlusion_precise {
            report.skip(
                "timeline: exact occlusion counts via copy",
                "VkPhysicalDeviceFeatures::occlusionQueryPrecise",
            );
        }
        let extent = vk::Extent2D {
            width: W,
            height: H,
        };
        let color = gpu.image(
            scene::COLOR,
            vk::ImageUsageFlags::COLOR_ATTACHMENT,
            vk::ImageAspectFlags::COLOR,
            extent,
            1,
            "timeline color",
        )?;
        let depth = gpu.image(
            scene::DEPTH,
            vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
            vk::ImageAspectFlags::DEPTH,
            extent,
            1,
            "timeline depth",
        )?;
        let verts = vertices();
        let vbuf = gpu.buffer(
            std::mem::size_of_val(verts.as_slice()) as u64,
            vk::BufferUsageFlags::VERTEX_BUFFER,
            "timeline vertices",
        )?;
        vbuf.write(&verts);
        let copies = gpu.buffer(
            COPIES_SIZE,
            vk::BufferUsageFlags::TRANSFER_DST,
            "timeline query copies",
        )?;
        let staging = gpu.buffer(
            DL_SIZE,
            vk::BufferUsageFlags::TRANSFER_DST,
            "timeline staging",
        )?;
        let dl = device_local_buffer(
            gpu,
            DL_SIZE,
            vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::TRANSFER_SRC,
            "timeline device-local copy",
        )?;
        // Allocated once and re-recorded every round: only a semaphore wait proves them idle.
        let cbs = [
            gpu.command_buffer(gpu.pool, vk::CommandBufferLevel::PRIMARY)?,
            gpu.command_buffer(gpu.pool, vk::CommandBufferLevel::PRIMARY)?,
        ];
        Ok(Timeline {
            semaphore,
            value: 0,
            round: 0,
            last_ts: None,
            occ,
            ts,
            stats,
            precise: s.occlusion_precise,
            ts_bits,
            color,
            depth,
            vbuf,
            copies,
            staging,
            dl,
            cbs,
        })
    }

    /// The rounds of one demo frame.
    pub fn frame(&mut self, gpu: &Gpu, scene: &Scene, report: &mut Report) -> Result<()> {
        for _ in 0..ROUNDS {
            self.round(gpu, scene, report)?;
        }
        Ok(())
    }

    /// Both submissions of one round, each read back after its own host wait.
    fn round(&mut self, gpu: &Gpu, scene: &Scene, report: &mut Report) -> Result<()> {
        let i = self.round;
        let base = self.value;
        self.record_first(gpu, scene, i)?;
        self.submit_first(gpu, base)?;
        self.host_wait(gpu, base + 1)?;
        self.check_first(i, report);

        self.record_second(gpu, scene, i)?;
        self.submit_second(gpu, base + 1)?;
        let reached = self.poll(gpu, base + 2)?;
        self.check_second(i, report);
        report.holds_exact(
            "timeline: semaphore value polled after the round",
            "2*(i+1)",
            reached.to_string(),
            reached == 2 * (i + 1),
            "two signals per round; vkGetSemaphoreCounterValue polled until it reached the second",
        );
        self.value = base + 2;
        self.round += 1;
        Ok(())
    }

    fn begin(&self, gpu: &Gpu, cb: vk::CommandBuffer) -> Result<()> {
        unsafe {
            gpu.device.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
        }
        .context("vkBeginCommandBuffer (timeline)")
    }

    /// Transitions the attachments from UNDEFINED (their contents are cleared anyway), begins
    /// rendering and binds the scene's quad pipeline with this module's vertices.
    fn begin_pass(&self, d: &ash::Device, cb: vk::CommandBuffer, scene: &Scene) {
        let barriers = [&self.color, &self.depth].map(|img| {
            let is_color = img.aspect == vk::ImageAspectFlags::COLOR;
            vk::ImageMemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::NONE)
                .dst_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
                .dst_access_mask(vk::AccessFlags2::MEMORY_READ | vk::AccessFlags2::MEMORY_WRITE)
                .old_layout(vk::ImageLayout::UNDEFINED)
                .new_layout(if is_color {
                    vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL
                } else {
                    vk::ImageLayout::DEPTH_STENCIL_ATTACHMENT_OPTIMAL
                })
                .image(img.image)
                .subresource_range(range(img.aspect, img.layers))
        });
        unsafe {
            d.cmd_pipeline_barrier2(
                cb,
                &vk::DependencyInfo::default().image_memory_barriers(&barriers),
            );
        }
        scene::begin_rendering(
            d,
            cb,
            &self.color,
            &self.depth,
            true,
            0,
            vk::RenderingFlags::empty(),
        );
        scene.draw_setup(d, cb, scene.quad);
        unsafe { d.cmd_bind_vertex_buffers(cb, 0, &[self.vbuf.buffer], &[0]) };
    }

    fn occlusion_draw(&self, d: &ash::Device, cb: vk::CommandBuffer, i: u64, k: u32) {
        let flags = if self.precise {
            vk::QueryControlFlags::PRECISE
        } else {
            vk::QueryControlFlags::empty()
        };
        unsafe {
            d.cmd_begin_query(cb, self.occ, k, flags);
            d.cmd_draw(cb, 6, 1, (rows(i, k) as u32 - 1) * 6, 0);
            d.cmd_end_query(cb, self.occ, k);
        }
    }

    /// Occlusion 0..4, a timestamp pair and the statistics query, copied into the mapped buffer.
    fn record_first(&self, gpu: &Gpu, scene: &Scene, i: u64) -> Result<()> {
        let d = &gpu.device;
        let cb = self.cbs[0];
        let wait64 = vk::QueryResultFlags::TYPE_64
            | vk::QueryResultFlags::WAIT
            | vk::QueryResultFlags::WITH_AVAILABILITY;
        self.begin(gpu, cb)?;
        unsafe {
            d.cmd_reset_query_pool(cb, self.occ, 0, 4);
            if let Some(ts) = self.ts {
                d.cmd_reset_query_pool(cb, ts, 0, 2);
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, ts, 0);
            }
            if let Some(p) = self.stats {
                d.cmd_reset_query_pool(cb, p, 0, 1);
            }
            self.begin_pass(d, cb, scene);
            for k in 0..4 {
                self.occlusion_draw(d, cb, i, k);
            }
            if let Some(p) = self.stats {
                d.cmd_begin_query(cb, p, 0, vk::QueryControlFlags::empty());
                for _ in 0..stat_quads(i) {
                    d.cmd_draw(cb, 6, 1, 0, 0);
                }
                d.cmd_end_query(cb, p, 0);
            }
            d.cmd_end_rendering(cb);
            if let Some(ts) = self.ts {
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, ts, 1);
            }
            let dst = self.copies.buffer;
            d.cmd_copy_query_pool_results(cb, self.occ, 0, 4, dst, AT_OCC, 16, wait64);
            if let Some(ts) = self.ts {
                d.cmd_copy_query_pool_results(cb, ts, 0, 2, dst, AT_TS, 16, wait64);
            }
            if let Some(p) = self.stats {
                let stride = 8 * (STATS.len() as u64 + 1);
                d.cmd_copy_query_pool_results(cb, p, 0, 1, dst, AT_STATS, stride, wait64);
            }
            scene::host_barrier(d, cb);
            d.end_command_buffer(cb).context("vkEndCommandBuffer")?;
        }
        Ok(())
    }

    /// Occlusion 4 copied 32-bit into the mapped buffer; occlusion 5 copied into device-local
    /// memory and from there by vkCmdCopyBuffer into the staging buffer.
    fn record_second(&self, gpu: &Gpu, scene: &Scene, i: u64) -> Result<()> {
        let d = &gpu.device;
        let cb = self.cbs[1];
        let wait = vk::QueryResultFlags::WAIT | vk::QueryResultFlags::WITH_AVAILABILITY;
        self.begin(gpu, cb)?;
        unsafe {
            d.cmd_reset_query_pool(cb, self.occ, 4, 2);
            self.begin_pass(d, cb, scene);
            self.occlusion_draw(d, cb, i, 4);
            self.occlusion_draw(d, cb, i, 5);
            d.cmd_end_rendering(cb);
            d.cmd_copy_query_pool_results(cb, self.occ, 4, 1, self.copies.buffer, AT_OCC2, 8, wait);
            let dl = self.dl.0;
            let wait64 = wait | vk::QueryResultFlags::TYPE_64;
            d.cmd_copy_query_pool_results(cb, self.occ, 5, 1, dl, 0, 16, wait64);
            d.cmd_copy_query_pool_results(cb, self.occ, 5, 1, dl, 16, 8, wait);
            let mb = [vk::MemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::COPY)
                .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::COPY)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)];
            d.cmd_pipeline_barrier2(cb, &vk::DependencyInfo::default().memory_barriers(&mb));
            let region = [vk::BufferCopy {
                src_offset: 0,
                dst_offset: 0,
                size: DL_SIZE,
            }];
            d.cmd_copy_buffer(cb, dl, self.staging.buffer, &region);
            scene::host_barrier(d, cb);
            d.end_command_buffer(cb).context("vkEndCommandBuffer")?;
        }
        Ok(())
    }

    /// vkQueueSubmit with VkTimelineSemaphoreSubmitInfo: waits for `base` (the previous round's
    /// last signal), signals `base + 1`.
    fn submit_first(&self, gpu: &Gpu, base: u64) -> Result<()> {
        let sems = [self.semaphore];
        let wait_values = [base];
        let signal_values = [base + 1];
        let stages = [vk::PipelineStageFlags::ALL_COMMANDS];
        let cbs = [self.cbs[0]];
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_values)
            .signal_semaphore_values(&signal_values);
        let submit = vk::SubmitInfo::default()
            .wait_semaphores(&sems)
            .wait_dst_stage_mask(&stages)
            .command_buffers(&cbs)
            .signal_semaphores(&sems)
            .push_next(&mut timeline);
        unsafe {
            gpu.device
                .queue_submit(gpu.queue, &[submit], vk::Fence::null())
        }
        .context("vkQueueSubmit (timeline signal)")
    }

    /// vkQueueSubmit2 with VkSemaphoreSubmitInfo: waits for `first`, signals `first + 1`.
    fn submit_second(&self, gpu: &Gpu, first: u64) -> Result<()> {
        let wait = [vk::SemaphoreSubmitInfo::default()
            .semaphore(self.semaphore)
            .value(first)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
        let signal = [vk::SemaphoreSubmitInfo::default()
            .semaphore(self.semaphore)
            .value(first + 1)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
        let cbs = [vk::CommandBufferSubmitInfo::default().command_buffer(self.cbs[1])];
        let submit = vk::SubmitInfo2::default()
            .wait_semaphore_infos(&wait)
            .command_buffer_infos(&cbs)
            .signal_semaphore_infos(&signal);
        unsafe {
            gpu.device
                .queue_submit2(gpu.queue, &[submit], vk::Fence::null())
        }
        .context("vkQueueSubmit2 (timeline signal)")
    }

    fn host_wait(&self, gpu: &Gpu, value: u64) -> Result<()> {
        let sems = [self.semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&values);
        unsafe { gpu.device.wait_semaphores(&info, WAIT_NS) }
            .with_context(|| format!("vkWaitSemaphores (timeline value {value}, 20 s)"))
    }

    /// Polls vkGetSemaphoreCounterValue until it reaches `value`; returns the value seen.
    fn poll(&self, gpu: &Gpu, value: u64) -> Result<u64> {
        let start = Instant::now();
        loop {
            let now = unsafe { gpu.device.get_semaphore_counter_value(self.semaphore) }
                .context("vkGetSemaphoreCounterValue")?;
            if now >= value {
                return Ok(now);
            }
            if start.elapsed() > Duration::from_nanos(WAIT_NS) {
                bail!("timeline semaphore stayed at {now}, below {value}, for 20 s");
            }
            // A pause between polls, as an engine doing other work would make (and a trace
            // that records every poll stays small).
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// An occlusion count read from a copy: exact per round where PRECISE is supported.
    fn occlusion(&self, report: &mut Report, name: &str, i: u64, k: u32, got: u64) {
        if self.precise {
            let want = 64 * rows(i, k);
            report.holds_exact(
                name,
                &format!("64*(1+(i+{})%64)", shift(k)),
                got.to_string(),
                got == want,
                "round i (0-based, 2 per frame) draws that many full rows of 64 pixels, 1 sample each",
            );
        } else {
            report.value(
                name,
                got,
                Rule::NonZero,
                "spec: without PRECISE any non-zero value when samples pass",
            );
        }
    }

    fn check_first(&mut self, i: u64, report: &mut Report) {
        let bytes = self.copies.bytes();
        let at = |off: u64, len: usize| u64s(&bytes[off as usize..off as usize + len]);
        let occ = at(AT_OCC, 64);
        for k in 0..4u32 {
            let name = format!(
                "timeline: occlusion q{k} copied @{} (submit, wait)",
                AT_OCC + 16 * u64::from(k)
            );
            self.occlusion(report, &name, i, k, occ[2 * k as usize]);
        }
        let mut avail: Vec<u64> = occ.chunks(2).map(|p| p[1]).collect();
        if self.ts.is_some() {
            let ts = at(AT_TS, 32);
            avail.extend([ts[1], ts[3]]);
            let mask = ts_mask(self.ts_bits);
            let (t0, t1) = (ts[0] & mask, ts[2] & mask);
            let d = ts_delta(t0, t1, self.ts_bits);
            report.holds(
                "timeline: timestamp pair copied @64 ordered (masked)",
                "bottom - top > 0",
                ticks(d),
                d.is_some_and(|d| d > 0),
                "draws of thousands of pixels lie between the two writes",
            );
            if let Some(prev) = self.last_ts {
                let d = ts_delta(prev, t0, self.ts_bits);
                report.holds(
                    "timeline: timestamp pair after the previous round's",
                    "top(i) - bottom(i-1) > 0",
                    ticks(d),
                    d.is_some_and(|d| d > 0),
                    "the host waited for the previous round before submitting this one",
                );
            }
            self.last_ts = Some(t1);
        }
        if self.stats.is_some() {
            let n = STATS.len();
            let v = at(AT_STATS, 8 * (n + 1));
            avail.push(v[n]);
            for (j, (_, name, per_quad)) in STATS.iter().enumerate() {
                report.holds_exact(
                    &format!("timeline: statistics {name} copied @{AT_STATS}"),
                    &format!("{per_quad}*(1+i%4)"),
                    v[j].to_string(),
                    v[j] == per_quad * stat_quads(i),
                    "round i draws 1+i%4 non-indexed quads of 6 vertices, 2 triangles",
                );
            }
        }
        report.holds_exact(
            "timeline: availability words of the first submit's copies",
            "all != 0",
            format!("{avail:?}"),
            avail.iter().all(|&a| a != 0),
            "copied with WAIT|WITH_AVAILABILITY after the queries ended",
        );
    }

    fn check_second(&self, i: u64, report: &mut Report) {
        let host = u32s(&self.copies.bytes()[AT_OCC2 as usize..AT_OCC2 as usize + 8]);
        self.occlusion(
            report,
            &format!("timeline: occlusion q4 copied 32-bit @{AT_OCC2} (submit2, poll)"),
            i,
            4,
            u64::from(host[0]),
        );
        let staged = self.staging.bytes();
        let v64 = u64s(&staged[..16]);
        let v32 = u32s(&staged[16..24]);
        self.occlusion(
            report,
            "timeline: occlusion q5 via device-local + vkCmdCopyBuffer, 64-bit",
            i,
            5,
            v64[0],
        );
        self.occlusion(
            report,
            "timeline: occlusion q5 via device-local + vkCmdCopyBuffer, 32-bit",
            i,
            5,
            u64::from(v32[0]),
        );
        let avail = [u64::from(host[1]), v64[1], u64::from(v32[1])];
        report.holds_exact(
            "timeline: availability words of the second submit's copies",
            "all != 0",
            format!("{avail:?}"),
            avail.iter().all(|&a| a != 0),
            "copied with WAIT|WITH_AVAILABILITY after the queries ended",
        );
    }

    pub fn destroy(&self, gpu: &Gpu) {
        let d = &gpu.device;
        unsafe {
            // As wgpu and Zink do before freeing: the only idle wait of this path (the rounds
            // themselves rely on semaphore waits alone).
            let _ = d.device_wait_idle();
            d.free_command_buffers(gpu.pool, &self.cbs);
            d.destroy_semaphore(self.semaphore, None);
            d.destroy_query_pool(self.occ, None);
            for p in self.ts.iter().chain(self.stats.iter()) {
                d.destroy_query_pool(*p, None);
            }
            d.destroy_buffer(self.dl.0, None);
            d.free_memory(self.dl.1, None);
        }
        for b in [&self.vbuf, &self.copies, &self.staging] {
            b.destroy(d);
        }
        self.color.destroy(d);
        self.depth.destroy(d);
    }
}

/// A buffer in device-local memory that the host never maps; a memory type that is not host
/// visible is preferred, so that the read-back must go through a copy on discrete GPUs.
fn device_local_buffer(
    gpu: &Gpu,
    size: u64,
    usage: vk::BufferUsageFlags,
    name: &str,
) -> Result<(vk::Buffer, vk::DeviceMemory)> {
    let d = &gpu.device;
    let buffer = unsafe {
        d.create_buffer(
            &vk::BufferCreateInfo::default().size(size).usage(usage),
            None,
        )
    }
    .with_context(|| format!("vkCreateBuffer ({name})"))?;
    gpu.name_object(buffer, name);
    let req = unsafe { d.get_buffer_memory_requirements(buffer) };
    let types = &gpu.mem_props.memory_types[..gpu.mem_props.memory_type_count as usize];
    let allowed = |i: usize| req.memory_type_bits & (1 << i) != 0;
    let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    let ty = (0..types.len())
        .find(|&i| {
            allowed(i)
                && types[i].property_flags.contains(local)
                && !types[i]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
        })
        .or_else(|| {
            (0..types.len()).find(|&i| allowed(i) && types[i].property_flags.contains(local))
        })
        .or_else(|| (0..types.len()).find(|&i| allowed(i)))
        .with_context(|| format!("no memory type for {name}"))?;
    let memory = unsafe {
        d.allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty as u32),
            None,
        )
    }
    .with_context(|| format!("vkAllocateMemory ({name})"))?;
    unsafe { d.bind_buffer_memory(buffer, memory, 0) }.context("vkBindBufferMemory")?;
    Ok((buffer, memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_differ_between_rounds_and_queries() {
        for i in 0..200 {
            let now: Vec<u64> = (0..OCC_QUERIES).map(|k| rows(i, k)).collect();
            let mut sorted = now.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), now.len(), "round {i}: {now:?}");
            assert!(now.iter().all(|r| (1..=64).contains(r)));
            for k in 0..OCC_QUERIES {
                assert_ne!(rows(i, k), rows(i + 1, k));
            }
            assert_ne!(stat_quads(i), stat_quads(i + 1));
        }
    }

    #[test]
    fn quads_cover_whole_rows() {
        let v = vertices();
        assert_eq!(v.len(), 64 * 6);
        // Quad r - 1 spans NDC y -1 .. -1 + 2r/64: rows 0..r.
        assert_eq!(v[6 * 3 + 2][1], -1.0 + 2.0 * 4.0 / 64.0);
        assert_eq!(v[6 * 63 + 2][1], 1.0);
    }
}
