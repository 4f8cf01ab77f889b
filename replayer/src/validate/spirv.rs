//! SPIR-V validated by SPIRV-Tools before a driver compiles it. The structural check in
//! `shaders::check_code` reads no grammar; a shader word edited to an undefined id passed it and
//! crashed NVIDIA's compiler (lavapipe failed the pipeline cleanly). Linked when the build found
//! the library (`build.rs`); the options are the permissive ones (block layouts are not checked,
//! Vulkan 1.3's SPIR-V versions and rules): what protects a compiler is that ids, types, operands
//! and control flow are well formed, and apps' valid shaders must not be refused. Modules that
//! validated are remembered by content for the process (a loop replays them again).

/// Whether this build validates SPIR-V.
pub const AVAILABLE: bool = cfg!(spirv_tools);

/// `QUARRY_REPLAY_SPIRV_VALIDATION=0` turns it off (a shader the validator refuses wrongly).
fn enabled() -> bool {
    std::env::var_os("QUARRY_REPLAY_SPIRV_VALIDATION").is_none_or(|v| v != "0")
}

/// Why shader modules reach the driver unvalidated in this replay, if they do (a warning: a
/// user who relies on the check must not lose it silently).
pub fn unchecked() -> Option<&'static str> {
    if !AVAILABLE {
        Some("shader modules are not validated: this build of quarry has no SPIRV-Tools (install Debian's spirv-tools and rebuild)")
    } else if !enabled() {
        Some("shader modules are not validated (QUARRY_REPLAY_SPIRV_VALIDATION=0)")
    } else {
        None
    }
}

#[cfg(spirv_tools)]
mod ffi {
    use std::ffi::{c_char, c_void};

    #[repr(C)]
    pub struct Binary {
        pub code: *const u32,
        pub word_count: usize,
    }

    #[repr(C)]
    pub struct Diagnostic {
        pub line: usize,
        pub column: usize,
        pub index: usize,
        pub error: *mut c_char,
        pub is_text_source: bool,
    }

    /// `SPV_ENV_VULKAN_1_3` in `spirv-tools/libspirv.h`.
    pub const ENV_VULKAN_1_3: i32 = 25;

    extern "C" {
        pub fn spvContextCreate(env: i32) -> *mut c_void;
        pub fn spvValidatorOptionsCreate() -> *mut c_void;
        pub fn spvValidatorOptionsSetRelaxBlockLayout(o: *mut c_void, v: bool);
        pub fn spvValidatorOptionsSetSkipBlockLayout(o: *mut c_void, v: bool);
        pub fn spvValidatorOptionsSetRelaxLogicalPointer(o: *mut c_void, v: bool);
        pub fn spvValidatorOptionsSetRelaxStoreStruct(o: *mut c_void, v: bool);
        pub fn spvValidateWithOptions(
            c: *const c_void,
            o: *const c_void,
            b: *const Binary,
            d: *mut *mut Diagnostic,
        ) -> i32;
        pub fn spvDiagnosticDestroy(d: *mut Diagnostic);
    }
}

#[cfg(spirv_tools)]
struct Validator {
    context: *mut std::ffi::c_void,
    options: *mut std::ffi::c_void,
    /// Hashes of the modules that validated.
    passed: std::collections::HashSet<u128>,
}

// SAFETY: the context and options are only used under the mutex below.
#[cfg(spirv_tools)]
unsafe impl Send for Validator {}

/// `Err` with the validator's first message line when `code` is not valid SPIR-V.
#[cfg(spirv_tools)]
pub fn validate(code: &[u32]) -> Result<(), String> {
    use std::sync::{Mutex, OnceLock};
    static V: OnceLock<Option<Mutex<Validator>>> = OnceLock::new();
    if code.is_empty() || !enabled() {
        return Ok(());
    }
    let v = V.get_or_init(|| {
        // SAFETY: plain constructors; null results are checked.
        let (context, options) = unsafe {
            (
                ffi::spvContextCreate(ffi::ENV_VULKAN_1_3),
                ffi::spvValidatorOptionsCreate(),
            )
        };
        if context.is_null() || options.is_null() {
            return None;
        }
        // SAFETY: `options` is a live options object.
        unsafe {
            ffi::spvValidatorOptionsSetRelaxBlockLayout(options, true);
            ffi::spvValidatorOptionsSetSkipBlockLayout(options, true);
            ffi::spvValidatorOptionsSetRelaxLogicalPointer(options, true);
            ffi::spvValidatorOptionsSetRelaxStoreStruct(options, true);
        }
        Some(Mutex::new(Validator {
            context,
            options,
            passed: Default::default(),
        }))
    });
    let Some(v) = v else { return Ok(()) };
    let mut v = v.lock().unwrap_or_else(|e| e.into_inner());
    // xxh3 over the bytes: a replay loop (or the bench's passes) sees each module again.
    // SAFETY: u32s viewed as their bytes.
    let bytes = unsafe { std::slice::from_raw_parts(code.as_ptr() as *const u8, code.len() * 4) };
    let key = xxhash_rust::xxh3::xxh3_128(bytes);
    if v.passed.contains(&key) {
        return Ok(());
    }
    let binary = ffi::Binary {
        code: code.as_ptr(),
        word_count: code.len(),
    };
    let mut diag: *mut ffi::Diagnostic = std::ptr::null_mut();
    // SAFETY: the context and options are live; `binary` points into `code` for the call.
    let r = unsafe { ffi::spvValidateWithOptions(v.context, v.options, &binary, &mut diag) };
    let message = if diag.is_null() {
        String::new()
    } else {
        // SAFETY: a diagnostic the validator made, destroyed once here.
        unsafe {
            let d = &*diag;
            let m = if d.error.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(d.error)
                    .to_string_lossy()
                    .into_owned()
            };
            ffi::spvDiagnosticDestroy(diag);
            m
        }
    };
    if r == 0 {
        v.passed.insert(key);
        return Ok(());
    }
    let first = message.lines().next().unwrap_or("").trim();
    Err(format!(
        "its SPIR-V does not validate (SPIRV-Tools, result {r}): {first}"
    ))
}

#[cfg(not(spirv_tools))]
pub fn validate(_code: &[u32]) -> Result<(), String> {
    let _ = enabled;
    Ok(())
}

#[cfg(all(test, spirv_tools))]
mod tests {
    /// A module with one undefined id operand is refused; the same module whole passes.
    #[test]
    fn undefined_ids_are_refused() {
        // OpCapability Shader; OpMemoryModel Logical GLSL450; OpEntryPoint GLCompute %main "main";
        // OpExecutionMode %main LocalSize 1 1 1; %void, %fn types; %main = OpFunction ... OpReturn.
        let ok: Vec<u32> = vec![
            0x0723_0203,
            0x0001_0000,
            0,
            5,
            0, // header, bound 5
            0x0002_0011,
            1, // OpCapability Shader
            0x0003_000e,
            0,
            1, // OpMemoryModel Logical GLSL450
            0x0005_000f,
            5,
            1,
            0x6e69_616d,
            0, // OpEntryPoint GLCompute %1 "main"
            0x0006_0010,
            1,
            17,
            1,
            1,
            1, // OpExecutionMode %1 LocalSize 1 1 1
            0x0002_0013,
            2, // %2 = OpTypeVoid
            0x0003_0021,
            3,
            2, // %3 = OpTypeFunction %2
            0x0005_0036,
            2,
            1,
            0,
            3, // %1 = OpFunction %2 None %3
            0x0002_00f8,
            4,           // %4 = OpLabel
            0x0001_00fd, // OpReturn
            0x0001_0038, // OpFunctionEnd
        ];
        assert_eq!(super::validate(&ok), Ok(()));
        let mut bad = ok.clone();
        // OpFunction's function type: an id never defined.
        bad[27] = 0x7fff_0000;
        let e = super::validate(&bad).unwrap_err();
        assert!(e.contains("does not validate"), "{e}");
    }
}
