//! Vulkan per-command parameter encoding (generated from vk.xml).
