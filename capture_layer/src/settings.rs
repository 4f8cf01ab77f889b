//! Capture settings, from the environment and from `VK_EXT_layer_settings`.
//!
//! | environment | layer setting | meaning |
//! |---|---|---|
//! | `QUARRY_CAPTURE_FILE` | `file` (string) | trace path (default `quarry_<app>_<pid>.qtrace` in the working directory) |
//! | `QUARRY_CAPTURE_DISABLE=1` | `disable` (bool32, integer or string) | the layer is transparent: the next layer's own pointers, nothing hidden, nothing recorded (see `chain`) |
//! | `QUARRY_CAPTURE_FRAMES=A-B`, `A-`, `A` | `frames` (string, or an integer for one frame) | the trace is finalized when frame B (0-based) ends; with A > 0 nothing is written before frame A, which starts with a state snapshot (see `trim`), and a `Note` names the range |
//!
//! Layer settings come from `VkLayerSettingsCreateInfoEXT` structs in the app's `VkInstanceCreateInfo`
//! chain, entries with `pLayerName` = `VK_LAYER_QUARRY_capture`. They are read at each `vkCreateInstance`
//! that opens a trace. **The environment wins**: a variable that is set (non-empty) overrides the layer
//! setting of the same meaning, so whoever runs the app can redirect or disable a capture the app
//! configured.

use ash::vk;
use std::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;

/// Environment variable names, and the layer setting names of the same meaning.
pub const ENV_FILE: &str = "QUARRY_CAPTURE_FILE";
pub const ENV_DISABLE: &str = "QUARRY_CAPTURE_DISABLE";
pub const ENV_FRAMES: &str = "QUARRY_CAPTURE_FRAMES";
pub const SETTING_FILE: &str = "file";
pub const SETTING_DISABLE: &str = "disable";
pub const SETTING_FRAMES: &str = "frames";

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    pub file: Option<PathBuf>,
    pub disabled: bool,
    pub frames: Option<FrameRange>,
    /// Where `frames` came from, as `QUARRY_CAPTURE_FRAMES` or `layer setting frames` (for the note).
    pub frames_from: String,
}

/// `A-B`, `A-` or `A` (0-based, inclusive; no end: until exit), parsed as the replayer's
/// `--frames` is.
pub use format::frames::FrameRange;

/// Setting values as one source gave them, unparsed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Given {
    pub file: Option<String>,
    pub disable: Option<String>,
    pub frames: Option<String>,
}

impl Given {
    /// The environment; empty variables count as unset.
    pub fn from_env() -> Given {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Given {
            file: get(ENV_FILE),
            disable: get(ENV_DISABLE),
            frames: get(ENV_FRAMES),
        }
    }

    /// This layer's entries of every `VkLayerSettingsCreateInfoEXT` in a `VkInstanceCreateInfo` chain
    /// (a later entry of the same name wins), and warnings for entries it could not use.
    ///
    /// # Safety
    /// `chain` is null or a valid Vulkan pNext chain.
    pub unsafe fn from_chain(mut chain: *const c_void) -> (Given, Vec<String>) {
        let mut given = Given::default();
        let mut warnings = Vec::new();
        let mut left = vkstream::MAX_CHAIN;
        while !chain.is_null() && left > 0 {
            left -= 1;
            let base = &*(chain as *const vk::BaseInStructure<'_>);
            if base.s_type == vk::StructureType::LAYER_SETTINGS_CREATE_INFO_EXT {
                let info = &*(chain as *const vk::LayerSettingsCreateInfoEXT<'_>);
                if !info.p_settings.is_null() {
                    let settings =
                        std::slice::from_raw_parts(info.p_settings, info.setting_count as usize);
                    for setting in settings {
                        if let Err(w) = given.take(setting) {
                            warnings.push(w);
                        }
                    }
                }
            }
            chain = base.p_next as *const c_void;
        }
        (given, warnings)
    }

    /// One `VkLayerSettingEXT`: ignored unless it is for this layer; an error names what is wrong.
    unsafe fn take(&mut self, s: &vk::LayerSettingEXT<'_>) -> Result<(), String> {
        let layer = cstr(s.p_layer_name);
        if layer.as_deref() != Some(crate::LAYER_NAME) {
            return Ok(());
        }
        let name = cstr(s.p_setting_name).unwrap_or_default();
        let slot = match name.as_str() {
            SETTING_FILE => &mut self.file,
            SETTING_DISABLE => &mut self.disable,
            SETTING_FRAMES => &mut self.frames,
            _ => {
                return Err(format!(
                "unknown layer setting {name:?} for {} (known: {SETTING_FILE}, {SETTING_DISABLE}, \
                     {SETTING_FRAMES}); ignored",
                crate::LAYER_NAME
            ))
            }
        };
        match setting_value(s) {
            Ok(v) => {
                *slot = Some(v);
                Ok(())
            }
            Err(e) => Err(format!("layer setting {name}: {e}; ignored")),
        }
    }
}

/// A NUL-terminated string, or `None` for NULL.
unsafe fn cstr(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// The first value of a setting, as text: strings as they are, booleans as 1/0, integers in decimal.
unsafe fn setting_value(s: &vk::LayerSettingEXT<'_>) -> Result<String, String> {
    if s.value_count == 0 || s.p_values.is_null() {
        return Err("no value".into());
    }
    let v = s.p_values;
    Ok(match s.ty {
        vk::LayerSettingTypeEXT::STRING => {
            cstr(*(v as *const *const c_char)).ok_or("a NULL string")?
        }
        vk::LayerSettingTypeEXT::BOOL32 => if *(v as *const vk::Bool32) != 0 {
            "1"
        } else {
            "0"
        }
        .to_string(),
        vk::LayerSettingTypeEXT::INT32 => (*(v as *const i32)).to_string(),
        vk::LayerSettingTypeEXT::UINT32 => (*(v as *const u32)).to_string(),
        vk::LayerSettingTypeEXT::INT64 => (*(v as *const i64)).to_string(),
        vk::LayerSettingTypeEXT::UINT64 => (*(v as *const u64)).to_string(),
        other => return Err(format!("type {} not accepted", other.as_raw())),
    })
}

impl Settings {
    /// The environment alone.
    pub fn from_env() -> Result<Settings, String> {
        Settings::resolve(&Given::from_env(), &Given::default())
    }

    /// Key by key, the environment's value if set, else the layer setting's.
    pub fn resolve(env: &Given, layer: &Given) -> Result<Settings, String> {
        fn pick(
            env: &Option<String>,
            layer: &Option<String>,
            env_name: &str,
            setting: &str,
        ) -> Option<(String, String)> {
            match (env, layer) {
                (Some(v), _) => Some((env_name.to_string(), v.clone())),
                (None, Some(v)) => Some((format!("layer setting {setting}"), v.clone())),
                (None, None) => None,
            }
        }
        Settings::parse_labeled(
            pick(&env.file, &layer.file, ENV_FILE, SETTING_FILE).map(|(_, v)| v),
            pick(&env.disable, &layer.disable, ENV_DISABLE, SETTING_DISABLE),
            pick(&env.frames, &layer.frames, ENV_FRAMES, SETTING_FRAMES),
        )
    }

    /// Values as the environment variables would give them.
    pub fn parse(
        file: Option<String>,
        disable: Option<String>,
        frames: Option<String>,
    ) -> Result<Settings, String> {
        Settings::parse_labeled(
            file,
            disable.map(|v| (ENV_DISABLE.to_string(), v)),
            frames.map(|v| (ENV_FRAMES.to_string(), v)),
        )
    }

    /// `disable` and `frames` come with the name of their source, for the error message.
    fn parse_labeled(
        file: Option<String>,
        disable: Option<(String, String)>,
        frames: Option<(String, String)>,
    ) -> Result<Settings, String> {
        let disabled = match &disable {
            None => false,
            Some((label, v)) => match v.trim() {
                "0" | "false" | "no" => false,
                "1" | "true" | "yes" => true,
                other => return Err(format!("{label}={other:?}: expected 0 or 1")),
            },
        };
        let (frames, frames_from) = match frames {
            None => (None, String::new()),
            Some((label, s)) => match FrameRange::parse(&s) {
                Ok(r) => (Some(r), label),
                Err(_) => {
                    return Err(format!(
                        "{label}={s:?}: expected A-B, A- or A (0-based frame numbers)"
                    ))
                }
            },
        };
        Ok(Settings {
            file: file.map(PathBuf::from),
            disabled,
            frames,
            frames_from,
        })
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
            FrameRange::parse("3-").ok(),
            Some(FrameRange {
                first: 3,
                last: None
            })
        );
        assert_eq!(
            FrameRange::parse("4").ok(),
            Some(FrameRange {
                first: 4,
                last: Some(4)
            })
        );
        assert_eq!(FrameRange::parse("9-5").ok(), None);
        assert_eq!(FrameRange::parse("x").ok(), None);
        assert!(Settings::parse(None, Some("maybe".into()), None).is_err());
        assert!(Settings::parse(None, None, Some("a-b".into())).is_err());
        assert!(
            !Settings::parse(None, Some("0".into()), None)
                .unwrap()
                .disabled
        );
    }

    /// `VkLayerSettingEXT` values of every accepted type, other layers' entries ignored, unknown names and
    /// types reported.
    #[test]
    fn reads_layer_settings_from_the_chain() {
        let file = c"/tmp/from-setting.qtrace";
        let file_ptr = [file.as_ptr()];
        let frames = c"2-4";
        let frames_ptr = [frames.as_ptr()];
        let yes: vk::Bool32 = vk::TRUE;
        let other_file = [c"/tmp/other.qtrace".as_ptr()];
        let float = 1.5f32;
        let ours = c"VK_LAYER_QUARRY_capture";
        let theirs = c"VK_LAYER_KHRONOS_validation";
        let entry = |layer: &CStr, name: &CStr, ty, values: *const c_void| vk::LayerSettingEXT {
            p_layer_name: layer.as_ptr(),
            p_setting_name: name.as_ptr(),
            ty,
            value_count: 1,
            p_values: values,
            ..Default::default()
        };
        let settings = [
            entry(
                theirs,
                c"file",
                vk::LayerSettingTypeEXT::STRING,
                other_file.as_ptr().cast(),
            ),
            entry(
                ours,
                c"file",
                vk::LayerSettingTypeEXT::STRING,
                file_ptr.as_ptr().cast(),
            ),
            entry(
                ours,
                c"frames",
                vk::LayerSettingTypeEXT::STRING,
                frames_ptr.as_ptr().cast(),
            ),
            entry(
                ours,
                c"disable",
                vk::LayerSettingTypeEXT::BOOL32,
                (&yes as *const u32).cast(),
            ),
            entry(
                ours,
                c"colour",
                vk::LayerSettingTypeEXT::BOOL32,
                (&yes as *const u32).cast(),
            ),
            entry(
                ours,
                c"frames",
                vk::LayerSettingTypeEXT::FLOAT32,
                (&float as *const f32).cast(),
            ),
        ];
        let info = vk::LayerSettingsCreateInfoEXT::default().settings(&settings);
        // Behind an unrelated struct, as apps chain them.
        let head = vk::ValidationFeaturesEXT {
            p_next: &info as *const _ as *const c_void,
            ..Default::default()
        };
        let (given, warnings) = unsafe { Given::from_chain(&head as *const _ as *const c_void) };
        assert_eq!(given.file.as_deref(), Some("/tmp/from-setting.qtrace"));
        assert_eq!(given.frames.as_deref(), Some("2-4"));
        assert_eq!(given.disable.as_deref(), Some("1"));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("colour"), "{warnings:?}");
        assert!(
            warnings[1].contains("frames") && warnings[1].contains("type 5"),
            "{warnings:?}"
        );

        let s = Settings::resolve(&Given::default(), &given).unwrap();
        assert_eq!(s.file, Some(PathBuf::from("/tmp/from-setting.qtrace")));
        assert!(s.disabled);
        assert_eq!(
            s.frames,
            Some(FrameRange {
                first: 2,
                last: Some(4)
            })
        );
        assert_eq!(s.frames_from, "layer setting frames");

        // Integer values: a one-frame range, and disable=0.
        let n: u64 = 7;
        let zero: i32 = 0;
        let settings = [
            entry(
                ours,
                c"frames",
                vk::LayerSettingTypeEXT::UINT64,
                (&n as *const u64).cast(),
            ),
            entry(
                ours,
                c"disable",
                vk::LayerSettingTypeEXT::INT32,
                (&zero as *const i32).cast(),
            ),
        ];
        let info = vk::LayerSettingsCreateInfoEXT::default().settings(&settings);
        let (given, warnings) = unsafe { Given::from_chain(&info as *const _ as *const c_void) };
        assert!(warnings.is_empty());
        let s = Settings::resolve(&Given::default(), &given).unwrap();
        assert!(!s.disabled);
        assert_eq!(
            s.frames,
            Some(FrameRange {
                first: 7,
                last: Some(7)
            })
        );
        assert_eq!(
            unsafe { Given::from_chain(std::ptr::null()) }.0,
            Given::default()
        );
    }

    /// The environment wins, key by key; errors name the source of the bad value.
    #[test]
    fn environment_wins_over_layer_settings() {
        let layer = Given {
            file: Some("/a.qtrace".into()),
            disable: Some("1".into()),
            frames: Some("3-5".into()),
        };
        let env = Given {
            file: Some("/b.qtrace".into()),
            disable: Some("0".into()),
            frames: None,
        };
        let s = Settings::resolve(&env, &layer).unwrap();
        assert_eq!(s.file, Some(PathBuf::from("/b.qtrace")));
        assert!(!s.disabled);
        assert_eq!(s.frames.map(|f| f.first), Some(3));
        let e = Settings::resolve(
            &Given::default(),
            &Given {
                disable: Some("maybe".into()),
                ..Given::default()
            },
        )
        .unwrap_err();
        assert!(e.starts_with("layer setting disable="), "{e}");
        let e = Settings::resolve(
            &Given {
                frames: Some("x".into()),
                ..Given::default()
            },
            &layer,
        )
        .unwrap_err();
        assert!(e.starts_with("QUARRY_CAPTURE_FRAMES="), "{e}");
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
