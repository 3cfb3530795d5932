//! The rank DAG walk: issuing ET nodes once their dependencies are done, the compute
//! units that run compute nodes, and point-to-point send/receive pairs.

use super::{Executor, Timer};
use crate::error::SystemResult;
use crate::workload::{NodeInput, NodeKind, RankInput};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tracefabric_netapi::Ps;

pub(super) struct RankRt {
    pub(super) waiting_deps: Vec<u32>,
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    pub(super) done: Vec<bool>,
    pub(super) issued: Vec<bool>,
    pub(super) issued_at: Vec<Ps>,
    /// Ready compute nodes per unit (`unit_of`), lowest index first.
    compute_ready: [BinaryHeap<Reverse<u32>>; 2],
    pub(super) computing: [bool; 2],
    /// Busy time of the compute units: their sum while one unit is used, else the union
    /// of `compute_intervals` (kept only for a rank with nodes on both units).
    pub(super) compute_ps: Ps,
    /// Busy time of the GPU compute unit alone (ASTRA-sim's exposed communication is
    /// the wall time less this).
    pub(super) gpu_compute_ps: Ps,
    pub(super) compute_intervals: Option<Vec<(Ps, Ps)>>,
    pub(super) comm_intervals: Vec<(Ps, Ps)>,
    pub(super) wall: Ps,
    pub(super) finished: usize,
}

/// A matched send/receive pair.
#[derive(Default, Clone, Copy)]
pub(super) struct PairRt {
    pub(super) arrived: Option<Ps>,
    pub(super) recv_issued: bool,
}

pub(super) fn rank_rt(r: &RankInput) -> RankRt {
    let n = r.nodes.len();
    let mut counts = vec![0u32; n + 1];
    for node in &r.nodes {
        for &d in &node.deps {
            counts[d as usize + 1] += 1;
        }
    }
    for i in 0..n {
        counts[i + 1] += counts[i];
    }
    let mut fill = counts.clone();
    let mut succ = vec![0u32; counts[n] as usize];
    for (i, node) in r.nodes.iter().enumerate() {
        for &d in &node.deps {
            succ[fill[d as usize] as usize] = i as u32;
            fill[d as usize] += 1;
        }
    }
    RankRt {
        waiting_deps: r.nodes.iter().map(|nd| nd.deps.len() as u32).collect(),
        succ_start: counts,
        succ,
        done: vec![false; n],
        issued: vec![false; n],
        issued_at: vec![0; n],
        compute_ready: [BinaryHeap::new(), BinaryHeap::new()],
        computing: [false; 2],
        compute_ps: 0,
        gpu_compute_ps: 0,
        compute_intervals: {
            let on = |cpu: bool| {
                r.nodes
                    .iter()
                    .any(|nd| nd.kind == NodeKind::Compute && nd.cpu == cpu)
            };
            (on(true) && on(false)).then(Vec::new)
        },
        comm_intervals: Vec::new(),
        wall: 0,
        finished: 0,
    }
}

/// The compute unit a compute node runs on: 0 the GPU, 1 the CPU (`is_cpu_op`). Each runs
/// one node at a time and the two run side by side, as in ASTRA-sim's HardwareResource.
pub(super) fn unit_of(node: &NodeInput) -> usize {
    node.cpu as usize
}

impl Executor<'_> {
    pub(super) fn drain_issues(&mut self) -> SystemResult<()> {
        if self.astra {
            return self.drain_issues_in_order();
        }
        while let Some((r, i, at)) = self.to_issue.pop() {
            self.issue(r, i, at)?;
        }
        Ok(())
    }

    fn issue(&mut self, r: u32, i: u32, at: Ps) -> SystemResult<()> {
        let node = &self.w.ranks[r as usize].nodes[i as usize];
        self.ranks[r as usize].issued_at[i as usize] = at;
        self.ranks[r as usize].issued[i as usize] = true;
        match node.kind {
            NodeKind::Compute => {
                let unit = unit_of(node);
                self.ranks[r as usize].compute_ready[unit].push(Reverse(i));
                self.start_compute(r, unit);
            }
            NodeKind::Memory => {
                self.timer(at.saturating_add(node.duration_ps), Timer::NodeDone(r, i))
            }
            NodeKind::Instant => self.node_done(r, i, at),
            NodeKind::Collective => {
                let k = self.m.link[r as usize][i as usize];
                let rt = &mut self.inst[k as usize];
                if rt.issued == 0 {
                    rt.first_issue = at;
                }
                rt.issued += 1;
                if rt.issued as usize
                    == self.w.groups[self.m.instances[k as usize].group as usize].len()
                {
                    self.start_instance(k, at)?;
                }
            }
            NodeKind::Send => self.send_pair(self.m.link[r as usize][i as usize], at)?,
            NodeKind::Recv => {
                let k = self.m.link[r as usize][i as usize] as usize;
                self.pairs[k].recv_issued = true;
                if let Some(arrived) = self.pairs[k].arrived {
                    // Through a timer: nodes complete only at the loop's current time.
                    self.timer(arrived.max(at), Timer::NodeDone(r, i));
                }
            }
        }
        Ok(())
    }

    pub(super) fn start_compute(&mut self, r: u32, unit: usize) {
        let rank = &mut self.ranks[r as usize];
        if rank.computing[unit] {
            return;
        }
        if let Some(Reverse(i)) = rank.compute_ready[unit].pop() {
            rank.computing[unit] = true;
            let d = self.w.ranks[r as usize].nodes[i as usize].duration_ps;
            let at = self.now.max(rank.issued_at[i as usize]);
            let end = at.saturating_add(d);
            if unit == 0 {
                rank.gpu_compute_ps = rank.gpu_compute_ps.saturating_add(d);
            }
            match rank.compute_intervals.as_mut() {
                Some(v) => v.push((at, end)),
                None => rank.compute_ps = rank.compute_ps.saturating_add(d),
            }
            self.timer(end, Timer::NodeDone(r, i));
        }
    }

    pub(super) fn node_done(&mut self, r: u32, i: u32, at: Ps) {
        let kind = self.w.ranks[r as usize].nodes[i as usize].kind;
        let rank = &mut self.ranks[r as usize];
        if matches!(kind, NodeKind::Collective | NodeKind::Send | NodeKind::Recv) {
            rank.comm_intervals.push((rank.issued_at[i as usize], at));
        }
        rank.done[i as usize] = true;
        rank.finished += 1;
        rank.wall = rank.wall.max(at);
        for s in rank.succ_start[i as usize]..rank.succ_start[i as usize + 1] {
            let j = rank.succ[s as usize];
            rank.waiting_deps[j as usize] -= 1;
            if rank.waiting_deps[j as usize] == 0 {
                self.to_issue.push((r, j, at));
            }
        }
    }

    /// Point-to-point pair `k`'s flow completed at `t`: the send is done, and the
    /// receive completes once its data is processed and it has been issued.
    pub(super) fn send_arrived(&mut self, k: usize, t: Ps) {
        let p = self.m.p2p[k];
        self.node_done(p.src, p.send_node, t);
        let ready = t.saturating_add(self.cfg.endpoint_delay_ps);
        self.pairs[k].arrived = Some(ready);
        if self.pairs[k].recv_issued {
            let issued = self.ranks[p.dst as usize].issued_at[p.recv_node as usize];
            self.timer(ready.max(issued), Timer::NodeDone(p.dst, p.recv_node));
        }
    }
}
