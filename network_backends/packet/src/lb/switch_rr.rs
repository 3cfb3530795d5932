//! `switch_rr`: each switch round-robins packets over the next hops of a
//! destination group, and reshuffles the order every `permute_every` wraparounds
//! so that switches do not fall into lockstep (OFAN paper Table 2: every 5).
//! Data and ACKs keep separate pointers (as the OFAN paper's pointer schemes keep one per
//! size quantum): with one shared pointer, a strict data/ACK alternation would confine
//! the data to every other next hop.

use super::{FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::PortId;
use crate::units::Time;
use rand::seq::SliceRandom;

struct Pointer {
    order: Vec<u16>,
    next: u16,
    wraps: u32,
}

pub struct SwitchRr {
    pointers: Vec<Option<Pointer>>,
    permute_every: u32,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "switch_rr", params);
    let permute_every = p.u64_min("permute_every", 5, 1)? as u32;
    p.finish()?;
    Ok(Box::new(SwitchRr {
        pointers: (0..2 * init.topo.groups.len()).map(|_| None).collect(),
        permute_every,
        rng: derive_rng(init.seed, "lb.switch_rr", 0),
    }))
}

impl LoadBalancer for SwitchRr {
    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        let rng = &mut self.rng;
        let ptr = self.pointers[2 * view.group as usize + hdr.is_ack as usize].get_or_insert_with(|| {
            let mut order: Vec<u16> = (0..view.candidates.len() as u16).collect();
            order.shuffle(rng);
            Pointer { order, next: 0, wraps: 0 }
        });
        let port = view.candidates[ptr.order[ptr.next as usize] as usize];
        ptr.next += 1;
        if ptr.next as usize == ptr.order.len() {
            ptr.next = 0;
            ptr.wraps += 1;
            if ptr.wraps % self.permute_every == 0 {
                ptr.order.shuffle(&mut self.rng);
            }
        }
        port
    }

    fn state_entries(&self) -> u64 {
        self.pointers.iter().filter(|p| p.is_some()).count() as u64
    }
}
