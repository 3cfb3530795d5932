//! A workload checked and planned before it runs: the matched collectives, the flow
//! ids their chunks will use and, where the flows are listed up front, every chunk's
//! phases.

use super::flow_layout::{plan_workload, FlowLayout, InstancePlan};
use super::ranks::{rank_rt, PairRt};
use super::streams::InstanceRt;
use super::Executor;
use crate::error::{SystemError, SystemResult};
use crate::report::SystemReport;
use crate::system::{Layout, SystemConfig};
use crate::workload::{check_and_match, Matched, WorkloadInput, NONE};
use std::collections::{BinaryHeap, HashMap};
use tracefabric_netapi::{FlowRequest, Network};

/// A checked workload with its flow ids laid out, ready to run on a network.
pub struct Prepared<'a> {
    pub(super) w: &'a WorkloadInput,
    cfg: &'a SystemConfig,
    pub(super) m: Matched,
    pub(super) ids: FlowLayout,
    layout: Layout,
    /// Every instance's chunk plans where the flows were listed; empty otherwise.
    plans: Vec<InstancePlan>,
}

impl<'a> Prepared<'a> {
    /// Checks the workload and plans every collective to lay out its flow ids. With
    /// `list_flows` it also returns every flow in id order, for backends that must know
    /// their flows up front (the packet engine, whose load balancers plan per flow), and
    /// keeps the plans for the run; without, an instance is planned again when it starts,
    /// so only started collectives hold plans.
    pub fn new(
        w: &'a WorkloadInput,
        cfg: &'a SystemConfig,
        list_flows: bool,
    ) -> SystemResult<(Prepared<'a>, Vec<FlowRequest>)> {
        let m = check_and_match(w)?;
        let layout = Layout::new(&cfg.dims, w.ranks.len() as u32)?;
        let (ids, plans) = plan_workload(w, cfg, &m, &layout, list_flows)?;
        let flows = if list_flows {
            every_flow(&plans, &m)
        } else {
            Vec::new()
        };
        Ok((
            Prepared {
                w,
                cfg,
                m,
                ids,
                layout,
                plans,
            },
            flows,
        ))
    }

    pub fn run(self, net: &mut dyn Network) -> SystemResult<SystemReport> {
        let Prepared {
            w,
            cfg,
            m,
            ids,
            layout,
            plans,
        } = self;
        let n = w.ranks.len() as u32;
        if net.endpoints() < n {
            return Err(SystemError::Network(format!(
                "the network connects {} NPUs but the workload has {n} ranks",
                net.endpoints()
            )));
        }
        let ex = Executor {
            ranks: w.ranks.iter().map(rank_rt).collect(),
            inst: m.instances.iter().map(|_| InstanceRt::default()).collect(),
            pairs: vec![PairRt::default(); m.p2p.len()],
            w,
            cfg,
            m,
            ids,
            layout,
            plans,
            net,
            now: 0,
            seq: 0,
            timers: BinaryHeap::new(),
            streams: Vec::new(),
            free_streams: Vec::new(),
            last_phase: (0, 0, NONE),
            scratch_next: Vec::new(),
            scratch_start: Vec::new(),
            queues: HashMap::new(),
            started_instances: 0,
            flows: 0,
            to_issue: Vec::new(),
        };
        ex.run_loop()
    }
}

/// Every flow of the workload in id order: each phase's transfers subgroup by subgroup,
/// then the point-to-point sends.
fn every_flow(plans: &[InstancePlan], m: &Matched) -> Vec<FlowRequest> {
    let mut flows = Vec::new();
    for phase in plans.iter().flatten().flatten() {
        for sub in phase.subgroups.iter() {
            for t in 0..phase.dag.len() {
                let tr = phase.dag.transfer(t);
                flows.push(FlowRequest {
                    id: flows.len() as u64,
                    src: sub[tr.src as usize],
                    dst: sub[tr.dst as usize],
                    bytes: tr.bytes,
                });
            }
        }
    }
    for p in &m.p2p {
        flows.push(FlowRequest {
            id: flows.len() as u64,
            src: p.src,
            dst: p.dst,
            bytes: p.bytes,
        });
    }
    flows
}
