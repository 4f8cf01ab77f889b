//! `cargo run -p codegen [-- path/to/vk.xml]`: regenerates every generated file in the workspace.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let xml = std::env::args()
        .nth(1)
        .unwrap_or_else(|| codegen::DEFAULT_VK_XML.to_string());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize()?;
    for p in codegen::generate(std::path::Path::new(&xml), &root)? {
        println!("wrote {}", p.strip_prefix(&root).unwrap_or(&p).display());
    }
    Ok(())
}
