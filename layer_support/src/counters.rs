//! Loading `VK_LAYER_QUARRY_counters` without installing it: a manifest with the library's absolute
//! path, written into a directory that goes into `VK_ADD_LAYER_PATH`, and the layer named in
//! `VK_LOADER_LAYERS_ENABLE`. `quarry capture` and the replayer use this to put the counters layer
//! below themselves (`--emulate-counters`). It lives here, not in the layer's crate, so that
//! programs need not link the layer (two layers linked into one binary export the same entry points).

use crate::launch::json_string;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The layer's name.
pub const LAYER_NAME: &str = "VK_LAYER_QUARRY_counters";
/// File name of the built layer library.
pub const LIBRARY_FILE: &str = "libVkLayer_quarry_counters.so";
/// Manifest file name.
pub const MANIFEST_FILE: &str = "VkLayer_quarry_counters.json";
/// Overrides where [`find_layer_library`] looks.
pub const LIBRARY_ENV: &str = "QUARRY_COUNTERS_LAYER_LIBRARY";

#[derive(Debug)]
pub enum LaunchError {
    /// The layer library was not found; lists where it was looked for.
    LibraryNotFound(Vec<PathBuf>),
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::LibraryNotFound(tried) => {
                write!(
                    f,
                    "{LIBRARY_FILE} not found (build it with `cargo build -p counters_layer`, or set {LIBRARY_ENV}); looked in:"
                )?;
                for t in tried {
                    write!(f, " {}", t.display())?;
                }
                Ok(())
            }
            LaunchError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaunchError::Io { source, .. } => Some(source),
            LaunchError::LibraryNotFound(_) => None,
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

/// Finds the built layer: `$QUARRY_COUNTERS_LAYER_LIBRARY` if set, else next to the current executable,
/// in its `deps/` directory, or one directory up (test binaries live in `target/<profile>/deps`).
pub fn find_layer_library() -> Result<PathBuf, LaunchError> {
    crate::launch::find_library(LIBRARY_FILE, LIBRARY_ENV)
        .map_err(io("cannot locate the current executable"))?
        .map_err(LaunchError::LibraryNotFound)
}

/// The manifest text for a library at `library_path` (absolute, or relative to the manifest).
pub fn manifest_json(library_path: &str) -> String {
    format!(
        r#"{{
    "file_format_version": "1.2.0",
    "layer": {{
        "name": "{name}",
        "type": "GLOBAL",
        "library_path": {path},
        "api_version": "1.3.239",
        "implementation_version": "1",
        "description": "quarry: VK_KHR_performance_query emulated from timestamp, pipeline-statistics and occlusion queries",
        "device_extensions": [
            {{ "name": "VK_KHR_performance_query", "spec_version": "1", "entrypoints": ["vkAcquireProfilingLockKHR", "vkReleaseProfilingLockKHR"] }}
        ]
    }}
}}
"#,
        name = LAYER_NAME,
        path = json_string(library_path)
    )
}

/// Writes a manifest naming `library` (made absolute) into `dir`; returns the manifest's path.
pub fn write_manifest(dir: &Path, library: &Path) -> Result<PathBuf, LaunchError> {
    let library = std::fs::canonicalize(library)
        .map_err(io(format!("cannot resolve {}", library.display())))?;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let path = dir.join(MANIFEST_FILE);
    let text = manifest_json(&library.to_string_lossy());
    std::fs::write(&path, text).map_err(io(format!("cannot write {}", path.display())))?;
    Ok(path)
}

/// A manifest directory for the built layer, removed when dropped.
pub struct LayerDir {
    pub dir: PathBuf,
    pub library: PathBuf,
}

impl LayerDir {
    /// Finds the built layer ([`find_layer_library`]) and writes its manifest into a new temp dir.
    pub fn for_built_layer() -> Result<LayerDir, LaunchError> {
        LayerDir::new(&find_layer_library()?)
    }

    /// Writes a manifest for `library` into a new directory under the system temp dir.
    pub fn new(library: &Path) -> Result<LayerDir, LaunchError> {
        let dir = crate::launch::temp_layer_dir("quarry-counters");
        write_manifest(&dir, library)?;
        Ok(LayerDir {
            dir,
            library: library.to_path_buf(),
        })
    }

    /// `VK_ADD_LAYER_PATH` and `VK_LOADER_LAYERS_ENABLE` values that add this layer to `old_path` and
    /// `old_enable` (the environment's values). Layers named in `VK_INSTANCE_LAYERS` stay above it.
    pub fn env_values(
        &self,
        old_path: Option<OsString>,
        old_enable: Option<OsString>,
    ) -> [(&'static str, OsString); 2] {
        let mut paths = OsString::from(&self.dir);
        if let Some(old) = old_path.filter(|v| !v.is_empty()) {
            paths.push(":");
            paths.push(old);
        }
        let mut enable = OsString::from(LAYER_NAME);
        if let Some(old) = old_enable.filter(|v| !v.is_empty()) {
            enable = old;
            enable.push(",");
            enable.push(LAYER_NAME);
        }
        [
            ("VK_ADD_LAYER_PATH", paths),
            ("VK_LOADER_LAYERS_ENABLE", enable),
        ]
    }

    /// Sets the loader variables on `cmd` so that the layer is found and enabled.
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in self.env_values(
            std::env::var_os("VK_ADD_LAYER_PATH"),
            std::env::var_os("VK_LOADER_LAYERS_ENABLE"),
        ) {
            cmd.env(k, v);
        }
    }
}

impl Drop for LayerDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(MANIFEST_FILE));
        let _ = std::fs::remove_dir(&self.dir);
    }
}
