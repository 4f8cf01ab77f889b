//! The emulated counters: what each one measures, how it is described to the app, and how a set of
//! counters is split into passes. Pure data and arithmetic, so it is unit-tested without a GPU.

use ash::vk;

/// Where a counter's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Timestamp at vkCmdEndQuery minus timestamp at vkCmdBeginQuery.
    CommandBufferDuration,
    /// Sum over the render pass instances inside the query of (timestamp after the end minus
    /// timestamp before the begin).
    RenderPassDuration,
    /// One bit of a pipeline-statistics query.
    Statistic(vk::QueryPipelineStatisticFlags),
    /// A precise occlusion query (when the device supports precise occlusion).
    SamplesPassed,
}

/// What a queue family and device can measure; decides which counters a family lists.
#[derive(Clone, Copy, Debug, Default)]
pub struct Capabilities {
    pub graphics: bool,
    pub compute: bool,
    pub timestamps: bool,
    pub pipeline_statistics: bool,
    pub occlusion: bool,
}

pub struct Counter {
    pub name: &'static str,
    pub category: &'static str,
    pub description: &'static str,
    pub unit: vk::PerformanceCounterUnitKHR,
    pub storage: vk::PerformanceCounterStorageKHR,
    pub scope: vk::PerformanceCounterScopeKHR,
    pub source: Source,
}

impl Counter {
    /// Name-derived, so the same counter has the same UUID in every process and on every device
    /// (the replayer matches captured counters by UUID).
    pub fn uuid(&self) -> [u8; 16] {
        uuid_for(self.name)
    }

    pub fn available(&self, caps: &Capabilities) -> bool {
        match self.source {
            Source::CommandBufferDuration => caps.timestamps,
            Source::RenderPassDuration => caps.timestamps && caps.graphics,
            Source::Statistic(bit) => {
                caps.pipeline_statistics
                    && (caps.graphics
                        || (caps.compute
                            && bit == vk::QueryPipelineStatisticFlags::COMPUTE_SHADER_INVOCATIONS))
            }
            Source::SamplesPassed => caps.occlusion && caps.graphics,
        }
    }
}

/// A version-8 (custom) UUID from the xxh3-128 hash of the counter name in a quarry namespace.
pub fn uuid_for(name: &str) -> [u8; 16] {
    let h = xxhash_rust::xxh3::xxh3_128(format!("quarry.counters/{name}").as_bytes());
    let mut u = h.to_be_bytes();
    u[6] = (u[6] & 0x0f) | 0x80;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

const NS: vk::PerformanceCounterUnitKHR = vk::PerformanceCounterUnitKHR::NANOSECONDS;
const GENERIC: vk::PerformanceCounterUnitKHR = vk::PerformanceCounterUnitKHR::GENERIC;
const U64: vk::PerformanceCounterStorageKHR = vk::PerformanceCounterStorageKHR::UINT64;
const CB: vk::PerformanceCounterScopeKHR = vk::PerformanceCounterScopeKHR::COMMAND_BUFFER;
const RP: vk::PerformanceCounterScopeKHR = vk::PerformanceCounterScopeKHR::RENDER_PASS;
type Stat = vk::QueryPipelineStatisticFlags;

/// Every counter the layer can emulate, in enumeration order (a family lists the available subset in
/// this order). No counter has COMMAND scope: every query then begins outside a render pass, where the
/// layer can reset its internal queries in the same command buffer, so one recording serves every pass.
pub static CATALOG: &[Counter] = &[
    Counter {
        name: "Command buffer duration",
        category: "Time",
        description: "GPU time from the query's begin (the first command) to its end (the last command), from timestamps",
        unit: NS,
        storage: U64,
        scope: CB,
        source: Source::CommandBufferDuration,
    },
    Counter {
        name: "Render pass duration",
        category: "Time",
        description: "Sum of the GPU times of the render pass instances inside the query, from timestamps around each",
        unit: NS,
        storage: U64,
        scope: RP,
        source: Source::RenderPassDuration,
    },
    Counter {
        name: "Vertex shader invocations",
        category: "Geometry",
        description: "Vertex shader invocations (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::Statistic(Stat::VERTEX_SHADER_INVOCATIONS),
    },
    Counter {
        name: "Clipping invocations",
        category: "Geometry",
        description: "Primitives that reached the clipping stage (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::Statistic(Stat::CLIPPING_INVOCATIONS),
    },
    Counter {
        name: "Clipping primitives",
        category: "Geometry",
        description: "Primitives output by the clipping stage (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::Statistic(Stat::CLIPPING_PRIMITIVES),
    },
    Counter {
        name: "Fragment shader invocations",
        category: "Fragment",
        description: "Fragment shader invocations (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::Statistic(Stat::FRAGMENT_SHADER_INVOCATIONS),
    },
    Counter {
        name: "Samples passed",
        category: "Fragment",
        description: "Samples that passed the depth and stencil tests (precise occlusion query)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::SamplesPassed,
    },
    Counter {
        name: "Compute shader invocations",
        category: "Compute",
        description: "Compute shader invocations (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: CB,
        source: Source::Statistic(Stat::COMPUTE_SHADER_INVOCATIONS),
    },
    Counter {
        name: "Input assembly vertices",
        category: "Geometry",
        description: "Vertices assembled by the input assembly stage (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::Statistic(Stat::INPUT_ASSEMBLY_VERTICES),
    },
    Counter {
        name: "Input assembly primitives",
        category: "Geometry",
        description: "Primitives assembled by the input assembly stage (pipeline statistics)",
        unit: GENERIC,
        storage: U64,
        scope: RP,
        source: Source::Statistic(Stat::INPUT_ASSEMBLY_PRIMITIVES),
    },
];

/// Catalog indices of the counters a family with `caps` lists, in order: the app's counter index `i`
/// is `family_counters(caps)[i]`.
pub fn family_counters(caps: &Capabilities) -> Vec<usize> {
    (0..CATALOG.len())
        .filter(|&i| CATALOG[i].available(caps))
        .collect()
}

/// Counters per pass: `QUARRY_COUNTERS_PER_PASS` (a positive integer), default 2.
pub fn per_pass_from(value: Option<&str>) -> Result<u32, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(DEFAULT_PER_PASS),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "QUARRY_COUNTERS_PER_PASS={v:?} is not a positive integer"
            )),
        },
    }
}

pub const DEFAULT_PER_PASS: u32 = 2;

/// The pass plan of one counter set: the distinct counters in ascending catalog order, `per_pass` at a
/// time. Depends only on the set (not on the order or repeats in `pCounterIndices`), so
/// vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR and the pool agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassPlan {
    pub passes: u32,
    /// Pass of each catalog index in the set.
    pub pass_of: Vec<(usize, u32)>,
}

impl PassPlan {
    pub fn new(catalog_indices: &[usize], per_pass: u32) -> PassPlan {
        let mut distinct: Vec<usize> = catalog_indices.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let per = per_pass.max(1) as usize;
        let pass_of: Vec<(usize, u32)> = distinct
            .iter()
            .enumerate()
            .map(|(k, &c)| (c, (k / per) as u32))
            .collect();
        // An empty set still needs its one submission.
        let passes = distinct.len().div_ceil(per).max(1) as u32;
        PassPlan { passes, pass_of }
    }

    pub fn pass(&self, catalog_index: usize) -> Option<u32> {
        self.pass_of
            .iter()
            .find(|(c, _)| *c == catalog_index)
            .map(|&(_, p)| p)
    }
}

/// Nanoseconds from two raw timestamps: the difference modulo 2^valid_bits, times the period, rounded
/// half up. Exact integer arithmetic ([`scale_ticks`]), so the GPU copy path (shaders/resolve.comp)
/// computes the same bytes as vkGetQueryPoolResults.
pub fn ticks_to_ns(begin: u64, end: u64, valid_bits: u32, period_ns: f32) -> u64 {
    let (m, s) = period_parts(period_ns);
    scale_ticks(ticks(begin, end, valid_bits), m, s)
}

/// `end - begin` modulo 2^valid_bits.
pub fn ticks(begin: u64, end: u64, valid_bits: u32) -> u64 {
    let mask = if valid_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << valid_bits) - 1
    };
    end.wrapping_sub(begin) & mask
}

/// The exact value of an f32 timestamp period as `m * 2^s` (m odd, below 2^24); (0, 0) for a period
/// that is zero, negative or not finite.
pub fn period_parts(period: f32) -> (u32, i32) {
    if !period.is_finite() || period <= 0.0 {
        return (0, 0);
    }
    let bits = period.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    let frac = bits & 0x7f_ffff;
    let (mut m, mut s) = if exp == 0 {
        (frac, -149)
    } else {
        (frac | 0x80_0000, exp - 150)
    };
    while m & 1 == 0 {
        m >>= 1;
        s += 1;
    }
    (m, s)
}

/// round-half-up(`t * m * 2^s`), low 64 bits, with `m` below 2^24 (as from [`period_parts`]), so the
/// product and the rounding fit in 96 bits. Written with 32-bit limbs exactly
/// as `scale()` in shaders/resolve.comp (which has no 64-bit integers); tested against u128.
pub fn scale_ticks(t: u64, m: u32, s: i32) -> u64 {
    let (tx, ty) = (t as u32, (t >> 32) as u32);
    let mul = |a: u32| {
        let p = a as u64 * m as u64;
        ((p >> 32) as u32, p as u32)
    };
    let (h0, l0) = mul(tx);
    let (h1, l1) = mul(ty);
    let (r1, c) = h0.overflowing_add(l1);
    let mut r = [l0, r1, h1.wrapping_add(c as u32)];
    let limb = |r: &[u32; 3], i: i32| {
        if (0..3).contains(&i) {
            r[i as usize]
        } else {
            0
        }
    };
    let mut o = [0u32; 2];
    if s >= 0 {
        if s >= 64 {
            return 0;
        }
        let (ls, bs) = (s / 32, s % 32);
        for (j, out) in o.iter_mut().enumerate() {
            let j = j as i32;
            let mut v = limb(&r, j - ls) << bs;
            if bs > 0 && j - ls > 0 {
                v |= limb(&r, j - ls - 1) >> (32 - bs);
            }
            *out = v;
        }
    } else {
        let k = -s;
        if k >= 96 {
            return 0;
        }
        let rb = k - 1;
        let add = 1u32 << (rb % 32);
        match rb / 32 {
            0 => {
                let (x, c0) = r[0].overflowing_add(add);
                let (y, c1) = r[1].overflowing_add(c0 as u32);
                r = [x, y, r[2].wrapping_add(c1 as u32)];
            }
            1 => {
                let (y, c1) = r[1].overflowing_add(add);
                r = [r[0], y, r[2].wrapping_add(c1 as u32)];
            }
            _ => r[2] = r[2].wrapping_add(add),
        }
        let (ls, bs) = (k / 32, k % 32);
        for (j, out) in o.iter_mut().enumerate() {
            let j = j as i32;
            let mut v = limb(&r, j + ls) >> bs;
            if bs > 0 {
                v |= limb(&r, j + ls + 1) << (32 - bs);
            }
            *out = v;
        }
    }
    o[0] as u64 | (o[1] as u64) << 32
}

/// "Render pass duration": the sum (modulo 2^64) of the first `measured` (begin, end) pairs in `pairs`.
pub fn render_pass_ns(pairs: &[u64], measured: usize, valid_bits: u32, period_ns: f32) -> u64 {
    pairs.chunks_exact(2).take(measured).fold(0u64, |acc, p| {
        acc.wrapping_add(ticks_to_ns(p[0], p[1], valid_bits, period_ns))
    })
}

/// Copies `s` into a fixed, NUL-terminated C char array, truncating at a character boundary.
pub fn fill_c_chars(dst: &mut [std::ffi::c_char], s: &str) {
    let mut n = s.len().min(dst.len().saturating_sub(1));
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as std::ffi::c_char;
    }
    for d in dst.iter_mut().skip(n) {
        *d = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Capabilities {
        Capabilities {
            graphics: true,
            compute: true,
            timestamps: true,
            pipeline_statistics: true,
            occlusion: true,
        }
    }

    #[test]
    fn uuids_are_stable_distinct_and_versioned() {
        let ids: Vec<[u8; 16]> = CATALOG.iter().map(Counter::uuid).collect();
        for (i, a) in ids.iter().enumerate() {
            assert_eq!(a[6] >> 4, 8, "version nibble");
            assert_eq!(a[8] >> 6, 2, "variant bits");
            for b in &ids[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(uuid_for("Samples passed"), CATALOG[6].uuid());
        assert_ne!(uuid_for("Samples passed"), uuid_for("samples passed"));
    }

    #[test]
    fn names_fit_the_vulkan_arrays() {
        for c in CATALOG {
            assert!(c.name.len() < vk::MAX_DESCRIPTION_SIZE);
            assert!(c.category.len() < vk::MAX_DESCRIPTION_SIZE);
            assert!(c.description.len() < vk::MAX_DESCRIPTION_SIZE);
        }
    }

    #[test]
    fn families_list_what_they_can_measure() {
        assert_eq!(family_counters(&all()).len(), CATALOG.len());
        let compute = Capabilities {
            graphics: false,
            ..all()
        };
        let names: Vec<&str> = family_counters(&compute)
            .iter()
            .map(|&i| CATALOG[i].name)
            .collect();
        assert_eq!(
            names,
            ["Command buffer duration", "Compute shader invocations"]
        );
        let transfer = Capabilities {
            timestamps: true,
            ..Capabilities::default()
        };
        assert_eq!(family_counters(&transfer), vec![0]);
        let no_stats = Capabilities {
            pipeline_statistics: false,
            ..all()
        };
        assert_eq!(family_counters(&no_stats).len(), 3);
    }

    #[test]
    fn pass_count_is_ceil_of_distinct_over_per_pass() {
        for per in 1..=5u32 {
            for n in 0..=CATALOG.len() {
                let set: Vec<usize> = (0..n).rev().collect();
                let plan = PassPlan::new(&set, per);
                assert_eq!(
                    plan.passes,
                    (n as u32).div_ceil(per).max(1),
                    "n={n} per={per}"
                );
                for &c in &set {
                    assert!(plan.pass(c).unwrap() < plan.passes);
                }
                // Each pass holds at most `per` counters.
                for p in 0..plan.passes {
                    assert!(plan.pass_of.iter().filter(|(_, q)| *q == p).count() <= per as usize);
                }
            }
        }
        // Repeats do not cost passes; order does not matter.
        assert_eq!(PassPlan::new(&[3, 1, 3, 1], 1).passes, 2);
        assert_eq!(PassPlan::new(&[3, 1], 1), PassPlan::new(&[1, 3], 1));
    }

    #[test]
    fn per_pass_setting() {
        assert_eq!(per_pass_from(None), Ok(2));
        assert_eq!(per_pass_from(Some(" 3 ")), Ok(3));
        assert!(per_pass_from(Some("0")).is_err());
        assert!(per_pass_from(Some("x"))
            .unwrap_err()
            .contains("QUARRY_COUNTERS_PER_PASS"));
    }

    #[test]
    fn timestamps_wrap_at_valid_bits() {
        assert_eq!(ticks_to_ns(10, 25, 64, 1.0), 15);
        assert_eq!(ticks_to_ns(10, 25, 64, 2.5), 38);
        // 36-bit counter that wrapped between begin and end.
        assert_eq!(ticks_to_ns((1 << 36) - 5, 3, 36, 1.0), 8);
    }

    /// The reference for [`scale_ticks`]: u128 arithmetic.
    fn scale_ref(t: u64, m: u32, s: i32) -> u64 {
        let p = t as u128 * m as u128;
        if s >= 0 {
            if s >= 64 {
                0
            } else {
                (p as u64) << s
            }
        } else if -s >= 96 {
            0
        } else {
            ((p + (1u128 << (-s - 1))) >> -s) as u64
        }
    }

    #[test]
    fn limb_arithmetic_equals_u128_reference() {
        // A small xorshift so the test needs no crate.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edge_t = [
            0,
            1,
            2,
            u32::MAX as u64,
            1 << 32,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
        ];
        let edge_m = [0, 1, 3, 0xff_ffff, 0x80_0001, 0xfe_dcba];
        for s in -100..70 {
            for &t in &edge_t {
                for &m in &edge_m {
                    assert_eq!(
                        scale_ticks(t, m, s),
                        scale_ref(t, m, s),
                        "t={t} m={m} s={s}"
                    );
                }
            }
            for _ in 0..200 {
                let t = next() >> (next() % 64);
                let m = (next() as u32 & 0xff_ffff) >> (next() % 24);
                assert_eq!(
                    scale_ticks(t, m, s),
                    scale_ref(t, m, s),
                    "t={t} m={m} s={s}"
                );
            }
        }
    }

    #[test]
    fn periods_split_exactly() {
        for p in [
            1.0f32,
            2.5,
            0.1,
            83.333_336,
            52.083_332,
            1e-30,
            f32::MIN_POSITIVE / 4.0,
            3e38,
        ] {
            let (m, s) = period_parts(p);
            assert_eq!(m & 1, 1, "{p}");
            assert!(m < 1 << 24);
            assert_eq!(m as f64 * 2f64.powi(s), p as f64, "{p}");
        }
        assert_eq!(period_parts(1.0), (1, 0));
        assert_eq!(period_parts(0.0), (0, 0));
        assert_eq!(period_parts(f32::NAN), (0, 0));
        assert_eq!(period_parts(-1.0), (0, 0));
    }

    #[test]
    fn durations_match_float_rounding_where_floats_are_exact() {
        for p in [1.0f32, 2.5, 0.1, 83.333_336, 52.083_332, 41.666_668] {
            for ticks in [0u64, 1, 7, 999, 123_456, 1 << 28] {
                let f = (ticks as f64 * p as f64).round() as u64;
                assert_eq!(ticks_to_ns(5, 5 + ticks, 64, p), f, "ticks={ticks} p={p}");
            }
        }
    }

    #[test]
    fn render_pass_duration_sums_the_measured_pairs() {
        let pairs = [10, 20, 100, 105, 7, 9, 1, 1_000];
        assert_eq!(render_pass_ns(&pairs, 0, 64, 1.0), 0);
        assert_eq!(render_pass_ns(&pairs, 2, 64, 1.0), 15);
        assert_eq!(render_pass_ns(&pairs, 3, 64, 2.0), 34);
        // More measured than present: only the pairs there.
        assert_eq!(render_pass_ns(&pairs[..4], 9, 64, 1.0), 15);
        // Wraps instead of overflowing.
        let big = [0, u64::MAX, 0, u64::MAX];
        assert_eq!(render_pass_ns(&big, 2, 64, 1.0), u64::MAX.wrapping_mul(2));
    }

    #[test]
    fn c_chars_are_terminated_and_truncated() {
        let mut a = [1 as std::ffi::c_char; 6];
        fill_c_chars(&mut a, "abcdefgh");
        assert_eq!(a, [97, 98, 99, 100, 101, 0]);
        fill_c_chars(&mut a, "é");
        assert_eq!(&a[2..], &[0, 0, 0, 0]);
    }
}
