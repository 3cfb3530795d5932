//! `jsq` (OFAN §6.1, Join the Shortest Queue): every switch sends each packet to the
//! next hop with the fewest queued bytes, breaking ties uniformly at random.

use super::{argmin_random_tie, FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::PortId;
use crate::units::Time;

pub struct Jsq {
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "jsq", params).finish()?;
    Ok(Box::new(Jsq {
        rng: derive_rng(init.seed, "lb.jsq", 0),
    }))
}

impl LoadBalancer for Jsq {
    fn reads_queues(&self) -> bool {
        true
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, _hdr: &Header) -> PortId {
        argmin_random_tie(view.candidates, |p| view.queued_bytes(p), &mut self.rng)
    }
}
