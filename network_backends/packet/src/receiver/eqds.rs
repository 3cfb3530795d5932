//! `eqds`: EQDS's receiver (CC-CATALOGUE §8): a pull pacer per receiving host on top of
//! the loss-recovery scheme's policy (`ReceiverInit::inner`), which answers every data
//! packet as it would alone. The pacer sends one PULL per full frame time at
//! `rate_fraction` (0.99) of the line rate, each credit for one packet: first to flows
//! with a packet that arrived trimmed (retransmissions first, round robin over those
//! flows), then to the other flows with packets still to pull, round robin. The pacer's rate is for all the
//! data reaching the host: each whole speculative (unsolicited) packet takes the place of
//! a pull (the pacer skips a turn). A flow's first arrival tells the receiver its whole
//! window is on the way (trimmed headers overtake the whole packets queued ahead of the
//! host's link), so it charges the window then and refunds each packet that arrives
//! trimmed. Pulled packets then do not meet a queue still full of speculative ones, and
//! only the first window is trimmed.
//!
//! What a flow still needs pulling, from what the receiver sees: its packets not yet
//! delivered, less the credit still out. Credit out = the sender's unsolicited packets
//! (`CongestionControl::unsolicited_packets`) + pulls sent - packets arrived (trimmed ones
//! included: each used a credit), at least 0. A packet lost without a trace keeps its
//! credit out; the sender's timeout makes it up (see `cc::eqds`).

use super::{Arrival, Pull, ReceiverInit, ReceiverPolicy, Reply};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::flags;
use crate::units::{Dur, Time};
use std::collections::VecDeque;

#[derive(Clone, Default)]
struct Flow {
    packets: u32,
    /// Distinct packets the inner policy accepted (`seen` bit set).
    delivered: u32,
    seen: Vec<u64>,
    /// Credit granted without pulls (the sender's unsolicited packets) and by pulls.
    granted: u64,
    unsolicited: u64,
    arrived: u64,
    pulls: u32,
    /// In its host's round robin.
    active: bool,
    /// Packets that arrived trimmed and are not pulled again yet (in its host's `resend`
    /// while not 0).
    trimmed: u32,
}

impl Flow {
    fn wanted(&self) -> u64 {
        let out = self.granted.saturating_sub(self.arrived);
        ((self.packets - self.delivered) as u64).saturating_sub(out)
    }
}

#[derive(Default)]
struct Host {
    /// Flows with packets arrived trimmed (`Flow::trimmed` > 0), each once, round robin.
    resend: VecDeque<u32>,
    active: Vec<u32>,
    rr: usize,
    /// The pacer runs (has a wake-up pending).
    running: bool,
    /// No pull before then.
    next_pull: Time,
    /// Whole unsolicited packets (arrived or on the way) no turn of the pacer has yet
    /// made up for.
    skips: u64,
}

pub struct Eqds {
    inner: Box<dyn ReceiverPolicy>,
    flows: Vec<Flow>,
    dst: Vec<u32>,
    hosts: Vec<Host>,
    interval: Dur,
    pulls: u64,
}

pub fn build(init: &ReceiverInit, params: &Params) -> SimResult<Box<dyn ReceiverPolicy>> {
    let mut p = ParamReader::new("receiver", "eqds", params);
    let fraction = p.f64_in_open_closed("rate_fraction", 0.99, 0.0, 1.0)?;
    p.finish()?;
    // The pacer answers data packets with another policy; it cannot be its own.
    if init.inner == "eqds" {
        return Err(crate::error::config_err(
            "scheme.receiver",
            "`eqds` is the pull pacer the `eqds` CC installs; the policy that answers data \
             packets under it must be one of: ack, gbn",
        ));
    }
    let inner = super::build(init.inner, init, &Params::new())?;
    let flows = (0..init.n_flows)
        .map(|f| Flow {
            packets: init.packets[f],
            seen: vec![0; (init.packets[f] as usize).div_ceil(64)],
            granted: init.unsolicited[f].min(init.packets[f]) as u64,
            unsolicited: init.unsolicited[f].min(init.packets[f]) as u64,
            ..Flow::default()
        })
        .collect();
    Ok(Box::new(Eqds {
        inner,
        flows,
        dst: init.dst.to_vec(),
        hosts: (0..init.n_hosts).map(|_| Host::default()).collect(),
        interval: Dur((init.frame_time.0 as f64 / fraction).round() as u64),
        pulls: 0,
    }))
}

impl Eqds {
    /// The next flow of `host` to pull for: a trimmed packet's first, then round robin.
    fn pick(&mut self, host: usize) -> Option<u32> {
        let (flows, h) = (&mut self.flows, &mut self.hosts[host]);
        while let Some(f) = h.resend.pop_front() {
            let flow = &mut flows[f as usize];
            if flow.wanted() == 0 {
                flow.trimmed = 0;
                continue;
            }
            flow.trimmed -= 1;
            if flow.trimmed > 0 {
                h.resend.push_back(f);
            }
            return Some(f);
        }
        // Flows all delivered leave the round robin for good.
        h.active
            .retain(|&f| flows[f as usize].delivered < flows[f as usize].packets);
        let n = h.active.len();
        for i in 0..n {
            let f = h.active[(h.rr + i) % n];
            if flows[f as usize].wanted() > 0 {
                h.rr = (h.rr + i + 1) % n;
                return Some(f);
            }
        }
        None
    }
}

impl Eqds {
    /// Puts `flow` in its host's round robin if it has packets to deliver; `reply`.
    fn activate(&mut self, flow: FlowId, host: usize, reply: Reply) -> Reply {
        let f = &mut self.flows[flow as usize];
        if !f.active && f.delivered < f.packets {
            f.active = true;
            self.hosts[host].active.push(flow);
        }
        reply
    }
}

impl ReceiverPolicy for Eqds {
    fn on_data(&mut self, a: &Arrival) -> Reply {
        let reply = self.inner.on_data(a);
        let host = self.dst[a.flow as usize] as usize;
        let f = &mut self.flows[a.flow as usize];
        f.arrived += 1;
        let h = &mut self.hosts[host];
        if f.arrived == 1 {
            h.skips += f.unsolicited;
        }
        if a.flags & flags::TRIMMED != 0 {
            // Its first arrivals are its speculative window (sent ahead of any pull).
            if f.arrived <= f.unsolicited {
                h.skips = h.skips.saturating_sub(1);
            }
            f.trimmed += 1;
            if f.trimmed == 1 {
                h.resend.push_back(a.flow);
            }
            return self.activate(a.flow, host, reply);
        }
        if let Reply::Ack { seq, flags: fl } = reply {
            // Accepted: acknowledged as itself, not NACKed (Go-Back-N discards what it
            // NACKs or answers with an older sequence number).
            // (Erasure coding numbers packets past the flow's: any `packets` distinct ones do.)
            let (word, bit) = ((a.seq / 64) as usize, a.seq % 64);
            if word >= f.seen.len() {
                f.seen.resize(word + 1, 0);
            }
            if seq == a.seq
                && fl & flags::NACK == 0
                && f.seen[word] >> bit & 1 == 0
                && f.delivered < f.packets
            {
                f.seen[word] |= 1 << bit;
                f.delivered += 1;
            }
        }
        self.activate(a.flow, host, reply)
    }

    fn paces(&self) -> bool {
        true
    }

    fn pacer_wake(&mut self, host: u32, now: Time) -> Option<Time> {
        let h = &mut self.hosts[host as usize];
        if h.running {
            return None;
        }
        h.running = true;
        Some(h.next_pull.max(now))
    }

    fn on_pacer(&mut self, host: u32, now: Time) -> (Option<Pull>, Option<Time>) {
        let h = &mut self.hosts[host as usize];
        if h.skips > 0 {
            h.skips -= 1;
            h.next_pull = now + self.interval;
            return (None, Some(h.next_pull));
        }
        let Some(f) = self.pick(host as usize) else {
            self.hosts[host as usize].running = false;
            return (None, None);
        };
        let flow = &mut self.flows[f as usize];
        flow.pulls += 1;
        flow.granted += 1;
        self.pulls += 1;
        let next = now + self.interval;
        self.hosts[host as usize].next_pull = next;
        (
            Some(Pull {
                flow: f as FlowId,
                seq: flow.pulls,
            }),
            Some(next),
        )
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = self.inner.counters();
        c.push(("pulls", self.pulls));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two flows of 4 packets to host 0, 2 unsolicited each, frames of 99 ps.
    fn pacer() -> Box<dyn ReceiverPolicy> {
        let init = ReceiverInit {
            n_flows: 2,
            dst: &[0, 0],
            packets: &[4, 4],
            unsolicited: &[2, 2],
            n_hosts: 1,
            frame_time: Dur(99),
            inner: "ack",
        };
        build(&init, &Params::new()).unwrap()
    }

    fn arrive(r: &mut Box<dyn ReceiverPolicy>, flow: FlowId, seq: u32, fl: u8) -> Reply {
        r.on_data(&Arrival {
            flow,
            seq,
            flags: fl,
            now: Time(0),
        })
    }

    #[test]
    fn the_pacer_cannot_answer_with_itself() {
        let init = ReceiverInit {
            inner: "eqds",
            ..ReceiverInit::plain(1)
        };
        match build(&init, &Params::new()) {
            Err(crate::error::SimError::InvalidConfig { field, .. }) => {
                assert_eq!(field, "scheme.receiver")
            }
            _ => panic!("a pacer over itself must be refused"),
        }
    }

    #[test]
    fn pulls_retransmissions_first_then_round_robin_at_the_paced_rate() {
        let mut r = pacer();
        // Flow 0's window: packet 0 whole, packet 1 trimmed (NACKed by the inner policy).
        assert_eq!(arrive(&mut r, 0, 0, 0), Reply::Ack { seq: 0, flags: 0 });
        assert_eq!(
            arrive(&mut r, 0, 1, flags::TRIMMED),
            Reply::Ack {
                seq: 1,
                flags: flags::TRIMMED | flags::NACK
            }
        );
        // The pacer starts now; flow 1's whole window arrives (charged at its first).
        assert_eq!(r.pacer_wake(0, Time(10)), Some(Time(10)));
        assert_eq!(r.pacer_wake(0, Time(10)), None, "already running");
        arrive(&mut r, 1, 0, 0);
        arrive(&mut r, 1, 1, 0);
        // Charged: flow 0's window (2) less its trimmed packet, and flow 1's (2): three
        // turns skipped, 100 ps apart (99 / 0.99).
        let mut t = Time(10);
        for _ in 0..3 {
            let (pull, next) = r.on_pacer(0, t);
            assert_eq!(pull, None);
            t = next.unwrap();
        }
        assert_eq!(t, Time(310));
        // Then the trimmed packet first, then round robin: flow 0 still wants 2 (its
        // packets 2, 3), flow 1 wants 2.
        let mut order = vec![];
        while let (Some(p), next) = r.on_pacer(0, t) {
            order.push((p.flow, p.seq));
            t = next.unwrap();
        }
        assert_eq!(order, [(0, 1), (0, 2), (1, 1), (0, 3), (1, 2)]);
        assert_eq!(r.counters().last(), Some(&("pulls", 5)));
    }
}
