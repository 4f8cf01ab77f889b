//! Capture settings, read once from the environment.
//!
//! - `QUARRY_CAPTURE_FILE`: trace path (default `quarry_<app>_<pid>.qtrace` in the working directory).
//! - `QUARRY_CAPTURE_DISABLE=1`: the layer is loaded and passes every call through, but records nothing.
//! - `QUARRY_CAPTURE_FRAMES=A-B` (or `A-`, or `A`): capture ends (trace finalized) when frame B (0-based)
//!   ends. Frames before A are still recorded: replay needs the state they build, and trimming is not
//!   implemented yet; a `Note` in the trace names the requested range.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    pub file: Option<PathBuf>,
    pub disabled: bool,
    pub frames: Option<FrameRange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRange {
    pub first: u64,
    /// Inclusive; `None` = until exit.
    pub last: Option<u64>,
}

impl Settings {
    pub fn from_env() -> Result<Settings, String> {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Settings::parse(
            get("QUARRY_CAPTURE_FILE"),
            get("QUARRY_CAPTURE_DISABLE"),
            get("QUARRY_CAPTURE_FRAMES"),
        )
    }

    pub fn parse(
        file: Option<String>,
        disable: Option<String>,
        frames: Option<String>,
    ) -> Result<Settings, String> {
        let disabled = match disable.as_deref().map(str::trim) {
            None | Some("0") | Some("false") | Some("no") => false,
            Some("1") | Some("true") | Some("yes") => true,
            Some(other) => {
                return Err(format!("QUARRY_CAPTURE_DISABLE={other:?}: expected 0 or 1"))
            }
        };
        let frames = match frames {
            None => None,
            Some(s) => Some(parse_range(&s).ok_or_else(|| {
                format!(
                    "QUARRY_CAPTURE_FRAMES={s:?}: expected A-B, A- or A (0-based frame numbers)"
                )
            })?),
        };
        Ok(Settings {
            file: file.map(PathBuf::from),
            disabled,
            frames,
        })
    }
}

fn parse_range(s: &str) -> Option<FrameRange> {
    let s = s.trim();
    let num = |t: &str| t.trim().parse::<u64>().ok();
    match s.split_once('-') {
        None => {
            let n = num(s)?;
            Some(FrameRange {
                first: n,
                last: Some(n),
            })
        }
        Some((a, "")) => Some(FrameRange {
            first: num(a)?,
            last: None,
        }),
        Some((a, b)) => {
            let (a, b) = (num(a)?, num(b)?);
            (a <= b).then_some(FrameRange {
                first: a,
                last: Some(b),
            })
        }
    }
}

/// Default trace name: `quarry_<app>_<pid>.qtrace`, `app` reduced to a file-name-safe form.
pub fn default_file_name(app: &str, pid: u32) -> String {
    let mut clean: String = app
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        clean.push_str("app");
    }
    clean.truncate(64);
    format!("quarry_{clean}_{pid}.qtrace")
}

/// The executable's file name (the app name when `VkApplicationInfo` has none).
pub fn exe_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "app".to_string())
}

/// The N-th trace of one process (a new instance after every instance was destroyed) gets `.N` before
/// the extension.
pub fn numbered(path: &std::path::Path, n: u32) -> PathBuf {
    if n == 0 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_settings() {
        let s = Settings::parse(
            Some("/tmp/x.qtrace".into()),
            Some("1".into()),
            Some("5-9".into()),
        )
        .unwrap();
        assert_eq!(
            s.file.as_deref(),
            Some(std::path::Path::new("/tmp/x.qtrace"))
        );
        assert!(s.disabled);
        assert_eq!(
            s.frames,
            Some(FrameRange {
                first: 5,
                last: Some(9)
            })
        );
        assert_eq!(
            parse_range("3-"),
            Some(FrameRange {
                first: 3,
                last: None
            })
        );
        assert_eq!(
            parse_range("4"),
            Some(FrameRange {
                first: 4,
                last: Some(4)
            })
        );
        assert_eq!(parse_range("9-5"), None);
        assert_eq!(parse_range("x"), None);
        assert!(Settings::parse(None, Some("maybe".into()), None).is_err());
        assert!(Settings::parse(None, None, Some("a-b".into())).is_err());
        assert!(
            !Settings::parse(None, Some("0".into()), None)
                .unwrap()
                .disabled
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            default_file_name("vk cube/1", 42),
            "quarry_vk_cube_1_42.qtrace"
        );
        assert_eq!(default_file_name("", 1), "quarry_app_1.qtrace");
        let p = std::path::Path::new("/t/a.qtrace");
        assert_eq!(numbered(p, 0), p);
        assert_eq!(numbered(p, 2), std::path::Path::new("/t/a.2.qtrace"));
    }
}
