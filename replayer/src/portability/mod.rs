//! Replaying a trace on a GPU other than the one it was captured on: which enabled extensions and
//! features the trace uses (`usage`, from the registry tables in `generated`, the features structs
//! of `layer_support::generated::features` and the shaders' SPIR-V, `spirv`), and whether a GPU can
//! replay a trace before replaying it (`check`).

// Generated code: its own lints are the generator's business.
pub mod check;
#[allow(clippy::all, dead_code)]
pub mod generated;
pub mod spirv;
pub mod usage;

pub use check::{check, Check, GpuCheck};
pub use usage::{scan, DeviceUsage, FeatureUse, TraceUsage, Use};
