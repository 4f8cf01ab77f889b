//! `vulkaninfo --summary` sees the same Vulkan with and without the capture layer; the idle mode
//! (`QUARRY_CAPTURE_DISABLE=1`) writes nothing.

use quarry_tests::*;

#[test]
fn vulkaninfo_summary_is_unchanged() {
    if !require(&["vulkaninfo"]) {
        return;
    }
    let layer = layer();
    let trace = scratch("vulkaninfo.qtrace");
    // Both runs see the manifest directory (vulkaninfo lists available layers); only one enables it.
    // No window system: the comparison is about what the layer changes, not about surfaces.
    let mut plain = vulkan_command("vulkaninfo");
    plain.env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    layer.apply(&mut plain);
    plain.env_remove("VK_LOADER_LAYERS_ENABLE");
    let base = plain.arg("--summary").output().unwrap();
    assert!(base.status.success());

    let mut captured = vulkan_command("vulkaninfo");
    captured.env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    let out = under_layer(captured, &layer, &trace)
        .arg("--summary")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&base.stdout),
        "vulkaninfo output changed under the layer"
    );
    let t = read_trace(&trace);
    assert!(t.info.complete, "finished at exit");
    t.check_structure();
    assert_eq!(t.calls_of("vkCreateInstance"), 1);
    assert!(t.calls_of("vkEnumeratePhysicalDevices") >= 1);
    assert!(
        t.calls_of("vkGetPhysicalDeviceProperties") + t.calls_of("vkGetPhysicalDeviceProperties2")
            >= 1
    );
    assert_eq!(t.info.header.application, "vulkaninfo");
}

#[test]
fn disabled_layer_passes_through_and_writes_nothing() {
    if !require(&["vulkaninfo"]) {
        return;
    }
    let layer = layer();
    let trace = scratch("disabled.qtrace");
    let mut captured = vulkan_command("vulkaninfo");
    captured.env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    let out = under_layer(captured, &layer, &trace)
        .env("QUARRY_CAPTURE_DISABLE", "1")
        .arg("--summary")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("llvmpipe"));
    assert!(!trace.exists(), "no trace when disabled");
}
