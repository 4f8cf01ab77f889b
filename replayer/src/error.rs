//! The replayer's error type: every failure names what was being replayed.

use ash::vk;

/// Why a replay (or a device listing) failed. Errors inside the command stream carry the call's
/// `seq` and command name so the message points at the exact spot of the trace.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A command whose function the replay device does not provide.
    #[error("{0} is not available on the replay device")]
    Unavailable(String),
    /// No Vulkan loader, no ICD, or instance creation failed.
    #[error("{0}")]
    NoVulkan(String),
    /// No GPU matches the selector, or none can run the trace.
    #[error("no suitable GPU: {0}")]
    NoGpu(String),
    /// An option the user gave names something that does not exist (a GPU index, a counter):
    /// bad input, not a failure of the replay.
    #[error("{0}")]
    BadOption(String),
    /// The trace file cannot be read (damaged, truncated, wrong kind).
    #[error("{0}")]
    Trace(String),
    /// A call failed to replay.
    #[error("call {seq} ({command}): {message}")]
    Call {
        seq: u64,
        command: String,
        message: String,
    },
    /// A call the trace cannot hold (a damaged or forged trace): found by the checks before the
    /// driver saw it (`crate::validate`). Bad input, like an unreadable trace; worded like
    /// [`ReplayError::Call`].
    #[error("call {seq} ({command}): {message}")]
    Invalid {
        seq: u64,
        command: String,
        message: String,
    },
    /// A handle the stream uses was never created in the replay.
    #[error("unknown {ty:?} handle 0x{handle:x} (never created in the trace)")]
    UnknownHandle { ty: vk::ObjectType, handle: u64 },
    /// A Vulkan call returned an error outside the command stream.
    #[error("{what} failed: {result}")]
    Vk { what: String, result: vk::Result },
    /// Writing the results file failed.
    #[error("results file: {0}")]
    Results(String),
    /// Anything else, already worded for the user.
    #[error("{0}")]
    Other(String),
}

impl ReplayError {
    /// Attaches the call position to an error raised while replaying it (kept as-is when it already has one).
    pub fn at(self, seq: u64, command: &str) -> ReplayError {
        match self {
            // Bad options stay what they are wherever they are found.
            e @ (ReplayError::Call { .. }
            | ReplayError::Invalid { .. }
            | ReplayError::BadOption(_)) => e,
            e => ReplayError::Call {
                seq,
                command: command.to_string(),
                message: e.to_string(),
            },
        }
    }

    pub(crate) fn vk(what: impl Into<String>, result: vk::Result) -> ReplayError {
        ReplayError::Vk {
            what: what.into(),
            result,
        }
    }
}
