//! quarry replayer.
