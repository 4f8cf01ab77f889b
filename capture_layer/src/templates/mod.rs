//! Descriptor update templates: their entries are kept, so updates and pushes with a template
//! record exactly the bytes the template reads (`compat::encode_template_call`).
//!
//! Depends on: `runtime`, `state`, `compat`, `hooks`.

#![allow(non_snake_case)]
// A hook missing from codegen's `config::LAYER_HOOKS` is never handed out: an error, not a warning.
#![deny(dead_code)]
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::hooks::{next, raw, rec, slice, Entry, NOT_PRESENT};
use crate::runtime::{self, guard, DeviceData};
use crate::state::TemplateEntry;
use ash::vk;
use std::ffi::c_void;

// ==== descriptor update templates ===================================================================

/// Also `vkCreateDescriptorUpdateTemplateKHR` (`E` says which name the app called).
pub unsafe fn vkCreateDescriptorUpdateTemplate<
    E: Entry<vk::PFN_vkCreateDescriptorUpdateTemplate>,
>(
    device: vk::Device,
    p_info: *const vk::DescriptorUpdateTemplateCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_template: *mut vk::DescriptorUpdateTemplate,
) -> vk::Result {
    let Some(d) = runtime::device_data(raw(device)) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let f = next!(E::next(&d.table), NOT_PRESENT);
    let r = f(device, p_info, p_allocator, p_template);
    guard("vkCreateDescriptorUpdateTemplate", || {
        if r == vk::Result::SUCCESS && !p_info.is_null() {
            let info = &*p_info;
            let entries = slice(
                info.p_descriptor_update_entries,
                info.descriptor_update_entry_count,
            )
            .iter()
            .map(|e| TemplateEntry {
                binding: e.dst_binding,
                array_element: e.dst_array_element,
                count: e.descriptor_count,
                descriptor_type: e.descriptor_type.as_raw(),
                offset: e.offset,
                stride: e.stride,
            })
            .collect();
            d.lock().templates.insert(raw(*p_template), entries);
        }
        rec!(E::ID, r.as_raw(), |e| {
            vkstream::encode::vkCreateDescriptorUpdateTemplate(
                e,
                device,
                p_info,
                p_allocator,
                p_template,
            )
        });
    });
    r
}

/// The bytes a template update reads from `p_data`, per the template's recorded entries.
unsafe fn template_bytes(
    d: &DeviceData,
    template: vk::DescriptorUpdateTemplate,
    p_data: *const c_void,
) -> Option<Vec<u8>> {
    let size = crate::state::template_data_size(d.lock().templates.get(&raw(template))?);
    if p_data.is_null() {
        return Some(Vec::new());
    }
    Some(std::slice::from_raw_parts(p_data as *const u8, size).to_vec())
}

/// Also `vkUpdateDescriptorSetWithTemplateKHR` (`E` says which name the app called).
pub unsafe fn vkUpdateDescriptorSetWithTemplate<
    E: Entry<vk::PFN_vkUpdateDescriptorSetWithTemplate>,
>(
    device: vk::Device,
    set: vk::DescriptorSet,
    template: vk::DescriptorUpdateTemplate,
    p_data: *const c_void,
) {
    let Some(d) = runtime::device_data(raw(device)) else {
        return;
    };
    let f = next!(E::next(&d.table));
    f(device, set, template, p_data);
    guard("vkUpdateDescriptorSetWithTemplate", || {
        let Some(bytes) = template_bytes(d, template, p_data) else {
            runtime::fail(
                "vkUpdateDescriptorSetWithTemplate with a template the layer did not see created",
            );
            return;
        };
        let handles = [raw(device), raw(set), raw(template)];
        rec!(E::ID, 0, |e| {
            crate::compat::encode_template_call(e, &handles, None, &bytes)
        });
    });
}

pub unsafe extern "system" fn vkCmdPushDescriptorSetWithTemplateKHR(
    cb: vk::CommandBuffer,
    template: vk::DescriptorUpdateTemplate,
    layout: vk::PipelineLayout,
    set: u32,
    p_data: *const c_void,
) {
    let Some(d) = runtime::device_data(raw(cb)) else {
        return;
    };
    let f = next!(d.table.vkCmdPushDescriptorSetWithTemplateKHR);
    f(cb, template, layout, set, p_data);
    guard("vkCmdPushDescriptorSetWithTemplateKHR", || {
        let Some(bytes) = template_bytes(d, template, p_data) else {
            runtime::fail("vkCmdPushDescriptorSetWithTemplateKHR with a template the layer did not see created");
            return;
        };
        let handles = [raw(cb), raw(template), raw(layout)];
        rec!(vkCmdPushDescriptorSetWithTemplateKHR, 0, |e| {
            crate::compat::encode_template_call(e, &handles, Some(set), &bytes)
        });
    });
}
