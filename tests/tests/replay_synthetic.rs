//! Replayer tests on traces written by hand (format::TraceWriter + vkstream encoders), run on
//! whatever Vulkan driver the machine has (lavapipe in CI).

use std::path::Path;

use ash::vk;
use ash::vk::Handle as _;
use format::record::{self, FileKind, Header, Record};
use format::{TraceReader, TraceWriter};
use replayer::{ReplayError, ReplayOptions};
use vkstream::Encoder;

const INSTANCE: u64 = 0x1000;
const PHYSICAL: u64 = 0x2000;
const DEVICE: u64 = 0x3000;
const QUEUE: u64 = 0x4000;
const POOL: u64 = 0x5000;

fn have_vulkan() -> bool {
    match replayer::devices() {
        Ok(g) if !g.is_empty() => true,
        other => {
            eprintln!("skipping: no Vulkan GPU ({other:?})");
            false
        }
    }
}

/// Builds trace records one call at a time.
struct Trace {
    records: Vec<Record>,
    seq: u64,
}

impl Trace {
    fn new() -> Self {
        let names = vkstream::COMMANDS.iter().map(|s| s.to_string()).collect();
        Trace {
            records: vec![Record::CommandTable(names)],
            seq: 0,
        }
    }

    fn call(&mut self, name: &str, result: vk::Result, encode: impl FnOnce(&mut Encoder)) -> u64 {
        let mut e = Encoder::new();
        encode(&mut e);
        self.seq += 1;
        self.records.push(Record::Call(record::Call {
            seq: self.seq,
            thread: 1,
            cmd: vkstream::command_id(name).expect("known command"),
            host_ns: 1_000_000 * self.seq,
            result: result.as_raw(),
            params: e.into_bytes(),
        }));
        self.seq
    }

    fn write(&self, path: &Path) {
        let w = TraceWriter::create(
            path,
            Header {
                kind: FileKind::Trace,
                writer: "replay test".into(),
                created_unix_ns: 0,
                device: None,
                application: "synthetic".into(),
            },
        )
        .unwrap();
        for r in &self.records {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
    }

    /// Instance, the first GPU, a device with one queue of family 0 and `extensions`.
    fn device(&mut self, extensions: &[&std::ffi::CStr], host_query_reset: bool) {
        self.device_on(0, extensions, host_query_reset)
    }

    /// As [`Trace::device`] with the queue on captured family `family`.
    fn device_on(&mut self, family: u32, extensions: &[&std::ffi::CStr], host_query_reset: bool) {
        let app = vk::ApplicationInfo::default()
            .application_name(c"synthetic")
            .api_version(vk::API_VERSION_1_2);
        let ci = vk::InstanceCreateInfo::default().application_info(&app);
        let mut inst = vk::Instance::from_raw(INSTANCE);
        self.call("vkCreateInstance", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkCreateInstance(e, &ci, std::ptr::null(), &mut inst)
        });
        let mut count = 1u32;
        let mut pd = vk::PhysicalDevice::from_raw(PHYSICAL);
        self.call(
            "vkEnumeratePhysicalDevices",
            vk::Result::SUCCESS,
            |e| unsafe {
                vkstream::encode::vkEnumeratePhysicalDevices(e, inst, &mut count, &mut pd)
            },
        );
        let prio = [1.0f32];
        let q = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let ext: Vec<*const std::ffi::c_char> = extensions.iter().map(|e| e.as_ptr()).collect();
        let mut reset = vk::PhysicalDeviceHostQueryResetFeatures::default().host_query_reset(true);
        let features = vk::PhysicalDeviceFeatures::default().pipeline_statistics_query(true);
        let mut dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&q)
            .enabled_extension_names(&ext)
            .enabled_features(&features);
        if host_query_reset {
            dci = dci.push_next(&mut reset);
        }
        let mut dev = vk::Device::from_raw(DEVICE);
        self.call("vkCreateDevice", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkCreateDevice(e, pd, &dci, std::ptr::null(), &mut dev)
        });
        let mut queue = vk::Queue::from_raw(QUEUE);
        self.call("vkGetDeviceQueue", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkGetDeviceQueue(e, dev, family, 0, &mut queue)
        });
    }

    fn teardown(&mut self) {
        let dev = vk::Device::from_raw(DEVICE);
        self.call("vkDestroyDevice", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkDestroyDevice(e, dev, std::ptr::null())
        });
        let inst = vk::Instance::from_raw(INSTANCE);
        self.call("vkDestroyInstance", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkDestroyInstance(e, inst, std::ptr::null())
        });
    }
}

fn replay(path: &Path) -> Result<replayer::ReplaySummary, ReplayError> {
    replayer::replay(&ReplayOptions::new(path))
}

/// A host-reset timestamp pool read back with availability: nothing was written, so the capture
/// saw every query unavailable and the replay must report the same layout without waiting.
/// Device, a host-reset timestamp pool of 4 queries read once with availability (all unavailable).
fn timestamp_pool_trace() -> Trace {
    let mut t = Trace::new();
    t.device(&[], true);
    let dev = vk::Device::from_raw(DEVICE);
    let pci = vk::QueryPoolCreateInfo::default()
        .query_type(vk::QueryType::TIMESTAMP)
        .query_count(4);
    let mut pool = vk::QueryPool::from_raw(POOL);
    let seq = t.call("vkCreateQueryPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCreateQueryPool(e, dev, &pci, std::ptr::null(), &mut pool)
    });
    t.records.push(Record::QueryPool(record::QueryPoolInfo {
        seq,
        device: DEVICE,
        pool: POOL,
        query_type: vk::QueryType::TIMESTAMP.as_raw(),
        query_count: 4,
        pipeline_statistics: 0,
        perf_queue_family: None,
        perf_counters: vec![],
    }));
    t.call("vkResetQueryPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkResetQueryPool(e, dev, pool, 0, 4)
    });
    let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY;
    t.records.push(Record::QueryResults(record::QueryResults {
        seq: t.seq + 1,
        thread: 1,
        device: DEVICE,
        pool: POOL,
        first: 0,
        count: 4,
        stride: 16,
        flags: flags.as_raw(),
        result: vk::Result::NOT_READY.as_raw(),
        host_ns: 5,
        data: vec![0; 64],
    }));
    t.records.push(Record::Frame(record::Frame {
        index: 0,
        last_seq: t.seq,
        host_ns: 1_000_000 * (t.seq + 1),
        boundary: record::FrameBoundary::DeviceWaitIdle,
    }));
    t.teardown();
    t
}

/// The capture saw every query of a host-reset pool unavailable; the replay must read the same
/// layout again without waiting and write both sides to the results file.
#[test]
fn host_reset_pool_is_read_again_and_written_to_results() {
    if !have_vulkan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.qtrace");
    timestamp_pool_trace().write(&trace);

    let results = dir.path().join("t.qres");
    let mut opts = ReplayOptions::new(&trace);
    opts.results = Some(results.clone());
    opts.compare = true;
    let s = replayer::replay(&opts).expect("replay");
    assert_eq!(s.queries, 4);
    assert_eq!(s.frames, 1);
    assert_eq!(s.frame_times.len(), 1);
    assert_eq!(s.frame_times[0].replay_ns.len(), 1);
    let ts = &s.comparison.by_type["TIMESTAMP"];
    assert_eq!((ts.queries, ts.not_compared, ts.mismatches), (4, 4, 0));
    assert!(!s.comparison.failed());

    let r = TraceReader::open(&results).unwrap();
    assert_eq!(r.kind(), FileKind::Results);
    assert_eq!(
        r.header().device.as_ref().map(|d| d.name.clone()),
        Some(s.gpu.name.clone())
    );
    let mut got = Vec::new();
    let mut info = None;
    for rec in r.records() {
        match rec.unwrap() {
            Record::QueryResult(q) => got.push(q),
            Record::ReplayInfo(i) => info = Some(i),
            // The results name their trace (format 2.0).
            Record::TraceIdentity(t) => {
                assert_eq!(t.trace_id, TraceReader::open(&trace).unwrap().identity())
            }
            other => panic!("unexpected record {other:?}"),
        }
    }
    assert_eq!(got.len(), 4);
    assert_eq!(
        got.iter().map(|q| q.query).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    for q in &got {
        assert_eq!(q.pool, POOL);
        assert_eq!(q.query_type, vk::QueryType::TIMESTAMP.as_raw());
        let c = q.captured.as_ref().unwrap();
        let p = q.replayed.as_ref().unwrap();
        assert!(
            !c.available && !p.available,
            "reset queries are unavailable on both sides"
        );
        assert_eq!(p.values.len(), 1);
        assert_eq!(q.replayed_gpu_ns, None);
    }
    let info = info.expect("ReplayInfo");
    assert_eq!((info.loops, info.frames), (1, 1));
}

/// A results read with no captured bytes and a copy whose captured bytes hold fewer queries than
/// it covers are "not compared" with their reason; the replay goes on and does not fail.
#[test]
fn missing_or_short_captured_data_is_not_compared() {
    if !have_vulkan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.qtrace");
    let mut t = timestamp_pool_trace();
    let at = t
        .records
        .iter()
        .position(|r| matches!(r, Record::Frame(_)))
        .unwrap();
    let flags = (vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY).as_raw();
    t.records.insert(
        at,
        Record::QueryResults(record::QueryResults {
            seq: t.seq + 2,
            thread: 1,
            device: DEVICE,
            pool: POOL,
            first: 0,
            count: 4,
            stride: 16,
            flags,
            result: vk::Result::SUCCESS.as_raw(),
            host_ns: 6,
            data: vec![],
        }),
    );
    t.records.insert(
        at + 1,
        Record::QueryCopy(record::QueryCopy {
            seq: t.seq + 3,
            command_buffer: 0,
            pool: POOL,
            first: 0,
            count: 3,
            dst_buffer: 0x9000,
            dst_offset: 0,
            stride: 16,
            flags,
            host_ns: 7,
            data: vec![0; 8],
        }),
    );
    t.write(&trace);
    let mut opts = ReplayOptions::new(&trace);
    opts.compare = true;
    let s = replayer::replay(&opts).expect("the replay goes on past reads it cannot compare");
    let text = s.comparison.to_text();
    let ts = &s.comparison.by_type["TIMESTAMP"];
    // 4 unavailable to the app, 4 with no bytes, 3 in 8 bytes.
    assert_eq!(
        (ts.queries, ts.not_compared, ts.matches),
        (11, 11, 0),
        "{text}"
    );
    assert!(!s.comparison.failed(), "{text}");
    assert_eq!(s.comparison.not_compared.len(), 2, "{text}");
    assert!(
        text.contains("captured query results: 0 bytes hold fewer than 4 queries")
            && text.contains("captured query copy: 8 bytes hold fewer than 3 queries"),
        "{text}"
    );
}

#[test]
fn replay_under_validation_adds_no_messages() {
    if !have_vulkan() {
        return;
    }
    let layers = std::process::Command::new("vulkaninfo")
        .arg("--summary")
        .output();
    let has_validation = layers
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("VK_LAYER_KHRONOS_validation"))
        .unwrap_or(false);
    if !has_validation {
        eprintln!("skipping: VK_LAYER_KHRONOS_validation not installed (vulkan-validationlayers)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.qtrace");
    timestamp_pool_trace().write(&trace);
    let mut opts = ReplayOptions::new(&trace);
    opts.validate = true;
    let s = replayer::replay(&opts).expect("replay");
    assert_eq!(s.validation_messages, 0, "{:#?}", s.first_messages);
    assert_eq!(s.queries, 4);
}

#[test]
fn loops_rerun_the_whole_trace() {
    if !have_vulkan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut t = Trace::new();
    t.device(&[], false);
    t.teardown();
    let trace = dir.path().join("t.qtrace");
    t.write(&trace);
    let mut opts = ReplayOptions::new(&trace);
    opts.loops = 3;
    let s = replayer::replay(&opts).expect("replay");
    assert_eq!(s.loop_ns.len(), 3);
    assert_eq!(s.calls, 6);
}

#[test]
fn missing_extension_is_named_in_one_error() {
    if !have_vulkan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut t = Trace::new();
    t.device(&[c"VK_QUARRY_does_not_exist", c"VK_QUARRY_neither"], false);
    let trace = dir.path().join("t.qtrace");
    t.write(&trace);
    let e = replay(&trace).unwrap_err().to_string();
    assert!(e.contains("call 3 (vkCreateDevice)"), "{e}");
    assert!(
        e.contains("VK_QUARRY_does_not_exist") && e.contains("VK_QUARRY_neither"),
        "{e}"
    );
}

#[test]
fn damaged_traces_fail_with_the_call_named() {
    if !have_vulkan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();

    // Parameters cut short.
    let mut t = Trace::new();
    t.device(&[], false);
    if let Some(Record::Call(c)) = t
        .records
        .iter_mut()
        .rev()
        .find(|r| matches!(r, Record::Call(_)))
    {
        c.params.truncate(c.params.len() / 2);
    }
    let p = dir.path().join("cut.qtrace");
    t.write(&p);
    let e = replay(&p).unwrap_err().to_string();
    assert!(
        e.contains("call 4 (vkGetDeviceQueue)") && e.contains("cannot decode"),
        "{e}"
    );

    // A command this replayer does not know (trace from a newer registry).
    let mut t = Trace::new();
    if let Record::CommandTable(names) = &mut t.records[0] {
        names.push("vkFutureCommandQUARRY".into());
    }
    t.records.push(Record::Call(record::Call {
        seq: 7,
        thread: 1,
        cmd: vkstream::COMMANDS.len() as u32,
        host_ns: 0,
        result: 0,
        params: vec![],
    }));
    let p = dir.path().join("unknown.qtrace");
    t.write(&p);
    let e = replay(&p).unwrap_err().to_string();
    assert!(
        e.contains("call 7 (vkFutureCommandQUARRY)") && e.contains("unknown"),
        "{e}"
    );

    // Memory contents referenced but absent.
    let mut t = Trace::new();
    t.device(&[], false);
    t.records.push(Record::MemoryWrite(record::MemoryWrite {
        seq: 99,
        memory: 0x77,
        offset: 0,
        data: record::Payload::Blob {
            id: record::BlobId(12345),
            len: 4096,
        },
    }));
    let p = dir.path().join("blob.qtrace");
    t.write(&p);
    let e = replay(&p).unwrap_err().to_string();
    assert!(
        e.contains("call 99 (memory write)") && e.contains("missing"),
        "{e}"
    );

    // A handle used before the trace created it.
    let mut t = Trace::new();
    t.device(&[], false);
    let dev = vk::Device::from_raw(DEVICE);
    let bogus = vk::QueryPool::from_raw(0xdead);
    t.call("vkResetQueryPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkResetQueryPool(e, dev, bogus, 0, 1)
    });
    let p = dir.path().join("handle.qtrace");
    t.write(&p);
    let e = replay(&p).unwrap_err().to_string();
    assert!(
        e.contains("call 5 (vkResetQueryPool)") && e.contains("0xdead"),
        "{e}"
    );
}

#[test]
fn truncated_and_foreign_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Trace::new();
    t.device(&[], false);
    t.teardown();
    let good = dir.path().join("good.qtrace");
    t.write(&good);
    let bytes = std::fs::read(&good).unwrap();

    // Cut in the header: nothing to replay.
    let p = dir.path().join("head.qtrace");
    std::fs::write(&p, &bytes[..20]).unwrap();
    let e = replay(&p).unwrap_err();
    assert!(matches!(e, ReplayError::Trace(_)), "{e}");
    assert!(e.to_string().contains("head.qtrace"), "{e}");

    // Not a quarry file at all.
    let p = dir.path().join("text.qtrace");
    std::fs::write(&p, b"hello, this is not a trace").unwrap();
    assert!(matches!(replay(&p).unwrap_err(), ReplayError::Trace(_)));

    // A results file is refused as a trace.
    let p = dir.path().join("r.qres");
    let w = TraceWriter::create(
        &p,
        Header {
            kind: FileKind::Results,
            writer: "t".into(),
            created_unix_ns: 0,
            device: None,
            application: String::new(),
        },
    )
    .unwrap();
    w.finish().unwrap();
    let e = replay(&p).unwrap_err().to_string();
    assert!(e.contains("results file"), "{e}");

    // Cut in the last block (footer gone): either a clear trace error or a replay with a warning.
    let p = dir.path().join("tail.qtrace");
    std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    match replay(&p) {
        Ok(s) => assert!(
            s.warnings.iter().any(|w| w.contains("incomplete")),
            "{:?}",
            s.warnings
        ),
        Err(e) => assert!(matches!(e, ReplayError::Trace(_)), "{e}"),
    }
}

#[test]
fn devices_lists_lavapipe_with_query_capabilities() {
    if !have_vulkan() {
        return;
    }
    let gpus = replayer::devices().unwrap();
    let json = serde_json::to_value(&gpus).unwrap();
    let arr = json.as_array().unwrap();
    assert!(!arr.is_empty());
    for g in arr {
        for key in [
            "index",
            "name",
            "vendor_id",
            "device_id",
            "driver_name",
            "uuid",
            "api_version",
            "queue_families",
            "queries",
        ] {
            assert!(g.get(key).is_some(), "missing {key} in {g}");
        }
        assert!(g["queries"]["query_types"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "OCCLUSION"));
        assert_eq!(g["uuid"].as_str().unwrap().len(), 32);
    }
    // CI installs mesa-vulkan-drivers; a machine without lavapipe can opt out.
    if std::env::var_os("QUARRY_NO_LAVAPIPE").is_some() {
        return;
    }
    let lp = gpus
        .iter()
        .find(|g| g.name.contains("llvmpipe"))
        .expect("lavapipe (mesa-vulkan-drivers) is listed");
    assert_eq!(lp.device_type, "cpu");
    assert!(lp.queries.occlusion_query_precise && lp.queries.pipeline_statistics_query);
    assert!(lp.queue_families.iter().any(|f| f.timestamp_valid_bits > 0));
    assert!(lp.queries.query_types.iter().any(|t| t == "TIMESTAMP"));
    assert!(lp.queries.transform_feedback_streams > 0);
}

/// A capture whose graphics family is 1 (family 0 transfer-only) releases a buffer from family 1
/// to family 0. lavapipe has family 0 only, to which both map: the replayed barrier must name
/// mapped families (no transfer left), or validation reports family 1 as invalid.
#[test]
fn barrier_queue_families_follow_the_family_mapping() {
    if !have_vulkan()
        || !replayer::devices()
            .unwrap()
            .iter()
            .any(|g| g.name.contains("llvmpipe"))
    {
        eprintln!("SKIP: needs lavapipe");
        return;
    }
    let mut t = Trace::new();
    let qf = |flags: vk::QueueFlags| record::QueueFamilySummary {
        flags: flags.as_raw(),
        queue_count: 1,
        timestamp_valid_bits: 64,
    };
    t.records.push(Record::Device(record::DeviceSummary {
        name: "two-family GPU".into(),
        vendor_id: 0x1234,
        device_id: 1,
        driver_id: 0,
        driver_name: "synthetic".into(),
        driver_info: String::new(),
        driver_version: 1,
        api_version: vk::API_VERSION_1_2,
        pipeline_cache_uuid: [0; 16],
        device_uuid: [0; 16],
        timestamp_period_ns: 1.0,
        queue_families: vec![
            qf(vk::QueueFlags::TRANSFER),
            qf(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE | vk::QueueFlags::TRANSFER),
        ],
        memory_types: vec![record::MemoryTypeSummary {
            property_flags: (vk::MemoryPropertyFlags::DEVICE_LOCAL
                | vk::MemoryPropertyFlags::HOST_VISIBLE
                | vk::MemoryPropertyFlags::HOST_COHERENT)
                .as_raw(),
            heap_index: 0,
        }],
        memory_heaps: vec![record::MemoryHeapSummary {
            size: 1 << 30,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL.as_raw(),
        }],
    }));
    t.device_on(1, &[], false);
    let dev = vk::Device::from_raw(DEVICE);
    let bci = vk::BufferCreateInfo::default()
        .size(256)
        .usage(vk::BufferUsageFlags::TRANSFER_DST);
    let mut buf = vk::Buffer::from_raw(0x6000);
    t.call("vkCreateBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCreateBuffer(e, dev, &bci, std::ptr::null(), &mut buf)
    });
    let mai = vk::MemoryAllocateInfo::default()
        .allocation_size(4096)
        .memory_type_index(0);
    let mut mem = vk::DeviceMemory::from_raw(0x7000);
    t.call("vkAllocateMemory", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkAllocateMemory(e, dev, &mai, std::ptr::null(), &mut mem)
    });
    t.call("vkBindBufferMemory", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkBindBufferMemory(e, dev, buf, mem, 0)
    });
    let cpci = vk::CommandPoolCreateInfo::default().queue_family_index(1);
    let mut pool = vk::CommandPool::from_raw(0x8000);
    t.call("vkCreateCommandPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev, &cpci, std::ptr::null(), &mut pool)
    });
    let cbai = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    let mut cb = vk::CommandBuffer::from_raw(0x9000);
    t.call(
        "vkAllocateCommandBuffers",
        vk::Result::SUCCESS,
        |e| unsafe { vkstream::encode::vkAllocateCommandBuffers(e, dev, &cbai, &mut cb) },
    );
    let begin = vk::CommandBufferBeginInfo::default();
    t.call("vkBeginCommandBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
    });
    t.call("vkCmdFillBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCmdFillBuffer(e, cb, buf, 0, 256, 7)
    });
    let barrier = [vk::BufferMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ)
        .src_queue_family_index(1)
        .dst_queue_family_index(0)
        .buffer(buf)
        .size(vk::WHOLE_SIZE)];
    t.call("vkCmdPipelineBarrier", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCmdPipelineBarrier(
            e,
            cb,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            0,
            std::ptr::null(),
            barrier.len() as u32,
            barrier.as_ptr(),
            0,
            std::ptr::null(),
        )
    });
    t.call("vkEndCommandBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    });
    let cbs = [cb];
    let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
    let queue = vk::Queue::from_raw(QUEUE);
    t.call("vkQueueSubmit", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkQueueSubmit(e, queue, 1, submit.as_ptr(), vk::Fence::null())
    });
    t.call("vkQueueWaitIdle", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkQueueWaitIdle(e, queue)
    });
    t.call("vkDestroyCommandPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkDestroyCommandPool(e, dev, pool, std::ptr::null())
    });
    t.call("vkDestroyBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkDestroyBuffer(e, dev, buf, std::ptr::null())
    });
    t.call("vkFreeMemory", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkFreeMemory(e, dev, mem, std::ptr::null())
    });
    t.teardown();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("families.qtrace");
    t.write(&path);
    let mut o = ReplayOptions::new(&path);
    o.gpu = Some("llvmpipe".into());
    o.validate = true;
    let s = replayer::replay(&o).unwrap();
    assert_eq!(
        s.validation_messages, 0,
        "validation: {:?}",
        s.first_messages
    );
}

/// A device extension lavapipe lacks but whose commands only annotate (checkpoints): without
/// `--drop-unsupported` the replay refuses, naming it and the option; with it, the extension is
/// left out, its command skipped and the rest of the trace replayed.
#[test]
fn safe_extensions_can_be_dropped() {
    if !have_vulkan() {
        return;
    }
    let ext = c"VK_NV_device_diagnostic_checkpoints";
    let has = replayer::devices()
        .unwrap()
        .iter()
        .any(|g| g.name.contains("llvmpipe"));
    if !has {
        eprintln!("SKIP: needs lavapipe (which lacks {ext:?})");
        return;
    }
    let mut t = Trace::new();
    t.device(&[ext], false);
    let dev = vk::Device::from_raw(DEVICE);
    let cpci = vk::CommandPoolCreateInfo::default().queue_family_index(0);
    let mut pool = vk::CommandPool::from_raw(0x8000);
    t.call("vkCreateCommandPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev, &cpci, std::ptr::null(), &mut pool)
    });
    let cbai = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    let mut cb = vk::CommandBuffer::from_raw(0x9000);
    t.call(
        "vkAllocateCommandBuffers",
        vk::Result::SUCCESS,
        |e| unsafe { vkstream::encode::vkAllocateCommandBuffers(e, dev, &cbai, &mut cb) },
    );
    let begin = vk::CommandBufferBeginInfo::default();
    t.call("vkBeginCommandBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
    });
    t.call("vkCmdSetCheckpointNV", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCmdSetCheckpointNV(e, cb, 0x1234 as *const std::ffi::c_void)
    });
    t.call("vkEndCommandBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    });
    let cbs = [cb];
    let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
    let queue = vk::Queue::from_raw(QUEUE);
    t.call("vkQueueSubmit", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkQueueSubmit(e, queue, 1, submit.as_ptr(), vk::Fence::null())
    });
    t.call("vkQueueWaitIdle", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkQueueWaitIdle(e, queue)
    });
    t.call("vkDestroyCommandPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkDestroyCommandPool(e, dev, pool, std::ptr::null())
    });
    t.teardown();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoints.qtrace");
    t.write(&path);
    let mut o = ReplayOptions::new(&path);
    o.gpu = Some("llvmpipe".into());
    let e = replayer::replay(&o).unwrap_err().to_string();
    assert!(
        e.contains("VK_NV_device_diagnostic_checkpoints") && e.contains("--drop-unsupported"),
        "{e}"
    );
    o.drop_unsupported = true;
    o.validate = true;
    let s = replayer::replay(&o).unwrap();
    assert!(
        s.warnings.iter().any(|w| w
            .contains("dropped device extension(s) the replay GPU lacks: VK_NV_device_diagnostic_checkpoints (1 of their calls skipped)")),
        "{:?}",
        s.warnings
    );
    assert_eq!(s.validation_messages, 0, "{:?}", s.first_messages);
}

/// The Zink case (issue 20) by hand: a command buffer writes a timestamp and copies it into mapped
/// memory; it is submitted twice, and after each submit a `MemoryWrite` puts the captured copy
/// bytes on the destination; both `QueryCopy` records come last. Each replayed value must be the
/// one the replay GPU wrote for that submit, never the bytes the trace wrote back.
#[test]
fn query_copy_values_come_from_the_replay_gpu_not_the_trace() {
    if !have_vulkan() {
        return;
    }
    let gpu = replayer::devices().unwrap()[0].clone();
    let host =
        (vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT).as_raw();
    let Some(mem_type) = gpu
        .summary
        .memory_types
        .iter()
        .position(|t| t.property_flags & host == host)
    else {
        eprintln!("SKIP: no host-visible coherent memory");
        return;
    };
    let mut t = timestamp_pool_trace();
    // Drop the teardown and the frame; the copies go before them.
    let tail: Vec<Record> = t.records.split_off(
        t.records
            .iter()
            .position(|r| matches!(r, Record::Frame(_)))
            .unwrap(),
    );
    let dev = vk::Device::from_raw(DEVICE);
    let qpool = vk::QueryPool::from_raw(POOL);
    let bci = vk::BufferCreateInfo::default()
        .size(256)
        .usage(vk::BufferUsageFlags::TRANSFER_DST);
    let mut buf = vk::Buffer::from_raw(0x6000);
    t.call("vkCreateBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCreateBuffer(e, dev, &bci, std::ptr::null(), &mut buf)
    });
    let mai = vk::MemoryAllocateInfo::default()
        .allocation_size(4096)
        .memory_type_index(mem_type as u32);
    let mut mem = vk::DeviceMemory::from_raw(0x7000);
    t.call("vkAllocateMemory", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkAllocateMemory(e, dev, &mai, std::ptr::null(), &mut mem)
    });
    t.call("vkBindBufferMemory", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkBindBufferMemory(e, dev, buf, mem, 64)
    });
    let cpci = vk::CommandPoolCreateInfo::default().queue_family_index(0);
    let mut cpool = vk::CommandPool::from_raw(0x8000);
    t.call("vkCreateCommandPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCreateCommandPool(e, dev, &cpci, std::ptr::null(), &mut cpool)
    });
    let cbai = vk::CommandBufferAllocateInfo::default()
        .command_pool(cpool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    let mut cb = vk::CommandBuffer::from_raw(0x9000);
    t.call(
        "vkAllocateCommandBuffers",
        vk::Result::SUCCESS,
        |e| unsafe { vkstream::encode::vkAllocateCommandBuffers(e, dev, &cbai, &mut cb) },
    );
    let begin = vk::CommandBufferBeginInfo::default();
    t.call("vkBeginCommandBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkBeginCommandBuffer(e, cb, &begin)
    });
    t.call("vkCmdResetQueryPool", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCmdResetQueryPool(e, cb, qpool, 0, 1)
    });
    t.call("vkCmdWriteTimestamp", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkCmdWriteTimestamp(
            e,
            cb,
            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            qpool,
            0,
        )
    });
    let (dst_offset, flags) = (
        16u64,
        vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
    );
    let copy_seq = t.call(
        "vkCmdCopyQueryPoolResults",
        vk::Result::SUCCESS,
        |e| unsafe {
            vkstream::encode::vkCmdCopyQueryPoolResults(
                e, cb, qpool, 0, 1, buf, dst_offset, 8, flags,
            )
        },
    );
    t.call("vkEndCommandBuffer", vk::Result::SUCCESS, |e| unsafe {
        vkstream::encode::vkEndCommandBuffer(e, cb)
    });
    let cbs = [cb];
    let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
    let queue = vk::Queue::from_raw(QUEUE);
    // What the trace "captured": values no real clock of the replay can give back.
    let captured = [42u64, 43];
    for v in captured {
        t.call("vkQueueSubmit", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkQueueSubmit(e, queue, 1, submit.as_ptr(), vk::Fence::null())
        });
        // The app waits, then reads: the GPU's write is done before the MemoryWrite lands.
        t.call("vkQueueWaitIdle", vk::Result::SUCCESS, |e| unsafe {
            vkstream::encode::vkQueueWaitIdle(e, queue)
        });
        // The page diff takes the GPU's copy for a host write (64 = the buffer's bind offset).
        t.records.push(Record::MemoryWrite(record::MemoryWrite {
            seq: t.seq,
            memory: mem.as_raw(),
            offset: 64 + dst_offset,
            data: record::Payload::Inline(v.to_le_bytes().to_vec()),
        }));
    }
    for v in captured {
        t.records.push(Record::QueryCopy(record::QueryCopy {
            seq: copy_seq,
            command_buffer: cb.as_raw(),
            pool: POOL,
            first: 0,
            count: 1,
            dst_buffer: buf.as_raw(),
            dst_offset,
            stride: 8,
            flags: flags.as_raw(),
            host_ns: 9,
            data: v.to_le_bytes().to_vec(),
        }));
    }
    t.records.extend(tail);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("copies.qtrace");
    t.write(&trace);
    let results = dir.path().join("copies.qres");
    let mut opts = ReplayOptions::new(&trace);
    opts.results = Some(results.clone());
    opts.compare = true;
    let s = replayer::replay(&opts).expect("replay");
    let text = s.comparison.to_text();
    let ts = &s.comparison.by_type["TIMESTAMP"];
    // 4 unavailable (the pool's host read) + the 2 copies, read as clock values.
    assert_eq!((ts.queries, ts.matches, ts.clock), (6, 0, 2), "{text}");
    let copies: Vec<_> = TraceReader::open(&results)
        .unwrap()
        .records()
        .filter_map(|r| match r.unwrap() {
            Record::QueryResult(q) if q.seq == copy_seq => Some(q),
            _ => None,
        })
        .collect();
    assert_eq!(copies.len(), 2);
    let got: Vec<u64> = copies
        .iter()
        .map(|q| q.replayed.as_ref().unwrap().values[0])
        .collect();
    for (q, v) in copies.iter().zip(captured) {
        assert_eq!(q.captured.as_ref().unwrap().values, vec![v]);
    }
    assert!(
        got.iter().all(|v| !captured.contains(v) && *v != 0),
        "replayed copy values {got:?} must be the replay GPU's timestamps, not the trace's {captured:?}"
    );
    assert!(
        got[0] <= got[1],
        "each submit's own timestamp, in order: {got:?}"
    );
}

/// A `QueryCopy` whose copy the replay never ran (no recorded, submitted copy matches it) is not
/// compared, with the reason; the replay goes on.
#[test]
fn copy_the_replay_never_ran_is_not_compared() {
    if !have_vulkan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.qtrace");
    let mut t = timestamp_pool_trace();
    let at = t
        .records
        .iter()
        .position(|r| matches!(r, Record::Frame(_)))
        .unwrap();
    t.records.insert(
        at,
        Record::QueryCopy(record::QueryCopy {
            seq: t.seq + 2,
            command_buffer: 0x9000,
            pool: POOL,
            first: 0,
            count: 2,
            dst_buffer: 0x6000,
            dst_offset: 0,
            stride: 8,
            flags: vk::QueryResultFlags::TYPE_64.as_raw(),
            host_ns: 7,
            data: vec![1; 16],
        }),
    );
    t.write(&trace);
    let mut opts = ReplayOptions::new(&trace);
    opts.compare = true;
    let s = replayer::replay(&opts).expect("the replay goes on");
    let text = s.comparison.to_text();
    let ts = &s.comparison.by_type["TIMESTAMP"];
    assert_eq!((ts.queries, ts.not_compared, ts.clock), (6, 6, 0), "{text}");
    assert!(!s.comparison.failed(), "{text}");
    assert!(
        text.contains("replayed query copy: no replayed run of this copy is left to read"),
        "{text}"
    );
}
