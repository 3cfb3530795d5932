//! `letflow` (LetFlow, Vanini et al. NSDI'17): a switch keeps each flow on its port
//! until the flow pauses for longer than `gap_us` (50, 100 or 200 us in the papers'
//! sweeps; 100 by default), then sends the next flowlet to a random next hop.

use super::{FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::units::{Dur, Time, PS_PER_US};
use rand::Rng as _;
use std::collections::HashMap;

pub struct Letflow {
    gap: Dur,
    /// (switch, flow, is_ack) -> (port, last packet seen).
    table: HashMap<(u32, FlowId, bool), (PortId, Time)>,
    flowlets: u64,
    rng: Rng,
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "letflow", params);
    let gap_us = p.f64_in("gap_us", 100.0, 0.0, 1e6)?;
    p.finish()?;
    Ok(Box::new(Letflow {
        gap: Dur((gap_us * PS_PER_US as f64).round() as u64),
        table: HashMap::new(),
        flowlets: 0,
        rng: derive_rng(init.seed, "lb.letflow", 0),
    }))
}

impl LoadBalancer for Letflow {
    /// A flowlet's port may have left its group: every flowlet starts afresh.
    fn on_routes_changed(&mut self, _topo: &Topology) {
        self.table.clear();
    }

    fn entropy(&mut self, _flow: FlowId, _seq: u32, _now: Time) -> u32 {
        0
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        let entry = self
            .table
            .entry((view.node, hdr.flow, hdr.is_ack))
            .or_insert((PortId::MAX, Time::ZERO));
        let expired = entry.0 == PortId::MAX
            || view.now - entry.1 > self.gap
            || !view.candidates.contains(&entry.0);
        if expired {
            entry.0 = view.candidates[self.rng.gen_range(0..view.candidates.len())];
            self.flowlets += 1;
        }
        entry.1 = view.now;
        entry.0
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("flowlet_table_entries", self.table.len() as u64),
            ("flowlets", self.flowlets),
        ]
    }
}
