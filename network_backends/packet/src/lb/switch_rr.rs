//! `switch_rr` (SWITCH PKT): each switch round-robins packets over the next hops of
//! a destination group, and reshuffles the order every `permute_every` wraparounds
//! so that switches do not fall into lockstep (OFAN paper Table 2: every 5).
//! `simple_rr` (OFAN §6.1, the SIMPLE RR model) is the same without reshuffling.
//! Data and ACKs keep separate pointers (two size quanta, as OFAN's pointers do):
//! with one shared pointer, a strict data/ACK alternation would confine the data
//! to every other next hop.

use super::{FlowId, Header, LbInit, LoadBalancer, Pointer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::PortId;
use crate::units::Time;

pub struct SwitchRr {
    /// One per (next-hop group, quantum), created on first use, with its wraparound count.
    pointers: Vec<Option<(Pointer, u32)>>,
    /// Reshuffle after this many wraparounds; 0 = never.
    permute_every: u32,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "switch_rr", params);
    let permute_every = p.u64_min("permute_every", 5, 1)? as u32;
    p.finish()?;
    Ok(Box::new(new(init, permute_every, "lb.switch_rr")))
}

pub fn build_simple(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "simple_rr", params).finish()?;
    Ok(Box::new(new(init, 0, "lb.simple_rr")))
}

fn new(init: &LbInit, permute_every: u32, stream: &str) -> SwitchRr {
    SwitchRr {
        pointers: (0..2 * init.topo.groups.len()).map(|_| None).collect(),
        permute_every,
        rng: derive_rng(init.seed, stream, 0),
    }
}

impl LoadBalancer for SwitchRr {
    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        let rng = &mut self.rng;
        let (ptr, wraps) = self.pointers[2 * view.group as usize + hdr.is_ack as usize]
            .get_or_insert_with(|| (Pointer::random(view.candidates.len(), rng), 0));
        let (i, wrapped) = ptr.advance();
        if wrapped {
            *wraps += 1;
            if self.permute_every > 0 && *wraps % self.permute_every == 0 {
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
