//! Query pools and host-side query calls: creation (performance counters described from the
//! driver), destruction, vkGetQueryPoolResults (the exact bytes the app received and first-seen
//! availability), and the profiling lock.
//!
//! Depends on: `runtime`, `state`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{cstr_field, find_in_chain, next, raw, rec, slice, NOT_PRESENT};
use crate::runtime::{self, guard, DeviceData};
use crate::state::Pool;
use ash::vk;
use format::record::{self, Record};
use std::ffi::c_void;

// ==== queries =======================================================================================

unsafe fn perf_counters(
    d: &DeviceData,
    family: u32,
    indices: &[u32],
) -> Vec<record::PerfCounterDesc> {
    let Some(f) = d
        .instance
        .table
        .vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR
    else {
        return Vec::new();
    };
    let mut n = 0u32;
    if f(
        d.physical,
        family,
        &mut n,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    ) != vk::Result::SUCCESS
    {
        return Vec::new();
    }
    let mut counters = vec![vk::PerformanceCounterKHR::default(); n as usize];
    let mut descs = vec![vk::PerformanceCounterDescriptionKHR::default(); n as usize];
    if f(
        d.physical,
        family,
        &mut n,
        counters.as_mut_ptr(),
        descs.as_mut_ptr(),
    ) != vk::Result::SUCCESS
    {
        return Vec::new();
    }
    indices
        .iter()
        .filter_map(|&i| {
            let c = counters.get(i as usize)?;
            let dsc = descs.get(i as usize)?;
            Some(record::PerfCounterDesc {
                uuid: c.uuid,
                name: cstr_field(&dsc.name),
                category: cstr_field(&dsc.category),
                description: cstr_field(&dsc.description),
                unit: c.unit.as_raw() as u32,
                storage: c.storage.as_raw() as u32,
                scope: c.scope.as_raw() as u32,
            })
        })
        .collect()
}

pub unsafe extern "system" fn vkCreateQueryPool(
    device: vk::Device,
    p_info: *const vk::QueryPoolCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_pool: *mut vk::QueryPool,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkCreateQueryPool, NOT_PRESENT);
    let r = f(device, p_info, p_allocator, p_pool);
    guard("vkCreateQueryPool", || {
        let seq = rec!(vkCreateQueryPool, r.as_raw(), |e| {
            vkstream::encode::vkCreateQueryPool(e, device, p_info, p_allocator, p_pool)
        });
        if r != vk::Result::SUCCESS || p_info.is_null() {
            return;
        }
        let info = &*p_info;
        let pool = raw(*p_pool);
        let perf = find_in_chain(
            info.p_next,
            vk::StructureType::QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR,
        ) as *const vk::QueryPoolPerformanceCreateInfoKHR<'_>;
        let (perf_queue_family, perf_counters, n_counters) = match perf.as_ref() {
            Some(p) => {
                let idx = slice(p.p_counter_indices, p.counter_index_count);
                (
                    Some(p.queue_family_index),
                    perf_counters(d, p.queue_family_index, idx),
                    p.counter_index_count,
                )
            }
            None => (None, Vec::new(), 0),
        };
        let stats = if info.query_type == vk::QueryType::PIPELINE_STATISTICS {
            info.pipeline_statistics.as_raw()
        } else {
            0
        };
        d.lock().pools.insert(
            pool,
            Pool {
                query_type: info.query_type.as_raw(),
                count: info.query_count,
                pipeline_statistics: stats,
                counters: n_counters,
                seen_available: vec![false; info.query_count as usize],
            },
        );
        if let Some(seq) = seq {
            runtime::emit_plain(Record::QueryPool(record::QueryPoolInfo {
                seq,
                device: raw(device),
                pool,
                query_type: info.query_type.as_raw(),
                query_count: info.query_count,
                pipeline_statistics: stats,
                perf_queue_family,
                perf_counters,
            }));
        }
    });
    r
}

pub unsafe extern "system" fn vkDestroyQueryPool(
    device: vk::Device,
    pool: vk::QueryPool,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkDestroyQueryPool);
    f(device, pool, p_allocator);
    guard("vkDestroyQueryPool", || {
        d.lock().pools.remove(&raw(pool));
        rec!(vkDestroyQueryPool, 0, |e| {
            vkstream::encode::vkDestroyQueryPool(e, device, pool, p_allocator)
        });
    });
}

pub unsafe extern "system" fn vkGetQueryPoolResults(
    device: vk::Device,
    pool: vk::QueryPool,
    first: u32,
    count: u32,
    data_size: usize,
    p_data: *mut c_void,
    stride: vk::DeviceSize,
    flags: vk::QueryResultFlags,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkGetQueryPoolResults, NOT_PRESENT);
    let r = f(device, pool, first, count, data_size, p_data, stride, flags);
    // Also while a trimmed capture only tracks state: results define none, and a query first seen
    // available then is reported at the first results call after the trim point.
    if !runtime::capturing() {
        return r;
    }
    let host_ns = runtime::call_ns();
    let t0 = runtime::prof::start();
    guard("vkGetQueryPoolResults", || {
        let cmd = vkstream::ids::vkGetQueryPoolResults;
        let data: &[u8] = if p_data.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p_data as *const u8, data_size)
        };
        let fl = flags.as_raw();
        // Queries seen available for the first time (on the stack: a results call runs once per
        // frame or more, and usually for a handful of queries).
        let mut newly = smallvec::SmallVec::<[u32; 32]>::new();
        {
            let mut st = d.lock();
            if let Some(p) = st.pools.get_mut(&raw(pool)) {
                let width = if fl & vk::QueryResultFlags::TYPE_64.as_raw() != 0 {
                    8
                } else {
                    4
                };
                let flagged = fl
                    & (vk::QueryResultFlags::WITH_AVAILABILITY.as_raw()
                        | vk::QueryResultFlags::WITH_STATUS_KHR.as_raw())
                    != 0
                    && p.query_type != vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw();
                let values = p.values_per_query() as usize;
                for i in 0..count {
                    let q = first + i;
                    let available = if flagged {
                        // The availability (or status) word follows the values.
                        let at = i as usize * stride as usize + values * width;
                        match data.get(at..at + width) {
                            Some(w) => w.iter().any(|&b| b != 0),
                            None => false,
                        }
                    } else {
                        r == vk::Result::SUCCESS
                    };
                    if let Some(seen) = p.seen_available.get_mut(q as usize) {
                        if available && !*seen {
                            *seen = true;
                            newly.push(q);
                        }
                    }
                }
            }
        }
        if !newly.is_empty() {
            d.queries_seen
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let mut results = format::QueryResultsRef {
            seq: 0,
            thread: 0,
            device: raw(device),
            pool: raw(pool),
            first,
            count,
            stride,
            flags: fl,
            result: r.as_raw(),
            host_ns,
            data,
        };
        runtime::record_query_results(
            cmd,
            r.as_raw(),
            |e| {
                vkstream::encode::vkGetQueryPoolResults(
                    e, device, pool, first, count, data_size, p_data, stride, flags,
                )
            },
            &mut results,
            &newly,
        );
    });
    runtime::prof::end(runtime::prof::RESULTS, t0);
    r
}

pub unsafe extern "system" fn vkAcquireProfilingLockKHR(
    device: vk::Device,
    p_info: *const vk::AcquireProfilingLockInfoKHR<'_>,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkAcquireProfilingLockKHR,
        NOT_PRESENT
    );
    let r = f(device, p_info);
    guard("vkAcquireProfilingLockKHR", || {
        rec!(vkAcquireProfilingLockKHR, r.as_raw(), |e| {
            vkstream::encode::vkAcquireProfilingLockKHR(e, device, p_info)
        });
    });
    r
}

pub unsafe extern "system" fn vkReleaseProfilingLockKHR(device: vk::Device) {
    let f = next!(runtime::device_table(raw(device)).vkReleaseProfilingLockKHR);
    f(device);
    guard("vkReleaseProfilingLockKHR", || {
        rec!(vkReleaseProfilingLockKHR, 0, |e| {
            vkstream::encode::vkReleaseProfilingLockKHR(e, device)
        });
    });
}
