//! `ecmp`: per-flow hashing. Every packet of a flow carries the same entropy, so
//! every switch sends the whole flow down one path.

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::units::Time;

pub struct Ecmp;

pub fn build(_init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "ecmp", params).finish()?;
    Ok(Box::new(Ecmp))
}

impl LoadBalancer for Ecmp {
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }
}
