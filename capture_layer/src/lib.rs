//! quarry capture layer.
