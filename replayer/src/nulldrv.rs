//! A null driver for measuring the replayer's own CPU cost per call (`cargo bench -p replayer`).
//!
//! The trace's calls go through the real per-call path — `vkstream` decoding, a real [`Session`]
//! for handle translation and device lookup, the hand-written recorded-command code of
//! `calls.rs` for `vkCmd*` commands and the generated dispatch for everything else — but every
//! Vulkan entry point is a stub that returns `VK_SUCCESS` (those that create dispatchable handles
//! hand out a fake object whose first word is a dispatch key the session knows). What is measured
//! is therefore decode + translation + materialisation + an indirect call, without the driver's
//! own time, which a real replay adds on top (see the bench's lavapipe column).
//!
//! Not covered: the hand-written setup (instance/device creation, memory, swapchain emulation),
//! which these calls take through the generated path instead; it runs once per trace.

use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr};

use ash::vk;
use ash::vk::Handle as _;
use format::record;

use crate::error::ReplayError;
use crate::session::{DeviceState, Session};

/// The fake dispatchable object: its first word is the loader-style dispatch key.
#[repr(C)]
struct FakeObject {
    key: usize,
}

static FAKE: FakeObject = FakeObject {
    key: 0x51_5541_5252,
};

fn fake_handle() -> u64 {
    &FAKE as *const FakeObject as u64
}

unsafe extern "system" fn noop() -> u64 {
    0
}

unsafe extern "system" fn create_dispatchable(
    _a: *const c_void,
    _b: *const c_void,
    _c: *const c_void,
    out: *mut u64,
) -> vk::Result {
    if !out.is_null() {
        *out = fake_handle();
    }
    vk::Result::SUCCESS
}

unsafe extern "system" fn create_instance(
    _info: *const c_void,
    _alloc: *const c_void,
    out: *mut u64,
) -> vk::Result {
    if !out.is_null() {
        *out = fake_handle();
    }
    vk::Result::SUCCESS
}

unsafe extern "system" fn enumerate_physical_devices(
    _instance: u64,
    count: *mut u32,
    out: *mut u64,
) -> vk::Result {
    if !out.is_null() && !count.is_null() {
        for i in 0..*count as usize {
            *out.add(i) = fake_handle();
        }
    } else if !count.is_null() {
        *count = 1;
    }
    vk::Result::SUCCESS
}

unsafe extern "system" fn get_queue(_d: u64, _f: u32, _i: u32, out: *mut u64) {
    if !out.is_null() {
        *out = fake_handle();
    }
}

unsafe extern "system" fn get_queue2(_d: u64, _info: *const c_void, out: *mut u64) {
    if !out.is_null() {
        *out = fake_handle();
    }
}

unsafe extern "system" fn allocate_command_buffers(
    _d: u64,
    info: *const vk::CommandBufferAllocateInfo<'_>,
    out: *mut u64,
) -> vk::Result {
    if !info.is_null() && !out.is_null() {
        for i in 0..(*info).command_buffer_count as usize {
            *out.add(i) = fake_handle();
        }
    }
    vk::Result::SUCCESS
}

/// The stub for `name`. Every stub but the few that write handles is one function that ignores
/// its arguments and returns 0 (`VK_SUCCESS`, `VK_FALSE`, a null address): the System V and
/// Windows x64 conventions let a caller pass arguments a callee ignores.
fn stub(name: &CStr) -> vk::PFN_vkVoidFunction {
    let p: *const () = match name.to_bytes() {
        b"vkCreateInstance" => create_instance as *const (),
        b"vkCreateDevice" => create_dispatchable as *const (),
        b"vkEnumeratePhysicalDevices" => enumerate_physical_devices as *const (),
        b"vkGetDeviceQueue" => get_queue as *const (),
        b"vkGetDeviceQueue2" => get_queue2 as *const (),
        b"vkAllocateCommandBuffers" => allocate_command_buffers as *const (),
        _ => noop as *const (),
    };
    // SAFETY: see above; only called through pointers of the matching Vulkan prototypes.
    Some(unsafe { std::mem::transmute::<*const (), unsafe extern "system" fn()>(p) })
}

unsafe extern "system" fn gipa(_i: vk::Instance, name: *const c_char) -> vk::PFN_vkVoidFunction {
    stub(CStr::from_ptr(name))
}

unsafe extern "system" fn gdpa(_d: vk::Device, name: *const c_char) -> vk::PFN_vkVoidFunction {
    stub(CStr::from_ptr(name))
}

pub use crate::clock::thread_cpu_ns;

/// The calls of a trace, with their vkstream command ids, ready to be replayed repeatedly.
pub struct Calls {
    pub calls: Vec<(u32, record::Call)>,
}

impl Calls {
    /// Whether vkstream command `id` is a recorded command (`vkCmd*`).
    pub fn is_cmd(&self, id: u32) -> bool {
        vkstream::COMMANDS
            .get(id as usize)
            .is_some_and(|n| n.starts_with("vkCmd"))
    }
    /// How many of the calls are recorded commands.
    pub fn cmd_calls(&self) -> usize {
        self.calls.iter().filter(|(id, _)| self.is_cmd(*id)).count()
    }
    /// Every call of `trace` whose command this build knows.
    pub fn load(trace: &std::path::Path) -> Result<Self, ReplayError> {
        let reader =
            format::TraceReader::open(trace).map_err(|e| ReplayError::Trace(e.to_string()))?;
        let mut map: Vec<Option<u32>> = Vec::new();
        let mut calls = Vec::new();
        for rec in reader.records() {
            match rec.map_err(|e| ReplayError::Trace(e.to_string()))? {
                record::Record::CommandTable(names) => {
                    map = names.iter().map(|n| vkstream::command_id(n)).collect()
                }
                record::Record::Call(c) => {
                    if let Some(Some(id)) = map.get(c.cmd as usize) {
                        calls.push((*id, c));
                    }
                }
                _ => {}
            }
        }
        Ok(Calls { calls })
    }
}

/// What [`dispatch`] measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Calls replayed per loop.
    pub calls: u64,
    /// Calls whose replay returned an error (same in every loop: handles the null driver did
    /// not create, hand-written setup the generated path does not emulate).
    pub errors: u64,
    /// CPU time of all loops, ns ([`thread_cpu_ns`]).
    pub ns: u64,
    pub loops: u32,
    /// The first few errors of the last loop (command: message), to see what the null driver misses.
    pub first_errors: Vec<String>,
}

impl Measured {
    pub fn ns_per_call(&self) -> f64 {
        self.ns as f64 / (self.calls.max(1) as f64 * self.loops.max(1) as f64)
    }
}

/// A fresh session for one null-driver loop.
fn null_session<'a>(
    entry: &'a ash::Entry,
    gpu: &'a crate::devices::GpuInfo,
    host: &'a HashSet<u64>,
) -> Session<'a> {
    let mut s = Session::new(entry, gpu, None, host, false);
    // SAFETY: the stub loaders hand out only the stubs above.
    unsafe {
        s.gtable = vkstream::InstanceTable::load(gipa, vk::Instance::null());
    }
    s
}

/// What every null-driver loop shares: the loader (for the session's GPU) and the stub tables.
struct Null {
    entry: ash::Entry,
    gpu: crate::devices::GpuInfo,
    tables: Tables,
}

fn null() -> Result<Null, ReplayError> {
    let entry = crate::devices::load_entry()?;
    let gpus = crate::devices::devices()?;
    let gpu = gpus
        .into_iter()
        .next()
        .ok_or_else(|| ReplayError::Other("no GPU for the session".into()))?;
    // Loading tables looks up every command by name: done once here, like a real replay does once
    // per device, and kept out of the per-call figure.
    let handle = vk::Device::from_raw(fake_handle());
    // SAFETY: the stub loaders hand out only the stubs above.
    let (table, device) = unsafe {
        (
            vkstream::DeviceTable::load(gdpa, handle),
            ash::Device::load_with(
                |n| match stub(n) {
                    Some(f) => f as *const c_void,
                    None => std::ptr::null(),
                },
                handle,
            ),
        )
    };
    let inst = vk::Instance::from_raw(fake_handle());
    // SAFETY: the stub loaders hand out only the stubs above.
    let instance = unsafe {
        crate::session::InstanceState {
            captured: 0,
            instance: ash::Instance::load_with(
                |n| match stub(n) {
                    Some(f) => f as *const c_void,
                    None => std::ptr::null(),
                },
                inst,
            ),
            table: vkstream::InstanceTable::load(gipa, inst),
            pd: vk::PhysicalDevice::null(),
            debug_utils: None,
        }
    };
    let tables = Tables {
        table,
        device,
        instance,
    };
    Ok(Null { entry, gpu, tables })
}

/// Decodes and replays every call of `calls` `loops` times against the null driver, each loop on a
/// fresh session; the time of the whole batch is measured, never a single call. Each `vkCmd*`
/// call is decoded and replayed `1 + cmd_extra` times (harmless with a null driver), so that the
/// cost of recorded commands alone is the difference between two runs divided by the extra calls.
pub fn dispatch(calls: &Calls, loops: u32, cmd_extra: u32) -> Result<Measured, ReplayError> {
    let Null { entry, gpu, tables } = null()?;
    let host = HashSet::new();
    let gpu = &gpu;
    let mut total = 0u64;
    let mut errors = 0u64;
    let mut first_errors = Vec::new();
    for _ in 0..loops.max(1) {
        let mut s = null_session(&entry, gpu, &host);
        errors = 0;
        first_errors.clear();
        let start = thread_cpu_ns();
        for (id, rec) in &calls.calls {
            let times = if calls.is_cmd(*id) { 1 + cmd_extra } else { 1 };
            for _ in 0..times {
                let call = match vkstream::decode_call(*id, &rec.params) {
                    Ok(c) => c,
                    Err(_) => {
                        errors += 1;
                        continue;
                    }
                };
                // SAFETY: every entry point is a stub; handles are the session's.
                let r = unsafe { replay_one(&mut s, &call, rec, &tables) };
                if let Err(e) = r {
                    errors += 1;
                    if first_errors.len() < 40 {
                        first_errors.push(format!("{}: {e}", call.name()));
                    }
                }
            }
        }
        total += thread_cpu_ns() - start;
        // The fake objects own nothing: nothing to destroy.
        s.devices.clear();
        s.instances.clear();
    }
    Ok(Measured {
        calls: calls.calls.len() as u64,
        errors,
        ns: total,
        loops: loops.max(1),
        first_errors,
    })
}

/// What [`dispatch_ahead`] measured, ns of CPU (per thread) and wall time over all loops.
#[derive(Debug, Clone)]
pub struct MeasuredAhead {
    pub calls: u64,
    pub loops: u32,
    /// The replay thread: what it takes from the checks thread, translated and dispatched.
    pub replay_ns: u64,
    /// The checks thread: read, decode and (with `check`) validate.
    pub checks_ns: u64,
    pub wall_ns: u64,
}

impl MeasuredAhead {
    pub fn per_call(&self, ns: u64) -> f64 {
        ns as f64 / (self.calls.max(1) as f64 * self.loops.max(1) as f64)
    }
}

/// The replay's own pipeline into the null driver: the checks thread of a real replay
/// (`engine::ahead`: records read, calls decoded and, with `check`, validated) feeding this
/// thread, which translates and dispatches each call. `loops` passes over `reader`'s trace, each
/// on a fresh session and validator.
pub fn dispatch_ahead(
    reader: &format::TraceReader,
    loops: u32,
    check: bool,
) -> Result<MeasuredAhead, ReplayError> {
    use crate::engine::ahead;
    // `QUARRY_BENCH_INLINE`: the same on one thread, each record checked then dispatched
    // (`checks_ns` is 0; `replay_ns` counts both).
    let inline = std::env::var_os("QUARRY_BENCH_INLINE").is_some();
    let Null { entry, gpu, tables } = null()?;
    let host = HashSet::new();
    let (mut replay_ns, mut checks_ns, mut calls) = (0u64, 0u64, 0u64);
    let wall = std::time::Instant::now();
    for _ in 0..loops.max(1) {
        let mut s = null_session(&entry, &gpu, &host);
        calls = 0;
        // The null driver fails some calls (see `Measured::errors`): the loop goes on.
        let mut one = |item: &ahead::Item| {
            if let (format::record::Record::Call(c), Some(call)) = (&item.rec, &item.call) {
                // SAFETY: every entry point is a stub; handles are the session's.
                let _ = unsafe { replay_one(&mut s, call, c, &tables) };
                calls += 1;
            }
        };
        if inline {
            let start = thread_cpu_ns();
            let mut a = ahead::Ahead::new(check.then(crate::validate::Validator::new));
            a.each(reader, |ev| {
                if let ahead::Event::Item(item) = &ev {
                    one(item);
                }
                true
            });
            replay_ns += thread_cpu_ns() - start;
            s.devices.clear();
            s.instances.clear();
            continue;
        }
        std::thread::scope(|scope| -> Result<(), ReplayError> {
            let (tx, rx) = std::sync::mpsc::sync_channel(ahead::DEPTH);
            let (back, spent) = std::sync::mpsc::channel();
            let checks = std::thread::Builder::new()
                .name("quarry-checks".into())
                .spawn_scoped(scope, move || {
                    let start = thread_cpu_ns();
                    ahead::run(
                        reader,
                        check.then(crate::validate::Validator::new),
                        tx,
                        spent,
                    );
                    thread_cpu_ns() - start
                })
                .map_err(|e| ReplayError::Other(format!("cannot start the checks thread: {e}")))?;
            let start = thread_cpu_ns();
            while let Ok(ahead::Msg::Items(items)) = rx.recv() {
                items.iter().for_each(&mut one);
                let _ = back.send(items);
            }
            replay_ns += thread_cpu_ns() - start;
            checks_ns += checks.join().unwrap_or(0);
            Ok(())
        })?;
        s.devices.clear();
        s.instances.clear();
    }
    Ok(MeasuredAhead {
        calls,
        loops: loops.max(1),
        replay_ns,
        checks_ns,
        wall_ns: wall.elapsed().as_nanos() as u64,
    })
}

struct Tables {
    table: vkstream::DeviceTable,
    device: ash::Device,
    instance: crate::session::InstanceState,
}

unsafe fn replay_one(
    s: &mut Session<'_>,
    call: &vkstream::Call,
    rec: &record::Call,
    tables: &Tables,
) -> Result<(), ReplayError> {
    let name = call.name();
    if name.starts_with("vkCmd") {
        // The recorded-command stream: exactly the replay's path.
        return crate::calls::replay_call(s, call, rec);
    }
    let _ = crate::glue::dispatch(s, call)?;
    if let vkstream::Call::vkCreateInstance(p) = call {
        let captured = p.p_instance.unwrap_or(0);
        s.instances.insert(
            captured,
            crate::session::InstanceState {
                captured,
                instance: tables.instance.instance.clone(),
                table: tables.instance.table,
                pd: vk::PhysicalDevice::null(),
                debug_utils: None,
            },
        );
    }
    if let vkstream::Call::vkCreateDevice(p) = call {
        let captured = p.p_device.unwrap_or(0);
        s.devices.insert(
            captured,
            DeviceState {
                captured,
                index: 0,
                instance: s.instances.keys().next().copied().unwrap_or(0),
                device: tables.device.clone(),
                table: tables.table,
                families: Default::default(),
                queue_counts: Default::default(),
                memory_types: Vec::new(),
                non_coherent_atom: 1,
                queues: Vec::new(),
                own_pools: Default::default(),
                queue_family_of: Default::default(),
            },
        );
        s.dispatch_keys.insert(FAKE.key, captured);
    }
    Ok(())
}
