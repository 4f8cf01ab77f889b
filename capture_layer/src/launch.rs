//! Running a program under the capture layer without installing anything system-wide.
//!
//! The loader finds explicit layers through `VK_ADD_LAYER_PATH` (a directory of manifests) and enables
//! them with `VK_LOADER_LAYERS_ENABLE`. The checked-in `capture_layer/VkLayer_quarry_capture.json` uses a
//! path relative to itself, so it only works when copied next to the `.so`; here a manifest with the
//! absolute path of the built library is written into a fresh temporary directory for each run.

pub use layer_support::launch::LaunchError;
use layer_support::launch::{self, io, Layer};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// File name of the built layer library.
pub const LIBRARY_FILE: &str = "libVkLayer_quarry_capture.so";
/// Manifest file name.
pub const MANIFEST_FILE: &str = "VkLayer_quarry_capture.json";

/// The capture layer, for `layer_support::launch`'s generic helpers.
pub struct Capture;

impl Layer for Capture {
    const NAME: &'static str = crate::LAYER_NAME;
    const LIBRARY_FILE: &'static str = LIBRARY_FILE;
    const MANIFEST_FILE: &'static str = MANIFEST_FILE;
    const LIBRARY_ENV: &'static str = "QUARRY_CAPTURE_LAYER_LIBRARY";
    const PACKAGE: &'static str = "capture_layer";
    const DESCRIPTION: &'static str =
        "quarry: records Vulkan calls and the query results the application received";
    const MANIFEST_EXTRA: &'static str =
        r#""instance_extensions": [{ "name": "VK_EXT_layer_settings", "spec_version": "2" }]"#;
}

/// A manifest directory for the capture layer, removed when dropped.
pub type LayerDir = launch::LayerDir<Capture>;

/// Finds the built layer: `$QUARRY_CAPTURE_LAYER_LIBRARY` if set, else next to the current executable,
/// in its `deps/` directory, or one directory up (test binaries live in `target/<profile>/deps`).
pub fn find_layer_library() -> Result<PathBuf, LaunchError> {
    launch::find_layer_library::<Capture>()
}

/// The manifest text for a library at `library_path` (absolute, or relative to the manifest).
pub fn manifest_json(library_path: &str) -> String {
    launch::manifest_json::<Capture>(library_path)
}

/// Writes a manifest naming `library` (made absolute) into `dir`.
pub fn write_manifest(dir: &Path, library: &Path) -> Result<PathBuf, LaunchError> {
    launch::write_manifest::<Capture>(dir, library)
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
