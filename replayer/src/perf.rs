//! Multi-pass replay of performance query pools.
//!
//! A captured performance pool names counters of the capture device. On the replay device each
//! counter is matched (by UUID, else by name and unit) and the matched set is split into groups
//! that each need a single pass there. The trace is then replayed once per group ("pass"): in pass
//! `p` every performance pool is created with group `p`'s counters only, so each replayed
//! submission measures in one go; the values of all passes are merged per query afterwards.
//!
//! The application's own extra passes (submissions whose `counterPassIndex` is above 0) would run
//! the queries again without a reset, so their command buffers are dropped from the submission
//! (semaphores and fences are kept, so synchronisation still matches the capture).

use std::collections::BTreeMap;

use format::record::{PerfCounterDesc, QueryResult};

/// One replay-device counter as the matcher sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCounter {
    pub uuid: [u8; 16],
    pub name: String,
    pub unit: u32,
}

impl From<&PerfCounterDesc> for DeviceCounter {
    fn from(d: &PerfCounterDesc) -> Self {
        DeviceCounter {
            uuid: d.uuid,
            name: d.name.clone(),
            unit: d.unit,
        }
    }
}

/// How a captured performance pool is measured on the replay device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolPlan {
    /// Per captured counter position: the replay device's counter index, if one matched.
    pub replay_index: Vec<Option<u32>>,
    /// Captured counter positions measured in each pass.
    pub groups: Vec<Vec<usize>>,
}

impl PoolPlan {
    /// Captured positions measured in replay pass `pass` (the pool is created with these).
    /// Passes beyond this pool's own re-measure its first group and their values are ignored.
    pub fn group_for(&self, pass: u32) -> &[usize] {
        self.groups
            .get(pass as usize)
            .or_else(|| self.groups.first())
            .map_or(&[], Vec::as_slice)
    }

    /// Whether pass `pass` contributes values for this pool.
    pub fn measures_in(&self, pass: u32) -> bool {
        (pass as usize) < self.groups.len()
    }

    /// Replay-device counter indices for pass `pass`.
    pub fn indices_for(&self, pass: u32) -> Vec<u32> {
        self.group_for(pass)
            .iter()
            .filter_map(|&i| self.replay_index[i])
            .collect()
    }
}

/// Matches captured counters to the replay device's: UUID first, then name and unit.
pub fn match_counters(captured: &[PerfCounterDesc], device: &[DeviceCounter]) -> Vec<Option<u32>> {
    captured
        .iter()
        .map(|c| {
            device
                .iter()
                .position(|d| d.uuid == c.uuid)
                .or_else(|| {
                    device
                        .iter()
                        .position(|d| d.name == c.name && d.unit == c.unit)
                })
                .map(|i| i as u32)
        })
        .collect()
}

/// Splits the matched counters into groups that each need one pass (`passes(indices)` is the
/// device's `vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR`). Greedy, in captured order.
/// With `forced`, exactly that many groups: an error when the counters need more, otherwise the
/// counters are spread evenly (each spread group is checked to need one pass).
pub fn plan(
    replay_index: Vec<Option<u32>>,
    passes: impl Fn(&[u32]) -> u32,
    forced: Option<u32>,
) -> Result<PoolPlan, String> {
    let matched: Vec<usize> = (0..replay_index.len())
        .filter(|&i| replay_index[i].is_some())
        .collect();
    let idx = |g: &[usize]| -> Vec<u32> { g.iter().filter_map(|&i| replay_index[i]).collect() };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &i in &matched {
        if passes(&idx(&[i])) > 1 {
            return Err(format!(
                "replay device counter {} needs {} passes on its own; quarry replays counters that fit in one pass",
                replay_index[i].unwrap_or(0),
                passes(&idx(&[i]))
            ));
        }
        match groups.last_mut() {
            Some(g) if passes(&idx(&[g.as_slice(), &[i]].concat())) == 1 => g.push(i),
            _ => groups.push(vec![i]),
        }
    }
    if let Some(n) = forced {
        let n = n as usize;
        if n < groups.len() {
            return Err(format!(
                "--passes {n}: the counters need at least {} passes on the replay device",
                groups.len()
            ));
        }
        if n > groups.len() && !matched.is_empty() {
            // Spread evenly: group k takes counters [k*len/n, (k+1)*len/n).
            let len = matched.len();
            let spread: Vec<Vec<usize>> = (0..n)
                .map(|k| matched[k * len / n..(k + 1) * len / n].to_vec())
                .collect();
            if spread.iter().all(|g| g.is_empty() || passes(&idx(g)) == 1) {
                groups = spread.into_iter().filter(|g| !g.is_empty()).collect();
            }
        }
    }
    Ok(PoolPlan {
        replay_index,
        groups,
    })
}

/// Captured positions of `plan.group_for(pass)`'s values scattered into a full-length vector:
/// `values[j]` (one per counter of the pass's pool) lands at the captured position of counter j.
pub fn scatter(plan: &PoolPlan, pass: u32, values: &[u64], out: &mut [Option<(u64, u32)>]) {
    let measured: Vec<usize> = plan
        .group_for(pass)
        .iter()
        .copied()
        .filter(|&i| plan.replay_index[i].is_some())
        .collect();
    for (j, &pos) in measured.iter().enumerate() {
        if let (Some(v), Some(slot)) = (values.get(j), out.get_mut(pos)) {
            *slot = Some((*v, pass));
        }
    }
}

/// One performance query read, merged across passes.
pub struct Merged {
    /// The result as built in the first pass that read it; `replayed.values` becomes the merge.
    pub result: QueryResult,
    /// Per captured counter: (value, the pass that measured it).
    pub values: Vec<Option<(u64, u32)>>,
    /// The captured pool's counters, in captured order.
    pub counters: Vec<PerfCounterDesc>,
}

/// Performance-query results of one loop, merged across passes before they are written.
#[derive(Default)]
pub struct Merge {
    /// (read seq, query) -> the merge so far.
    pub results: BTreeMap<(u64, u32), Merged>,
}

impl Merge {
    /// Records one pass's replayed values of one query read (`values` already scattered to captured
    /// positions, see [`scatter`]).
    pub fn add(
        &mut self,
        q: QueryResult,
        values: Vec<Option<(u64, u32)>>,
        counters: &[PerfCounterDesc],
    ) {
        let key = (q.seq, q.query);
        match self.results.get_mut(&key) {
            None => {
                self.results.insert(
                    key,
                    Merged {
                        result: q,
                        values,
                        counters: counters.to_vec(),
                    },
                );
            }
            Some(m) => {
                for (slot, v) in m.values.iter_mut().zip(values) {
                    if v.is_some() {
                        *slot = v;
                    }
                }
                if let (Some(p), Some(n)) = (m.result.replayed.as_mut(), q.replayed.as_ref()) {
                    p.available &= n.available;
                    p.host_ns = p.host_ns.max(n.host_ns);
                }
                m.result.available_ns = m.result.available_ns.max(q.available_ns);
            }
        }
    }

    /// The merged results in read order: replayed values hold each counter's value from the pass
    /// that measured it (0 where none did).
    pub fn finish(self) -> Vec<Merged> {
        self.results
            .into_values()
            .map(|mut m| {
                if let Some(r) = m.result.replayed.as_mut() {
                    r.values = m.values.iter().map(|v| v.map_or(0, |x| x.0)).collect();
                }
                m
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(name: &str, uuid: u8, unit: u32) -> PerfCounterDesc {
        PerfCounterDesc {
            uuid: [uuid; 16],
            name: name.into(),
            category: String::new(),
            description: String::new(),
            unit,
            storage: 5,
            scope: 0,
        }
    }

    fn dev(name: &str, uuid: u8, unit: u32) -> DeviceCounter {
        DeviceCounter {
            uuid: [uuid; 16],
            name: name.into(),
            unit,
        }
    }

    #[test]
    fn matches_by_uuid_then_name_and_unit() {
        let captured = [
            desc("a", 1, 0),
            desc("b", 2, 0),
            desc("c", 3, 1),
            desc("d", 4, 0),
        ];
        let device = [dev("x", 1, 0), dev("b", 9, 0), dev("c", 8, 2)];
        // a by UUID, b by name+unit, c's unit differs, d is absent.
        assert_eq!(
            match_counters(&captured, &device),
            vec![Some(0), Some(1), None, None]
        );
    }

    /// Two counters fit per pass.
    fn two_per_pass(ix: &[u32]) -> u32 {
        (ix.len() as u32).div_ceil(2).max(1)
    }

    #[test]
    fn greedy_groups_need_one_pass_each() {
        let p = plan(
            vec![Some(0), Some(1), None, Some(2), Some(3), Some(4)],
            two_per_pass,
            None,
        )
        .unwrap();
        assert_eq!(p.groups, vec![vec![0, 1], vec![3, 4], vec![5]]);
        assert_eq!(p.indices_for(1), vec![2, 3]);
        assert_eq!(p.group_for(7), &[0, 1]);
        assert!(p.measures_in(2) && !p.measures_in(3));
    }

    #[test]
    fn forced_passes_spread_or_refuse() {
        let ix = vec![Some(0), Some(1), Some(2), Some(3)];
        let p = plan(ix.clone(), two_per_pass, Some(4)).unwrap();
        assert_eq!(p.groups, vec![vec![0], vec![1], vec![2], vec![3]]);
        let e = plan(ix, two_per_pass, Some(1)).unwrap_err();
        assert!(e.contains("at least 2 passes"), "{e}");
    }

    #[test]
    fn a_counter_needing_passes_alone_is_refused() {
        let e = plan(vec![Some(0)], |_| 3, None).unwrap_err();
        assert!(e.contains("needs 3 passes"), "{e}");
    }

    #[test]
    fn scatter_places_values_at_captured_positions() {
        let p = plan(vec![Some(0), None, Some(1), Some(2)], two_per_pass, None).unwrap();
        let mut out = vec![None; 4];
        scatter(&p, 0, &[10, 20], &mut out);
        scatter(&p, 1, &[30], &mut out);
        assert_eq!(out, vec![Some((10, 0)), None, Some((20, 0)), Some((30, 1))]);
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;
    use format::record::QueryValues;

    fn result(seq: u64, values: Vec<u64>, available: bool) -> QueryResult {
        QueryResult {
            pool: 1,
            query: 0,
            query_type: 1_000_116_000,
            pipeline_statistics: 0,
            frame: 0,
            queue: 0,
            command_buffer: 0,
            loop_index: 0,
            pass: 0,
            seq,
            flags: 0,
            captured: None,
            replayed: Some(QueryValues {
                values,
                available,
                result: 0,
                host_ns: seq,
            }),
            submit_ns: 0,
            available_ns: 0,
            captured_gpu_ns: None,
            replayed_gpu_ns: None,
            begin: None,
            device: None,
        }
    }

    #[test]
    fn passes_merge_into_one_result() {
        let mut m = Merge::default();
        m.add(result(5, vec![1, 2], true), vec![Some((1, 0)), None], &[]);
        m.add(result(5, vec![3], false), vec![None, Some((3, 1))], &[]);
        let out = m.finish();
        assert_eq!(out.len(), 1);
        let r = out[0].result.replayed.as_ref().unwrap();
        assert_eq!(r.values, vec![1, 3]);
        assert!(!r.available, "unavailable in any pass is unavailable");
        assert_eq!(out[0].values, vec![Some((1, 0)), Some((3, 1))]);
    }
}
