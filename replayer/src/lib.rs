//! quarry replayer: re-executes a trace on any GPU, headless, and re-reads every query.
pub mod cli;
pub mod clock;
pub mod compare;
pub mod devices;
pub mod error;
pub mod features;
pub mod mapping;
pub mod queries;
pub mod session;

pub use devices::{devices, GpuInfo};
pub use error::ReplayError;
