//! Replaying on a GPU that lacks what the capture device enabled (issue 21): a real capture of
//! quarry-demo on lavapipe, edited so its device also enables an extension lavapipe lacks
//! (VK_EXT_conservative_rasterization), replays with the extension left out when the trace never
//! uses it, and is refused, naming the call, when a shader module declares a SPIR-V capability
//! the extension enables. `quarry replay --check-only` and `quarry info --json` say the same;
//! `--check-only` also names an image format the GPU lacks.

use std::path::{Path, PathBuf};

use format::forge::rewrite_calls;
use format::record::Call;
use quarry_tests::*;
use replayer::ReplayOptions;

const EXT: &str = "VK_EXT_conservative_rasterization";
/// SPIR-V `FragmentFullyCoveredEXT`, which vk.xml says VK_EXT_conservative_rasterization enables.
const CAPABILITY: u32 = 5265;

/// Position of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// One more name in a vkCreateDevice record's `ppEnabledExtensionNames` (encoded as
/// `enabledExtensionCount: u32`, flag byte, element count: u64, then per name a flag byte, a u64
/// length and the bytes): inserted before the first name, both counts bumped.
fn enable_extension(params: &mut Vec<u8>, name: &str) {
    let call = vkstream::decode_call(vkstream::command_id("vkCreateDevice").unwrap(), params)
        .expect("decodable vkCreateDevice");
    let vkstream::Call::vkCreateDevice(p) = call else {
        unreachable!()
    };
    let names = p
        .p_create_info
        .unwrap()
        .pp_enabled_extension_names
        .unwrap_or_default();
    let first = names.first().expect("the demo's device enables extensions");
    let mut entry = vec![1u8];
    entry.extend((first.len() as u64).to_le_bytes());
    entry.extend(first.as_bytes());
    let at = find(params, &entry).expect("first extension name");
    let n = names.len() as u64;
    assert_eq!(u64_at(params, at - 8), n, "element count before the names");
    assert_eq!(params[at - 9], 1, "array present");
    let count32 = u32::from_le_bytes(params[at - 13..at - 9].try_into().unwrap());
    assert_eq!(count32 as u64, n, "enabledExtensionCount");
    let mut new = vec![1u8];
    new.extend((name.len() as u64).to_le_bytes());
    new.extend(name.as_bytes());
    params.splice(at..at, new);
    params[at - 8..at].copy_from_slice(&(n + 1).to_le_bytes());
    params[at - 13..at - 9].copy_from_slice(&(count32 + 1).to_le_bytes());
}

/// `OpCapability cap` after the header of the SPIR-V in a vkCreateShaderModule record (encoded as
/// `codeSize: u64`, flag byte, word count: u64, then the words).
fn declare_capability(params: &mut Vec<u8>, cap: u32) {
    let at = find(params, &0x0723_0203u32.to_le_bytes()).expect("SPIR-V magic");
    let words = u64_at(params, at - 8);
    assert_eq!(params[at - 9], 1);
    assert_eq!(u64_at(params, at - 17), words * 4, "codeSize");
    let mut op = (2u32 << 16 | 17).to_le_bytes().to_vec();
    op.extend(cap.to_le_bytes());
    params.splice(at + 20..at + 20, op);
    params[at - 8..at].copy_from_slice(&(words + 2).to_le_bytes());
    params[at - 17..at - 9].copy_from_slice(&((words + 2) * 4).to_le_bytes());
}

/// The demo captured on lavapipe and two edits of it: `unused.qtrace` (the device also enables
/// EXT) and `used.qtrace` (also a shader module declaring CAPABILITY); `None` when skipped.
fn traces(tag: &str) -> Option<(PathBuf, PathBuf, u64)> {
    let demo = capture_demo_on_lavapipe(tag, "1")?;
    let dir = demo.parent().unwrap().to_path_buf();
    let unused = dir.join("unused.qtrace");
    let used = dir.join("used.qtrace");
    rewrite_calls(&demo, &unused, |name, c: &mut Call| {
        if name == "vkCreateDevice" {
            enable_extension(&mut c.params, EXT);
        }
        Vec::new()
    })
    .unwrap();
    let mut shader_seq = None;
    rewrite_calls(&unused, &used, |name, c: &mut Call| {
        if name == "vkCreateShaderModule" && shader_seq.is_none() {
            declare_capability(&mut c.params, CAPABILITY);
            shader_seq = Some(c.seq);
        }
        Vec::new()
    })
    .unwrap();
    Some((
        unused,
        used,
        shader_seq.expect("the demo creates shader modules"),
    ))
}

fn check_only(trace: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec![
        "replay",
        "--check-only",
        trace.to_str().unwrap(),
        "--gpu",
        "llvmpipe",
    ];
    args.extend(extra);
    let out = run_quarry(&args);
    (out.status.code().unwrap_or(-1), output_text(&out))
}

#[test]
fn unused_extension_the_gpu_lacks_is_left_out_and_a_used_one_is_refused_naming_the_call() {
    let Some((unused, used, shader_seq)) = traces("portability") else {
        return;
    };

    // Unused: replays, and the summary names what was left out in one line.
    let mut o = ReplayOptions::new(&unused);
    o.gpu = Some("llvmpipe".into());
    o.validate = true;
    let s = replayer::replay(&o).expect("a trace that never uses the extension replays");
    let line = format!(
        "left out what the trace enables but never uses and GPU {} lacks: {EXT}",
        s.gpu.index
    );
    assert!(
        s.warnings.iter().any(|w| w == &line),
        "{line:?} in {:?}",
        s.warnings
    );
    assert_eq!(s.validation_messages, 0, "{:?}", s.first_messages);

    // Used by a shader: refused before the device is created, naming the call and the capability.
    let mut o = ReplayOptions::new(&used);
    o.gpu = Some("llvmpipe".into());
    let e = replayer::replay(&o).unwrap_err().to_string();
    let first = format!(
        "device extension {EXT}, first used by vkCreateShaderModule (call {shader_seq}: SPIR-V capability FragmentFullyCoveredEXT)"
    );
    assert!(e.contains(&first), "{first:?} in {e}");
    assert!(e.contains("--drop-unsupported"), "{e}");

    // --check-only says the same, in one line, with the exit code.
    let (code, text) = check_only(&unused, &[]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("can replay")
            && text.contains(&format!("left out as unused by the trace: {EXT}")),
        "{text}"
    );
    let (code, text) = check_only(&used, &[]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("cannot replay")
            && text.contains(&format!(
                "device extension {EXT} (first used by vkCreateShaderModule (call {shader_seq}"
            ))
            && text.contains("--drop-unsupported"),
        "{text}"
    );
    // With --drop-unsupported the extension no longer stops it.
    let (code, text) = check_only(&used, &["--drop-unsupported"]);
    assert_eq!(code, 0, "{text}");

    // info --json: per device, what is enabled but unused and what is used, with the first use.
    let json = |t: &Path| -> serde_json::Value {
        let out = run_quarry(&["info", "--json", t.to_str().unwrap()]);
        assert!(out.status.success(), "{}", output_text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = json(&unused);
    let d = &v["device_use"][0];
    assert!(
        d["enabled_unused"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == EXT),
        "{d}"
    );
    let used_list = d["used"].as_array().unwrap();
    assert!(!used_list.is_empty(), "{d}");
    for u in used_list {
        assert!(
            u["name"].is_string() && u["seq"].is_u64() && u["call"].is_string(),
            "{u}"
        );
    }
    let v = json(&used);
    let d = &v["device_use"][0];
    let ext = d["used"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == EXT)
        .unwrap_or_else(|| panic!("{EXT} used in {d}"));
    assert_eq!(ext["seq"], shader_seq);
    assert_eq!(ext["call"], "vkCreateShaderModule");
    assert_eq!(ext["what"], "SPIR-V capability FragmentFullyCoveredEXT");
    // The human form: one line of unused, one of used per device.
    let out = run_quarry(&["info", unused.to_str().unwrap()]);
    let text = output_text(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("device ") && l.contains(&format!("unused: {EXT}"))),
        "{text}"
    );
}

/// The first vkCreateImage's format set to `format` (the `flags, imageType, format` words of its
/// create info found by their decoded values).
fn set_image_format(params: &mut [u8], format: i32) {
    let call = vkstream::decode_call(vkstream::command_id("vkCreateImage").unwrap(), params)
        .expect("decodable vkCreateImage");
    let vkstream::Call::vkCreateImage(p) = call else {
        unreachable!()
    };
    let ci = p.p_create_info.unwrap();
    let mut words = ci.flags.to_le_bytes().to_vec();
    words.extend(ci.image_type.to_le_bytes());
    words.extend(ci.format.to_le_bytes());
    let at = find(params, &words).expect("flags, imageType, format") + 8;
    params[at..at + 4].copy_from_slice(&format.to_le_bytes());
}

#[test]
fn check_only_names_an_image_format_the_gpu_lacks() {
    let Some(demo) = capture_demo_on_lavapipe("portability-format", "1") else {
        return;
    };
    let astc = demo.with_file_name("astc.qtrace");
    let mut image_seq = None;
    rewrite_calls(&demo, &astc, |name, c: &mut Call| {
        if name == "vkCreateImage" && image_seq.is_none() {
            // VK_FORMAT_ASTC_4x4_UNORM_BLOCK: lavapipe has no ASTC.
            set_image_format(&mut c.params, 157);
            image_seq = Some(c.seq);
        }
        Vec::new()
    })
    .unwrap();
    let seq = image_seq.expect("the demo creates images");
    let (code, text) = check_only(&astc, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("image format ASTC_4X4_UNORM_BLOCK")
            && text.contains(&format!("first used by vkCreateImage call {seq}"))
            && !text.contains("--drop-unsupported"),
        "{text}"
    );
}

#[test]
fn check_only_bad_input_exits_2() {
    let dir = scratch_dir("portability-bad");
    let junk = dir.join("junk.qtrace");
    std::fs::write(&junk, b"not a trace").unwrap();
    let out = run_quarry(&["replay", "--check-only", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let out = run_quarry(&["replay", "--check-only", dir.join("none").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
}
