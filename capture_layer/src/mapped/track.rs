//! How the host's writes into one mapping are found, chosen per mapping at its baseline: mappings of
//! `GUARD_MIN` bytes or more are write-protected (`uffd::Guard`: a scan costs what the host wrote, and
//! what the GPU writes through its own mapping is never seen), smaller ones, and any the kernel will
//! not protect, are compared with a copy (`Shadow`: cheaper than a protection fault below ~16 pages,
//! BENCHMARKS.md "Host memory"). A guard that fails later falls back to a copy, reporting the whole
//! range once. Knows nothing of the trace: scans return (offset, bytes) runs.
//!
//! Depends on `mapped::uffd` only.

use super::uffd::Guard;

pub const PAGE: usize = 4096;
/// Mappings at least this large are guarded.
pub const GUARD_MIN: usize = 256 * 1024;

/// How the pages of a mapping are tracked; `Unseen` until a baseline is taken.
#[derive(Default)]
pub enum Track {
    /// The trace holds nothing of it yet (mapped while nothing was written): a scan reports all.
    #[default]
    Unseen,
    /// A copy of what the trace holds.
    Shadow(Vec<u8>),
    /// Whole pages `at..at + guard.len()` write-protected; the partial pages at either end compared
    /// with their copies (they may share pages with other data, which is not registered).
    Guarded {
        guard: Guard,
        at: usize,
        head: Vec<u8>,
        tail: Vec<u8>,
        /// What the trace holds of pages written before (guard page index -> bytes), at most
        /// `SEEN_MAX`: a page written again is compared with it and only the changed 64-byte
        /// pieces are sent (drivers rewrite a few uniforms in a page every frame).
        seen: std::collections::HashMap<usize, Box<[u8]>>,
    },
}

/// Pages per guarded mapping whose last recorded bytes are kept (`Track::Guarded::seen`).
const SEEN_MAX: usize = 256;
/// Granularity of a rewritten page's comparison.
const PIECE: usize = 64;

/// A range the GPU writes (mapping offsets `a..b`): `None` while it may be writing it (never a host
/// write: the host may not touch it meanwhile), else the digest of the bytes it left, which stay
/// out of the trace until the host changes them.
pub type Hole = (usize, usize, Option<u64>);

/// How the mappings of this process are tracked (`QUARRY_CAPTURE_HOST_MEMORY`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    /// Guard from `GUARD_MIN` bytes up, compare below (the default).
    Auto,
    /// Compare every mapping.
    Shadow,
    /// Guard every mapping with a whole page (tests).
    Guard,
}

/// `QUARRY_CAPTURE_HOST_MEMORY`: `shadow` compares every mapping, `guard` write-protects every
/// mapping of a whole page or more, anything else (the default) guards from `GUARD_MIN` up.
pub fn method() -> Method {
    static METHOD: std::sync::OnceLock<Method> = std::sync::OnceLock::new();
    *METHOD.get_or_init(
        || match std::env::var("QUARRY_CAPTURE_HOST_MEMORY").as_deref() {
            Ok("shadow") => Method::Shadow,
            Ok("guard") => Method::Guard,
            _ => Method::Auto,
        },
    )
}

impl Track {
    /// The trace now holds `live` (the mapping's bytes): later scans report what changes. Picks the
    /// method; an error says why a mapping that should be guarded is compared instead.
    pub fn baseline(&mut self, live: &[u8], method: Method) -> Result<(), String> {
        if let Track::Guarded {
            guard,
            at,
            head,
            tail,
            seen,
        } = self
        {
            seen.clear();
            head.copy_from_slice(&live[..*at]);
            tail.copy_from_slice(&live[*at + guard.len()..]);
            if let Err(e) = guard.forget(0, guard.len()) {
                *self = Track::Shadow(live.to_vec());
                return Err(e);
            }
            return Ok(());
        }
        let p = live.as_ptr() as usize;
        let (a, b) = (p.next_multiple_of(PAGE), (p + live.len()) / PAGE * PAGE);
        let guard = match method {
            Method::Auto => live.len() >= GUARD_MIN,
            Method::Guard => true,
            Method::Shadow => false,
        };
        if !guard || b <= a {
            *self = Track::Shadow(live.to_vec());
            return Ok(());
        }
        // SAFETY: the whole pages inside the mapping, which the owner drops the guard before unmapping.
        match unsafe { Guard::new(a, b - a) } {
            Ok(guard) => {
                let at = a - p;
                *self = Track::Guarded {
                    head: live[..at].to_vec(),
                    tail: live[at + guard.len()..].to_vec(),
                    guard,
                    at,
                    seen: Default::default(),
                };
                Ok(())
            }
            Err(e) => {
                *self = Track::Shadow(live.to_vec());
                Err(e)
            }
        }
    }

    pub fn is_guarded(&self) -> bool {
        matches!(self, Track::Guarded { .. })
    }

    /// Appends what changed in `live` since the last scan as (offset, bytes) runs of whole pages
    /// (as far as the mapping goes), without the bytes of `holes`. An error (a guard the kernel no
    /// longer serves) leaves a copy in its place and the whole range reported.
    /// `standing`: ranges the GPU owns for as long as they are listed (optimal images' memory):
    /// never reported, and a guard leaves their whole pages unprotected once written (no fault at
    /// every frame's render); `protect_again` when one ends.
    pub fn scan(
        &mut self,
        live: &[u8],
        holes: &[Hole],
        standing: &[(usize, usize)],
        method: Method,
        out: &mut Vec<(usize, Vec<u8>)>,
    ) -> Result<(), String> {
        let mut keep = kept_holes(live, holes);
        keep.extend(standing.iter().map(|&(a, b)| (a, b.min(live.len()))));
        match self {
            // The baseline before the bytes the trace gets: a write in between is then reported
            // again by the next scan, never lost.
            Track::Unseen => {
                let r = self.baseline(live, method);
                out.push((0, live.to_vec()));
                return r;
            }
            Track::Shadow(shadow) if shadow.len() != live.len() => {
                *shadow = live.to_vec();
                out.push((0, live.to_vec()));
            }
            Track::Shadow(shadow) => {
                // What the GPU may be writing is taken as it is: the host did not write it.
                let owned = holes.iter().filter(|h| h.2.is_none()).map(|h| (h.0, h.1));
                for (a, b) in owned.chain(standing.iter().copied()) {
                    let b = b.min(live.len());
                    if a < b {
                        shadow[a..b].copy_from_slice(&live[a..b]);
                    }
                }
                for (off, data) in diff_pages(live, shadow) {
                    out.extend(carve(off, data, &keep));
                }
            }
            Track::Guarded {
                guard,
                at,
                head,
                tail,
                seen,
            } => {
                let (at, end) = (*at, *at + guard.len());
                for (off, data) in diff_pages(&live[..at], head) {
                    out.extend(carve(off, data, &keep));
                }
                let mut runs = Vec::new();
                let mut skip: smallvec::SmallVec<[(usize, usize); 4]> = standing
                    .iter()
                    .filter(|&&(a, b)| b > at && a < end)
                    .map(|&(a, b)| (a.max(at) - at, b.min(end) - at))
                    .collect();
                skip.sort_unstable();
                if let Err(e) = guard.take_written(&skip, &mut runs) {
                    *self = Track::Shadow(live.to_vec());
                    out.push((0, live.to_vec()));
                    return Err(e);
                }
                // Read after the pages were protected again: a write meanwhile is reported twice.
                // Whole pages unless seen before; runs of them coalesced.
                let mut whole: Option<(usize, usize)> = None;
                let flush = |w: &mut Option<(usize, usize)>, out: &mut Vec<_>| {
                    if let Some((a, b)) = w.take() {
                        out.extend(carve(a, live[a..b].to_vec(), &keep));
                    }
                };
                for (a, b) in runs {
                    for p in a / PAGE..b.div_ceil(PAGE) {
                        let off = at + p * PAGE;
                        let end_p = (off + PAGE).min(end);
                        let holed = keep.iter().any(|&(x, y)| x < end_p && y > off);
                        if holed {
                            seen.remove(&p);
                        } else if let Some(old) = seen.get_mut(&p) {
                            flush(&mut whole, out);
                            let now = &live[off..end_p];
                            rewritten(off, now, old, out);
                            continue;
                        } else if seen.len() < SEEN_MAX {
                            seen.insert(p, live[off..end_p].into());
                        }
                        match &mut whole {
                            Some((_, b)) if *b == off => *b = end_p,
                            _ => {
                                flush(&mut whole, out);
                                whole = Some((off, end_p));
                            }
                        }
                    }
                }
                flush(&mut whole, out);
                for (off, data) in diff_pages(&live[end..], tail) {
                    out.extend(carve(end + off, data, &keep));
                }
            }
        }
        Ok(())
    }

    /// A standing range (`scan`) ended at `off..off + len`: its pages are protected again, so
    /// what the host writes there from now on is seen (what the GPU left there is not a write).
    pub fn protect_again(&mut self, off: usize, len: usize) {
        if let Track::Guarded {
            guard, at, seen, ..
        } = self
        {
            let lo = off.max(*at) - *at;
            let hi = (off + len).min(*at + guard.len()).saturating_sub(*at);
            if hi > lo {
                seen.retain(|&p, _| p * PAGE + PAGE <= lo || p * PAGE >= hi);
                let _ = guard.forget(lo, hi - lo);
            }
        }
    }

    /// The GPU wrote `data` at `off` (a completed copy, read back): the baseline takes it.
    pub fn gpu_wrote(&mut self, off: usize, data: &[u8]) {
        match self {
            Track::Unseen => {}
            Track::Shadow(shadow) => {
                if let Some(s) = shadow.get_mut(off..off + data.len()) {
                    s.copy_from_slice(data);
                }
            }
            Track::Guarded {
                guard,
                at,
                head,
                tail,
                seen,
            } => {
                let (at, end) = (*at, *at + guard.len());
                let (lo, hi) = (
                    off.saturating_sub(at),
                    (off + data.len()).saturating_sub(at),
                );
                seen.retain(|&p, _| p * PAGE + PAGE <= lo || p * PAGE >= hi);
                for (i, &byte) in data.iter().enumerate() {
                    let o = off + i;
                    if o < at {
                        head[o] = byte;
                    } else if o >= end {
                        if let Some(t) = tail.get_mut(o - end) {
                            *t = byte;
                        }
                    }
                }
                // Pages wholly inside: the host could not have written them meanwhile. A failure
                // only reports them once more.
                let lo = off.max(at) - at;
                let hi = (off + data.len()).min(end).saturating_sub(at);
                if hi > lo {
                    let _ = guard.forget(lo, hi - lo);
                }
            }
        }
    }
}

/// Sends the `PIECE`-sized pieces of a page (at mapping offset `off`) that differ from what the
/// trace holds (`old`, updated), adjacent pieces coalesced.
fn rewritten(off: usize, now: &[u8], old: &mut [u8], out: &mut Vec<(usize, Vec<u8>)>) {
    let mut run: Option<usize> = None;
    let mut i = 0;
    while i <= now.len() {
        let end = (i + PIECE).min(now.len());
        let changed = i < now.len() && now[i..end] != old[i..end];
        if changed {
            run.get_or_insert(i);
        } else if let Some(a) = run.take() {
            // From `now` once: what is sent is what the trace then holds.
            let bytes = now[a..i].to_vec();
            old[a..i].copy_from_slice(&bytes);
            out.push((off + a, bytes));
        }
        i += PIECE;
    }
}

/// FNV-1a: the identity of bytes the GPU left in a hole.
pub fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The holes whose bytes stay out of the trace now: those the GPU may be writing and those still
/// holding what it left.
fn kept_holes(live: &[u8], holes: &[Hole]) -> smallvec::SmallVec<[(usize, usize); 4]> {
    holes
        .iter()
        .filter(|&&(a, b, left)| b <= live.len() && left.is_none_or(|d| digest(&live[a..b]) == d))
        .map(|&(a, b, _)| (a, b))
        .collect()
}

/// Compares `live` with `shadow` page by page, copies changed pages into the shadow and returns the
/// changed runs as (offset, bytes), adjacent dirty pages coalesced.
pub fn diff_pages(live: &[u8], shadow: &mut [u8]) -> Vec<(usize, Vec<u8>)> {
    debug_assert_eq!(live.len(), shadow.len());
    let len = live.len().min(shadow.len());
    let mut out: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut run: Option<usize> = None;
    let mut at = 0;
    while at < len {
        let end = (at + PAGE).min(len);
        let dirty = live[at..end] != shadow[at..end];
        if dirty {
            shadow[at..end].copy_from_slice(&live[at..end]);
            run.get_or_insert(at);
        } else if let Some(start) = run.take() {
            // From the shadow, which now holds these pages: the mapping is read no third time.
            out.push((start, shadow[start..at].to_vec()));
        }
        at = end;
    }
    if let Some(start) = run {
        out.push((start, shadow[start..len].to_vec()));
    }
    out
}

/// `data` (at `off`) without the bytes inside `holes`, as the runs left.
pub fn carve(off: usize, data: Vec<u8>, holes: &[(usize, usize)]) -> Vec<(usize, Vec<u8>)> {
    let end = off + data.len();
    if !holes.iter().any(|&(a, b)| a < end && b > off) {
        return vec![(off, data)];
    }
    let mut cuts: smallvec::SmallVec<[(usize, usize); 4]> = holes
        .iter()
        .filter(|&&(a, b)| a < end && b > off)
        .map(|&(a, b)| (a.max(off), b.min(end)))
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = off;
    for (a, b) in cuts {
        if a > at {
            out.push((at, data[at - off..a - off].to_vec()));
        }
        at = at.max(b);
    }
    if at < end {
        out.push((at, data[at - off..].to_vec()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carving_drops_copy_ranges_and_keeps_the_rest() {
        let data: Vec<u8> = (0..100).collect();
        assert_eq!(
            carve(1000, data.clone(), &[(0, 10)]),
            vec![(1000, data.clone())]
        );
        let runs = carve(
            1000,
            data.clone(),
            &[(1010, 1020), (1015, 1030), (1090, 2000)],
        );
        assert_eq!(
            runs,
            vec![(1000, data[..10].to_vec()), (1030, data[30..90].to_vec())]
        );
        assert!(carve(1000, data, &[(900, 1100)]).is_empty());
    }

    /// Both methods report the same pages for the same writes, and neither reports a hole.
    #[test]
    fn guarded_and_shadow_mappings_report_the_same_writes() {
        if super::super::uffd::available().is_err() {
            return;
        }
        let len = 40 * PAGE;
        // Unaligned, as a driver's suballocation: partial pages at both ends.
        let mut backing = vec![0u8; len + 3 * PAGE];
        let base = backing.as_mut_ptr() as usize;
        let off = base.next_multiple_of(PAGE) - base + 100;
        for method in [Method::Shadow, Method::Guard] {
            let live = &mut backing[off..off + len];
            live.fill(0);
            let mut t = Track::Unseen;
            let mut out = Vec::new();
            t.scan(live, &[], &[], method, &mut out).unwrap();
            assert_eq!(out.len(), 1, "the first scan reports all");
            assert_eq!(t.is_guarded(), method == Method::Guard);
            out.clear();
            t.scan(live, &[], &[], method, &mut out).unwrap();
            assert!(out.is_empty());
            for at in [0, 50, PAGE * 3, PAGE * 10 - 101, len - 1] {
                live[at] = 9;
            }
            let hole = (PAGE * 20, PAGE * 22, None);
            live[PAGE * 21] = 5; // the GPU's
            t.scan(live, &[hole], &[], method, &mut out).unwrap();
            let covered: Vec<usize> = out
                .iter()
                .flat_map(|(o, d)| (*o..*o + d.len()).filter(|&i| live[i] != 0))
                .collect();
            assert_eq!(covered, vec![0, 50, PAGE * 3, PAGE * 10 - 101, len - 1]);
            for (o, d) in &out {
                assert_eq!(&live[*o..*o + d.len()], &d[..]);
            }
            out.clear();
            t.scan(live, &[], &[], method, &mut out).unwrap();
            // The hole's byte, left by the GPU: the shadow took it, the guard never saw it.
            let after: Vec<usize> = out.iter().map(|(o, _)| *o).collect();
            assert!(after.is_empty(), "{method:?}: {after:?}");
            // A page written again: the guard sends the changed piece, the shadow the page.
            live[PAGE * 3 + 10] = 10;
            t.scan(live, &[], &[], method, &mut out).unwrap();
            assert_eq!(out.len(), 1);
            let (o, d) = &out[0];
            assert!(*o <= PAGE * 3 + 10 && PAGE * 3 + 10 < o + d.len());
            assert_eq!(&live[*o..*o + d.len()], &d[..]);
            let want = if method == Method::Guard { PIECE } else { PAGE };
            assert_eq!(d.len(), want, "{method:?}");
            out.clear();
        }
    }
}
