//! `rsq` (OFAN §6.1, Randomized Switch Queueing): every switch sends each packet to
//! a uniformly random next hop, independent of queues.

use super::{FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::PortId;
use crate::units::Time;
use rand::Rng as _;

pub struct Rsq {
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "rsq", params).finish()?;
    Ok(Box::new(Rsq {
        rng: derive_rng(init.seed, "lb.rsq", 0),
    }))
}

impl LoadBalancer for Rsq {
    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, _hdr: &Header) -> PortId {
        view.candidates[self.rng.gen_range(0..view.candidates.len())]
    }
}
