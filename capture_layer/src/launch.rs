//! Running a program under the capture layer without installing anything system-wide.
//!
//! The loader finds explicit layers through `VK_ADD_LAYER_PATH` (a directory of manifests) and enables
//! them with `VK_LOADER_LAYERS_ENABLE`. The checked-in `capture_layer/VkLayer_quarry_capture.json` uses a
//! path relative to itself, so it only works when copied next to the `.so`; here a manifest with the
//! absolute path of the built library is written into a fresh temporary directory for each run.

use layer_support::launch::json_string;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// File name of the built layer library.
pub const LIBRARY_FILE: &str = "libVkLayer_quarry_capture.so";
/// Manifest file name.
pub const MANIFEST_FILE: &str = "VkLayer_quarry_capture.json";

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
                write!(f, "{LIBRARY_FILE} not found (build it with `cargo build -p capture_layer`); looked in:")?;
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

/// Finds the built layer: `$QUARRY_CAPTURE_LAYER_LIBRARY` if set, else next to the current executable,
/// in its `deps/` directory, or one directory up (test binaries live in `target/<profile>/deps`).
pub fn find_layer_library() -> Result<PathBuf, LaunchError> {
    layer_support::launch::find_library(LIBRARY_FILE, "QUARRY_CAPTURE_LAYER_LIBRARY")
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
        "description": "quarry: records Vulkan calls and the query results the application received",
        "instance_extensions": [{{ "name": "VK_EXT_layer_settings", "spec_version": "2" }}]
    }}
}}
"#,
        name = crate::LAYER_NAME,
        path = json_string(library_path)
    )
}

/// Writes a manifest naming `library` (made absolute) into `dir`.
pub fn write_manifest(dir: &Path, library: &Path) -> Result<PathBuf, LaunchError> {
    let library = std::fs::canonicalize(library)
        .map_err(io(format!("cannot resolve {}", library.display())))?;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let path = dir.join(MANIFEST_FILE);
    let text = manifest_json(&library.to_string_lossy());
    std::fs::write(&path, text).map_err(io(format!("cannot write {}", path.display())))?;
    Ok(path)
}

/// A manifest directory that is removed when dropped.
pub struct LayerDir {
    pub dir: PathBuf,
    pub library: PathBuf,
}

impl LayerDir {
    /// Writes a manifest for `library` into a new directory under the system temp dir.
    pub fn new(library: &Path) -> Result<LayerDir, LaunchError> {
        let dir = layer_support::launch::temp_layer_dir("quarry-layer");
        write_manifest(&dir, library)?;
        Ok(LayerDir {
            dir,
            library: library.to_path_buf(),
        })
    }

    /// Sets the loader variables on `cmd` so the layer is found and enabled, keeping whatever layer
    /// settings the environment already has.
    pub fn apply(&self, cmd: &mut Command) {
        let mut paths = OsString::from(&self.dir);
        if let Some(old) = std::env::var_os("VK_ADD_LAYER_PATH").filter(|v| !v.is_empty()) {
            paths.push(":");
            paths.push(old);
        }
        cmd.env("VK_ADD_LAYER_PATH", paths);
        let mut enable = OsString::from(crate::LAYER_NAME);
        if let Some(old) = std::env::var_os("VK_LOADER_LAYERS_ENABLE").filter(|v| !v.is_empty()) {
            enable = old;
            enable.push(",");
            enable.push(crate::LAYER_NAME);
        }
        cmd.env("VK_LOADER_LAYERS_ENABLE", enable);
    }
}

impl Drop for LayerDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(MANIFEST_FILE));
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// What [`capture_command`] ran.
#[derive(Debug)]
pub struct CaptureOutcome {
    pub status: ExitStatus,
    /// The trace path given to the layer (absolute).
    pub trace: PathBuf,
}

/// A `Command` for `program args...` with the layer enabled and `QUARRY_CAPTURE_FILE=output`; the caller
/// keeps `layer` alive until the program exits.
pub fn command(
    program: &OsStr,
    args: &[OsString],
    output: &Path,
    layer: &LayerDir,
) -> Result<Command, LaunchError> {
    let output = absolute(output)?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    layer.apply(&mut cmd);
    cmd.env("QUARRY_CAPTURE_FILE", &output);
    Ok(cmd)
}

fn absolute(p: &Path) -> Result<PathBuf, LaunchError> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir()
        .map_err(io("cannot read the current directory"))?
        .join(p))
}

/// Runs `program args...` under the capture layer, writing the trace to `output`; waits for it to exit.
pub fn capture_command(
    program: &OsStr,
    args: &[OsString],
    output: &Path,
) -> Result<CaptureOutcome, LaunchError> {
    let library = find_layer_library()?;
    let layer = LayerDir::new(&library)?;
    let mut cmd = command(program, args, output, &layer)?;
    let status = cmd
        .status()
        .map_err(io(format!("cannot run {}", program.to_string_lossy())))?;
    Ok(CaptureOutcome {
        status,
        trace: absolute(output)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_is_valid_json_with_escaped_path() {
        let text = manifest_json("/tmp/a \"b\"\\c/libVkLayer_quarry_capture.so");
        assert!(text.contains(r#""library_path": "/tmp/a \"b\"\\c/libVkLayer_quarry_capture.so""#));
        assert!(text.contains(r#""name": "VK_LAYER_QUARRY_capture""#));
        assert!(text.contains(r#""file_format_version": "1.2.0""#));
    }

    #[test]
    fn checked_in_manifest_matches_the_layer() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/VkLayer_quarry_capture.json"
        ))
        .unwrap();
        assert_eq!(text, manifest_json("./libVkLayer_quarry_capture.so"));
    }

    #[test]
    fn layer_dir_writes_and_cleans_up() {
        let lib = std::env::temp_dir().join(format!("quarry-fake-lib-{}.so", std::process::id()));
        std::fs::write(&lib, b"x").unwrap();
        let dir;
        {
            let l = LayerDir::new(&lib).unwrap();
            dir = l.dir.clone();
            let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
            assert!(text.contains(&*std::fs::canonicalize(&lib).unwrap().to_string_lossy()));
            let mut cmd = Command::new("true");
            l.apply(&mut cmd);
            let envs: Vec<_> = cmd.get_envs().map(|(k, _)| k.to_os_string()).collect();
            assert!(envs.contains(&OsString::from("VK_ADD_LAYER_PATH")));
            assert!(envs.contains(&OsString::from("VK_LOADER_LAYERS_ENABLE")));
        }
        assert!(!dir.exists(), "manifest dir removed on drop");
        let _ = std::fs::remove_file(lib);
    }

    #[test]
    fn missing_library_is_an_error_not_a_panic() {
        std::env::set_var(
            "QUARRY_CAPTURE_LAYER_LIBRARY",
            "/nonexistent/libVkLayer_quarry_capture.so",
        );
        let e = find_layer_library().unwrap_err();
        std::env::remove_var("QUARRY_CAPTURE_LAYER_LIBRARY");
        assert!(e.to_string().contains("not found"));
    }
}
