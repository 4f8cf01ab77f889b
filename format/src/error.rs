use std::fmt;
use std::path::{Path, PathBuf};

/// Every error names the file, the byte offset it concerns and the problem, so that a CLI can
/// print it as one line: `<file>: offset N: <problem>`.
#[derive(Debug, thiserror::Error)]
#[error("{}: offset {offset}: {problem}", path.display())]
pub struct FormatError {
    pub path: PathBuf,
    pub offset: u64,
    pub problem: Problem,
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("empty file")]
    Empty,
    #[error("not a quarry file (bad magic)")]
    BadMagic,
    #[error("format version {major}.{minor} is newer than this reader (reads {supported}.x); upgrade quarry")]
    NewerMajor {
        major: u16,
        minor: u16,
        supported: u16,
    },
    #[error("unsupported format version {major}.{minor}")]
    BadVersion { major: u16, minor: u16 },
    #[error("truncated {what}: need {need} bytes, {have} available")]
    Truncated {
        what: &'static str,
        need: u64,
        have: u64,
    },
    #[error("{0}")]
    Corrupt(String),
    #[error("checksum mismatch in {0}")]
    Checksum(&'static str),
    #[error("decompression failed: {0}")]
    Decompress(String),
    #[error("cannot decode {what}: {detail}")]
    Decode { what: &'static str, detail: String },
    #[error("cannot encode record: {0}")]
    Encode(String),
    #[error("{what} of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        what: &'static str,
        len: u64,
        max: u64,
    },
    #[error("blob {0} not found")]
    NoSuchBlob(u64),
    #[error("header kind {prefix} disagrees with header record kind {header}")]
    KindMismatch { prefix: String, header: String },
    #[error("writer stopped after an earlier error: {0}")]
    WriterFailed(String),
    #[error("cannot allocate {0} bytes")]
    Alloc(u64),
}

impl FormatError {
    pub fn new(path: &Path, offset: u64, problem: Problem) -> Self {
        FormatError {
            path: path.to_path_buf(),
            offset,
            problem,
        }
    }

    pub fn io(path: &Path, offset: u64, context: &'static str, source: std::io::Error) -> Self {
        Self::new(path, offset, Problem::Io { context, source })
    }

    pub(crate) fn corrupt(path: &Path, offset: u64, what: impl fmt::Display) -> Self {
        Self::new(path, offset, Problem::Corrupt(what.to_string()))
    }

    /// A copy for handing the same failure to several callers (io::Error is not Clone).
    pub(crate) fn duplicate(&self) -> Self {
        FormatError {
            path: self.path.clone(),
            offset: self.offset,
            problem: Problem::WriterFailed(self.problem.to_string()),
        }
    }
}
