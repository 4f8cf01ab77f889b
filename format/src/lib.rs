//! The quarry trace and results container.
pub mod record;
