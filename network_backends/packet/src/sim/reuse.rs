//! What the reuse of busy periods (`crate::reuse`) needs from the engine: whether it is
//! quiescent, a digest of the state a new period's outcome may depend on, the statistics
//! a period adds, and completing a replayed period's flows without simulating them.
//!
//! Invariant behind exact reuse: in a quiescent engine (no packet anywhere, every started
//! flow complete) whose schemes keep no state across flows (`reuse_digest`), a flow's
//! behaviour depends only on its own (src, dst, bytes, start time, connection key) and the
//! other flows of the period, never on its index among the declared flows.

use super::*;

/// Per-port statistics a period adds (see `StatsMark`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortDelta {
    pub tx_bytes: u64,
    pub data_tx_bytes: u64,
    pub queue_area: u128,
    pub max_queue: u64,
    pub drops: u64,
    pub marks: u64,
    pub trims: u64,
}

/// Global counters, in a fixed order (see `Simulation::globals`).
const N_GLOBALS: usize = 12;

/// What a period added to the run's statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsDelta {
    globals: [u64; N_GLOBALS],
    /// Only the ports the period touched.
    ports: Vec<(u32, PortDelta)>,
    counters: Vec<(String, u64)>,
}

/// The statistics when a period began.
pub struct StatsMark {
    globals: [u64; N_GLOBALS],
    ports: Vec<(u64, u64, u128, u64, PortCounts)>,
    counters: Vec<(String, u64)>,
}

/// How one flow of a period ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowOutcome {
    pub packets_sent: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub blackholed: u64,
}

impl Simulation {
    /// No packet queued or in flight, no completion waiting and every started flow done:
    /// what follows depends on the past only through `reuse_digest`.
    pub fn quiescent(&self) -> bool {
        self.completions.is_empty() && self.done == self.n_started && self.live_packets == 0
    }

    /// Time the last packet left the network (meaningful when `quiescent`).
    pub fn idle_since(&self) -> Time {
        self.idle_since
    }

    /// A digest of the state a period starting now on a quiescent engine depends on, or
    /// None where exact reuse is unsafe: a scheme keeps state across flows, PFC, INT or a
    /// receiver's pacer hold state of their own, or the fabric still has changes to make.
    pub fn reuse_digest(&self) -> Option<u64> {
        if self.pfc.is_some() || self.int_on || self.rx_paces {
            return None;
        }
        let mut d = self.fabric_digest()?;
        for x in [
            self.lb.reuse_digest()?,
            self.cc.reuse_digest()?,
            self.loss.reuse_digest()?,
            self.receiver.reuse_digest()?,
            self.qdisc.reuse_digest()?,
        ] {
            d = mix64(d ^ x);
        }
        // What a host or port carries from one period to the next (all zero or unset when
        // periods are separated by idle time, so this rarely tells periods apart).
        for (h, host) in self.hosts.iter().enumerate() {
            if host.rr != 0 || host.wake_at.is_some() || host.paused {
                d = mix64(d ^ (h as u64) << 8 ^ host.rr as u64 ^ host.wake_at.is_some() as u64);
            }
        }
        for (p, rt) in self.ports.iter().enumerate() {
            if rt.wake_pending || rt.send_owed {
                let bits = rt.wake_pending as u64 | (rt.send_owed as u64) << 1;
                d = mix64(d ^ (p as u64) << 3 ^ bits);
            }
        }
        Some(d)
    }

    /// A digest of the fabric's state (links down, routes changed), which even fast reuse
    /// must match; None while a scheduled change is still to come.
    pub fn fabric_digest(&self) -> Option<u64> {
        if (self.failures.changes.iter()).any(|&(at, _)| at >= self.now) {
            return None;
        }
        let mut d = mix64(0x7265_7573_6521 ^ self.failures.reroutes);
        let mut down: Vec<u32> = self.failures.down_since.keys().copied().collect();
        down.sort_unstable();
        for p in down {
            d = mix64(d ^ p as u64 ^ 0xd0);
        }
        Some(d)
    }

    /// Whether a scheduled fabric change falls in [from, to].
    pub fn fabric_changes_between(&self, from: Time, to: Time) -> bool {
        (self.failures.changes.iter()).any(|&(at, _)| from <= at && at <= to)
    }

    /// Flow `f` hashes as connection `key` (the 5-tuple ECMP hashes), not as its index.
    pub fn set_connection(&mut self, f: u32, key: u32) {
        if self.tuples.is_empty() {
            self.tuples = (0..self.flows.len() as u32).collect();
        }
        self.tuples[f as usize] = key;
    }

    pub fn flow_outcome(&self, f: u32) -> FlowOutcome {
        let rt = &self.flows[f as usize];
        FlowOutcome {
            packets_sent: self.hot[f as usize].sent,
            retransmissions: rt.retransmitted,
            timeouts: rt.timeouts,
            blackholed: self.failures.per_flow.get(&f).copied().unwrap_or(0),
        }
    }

    fn globals(&self) -> [u64; N_GLOBALS] {
        [
            self.data_hops,
            self.bytes_sent,
            self.bytes_delivered,
            self.bytes_dropped,
            self.pkts_dropped,
            self.acks_dropped,
            self.pkts_trimmed,
            self.pkts_lost,
            self.bytes_trimmed,
            self.failures.blackholed,
            self.failures.bytes_blackholed,
            self.events_skipped,
        ]
    }

    fn add_globals(&mut self, g: &[u64; N_GLOBALS]) {
        let fields = [
            &mut self.data_hops,
            &mut self.bytes_sent,
            &mut self.bytes_delivered,
            &mut self.bytes_dropped,
            &mut self.pkts_dropped,
            &mut self.acks_dropped,
            &mut self.pkts_trimmed,
            &mut self.pkts_lost,
            &mut self.bytes_trimmed,
            &mut self.failures.blackholed,
            &mut self.failures.bytes_blackholed,
            &mut self.events_skipped,
        ];
        for (f, d) in fields.into_iter().zip(g) {
            *f += d;
        }
    }

    fn all_counters(&self) -> Vec<(String, u64)> {
        let mut c = self.scheme_counters_simulated();
        c.extend((self.lb.counters().into_iter()).map(|(k, v)| (format!("lb.{k}"), v)));
        c
    }

    /// Marks the statistics at the start of a period (on a quiescent engine). A port's
    /// maximum queue restarts from 0 so that the period's own maximum can be read off.
    pub fn stats_mark(&mut self) -> StatsMark {
        self.catch_up_all(self.now);
        let mut globals = self.globals();
        globals[N_GLOBALS - 1] = self.events.processed();
        let ports = (self.ports.iter_mut().zip(&self.port_counts))
            .map(|(rt, c)| {
                let max = std::mem::take(&mut rt.max_queue);
                (rt.tx_bytes, rt.data_tx_bytes, rt.queue_area, max, *c)
            })
            .collect();
        StatsMark {
            globals,
            ports,
            counters: self.all_counters(),
        }
    }

    /// What the period since `mark` added (on a quiescent engine again); restores each
    /// port's maximum queue over the whole run.
    pub fn stats_since(&mut self, mark: StatsMark) -> StatsDelta {
        self.catch_up_all(self.now);
        let mut now = self.globals();
        now[N_GLOBALS - 1] = self.events.processed();
        let mut globals = [0; N_GLOBALS];
        for i in 0..N_GLOBALS {
            globals[i] = now[i] - mark.globals[i];
        }
        let mut ports = Vec::new();
        for (p, (rt, before)) in self.ports.iter_mut().zip(mark.ports).enumerate() {
            let (tx, data_tx, area, max_before, counts) = before;
            let c = self.port_counts[p];
            let d = PortDelta {
                tx_bytes: rt.tx_bytes - tx,
                data_tx_bytes: rt.data_tx_bytes - data_tx,
                queue_area: rt.queue_area - area,
                max_queue: rt.max_queue,
                drops: c.drops - counts.drops,
                marks: c.marks - counts.marks,
                trims: c.trims - counts.trims,
            };
            rt.max_queue = rt.max_queue.max(max_before);
            if d != PortDelta::default() {
                ports.push((p as u32, d));
            }
        }
        let before: HashMap<String, u64> = mark.counters.into_iter().collect();
        let counters = (self.all_counters().into_iter())
            .map(|(k, v)| {
                let was = before.get(&k).copied().unwrap_or(0);
                (k, v.saturating_sub(was))
            })
            .filter(|(_, v)| *v > 0)
            .collect();
        StatsDelta {
            globals,
            ports,
            counters,
        }
    }

    /// Gives up a period's mark (it will not be recorded): restores each port's maximum
    /// queue over the whole run.
    pub fn stats_abandon(&mut self, mark: StatsMark) {
        for (rt, before) in self.ports.iter_mut().zip(mark.ports) {
            rt.max_queue = rt.max_queue.max(before.3);
        }
    }

    /// Adds a replayed period's statistics. The events it took are counted as skipped.
    pub fn add_stats(&mut self, d: &StatsDelta) {
        self.add_globals(&d.globals);
        for (p, pd) in &d.ports {
            self.add_port(*p as usize, pd);
        }
        for (k, v) in &d.counters {
            *self.replayed_counters.entry(k.clone()).or_default() += v;
        }
    }

    fn add_port(&mut self, p: usize, d: &PortDelta) {
        let (rt, c) = (&mut self.ports[p], &mut self.port_counts[p]);
        rt.tx_bytes += d.tx_bytes;
        rt.data_tx_bytes += d.data_tx_bytes;
        rt.queue_area += d.queue_area;
        rt.max_queue = rt.max_queue.max(d.max_queue);
        c.drops += d.drops;
        c.marks += d.marks;
        c.trims += d.trims;
    }

    /// Flow `f` of a replayed period started at `start` and completed at `finish`.
    pub fn complete_replayed(&mut self, f: u32, start: Time, finish: Time, o: FlowOutcome) {
        let rt = &mut self.flows[f as usize];
        debug_assert!(!rt.started);
        rt.started = true;
        rt.spec.start = start;
        rt.finish = Some(finish);
        rt.retransmitted = o.retransmissions;
        rt.timeouts = o.timeouts;
        if o.blackholed > 0 {
            self.failures.per_flow.insert(f, o.blackholed);
        }
        let hot = &mut self.hot[f as usize];
        hot.sent = o.packets_sent;
        hot.done = true;
        hot.blocked = true;
        self.n_started += 1;
        self.done += 1;
    }

    /// Events this engine processed.
    pub fn events_processed(&self) -> u64 {
        self.events.processed()
    }

    /// Takes over the statistics of `old`, the engine of the previous window
    /// (`network_api::windows`), quiescent, on the same fabric.
    pub fn carry_over(&mut self, mut old: Simulation) {
        old.catch_up_all(old.now);
        self.add_globals(&old.globals());
        for (p, (rt, c)) in old.ports.iter().zip(&old.port_counts).enumerate() {
            let all = PortDelta {
                tx_bytes: rt.tx_bytes,
                data_tx_bytes: rt.data_tx_bytes,
                queue_area: rt.queue_area,
                max_queue: rt.max_queue,
                drops: c.drops,
                marks: c.marks,
                trims: c.trims,
            };
            self.add_port(p, &all);
        }
        for (k, v) in old.all_counters().into_iter().chain(old.replayed_counters) {
            *self.replayed_counters.entry(k).or_default() += v;
        }
    }

    /// Data-packet events the replayed periods would have taken.
    pub fn events_skipped(&self) -> u64 {
        self.events_skipped
    }
}
