//! Optimal-tiling images and the memory they are bound to. The host cannot address their texels
//! (the layout is the driver's), so bytes that change there were written by the GPU: render
//! targets, copies, blits, resolves and clears into images that a driver placed in memory it keeps
//! mapped (Zink's slabs). Scans leave those ranges out of `MemoryWrite`s; the replay writes them by
//! running the commands. A disjoint (per-plane) bind is not followed: its ranges stay scanned.
//!
//! Depends on: `runtime`, `state`, `hooks`.

#![allow(non_snake_case)]
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc)]

use crate::hooks::{find_in_chain, next, raw, rec, slice, Entry, NOT_PRESENT};
use crate::runtime::{self, guard, DeviceData};
use ash::vk;

pub unsafe extern "system" fn vkCreateImage(
    device: vk::Device,
    p_info: *const vk::ImageCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_image: *mut vk::Image,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkCreateImage, NOT_PRESENT);
    let r = f(device, p_info, p_allocator, p_image);
    guard("vkCreateImage", || {
        if r == vk::Result::SUCCESS
            && p_info
                .as_ref()
                .is_some_and(|i| i.tiling == vk::ImageTiling::OPTIMAL)
        {
            d.lock().optimal_images.insert(raw(*p_image), 0);
        }
        rec!(vkCreateImage, r.as_raw(), |e| {
            vkstream::encode::vkCreateImage(e, device, p_info, p_allocator, p_image)
        });
    });
    r
}

pub unsafe extern "system" fn vkDestroyImage(
    device: vk::Device,
    image: vk::Image,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(d.table.vkDestroyImage);
    guard("vkDestroyImage", || {
        // Before the driver frees it: its range may be bound to a buffer the host writes next.
        let mut st = d.lock();
        if let Some(memory) = st.optimal_images.remove(&raw(image)) {
            if let Some(m) = st.memories.get_mut(&memory) {
                let gone: smallvec::SmallVec<[(u64, u64); 1]> = m
                    .images
                    .iter()
                    .filter(|&&(i, ..)| i == raw(image))
                    .map(|&(_, start, size)| (start, size))
                    .collect();
                m.images.retain(|&(i, ..)| i != raw(image));
                // Its pages were left unprotected (`Track::scan`): the host's from now on.
                if let Some(map) = m.mapped.as_mut() {
                    for (start, size) in gone {
                        let off = start.saturating_sub(map.offset) as usize;
                        let end = (start + size).saturating_sub(map.offset) as usize;
                        map.track.protect_again(off, end.saturating_sub(off));
                    }
                }
            }
        }
    });
    f(device, image, p_allocator);
    guard("vkDestroyImage", || {
        rec!(vkDestroyImage, 0, |e| vkstream::encode::vkDestroyImage(
            e,
            device,
            image,
            p_allocator
        ));
    });
}

/// Notes an optimal image bound at `offset` of `memory` (its size asked of the driver).
unsafe fn bound(d: &DeviceData, image: vk::Image, memory: vk::DeviceMemory, offset: u64) {
    let Some(size_of) = d.table.vkGetImageMemoryRequirements else {
        return;
    };
    let mut st = d.lock();
    let Some(slot) = st.optimal_images.get_mut(&raw(image)) else {
        return;
    };
    *slot = raw(memory);
    let mut req = vk::MemoryRequirements::default();
    size_of(d.handle, image, &mut req);
    if let Some(m) = st.memories.get_mut(&raw(memory)) {
        m.images.push((raw(image), offset, req.size));
    }
}

pub unsafe extern "system" fn vkBindImageMemory(
    device: vk::Device,
    image: vk::Image,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(d.table.vkBindImageMemory, NOT_PRESENT);
    let r = f(device, image, memory, offset);
    guard("vkBindImageMemory", || {
        if r == vk::Result::SUCCESS {
            bound(d, image, memory, offset);
        }
        rec!(vkBindImageMemory, r.as_raw(), |e| {
            vkstream::encode::vkBindImageMemory(e, device, image, memory, offset)
        });
    });
    r
}

/// Also `vkBindImageMemory2KHR` (`E` says which name the app called).
pub unsafe fn vkBindImageMemory2<E: Entry<vk::PFN_vkBindImageMemory2>>(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindImageMemoryInfo<'_>,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(E::next(&d.table), NOT_PRESENT);
    let r = f(device, count, p_infos);
    guard("vkBindImageMemory2", || {
        if r == vk::Result::SUCCESS {
            for i in slice(p_infos, count) {
                let plane =
                    find_in_chain(i.p_next, vk::StructureType::BIND_IMAGE_PLANE_MEMORY_INFO);
                // Swapchain binds name no memory of the app's.
                if plane.is_null() && i.memory != vk::DeviceMemory::null() {
                    bound(d, i.image, i.memory, i.memory_offset);
                }
            }
        }
        rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkBindImageMemory2(e, device, count, p_infos)
        });
    });
    r
}

/// The bound images' ranges inside a mapping (`map_offset`, `len`), as mapping offsets.
pub fn ranges(
    images: &[(u64, u64, u64)],
    map_offset: u64,
    len: usize,
) -> smallvec::SmallVec<[(usize, usize); 4]> {
    images
        .iter()
        .filter_map(|&(_, start, size)| {
            let a = start.max(map_offset);
            let b = (start + size).min(map_offset + len as u64);
            (a < b).then(|| ((a - map_offset) as usize, (b - map_offset) as usize))
        })
        .collect()
}
