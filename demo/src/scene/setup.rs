//! Creating the scene (images, buffers, query pools, pipelines, for the features the device has)
//! and destroying it.

use super::*;

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
}
