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
    /// Connections in use per (src, dst), and each running request's connection key.
    busy_connections: HashMap<(u32, u32), Vec<bool>>,
    connection_of: HashMap<u64, (u32, u32, u32)>,
    /// Fast mode: requests a replay already completed, which the engine ran again, and
    /// completions the engine gave while it was handed a replayed period's calls.
    delivered: HashSet<u64>,
    pending: VecDeque<(Ps, u64)>,
    /// Latest time handed to the system layer (fast mode never hands out an earlier one).
    floor: Ps,
    replay_end: Ps,
    reuse: ReuseStats,
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
        mut sim: Simulation,
        requests: &[FlowRequest],
        mode: ReuseMode,
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
        let n = request_id.len() as u32;
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
        })
    }

    pub fn mode(&self) -> ReuseMode {
        self.mode
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
        self.sim.driven_report_at(Time(end), with_flows)
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
        let i = self.engine_flow[id as usize];
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
            let id = self.request_id[i as usize];
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
            Some(i) if i != EMPTY => match self.sim.flow_spec(i) {
                Some(spec) if spec.src == f.src && spec.dst == f.dst && spec.bytes == f.bytes => {}
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
mod tests {
    use super::*;
    use crate::config::SimConfig;

    fn request(id: u64, src: u32, dst: u32, bytes: u64) -> FlowRequest {
        FlowRequest {
            id,
            src,
            dst,
            bytes,
        }
    }

    #[test]
    fn empty_transfers_end_at_their_start_between_the_engine_completions() {
        // Requests 0 and 2 cross the network (engine flows 0 and 1); 1 is empty and 3 is
        // rank 3's send to itself.
        let requests = [
            request(0, 0, 5, 8192),
            request(1, 1, 6, 0),
            request(2, 2, 7, 4096),
            request(3, 3, 3, 1 << 20),
        ];
        let declared = DrivenPacket::declared(&requests);
        assert_eq!(declared.iter().map(|f| f.id).collect::<Vec<_>>(), [0, 2]);
        let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
            "traffic": {"kind": "flows", "src": [0, 2], "dst": [5, 7], "bytes": [8192, 4096],
                        "start_ps": [0, 0]}}"#;
        let sim = || Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
        // The same two flows driven alone (no empty transfer), for the times to expect.
        let mut alone = DrivenPacket::new(sim(), &requests).unwrap();
        alone.start_flow(requests[0], 0).unwrap();
        alone.start_flow(requests[2], 0).unwrap();
        let first = alone.next_completion(u64::MAX).unwrap().unwrap();
        let second = alone.next_completion(u64::MAX).unwrap().unwrap();
        let (fct2, fct0) = match (first, second) {
            ((t2, 2), (t0, 0)) => (t2, t0),
            other => panic!("flow 2 (4 KB) should finish first: {other:?}"),
        };
        let mut net = DrivenPacket::new(sim(), &requests).unwrap();
        net.start_flow(requests[0], 0).unwrap();
        net.start_flow(requests[2], 0).unwrap();
        net.start_flow(requests[1], 0).unwrap();
        net.start_flow(requests[3], fct2 + 7).unwrap();
        let mut got = Vec::new();
        while let Some(done) = net.next_completion(u64::MAX).unwrap() {
            got.push(done);
        }
        assert_eq!(got, [(0, 1), (fct2, 2), (fct2 + 7, 3), (fct0, 0)]);
        // An engine limit before an empty transfer's time leaves it pending.
        let mut net = DrivenPacket::new(sim(), &requests).unwrap();
        net.start_flow(requests[1], 50).unwrap();
        assert_eq!(net.next_completion(50).unwrap(), None);
        assert_eq!(net.next_completion(51).unwrap(), Some((50, 1)));
    }

    #[test]
    fn requests_must_match_what_the_engine_declared() {
        let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
            "traffic": {"kind": "flows", "src": [0], "dst": [5], "bytes": [8192], "start_ps": [0]}}"#;
        let sim = || Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
        let two = [request(0, 0, 5, 8192), request(1, 1, 5, 10)];
        let e = DrivenPacket::new(sim(), &two).err().unwrap();
        assert!(
            e.contains("other flows than the 2 requests it must carry"),
            "{e}"
        );
        let mut net =
            DrivenPacket::new(sim(), &[request(0, 0, 5, 8192), request(1, 1, 5, 0)]).unwrap();
        for bad in [
            request(1, 1, 5, 3),
            request(0, 0, 6, 8192),
            request(9, 0, 5, 0),
        ] {
            let e = net.start_flow(bad, 0).unwrap_err();
            assert!(e.contains("was not declared to the packet engine"), "{e}");
        }
    }

    /// Five rounds of a 4-host ring exchange on a k=4 fat tree, each round starting 2 us
    /// after the last one ended; with `extra`, round 3 also starts a flow 1 us in (a
    /// collective starting inside the period). Returns the completions, what reuse did and
    /// the report's per-flow and per-link numbers.
    fn rounds(lb: &str, mode: ReuseMode, extra: bool) -> (Vec<(Ps, u64)>, ReuseStats, Vec<u64>) {
        let hosts = [0u32, 5, 10, 15];
        let mut requests = Vec::new();
        for r in 0..5u64 {
            for (k, &h) in hosts.iter().enumerate() {
                let (dst, bytes) = (hosts[(k + 1) % 4], 64_000 + 1000 * (k as u64 % 2));
                requests.push(request(requests.len() as u64, h, dst, bytes));
            }
            if r == 3 {
                requests.push(request(requests.len() as u64, 1, 6, 30_000));
            }
        }
        let declared = DrivenPacket::declared(&requests);
        let column = |f: fn(&FlowRequest) -> u64| declared.iter().map(f).collect::<Vec<_>>();
        let cfg = format!(
            r#"{{"topology": {{"kind": "fat_tree", "k": 4}}, "link": {{"rate_gbps": 100}},
            "scheme": {{"lb": "{lb}", "cc": "dctcp", "loss": "sack"}},
            "traffic": {{"kind": "flows", "src": {:?}, "dst": {:?}, "bytes": {:?},
                         "start_ps": {:?}}}}}"#,
            column(|f| f.src as u64),
            column(|f| f.dst as u64),
            column(|f| f.bytes),
            vec![0; declared.len()]
        );
        let sim = Simulation::new(SimConfig::from_json(&cfg).unwrap()).unwrap();
        let mut net = DrivenPacket::with_reuse(sim, &requests, mode).unwrap();
        let (mut at, mut next, mut got) = (0u64, 0usize, Vec::new());
        for r in 0..5 {
            let mut left = 4;
            for _ in 0..4 {
                net.start_flow(requests[next], at).unwrap();
                next += 1;
            }
            if r == 3 {
                if extra {
                    assert_eq!(net.next_completion(at + 1_000_000).unwrap(), None);
                    net.start_flow(requests[next], at + 1_000_000).unwrap();
                    left += 1;
                }
                next += 1;
            }
            for _ in 0..left {
                let done = net.next_completion(u64::MAX).unwrap().unwrap();
                got.push(done);
                at = done.0;
            }
            at += 2_000_000;
        }
        let reuse = net.stats();
        let rep = net.report(true);
        let flows = rep
            .flows
            .iter()
            .flat_map(|f| [f.start_ps, f.finish_ps, f.packets_sent]);
        let links = rep.links.iter().flat_map(|l| [l.bytes, l.max_queue_bytes]);
        let counts = [
            rep.data_packet_hops,
            rep.data_bytes_delivered,
            rep.ecn_marks,
        ];
        (got, reuse, flows.chain(links).chain(counts).collect())
    }

    #[test]
    fn exact_reuse_replays_repeated_rounds_bit_for_bit() {
        for lb in ["ecmp", "reps"] {
            for extra in [false, true] {
                let (full, none, full_rep) = rounds(lb, ReuseMode::Off, extra);
                let (reused, stats, reused_rep) = rounds(lb, ReuseMode::Exact, extra);
                assert_eq!(none.replayed, 0);
                assert_eq!(full, reused, "{lb}, extra flow {extra}");
                assert_eq!(full_rep, reused_rep, "{lb}, extra flow {extra}");
                assert_eq!(stats.periods, 5);
                // Round 1 is logged and rounds 2..5 replayed, but for the one that a flow
                // starting inside it cut short: that one runs on the engine.
                assert_eq!(stats.replayed, if extra { 3 } else { 4 }, "{lb} {stats:?}");
                assert_eq!(stats.materialized, extra as u64, "{lb}");
            }
        }
        // The same rounds at other times are other periods' equals: every round takes as
        // long as the first.
        let (full, _, _) = rounds("ecmp", ReuseMode::Off, false);
        let round = |r: usize| full[4 * r + 3].0 - (full[4 * r].0.min(full[4 * r + 3].0));
        assert!(round(0) > 0 && (1..5).all(|r| round(r) == round(0)));
    }

    #[test]
    fn a_scheme_with_state_across_flows_is_never_replayed_exactly() {
        // host_spray draws every packet's path from one random stream.
        let (full, _, full_rep) = rounds("host_spray", ReuseMode::Off, false);
        let (reused, stats, reused_rep) = rounds("host_spray", ReuseMode::Exact, false);
        assert_eq!((stats.periods, stats.replayed), (5, 0));
        assert_eq!((&full, &full_rep), (&reused, &reused_rep));
        // Fast mode replays it: the same bytes, other draws.
        let (_, fast, fast_rep) = rounds("host_spray", ReuseMode::Fast, false);
        assert_eq!(fast.replayed, 4, "{fast:?}");
        let hops = |rep: &[u64]| rep[rep.len() - 3];
        assert_eq!(hops(&fast_rep), hops(&full_rep));
    }
}
