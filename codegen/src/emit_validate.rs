//! The replay validator's per-command table (`replayer::generated::checks::flags`): a command's
//! kind, and which of the validator's modules look at it, so that each call runs only those
//! (one table load instead of a `match` per module, each an indirect jump).
//!
//! Which commands a module looks at is read from the module's own source: every `Call::vk*` it
//! names, plus the classes of commands it handles by kind (below, by hand). Naming a command in
//! a module's file is thus enough to have the module see it; the generated file goes stale (the
//! freshness test says so) until `cargo run -p codegen` is run again.

use crate::analyze::Analysis;
use crate::emit_replay::kind_of;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// `validate::Sync`: command buffer states, fences, semaphores, submissions.
const SYNC: &[&str] = &[include_str!("../../replayer/src/validate/sync.rs")];
/// `validate::Recording`: what a recording holds (queries, passes, bound pipelines, memory).
const RECORDING: &[&str] = &[include_str!("../../replayer/src/validate/record.rs")];
/// `validate::Compat` and the parts it hands calls on to.
const COMPAT: &[&str] = &[
    include_str!("../../replayer/src/validate/compat.rs"),
    include_str!("../../replayer/src/validate/passes.rs"),
    include_str!("../../replayer/src/validate/cmds.rs"),
    include_str!("../../replayer/src/validate/limits.rs"),
    include_str!("../../replayer/src/validate/shaders.rs"),
];

/// Every command a source names as `Call::vk...`.
fn named(sources: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for src in sources {
        let mut rest = *src;
        while let Some(at) = rest.find("Call::vk") {
            let tail = &rest[at + "Call::".len()..];
            let end = tail
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(tail.len());
            out.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    out
}

fn kind_value(kind: &str) -> u16 {
    match kind {
        "OTHER" => 0,
        "CREATE" => 1,
        "DESTROY" => 2,
        "RECORD" => 3,
        "DRAW" => 4,
        "DRAW_INDEXED" => 5,
        "DRAW_MESH" => 6,
        "DISPATCH" => 7,
        "PASS_BEGIN" => 8,
        "PASS_NEXT" => 9,
        "PASS_END" => 10,
        _ => unreachable!("unknown kind {kind}"),
    }
}

/// `checks::flags` and its bits.
pub fn flags(an: &Analysis) -> String {
    let sync = named(SYNC);
    let recording = named(RECORDING);
    let compat = named(COMPAT);
    let mut by: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for c in &an.cmds {
        let name = c.def.name.as_str();
        let kind = kind_value(kind_of(name));
        let mut f = kind;
        // Sync checks every recorded command's command buffer is recording, and has the GPU
        // idle before whatever a destroy ends.
        if sync.contains(name) || kind >= 3 || kind == 2 {
            f |= 1 << 8;
        }
        // Recording follows draws, dispatches and render pass instances by kind.
        if recording.contains(name) || (4..=10).contains(&kind) {
            f |= 1 << 9;
        }
        if compat.contains(name) {
            f |= 1 << 10;
        }
        if f != 0 {
            by.entry(f).or_default().push(format!("Call::{name}(_)"));
        }
    }
    let mut o = String::from(
        "\n/// `flags`' bits above the kind (its low byte, [`kind`]'s value): which of the\n\
         /// validator's modules look at the command. Read from the modules' sources by codegen\n\
         /// (every `Call::vk*` each names, and the kinds each handles by kind).\n\
         pub const SYNC: u16 = 1 << 8;\npub const RECORDING: u16 = 1 << 9;\npub const COMPAT: u16 = 1 << 10;\n\
         /// A command's kind (low byte) and the modules that look at it ([`SYNC`], [`RECORDING`],\n\
         /// [`COMPAT`]): one table load per call.\n\
         #[inline]\npub fn flags(call: &Call) -> u16 {\nmatch call {\n",
    );
    for (f, names) in by {
        let _ = writeln!(o, "{} => 0x{f:04x},", names.join(" | "));
    }
    o.push_str("_ => 0,\n}\n}\n");
    o
}
