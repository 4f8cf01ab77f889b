//! The seam between the replay engine and the generated code: device creation from decoded
//! parameters, and the generated dispatch for every command not written by hand.

use ash::vk;
use vkstream::{types, PNext};

use crate::error::ReplayError;
use crate::generated::dispatch::{m_VkDeviceCreateInfo, Arena, Remap, ReplayContext};
use crate::session::Session;

/// Creates the replay device for a captured `vkCreateDevice`: the whole create info, every
/// struct of its chains included, is re-created by the generated materialisation
/// (`m_VkDeviceCreateInfo`); the session then translates queue families and extensions and
/// leaves out what the replay GPU lacks and the trace never uses.
pub(crate) unsafe fn create_device(
    s: &mut Session<'_>,
    captured: u64,
    physical: u64,
    ci: &types::VkDeviceCreateInfo,
) -> Result<(), ReplayError> {
    let mut ci = ci.clone();
    // A group of one physical device is the device alone (vulkaninfo makes one); it names the
    // captured physical device, not the replay's, so it is left out.
    ci.p_next.retain(
        |n| !matches!(n, PNext::VkDeviceGroupDeviceCreateInfo(g) if g.physical_device_count <= 1),
    );
    // Structs newer than the registry were captured as their sType only: said, then left out.
    let unknown: Vec<String> = ci
        .p_next
        .iter()
        .chain(
            ci.p_queue_create_infos
                .iter()
                .flatten()
                .flat_map(|q| &q.p_next),
        )
        .filter_map(|n| match n {
            PNext::Unknown(t) => Some(t.to_string()),
            _ => None,
        })
        .collect();
    if !unknown.is_empty() {
        s.perf.warnings.push(format!(
            "vkCreateDevice chains structs this build's registry does not know (sType {}): left out",
            unknown.join(", ")
        ));
    }
    // Its own arena: the chain must outlive the generated dispatch's per-call one.
    let mut arena = Arena::new();
    let info = m_VkDeviceCreateInfo(&ci, &mut arena, s)?;
    let extensions = ci.pp_enabled_extension_names.clone().unwrap_or_default();
    s.create_device(captured, physical, &info, &extensions)
}

/// Replays a command through the generated dispatch.
pub(crate) unsafe fn dispatch(
    s: &mut Session<'_>,
    call: &vkstream::Call,
) -> Result<vk::Result, ReplayError> {
    crate::generated::dispatch::replay(call, s)
}

impl Remap for Session<'_> {
    fn handle(&mut self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
        Session::handle(self, ty, captured)
    }
    fn bind(&mut self, ty: vk::ObjectType, captured: u64, replayed: u64) {
        Session::bind(self, ty, captured, replayed)
    }
    fn queue_family(&mut self, captured: u32) -> u32 {
        // Barriers carry no device: the mapping of the device of the call they are in (each
        // device maps the families it asked for), else of the first device.
        let device = match self.devices.contains_key(&self.current_device) {
            true => self.current_device,
            false => match self.devices.values().next() {
                Some(d) => d.captured,
                None => return captured,
            },
        };
        self.map_family(device, captured)
    }
}

impl ReplayContext for Session<'_> {
    fn remap(&mut self) -> &mut dyn Remap {
        self
    }

    fn instance_table(&mut self, captured: u64) -> Result<&vkstream::InstanceTable, ReplayError> {
        if captured == 0 {
            return Ok(&self.gtable);
        }
        // The table of the instance the captured instance or physical device belongs to.
        Ok(&self.instance_of(captured)?.table)
    }

    fn device_table(&mut self, captured: u64) -> Result<&vkstream::DeviceTable, ReplayError> {
        // Most calls are recorded commands, whose first argument is a command buffer: its owner
        // first, so that they take two lookups rather than three.
        let device = match self.owner.get(&captured) {
            Some(device) => *device,
            None => captured,
        };
        match self.devices.get(&device) {
            Some(d) => {
                self.current_device = device;
                Ok(&d.table)
            }
            None if device != captured => Err(ReplayError::UnknownHandle {
                ty: vk::ObjectType::DEVICE,
                handle: device,
            }),
            None => Err(ReplayError::Other(format!(
                "handle 0x{captured:x} belongs to no device the replay created"
            ))),
        }
    }
}
