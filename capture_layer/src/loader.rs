pub use layer_support::loader::*;
