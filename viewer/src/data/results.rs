//! Results files streamed into the dataset: query rows matched across files, counter samples.

use format::query::{QueryKind, ValueSlots};
use format::record::{CounterValue, QueryResult};

use super::{CounterRow, Current, DatasetBuilder, Replayed, Row, Times};

impl DatasetBuilder {
    pub(super) fn result_query(&mut self, q: QueryResult) {
        let Current::Results(fi) = self.current else {
            self.note("QueryResult record in a trace file (ignored)".to_owned());
            return;
        };
        if let Some(s) = self.summary.as_mut() {
            s.queries += 1;
        }
        let perf = q
            .captured
            .as_ref()
            .or(q.replayed.as_ref())
            .map(|v| v.values.len())
            .unwrap_or(0);
        let pi = self.pool_for(
            q.pool,
            q.query_type,
            q.pipeline_statistics,
            if QueryKind::from_raw(q.query_type).slots() == ValueSlots::Counters {
                perf
            } else {
                0
            },
        );
        let key = (q.seq, q.pool, q.query, q.loop_index, q.pass);
        let replayed = q.replayed.map(|values| Replayed {
            values,
            gpu_ns: q.replayed_gpu_ns,
            clock: None,
            submit_ns: q.submit_ns,
            available_ns: q.available_ns,
            same_device: true,
            classified: None,
        });
        // Files replayed from one trace list queries in the same order: try that before hashing.
        let cursor = self.file_row_cursor;
        self.file_row_cursor += 1;
        let same_pos = self.result_rows.get(cursor).filter(|r| {
            (
                r.seq,
                self.ds.pools[r.pool as usize].handle,
                r.query,
                r.loop_index,
                r.pass,
            ) == key
        });
        let existing = if same_pos.is_some() {
            Some(cursor as u32)
        } else if fi > 0 {
            if self.result_key.is_empty() {
                // First miss: index every row so far.
                for (i, r) in self.result_rows.iter().enumerate() {
                    let h = self.ds.pools[r.pool as usize].handle;
                    self.result_key
                        .insert((r.seq, h, r.query, r.loop_index, r.pass), i as u32);
                }
            }
            self.result_key.get(&key).copied()
        } else {
            None
        };
        let row_idx = match existing {
            Some(r) => {
                let row = &mut self.result_rows[r as usize];
                if row.captured.is_none() {
                    row.captured = q.captured;
                    row.captured_gpu_ns = q.captured_gpu_ns;
                }
                if row.begin.is_none() {
                    row.begin = q.begin;
                }
                r as usize
            }
            None => {
                let r = self.result_rows.len();
                let host = q.captured.as_ref().map(|c| c.host_ns).unwrap_or(0);
                self.result_rows.push(Row {
                    frame: q.frame,
                    queue: q.queue,
                    command_buffer: q.command_buffer,
                    pool: pi,
                    query: q.query,
                    seq: q.seq,
                    loop_index: q.loop_index,
                    pass: q.pass,
                    flags: q.flags,
                    captured: q.captured,
                    captured_gpu_ns: q.captured_gpu_ns,
                    captured_clock: None,
                    times: Times {
                        available: host,
                        ..Times::default()
                    },
                    label: None,
                    begin: q.begin,
                });
                self.result_types.push(q.query_type);
                if !self.result_key.is_empty() {
                    self.result_key.insert(key, r as u32);
                }
                r
            }
        };
        let col = &mut self.ds.replayed[fi];
        if col.len() == row_idx {
            // The usual case: rows arrive in order.
            col.push(replayed);
        } else {
            if col.len() < row_idx {
                col.resize(row_idx + 1, None);
            }
            col[row_idx] = replayed;
        }
    }

    pub(super) fn result_counter(&mut self, c: CounterValue) {
        let Current::Results(fi) = self.current else {
            self.note("CounterValue record in a trace file (ignored)".to_owned());
            return;
        };
        // Matched as `quarry compare` matches samples (format::runs::CounterKey): by name and
        // unit, not UUID or pass, which differ between drivers.
        let name = match self.counter_names.get(c.counter.name.as_str()) {
            Some(&id) => id,
            None => {
                let id = self.counter_names.len() as u32;
                self.counter_names.insert(c.counter.name.clone(), id);
                id
            }
        };
        let key = (
            name,
            c.counter.unit,
            c.frame,
            c.command_buffer,
            c.render_pass,
        );
        let n_files = self.ds.replayed.len();
        let idx = *self.counter_key.entry(key).or_insert_with(|| {
            self.ds.counters.push(CounterRow {
                name: c.counter.name.clone(),
                category: c.counter.category.clone(),
                description: c.counter.description.clone(),
                unit: c.counter.unit,
                pass: c.pass,
                frame: c.frame,
                command_buffer: c.command_buffer,
                render_pass: c.render_pass,
                captured: None,
                values: Vec::new(),
                render_pass_name: None,
                label: None,
            });
            self.ds.counters.len() - 1
        });
        let row = &mut self.ds.counters[idx];
        if row.values.len() < n_files {
            row.values.resize(n_files, None);
        }
        row.values[fi] = Some(c.value);
        if row.captured.is_none() {
            row.captured = c.captured;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::data::{outcome, Dataset, Replayed};
    use crate::synth;
    use format::query::Outcome;
    use format::record::QueryValues;
    use std::path::PathBuf;

    fn replayed(values: Vec<u64>, same_device: bool) -> Replayed {
        Replayed {
            values: QueryValues {
                values,
                available: true,
                ..QueryValues::default()
            },
            gpu_ns: None,
            clock: None,
            submit_ns: 0,
            available_ns: 0,
            same_device,
            classified: None,
        }
    }

    /// The viewer and exports read a changed pipeline statistic as `replay --compare` does: a
    /// mismatch on the capture device, a variation on another one (the file says which).
    #[test]
    fn same_device_comes_from_each_results_file() {
        let stats = 1; // VK_QUERY_TYPE_PIPELINE_STATISTICS
        let captured = QueryValues {
            values: vec![1, 2],
            available: true,
            ..QueryValues::default()
        };
        let on = |same| {
            outcome(
                stats,
                Some(&captured),
                Some(&replayed(vec![1, 3], same)),
                None,
            )
        };
        assert_eq!(on(true), Some(Outcome::Mismatch));
        assert_eq!(on(false), Some(Outcome::Variation));

        // synth::results replays on its capture device; the second file says it captured elsewhere.
        let (hs, s) = synth::results(40, 1, "llvmpipe (LLVM 15.0.6, 256 bits)", 0);
        let (ho, mut o) = synth::results(40, 1, "NVIDIA H100 80GB HBM3", 0);
        for r in &mut o {
            if let format::record::Record::ReplayInfo(i) = r {
                i.capture_device = Some(synth::device("llvmpipe", "llvmpipe"));
            }
        }
        let ds = Dataset::from_records(vec![
            (PathBuf::from("same.qres"), hs, s),
            (PathBuf::from("other.qres"), ho, o),
        ]);
        let flags = |f: usize| {
            ds.replayed[f]
                .iter()
                .flatten()
                .map(|r| r.same_device)
                .collect::<Vec<_>>()
        };
        assert!(!flags(0).is_empty() && flags(0).iter().all(|&s| s));
        assert!(!flags(1).is_empty() && flags(1).iter().all(|&s| !s));
    }
}
