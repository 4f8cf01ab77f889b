//! What the layer hides from the app, and the hand encoding of the template-update commands.

use vkstream::Encoder;

/// Device extensions the layer hides: their commands cannot be recorded (see `vkstream::UNSUPPORTED`).
pub fn hidden_extension(name: &str) -> bool {
    vkstream::UNSUPPORTED_EXTENSIONS.contains(&name)
}

/// Parameters of vkUpdateDescriptorSetWithTemplate[KHR] / vkCmdPushDescriptorSetWithTemplateKHR, which
/// have no generated encoder (pData's layout comes from the template): the leading handle/scalar
/// handles as u64 each, the `uint32_t set` of vkCmdPushDescriptorSetWithTemplateKHR as u32 (as the
/// generated decoder reads it), then pData in the generic pointer form (flag byte 1, byte count, bytes)
/// holding exactly the bytes the template's entries read, so replay needs no template to decode them.
pub fn encode_template_call(e: &mut Encoder, handles: &[u64], set: Option<u32>, data: &[u8]) {
    for &v in handles {
        e.u64(v);
    }
    if let Some(set) = set {
        e.u32(set);
    }
    e.u8(1);
    e.count(data.len());
    e.raw(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_call_layout() {
        let mut e = Encoder::new();
        encode_template_call(&mut e, &[1, 2, 3], None, &[9, 8]);
        let b = e.into_bytes();
        assert_eq!(b.len(), 3 * 8 + 1 + 8 + 2);
        assert_eq!(&b[..8], &1u64.to_le_bytes());
        assert_eq!(b[24], 1);
        assert_eq!(&b[25..33], &2u64.to_le_bytes());
        assert_eq!(&b[33..], &[9, 8]);
    }

    /// The push variant decodes with the generated decoder: `set` is a u32 there.
    #[test]
    fn push_template_call_decodes() {
        let mut e = Encoder::new();
        encode_template_call(&mut e, &[11, 12, 13], Some(3), &[7; 40]);
        let b = e.into_bytes();
        let mut d = vkstream::Decoder::new(&b);
        let p = vkstream::params::vkCmdPushDescriptorSetWithTemplateKHR::decode(&mut d).unwrap();
        assert_eq!(d.remaining(), 0);
        assert_eq!(
            (
                p.command_buffer,
                p.descriptor_update_template,
                p.layout,
                p.set
            ),
            (11, 12, 13, 3)
        );
        assert_eq!(p.p_data.as_deref(), Some(&[7u8; 40][..]));
        let mut e = Encoder::new();
        encode_template_call(&mut e, &[1, 2, 3], None, &[5; 3]);
        let b = e.into_bytes();
        let mut d = vkstream::Decoder::new(&b);
        let p = vkstream::params::vkUpdateDescriptorSetWithTemplate::decode(&mut d).unwrap();
        assert_eq!(d.remaining(), 0);
        assert_eq!(p.p_data.as_deref(), Some(&[5u8; 3][..]));
    }

    #[test]
    fn hides_only_unsupported() {
        assert!(!hidden_extension("VK_KHR_swapchain"));
        if let Some(first) = vkstream::UNSUPPORTED_EXTENSIONS.first() {
            assert!(hidden_extension(first));
        }
    }
}
