//! vkCmdCopyQueryPoolResults on emulated performance pools. Counter values are differences and sums
//! of timestamps, which a transfer cannot compute, so a copy records:
//! 1. the internal queries' raw 64-bit results (WAIT) into the pool's layer-owned buffer,
//! 2. a compute dispatch (shaders/resolve.comp) that writes each counter's value — the same bytes
//!    vkGetQueryPoolResults gives, by the same integer arithmetic (`counters::scale_ticks`) — into
//!    the results region of that buffer,
//! 3. vkCmdCopyBuffer of each query's row to the app's dstBuffer at dstOffset + i * stride,
//!
//! with barriers between, then restores the compute pipeline, descriptor sets and push constants the
//! app had bound (tracked by the bind intercepts below). Every submit measures every counter, so the
//! internal queries hold the last submitted recording: once each pass was submitted, a copy executed
//! afterwards gives what vkGetQueryPoolResults gives.
//!
//! "Render pass duration" sums the pairs of the render pass instances the recording measured. That
//! count is known when the query ends, not when the copy is recorded (one recording serves every
//! pass), so `after_end` writes it into the pool buffer with vkCmdFillBuffer and writes timestamps
//! into the unused pair slots so that the WAIT copy never waits on a timestamp that is never written.
//!
//! Layer objects are created without the app's allocator (they are the layer's, not the app's).

use super::*;

/// The compiled shaders/resolve.comp (regenerate with shaders/build.sh).
const RESOLVE_SPV: &[u8] = include_bytes!("../../shaders/resolve.comp.spv");
const LOCAL_SIZE: u32 = 64;
/// The counter program's kinds (resolve.comp).
const KIND_CB_DURATION: u32 = 0;
const KIND_RP_DURATION: u32 = 1;
const KIND_STATISTIC: u32 = 2;
const KIND_SAMPLES: u32 = 3;

/// resolve.comp's push constants, word for word.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq)]
pub(super) struct Push {
    first: u32,
    count: u32,
    n: u32,
    ts_off: u32,
    ts_slots: u32,
    stats_off: u32,
    nstats: u32,
    occ_off: u32,
    meta_off: u32,
    out_off: u32,
    valid_bits: u32,
    period_m: u32,
    period_s: i32,
    rp_slots: u32,
}

impl Push {
    fn bytes(&self) -> [u8; std::mem::size_of::<Push>()] {
        // SAFETY: repr(C), 4-byte fields only, no padding.
        unsafe { std::mem::transmute_copy(self) }
    }
}

/// The device functions a copy needs, checked once.
#[derive(Clone, Copy)]
struct Fns {
    barrier: vk::PFN_vkCmdPipelineBarrier,
    copy_query: vk::PFN_vkCmdCopyQueryPoolResults,
    bind_pipeline: vk::PFN_vkCmdBindPipeline,
    bind_sets: vk::PFN_vkCmdBindDescriptorSets,
    push: vk::PFN_vkCmdPushConstants,
    dispatch: vk::PFN_vkCmdDispatch,
    copy_buffer: vk::PFN_vkCmdCopyBuffer,
    fill: vk::PFN_vkCmdFillBuffer,
    write_timestamp: vk::PFN_vkCmdWriteTimestamp,
}

/// Per device (that enabled VK_KHR_performance_query): the resolve pipeline.
pub(super) struct Copier {
    module: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    fns: Fns,
}

macro_rules! need {
    ($f:expr, $name:literal) => {
        $f.ok_or(concat!("the driver has no ", $name))?
    };
}

fn check(r: vk::Result, what: &str) -> Result<(), String> {
    if r == vk::Result::SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r}"))
    }
}

impl Copier {
    pub(super) unsafe fn new(device: vk::Device, f: &DeviceFns) -> Result<Copier, String> {
        let fns = Fns {
            barrier: need!(f.cmd_pipeline_barrier, "vkCmdPipelineBarrier"),
            copy_query: need!(f.cmd_copy_query_pool_results, "vkCmdCopyQueryPoolResults"),
            bind_pipeline: need!(f.cmd_bind_pipeline, "vkCmdBindPipeline"),
            bind_sets: need!(f.cmd_bind_descriptor_sets, "vkCmdBindDescriptorSets"),
            push: need!(f.cmd_push_constants, "vkCmdPushConstants"),
            dispatch: need!(f.cmd_dispatch, "vkCmdDispatch"),
            copy_buffer: need!(f.cmd_copy_buffer, "vkCmdCopyBuffer"),
            fill: need!(f.cmd_fill_buffer, "vkCmdFillBuffer"),
            write_timestamp: need!(f.cmd_write_timestamp, "vkCmdWriteTimestamp"),
        };
        let create_module = need!(f.create_shader_module, "vkCreateShaderModule");
        let destroy_module = need!(f.destroy_shader_module, "vkDestroyShaderModule");
        let create_dsl = need!(
            f.create_descriptor_set_layout,
            "vkCreateDescriptorSetLayout"
        );
        let destroy_dsl = need!(
            f.destroy_descriptor_set_layout,
            "vkDestroyDescriptorSetLayout"
        );
        let create_layout = need!(f.create_pipeline_layout, "vkCreatePipelineLayout");
        let destroy_layout = need!(f.destroy_pipeline_layout, "vkDestroyPipelineLayout");
        let create_pipelines = need!(f.create_compute_pipelines, "vkCreateComputePipelines");
        need!(f.destroy_pipeline, "vkDestroyPipeline");
        need!(f.create_buffer, "vkCreateBuffer");
        need!(f.destroy_buffer, "vkDestroyBuffer");
        need!(
            f.get_buffer_memory_requirements,
            "vkGetBufferMemoryRequirements"
        );
        need!(f.allocate_memory, "vkAllocateMemory");
        need!(f.free_memory, "vkFreeMemory");
        need!(f.bind_buffer_memory, "vkBindBufferMemory");
        need!(f.map_memory, "vkMapMemory");
        need!(f.create_descriptor_pool, "vkCreateDescriptorPool");
        need!(f.destroy_descriptor_pool, "vkDestroyDescriptorPool");
        need!(f.allocate_descriptor_sets, "vkAllocateDescriptorSets");
        need!(f.update_descriptor_sets, "vkUpdateDescriptorSets");

        let words = ash::util::read_spv(&mut std::io::Cursor::new(RESOLVE_SPV))
            .map_err(|e| format!("resolve.comp.spv: {e}"))?;
        let mut module = vk::ShaderModule::null();
        check(
            create_module(
                device,
                &vk::ShaderModuleCreateInfo::default().code(&words),
                std::ptr::null(),
                &mut module,
            ),
            "vkCreateShaderModule",
        )?;
        let binding = [vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        let mut set_layout = vk::DescriptorSetLayout::null();
        let r = create_dsl(
            device,
            &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
            std::ptr::null(),
            &mut set_layout,
        );
        if let Err(e) = check(r, "vkCreateDescriptorSetLayout") {
            destroy_module(device, module, std::ptr::null());
            return Err(e);
        }
        let sets = [set_layout];
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(std::mem::size_of::<Push>() as u32)];
        let mut layout = vk::PipelineLayout::null();
        let r = create_layout(
            device,
            &vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&sets)
                .push_constant_ranges(&ranges),
            std::ptr::null(),
            &mut layout,
        );
        if let Err(e) = check(r, "vkCreatePipelineLayout") {
            destroy_dsl(device, set_layout, std::ptr::null());
            destroy_module(device, module, std::ptr::null());
            return Err(e);
        }
        let ci = [vk::ComputePipelineCreateInfo::default()
            .stage(
                vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::COMPUTE)
                    .module(module)
                    .name(c"main"),
            )
            .layout(layout)];
        let mut pipeline = vk::Pipeline::null();
        let r = create_pipelines(
            device,
            vk::PipelineCache::null(),
            1,
            ci.as_ptr(),
            std::ptr::null(),
            &mut pipeline,
        );
        if let Err(e) = check(r, "vkCreateComputePipelines") {
            destroy_layout(device, layout, std::ptr::null());
            destroy_dsl(device, set_layout, std::ptr::null());
            destroy_module(device, module, std::ptr::null());
            return Err(e);
        }
        Ok(Copier {
            module,
            set_layout,
            layout,
            pipeline,
            fns,
        })
    }

    pub(super) unsafe fn destroy(
        &self,
        dev: &Device,
        _app_allocator: *const vk::AllocationCallbacks<'_>,
    ) {
        let d = dev.handle;
        let nul = std::ptr::null();
        if let Some(f) = dev.f.destroy_pipeline {
            f(d, self.pipeline, nul);
        }
        if let Some(f) = dev.f.destroy_pipeline_layout {
            f(d, self.layout, nul);
        }
        if let Some(f) = dev.f.destroy_descriptor_set_layout {
            f(d, self.set_layout, nul);
        }
        if let Some(f) = dev.f.destroy_shader_module {
            f(d, self.module, nul);
        }
    }
}

/// Word offsets of one pool's buffer regions (resolve.comp's `w`); 64-bit values take two words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    /// Counters per query; the program (one word each) is at word 0.
    pub n: u32,
    /// Render pass instances measured, one word per query.
    pub meta_off: u32,
    pub ts_off: u32,
    pub stats_off: u32,
    pub nstats: u32,
    pub occ_off: u32,
    pub out_off: u32,
    pub words: u32,
}

impl Layout {
    pub fn new(n: u32, queries: u32, ts_slots: u32, nstats: u32, occlusion: bool) -> Layout {
        let meta_off = n;
        let even = |w: u32| w.next_multiple_of(2);
        let ts_off = even(meta_off + queries);
        let stats_off = ts_off + 2 * queries * ts_slots;
        let occ_off = stats_off + 2 * queries * nstats;
        let out_off = occ_off + if occlusion { 2 * queries } else { 0 };
        Layout {
            n,
            meta_off,
            ts_off,
            stats_off,
            nstats,
            occ_off,
            out_off,
            words: out_off + 2 * queries * n,
        }
    }
}

/// The counter program word of catalog counter `c` in a pool whose statistics pool has `stats`.
pub(super) fn program_word(c: usize, stats: vk::QueryPipelineStatisticFlags) -> u32 {
    match CATALOG[c].source {
        Source::CommandBufferDuration => KIND_CB_DURATION,
        Source::RenderPassDuration => KIND_RP_DURATION,
        Source::Statistic(bit) => {
            // Results come in bit order of the enabled statistics.
            let below = stats.as_raw() & (bit.as_raw() - 1);
            KIND_STATISTIC | below.count_ones() << 8
        }
        Source::SamplesPassed => KIND_SAMPLES,
    }
}

/// Per performance pool: a host-visible buffer (program, render pass counts, raw results, values)
/// and the descriptor set that binds it.
pub(super) struct PoolCopy {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    dpool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    layout: Layout,
}

impl PoolCopy {
    pub(super) unsafe fn new(
        dev: &Device,
        p: &PerfPool,
        _app_allocator: *const vk::AllocationCallbacks<'_>,
    ) -> Result<PoolCopy, String> {
        let (Some(create_buffer), Some(reqs), Some(alloc), Some(bind), Some(map)) = (
            dev.f.create_buffer,
            dev.f.get_buffer_memory_requirements,
            dev.f.allocate_memory,
            dev.f.bind_buffer_memory,
            dev.f.map_memory,
        ) else {
            return Err("missing buffer functions".into());
        };
        let (Some(create_dpool), Some(alloc_sets), Some(update)) = (
            dev.f.create_descriptor_pool,
            dev.f.allocate_descriptor_sets,
            dev.f.update_descriptor_sets,
        ) else {
            return Err("missing descriptor functions".into());
        };
        let Some(copier) = &dev.copier else {
            return Err("no resolve pipeline".into());
        };
        let d = dev.handle;
        let nul = std::ptr::null();
        let stats = p.stats.map(|(_, f)| f).unwrap_or_default();
        let layout = Layout::new(
            p.counters.len() as u32,
            p.count.max(1),
            p.ts_slots,
            stats.as_raw().count_ones(),
            p.occlusion.is_some(),
        );
        let size = 4 * layout.words as u64;
        let mut pc = PoolCopy {
            buffer: vk::Buffer::null(),
            memory: vk::DeviceMemory::null(),
            dpool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            layout,
        };
        // From here `pc` owns what was made; a failure destroys it.
        let fail = |pc: &PoolCopy, e: String| {
            pc.destroy(dev, nul);
            Err(e)
        };
        let r = create_buffer(
            d,
            &vk::BufferCreateInfo::default().size(size).usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            ),
            nul,
            &mut pc.buffer,
        );
        if let Err(e) = check(r, "vkCreateBuffer") {
            return fail(&pc, e);
        }
        let mut req = vk::MemoryRequirements::default();
        reqs(d, pc.buffer, &mut req);
        // The spec guarantees a host-visible coherent type for every buffer.
        let want = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let mp = &dev.mem_props;
        let Some(ty) = (0..mp.memory_type_count.min(vk::MAX_MEMORY_TYPES as u32)).find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && mp.memory_types[i as usize].property_flags.contains(want)
        }) else {
            return fail(&pc, "no host-visible coherent memory type".into());
        };
        let r = alloc(
            d,
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty),
            nul,
            &mut pc.memory,
        );
        if let Err(e) = check(r, "vkAllocateMemory") {
            return fail(&pc, e);
        }
        if let Err(e) = check(bind(d, pc.buffer, pc.memory, 0), "vkBindBufferMemory") {
            return fail(&pc, e);
        }
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let r = map(
            d,
            pc.memory,
            0,
            vk::WHOLE_SIZE,
            vk::MemoryMapFlags::empty(),
            &mut ptr,
        );
        if let Err(e) = check(r, "vkMapMemory") {
            return fail(&pc, e);
        }
        // Program, zero counts and results; host-coherent, and written before any submit that
        // reads it. The memory stays mapped until it is freed.
        let w = std::slice::from_raw_parts_mut(ptr as *mut u32, layout.words as usize);
        w.fill(0);
        for (k, &c) in p.counters.iter().enumerate() {
            w[k] = program_word(c, stats);
        }
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 1,
        }];
        let r = create_dpool(
            d,
            &vk::DescriptorPoolCreateInfo::default()
                .max_sets(1)
                .pool_sizes(&sizes),
            nul,
            &mut pc.dpool,
        );
        if let Err(e) = check(r, "vkCreateDescriptorPool") {
            return fail(&pc, e);
        }
        let layouts = [copier.set_layout];
        let r = alloc_sets(
            d,
            &vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pc.dpool)
                .set_layouts(&layouts),
            &mut pc.set,
        );
        if let Err(e) = check(r, "vkAllocateDescriptorSets") {
            return fail(&pc, e);
        }
        let info = [vk::DescriptorBufferInfo {
            buffer: pc.buffer,
            offset: 0,
            range: vk::WHOLE_SIZE,
        }];
        let write = vk::WriteDescriptorSet::default()
            .dst_set(pc.set)
            .dst_binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(&info);
        update(d, 1, &write, 0, std::ptr::null());
        Ok(pc)
    }

    pub(super) unsafe fn destroy(
        &self,
        dev: &Device,
        _app_allocator: *const vk::AllocationCallbacks<'_>,
    ) {
        let d = dev.handle;
        let nul = std::ptr::null();
        if self.dpool != vk::DescriptorPool::null() {
            if let Some(f) = dev.f.destroy_descriptor_pool {
                f(d, self.dpool, nul);
            }
        }
        if self.buffer != vk::Buffer::null() {
            if let Some(f) = dev.f.destroy_buffer {
                f(d, self.buffer, nul);
            }
        }
        if self.memory != vk::DeviceMemory::null() {
            if let Some(f) = dev.f.free_memory {
                f(d, self.memory, nul);
            }
        }
    }

    /// Right after a performance query's end (outside any render pass, as its counters' scopes
    /// require): timestamps into the unused render-pass pair slots, and the measured count into the
    /// buffer for resolve.comp.
    pub(super) unsafe fn after_end(
        &self,
        dev: &Device,
        cb: vk::CommandBuffer,
        p: &PerfPool,
        query: u32,
        render_passes: u32,
    ) {
        let Some(copier) = &dev.copier else { return };
        let f = copier.fns;
        if !p.render_pass_duration {
            return;
        }
        let measured = render_passes.min(RP_SLOTS);
        for slot in (2 + 2 * measured)..p.ts_slots {
            (f.write_timestamp)(
                cb,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                p.ts,
                query * p.ts_slots + slot,
            );
        }
        // An earlier copy's dispatch may still read the count (write after read).
        (f.barrier)(
            cb,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        );
        (f.fill)(
            cb,
            self.buffer,
            4 * (self.layout.meta_off + query) as u64,
            4,
            measured,
        );
    }
}

/// What the copy's checks decide.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    Flags,
    Range,
    Alignment,
    Stride,
}

/// The spec's rules for copying a performance pool, as far as the layer can see them.
pub(super) fn check_copy(
    flags: vk::QueryResultFlags,
    first: u32,
    count: u32,
    pool_count: u32,
    offset: u64,
    stride: u64,
    row: u64,
) -> Result<(), (Refusal, String)> {
    let bad = vk::QueryResultFlags::WITH_AVAILABILITY
        | vk::QueryResultFlags::PARTIAL
        | vk::QueryResultFlags::TYPE_64
        | vk::QueryResultFlags::WITH_STATUS_KHR;
    if flags.intersects(bad) {
        return Err((Refusal::Flags, format!("VUID-vkCmdCopyQueryPoolResults-queryType-03233: flags {flags:?} are not allowed for a performance query pool")));
    }
    if first >= pool_count || first.checked_add(count).is_none_or(|e| e > pool_count) {
        return Err((Refusal::Range, format!("VUID-vkCmdCopyQueryPoolResults-firstQuery-00820/00821: queries {first}..{} exceed the pool's {pool_count}", first as u64 + count as u64)));
    }
    if !offset.is_multiple_of(4) || !stride.is_multiple_of(4) {
        return Err((Refusal::Alignment, format!("VUID-vkCmdCopyQueryPoolResults-flags-00822: dstOffset {offset} and stride {stride} must be multiples of 4")));
    }
    if count > 1 && stride < row {
        return Err((Refusal::Stride, format!("stride {stride} is smaller than one query's {row} bytes of counter results; the rows would overlap")));
    }
    Ok(())
}

/// Records the copy (see the module comment); false when it was refused (reported, nothing recorded).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn record_copy(
    dev: &Device,
    cb: vk::CommandBuffer,
    p: &PerfPool,
    bound: Option<&Bound>,
    first: u32,
    count: u32,
    dst: vk::Buffer,
    offset: u64,
    stride: u64,
    flags: vk::QueryResultFlags,
) -> bool {
    let n = p.counters.len() as u32;
    let row = 8 * n as u64;
    if let Err((_, e)) = check_copy(flags, first, count, p.count, offset, stride, row) {
        report(&format!("{e}; the copy was not recorded"));
        return false;
    }
    let (Some(copier), Some(pc)) = (&dev.copier, &p.copy) else {
        report("vkCmdCopyQueryPoolResults on a performance pool: the layer could not set up its copy resources (see the earlier message); the copy was not recorded (use vkGetQueryPoolResults)");
        return false;
    };
    if count == 0 {
        return true;
    }
    let f = copier.fns;
    let l = pc.layout;
    let barrier = |src_stage, src, dst_stage, dst| {
        let b = vk::MemoryBarrier::default()
            .src_access_mask(src)
            .dst_access_mask(dst);
        (f.barrier)(
            cb,
            src_stage,
            dst_stage,
            vk::DependencyFlags::empty(),
            1,
            &b,
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        );
    };
    let raw = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT;
    // Earlier copies of this pool (their dispatch and their transfers) before these writes.
    barrier(
        vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
        vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::TRANSFER_WRITE,
    );
    if p.durations {
        (f.copy_query)(
            cb,
            p.ts,
            first * p.ts_slots,
            count * p.ts_slots,
            pc.buffer,
            4 * (l.ts_off + 2 * first * p.ts_slots) as u64,
            8,
            raw,
        );
    }
    if let Some((s, _)) = p.stats {
        (f.copy_query)(
            cb,
            s,
            first,
            count,
            pc.buffer,
            4 * (l.stats_off + 2 * first * l.nstats) as u64,
            8 * l.nstats as u64,
            raw,
        );
    }
    if let Some(o) = p.occlusion {
        (f.copy_query)(
            cb,
            o,
            first,
            count,
            pc.buffer,
            4 * (l.occ_off + 2 * first) as u64,
            8,
            raw,
        );
    }
    barrier(
        vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::TRANSFER_WRITE,
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
    );
    let (period_m, period_s) = counters::period_parts(dev.period);
    let push = Push {
        first,
        count,
        n,
        ts_off: l.ts_off,
        ts_slots: p.ts_slots,
        stats_off: l.stats_off,
        nstats: l.nstats,
        occ_off: l.occ_off,
        meta_off: l.meta_off,
        out_off: l.out_off,
        valid_bits: dev.valid_bits.get(p.family as usize).copied().unwrap_or(64),
        period_m,
        period_s,
        rp_slots: RP_SLOTS,
    };
    let bytes = push.bytes();
    (f.bind_pipeline)(cb, vk::PipelineBindPoint::COMPUTE, copier.pipeline);
    (f.bind_sets)(
        cb,
        vk::PipelineBindPoint::COMPUTE,
        copier.layout,
        0,
        1,
        &pc.set,
        0,
        std::ptr::null(),
    );
    (f.push)(
        cb,
        copier.layout,
        vk::ShaderStageFlags::COMPUTE,
        0,
        bytes.len() as u32,
        bytes.as_ptr() as *const c_void,
    );
    (f.dispatch)(cb, (count * n).div_ceil(LOCAL_SIZE), 1, 1);
    barrier(
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::AccessFlags::SHADER_WRITE,
        vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::TRANSFER_READ,
    );
    let regions: Vec<vk::BufferCopy> = (0..count)
        .map(|i| vk::BufferCopy {
            src_offset: 4 * (l.out_off + 2 * (first + i) * n) as u64,
            dst_offset: offset + i as u64 * stride,
            size: row,
        })
        .collect();
    (f.copy_buffer)(cb, pc.buffer, dst, regions.len() as u32, regions.as_ptr());
    if let Some(b) = bound {
        b.restore(&f);
    }
    true
}

// ---- the app's compute state ----------------------------------------------------------------------

struct SetBind {
    layout: vk::PipelineLayout,
    first: u32,
    sets: Vec<vk::DescriptorSet>,
    dynamic: Vec<u32>,
}

struct PushRec {
    layout: vk::PipelineLayout,
    stages: vk::ShaderStageFlags,
    offset: u32,
    data: Vec<u8>,
}

/// What a command buffer has bound for compute (and every push constant, which a push with another
/// layout may disturb), so a copy's dispatch can put it back.
#[derive(Default)]
pub(super) struct Bound {
    cb: vk::CommandBuffer,
    pipeline: Option<vk::Pipeline>,
    sets: Vec<SetBind>,
    push: Vec<PushRec>,
}

/// Push-constant records kept per command buffer (later ones replace the ranges they cover).
const MAX_PUSH: usize = 64;

impl Bound {
    unsafe fn restore(&self, f: &Fns) {
        let cb = self.cb;
        if cb == vk::CommandBuffer::null() {
            return;
        }
        if let Some(p) = self.pipeline {
            (f.bind_pipeline)(cb, vk::PipelineBindPoint::COMPUTE, p);
        }
        for s in &self.sets {
            (f.bind_sets)(
                cb,
                vk::PipelineBindPoint::COMPUTE,
                s.layout,
                s.first,
                s.sets.len() as u32,
                s.sets.as_ptr(),
                s.dynamic.len() as u32,
                s.dynamic.as_ptr(),
            );
        }
        for p in &self.push {
            (f.push)(
                cb,
                p.layout,
                p.stages,
                p.offset,
                p.data.len() as u32,
                p.data.as_ptr() as *const c_void,
            );
        }
    }
}

fn bound_of(st: &mut DevState, cb: vk::CommandBuffer) -> Option<&mut Bound> {
    let c = st.cbs.get_mut(&cb.as_raw())?;
    c.bound.cb = cb;
    Some(&mut c.bound)
}

pub(super) unsafe extern "system" fn cmd_bind_pipeline(
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    pipeline: vk::Pipeline,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if bind_point == vk::PipelineBindPoint::COMPUTE {
            if let Some(b) = bound_of(&mut lock(&dev.st), cb) {
                b.pipeline = Some(pipeline);
            }
        }
        if let Some(f) = dev.f.cmd_bind_pipeline {
            f(cb, bind_point, pipeline);
        }
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "system" fn cmd_bind_descriptor_sets(
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    layout: vk::PipelineLayout,
    first: u32,
    n: u32,
    p_sets: *const vk::DescriptorSet,
    n_dynamic: u32,
    p_dynamic: *const u32,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if bind_point == vk::PipelineBindPoint::COMPUTE && !p_sets.is_null() {
            if let Some(b) = bound_of(&mut lock(&dev.st), cb) {
                let end = first.saturating_add(n);
                b.sets
                    .retain(|s| !(s.first >= first && s.first + s.sets.len() as u32 <= end));
                b.sets.push(SetBind {
                    layout,
                    first,
                    sets: std::slice::from_raw_parts(p_sets, n as usize).to_vec(),
                    dynamic: if n_dynamic == 0 || p_dynamic.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(p_dynamic, n_dynamic as usize).to_vec()
                    },
                });
            }
        }
        if let Some(f) = dev.f.cmd_bind_descriptor_sets {
            f(
                cb, bind_point, layout, first, n, p_sets, n_dynamic, p_dynamic,
            );
        }
    })
}

pub(super) unsafe extern "system" fn cmd_push_constants(
    cb: vk::CommandBuffer,
    layout: vk::PipelineLayout,
    stages: vk::ShaderStageFlags,
    offset: u32,
    size: u32,
    p_values: *const c_void,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        if !p_values.is_null() && size > 0 {
            if let Some(b) = bound_of(&mut lock(&dev.st), cb) {
                let end = offset.saturating_add(size);
                b.push.retain(|p| {
                    !(p.stages == stages
                        && p.offset >= offset
                        && p.offset + p.data.len() as u32 <= end)
                });
                if b.push.len() >= MAX_PUSH {
                    b.push.remove(0);
                }
                b.push.push(PushRec {
                    layout,
                    stages,
                    offset,
                    data: std::slice::from_raw_parts(p_values as *const u8, size as usize).to_vec(),
                });
            }
        }
        if let Some(f) = dev.f.cmd_push_constants {
            f(cb, layout, stages, offset, size, p_values);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_constants_are_resolve_comp_words() {
        assert_eq!(std::mem::size_of::<Push>(), 14 * 4);
        let p = Push {
            first: 1,
            period_s: -2,
            rp_slots: 32,
            ..Default::default()
        };
        let b = p.bytes();
        assert_eq!(&b[0..4], &1u32.to_le_bytes());
        assert_eq!(&b[48..52], &(-2i32).to_le_bytes());
        assert_eq!(&b[52..56], &32u32.to_le_bytes());
        // Within the guaranteed 128 bytes of push constants.
        assert!(b.len() <= 128);
    }

    #[test]
    fn regions_do_not_overlap_and_64_bit_values_are_aligned() {
        for (n, q, ts, ns, occ) in [(1, 1, 2, 0, false), (7, 3, 66, 4, true), (2, 5, 2, 1, true)] {
            let l = Layout::new(n, q, ts, ns, occ);
            assert_eq!(l.meta_off, n);
            assert!(l.meta_off + q <= l.ts_off);
            for off in [l.ts_off, l.stats_off, l.occ_off, l.out_off] {
                assert_eq!(off % 2, 0, "{l:?}");
            }
            assert_eq!(l.stats_off - l.ts_off, 2 * q * ts);
            assert_eq!(l.occ_off - l.stats_off, 2 * q * ns);
            assert_eq!(l.out_off - l.occ_off, if occ { 2 * q } else { 0 });
            assert_eq!(l.words - l.out_off, 2 * q * n);
        }
    }

    #[test]
    fn program_words_name_the_statistic_in_result_order() {
        let idx = |name: &str| CATALOG.iter().position(|c| c.name == name).unwrap();
        type S = vk::QueryPipelineStatisticFlags;
        let stats = S::INPUT_ASSEMBLY_VERTICES
            | S::VERTEX_SHADER_INVOCATIONS
            | S::FRAGMENT_SHADER_INVOCATIONS;
        assert_eq!(
            program_word(idx("Command buffer duration"), stats),
            KIND_CB_DURATION
        );
        assert_eq!(
            program_word(idx("Render pass duration"), stats),
            KIND_RP_DURATION
        );
        assert_eq!(program_word(idx("Samples passed"), stats), KIND_SAMPLES);
        assert_eq!(
            program_word(idx("Input assembly vertices"), stats),
            KIND_STATISTIC
        );
        assert_eq!(
            program_word(idx("Vertex shader invocations"), stats),
            KIND_STATISTIC | 1 << 8
        );
        assert_eq!(
            program_word(idx("Fragment shader invocations"), stats),
            KIND_STATISTIC | 2 << 8
        );
    }

    #[test]
    fn copy_rules() {
        let ok = vk::QueryResultFlags::WAIT;
        assert!(check_copy(ok, 0, 1, 1, 0, 0, 16).is_ok());
        assert!(check_copy(vk::QueryResultFlags::empty(), 1, 2, 3, 8, 24, 16).is_ok());
        for bad in [
            vk::QueryResultFlags::TYPE_64,
            vk::QueryResultFlags::WITH_AVAILABILITY,
            vk::QueryResultFlags::PARTIAL,
        ] {
            assert_eq!(
                check_copy(bad | ok, 0, 1, 1, 0, 16, 16).unwrap_err().0,
                Refusal::Flags
            );
        }
        assert_eq!(
            check_copy(ok, 1, 1, 1, 0, 16, 16).unwrap_err().0,
            Refusal::Range
        );
        assert_eq!(
            check_copy(ok, 0, 2, 1, 0, 16, 16).unwrap_err().0,
            Refusal::Range
        );
        assert_eq!(
            check_copy(ok, u32::MAX, 2, 1, 0, 16, 16).unwrap_err().0,
            Refusal::Range
        );
        assert_eq!(
            check_copy(ok, 0, 1, 1, 2, 16, 16).unwrap_err().0,
            Refusal::Alignment
        );
        assert_eq!(
            check_copy(ok, 0, 2, 2, 0, 8, 16).unwrap_err().0,
            Refusal::Stride
        );
    }
}
