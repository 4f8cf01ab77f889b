//! GPU/host clock pairs: the layer's own calibration (only when the app enabled
//! VK_EXT_calibrated_timestamps) and the app's vkGetCalibratedTimestampsEXT samples.
//!
//! Depends on: `runtime`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec, slice, NOT_PRESENT};
use crate::runtime::{self, capturing, guard, DeviceData};
use ash::vk;
use format::record::{self, Record};

/// A GPU/host clock pair from vkGetCalibratedTimestampsEXT (only when the app enabled the extension).
pub fn calibrate(d: &DeviceData) {
    if !d.calibrated || !capturing() {
        return;
    }
    let Some(f) = d.table.vkGetCalibratedTimestampsEXT else {
        return;
    };
    let infos = [
        vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::DEVICE),
        vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::CLOCK_MONOTONIC),
    ];
    let mut ts = [0u64; 2];
    let mut deviation = 0u64;
    // SAFETY: arrays sized as declared; the extension is enabled on this device.
    let r = unsafe { f(d.handle, 2, infos.as_ptr(), ts.as_mut_ptr(), &mut deviation) };
    if r == vk::Result::SUCCESS {
        runtime::emit_plain(Record::Calibration(record::Calibration {
            device: raw(d.handle),
            host_ns: ts[1],
            gpu_ticks: ts[0],
            max_deviation_ns: deviation,
        }));
    }
}

pub unsafe extern "system" fn vkGetCalibratedTimestampsEXT(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::CalibratedTimestampInfoKHR<'_>,
    p_timestamps: *mut u64,
    p_max_deviation: *mut u64,
) -> vk::Result {
    let f = next!(
        runtime::device_table(raw(device)).vkGetCalibratedTimestampsEXT,
        NOT_PRESENT
    );
    let r = f(device, count, p_infos, p_timestamps, p_max_deviation);
    guard("vkGetCalibratedTimestampsEXT", || {
        rec!(vkGetCalibratedTimestampsEXT, r.as_raw(), |e| {
            vkstream::encode::vkGetCalibratedTimestampsEXT(
                e,
                device,
                count,
                p_infos,
                p_timestamps,
                p_max_deviation,
            )
        });
        if r != vk::Result::SUCCESS || p_timestamps.is_null() {
            return;
        }
        // The app's own samples are calibration points too, when they pair the device and monotonic clocks.
        let infos = slice(p_infos, count);
        let ts = std::slice::from_raw_parts(p_timestamps, count as usize);
        let at = |dom| {
            infos
                .iter()
                .position(|i| i.time_domain == dom)
                .map(|i| ts[i])
        };
        if let (Some(gpu), Some(host)) = (
            at(vk::TimeDomainKHR::DEVICE),
            at(vk::TimeDomainKHR::CLOCK_MONOTONIC),
        ) {
            runtime::emit_plain(Record::Calibration(record::Calibration {
                device: raw(device),
                host_ns: host,
                gpu_ticks: gpu,
                max_deviation_ns: if p_max_deviation.is_null() {
                    0
                } else {
                    *p_max_deviation
                },
            }));
        }
    });
    r
}
