//! `quarry info` without a file states the capturable share of the registry from the generated
//! tables, and docs/USAGE.md states the same line (issue 31).

use quarry_tests::*;

#[test]
fn info_states_the_registry_share_and_the_docs_agree() {
    let c = vkstream::coverage::coverage();
    let out = run_quarry(&["info"]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.lines().next(), Some(c.line().as_str()), "{text}");
    assert!(
        text.contains(&format!(
            "hidden while capturing: {} extensions, {} of them platform-only",
            c.hidden.len(),
            c.platform_only()
        )),
        "{text}"
    );
    assert!(!text.contains("VK_EXT_multi_draw"), "{text}");

    let out = run_quarry(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["commands"], c.commands);
    assert_eq!(v["commands_total"], c.commands_total);
    assert_eq!(v["extensions_total"], c.extensions_total);
    assert_eq!(
        v["hidden"].as_object().map(|h| h.len()),
        Some(c.hidden.len())
    );

    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/USAGE.md"))
        .expect("docs/USAGE.md");
    assert!(
        docs.contains(&format!("    {}\n", c.line())),
        "docs/USAGE.md must state `{}` (the numbers of this build)",
        c.line()
    );
}
