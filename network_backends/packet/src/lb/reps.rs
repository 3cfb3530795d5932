//! `reps` (Recycled Entropy Packet Spraying, SMaRTT-REPS paper Algorithm 4).
//! For the first BDP of packets a flow sends (its first round trip, as the Ethereal paper
//! describes REPS, §4.2: a retransmission later is no exploration) a flow explores
//! entropies in sequence; afterwards
//! it reuses the entropy of the latest unmarked ACK, and moves on to a fresh
//! entropy whenever an ACK comes back ECN-marked. Beyond Algorithm 4 (its §3.6 leaves
//! such policies open), a NACK or a timeout also moves the flow on: a path that loses
//! packets (a failed link blackholing them) returns no ACK that could replace its entropy.
//! A timeout moves it only if no unmarked ACK came back for a whole timeout: otherwise the
//! cached path is delivering and the expired packet went another way (an exploration
//! packet into a dead link, whose entropy REPS simply never recycles).

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::transport::Feedback;
use crate::units::{Dur, Time};

#[derive(Clone, Copy, Default)]
struct FlowState {
    next_entropy: u32,
    cached_entropy: u32,
    tried: u32,
    /// Packets sent, retransmissions included.
    sent: u32,
    /// When an unmarked ACK last came back (the cached path last proved itself).
    confirmed: Time,
}

pub struct Reps {
    flows: Vec<FlowState>,
    num_entropies: u32,
    explore_packets: u32,
    rto: Dur,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "reps", params);
    let num_entropies = p.u32_min("num_entropies", 256, 1)?;
    let explore_packets = p.u32_min("explore_packets", init.bdp_packets, 0)?;
    p.finish()?;
    Ok(Box::new(Reps {
        flows: vec![FlowState::default(); init.flows.len()],
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
        } else {
            f.cached_entropy
        }
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        let cached = if fb.ecn() || fb.nack() {
            self.fresh(fb.flow)
        } else {
            self.flows[fb.flow as usize].confirmed = fb.now;
            fb.echo
        };
        self.flows[fb.flow as usize].cached_entropy = cached;
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time) {
        if self.flows[flow as usize].confirmed + self.rto <= now {
            self.flows[flow as usize].cached_entropy = self.fresh(flow);
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

    #[test]
    fn only_the_first_bdp_of_sends_explores_and_a_timeout_moves_only_a_silent_path() {
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
        let mut lb = build(&init, &Params::new()).unwrap();
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
