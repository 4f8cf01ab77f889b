//! The replay validator's per-command table (`replayer::generated::checks::flags`): a command's
//! kind, and which of the validator's modules look at it, so that each call runs only those
//! (one table load instead of a `match` per module, each an indirect jump).
//!
//! Which commands a module looks at is read from the module's own source: every `Call::vk*` it
//! names, plus the classes of commands it handles by kind (below, by hand). Naming a command in
//! a module's file is thus enough to have the module see it; the generated file goes stale (the
//! freshness test says so) until `cargo run -p codegen` is run again.

use crate::analyze::Analysis;
use crate::emit_checks::kind_of;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// `validate::Sync`: command buffer states, fences, semaphores, submissions.
const SYNC: &[&str] = &[
    include_str!("../../replayer/src/validate/sync.rs"),
    include_str!("../../replayer/src/validate/gpuwait.rs"),
];
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

/// Every command a source names as `Call::vk...`, by the side it is named on: in a function
/// whose name ends in `before` (checks before the call), `after` (what the call did), or another
/// (a helper: both sides, to be safe).
fn named(sources: &[&str]) -> [BTreeSet<String>; 2] {
    let mut out = [BTreeSet::new(), BTreeSet::new()];
    for src in sources {
        // (offset, side) of each `fn`: 0 before, 1 after, 2 both.
        let mut fns = Vec::new();
        let mut at = 0;
        while let Some(k) = src[at..].find("fn ") {
            let start = at + k + 3;
            let name: String = src[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let whole_word = at + k == 0 || !src.as_bytes()[at + k - 1].is_ascii_alphanumeric();
            if whole_word && !name.is_empty() {
                let side = if name.ends_with("before") {
                    0
                } else if name.ends_with("after") {
                    1
                } else {
                    2
                };
                fns.push((at + k, side));
            }
            at = start;
        }
        let mut rest = 0;
        while let Some(k) = src[rest..].find("Call::vk") {
            let pos = rest + k;
            let tail = &src[pos + "Call::".len()..];
            let end = tail
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(tail.len());
            let side = fns
                .iter()
                .take_while(|(f, _)| *f < pos)
                .last()
                .map_or(2, |(_, s)| *s);
            for (i, set) in out.iter_mut().enumerate() {
                if side == 2 || side == i {
                    set.insert(tail[..end].to_string());
                }
            }
            rest = pos + "Call::".len() + end;
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
    let [sync_b, sync_a] = named(SYNC);
    let [rec_b, rec_a] = named(RECORDING);
    let [compat_b, compat_a] = named(COMPAT);
    let mut by: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for c in &an.cmds {
        let name = c.def.name.as_str();
        let kind = kind_value(kind_of(name));
        let mut f = kind;
        let mut set = |bit: u16, on: bool| {
            if on {
                f |= 1 << bit;
            }
        };
        // Sync checks every recorded command's command buffer is recording, and has the GPU
        // idle before whatever a destroy ends.
        set(8, sync_b.contains(name) || kind >= 3 || kind == 2);
        set(9, sync_a.contains(name));
        // Recording follows draws, dispatches and render pass instances by kind.
        set(10, rec_b.contains(name) || (4..=10).contains(&kind));
        set(11, rec_a.contains(name) || kind == 8 || kind == 10);
        set(12, compat_b.contains(name));
        set(13, compat_a.contains(name));
        if f != 0 {
            by.entry(f).or_default().push(format!("Call::{name}(_)"));
        }
    }
    let mut o = String::from(
        "\n/// `flags`' bits above the kind (its low byte, [`kind`]'s value): which of the\n\
         /// validator's modules look at the command, before it is replayed and after. Read from\n\
         /// the modules' sources by codegen (every `Call::vk*` each names in its `before` and\n\
         /// `after` functions, and the kinds each handles by kind).\n\
         pub const SYNC_BEFORE: u16 = 1 << 8;\npub const SYNC_AFTER: u16 = 1 << 9;\n\
         pub const RECORDING_BEFORE: u16 = 1 << 10;\npub const RECORDING_AFTER: u16 = 1 << 11;\n\
         pub const COMPAT_BEFORE: u16 = 1 << 12;\npub const COMPAT_AFTER: u16 = 1 << 13;\n\
         /// A command's kind (low byte) and the modules that look at it (`SYNC_BEFORE`, ...):\n\
         /// one table load per call.\n\
         #[inline]\npub fn flags(call: &Call) -> u16 {\nmatch call {\n",
    );
    for (f, names) in by {
        let _ = writeln!(o, "{} => 0x{f:04x},", names.join(" | "));
    }
    o.push_str("_ => 0,\n}\n}\n");
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn commands_are_found_on_the_side_of_the_function_naming_them() {
        let src = "fn before(c: &Call) { match c { Call::vkA(_) => {} } }\n\
                   fn helper(c: &Call) { if let Call::vkB(p) = c {} }\n\
                   pub(super) fn cmds_after(c: &Call) { match c { Call::vkC(_) | Call::vkD2KHR(_) => {} } }";
        let [before, after] = super::named(&[src]);
        let v = |s: &std::collections::BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        assert_eq!(v(&before), ["vkA", "vkB"]);
        assert_eq!(v(&after), ["vkB", "vkC", "vkD2KHR"]);
    }
}
