//! The checks run one stage ahead of the replay, on a thread of their own: it reads the trace's
//! records, decodes each call and passes it through `validate`, and hands the replay thread, in
//! trace order, what it needs (the record, the decoded call, the wait the checks ask for first,
//! and which devices may still have work running there). The replay thread then only translates
//! handles and calls the driver, so the checks cost it nothing while another core is free
//! (BENCHMARKS.md, "checks ahead").
//!
//! Running ahead changes no verdict: the validator's state follows the trace alone (a call the
//! driver fails ends the replay, so nothing the replay sees feeds back into it). What the replay
//! thread asks of that state at a record (is work outstanding on a device, did a replayed
//! submission run a command buffer) is answered here at the same point of the trace and travels
//! with the record. A refused call arrives after every record before it, so the driver has seen
//! exactly what it saw when the checks ran inline.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, SyncSender};

use format::record::{QueryOpKind, Record};
use format::TraceReader;

use crate::error::ReplayError;
use crate::queries::PoolShape;
use crate::validate::{Action, Validator};

/// Records per message: few enough that the replay starts at once, enough that handing them
/// over costs a few ns per record.
pub(crate) const BATCH: usize = 512;
/// Messages in flight: how far (in batches) the checks may run ahead.
pub(crate) const DEPTH: usize = 4;

/// Devices whose submitted work may still run, as the checks saw it at a record.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Busy {
    n: u8,
    d: [u64; 3],
}

impl Busy {
    fn of(v: &Validator) -> Self {
        let mut b = Busy::default();
        for d in v.busy_devices() {
            if b.d[..usize::from(b.n.min(3))].contains(&d) {
                continue;
            }
            if let Some(slot) = b.d.get_mut(usize::from(b.n)) {
                *slot = d;
            }
            b.n = b.n.saturating_add(1);
        }
        b
    }

    /// Whether work may run on captured `device` (more devices than fit: any may).
    pub(crate) fn has(&self, device: u64) -> bool {
        usize::from(self.n) > self.d.len() || self.d[..usize::from(self.n)].contains(&device)
    }

    pub(crate) fn any(&self) -> bool {
        self.n > 0
    }
}

/// One record and what the checks found at it.
pub(crate) struct Item {
    pub rec: Record,
    /// A call's decoded parameters.
    pub call: Option<vkstream::Call>,
    /// The wait the checks ask for before a call.
    pub action: Action,
    /// Busy devices before that wait (`busy`: after it, i.e. when the record is replayed).
    pub busy_before: Busy,
    pub busy: Busy,
    /// A query read of a query the capture saw available, written by a command buffer that no
    /// replayed submission ran: (query, command buffer).
    pub unreachable: Option<(u32, u64)>,
}

/// How the records ended: after it nothing more comes.
pub(crate) enum End {
    /// The trace cannot be read further (the records before were handed over).
    Read(String),
    /// A call the checks refuse or cannot decode.
    Refused(ReplayError),
    /// The end of the trace, and the devices that may still have work running.
    Done(Busy),
}

/// What the checks thread sends: records in batches, then how they ended.
pub(crate) enum Msg {
    Items(Vec<Item>),
    End(End),
}

/// What the checks thread measured.
#[derive(Default)]
pub(crate) struct Stats {
    /// CPU time of the checks thread over the pass (read, decode, checks), ns.
    pub cpu_ns: u64,
}

/// One checked record, or how the records ended ([`Ahead::each`]).
// Handed to the sink at once: boxing the item would cost an allocation per record.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Event {
    Item(Item),
    End(End),
}

/// The checks thread: reads `reader`'s records through `v` into `tx` until the end, a refusal, or
/// the replay thread hangs up. Without a validator it only reads and decodes (the bench's
/// baseline, `nulldrv::dispatch_ahead`).
///
/// `spent` brings back the batches the replay thread is done with: their records and calls are
/// freed here, where they were allocated (a free on another thread costs that thread more), and
/// the vectors reused.
pub(crate) fn run(
    reader: &TraceReader,
    v: Option<Validator>,
    tx: SyncSender<Msg>,
    spent: Receiver<Vec<Item>>,
) -> Stats {
    let start = crate::clock::thread_cpu_ns();
    let mut a = Ahead::new(v);
    let mut batch = Vec::with_capacity(BATCH);
    let flush = |batch: &mut Vec<Item>| {
        let next = match spent.try_recv() {
            Ok(mut v) => {
                v.clear();
                v
            }
            Err(_) => Vec::with_capacity(BATCH),
        };
        batch.is_empty() || tx.send(Msg::Items(std::mem::replace(batch, next))).is_ok()
    };
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        a.each(reader, |ev| match ev {
            Event::Item(item) => {
                batch.push(item);
                batch.len() < BATCH || flush(&mut batch)
            }
            Event::End(end) => flush(&mut batch) && tx.send(Msg::End(end)).is_ok(),
        })
    }));
    if let Err(p) = out {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let _ = tx.send(Msg::End(End::Refused(ReplayError::Other(format!(
            "internal error in the checks: {what}"
        )))));
    }
    a.stats.cpu_ns = crate::clock::thread_cpu_ns() - start;
    a.stats
}

/// The checks' state over one pass of the trace.
pub(crate) struct Ahead {
    check: bool,
    v: Validator,
    /// Trace command id -> vkstream command id, and names (for messages).
    map: Vec<Option<u32>>,
    names: Vec<String>,
    /// What a query read needs to know whether its queries can become available: pool shapes
    /// and the command buffer that last wrote each query (as the replay thread keeps them).
    pools: HashMap<u64, PoolShape>,
    owners: HashMap<(u64, u32), u64>,
    pub stats: Stats,
}

impl Ahead {
    /// Without a validator, records are only read and calls decoded.
    pub(crate) fn new(v: Option<Validator>) -> Self {
        Ahead {
            check: v.is_some(),
            v: v.unwrap_or_default(),
            map: Vec::new(),
            names: Vec::new(),
            pools: HashMap::new(),
            owners: HashMap::new(),
            stats: Stats::default(),
        }
    }

    /// Every record of `reader`, checked, into `sink` in trace order, until the end, an error
    /// (its event is the last), or `sink` returns false.
    pub(crate) fn each(&mut self, reader: &TraceReader, mut sink: impl FnMut(Event) -> bool) {
        for rec in reader.records() {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    sink(Event::End(End::Read(e.to_string())));
                    return;
                }
            };
            let mut item = Item {
                rec,
                call: None,
                action: Action::None,
                busy_before: Busy::default(),
                busy: Busy::default(),
                unreachable: None,
            };
            if let Err(e) = self.check(&mut item) {
                sink(Event::End(End::Refused(e)));
                return;
            }
            if !sink(Event::Item(item)) {
                return;
            }
        }
        sink(Event::End(End::Done(Busy::of(&self.v))));
    }

    fn check(&mut self, item: &mut Item) -> Result<(), ReplayError> {
        match &item.rec {
            Record::CommandTable(names) => {
                self.map = names.iter().map(|n| vkstream::command_id(n)).collect();
                self.names.clone_from(names);
            }
            Record::Call(c) => {
                let err = |message: String| ReplayError::Call {
                    seq: c.seq,
                    command: self.name(c.cmd),
                    message,
                };
                let Some(&id) = self.map.get(c.cmd as usize) else {
                    return Err(err(format!(
                        "command id {} is not in the trace's command table",
                        c.cmd
                    )));
                };
                let Some(id) = id else {
                    return Err(err(
                        "this command is unknown to this replayer (trace from a newer quarry?)"
                            .into(),
                    ));
                };
                let call = vkstream::decode_call(id, &c.params)
                    .map_err(|e| err(format!("cannot decode parameters: {e}")))?;
                if !self.check {
                    item.call = Some(call);
                    return Ok(());
                }
                item.action =
                    self.v
                        .before(&call, c.result)
                        .map_err(|message| ReplayError::Invalid {
                            seq: c.seq,
                            command: self.name(c.cmd),
                            message,
                        })?;
                if item.action != Action::None {
                    item.busy_before = Busy::of(&self.v);
                    // The replay thread waits before the call, or ends the replay.
                    self.v.waited(item.action);
                }
                item.busy = Busy::of(&self.v);
                self.v.after(&call, c.result, c.seq);
                item.call = Some(call);
            }
            Record::QueryPool(p) => {
                self.pools.insert(
                    p.pool,
                    PoolShape {
                        query_type: p.query_type,
                        pipeline_statistics: p.pipeline_statistics,
                        perf_counters: p.perf_counters.len() as u32,
                    },
                );
            }
            Record::QueryOp(op) => match op.kind {
                QueryOpKind::Begin { query, .. }
                | QueryOpKind::Timestamp { query, .. }
                | QueryOpKind::Write { query } => {
                    self.owners.insert((op.pool, query), op.command_buffer);
                }
                _ => {}
            },
            Record::QueryResults(r) => {
                item.busy = Busy::of(&self.v);
                item.unreachable = self.unreachable(r);
            }
            Record::QueryCopy(_) => item.busy = Busy::of(&self.v),
            _ => {}
        }
        Ok(())
    }

    fn name(&self, cmd: u32) -> String {
        self.names
            .get(cmd as usize)
            .cloned()
            .unwrap_or_else(|| format!("command #{cmd}"))
    }

    /// The first query of read `r` that the capture saw available but that no replayed
    /// submission can make available.
    fn unreachable(&self, r: &format::record::QueryResults) -> Option<(u32, u64)> {
        let shape = *self.pools.get(&r.pool)?;
        let captured =
            crate::queries::decode(&r.data, r.count, r.stride, r.flags, shape, r.result).ok()?;
        captured.iter().enumerate().find_map(|(i, q)| {
            let query = r.first.saturating_add(i as u32);
            let cb = *self.owners.get(&(r.pool, query))?;
            (q.available && !self.v.ever_submitted(cb)).then_some((query, cb))
        })
    }
}
