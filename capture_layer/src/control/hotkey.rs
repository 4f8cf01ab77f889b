//! The trigger hotkey: key names, and reading the keyboard's state through an X11 connection of
//! the layer's own (QueryKeymap: no window, no grab, no event selection, so the app's input is
//! untouched). Polled from the control thread, edge-triggered: a key held down triggers once.
//!
//! Depends on: `x11rb` only. Used by `settings` (names) and the control thread.

use x11rb::connection::Connection;
use x11rb::protocol::xproto::{ConnectionExt as _, Keycode};
use x11rb::rust_connection::RustConnection;

/// A key and the modifiers that must be held with it, as X keysyms.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub keysym: u32,
    /// Each entry: any one of these keysyms (left or right modifier) must be down.
    pub modifiers: Vec<[u32; 2]>,
}

/// `F12`, `ctrl+F12`, `shift+alt+p`, ... (case-insensitive); `None` for an unknown name.
pub fn parse(name: &str) -> Option<Key> {
    let mut parts: Vec<&str> = name.split('+').map(str::trim).collect();
    let key = parts.pop()?;
    let mut modifiers = Vec::new();
    for m in parts {
        modifiers.push(match m.to_ascii_lowercase().as_str() {
            "ctrl" | "control" => [0xffe3, 0xffe4],
            "shift" => [0xffe1, 0xffe2],
            "alt" => [0xffe9, 0xffea],
            _ => return None,
        });
    }
    let lower = key.to_ascii_lowercase();
    let keysym = match lower.as_str() {
        "print" | "prtsc" => 0xff61,
        "pause" => 0xff13,
        "scroll_lock" => 0xff14,
        "insert" => 0xff63,
        "home" => 0xff50,
        "end" => 0xff57,
        f if f.starts_with('f') && f.len() > 1 => {
            let n: u32 = f[1..].parse().ok()?;
            if !(1..=24).contains(&n) {
                return None;
            }
            0xffbe + n - 1
        }
        c if c.len() == 1 && c.as_bytes()[0].is_ascii_alphanumeric() => c.as_bytes()[0] as u32,
        _ => return None,
    };
    Some(Key { keysym, modifiers })
}

/// The X server's keycodes for a key, resolved once per connection.
struct Codes {
    key: Vec<Keycode>,
    modifiers: Vec<Vec<Keycode>>,
}

/// An X11 connection that watches one key.
pub struct Watcher {
    conn: RustConnection,
    codes: Codes,
    down: bool,
}

impl Watcher {
    /// Connects to `$DISPLAY`; an error says why (the hotkey is then off).
    pub fn connect(key: &Key) -> Result<Watcher, String> {
        let (conn, _) =
            x11rb::connect(None).map_err(|e| format!("cannot open the X display: {e}"))?;
        let setup = conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let map = conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| e.to_string())?;
        let per = map.keysyms_per_keycode.max(1) as usize;
        let codes_of = |syms: &[u32]| -> Vec<Keycode> {
            map.keysyms
                .chunks(per)
                .enumerate()
                .filter(|(_, c)| c.iter().any(|s| syms.contains(s)))
                .map(|(i, _)| min + i as u8)
                .collect()
        };
        // Letters map to their lower-case keysym in the first column, upper case in the second.
        let upper = (key.keysym as u8 as char).to_ascii_uppercase() as u32;
        let syms = if key.keysym < 0x80 {
            vec![key.keysym, upper]
        } else {
            vec![key.keysym]
        };
        let codes = Codes {
            key: codes_of(&syms),
            modifiers: key.modifiers.iter().map(|m| codes_of(m)).collect(),
        };
        if codes.key.is_empty() {
            return Err(format!(
                "the keyboard has no key with keysym {:#x}",
                key.keysym
            ));
        }
        Ok(Watcher {
            conn,
            codes,
            down: false,
        })
    }

    /// True when the key (with its modifiers) went down since the last poll.
    pub fn pressed(&mut self) -> Result<bool, String> {
        let keys = self
            .conn
            .query_keymap()
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| e.to_string())?
            .keys;
        let is_down = |c: &Keycode| keys[*c as usize / 8] & (1 << (c % 8)) != 0;
        let down = self.codes.key.iter().any(is_down)
            && self.codes.modifiers.iter().all(|m| m.iter().any(is_down));
        let edge = down && !self.down;
        self.down = down;
        Ok(edge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names() {
        assert_eq!(parse("F12").unwrap().keysym, 0xffc9);
        assert_eq!(parse("f1").unwrap().keysym, 0xffbe);
        assert_eq!(parse("Print").unwrap().keysym, 0xff61);
        assert_eq!(parse("p").unwrap().keysym, b'p' as u32);
        let k = parse("ctrl+shift+F5").unwrap();
        assert_eq!(k.keysym, 0xffc2);
        assert_eq!(k.modifiers.len(), 2);
        assert!(parse("F25").is_none());
        assert!(parse("hyper+F1").is_none());
        assert!(parse("").is_none());
        assert!(parse("Escape").is_none());
    }
}
