//! The `quarry` command.
fn main() {}
