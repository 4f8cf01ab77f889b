//! quarry's code generator: reads the Vulkan registry (vk.xml) and writes the per-command code
//! (vkstream encoders/decoders/dispatch tables, the capture layer's intercepts, the replayer's
//! dispatch). Output is checked in; `cargo run -p codegen` regenerates everything.

pub mod analyze;
pub mod config;
pub mod emit_checks;
pub mod emit_extensions;
pub mod emit_features;
pub mod emit_layer;
pub mod emit_replay;
pub mod emit_stream;
pub mod emit_validate;
pub mod model;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Default location of the registry (Debian's libvulkan-dev/vulkan-headers).
pub const DEFAULT_VK_XML: &str = "/usr/share/vulkan/registry/vk.xml";

/// The registry's version, `VK_HEADER_VERSION_COMPLETE` spelled out (`1.3.239`), from vk.xml's text:
/// `#define VK_HEADER_VERSION 239` and `VK_MAKE_API_VERSION(0, 1, 3, VK_HEADER_VERSION)`.
pub fn registry_version(xml: &str) -> Result<String> {
    let after = |marker: &str| -> Result<&str> {
        let at = xml
            .find(marker)
            .with_context(|| format!("no {marker} in vk.xml"))?;
        Ok(&xml[at + marker.len()..])
    };
    let patch = after("<name>VK_HEADER_VERSION</name>")?;
    let patch = patch[..patch.find('<').unwrap_or(patch.len())].trim();
    if patch.is_empty() || !patch.bytes().all(|b| b.is_ascii_digit()) {
        bail!("VK_HEADER_VERSION in vk.xml is not a number: {patch:?}");
    }
    let complete = after("<name>VK_HEADER_VERSION_COMPLETE</name>")?;
    let args = complete
        .find("VK_MAKE_API_VERSION</type>(")
        .map(|at| &complete[at + "VK_MAKE_API_VERSION</type>(".len()..])
        .and_then(|rest| rest.split_once(')'))
        .map(|(args, _)| args.split(',').map(str::trim).collect::<Vec<_>>())
        .context("VK_HEADER_VERSION_COMPLETE in vk.xml is not VK_MAKE_API_VERSION(...)")?;
    match args[..] {
        ["0", major, minor, "VK_HEADER_VERSION"] => Ok(format!("{major}.{minor}.{patch}")),
        [variant, major, minor, "VK_HEADER_VERSION"] => {
            Ok(format!("{major}.{minor}.{patch} (variant {variant})"))
        }
        _ => bail!("unexpected VK_HEADER_VERSION_COMPLETE in vk.xml: {args:?}"),
    }
}

/// Every generated file, relative to the workspace root, with its content; each starts with
/// [`emit_stream::header`] naming the registry version read.
pub fn render(vk_xml: &Path) -> Result<Vec<(PathBuf, String)>> {
    let xml =
        std::fs::read_to_string(vk_xml).with_context(|| format!("reading {}", vk_xml.display()))?;
    let header = emit_stream::header(&registry_version(&xml)?);
    let files = render_files(vk_xml)?;
    files
        .into_iter()
        .map(|(rel, src)| match src.strip_prefix(emit_stream::HEADER) {
            Some(body) => Ok((rel, format!("{header}{body}"))),
            None => bail!("{} does not start with emit_stream::HEADER", rel.display()),
        })
        .collect()
}

/// The files as the emitters write them (first line [`emit_stream::HEADER`]).
fn render_files(vk_xml: &Path) -> Result<Vec<(PathBuf, String)>> {
    let reg = model::load(vk_xml)?;
    let an = analyze::analyze(&reg);
    let gen_mod = format!(
        "{}//! Generated from vk.xml by `codegen`.\npub mod commands;\npub mod decode;\npub mod encode;\npub mod handles;\npub mod tables;\n",
        emit_stream::HEADER
    );
    let facts = emit_extensions::read(vk_xml, &reg)?;
    let extension_files = emit_extensions::files(&reg, &an, &facts);
    Ok(vec![
        ("vkstream/src/generated/mod.rs".into(), gen_mod),
        (
            "vkstream/src/generated/commands.rs".into(),
            emit_stream::commands_rs(&reg, &an),
        ),
        (
            "vkstream/src/generated/encode.rs".into(),
            emit_stream::encode_rs(&reg, &an),
        ),
        (
            "vkstream/src/generated/decode.rs".into(),
            emit_stream::decode_rs(&reg, &an),
        ),
        (
            "vkstream/src/generated/handles.rs".into(),
            emit_stream::handles_rs(&reg, &an),
        ),
        (
            "vkstream/src/generated/tables.rs".into(),
            emit_stream::tables_rs(&reg, &an),
        ),
        (
            "capture_layer/src/generated/mod.rs".into(),
            emit_layer::mod_rs(),
        ),
        (
            "capture_layer/src/generated/intercept.rs".into(),
            emit_layer::intercept_rs(&reg, &an),
        ),
        (
            "layer_support/src/generated/mod.rs".into(),
            format!(
                "{}//! Generated from vk.xml by `codegen`.\npub mod features;\n",
                emit_stream::HEADER
            ),
        ),
        (
            "layer_support/src/generated/features.rs".into(),
            emit_features::features_rs(&facts.features),
        ),
        (
            "replayer/src/generated/mod.rs".into(),
            emit_replay::mod_rs(),
        ),
        (
            "replayer/src/generated/dispatch.rs".into(),
            emit_replay::dispatch_rs(&reg, &an),
        ),
        (
            "replayer/src/generated/checks.rs".into(),
            emit_checks::checks_rs(&reg, &an, &facts.enum_values),
        ),
        (
            "replayer/src/generated/overrides.rs".into(),
            emit_replay::overrides_rs(&an),
        ),
    ]
    .into_iter()
    .chain(extension_files)
    .collect())
}

/// Formats Rust source with rustfmt (edition 2021, default style) so output is stable.
pub fn rustfmt(src: &str) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2021", "--emit", "stdout", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running rustfmt (install it with `rustup component add rustfmt`)")?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = src.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output()?;
    writer
        .join()
        .expect("writer thread")
        .context("feeding rustfmt")?;
    if !out.status.success() {
        bail!("rustfmt failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Renders, formats and writes every output under `root`; returns the paths written.
pub fn generate(vk_xml: &Path, root: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (rel, src) in render(vk_xml)? {
        let formatted = rustfmt(&src).with_context(|| format!("formatting {}", rel.display()))?;
        let path = root.join(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, formatted).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
