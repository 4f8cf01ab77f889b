//! The test executables link both layer crates as rlibs, and each exports the same three loader
//! entry points (`layer_support::export_entry_points!`). Which of the crates' object files the
//! linker pulls in depends on how rustc splits them into codegen units (shared generic code can sit
//! beside the entry points), so a test that uses both may see both definitions. The tests never
//! act as a layer: either definition will do.
fn main() {
    println!("cargo:rustc-link-arg-tests=-Wl,--allow-multiple-definition");
    println!("cargo:rustc-link-arg-benches=-Wl,--allow-multiple-definition");
}
