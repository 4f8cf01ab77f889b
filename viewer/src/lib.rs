//! quarry viewer.
