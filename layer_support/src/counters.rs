//! Loading `VK_LAYER_QUARRY_counters` without installing it (see [`crate::launch`]). `quarry capture`
//! and the replayer use this to put the counters layer below themselves (`--emulate-counters`). It
//! lives here, not in the layer's crate, so that programs need not link the layer (two layers linked
//! into one binary export the same entry points).

pub use crate::launch::LaunchError;
use crate::launch::{self, Layer};
use std::path::{Path, PathBuf};

/// The layer's name.
pub const LAYER_NAME: &str = "VK_LAYER_QUARRY_counters";
/// File name of the built layer library.
pub const LIBRARY_FILE: &str = "libVkLayer_quarry_counters.so";
/// Manifest file name.
pub const MANIFEST_FILE: &str = "VkLayer_quarry_counters.json";
/// Overrides where [`find_layer_library`] looks.
pub const LIBRARY_ENV: &str = "QUARRY_COUNTERS_LAYER_LIBRARY";

/// The counters layer, for [`crate::launch`]'s generic helpers.
pub struct Counters;

impl Layer for Counters {
    const NAME: &'static str = LAYER_NAME;
    const LIBRARY_FILE: &'static str = LIBRARY_FILE;
    const MANIFEST_FILE: &'static str = MANIFEST_FILE;
    const LIBRARY_ENV: &'static str = LIBRARY_ENV;
    const PACKAGE: &'static str = "counters_layer";
    const DESCRIPTION: &'static str =
        "quarry: VK_KHR_performance_query emulated from timestamp, pipeline-statistics and occlusion queries";
    const MANIFEST_EXTRA: &'static str = r#""device_extensions": [
            { "name": "VK_KHR_performance_query", "spec_version": "1", "entrypoints": ["vkAcquireProfilingLockKHR", "vkReleaseProfilingLockKHR"] }
        ]"#;
}

/// A manifest directory for the counters layer, removed when dropped.
pub type LayerDir = launch::LayerDir<Counters>;

/// Finds the built layer: `$QUARRY_COUNTERS_LAYER_LIBRARY` if set, else next to the current
/// executable, in its `deps/` directory, or one directory up.
pub fn find_layer_library() -> Result<PathBuf, LaunchError> {
    launch::find_layer_library::<Counters>()
}

/// The manifest text for a library at `library_path` (absolute, or relative to the manifest).
pub fn manifest_json(library_path: &str) -> String {
    launch::manifest_json::<Counters>(library_path)
}

/// Writes a manifest naming `library` (made absolute) into `dir`; returns the manifest's path.
pub fn write_manifest(dir: &Path, library: &Path) -> Result<PathBuf, LaunchError> {
    launch::write_manifest::<Counters>(dir, library)
}
