//! The workload. Geometry is chosen so that query answers follow from
//! arithmetic on pixel centres:
//!
//! * framebuffer 64x64, one sample per pixel, depth cleared to 1.0;
//! * occluder: x in [-1, 0], full height, depth 0.25 (pixels x 0..32);
//! * target: [-0.5, 0.5]^2 at depth 0.5 (pixels 16..48 both ways, 1024 px),
//!   of which the right half (512 px) lies outside the occluder;
//! * hidden: x in [-0.9, -0.1] at depth 0.75, entirely behind the occluder.

use crate::gpu::{range, u32s, u64s, Buffer, Gpu, Image};
use crate::report::{ts_delta, ts_mask, Report, Rule};
use anyhow::{bail, Context as _, Result};
use ash::vk;
use std::time::{Duration, Instant};

mod cases;
mod setup;

pub const W: u32 = 64;
pub const H: u32 = 64;
pub const COLOR: vk::Format = vk::Format::R8G8B8A8_UNORM;
// D16_UNORM is the one depth format every implementation must support as an
// attachment, and 0.25 / 0.5 / 0.75 are exact in it.
pub const DEPTH: vk::Format = vk::Format::D16_UNORM;

pub const TARGET_PX: u64 = 32 * 32;
pub const VISIBLE_PX: u64 = 16 * 32;
pub const OCCLUDER_PX: u64 = 32 * 64;

const V_OCCLUDER: u32 = 0;
const V_TARGET: u32 = 6;
const V_HIDDEN: u32 = 12;
const V_POINTS: u32 = 18;
const N_POINTS: u32 = 6;

/// Compute dispatch of the statistics test: 3x2x1 groups of 8x4x1.
const DISPATCH: [u32; 3] = [3, 2, 1];
const CS_INVOCATIONS: u64 = 3 * 2 * 8 * 4;

mod spv {
    pub const QUAD_VERT: &[u8] = include_bytes!("../shaders/quad.vert.spv");
    pub const COLOR_FRAG: &[u8] = include_bytes!("../shaders/color.frag.spv");
    pub const STATS_TESC: &[u8] = include_bytes!("../shaders/stats.tesc.spv");
    pub const STATS_TESE: &[u8] = include_bytes!("../shaders/stats.tese.spv");
    pub const STATS_GEOM: &[u8] = include_bytes!("../shaders/stats.geom.spv");
    pub const COUNT_COMP: &[u8] = include_bytes!("../shaders/count.comp.spv");
    pub const XFB_STREAMS_GEOM: &[u8] = include_bytes!("../shaders/xfb_streams.geom.spv");
    pub const XFB_SINGLE_VERT: &[u8] = include_bytes!("../shaders/xfb_single.vert.spv");
    pub const QUAD_TASK: &[u8] = include_bytes!("../shaders/quad.task.spv");
    pub const QUAD_MESH: &[u8] = include_bytes!("../shaders/quad.mesh.spv");
}

fn quad(x0: f32, x1: f32, y0: f32, y1: f32, z: f32) -> [[f32; 4]; 6] {
    [
        [x0, y0, z, 1.0],
        [x1, y0, z, 1.0],
        [x1, y1, z, 1.0],
        [x0, y0, z, 1.0],
        [x1, y1, z, 1.0],
        [x0, y1, z, 1.0],
    ]
}

fn vertices() -> Vec<[f32; 4]> {
    let mut v = Vec::new();
    v.extend(quad(-1.0, 0.0, -1.0, 1.0, 0.25));
    v.extend(quad(-0.5, 0.5, -0.5, 0.5, 0.5));
    v.extend(quad(-0.9, -0.1, -0.5, 0.5, 0.75));
    for i in 0..N_POINTS {
        v.push([-0.5 + 0.2 * i as f32, 0.25, 0.5, 1.0]);
    }
    v
}

#[derive(Default, Clone, Copy)]
struct PipeDesc {
    /// 0 means one sample.
    samples: u32,
    vertex_input: bool,
    topology: vk::PrimitiveTopology,
    depth: bool,
    discard: bool,
    patch_points: u32,
    view_mask: u32,
}

/// Transform-feedback set-up: how many streams and the buffer capacity (in
/// points) of each, chosen so that stream 1 overflows.
struct Xfb {
    pipeline: vk::Pipeline,
    streams: u32,
    capacity: Vec<u64>,
    per_point: Vec<u64>,
    buffers: Vec<Buffer>,
    xfb_pool: Option<vk::QueryPool>,
    pg_pool: Option<vk::QueryPool>,
}

pub struct Scene {
    color: Image,
    depth: Image,
    mv: Option<(Image, Image, vk::Pipeline, vk::QueryPool)>,
    /// 4x multisampled colour, depth, pipeline and a 2-query occlusion pool.
    msaa: Option<(Image, Image, vk::Pipeline, vk::QueryPool)>,
    layout: vk::PipelineLayout,
    pub(crate) quad: vk::Pipeline,
    quad_discard: Option<vk::Pipeline>,
    stats_pipe: Option<vk::Pipeline>,
    mesh_pipe: Option<vk::Pipeline>,
    compute: vk::Pipeline,
    compute_layout: vk::PipelineLayout,
    set_layout: vk::DescriptorSetLayout,
    desc_pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    counter: Buffer,
    vbuf: Buffer,
    copy: Buffer,
    occ: vk::QueryPool,
    poll: vk::QueryPool,
    ts: vk::QueryPool,
    stats: Option<vk::QueryPool>,
    pg: Option<vk::QueryPool>,
    inherit: Option<vk::QueryPool>,
    mesh_pools: Option<(vk::QueryPool, vk::QueryPool)>,
    second: Option<(vk::CommandPool, vk::QueryPool)>,
    /// Written by the second queue only, so no ownership transfer is needed.
    second_fill: Option<Buffer>,
    xfb: Option<Xfb>,
    modules: Vec<vk::ShaderModule>,
    pipelines: Vec<vk::Pipeline>,
}

const STATS_ALL: [(vk::QueryPipelineStatisticFlags, &str); 11] = [
    (
        vk::QueryPipelineStatisticFlags::INPUT_ASSEMBLY_VERTICES,
        "input assembly vertices",
    ),
    (
        vk::QueryPipelineStatisticFlags::INPUT_ASSEMBLY_PRIMITIVES,
        "input assembly primitives",
    ),
    (
        vk::QueryPipelineStatisticFlags::VERTEX_SHADER_INVOCATIONS,
        "vertex shader invocations",
    ),
    (
        vk::QueryPipelineStatisticFlags::GEOMETRY_SHADER_INVOCATIONS,
        "geometry shader invocations",
    ),
    (
        vk::QueryPipelineStatisticFlags::GEOMETRY_SHADER_PRIMITIVES,
        "geometry shader primitives",
    ),
    (
        vk::QueryPipelineStatisticFlags::CLIPPING_INVOCATIONS,
        "clipping invocations",
    ),
    (
        vk::QueryPipelineStatisticFlags::CLIPPING_PRIMITIVES,
        "clipping primitives",
    ),
    (
        vk::QueryPipelineStatisticFlags::FRAGMENT_SHADER_INVOCATIONS,
        "fragment shader invocations",
    ),
    (
        vk::QueryPipelineStatisticFlags::TESSELLATION_CONTROL_SHADER_PATCHES,
        "tessellation control patches",
    ),
    (
        vk::QueryPipelineStatisticFlags::TESSELLATION_EVALUATION_SHADER_INVOCATIONS,
        "tessellation evaluation invocations",
    ),
    (
        vk::QueryPipelineStatisticFlags::COMPUTE_SHADER_INVOCATIONS,
        "compute shader invocations",
    ),
];

fn all_stats() -> vk::QueryPipelineStatisticFlags {
    STATS_ALL
        .iter()
        .fold(vk::QueryPipelineStatisticFlags::empty(), |a, (f, _)| a | *f)
}

impl Scene {
    fn begin_rendering(
        &self,
        d: &ash::Device,
        cb: vk::CommandBuffer,
        clear: bool,
        flags: vk::RenderingFlags,
    ) {
        begin_rendering(d, cb, &self.color, &self.depth, clear, 0, flags);
    }

    pub(crate) fn draw_setup(
        &self,
        d: &ash::Device,
        cb: vk::CommandBuffer,
        pipeline: vk::Pipeline,
    ) {
        unsafe {
            d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::GRAPHICS, pipeline);
            d.cmd_bind_vertex_buffers(cb, 0, &[self.vbuf.buffer], &[0]);
            let c: [f32; 4] = [0.2, 0.6, 0.9, 1.0];
            d.cmd_push_constants(
                cb,
                self.layout,
                vk::ShaderStageFlags::FRAGMENT,
                0,
                as_bytes(&c),
            );
        }
    }

    /// The occlusion scene without queries, for callers that wrap it in
    /// their own query (performance counters).
    pub fn record_draws(&self, d: &ash::Device, cb: vk::CommandBuffer) {
        self.begin_rendering(d, cb, true, vk::RenderingFlags::empty());
        self.draw_setup(d, cb, self.quad);
        unsafe {
            d.cmd_draw(cb, 6, 1, V_OCCLUDER, 0);
            d.cmd_draw(cb, 6, 1, V_TARGET, 0);
            d.cmd_end_rendering(cb);
        }
    }

    /// Runs every test once; called once per frame.
    pub fn frame(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        self.main_pass(gpu, report)?;
        self.polling(gpu, report)?;
        self.resets(gpu, report)?;
        self.transform_feedback(gpu, report)?;
        self.inherited(gpu, report)?;
        self.multiview(gpu, report)?;
        self.msaa(gpu, report)?;
        self.mesh(gpu, report)?;
        self.multi_draw(gpu, report)?;
        self.second_queue(gpu, report)?;
        Ok(())
    }

    /// Occlusion, pipeline statistics, primitives generated and timestamps in
    /// one command buffer, read back in every retrieval flavour.
    fn main_pass(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let s = &gpu.support;
        let precise = if s.occlusion_precise {
            vk::QueryControlFlags::PRECISE
        } else {
            vk::QueryControlFlags::empty()
        };
        self.counter.zero();
        self.copy.zero();
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, self.occ, 0, 4);
            d.cmd_reset_query_pool(cb, self.ts, 0, 7);
            if let Some(p) = self.stats {
                d.cmd_reset_query_pool(cb, p, 0, 1);
            }
            if let Some(p) = self.pg {
                d.cmd_reset_query_pool(cb, p, 0, 2);
            }
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, self.ts, 0);
            self.begin_rendering(d, cb, true, vk::RenderingFlags::empty());
            self.draw_setup(d, cb, self.quad);
            d.cmd_draw(cb, 6, 1, V_OCCLUDER, 0);
            d.cmd_begin_query(cb, self.occ, 0, vk::QueryControlFlags::empty());
            d.cmd_draw(cb, 6, 1, V_TARGET, 0);
            d.cmd_end_query(cb, self.occ, 0);
            // Depth test is LESS_OR_EQUAL, so drawing the target again passes
            // on exactly the same samples.
            d.cmd_begin_query(cb, self.occ, 1, precise);
            d.cmd_draw(cb, 6, 1, V_TARGET, 0);
            d.cmd_end_query(cb, self.occ, 1);
            d.cmd_begin_query(cb, self.occ, 2, precise);
            d.cmd_draw(cb, 6, 1, V_HIDDEN, 0);
            d.cmd_end_query(cb, self.occ, 2);
            d.cmd_begin_query(cb, self.occ, 3, vk::QueryControlFlags::empty());
            d.cmd_draw(cb, 6, 1, V_HIDDEN, 0);
            d.cmd_end_query(cb, self.occ, 3);
            if let Some(p) = self.pg {
                d.cmd_begin_query(cb, p, 0, vk::QueryControlFlags::empty());
                d.cmd_draw(cb, 6, 1, V_TARGET, 0);
                d.cmd_end_query(cb, p, 0);
                if let Some(discard) = self.quad_discard {
                    self.draw_setup(d, cb, discard);
                    d.cmd_begin_query(cb, p, 1, vk::QueryControlFlags::empty());
                    d.cmd_draw(cb, 6, 1, V_TARGET, 0);
                    d.cmd_end_query(cb, p, 1);
                }
            }
            d.cmd_end_rendering(cb);
            d.cmd_write_timestamp2(cb, vk::PipelineStageFlags2::VERTEX_SHADER, self.ts, 1);
            d.cmd_write_timestamp2(cb, vk::PipelineStageFlags2::FRAGMENT_SHADER, self.ts, 2);
            d.cmd_write_timestamp2(
                cb,
                vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT,
                self.ts,
                3,
            );
            if let (Some(p), Some(pipe)) = (self.stats, self.stats_pipe) {
                attachment_barrier(d, cb);
                d.cmd_begin_query(cb, p, 0, vk::QueryControlFlags::empty());
                self.begin_rendering(d, cb, false, vk::RenderingFlags::empty());
                self.draw_setup(d, cb, pipe);
                d.cmd_draw(cb, 6, 1, V_TARGET, 0);
                d.cmd_end_rendering(cb);
                d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, self.compute);
                d.cmd_bind_descriptor_sets(
                    cb,
                    vk::PipelineBindPoint::COMPUTE,
                    self.compute_layout,
                    0,
                    &[self.set],
                    &[],
                );
                d.cmd_dispatch(cb, DISPATCH[0], DISPATCH[1], DISPATCH[2]);
                d.cmd_end_query(cb, p, 0);
            }
            d.cmd_write_timestamp2(cb, vk::PipelineStageFlags2::COMPUTE_SHADER, self.ts, 4);
            d.cmd_write_timestamp2(cb, vk::PipelineStageFlags2::ALL_COMMANDS, self.ts, 5);
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.ts, 6);
            d.cmd_copy_query_pool_results(
                cb,
                self.occ,
                0,
                4,
                self.copy.buffer,
                0,
                16,
                vk::QueryResultFlags::TYPE_64
                    | vk::QueryResultFlags::WAIT
                    | vk::QueryResultFlags::WITH_AVAILABILITY,
            );
            d.cmd_copy_query_pool_results(
                cb,
                self.occ,
                0,
                4,
                self.copy.buffer,
                64,
                8,
                vk::QueryResultFlags::WAIT | vk::QueryResultFlags::WITH_AVAILABILITY,
            );
            host_barrier(d, cb);
            Ok(())
        })?;

        let calib_before = calibrate(gpu)?;
        let host_start = Instant::now();
        gpu.submit_wait(cb)?;
        let host_elapsed = host_start.elapsed();
        let calib_after = calibrate(gpu)?;

        // Occlusion, 64-bit with WAIT.
        let occ = gpu.results64(self.occ, 0, 4, 1)?;
        report.value(
            "occlusion non-precise, half-hidden quad",
            occ[0],
            Rule::NonZero,
            "spec: without PRECISE any non-zero value when samples pass",
        );
        if s.occlusion_precise {
            report.value(
                "occlusion PRECISE, half-hidden quad",
                occ[1],
                Rule::Exact(VISIBLE_PX),
                "16x32 pixel centres pass the depth test, 1 sample each",
            );
            report.value(
                "occlusion PRECISE, fully hidden quad",
                occ[2],
                Rule::Exact(0),
                "no sample passes",
            );
        } else {
            report.skip(
                "occlusion PRECISE",
                "VkPhysicalDeviceFeatures::occlusionQueryPrecise",
            );
        }
        report.value(
            "occlusion non-precise, fully hidden quad",
            occ[3],
            Rule::Exact(0),
            "spec: zero passing samples give zero",
        );
        // 32-bit retrieval gives the same numbers.
        let (r, b32) = gpu.results(self.occ, 0, 4, 4, vk::QueryResultFlags::WAIT)?;
        let v32: Vec<u64> = u32s(&b32).into_iter().map(u64::from).collect();
        report.holds_exact(
            "occlusion 32-bit results == 64-bit",
            "equal, SUCCESS",
            format!("{v32:?} {r:?}"),
            r == vk::Result::SUCCESS && v32 == occ,
            "same queries read with and without TYPE_64",
        );
        // With availability, no WAIT, after the fence: all available.
        let (r, ba) = gpu.results(
            self.occ,
            0,
            4,
            16,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
        )?;
        let va = u64s(&ba);
        let avail_ok = r == vk::Result::SUCCESS
            && va.chunks(2).all(|p| p[1] != 0)
            && va.chunks(2).map(|p| p[0]).collect::<Vec<_>>() == occ;
        report.holds_exact(
            "occlusion WITH_AVAILABILITY after fence",
            "SUCCESS, all available, same values",
            format!("{r:?} {va:?}"),
            avail_ok,
            "queries completed before the fence signalled",
        );
        // vkCmdCopyQueryPoolResults wrote the same, with availability words.
        let bytes = self.copy.bytes();
        let copied = u64s(&bytes[..64]);
        let copied32 = u32s(&bytes[64..96]);
        let copy32_ok = copied32.chunks(2).all(|p| p[1] != 0)
            && copied32
                .chunks(2)
                .map(|p| u64::from(p[0]))
                .collect::<Vec<_>>()
                == occ;
        report.holds_exact(
            "occlusion vkCmdCopyQueryPoolResults 32-bit",
            "== vkGetQueryPoolResults, available",
            format!("{copied32:?}"),
            copy32_ok,
            "copied with WAIT|WITH_AVAILABILITY, 32-bit",
        );
        let copy_ok = copied.chunks(2).all(|p| p[1] != 0)
            && copied.chunks(2).map(|p| p[0]).collect::<Vec<_>>() == occ;
        report.holds_exact(
            "occlusion vkCmdCopyQueryPoolResults 64-bit",
            "== vkGetQueryPoolResults, available",
            format!("{copied:?}"),
            copy_ok,
            "copied with TYPE_64|WAIT|WITH_AVAILABILITY",
        );

        // Primitives generated.
        if let Some(p) = self.pg {
            let v = gpu.results64(p, 0, 2, 1)?;
            report.value(
                "primitives generated, quad",
                v[0],
                Rule::Exact(2),
                "two triangles drawn",
            );
            if self.quad_discard.is_some() {
                report.value(
                    "primitives generated, rasterizer discard",
                    v[1],
                    Rule::Exact(2),
                    "counted before rasterization, so discard does not change it",
                );
            } else {
                report.skip("primitives generated with rasterizer discard",
                    "VkPhysicalDevicePrimitivesGeneratedQueryFeaturesEXT::primitivesGeneratedQueryWithRasterizerDiscard");
            }
        } else {
            report.skip("primitives generated", "VK_EXT_primitives_generated_query");
        }

        // Pipeline statistics.
        if let Some(p) = self.stats {
            let v = gpu.results64(p, 0, 1, STATS_ALL.len())?;
            let tess = s.tessellation;
            let geom = s.geometry;
            for (i, (_, name)) in STATS_ALL.iter().enumerate() {
                let (rule, why) = match i {
                    0 => (Rule::Exact(6), "non-indexed draw of 6 vertices"),
                    1 => (Rule::Exact(2), if tess { "2 patches of 3 control points" } else { "2 triangles" }),
                    2 => (Rule::AtLeast(6), "spec: implementations may invoke extra times; each of 6 vertices at least once"),
                    3 => (Rule::Exact(if geom { 2 } else { 0 }), "one invocation per input triangle"),
                    4 => (Rule::Exact(if geom { 2 } else { 0 }), "geometry shader emits one triangle each"),
                    5 => (Rule::Exact(2), "spec: incremented for each primitive reaching the clipper"),
                    6 => (Rule::AtLeast(2), "spec: >= 1 output per primitive with a vertex inside the view volume"),
                    7 => (Rule::Range(TARGET_PX, (W * H) as u64), "spec: helper/extra invocations allowed; 1024 covered pixels, 4096 in the framebuffer"),
                    8 => (Rule::Exact(if tess { 2 } else { 0 }), "one per patch"),
                    9 => (if tess { Rule::AtLeast(6) } else { Rule::Exact(0) }, "tess levels 1: 3 domain vertices per patch, each at least once"),
                    _ => (Rule::Exact(CS_INVOCATIONS), "dispatch 3x2x1 of 8x4x1; an atomic per invocation forbids skipping"),
                };
                report.value(&format!("pipeline statistics: {name}"), v[i], rule, why);
            }
            let count = u32s(&self.counter.bytes())[0];
            report.value(
                "compute atomic counter (cross-check)",
                count as u64,
                Rule::Exact(CS_INVOCATIONS),
                "one atomicAdd per invocation",
            );
            if !tess {
                report.skip(
                    "tessellation statistics",
                    "VkPhysicalDeviceFeatures::tessellationShader",
                );
            }
            if !geom {
                report.skip(
                    "geometry statistics",
                    "VkPhysicalDeviceFeatures::geometryShader",
                );
            }
        }

        // Timestamps.
        let bits = gpu.families[gpu.family as usize].timestamp_valid_bits;
        if bits == 0 {
            report.skip(
                "timestamps",
                "timestampValidBits > 0 on the graphics queue family",
            );
            return Ok(());
        }
        let (r, bt) = gpu.results(
            self.ts,
            0,
            7,
            16,
            vk::QueryResultFlags::TYPE_64
                | vk::QueryResultFlags::WAIT
                | vk::QueryResultFlags::WITH_AVAILABILITY,
        )?;
        let raw = u64s(&bt);
        let mask = ts_mask(bits);
        let ts: Vec<u64> = raw.chunks(2).map(|p| p[0] & mask).collect();
        let all_avail = r == vk::Result::SUCCESS && raw.chunks(2).all(|p| p[1] != 0);
        report.holds_exact(
            "timestamps available (7: top, 5x Timestamp2, bottom)",
            "all available",
            format!("{r:?}"),
            all_avail,
            "WAIT|WITH_AVAILABILITY",
        );
        let first = ts[0];
        let last = ts[6];
        let ordered = ts
            .iter()
            .all(|&t| ts_delta(first, t, bits).is_some() && ts_delta(t, last, bits).is_some());
        report.holds(
            "timestamps ordered (masked to timestampValidBits)",
            "top <= each <= bottom",
            format!(
                "+{:?} ticks",
                ts.iter()
                    .map(|t| ts_delta(first, *t, bits).map(|d| d as i64).unwrap_or(-1))
                    .collect::<Vec<_>>()
            ),
            ordered,
            "each write happens after the earlier commands of the same submission started",
        );
        let period = gpu.props.limits.timestamp_period as f64;
        let gpu_ns = ts_delta(first, last, bits).unwrap_or(0) as f64 * period;
        let host_ns = host_elapsed.as_nanos() as f64;
        report.holds(
            "timestamp span * timestampPeriod <= host wall time",
            "gpu_ns <= host_ns",
            format!("{gpu_ns:.0} <= {host_ns:.0}"),
            gpu_ns <= host_ns * 1.001 + 1000.0,
            "the GPU work happened between submit and fence wait",
        );
        report.info(format!(
            "timestampValidBits {bits}, timestampPeriod {period} ns/tick"
        ));

        match (calib_before, calib_after) {
            (Some(c0), Some(c1)) => {
                let in_window = ts_delta(c0.device & mask, first, bits).is_some()
                    && ts_delta(last, c1.device & mask, bits).is_some();
                report.holds(
                    "calibrated: device clock brackets the submission",
                    "cal0 <= top <= bottom <= cal1",
                    format!(
                        "top-cal0 {:?}, cal1-bottom {:?}",
                        ts_delta(c0.device & mask, first, bits),
                        ts_delta(last, c1.device & mask, bits)
                    ),
                    in_window,
                    "vkGetCalibratedTimestampsEXT before submit and after the fence",
                );
                let dev_ns =
                    ts_delta(c0.device & mask, c1.device & mask, bits).unwrap_or(0) as f64 * period;
                let host_ns = c1.host.saturating_sub(c0.host) as f64;
                let tol = (c0.deviation + c1.deviation) as f64 + host_ns * 0.001 + 1000.0;
                report.holds(
                    "calibrated: device vs host clock elapsed",
                    "|dev - host| <= maxDeviation sum + 0.1%",
                    format!("dev {dev_ns:.0} ns, host {host_ns:.0} ns, tol {tol:.0}"),
                    (dev_ns - host_ns).abs() <= tol,
                    "both clocks measure the same interval",
                );
            }
            _ => {
                if !s.calibrated {
                    report.skip("calibrated timestamps", "VK_EXT_calibrated_timestamps");
                } else {
                    report.skip(
                        "calibrated timestamps",
                        "time domains DEVICE and CLOCK_MONOTONIC(_RAW)",
                    );
                }
            }
        }
        Ok(())
    }

    pub fn color_image(&self) -> vk::Image {
        self.color.image
    }
}

struct Calibration {
    device: u64,
    host: u64,
    deviation: u64,
}

/// One (device, host) clock pair, or None when the extension or the needed
/// time domains are missing.
fn calibrate(gpu: &Gpu) -> Result<Option<Calibration>> {
    let Some((inst, dev)) = &gpu.calib else {
        return Ok(None);
    };
    let domains = unsafe { inst.get_physical_device_calibrateable_time_domains(gpu.pdev) }
        .context("vkGetPhysicalDeviceCalibrateableTimeDomainsEXT")?;
    let host = [
        vk::TimeDomainEXT::CLOCK_MONOTONIC,
        vk::TimeDomainEXT::CLOCK_MONOTONIC_RAW,
    ]
    .into_iter()
    .find(|d| domains.contains(d));
    let (Some(host), true) = (host, domains.contains(&vk::TimeDomainEXT::DEVICE)) else {
        return Ok(None);
    };
    let infos = [
        vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::DEVICE),
        vk::CalibratedTimestampInfoEXT::default().time_domain(host),
    ];
    let (ts, deviation) =
        unsafe { dev.get_calibrated_timestamps(&infos) }.context("vkGetCalibratedTimestampsEXT")?;
    Ok(Some(Calibration {
        device: ts[0],
        host: ts[1],
        deviation,
    }))
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

pub(crate) fn begin_rendering(
    d: &ash::Device,
    cb: vk::CommandBuffer,
    color: &Image,
    depth: &Image,
    clear: bool,
    view_mask: u32,
    flags: vk::RenderingFlags,
) {
    let load = if clear {
        vk::AttachmentLoadOp::CLEAR
    } else {
        vk::AttachmentLoadOp::LOAD
    };
    let ca = [vk::RenderingAttachmentInfo::default()
        .image_view(color.view)
        .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
        .load_op(load)
        .store_op(vk::AttachmentStoreOp::STORE)
        .clear_value(vk::ClearValue {
            color: vk::ClearColorValue {
                float32: [0.0, 0.0, 0.0, 1.0],
            },
        })];
    let da = vk::RenderingAttachmentInfo::default()
        .image_view(depth.view)
        .image_layout(vk::ImageLayout::DEPTH_STENCIL_ATTACHMENT_OPTIMAL)
        .load_op(load)
        .store_op(vk::AttachmentStoreOp::STORE)
        .clear_value(vk::ClearValue {
            depth_stencil: vk::ClearDepthStencilValue {
                depth: 1.0,
                stencil: 0,
            },
        });
    let info = vk::RenderingInfo::default()
        .flags(flags)
        .render_area(vk::Rect2D {
            offset: vk::Offset2D { x: 0, y: 0 },
            extent: vk::Extent2D {
                width: W,
                height: H,
            },
        })
        .layer_count(1)
        .view_mask(view_mask)
        .color_attachments(&ca)
        .depth_attachment(&da);
    unsafe { d.cmd_begin_rendering(cb, &info) };
}

/// Orders attachment writes of one rendering before the next one.
fn attachment_barrier(d: &ash::Device, cb: vk::CommandBuffer) {
    let mb = [vk::MemoryBarrier2::default()
        .src_stage_mask(
            vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT
                | vk::PipelineStageFlags2::LATE_FRAGMENT_TESTS,
        )
        .src_access_mask(
            vk::AccessFlags2::COLOR_ATTACHMENT_WRITE
                | vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_WRITE,
        )
        .dst_stage_mask(
            vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT
                | vk::PipelineStageFlags2::EARLY_FRAGMENT_TESTS
                | vk::PipelineStageFlags2::LATE_FRAGMENT_TESTS,
        )
        .dst_access_mask(
            vk::AccessFlags2::COLOR_ATTACHMENT_READ
                | vk::AccessFlags2::COLOR_ATTACHMENT_WRITE
                | vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_READ
                | vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_WRITE,
        )];
    unsafe { d.cmd_pipeline_barrier2(cb, &vk::DependencyInfo::default().memory_barriers(&mb)) };
}

/// Makes transfer and shader writes visible to host reads after the fence.
pub(crate) fn host_barrier(d: &ash::Device, cb: vk::CommandBuffer) {
    let mb = [vk::MemoryBarrier2::default()
        .src_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
        .src_access_mask(vk::AccessFlags2::MEMORY_WRITE)
        .dst_stage_mask(vk::PipelineStageFlags2::HOST)
        .dst_access_mask(vk::AccessFlags2::HOST_READ)];
    unsafe { d.cmd_pipeline_barrier2(cb, &vk::DependencyInfo::default().memory_barriers(&mb)) };
}

fn graphics_pipeline(
    d: &ash::Device,
    layout: vk::PipelineLayout,
    stages: &[(vk::ShaderStageFlags, vk::ShaderModule)],
    desc: PipeDesc,
) -> Result<vk::Pipeline> {
    let stage_info: Vec<vk::PipelineShaderStageCreateInfo> = stages
        .iter()
        .map(|(s, m)| {
            vk::PipelineShaderStageCreateInfo::default()
                .stage(*s)
                .module(*m)
                .name(c"main")
        })
        .collect();
    let bindings = [vk::VertexInputBindingDescription {
        binding: 0,
        stride: 16,
        input_rate: vk::VertexInputRate::VERTEX,
    }];
    let attrs = [vk::VertexInputAttributeDescription {
        location: 0,
        binding: 0,
        format: vk::Format::R32G32B32A32_SFLOAT,
        offset: 0,
    }];
    let vi = vk::PipelineVertexInputStateCreateInfo::default()
        .vertex_binding_descriptions(&bindings)
        .vertex_attribute_descriptions(&attrs);
    let ia = vk::PipelineInputAssemblyStateCreateInfo::default().topology(desc.topology);
    let ts =
        vk::PipelineTessellationStateCreateInfo::default().patch_control_points(desc.patch_points);
    let viewports = [vk::Viewport {
        x: 0.0,
        y: 0.0,
        width: W as f32,
        height: H as f32,
        min_depth: 0.0,
        max_depth: 1.0,
    }];
    let scissors = [vk::Rect2D {
        offset: vk::Offset2D { x: 0, y: 0 },
        extent: vk::Extent2D {
            width: W,
            height: H,
        },
    }];
    let vp = vk::PipelineViewportStateCreateInfo::default()
        .viewports(&viewports)
        .scissors(&scissors);
    let rs = vk::PipelineRasterizationStateCreateInfo::default()
        .polygon_mode(vk::PolygonMode::FILL)
        .cull_mode(vk::CullModeFlags::NONE)
        .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
        .rasterizer_discard_enable(desc.discard)
        .line_width(1.0);
    let ms = vk::PipelineMultisampleStateCreateInfo::default().rasterization_samples(
        if desc.samples == 4 {
            vk::SampleCountFlags::TYPE_4
        } else {
            vk::SampleCountFlags::TYPE_1
        },
    );
    let ds = vk::PipelineDepthStencilStateCreateInfo::default()
        .depth_test_enable(desc.depth)
        .depth_write_enable(desc.depth)
        .depth_compare_op(vk::CompareOp::LESS_OR_EQUAL);
    let blend = [vk::PipelineColorBlendAttachmentState::default()
        .color_write_mask(vk::ColorComponentFlags::RGBA)];
    let cbs = vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend);
    let formats = [COLOR];
    let mut rendering = vk::PipelineRenderingCreateInfo::default()
        .color_attachment_formats(&formats)
        .depth_attachment_format(DEPTH)
        .view_mask(desc.view_mask);
    let mut ci = vk::GraphicsPipelineCreateInfo::default()
        .stages(&stage_info)
        .viewport_state(&vp)
        .rasterization_state(&rs)
        .multisample_state(&ms)
        .depth_stencil_state(&ds)
        .color_blend_state(&cbs)
        .layout(layout)
        .push_next(&mut rendering);
    if desc.vertex_input {
        ci = ci.vertex_input_state(&vi).input_assembly_state(&ia);
    }
    if desc.patch_points > 0 {
        ci = ci.tessellation_state(&ts);
    }
    let p = unsafe { d.create_graphics_pipelines(vk::PipelineCache::null(), &[ci], None) }
        .map_err(|(_, e)| e)
        .context("vkCreateGraphicsPipelines")?;
    Ok(p[0])
}
