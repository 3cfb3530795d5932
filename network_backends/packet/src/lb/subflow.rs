//! `subflow` (SUBFLOW, MPTCP / MP-RDMA-style; OFAN paper Table 2: 4 subflows): the
//! host splits each flow into `subflows` parallel subflows, each with its own flow
//! label, and deals packets to them in turn; switches hash labels (ECMP).

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::derive_seed;
use crate::units::Time;

pub struct Subflow {
    subflows: u32,
    salt: u64,
    n_flows: u64,
}

/// Subflows per flow: the paper uses 4; more than this is a typo.
const MAX_SUBFLOWS: u64 = 4096;

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "subflow", params);
    let subflows = p.int_in("subflows", 4, 1, MAX_SUBFLOWS)? as u32;
    p.finish()?;
    Ok(Box::new(Subflow {
        subflows,
        salt: derive_seed(init.seed, "lb.subflow", 0),
        n_flows: init.flows.len() as u64,
    }))
}

impl LoadBalancer for Subflow {
    fn entropy(&mut self, _flow: FlowId, seq: u32, _now: Time) -> u32 {
        // The label of subflow i is fixed for the run; the ECMP hash mixes in the flow id.
        (crate::rng::mix64(self.salt ^ (seq % self.subflows) as u64)) as u32
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("queue_pairs", self.n_flows * self.subflows as u64)]
    }
}
