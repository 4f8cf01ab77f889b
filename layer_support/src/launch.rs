//! Loading a layer without installing it: finding the built library and writing its manifest.

use std::path::PathBuf;

/// Finds a built layer library: `$env_var` if set, else `file` next to the current executable, in its
/// `deps/` directory, or one directory up (test binaries live in `target/<profile>/deps`).
/// The outer error is failing to locate the executable; the inner one lists the paths tried.
pub fn find_library(file: &str, env_var: &str) -> std::io::Result<Result<PathBuf, Vec<PathBuf>>> {
    if let Some(p) = std::env::var_os(env_var) {
        let p = PathBuf::from(p);
        return Ok(if p.is_file() { Ok(p) } else { Err(vec![p]) });
    }
    let exe = std::env::current_exe()?;
    let mut tried = Vec::new();
    if let Some(dir) = exe.parent() {
        let mut dirs = vec![dir.to_path_buf(), dir.join("deps")];
        if let Some(up) = dir.parent() {
            dirs.push(up.to_path_buf());
        }
        for d in dirs {
            let p = d.join(file);
            if p.is_file() {
                return Ok(Ok(p));
            }
            tried.push(p);
        }
    }
    Ok(Err(tried))
}

/// `s` as a JSON string literal, quotes included (manifest paths may hold any character).
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A fresh directory name under the system temp dir for one run's manifest.
pub fn temp_layer_dir(prefix: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()))
}
