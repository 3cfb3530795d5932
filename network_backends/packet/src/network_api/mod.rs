//! The packet engine as a `tracefabric_netapi::Network`: the system layer declares
//! every flow up front (the config's flow list, so load balancers that plan per flow
//! see them all), then starts each one when its dependencies allow.
//!
//! A transfer of 0 bytes (a collective's empty share, e.g. an all-gather of 2 B on 4
//! ranks) or to the sender itself (a send to its own rank: a local copy, which the
//! analytical backends also run in no time) sends no packet: it is not declared to the
//! engine and completes at its start.
//!
//! Flows run on long-lived connections, as NCCL's run on its queue pairs: a flow takes the
//! lowest-numbered connection of its (src, dst) pair that no running flow holds, and ECMP
//! hashes the connection, so a collective repeated layer after layer meets the same paths.
//! Busy periods are replayed where `reuse` allows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

use crate::report::Report;
use crate::reuse::{progress_after_done, progress_before, Entry, Library, NextMatch};
use crate::reuse::{Recording, Replay, ReuseMode, StartMatch, MAX_ENTRIES};
use crate::rng::mix64;
use crate::sim::reuse::StatsMark;
use crate::sim::Simulation;
use crate::units::Time;
use tracefabric_netapi::{FlowRequest, Network, Ps};

mod periods;
mod windows;

pub use windows::{EngineFactory, Windows};

/// `engine_flow` entry of a request that puts no bytes on the network.
const EMPTY: u32 = u32::MAX;

/// Whether a request puts bytes on the network (see the module's note).
fn on_network(f: &FlowRequest) -> bool {
    f.bytes > 0 && f.src != f.dst
}

/// A period being simulated and logged.
struct Building {
    t0: Ps,
    key: u64,
    entries: Vec<Entry>,
    start_of: HashMap<u64, u32>,
    mark: StatsMark,
    progress: i64,
}

enum State {
    /// Simulating; logging the period if it began on a quiescent engine with a digest.
    Live(Option<Box<Building>>),
    Replaying(Replay),
}

/// What reuse did in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReuseStats {
    /// Periods begun on a quiescent engine, and of them those replayed without simulating.
    pub periods: u64,
    pub replayed: u64,
    /// Replays that a call inside the period cut short (the engine then ran it).
    pub materialized: u64,
    pub flows_replayed: u64,
}

/// A simulation driven by a system layer.
pub struct DrivenPacket {
    pub sim: Simulation,
    /// Request id -> the engine's flow index, or `EMPTY`.
    engine_flow: Vec<u32>,
    /// Engine flow index -> request id.
    request_id: Vec<u64>,
    /// Started transfers that put no bytes on the network: (completion time, request id).
    empty_done: BinaryHeap<Reverse<(Ps, u64)>>,
    mode: ReuseMode,
    state: State,
    library: Library,
    /// Connections in use per (src, dst), and each running request's (src, dst, connection).
    busy_connections: HashMap<(u32, u32), Vec<bool>>,
    connection_of: HashMap<u64, (u32, u32, u32)>,
    /// Fast mode: requests a replay already completed, which the engine ran again (their
    /// completions are not handed out twice), and completions the engine gave while it was
    /// handed a replayed period's calls (handed out next).
    delivered: HashSet<u64>,
    pending: VecDeque<(Ps, u64)>,
    /// Latest time handed to the system layer (fast mode never hands out an earlier one).
    floor: Ps,
    replay_end: Ps,
    reuse: ReuseStats,
    /// Engine windows, where the run declares more flows than one engine holds.
    windows: Option<Windows>,
}

impl DrivenPacket {
    /// The requests whose bytes the engine must carry, in id order: declare exactly these
    /// in the config's flow list (their position is their engine flow index).
    pub fn declared(requests: &[FlowRequest]) -> Vec<FlowRequest> {
        requests.iter().filter(|f| on_network(f)).copied().collect()
    }

    /// `requests` is every flow of the run in id order (ids 0..n); `sim` was built from
    /// `declared(requests)`.
    pub fn new(sim: Simulation, requests: &[FlowRequest]) -> Result<DrivenPacket, String> {
        DrivenPacket::with_reuse(sim, requests, ReuseMode::Exact)
    }

    pub fn with_reuse(
        sim: Simulation,
        requests: &[FlowRequest],
        mode: ReuseMode,
    ) -> Result<DrivenPacket, String> {
        DrivenPacket::with_windows(sim, requests, mode, None)
    }

    /// As `with_reuse`; with `windows`, `sim` holds the first window's flows.
    pub fn with_windows(
        mut sim: Simulation,
        requests: &[FlowRequest],
        mode: ReuseMode,
        windows: Option<Windows>,
    ) -> Result<DrivenPacket, String> {
        sim.drive();
        let mut engine_flow = Vec::with_capacity(requests.len());
        let mut request_id = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            if r.id != i as u64 {
                return Err(format!(
                    "flow requests must be in id order: position {i} has id {}",
                    r.id
                ));
            }
            if !on_network(r) {
                engine_flow.push(EMPTY);
            } else {
                engine_flow.push(request_id.len() as u32);
                request_id.push(r.id);
            }
        }
        // Each start compares its request with the declared flow; here only the count.
        let n = match &windows {
            Some(w) => w.specs(0).len() as u32,
            None => request_id.len() as u32,
        };
        if sim.flow_spec(n).is_some() || (n > 0 && sim.flow_spec(n - 1).is_none()) {
            return Err(format!(
                "the engine declares other flows than the {} requests it must carry",
                request_id.len()
            ));
        }
        Ok(DrivenPacket {
            sim,
            engine_flow,
            request_id,
            empty_done: BinaryHeap::new(),
            mode,
            state: State::Live(None),
            library: Library::default(),
            busy_connections: HashMap::new(),
            connection_of: HashMap::new(),
            delivered: HashSet::new(),
            pending: VecDeque::new(),
            floor: 0,
            replay_end: 0,
            reuse: ReuseStats::default(),
            windows,
        })
    }

    /// What reuse did so far, a replay whose calls are all made counted as done.
    pub fn stats(&self) -> ReuseStats {
        let mut s = self.reuse;
        if let State::Replaying(r) = &self.state {
            if r.complete(&self.library).is_some() {
                s.replayed += 1;
                s.flows_replayed += r.ids.len() as u64;
            }
        }
        s
    }

    fn not_declared(f: &FlowRequest) -> String {
        format!(
            "flow {} ({} -> {}, {} bytes) was not declared to the packet engine",
            f.id, f.src, f.dst, f.bytes
        )
    }

    /// The engine's report, replayed periods included (their flows, bytes and queues); its
    /// per-flow list only `with_flows`.
    pub fn report(mut self, with_flows: bool) -> Report {
        self.finish_replay_if_complete();
        if let State::Live(Some(b)) = std::mem::replace(&mut self.state, State::Live(None)) {
            self.sim.stats_abandon(b.mark);
        }
        let end = self.replay_end;
        let before = self.windows.as_ref().map_or(0, |w| w.events_before);
        let mut rep = self.sim.driven_report_at(Time(end), with_flows);
        rep.events += before;
        rep
    }

    /// The request behind engine flow `i` (of the current window).
    fn request_of(&self, i: u32) -> u64 {
        let lo = self.windows.as_ref().map_or(0, |w| w.lo);
        self.request_id[lo + i as usize]
    }

    /// The declared flow `g`'s (src, dst, bytes).
    fn declared_flow(&self, g: u32) -> Option<(u32, u32, u64)> {
        match &self.windows {
            Some(w) => w.flow(g as usize),
            None => (self.sim.flow_spec(g)).map(|f| (f.src, f.dst, f.bytes)),
        }
    }

    /// Takes the lowest free connection of the request's pair; its key.
    fn open_connection(&mut self, f: &FlowRequest) -> u32 {
        let used = self.busy_connections.entry((f.src, f.dst)).or_default();
        let qp = match used.iter().position(|b| !b) {
            Some(i) => i,
            None => {
                used.push(false);
                used.len() - 1
            }
        };
        used[qp] = true;
        self.connection_of.insert(f.id, (f.src, f.dst, qp as u32));
        let key = mix64((f.src as u64) << 32 | f.dst as u64) ^ mix64(qp as u64 + 1);
        key as u32
    }

    fn close_connection(&mut self, id: u64) {
        if let Some((src, dst, qp)) = self.connection_of.remove(&id) {
            if let Some(used) = self.busy_connections.get_mut(&(src, dst)) {
                used[qp as usize] = false;
            }
        }
    }

    /// Hands request `id` on connection `key` to the engine at `at`.
    fn engine_start(&mut self, id: u64, key: u32, at: Ps) -> Result<(), String> {
        let i = self.engine_index(self.engine_flow[id as usize])?;
        self.sim.set_connection(i, key);
        // The engine numbers its own flows: name the request instead.
        self.sim.start_flow(i, Time(at)).map_err(|e| {
            e.to_string()
                .replacen(&format!("flow {i}:"), &format!("flow {id}:"), 1)
        })
    }

    /// A start on the engine, opening a period (replayed or logged) if it is quiescent.
    fn live_start(&mut self, f: &FlowRequest, key: u32, at: Ps) -> Result<(), String> {
        if self.sim.quiescent() {
            self.close_period();
            // Onto the engine window that runs this period before anything is read from it:
            // its digest and its statistics mark (a mark of the window left would be
            // subtracted from the new engine's counts).
            self.engine_index(self.engine_flow[f.id as usize])?;
            self.reuse.periods += 1;
            let digest = match self.mode {
                ReuseMode::Off => None,
                ReuseMode::Exact => self.sim.reuse_digest(),
                ReuseMode::Fast => self.sim.fabric_digest(),
            };
            if let Some(digest) = digest {
                let (t0, sim) = (Time(at), &self.sim);
                let cands: Vec<u32> = (self.library.candidates(digest, f.src, f.dst, f.bytes))
                    .into_iter()
                    .filter(|&c| {
                        let quiet = Time(at + self.library.get(c).quiet_rel as u64);
                        !sim.fabric_changes_between(t0, quiet)
                    })
                    .collect();
                if !cands.is_empty() {
                    self.state = State::Replaying(Replay {
                        t0: at,
                        key: digest,
                        cands,
                        pos: 1,
                        ids: vec![f.id],
                        keys: vec![key],
                        progress: 0,
                        fast: self.mode == ReuseMode::Fast,
                    });
                    return Ok(());
                }
                let mut start_of = HashMap::new();
                start_of.insert(f.id, 0);
                self.state = State::Live(Some(Box::new(Building {
                    t0: at,
                    key: digest,
                    entries: vec![Entry::Start {
                        rel: 0,
                        src: f.src,
                        dst: f.dst,
                        bytes: f.bytes,
                        progress: 0,
                    }],
                    start_of,
                    mark: self.sim.stats_mark(),
                    progress: 0,
                })));
            }
        } else if let State::Live(Some(b)) = &mut self.state {
            let k = b.start_of.len() as u32;
            b.start_of.insert(f.id, k);
            b.entries.push(Entry::Start {
                rel: at as i64 - b.t0 as i64,
                src: f.src,
                dst: f.dst,
                bytes: f.bytes,
                progress: b.progress,
            });
            if b.entries.len() > MAX_ENTRIES {
                if let State::Live(Some(b)) = std::mem::replace(&mut self.state, State::Live(None))
                {
                    self.sim.stats_abandon(b.mark);
                }
            }
        }
        self.engine_start(f.id, key, at)
    }

    fn engine_next(&mut self, limit: Ps) -> Result<Option<(Ps, u32)>, String> {
        let done = (self.sim.next_completion(Time(limit))).map_err(|e| e.to_string())?;
        Ok(done.map(|(t, i)| (t.0, i)))
    }

    /// The engine's next completion before `limit`, logged if the period is.
    fn live_next(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        if let Some((t, id)) = self.pending.pop_front() {
            return Ok(Some((t.max(self.floor), id)));
        }
        loop {
            let Some((t, i)) = self.engine_next(limit)? else {
                if let State::Live(Some(b)) = &mut self.state {
                    b.progress = b.progress.max(progress_before(b.t0, limit));
                }
                return Ok(None);
            };
            let id = self.request_of(i);
            if self.delivered.remove(&id) {
                continue;
            }
            if let State::Live(Some(b)) = &mut self.state {
                let rel = t as i64 - b.t0 as i64;
                let start = b.start_of[&id];
                b.entries.push(Entry::Done {
                    rel,
                    start,
                    outcome: self.sim.flow_outcome(i),
                });
                b.progress = progress_after_done(rel);
            }
            return Ok(Some((t.max(self.floor), id)));
        }
    }
}

impl Network for DrivenPacket {
    fn endpoints(&self) -> u32 {
        self.sim.topology().n_hosts
    }

    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        let engine = usize::try_from(f.id)
            .ok()
            .and_then(|i| self.engine_flow.get(i).copied());
        match engine {
            Some(EMPTY) if !on_network(&f) => {
                self.empty_done.push(Reverse((at, f.id)));
                return Ok(());
            }
            Some(g) if g != EMPTY => match self.declared_flow(g) {
                Some(spec) if spec == (f.src, f.dst, f.bytes) => {}
                _ => return Err(Self::not_declared(&f)),
            },
            _ => return Err(Self::not_declared(&f)),
        }
        let key = self.open_connection(&f);
        if let State::Replaying(r) = &mut self.state {
            match r.on_start(&self.library, f.id, key, f.src, f.dst, f.bytes, at) {
                StartMatch::Matched => return Ok(()),
                StartMatch::Over(c) => self.finish_replay(c),
                StartMatch::Deviates => self.materialize()?,
            }
        }
        self.live_start(&f, key, at)
    }

    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        // An empty transfer due before `limit` bounds how far the engine may run first.
        let empty_at = self.empty_done.peek().map(|Reverse((t, _))| *t);
        let engine_limit = empty_at.map_or(limit, |t| t.min(limit));
        let mut done = None;
        if let State::Replaying(r) = &mut self.state {
            match r.next(&self.library, engine_limit) {
                NextMatch::Deliver(t, id) => done = Some((t, id)),
                NextMatch::Nothing => {}
                NextMatch::Deviates => self.materialize()?,
            }
        }
        if done.is_none() && matches!(self.state, State::Live(_)) {
            done = self.live_next(engine_limit)?;
        }
        let done = match done {
            Some(d) => Some(d),
            None => match empty_at {
                Some(t) if t < limit => self.empty_done.pop().map(|Reverse(done)| done),
                _ => None,
            },
        };
        match done {
            Some((t, id)) => {
                self.close_connection(id);
                self.floor = self.floor.max(t);
            }
            None => self.floor = self.floor.max(engine_limit.saturating_sub(1)),
        }
        Ok(done)
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = self.stats();
        vec![
            ("reuse_periods".into(), s.periods),
            ("reuse_replayed".into(), s.replayed),
            ("reuse_materialized".into(), s.materialized),
            ("reuse_flows_replayed".into(), s.flows_replayed),
        ]
    }
}

#[cfg(test)]
mod tests;
