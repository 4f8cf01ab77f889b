//! Code shared by quarry's two Vulkan layers (capture and counters). A plain library both link
//! statically, so neither layer depends on the other.
pub mod counters;
pub mod launch;
pub mod loader;
