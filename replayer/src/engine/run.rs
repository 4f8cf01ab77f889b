//! One pass over the trace's records: calls replayed, memory writes applied, the state query
//! reads need (pools, query owners, submissions) tracked, and every query read re-done.

use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use format::record::{self, QueryOpKind, Record};
use format::TraceReader;

use super::ahead::{self, Busy, Msg};
use super::{stall, watchdog, Progress};
use crate::clock::{now_ns, WAIT_TIMEOUT};
use crate::error::ReplayError;
use crate::inject::InjectState;
use crate::queries::PoolShape;
use crate::results::reread::{ran_in_replay, QueryReads};
use crate::session::{CopyDst, CopyKey, PoolState, Session, SubmitInfo};
use crate::validate::{Action, Validator};

/// How the checks ended the records: the devices still busy at the end of the trace, or the
/// error (a read error names the last call replayed).
fn ended(end: ahead::End, last: &Option<(u64, Arc<str>)>) -> Result<Busy, ReplayError> {
    match end {
        ahead::End::Done(busy) => Ok(busy),
        ahead::End::Refused(e) => Err(e),
        ahead::End::Read(e) => Err(ReplayError::Trace(match last {
            Some((seq, name)) => format!("{e} (the last call replayed was {seq} {name})"),
            None => e,
        })),
    }
}

/// A query read of a query no replayed submission can make available (see `ahead::Item`).
fn unreachable_query(r: &record::QueryResults, query: u32, cb: u64) -> ReplayError {
    ReplayError::Invalid {
        seq: r.seq,
        command: "vkGetQueryPoolResults".into(),
        message: format!(
            "query {query} of pool 0x{:x} was available in the capture, but command buffer 0x{cb:x} that writes it was never submitted in the replay",
            r.pool
        ),
    }
}

/// One loop over the trace.
pub(super) struct Run<'r, 's> {
    pub(super) reader: &'r TraceReader,
    pub(super) session: Session<'s>,
    /// `--counters`: performance queries injected around command buffers or render passes.
    pub(super) inject: Option<InjectState>,
    /// Where the re-read queries go.
    pub(super) reads: QueryReads<'r>,
    /// Last frame replayed (`--frames`).
    pub(super) last_frame: Option<u64>,
    pub(super) progress: &'r mut dyn Progress,
    /// Trace command id -> vkstream command id.
    pub(super) command_map: Vec<Option<u32>>,
    pub(super) command_names: Vec<Arc<str>>,
    pub(super) frame_start: u64,
    pub(super) frame_ns: Vec<(u64, u64)>,
    pub(super) dispatch_ns: u64,
    /// CPU time of the checks thread (read, decode, checks); 0 when they ran on this one.
    pub(super) checks_ns: u64,
    pub(super) calls: u64,
    /// The trace starts with a state snapshot (trimmed capture).
    pub(super) trimmed: bool,
    /// Query reads left out because their queries ran before the trim point.
    pub(super) skipped_before_trim: u64,
    /// The checks every call passes before the driver sees it (run ahead, `ahead`).
    pub(super) validator: Validator,
    /// A wait ran out while the GPU was still busy: the session must not be torn down
    /// (`stall`).
    pub(super) abandoned: bool,
}

impl Run<'_, '_> {
    pub(super) fn run(&mut self) -> Result<(), ReplayError> {
        /// The watchdog looks on while the loop runs, however it ends.
        struct Watched;
        impl Drop for Watched {
            fn drop(&mut self) {
                watchdog::active(false);
            }
        }
        watchdog::active(true);
        let _watched = Watched;
        let reader = self.reader;
        let validator = std::mem::take(&mut self.validator);
        // One CPU: a second thread would only take turns with this one.
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return self.replay_inline(ahead::Ahead::new(Some(validator)));
        }
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel(ahead::DEPTH);
            let (back, spent) = std::sync::mpsc::channel();
            let checks = std::thread::Builder::new()
                .name("quarry-checks".into())
                .spawn_scoped(s, move || ahead::run(reader, Some(validator), tx, spent))
                .map_err(|e| ReplayError::Other(format!("cannot start the checks thread: {e}")))?;
            // Returning drops `rx`: the checks thread stops at its next record.
            let r = self.replay(rx, back);
            if let Ok(stats) = checks.join() {
                self.checks_ns = stats.cpu_ns;
            }
            r
        })
    }

    /// Replays what the checks thread hands over, in trace order.
    fn replay(
        &mut self,
        rx: Receiver<Msg>,
        back: Sender<Vec<ahead::Item>>,
    ) -> Result<(), ReplayError> {
        let mut last: Option<(u64, Arc<str>)> = None;
        let busy = 'records: loop {
            watchdog::step(last.as_ref().map_or(0, |l| l.0), watchdog::CHECKS);
            let items = match rx.recv() {
                Ok(Msg::Items(items)) => items,
                Ok(Msg::End(end)) => break ended(end, &last)?,
                Err(_) => {
                    return Err(ReplayError::Other(
                        "internal error: the checks thread stopped early".into(),
                    ))
                }
            };
            for item in &items {
                if !self.record(item, &mut last)? {
                    break 'records item.busy;
                }
            }
            // Freed where they were allocated, off this thread.
            let _ = back.send(items);
        };
        self.finish(&busy, &last)
    }

    /// [`Run::replay`] with the checks on this thread, record by record.
    fn replay_inline(&mut self, mut checks: ahead::Ahead) -> Result<(), ReplayError> {
        let mut last: Option<(u64, Arc<str>)> = None;
        let mut end = Err(ReplayError::Other(
            "internal error: the checks ended without a verdict".into(),
        ));
        checks.each(self.reader, |ev| match ev {
            ahead::Event::Item(item) => match self.record(&item, &mut last) {
                Ok(true) => true,
                Ok(false) => {
                    end = Ok(item.busy);
                    false
                }
                Err(e) => {
                    end = Err(e);
                    false
                }
            },
            ahead::Event::End(e) => {
                end = ended(e, &last);
                false
            }
        });
        self.finish(&end?, &last)
    }

    /// After the last record: the work still running settles, bounded, then every device idles.
    fn finish(&mut self, busy: &Busy, last: &Option<(u64, Arc<str>)>) -> Result<(), ReplayError> {
        if let Some((seq, name)) = last {
            self.settle_all(busy).map_err(|e| e.at(*seq, name))?;
        }
        self.session.wait_all_devices()
    }

    /// One record; false when the replay ends here (`--frames`).
    fn record(
        &mut self,
        item: &ahead::Item,
        last: &mut Option<(u64, Arc<str>)>,
    ) -> Result<bool, ReplayError> {
        let ahead::Item {
            rec,
            call,
            action,
            busy_before,
            busy,
            unreachable,
        } = item;
        let (action, busy) = (*action, *busy);
        if let Record::QueryOp(op) = rec {
            self.reads.begins.op(op);
        }
        match rec {
            Record::CommandTable(names) => {
                self.command_map = names.iter().map(|n| vkstream::command_id(n)).collect();
                self.command_names = names.iter().map(|n| Arc::from(n.as_str())).collect();
            }
            Record::Call(c) => {
                let id = self.command_map.get(c.cmd as usize).copied().flatten();
                watchdog::step(c.seq, id.unwrap_or(watchdog::OTHER));
                let name: Arc<str> = match self.command_names.get(c.cmd as usize) {
                    Some(n) => n.clone(),
                    None => format!("command #{}", c.cmd).into(),
                };
                let Some(call) = call else {
                    return Err(ReplayError::Other(format!(
                        "internal error: call {} reached the replay undecoded",
                        c.seq
                    )));
                };
                self.call(c, call, &name, action, busy_before, &busy)?;
                *last = Some((c.seq, name));
                if self.calls.is_multiple_of(1024) {
                    self.progress.calls_replayed(self.calls);
                }
            }
            Record::MemoryWrite(w) => {
                watchdog::step(w.seq, watchdog::MEMORY_WRITE);
                let bytes = self
                    .reader
                    .payload_bytes(&w.data)
                    .map_err(|e| ReplayError::Call {
                        seq: w.seq,
                        command: "memory write".into(),
                        message: format!("memory contents missing from the trace: {e}"),
                    })?;
                self.session
                    .write_memory(w.memory, w.offset, &bytes)
                    .map_err(|e| e.at(w.seq, "memory write"))?;
            }
            Record::Frame(f) => {
                let now = now_ns();
                if f.index >= self.reads.first_frame {
                    self.frame_ns
                        .push((f.index, now.saturating_sub(self.frame_start)));
                }
                self.frame_start = now;
                self.session.frame = f.index + 1;
                if self.last_frame.is_some_and(|l| f.index >= l) {
                    return Ok(false);
                }
            }
            Record::QueryPool(p) => {
                self.session.tracked.pools.insert(
                    p.pool,
                    PoolState {
                        shape: PoolShape {
                            query_type: p.query_type,
                            pipeline_statistics: p.pipeline_statistics,
                            perf_counters: p.perf_counters.len() as u32,
                        },
                        counters: p.perf_counters.clone(),
                    },
                );
            }
            Record::QueryOp(op) => match op.kind {
                QueryOpKind::Begin { query, flags, .. } => {
                    let precise = flags & vk::QueryControlFlags::PRECISE.as_raw() != 0;
                    self.session
                        .tracked
                        .query_owner
                        .insert((op.pool, query), (op.command_buffer, precise));
                }
                QueryOpKind::Timestamp { query, .. } | QueryOpKind::Write { query } => {
                    self.session
                        .tracked
                        .query_owner
                        .insert((op.pool, query), (op.command_buffer, false));
                }
                _ => {}
            },
            Record::Submit(s) => {
                let now = now_ns();
                for cb in &s.command_buffers {
                    self.session.tracked.cmdbuf_submit.insert(
                        *cb,
                        SubmitInfo {
                            queue: s.queue,
                            family: s.queue_family,
                            submit_ns: now,
                            frame: s.frame,
                        },
                    );
                }
            }
            Record::StateBegin(b) => {
                self.trimmed = true;
                self.session.frame = b.first_frame;
            }
            // The first frame's time excludes rebuilding the state.
            Record::StateEnd(_) => self.frame_start = now_ns(),
            Record::QueryResults(r)
                if self.trimmed
                    && !ran_in_replay(
                        &self.session,
                        &self.reads.begins,
                        r.pool,
                        r.first,
                        r.count,
                    ) =>
            {
                self.skipped_before_trim += 1;
            }
            Record::QueryCopy(c)
                if self.trimmed
                    && !self
                        .session
                        .tracked
                        .cmdbuf_submit
                        .contains_key(&c.command_buffer) =>
            {
                self.skipped_before_trim += 1;
            }
            Record::QueryResults(r) => {
                watchdog::step(r.seq, watchdog::QUERY_READ);
                if let Some((query, cb)) = *unreachable {
                    return Err(unreachable_query(r, query, cb));
                }
                let outstanding = busy.has(r.device);
                // A read with VK_QUERY_RESULT_WAIT_BIT blocks in the driver, with no
                // timeout (on lavapipe any read does): the work it waits for ends first.
                let wait = r.flags & vk::QueryResultFlags::WAIT.as_raw() != 0;
                if outstanding && (wait || stall::blocks_while_busy(self.session.gpu)) {
                    self.settle(r.device, &busy, WAIT_TIMEOUT)
                        .map_err(|e| e.at(r.seq, "vkGetQueryPoolResults"))?;
                }
                let t = Instant::now();
                self.reads
                    .reread(&mut self.session, r, outstanding)
                    .map_err(|e| e.at(r.seq, "vkGetQueryPoolResults"))?;
                // A read that waited the whole time while work ran: is the GPU stuck?
                if outstanding && t.elapsed() >= WAIT_TIMEOUT {
                    self.settle(r.device, &busy, stall::AFTER_ERROR)
                        .map_err(|e| e.at(r.seq, "vkGetQueryPoolResults"))?;
                }
            }
            Record::QueryCopy(c) => {
                watchdog::step(c.seq, watchdog::QUERY_COPY);
                self.settle_all(&busy)
                    .map_err(|e| e.at(c.seq, "vkCmdCopyQueryPoolResults"))?;
                self.reads
                    .read_copy(&mut self.session, c)
                    .map_err(|e| e.at(c.seq, "vkCmdCopyQueryPoolResults"))?
            }
            _ => {}
        }
        Ok(true)
    }

    /// Waits, at most `limit`, until captured `device`'s submitted work is done: what must come
    /// before a wait without a timeout of its own (an idle wait, a destroy). Work that does not
    /// finish abandons the session (`stall`).
    fn settle(
        &mut self,
        device: u64,
        busy: &Busy,
        limit: std::time::Duration,
    ) -> Result<(), ReplayError> {
        if !busy.has(device) || stall::settles(&self.session, device, limit)? {
            return Ok(());
        }
        self.abandoned = true;
        Err(ReplayError::Other(stall::stalled()))
    }

    /// [`Run::settle`] for every device, `WAIT_TIMEOUT` each.
    fn settle_all(&mut self, busy: &Busy) -> Result<(), ReplayError> {
        if !busy.any() {
            return Ok(());
        }
        let devices: Vec<u64> = self.session.devices.keys().copied().collect();
        for d in devices {
            self.settle(d, busy, WAIT_TIMEOUT)?;
        }
        Ok(())
    }

    /// The captured device a captured queue belongs to (0 when unknown).
    fn device_of_queue(&self, queue: u64) -> u64 {
        self.session
            .lookup(vk::ObjectType::QUEUE, queue)
            .and_then(|q| self.session.device_for(q))
            .map_or(0, |d| d.captured)
    }

    /// A wait the checks asked for before a call (see `validate::Action`); `busy` is what the
    /// checks saw before it.
    fn idle(&mut self, action: Action, busy: &Busy) -> Result<(), ReplayError> {
        match action {
            Action::None => {}
            Action::Queue(q) => {
                self.settle(self.device_of_queue(q), busy, WAIT_TIMEOUT)?;
                self.session.wait_device_of_queue(q)?
            }
            Action::Device(d) => {
                self.settle(d, busy, WAIT_TIMEOUT)?;
                // SAFETY: a live replayed device.
                unsafe { self.session.device(d)?.device.device_wait_idle() }.map_err(|e| {
                    ReplayError::Vk {
                        what: "vkDeviceWaitIdle".into(),
                        result: e,
                    }
                })?
            }
        }
        Ok(())
    }

    /// Replays one checked call: `action` is the wait the checks asked for first, `busy_before`
    /// and `busy` the devices they saw busy before and after it.
    fn call(
        &mut self,
        c: &record::Call,
        call: &vkstream::Call,
        name: &str,
        action: Action,
        busy_before: &Busy,
        busy: &Busy,
    ) -> Result<(), ReplayError> {
        let t0 = Instant::now();
        self.reads.begins.call(call);
        if action != Action::None {
            self.idle(action, busy_before)
                .map_err(|e| e.at(c.seq, name))?;
        }
        // The trace's own idle waits have no timeout: the work they wait for must end first.
        // A semaphore wait replays with the app's timeout, its result unchecked: one the
        // capture saw succeed is done here first, bounded.
        match call {
            vkstream::Call::vkDeviceWaitIdle(p) => self.settle(p.device, busy, WAIT_TIMEOUT),
            vkstream::Call::vkQueueWaitIdle(p) => {
                self.settle(self.device_of_queue(p.queue), busy, WAIT_TIMEOUT)
            }
            vkstream::Call::vkWaitSemaphores(p) | vkstream::Call::vkWaitSemaphoresKHR(p)
                if c.result == 0 =>
            {
                stall::wait_semaphores(&self.session, p)
            }
            _ if stall::blocks_while_busy(self.session.gpu) => {
                match stall::waits_on_semaphores(call) {
                    Some(queue) => self.settle(self.device_of_queue(queue), busy, WAIT_TIMEOUT),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
        .map_err(|e| e.at(c.seq, name))?;
        // A submit's query copies: what they will write over is saved first (see `session::copies`).
        let copies = match submitted_command_buffers(call) {
            Some((queue, cbs)) if c.result >= 0 => {
                let copies = self.session.tracked.copies.copies_of(&cbs);
                for d in &copies {
                    let end = d.start.saturating_add(d.len);
                    self.session.save_copies_over(d.memory, d.start, end);
                }
                Some((queue, copies))
            }
            _ => None,
        };
        let (session, inject) = (&mut self.session, &mut self.inject);
        // A panic below (e.g. a function pointer the driver does not provide) becomes an error
        // naming the call rather than unwinding out of the replay.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the call's handles are translated through the session; everything the
            // driver reads is materialised for the duration of the call.
            unsafe {
                let Some(inject) = inject.as_mut() else {
                    return crate::calls::replay_call(session, call, c);
                };
                crate::inject::before(session, inject, call)?;
                crate::calls::replay_call(session, call, c)?;
                crate::inject::after(session, inject, call)
            }
        }))
        .unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ReplayError::Other(format!(
                "internal error while replaying: {what}"
            )))
        });
        self.dispatch_ns += t0.elapsed().as_nanos() as u64;
        self.calls += 1;
        if r.is_ok() {
            if let Some((queue, copies)) = copies {
                self.session.tracked.copies.submitted(queue, copies);
            }
            track_copies(&mut self.session, call, c.seq);
        }
        if let Some(i) = self.inject.as_mut() {
            if !i.records.is_empty() {
                let records = std::mem::take(&mut i.records);
                if let Some(w) = self.reads.writer {
                    for v in records {
                        w.write(&Record::CounterValue(v))
                            .map_err(|e| ReplayError::Results(e.to_string()))?;
                    }
                }
            }
        }
        r.map_err(|e| e.at(c.seq, name))
    }
}

/// The captured queue and the command buffers a submit call runs in the replay (the app's
/// performance-query passes above 0 keep only their synchronisation, see `calls::submit`).
fn submitted_command_buffers(call: &vkstream::Call) -> Option<(u64, Vec<u64>)> {
    use vkstream::{Call, PNext};
    let runs = |p_next: &[PNext]| {
        !p_next.iter().any(
            |n| matches!(n, PNext::VkPerformanceQuerySubmitInfoKHR(x) if x.counter_pass_index > 0),
        )
    };
    match call {
        Call::vkQueueSubmit(p) => Some((
            p.queue,
            p.p_submits
                .iter()
                .flatten()
                .filter(|si| runs(&si.p_next))
                .flat_map(|si| si.p_command_buffers.iter().flatten().copied())
                .collect(),
        )),
        Call::vkQueueSubmit2(p) | Call::vkQueueSubmit2KHR(p) => Some((
            p.queue,
            p.p_submits
                .iter()
                .flatten()
                .filter(|si| runs(&si.p_next))
                .flat_map(|si| si.p_command_buffer_infos.iter().flatten())
                .map(|c| c.command_buffer)
                .collect(),
        )),
        _ => None,
    }
}

/// Notes the query copies recorded into command buffers (see `session::copies`).
fn track_copies(s: &mut Session<'_>, call: &vkstream::Call, seq: u64) {
    use vkstream::Call;
    match call {
        Call::vkBeginCommandBuffer(p) => s.tracked.copies.begin(p.command_buffer),
        Call::vkCmdExecuteCommands(p) => s.tracked.copies.execute(
            p.command_buffer,
            p.p_command_buffers.as_deref().unwrap_or(&[]),
        ),
        Call::vkCmdCopyQueryPoolResults(p) => {
            // A destination the replay cannot place is not tracked: its QueryCopy is not compared.
            let Some(&(memory, bind)) = s.memory.buffer_memory.get(&p.dst_buffer) else {
                return;
            };
            let per = s
                .tracked
                .pools
                .get(&p.query_pool)
                .map_or(8, |pool| pool.shape.bytes_per_query(p.flags));
            let len = if p.query_count == 0 {
                0
            } else {
                p.stride
                    .saturating_mul(u64::from(p.query_count) - 1)
                    .saturating_add(per)
            };
            let dst = CopyDst {
                key: CopyKey {
                    seq,
                    command_buffer: p.command_buffer,
                    dst_buffer: p.dst_buffer,
                    dst_offset: p.dst_offset,
                },
                memory,
                start: bind.saturating_add(p.dst_offset),
                len,
            };
            s.tracked.copies.record(p.command_buffer, dst);
        }
        _ => {}
    }
}
