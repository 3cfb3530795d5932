//! `host_dr` (HOST DR, DRB; OFAN paper §6.1): every source host keeps one round-robin
//! pointer per (destination host, size quantum) over the paths through the common
//! switches of the lowest common layer (aggregation switches within a pod, core
//! switches across pods), and source-routes each packet on the next path. Data and
//! ACKs are the two quanta: the receiver rotates its ACKs with a pointer of its own.

use super::source_route::SourceRoutes;
use super::{FlowId, FlowInfo, Header, LbInit, LoadBalancer, Pointer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::units::Time;
use std::collections::HashMap;

pub struct HostDr {
    routes: SourceRoutes,
    flows: Vec<FlowInfo>,
    /// (sending host, receiving host, is_ack) -> pointer over path ids.
    pointers: HashMap<(u32, u32, bool), Pointer>,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "host_dr", params).finish()?;
    Ok(Box::new(HostDr {
        routes: SourceRoutes::new(init.topo),
        flows: init.flows.to_vec(),
        pointers: HashMap::new(),
        rng: derive_rng(init.seed, "lb.host_dr", 0),
    }))
}

impl HostDr {
    fn next_path(&mut self, from: u32, to: u32, ack: bool) -> u32 {
        let n = self.routes.paths_between(from, to) as usize;
        let rng = &mut self.rng;
        self.pointers
            .entry((from, to, ack))
            .or_insert_with(|| Pointer::random(n, rng))
            .advance()
            .0 as u32
    }
}

impl LoadBalancer for HostDr {
    fn on_routes_changed(&mut self, topo: &Topology) {
        self.routes.routes_changed(topo);
    }

    fn entropy(&mut self, flow: FlowId, _seq: u32, _now: Time) -> u32 {
        let f = self.flows[flow as usize];
        self.next_path(f.src, f.dst, false)
    }

    fn ack_entropy(&mut self, flow: FlowId, _data_entropy: u32, _now: Time) -> u32 {
        let f = self.flows[flow as usize];
        self.next_path(f.dst, f.src, true)
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        self.routes.port(view, hdr.entropy)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("pointers", self.pointers.len() as u64)]
    }
}
