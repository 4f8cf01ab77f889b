//! Queries: pools and host-side results (`pools`), query commands in command buffers (`commands`),
//! GPU/host clock calibration (`calibration`) and per-region counters at render pass begins
//! (`regions`). Query copies have their own folder (`query_copies`).
//!
//! Depends on: `runtime`, `state`, `region`, `hooks`.

pub mod calibration;
pub mod commands;
pub mod pools;
pub mod regions;
