//! Descriptor update template data (`vkUpdateDescriptorSetWithTemplate`,
//! `vkCmdPushDescriptorSetWithTemplateKHR`): an app-defined byte layout, described by the template's
//! entries, holding descriptor infos with handles. The trace keeps the bytes the app passed; the
//! replay rewrites each handle in place to the replay's.

use ash::vk;

/// One template entry as the replay needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `VkDescriptorType` raw value.
    pub descriptor_type: i32,
    pub count: u32,
    pub offset: u64,
    pub stride: u64,
}

/// Visits every non-null handle in `data` as `f(entry, descriptor, info, object, handle)`: the
/// entry's index, the descriptor's index in it, the byte offset of its info in `data`, and the
/// handle's object type. Descriptors the data is too short for are left out ([`translate`] says
/// so); the first error of `f` ends the walk. Allocates nothing.
pub fn each_handle(
    entries: &[Entry],
    data: &[u8],
    mut f: impl FnMut(usize, u64, usize, vk::ObjectType, u64) -> Result<(), String>,
) -> Result<(), String> {
    for (k, e) in entries.iter().enumerate() {
        let fields =
            vkstream::descriptor::handle_fields(vk::DescriptorType::from_raw(e.descriptor_type));
        if fields.is_empty() {
            continue;
        }
        for i in 0..u64::from(e.count) {
            let Some(base) = i
                .checked_mul(e.stride)
                .and_then(|o| o.checked_add(e.offset))
                .and_then(|o| usize::try_from(o).ok())
            else {
                break;
            };
            for &(at, object) in fields {
                let Some(h) = word(data, base.saturating_add(at)) else {
                    continue;
                };
                if h != 0 {
                    f(k, i, base, object, h)?;
                }
            }
        }
    }
    Ok(())
}

/// The little-endian u64 at byte `at` of `data`, if it holds one there.
pub fn word(data: &[u8], at: usize) -> Option<u64> {
    let b = data.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Rewrites every handle in `data` through `lookup` (captured -> replay; `None` for an unknown
/// handle). A handle of a combined image sampler's sampler that is unknown becomes null (it is
/// ignored with immutable samplers); any other unknown handle is an error.
pub fn translate(
    entries: &[Entry],
    data: &mut [u8],
    lookup: impl Fn(vk::ObjectType, u64) -> Option<u64>,
) -> Result<(), String> {
    for e in entries {
        let ty = vk::DescriptorType::from_raw(e.descriptor_type);
        let fields = vkstream::descriptor::handle_fields(ty);
        if fields.is_empty() {
            continue;
        }
        for i in 0..e.count as u64 {
            let base = e.offset + i * e.stride;
            for &(at, object) in fields {
                let start = usize::try_from(base).map_err(|_| "template offset too large")? + at;
                let Some(slot) = data.get_mut(start..start + 8) else {
                    return Err(format!(
                        "template data of {} bytes is too short for descriptor {i} of an entry at offset {}",
                        data.len(),
                        e.offset
                    ));
                };
                let captured = u64::from_le_bytes(slot.try_into().expect("8 bytes"));
                if captured == 0 {
                    continue;
                }
                let replayed = match lookup(object, captured) {
                    Some(h) => h,
                    None if ty == vk::DescriptorType::COMBINED_IMAGE_SAMPLER
                        && object == vk::ObjectType::SAMPLER =>
                    {
                        0
                    }
                    None => {
                        return Err(format!(
                            "template data names {object:?} 0x{captured:x}, which the trace never created"
                        ))
                    }
                };
                slot.copy_from_slice(&replayed.to_le_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_rewritten_per_entry_and_type() {
        // Entry 0: two combined image samplers (24-byte infos, stride 32) at offset 0.
        // Entry 1: one uniform buffer info at offset 64. Entry 2: 8 inline bytes at offset 88.
        let entries = [
            Entry {
                descriptor_type: vk::DescriptorType::COMBINED_IMAGE_SAMPLER.as_raw(),
                count: 2,
                offset: 0,
                stride: 32,
            },
            Entry {
                descriptor_type: vk::DescriptorType::UNIFORM_BUFFER.as_raw(),
                count: 1,
                offset: 64,
                stride: 24,
            },
            Entry {
                descriptor_type: vk::DescriptorType::INLINE_UNIFORM_BLOCK.as_raw(),
                count: 8,
                offset: 88,
                stride: 0,
            },
        ];
        let mut data = vec![0u8; 96];
        let put = |d: &mut [u8], at: usize, v: u64| d[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut data, 0, 0x10); // sampler
        put(&mut data, 8, 0x20); // view
        put(&mut data, 32, 0x99); // unknown sampler: ignored (immutable) -> null
        put(&mut data, 40, 0x21);
        put(&mut data, 64, 0x30); // buffer
        put(&mut data, 72, 5); // offset stays
        put(&mut data, 88, 0x20); // inline bytes that look like a handle stay
        let lookup = |_: vk::ObjectType, h: u64| (h != 0x99).then_some(h + 0x1000);
        translate(&entries, &mut data, lookup).unwrap();
        let get = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        assert_eq!(
            [get(0), get(8), get(32), get(40), get(64), get(72), get(88)],
            [0x1010, 0x1020, 0, 0x1021, 0x1030, 5, 0x20]
        );
        let mut short = vec![0u8; 40];
        short[8] = 1;
        assert!(translate(&entries, &mut short, lookup).is_err());
        let mut bad = vec![0u8; 96];
        put(&mut bad, 64, 0x99);
        assert!(translate(&entries, &mut bad, lookup)
            .unwrap_err()
            .contains("never created"));
    }
}
