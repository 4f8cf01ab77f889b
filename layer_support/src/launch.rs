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

/// What tells one of quarry's layers apart to the code that loads it without installing it.
pub trait Layer {
    /// The layer's name (`VK_LAYER_QUARRY_...`).
    const NAME: &'static str;
    /// File name of the built library.
    const LIBRARY_FILE: &'static str;
    /// Manifest file name.
    const MANIFEST_FILE: &'static str;
    /// Environment variable that overrides where the library is looked for.
    const LIBRARY_ENV: &'static str;
    /// The cargo package that builds it (named in the not-found error).
    const PACKAGE: &'static str;
    /// Manifest `description`.
    const DESCRIPTION: &'static str;
    /// Further manifest members (`"instance_extensions": [...]`, ...), each line ending in a comma
    /// except the last; empty for none.
    const MANIFEST_EXTRA: &'static str;
}

#[derive(Debug)]
pub enum LaunchError {
    /// The layer library was not found: (library file, package, override variable, paths tried).
    LibraryNotFound {
        file: &'static str,
        package: &'static str,
        env: &'static str,
        tried: Vec<PathBuf>,
    },
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::LibraryNotFound {
                file,
                package,
                env,
                tried,
            } => {
                write!(
                    f,
                    "{file} not found (build it with `cargo build -p {package}`, or set {env}); looked in:"
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
            LaunchError::LibraryNotFound { .. } => None,
        }
    }
}

/// Maps an I/O error to [`LaunchError::Io`] saying what was being done.
pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

/// Finds `L`'s built library ([`find_library`] with its file and override variable).
pub fn find_layer_library<L: Layer>() -> Result<PathBuf, LaunchError> {
    find_library(L::LIBRARY_FILE, L::LIBRARY_ENV)
        .map_err(io("cannot locate the current executable"))?
        .map_err(|tried| LaunchError::LibraryNotFound {
            file: L::LIBRARY_FILE,
            package: L::PACKAGE,
            env: L::LIBRARY_ENV,
            tried,
        })
}

/// `L`'s manifest for a library at `library_path` (absolute, or relative to the manifest).
pub fn manifest_json<L: Layer>(library_path: &str) -> String {
    let extra = if L::MANIFEST_EXTRA.is_empty() {
        String::new()
    } else {
        format!(",\n        {}", L::MANIFEST_EXTRA)
    };
    format!(
        r#"{{
    "file_format_version": "1.2.0",
    "layer": {{
        "name": "{name}",
        "type": "GLOBAL",
        "library_path": {path},
        "api_version": "1.3.239",
        "implementation_version": "1",
        "description": "{description}"{extra}
    }}
}}
"#,
        name = L::NAME,
        path = json_string(library_path),
        description = L::DESCRIPTION,
    )
}

/// Writes `L`'s manifest naming `library` (made absolute) into `dir`; returns the manifest's path.
pub fn write_manifest<L: Layer>(
    dir: &std::path::Path,
    library: &std::path::Path,
) -> Result<PathBuf, LaunchError> {
    let library = std::fs::canonicalize(library)
        .map_err(io(format!("cannot resolve {}", library.display())))?;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let path = dir.join(L::MANIFEST_FILE);
    let text = manifest_json::<L>(&library.to_string_lossy());
    std::fs::write(&path, text).map_err(io(format!("cannot write {}", path.display())))?;
    Ok(path)
}

/// A temporary manifest directory for layer `L`, removed when dropped: put it in
/// `VK_ADD_LAYER_PATH` and the layer in `VK_LOADER_LAYERS_ENABLE` ([`LayerDir::apply`]).
pub struct LayerDir<L: Layer> {
    pub dir: PathBuf,
    pub library: PathBuf,
    layer: std::marker::PhantomData<L>,
}

impl<L: Layer> LayerDir<L> {
    /// Finds the built layer and writes its manifest into a new temp dir.
    pub fn for_built_layer() -> Result<Self, LaunchError> {
        Self::new(&find_layer_library::<L>()?)
    }

    /// Writes a manifest for `library` into a new directory under the system temp dir.
    pub fn new(library: &std::path::Path) -> Result<Self, LaunchError> {
        let dir = temp_layer_dir(L::LIBRARY_FILE.trim_end_matches(".so"));
        write_manifest::<L>(&dir, library)?;
        Ok(LayerDir {
            dir,
            library: library.to_path_buf(),
            layer: std::marker::PhantomData,
        })
    }

    /// `VK_ADD_LAYER_PATH` and `VK_LOADER_LAYERS_ENABLE` values that add this layer to `old_path`
    /// and `old_enable` (the environment's values). Layers named in `VK_INSTANCE_LAYERS` stay above.
    pub fn env_values(
        &self,
        old_path: Option<std::ffi::OsString>,
        old_enable: Option<std::ffi::OsString>,
    ) -> [(&'static str, std::ffi::OsString); 2] {
        let mut paths = std::ffi::OsString::from(&self.dir);
        if let Some(old) = old_path.filter(|v| !v.is_empty()) {
            paths.push(":");
            paths.push(old);
        }
        let mut enable = std::ffi::OsString::from(L::NAME);
        if let Some(old) = old_enable.filter(|v| !v.is_empty()) {
            enable = old;
            enable.push(",");
            enable.push(L::NAME);
        }
        [
            ("VK_ADD_LAYER_PATH", paths),
            ("VK_LOADER_LAYERS_ENABLE", enable),
        ]
    }

    /// Sets the loader variables on `cmd` so that the layer is found and enabled, keeping the
    /// layers the environment already names.
    pub fn apply(&self, cmd: &mut std::process::Command) {
        for (k, v) in self.env_values(
            std::env::var_os("VK_ADD_LAYER_PATH"),
            std::env::var_os("VK_LOADER_LAYERS_ENABLE"),
        ) {
            cmd.env(k, v);
        }
    }
}

impl<L: Layer> Drop for LayerDir<L> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(L::MANIFEST_FILE));
        let _ = std::fs::remove_dir(&self.dir);
    }
}
