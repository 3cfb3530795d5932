//! Priority flow control in the engine (the `pfc` queue discipline turns it on; without it
//! `Simulation::pfc` is None and none of this runs). Two priorities: data, which PFC
//! pauses, and control (ACKs, NACKs, pulls, trimmed headers), which it never does.
//!
//! Ingress accounting: every data frame queued at a switch is charged to the upstream port
//! that sent it (its ingress) until it departs; the ingress of each frame in a port's data
//! queue is kept in a FIFO beside it. A frame that goes straight through an idle port is
//! never charged. Invariant: `ingress[u]` = wire bytes of the data frames from `u` queued at
//! `u`'s peer.
//!
//! PAUSE/RESUME frames: when an ingress goes over XOFF (at an arrival) its switch sends a
//! PAUSE up the reverse link; when it drains to XON (at a departure) a RESUME. A frame
//! leaves after the frame the reverse port is serializing (at most one) and takes its own
//! serialization and the link's latency; its 64 bytes are not charged to the link's
//! bandwidth. Frames for one ingress arrive in the order sent. At the upstream port a
//! PAUSE stops data after the frame being serialized; a RESUME starts the next one at once.
//! A RESUME worked out by a lazy catch-up later than its frame's arrival would be (by at
//! most the switch latency) arrives at the catch-up instead: never in the past.
//!
//! Deadlock: a PAUSE arms a check `deadlock_after` later. If the port is still paused
//! since then, the check follows the ports that hold its frames: from a paused port `u`
//! to a paused output port of `u`'s peer that holds frames from ingress `u`. Coming back
//! to a port on the walk, every port of the cycle paused at least that long, is a deadlock.

use super::*;
use crate::qdisc::Lossless;

/// What an `Event::Pfc` does at its port.
const PAUSE: u32 = 0;
const RESUME: u32 = 1;
const CHECK: u32 = 2;

/// An `Event::Pfc` id: the port and what happens there.
pub(super) fn code(port: usize, what: u32) -> u32 {
    (port as u32) << 2 | what
}

/// PAUSE frames (IEEE 802.1Qbb) are minimum-size frames.
const PAUSE_FRAME_BYTES: u64 = 64;

pub(super) struct PfcState {
    cfg: Lossless,
    /// The port from a port's peer back to its owner (the link's other direction).
    reverse: Vec<u32>,
    /// Data bytes each ingress has queued at its switch (see the module's invariant).
    ingress: Vec<u64>,
    /// Its switch has sent a PAUSE for this ingress, and no RESUME since.
    xoff: Vec<bool>,
    /// The ingress of every data frame in each port's `q_lo`, in the same order.
    origin: Vec<VecDeque<u32>>,
    /// When the last PAUSE/RESUME for this ingress arrives upstream.
    last_arrival: Vec<Time>,
    /// PFC paused the port's data priority: it sends only control frames.
    pub(super) paused: Vec<bool>,
    /// Since when each (paused) port has been paused.
    paused_since: Vec<Time>,
    /// Per port: PAUSE frames that stopped it, and the time it spent paused.
    pub(super) pauses: Vec<u64>,
    pub(super) paused_ps: Vec<u64>,
    /// Data frames refused because their ingress was over XOFF + headroom.
    drops: u64,
}

impl PfcState {
    pub(super) fn new(cfg: Lossless, topo: &Topology) -> PfcState {
        let n = topo.ports.len();
        // The two directions of a link are ports 2i and 2i + 1.
        let reverse = (0..n as u32).map(|p| p ^ 1).collect();
        PfcState {
            cfg,
            reverse,
            ingress: vec![0; n],
            xoff: vec![false; n],
            origin: (0..n).map(|_| VecDeque::new()).collect(),
            last_arrival: vec![Time::ZERO; n],
            paused: vec![false; n],
            paused_since: vec![Time::ZERO; n],
            pauses: vec![0; n],
            paused_ps: vec![0; n],
            drops: 0,
        }
    }

    pub(super) fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("pauses", self.pauses.iter().sum()),
            ("paused_ps", self.paused_ps.iter().sum()),
            ("pfc_drops", self.drops),
        ]
    }
}

impl Simulation {
    /// PFC paused `port`'s data priority (never without PFC).
    #[inline(always)]
    pub(super) fn paused(&self, port: usize) -> bool {
        match &self.pfc {
            None => false,
            Some(pfc) => pfc.paused[port],
        }
    }

    /// `switch_receive` on a lossless fabric: `p` arrived at switch `node` from port `from`.
    #[inline(never)]
    pub(super) fn pfc_switch_receive(&mut self, from: usize, node: u32, p: Packet) {
        if let Some(out) = self.route(node, p) {
            self.pfc_enqueue(from, out as usize, p);
        }
    }

    /// Whether `port`, with frames queued, may send one (not paused, or a control frame)
    /// at `busy_until`; a paused port idle since before now is started by `pfc_kick`.
    #[cold]
    pub(super) fn pfc_may_send(&self, port: usize) -> bool {
        let rt = &self.ports[port];
        (!self.paused(port) || !rt.q_hi.is_empty()) && rt.busy_until >= self.now
    }

    /// A paused port idle with a control frame queued (a catch-up cannot start it: it has
    /// no departure due) sends it now.
    fn pfc_kick(&mut self, port: usize) {
        let rt = &self.ports[port];
        if rt.busy_until < self.now && !rt.q_hi.is_empty() {
            self.dequeue_at(port, self.now);
            self.keep_draining(port);
        }
    }

    /// `enqueue` on a lossless fabric: a frame from upstream port `from` routed to `out`.
    #[inline(never)]
    pub(super) fn pfc_enqueue(&mut self, from: usize, out: usize, p: Packet) {
        self.catch_up(out, self.now);
        let wire = p.wire() as u64;
        if p.flags() & (ACK | TRIMMED) != 0 {
            // The control priority is never paused and never dropped here: its frames are
            // bounded by the data in flight, while the data a port holds is bounded per
            // ingress, not by the port's buffer (a 15:1 incast holds some 1.8 MB at one
            // port, past the twice-the-buffer cap of a lossy port, which dropped replies).
            self.enqueue_fitting(out, p, wire);
            return self.pfc_kick(out);
        }
        let pfc = self.pfc.as_ref().expect("pfc_enqueue without PFC");
        let limit = pfc.cfg.xoff + pfc.cfg.headroom;
        if pfc.ingress[from] + wire > pfc.cfg.xoff {
            // Other ports of this switch may owe departures of this ingress's frames:
            // work them out so the decision sees the count as it is now.
            let node = self.ports[from].peer as usize;
            for i in 0..self.topo.node_ports[node].len() {
                let q = self.topo.node_ports[node][i] as usize;
                self.catch_up(q, self.now);
            }
        }
        let pfc = self.pfc.as_mut().unwrap();
        if pfc.ingress[from] + wire > limit {
            let trims = self.pkts_trimmed;
            self.overflow(out, p);
            if self.pkts_trimmed == trims {
                self.pfc.as_mut().unwrap().drops += 1; // dropped, not trimmed
            }
            return self.pfc_kick(out);
        }
        let rt = &self.ports[out];
        if !pfc.paused[out] && rt.busy_until <= self.now && rt.queued == 0 {
            // Straight through an idle port: never charged to its ingress.
            self.transmit(out, p, self.now);
            return;
        }
        pfc.ingress[from] += wire;
        pfc.origin[out].push_back(from as u32);
        let over = pfc.ingress[from] > pfc.cfg.xoff && !pfc.xoff[from];
        self.ports[out].q_lo.push_back(p);
        self.set_queued(out, self.ports[out].queued + wire, self.now);
        self.keep_draining(out);
        if over {
            self.pfc.as_mut().unwrap().xoff[from] = true;
            self.pfc_send(from, PAUSE, self.now);
        }
    }

    /// `dequeue_at` with no control frame queued, on a lossless fabric: the next data
    /// frame departs at `at` unless `port` is paused (false: nothing sent).
    #[inline(never)]
    pub(super) fn pfc_dequeue_data(&mut self, port: usize, at: Time) -> bool {
        if self.paused(port) {
            return false;
        }
        let Some(pkt) = self.ports[port].q_lo.pop_front() else {
            return false;
        };
        self.pfc_departed(port, pkt.wire() as u64, at);
        self.depart(port, pkt, at);
        true
    }

    /// A data frame of `wire` bytes left `port`'s queue at `at`: uncharge its ingress, and
    /// resume that ingress if it drained to XON.
    fn pfc_departed(&mut self, port: usize, wire: u64, at: Time) {
        let pfc = self.pfc.as_mut().unwrap();
        let from = pfc.origin[port]
            .pop_front()
            .expect("a queued data frame without its ingress") as usize;
        pfc.ingress[from] -= wire;
        if pfc.xoff[from] && pfc.ingress[from] <= pfc.cfg.xon {
            pfc.xoff[from] = false;
            self.pfc_send(from, RESUME, at);
        }
    }

    /// The switch at the far end of `upstream` sends it a PAUSE or RESUME at `at`.
    fn pfc_send(&mut self, upstream: usize, what: u32, at: Time) {
        let pfc = self.pfc.as_ref().unwrap();
        let rev = pfc.reverse[upstream] as usize;
        let frame_time = self.ports[rev].rate.serialization(
            (self.fabric.packet.payload_bytes
                + self.fabric.packet.header_bytes
                + self.fabric.packet.gap_bytes) as u64,
        );
        // Behind the frame the reverse port is sending (at most one).
        let wait = Dur(self.ports[rev].busy_until.0.saturating_sub(at.0)).min(frame_time);
        let own = self.ports[rev].rate.serialization(PAUSE_FRAME_BYTES);
        let latency = self.topo.ports[rev].latency;
        let pfc = self.pfc.as_mut().unwrap();
        let arrive = (at + wait + own + latency)
            .max(pfc.last_arrival[upstream])
            .max(self.now);
        pfc.last_arrival[upstream] = arrive;
        if what == PAUSE {
            pfc.pauses[upstream] += 1;
        }
        self.events.push(arrive, Event::Pfc(code(upstream, what)));
    }

    /// An `Event::Pfc` at its port.
    pub(super) fn on_pfc(&mut self, id: u32) {
        let (port, what) = ((id >> 2) as usize, id & 3);
        if what == CHECK {
            return self.pfc_check_deadlock(port);
        }
        // Decisions owed before now are made as they would have been then.
        let host = self.ports[port].owner_is_host;
        if host {
            self.host_nic_now(self.topo.ports[port].owner);
        } else {
            self.catch_up(port, self.now);
        }
        let pfc = self.pfc.as_mut().unwrap();
        let paused = what == PAUSE;
        if pfc.paused[port] == paused {
            return;
        }
        pfc.paused[port] = paused;
        if host {
            self.hosts[self.topo.ports[port].owner as usize].paused = paused;
        }
        if paused {
            pfc.paused_since[port] = self.now;
            let check = self.now + pfc.cfg.deadlock_after;
            self.events.push(check, Event::Pfc(code(port, CHECK)));
            return;
        }
        pfc.paused_ps[port] += (self.now - pfc.paused_since[port]).0;
        if host {
            self.host_try_send(self.topo.ports[port].owner);
        } else {
            if self.ports[port].busy_until <= self.now && self.ports[port].queued > 0 {
                self.dequeue_at(port, self.now);
            }
            self.keep_draining(port);
        }
    }

    /// See the module's doc: a cycle of ports paused `deadlock_after` or longer ends the run.
    fn pfc_check_deadlock(&mut self, start: usize) {
        // Every flow is complete: what is left only drains (and a cycle cannot stop that
        // from being reported complete).
        if self.draining {
            return;
        }
        let pfc = self.pfc.as_ref().unwrap();
        let since = self.now.0.saturating_sub(pfc.cfg.deadlock_after.0);
        let stuck = |p: usize| pfc.paused[p] && pfc.paused_since[p].0 <= since;
        if !stuck(start) {
            return;
        }
        let mut walk = vec![start];
        loop {
            let u = *walk.last().unwrap();
            let node = self.ports[u].peer as usize;
            let next = self.topo.node_ports[node]
                .iter()
                .map(|&q| q as usize)
                .find(|&q| stuck(q) && pfc.origin[q].iter().any(|&o| o as usize == u));
            let Some(next) = next else { return };
            if let Some(at) = walk.iter().position(|&p| p == next) {
                let cycle: Vec<String> = walk[at..]
                    .iter()
                    .map(|&p| {
                        let s = &self.topo.ports[p];
                        format!("port {p} (node {} -> {})", s.owner, s.peer)
                    })
                    .collect();
                let reason = format!(
                    "PFC deadlock: {} are paused in a cycle (each holds data frames of \
                     the one before it) for at least qdisc.pfc deadlock_us = {:.3} us",
                    cycle.join(", "),
                    pfc.cfg.deadlock_after.0 as f64 / PS_PER_US as f64
                );
                self.error = Some(self.unfinished(reason));
                return;
            }
            walk.push(next);
        }
    }

    /// Paused time of every port up to `t` (ports still paused then included).
    pub(super) fn pfc_paused_until(&self, t: Time) -> Vec<u64> {
        let Some(pfc) = &self.pfc else {
            return vec![0; self.ports.len()];
        };
        (0..self.ports.len())
            .map(|p| {
                let open = if pfc.paused[p] {
                    t.0.saturating_sub(pfc.paused_since[p].0)
                } else {
                    0
                };
                pfc.paused_ps[p] + open
            })
            .collect()
    }
}
