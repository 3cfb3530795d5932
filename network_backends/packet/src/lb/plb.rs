//! `plb` (HOST FLOWLET AR, modeled after PLB): the host keeps one flow label per
//! flow and counts ECN echoes in rounds of `alpha` ACKs; when more than `beta` of a
//! round's packets were marked it moves the flow to a fresh random label. So a flow
//! changes path at most once every `alpha` packets (OFAN paper §3.2 and footnote 2;
//! Table 2: label change above 40 % marked, switches marking at 50 % of the buffer,
//! which the `plb` preset sets). `alpha` defaults to one BDP of packets, PLB's round.

use super::{FlowId, LbInit, LoadBalancer};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::transport::Feedback;
use crate::units::Time;
use rand::Rng as _;

#[derive(Clone, Copy, Default)]
struct FlowState {
    label: u32,
    acks: u32,
    marked: u32,
}

pub struct Plb {
    flows: Vec<FlowState>,
    alpha: u32,
    beta: f64,
    changes: u64,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "plb", params);
    let alpha = p.u32_min("alpha", init.bdp_packets.max(1), 1)?;
    let beta = p.f64_in("beta", 0.4, 0.0, 1.0)?;
    p.finish()?;
    let mut rng = derive_rng(init.seed, "lb.plb", 0);
    let flows = (0..init.flows.len())
        .map(|_| FlowState {
            label: rng.gen(),
            ..FlowState::default()
        })
        .collect();
    Ok(Box::new(Plb {
        flows,
        alpha,
        beta,
        changes: 0,
        rng,
    }))
}

impl LoadBalancer for Plb {
    fn entropy(&mut self, flow: FlowId, _seq: u32, _now: Time) -> u32 {
        self.flows[flow as usize].label
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        let f = &mut self.flows[fb.flow as usize];
        f.acks += 1;
        f.marked += fb.ecn() as u32;
        if f.acks == self.alpha {
            if f.marked as f64 > self.beta * self.alpha as f64 {
                f.label = self.rng.gen();
                self.changes += 1;
            }
            f.acks = 0;
            f.marked = 0;
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("label_changes", self.changes)]
    }
}
