//! `switch_rr` (OFAN SWITCH PKT, "borrowed from htsim"): htsim's switch round-robin.
//! A switch keeps one pointer per next-hop group (htsim's edge switches share one
//! up-route list among all remote destinations) and reshuffles the pointer's order every
//! `permute_every` wraparounds so that switches do not fall into lockstep (OFAN Table 2:
//! every 5). Only data packets move the pointer: ACKs (small packets) are ECMP-hashed,
//! as several htsim forks do, so they neither consume round-robin slots nor confine the
//! data to every other next hop. (htsim's master also gives aggregation switches one
//! order per destination and lets ACKs take slots; the README has what that measures.)

use super::{ecmp_index, FlowId, Header, LbInit, LoadBalancer, Pointer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::units::Time;

pub struct SwitchRr {
    /// One per next-hop group, created on first use, with its wraparound count.
    pointers: Vec<Option<(Pointer, u32)>>,
    permute_every: u32,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "switch_rr", params);
    let permute_every = p.u32_min("permute_every", 5, 1)?;
    p.finish()?;
    Ok(Box::new(SwitchRr {
        pointers: (0..init.topo.groups.len()).map(|_| None).collect(),
        permute_every,
        rng: derive_rng(init.seed, "lb.switch_rr", 0),
    }))
}

impl LoadBalancer for SwitchRr {
    fn on_routes_changed(&mut self, topo: &Topology) {
        self.pointers = (0..topo.groups.len()).map(|_| None).collect();
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        if hdr.is_ack {
            return view.candidates[ecmp_index(view.salt, hdr, view.candidates.len())];
        }
        let rng = &mut self.rng;
        let (ptr, wraps) = self.pointers[view.group as usize]
            .get_or_insert_with(|| (Pointer::random(view.candidates.len(), rng), 0));
        let (i, wrapped) = ptr.advance();
        if wrapped {
            *wraps += 1;
            if *wraps % self.permute_every == 0 {
                ptr.reshuffle(&mut self.rng);
            }
        }
        view.candidates[i]
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![(
            "pointers",
            self.pointers.iter().filter(|p| p.is_some()).count() as u64,
        )]
    }
}
