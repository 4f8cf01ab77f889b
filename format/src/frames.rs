//! Frame ranges as users write them (`A-B`, `A-`, `A`; 0-based, inclusive), parsed in one place for
//! the capture layer's `frames` setting and the replayer's `--frames`.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRange {
    pub first: u64,
    /// Inclusive; `None` = to the end (of the app, or of the trace).
    pub last: Option<u64>,
}

impl FrameRange {
    /// `A-B`, `A-` or `A`, with white space allowed around the numbers; `A > B` is an error.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a frame range (A-B, A- or A, 0-based, A <= B)");
        let num = |t: &str| t.trim().parse::<u64>().map_err(|_| bad());
        let s = s.trim();
        match s.split_once('-') {
            None => {
                let n = num(s)?;
                Ok(FrameRange {
                    first: n,
                    last: Some(n),
                })
            }
            Some((a, "")) => Ok(FrameRange {
                first: num(a)?,
                last: None,
            }),
            Some((a, b)) => {
                let (first, last) = (num(a)?, num(b)?);
                if first > last {
                    return Err(bad());
                }
                Ok(FrameRange {
                    first,
                    last: Some(last),
                })
            }
        }
    }

    pub fn contains(&self, frame: u64) -> bool {
        frame >= self.first && self.last.map_or(true, |l| frame <= l)
    }
}

impl fmt::Display for FrameRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.last {
            Some(l) if l == self.first => write!(f, "{l}"),
            Some(l) => write!(f, "{}-{l}", self.first),
            None => write!(f, "{}-", self.first),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FrameRange;

    #[test]
    fn parses_the_three_forms_and_refuses_the_rest() {
        let r = |first, last| Ok(FrameRange { first, last });
        assert_eq!(FrameRange::parse("3"), r(3, Some(3)));
        assert_eq!(FrameRange::parse(" 2 - 5 "), r(2, Some(5)));
        assert_eq!(FrameRange::parse("4-"), r(4, None));
        for bad in ["", "-", "-3", "5-2", "a", "1-b", "1-2-3", "18446744073709551616"] {
            assert!(FrameRange::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn contains_and_display_round_trip() {
        let a = FrameRange::parse("2-4").unwrap();
        assert!(!a.contains(1) && a.contains(2) && a.contains(4) && !a.contains(5));
        assert!(FrameRange::parse("7-").unwrap().contains(u64::MAX));
        for s in ["3", "2-5", "4-"] {
            assert_eq!(FrameRange::parse(s).unwrap().to_string(), s);
        }
    }
}
