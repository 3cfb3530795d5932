//! `drill` (DRILL, Ghorbani et al. 2017, with d = 2 samples and m = 1 memory): a
//! switch compares the queues of two random next hops and of the port it chose last
//! time for this next-hop group, and takes the shortest.

use super::{FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::units::Time;
use rand::Rng as _;

pub struct Drill {
    samples: usize,
    /// Last choice per next-hop group.
    memory: Vec<Option<PortId>>,
    rng: Rng,
}

/// Random ports compared per packet (DRILL uses 2): each costs a draw on every packet.
const MAX_SAMPLES: u64 = 64;

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "drill", params);
    let samples = p.int_in("samples", 2, 1, MAX_SAMPLES)? as usize;
    p.finish()?;
    Ok(Box::new(Drill {
        samples,
        memory: vec![None; init.topo.groups.len()],
        rng: derive_rng(init.seed, "lb.drill", 0),
    }))
}

impl LoadBalancer for Drill {
    fn on_routes_changed(&mut self, topo: &Topology) {
        self.memory = vec![None; topo.groups.len()];
    }

    fn reads_queues(&self) -> bool {
        true
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, _hdr: &Header) -> PortId {
        let q = |p: PortId| view.queued_bytes(p);
        let mut best = self.memory[view.group as usize]
            .unwrap_or(view.candidates[self.rng.gen_range(0..view.candidates.len())]);
        for _ in 0..self.samples {
            let p = view.candidates[self.rng.gen_range(0..view.candidates.len())];
            if q(p) < q(best) {
                best = p;
            }
        }
        self.memory[view.group as usize] = Some(best);
        best
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![(
            "pointers",
            self.memory.iter().filter(|m| m.is_some()).count() as u64,
        )]
    }
}
