//! Replay instances, one per captured instance alive at once (apps keep a probe instance, Zink
//! makes one per GL screen): the captured layers and extensions minus the window system and the
//! capture layer, plus validation when asked (its messages counted through a debug messenger per
//! instance). Each finds the replay GPU (`--gpu`) among its own physical devices; every physical
//! device the capture enumerated through an instance is bound to that instance's replay GPU.

use std::collections::HashSet;
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;
use ash::vk::Handle as _;

use super::Session;
use crate::error::ReplayError;

/// Validation messages seen through the debug messenger.
#[derive(Default)]
pub struct Messages {
    pub count: AtomicU64,
    pub first: Mutex<Vec<String>>,
}

const KEEP_MESSAGES: usize = 20;

/// A replayed instance and what its instance-level commands go through.
pub struct InstanceState {
    pub captured: u64,
    pub instance: ash::Instance,
    /// Function pointers the generated dispatch calls through.
    pub table: vkstream::InstanceTable,
    /// The replay GPU as this instance enumerates it.
    pub pd: vk::PhysicalDevice,
    pub debug_utils: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

unsafe extern "system" fn on_debug_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // Never unwind into the driver.
    let _ = std::panic::catch_unwind(|| {
        if user.is_null() {
            return;
        }
        // SAFETY: `user` is the `Messages` the session keeps alive for the messenger's lifetime.
        let m = unsafe { &*(user as *const Messages) };
        m.count.fetch_add(1, Ordering::Relaxed);
        let text = if data.is_null() || unsafe { (*data).p_message.is_null() } {
            String::from("(no message)")
        } else {
            // SAFETY: the loader passes a NUL-terminated message valid during the callback.
            unsafe { CStr::from_ptr((*data).p_message) }
                .to_string_lossy()
                .into_owned()
        };
        if let Ok(mut first) = m.first.lock() {
            if first.len() < KEEP_MESSAGES {
                first.push(format!("{severity:?}: {text}"));
            }
        }
    });
    vk::FALSE
}

impl Session<'_> {
    /// Creates the replay instance. `layers`/`extensions` are the captured lists; the capture layer
    /// and window-system surface extensions are dropped (replay is headless), validation is added
    /// when asked.
    pub fn create_instance(
        &mut self,
        captured: u64,
        app: Option<(&str, u32, &str, u32, u32)>,
        layers: &[String],
        extensions: &[String],
    ) -> Result<(), ReplayError> {
        if self.instances.contains_key(&captured) {
            return Err(ReplayError::Other(format!(
                "the trace creates instance 0x{captured:x} while an instance of that handle is alive"
            )));
        }
        let available_ext: Vec<String> =
            unsafe { self.entry.enumerate_instance_extension_properties(None) }
                .map_err(|e| ReplayError::vk("vkEnumerateInstanceExtensionProperties", e))?
                .iter()
                .map(|e| crate::devices::c_array_str(&e.extension_name))
                .collect();
        let available_layers: Vec<String> =
            unsafe { self.entry.enumerate_instance_layer_properties() }
                .map_err(|e| ReplayError::vk("vkEnumerateInstanceLayerProperties", e))?
                .iter()
                .map(|l| crate::devices::c_array_str(&l.layer_name))
                .collect();
        let mut ext: Vec<String> = extensions
            .iter()
            .filter(|e| !is_window_system_extension(e))
            .cloned()
            .collect();
        let mut lay: Vec<String> = layers
            .iter()
            .filter(|l| !l.starts_with("VK_LAYER_QUARRY"))
            .cloned()
            .collect();
        if self.messages.is_some() {
            ext.push("VK_EXT_debug_utils".into());
            lay.push("VK_LAYER_KHRONOS_validation".into());
        }
        // Below validation, so validation checks the replay's calls, not the emulation's.
        lay.extend(crate::devices::extra_layers());
        if self.wsi.window {
            ext.extend(crate::window::INSTANCE_EXTENSIONS.map(String::from));
        }
        if available_ext
            .iter()
            .any(|e| e == "VK_KHR_portability_enumeration")
        {
            ext.push("VK_KHR_portability_enumeration".into());
        }
        ext.sort();
        ext.dedup();
        let mut seen = HashSet::new();
        lay.retain(|l| seen.insert(l.clone()));
        let missing_ext: Vec<&String> = ext.iter().filter(|e| !available_ext.contains(e)).collect();
        let missing_layers: Vec<&String> = lay
            .iter()
            .filter(|l| !available_layers.contains(l))
            .collect();
        if !missing_ext.is_empty() || !missing_layers.is_empty() {
            let mut msg = String::from("the replay machine lacks what the trace's instance needs:");
            for e in &missing_ext {
                msg.push_str(&format!("\n  instance extension {e}"));
            }
            for l in &missing_layers {
                msg.push_str(&format!(
                    "\n  layer {l}{}",
                    if l.as_str() == "VK_LAYER_KHRONOS_validation" {
                        " (install vulkan-validationlayers)"
                    } else {
                        ""
                    }
                ));
            }
            return Err(ReplayError::NoGpu(msg));
        }
        let cstr = |v: &[String]| -> Vec<CString> {
            v.iter()
                .map(|s| CString::new(s.as_str()).unwrap_or_default())
                .collect()
        };
        let ext_c = cstr(&ext);
        let lay_c = cstr(&lay);
        let ext_p: Vec<*const i8> = ext_c.iter().map(|c| c.as_ptr()).collect();
        let lay_p: Vec<*const i8> = lay_c.iter().map(|c| c.as_ptr()).collect();
        let loader_version = crate::devices::instance_api_version(self.entry);
        let (app_name, app_version, engine, engine_version, api) =
            app.unwrap_or(("quarry-replay", 0, "quarry", 0, vk::API_VERSION_1_0));
        let app_name = CString::new(app_name).unwrap_or_default();
        let engine = CString::new(engine).unwrap_or_default();
        // The replayer needs 1.1 for properties2/features2; apps asking for less still work.
        let api = api
            .max(vk::API_VERSION_1_1)
            .min(loader_version.max(vk::API_VERSION_1_1));
        let app_info = vk::ApplicationInfo::default()
            .application_name(&app_name)
            .application_version(app_version)
            .engine_name(&engine)
            .engine_version(engine_version)
            .api_version(api);
        let user = self
            .messages
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| Arc::as_ptr(m) as *mut c_void);
        let mut dbg = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_debug_message))
            .user_data(user);
        let mut ci = vk::InstanceCreateInfo::default()
            .application_info(&app_info)
            .enabled_layer_names(&lay_p)
            .enabled_extension_names(&ext_p);
        if ext.iter().any(|e| e == "VK_KHR_portability_enumeration") {
            ci = ci.flags(vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR);
        }
        if self.messages.is_some() {
            ci = ci.push_next(&mut dbg);
        }
        // SAFETY: every pointer in ci lives until the call returns.
        let instance = unsafe { self.entry.create_instance(&ci, None) }
            .map_err(|e| ReplayError::vk("vkCreateInstance", e))?;
        let mut debug_utils = None;
        if self.messages.is_some() {
            let du = ash::ext::debug_utils::Instance::new(self.entry, &instance);
            // SAFETY: valid instance and create info.
            match unsafe { du.create_debug_utils_messenger(&dbg, None) } {
                Ok(m) => debug_utils = Some((du, m)),
                Err(e) => {
                    unsafe { instance.destroy_instance(None) };
                    return Err(ReplayError::vk("vkCreateDebugUtilsMessengerEXT", e));
                }
            }
        }
        // Find the selected GPU in this instance (same loader, same order; the UUID confirms it).
        let pds = unsafe { instance.enumerate_physical_devices() }
            .map_err(|e| ReplayError::vk("vkEnumeratePhysicalDevices", e))?;
        let pd = pds
            .iter()
            .copied()
            .enumerate()
            .find(|(i, pd)| {
                let uuid_ok = self.gpu.summary.device_uuid == [0; 16] || {
                    let mut id = vk::PhysicalDeviceIDProperties::default();
                    let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                    unsafe { instance.get_physical_device_properties2(*pd, &mut p2) };
                    id.device_uuid == self.gpu.summary.device_uuid
                };
                *i as u32 == self.gpu.index && uuid_ok
            })
            .map(|(_, pd)| pd);
        let Some(pd) = pd else {
            unsafe {
                if let Some((du, m)) = debug_utils {
                    du.destroy_debug_utils_messenger(m, None);
                }
                instance.destroy_instance(None);
            }
            return Err(ReplayError::NoGpu(format!(
                "GPU {} ({}) is not visible to the replay instance",
                self.gpu.index, self.gpu.name
            )));
        };
        let gipa = self.entry.static_fn().get_instance_proc_addr;
        // SAFETY: a valid instance and the loader's entry point.
        let table = unsafe { vkstream::InstanceTable::load(gipa, instance.handle()) };
        self.bind(
            vk::ObjectType::INSTANCE,
            captured,
            instance.handle().as_raw(),
        );
        self.instances.insert(
            captured,
            InstanceState {
                captured,
                instance,
                table,
                pd,
                debug_utils,
            },
        );
        Ok(())
    }

    /// Binds every physical device the capture enumerated through captured instance `instance`
    /// to that instance's replay GPU.
    pub fn bind_physical_devices(
        &mut self,
        instance: u64,
        captured: &[u64],
    ) -> Result<(), ReplayError> {
        let pd = self.instance_state(instance)?.pd.as_raw();
        for &c in captured {
            self.bind(vk::ObjectType::PHYSICAL_DEVICE, c, pd);
            if c != 0 {
                self.physical.insert(c, instance);
            }
        }
        Ok(())
    }

    /// The replayed instance of a captured instance.
    pub fn instance_state(&self, captured: u64) -> Result<&InstanceState, ReplayError> {
        self.instances
            .get(&captured)
            .ok_or(ReplayError::UnknownHandle {
                ty: vk::ObjectType::INSTANCE,
                handle: captured,
            })
    }

    /// The replayed instance a captured instance or physical device belongs to. A physical
    /// device no enumeration named (a group enumeration's, a trimmed trace's) belongs to the one
    /// live instance, when there is only one.
    pub fn instance_of(&self, captured: u64) -> Result<&InstanceState, ReplayError> {
        if let Some(i) = self.instances.get(&captured) {
            return Ok(i);
        }
        match self.physical.get(&captured) {
            Some(i) => self.instance_state(*i),
            None if self.instances.len() == 1 => {
                Ok(self.instances.values().next().expect("one instance"))
            }
            None if self.instances.is_empty() => Err(ReplayError::Other(
                "no instance was created before this call".into(),
            )),
            None => Err(ReplayError::Other(format!(
                "handle 0x{captured:x} belongs to none of the {} instances alive",
                self.instances.len()
            ))),
        }
    }

    /// The replayed instance a captured device was created in.
    pub fn instance_of_device(&self, device: u64) -> Result<&InstanceState, ReplayError> {
        self.instance_state(self.device(device)?.instance)
    }

    /// `vkDestroyInstance`: the instance, its physical devices and what of it the trace left
    /// alive (devices, the replay's messenger). The other instances go on; the last one ends the
    /// session as before.
    pub fn destroy_instance(&mut self, captured: u64) {
        let others = self.instances.keys().any(|i| *i != captured);
        if !others {
            self.teardown();
            return;
        }
        let devices: Vec<u64> = self
            .devices
            .values()
            .filter(|d| d.instance == captured)
            .map(|d| d.captured)
            .collect();
        for d in devices {
            let _ = self.destroy_device(d);
        }
        if let Some(i) = self.instances.remove(&captured) {
            i.destroy();
        }
        let gone: Vec<u64> = self
            .physical
            .iter()
            .filter(|(_, i)| **i == captured)
            .map(|(pd, _)| *pd)
            .collect();
        for pd in gone {
            self.physical.remove(&pd);
            self.unbind(vk::ObjectType::PHYSICAL_DEVICE, pd);
        }
        self.unbind(vk::ObjectType::INSTANCE, captured);
    }
}

impl InstanceState {
    /// Destroys the replay's messenger and the instance (its devices must be gone).
    pub(super) fn destroy(self) {
        // SAFETY: the session's own instance, with no device left.
        unsafe {
            if let Some((du, m)) = self.debug_utils {
                du.destroy_debug_utils_messenger(m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

/// Instance extensions that need a window system; replay emulates surfaces instead.
pub fn is_window_system_extension(name: &str) -> bool {
    matches!(
        name,
        "VK_KHR_xlib_surface"
            | "VK_KHR_xcb_surface"
            | "VK_KHR_wayland_surface"
            | "VK_KHR_win32_surface"
            | "VK_KHR_android_surface"
            | "VK_EXT_metal_surface"
            | "VK_MVK_macos_surface"
            | "VK_MVK_ios_surface"
            | "VK_KHR_display"
            // These two require VK_KHR_display: kept alone they fail vkCreateInstance's validation
            // (wgpu enables them wherever they exist).
            | "VK_KHR_get_display_properties2"
            | "VK_EXT_display_surface_counter"
            | "VK_EXT_direct_mode_display"
            | "VK_EXT_acquire_xlib_display"
            | "VK_EXT_acquire_drm_display"
            | "VK_EXT_headless_surface"
            | "VK_EXT_directfb_surface"
            | "VK_QNX_screen_surface"
    )
}
