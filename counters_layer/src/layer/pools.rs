//! Performance query pools: creation as internal pools, host and command resets, results computed
//! on the host, and copies computed on the GPU (see `copy`).

use super::instance::{counter_indices, resolve_counters};
use super::*;

pub(super) unsafe extern "system" fn create_query_pool(
    device: vk::Device,
    p_info: *const vk::QueryPoolCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_pool: *mut vk::QueryPool,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(device.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let create = dev.f.create_query_pool.expect("core vkCreateQueryPool");
        let Some(info) = p_info.as_ref() else {
            return vk::Result::ERROR_UNKNOWN;
        };
        if !dev.emulate || info.query_type != vk::QueryType::PERFORMANCE_QUERY_KHR {
            return create(device, p_info, p_allocator, p_pool);
        }
        let perf = find_in_chain_mut(
            info.p_next as *mut c_void,
            vk::StructureType::QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR,
        ) as *const vk::QueryPoolPerformanceCreateInfoKHR<'_>;
        let Some(perf) = perf.as_ref() else {
            report("VUID-VkQueryPoolCreateInfo-queryType-03222: a performance query pool needs VkQueryPoolPerformanceCreateInfoKHR in pNext");
            return vk::Result::ERROR_UNKNOWN;
        };
        let set = match resolve_counters(
            &dev.families,
            perf.queue_family_index,
            counter_indices(perf),
        ) {
            Ok(s) if !s.is_empty() => s,
            Ok(_) => {
                report("VUID-VkQueryPoolPerformanceCreateInfoKHR-counterIndexCount-arraylength: a performance query pool needs at least one counter");
                return vk::Result::ERROR_UNKNOWN;
            }
            Err(e) => {
                report(&format!("vkCreateQueryPool: {e}"));
                return vk::Result::ERROR_UNKNOWN;
            }
        };
        match new_perf_pool(
            &dev,
            create,
            set,
            perf.queue_family_index,
            info.query_count,
            p_allocator,
        ) {
            Ok(mut pool) => {
                if dev.copier.is_some() {
                    match copy::PoolCopy::new(&dev, &pool, p_allocator) {
                        Ok(c) => pool.copy = Some(c),
                        Err(e) => report(&format!(
                            "vkCmdCopyQueryPoolResults will be refused on this performance pool: {e}"
                        )),
                    }
                }
                let handle = pool.ts;
                lock(&dev.st).pools.insert(handle.as_raw(), pool);
                *p_pool = handle;
                vk::Result::SUCCESS
            }
            Err(r) => r,
        }
    })
}

unsafe fn new_perf_pool(
    dev: &Device,
    create: vk::PFN_vkCreateQueryPool,
    counters: Vec<usize>,
    family: u32,
    count: u32,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) -> Result<PerfPool, vk::Result> {
    let plan = PassPlan::new(&counters, dev.per_pass);
    let has = |s: &dyn Fn(Source) -> bool| counters.iter().any(|&c| s(CATALOG[c].source));
    let render_pass_duration = has(&|s| s == Source::RenderPassDuration);
    let durations = render_pass_duration || has(&|s| s == Source::CommandBufferDuration);
    let mut stat_flags = vk::QueryPipelineStatisticFlags::empty();
    for &c in &counters {
        if let Source::Statistic(b) = CATALOG[c].source {
            stat_flags |= b;
        }
    }
    let occlusion = has(&|s| s == Source::SamplesPassed);
    let ts_slots = if render_pass_duration {
        2 + 2 * RP_SLOTS
    } else {
        2
    };
    let mk = |ty: vk::QueryType, n: u32, stats: vk::QueryPipelineStatisticFlags| {
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(ty)
            .query_count(n)
            .pipeline_statistics(stats);
        let mut p = vk::QueryPool::null();
        let r = create(dev.handle, &ci, p_allocator, &mut p);
        if r == vk::Result::SUCCESS {
            Ok(p)
        } else {
            Err(r)
        }
    };
    let destroy = dev.f.destroy_query_pool.expect("core vkDestroyQueryPool");
    let ts = mk(
        vk::QueryType::TIMESTAMP,
        count.max(1) * ts_slots,
        vk::QueryPipelineStatisticFlags::empty(),
    )?;
    let stats = if stat_flags.is_empty() {
        None
    } else {
        match mk(vk::QueryType::PIPELINE_STATISTICS, count.max(1), stat_flags) {
            Ok(p) => Some((p, stat_flags)),
            Err(r) => {
                destroy(dev.handle, ts, p_allocator);
                return Err(r);
            }
        }
    };
    let occ = if occlusion {
        match mk(
            vk::QueryType::OCCLUSION,
            count.max(1),
            vk::QueryPipelineStatisticFlags::empty(),
        ) {
            Ok(p) => Some(p),
            Err(r) => {
                destroy(dev.handle, ts, p_allocator);
                if let Some((s, _)) = stats {
                    destroy(dev.handle, s, p_allocator);
                }
                return Err(r);
            }
        }
    } else {
        None
    };
    Ok(PerfPool {
        counters,
        family,
        plan,
        count,
        ts,
        ts_slots,
        durations,
        render_pass_duration,
        stats,
        occlusion: occ,
        queries: vec![QueryState::default(); count as usize],
        copy: None,
    })
}

pub(super) unsafe extern "system" fn destroy_query_pool(
    device: vk::Device,
    pool: vk::QueryPool,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        let destroy = dev.f.destroy_query_pool.expect("core vkDestroyQueryPool");
        let removed = lock(&dev.st).pools.remove(&pool.as_raw());
        if let Some(p) = removed {
            if let Some(c) = &p.copy {
                c.destroy(&dev, p_allocator);
            }
            if let Some((s, _)) = p.stats {
                destroy(device, s, p_allocator);
            }
            if let Some(o) = p.occlusion {
                destroy(device, o, p_allocator);
            }
        }
        destroy(device, pool, p_allocator);
    })
}

fn host_reset(dev: &Device, pool: vk::QueryPool, first: u32, count: u32) -> bool {
    let mut st = lock(&dev.st);
    let Some(p) = st.pools.get_mut(&pool.as_raw()) else {
        return false;
    };
    apply_reset(p, first, count);
    true
}

pub(super) fn apply_reset(p: &mut PerfPool, first: u32, count: u32) {
    let end = first.saturating_add(count).min(p.count);
    for q in first.min(end)..end {
        p.queries[q as usize] = QueryState::default();
    }
}

pub(super) unsafe extern "system" fn reset_query_pool(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        // The internal queries are reset where they are begun; only the availability state is here.
        if !host_reset(&dev, pool, first, count) {
            if let Some(f) = dev.f.reset_query_pool {
                f(device, pool, first, count);
            }
        }
    })
}

pub(super) unsafe extern "system" fn reset_query_pool_ext(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
) {
    guard((), || {
        let Some(dev) = device_of(device.as_raw()) else {
            return;
        };
        if !host_reset(&dev, pool, first, count) {
            if let Some(f) = dev.f.reset_query_pool_ext {
                f(device, pool, first, count);
            }
        }
    })
}

/// Reads the internal results of one query; `None` while any of them is not available.
unsafe fn read_query(
    dev: &Device,
    p: &PerfPool,
    q: u32,
    wait: bool,
) -> Result<Option<Vec<u64>>, vk::Result> {
    let get = dev
        .f
        .get_query_pool_results
        .expect("core vkGetQueryPoolResults");
    let flags = vk::QueryResultFlags::TYPE_64
        | if wait {
            vk::QueryResultFlags::WAIT
        } else {
            vk::QueryResultFlags::empty()
        };
    let st = p.queries[q as usize];
    let fetch = |pool: vk::QueryPool,
                 first: u32,
                 n: u32,
                 per: u32|
     -> Result<Option<Vec<u64>>, vk::Result> {
        let mut v = vec![0u64; (n * per) as usize];
        let r = get(
            dev.handle,
            pool,
            first,
            n,
            v.len() * 8,
            v.as_mut_ptr() as *mut c_void,
            8 * per as u64,
            flags,
        );
        match r {
            vk::Result::SUCCESS => Ok(Some(v)),
            vk::Result::NOT_READY => Ok(None),
            e => Err(e),
        }
    };
    let measured_rp = st.render_passes.min(RP_SLOTS);
    let ts = if p.durations {
        let n = if p.render_pass_duration {
            2 + 2 * measured_rp
        } else {
            2
        };
        match fetch(p.ts, q * p.ts_slots, n, 1)? {
            Some(v) => v,
            None => return Ok(None),
        }
    } else {
        Vec::new()
    };
    let stats = match p.stats {
        Some((pool, flags)) => match fetch(pool, q, 1, flags.as_raw().count_ones())? {
            Some(v) => Some((v, flags)),
            None => return Ok(None),
        },
        None => None,
    };
    let occ = match p.occlusion {
        Some(pool) => match fetch(pool, q, 1, 1)? {
            Some(v) => v[0],
            None => return Ok(None),
        },
        None => 0,
    };
    let bits = dev.valid_bits.get(p.family as usize).copied().unwrap_or(64);
    let values = p
        .counters
        .iter()
        .map(|&c| match CATALOG[c].source {
            Source::CommandBufferDuration => counters::ticks_to_ns(ts[0], ts[1], bits, dev.period),
            Source::RenderPassDuration => {
                counters::render_pass_ns(&ts[2..], measured_rp as usize, bits, dev.period)
            }
            Source::Statistic(bit) => {
                let (v, flags) = stats
                    .as_ref()
                    .expect("statistics pool exists for a statistic counter");
                // Results come in bit order of the enabled statistics.
                let below = flags.as_raw() & (bit.as_raw() - 1);
                v[below.count_ones() as usize]
            }
            Source::SamplesPassed => occ,
        })
        .collect();
    Ok(Some(values))
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "system" fn get_query_pool_results(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    data_size: usize,
    p_data: *mut c_void,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) -> vk::Result {
    guard(vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(device.as_raw()) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let get = dev
            .f
            .get_query_pool_results
            .expect("core vkGetQueryPoolResults");
        let st = lock(&dev.st);
        let Some(p) = st.pools.get(&pool.as_raw()) else {
            drop(st);
            return get(device, pool, first, count, data_size, p_data, stride, flags);
        };
        let row = 8 * p.counters.len() as u64;
        let bad = vk::QueryResultFlags::WITH_AVAILABILITY
            | vk::QueryResultFlags::PARTIAL
            | vk::QueryResultFlags::TYPE_64
            | vk::QueryResultFlags::WITH_STATUS_KHR;
        if flags.intersects(bad) {
            report(&format!("VUID-vkGetQueryPoolResults-queryType-03230: flags {flags:?} are not allowed for a performance query pool"));
            return vk::Result::ERROR_UNKNOWN;
        }
        if stride & 7 != 0 || (count > 1 && stride < row) {
            report(&format!("VUID-vkGetQueryPoolResults-queryType-03229: stride {stride} must be a multiple of 8 and hold {} counter results", p.counters.len()));
            return vk::Result::ERROR_UNKNOWN;
        }
        if first.checked_add(count).is_none_or(|e| e > p.count) {
            report(&format!("VUID-vkGetQueryPoolResults-firstQuery-00813: queries {first}..{} exceed the pool's {}", first as u64 + count as u64, p.count));
            return vk::Result::ERROR_UNKNOWN;
        }
        if count > 0 && (p_data.is_null() || (count as u64 - 1) * stride + row > data_size as u64) {
            report(&format!("VUID-vkGetQueryPoolResults-dataSize-00817: dataSize {data_size} cannot hold {count} queries at stride {stride}"));
            return vk::Result::ERROR_UNKNOWN;
        }
        let wait = flags.contains(vk::QueryResultFlags::WAIT);
        let mut result = vk::Result::SUCCESS;
        for i in 0..count {
            let q = first + i;
            let s = p.queries[q as usize];
            if s.passes_submitted & p.all_passes() != p.all_passes() {
                if wait {
                    report_once("03231", &format!(
                        "VUID-vkGetQueryPoolResults-queryType-03231: query {q} was not submitted once for each of its {} passes (passes submitted: mask {:#b}); it stays unavailable",
                        p.plan.passes, s.passes_submitted
                    ));
                }
                result = vk::Result::NOT_READY;
                continue;
            }
            match read_query(&dev, p, q, wait) {
                Ok(Some(values)) => {
                    let out = (p_data as *mut u8).add((i as u64 * stride) as usize);
                    for (k, v) in values.iter().enumerate() {
                        let r = vk::PerformanceCounterResultKHR { uint64: *v };
                        std::ptr::write_unaligned(
                            out.add(8 * k) as *mut vk::PerformanceCounterResultKHR,
                            r,
                        );
                    }
                }
                Ok(None) => result = vk::Result::NOT_READY,
                Err(e) => return e,
            }
        }
        result
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "system" fn cmd_copy_query_pool_results(
    cb: vk::CommandBuffer,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    dst: vk::Buffer,
    offset: vk::DeviceSize,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) {
    guard((), || {
        let Some(dev) = device_of(cb.as_raw()) else {
            return;
        };
        {
            let mut guard = lock(&dev.st);
            let st = &mut *guard;
            if let Some(p) = st.pools.get(&pool.as_raw()) {
                let bound = st.cbs.get(&cb.as_raw()).map(|c| &c.bound);
                if copy::record_copy(&dev, cb, p, bound, first, count, dst, offset, stride, flags) {
                    st.cbs.entry(cb.as_raw()).or_default().ops.push(Op::Copy {
                        pool: pool.as_raw(),
                        first,
                        count,
                    });
                }
                return;
            }
        }
        if let Some(f) = dev.f.cmd_copy_query_pool_results {
            f(cb, pool, first, count, dst, offset, stride, flags);
        }
    })
}
