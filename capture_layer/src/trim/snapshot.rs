//! The snapshot writer of a trimmed capture: when frame A begins it waits for every device, reads
//! memory contents (mapped, or copied through the GPU when the host cannot map them), asks the
//! drivers for fence and timeline states, and has the tracker's kept calls and those answers written
//! between `StateBegin`/`StateEnd` by the runtime's writer. The Vulkan calls of trimming are all here;
//! the tracker (`trim::tracker`) only keeps books.
//!
//! Depends on: `runtime`, `trim::tracker`, `readback`. Called by the intercepts that end frames.

use crate::readback;
use crate::runtime::{self, DeviceData};
use ash::vk;
use ash::vk::Handle;
use format::record::FrameBoundary;
use std::panic::catch_unwind;

/// A call that may end a frame returned (see `runtime::frame_boundary`); writes a trimmed
/// capture's snapshot when its first frame begins now.
pub fn frame_boundary(boundary: FrameBoundary, last_seq: Option<u64>) {
    if runtime::frame_boundary(boundary, last_seq) && catch_unwind(write).is_err() {
        runtime::snapshot_failed();
    }
}

/// Frame `first` begins: waits for every device, reads host-visible memory, opens the trace and
/// writes the state snapshot, then capture goes on as usual.
fn write() {
    // No GPU work starts on another thread until capturing has begun (`runtime::submit_gate`).
    let _gate = runtime::stop_submits();
    let t0 = runtime::now_ns();
    let devices = runtime::live_devices();
    for d in &devices {
        if let Some(f) = d.table.vkDeviceWaitIdle {
            // SAFETY: a live device; the GPU must be idle for memory contents to be final.
            let _ = unsafe { f(d.handle) };
        }
    }
    let mut memory = Vec::new();
    let mut gaps = Vec::new();
    for d in &devices {
        read_memory(d, &mut memory, &mut gaps);
    }
    runtime::write_snapshot(t0, |tracker| {
        let fence_signaled = |device: u64, fence: u64| -> Option<bool> {
            let d = runtime::device_data(device)?;
            let f = d.table.vkGetFenceStatus?;
            // SAFETY: both handles are live (the tracker saw them created and not destroyed).
            let r = unsafe { f(d.handle, vk::Fence::from_raw(fence)) };
            Some(r == vk::Result::SUCCESS)
        };
        let timeline_value = |device: u64, sem: u64| -> Option<u64> {
            let d = runtime::device_data(device)?;
            let f = d
                .table
                .vkGetSemaphoreCounterValue
                .or(d.table.vkGetSemaphoreCounterValueKHR)?;
            let mut v = 0u64;
            // SAFETY: both handles are live; a timeline semaphore's value is readable at any time.
            let r = unsafe { f(d.handle, vk::Semaphore::from_raw(sem), &mut v) };
            (r == vk::Result::SUCCESS).then_some(v)
        };
        let graphics_queues = |device: u64| -> Option<Vec<(u64, u32)>> {
            let d = runtime::device_data(device)?;
            let graphics = |family: u32| {
                d.queue_families
                    .get(family as usize)
                    .is_some_and(|f| f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
            };
            let st = d.lock();
            Some(
                st.queues
                    .iter()
                    .filter(|(_, f)| graphics(**f))
                    .map(|(q, f)| (*q, *f))
                    .collect(),
            )
        };
        tracker.snapshot(
            memory,
            gaps,
            &fence_signaled,
            &timeline_value,
            &graphics_queues,
        )
    });
}

/// Whole allocations through `readback::Reader`.
///
/// # Safety
/// The allocations must be live and the device idle.
unsafe fn gpu_read_all(
    d: &DeviceData,
    queues: &[(u64, u32)],
    hidden: &[(u64, u64, u32)],
    out: &mut Vec<(u64, u64, Vec<u8>)>,
) -> Result<(), String> {
    let largest = hidden.iter().map(|h| h.1).max().unwrap_or(0);
    let mut reader = readback::Reader::new(d, queues, largest)?;
    for &(handle, size, type_index) in hidden {
        out.push((handle, 0, reader.read(handle, size, type_index, 0, size)?));
    }
    Ok(())
}

/// Reads the contents of every allocation of `d` into `out` as (memory, offset, bytes): host-visible
/// ones through the app's mapping when mapped (making the shadow equal to it, so later scans send only
/// changes) or a mapping of the layer's own; the others through the GPU (`gpu_read_all`). What cannot be
/// read is returned as gaps.
fn read_memory(d: &DeviceData, out: &mut Vec<(u64, u64, Vec<u8>)>, gaps: &mut Vec<String>) {
    let force_gpu = readback::forced();
    let mut st = d.lock();
    // The device is idle: copies a capture left pending are done, and submitted before this
    // trace, so no replay of it runs them (nothing becomes pending while tracking, see
    // `submit::tracked_submit`). The shadows are taken afresh below, so no range is the GPU's.
    st.pending.clear();
    st.nodes.clear();
    let mut unmapped = Vec::new();
    let mut hidden = Vec::new();
    for (&handle, m) in st.memories.iter_mut() {
        m.gpu_ranges.clear();
        if m.imported_host {
            // ffmpeg frees an upload's host buffer before the allocation made from it: reading
            // it could touch freed (or unmapped) pages. The replay makes its own.
            gaps.push(format!(
                "memory {handle:#x}: imported from the app's host memory, its contents are not read"
            ));
            continue;
        }
        if !m.host_visible || force_gpu {
            hidden.push((handle, m.size, m.type_index));
            if let Some(map) = m.mapped.as_mut() {
                if let Err(e) = map.baseline() {
                    runtime::log_once("memory-guard", &crate::state::unguarded(&e));
                }
            }
            continue;
        }
        match m.mapped.as_mut() {
            Some(map) if !map.ptr.is_null() => {
                // SAFETY: the app's mapping is valid while the state lock is held.
                let live =
                    unsafe { std::slice::from_raw_parts(map.ptr as *const u8, map.size as usize) };
                if let Err(e) = map.baseline() {
                    runtime::log_once("memory-guard", &crate::state::unguarded(&e));
                }
                out.push((handle, map.offset, live.to_vec()));
                if map.offset > 0 || map.size < m.size {
                    gaps.push(format!(
                        "memory {handle:#x}: only its mapped range [{}, +{}) of {} bytes is in the snapshot",
                        map.offset, map.size, m.size
                    ));
                }
            }
            _ => unmapped.push((handle, m.size)),
        }
    }
    if let (Some(map), Some(unmap)) = (d.table.vkMapMemory, d.table.vkUnmapMemory) {
        for (handle, size) in unmapped {
            let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
            let mem = vk::DeviceMemory::from_raw(handle);
            // SAFETY: the allocation is live and not mapped by the app (the state lock is held,
            // and vkMapMemory takes it), so the layer may map it for this read.
            let r = unsafe {
                map(
                    d.handle,
                    mem,
                    0,
                    vk::WHOLE_SIZE,
                    vk::MemoryMapFlags::empty(),
                    &mut p,
                )
            };
            if r != vk::Result::SUCCESS || p.is_null() {
                gaps.push(format!("memory {handle:#x}: cannot map it to read ({r:?})"));
                continue;
            }
            // SAFETY: a whole-allocation mapping of `size` bytes.
            let bytes =
                unsafe { std::slice::from_raw_parts(p as *const u8, size as usize) }.to_vec();
            unsafe { unmap(d.handle, mem) };
            out.push((handle, 0, bytes));
        }
    }
    if !hidden.is_empty() {
        hidden.sort();
        // SAFETY: the allocations are live (the state lock is held) and the device is idle.
        let queues: Vec<(u64, u32)> = st.queues.iter().map(|(q, f)| (*q, *f)).collect();
        if let Err(e) = unsafe { gpu_read_all(d, &queues, &hidden, out) } {
            let bytes: u64 = hidden.iter().map(|h| h.1).sum();
            gaps.push(format!(
                "{} allocations ({bytes} bytes) the host cannot map were not read back: {e}",
                hidden.len()
            ));
        }
    }
    drop(st);
}
