//! Loading the layer without installing it: a manifest with the library's absolute path, written into a
//! directory that goes into `VK_ADD_LAYER_PATH`, and the layer named in `VK_LOADER_LAYERS_ENABLE`.
//! The capture layer and the replayer use this to put the counters layer below themselves
//! (`--emulate-counters`).

use layer_support::launch::json_string;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    layer_support::launch::find_library(LIBRARY_FILE, LIBRARY_ENV)
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
        name = crate::LAYER_NAME,
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
        let dir = layer_support::launch::temp_layer_dir("quarry-counters");
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
        let mut enable = OsString::from(crate::LAYER_NAME);
        if let Some(old) = old_enable.filter(|v| !v.is_empty()) {
            enable = old;
            enable.push(",");
            enable.push(crate::LAYER_NAME);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_names_the_layer_and_escapes_the_path() {
        let text = manifest_json("/tmp/a \"b\"\\c/libVkLayer_quarry_counters.so");
        assert!(text.contains(r#""library_path": "/tmp/a \"b\"\\c/libVkLayer_quarry_counters.so""#));
        assert!(text.contains(r#""name": "VK_LAYER_QUARRY_counters""#));
        assert!(text.contains(r#""name": "VK_KHR_performance_query""#));
    }

    #[test]
    fn checked_in_manifest_matches_the_layer() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/VkLayer_quarry_counters.json"
        ))
        .unwrap();
        assert_eq!(text, manifest_json("./libVkLayer_quarry_counters.so"));
    }

    #[test]
    fn layer_dir_writes_env_and_cleans_up() {
        let lib =
            std::env::temp_dir().join(format!("quarry-fake-counters-{}.so", std::process::id()));
        std::fs::write(&lib, b"x").unwrap();
        let dir;
        {
            let l = LayerDir::new(&lib).unwrap();
            dir = l.dir.clone();
            let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
            assert!(text.contains(&*std::fs::canonicalize(&lib).unwrap().to_string_lossy()));
            let [(pk, pv), (ek, ev)] =
                l.env_values(Some("/old".into()), Some("VK_LAYER_QUARRY_capture".into()));
            assert_eq!(pk, "VK_ADD_LAYER_PATH");
            assert_eq!(pv, OsString::from(format!("{}:/old", dir.display())));
            assert_eq!(ek, "VK_LOADER_LAYERS_ENABLE");
            assert_eq!(ev, "VK_LAYER_QUARRY_capture,VK_LAYER_QUARRY_counters");
            let [_, (_, ev)] = l.env_values(None, Some("".into()));
            assert_eq!(ev, "VK_LAYER_QUARRY_counters");
        }
        assert!(!dir.exists(), "manifest dir removed on drop");
        let _ = std::fs::remove_file(lib);
    }

    #[test]
    fn missing_library_is_an_error_not_a_panic() {
        let e = LaunchError::LibraryNotFound(vec![PathBuf::from("/nonexistent/x.so")]);
        assert!(e.to_string().contains("not found"));
        assert!(e.to_string().contains("/nonexistent/x.so"));
    }
}
