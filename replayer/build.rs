//! Links SPIRV-Tools' validator (Debian's `spirv-tools`: a static C++ library) when it is
//! installed, so that replay refuses malformed SPIR-V before a driver's compiler reads it
//! (`validate::spirv`). Without it the replayer builds as before, without that check.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(spirv_tools)");
    println!("cargo:rerun-if-env-changed=QUARRY_NO_SPIRV_TOOLS");
    if std::env::var_os("QUARRY_NO_SPIRV_TOOLS").is_some() {
        return;
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let dirs = [
        format!("/usr/lib/{arch}-linux-gnu"),
        "/usr/lib64".to_string(),
        "/usr/lib".to_string(),
        "/usr/local/lib".to_string(),
    ];
    for dir in dirs {
        let lib = std::path::Path::new(&dir).join("libSPIRV-Tools.a");
        println!("cargo:rerun-if-changed={}", lib.display());
        if lib.is_file() {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-lib=static=SPIRV-Tools");
            println!("cargo:rustc-link-lib=dylib=stdc++");
            println!("cargo:rustc-cfg=spirv_tools");
            return;
        }
    }
    println!(
        "cargo:warning=libSPIRV-Tools.a not found (Debian: spirv-tools): replay will not validate shader modules"
    );
}
