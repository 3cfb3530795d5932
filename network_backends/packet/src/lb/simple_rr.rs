//! `simple_rr` (OFAN §6.1, the SIMPLE RR model): each switch keeps one round-robin
//! pointer per next-hop group, whatever the destination, and never reshuffles it.
//! Data and ACKs keep separate pointers (two size quanta, as OFAN's pointers do):
//! with one shared pointer, a strict data/ACK alternation would confine the data
//! to every other next hop.

use super::{FlowId, Header, LbInit, LoadBalancer, Pointer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::units::Time;

pub struct SimpleRr {
    /// One per (next-hop group, quantum), created on first use.
    pointers: Vec<Option<Pointer>>,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "simple_rr", params).finish()?;
    Ok(Box::new(SimpleRr {
        pointers: (0..2 * init.topo.groups.len()).map(|_| None).collect(),
        rng: derive_rng(init.seed, "lb.simple_rr", 0),
    }))
}

impl LoadBalancer for SimpleRr {
    fn on_routes_changed(&mut self, topo: &Topology) {
        self.pointers = (0..2 * topo.groups.len()).map(|_| None).collect();
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        let rng = &mut self.rng;
        let ptr = self.pointers[2 * view.group as usize + hdr.is_ack as usize]
            .get_or_insert_with(|| Pointer::random(view.candidates.len(), rng));
        view.candidates[ptr.advance().0]
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![(
            "pointers",
            self.pointers.iter().filter(|p| p.is_some()).count() as u64,
        )]
    }
}
