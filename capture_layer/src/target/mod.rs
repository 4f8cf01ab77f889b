//! Capture for a target device (`quarry capture --target FILE`): the launcher names a device
//! profile in `QUARRY_CAPTURE_TARGET` (`PATH` or `PATH#INDEX`, see `layer_support::profile::load`);
//! while the process records, the physical-device queries (`chain::physical`) and the extension
//! enumeration show the app only what both the capture GPU and the target offer, so an app that
//! adapts to its device records a trace the target can replay. The rules are
//! `layer_support::profile::rules`. A device created with something the target lacks anyway is
//! logged and noted in the trace; the profile itself is the trace's `TargetProfile` record.
//!
//! Without the variable, or while nothing records, `active()` is None and nothing changes.
//!
//! Depends on: `runtime`.

use crate::runtime;
use ash::vk;
use format::record::{Record, TargetProfile};
use layer_support::profile::{self, rules, DeviceProfile};
use std::ffi::{c_char, CStr};
use std::sync::OnceLock;

pub const ENV: &str = "QUARRY_CAPTURE_TARGET";

/// The profile named by the environment, read once (an unreadable one is logged once and ignored:
/// the capture goes on for the capture GPU, and the trace has no `TargetProfile`).
fn loaded() -> Option<&'static DeviceProfile> {
    static TARGET: OnceLock<Option<DeviceProfile>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let spec = std::env::var(ENV).ok().filter(|s| !s.is_empty())?;
            match profile::load(&spec) {
                Ok(p) => Some(p),
                Err(e) => {
                    runtime::log_once(
                        "target",
                        &format!("{ENV}: {e}; capturing without a target device"),
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// The target while the process records with one.
pub fn active() -> Option<&'static DeviceProfile> {
    if !runtime::recording() {
        return None;
    }
    loaded()
}

/// Writes the `TargetProfile` record (at the vkCreateInstance that opened the trace).
pub fn record() {
    let Some(p) = active() else { return };
    runtime::log_once(
        "target-on",
        &format!(
            "capturing for target device {} (profile {}): the app sees what both GPUs offer",
            p.name,
            p.hash()
        ),
    );
    runtime::emit_plain(Record::TargetProfile(TargetProfile {
        name: p.name.clone(),
        hash: p.hash(),
        profile: p.to_json(),
    }));
}

/// Whether the target lacks device extension `name` (hidden from the app while recording).
pub fn hides_extension(name: &str) -> bool {
    active().is_some_and(|p| !p.has_extension(name))
}

/// Logs once what the layer turned off for the app.
pub fn log_hidden(what: &str, hidden: &[String]) {
    if hidden.is_empty() {
        return;
    }
    let list = hidden.join(", ");
    runtime::log_once(
        &format!("target-hide:{list}"),
        &format!("target device lacks {what}, hidden from the app: {list}"),
    );
}

/// At vkCreateDevice: what the app enabled that the target lacks (hidden or not, it asked for
/// it), logged and noted in the trace.
///
/// # Safety
/// `ci` must be the app's valid create info.
pub unsafe fn check_device(ci: &vk::DeviceCreateInfo<'_>) {
    let Some(p) = active() else { return };
    let mut lacking: Vec<String> = Vec::new();
    if !ci.pp_enabled_extension_names.is_null() {
        let names: &[*const c_char] = std::slice::from_raw_parts(
            ci.pp_enabled_extension_names,
            ci.enabled_extension_count as usize,
        );
        for &n in names.iter().filter(|n| !n.is_null()) {
            let n = CStr::from_ptr(n).to_string_lossy();
            if !p.has_extension(&n) {
                lacking.push(format!("extension {n}"));
            }
        }
    }
    lacking.extend(
        rules::lacking_features(ci.p_enabled_features, ci.p_next, p)
            .into_iter()
            .map(|f| format!("feature {f}")),
    );
    if lacking.is_empty() {
        return;
    }
    let msg = format!(
        "the app enabled what target device {} lacks: {}; the trace may not replay there",
        p.name,
        lacking.join(", ")
    );
    runtime::log_once(&msg, &msg);
    runtime::note(msg);
}
