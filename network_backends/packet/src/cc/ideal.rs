//! `ideal`: fixed-rate sending (OFAN paper §4, App. A). Every flow sends at
//! `rho` x line rate with no window; rho = 1 (the default) on a full-bisection
//! fabric without failures, or rho_max = B/F computed for a failure scenario.

use super::{CcInit, CongestionControl};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::units::{Dur, Rate};

pub struct Ideal {
    paced: Option<Rate>,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    let mut p = ParamReader::new("cc", "ideal", params);
    let rho = p.f64_in("rho", 1.0, 1e-6, 1.0)?;
    p.finish()?;
    let paced = (rho < 1.0).then(|| Rate::from_gbps(init.line_rate.bps() as f64 * rho / 1e9));
    Ok(Box::new(Ideal { paced }))
}

impl CongestionControl for Ideal {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn window_bytes(&self, _flow: FlowId) -> u64 {
        u64::MAX
    }

    fn pacing_gap(&self, _flow: FlowId, wire_bytes: u32) -> Option<Dur> {
        self.paced.map(|r| r.serialization(wire_bytes as u64))
    }

    fn never_holds_back(&self) -> bool {
        self.paced.is_none()
    }
}
