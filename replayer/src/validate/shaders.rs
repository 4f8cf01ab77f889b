//! The descriptor sets and bindings each shader entry point statically uses (from its SPIR-V,
//! read once at vkCreateShaderModule), so that a pipeline is created only with a layout that
//! has them, and drawn or dispatched only with every set it uses bound (lavapipe crashed on
//! both in traces the other checks accepted; part of [`Compat`]).
//!
//! Static use is followed from the entry point through the functions it calls: a resource
//! variable counts when an instruction that takes a pointer (load, store, access chain, atomic,
//! image texel pointer, array length, copy, call argument) names it.

use std::collections::HashMap;

use vkstream::{Call, PNext};

use super::compat::Compat;

/// What a pipeline's shaders use: descriptor sets (bit per set, the first 32) and (set,
/// binding) pairs.
pub(super) struct Used {
    pub mask: u32,
    pub pairs: Box<[(u32, u32)]>,
}

/// An entry point: the stages its name has in the module (VkShaderStageFlags of its execution
/// models) and the (set, binding) pairs it uses.
pub(super) struct Entry {
    stages: u32,
    used: Box<[(u32, u32)]>,
}

/// Entry point name -> what it is.
pub(super) type Module = HashMap<String, Entry>;

/// The shader stage of a SPIR-V execution model (0: none a pipeline has).
fn stage_of(model: u32) -> u32 {
    match model {
        0..=5 => 1 << model,
        5267 | 5364 => 0x40,
        5268 | 5365 => 0x80,
        5313 => 0x100,
        5314 => 0x1000,
        5315 => 0x200,
        5316 => 0x400,
        5317 => 0x800,
        5318 => 0x2000,
        _ => 0,
    }
}

/// Vertex, tessellation, geometry, fragment, task and mesh.
const GRAPHICS_STAGES: u32 = 0x1f | 0xc0;
const COMPUTE: u32 = 0x20;

const MAGIC: u32 = 0x0723_0203;
const LIBRARY: u32 = 0x800;
const VERTEX: u32 = 0x1;
const MESH: u32 = 0x80;
const OP_ENTRY_POINT: u32 = 15;
const OP_FUNCTION: u32 = 54;
const OP_FUNCTION_END: u32 = 56;
const OP_FUNCTION_CALL: u32 = 57;
const OP_DECORATE: u32 = 71;
const BINDING: u32 = 33;
const DESCRIPTOR_SET: u32 = 34;

/// Operand positions (word indices) of the pointers an instruction reads or writes.
fn pointers(op: u32, n: usize) -> std::ops::Range<usize> {
    match op {
        // OpImageTexelPointer, OpLoad, OpAccessChain.., OpArrayLength, OpCopyObject,
        // OpConvertPtrToU, atomics: the pointer is word 3.
        60 | 61 | 65..=68 | 83 | 117 | 227..=242 => 3..4.min(n),
        // OpStore: word 1; OpCopyMemory(Sized): words 1 and 2.
        62 => 1..2.min(n),
        63 | 64 => 1..3.min(n),
        // OpFunctionCall: the arguments.
        OP_FUNCTION_CALL => 4.min(n)..n,
        _ => 0..0,
    }
}

/// Reads a module's entry points and the resources each uses; `None` when the code is not
/// SPIR-V this reader understands (nothing is then checked for it).
pub(super) fn reflect(code: &[u32]) -> Option<Module> {
    if code.len() < 5 || code[0] != MAGIC {
        return None;
    }
    let mut entries: Vec<(String, u32, u32)> = Vec::new();
    let mut set: HashMap<u32, u32> = HashMap::new();
    let mut binding: HashMap<u32, u32> = HashMap::new();
    // Function -> (variables it uses, functions it calls).
    let mut funcs: HashMap<u32, (Vec<u32>, Vec<u32>)> = HashMap::new();
    let mut current: Option<u32> = None;
    let mut i = 5;
    while i < code.len() {
        let op = code[i] & 0xffff;
        let n = (code[i] >> 16) as usize;
        if n == 0 || i + n > code.len() {
            return None;
        }
        let w = &code[i..i + n];
        match op {
            OP_ENTRY_POINT if n >= 4 => {
                let name: Vec<u8> = w[3..]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .take_while(|b| *b != 0)
                    .collect();
                entries.push((
                    String::from_utf8_lossy(&name).into_owned(),
                    w[2],
                    stage_of(w[1]),
                ));
            }
            OP_DECORATE if n >= 4 && w[2] == DESCRIPTOR_SET => {
                set.insert(w[1], w[3]);
            }
            OP_DECORATE if n >= 4 && w[2] == BINDING => {
                binding.insert(w[1], w[3]);
            }
            OP_FUNCTION if n >= 3 => {
                current = Some(w[2]);
                funcs.entry(w[2]).or_default();
            }
            OP_FUNCTION_END => current = None,
            _ => {
                if let Some(f) = current {
                    let e = funcs.entry(f).or_default();
                    if op == OP_FUNCTION_CALL && n >= 4 {
                        e.1.push(w[3]);
                    }
                    for k in pointers(op, n) {
                        if set.contains_key(&w[k]) {
                            e.0.push(w[k]);
                        }
                    }
                }
            }
        }
        i += n;
    }
    let mut module = Module::new();
    for (name, f, stage) in entries {
        let mut seen = vec![f];
        let mut used = Vec::new();
        let mut k = 0;
        while k < seen.len() {
            if let Some((vars, calls)) = funcs.get(&seen[k]) {
                for v in vars {
                    if let (Some(s), Some(b)) = (set.get(v), binding.get(v)) {
                        used.push((*s, *b));
                    }
                }
                for c in calls {
                    if !seen.contains(c) {
                        seen.push(*c);
                    }
                }
            }
            k += 1;
        }
        used.sort_unstable();
        used.dedup();
        // One name may be the entry point of several stages; its last uses are kept.
        let stages = module.get(&name).map_or(0, |e| e.stages) | stage;
        module.insert(
            name,
            Entry {
                stages,
                used: used.into(),
            },
        );
    }
    Some(module)
}

/// What can be told of SPIR-V without its grammar (VUID-VkShaderModuleCreateInfo-pCode-08737:
/// valid SPIR-V): instructions that fit the code, and the ids that names, decorations and
/// execution modes target below the module's bound (a forged OpName target crashed lavapipe's
/// SPIR-V reader). Code that is not SPIR-V (no magic) is not checked.
pub(super) fn check_code(code: &[u32]) -> Result<(), String> {
    if code.len() < 5 || code[0] != MAGIC {
        return Ok(());
    }
    let bound = code[3];
    let mut i = 5;
    while i < code.len() {
        let n = (code[i] >> 16) as usize;
        if n == 0 || i + n > code.len() {
            return Err(format!(
                "its SPIR-V instruction at word {i} has {n} words, past the code's {}",
                code.len()
            ));
        }
        let w = &code[i..i + n];
        // OpName, OpMemberName, OpExecutionMode(Id), OpDecorate, OpMemberDecorate: word 1;
        // OpEntryPoint: word 2 (its function).
        let target = match w[0] & 0xffff {
            5 | 6 | 16 | 331 | 71 | 72 if n >= 2 => Some(w[1]),
            OP_ENTRY_POINT if n >= 3 => Some(w[2]),
            _ => None,
        };
        if let Some(id) = target.filter(|&id| id == 0 || id >= bound) {
            return Err(format!(
                "its SPIR-V instruction at word {i} targets id {id}, outside the module's \
                 bound {bound}"
            ));
        }
        i += n;
    }
    Ok(())
}

impl Compat {
    /// The (set, binding) pairs the stages use, checked against pipeline layout `layout`.
    fn stages<'a>(
        &self,
        stages: impl Iterator<Item = (u64, Option<&'a str>)>,
        layout: u64,
    ) -> Result<Used, String> {
        let mut mask = 0u32;
        let mut pairs = Vec::new();
        let pl = self.pipeline_layouts.get(&layout);
        for (module, name) in stages {
            let Some(used) = self
                .modules
                .get(&module)
                .and_then(|m| m.get(name.unwrap_or("main")))
                .map(|e| &e.used)
            else {
                continue;
            };
            for &(s, b) in used.iter() {
                if s < 32 {
                    mask |= 1 << s;
                }
                pairs.push((s, b));
                let Some(pl) = pl else {
                    continue;
                };
                let Some(&sl) = pl.get(s as usize) else {
                    return Err(format!(
                        "shader module 0x{module:x} uses descriptor set {s}, but pipeline layout \
                         0x{layout:x} has {} sets",
                        pl.len()
                    ));
                };
                if sl == 0 {
                    return Err(format!(
                        "shader module 0x{module:x} uses descriptor set {s}, which pipeline layout \
                         0x{layout:x} leaves VK_NULL_HANDLE"
                    ));
                }
                let Some(l) = self.layouts.get(&sl) else {
                    continue;
                };
                if !l.bindings.iter().any(|x| x.binding == b && x.count > 0) {
                    return Err(format!(
                        "shader module 0x{module:x} uses binding {b} of set {s}, which descriptor \
                         set layout 0x{sl:x} lacks"
                    ));
                }
            }
        }
        Ok(Used {
            mask,
            pairs: pairs.into(),
        })
    }

    /// A stage's shader is an entry point of its module for that stage
    /// (VUID-VkPipelineShaderStageCreateInfo-pName-00707): lavapipe compiled a fragment
    /// shader given as another stage and crashed. Modules not read are not checked.
    fn entry(&self, stage: u32, module: u64, name: Option<&str>) -> Result<(), String> {
        let name = name.unwrap_or("main");
        let Some(m) = self.modules.get(&module) else {
            return Ok(());
        };
        match m.get(name) {
            Some(e) if e.stages & stage != 0 => Ok(()),
            Some(e) => Err(format!(
                "stage 0x{stage:x} names entry point \"{name}\" of shader module 0x{module:x}, \
                 which is for stages 0x{:x}",
                e.stages
            )),
            None => Err(format!(
                "stage 0x{stage:x} names entry point \"{name}\", which shader module \
                 0x{module:x} lacks"
            )),
        }
    }

    pub(super) fn shaders_before(&self, call: &Call) -> Result<(), String> {
        match call {
            Call::vkCreateShaderModule(p) => {
                let code = p.p_create_info.as_ref().and_then(|c| c.p_code.as_deref());
                check_code(code.unwrap_or(&[]))?;
                super::spirv::validate(code.unwrap_or(&[]))
            }
            Call::vkCreateGraphicsPipelines(p) => {
                let n = p.create_info_count as usize;
                for ci in p.p_create_infos.iter().flatten().take(n) {
                    // A complete pipeline needs a vertex or mesh stage among its stageCount.
                    let library = ci.flags & LIBRARY != 0
                        || ci
                            .p_next
                            .iter()
                            .any(|x| matches!(x, PNext::VkPipelineLibraryCreateInfoKHR(_)));
                    if !library && ci.layout == 0 {
                        return Err("a pipeline's layout is VK_NULL_HANDLE".into());
                    }
                    if ci.render_pass != 0 {
                        self.pipeline_subpass(ci.render_pass, ci.subpass)?;
                    }
                    let stages = ci.p_stages.iter().flatten().take(ci.stage_count as usize);
                    if !library && !stages.clone().any(|s| s.stage & (VERTEX | MESH) != 0) {
                        return Err(format!(
                            "its {} stages have no vertex or mesh shader",
                            ci.stage_count
                        ));
                    }
                    // Each a single graphics stage, at most once (VUID-VkGraphicsPipelineCreateInfo-
                    // stage-06896, -06897, VkPipelineShaderStageCreateInfo-stage-00704..).
                    let mut seen = 0u32;
                    for s in stages.clone() {
                        if s.stage.count_ones() != 1 || s.stage & !GRAPHICS_STAGES != 0 {
                            return Err(format!(
                                "stage 0x{:x} is not one graphics shader stage",
                                s.stage
                            ));
                        }
                        if seen & s.stage != 0 {
                            return Err(format!("stage 0x{:x} is given twice", s.stage));
                        }
                        seen |= s.stage;
                        self.entry(s.stage, s.module, s.p_name.as_deref())?;
                    }
                    let st = ci.p_stages.iter().flatten();
                    self.stages(st.map(|s| (s.module, s.p_name.as_deref())), ci.layout)?;
                }
                Ok(())
            }
            Call::vkCreateComputePipelines(p) => {
                let n = p.create_info_count as usize;
                for ci in p.p_create_infos.iter().flatten().take(n) {
                    if ci.layout == 0 {
                        return Err("a pipeline's layout is VK_NULL_HANDLE".into());
                    }
                    let s = &ci.stage;
                    if s.stage != COMPUTE {
                        return Err(format!(
                            "a compute pipeline's stage is 0x{:x}, not VK_SHADER_STAGE_COMPUTE_BIT",
                            s.stage
                        ));
                    }
                    self.entry(s.stage, s.module, s.p_name.as_deref())?;
                    self.stages(std::iter::once((s.module, s.p_name.as_deref())), ci.layout)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    pub(super) fn shaders_after(&mut self, call: &Call) {
        match call {
            Call::vkCreateShaderModule(p) => {
                let (Some(ci), Some(h)) = (&p.p_create_info, p.p_shader_module) else {
                    return;
                };
                if let Some(m) = ci.p_code.as_deref().and_then(reflect) {
                    self.modules.insert(h, m);
                }
            }
            Call::vkCreateGraphicsPipelines(p) => {
                let n = p.create_info_count as usize;
                let infos = p.p_create_infos.iter().flatten().take(n);
                for (ci, h) in infos.zip(p.p_pipelines.iter().flatten()) {
                    let st = ci.p_stages.iter().flatten();
                    let st = st.map(|s| (s.module, s.p_name.as_deref()));
                    if let Ok(used) = self.stages(st, ci.layout) {
                        self.used_sets.insert(*h, used);
                    }
                }
            }
            Call::vkCreateComputePipelines(p) => {
                let n = p.create_info_count as usize;
                let infos = p.p_create_infos.iter().flatten().take(n);
                for (ci, h) in infos.zip(p.p_pipelines.iter().flatten()) {
                    let s = &ci.stage;
                    let st = std::iter::once((s.module, s.p_name.as_deref()));
                    if let Ok(used) = self.stages(st, ci.layout) {
                        self.used_sets.insert(*h, used);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(code: u32, operands: &[u32]) -> Vec<u32> {
        let mut v = vec![((operands.len() as u32 + 1) << 16) | code];
        v.extend_from_slice(operands);
        v
    }

    /// Entry point "main" (function 1) calls function 2, which loads variable 10 (set 0,
    /// binding 1); variable 11 (set 3, binding 0) is declared but never used.
    #[test]
    fn entry_points_use_what_their_functions_load() {
        let mut code = vec![MAGIC, 0x0001_0000, 0, 20, 0];
        code.extend(op(OP_ENTRY_POINT, &[0, 1, u32::from_le_bytes(*b"main"), 0]));
        code.extend(op(OP_DECORATE, &[10, DESCRIPTOR_SET, 0]));
        code.extend(op(OP_DECORATE, &[10, BINDING, 1]));
        code.extend(op(OP_DECORATE, &[11, DESCRIPTOR_SET, 3]));
        code.extend(op(OP_DECORATE, &[11, BINDING, 0]));
        code.extend(op(OP_FUNCTION, &[5, 1, 0, 6]));
        code.extend(op(OP_FUNCTION_CALL, &[5, 7, 2]));
        code.extend(op(OP_FUNCTION_END, &[]));
        code.extend(op(OP_FUNCTION, &[5, 2, 0, 6]));
        code.extend(op(61, &[8, 9, 10]));
        code.extend(op(OP_FUNCTION_END, &[]));
        assert_eq!(check_code(&code), Ok(()));
        let mut named = code.clone();
        named.extend(op(5, &[99, 0]));
        assert!(check_code(&named).unwrap_err().contains("targets id 99"));
        assert!(check_code(&code[..code.len() - 2])
            .unwrap_err()
            .contains("past the code"));
        let m = reflect(&code).unwrap();
        assert_eq!(&*m["main"].used, &[(0, 1)]);
        assert_eq!(m["main"].stages, 0x1);
        assert!(reflect(&code[1..]).is_none());
        // A cut instruction is not SPIR-V this reader follows.
        assert!(reflect(&code[..code.len() - 2]).is_none());
    }
}
