//! quarry replayer: re-executes a trace on any GPU, headless, and re-reads every query.
//!
//! The engine ([`engine::replay`]) reads a trace's records in order: calls are decoded by
//! `vkstream` and re-executed (hand-written for instance/device creation, memory, the emulated
//! window system, waits and queries; generated dispatch for the rest), memory writes are uploaded
//! into the replay's allocations, and every query read the capture made is made again and written,
//! with the captured values, to a results file (see [`compare`] for how they are compared).
mod calls;
mod chain;
pub mod clock;
pub mod compare;
pub mod devices;
pub mod engine;
pub mod error;
pub mod fasthash;
pub mod features;
// Generated code: its own lints are the generator's business.
#[allow(clippy::all, dead_code)]
mod generated;
mod glue;
pub mod inject;
pub mod mapping;
/// Null-driver harness for `cargo bench -p replayer` (not a stable API).
#[doc(hidden)]
pub mod nulldrv;
pub mod perf;
pub mod portability;
pub mod queries;
pub mod rebind;
pub mod results;
pub mod session;
pub mod templates;
pub mod validate;
pub mod window;

pub use devices::{devices, GpuInfo};
pub use engine::{
    exit_now, gpu_abandoned, replay, replay_with_progress, MemoryMode, NoProgress, PassInfo,
    Progress, ReplayOptions, ReplaySummary,
};
pub use error::ReplayError;
