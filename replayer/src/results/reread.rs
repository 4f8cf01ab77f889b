//! Re-reading every query the capture read: `vkGetQueryPoolResults` again with the captured
//! flags, copy destinations read back, each query's captured and replayed values paired into a
//! `QueryResult` (performance queries merged across passes, see `crate::perf`), compared and
//! written to the results file.

use std::time::{Duration, Instant};

use ash::vk;
use ash::vk::Handle as _;
use format::record::{self, CounterValue, QueryResult, QueryValues, Record};
use format::TraceWriter;

use crate::clock::{now_ns, WAIT_TIMEOUT};
use crate::compare::Comparison;
use crate::error::ReplayError;
use crate::perf::{self, Merge};
use crate::queries::{self, Decoded, PoolShape, RESULT_WAIT};
use crate::results::begins::Begins;
use crate::session::{CopyKey, CopySource, Session};

/// Where one pass's query results go.
pub(crate) struct QueryReads<'r> {
    pub writer: Option<&'r TraceWriter>,
    pub comparison: &'r mut Comparison,
    pub merge: &'r mut Merge,
    pub loop_index: u32,
    /// Counter pass (see `crate::perf`); only pass 0 writes results other than performance queries.
    pub pass: u32,
    /// First frame reported (`--frames`).
    pub first_frame: u64,
    /// Query reads re-done.
    pub queries: u64,
    /// How the trace began each query (PRECISE, multiview).
    pub begins: Begins,
}

impl QueryReads<'_> {
    fn pool(s: &Session<'_>, pool: u64) -> Result<PoolShape, ReplayError> {
        s.tracked.pools.get(&pool).map(|p| p.shape).ok_or_else(|| {
            ReplayError::Other(format!(
                "query pool 0x{pool:x} has no QueryPool record in the trace"
            ))
        })
    }

    /// The pool's shape, or `None` after counting the read as not compared.
    fn known_pool(
        &mut self,
        s: &Session<'_>,
        seq: u64,
        pool: u64,
        count: u32,
    ) -> Option<PoolShape> {
        match Self::pool(s, pool) {
            Ok(shape) => Some(shape),
            Err(e) => {
                // The type is unknown too: the summary names it by an invalid raw value.
                let shape = PoolShape {
                    query_type: -1,
                    pipeline_statistics: 0,
                    perf_counters: 0,
                };
                self.not_compared(s, seq, pool, shape, count, e.to_string());
                None
            }
        }
    }

    /// The queries of one read, classified together (the queries of a multiview begin compare
    /// by their sum) and written.
    fn emit(&mut self, s: &Session<'_>, read: Vec<QueryResult>) -> Result<(), ReplayError> {
        if s.frame < self.first_frame {
            return Ok(());
        }
        let Some(first) = read.first() else {
            return Ok(());
        };
        if first.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() {
            for q in read {
                self.emit_performance(s, q);
            }
            return Ok(());
        }
        if self.pass > 0 {
            return Ok(());
        }
        self.comparison.add_read(&read);
        self.queries += read.len() as u64;
        if let Some(w) = self.writer {
            for q in read {
                w.write(&Record::QueryResult(q))
                    .map_err(|e| ReplayError::Results(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// A performance query's pass, merged with the other passes' (see `crate::perf`).
    fn emit_performance(&mut self, s: &Session<'_>, q: QueryResult) {
        let Some(plan) = s.perf.plans.get(&q.pool) else {
            let shape = PoolShape {
                query_type: q.query_type,
                pipeline_statistics: 0,
                perf_counters: 0,
            };
            let why = "the performance query pool was read before the replay created it";
            self.not_compared(s, q.seq, q.pool, shape, 1, why.into());
            return;
        };
        if !plan.measures_in(self.pass) {
            return;
        }
        let counters = s
            .tracked
            .pools
            .get(&q.pool)
            .map(|p| p.counters.clone())
            .unwrap_or_default();
        let mut full = vec![None; counters.len()];
        let raw = q.replayed.as_ref().map_or(&[][..], |v| &v.values[..]);
        perf::scatter(plan, self.pass, raw, &mut full);
        self.merge.add(q, full, &counters);
    }

    /// A read whose captured bytes do not hold its queries (none, short, bad layout): they are
    /// counted as not compared with the reason, and the replay goes on.
    fn not_compared(
        &mut self,
        s: &Session<'_>,
        seq: u64,
        pool: u64,
        shape: PoolShape,
        count: u32,
        why: String,
    ) {
        if s.frame >= self.first_frame && self.pass == 0 {
            let why = format!("seq {seq} pool 0x{pool:x}: {why}");
            self.comparison
                .add_not_compared(shape.query_type, count, why);
        }
    }

    /// How the replay lays out the results of `pool`: performance pools measure only this pass's
    /// counters, so their shape and (for reads the replay makes itself) stride shrink to that.
    fn replay_shape(&self, s: &Session<'_>, pool: u64, shape: PoolShape) -> PoolShape {
        match s.perf.plans.get(&pool) {
            Some(plan) if shape.query_type == vk::QueryType::PERFORMANCE_QUERY_KHR.as_raw() => {
                PoolShape {
                    perf_counters: plan.indices_for(self.pass).len() as u32,
                    ..shape
                }
            }
            _ => shape,
        }
    }

    /// Builds the results of queries `first..first+count` of `pool` read at capture seq `seq`.
    #[allow(clippy::too_many_arguments)]
    fn results(
        &mut self,
        s: &Session<'_>,
        seq: u64,
        pool: u64,
        first: u32,
        flags: u32,
        shape: PoolShape,
        captured: &[Decoded],
        captured_meta: (i32, u64),
        replayed: &[Decoded],
        replayed_meta: (i32, u64),
        available_ns: &[u64],
    ) -> Result<(), ReplayError> {
        // The physical device the pool's own device was captured on.
        let cap_dev = match s.tracked.live_pools.get(&pool) {
            Some((device, _)) => s.capture_device_of(*device).cloned(),
            None => s.capture_device.cloned(),
        };
        let device = s
            .tracked
            .live_pools
            .get(&pool)
            .map(|(d, _)| s.query_device(*d));
        let mut stamps: Vec<(u32, u64, u32, u64, u32)> = Vec::new();
        let mut read = Vec::with_capacity(captured.len());
        for (i, (c, r)) in captured.iter().zip(replayed).enumerate() {
            let query = first + i as u32;
            let begin = self.begins.of(pool, query);
            // The queries of a multiview begin after its first were not begun themselves.
            let owner = s
                .tracked
                .query_owner
                .get(&(pool, query))
                .or_else(|| s.tracked.query_owner.get(&(pool, begin?.first)))
                .copied();
            let submit = owner.and_then(|(cb, _)| s.tracked.cmdbuf_submit.get(&cb).copied());
            let is_ts = shape.query_type == vk::QueryType::TIMESTAMP.as_raw();
            let (cap_ts, rep_ts) = if is_ts {
                let fam = submit.map_or(0, |s| s.family);
                let cap_bits = cap_dev
                    .as_ref()
                    .and_then(|d| {
                        d.queue_families
                            .get(fam as usize)
                            .map(|f| f.timestamp_valid_bits)
                    })
                    .unwrap_or(64);
                let cap_period = cap_dev.as_ref().map_or(1.0, |d| d.timestamp_period_ns);
                let rep_fam = submit
                    .and_then(|sub| s.lookup(vk::ObjectType::QUEUE, sub.queue).ok())
                    .and_then(|q| {
                        s.device_for(q)
                            .ok()
                            .and_then(|d| d.queue_family_of.get(&q).copied())
                    })
                    .unwrap_or(0);
                let rep_bits = s
                    .gpu
                    .summary
                    .queue_families
                    .get(rep_fam as usize)
                    .map_or(64, |f| f.timestamp_valid_bits);
                let rep_period = s.gpu.summary.timestamp_period_ns;
                if let (true, true, Some(&cv), Some(&rv)) =
                    (c.available, r.available, c.values.first(), r.values.first())
                {
                    stamps.push((query, cv, cap_bits, rv, rep_bits));
                }
                (
                    (c.available && !c.values.is_empty())
                        .then(|| queries::timestamp_ns(c.values[0], cap_bits, cap_period)),
                    (r.available && !r.values.is_empty())
                        .then(|| queries::timestamp_ns(r.values[0], rep_bits, rep_period)),
                )
            } else {
                (None, None)
            };
            read.push(QueryResult {
                pool,
                query,
                query_type: shape.query_type,
                pipeline_statistics: shape.pipeline_statistics,
                frame: submit.map_or(s.frame, |s| s.frame),
                queue: submit.map_or(0, |s| s.queue),
                command_buffer: owner.map_or(0, |o| o.0),
                loop_index: self.loop_index,
                pass: self.pass,
                seq,
                flags,
                captured: Some(QueryValues {
                    values: c.values.clone(),
                    available: c.available,
                    result: captured_meta.0,
                    host_ns: captured_meta.1,
                }),
                replayed: Some(QueryValues {
                    values: r.values.clone(),
                    available: r.available,
                    result: replayed_meta.0,
                    host_ns: replayed_meta.1,
                }),
                submit_ns: submit.map_or(0, |s| s.submit_ns),
                available_ns: available_ns.get(i).copied().unwrap_or(0),
                captured_gpu_ns: cap_ts,
                replayed_gpu_ns: rep_ts,
                begin,
                device: device.clone(),
            });
        }
        self.emit(s, read)?;
        // Counted where `emit` counts the reads themselves.
        if stamps.len() >= 2 && s.frame >= self.first_frame && self.pass == 0 {
            self.comparison.check_clock_order(seq, pool, &stamps);
        }
        Ok(())
    }

    /// Re-does a captured `vkGetQueryPoolResults` with the captured flags, stride and count.
    /// `outstanding`: replayed work on the read's device may still run (else a query the replay
    /// left unavailable stays so, and is not waited for).
    pub fn reread(
        &mut self,
        s: &mut Session<'_>,
        r: &record::QueryResults,
        outstanding: bool,
    ) -> Result<(), ReplayError> {
        let Some(shape) = self.known_pool(s, r.seq, r.pool, r.count) else {
            return Ok(());
        };
        let captured = match queries::decode(&r.data, r.count, r.stride, r.flags, shape, r.result) {
            Ok(c) => c,
            Err(e) => {
                let why = format!("captured query results: {e}");
                self.not_compared(s, r.seq, r.pool, shape, r.count, why);
                return Ok(());
            }
        };
        let polled = self.poll(s, r, shape, &captured, outstanding);
        let (replayed, result, host_ns, available_ns) = match polled {
            Ok(x) => x,
            Err(e) => {
                let why = format!("replayed vkGetQueryPoolResults: {e}");
                self.not_compared(s, r.seq, r.pool, shape, r.count, why);
                return Ok(());
            }
        };
        self.results(
            s,
            r.seq,
            r.pool,
            r.first,
            r.flags,
            shape,
            &captured,
            (r.result, r.host_ns),
            &replayed,
            (result, host_ns),
            &available_ns,
        )
    }

    /// Polls the replay's results of a captured `vkGetQueryPoolResults` until the queries the
    /// capture saw available are, or the wait times out, or at once when no replayed work is
    /// `outstanding`: (values, result, host time, each query's availability time).
    #[allow(clippy::type_complexity)]
    fn poll(
        &self,
        s: &Session<'_>,
        r: &record::QueryResults,
        shape: PoolShape,
        captured: &[Decoded],
        outstanding: bool,
    ) -> Result<(Vec<Decoded>, i32, u64, Vec<u64>), ReplayError> {
        let pool = s.lookup(vk::ObjectType::QUERY_POOL, r.pool)?;
        let device = &s.device(r.device)?.device;
        // Poll without WAIT so a replay that diverged cannot hang; keep polling only for queries
        // the capture saw available.
        let flags = r.flags & !RESULT_WAIT;
        let rshape = self.replay_shape(s, r.pool, shape);
        let (rstride, rlen) = if rshape == shape {
            (r.stride, r.data.len())
        } else {
            let per = rshape.bytes_per_query(flags);
            (per, per as usize * r.count as usize)
        };
        let mut buf = vec![0u8; rlen];
        let mut available_ns = vec![0u64; r.count as usize];
        let start = Instant::now();
        loop {
            // SAFETY: buf holds data.len() bytes, the size the capture passed with the same stride/count.
            let res = unsafe {
                (device.fp_v1_0().get_query_pool_results)(
                    device.handle(),
                    vk::QueryPool::from_raw(pool),
                    r.first,
                    r.count,
                    buf.len(),
                    buf.as_mut_ptr().cast(),
                    rstride,
                    vk::QueryResultFlags::from_raw(flags),
                )
            };
            let now = now_ns();
            if res != vk::Result::SUCCESS && res != vk::Result::NOT_READY {
                return Err(ReplayError::vk("vkGetQueryPoolResults", res));
            }
            let d = queries::decode(&buf, r.count, rstride, flags, rshape, res.as_raw())
                .map_err(ReplayError::Other)?;
            for (i, q) in d.iter().enumerate() {
                if q.available && available_ns[i] == 0 {
                    available_ns[i] = now;
                }
            }
            // A multiview begin's queries after its first become available with it or never
            // (lavapipe): once the first is, they are not waited for.
            let first_of = |i: usize| {
                let query = r.first.saturating_add(i as u32);
                self.begins
                    .of(r.pool, query)
                    .filter(|b| b.views() > 1 && b.first != query)
                    .and_then(|b| b.first.checked_sub(r.first))
                    .and_then(|f| d.get(f as usize))
            };
            let done = captured.iter().zip(&d).enumerate().all(|(i, (c, q))| {
                !c.available || q.available || first_of(i).is_some_and(|f| f.available)
            });
            if done || !outstanding || start.elapsed() > WAIT_TIMEOUT {
                break Ok((d, res.as_raw(), now, available_ns));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Reads back a `vkCmdCopyQueryPoolResults` destination once its submission completed.
    pub fn read_copy(
        &mut self,
        s: &mut Session<'_>,
        c: &record::QueryCopy,
    ) -> Result<(), ReplayError> {
        // Only bytes the replay GPU wrote for this copy are compared: saved before a host write
        // reached them, or read live when nothing did (see `session::copies`).
        let key = CopyKey {
            seq: c.seq,
            command_buffer: c.command_buffer,
            dst_buffer: c.dst_buffer,
            dst_offset: c.dst_offset,
        };
        let source = s.tracked.copies.take(key);
        let Some(shape) = self.known_pool(s, c.seq, c.pool, c.count) else {
            return Ok(());
        };
        let rshape = self.replay_shape(s, c.pool, shape);
        let per = rshape.bytes_per_query(c.flags);
        let len = if c.count == 0 {
            0
        } else {
            c.stride
                .saturating_mul(c.count as u64 - 1)
                .saturating_add(per)
        };
        // With no availability word a copied query is taken as written.
        let ok = vk::Result::SUCCESS.as_raw();
        if c.data.is_empty() && c.count > 0 {
            // The layer records no bytes when it could not read them, or when a later copy may have
            // overwritten them first; its note in the trace says which.
            let why = "the capture recorded no bytes for this copy (the trace's Note records, in \
                       `quarry dump`, say why)"
                .to_string();
            self.not_compared(s, c.seq, c.pool, shape, c.count, why);
            return Ok(());
        }
        let captured = match queries::decode(&c.data, c.count, c.stride, c.flags, shape, ok) {
            Ok(d) => d,
            Err(e) => {
                let why = format!("captured query copy: {e}");
                self.not_compared(s, c.seq, c.pool, shape, c.count, why);
                return Ok(());
            }
        };
        let read = match source {
            None => Err(
                "no replayed run of this copy is left to read (its command buffer was \
                 not submitted since it was recorded, or its destination buffer was not bound)"
                    .to_string(),
            ),
            Some(CopySource::Saved(bytes)) => bytes,
            Some(CopySource::Live { dst, queue }) => s
                .wait_device_of_queue(queue)
                .and_then(|()| s.read_memory(dst.memory, dst.start, len.min(dst.len)))
                .map_err(|e| e.to_string()),
        };
        let read = read.and_then(|mut b| {
            if (b.len() as u64) < len {
                return Err(format!(
                    "{} replayed bytes hold fewer than the {len} the copy wrote",
                    b.len()
                ));
            }
            b.truncate(len as usize);
            Ok(b)
        });
        let replayed =
            read.and_then(|b| queries::decode(&b, c.count, c.stride, c.flags, rshape, ok));
        let replayed = match replayed {
            Ok(r) => r,
            Err(why) => {
                let why = format!("replayed query copy: {why}");
                self.not_compared(s, c.seq, c.pool, shape, c.count, why);
                return Ok(());
            }
        };
        let now = now_ns();
        let avail: Vec<u64> = replayed
            .iter()
            .map(|q| if q.available { now } else { 0 })
            .collect();
        self.results(
            s,
            c.seq,
            c.pool,
            c.first,
            c.flags,
            shape,
            &captured,
            (ok, c.host_ns),
            &replayed,
            (ok, now),
            &avail,
        )
    }
}

/// Writes one loop's merged performance-query results: a `CounterValue` per measured counter
/// (with the pass that measured it) and the query itself; returns how many queries it wrote.
pub(crate) fn write_merged(
    merge: Merge,
    writer: Option<&TraceWriter>,
    comparison: &mut Comparison,
) -> Result<u64, ReplayError> {
    let mut n = 0;
    for m in merge.finish() {
        let q = m.result;
        let captured = q.captured.as_ref().filter(|v| v.available);
        if let Some(w) = writer {
            for (i, (counter, v)) in m.counters.iter().zip(&m.values).enumerate() {
                let Some((raw, pass)) = v else { continue };
                w.write(&Record::CounterValue(CounterValue {
                    counter: counter.clone(),
                    pass: *pass,
                    frame: q.frame,
                    command_buffer: q.command_buffer,
                    render_pass: None,
                    value: queries::counter_value(*raw, counter.storage),
                    captured: captured
                        .and_then(|c| c.values.get(i))
                        .map(|c| queries::counter_value(*c, counter.storage)),
                }))
                .map_err(|e| ReplayError::Results(e.to_string()))?;
            }
        }
        comparison.add(&q, false);
        n += 1;
        if let Some(w) = writer {
            w.write(&Record::QueryResult(q))
                .map_err(|e| ReplayError::Results(e.to_string()))?;
        }
    }
    Ok(n)
}

/// Whether every query of the range was written by a command buffer this replay submitted
/// (in a trimmed trace, work submitted before the trim point never runs). A query of a multiview
/// begin after its first was written by the command buffer that began the first.
pub(crate) fn ran_in_replay(
    s: &Session<'_>,
    begins: &Begins,
    pool: u64,
    first: u32,
    count: u32,
) -> bool {
    let owners = &s.tracked.query_owner;
    (first..first.saturating_add(count)).all(|q| {
        owners
            .get(&(pool, q))
            .or_else(|| owners.get(&(pool, begins.of(pool, q)?.first)))
            .is_some_and(|(cb, _)| s.tracked.cmdbuf_submit.contains_key(cb))
    })
}
