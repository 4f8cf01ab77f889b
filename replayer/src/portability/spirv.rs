//! The part of a SPIR-V module's preamble that says what the module needs of the device: its
//! `OpCapability` and `OpExtension` instructions (SPIR-V spec, "Logical Layout of a Module": they
//! come first, before `OpMemoryModel`).

const MAGIC: u32 = 0x0723_0203;
const OP_EXTENSION: u32 = 10;
const OP_MEMORY_MODEL: u32 = 14;
const OP_CAPABILITY: u32 = 17;
/// Words in the module header (magic, version, generator, bound, schema).
const HEADER_WORDS: usize = 5;

/// Capabilities (numbers) and extensions (names) a module declares, in module order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Declared {
    pub capabilities: Vec<u32>,
    pub extensions: Vec<String>,
}

/// Reads `code`'s declarations. A module with the wrong magic, or one that ends early, gives what
/// was read so far (the driver, not the scan, judges bad modules); byte-swapped modules are read
/// swapped.
pub fn declared(code: &[u32]) -> Declared {
    let mut out = Declared::default();
    let swap = match code.first() {
        Some(&MAGIC) => false,
        Some(m) if m.swap_bytes() == MAGIC => true,
        _ => return out,
    };
    let word = |i: usize| code.get(i).map(|w| if swap { w.swap_bytes() } else { *w });
    let mut at = HEADER_WORDS;
    while let Some(first) = word(at) {
        let count = (first >> 16) as usize;
        let op = first & 0xffff;
        if count == 0 || op == OP_MEMORY_MODEL {
            break;
        }
        match op {
            OP_CAPABILITY => {
                if let Some(c) = word(at + 1) {
                    out.capabilities.push(c);
                }
            }
            OP_EXTENSION => {
                let words: Vec<u32> = (at + 1..at + count).filter_map(word).collect();
                out.extensions.push(literal_string(&words));
            }
            _ => {}
        }
        at += count;
    }
    out
}

/// A SPIR-V literal string: UTF-8 bytes, little-endian in words, NUL-terminated.
fn literal_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take_while(|b| *b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Words of a literal string operand.
    fn string_words(s: &str) -> Vec<u32> {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        while !b.len().is_multiple_of(4) {
            b.push(0);
        }
        b.chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// A module preamble declaring `caps` and `exts`, then OpMemoryModel and one more instruction
    /// that must not be read.
    pub(crate) fn module(caps: &[u32], exts: &[&str]) -> Vec<u32> {
        let mut m = vec![MAGIC, 0x0001_0000, 0, 16, 0];
        for c in caps {
            m.extend([(2 << 16) | OP_CAPABILITY, *c]);
        }
        for e in exts {
            let s = string_words(e);
            m.push(((1 + s.len() as u32) << 16) | OP_EXTENSION);
            m.extend(s);
        }
        m.extend([(3 << 16) | OP_MEMORY_MODEL, 0, 1]);
        m.extend([(2 << 16) | OP_CAPABILITY, 999]);
        m
    }

    #[test]
    fn reads_capabilities_and_extensions_up_to_the_memory_model() {
        let m = module(
            &[1, 2, 5013],
            &["SPV_EXT_shader_stencil_export", "SPV_KHR_x"],
        );
        let d = declared(&m);
        assert_eq!(d.capabilities, vec![1, 2, 5013]);
        assert_eq!(
            d.extensions,
            vec!["SPV_EXT_shader_stencil_export", "SPV_KHR_x"]
        );
    }

    #[test]
    fn byte_swapped_modules_are_read() {
        let m: Vec<u32> = module(&[17], &["SPV_KHR_abcd"])
            .iter()
            .map(|w| w.swap_bytes())
            .collect();
        let d = declared(&m);
        assert_eq!(d.capabilities, vec![17]);
        // A swapped module's strings are swapped per word too: read back as written.
        assert_eq!(d.extensions, vec!["SPV_KHR_abcd"]);
    }

    #[test]
    fn bad_modules_give_what_was_read() {
        assert_eq!(declared(&[]), Declared::default());
        assert_eq!(declared(&[1, 2, 3]), Declared::default());
        // A zero word count stops the walk instead of looping.
        let mut m = module(&[1], &[]);
        m.truncate(7);
        m.push(0);
        assert_eq!(declared(&m).capabilities, vec![1]);
        // Ends in the middle of an instruction.
        let m = module(&[1, 2], &[]);
        assert_eq!(declared(&m[..8]).capabilities, vec![1]);
    }
}
