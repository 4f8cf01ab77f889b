//! Shared CLI plumbing: error reporting with exit codes, stdout that tolerates a closed pipe,
//! and plain-text rendering helpers.

use std::io::{self, Write};
use std::path::Path;

use format::{FormatError, Info, Problem};

/// Prints `quarry: <error>` as one line and gives the exit code: 2 for bad input (a
/// `FormatError`), else 1.
pub fn report(e: &anyhow::Error) -> u8 {
    if let Some(io) = e.downcast_ref::<io::Error>() {
        if io.kind() == io::ErrorKind::BrokenPipe {
            return 0;
        }
    }
    let line = e.to_string().replace('\n', " ");
    eprintln!("quarry: {line}");
    let bad_option = matches!(
        e.downcast_ref::<replayer::ReplayError>(),
        Some(replayer::ReplayError::BadOption(_))
    );
    if e.downcast_ref::<FormatError>().is_some()
        || e.downcast_ref::<BadInput>().is_some()
        || bad_option
    {
        2
    } else {
        1
    }
}

/// A usage or input error that is not a damaged file (missing program, bad argument): exit 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// `Err(BadInput)` with a formatted message.
#[macro_export]
macro_rules! bad_input {
    ($($t:tt)*) => {
        return Err($crate::output::BadInput(format!($($t)*)).into())
    };
}

/// `println!` that ignores a closed stdout (`quarry demo | head`) instead of panicking.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `--salvage`, shared by every command that reads files.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct Salvage {
    /// Use what is intact in a damaged file: the damage is reported as a warning and the
    /// command exits 0 (without it, a damaged file exits 2 after showing what was read).
    #[arg(long)]
    pub salvage: bool,
}

/// What a command met in one file beyond what `TraceReader::info` finds: records that fail to
/// decode in blocks whose checksums hold (forged, or a writer bug).
#[derive(Debug, Default)]
pub struct Met {
    /// `(block offset, offset, problem)` of each.
    found: Vec<(u64, u64, String)>,
}

impl Met {
    /// A problem in the block at `block`; `e` names the offset.
    pub fn error(&mut self, block: u64, e: &FormatError) {
        self.found.push((block, e.offset, e.problem.to_string()));
    }

    /// A problem reported as text, `[FILE: ]offset N: problem` (the viewer's).
    pub fn text(&mut self, path: &Path, text: &str) {
        let t = text
            .strip_prefix(&format!("{}: ", path.display()))
            .unwrap_or(text);
        let parsed = t.strip_prefix("offset ").and_then(|r| {
            let (n, rest) = r.split_once(": ")?;
            Some((n.parse().ok()?, rest.to_string()))
        });
        let (offset, problem) = parsed.unwrap_or((0, t.to_string()));
        self.found.push((offset, offset, problem));
    }

    /// Those not already among the reader's damage (the same block, found twice).
    fn new_to(&self, info: &Info) -> Vec<&(u64, u64, String)> {
        self.found
            .iter()
            .filter(|(b, o, _)| !info.damage.iter().any(|d| d.offset == *b || d.offset == *o))
            .collect()
    }
}

/// The damage policy every command shares (`info`, `dump`, `export`, `view`): damage is one
/// `quarry:` line naming the file, where the first damage is, what it is, and what was lost in
/// all; it is an error (exit 2) unless `--salvage`, then a warning. A file whose writer stopped
/// between two blocks (no footer, nothing lost) is no error: a note says so.
pub fn judge(info: &Info, path: &Path, met: &Met, salvage: Salvage) -> anyhow::Result<()> {
    let met = met.new_to(info);
    let first = info
        .damage
        .first()
        .map(|d| (d.offset, d.problem.clone()))
        .or_else(|| met.first().map(|(_, o, p)| (*o, p.clone())));
    let Some((offset, problem)) = first else {
        if info.recovered() {
            eprintln!(
                "quarry: note: {}: the writer did not finish (no footer index); all {} blocks it wrote are intact and were read",
                path.display(),
                info.blocks
            );
        }
        return Ok(());
    };
    let regions = info.damage.len() + met.len();
    let mut lost = format!("{} bytes lost", info.lost_bytes);
    if regions > 1 {
        lost = format!("{regions} damaged regions, {lost}");
    }
    if salvage.salvage {
        eprintln!(
            "quarry: warning: {}: offset {offset}: {problem} ({lost}; salvaged what is intact)",
            path.display()
        );
        return Ok(());
    }
    Err(FormatError::new(
        path,
        offset,
        Problem::Corrupt(format!("{problem} ({lost}; --salvage uses what is intact)")),
    )
    .into())
}

/// Buffered stdout.
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

pub fn flush(out: &mut impl Write) -> anyhow::Result<()> {
    out.flush()?;
    Ok(())
}

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// `1.5 MiB` style sizes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// UTC `YYYY-MM-DD hh:mm:ss` from Unix nanoseconds (civil-from-days, no time zone database).
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `major.minor.patch` of a packed `VK_MAKE_API_VERSION` value.
pub fn vk_version(v: u32) -> String {
    format!("{}.{}.{}", (v >> 22) & 0x7f, (v >> 12) & 0x3ff, v & 0xfff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_000_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(951_782_400 * 1_000_000_000), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn sizes_and_versions() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(vk_version((1 << 22) | (3 << 12) | 239), "1.3.239");
        assert_eq!(hex(&[0, 0xab, 7]), "00ab07");
    }
}
