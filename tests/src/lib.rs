//! Helpers for quarry's end-to-end tests (`tests/tests/*.rs`) and benches (`tests/benches/`):
//! where cargo put the built programs, running programs on lavapipe under the capture layer, X
//! displays, scratch paths and reading traces back.
//!
//! Tests that run the `quarry` or `quarry-demo` executables need them built first:
//! `cargo build --workspace` (scripts/test.sh does it before `cargo test`), which also puts the
//! layer libraries next to `quarry`, where `quarry capture` looks for them. In-process tests load
//! the layers built as this crate's dependencies (`capture_layer`, `counters_layer`).
//!
//! A test that lacks an optional tool (vkcube, Xvfb, glmark2, lavapipe, the validation layer)
//! prints a `SKIP:` line and returns; a missing quarry executable is a failure that names the
//! build command.

pub mod bins;
pub mod display;
pub mod gpu;
pub mod hostile;
pub mod process;
pub mod real;
pub mod scratch;
pub mod synth;
pub mod trace;
pub mod vulkan;
pub mod zink;

pub use bins::*;
pub use display::*;
pub use gpu::*;
pub use process::*;
pub use scratch::*;
pub use trace::*;
pub use vulkan::*;
pub use zink::*;
