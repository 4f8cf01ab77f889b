//! VK_EXT_multi_draw is no longer hidden while capturing (issue 31): quarry-demo on lavapipe draws
//! its occlusion target with one vkCmdDrawMultiEXT whose draw infos lie 16 bytes apart. The trace
//! holds the two draws (the padding skipped), and the replay draws them again: the occlusion query
//! around them matches what the capture read.

use format::record::Record;
use quarry_tests::*;

#[test]
fn multi_draw_is_captured_and_replayed() {
    let lavapipe_has_it = replayer::devices().ok().is_some_and(|g| {
        g.iter().any(|g| {
            g.name.contains("llvmpipe") && g.extensions.iter().any(|e| e == "VK_EXT_multi_draw")
        })
    });
    if !lavapipe_has_it {
        eprintln!("skipping: no lavapipe with VK_EXT_multi_draw");
        return;
    }
    let Some(trace) = capture_demo_on_lavapipe("multi_draw", "1") else {
        return;
    };
    let t = read_trace(&trace);
    t.check_structure();
    let id = vkstream::command_id("vkCmdDrawMultiEXT").unwrap();
    let draws: Vec<Vec<(u32, u32)>> = t
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Call(c) if c.cmd == id => match vkstream::decode_call(c.cmd, &c.params) {
                Ok(vkstream::Call::vkCmdDrawMultiEXT(p)) => {
                    assert_eq!(p.stride, 16);
                    Some(
                        p.p_vertex_info
                            .unwrap_or_default()
                            .iter()
                            .map(|d| (d.first_vertex, d.vertex_count))
                            .collect(),
                    )
                }
                other => panic!("vkCmdDrawMultiEXT decodes: {other:?}"),
            },
            _ => None,
        })
        .collect();
    // The demo's target quad: vertices 6..12, one triangle per draw.
    assert_eq!(draws, vec![vec![(6, 3), (9, 3)]]);

    let out = run_quarry(&[
        "replay",
        trace.to_str().unwrap(),
        "--compare",
        "--gpu",
        "llvmpipe",
    ]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("all deterministic results match"), "{text}");
}
