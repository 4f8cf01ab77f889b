//! What the tracker does with each command, decided by its name at compile time: tables in
//! read-only data, so the app's thread asks [`wanted`] with one load (folded away where the
//! command is a constant, as in every generated intercept), with no lazy initialisation to check.

use vkstream::COMMANDS;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Class {
    /// vkCmd*: owned by its command buffer.
    Cmd,
    BeginCb,
    ResetCb,
    ResetCommandPool,
    ResetDescriptorPool,
    Create,
    Destroy,
    Free,
    Bind,
    Update,
    Map,
    Unmap,
    Submit,
    /// Not state: submits' side effects are read at the snapshot instead (fences, memory).
    Drop,
}

/// `name` begins with `p` at byte `at`.
const fn has_at(name: &[u8], at: usize, p: &[u8]) -> bool {
    if name.len() < at + p.len() {
        return false;
    }
    let mut i = 0;
    while i < p.len() {
        if name[at + i] != p[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn starts(name: &[u8], p: &str) -> bool {
    has_at(name, 0, p.as_bytes())
}

/// `name` is one of `names`.
const fn is(name: &[u8], names: &[&str]) -> bool {
    let mut i = 0;
    while i < names.len() {
        if name.len() == names[i].len() && starts(name, names[i]) {
            return true;
        }
        i += 1;
    }
    false
}

const fn contains(name: &[u8], p: &str) -> bool {
    let mut at = 0;
    while at + p.len() <= name.len() {
        if has_at(name, at, p.as_bytes()) {
            return true;
        }
        at += 1;
    }
    false
}

const fn classify(name: &str) -> Class {
    let n = name.as_bytes();
    if is(n, &["vkBeginCommandBuffer"]) {
        Class::BeginCb
    } else if is(n, &["vkEndCommandBuffer"]) {
        Class::Cmd
    } else if is(n, &["vkResetCommandBuffer"]) {
        Class::ResetCb
    } else if is(n, &["vkResetCommandPool"]) {
        Class::ResetCommandPool
    } else if is(n, &["vkResetDescriptorPool"]) {
        Class::ResetDescriptorPool
    } else if is(
        n,
        &[
            "vkUpdateDescriptorSets",
            "vkUpdateDescriptorSetWithTemplate",
            "vkUpdateDescriptorSetWithTemplateKHR",
        ],
    ) {
        Class::Update
    } else if is(n, &["vkMapMemory", "vkMapMemory2KHR", "vkMapMemory2"]) {
        Class::Map
    } else if is(n, &["vkUnmapMemory", "vkUnmapMemory2KHR", "vkUnmapMemory2"]) {
        Class::Unmap
    } else if is(
        n,
        &[
            "vkQueueSubmit",
            "vkQueueSubmit2",
            "vkQueueSubmit2KHR",
            // Binary semaphores they signal or wait for (`Tracker::submitted`).
            "vkQueuePresentKHR",
            "vkAcquireNextImageKHR",
            "vkAcquireNextImage2KHR",
        ],
    ) {
        Class::Submit
    } else if is(
        n,
        &[
            "vkGetDeviceQueue",
            "vkGetDeviceQueue2",
            "vkGetSwapchainImagesKHR",
            "vkEnumeratePhysicalDevices",
        ],
    ) {
        Class::Create
    } else if starts(n, "vkCmd") {
        Class::Cmd
    } else if starts(n, "vkCreate") || starts(n, "vkAllocate") {
        Class::Create
    } else if starts(n, "vkDestroy") {
        Class::Destroy
    } else if starts(n, "vkFree") {
        Class::Free
    } else if starts(n, "vkBind") && contains(n, "Memory") {
        Class::Bind
    } else {
        Class::Drop
    }
}

const N: usize = COMMANDS.len();

static CLASSES: [Class; N] = {
    let mut t = [Class::Drop; N];
    let mut i = 0;
    while i < N {
        t[i] = classify(COMMANDS[i]);
        i += 1;
    }
    t
};

/// Commands that can change image layouts (barriers and render pass begins): looked up once per
/// command in every recording submitted.
static MOVES_LAYOUTS: [bool; N] = {
    let mut t = [false; N];
    let mut i = 0;
    while i < N {
        let n = COMMANDS[i].as_bytes();
        t[i] = starts(n, "vkCmdPipelineBarrier")
            || starts(n, "vkCmdBeginRenderPass")
            || starts(n, "vkCmdWaitEvents")
            || starts(n, "vkCmdExecuteCommands");
        i += 1;
    }
    t
};

#[inline]
pub(super) fn class_of(cmd: u32) -> Class {
    match CLASSES.get(cmd as usize) {
        Some(&c) => c,
        None => Class::Drop,
    }
}

#[inline]
pub(super) fn moves_layouts(cmd: u32) -> bool {
    MOVES_LAYOUTS.get(cmd as usize).copied().unwrap_or(false)
}

/// Whether the layer skips command `cmd` in a light command buffer (`runtime::light`): every
/// command recorded into one except those that move image layouts, which the tracker applies at
/// the buffer's submit, and its end (a light buffer ended and never submitted is one the app
/// discarded, which a snapshot need not wait for).
#[inline]
pub fn light_skips(cmd: u32) -> bool {
    class_of(cmd) == Class::Cmd && !moves_layouts(cmd) && !is_end(cmd)
}

static IS_END: [bool; N] = {
    let mut t = [false; N];
    let mut i = 0;
    while i < N {
        t[i] = is(COMMANDS[i].as_bytes(), &["vkEndCommandBuffer"]);
        i += 1;
    }
    t
};

#[inline]
pub(super) fn is_end(cmd: u32) -> bool {
    IS_END.get(cmd as usize).copied().unwrap_or(false)
}

/// Whether the tracker keeps anything of command `cmd` (the layer skips encoding the rest while
/// tracking).
#[inline]
pub fn wanted(cmd: u32) -> bool {
    !matches!(class_of(cmd), Class::Drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The string matching the tables replaced, kept as the reference.
    fn by_match(name: &str) -> Class {
        match name {
            "vkBeginCommandBuffer" => Class::BeginCb,
            "vkEndCommandBuffer" => Class::Cmd,
            "vkResetCommandBuffer" => Class::ResetCb,
            "vkResetCommandPool" => Class::ResetCommandPool,
            "vkResetDescriptorPool" => Class::ResetDescriptorPool,
            "vkUpdateDescriptorSets"
            | "vkUpdateDescriptorSetWithTemplate"
            | "vkUpdateDescriptorSetWithTemplateKHR" => Class::Update,
            "vkMapMemory" | "vkMapMemory2KHR" | "vkMapMemory2" => Class::Map,
            "vkUnmapMemory" | "vkUnmapMemory2KHR" | "vkUnmapMemory2" => Class::Unmap,
            "vkQueueSubmit"
            | "vkQueueSubmit2"
            | "vkQueueSubmit2KHR"
            | "vkQueuePresentKHR"
            | "vkAcquireNextImageKHR"
            | "vkAcquireNextImage2KHR" => Class::Submit,
            "vkGetDeviceQueue"
            | "vkGetDeviceQueue2"
            | "vkGetSwapchainImagesKHR"
            | "vkEnumeratePhysicalDevices" => Class::Create,
            n if n.starts_with("vkCmd") => Class::Cmd,
            n if n.starts_with("vkCreate") || n.starts_with("vkAllocate") => Class::Create,
            n if n.starts_with("vkDestroy") => Class::Destroy,
            n if n.starts_with("vkFree") => Class::Free,
            n if n.starts_with("vkBind") && n.contains("Memory") => Class::Bind,
            _ => Class::Drop,
        }
    }

    #[test]
    fn tables_match_the_names() {
        for (i, name) in COMMANDS.iter().enumerate() {
            assert_eq!(class_of(i as u32), by_match(name), "{name}");
            let moves = [
                "vkCmdPipelineBarrier",
                "vkCmdBeginRenderPass",
                "vkCmdWaitEvents",
                "vkCmdExecuteCommands",
            ]
            .iter()
            .any(|p| name.starts_with(p));
            assert_eq!(moves_layouts(i as u32), moves, "{name}");
            assert_eq!(wanted(i as u32), by_match(name) != Class::Drop, "{name}");
        }
        assert!(!wanted(u32::MAX) && !moves_layouts(u32::MAX));
        assert_eq!(class_of(vkstream::ids::vkCmdDraw), Class::Cmd);
        assert!(!wanted(vkstream::ids::vkWaitForFences));
    }
}
