//! `jsq` (OFAN §6.1, Join the Shortest Queue): every switch sends each packet to the
//! next hop with the fewest queued bytes, breaking ties uniformly at random.

use super::{FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::PortId;
use crate::units::Time;
use rand::Rng as _;

pub struct Jsq {
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    ParamReader::new("lb", "jsq", params).finish()?;
    Ok(Box::new(Jsq { rng: derive_rng(init.seed, "lb.jsq", 0) }))
}

/// Uniform choice among the ports whose key is smallest (reservoir sampling: one pass).
pub fn argmin_random_tie(ports: &[PortId], key: impl Fn(PortId) -> u64, rng: &mut Rng) -> PortId {
    let (mut best, mut best_key, mut ties) = (ports[0], key(ports[0]), 1u32);
    for &p in &ports[1..] {
        let k = key(p);
        if k < best_key {
            (best, best_key, ties) = (p, k, 1);
        } else if k == best_key {
            ties += 1;
            if rng.gen_range(0..ties) == 0 {
                best = p;
            }
        }
    }
    best
}

impl LoadBalancer for Jsq {
    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, _hdr: &Header) -> PortId {
        argmin_random_tie(view.candidates, |p| view.queued_bytes[p as usize], &mut self.rng)
    }
}
