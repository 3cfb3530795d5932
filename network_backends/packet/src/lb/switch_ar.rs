//! `switch_ar` (Spectrum-X-style adaptive routing): the switch quantizes each
//! candidate's queue into bins bounded by fractions of the buffer (default 5 %,
//! 10 %, 20 %: OFAN paper Table 2) and picks uniformly among the lowest bin.

use super::{argmin_random_tie, FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::PortId;
use crate::units::Time;

pub struct SwitchAr {
    /// Bin edges as fractions of the port buffer, ascending.
    edges: [f64; 3],
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "switch_ar", params);
    let q1 = p.f64_in("quantum1", 0.05, 0.0, 1.0)?;
    let q2 = p.f64_in("quantum2", 0.10, 0.0, 1.0)?;
    let q3 = p.f64_in("quantum3", 0.20, 0.0, 1.0)?;
    p.ascending(&[("quantum1", q1), ("quantum2", q2), ("quantum3", q3)])?;
    p.finish()?;
    Ok(Box::new(SwitchAr {
        edges: [q1, q2, q3],
        rng: derive_rng(init.seed, "lb.switch_ar", 0),
    }))
}

/// Index of the bin a queue falls in: the number of edges at or below its buffer fraction.
fn bin(edges: &[f64; 3], queued: u64, buffer: u64) -> u64 {
    let frac = queued as f64 / buffer as f64;
    edges.iter().take_while(|&&e| frac >= e).count() as u64
}

impl LoadBalancer for SwitchAr {
    fn reads_queues(&self) -> bool {
        true
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, _hdr: &Header) -> PortId {
        let edges = &self.edges;
        argmin_random_tie(
            view.candidates,
            |p| bin(edges, view.queued_bytes(p), view.buffer_bytes),
            &mut self.rng,
        )
    }
}
