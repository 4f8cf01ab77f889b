//! Shared CLI plumbing: error reporting with exit codes, stdout that tolerates a closed pipe,
//! and plain-text rendering helpers.

use std::io::{self, Write};
use std::process::ExitCode;

use format::{FormatError, Problem, TraceReader};

/// Prints `quarry: <error>` as one line; bad input (a `FormatError`) exits with 2.
pub fn report(e: &anyhow::Error) -> ExitCode {
    if let Some(io) = e.downcast_ref::<io::Error>() {
        if io.kind() == io::ErrorKind::BrokenPipe {
            return ExitCode::SUCCESS;
        }
    }
    let line = e.to_string().replace('\n', " ");
    eprintln!("quarry: {line}");
    if e.downcast_ref::<FormatError>().is_some() || e.downcast_ref::<BadInput>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
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

/// The first problem a reader found while opening (damage or a missing footer), as an error.
pub fn open_damage(r: &TraceReader) -> Option<FormatError> {
    if let Some(d) = r.damage().first() {
        return Some(FormatError::new(
            r.path(),
            d.offset,
            Problem::Corrupt(d.problem.clone()),
        ));
    }
    if !r.has_footer() {
        return Some(FormatError::new(
            r.path(),
            r.file_len(),
            Problem::Corrupt(
                "no valid footer index (writer did not finish); complete blocks recovered".into(),
            ),
        ));
    }
    None
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
