//! Per-call replay: the commands the replayer handles by hand, one function per command in a
//! module per topic, and [`generic`] (the generated dispatch) for everything else.
//!
//! Adding a hand-written command: list it in `codegen/src/config.rs` (`REPLAY_OVERRIDES`, with its
//! module), write `<module>::<command>(session, call, params, record)` here and run
//! `cargo run -p codegen`; the generated [`replay_call`] calls it. A listed command without its
//! function does not compile, and an unlisted function is dead code, denied below. A command with
//! aliases in vk.xml is listed once; its function is generic over [`Entry`] and serves every name.
//!
//! Dependencies point one way: the engine calls [`replay_call`]; these modules use the session
//! and the generated dispatch, never the engine.
#![allow(non_snake_case)] // one function per command, named after it
#![deny(dead_code)]

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::Call;

use crate::error::ReplayError;
use crate::session::Session;

pub(crate) mod descriptors;
pub(crate) mod device;
pub(crate) mod instance;
pub(crate) mod memory;
pub(crate) mod queries;
pub(crate) mod submit;
pub(crate) mod wsi;

/// The per-call entry point, generated from codegen's `REPLAY_OVERRIDES`: each listed command's
/// arm calls its function here (`<module>::<command>`), the rest go to [`generic`].
pub(crate) use crate::generated::overrides::replay_call;

/// One name of a command vk.xml names more than once (core, KHR, EXT). A function here serving
/// several names (listed once in `REPLAY_OVERRIDES`) is generic over it, and the generated arm of
/// each name passes that name's entry: the replay device's function of the name the capture
/// recorded. `T` is the dispatch table it comes from.
pub(crate) trait Entry<F, T = vkstream::DeviceTable> {
    /// The command's name, for errors.
    const NAME: &'static str;
    /// The replay device's function of this name.
    fn next(t: &T) -> Option<F>;
}

pub(crate) fn other(msg: impl Into<String>) -> ReplayError {
    ReplayError::Other(msg.into())
}

/// Everything not hand-written: the generated dispatch, then a check that the replay did not fail
/// where the capture succeeded.
pub(crate) unsafe fn generic(
    s: &mut Session<'_>,
    call: &Call,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    // Physical-device queries change no state, and the replay device is described by the
    // replayer's own queries. Re-issuing them is harmful: the loader aborts the process when an
    // extension query (e.g. video capabilities) reaches a driver that lacks the extension.
    if call.name().starts_with("vkGetPhysicalDevice") {
        return Ok(());
    }
    let r = match crate::glue::dispatch(s, call) {
        // A command of an extension --drop-unsupported left out.
        Err(ReplayError::Unavailable(_)) if !s.drop.dropped.is_empty() => {
            s.drop.skipped_calls += 1;
            return Ok(());
        }
        r => r?,
    };
    if r.as_raw() < 0 && rec.result >= 0 {
        return Err(ReplayError::Other(format!(
            "the replay returned {r} where the capture got {}",
            vk::Result::from_raw(rec.result)
        )));
    }
    Ok(())
}

/// An extension command from the table loaded at device creation: loading the extension's
/// function table on every recorded command would cost a `vkGetDeviceProcAddr` per entry.
pub(crate) fn loaded<F>(f: Option<F>, name: &str) -> Result<F, ReplayError> {
    f.ok_or_else(|| ReplayError::Other(format!("{name} is not available on the replay device")))
}

/// The replay device and command buffer for a captured command buffer (the device borrowed, not
/// cloned: a clone copies ash's whole function table on every recorded command).
pub(crate) fn cmd<'s>(
    s: &'s Session<'_>,
    captured: u64,
) -> Result<(&'s ash::Device, vk::CommandBuffer), ReplayError> {
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, captured)?;
    Ok((&s.device_for(cb)?.device, vk::CommandBuffer::from_raw(cb)))
}
