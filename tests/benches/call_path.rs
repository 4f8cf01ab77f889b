//! What the capture layer adds to one recorded call, with the caches cold as they are in a real
//! app (between two calls the driver and the app touch megabytes) and warm (a tight loop).
//!
//! `cargo bench -p quarry-tests --bench call_path` (needs lavapipe and the layer built:
//! `cargo build --release -p capture_layer`). Each configuration runs in child processes of its
//! own, interleaved: no layer, the layer loaded but not capturing, capturing, and tracking (a
//! trimmed capture before its first frame: calls go to the state tracker, not the trace), and
//! tracking a light command buffer (one-time, whose commands the layer skips while tracking). Prints
//! the median time per call of each and their cost over the idle layer, measured in the same run.
//! `QUARRY_BENCH_ICD=<ICD manifest>` runs it on another driver (a real GPU's) instead of lavapipe.

use ash::vk;
use std::process::Command;
use std::time::Instant;

use quarry_tests::{begin_primary, plain_device, LAVAPIPE_ICD};
/// Calls timed together after each eviction.
const GROUP: usize = 8;
/// Groups timed per run (`ROUNDS`).
fn rounds() -> usize {
    std::env::var("ROUNDS")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(3000)
}
/// Written between groups (`EVICT_MB`, default 4): more than a core's L2, as a driver's work
/// between two calls leaves the layer's code and data in the shared cache at best; 64 sends them
/// to memory.
fn evict_bytes() -> usize {
    std::env::var("EVICT_MB")
        .ok()
        .and_then(|m| m.parse::<usize>().ok())
        .unwrap_or(4)
        << 20
}

fn main() {
    if let Ok(config) = std::env::var("QUARRY_CALL_BENCH_CHILD") {
        child(&config);
        return;
    }
    let icd = std::env::var("QUARRY_BENCH_ICD").unwrap_or_else(|_| LAVAPIPE_ICD.to_string());
    if !std::path::Path::new(&icd).exists() {
        eprintln!("SKIP: no Vulkan driver manifest at {icd} (lavapipe: mesa-vulkan-drivers)");
        return;
    }
    let lib = match VkLayer_quarry_capture::launch::find_layer_library() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let layer = VkLayer_quarry_capture::launch::LayerDir::new(&lib).expect("layer manifest");
    let trace =
        std::env::temp_dir().join(format!("quarry-call-bench-{}.qtrace", std::process::id()));
    let configs = ["none", "idle", "capture", "tracking", "light"];
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); configs.len()];
    println!("layer: {}\ndriver: {icd}", lib.display());
    for rep in 0..reps {
        for k in 0..configs.len() {
            let i = (rep + k) % configs.len();
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.env("QUARRY_CALL_BENCH_CHILD", configs[i])
                .env("VK_DRIVER_FILES", &icd)
                .env("VK_ICD_FILENAMES", &icd)
                .env_remove("VK_INSTANCE_LAYERS")
                .env_remove("VK_LOADER_LAYERS_ENABLE")
                .env_remove("QUARRY_CAPTURE_DISABLE")
                .env_remove("QUARRY_CAPTURE_FRAMES");
            if configs[i] != "none" {
                layer.apply(&mut cmd);
                cmd.env("QUARRY_CAPTURE_FILE", &trace);
            }
            if configs[i] == "idle" {
                cmd.env("QUARRY_CAPTURE_DISABLE", "1");
            }
            if configs[i] == "tracking" || configs[i] == "light" {
                // A first frame that never comes.
                cmd.env("QUARRY_CAPTURE_FRAMES", "1000000000-");
            }
            let out = cmd.output().expect("run child");
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text
                .lines()
                .find(|l| l.starts_with("result "))
                .unwrap_or_else(|| {
                    panic!(
                        "{} run failed: {}",
                        configs[i],
                        String::from_utf8_lossy(&out.stderr)
                    )
                });
            let v: Vec<f64> = line[7..].split(' ').map(|x| x.parse().unwrap()).collect();
            results[i].push((v[0], v[1]));
        }
    }
    let _ = std::fs::remove_file(&trace);
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let cold: Vec<f64> = results
        .iter()
        .map(|r| med(r.iter().map(|x| x.0).collect()))
        .collect();
    let warm: Vec<f64> = results
        .iter()
        .map(|r| med(r.iter().map(|x| x.1).collect()))
        .collect();
    println!(
        "ns per call (median of {reps} runs of {} groups of {GROUP} calls; cold: {} MiB written between groups)",
        rounds(),
        evict_bytes() >> 20
    );
    println!("{:<10} {:>10} {:>10}", "config", "cold", "warm");
    for (i, c) in configs.iter().enumerate() {
        println!("{c:<10} {:>10.1} {:>10.1}", cold[i], warm[i]);
    }
    println!(
        "capture - idle: cold {:.1} ns, warm {:.1} ns per call; tracking - idle: cold {:.1} ns, warm {:.1} ns; \
         light - idle: cold {:.1} ns, warm {:.1} ns; idle - none: cold {:.1} ns, warm {:.1} ns",
        cold[2] - cold[1],
        warm[2] - warm[1],
        cold[3] - cold[1],
        warm[3] - warm[1],
        cold[4] - cold[1],
        warm[4] - warm[1],
        cold[1] - cold[0],
        warm[1] - warm[0]
    );
}

/// Touches the stack below the caller, as the driver's own calls between two of the app's do:
/// what stays cold is the layer's code and data, not the stack.
#[inline(never)]
fn warm_stack() {
    let mut a = [0u8; 16 << 10];
    for k in (0..a.len()).step_by(64) {
        a[k] = k as u8;
    }
    std::hint::black_box(&mut a);
}

/// One configuration: a device on lavapipe, one command buffer recording, dynamic-state calls.
fn child(config: &str) {
    unsafe {
        let (_entry, instance, device) = plain_device(c"quarry-call-bench");
        let (pool, cb) = begin_primary(&device);
        // "light": the buffer is recorded one-time, as engines that record every frame do.
        let begin = vk::CommandBufferBeginInfo::default().flags(if config == "light" {
            vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT
        } else {
            vk::CommandBufferUsageFlags::empty()
        });
        device.end_command_buffer(cb).unwrap();
        device
            .reset_command_pool(pool, vk::CommandPoolResetFlags::empty())
            .unwrap();
        device.begin_command_buffer(cb, &begin).unwrap();
        let calls = |i: usize| {
            let f = i as f32;
            let vp = [vk::Viewport {
                x: f,
                y: 0.0,
                width: 64.0,
                height: 64.0,
                min_depth: 0.0,
                max_depth: 1.0,
            }];
            let sc = [vk::Rect2D {
                offset: vk::Offset2D { x: 0, y: 0 },
                extent: vk::Extent2D {
                    width: 64,
                    height: 64,
                },
            }];
            device.cmd_set_viewport(cb, 0, &vp);
            device.cmd_set_scissor(cb, 0, &sc);
            device.cmd_set_line_width(cb, 1.0);
            device.cmd_set_depth_bias(cb, f, 0.0, 1.0);
            device.cmd_set_blend_constants(cb, &[f, 0.0, 0.0, 1.0]);
            device.cmd_set_stencil_reference(cb, vk::StencilFaceFlags::FRONT, i as u32);
            device.cmd_set_depth_bounds(cb, 0.0, 1.0);
            device.cmd_set_stencil_compare_mask(cb, vk::StencilFaceFlags::BACK, i as u32);
        };
        // Re-recorded every RECORDING groups, untimed, as an app re-records its command buffers
        // each frame: the tracker keeps the current recording, so it would otherwise grow forever.
        const RECORDING: usize = 64;
        let rerecord = |i: usize| {
            if i % RECORDING == RECORDING - 1 {
                device.end_command_buffer(cb).unwrap();
                device
                    .reset_command_pool(pool, vk::CommandPoolResetFlags::empty())
                    .unwrap();
                device.begin_command_buffer(cb, &begin).unwrap();
            }
        };
        let mut evict = vec![0u8; evict_bytes()];
        let mut cold = Vec::with_capacity(rounds());
        for i in 0..rounds() {
            for k in (0..evict.len()).step_by(64) {
                evict[k] = evict[k].wrapping_add(1);
            }
            std::hint::black_box(&mut evict);
            warm_stack();
            let t = Instant::now();
            calls(i);
            cold.push(t.elapsed().as_nanos() as f64 / GROUP as f64);
            rerecord(i);
        }
        let mut warm = Vec::with_capacity(rounds());
        for i in 0..rounds() {
            let t = Instant::now();
            calls(i);
            warm.push(t.elapsed().as_nanos() as f64 / GROUP as f64);
            rerecord(i);
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        println!("result {} {}", med(cold), med(warm));
        device.end_command_buffer(cb).unwrap();
        device.destroy_command_pool(pool, None);
        device.destroy_device(None);
        instance.destroy_instance(None);
    }
}
