//! Helpers shared by the capture tests (included with `#[path]`; as its own test target it has no tests).
#![allow(dead_code)]

use format::record::Record;
use format::{Info, TraceReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
pub use VkLayer_quarry_capture::launch::{find_layer_library, LayerDir};

/// lavapipe only: other ICDs on the machine have no hardware behind them.
pub const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Skips (returns false, printing why) when the test's tools are missing.
pub fn require(programs: &[&str]) -> bool {
    for p in programs {
        if !have(p) {
            eprintln!("SKIP: {p} not installed");
            return false;
        }
    }
    if !Path::new(LAVAPIPE_ICD).exists() {
        eprintln!("SKIP: lavapipe (mesa-vulkan-drivers) not installed");
        return false;
    }
    true
}

pub fn layer() -> LayerDir {
    let lib = find_layer_library().expect("build the layer first: cargo build -p capture_layer");
    LayerDir::new(&lib).expect("write layer manifest")
}

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quarry-capture-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// Base environment for a Vulkan program: lavapipe, XDG_RUNTIME_DIR, no stray layer settings.
pub fn vulkan_command(program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env(
            "XDG_RUNTIME_DIR",
            std::env::var("XDG_RUNTIME_DIR").unwrap_or_else(|_| "/tmp".into()),
        )
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .env_remove("QUARRY_CAPTURE_DISABLE")
        .env_remove("QUARRY_CAPTURE_FRAMES");
    c
}

/// `cmd` with the capture layer enabled, writing `trace`.
pub fn under_layer(mut cmd: Command, layer: &LayerDir, trace: &Path) -> Command {
    layer.apply(&mut cmd);
    cmd.env("QUARRY_CAPTURE_FILE", trace);
    cmd
}

/// An Xvfb server on a display of its own, killed on drop.
pub struct Xvfb {
    child: Child,
    pub display: String,
}

impl Xvfb {
    pub fn start() -> Xvfb {
        // Distinct displays per test process (tests in several files run at once) and per test in
        // one process (tests of one file run on threads at once).
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = 100
            + (std::process::id() % 400)
            + 50 * NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for d in n..n + 50 {
            if Path::new(&format!("/tmp/.X11-unix/X{d}")).exists()
                || Path::new(&format!("/tmp/.X{d}-lock")).exists()
            {
                continue;
            }
            let child = Command::new("Xvfb")
                .arg(format!(":{d}"))
                .args(["-screen", "0", "640x480x24", "-nolisten", "tcp"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start Xvfb");
            let mut x = Xvfb {
                child,
                display: format!(":{d}"),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                // Our server exited: the display was taken by someone else; try the next one.
                if let Ok(Some(_)) = x.child.try_wait() {
                    break;
                }
                if Path::new(&format!("/tmp/.X11-unix/X{d}")).exists() {
                    return x;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = x.child.kill();
            let _ = x.child.wait();
        }
        panic!("could not start Xvfb");
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Trace {
    pub info: Info,
    pub records: Vec<Record>,
    pub reader: TraceReader,
}

pub fn read_trace(path: &Path) -> Trace {
    let reader = TraceReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let info = reader.info();
    let records: Vec<Record> = reader.records().filter_map(|r| r.ok()).collect();
    Trace {
        info,
        records,
        reader,
    }
}

impl Trace {
    pub fn count(&self, name: &str) -> usize {
        self.records
            .iter()
            .filter(|r| r.type_name() == name)
            .count()
    }

    pub fn calls_of(&self, command: &str) -> usize {
        let id = vkstream::command_id(command).unwrap();
        self.records
            .iter()
            .filter(|r| matches!(r, Record::Call(c) if c.cmd == id))
            .count()
    }

    /// Checks the invariants every trace has: the command table first, then calls with strictly
    /// increasing seq in file order, every call's parameters decodable.
    pub fn check_structure(&self) {
        match self.records.first() {
            Some(Record::CommandTable(t)) => {
                assert_eq!(t.len(), vkstream::COMMANDS.len());
                assert_eq!(t[0], vkstream::COMMANDS[0]);
            }
            other => panic!("first record is not the command table: {other:?}"),
        }
        let mut last: Option<u64> = None;
        let mut undecodable = Vec::new();
        for r in &self.records {
            let seq = match r {
                Record::Call(c) => {
                    if let Err(e) = vkstream::decode_call(c.cmd, &c.params) {
                        if undecodable.len() < 5 {
                            undecodable
                                .push(format!("{}: {e}", vkstream::COMMANDS[c.cmd as usize]));
                        }
                    }
                    Some(c.seq)
                }
                Record::MemoryWrite(m) => Some(m.seq),
                _ => None,
            };
            if let Some(s) = seq {
                if let Some(l) = last {
                    assert!(s > l, "seq {s} after {l}: file order must be seq order");
                }
                last = Some(s);
            }
        }
        assert!(
            undecodable.is_empty(),
            "calls that do not decode: {undecodable:?}"
        );
    }
}

/// An instance named `app` asking for Vulkan `api_version`, and the first GPU it enumerates.
///
/// # Safety
/// Loads and calls into the Vulkan loader.
pub unsafe fn first_gpu(
    app: &std::ffi::CStr,
    api_version: u32,
) -> (ash::Entry, ash::Instance, ash::vk::PhysicalDevice) {
    use ash::vk;
    let entry = ash::Entry::load().expect("libvulkan");
    let info = vk::ApplicationInfo::default()
        .application_name(app)
        .api_version(api_version);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&info),
            None,
        )
        .unwrap();
    let pd = instance.enumerate_physical_devices().unwrap()[0];
    (entry, instance, pd)
}

/// A device on `pd` with one queue of family 0 and `features` chained into its create info.
///
/// # Safety
/// `instance` and `pd` must be live; the features must be supported.
pub unsafe fn queue0_device<T: ash::vk::ExtendsDeviceCreateInfo + ?Sized>(
    instance: &ash::Instance,
    pd: ash::vk::PhysicalDevice,
    features: Option<&mut T>,
) -> ash::Device {
    use ash::vk;
    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let mut dci = vk::DeviceCreateInfo::default().queue_create_infos(&qci);
    if let Some(f) = features {
        dci = dci.push_next(f);
    }
    instance.create_device(pd, &dci, None).unwrap()
}

/// An instance (Vulkan 1.2, named `app`) and a device with one queue of family 0 on the first
/// GPU, no features: for tests and benches that need nothing more.
///
/// # Safety
/// Loads and calls into the Vulkan loader.
pub unsafe fn plain_device(app: &std::ffi::CStr) -> (ash::Entry, ash::Instance, ash::Device) {
    let (entry, instance, pd) = first_gpu(app, ash::vk::API_VERSION_1_2);
    let device = queue0_device(
        &instance,
        pd,
        None::<&mut ash::vk::PhysicalDeviceVulkan12Features>,
    );
    (entry, instance, device)
}

/// A new command pool on queue family 0 and one primary command buffer of it, recording.
///
/// # Safety
/// `device` must be live, with queue family 0.
pub unsafe fn begin_primary(
    device: &ash::Device,
) -> (ash::vk::CommandPool, ash::vk::CommandBuffer) {
    use ash::vk;
    let pool = device
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default().queue_family_index(0),
            None,
        )
        .unwrap();
    let cb = device
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .unwrap()[0];
    device
        .begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
        .unwrap();
    (pool, cb)
}

/// Records `n` `vkCmdSetViewport` (x = 0, 1, ...) into a new command buffer of its own pool, on the
/// calling thread: the multi-threaded capture tests run one per thread.
///
/// # Safety
/// `device` must be live, with queue family 0.
pub unsafe fn record_viewports(
    device: &ash::Device,
    n: usize,
) -> (ash::vk::CommandPool, ash::vk::CommandBuffer) {
    use ash::vk;
    let (pool, cb) = begin_primary(device);
    for i in 0..n {
        let vp = vk::Viewport {
            x: i as f32,
            y: 0.0,
            width: 16.0,
            height: 16.0,
            min_depth: 0.0,
            max_depth: 1.0,
        };
        device.cmd_set_viewport(cb, 0, &[vp]);
    }
    device.end_command_buffer(cb).unwrap();
    (pool, cb)
}

/// Points this process's Vulkan at lavapipe with the layer enabled, capturing to `trace` over
/// `frames` (or the whole run). Must run before libvulkan is loaded; the loader reads the
/// environment once, so one such test per process.
pub fn capture_in_process(layer: &LayerDir, trace: &Path, frames: Option<&str>) {
    std::env::set_var("VK_DRIVER_FILES", LAVAPIPE_ICD);
    std::env::set_var("VK_ICD_FILENAMES", LAVAPIPE_ICD);
    std::env::set_var("VK_ADD_LAYER_PATH", &layer.dir);
    std::env::set_var("VK_LOADER_LAYERS_ENABLE", "VK_LAYER_QUARRY_capture");
    std::env::set_var("QUARRY_CAPTURE_FILE", trace);
    std::env::remove_var("QUARRY_CAPTURE_DISABLE");
    match frames {
        Some(f) => std::env::set_var("QUARRY_CAPTURE_FRAMES", f),
        None => std::env::remove_var("QUARRY_CAPTURE_FRAMES"),
    }
}
