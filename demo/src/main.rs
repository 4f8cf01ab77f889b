//! quarry-demo: renders frames whose query answers are known in advance, so
//! capture, replay and the viewer can be tested against exact numbers.

mod accel;
mod gpu;
mod perf;
mod probe;
mod report;
mod scene;
mod timeline;
mod video;
mod window;

use anyhow::Result;
use clap::Parser;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "quarry-demo",
    version,
    about = "Vulkan workload exercising every query type with known answers"
)]
struct Args {
    /// Number of frames to render.
    #[arg(long, default_value_t = 3)]
    frames: u32,
    /// Physical device: index in enumeration order, or part of its name.
    #[arg(long)]
    gpu: Option<String>,
    /// Render offscreen only, without any window or surface.
    #[arg(long)]
    headless: bool,
    /// Compare every result with its expected value; exit 1 on any mismatch.
    #[arg(long)]
    check: bool,
    /// Print the results as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Enable VK_LAYER_KHRONOS_validation and fail on any message (also on
    /// when QUARRY_DEMO_VALIDATE=1, or VK_LOADER_LAYERS_ENABLE /
    /// VK_INSTANCE_LAYERS name a validation layer).
    #[arg(long)]
    validate: bool,
    /// Leave out the video-decode query and keep the video extensions off the device
    /// (benchmarks: a layer that hides them would otherwise run a lighter workload than the same
    /// app without it).
    #[arg(long)]
    no_video: bool,
    /// Leave out the acceleration-structure queries and keep VK_KHR_acceleration_structure off
    /// the device (benchmarks, as --no-video: the capture layer hides that extension).
    #[arg(long)]
    no_accel: bool,
    /// Leave out the timeline-semaphore path (queries read only through vkCmdCopyQueryPoolResults
    /// after vkWaitSemaphores / vkGetSemaphoreCounterValue, no fences).
    #[arg(long)]
    no_timeline: bool,
    /// Print on stderr how long set-up, the frames and teardown took (benchmarks: splits a
    /// layer's cost over start-up, steady state and exit).
    #[arg(long)]
    timing: bool,
    /// First look the GPUs over with an instance of its own (enumerate, properties, a device made
    /// and destroyed), destroy it, then do the work with a second instance.
    #[arg(long)]
    probe_instance: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("quarry-demo: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<ExitCode> {
    if args.frames == 0 {
        anyhow::bail!("--frames must be at least 1");
    }
    // Count messages whenever validation is asked for, by flag or by the
    // environment variables that make the loader enable the layer.
    let env_validate = std::env::var("QUARRY_DEMO_VALIDATE")
        .is_ok_and(|v| v != "0" && !v.is_empty())
        || ["VK_LOADER_LAYERS_ENABLE", "VK_INSTANCE_LAYERS"]
            .iter()
            .any(|k| std::env::var(k).is_ok_and(|v| v.to_lowercase().contains("validation")));
    let validate = args.validate || env_validate;
    let t_start = Instant::now();
    let probed = if args.probe_instance {
        Some(probe::probe()?)
    } else {
        None
    };
    // The X window comes first so a missing display fails fast and clearly.
    let xwin = if args.headless {
        None
    } else {
        Some(window::XWindow::open()?)
    };
    let surface_exts = [ash::khr::surface::NAME, ash::khr::xlib_surface::NAME];
    let opts = gpu::Options {
        gpu: args.gpu.as_deref(),
        validate,
        surface_extensions: if args.headless { &[] } else { &surface_exts },
        swapchain: !args.headless,
        accel: !args.no_accel,
        video: !args.no_video,
    };
    let gpu = gpu::Gpu::new(&opts)?;
    let mut report = report::Report {
        device: gpu.name.clone(),
        driver: gpu.driver.clone(),
        frames: args.frames,
        ..Default::default()
    };
    if let Some(p) = &probed {
        report.info(format!(
            "probe instance: {} GPU(s): {}",
            p.gpus,
            p.names.join(", ")
        ));
    }
    let scene = scene::Scene::new(&gpu, &mut report)?;
    let mut perf = perf::Perf::new(&gpu, &mut report)?;
    let accel = if args.no_accel {
        report.skip(
            "acceleration-structure queries",
            "the acceleration-structure workload (left out by --no-accel)",
        );
        None
    } else {
        accel::Accel::new(&gpu, &mut report)?
    };
    let video = if args.no_video {
        report.skip(video::QUERY, "the video workload (left out by --no-video)");
        None
    } else {
        video::Video::new(&gpu, &mut report)?
    };
    let mut timeline = if args.no_timeline {
        report.skip(
            "timeline-semaphore query copies",
            "the timeline workload (left out by --no-timeline)",
        );
        None
    } else {
        Some(timeline::Timeline::new(&gpu, &mut report)?)
    };
    let presenter = match &xwin {
        Some(w) => Some(window::Presenter::new(&gpu, w)?),
        None => None,
    };
    let t_frames = Instant::now();
    for _ in 0..args.frames {
        scene.frame(&gpu, &mut report)?;
        if let Some(p) = &presenter {
            p.present(&gpu, scene.color_image(), scene::W, scene::H)?;
        }
        if let Some(p) = perf.as_mut() {
            p.frame(&gpu, &scene, &mut report)?;
        }
        if let Some(a) = &accel {
            a.frame(&gpu, &mut report)?;
        }
        if let Some(v) = &video {
            v.frame(&gpu, &mut report)?;
        }
        if let Some(t) = timeline.as_mut() {
            t.frame(&gpu, &scene, &mut report)?;
        }
    }
    let t_teardown = Instant::now();
    if let Some(t) = timeline {
        t.destroy(&gpu);
    }
    if let Some(v) = video {
        v.destroy(&gpu);
    }
    if let Some(p) = perf {
        p.destroy(&gpu);
    }
    if let Some(a) = accel {
        a.destroy(&gpu);
    }
    if let Some(p) = presenter {
        p.destroy(&gpu);
    }
    scene.destroy(&gpu);
    unsafe {
        gpu.device.destroy_command_pool(gpu.pool, None);
        gpu.device.destroy_device(None);
        if let Some((du, m)) = &gpu.messenger {
            du.destroy_debug_utils_messenger(*m, None);
        }
        gpu.instance.destroy_instance(None);
    }
    if args.timing {
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        let end = Instant::now();
        let frames = ms(t_frames, t_teardown);
        let (user, sys) = thread_cpu_ms();
        eprintln!(
            "quarry-demo timing: setup {:.1} ms, frames {frames:.1} ms ({:.1} us/frame), teardown {:.1} ms, \
             main thread cpu {user:.1} ms user {sys:.1} ms sys",
            ms(t_start, t_frames),
            frames * 1e3 / f64::from(args.frames),
            ms(t_teardown, end)
        );
    }
    report.validation_messages = gpu::take_messages();
    report.passed = report.passed();
    print(args, &report);
    let ok = report.validation_messages.is_empty() && (!args.check || report.passed());
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// CPU time of the calling thread so far, user and system, in ms.
fn thread_cpu_ms() -> (f64, f64) {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes into it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } != 0 {
        return (0.0, 0.0);
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    (ms(u.ru_utime), ms(u.ru_stime))
}

fn print(args: &Args, report: &report::Report) {
    if args.json {
        match serde_json::to_string_pretty(report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("quarry-demo: cannot serialise results: {e}"),
        }
        // Keep stdout pure JSON; the human table still goes to stderr.
        if args.check {
            eprintln!("device: {} ({})", report.device, report.driver.trim());
            eprint!("{}", report.table());
            for s in &report.skipped {
                eprintln!("{s}");
            }
        }
    } else {
        println!("device: {} ({})", report.device, report.driver.trim());
        println!("frames: {}", report.frames);
        if args.check {
            print!("{}", report.table());
        } else {
            for c in &report.checks {
                println!("{}: {}", c.query, c.got.join(" "));
            }
        }
        for s in &report.skipped {
            println!("{s}");
        }
        for i in &report.info {
            println!("info: {i}");
        }
    }
    for m in &report.validation_messages {
        eprintln!("validation: {m}");
    }
    if !report.validation_messages.is_empty() {
        eprintln!(
            "quarry-demo: {} validation message(s)",
            report.validation_messages.len()
        );
    }
    if args.check {
        let n = report.failures();
        if n == 0 {
            eprintln!("check: all {} results match", report.checks.len());
        } else {
            eprintln!("check: {n} mismatch(es)");
        }
    }
}
