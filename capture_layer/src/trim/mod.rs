//! Trimmed capture (`frames` A-B with A > 0): until frame A the layer writes nothing and the
//! tracker keeps what rebuilds the live state; at frame A the snapshot writer writes it.
//!
//! - `tracker`: bookkeeping only (which encoded calls still matter, image layouts); below `runtime`,
//!   which offers it every call while tracking;
//! - `snapshot`: the Vulkan calls (waits, memory reads, fence/timeline states) and the trigger at
//!   frame A; above `runtime`, whose writer writes the records.

pub mod snapshot;
pub mod tracker;
