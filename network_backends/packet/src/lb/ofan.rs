//! `ofan` (OFAN paper §7: switch-based destination rotation). An edge switch keeps
//! one round-robin pointer per (destination edge switch, size quantum), an
//! aggregation switch one per (destination pod, size quantum); each pointer starts
//! at a random port and walks the ports in its own random order. Consolidating
//! destinations this way balances downlinks as well as uplinks (paper App. F).
//! On a leaf-spine, leaves and spines key their pointers by destination leaf.

use super::{FlowId, Header, LbInit, LoadBalancer, Pointer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::units::Time;
use std::collections::HashMap;

pub struct Ofan {
    tier: Vec<u8>,
    pod: Vec<u32>,
    host_edge: Vec<u32>,
    three_tier: bool,
    /// (switch, destination edge or pod, next-hop group, is_ack) -> pointer. The group
    /// splits a pod's pointer only where failures left its edges different next hops
    /// (each pointer walks one schedule; the paper's FIB check).
    pointers: HashMap<(u32, u32, u32, bool), Pointer>,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "ofan", params).finish()?;
    let topo = init.topo;
    Ok(Box::new(Ofan {
        tier: topo.tier.clone(),
        pod: topo.pod.clone(),
        host_edge: topo.host_edge.clone(),
        three_tier: topo.tier.iter().any(|&t| t == 3),
        pointers: HashMap::new(),
        rng: derive_rng(init.seed, "lb.ofan", 0),
    }))
}

impl LoadBalancer for Ofan {
    /// A pointer rotates over its group's ports as they were: every one starts afresh.
    fn on_routes_changed(&mut self, _topo: &Topology) {
        self.pointers.clear();
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        let dst_edge = self.host_edge[hdr.dst as usize];
        let key = if self.three_tier && self.tier[view.node as usize] == 2 {
            self.pod[dst_edge as usize]
        } else {
            dst_edge
        };
        let rng = &mut self.rng;
        let n = view.candidates.len();
        let ptr = self
            .pointers
            .entry((view.node, key, view.group, hdr.is_ack))
            .or_insert_with(|| Pointer::random(n, rng));
        view.candidates[ptr.advance().0]
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("pointers", self.pointers.len() as u64)]
    }
}
