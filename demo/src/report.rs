//! Checked results: every query answer is compared with the value the scene
//! makes predictable, or with the bound the Vulkan spec allows when it leaves
//! room for implementation variation.

use serde::Serialize;

/// How a result is judged.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// The spec makes the value deterministic for this scene.
    Exact(u64),
    /// Spec bound: at least this value.
    AtLeast(u64),
    /// Spec bound: inclusive range.
    Range(u64, u64),
    /// Spec bound: non-zero (non-precise occlusion with passing samples).
    NonZero,
    /// A relation between values (ordering, equality of two retrievals, ...)
    /// evaluated by the caller; `String` says what must hold, the flag whether
    /// the spec makes it exact (true) or a bound (false).
    Holds(String, bool),
}

impl Rule {
    fn expected(&self) -> String {
        match self {
            Rule::Exact(v) => v.to_string(),
            Rule::AtLeast(v) => format!(">= {v}"),
            Rule::Range(lo, hi) => format!("{lo}..={hi}"),
            Rule::NonZero => "> 0".to_string(),
            Rule::Holds(what, _) => what.clone(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Rule::Exact(_) | Rule::Holds(_, true) => "exact",
            _ => "spec bound",
        }
    }

    fn accepts(&self, got: u64) -> bool {
        match *self {
            Rule::Exact(v) => got == v,
            Rule::AtLeast(v) => got >= v,
            Rule::Range(lo, hi) => (lo..=hi).contains(&got),
            Rule::NonZero => got > 0,
            Rule::Holds(..) => got != 0,
        }
    }
}

/// One row of the `--check` table, merged over all frames.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub query: String,
    pub expected: String,
    /// The value observed in each frame that produced this row.
    pub got: Vec<String>,
    pub rule: String,
    /// Why the rule is what it is (spec wording, scene geometry).
    pub why: String,
    pub pass: bool,
}

/// Everything one run observed.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub device: String,
    pub driver: String,
    pub frames: u32,
    pub checks: Vec<Check>,
    pub skipped: Vec<String>,
    /// Facts worth showing that are not pass/fail (counter names, durations).
    pub info: Vec<String>,
    pub validation_messages: Vec<String>,
    /// Every check matched and validation stayed silent.
    pub passed: bool,
}

impl Report {
    /// Records a numeric result judged by `rule`.
    pub fn value(&mut self, query: &str, got: u64, rule: Rule, why: &str) {
        let pass = rule.accepts(got);
        self.push(query, got.to_string(), rule, why, pass);
    }

    /// Records a bound (ordering, range) evaluated by the caller; `got`
    /// shows the observed values so a failure can be diagnosed from the
    /// table alone.
    pub fn holds(&mut self, query: &str, what: &str, got: String, ok: bool, why: &str) {
        self.push(query, got, Rule::Holds(what.to_string(), false), why, ok);
    }

    /// Like `holds`, for relations the spec makes exact (equal retrievals,
    /// availability after a fence).
    pub fn holds_exact(&mut self, query: &str, what: &str, got: String, ok: bool, why: &str) {
        self.push(query, got, Rule::Holds(what.to_string(), true), why, ok);
    }

    fn push(&mut self, query: &str, got: String, rule: Rule, why: &str, pass: bool) {
        let expected = rule.expected();
        let kind = rule.kind().to_string();
        if let Some(row) = self.checks.iter_mut().find(|c| c.query == query) {
            row.got.push(got);
            row.pass &= pass;
            // Keep the expectation of the first frame; a different one later
            // would itself be a bug worth seeing.
            if row.expected != expected {
                row.expected = format!("{} / {}", row.expected, expected);
                row.pass = false;
            }
            return;
        }
        self.checks.push(Check {
            query: query.to_string(),
            expected,
            got: vec![got],
            rule: kind,
            why: why.to_string(),
            pass,
        });
    }

    /// `skipped: <query> needs <feature>`, printed once even over many frames.
    pub fn skip(&mut self, query: &str, needs: &str) {
        let line = format!("skipped: {query} needs {needs}");
        if !self.skipped.contains(&line) {
            self.skipped.push(line);
        }
    }

    pub fn info(&mut self, line: String) {
        if !self.info.contains(&line) {
            self.info.push(line);
        }
    }

    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass) && self.validation_messages.is_empty()
    }

    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| !c.pass).count()
    }

    /// The human table printed by `--check`.
    pub fn table(&self) -> String {
        let rows: Vec<[String; 5]> = self
            .checks
            .iter()
            .map(|c| {
                [
                    c.query.clone(),
                    c.expected.clone(),
                    compact(&c.got),
                    c.rule.clone(),
                    if c.pass { "ok" } else { "MISMATCH" }.to_string(),
                ]
            })
            .collect();
        let header = ["query", "expected", "got", "rule", "status"];
        let mut width = header.map(str::len);
        for row in &rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String; 5]| {
            let mut s = String::new();
            for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                s.push_str(&format!("{cell:<w$}"));
            }
            s.trim_end().to_string()
        };
        let mut out = String::new();
        out.push_str(&line(&header.map(String::from)));
        out.push('\n');
        for row in &rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }
}

/// Shows one value when every observation agreed, else all of them while that stays readable
/// (`--json` always has every value; rows get one per frame, or per round of the timeline path).
fn compact(got: &[String]) -> String {
    match got.first() {
        Some(first) if got.iter().all(|g| g == first) => first.clone(),
        Some(first) => {
            let all = got.join("|");
            if all.chars().count() <= 48 {
                all
            } else {
                format!("{first} (first of {} values)", got.len())
            }
        }
        None => String::new(),
    }
}

/// Difference `later - earlier` of two timestamps that wrap at `valid_bits`;
/// `None` when `later` lies before `earlier` (more than half the range apart).
pub fn ts_delta(earlier: u64, later: u64, valid_bits: u32) -> Option<u64> {
    let mask = ts_mask(valid_bits);
    let d = later.wrapping_sub(earlier) & mask;
    (d <= mask / 2).then_some(d)
}

/// Mask of the meaningful bits of a timestamp (`timestampValidBits`).
pub fn ts_mask(valid_bits: u32) -> u64 {
    if valid_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << valid_bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_merge_over_frames_and_fail_on_any_mismatch() {
        let mut r = Report::default();
        r.value("occ", 512, Rule::Exact(512), "");
        r.value("occ", 511, Rule::Exact(512), "");
        assert_eq!(r.checks.len(), 1);
        assert_eq!(r.checks[0].got, vec!["512", "511"]);
        assert!(!r.passed());
        assert_eq!(r.failures(), 1);
        assert!(r.table().contains("512|511"));
        assert!(r.table().contains("MISMATCH"));
    }

    #[test]
    fn bounds() {
        assert!(Rule::AtLeast(6).accepts(7));
        assert!(!Rule::AtLeast(6).accepts(5));
        assert!(Rule::Range(2, 4).accepts(4));
        assert!(!Rule::Range(2, 4).accepts(5));
        assert!(!Rule::NonZero.accepts(0));
        assert_eq!(Rule::Range(1, 2).kind(), "spec bound");
    }

    #[test]
    fn timestamp_wrap() {
        assert_eq!(ts_delta(10, 15, 64), Some(5));
        assert_eq!(ts_delta(15, 10, 64), None);
        // 36 valid bits: a counter that wrapped still gives a small delta.
        let top = (1u64 << 36) - 2;
        assert_eq!(ts_delta(top, 3, 36), Some(5));
        assert_eq!(ts_mask(36), (1u64 << 36) - 1);
    }

    #[test]
    fn skip_lines_are_unique() {
        let mut r = Report::default();
        r.skip("mesh primitives generated", "VK_EXT_mesh_shader");
        r.skip("mesh primitives generated", "VK_EXT_mesh_shader");
        assert_eq!(
            r.skipped,
            vec!["skipped: mesh primitives generated needs VK_EXT_mesh_shader"]
        );
    }
}
