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
    pub fn new(gpu: &Gpu, report: &mut Report) -> Result<Self> {
        let s = gpu.support.clone();
        let d = &gpu.device;
        let extent = vk::Extent2D {
            width: W,
            height: H,
        };
        let color = gpu.image(
            COLOR,
            vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC,
            vk::ImageAspectFlags::COLOR,
            extent,
            1,
            "demo color",
        )?;
        let depth = gpu.image(
            DEPTH,
            vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
            vk::ImageAspectFlags::DEPTH,
            extent,
            1,
            "demo depth",
        )?;
        let mut modules = Vec::new();
        let mut module = |code: &[u8]| -> Result<vk::ShaderModule> {
            let m = gpu.shader(code)?;
            modules.push(m);
            Ok(m)
        };
        let vert = module(spv::QUAD_VERT)?;
        let frag = module(spv::COLOR_FRAG)?;
        let comp = module(spv::COUNT_COMP)?;
        let tesc = if s.tessellation {
            Some(module(spv::STATS_TESC)?)
        } else {
            None
        };
        let tese = if s.tessellation {
            Some(module(spv::STATS_TESE)?)
        } else {
            None
        };
        let geom = if s.geometry {
            Some(module(spv::STATS_GEOM)?)
        } else {
            None
        };
        let use_streams =
            s.xfb && s.geometry && s.geometry_streams && s.xfb_streams >= 4 && s.xfb_buffers >= 4;
        let xfb_geom = if use_streams {
            Some(module(spv::XFB_STREAMS_GEOM)?)
        } else {
            None
        };
        let xfb_vert = if s.xfb && !use_streams {
            Some(module(spv::XFB_SINGLE_VERT)?)
        } else {
            None
        };
        let (task, mesh) = if s.mesh {
            (Some(module(spv::QUAD_TASK)?), Some(module(spv::QUAD_MESH)?))
        } else {
            (None, None)
        };

        let push = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::FRAGMENT,
            offset: 0,
            size: 16,
        }];
        let layout = unsafe {
            d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().push_constant_ranges(&push),
                None,
            )
        }
        .context("vkCreatePipelineLayout")?;

        let mut pipelines = Vec::new();
        let mut pipe = |stages: &[(vk::ShaderStageFlags, vk::ShaderModule)],
                        desc: PipeDesc|
         -> Result<vk::Pipeline> {
            let p = graphics_pipeline(d, layout, stages, desc)?;
            pipelines.push(p);
            Ok(p)
        };
        let vs = vk::ShaderStageFlags::VERTEX;
        let fs = vk::ShaderStageFlags::FRAGMENT;
        let tri = PipeDesc {
            vertex_input: true,
            topology: vk::PrimitiveTopology::TRIANGLE_LIST,
            depth: true,
            ..Default::default()
        };
        let quad = pipe(&[(vs, vert), (fs, frag)], tri)?;
        let quad_discard = if s.pg_query && s.pg_discard {
            Some(pipe(
                &[(vs, vert)],
                PipeDesc {
                    discard: true,
                    ..tri
                },
            )?)
        } else {
            None
        };
        let stats_pipe = if s.pipeline_statistics {
            let mut stages = vec![(vs, vert)];
            let mut desc = PipeDesc {
                depth: false,
                ..tri
            };
            if let (Some(c), Some(e)) = (tesc, tese) {
                stages.push((vk::ShaderStageFlags::TESSELLATION_CONTROL, c));
                stages.push((vk::ShaderStageFlags::TESSELLATION_EVALUATION, e));
                desc.topology = vk::PrimitiveTopology::PATCH_LIST;
                desc.patch_points = 3;
            }
            if let Some(g) = geom {
                stages.push((vk::ShaderStageFlags::GEOMETRY, g));
            }
            stages.push((fs, frag));
            Some(pipe(&stages, desc)?)
        } else {
            None
        };
        let mesh_pipe = match (task, mesh) {
            (Some(t), Some(m)) => Some(pipe(
                &[
                    (vk::ShaderStageFlags::TASK_EXT, t),
                    (vk::ShaderStageFlags::MESH_EXT, m),
                    (fs, frag),
                ],
                PipeDesc {
                    vertex_input: false,
                    depth: false,
                    ..tri
                },
            )?),
            _ => None,
        };
        let points = PipeDesc {
            vertex_input: true,
            topology: vk::PrimitiveTopology::POINT_LIST,
            depth: false,
            discard: true,
            ..Default::default()
        };
        let xfb_pipe = if let Some(g) = xfb_geom {
            Some(pipe(
                &[(vs, vert), (vk::ShaderStageFlags::GEOMETRY, g)],
                points,
            )?)
        } else if let Some(v) = xfb_vert {
            Some(pipe(&[(vs, v)], points)?)
        } else {
            None
        };

        // Compute: one storage buffer with an invocation counter.
        let binding = [vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        let set_layout = unsafe {
            d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
                None,
            )
        }
        .context("vkCreateDescriptorSetLayout")?;
        let set_layouts = [set_layout];
        let compute_layout = unsafe {
            d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
                None,
            )
        }
        .context("vkCreatePipelineLayout")?;
        let compute = unsafe {
            d.create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .layout(compute_layout)
                    .stage(
                        vk::PipelineShaderStageCreateInfo::default()
                            .stage(vk::ShaderStageFlags::COMPUTE)
                            .module(comp)
                            .name(c"main"),
                    )],
                None,
            )
        }
        .map_err(|(_, e)| e)
        .context("vkCreateComputePipelines")?[0];
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 1,
        }];
        let desc_pool = unsafe {
            d.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&sizes),
                None,
            )
        }
        .context("vkCreateDescriptorPool")?;
        let set = unsafe {
            d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(desc_pool)
                    .set_layouts(&set_layouts),
            )
        }
        .context("vkAllocateDescriptorSets")?[0];
        let counter = gpu.buffer(16, vk::BufferUsageFlags::STORAGE_BUFFER, "compute counter")?;
        let binfo = [vk::DescriptorBufferInfo {
            buffer: counter.buffer,
            offset: 0,
            range: vk::WHOLE_SIZE,
        }];
        unsafe {
            d.update_descriptor_sets(
                &[vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(0)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&binfo)],
                &[],
            )
        };

        let verts = vertices();
        let vbuf = gpu.buffer(
            std::mem::size_of_val(verts.as_slice()) as u64,
            vk::BufferUsageFlags::VERTEX_BUFFER,
            "demo vertices",
        )?;
        vbuf.write(&verts);
        let copy = gpu.buffer(
            // 4 queries x (u64 value, u64 availability), then 4 x (u32, u32).
            4 * 16 + 4 * 8,
            vk::BufferUsageFlags::TRANSFER_DST,
            "occlusion copy-results",
        )?;

        let occ = gpu.query_pool(vk::QueryType::OCCLUSION, 4, Default::default(), "occlusion")?;
        let poll = gpu.query_pool(
            vk::QueryType::OCCLUSION,
            1,
            Default::default(),
            "occlusion polled",
        )?;
        let ts = gpu.query_pool(
            vk::QueryType::TIMESTAMP,
            7,
            Default::default(),
            "timestamps",
        )?;
        let stats = if s.pipeline_statistics {
            Some(gpu.query_pool(
                vk::QueryType::PIPELINE_STATISTICS,
                1,
                all_stats(),
                "pipeline statistics",
            )?)
        } else {
            None
        };
        let pg = if s.pg_query {
            Some(gpu.query_pool(
                vk::QueryType::PRIMITIVES_GENERATED_EXT,
                2,
                Default::default(),
                "primitives generated",
            )?)
        } else {
            None
        };
        let inherit = if s.inherited_queries {
            Some(gpu.query_pool(
                vk::QueryType::OCCLUSION,
                1,
                Default::default(),
                "occlusion inherited",
            )?)
        } else {
            None
        };
        let mesh_pools = if s.mesh && s.mesh_queries {
            let mut flags = vk::QueryPipelineStatisticFlags::TASK_SHADER_INVOCATIONS_EXT
                | vk::QueryPipelineStatisticFlags::MESH_SHADER_INVOCATIONS_EXT;
            if !s.pipeline_statistics {
                flags = vk::QueryPipelineStatisticFlags::empty();
            }
            let prims = gpu.query_pool(
                vk::QueryType::MESH_PRIMITIVES_GENERATED_EXT,
                1,
                Default::default(),
                "mesh primitives generated",
            )?;
            let st = if flags.is_empty() {
                vk::QueryPool::null()
            } else {
                gpu.query_pool(
                    vk::QueryType::PIPELINE_STATISTICS,
                    1,
                    flags,
                    "mesh pipeline statistics",
                )?
            };
            Some((prims, st))
        } else {
            None
        };
        let second = match gpu.second {
            Some((family, _)) => {
                let cp = unsafe {
                    d.create_command_pool(
                        &vk::CommandPoolCreateInfo::default()
                            .queue_family_index(family)
                            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                        None,
                    )
                }
                .context("vkCreateCommandPool (second family)")?;
                let qp = gpu.query_pool(
                    vk::QueryType::TIMESTAMP,
                    2,
                    Default::default(),
                    "timestamps second queue",
                )?;
                Some((cp, qp))
            }
            None => None,
        };

        let second_fill = match second {
            Some(_) => {
                Some(gpu.buffer(256, vk::BufferUsageFlags::TRANSFER_DST, "second queue fill")?)
            }
            None => None,
        };
        let xfb = match xfb_pipe {
            Some(pipeline) => {
                let streams = if use_streams { 4 } else { 1 };
                // Stream s gets s+1 points per input point; stream 1 (or the
                // single stream) gets room for fewer than it needs.
                let per_point: Vec<u64> = (0..streams as u64).map(|s| s + 1).collect();
                let capacity: Vec<u64> = if use_streams {
                    vec![6, 8, 18, 24]
                } else {
                    vec![4]
                };
                let mut buffers = Vec::new();
                for (i, cap) in capacity.iter().enumerate() {
                    buffers.push(gpu.buffer(
                        cap * 16,
                        vk::BufferUsageFlags::TRANSFORM_FEEDBACK_BUFFER_EXT,
                        &format!("xfb stream {i}"),
                    )?);
                }
                let xfb_pool = if s.xfb_queries {
                    Some(gpu.query_pool(
                        vk::QueryType::TRANSFORM_FEEDBACK_STREAM_EXT,
                        streams,
                        Default::default(),
                        "xfb streams",
                    )?)
                } else {
                    None
                };
                let pg_pool = if s.pg_query && s.pg_discard {
                    Some(gpu.query_pool(
                        vk::QueryType::PRIMITIVES_GENERATED_EXT,
                        streams,
                        Default::default(),
                        "primitives generated streams",
                    )?)
                } else {
                    None
                };
                Some(Xfb {
                    pipeline,
                    streams,
                    capacity,
                    per_point,
                    buffers,
                    xfb_pool,
                    pg_pool,
                })
            }
            None => None,
        };

        let mv = if s.multiview {
            let c = gpu.image(
                COLOR,
                vk::ImageUsageFlags::COLOR_ATTACHMENT,
                vk::ImageAspectFlags::COLOR,
                extent,
                2,
                "multiview color",
            )?;
            let z = gpu.image(
                DEPTH,
                vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
                vk::ImageAspectFlags::DEPTH,
                extent,
                2,
                "multiview depth",
            )?;
            let p = pipe(
                &[(vs, vert), (fs, frag)],
                PipeDesc {
                    view_mask: 0b11,
                    ..tri
                },
            )?;
            let q = gpu.query_pool(
                vk::QueryType::OCCLUSION,
                2,
                Default::default(),
                "occlusion multiview",
            )?;
            Some((c, z, p, q))
        } else {
            None
        };

        // 4x MSAA with the standard sample locations: every sample of a
        // pixel lies strictly inside it, and all quad edges fall on pixel
        // boundaries, so covered samples are exactly 4 per covered pixel.
        let limits = &gpu.props.limits;
        let four = vk::SampleCountFlags::TYPE_4;
        let msaa = if limits.standard_sample_locations == vk::TRUE
            && limits.framebuffer_color_sample_counts.contains(four)
            && limits.framebuffer_depth_sample_counts.contains(four)
        {
            let c = gpu.image_ms(
                COLOR,
                vk::ImageUsageFlags::COLOR_ATTACHMENT,
                vk::ImageAspectFlags::COLOR,
                extent,
                1,
                four,
                "msaa color",
            )?;
            let z = gpu.image_ms(
                DEPTH,
                vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
                vk::ImageAspectFlags::DEPTH,
                extent,
                1,
                four,
                "msaa depth",
            )?;
            let p = pipe(&[(vs, vert), (fs, frag)], PipeDesc { samples: 4, ..tri })?;
            let q = gpu.query_pool(
                vk::QueryType::OCCLUSION,
                2,
                Default::default(),
                "occlusion msaa",
            )?;
            Some((c, z, p, q))
        } else {
            report.skip(
                "4x MSAA occlusion",
                "standardSampleLocations and 4x framebufferColorSampleCounts/framebufferDepthSampleCounts",
            );
            None
        };

        // Attachments stay in their attachment layouts for the whole run.
        let mut images = vec![&color, &depth];
        for (c, z, _, _) in mv.iter().chain(msaa.iter()) {
            images.push(c);
            images.push(z);
        }
        let cb = gpu.record(|d, cb| {
            let barriers: Vec<vk::ImageMemoryBarrier2> = images
                .iter()
                .map(|img| {
                    let is_color = img.aspect == vk::ImageAspectFlags::COLOR;
                    vk::ImageMemoryBarrier2::default()
                        .src_stage_mask(vk::PipelineStageFlags2::NONE)
                        .dst_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
                        .dst_access_mask(
                            vk::AccessFlags2::MEMORY_READ | vk::AccessFlags2::MEMORY_WRITE,
                        )
                        .old_layout(vk::ImageLayout::UNDEFINED)
                        .new_layout(if is_color {
                            vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL
                        } else {
                            vk::ImageLayout::DEPTH_STENCIL_ATTACHMENT_OPTIMAL
                        })
                        .image(img.image)
                        .subresource_range(range(img.aspect, img.layers))
                })
                .collect();
            unsafe {
                d.cmd_pipeline_barrier2(
                    cb,
                    &vk::DependencyInfo::default().image_memory_barriers(&barriers),
                )
            };
            Ok(())
        })?;
        gpu.submit_wait(cb)?;

        if !s.pipeline_statistics {
            report.skip(
                "pipeline statistics",
                "VkPhysicalDeviceFeatures::pipelineStatisticsQuery",
            );
        }
        Ok(Scene {
            color,
            depth,
            mv,
            msaa,
            layout,
            quad,
            quad_discard,
            stats_pipe,
            mesh_pipe,
            compute,
            compute_layout,
            set_layout,
            desc_pool,
            set,
            counter,
            vbuf,
            copy,
            occ,
            poll,
            ts,
            stats,
            pg,
            inherit,
            mesh_pools,
            second,
            second_fill,
            xfb,
            modules,
            pipelines,
        })
    }

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

    /// NOT_READY made certain: the query is reset but its command buffer not
    /// yet submitted when the first polls happen. (Gating a submitted command
    /// buffer on a host event or semaphore is not portable: lavapipe's
    /// vkGetQueryPoolResults waits for the device to go idle and would
    /// deadlock.) After submission, polling continues without WAIT.
    fn polling(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let d = &gpu.device;
        let s = &gpu.support;
        let precise = if s.occlusion_precise {
            vk::QueryControlFlags::PRECISE
        } else {
            vk::QueryControlFlags::empty()
        };
        if s.host_query_reset {
            unsafe { d.reset_query_pool(self.poll, 0, 1) };
        } else {
            let cb = gpu.record(|d, cb| unsafe {
                d.cmd_reset_query_pool(cb, self.poll, 0, 1);
                Ok(())
            })?;
            gpu.submit_wait(cb)?;
        }
        let cb = gpu.record(|d, cb| unsafe {
            self.begin_rendering(d, cb, true, vk::RenderingFlags::empty());
            self.draw_setup(d, cb, self.quad);
            d.cmd_draw(cb, 6, 1, V_OCCLUDER, 0);
            d.cmd_begin_query(cb, self.poll, 0, precise);
            d.cmd_draw(cb, 6, 1, V_TARGET, 0);
            d.cmd_end_query(cb, self.poll, 0);
            d.cmd_end_rendering(cb);
            Ok(())
        })?;
        let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY;
        let (r0, b0) = gpu.results(self.poll, 0, 1, 16, flags)?;
        let v0 = u64s(&b0);
        let (r1, b1) = gpu.results(self.poll, 0, 1, 16, flags | vk::QueryResultFlags::PARTIAL)?;
        let partial = u64s(&b1);
        let fence = gpu.submit(gpu.queue, cb)?;
        // Poll without WAIT; a short sleep keeps the call count (and a
        // capture of it) small.
        let mut not_ready = u64::from(r0 == vk::Result::NOT_READY);
        let deadline = Instant::now() + Duration::from_secs(20);
        let polled = loop {
            let (r, b) = gpu.results(self.poll, 0, 1, 16, flags)?;
            if r == vk::Result::SUCCESS {
                break u64s(&b);
            }
            not_ready += 1;
            if Instant::now() > deadline {
                bail!("occlusion query still NOT_READY 20 s after submission");
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        gpu.wait(fence)?;
        unsafe { d.free_command_buffers(gpu.pool, &[cb]) };
        report.holds_exact(
            "poll before submission (no WAIT)",
            "NOT_READY, availability 0",
            format!("{r0:?}, availability {}", v0[1]),
            r0 == vk::Result::NOT_READY && v0[1] == 0,
            "the query is reset and its work not yet submitted",
        );
        let fin = gpu.results64(self.poll, 0, 1, 1)?[0];
        // The spec mandates NOT_READY only when neither WAIT nor PARTIAL is
        // set, so either return code is valid here.
        report.holds(
            "PARTIAL before submission",
            "0 <= value <= final, unavailable",
            format!(
                "{r1:?}, value {}, final {fin}, availability {}",
                partial[0], partial[1]
            ),
            partial[0] <= fin && partial[1] == 0,
            "spec: PARTIAL gives a value between zero and the final result",
        );
        report.value(
            "NOT_READY polls counted",
            not_ready,
            Rule::AtLeast(1),
            "one poll happens before submission; more may follow it",
        );
        report.holds_exact(
            "polled result == WAIT result",
            "equal, available",
            format!("{:?} vs {fin}", polled),
            polled[0] == fin && polled[1] != 0,
            "same query",
        );
        if s.occlusion_precise {
            report.value(
                "occlusion PRECISE after polling",
                fin,
                Rule::Exact(VISIBLE_PX),
                "same scene as the main pass",
            );
        }
        report.info(format!("NOT_READY polls this frame: {not_ready}"));
        Ok(())
    }

    /// Host reset and command-buffer reset both make results unavailable.
    fn resets(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let d = &gpu.device;
        let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY;
        if gpu.support.host_query_reset {
            unsafe { d.reset_query_pool(self.poll, 0, 1) };
            let (r, b) = gpu.results(self.poll, 0, 1, 16, flags)?;
            let v = u64s(&b);
            report.holds_exact(
                "host reset (vkResetQueryPool)",
                "NOT_READY, availability 0",
                format!("{r:?}, availability {}", v[1]),
                r == vk::Result::NOT_READY && v[1] == 0,
                "a reset query is unavailable",
            );
        } else {
            report.skip(
                "host query reset",
                "VkPhysicalDeviceHostQueryResetFeatures::hostQueryReset",
            );
        }
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, self.occ, 0, 4);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        let (r, b) = gpu.results(self.occ, 0, 4, 16, flags)?;
        let v = u64s(&b);
        let ok = r == vk::Result::NOT_READY && v.chunks(2).all(|p| p[1] == 0);
        report.holds_exact(
            "command reset (vkCmdResetQueryPool)",
            "NOT_READY, all availability 0",
            format!(
                "{r:?}, availability {:?}",
                v.chunks(2).map(|p| p[1]).collect::<Vec<_>>()
            ),
            ok,
            "a reset query is unavailable",
        );
        Ok(())
    }

    fn transform_feedback(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let s = &gpu.support;
        let Some(x) = &self.xfb else {
            report.skip(
                "transform feedback stream queries",
                "VK_EXT_transform_feedback",
            );
            if s.pg_query && !s.pg_discard {
                report.skip(
                    "primitives generated per stream",
                    "VK_EXT_transform_feedback",
                );
            }
            return Ok(());
        };
        let Some(fns) = &gpu.xfb_fn else {
            return Ok(());
        };
        if x.streams < 4 {
            report.skip("transform feedback on streams 1..3",
                "VkPhysicalDeviceTransformFeedbackFeaturesEXT::geometryStreams and maxTransformFeedbackStreams/Buffers >= 4");
        }
        if x.xfb_pool.is_none() {
            report.skip(
                "transform feedback stream queries",
                "VkPhysicalDeviceTransformFeedbackPropertiesEXT::transformFeedbackQueries",
            );
        }
        let pg_streams = if s.pg_nonzero_streams { x.streams } else { 1 };
        if x.pg_pool.is_some() && pg_streams < x.streams {
            report.skip("primitives generated on non-zero streams",
                "VkPhysicalDevicePrimitivesGeneratedQueryFeaturesEXT::primitivesGeneratedQueryWithNonZeroStreams");
        }
        for b in &x.buffers {
            b.zero();
        }
        let fp = fns.fp();
        let cb = gpu.record(|d, cb| unsafe {
            if let Some(p) = x.xfb_pool {
                d.cmd_reset_query_pool(cb, p, 0, x.streams);
            }
            if let Some(p) = x.pg_pool {
                d.cmd_reset_query_pool(cb, p, 0, x.streams);
            }
            self.begin_rendering(d, cb, true, vk::RenderingFlags::empty());
            self.draw_setup(d, cb, x.pipeline);
            let bufs: Vec<vk::Buffer> = x.buffers.iter().map(|b| b.buffer).collect();
            let offs = vec![0u64; bufs.len()];
            let sizes: Vec<u64> = x.buffers.iter().map(|b| b.size).collect();
            (fp.cmd_bind_transform_feedback_buffers_ext)(
                cb,
                0,
                bufs.len() as u32,
                bufs.as_ptr(),
                offs.as_ptr(),
                sizes.as_ptr(),
            );
            for i in 0..x.streams {
                if let Some(p) = x.xfb_pool {
                    (fp.cmd_begin_query_indexed_ext)(cb, p, i, vk::QueryControlFlags::empty(), i);
                }
                if let Some(p) = x.pg_pool {
                    if i < pg_streams {
                        (fp.cmd_begin_query_indexed_ext)(
                            cb,
                            p,
                            i,
                            vk::QueryControlFlags::empty(),
                            i,
                        );
                    }
                }
            }
            (fp.cmd_begin_transform_feedback_ext)(cb, 0, 0, std::ptr::null(), std::ptr::null());
            d.cmd_draw(cb, N_POINTS, 1, V_POINTS, 0);
            (fp.cmd_end_transform_feedback_ext)(cb, 0, 0, std::ptr::null(), std::ptr::null());
            for i in 0..x.streams {
                if let Some(p) = x.xfb_pool {
                    (fp.cmd_end_query_indexed_ext)(cb, p, i, i);
                }
                if let Some(p) = x.pg_pool {
                    if i < pg_streams {
                        (fp.cmd_end_query_indexed_ext)(cb, p, i, i);
                    }
                }
            }
            d.cmd_end_rendering(cb);
            let mb = [vk::MemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::TRANSFORM_FEEDBACK_EXT)
                .src_access_mask(vk::AccessFlags2::TRANSFORM_FEEDBACK_WRITE_EXT)
                .dst_stage_mask(vk::PipelineStageFlags2::HOST)
                .dst_access_mask(vk::AccessFlags2::HOST_READ)];
            d.cmd_pipeline_barrier2(cb, &vk::DependencyInfo::default().memory_barriers(&mb));
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        for i in 0..x.streams as usize {
            let needed = N_POINTS as u64 * x.per_point[i];
            let written = needed.min(x.capacity[i]);
            let overflow = if written < needed { " (overflow)" } else { "" };
            if let Some(p) = x.xfb_pool {
                let v = gpu.results64(p, i as u32, 1, 2)?;
                report.value(
                    &format!("xfb stream {i}: primitives written{overflow}"),
                    v[0],
                    Rule::Exact(written),
                    "points captured until the buffer is full, never partially",
                );
                report.value(
                    &format!("xfb stream {i}: primitives needed"),
                    v[1],
                    Rule::Exact(needed),
                    "6 input points x points emitted per input on this stream",
                );
            }
            if let Some(p) = x.pg_pool {
                if (i as u32) < pg_streams {
                    let v = gpu.results64(p, i as u32, 1, 1)?;
                    report.value(
                        &format!("primitives generated, stream {i}, rasterizer discard"),
                        v[0],
                        Rule::Exact(needed),
                        "counts emitted primitives whether or not they fit",
                    );
                }
            }
        }
        // Stream 0 captured the input points verbatim.
        let got: Vec<f32> = x.buffers[0]
            .bytes()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        let want: Vec<f32> = vertices()[V_POINTS as usize..(V_POINTS + N_POINTS) as usize]
            .iter()
            .take(x.capacity[0] as usize)
            .flatten()
            .copied()
            .collect();
        report.holds_exact(
            "xfb stream 0 buffer contents",
            "== input points",
            format!("{} floats", got.len()),
            got.len() >= want.len() && got[..want.len()] == want[..],
            "captured data, not a query, cross-checks the counts",
        );
        Ok(())
    }

    fn inherited(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let Some(pool) = self.inherit else {
            report.skip(
                "occlusion query inherited by a secondary command buffer",
                "VkPhysicalDeviceFeatures::inheritedQueries",
            );
            return Ok(());
        };
        let d = &gpu.device;
        let precise = gpu.support.occlusion_precise;
        let qflags = if precise {
            vk::QueryControlFlags::PRECISE
        } else {
            vk::QueryControlFlags::empty()
        };
        let sec = gpu.command_buffer(gpu.pool, vk::CommandBufferLevel::SECONDARY)?;
        let formats = [COLOR];
        let mut rinfo = vk::CommandBufferInheritanceRenderingInfo::default()
            .color_attachment_formats(&formats)
            .depth_attachment_format(DEPTH)
            .rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let inh = vk::CommandBufferInheritanceInfo::default()
            .occlusion_query_enable(true)
            .query_flags(qflags)
            .push_next(&mut rinfo);
        unsafe {
            d.begin_command_buffer(
                sec,
                &vk::CommandBufferBeginInfo::default()
                    .flags(
                        vk::CommandBufferUsageFlags::RENDER_PASS_CONTINUE
                            | vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT,
                    )
                    .inheritance_info(&inh),
            )
            .context("vkBeginCommandBuffer (secondary)")?;
            self.draw_setup(d, sec, self.quad);
            d.cmd_draw(sec, 6, 1, V_OCCLUDER, 0);
            d.cmd_draw(sec, 6, 1, V_TARGET, 0);
            d.end_command_buffer(sec)
                .context("vkEndCommandBuffer (secondary)")?;
        }
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, pool, 0, 1);
            d.cmd_begin_query(cb, pool, 0, qflags);
            self.begin_rendering(
                d,
                cb,
                true,
                vk::RenderingFlags::CONTENTS_SECONDARY_COMMAND_BUFFERS,
            );
            d.cmd_execute_commands(cb, &[sec]);
            d.cmd_end_rendering(cb);
            d.cmd_end_query(cb, pool, 0);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        unsafe { d.free_command_buffers(gpu.pool, &[sec]) };
        let v = gpu.results64(pool, 0, 1, 1)?[0];
        if precise {
            report.value(
                "occlusion inherited by secondary (occluder + quad)",
                v,
                Rule::Exact(OCCLUDER_PX + VISIBLE_PX),
                "2048 occluder pixels + 512 visible quad pixels",
            );
        } else {
            report.value(
                "occlusion inherited by secondary (occluder + quad)",
                v,
                Rule::NonZero,
                "non-precise",
            );
        }
        Ok(())
    }

    /// Occlusion counts samples, not pixels: 4 per visible pixel at 4x.
    fn msaa(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let Some((c, z, pipe, pool)) = &self.msaa else {
            return Ok(());
        };
        let precise = gpu.support.occlusion_precise;
        let qflags = if precise {
            vk::QueryControlFlags::PRECISE
        } else {
            vk::QueryControlFlags::empty()
        };
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, *pool, 0, 2);
            begin_rendering(d, cb, c, z, true, 0, vk::RenderingFlags::empty());
            self.draw_setup(d, cb, *pipe);
            d.cmd_draw(cb, 6, 1, V_OCCLUDER, 0);
            d.cmd_begin_query(cb, *pool, 0, qflags);
            d.cmd_draw(cb, 6, 1, V_TARGET, 0);
            d.cmd_end_query(cb, *pool, 0);
            d.cmd_begin_query(cb, *pool, 1, qflags);
            d.cmd_draw(cb, 6, 1, V_HIDDEN, 0);
            d.cmd_end_query(cb, *pool, 1);
            d.cmd_end_rendering(cb);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        let v = gpu.results64(*pool, 0, 2, 1)?;
        if precise {
            report.value(
                "occlusion PRECISE 4x MSAA, half-hidden quad",
                v[0],
                Rule::Exact(4 * VISIBLE_PX),
                "512 visible pixels x 4 samples, standard sample locations",
            );
        } else {
            report.value(
                "occlusion 4x MSAA, half-hidden quad",
                v[0],
                Rule::NonZero,
                "non-precise",
            );
        }
        report.value(
            "occlusion 4x MSAA, fully hidden quad",
            v[1],
            Rule::Exact(0),
            "no sample passes",
        );
        Ok(())
    }

    fn multiview(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let Some((c, z, pipe, pool)) = &self.mv else {
            report.skip(
                "multiview occlusion query",
                "VkPhysicalDeviceMultiviewFeatures::multiview",
            );
            return Ok(());
        };
        let precise = gpu.support.occlusion_precise;
        let qflags = if precise {
            vk::QueryControlFlags::PRECISE
        } else {
            vk::QueryControlFlags::empty()
        };
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, *pool, 0, 2);
            begin_rendering(d, cb, c, z, true, 0b11, vk::RenderingFlags::empty());
            self.draw_setup(d, cb, *pipe);
            d.cmd_draw(cb, 6, 1, V_OCCLUDER, 0);
            d.cmd_begin_query(cb, *pool, 0, qflags);
            d.cmd_draw(cb, 6, 1, V_TARGET, 0);
            d.cmd_end_query(cb, *pool, 0);
            d.cmd_end_rendering(cb);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        // No WAIT: the fence has signalled, and some drivers (lavapipe) put
        // the whole count in the first query and never make the others
        // available, which WAIT would turn into an error or a hang.
        let (r, b) = gpu.results(
            *pool,
            0,
            2,
            16,
            vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
        )?;
        let raw = u64s(&b);
        let v: Vec<u64> = raw
            .chunks(2)
            .map(|p| if p[1] != 0 { p[0] } else { 0 })
            .collect();
        let sum: u64 = v.iter().sum();
        report.holds_exact(
            "multiview occlusion: first query available",
            "available",
            format!("{r:?}, {raw:?}"),
            raw[1] != 0,
            "the query that was begun completes",
        );
        if precise {
            report.value("multiview occlusion, 2 views (sum of 2 queries)", sum, Rule::Exact(2 * VISIBLE_PX),
                "spec: distribution over the N queries is implementation-dependent, the sum is exact");
        } else {
            report.value(
                "multiview occlusion, 2 views (sum of 2 queries)",
                sum,
                Rule::NonZero,
                "non-precise",
            );
        }
        report.info(format!(
            "multiview occlusion per query (value, availability): {raw:?}"
        ));
        Ok(())
    }

    fn mesh(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let s = &gpu.support;
        let (Some(pipe), Some(fns)) = (self.mesh_pipe, &gpu.mesh_fn) else {
            report.skip(
                "mesh primitives generated and task/mesh statistics",
                "VK_EXT_mesh_shader (meshShader, taskShader)",
            );
            return Ok(());
        };
        let Some((prims, stats)) = self.mesh_pools else {
            report.skip(
                "mesh primitives generated and task/mesh statistics",
                "VkPhysicalDeviceMeshShaderFeaturesEXT::meshShaderQueries",
            );
            return Ok(());
        };
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, prims, 0, 1);
            if stats != vk::QueryPool::null() {
                d.cmd_reset_query_pool(cb, stats, 0, 1);
            }
            self.begin_rendering(d, cb, true, vk::RenderingFlags::empty());
            d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::GRAPHICS, pipe);
            let col: [f32; 4] = [0.9, 0.5, 0.1, 1.0];
            d.cmd_push_constants(
                cb,
                self.layout,
                vk::ShaderStageFlags::FRAGMENT,
                0,
                as_bytes(&col),
            );
            d.cmd_begin_query(cb, prims, 0, vk::QueryControlFlags::empty());
            if stats != vk::QueryPool::null() {
                d.cmd_begin_query(cb, stats, 0, vk::QueryControlFlags::empty());
            }
            fns.cmd_draw_mesh_tasks(cb, 1, 1, 1);
            if stats != vk::QueryPool::null() {
                d.cmd_end_query(cb, stats, 0);
            }
            d.cmd_end_query(cb, prims, 0);
            d.cmd_end_rendering(cb);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        let v = gpu.results64(prims, 0, 1, 1)?;
        report.value(
            "mesh primitives generated",
            v[0],
            Rule::Exact(2),
            "2 mesh workgroups emit 1 triangle each",
        );
        if stats != vk::QueryPool::null() {
            let st = gpu.results64(stats, 0, 1, 2)?;
            report.value(
                "pipeline statistics: task shader invocations",
                st[0],
                Rule::Exact(1),
                "vkCmdDrawMeshTasksEXT(1,1,1), local size 1",
            );
            report.value(
                "pipeline statistics: mesh shader invocations",
                st[1],
                Rule::Exact(2),
                "task shader launches 2 workgroups of size 1",
            );
        } else if !s.pipeline_statistics {
            report.skip(
                "task/mesh shader statistics",
                "VkPhysicalDeviceFeatures::pipelineStatisticsQuery",
            );
        }
        Ok(())
    }

    fn second_queue(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let (Some((cpool, pool)), Some((family, queue))) = (self.second, gpu.second) else {
            report.skip(
                "timestamps on a second queue family",
                "a second queue family with timestampValidBits > 0",
            );
            return Ok(());
        };
        let d = &gpu.device;
        let fam = gpu.families[family as usize];
        let can_cmd_reset = fam
            .queue_flags
            .intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE);
        if !can_cmd_reset {
            if !gpu.support.host_query_reset {
                report.skip(
                    "timestamps on a second queue family",
                    "hostQueryReset (the other family has no graphics/compute)",
                );
                return Ok(());
            }
            unsafe { d.reset_query_pool(pool, 0, 2) };
        }
        let cb = gpu.command_buffer(cpool, vk::CommandBufferLevel::PRIMARY)?;
        unsafe {
            d.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .context("vkBeginCommandBuffer")?;
            if can_cmd_reset {
                d.cmd_reset_query_pool(cb, pool, 0, 2);
            }
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, pool, 0);
            if let Some(b) = &self.second_fill {
                d.cmd_fill_buffer(cb, b.buffer, 0, 256, 0x5151_5151);
            }
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, 1);
            d.end_command_buffer(cb).context("vkEndCommandBuffer")?;
        }
        let fence = gpu.submit(queue, cb)?;
        gpu.wait(fence)?;
        unsafe { d.free_command_buffers(cpool, &[cb]) };
        let bits = fam.timestamp_valid_bits;
        let (r, b) = gpu.results(
            pool,
            0,
            2,
            16,
            vk::QueryResultFlags::TYPE_64
                | vk::QueryResultFlags::WAIT
                | vk::QueryResultFlags::WITH_AVAILABILITY,
        )?;
        let v = u64s(&b);
        let mask = ts_mask(bits);
        let ok = r == vk::Result::SUCCESS
            && v[1] != 0
            && v[3] != 0
            && ts_delta(v[0] & mask, v[2] & mask, bits).is_some();
        report.holds(
            &format!(
                "timestamps on queue family {family} ({:?})",
                fam.queue_flags
            ),
            "available, top <= bottom",
            format!("{} {}", v[0] & mask, v[2] & mask),
            ok,
            "masked with that family's timestampValidBits",
        );
        Ok(())
    }

    pub fn destroy(&self, gpu: &Gpu) {
        let d = &gpu.device;
        unsafe {
            let _ = d.device_wait_idle();
            for p in &self.pipelines {
                d.destroy_pipeline(*p, None);
            }
            d.destroy_pipeline(self.compute, None);
            for m in &self.modules {
                d.destroy_shader_module(*m, None);
            }
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_pipeline_layout(self.compute_layout, None);
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            let mut pools = vec![self.occ, self.poll, self.ts];
            pools.extend(self.stats);
            pools.extend(self.pg);
            pools.extend(self.inherit);
            if let Some((a, b)) = self.mesh_pools {
                pools.push(a);
                pools.push(b);
            }
            if let Some(b) = &self.second_fill {
                b.destroy(d);
            }
            if let Some((cp, qp)) = self.second {
                d.destroy_command_pool(cp, None);
                pools.push(qp);
            }
            if let Some(x) = &self.xfb {
                pools.extend(x.xfb_pool);
                pools.extend(x.pg_pool);
                for b in &x.buffers {
                    b.destroy(d);
                }
            }
            if let Some((c, z, _, q)) = &self.msaa {
                c.destroy(d);
                z.destroy(d);
                pools.push(*q);
            }
            if let Some((c, z, _, q)) = &self.mv {
                c.destroy(d);
                z.destroy(d);
                pools.push(*q);
            }
            for p in pools {
                if p != vk::QueryPool::null() {
                    d.destroy_query_pool(p, None);
                }
            }
            self.counter.destroy(d);
            self.vbuf.destroy(d);
            self.copy.destroy(d);
            self.color.destroy(d);
            self.depth.destroy(d);
        }
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
