//! `quarry devices` lists each queue family's performance counters (name, unit, scope) and says
//! which are emulated (`--counters` names are checked against that list: cli_errors.rs).

use quarry_tests::*;

#[test]
fn devices_list_counters_with_unit_scope_and_emulation() {
    if !quarry_sees_lavapipe() {
        return;
    }
    let out = run_quarry(&["devices", "--json"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let gpus: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lvp = gpus
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"].as_str().unwrap().contains("llvmpipe"))
        .unwrap();
    // lavapipe has no VK_KHR_performance_query: its counters come from VK_LAYER_QUARRY_counters.
    assert_eq!(lvp["queries"]["performance_query"], false);
    let counters = lvp["queue_families"][0]["counters"].as_array().unwrap();
    let samples = counters
        .iter()
        .find(|c| c["name"] == "Samples passed")
        .unwrap_or_else(|| panic!("no Samples passed in {counters:?}"));
    assert_eq!(samples["scope"], "render-pass");
    assert_eq!(samples["emulated"], true);
    let duration = counters
        .iter()
        .find(|c| c["name"] == "Command buffer duration")
        .unwrap();
    assert_eq!(duration["unit"], "ns");
    let text = output_text(&run_quarry(&["devices"]));
    assert!(
        text.contains("counter \"Samples passed\"  render-pass scope  (emulated)"),
        "{text}"
    );
}
