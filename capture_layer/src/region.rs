//! VK_ARM_performance_counters_by_region: per-region counters asked for at a render pass begin.
//!
//! The extension is newer than the registry the encoders are generated from, so its
//! `VkRenderPassPerformanceCountersByRegionBeginInfoARM` is read here by hand and written as a
//! `RegionCounters` record next to the begin call; the generated encoder keeps its sType only.

use std::ffi::c_void;

/// `VK_STRUCTURE_TYPE_RENDER_PASS_PERFORMANCE_COUNTERS_BY_REGION_BEGIN_INFO_ARM`.
pub const BEGIN_INFO_STYPE: i32 = 1_000_605_004;

/// The extension's counter enumeration: a physical-device query the replay never re-issues, so
/// the layer passes it through unrecorded.
pub const ENUMERATE: &[u8] = b"vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM";

#[repr(C)]
struct BeginInfo {
    s_type: i32,
    p_next: *const c_void,
    counter_address_count: u32,
    p_counter_addresses: *const u64,
    serialize_regions: u32,
    counter_index_count: u32,
    p_counter_indices: *const u32,
}

#[repr(C)]
struct Base {
    s_type: i32,
    p_next: *const c_void,
}

/// The struct's contents if `chain` holds it: (counter addresses, serialize regions, counter
/// indices).
///
/// # Safety
/// `chain` is a valid pNext chain (as the app passed it to the driver).
pub unsafe fn find(chain: *const c_void) -> Option<(Vec<u64>, bool, Vec<u32>)> {
    let mut node = chain as *const Base;
    // A chain longer than this is a loop; the app's call already went through, so stop quietly.
    for _ in 0..vkstream::MAX_CHAIN {
        let n = node.as_ref()?;
        if n.s_type == BEGIN_INFO_STYPE {
            let b = &*(node as *const BeginInfo);
            let slice = |p: *const u64, n: u32| {
                if p.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(p, n as usize).to_vec()
                }
            };
            let indices = if b.p_counter_indices.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(b.p_counter_indices, b.counter_index_count as usize)
                    .to_vec()
            };
            return Some((
                slice(b.p_counter_addresses, b.counter_address_count),
                b.serialize_regions != 0,
                indices,
            ));
        }
        node = n.p_next as *const Base;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_struct_behind_others() {
        let addrs = [0x1000u64, 0x2000];
        let idx = [0u32, 3];
        let arm = BeginInfo {
            s_type: BEGIN_INFO_STYPE,
            p_next: std::ptr::null(),
            counter_address_count: 2,
            p_counter_addresses: addrs.as_ptr(),
            serialize_regions: 1,
            counter_index_count: 2,
            p_counter_indices: idx.as_ptr(),
        };
        let other = Base {
            s_type: 1_000_044_000,
            p_next: &arm as *const BeginInfo as *const c_void,
        };
        let got = unsafe { find(&other as *const Base as *const c_void) };
        assert_eq!(got, Some((addrs.to_vec(), true, idx.to_vec())));
        assert_eq!(unsafe { find(std::ptr::null()) }, None);
        let alone = Base {
            s_type: 5,
            p_next: std::ptr::null(),
        };
        assert_eq!(
            unsafe { find(&alone as *const Base as *const c_void) },
            None
        );
    }
}
