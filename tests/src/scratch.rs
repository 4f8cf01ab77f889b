//! Scratch paths under the system temp dir, one directory per test process.

use std::path::PathBuf;

/// This process's scratch directory (created on first use).
pub fn scratch_root() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quarry-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// A file path `name` in [`scratch_root`], nothing there yet.
pub fn scratch(name: &str) -> PathBuf {
    let p = scratch_root().join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// An empty directory `tag` in [`scratch_root`] (emptied if a test of this process used it before).
pub fn scratch_dir(tag: &str) -> PathBuf {
    let p = scratch_root().join(tag);
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("create a scratch directory");
    p
}
