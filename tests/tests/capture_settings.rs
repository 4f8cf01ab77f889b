//! The capture layer's settings through VK_EXT_layer_settings, in this process (ash on lavapipe): the
//! trace goes where the app's `VkLayerSettingsCreateInfoEXT` says, `disable` records nothing, and the
//! environment wins over the app's settings. Also: a chained struct this build cannot serialize is named
//! (sType and command) in a `Note`. One test per process: it changes the environment.

use ash::vk;
use format::record::Record;
use quarry_tests::*;
use std::ffi::{c_void, CStr};
use std::path::Path;

const LAYER: &CStr = c"VK_LAYER_QUARRY_capture";
/// An sType no registry assigns (extension number 1000).
const UNKNOWN_STYPE: i32 = 1_000_999_000;

/// Creates an instance that enables the capture layer itself (as an app that configures it does), with
/// the chain [unknown struct] -> VkLayerSettingsCreateInfoEXT(`settings`) and, when `extension`,
/// VK_EXT_layer_settings enabled (the layer's manifest provides it); lists its GPUs and destroys it.
/// Loaders before 1.3.2xx refuse instance extensions missing from their own list, this one included
/// (ERROR_EXTENSION_NOT_PRESENT, returned); the layer reads the struct whether or not it is enabled.
unsafe fn instance_with_settings(
    entry: &ash::Entry,
    settings: &[vk::LayerSettingEXT<'_>],
    extension: bool,
) -> Result<(), vk::Result> {
    let info = vk::LayerSettingsCreateInfoEXT::default().settings(settings);
    let unknown = vk::BaseInStructure {
        s_type: vk::StructureType::from_raw(UNKNOWN_STYPE),
        p_next: &info as *const _ as *const vk::BaseInStructure<'_>,
        ..Default::default()
    };
    let app = vk::ApplicationInfo::default()
        .application_name(c"quarry-settings-test")
        .api_version(vk::API_VERSION_1_1);
    let extensions = [c"VK_EXT_layer_settings".as_ptr()];
    let layers = [LAYER.as_ptr()];
    let mut ci = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&layers)
        .enabled_extension_names(if extension { &extensions[..] } else { &[] });
    ci.p_next = &unknown as *const _ as *const c_void;
    let instance = entry.create_instance(&ci, None)?;
    let gpus = instance.enumerate_physical_devices().unwrap();
    assert!(!gpus.is_empty());
    instance.destroy_instance(None);
    Ok(())
}

fn string_setting<'a>(
    name: &'a CStr,
    value: &'a [*const std::ffi::c_char; 1],
) -> vk::LayerSettingEXT<'a> {
    vk::LayerSettingEXT {
        p_layer_name: LAYER.as_ptr(),
        p_setting_name: name.as_ptr(),
        ty: vk::LayerSettingTypeEXT::STRING,
        value_count: 1,
        p_values: value.as_ptr().cast(),
        ..Default::default()
    }
}

fn notes(path: &Path) -> Vec<String> {
    read_trace(path)
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Note(n) => Some(n.message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn layer_settings_choose_the_trace_file() {
    if !require(&[]) {
        return;
    }
    let layer = layer();
    std::env::set_var("VK_DRIVER_FILES", LAVAPIPE_ICD);
    std::env::set_var("VK_ICD_FILENAMES", LAVAPIPE_ICD);
    std::env::set_var("VK_ADD_LAYER_PATH", &layer.dir);
    // Found through the path, enabled by the app (the loader checks the extension against the layers
    // the app enables).
    std::env::remove_var("VK_LOADER_LAYERS_ENABLE");
    std::env::remove_var("VK_INSTANCE_LAYERS");
    std::env::remove_var("QUARRY_CAPTURE_FILE");
    std::env::remove_var("QUARRY_CAPTURE_DISABLE");
    std::env::remove_var("QUARRY_CAPTURE_FRAMES");
    // Each instance below is a capture of its own, read before this process exits (by default
    // every instance of a process goes into one trace, finished at exit).
    std::env::set_var("QUARRY_CAPTURE_END", "instances");
    // The layer's default name, which no phase below may produce.
    let exe = std::env::current_exe().unwrap();
    let default_trace = std::env::current_dir().unwrap().join(format!(
        "quarry_{}_{}.qtrace",
        exe.file_name().unwrap().to_string_lossy().replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
            "_"
        ),
        std::process::id()
    ));

    let entry = unsafe { ash::Entry::load() }.expect("libvulkan");

    // 1. The setting alone decides where the trace goes.
    let a = scratch("from-setting.qtrace");
    let a_c = std::ffi::CString::new(a.to_str().unwrap()).unwrap();
    let a_v = [a_c.as_ptr()];
    let settings = [string_setting(c"file", &a_v)];
    match unsafe { instance_with_settings(&entry, &settings, true) } {
        Ok(()) => {}
        Err(vk::Result::ERROR_EXTENSION_NOT_PRESENT) => {
            eprintln!(
                "note: this loader does not know VK_EXT_layer_settings; struct chained without it"
            );
            unsafe { instance_with_settings(&entry, &settings, false) }.unwrap();
        }
        Err(e) => panic!("vkCreateInstance: {e}"),
    }
    assert!(a.exists(), "trace written where the layer setting said");
    assert!(!default_trace.exists(), "no trace under the default name");
    let t = read_trace(&a);
    assert!(t.info.complete);
    t.check_structure();
    assert_eq!(t.info.header.application, "quarry-settings-test");
    assert!(t.calls_of("vkEnumeratePhysicalDevices") >= 1);
    // The unknown struct is reported with its sType and command; the settings struct is not.
    let n = notes(&a);
    assert!(
        n.iter()
            .any(|m| m.contains("vkCreateInstance") && m.contains(&UNKNOWN_STYPE.to_string())),
        "{n:?}"
    );
    assert!(!n.iter().any(|m| m.contains("1000496000")), "{n:?}");

    // 2. disable (bool32) records nothing, whatever file is named.
    let b = scratch("disabled.qtrace");
    let b_c = std::ffi::CString::new(b.to_str().unwrap()).unwrap();
    let b_v = [b_c.as_ptr()];
    let yes: vk::Bool32 = vk::TRUE;
    let disable = vk::LayerSettingEXT {
        p_layer_name: LAYER.as_ptr(),
        p_setting_name: c"disable".as_ptr(),
        ty: vk::LayerSettingTypeEXT::BOOL32,
        value_count: 1,
        p_values: (&yes as *const vk::Bool32).cast(),
        ..Default::default()
    };
    unsafe { instance_with_settings(&entry, &[string_setting(c"file", &b_v), disable], false) }
        .unwrap();
    assert!(!b.exists(), "disable=true wrote a trace");
    assert!(!default_trace.exists());

    // 3. The environment wins over the app's setting; another layer's settings are not ours.
    let c = scratch("from-env.qtrace");
    let d = scratch("overridden.qtrace");
    let d_c = std::ffi::CString::new(d.to_str().unwrap()).unwrap();
    let d_v = [d_c.as_ptr()];
    let not_ours = vk::LayerSettingEXT {
        p_layer_name: c"VK_LAYER_KHRONOS_validation".as_ptr(),
        ..string_setting(c"file", &d_v)
    };
    std::env::set_var("QUARRY_CAPTURE_FILE", &c);
    unsafe { instance_with_settings(&entry, &[string_setting(c"file", &d_v), not_ours], false) }
        .unwrap();
    std::env::remove_var("QUARRY_CAPTURE_FILE");
    assert!(
        c.exists(),
        "QUARRY_CAPTURE_FILE wins over the layer setting"
    );
    assert!(!d.exists());
    assert!(read_trace(&c).info.complete);

    // 4. A path used again in one process gets `.1`.
    unsafe { instance_with_settings(&entry, &[string_setting(c"file", &a_v)], false) }.unwrap();
    let a1 = a.with_file_name("from-setting.1.qtrace");
    assert!(a1.exists(), "second trace to the same path numbered");
    assert!(read_trace(&a1).info.complete);
    let _ = std::fs::remove_file(a1);
}
