//! Descriptor update templates: the update data is an app-defined byte layout holding handles,
//! translated entry by entry (`crate::templates`) with the entries recorded at creation.

use ash::vk;
use ash::vk::Handle as _;
use format::record;
use vkstream::{params, Call};

use super::{generic, loaded, other, Entry};
use crate::error::ReplayError;
use crate::session::Session;

/// Also `vkCreateDescriptorUpdateTemplateKHR`.
/// `E` names the entry point recorded; unused here, as [`generic`] replays the call under its own
/// name.
pub(crate) unsafe fn vkCreateDescriptorUpdateTemplate<
    E: Entry<vk::PFN_vkCreateDescriptorUpdateTemplate>,
>(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkCreateDescriptorUpdateTemplate,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    generic(s, call, rec)?;
    if let (Some(t), Some(ci)) = (p.p_descriptor_update_template, &p.p_create_info) {
        s.templates.insert(
            t,
            ci.p_descriptor_update_entries
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|e| crate::templates::Entry {
                    descriptor_type: e.descriptor_type,
                    count: e.descriptor_count,
                    offset: e.offset,
                    stride: e.stride,
                })
                .collect(),
        );
    }
    Ok(())
}

/// Also `vkDestroyDescriptorUpdateTemplateKHR`.
/// `E` names the entry point recorded; unused here, as [`generic`] replays the call under its own
/// name.
pub(crate) unsafe fn vkDestroyDescriptorUpdateTemplate<
    E: Entry<vk::PFN_vkDestroyDescriptorUpdateTemplate>,
>(
    s: &mut Session<'_>,
    call: &Call,
    p: &params::vkDestroyDescriptorUpdateTemplate,
    rec: &record::Call,
) -> Result<(), ReplayError> {
    s.templates.remove(&p.descriptor_update_template);
    generic(s, call, rec)
}

/// Also `vkUpdateDescriptorSetWithTemplateKHR`, through the core function where the replay device has it (`E` unused).
pub(crate) unsafe fn vkUpdateDescriptorSetWithTemplate<
    E: Entry<vk::PFN_vkUpdateDescriptorSetWithTemplate>,
>(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkUpdateDescriptorSetWithTemplate,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let data = template_data(s, p.descriptor_update_template, p.p_data.as_deref())?;
    let d = s.device(p.device)?;
    let f = loaded(
        d.table
            .vkUpdateDescriptorSetWithTemplate
            .or(d.table.vkUpdateDescriptorSetWithTemplateKHR),
        "vkUpdateDescriptorSetWithTemplate",
    )?;
    let set = s.lookup(vk::ObjectType::DESCRIPTOR_SET, p.descriptor_set)?;
    let t = s.lookup(
        vk::ObjectType::DESCRIPTOR_UPDATE_TEMPLATE,
        p.descriptor_update_template,
    )?;
    f(
        s.device(p.device)?.device.handle(),
        vk::DescriptorSet::from_raw(set),
        vk::DescriptorUpdateTemplate::from_raw(t),
        data.as_ptr().cast(),
    );
    Ok(())
}

pub(crate) unsafe fn vkCmdPushDescriptorSetWithTemplateKHR(
    s: &mut Session<'_>,
    _call: &Call,
    p: &params::vkCmdPushDescriptorSetWithTemplateKHR,
    _rec: &record::Call,
) -> Result<(), ReplayError> {
    let data = template_data(s, p.descriptor_update_template, p.p_data.as_deref())?;
    let cb = s.lookup(vk::ObjectType::COMMAND_BUFFER, p.command_buffer)?;
    let f = loaded(
        s.device_for(cb)?
            .table
            .vkCmdPushDescriptorSetWithTemplateKHR,
        "vkCmdPushDescriptorSetWithTemplateKHR",
    )?;
    let t = s.lookup(
        vk::ObjectType::DESCRIPTOR_UPDATE_TEMPLATE,
        p.descriptor_update_template,
    )?;
    let layout = s.lookup(vk::ObjectType::PIPELINE_LAYOUT, p.layout)?;
    f(
        vk::CommandBuffer::from_raw(cb),
        vk::DescriptorUpdateTemplate::from_raw(t),
        vk::PipelineLayout::from_raw(layout),
        p.set,
        data.as_ptr().cast(),
    );
    Ok(())
}

/// A template update's data with every handle translated to the replay's (see `crate::templates`).
fn template_data(
    s: &Session<'_>,
    template: u64,
    data: Option<&[u8]>,
) -> Result<Vec<u64>, ReplayError> {
    let entries = s.templates.get(&template).ok_or_else(|| {
        other(format!(
            "descriptor update template 0x{template:x} was never created in the trace"
        ))
    })?;
    let mut bytes = data.unwrap_or(&[]).to_vec();
    crate::templates::translate(entries, &mut bytes, |ty, h| s.lookup(ty, h).ok())
        .map_err(other)?;
    // Handed to the driver as an 8-byte aligned buffer.
    let mut out = vec![0u64; bytes.len().div_ceil(8)];
    // SAFETY: out holds at least bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast(), bytes.len()) };
    Ok(out)
}
