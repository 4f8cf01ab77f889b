//! Emits the replayer's generic dispatch: owned parameters -> raw ash structures in an arena
//! (every handle translated through `Remap`), a call through the dispatch table, then the
//! created handles bound captured -> replayed.

use crate::analyze::{ash_name, Analysis, Cmd, Elem, Field, Kind, Len, Level, PElem};
use crate::config;
use crate::emit_stream::{base_ty, sig_ty, HEADER};
use crate::model::{snake, Registry, TypeCat};
use std::fmt::Write;

pub fn mod_rs() -> String {
    format!(
        "{HEADER}//! Generated from vk.xml by `codegen`: the generic replay dispatch (see `dispatch`) and the\n//! per-call entry point that routes codegen's `REPLAY_OVERRIDES` (see `overrides`), and the\n//! stateless checks of a call before the driver sees it (see `checks`).\npub mod checks;\npub mod dispatch;\npub mod overrides;\n"
    )
}

const PRELUDE: &str = r#"//! Generic replay of a decoded call.
//!
//! [`replay`] materialises a [`vkstream::Call`]'s owned parameters into raw ash structures held by
//! an [`Arena`], translating every captured handle through [`Remap::handle`] (VK_NULL_HANDLE stays
//! null without asking), calls the command through the table that
//! [`ReplayContext::instance_table`]/[`ReplayContext::device_table`] give for the captured first
//! argument, and binds each handle the call created ([`Remap::bind`], only when it succeeded).
//!
//! What the implementor of [`ReplayContext`] provides (the replayer engine):
//! - `remap()`: captured -> replay handle translation, and `bind` for created handles;
//! - `instance_table(captured)`: the table for a captured VkInstance/VkPhysicalDevice (0 for
//!   global commands such as vkCreateInstance);
//! - `device_table(captured)`: the table for a captured VkDevice/VkQueue/VkCommandBuffer.
//!
//! Rules applied here: output parameters (non-const pointers) are passed with the captured
//! contents as initial values (so counts and pNext chains the driver fills are as the app gave
//! them) and handles inside them that are not known yet become VK_NULL_HANDLE; application
//! callbacks (`PFN_*` members), `pAllocator` and opaque host pointers (`pUserData`, `pHostPointer`, platform
//! display pointers) are passed as NULL; pNext elements that were not captured (unknown sType)
//! are left out of the chain. `m_VkXxx` materialise one owned struct (with its pNext chain) for
//! hand-written replay code; [`m_chain`] builds a chain alone. `overrides::replay_call` sends the commands
//! codegen's `REPLAY_OVERRIDES` lists (memory, submission, queries, swapchains, ...) to the
//! replayer's hand-written functions and every other one through [`replay`].
#![allow(non_snake_case, unused_variables, unused_mut, unused_parens, unused_unsafe, deprecated, clippy::all)]
use crate::error::ReplayError;
use ash::vk;
use ash::vk::Handle;
use std::ffi::{c_char, c_int, c_void};
use vkstream::types::*;

/// Captured -> replay handle translation.
pub trait Remap {
    /// The replay handle for a captured non-null handle of type `ty`; an unknown handle is an
    /// error (`ReplayError::UnknownHandle`).
    fn handle(&mut self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError>;
    /// Records that the captured handle `captured` was re-created as `replayed`.
    fn bind(&mut self, ty: vk::ObjectType, captured: u64, replayed: u64);
    /// The replay queue family for a captured one in a barrier (ownership transfers move to the
    /// families the replay mapped the capture's to; special values pass through).
    fn queue_family(&mut self, captured: u32) -> u32 {
        captured
    }
}

/// What [`replay`] needs from the replay engine.
pub trait ReplayContext {
    fn remap(&mut self) -> &mut dyn Remap;
    fn instance_table(&mut self, captured: u64) -> Result<&vkstream::InstanceTable, ReplayError>;
    fn device_table(&mut self, captured: u64) -> Result<&vkstream::DeviceTable, ReplayError>;
}

/// Bump allocator for the materialised structures: memory comes from chunks that are kept and
/// reused from one call to the next ([`Arena::reset`]), so materialising a call allocates nothing
/// once the chunks are warm. Only plain data (`T: Copy`, alignment at most 8) is placed here; a
/// pointer it returns stays valid until the next `reset` (chunks never move).
pub struct Arena {
    chunks: Vec<Box<[std::mem::MaybeUninit<u64>]>>,
    /// Chunk being filled, and words used in it.
    cur: usize,
    used: usize,
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

/// Words in the first chunk (later ones double, up to [`Arena::KEEP_WORDS`]).
const CHUNK_WORDS: usize = 512;

impl Arena {
    /// Chunks beyond this many words in all are freed on reset (one huge call does not pin memory).
    const KEEP_WORDS: usize = 1 << 17;

    pub const fn new() -> Self {
        Self { chunks: Vec::new(), cur: 0, used: 0 }
    }
    /// Room for `n` values of `T`, uninitialised (a dangling, non-null pointer when empty).
    #[inline]
    pub fn raw<T: Copy>(&mut self, n: usize) -> *mut T {
        const { assert!(std::mem::align_of::<T>() <= 8) };
        let words = (n * std::mem::size_of::<T>()).div_ceil(8);
        if words == 0 {
            return std::ptr::NonNull::<T>::dangling().as_ptr();
        }
        if let Some(c) = self.chunks.get_mut(self.cur) {
            if self.used + words <= c.len() {
                // SAFETY: within the chunk; the words are reserved by advancing `used`.
                let p = unsafe { c.as_mut_ptr().add(self.used) } as *mut T;
                self.used += words;
                return p;
            }
        }
        self.raw_slow(words) as *mut T
    }
    #[cold]
    fn raw_slow(&mut self, words: usize) -> *mut u64 {
        loop {
            if self.cur + 1 < self.chunks.len() {
                self.cur += 1;
            } else {
                let grow = CHUNK_WORDS << self.chunks.len().min(8);
                let len = words.max(grow);
                self.chunks.push(vec![std::mem::MaybeUninit::uninit(); len].into_boxed_slice());
                self.cur = self.chunks.len() - 1;
            }
            self.used = 0;
            let c = &mut self.chunks[self.cur];
            if words <= c.len() {
                self.used = words;
                return c.as_mut_ptr() as *mut u64;
            }
        }
    }
    /// Copies `items` into the arena (a dangling, non-null pointer for an empty slice).
    #[inline]
    pub fn slice<T: Copy>(&mut self, items: &[T]) -> *mut T {
        let p = self.raw::<T>(items.len());
        // SAFETY: `p` has room for `items.len()` values and does not overlap `items`.
        unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), p, items.len()) };
        p
    }
    #[inline]
    pub fn alloc<T: Copy>(&mut self, v: T) -> *mut T {
        let p = self.raw::<T>(1);
        // SAFETY: room for one value.
        unsafe { p.write(v) };
        p
    }
    /// A NUL-terminated copy of `s` (cut at an interior NUL).
    pub fn cstr(&mut self, s: &str) -> *const c_char {
        let b = s.as_bytes();
        let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        let p = self.raw::<c_char>(n + 1);
        // SAFETY: room for n + 1 bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr() as *const c_char, p, n);
            p.add(n).write(0);
        }
        p
    }
    /// Makes every chunk free again; pointers handed out before are no longer valid.
    pub fn reset(&mut self) {
        self.cur = 0;
        self.used = 0;
        let mut total = 0;
        let keep = self
            .chunks
            .iter()
            .take_while(|c| {
                total += c.len();
                total <= Self::KEEP_WORDS
            })
            .count();
        self.chunks.truncate(keep);
    }
}

thread_local! {
    /// The arena [`replay`] materialises into, reused from call to call.
    static ARENA: std::cell::RefCell<Arena> = const { std::cell::RefCell::new(Arena::new()) };
}

/// Output parameters: handles not known yet (being created) become VK_NULL_HANDLE.
struct Out<'a>(&'a mut dyn Remap);

impl Remap for Out<'_> {
    fn handle(&mut self, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
        Ok(self.0.handle(ty, captured).unwrap_or(0))
    }
    fn bind(&mut self, ty: vk::ObjectType, captured: u64, replayed: u64) {
        self.0.bind(ty, captured, replayed)
    }
}

fn h(r: &mut dyn Remap, ty: vk::ObjectType, captured: u64) -> Result<u64, ReplayError> {
    if captured == 0 {
        Ok(0)
    } else {
        r.handle(ty, captured)
    }
}

/// A union from its captured raw bytes.
unsafe fn union_from<T: Copy>(b: &[u8]) -> T {
    let mut t: T = std::mem::zeroed();
    std::ptr::copy_nonoverlapping(b.as_ptr(), &mut t as *mut T as *mut u8, b.len().min(std::mem::size_of::<T>()));
    t
}

fn copy_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, c) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *c as c_char;
    }
    if let Some(last) = dst.get_mut(n) {
        *last = 0;
    }
}

fn missing(name: &str) -> ReplayError {
    ReplayError::Unavailable(name.to_string())
}
"#;

pub(crate) fn objtype(cat: &TypeCat) -> String {
    match cat {
        TypeCat::Handle { objtype, .. } => format!(
            "vk::ObjectType::{}",
            objtype.trim_start_matches("VK_OBJECT_TYPE_")
        ),
        _ => unreachable!(),
    }
}

/// Owned scalar value `x` (by value) -> ash value.
fn conv_scalar(reg: &Registry, cat: &TypeCat, ty: &str, x: &str) -> String {
    match cat {
        TypeCat::Prim(_) => x.to_string(),
        TypeCat::Usize => format!("({x} as usize)"),
        TypeCat::Enum | TypeCat::Flags32 | TypeCat::Flags64 => {
            format!("{}::from_raw({x})", ash_name(reg, ty))
        }
        TypeCat::Handle { .. } => format!(
            "{}::from_raw(h(r, {}, {x})?)",
            ash_name(reg, ty),
            objtype(cat)
        ),
        TypeCat::FuncPtr => "None".into(),
        TypeCat::OpaquePtr => "(std::ptr::null_mut::<c_void>() as _)".into(),
        TypeCat::PlatformInt => format!("({x} as _)"),
        other => panic!("not a scalar {other:?}"),
    }
}

/// Element behind reference `y` -> ash value.
fn conv_elem_ref(reg: &Registry, el: &Elem, y: &str) -> String {
    match el {
        Elem::Scalar(cat, ty) => conv_scalar(reg, cat, ty, &format!("(*{y})")),
        Elem::Struct(s) => format!("m_{s}({y}, a, r)?"),
        Elem::Union(u) => format!("union_from::<{}>({y})", ash_name(reg, u)),
    }
}

fn elem_ash_ty(reg: &Registry, an: &Analysis, el: &Elem) -> String {
    match el {
        Elem::Scalar(_, ty) | Elem::Struct(ty) | Elem::Union(ty) => {
            let t = base_ty(reg, an, ty);
            t.replace("<'_>", "<'static>")
        }
    }
}

/// Materialised value of a pointer kind from owned `x: &Owned` (inside `Some(x)`); `base`
/// prefixes siblings (`v.` in structs, `p.` in commands).
fn mat_ptr(reg: &Registry, an: &Analysis, len: &Len, elem: &PElem, base: &str) -> String {
    let vec_of = |conv: String, ty: String| {
        // Written in place: the arena's pointer is raw, so `conv` may allocate in the arena too.
        format!("{{ let t = a.raw::<{ty}>(x.len()); for (k, y) in x.iter().enumerate() {{ let v = {conv}; t.add(k).write(v); }} t as _ }}")
    };
    match (len, elem) {
        (Len::One, PElem::Elem(el)) => format!("{{ let t = {}; a.alloc(t) as _ }}", conv_elem_ref(reg, el, "x")),
        (Len::One, PElem::Str) => "a.cstr(x) as _".into(),
        (Len::One, PElem::OpaqueOut) => "a.alloc(std::ptr::null_mut::<c_void>()) as _".into(),
        (_, PElem::FixedArr(el, n)) => {
            format!(
                "{{ let mut t: [{}; {n}] = std::mem::zeroed(); for (d, y) in t.iter_mut().zip(x.iter()) {{ *d = {}; }} a.alloc(t) as _ }}",
                elem_ash_ty(reg, an, el),
                conv_elem_ref(reg, el, "y")
            )
        }
        (Len::Count(_), PElem::Elem(el)) => vec_of(conv_elem_ref(reg, el, "y"), elem_ash_ty(reg, an, el)),
        // Placed as the capture had them, `stride` bytes apart (the call passes that stride).
        (Len::Strided(_, stride), PElem::Elem(el)) => {
            let ty = elem_ash_ty(reg, an, el);
            format!(
                "{{ let st = {base}{} as usize; let t = a.raw::<u64>((x.len() * st + std::mem::size_of::<{ty}>()).div_ceil(8)) as *mut u8; for (k, y) in x.iter().enumerate() {{ let v = {}; std::ptr::write_unaligned(t.add(k * st) as *mut {ty}, v); }} t as _ }}",
                snake(stride),
                conv_elem_ref(reg, el, "y")
            )
        }
        (_, PElem::Nested(el, ..)) => {
            let ty = elem_ash_ty(reg, an, el);
            vec_of(
                format!(
                    "match y {{ Some(z) => {{ let u = a.raw::<{ty}>(z.len()); for (j, w) in z.iter().enumerate() {{ let v = {}; u.add(j).write(v); }} u as *const {ty} }} None => std::ptr::null() }}",
                    conv_elem_ref(reg, el, "w")
                ),
                format!("*const {ty}"),
            )
        }
        (Len::One, PElem::Chain) => "m_chain(x, a, r)? as _".into(),
        (_, PElem::Bytes) => "a.slice(&x[..]) as _".into(),
        (_, PElem::StrArray) => vec_of("a.cstr(y)".into(), "*const c_char".into()),
        (_, PElem::StructPtrArray(s)) => vec_of(
            format!(
                "match y {{ Some(z) => {{ let t = m_{s}(z, a, r)?; a.alloc(t) as *const {} }} None => std::ptr::null() }}",
                elem_ash_ty(reg, an, &Elem::Struct(s.clone()))
            ),
            format!("*const {}", elem_ash_ty(reg, an, &Elem::Struct(s.clone()))),
        ),
        (l, e) => panic!("unexpected pointer {l:?} {e:?}"),
    }
}

pub(crate) fn has_pnext(fields: &[Field]) -> bool {
    fields.iter().any(|f| f.kind == Kind::PNext)
}

pub fn dispatch_rs(reg: &Registry, an: &Analysis) -> String {
    let mut o = String::from(HEADER);
    o.push_str(PRELUDE);
    // pNext chains.
    o.push_str("\n/// Builds a pNext chain in the arena, in captured order.\npub unsafe fn m_chain(c: &[PNext], a: &mut Arena, r: &mut dyn Remap) -> Result<*mut c_void, ReplayError> {\nlet mut next: *mut c_void = std::ptr::null_mut();\nfor e in c.iter().rev() {\nnext = match e {\n");
    for name in &an.struct_order {
        let s = &an.structs[name];
        if s.def.stype.is_some() && has_pnext(&s.fields) {
            let _ = writeln!(o, "PNext::{name}(x) => {{ let mut s = m_{name}(x, a, r)?; s.p_next = next as _; a.alloc(s) as *mut c_void }}");
        }
    }
    o.push_str("PNext::Unknown(_) => continue,\n};\n}\nOk(next)\n}\n\n");

    for name in &an.struct_order {
        let s = &an.structs[name];
        if s.def.is_union {
            continue;
        }
        let ty = base_ty(reg, an, name).replace("<'_>", "<'static>");
        let _ = writeln!(
            o,
            "#[inline(never)]\npub unsafe fn m_{name}(v: &{name}, a: &mut Arena, r: &mut dyn Remap) -> Result<{ty}, ReplayError> {{\nlet mut o: {ty} = std::mem::zeroed();"
        );
        if let Some(st) = &s.def.stype {
            let _ = writeln!(
                o,
                "o.s_type = vk::StructureType::{};",
                st.trim_start_matches("VK_STRUCTURE_TYPE_")
            );
        }
        for f in &s.fields {
            let place = format!("o.{}", f.snake);
            let src = format!("v.{}", f.snake);
            let line = match &f.kind {
                Kind::SType => continue,
                Kind::PNext => format!("{place} = m_chain(&{src}, a, r)? as _;"),
                Kind::Val(Elem::Scalar(..))
                    if matches!(
                        f.snake.as_str(),
                        "src_queue_family_index" | "dst_queue_family_index"
                    ) =>
                {
                    format!("{place} = r.queue_family({src});")
                }
                Kind::Val(Elem::Scalar(cat, t)) => format!("{place} = {};", conv_scalar(reg, cat, t, &src)),
                Kind::Val(el) => format!("{place} = {};", conv_elem_ref(reg, el, &format!("&{src}"))),
                Kind::Fixed(el, _) => format!(
                    "for (d, y) in {place}.iter_mut().zip({src}.iter()) {{ *d = {}; }}",
                    conv_elem_ref(reg, el, "y")
                ),
                Kind::FixedStr(_) => format!("copy_str(&mut {place}, &{src});"),
                Kind::Ptr { len, elem } => format!(
                    "{place} = match &{src} {{ None => std::ptr::null_mut::<u8>() as _, Some(x) => {} }};",
                    mat_ptr(reg, an, len, elem, "v.")
                ),
            };
            o.push_str(&line);
            o.push('\n');
        }
        o.push_str("Ok(o)\n}\n");
    }

    // The dispatcher.
    o.push_str("\n/// Replays one decoded call; see the module documentation.\n///\n/// # Safety\n/// Calls into Vulkan with the tables the context gives; they must belong to live objects.\npub unsafe fn replay(call: &vkstream::Call, ctx: &mut dyn ReplayContext) -> Result<vk::Result, ReplayError> {\nARENA.with(|cell| match cell.try_borrow_mut() {\nOk(mut a) => { a.reset(); replay_in(call, ctx, &mut a) }\n// Re-entered (a replay from inside a replay): a fresh arena.\nErr(_) => replay_in(call, ctx, &mut Arena::new()),\n})\n}\n\nunsafe fn replay_in(call: &vkstream::Call, ctx: &mut dyn ReplayContext, a: &mut Arena) -> Result<vk::Result, ReplayError> {\nmatch call {\n");
    for c in &an.cmds {
        let name = &c.def.name;
        let first = &c.params[0];
        let first_disp = matches!(
            reg.cat(&first.decl.ty),
            TypeCat::Handle {
                dispatchable: true,
                ..
            }
        ) && first.decl.ptrs.is_empty();
        let key = if first_disp {
            format!("p.{}", first.snake)
        } else {
            "0".into()
        };
        let table = if c.level == Level::Device {
            "device_table"
        } else {
            "instance_table"
        };
        let _ = writeln!(
            o,
            "vkstream::Call::{name}(p) => {{\nlet f = ctx.{table}({key})?.{name}.ok_or_else(|| missing(\"{name}\"))?;\nlet r: &mut dyn Remap = ctx.remap();"
        );
        let mut args = Vec::new();
        for (i, p) in c.params.iter().enumerate() {
            let out = !p.decl.ptrs.is_empty() && !p.decl.ptrs[0];
            let src = format!("p.{}", p.snake);
            let expr = match &p.kind {
                // The application's allocator does not exist in the replay process.
                _ if p.decl.ty == "VkAllocationCallbacks" => "std::ptr::null()".to_string(),
                Kind::Val(Elem::Scalar(cat, t)) => conv_scalar(reg, cat, t, &src),
                Kind::Val(el) => conv_elem_ref(reg, el, &format!("&{src}")),
                Kind::Ptr { len, elem } => format!(
                    "match &{src} {{ None => std::ptr::null_mut::<u8>() as _, Some(x) => {} }}",
                    mat_ptr(reg, an, len, elem, "p.")
                ),
                other => panic!("unexpected parameter kind {other:?}"),
            };
            let ty = sig_ty(reg, an, &p.decl);
            if out {
                let _ = writeln!(
                    o,
                    "let a{i}: {ty} = {{ let r: &mut dyn Remap = &mut Out(&mut *r); {expr} }};"
                );
            } else {
                let _ = writeln!(o, "let a{i}: {ty} = {expr};");
            }
            args.push(format!("a{i}"));
        }
        let _ = writeln!(o, "let ret = f({});", args.join(", "));
        let ok = if c.def.ret == "VkResult" {
            "ret.as_raw() >= 0"
        } else {
            "true"
        };
        // Bind created handles.
        let mut binds = String::new();
        for (i, p) in c.params.iter().enumerate() {
            let out = !p.decl.ptrs.is_empty() && !p.decl.ptrs[0];
            if !out {
                continue;
            }
            if let Kind::Ptr {
                len,
                elem: PElem::Elem(Elem::Scalar(cat @ TypeCat::Handle { .. }, _)),
            } = &p.kind
            {
                let ot = objtype(cat);
                match len {
                    Len::One => {
                        let _ = writeln!(binds, "if let Some(c) = p.{} {{ if c != 0 && !a{i}.is_null() {{ r.bind({ot}, c, (*a{i}).as_raw()); }} }}", p.snake);
                    }
                    Len::Count(_) | Len::Strided(..) => {
                        let _ = writeln!(
                            binds,
                            "if let Some(cs) = &p.{} {{ if !a{i}.is_null() {{ for (k, c) in cs.iter().enumerate() {{ if *c != 0 {{ r.bind({ot}, *c, (*a{i}.add(k)).as_raw()); }} }} }} }}",
                            p.snake
                        );
                    }
                }
            }
        }
        if !binds.is_empty() {
            let _ = writeln!(o, "if {ok} {{\n{binds}}}");
        }
        if c.def.ret == "VkResult" {
            o.push_str("Ok(ret)\n}\n");
        } else {
            o.push_str("let _ = ret;\nOk(vk::Result::SUCCESS)\n}\n");
        }
    }
    o.push_str("}\n}\n");
    o
}

/// The replayer's per-call entry point: one arm per command of [`config::REPLAY_OVERRIDES`]
/// (a call of its hand-written function, or nothing for a skipped command), the generic path for
/// the rest.
pub fn overrides_rs(an: &Analysis) -> String {
    let mut o = String::from(HEADER);
    o.push_str(
        "//! The replayer's per-call entry point, apart from `dispatch` so that file stays usable\n\
         //! without the replayer (vkstream's dispatch test includes it).\n\
         #![allow(non_snake_case)]\n\
         use crate::error::ReplayError;\n\
         \n/// Replays one decoded call: the commands codegen's `REPLAY_OVERRIDES` lists go to their\n/// hand-written function in `crate::calls` (or are skipped), every other one to\n/// `crate::calls::generic`. `rec` carries the capture's result code.\n///\n/// # Safety\n/// The session's handles must be those the trace created so far (the engine keeps the order).\npub(crate) unsafe fn replay_call(s: &mut crate::session::Session<'_>, call: &vkstream::Call, rec: &format::record::Call) -> Result<(), ReplayError> {\nmatch call {\n",
    );
    let mut entries = String::new();
    for (i, (name, how)) in config::REPLAY_OVERRIDES.iter().enumerate() {
        if config::REPLAY_OVERRIDES[..i].iter().any(|(n, _)| n == name) {
            panic!("config::REPLAY_OVERRIDES lists {name} twice");
        }
        let Some(c) = an.cmds.iter().find(|c| c.def.name == *name) else {
            panic!("config::REPLAY_OVERRIDES lists {name}, which this registry does not generate");
        };
        if c.def.canonical != c.def.name {
            panic!(
                "config::REPLAY_OVERRIDES lists the alias {name}: list {} (aliases are generated)",
                c.def.canonical
            );
        }
        // The command, then its aliases: one arm each.
        let group: Vec<&Cmd> = std::iter::once(c)
            .chain(
                an.cmds
                    .iter()
                    .filter(|a| a.def.canonical == *name && a.def.name != *name),
            )
            .collect();
        for a in &group {
            let n = &a.def.name;
            match how {
                config::Replay::By(module) if group.len() == 1 => {
                    let _ = writeln!(
                        o,
                        "vkstream::Call::{n}(p) => crate::calls::{module}::{name}(s, call, p, rec),"
                    );
                }
                config::Replay::By(module) => {
                    let _ = writeln!(
                        o,
                        "vkstream::Call::{n}(p) => crate::calls::{module}::{name}::<entry::{n}>(s, call, p, rec),"
                    );
                    let (table, pfn) = (
                        match a.level {
                            Level::Device => "vkstream::DeviceTable",
                            Level::Instance => "vkstream::InstanceTable",
                        },
                        config::ash_pfn(name),
                    );
                    let _ = writeln!(
                        entries,
                        "pub enum {n} {{}}\n\
                         impl crate::calls::Entry<{pfn}, {table}> for {n} {{\n\
                         const NAME: &'static str = \"{n}\";\n\
                         #[inline(always)]\n\
                         fn next(t: &{table}) -> Option<{pfn}> {{ t.{n} }}\n}}"
                    );
                }
                config::Replay::Skip(why) => {
                    let _ = writeln!(o, "// {why}\nvkstream::Call::{n}(_) => Ok(()),");
                }
            }
        }
    }
    o.push_str("_ => crate::calls::generic(s, call, rec),\n}\n}\n");
    o.push_str(
        "\n/// Each name of an override shared by aliases (core/KHR/EXT): its `calls::Entry`, the replay\n\
         /// device's function of that name.\n\
         #[allow(non_camel_case_types)]\n\
         pub(crate) mod entry {\n\
         use ash::vk;\n",
    );
    o.push_str(&entries);
    o.push_str("}\n");
    o
}
