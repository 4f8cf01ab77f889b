//! Capture settings, from the environment and from `VK_EXT_layer_settings`.
//!
//! | environment | layer setting | meaning |
//! |---|---|---|
//! | `QUARRY_CAPTURE_FILE` | `file` (string) | trace path (default `quarry_<app>_<pid>.qtrace` in the working directory) |
//! | `QUARRY_CAPTURE_DISABLE=1` | `disable` (bool32, integer or string) | the layer is transparent: the next layer's own pointers, nothing hidden, nothing recorded (see `chain`) |
//! | `QUARRY_CAPTURE_FRAMES=A-B`, `A-`, `A` | `frames` (string, or an integer for one frame) | the trace is finalized when frame B (0-based) ends; with A > 0 nothing is written before frame A, which starts with a state snapshot (see `trim`), and a `Note` names the range |
//! | `QUARRY_CAPTURE_TRIGGER=1` | `trigger` | capture on demand: track state, write nothing until a trigger, then a trimmed trace of the next frames, `FILE_1`, `FILE_2`, ... (see `control`) |
//! | `QUARRY_CAPTURE_TRIGGER_FRAMES=N` | `trigger_frames` | frames per trigger (default 1) |
//! | `QUARRY_CAPTURE_TRIGGER_FILE=PATH` | `trigger_file` | a trigger whenever PATH appears (the layer removes it) |
//! | `QUARRY_CAPTURE_HOTKEY=KEY` | `hotkey` | X11 key that triggers (default `F12`; `none`: no hotkey) |
//! | `QUARRY_CAPTURE_TRIGGER_AFTER=S` | `trigger_after` | a trigger S seconds after the instance was created |
//! | `QUARRY_CAPTURE_TRIGGER_FRAME=N` | `trigger_frame` | a trigger when frame N (0-based) begins |
//! | `QUARRY_CAPTURE_END=exit` or `instances` | `end` | when a trace without a frame range ends: at process exit (default; every instance the process makes is in it), or when no instance is left alive (for processes that never reach their exit handlers, and harnesses that read the trace in-process); a later instance then opens `FILE.1`, ... |
//!
//! Any `trigger_*` or `hotkey` setting implies trigger mode; trigger mode and `frames` exclude each
//! other.
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
pub const ENV_END: &str = "QUARRY_CAPTURE_END";
pub const SETTING_FILE: &str = "file";
pub const SETTING_DISABLE: &str = "disable";
pub const SETTING_FRAMES: &str = "frames";
pub const SETTING_END: &str = "end";
/// Trigger mode's (environment, layer setting) names, in `Given::trigger`'s order.
pub const TRIGGER_KEYS: [(&str, &str); 6] = [
    ("QUARRY_CAPTURE_TRIGGER", "trigger"),
    ("QUARRY_CAPTURE_TRIGGER_FRAMES", "trigger_frames"),
    ("QUARRY_CAPTURE_TRIGGER_FILE", "trigger_file"),
    ("QUARRY_CAPTURE_HOTKEY", "hotkey"),
    ("QUARRY_CAPTURE_TRIGGER_AFTER", "trigger_after"),
    ("QUARRY_CAPTURE_TRIGGER_FRAME", "trigger_frame"),
];
/// The hotkey when none is given.
pub const DEFAULT_HOTKEY: &str = "F12";

/// Capture on demand: what triggers, and how many frames each trigger captures.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    /// Frames per trigger (at least 1).
    pub frames: u32,
    pub file: Option<PathBuf>,
    /// X11 key name; `None`: no hotkey.
    pub hotkey: Option<String>,
    pub after: Option<std::time::Duration>,
    pub at_frame: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    pub file: Option<PathBuf>,
    pub disabled: bool,
    pub frames: Option<FrameRange>,
    /// Where `frames` came from, as `QUARRY_CAPTURE_FRAMES` or `layer setting frames` (for the note).
    pub frames_from: String,
    /// Capture on demand (`None`: a plain or trimmed capture).
    pub trigger: Option<Trigger>,
    /// `end=instances`: the trace ends when no instance is left alive, not at process exit.
    pub end_with_instances: bool,
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
    /// Trigger mode's values, in `TRIGGER_KEYS` order.
    pub trigger: [Option<String>; 6],
    pub end: Option<String>,
}

impl Given {
    /// The environment; empty variables count as unset.
    pub fn from_env() -> Given {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Given {
            file: get(ENV_FILE),
            disable: get(ENV_DISABLE),
            frames: get(ENV_FRAMES),
            trigger: TRIGGER_KEYS.map(|(env, _)| get(env)),
            end: get(ENV_END),
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
        let trigger = TRIGGER_KEYS.iter().position(|(_, s)| *s == name);
        let slot = match name.as_str() {
            SETTING_FILE => &mut self.file,
            SETTING_DISABLE => &mut self.disable,
            SETTING_FRAMES => &mut self.frames,
            SETTING_END => &mut self.end,
            _ if trigger.is_some() => &mut self.trigger[trigger.unwrap_or_default()],
            _ => {
                let known: Vec<&str> = [SETTING_FILE, SETTING_DISABLE, SETTING_FRAMES, SETTING_END]
                    .into_iter()
                    .chain(TRIGGER_KEYS.iter().map(|(_, s)| *s))
                    .collect();
                return Err(format!(
                    "unknown layer setting {name:?} for {} (known: {}); ignored",
                    crate::LAYER_NAME,
                    known.join(", ")
                ));
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
        let mut s = Settings::parse_labeled(
            pick(&env.file, &layer.file, ENV_FILE, SETTING_FILE).map(|(_, v)| v),
            pick(&env.disable, &layer.disable, ENV_DISABLE, SETTING_DISABLE),
            pick(&env.frames, &layer.frames, ENV_FRAMES, SETTING_FRAMES),
        )?;
        let mut trigger: [Option<(String, String)>; 6] = Default::default();
        for (i, (env_name, setting)) in TRIGGER_KEYS.iter().enumerate() {
            trigger[i] = pick(&env.trigger[i], &layer.trigger[i], env_name, setting);
        }
        s.trigger = parse_trigger(&trigger)?;
        s.end_with_instances = match pick(&env.end, &layer.end, ENV_END, SETTING_END) {
            None => false,
            Some((label, v)) => match v.trim() {
                "exit" => false,
                "instances" => true,
                other => return Err(format!("{label}={other:?}: expected exit or instances")),
            },
        };
        if s.trigger.is_some() && s.frames.is_some() {
            return Err(format!(
                "{} and trigger mode exclude each other (a trigger captures the frames after it)",
                s.frames_from
            ));
        }
        Ok(s)
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
            trigger: None,
            end_with_instances: false,
        })
    }
}

/// Trigger mode from its (source, value) pairs in `TRIGGER_KEYS` order; `None` when off. Any value
/// but `trigger=0` turns it on.
fn parse_trigger(given: &[Option<(String, String)>; 6]) -> Result<Option<Trigger>, String> {
    if given.iter().all(Option::is_none) {
        return Ok(None);
    }
    let [on, frames, file, hotkey, after, at_frame] = given;
    if let Some((label, v)) = on {
        match v.trim() {
            "0" | "false" | "no" => return Ok(None),
            "1" | "true" | "yes" => {}
            other => return Err(format!("{label}={other:?}: expected 0 or 1")),
        }
    }
    fn number<T: std::str::FromStr>(
        v: &Option<(String, String)>,
        what: &str,
    ) -> Result<Option<T>, String> {
        v.as_ref()
            .map(|(label, v)| {
                v.trim()
                    .parse()
                    .map_err(|_| format!("{label}={v:?}: expected {what}"))
            })
            .transpose()
    }
    let n: u32 = number(frames, "a number of frames (1 or more)")?.unwrap_or(1);
    if n == 0 {
        return Err("trigger frames must be 1 or more".into());
    }
    let after: Option<f64> = number(after, "seconds")?;
    if after.is_some_and(|a| !(0.0..1e9).contains(&a)) {
        return Err("trigger-after seconds must be 0 or more".into());
    }
    let hotkey = match hotkey.as_ref().map(|(l, v)| (l, v.trim())) {
        None => Some(DEFAULT_HOTKEY.to_string()),
        Some((_, "none" | "off" | "0")) => None,
        Some((label, k)) => {
            if crate::control::hotkey::parse(k).is_none() {
                return Err(format!(
                    "{label}={k:?}: unknown key (F1-F12, Print, Pause, Scroll_Lock, Insert, Home, \
                     End, a letter or a digit, with optional ctrl+, shift+, alt+; none for no hotkey)"
                ));
            }
            Some(k.to_string())
        }
    };
    let at: Option<u64> = number(at_frame, "a frame number")?;
    if at == Some(0) {
        // Frame 0 begins before any boundary: that is a plain capture (`frames` 0-N).
        return Err("trigger frame must be 1 or more".into());
    }
    Ok(Some(Trigger {
        frames: n,
        file: file.as_ref().map(|(_, v)| PathBuf::from(v)),
        hotkey,
        after: after.map(std::time::Duration::from_secs_f64),
        at_frame: at,
    }))
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

/// The K-th trace of a trigger-mode capture (K from 1): `_K` before the extension.
pub fn triggered(path: &std::path::Path, k: u32) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}_{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}_{k}"),
    };
    path.with_file_name(name)
}

/// The N-th trace of one process (with `end=instances`, a new instance after every instance was
/// destroyed) gets `.N` before the extension.
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

    /// `end`: process exit by default, `instances` on request, the environment over the app.
    #[test]
    fn end_setting() {
        let env = |v: &str| Given {
            end: Some(v.into()),
            ..Given::default()
        };
        let none = Given::default();
        assert!(!Settings::resolve(&none, &none).unwrap().end_with_instances);
        assert!(
            Settings::resolve(&env("instances"), &none)
                .unwrap()
                .end_with_instances
        );
        assert!(
            !Settings::resolve(&env("exit"), &env("instances"))
                .unwrap()
                .end_with_instances
        );
        assert!(
            Settings::resolve(&none, &env("instances"))
                .unwrap()
                .end_with_instances
        );
        let e = Settings::resolve(&env("never"), &none).unwrap_err();
        assert!(
            e.contains("QUARRY_CAPTURE_END") && e.contains("never"),
            "{e}"
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
            ..Given::default()
        };
        let env = Given {
            file: Some("/b.qtrace".into()),
            disable: Some("0".into()),
            frames: None,
            ..Given::default()
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

    /// Trigger mode: any trigger key turns it on, `trigger=0` off; values checked; no `frames`.
    #[test]
    fn trigger_settings() {
        let mut env = Given::default();
        assert_eq!(
            Settings::resolve(&env, &Given::default()).unwrap().trigger,
            None
        );
        env.trigger[0] = Some("1".into());
        let t = Settings::resolve(&env, &Given::default())
            .unwrap()
            .trigger
            .unwrap();
        assert_eq!(t.frames, 1);
        assert_eq!(t.hotkey.as_deref(), Some(DEFAULT_HOTKEY));
        let mut layer = Given::default();
        layer.trigger[1] = Some("3".into());
        layer.trigger[2] = Some("/tmp/go".into());
        layer.trigger[3] = Some("none".into());
        layer.trigger[4] = Some("2.5".into());
        layer.trigger[5] = Some("40".into());
        let t = Settings::resolve(&Given::default(), &layer)
            .unwrap()
            .trigger
            .unwrap();
        assert_eq!(
            t,
            Trigger {
                frames: 3,
                file: Some(PathBuf::from("/tmp/go")),
                hotkey: None,
                after: Some(std::time::Duration::from_millis(2500)),
                at_frame: Some(40),
            }
        );
        env.trigger[0] = Some("0".into());
        assert_eq!(Settings::resolve(&env, &layer).unwrap().trigger, None);
        let mut bad = Given::default();
        bad.trigger[1] = Some("0".into());
        assert!(Settings::resolve(&bad, &Given::default()).is_err());
        bad.trigger[1] = None;
        bad.trigger[5] = Some("0".into());
        assert!(Settings::resolve(&bad, &Given::default()).is_err());
        bad.trigger[5] = None;
        bad.trigger[3] = Some("F99".into());
        let e = Settings::resolve(&bad, &Given::default()).unwrap_err();
        assert!(e.starts_with("QUARRY_CAPTURE_HOTKEY="), "{e}");
        let both = Given {
            frames: Some("3-5".into()),
            trigger: [Some("1".into()), None, None, None, None, None],
            ..Given::default()
        };
        assert!(Settings::resolve(&both, &Given::default()).is_err());
        assert_eq!(
            triggered(std::path::Path::new("/t/a.qtrace"), 2),
            std::path::Path::new("/t/a_2.qtrace")
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
