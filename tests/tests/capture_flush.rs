//! The layer in this process (ash on lavapipe), capturing by default: destroying the last instance
//! does not end the trace, it flushes it. Read right after, before this process exits, the trace
//! holds every call so far (recovered: no index yet, nothing lost), which is what a process that
//! ends in `_exit` or a crash keeps; an instance made after goes on in the same trace, and no
//! second trace is opened. One test per process: the loader reads the environment once.

use ash::vk;
use format::record::Record;
use quarry_tests::*;

fn notes(t: &Trace) -> Vec<String> {
    t.records
        .iter()
        .filter_map(|r| match r {
            Record::Note(n) => Some(n.message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_last_instance_flushes_the_trace_and_the_next_goes_on_in_it() {
    if !require(&[]) {
        return;
    }
    let layer = layer();
    let trace = scratch("flushed.qtrace");
    capture_in_process(&layer, &trace, None);
    // The default: the trace follows the process.
    std::env::remove_var("QUARRY_CAPTURE_END");

    let entry = unsafe {
        let (entry, instance, pd) = first_gpu(c"quarry-flush-test", vk::API_VERSION_1_1);
        let _ = instance.get_physical_device_properties(pd);
        instance.destroy_instance(None);
        entry
    };
    let t = read_trace(&trace);
    assert!(!t.info.complete, "not finished: the process goes on");
    assert!(t.info.recovered(), "every block flushed, none damaged");
    t.check_structure();
    assert_eq!(t.calls_of("vkCreateInstance"), 1);
    assert_eq!(t.calls_of("vkDestroyInstance"), 1);
    assert!(t.calls_of("vkGetPhysicalDeviceProperties") >= 1);
    let n = notes(&t);
    assert!(
        n.iter().any(|m| m.contains("every instance was destroyed")),
        "{n:?}"
    );

    // A second instance, one after the other: the same trace, no `.1`.
    unsafe {
        let app = vk::ApplicationInfo::default()
            .application_name(c"quarry-flush-test")
            .api_version(vk::API_VERSION_1_1);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .unwrap();
        let pds = instance.enumerate_physical_devices().unwrap();
        assert!(!pds.is_empty());
        instance.destroy_instance(None);
    }
    let t = read_trace(&trace);
    assert!(t.info.recovered());
    t.check_structure();
    assert_eq!(t.calls_of("vkCreateInstance"), 2);
    assert_eq!(t.calls_of("vkDestroyInstance"), 2);
    assert_eq!(
        notes(&t)
            .iter()
            .filter(|m| m.contains("every instance was destroyed"))
            .count(),
        2
    );
    assert!(!trace.with_file_name("flushed.1.qtrace").exists());
}
