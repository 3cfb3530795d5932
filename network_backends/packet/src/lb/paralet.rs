//! `paralet` (ParaLet paper §3-§5): each flow runs `m` parallel flowlets (one queue
//! pair each, so each gets 1/m of the host's rate: packets are dealt to them in
//! turn), and every flowlet of `flowlet_packets` packets takes a fresh ECMP-hashed
//! label; packets within a flowlet share one path and stay in order. Defaults: m = 32,
//! flowlets of 4 BDP / m (paper §5.2).

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_seed, mix64};
use crate::units::Time;

pub struct Paralet {
    m: u32,
    flowlet_packets: u32,
    salt: u64,
    n_flows: u64,
}

/// Lanes (queue pairs) per flow: the paper sweeps up to 32; more than this is a typo.
const MAX_LANES: u64 = 4096;

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "paralet", params);
    let m = p.int_in("m", 32, 1, MAX_LANES)? as u32;
    let default_size = (4 * init.bdp_packets as u64)
        .div_ceil(m as u64)
        .clamp(1, u32::MAX as u64);
    let flowlet_packets = p.u32_min("flowlet_packets", default_size as u32, 1)?;
    p.finish()?;
    Ok(Box::new(Paralet {
        m,
        flowlet_packets,
        salt: derive_seed(init.seed, "lb.paralet", 0),
        n_flows: init.flows.len() as u64,
    }))
}

impl LoadBalancer for Paralet {
    fn entropy(&mut self, _flow: FlowId, seq: u32, _now: Time) -> u32 {
        let lane = seq % self.m;
        let flowlet = seq / self.m / self.flowlet_packets;
        mix64(self.salt ^ ((lane as u64) << 32 | flowlet as u64)) as u32
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("queue_pairs", self.n_flows * self.m as u64)]
    }
}
