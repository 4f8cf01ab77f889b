//! Code shared by quarry's two Vulkan layers (capture and counters). A plain library both link
//! statically, so neither layer depends on the other.
//!
//! - `loader`: the loader <-> layer interface structures (`vk_layer.h` has no ash equivalent);
//! - `entry`: the exported entry points (`export_entry_points!`) and the pNext-chain walk;
//! - `launch`, `counters`: running programs with a layer enabled;
//! - `profile`: device profiles (`quarry devices --json`, `quarry capture --target`): what a GPU
//!   offers, and the rules that intersect it with another GPU.
pub mod counters;
pub mod entry;
pub mod generated;
pub mod launch;
pub mod loader;
pub mod profile;

/// For `export_entry_points!`, which names ash's types from the calling crate.
#[doc(hidden)]
pub use ash;
