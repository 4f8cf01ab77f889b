//! How much of the registry the generated code covers, from the generated tables: what `quarry
//! info` and the docs state.

use crate::generated::commands::{
    COMMANDS, REGISTRY_EXTENSIONS, UNSUPPORTED, UNSUPPORTED_EXTENSIONS, UNSUPPORTED_EXTENSIONS_WHY,
};

/// The capturable share of the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// The vk.xml version the tables were generated from (`1.3.239`).
    pub registry: &'static str,
    /// Commands with an encoder (captured and replayed), aliases included.
    pub commands: usize,
    /// Every command vk.xml defines for Vulkan.
    pub commands_total: usize,
    /// Extensions the capture layer lets applications see.
    pub extensions: usize,
    /// Every extension vk.xml defines for Vulkan.
    pub extensions_total: usize,
    /// What the layer hides while capturing: (extension, why).
    pub hidden: Vec<(&'static str, &'static str)>,
}

impl Coverage {
    /// The share in one line, as `quarry info` prints it and docs/USAGE.md states it.
    pub fn line(&self) -> String {
        format!(
            "vk.xml {}: {} of {} commands and {} of {} extensions are captured and replayed",
            self.registry,
            self.commands,
            self.commands_total,
            self.extensions,
            self.extensions_total
        )
    }

    /// The hidden extensions that exist only on another platform (Windows, Android, ...).
    pub fn platform_only(&self) -> usize {
        self.hidden
            .iter()
            .filter(|(_, why)| why.contains(": platform "))
            .count()
    }
}

/// The version named in the generated files' first line (`... from vk.xml 1.3.239; do not edit`).
fn registry_version() -> &'static str {
    let first = include_str!("generated/commands.rs")
        .lines()
        .next()
        .unwrap_or("");
    first
        .split_once("from vk.xml ")
        .and_then(|(_, v)| v.split(';').next())
        .unwrap_or("unknown")
}

pub fn coverage() -> Coverage {
    Coverage {
        registry: registry_version(),
        commands: COMMANDS.len(),
        commands_total: COMMANDS.len() + UNSUPPORTED.len(),
        extensions: REGISTRY_EXTENSIONS.len() - UNSUPPORTED_EXTENSIONS.len(),
        extensions_total: REGISTRY_EXTENSIONS.len(),
        hidden: UNSUPPORTED_EXTENSIONS
            .iter()
            .copied()
            .zip(UNSUPPORTED_EXTENSIONS_WHY.iter().copied())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        let c = coverage();
        assert!(c.registry.starts_with("1."), "{}", c.registry);
        assert!(c.commands > 500 && c.commands < c.commands_total);
        assert!(c.extensions + c.hidden.len() == c.extensions_total);
        // Hidden extensions are registry extensions, each with a reason.
        for (e, why) in &c.hidden {
            assert!(REGISTRY_EXTENSIONS.contains(e), "{e}");
            assert!(!why.is_empty());
        }
        // Multi-draw and acceleration structures encode: not hidden.
        for e in ["VK_EXT_multi_draw", "VK_KHR_acceleration_structure"] {
            assert!(c.hidden.iter().all(|(h, _)| *h != e), "{e} hidden");
        }
        assert!(c.platform_only() > 0 && c.platform_only() < c.hidden.len());
    }
}
