//! What a replay is asked to do ([`ReplayOptions`]) and where it reports progress ([`Progress`]).

use std::path::PathBuf;

use format::frames::FrameRange;

/// What `quarry replay` was asked to do.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub trace: PathBuf,
    /// `INDEX`, `UUID` or a name substring; `None` picks the first discrete GPU, else the first.
    pub gpu: Option<String>,
    /// Full re-executions of the trace (at least 1).
    pub loops: u32,
    pub results: Option<PathBuf>,
    pub compare: bool,
    /// Enable `VK_LAYER_KHRONOS_validation` and count its messages.
    pub validate: bool,
    /// Print one progress line per loop to stderr.
    pub progress: bool,
    /// `--passes N` for performance pools; `None` ("auto") takes as many as the replay GPU needs.
    pub passes: Option<u32>,
    /// `--counters`: measure counters around every command buffer or render pass.
    pub inject: Option<crate::inject::InjectSpec>,
    /// `--window`: show presented frames in an X11 window instead of discarding them.
    pub window: bool,
    /// `--drop-unsupported`: leave out safe-to-drop device extensions the replay GPU lacks.
    pub drop_unsupported: bool,
    /// `--frames A-B`: replay from the trace's start through frame B (inclusive, 0-based) and
    /// report only frames A..=B (timings, query results); `None` is the whole trace.
    pub frames: Option<FrameRange>,
    /// `--memory`: how captured memory is laid out on the replay GPU (see [`MemoryMode`]).
    pub memory: MemoryMode,
}

/// `--memory remap|rebind|auto`: how captured allocations are laid out on the replay GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryMode {
    /// Rebind only when some resource's replay requirements (alignment, size, memory type bits)
    /// do not fit where the capture placed it; decided once per trace at its first bind.
    #[default]
    Auto,
    /// The captured allocations as they are (memory types remapped): same offsets, same sizes.
    Remap,
    /// Every buffer and image gets its own allocation sized and aligned for the replay GPU;
    /// captured memory contents are translated to the resources they cover.
    Rebind,
}

impl MemoryMode {
    pub fn name(self) -> &'static str {
        match self {
            MemoryMode::Auto => "auto",
            MemoryMode::Remap => "remap",
            MemoryMode::Rebind => "rebind",
        }
    }
}

impl std::str::FromStr for MemoryMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(MemoryMode::Auto),
            "remap" => Ok(MemoryMode::Remap),
            "rebind" => Ok(MemoryMode::Rebind),
            _ => Err(format!("`{s}` is not `remap`, `rebind` or `auto`")),
        }
    }
}

/// Which pass of which loop a replay is in (see [`Progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassInfo {
    /// 0-based loop and pass; `loops` and `passes` are the totals known so far (the passes a
    /// trace's performance counters need are known after the first pass).
    pub loop_index: u32,
    pub loops: u32,
    pub pass: u32,
    pub passes: u32,
    /// Calls in the trace.
    pub calls: u64,
}

/// Where a replay reports how far it got while it runs (the `quarry` CLI draws a bar); every
/// method does nothing by default.
pub trait Progress {
    /// A pass over the trace begins.
    fn pass_begun(&mut self, _pass: &PassInfo) {}
    /// `calls` calls of the current pass replayed so far (reported every 1024 calls).
    fn calls_replayed(&mut self, _calls: u64) {}
    /// The current pass ended, successfully or not.
    fn pass_ended(&mut self) {}
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}

impl ReplayOptions {
    pub fn new(trace: impl Into<PathBuf>) -> Self {
        ReplayOptions {
            trace: trace.into(),
            gpu: None,
            loops: 1,
            results: None,
            compare: false,
            validate: false,
            progress: false,
            passes: None,
            inject: None,
            frames: None,
            window: false,
            drop_unsupported: false,
            memory: MemoryMode::Auto,
        }
    }
}
