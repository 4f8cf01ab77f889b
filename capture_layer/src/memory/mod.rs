//! Host memory: allocations, mappings (what the app wrote reaches the trace as `MemoryWrite`s at
//! unmap, flush and submit; `mapped::track` finds it, by write protection or comparison), and buffer
//! bindings (for query-copy destinations).
//!
//! Depends on: `runtime`, `state`, `hooks`, `mapped`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec, slice, Entry, NOT_PRESENT};
use crate::mapped::track::{self, method, Track};
use crate::runtime::{self, capturing, guard};
use crate::state::{Mapping, Memory};
use ash::vk;
use std::ffi::c_void;

pub mod images;

/// Logs once why a mapping is compared rather than write-protected (the app is not affected).
fn guard_failed(e: &str) {
    runtime::log_once("memory-guard", &crate::state::unguarded(e));
}

// ==== host memory ===================================================================================

pub unsafe extern "system" fn vkAllocateMemory(
    device: vk::Device,
    p_info: *const vk::MemoryAllocateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_memory: *mut vk::DeviceMemory,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkAllocateMemory, NOT_PRESENT);
    let r = f(device, p_info, p_allocator, p_memory);
    guard("vkAllocateMemory", || {
        if r == vk::Result::SUCCESS && !p_info.is_null() {
            let info = &*p_info;
            let host_visible = d
                .memory
                .memory_types
                .get(info.memory_type_index as usize)
                .is_some_and(|t| {
                    t.property_flags
                        .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
                });
            let imported_host = !layer_support::entry::find_in_chain(
                info.p_next,
                vk::StructureType::IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
            )
            .is_null();
            d.lock().memories.insert(
                raw(*p_memory),
                Memory {
                    size: info.allocation_size,
                    type_index: info.memory_type_index,
                    host_visible,
                    imported_host,
                    mapped: None,
                    gpu_ranges: Vec::new(),
                    images: Vec::new(),
                },
            );
        }
        rec!(vkAllocateMemory, r.as_raw(), |e| {
            vkstream::encode::vkAllocateMemory(e, device, p_info, p_allocator, p_memory)
        });
    });
    r
}

pub unsafe extern "system" fn vkFreeMemory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkFreeMemory);
    {
        let mut st = d.lock();
        st.remove_memory(raw(memory));
        f(device, memory, p_allocator);
    }
    guard("vkFreeMemory", || {
        rec!(vkFreeMemory, 0, |e| vkstream::encode::vkFreeMemory(
            e,
            device,
            memory,
            p_allocator
        ));
    });
}

/// Writes `MemoryWrite`s for what changed in mapped memory since the last scan (`only`: these allocations).
/// The caller holds the device state lock, so no mapping changes meanwhile.
pub fn scan_memory(st: &mut crate::state::DeviceState, only: Option<&[u64]>) {
    if !capturing() {
        return;
    }
    // The TSC clock: clock_gettime would fence this scan's loads behind the driver's.
    let t0 = runtime::call_ns();
    let mut writes = Vec::new();
    let mut bytes = 0u64;
    let mut runs = Vec::new();
    let crate::state::DeviceState {
        memories, mapped, ..
    } = st;
    for &handle in mapped.iter() {
        if only.is_some_and(|o| !o.contains(&handle)) {
            continue;
        }
        let Some(m) = memories.get_mut(&handle) else {
            continue;
        };
        let Some(map) = m.mapped.as_mut() else {
            continue;
        };
        if map.ptr.is_null() || map.size == 0 {
            continue;
        }
        // SAFETY: the mapping stays valid while the state lock is held (unmap/free take it).
        let live = unsafe { std::slice::from_raw_parts(map.ptr as *const u8, map.size as usize) };
        if !map.track.is_guarded() {
            bytes += map.size;
        }
        let holes = gpu_holes(&m.gpu_ranges, map.offset, live.len());
        let standing = images::ranges(&m.images, map.offset, live.len());
        if let Err(e) = map.track.scan(live, &holes, &standing, method(), &mut runs) {
            guard_failed(&e);
        }
        for (off, data) in runs.drain(..) {
            writes.push((handle, map.offset + off as u64, data));
        }
    }
    runtime::emit_memory(writes, Some((bytes, runtime::call_ns().saturating_sub(t0))));
}

/// The query-copy destinations (mapping offsets) a scan must not report as host writes: those a
/// submitted copy may be writing and those still holding what their copy left. A host write into
/// a pending copy's range is therefore not recorded (the GPU owns it until the copy completes).
fn gpu_holes(
    ranges: &[crate::state::GpuRange],
    map_offset: u64,
    len: usize,
) -> smallvec::SmallVec<[track::Hole; 4]> {
    ranges
        .iter()
        .filter_map(|r| {
            let start = r.start.max(map_offset);
            let end = (r.start + r.len).min(map_offset + len as u64);
            (start < end).then(|| {
                let left = (r.pending == 0).then_some(r.left);
                (
                    (start - map_offset) as usize,
                    (end - map_offset) as usize,
                    left,
                )
            })
        })
        .collect()
}

pub unsafe extern "system" fn vkMapMemory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    pp_data: *mut *mut c_void,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkMapMemory, NOT_PRESENT);
    // Held across the call: the layer's own read-back mapping never overlaps the app's.
    let mut st = d.lock();
    let r = f(device, memory, offset, size, flags, pp_data);
    guard("vkMapMemory", || {
        rec!(vkMapMemory, r.as_raw(), |e| vkstream::encode::vkMapMemory(
            e, device, memory, offset, size, flags, pp_data
        ));
        if r != vk::Result::SUCCESS || pp_data.is_null() {
            return;
        }
        let Some(m) = st.memories.get_mut(&raw(memory)) else {
            return;
        };
        let len = if size == vk::WHOLE_SIZE {
            m.size.saturating_sub(offset)
        } else {
            size
        };
        let ptr = *pp_data as *mut u8;
        let mut mapping = Mapping {
            ptr,
            offset,
            size: len,
            track: Track::Unseen,
        };
        if capturing() && !ptr.is_null() {
            // The initial content the app sees, once; later scans send only changed pages. The
            // baseline first: a write in between is sent again, never lost.
            let live = std::slice::from_raw_parts(ptr as *const u8, len as usize);
            if let Err(e) = mapping.track.baseline(live, method()) {
                guard_failed(&e);
            }
            runtime::emit_memory(vec![(raw(memory), offset, live.to_vec())], None);
        }
        st.set_mapping(raw(memory), Some(mapping));
    });
    r
}

pub unsafe extern "system" fn vkUnmapMemory(device: vk::Device, memory: vk::DeviceMemory) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkUnmapMemory);
    let mut st = d.lock();
    guard("vkUnmapMemory", || {
        scan_memory(&mut st, Some(&[raw(memory)]))
    });
    // Its protection goes before the driver unmaps (the range may be reused at once).
    st.set_mapping(raw(memory), None);
    f(device, memory);
    drop(st);
    guard("vkUnmapMemory", || {
        rec!(vkUnmapMemory, 0, |e| vkstream::encode::vkUnmapMemory(
            e, device, memory
        ));
    });
}

pub unsafe extern "system" fn vkFlushMappedMemoryRanges(
    device: vk::Device,
    count: u32,
    p_ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkFlushMappedMemoryRanges, NOT_PRESENT);
    // Scans write only while capturing: no list, no lock while tracking.
    if capturing() {
        guard("vkFlushMappedMemoryRanges", || {
            let handles: Vec<u64> = slice(p_ranges, count)
                .iter()
                .map(|r| raw(r.memory))
                .collect();
            scan_memory(&mut d.lock(), Some(&handles));
        });
    }
    let r = f(device, count, p_ranges);
    guard("vkFlushMappedMemoryRanges", || {
        rec!(vkFlushMappedMemoryRanges, r.as_raw(), |e| {
            vkstream::encode::vkFlushMappedMemoryRanges(e, device, count, p_ranges)
        });
    });
    r
}

pub unsafe extern "system" fn vkBindBufferMemory(
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkBindBufferMemory, NOT_PRESENT);
    let r = f(device, buffer, memory, offset);
    guard("vkBindBufferMemory", || {
        if r == vk::Result::SUCCESS {
            d.lock().buffers.insert(raw(buffer), (raw(memory), offset));
        }
        rec!(vkBindBufferMemory, r.as_raw(), |e| {
            vkstream::encode::vkBindBufferMemory(e, device, buffer, memory, offset)
        });
    });
    r
}

/// Also `vkBindBufferMemory2KHR` (`E` says which name the app called).
pub unsafe fn vkBindBufferMemory2<E: Entry<vk::PFN_vkBindBufferMemory2>>(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(E::next(&d.table), NOT_PRESENT);
    let r = f(device, count, p_infos);
    guard("vkBindBufferMemory2", || {
        if r == vk::Result::SUCCESS {
            let mut st = d.lock();
            for i in slice(p_infos, count) {
                st.buffers
                    .insert(raw(i.buffer), (raw(i.memory), i.memory_offset));
            }
        }
        rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkBindBufferMemory2(e, device, count, p_infos)
        });
    });
    r
}
