//! `reps` (Recycled Entropy Packet Spraying, SMaRTT-REPS paper Algorithm 4).
//! For the first BDP of packets a flow explores entropies in sequence; afterwards
//! it reuses the entropy of the latest unmarked ACK, and moves on to a fresh
//! entropy whenever an ACK comes back ECN-marked. Beyond Algorithm 4 (its §3.6 leaves
//! such policies open), a NACK or a timeout also moves the flow on: a path that loses
//! packets (a failed link blackholing them) returns no ACK that could replace its entropy.

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::transport::Feedback;
use crate::units::Time;

#[derive(Clone, Copy, Default)]
struct FlowState {
    next_entropy: u32,
    cached_entropy: u32,
    tried: u32,
}

pub struct Reps {
    flows: Vec<FlowState>,
    num_entropies: u32,
    explore_packets: u32,
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

    fn entropy(&mut self, flow: FlowId, seq: u32, _now: Time) -> u32 {
        let f = self.flows[flow as usize];
        if seq < self.explore_packets && f.tried < self.num_entropies {
            self.fresh(flow)
        } else {
            f.cached_entropy
        }
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        let cached = if fb.ecn() || fb.nack() {
            self.fresh(fb.flow)
        } else {
            fb.echo
        };
        self.flows[fb.flow as usize].cached_entropy = cached;
    }

    fn on_timeout(&mut self, flow: FlowId, _now: Time) {
        self.flows[flow as usize].cached_entropy = self.fresh(flow);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("entropy_caches", self.flows.len() as u64)]
    }
}
