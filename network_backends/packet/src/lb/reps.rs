//! `reps` (Recycled Entropy Packet Spraying). For the first BDP of packets a flow sends
//! (its first round trip, as the Ethereal paper describes REPS, §4.2: a retransmission
//! later is no exploration) a flow explores entropies in sequence; afterwards it sends on
//! entropies that came back on unmarked ACKs. Two ways to hold them (`buffer`):
//!
//! - `buffer: 0`, SMaRTT-REPS Algorithm 4 as printed: one cached entropy, the latest
//!   unmarked ACK's, reused by every send until an ECN-marked ACK moves it to a fresh one.
//! - `buffer: B`, the REPS paper's recycling (arXiv 2407.21625, which the Ethereal and
//!   OFAN papers cite; its authors' UET simulator keeps B = 8): each unmarked ACK's
//!   entropy joins a ring of B, each send takes the oldest one there once, and a send
//!   that finds the ring empty explores a fresh entropy. A marked ACK's entropy is simply
//!   not recycled. Under ACK clocking both send one packet per returning ACK on its path;
//!   they differ when the window grows or shrinks: one cached entropy carries every extra
//!   packet onto one path (a flow's packets can gather on a few paths and stay there while
//!   no ACK is marked), the ring sends them to fresh paths.
//!
//! Beyond Algorithm 4 (its §3.6 leaves such policies open), a NACK or a timeout also
//! moves the flow on: a path that loses packets (a failed link blackholing them) returns
//! no ACK that could replace its entropy. A timeout moves it only if no unmarked ACK came
//! back for a whole timeout: otherwise the cached path is delivering and the expired
//! packet went another way (an exploration packet into a dead link, whose entropy REPS
//! simply never recycles); with a ring, such a timeout empties it.

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::transport::Feedback;
use crate::units::{Dur, Time};

/// The most entropies a recycling ring holds.
const MAX_BUFFER: usize = 64;

#[derive(Clone, Copy, Default)]
struct FlowState {
    next_entropy: u32,
    cached_entropy: u32,
    tried: u32,
    /// Packets sent, retransmissions included.
    sent: u32,
    /// When an unmarked ACK last came back (the cached path last proved itself).
    confirmed: Time,
    /// Recycling ring (`buffer` > 0): where the next entropy is written, and how many of
    /// the latest writes are still unused (the oldest of them is sent first).
    head: u8,
    unused: u8,
}

pub struct Reps {
    flows: Vec<FlowState>,
    /// Ring size (0: one cached entropy) and the rings, `buffer` entries per flow.
    buffer: usize,
    rings: Vec<u32>,
    num_entropies: u32,
    explore_packets: u32,
    rto: Dur,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "reps", params);
    let num_entropies = p.u32_min("num_entropies", 256, 1)?;
    let explore_packets = p.u32_min("explore_packets", init.bdp_packets, 0)?;
    let buffer = p.int_in("buffer", 0, 0, MAX_BUFFER as u64)? as usize;
    p.finish()?;
    Ok(Box::new(Reps {
        flows: vec![FlowState::default(); init.flows.len()],
        buffer,
        rings: vec![0; buffer * init.flows.len()],
        num_entropies,
        explore_packets,
        rto: init.rto,
    }))
}

impl Reps {
    fn fresh(&mut self, flow: FlowId) -> u32 {
        let f = &mut self.flows[flow as usize];
        let e = f.next_entropy;
        f.next_entropy = (f.next_entropy + 1) % self.num_entropies;
        f.tried = f.tried.saturating_add(1);
        e
    }

    /// Recycles `e` into `flow`'s ring, over its oldest entry when full.
    fn recycle(&mut self, flow: FlowId, e: u32) {
        let f = &mut self.flows[flow as usize];
        self.rings[flow as usize * self.buffer + f.head as usize] = e;
        f.head = ((f.head as usize + 1) % self.buffer) as u8;
        f.unused = (f.unused as usize + 1).min(self.buffer) as u8;
    }

    /// The oldest unused entropy of `flow`'s ring, used up; None if there is none.
    fn take(&mut self, flow: FlowId) -> Option<u32> {
        let f = &mut self.flows[flow as usize];
        if f.unused == 0 {
            return None;
        }
        let slot = (f.head as usize + self.buffer - f.unused as usize) % self.buffer;
        f.unused -= 1;
        Some(self.rings[flow as usize * self.buffer + slot])
    }
}

impl LoadBalancer for Reps {
    /// Per-flow state only; its entropies hash with the flow's connection.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn entropy(&mut self, flow: FlowId, _seq: u32, _now: Time) -> u32 {
        let f = self.flows[flow as usize];
        self.flows[flow as usize].sent = f.sent.saturating_add(1);
        if f.sent < self.explore_packets && f.tried < self.num_entropies {
            self.fresh(flow)
        } else if self.buffer == 0 {
            f.cached_entropy
        } else {
            self.take(flow).unwrap_or_else(|| self.fresh(flow))
        }
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        let congested = fb.ecn() || fb.nack();
        if !congested {
            self.flows[fb.flow as usize].confirmed = fb.now;
        }
        if self.buffer > 0 {
            if !congested {
                self.recycle(fb.flow, fb.echo);
            }
        } else {
            let cached = if congested {
                self.fresh(fb.flow)
            } else {
                fb.echo
            };
            self.flows[fb.flow as usize].cached_entropy = cached;
        }
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time) {
        if self.flows[flow as usize].confirmed + self.rto <= now {
            if self.buffer > 0 {
                self.flows[flow as usize].unused = 0;
            } else {
                self.flows[flow as usize].cached_entropy = self.fresh(flow);
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("entropy_caches", self.flows.len() as u64)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::lb::FlowInfo;
    use crate::topology::Topology;
    use crate::units::Rate;

    /// One flow on a k=4 fat tree, a BDP of 4 packets, a timeout of 1000 ps.
    fn reps(params: serde_json::Value) -> Box<dyn LoadBalancer> {
        let topo = Topology::build(
            &TopologyConfig::fat_tree(4),
            Rate::from_gbps(400.0),
            Dur(500_000),
        )
        .unwrap();
        let flows = [FlowInfo {
            src: 0,
            dst: 15,
            bytes: 1 << 20,
        }];
        let init = LbInit {
            topo: &topo,
            flows: &flows,
            seed: 1,
            bdp_packets: 4,
            rto: Dur(1000),
        };
        build(&init, &serde_json::from_value(params).unwrap()).unwrap()
    }

    fn ack(lb: &mut Box<dyn LoadBalancer>, echo: u32, ecn: bool, at: u64) {
        let mut fb = crate::loss::feedback(0, 0, Time(at));
        fb.echo = echo;
        if ecn {
            fb.flags |= crate::transport::flags::ECN;
        }
        lb.on_feedback(&fb);
    }

    #[test]
    fn a_ring_sends_each_recycled_entropy_once_then_explores() {
        let mut lb = reps(serde_json::json!({"buffer": 2}));
        let first: Vec<u32> = (0..4).map(|s| lb.entropy(0, s, Time(s as u64))).collect();
        assert_eq!(first, vec![0, 1, 2, 3]);
        // Unmarked 2 and 3 are recycled, marked 1 is not: 2, 3 once each, then fresh 4, 5.
        ack(&mut lb, 2, false, 10);
        ack(&mut lb, 1, true, 11);
        ack(&mut lb, 3, false, 12);
        let next: Vec<u32> = (4..8).map(|s| lb.entropy(0, s, Time(20))).collect();
        assert_eq!(next, vec![2, 3, 4, 5]);
        // A full ring drops its oldest: of 7, 8, 9 the ring of two keeps 8 and 9.
        for (i, e) in [7, 8, 9].into_iter().enumerate() {
            ack(&mut lb, e, false, 30 + i as u64);
        }
        assert_eq!(lb.entropy(0, 8, Time(40)), 8);
        // A timeout after a whole timeout of silence empties the ring: 9 is not sent.
        lb.on_timeout(0, Time(32 + 1000));
        assert_eq!(lb.entropy(0, 9, Time(1040)), 6);
    }

    #[test]
    fn only_the_first_bdp_of_sends_explores_and_a_timeout_moves_only_a_silent_path() {
        let mut lb = reps(serde_json::json!({}));
        // The first 4 sends explore entropies 0-3; an unmarked ACK caches the echo, 2.
        let first: Vec<u32> = (0..4).map(|s| lb.entropy(0, s, Time(s as u64))).collect();
        assert_eq!(first, vec![0, 1, 2, 3]);
        let mut fb = crate::loss::feedback(0, 2, Time(100));
        fb.echo = 2;
        lb.on_feedback(&fb);
        // A later resend of packet 1 (seq below the BDP) is no exploration: the cached path.
        assert_eq!(lb.entropy(0, 1, Time(200)), 2);
        // A timeout within one timeout (1000) of that ACK keeps the path; one after, moves on.
        lb.on_timeout(0, Time(1099));
        assert_eq!(lb.entropy(0, 5, Time(1099)), 2);
        lb.on_timeout(0, Time(1100));
        assert_eq!(lb.entropy(0, 6, Time(1100)), 4);
    }
}
