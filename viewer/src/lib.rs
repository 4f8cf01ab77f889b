//! quarry viewer: query tables, availability timelines, timestamps and counters of traces and
//! results files, in an eframe window (or rendered once to a PNG).

pub mod data;
pub mod model;
pub mod synth;
