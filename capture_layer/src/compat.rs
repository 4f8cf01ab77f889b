//! What the layer hides from the app, and the hand encoding of the template-update commands.

use vkstream::Encoder;

/// Device extensions the layer hides: their commands cannot be recorded (see `vkstream::UNSUPPORTED`).
pub fn hidden_extension(name: &str) -> bool {
    vkstream::UNSUPPORTED_EXTENSIONS.contains(&name)
}

/// Parameters of vkUpdateDescriptorSetWithTemplate[KHR] / vkCmdPushDescriptorSetWithTemplateKHR, which
/// have no generated encoder (pData's layout comes from the template): the leading handle/scalar
/// parameters as u64 each, then pData in the generic pointer form (flag byte 1, u64 byte count, bytes)
/// holding exactly the bytes the template's entries read, so replay needs no template to decode them.
pub fn encode_template_call(e: &mut Encoder, leading: &[u64], data: &[u8]) {
    for &v in leading {
        e.u64(v);
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
        encode_template_call(&mut e, &[1, 2, 3], &[9, 8]);
        let b = e.into_bytes();
        assert_eq!(b.len(), 3 * 8 + 1 + 8 + 2);
        assert_eq!(&b[..8], &1u64.to_le_bytes());
        assert_eq!(b[24], 1);
        assert_eq!(&b[25..33], &2u64.to_le_bytes());
        assert_eq!(&b[33..], &[9, 8]);
    }

    #[test]
    fn hides_only_unsupported() {
        assert!(!hidden_extension("VK_KHR_swapchain"));
        if let Some(first) = vkstream::UNSUPPORTED_EXTENSIONS.first() {
            assert!(hidden_extension(first));
        }
    }
}
