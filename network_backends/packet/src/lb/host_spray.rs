//! `host_spray` (OPS): the host draws a fresh random entropy for every packet;
//! switches hash it (ECMP), so packets of one flow spread over all paths.

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::units::Time;
use rand::Rng as _;

pub struct HostSpray {
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "host_spray", params).finish()?;
    Ok(Box::new(HostSpray {
        rng: derive_rng(init.seed, "lb.host_spray", 0),
    }))
}

impl LoadBalancer for HostSpray {
    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        self.rng.gen()
    }
}
