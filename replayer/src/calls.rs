//! Per-call replay: the hand-written commands (instance/device creation, memory, emulated window
//! system, waits, query reads) and the generated dispatch for everything else.

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{types, Call, PNext};

use crate::engine::WAIT_TIMEOUT;
use crate::error::ReplayError;
use crate::session::{Session, Swapchain};

fn other(msg: impl Into<String>) -> ReplayError {
    ReplayError::Other(msg.into())
}

/// Replays one decoded call. `rec` carries the capture's result code.
///
/// # Safety
/// The session's handles must be those the trace created so far (the engine guarantees the order).
pub(crate) unsafe fn replay_call(
    s: &mut Session<'_>,
    call: &Call,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    let captured_ok = rec.result >= 0;
    match call {
        // ---- instance ------------------------------------------------------------------
        Call::vkCreateInstance(p) => {
            if !captured_ok {
                return Ok(());
            }
            let ci = p
                .p_create_info
                .as_deref()
                .ok_or_else(|| other("no create info"))?;
            let app = ci.p_application_info.as_deref().map(|a| {
                (
                    a.p_application_name.as_deref().unwrap_or(""),
                    a.application_version,
                    a.p_engine_name.as_deref().unwrap_or(""),
                    a.engine_version,
                    a.api_version,
                )
            });
            let layers = ci.pp_enabled_layer_names.clone().unwrap_or_default();
            let exts = ci.pp_enabled_extension_names.clone().unwrap_or_default();
            s.create_instance(p.p_instance.unwrap_or(0), app, &layers, &exts)
        }
        Call::vkDestroyInstance(_) => {
            s.teardown();
            Ok(())
        }
        Call::vkEnumeratePhysicalDevices(p) => {
            s.bind_physical_devices(p.p_physical_devices.as_deref().unwrap_or(&[]));
            Ok(())
        }
        // Queries of the loader/driver the replay does not need.
        Call::vkEnumerateInstanceExtensionProperties(_)
        | Call::vkEnumerateInstanceLayerProperties(_)
        | Call::vkEnumerateDeviceExtensionProperties(_)
        | Call::vkEnumerateDeviceLayerProperties(_)
        | Call::vkGetInstanceProcAddr(_)
        | Call::vkGetDeviceProcAddr(_) => Ok(()),

        // ---- device ----------------------------------------------------------------------
        Call::vkCreateDevice(p) => {
            if !captured_ok {
                return Ok(());
            }
            let ci = p
                .p_create_info
                .as_deref()
                .ok_or_else(|| other("no create info"))?;
            let queues: Vec<(u32, Vec<f32>, vk::DeviceQueueCreateFlags)> = ci
                .p_queue_create_infos
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|q| {
                    let mut prios = q.p_queue_priorities.clone().unwrap_or_default();
                    prios.resize(q.queue_count.max(1) as usize, 1.0);
                    (
                        q.queue_family_index,
                        prios,
                        vk::DeviceQueueCreateFlags::from_raw(q.flags),
                    )
                })
                .collect();
            let exts = ci.pp_enabled_extension_names.clone().unwrap_or_default();
            let device = p
                .p_device
                .ok_or_else(|| other("the capture recorded no device handle"))?;
            crate::glue::create_device(s, device, ci, &queues, &exts)
        }
        Call::vkDestroyDevice(p) => s.destroy_device(p.device),
        Call::vkGetDeviceQueue(p) => match p.p_queue {
            Some(q) => s.get_queue(
                p.device,
                p.queue_family_index,
                p.queue_index,
                vk::DeviceQueueCreateFlags::empty(),
                q,
            ),
            None => Ok(()),
        },
        Call::vkGetDeviceQueue2(p) => match (p.p_queue, p.p_queue_info.as_deref()) {
            (Some(q), Some(info)) => s.get_queue(
                p.device,
                info.queue_family_index,
                info.queue_index,
                vk::DeviceQueueCreateFlags::from_raw(info.flags),
                q,
            ),
            _ => Ok(()),
        },
        Call::vkCreateCommandPool(p) => {
            let ci = p
                .p_create_info
                .as_deref()
                .ok_or_else(|| other("no create info"))?;
            let fam = s.map_family(p.device, ci.queue_family_index);
            if fam == ci.queue_family_index || !captured_ok {
                return generic(s, call, rec);
            }
            let d = s.device(p.device)?;
            let info = vk::CommandPoolCreateInfo::default()
                .flags(vk::CommandPoolCreateFlags::from_raw(ci.flags))
                .queue_family_index(fam);
            let pool = d
                .device
                .create_command_pool(&info, None)
                .map_err(|e| ReplayError::vk("vkCreateCommandPool", e))?;
            s.bind(
                vk::ObjectType::COMMAND_POOL,
                p.p_command_pool.unwrap_or(0),
                pool.as_raw(),
            );
            Ok(())
        }

        // ---- memory ----------------------------------------------------------------------
        Call::vkAllocateMemory(p) => {
            if !captured_ok {
                return Ok(());
            }
            let info = p
                .p_allocate_info
                .as_deref()
                .ok_or_else(|| other("no allocate info"))?;
            let mut flags = None;
            let mut dedicated = None;
            for n in &info.p_next {
                match n {
                    PNext::VkMemoryAllocateFlagsInfo(f) => {
                        flags = Some((vk::MemoryAllocateFlags::from_raw(f.flags), f.device_mask))
                    }
                    PNext::VkMemoryDedicatedAllocateInfo(d) => {
                        dedicated = Some((d.buffer, d.image))
                    }
                    _ => {}
                }
            }
            let mem = p
                .p_memory
                .ok_or_else(|| other("the capture recorded no memory handle"))?;
            s.allocate_memory(
                p.device,
                mem,
                info.allocation_size,
                info.memory_type_index,
                flags,
                dedicated,
            )
        }
        Call::vkFreeMemory(p) => s.free_memory(p.memory),
        Call::vkMapMemory(p) => {
            if captured_ok {
                s.map_memory(p.memory)?;
            }
            Ok(())
        }
        Call::vkUnmapMemory(p) => s.unmap_memory(p.memory),
        // Memory writes are flushed as they are applied; invalidation only matters to the host.
        Call::vkFlushMappedMemoryRanges(_) | Call::vkInvalidateMappedMemoryRanges(_) => Ok(()),
        Call::vkBindBufferMemory(p) => {
            bind_buffer(s, p.device, p.buffer, p.memory, p.memory_offset)?;
            generic(s, call, rec)
        }
        Call::vkBindImageMemory(p) => {
            bind_image(s, p.device, p.image, p.memory, p.memory_offset)?;
            generic(s, call, rec)
        }
        Call::vkBindBufferMemory2(p) | Call::vkBindBufferMemory2KHR(p) => {
            for b in p.p_bind_infos.as_deref().unwrap_or(&[]) {
                bind_buffer(s, p.device, b.buffer, b.memory, b.memory_offset)?;
            }
            generic(s, call, rec)
        }
        Call::vkBindImageMemory2(p) | Call::vkBindImageMemory2KHR(p) => {
            for b in p.p_bind_infos.as_deref().unwrap_or(&[]) {
                // Binding to swapchain memory (memory 0) comes with a chained swapchain info.
                if b.memory != 0 {
                    bind_image(s, p.device, b.image, b.memory, b.memory_offset)?;
                }
            }
            generic(s, call, rec)
        }

        // ---- waits: wait for real when the capture saw completion, bounded ---------------------
        Call::vkWaitForFences(p) => {
            if rec.result != vk::Result::SUCCESS.as_raw() {
                return Ok(());
            }
            let fences = p
                .p_fences
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|f| s.lookup(vk::ObjectType::FENCE, *f).map(vk::Fence::from_raw))
                .collect::<Result<Vec<_>, _>>()?;
            wait_fences(s, p.device, &fences, p.wait_all != 0)
        }
        Call::vkGetFenceStatus(p) => {
            if rec.result != vk::Result::SUCCESS.as_raw() {
                return Ok(());
            }
            let f = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, p.fence)?);
            wait_fences(s, p.device, &[f], true)
        }
        // Re-done at the trace's QueryResults record, with the exact bytes the app got to compare.
        Call::vkGetQueryPoolResults(_) => Ok(()),

        // ---- queries and submissions (special-list commands, written by hand) ---------------------
        Call::vkCreateQueryPool(p) => {
            if !captured_ok {
                return Ok(());
            }
            let ci = p
                .p_create_info
                .as_deref()
                .ok_or_else(|| other("no create info"))?;
            let mut info = vk::QueryPoolCreateInfo::default()
                .flags(vk::QueryPoolCreateFlags::from_raw(ci.flags))
                .query_type(vk::QueryType::from_raw(ci.query_type))
                .query_count(ci.query_count)
                .pipeline_statistics(vk::QueryPipelineStatisticFlags::from_raw(
                    ci.pipeline_statistics,
                ));
            let mut perf_indices: Vec<u32> = Vec::new();
            let mut perf = vk::QueryPoolPerformanceCreateInfoKHR::default();
            for n in &ci.p_next {
                match n {
                    PNext::VkQueryPoolPerformanceCreateInfoKHR(x) => {
                        perf.queue_family_index = s.map_family(p.device, x.queue_family_index);
                        let captured = p.p_query_pool.unwrap_or(0);
                        perf_indices =
                            plan_perf_pool(s, rec.seq, p.device, captured, perf.queue_family_index)?;
                    }
                    other_struct => {
                        return Err(other(format!(
                            "VkQueryPoolCreateInfo chains {other_struct:?}, which the replayer cannot re-create"
                        )))
                    }
                }
            }
            if !perf_indices.is_empty() {
                perf.counter_index_count = perf_indices.len() as u32;
                perf.p_counter_indices = perf_indices.as_ptr();
                info = info.push_next(&mut perf);
            }
            let d = s.device(p.device)?;
            let pool = d
                .device
                .create_query_pool(&info, None)
                .map_err(|e| ReplayError::vk("vkCreateQueryPool", e))?;
            let captured = p.p_query_pool.unwrap_or(0);
            s.bind(vk::ObjectType::QUERY_POOL, captured, pool.as_raw());
            s.live_pools.insert(captured, (p.device, pool));
            Ok(())
        }
        Call::vkDestroyQueryPool(p) => {
            let pool = s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?;
            s.device(p.device)?
                .device
                .destroy_query_pool(vk::QueryPool::from_raw(pool), None);
            s.unbind(vk::ObjectType::QUERY_POOL, p.query_pool);
            s.live_pools.remove(&p.query_pool);
            Ok(())
        }
        Call::vkResetQueryPool(p) => {
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            s.device(p.device)?
                .device
                .reset_query_pool(pool, p.first_query, p.query_count);
            Ok(())
        }
        Call::vkResetQueryPoolEXT(p) => {
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            let d = s.device(p.device)?;
            let f = loaded(d.table.vkResetQueryPoolEXT, "vkResetQueryPoolEXT")?;
            f(d.device.handle(), pool, p.first_query, p.query_count);
            Ok(())
        }
        Call::vkCmdResetQueryPool(p) => {
            let (d, cb) = cmd(s, p.command_buffer)?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            d.cmd_reset_query_pool(cb, pool, p.first_query, p.query_count);
            Ok(())
        }
        Call::vkCmdBeginQuery(p) => {
            let (d, cb) = cmd(s, p.command_buffer)?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            d.cmd_begin_query(cb, pool, p.query, vk::QueryControlFlags::from_raw(p.flags));
            Ok(())
        }
        Call::vkCmdEndQuery(p) => {
            let (d, cb) = cmd(s, p.command_buffer)?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            d.cmd_end_query(cb, pool, p.query);
            Ok(())
        }
        Call::vkCmdBeginQueryIndexedEXT(p) => {
            let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
            let f = s.device_for(cb)?.table.vkCmdBeginQueryIndexedEXT;
            let f = loaded(f, "vkCmdBeginQueryIndexedEXT")?;
            let cb = vk::CommandBuffer::from_raw(cb);
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            f(
                cb,
                pool,
                p.query,
                vk::QueryControlFlags::from_raw(p.flags),
                p.index,
            );
            Ok(())
        }
        Call::vkCmdEndQueryIndexedEXT(p) => {
            let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
            let f = s.device_for(cb)?.table.vkCmdEndQueryIndexedEXT;
            let f = loaded(f, "vkCmdEndQueryIndexedEXT")?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            f(vk::CommandBuffer::from_raw(cb), pool, p.query, p.index);
            Ok(())
        }
        Call::vkCmdWriteTimestamp(p) => {
            let (d, cb) = cmd(s, p.command_buffer)?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            d.cmd_write_timestamp(
                cb,
                vk::PipelineStageFlags::from_raw(p.pipeline_stage),
                pool,
                p.query,
            );
            Ok(())
        }
        Call::vkCmdWriteTimestamp2(p) => {
            let (d, cb) = cmd(s, p.command_buffer)?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            d.cmd_write_timestamp2(
                cb,
                vk::PipelineStageFlags2::from_raw(p.stage),
                pool,
                p.query,
            );
            Ok(())
        }
        Call::vkCmdWriteTimestamp2KHR(p) => {
            let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
            let f = s.device_for(cb)?.table.vkCmdWriteTimestamp2KHR;
            let f = loaded(f, "vkCmdWriteTimestamp2KHR")?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            f(
                vk::CommandBuffer::from_raw(cb),
                vk::PipelineStageFlags2::from_raw(p.stage),
                pool,
                p.query,
            );
            Ok(())
        }
        Call::vkCmdCopyQueryPoolResults(p) => {
            let (d, cb) = cmd(s, p.command_buffer)?;
            let pool = vk::QueryPool::from_raw(s.lookup(vk::ObjectType::QUERY_POOL, p.query_pool)?);
            let buf = vk::Buffer::from_raw(s.lookup(vk::ObjectType::BUFFER, p.dst_buffer)?);
            d.cmd_copy_query_pool_results(
                cb,
                pool,
                p.first_query,
                p.query_count,
                buf,
                p.dst_offset,
                p.stride,
                vk::QueryResultFlags::from_raw(p.flags),
            );
            Ok(())
        }
        // ---- descriptor update templates: the data holds handles, translated per entry --------
        Call::vkCreateDescriptorUpdateTemplate(p)
        | Call::vkCreateDescriptorUpdateTemplateKHR(p) => {
            generic(s, call, rec)?;
            if let (Some(t), Some(ci)) = (p.p_descriptor_update_template, &p.p_create_info) {
                s.templates.insert(
                    t,
                    ci.p_descriptor_update_entries
                        .as_deref()
                        .unwrap_or(&[])
                        .iter()
                        .map(|e| crate::templates::Entry {
                            descriptor_type: e.descriptor_type,
                            count: e.descriptor_count,
                            offset: e.offset,
                            stride: e.stride,
                        })
                        .collect(),
                );
            }
            Ok(())
        }
        Call::vkDestroyDescriptorUpdateTemplate(p)
        | Call::vkDestroyDescriptorUpdateTemplateKHR(p) => {
            s.templates.remove(&p.descriptor_update_template);
            generic(s, call, rec)
        }
        Call::vkUpdateDescriptorSetWithTemplate(p)
        | Call::vkUpdateDescriptorSetWithTemplateKHR(p) => {
            let data = template_data(s, p.descriptor_update_template, p.p_data.as_deref())?;
            let d = s.device(p.device)?;
            let f = loaded(
                d.table
                    .vkUpdateDescriptorSetWithTemplate
                    .or(d.table.vkUpdateDescriptorSetWithTemplateKHR),
                "vkUpdateDescriptorSetWithTemplate",
            )?;
            let set = s.lookup(vk::ObjectType::DESCRIPTOR_SET, p.descriptor_set)?;
            let t = s.lookup(
                vk::ObjectType::DESCRIPTOR_UPDATE_TEMPLATE,
                p.descriptor_update_template,
            )?;
            f(
                s.device(p.device)?.device.handle(),
                vk::DescriptorSet::from_raw(set),
                vk::DescriptorUpdateTemplate::from_raw(t),
                data.as_ptr().cast(),
            );
            Ok(())
        }
        Call::vkCmdPushDescriptorSetWithTemplateKHR(p) => {
            let data = template_data(s, p.descriptor_update_template, p.p_data.as_deref())?;
            let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
            let f = loaded(
                s.device_for(cb)?
                    .table
                    .vkCmdPushDescriptorSetWithTemplateKHR,
                "vkCmdPushDescriptorSetWithTemplateKHR",
            )?;
            let t = s.lookup(
                vk::ObjectType::DESCRIPTOR_UPDATE_TEMPLATE,
                p.descriptor_update_template,
            )?;
            let layout = s.lookup(vk::ObjectType::PIPELINE_LAYOUT, p.layout)?;
            f(
                vk::CommandBuffer::from_raw(cb),
                vk::DescriptorUpdateTemplate::from_raw(t),
                vk::PipelineLayout::from_raw(layout),
                p.set,
                data.as_ptr().cast(),
            );
            Ok(())
        }
        Call::vkQueueSubmit(p) => submit(s, rec, p),
        Call::vkQueueSubmit2(p) => submit2(s, rec, p, false),
        Call::vkQueueSubmit2KHR(p) => submit2(s, rec, p, true),
        Call::vkQueueWaitIdle(p) => {
            let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
            let d = s.device_for(q)?;
            d.device
                .queue_wait_idle(vk::Queue::from_raw(q))
                .map_err(|e| ReplayError::vk("vkQueueWaitIdle", e))
        }
        Call::vkDeviceWaitIdle(p) => s
            .device(p.device)?
            .device
            .device_wait_idle()
            .map_err(|e| ReplayError::vk("vkDeviceWaitIdle", e)),
        // The replayer holds the profiling lock itself from the first performance pool until the
        // device is destroyed (see plan_perf_pool), whatever part of the app's hold the trace saw.
        Call::vkAcquireProfilingLockKHR(_) | Call::vkReleaseProfilingLockKHR(_) => Ok(()),
        // Clock samples have no effect the replay needs; names only help tools (and need
        // VK_EXT_debug_utils, which the replay may not have).
        Call::vkGetCalibratedTimestampsEXT(_) | Call::vkSetDebugUtilsObjectNameEXT(_) => Ok(()),

        // ---- emulated window system -----------------------------------------------------------
        Call::vkCreateXlibSurfaceKHR(_)
        | Call::vkCreateXcbSurfaceKHR(_)
        | Call::vkCreateWaylandSurfaceKHR(_)
        | Call::vkCreateHeadlessSurfaceEXT(_)
        | Call::vkCreateDisplayPlaneSurfaceKHR(_) => {
            if let Some(surface) = created_surface(call) {
                let fake = s.fake_handle();
                s.bind(vk::ObjectType::SURFACE_KHR, surface, fake);
            }
            Ok(())
        }
        Call::vkDestroySurfaceKHR(p) => {
            s.unbind(vk::ObjectType::SURFACE_KHR, p.surface);
            Ok(())
        }
        // Surface and presentation queries: their answers are in the capture and nothing replayed
        // depends on calling them again.
        Call::vkGetPhysicalDeviceSurfaceSupportKHR(_)
        | Call::vkGetPhysicalDeviceSurfaceCapabilitiesKHR(_)
        | Call::vkGetPhysicalDeviceSurfaceFormatsKHR(_)
        | Call::vkGetPhysicalDeviceSurfacePresentModesKHR(_)
        | Call::vkGetPhysicalDeviceSurfaceCapabilities2KHR(_)
        | Call::vkGetPhysicalDeviceSurfaceCapabilities2EXT(_)
        | Call::vkGetPhysicalDeviceSurfaceFormats2KHR(_)
        | Call::vkGetPhysicalDeviceXlibPresentationSupportKHR(_)
        | Call::vkGetPhysicalDeviceXcbPresentationSupportKHR(_)
        | Call::vkGetPhysicalDeviceWaylandPresentationSupportKHR(_)
        | Call::vkGetPhysicalDevicePresentRectanglesKHR(_)
        | Call::vkGetDeviceGroupSurfacePresentModesKHR(_)
        | Call::vkGetDeviceGroupPresentCapabilitiesKHR(_)
        | Call::vkGetSwapchainStatusKHR(_)
        | Call::vkWaitForPresentKHR(_)
        | Call::vkReleaseSwapchainImagesEXT(_) => Ok(()),
        Call::vkCreateSwapchainKHR(p) => {
            if !captured_ok {
                return Ok(());
            }
            let ci = p
                .p_create_info
                .as_deref()
                .ok_or_else(|| other("no create info"))?;
            let mut view_formats = Vec::new();
            for n in &ci.p_next {
                if let PNext::VkImageFormatListCreateInfo(l) = n {
                    view_formats = l
                        .p_view_formats
                        .as_deref()
                        .unwrap_or(&[])
                        .iter()
                        .map(|f| vk::Format::from_raw(*f))
                        .collect();
                }
            }
            let mut flags = vk::ImageCreateFlags::empty();
            if ci.flags & vk::SwapchainCreateFlagsKHR::MUTABLE_FORMAT.as_raw() != 0 {
                flags |=
                    vk::ImageCreateFlags::MUTABLE_FORMAT | vk::ImageCreateFlags::EXTENDED_USAGE;
            }
            if ci.flags & vk::SwapchainCreateFlagsKHR::SPLIT_INSTANCE_BIND_REGIONS.as_raw() != 0 {
                flags |= vk::ImageCreateFlags::SPLIT_INSTANCE_BIND_REGIONS;
            }
            let sc = Swapchain {
                device: p.device,
                format: vk::Format::from_raw(ci.image_format),
                extent: vk::Extent2D {
                    width: ci.image_extent.width,
                    height: ci.image_extent.height,
                },
                layers: ci.image_array_layers,
                usage: vk::ImageUsageFlags::from_raw(ci.image_usage),
                flags,
                view_formats,
                images: Vec::new(),
                next: 0,
                window: None,
            };
            let h = p
                .p_swapchain
                .ok_or_else(|| other("the capture recorded no swapchain handle"))?;
            s.create_swapchain(p.device, h, sc)
        }
        Call::vkGetSwapchainImagesKHR(p) => match &p.p_swapchain_images {
            Some(images) if captured_ok => s.swapchain_images(p.swapchain, images),
            _ => Ok(()),
        },
        Call::vkDestroySwapchainKHR(p) => {
            s.destroy_swapchain(p.swapchain);
            Ok(())
        }
        Call::vkAcquireNextImageKHR(p) => acquire(
            s,
            rec,
            p.device,
            p.swapchain,
            p.semaphore,
            p.fence,
            p.p_image_index,
        ),
        Call::vkAcquireNextImage2KHR(p) => {
            let info = p
                .p_acquire_info
                .as_deref()
                .ok_or_else(|| other("no acquire info"))?;
            acquire(
                s,
                rec,
                p.device,
                info.swapchain,
                info.semaphore,
                info.fence,
                p.p_image_index,
            )
        }
        Call::vkQueuePresentKHR(p) => {
            let info = p
                .p_present_info
                .as_deref()
                .ok_or_else(|| other("no present info"))?;
            let waits = info
                .p_wait_semaphores
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|x| {
                    s.lookup(vk::ObjectType::SEMAPHORE, *x)
                        .map(vk::Semaphore::from_raw)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
            if s.window {
                let swapchains = info.p_swapchains.as_deref().unwrap_or(&[]);
                let indices = info.p_image_indices.as_deref().unwrap_or(&[]);
                for (i, (sc, index)) in swapchains.iter().zip(indices).enumerate() {
                    // The first present consumes the app's wait semaphores.
                    let w: &[vk::Semaphore] = if i == 0 { &waits } else { &[] };
                    s.present_window(vk::Queue::from_raw(q), *sc, *index, w)?;
                }
                if !swapchains.is_empty() {
                    return Ok(());
                }
            }
            let device = s.device_for(q)?.captured;
            // Presenting consumes the wait semaphores; an empty submission does the same headless.
            s.empty_submit(
                device,
                Some(vk::Queue::from_raw(q)),
                &waits,
                &[],
                vk::Fence::null(),
            )
        }

        // ---- the app's debug callbacks point into the captured process: never install them -----
        Call::vkCreateDebugUtilsMessengerEXT(p) => {
            let fake = s.fake_handle();
            s.bind(
                vk::ObjectType::DEBUG_UTILS_MESSENGER_EXT,
                p.p_messenger.unwrap_or(0),
                fake,
            );
            Ok(())
        }
        Call::vkCreateDebugReportCallbackEXT(p) => {
            let fake = s.fake_handle();
            s.bind(
                vk::ObjectType::DEBUG_REPORT_CALLBACK_EXT,
                p.p_callback.unwrap_or(0),
                fake,
            );
            Ok(())
        }
        Call::vkDestroyDebugUtilsMessengerEXT(_)
        | Call::vkDestroyDebugReportCallbackEXT(_)
        | Call::vkSubmitDebugUtilsMessageEXT(_)
        | Call::vkDebugReportMessageEXT(_) => Ok(()),

        _ => generic(s, call, rec),
    }
}

/// An extension command from the table loaded at device creation: loading the extension's
/// function table on every recorded command would cost a `vkGetDeviceProcAddr` per entry.
fn loaded<F>(f: Option<F>, name: &str) -> Result<F, ReplayError> {
    f.ok_or_else(|| ReplayError::Other(format!("{name} is not available on the replay device")))
}

/// The replay device and command buffer for a captured command buffer (the device borrowed, not
/// cloned: a clone copies ash's whole function table on every recorded command).
fn cmd<'s>(
    s: &'s Session<'_>,
    captured: u64,
) -> Result<(&'s ash::Device, vk::CommandBuffer), ReplayError> {
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, captured)?;
    Ok((&s.device_for(cb)?.device, vk::CommandBuffer::from_raw(cb)))
}

fn lookup_all<T: vk::Handle>(
    s: &Session<'_>,
    ty: vk::ObjectType,
    v: &Option<Vec<u64>>,
) -> Result<Vec<T>, ReplayError> {
    v.as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|h| s.lookup(ty, *h).map(T::from_raw))
        .collect()
}

unsafe fn submit(
    s: &mut Session<'_>,
    rec: &record::Call,
    p: &vkstream::params::vkQueueSubmit,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
    let fence = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, p.fence)?);
    struct One {
        wait: Vec<vk::Semaphore>,
        stages: Vec<vk::PipelineStageFlags>,
        cbs: Vec<vk::CommandBuffer>,
        signal: Vec<vk::Semaphore>,
        timeline: Option<(Vec<u64>, Vec<u64>)>,
        pass: Option<u32>,
    }
    let mut all = Vec::new();
    for si in p.p_submits.as_deref().unwrap_or(&[]) {
        let mut one = One {
            wait: lookup_all(s, vk::ObjectType::SEMAPHORE, &si.p_wait_semaphores)?,
            stages: si
                .p_wait_dst_stage_mask
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|m| vk::PipelineStageFlags::from_raw(*m))
                .collect(),
            cbs: lookup_all(s, vk::ObjectType::COMMAND_BUFFER, &si.p_command_buffers)?,
            signal: lookup_all(s, vk::ObjectType::SEMAPHORE, &si.p_signal_semaphores)?,
            timeline: None,
            pass: None,
        };
        for n in &si.p_next {
            match n {
                PNext::VkTimelineSemaphoreSubmitInfo(t) => {
                    one.timeline = Some((
                        t.p_wait_semaphore_values.clone().unwrap_or_default(),
                        t.p_signal_semaphore_values.clone().unwrap_or_default(),
                    ))
                }
                PNext::VkPerformanceQuerySubmitInfoKHR(x) => one.pass = Some(x.counter_pass_index),
                o => {
                    return Err(other(format!(
                        "VkSubmitInfo chains {o:?}, which the replayer cannot re-create"
                    )))
                }
            }
        }
        // Every replayed performance pool needs one pass (crate::perf): the app's further passes
        // would re-run its queries unreset, so only their synchronisation is kept.
        if one.pass.is_some_and(|k| k > 0) {
            one.cbs.clear();
        }
        one.pass = one.pass.map(|_| 0);
        all.push(one);
    }
    let mut timelines: Vec<vk::TimelineSemaphoreSubmitInfo<'_>> = all
        .iter()
        .map(|o| match &o.timeline {
            Some((w, sg)) => vk::TimelineSemaphoreSubmitInfo::default()
                .wait_semaphore_values(w)
                .signal_semaphore_values(sg),
            None => vk::TimelineSemaphoreSubmitInfo::default(),
        })
        .collect();
    let mut passes: Vec<vk::PerformanceQuerySubmitInfoKHR<'_>> = all
        .iter()
        .map(|o| {
            vk::PerformanceQuerySubmitInfoKHR::default().counter_pass_index(o.pass.unwrap_or(0))
        })
        .collect();
    let mut infos = Vec::new();
    for (i, (o, (t, pq))) in all
        .iter()
        .zip(timelines.iter_mut().zip(passes.iter_mut()))
        .enumerate()
    {
        let _ = i;
        let mut si = vk::SubmitInfo::default()
            .wait_semaphores(&o.wait)
            .wait_dst_stage_mask(&o.stages)
            .command_buffers(&o.cbs)
            .signal_semaphores(&o.signal);
        if o.timeline.is_some() {
            si = si.push_next(t);
        }
        if o.pass.is_some() {
            si = si.push_next(pq);
        }
        infos.push(si);
    }
    let d = s.device_for(q)?;
    d.device
        .queue_submit(vk::Queue::from_raw(q), &infos, fence)
        .map_err(|e| ReplayError::vk("vkQueueSubmit", e))
}

unsafe fn submit2(
    s: &mut Session<'_>,
    rec: &record::Call,
    p: &vkstream::params::vkQueueSubmit2,
    khr: bool,
) -> Result<(), ReplayError> {
    if rec.result < 0 {
        return Ok(());
    }
    let q = s.lookup(vk::ObjectType::QUEUE, p.queue)?;
    let fence = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, p.fence)?);
    let sem = |s: &Session<'_>,
               v: &Option<Vec<types::VkSemaphoreSubmitInfo>>|
     -> Result<Vec<vk::SemaphoreSubmitInfo<'static>>, ReplayError> {
        v.as_deref()
            .unwrap_or(&[])
            .iter()
            .map(|x| {
                Ok(vk::SemaphoreSubmitInfo::default()
                    .semaphore(vk::Semaphore::from_raw(
                        s.lookup(vk::ObjectType::SEMAPHORE, x.semaphore)?,
                    ))
                    .value(x.value)
                    .stage_mask(vk::PipelineStageFlags2::from_raw(x.stage_mask))
                    .device_index(x.device_index))
            })
            .collect()
    };
    let mut parts = Vec::new();
    for si in p.p_submits.as_deref().unwrap_or(&[]) {
        let cbs: Vec<vk::CommandBufferSubmitInfo<'static>> = si
            .p_command_buffer_infos
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .map(|c| {
                Ok(vk::CommandBufferSubmitInfo::default()
                    .command_buffer(vk::CommandBuffer::from_raw(
                        s.lookup(vk::ObjectType::COMMAND_BUFFER, c.command_buffer)?,
                    ))
                    .device_mask(c.device_mask))
            })
            .collect::<Result<_, ReplayError>>()?;
        let mut pass = None;
        for n in &si.p_next {
            match n {
                PNext::VkPerformanceQuerySubmitInfoKHR(x) => pass = Some(x.counter_pass_index),
                o => {
                    return Err(other(format!(
                        "VkSubmitInfo2 chains {o:?}, which the replayer cannot re-create"
                    )))
                }
            }
        }
        // As in vkQueueSubmit: the app's passes above 0 keep only their synchronisation.
        let cbs = if pass.is_some_and(|k| k > 0) {
            Vec::new()
        } else {
            cbs
        };
        let pass = pass.map(|_| 0u32);
        parts.push((
            si.flags,
            sem(s, &si.p_wait_semaphore_infos)?,
            cbs,
            sem(s, &si.p_signal_semaphore_infos)?,
            pass,
        ));
    }
    let mut passes: Vec<vk::PerformanceQuerySubmitInfoKHR<'_>> = parts
        .iter()
        .map(|p| vk::PerformanceQuerySubmitInfoKHR::default().counter_pass_index(p.4.unwrap_or(0)))
        .collect();
    let infos: Vec<vk::SubmitInfo2<'_>> = parts
        .iter()
        .zip(passes.iter_mut())
        .map(|((flags, w, c, sg, pass), pq)| {
            let mut i = vk::SubmitInfo2::default()
                .flags(vk::SubmitFlags::from_raw(*flags))
                .wait_semaphore_infos(w)
                .command_buffer_infos(c)
                .signal_semaphore_infos(sg);
            if pass.is_some() {
                i = i.push_next(pq);
            }
            i
        })
        .collect();
    let d = s.device_for(q)?;
    let r = if khr {
        ash::khr::synchronization2::Device::new(s.instance()?, &d.device).queue_submit2(
            vk::Queue::from_raw(q),
            &infos,
            fence,
        )
    } else {
        d.device
            .queue_submit2(vk::Queue::from_raw(q), &infos, fence)
    };
    r.map_err(|e| ReplayError::vk("vkQueueSubmit2", e))
}

fn created_surface(call: &Call) -> Option<u64> {
    match call {
        Call::vkCreateXlibSurfaceKHR(p) => p.p_surface,
        Call::vkCreateXcbSurfaceKHR(p) => p.p_surface,
        Call::vkCreateWaylandSurfaceKHR(p) => p.p_surface,
        Call::vkCreateHeadlessSurfaceEXT(p) => p.p_surface,
        Call::vkCreateDisplayPlaneSurfaceKHR(p) => p.p_surface,
        _ => None,
    }
}

unsafe fn bind_buffer(
    s: &mut Session<'_>,
    device: u64,
    buffer: u64,
    memory: u64,
    offset: u64,
) -> Result<(), ReplayError> {
    let b = vk::Buffer::from_raw(s.lookup(vk::ObjectType::BUFFER, buffer)?);
    let req = s.device(device)?.device.get_buffer_memory_requirements(b);
    s.prepare_bind(memory, req, offset)?;
    s.buffer_memory.insert(buffer, (memory, offset));
    Ok(())
}

unsafe fn bind_image(
    s: &mut Session<'_>,
    device: u64,
    image: u64,
    memory: u64,
    offset: u64,
) -> Result<(), ReplayError> {
    let i = vk::Image::from_raw(s.lookup(vk::ObjectType::IMAGE, image)?);
    let req = s.device(device)?.device.get_image_memory_requirements(i);
    s.prepare_bind(memory, req, offset)
}

unsafe fn wait_fences(
    s: &Session<'_>,
    device: u64,
    fences: &[vk::Fence],
    all: bool,
) -> Result<(), ReplayError> {
    if fences.is_empty() {
        return Ok(());
    }
    let d = s.device(device)?;
    match d
        .device
        .wait_for_fences(fences, all, WAIT_TIMEOUT.as_nanos() as u64)
    {
        Ok(()) => Ok(()),
        Err(vk::Result::TIMEOUT) => Err(other(format!(
            "the capture saw the fences signaled but the replay's did not signal within {} s",
            WAIT_TIMEOUT.as_secs()
        ))),
        Err(e) => Err(ReplayError::vk("vkWaitForFences", e)),
    }
}

/// Emulated acquire: the image index the app got in the capture, with the semaphore and fence
/// signaled through an empty submission.
unsafe fn acquire(
    s: &mut Session<'_>,
    rec: &record::Call,
    device: u64,
    swapchain: u64,
    semaphore: u64,
    fence: u64,
    index: Option<u32>,
) -> Result<(), ReplayError> {
    let ok = rec.result == vk::Result::SUCCESS.as_raw()
        || rec.result == vk::Result::SUBOPTIMAL_KHR.as_raw();
    if !ok {
        return Ok(());
    }
    let sem = vk::Semaphore::from_raw(s.lookup(vk::ObjectType::SEMAPHORE, semaphore)?);
    let fen = vk::Fence::from_raw(s.lookup(vk::ObjectType::FENCE, fence)?);
    // The app then uses the captured image handle of that index, already bound to ours.
    if let Some(sc) = s.swapchains.get_mut(&swapchain) {
        let n = sc.images.len().max(1) as u32;
        sc.next = index.unwrap_or(sc.next + 1) % n;
    }
    let signal: Vec<vk::Semaphore> = if sem == vk::Semaphore::null() {
        vec![]
    } else {
        vec![sem]
    };
    s.empty_submit(device, None, &[], &signal, fen)
}

/// Everything not hand-written: the generated dispatch, then a check that the replay did not fail
/// where the capture succeeded.
unsafe fn generic(s: &mut Session<'_>, call: &Call, rec: &record::Call) -> Result<(), ReplayError> {
    // Physical-device queries change no state, and the replay device is described by the
    // replayer's own queries. Re-issuing them is harmful: the loader aborts the process when an
    // extension query (e.g. video capabilities) reaches a driver that lacks the extension.
    if call.name().starts_with("vkGetPhysicalDevice") {
        return Ok(());
    }
    let r = match crate::glue::dispatch(s, call) {
        // A command of an extension --drop-unsupported left out.
        Err(ReplayError::Unavailable(_)) if !s.dropped.is_empty() => {
            s.skipped_calls += 1;
            return Ok(());
        }
        r => r?,
    };
    if r.as_raw() < 0 && rec.result >= 0 {
        return Err(ReplayError::Other(format!(
            "the replay returned {r} where the capture got {}",
            vk::Result::from_raw(rec.result)
        )));
    }
    Ok(())
}

/// Works out how captured performance pool `captured` (created by call `seq`) is measured on the
/// replay GPU's queue family `family` and returns the counter indices of this replay pass.
fn plan_perf_pool(
    s: &mut Session<'_>,
    seq: u64,
    device_captured: u64,
    captured: u64,
    family: u32,
) -> Result<Vec<u32>, ReplayError> {
    let descs = s.perf.pool_counters.get(&seq).cloned().unwrap_or_default();
    if descs.is_empty() {
        return Err(other(
            "the trace holds no counter descriptions for this performance query pool",
        ));
    }
    let device = s.device_counters(family)?;
    let matched = crate::perf::match_counters(&descs, &device);
    for (d, m) in descs.iter().zip(&matched) {
        if m.is_none() {
            let w = format!(
                "performance counter \"{}\" ({}) is not on the replay GPU; it is not measured",
                d.name,
                d.uuid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            );
            if !s.perf.warnings.contains(&w) {
                s.perf.warnings.push(w);
            }
        }
    }
    if matched.iter().all(Option::is_none) {
        return Err(other(format!(
            "none of this pool's {} performance counters ({}) exists on the replay GPU (matched by UUID, then by name and unit)",
            descs.len(),
            descs
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let plan =
        crate::perf::plan(matched, |ix| s.perf_passes(family, ix), s.perf.forced).map_err(other)?;
    s.hold_profiling_lock(device_captured, "performance query pools")?;
    let indices = plan.indices_for(s.perf.pass);
    s.perf.passes_needed = s.perf.passes_needed.max(plan.groups.len() as u32);
    s.perf.plans.insert(captured, plan);
    Ok(indices)
}

/// A template update's data with every handle translated to the replay's (see `crate::templates`).
fn template_data(
    s: &Session<'_>,
    template: u64,
    data: Option<&[u8]>,
) -> Result<Vec<u64>, ReplayError> {
    let entries = s.templates.get(&template).ok_or_else(|| {
        other(format!(
            "descriptor update template 0x{template:x} was never created in the trace"
        ))
    })?;
    let mut bytes = data.unwrap_or(&[]).to_vec();
    crate::templates::translate(entries, &mut bytes, |ty, h| s.lookup(ty, h).ok())
        .map_err(other)?;
    // Handed to the driver as an 8-byte aligned buffer.
    let mut out = vec![0u64; bytes.len().div_ceil(8)];
    // SAFETY: out holds at least bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast(), bytes.len()) };
    Ok(out)
}
