//! A workload checked and planned before it runs: the matched collectives, the flow
//! ids their chunks will use and, where the flows are listed up front, every chunk's
//! phases.

use super::flow_layout::{plan_workload, FlowLayout, InstancePlan};
use super::ranks::{rank_rt, PairRt};
use super::streams::InstanceRt;
use super::Executor;
use crate::error::{SystemError, SystemResult};
use crate::plan::Layout;
use crate::report::SystemReport;
use crate::system::SystemConfig;
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
        check_shapes(w, cfg, &m)?;
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
        let n_instances = m.instances.len();
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
            astra: cfg.astra,
            order: astra_vec(cfg.astra, n as usize, Default::default),
            dirty_ranks: Vec::new(),
            rank_colls: HashMap::new(),
            rank_queues: astra_vec(cfg.astra, n as usize, || {
                (0..cfg.dims.len()).map(|_| Default::default()).collect()
            }),
            runs: Vec::new(),
            free_runs: Vec::new(),
            rank_inst: astra_vec(cfg.astra, n_instances, Default::default),
            rank_issued: vec![0; if cfg.astra { n as usize } else { 0 }],
            scratch_succ: Vec::new(),
        };
        ex.run_loop()
    }
}

/// What only the network and the semantics decide: an `involved_dim` must leave a
/// dimension with more than one NPU; in astra mode the members of an all-to-all give the
/// same comm_size (ASTRA-sim reads no split sizes and matches messages by size, so one
/// whose ranks differ never completes there).
fn check_shapes(w: &WorkloadInput, cfg: &SystemConfig, m: &Matched) -> SystemResult<()> {
    for inst in &m.instances {
        let members = &w.groups[inst.group as usize];
        let node = |p: usize| {
            let rank = &w.ranks[members[p] as usize];
            (rank.file.clone(), rank.nodes[inst.nodes[p] as usize].id)
        };
        if let Some(involved) = &inst.involved {
            let shape = crate::plan::Shape {
                kind: inst.kind,
                members,
                involved: Some(involved),
            };
            if shape.dims(cfg).is_empty() && cfg.dims.iter().any(|&d| d > 1) {
                let (file, node) = node(0);
                return Err(SystemError::Workload {
                    file,
                    node,
                    message: format!(
                        "involved_dim {involved:?} leaves none of the network's dimensions {:?} with \
                         more than one NPU: the {} would move nothing",
                        cfg.dims,
                        inst.kind.name()
                    ),
                });
            }
        }
        if let (true, Some(matrix)) = (cfg.astra, &inst.matrix) {
            let n = members.len();
            let sums: Vec<u64> = matrix.chunks(n).map(|row| row.iter().sum()).collect();
            if let Some(p) = (1..n).find(|&p| sums[p] != sums[0]) {
                let (file, id) = node(p);
                return Err(SystemError::Workload {
                    file,
                    node: id,
                    message: format!(
                        "all-to-all-v: this rank sends {} B but rank {} sends {} B; ASTRA-sim 2.x reads \
                         comm_size only and matches messages by size, so it never completes this \
                         collective (run it on analytical:flow or packet, which follow comm_split_sizes)",
                        sums[p], members[0], sums[0]
                    ),
                });
            }
        }
    }
    Ok(())
}

/// `n` values made by `f` in astra mode, none otherwise.
fn astra_vec<T>(astra: bool, n: usize, f: impl FnMut() -> T) -> Vec<T> {
    let n = if astra { n } else { 0 };
    std::iter::repeat_with(f).take(n).collect()
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
