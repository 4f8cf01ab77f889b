//! Capture-device to replay-device translation that needs no GPU: queue families by capability,
//! memory types by property flags.

use std::collections::HashMap;

use ash::vk;
use format::record::{MemoryTypeSummary, QueueFamilySummary};

/// The capability bits that decide whether a family can run a captured family's work. Sparse
/// binding and protected memory are left out: a family advertising them says nothing about the app
/// using them, and the device features the app enabled are checked separately.
const WORK: u32 = vk::QueueFlags::GRAPHICS.as_raw()
    | vk::QueueFlags::COMPUTE.as_raw()
    | vk::QueueFlags::TRANSFER.as_raw()
    | vk::QueueFlags::VIDEO_DECODE_KHR.as_raw()
    | vk::QueueFlags::VIDEO_ENCODE_KHR.as_raw();

/// Graphics and compute queues can always do transfers even when the bit is not reported.
fn effective(flags: u32) -> u32 {
    let gc = vk::QueueFlags::GRAPHICS.as_raw() | vk::QueueFlags::COMPUTE.as_raw();
    if flags & gc != 0 {
        (flags | vk::QueueFlags::TRANSFER.as_raw()) & WORK
    } else {
        flags & WORK
    }
}

/// Maps each captured queue family the app requested to a replay family that can do everything it
/// could (and, for timestamp queries, has timestamps when it had). Prefers the family with the
/// fewest extra capabilities, so a dedicated transfer family maps to a dedicated one when there is one.
/// Several captured families may share one replay family.
pub fn map_queue_families(
    captured: &[QueueFamilySummary],
    replay: &[QueueFamilySummary],
    requested: &[u32],
) -> Result<HashMap<u32, u32>, String> {
    let mut map = HashMap::new();
    for &fam in requested {
        let Some(c) = captured.get(fam as usize) else {
            // No capture summary for this family: keep the index when it exists on the replay GPU.
            if (fam as usize) < replay.len() {
                map.insert(fam, fam);
                continue;
            }
            return Err(format!(
                "queue family {fam} was used in the capture but the replay GPU has only {} families",
                replay.len()
            ));
        };
        let need = effective(c.flags);
        let best = replay
            .iter()
            .enumerate()
            .filter(|(_, r)| effective(r.flags) & need == need)
            .filter(|(_, r)| c.timestamp_valid_bits == 0 || r.timestamp_valid_bits > 0)
            .min_by_key(|(i, r)| {
                (
                    (effective(r.flags) & !need).count_ones(),
                    *i != fam as usize,
                )
            });
        match best {
            Some((i, _)) => {
                map.insert(fam, i as u32);
            }
            None => {
                return Err(format!(
                    "no queue family of the replay GPU can do the work of captured family {fam} \
                     (flags {:?})",
                    vk::QueueFlags::from_raw(c.flags)
                ))
            }
        }
    }
    Ok(map)
}

/// Chooses a replay memory type for an allocation the capture made from a type with
/// `captured_flags`, among the types allowed by `type_bits` (a resource's `memoryTypeBits`, or all).
///
/// `host_access` says whether the trace maps or writes this allocation: then host visibility is
/// required, and coherence is kept when the capture had it (dropped only as a last resort, writes
/// are then flushed explicitly). Memory the host never touches may go anywhere the resource allows.
/// Then as many of the other capture flags as possible are kept, and fewer extra flags are preferred.
pub fn pick_memory_type(
    captured_flags: u32,
    replay: &[MemoryTypeSummary],
    type_bits: u32,
    host_access: bool,
) -> Option<u32> {
    let hv = vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw();
    let hc = vk::MemoryPropertyFlags::HOST_COHERENT.as_raw();
    let lazily = vk::MemoryPropertyFlags::LAZILY_ALLOCATED.as_raw();
    let protected = vk::MemoryPropertyFlags::PROTECTED.as_raw();
    let allowed = |i: usize| i < 32 && type_bits & (1u32 << i) != 0;
    let mut required = captured_flags & protected;
    if host_access {
        required |= hv | (captured_flags & hc);
    }
    loop {
        let best = replay
            .iter()
            .enumerate()
            .filter(|(i, t)| allowed(*i) && t.property_flags & required == required)
            // Lazily allocated memory cannot be mapped or hold data we upload.
            .filter(|(_, t)| captured_flags & lazily != 0 || t.property_flags & lazily == 0)
            .max_by_key(|(i, t)| {
                let kept = (t.property_flags & captured_flags).count_ones() as i64;
                let extra = (t.property_flags & !captured_flags).count_ones() as i64;
                (kept, -extra, -(*i as i64))
            });
        if let Some((i, _)) = best {
            return Some(i as u32);
        }
        if required & hc != 0 {
            required &= !hc;
            continue;
        }
        return None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fam(flags: vk::QueueFlags, ts: u32) -> QueueFamilySummary {
        QueueFamilySummary {
            flags: flags.as_raw(),
            queue_count: 1,
            timestamp_valid_bits: ts,
        }
    }
    fn mt(flags: vk::MemoryPropertyFlags) -> MemoryTypeSummary {
        MemoryTypeSummary {
            property_flags: flags.as_raw(),
            heap_index: 0,
        }
    }
    use vk::MemoryPropertyFlags as M;
    use vk::QueueFlags as Q;

    #[test]
    fn queue_families_by_capability() {
        let gct = Q::GRAPHICS | Q::COMPUTE | Q::TRANSFER;
        let nvidia = [
            fam(gct | Q::SPARSE_BINDING, 64),
            fam(Q::TRANSFER | Q::SPARSE_BINDING, 64),
            fam(Q::COMPUTE | Q::TRANSFER | Q::SPARSE_BINDING, 64),
        ];
        let lavapipe = [fam(gct, 64)];
        // Everything lavapipe did fits NVIDIA's family 0.
        let m = map_queue_families(&lavapipe, &nvidia, &[0]).unwrap();
        assert_eq!(m[&0], 0);
        // NVIDIA's transfer and compute families fold into lavapipe's only family.
        let m = map_queue_families(&nvidia, &lavapipe, &[0, 2]).unwrap();
        assert_eq!((m[&0], m[&2]), (0, 0));
        assert_eq!(map_queue_families(&nvidia, &lavapipe, &[1]).unwrap()[&1], 0);
        let video = [fam(Q::VIDEO_DECODE_KHR, 64)];
        assert!(
            map_queue_families(&video, &lavapipe, &[0]).is_err(),
            "no video family on lavapipe"
        );
        // A dedicated transfer family maps to the dedicated one.
        let m = map_queue_families(&[fam(Q::TRANSFER, 64)], &nvidia, &[0]).unwrap();
        assert_eq!(m[&0], 1);
        // Timestamps needed but missing.
        assert!(map_queue_families(&[fam(Q::COMPUTE, 64)], &[fam(Q::COMPUTE, 0)], &[0]).is_err());
    }

    #[test]
    fn memory_types_by_flags() {
        let lavapipe = [mt(M::DEVICE_LOCAL
            | M::HOST_VISIBLE
            | M::HOST_COHERENT
            | M::HOST_CACHED)];
        let nvidia = [
            mt(M::DEVICE_LOCAL),
            mt(M::HOST_VISIBLE | M::HOST_COHERENT),
            mt(M::HOST_VISIBLE | M::HOST_COHERENT | M::HOST_CACHED),
            mt(M::DEVICE_LOCAL | M::HOST_VISIBLE | M::HOST_COHERENT),
        ];
        let all = u32::MAX;
        let lp = lavapipe[0].property_flags;
        // Mapped lavapipe memory stays host visible on NVIDIA: the type keeping most flags wins.
        assert_eq!(pick_memory_type(lp, &nvidia, all, true), Some(2));
        // Restricted by the resource's memoryTypeBits.
        assert_eq!(pick_memory_type(lp, &nvidia, 0b1010, true), Some(3));
        // A device-local-only resource in mapped memory cannot be replayed there.
        assert_eq!(pick_memory_type(lp, &nvidia, 0b0001, true), None);
        // The same allocation never touched by the host may go to device-local memory.
        assert_eq!(pick_memory_type(lp, &nvidia, 0b0001, false), Some(0));
        assert_eq!(
            pick_memory_type(M::DEVICE_LOCAL.as_raw(), &nvidia, all, false),
            Some(0)
        );
        assert_eq!(
            pick_memory_type(M::DEVICE_LOCAL.as_raw(), &lavapipe, all, false),
            Some(0)
        );
        // Coherence dropped only as a last resort.
        let noncoherent = [mt(M::HOST_VISIBLE | M::HOST_CACHED)];
        let hvc = (M::HOST_VISIBLE | M::HOST_COHERENT).as_raw();
        assert_eq!(pick_memory_type(hvc, &noncoherent, all, true), Some(0));
        assert_eq!(
            pick_memory_type(hvc, &[mt(M::DEVICE_LOCAL)], all, true),
            None
        );
    }
}
