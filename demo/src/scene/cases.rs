//! The query scenarios beyond the main pass, each with its own command buffers and known answers:
//! polling without WAIT, resets, transform feedback, inherited queries, MSAA, multiview, mesh
//! shading, multi-draw and a second queue.

use super::*;

impl Scene {
    /// NOT_READY made certain: the query is reset but its command buffer not
    /// yet submitted when the first polls happen. (Gating a submitted command
    /// buffer on a host event or semaphore is not portable: lavapipe's
    /// vkGetQueryPoolResults waits for the device to go idle and would
    /// deadlock.) After submission, polling continues without WAIT.
    pub(super) fn polling(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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
    pub(super) fn resets(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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

    pub(super) fn transform_feedback(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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

    pub(super) fn inherited(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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
    pub(super) fn msaa(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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

    pub(super) fn multiview(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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

    pub(super) fn mesh(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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

    /// The target quad drawn behind the occluder by one vkCmdDrawMultiEXT (VK_EXT_multi_draw)
    /// of two triangles, its draw infos 16 bytes apart: the same visible samples as one vkCmdDraw.
    pub(super) fn multi_draw(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        const NAME: &str = "multi-draw occlusion (vkCmdDrawMultiEXT)";
        let Some(md) = &gpu.multi_draw_fn else {
            report.skip(NAME, "VK_EXT_multi_draw (multiDraw)");
            return Ok(());
        };
        let precise = gpu.support.occlusion_precise;
        // firstVertex, vertexCount, then padding: a stride larger than VkMultiDrawInfoEXT.
        let draws: [[u32; 4]; 2] = [[V_TARGET, 3, 0, 0], [V_TARGET + 3, 3, 0, 0]];
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, self.poll, 0, 1);
            self.begin_rendering(d, cb, true, vk::RenderingFlags::empty());
            self.draw_setup(d, cb, self.quad);
            d.cmd_draw(cb, 6, 1, V_OCCLUDER, 0);
            let flags = match precise {
                true => vk::QueryControlFlags::PRECISE,
                false => vk::QueryControlFlags::empty(),
            };
            d.cmd_begin_query(cb, self.poll, 0, flags);
            (md.fp().cmd_draw_multi_ext)(
                cb,
                draws.len() as u32,
                draws.as_ptr().cast(),
                1,
                0,
                std::mem::size_of::<[u32; 4]>() as u32,
            );
            d.cmd_end_query(cb, self.poll, 0);
            d.cmd_end_rendering(cb);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        let v = gpu.results64(self.poll, 0, 1, 1)?[0];
        let rule = match precise {
            true => Rule::Exact(VISIBLE_PX),
            false => Rule::AtLeast(1),
        };
        report.value(
            NAME,
            v,
            rule,
            "the visible part of the target, as in the main pass",
        );
        Ok(())
    }

    pub(super) fn second_queue(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
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
}
