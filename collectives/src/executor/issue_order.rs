//! ASTRA-sim 2.x's issue rule (the astra modes). A rank's dependency-free nodes wait in a
//! set ordered by node id; after every event on the rank they are offered, lowest id
//! first, to its hardware resources: one GPU compute unit, one CPU compute unit and one
//! communication slot, taken by a collective, a send (until its data has arrived) or a
//! remote-memory access. Receives and instant nodes take none. A node whose resource is
//! busy waits for the rank's next event.
//!
//! Receives and sends complete when the data arrives (a receive issued after that
//! completes when issued), with no endpoint delay: ASTRA-sim's network front end calls
//! both handlers on arrival.

use super::{Executor, Timer};
use crate::error::SystemResult;
use crate::workload::{NodeInput, NodeKind};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tracefabric_netapi::{Ps, PS_PER_NS};

/// The resources a node takes: 0 GPU compute, 1 CPU compute, 2 communication.
pub(super) const COMM: usize = 2;

pub(super) fn resource_of(node: &NodeInput) -> Option<usize> {
    match node.kind {
        NodeKind::Compute => Some(node.cpu as usize),
        NodeKind::Collective | NodeKind::Send | NodeKind::Memory => Some(COMM),
        NodeKind::Recv | NodeKind::Instant => None,
    }
}

#[derive(Default)]
pub(super) struct IssueOrder {
    /// Dependency-free nodes not yet issued: (node id, node index), lowest id first.
    ready: BinaryHeap<Reverse<(u64, u32)>>,
    /// The node holding each resource.
    pub(super) holder: [Option<u32>; 3],
    dirty: bool,
}

impl Executor<'_> {
    /// Astra mode: newly ready nodes join their rank's ready set; every rank that had an
    /// event offers its ready set to its resources.
    pub(super) fn drain_issues_in_order(&mut self) -> SystemResult<()> {
        self.collect_ready();
        while let Some(r) = self.dirty_ranks.pop() {
            self.order[r as usize].dirty = false;
            self.offer(r)?;
        }
        Ok(())
    }

    fn collect_ready(&mut self) {
        while let Some((r, i, _)) = self.to_issue.pop() {
            let id = self.w.ranks[r as usize].nodes[i as usize].id;
            self.order[r as usize].ready.push(Reverse((id, i)));
            self.mark_dirty(r);
        }
    }

    pub(super) fn mark_dirty(&mut self, r: u32) {
        let o = &mut self.order[r as usize];
        if !o.dirty {
            o.dirty = true;
            self.dirty_ranks.push(r);
        }
    }

    /// Offers rank `r`'s ready nodes, lowest id first; nodes that become ready meanwhile
    /// (a receive whose data is there completes at once) are offered in the same pass.
    fn offer(&mut self, r: u32) -> SystemResult<()> {
        let mut waiting = Vec::new();
        while let Some(Reverse((id, i))) = self.order[r as usize].ready.pop() {
            let node = &self.w.ranks[r as usize].nodes[i as usize];
            match resource_of(node) {
                Some(res) if self.order[r as usize].holder[res].is_some() => {
                    waiting.push(Reverse((id, i)));
                    continue;
                }
                Some(res) => self.order[r as usize].holder[res] = Some(i),
                None => {}
            }
            self.issue_in_order(r, i)?;
            self.collect_ready();
        }
        self.order[r as usize].ready.extend(waiting);
        Ok(())
    }

    fn issue_in_order(&mut self, r: u32, i: u32) -> SystemResult<()> {
        let now = self.now;
        let node = &self.w.ranks[r as usize].nodes[i as usize];
        let rank = &mut self.ranks[r as usize];
        rank.issued_at[i as usize] = now;
        rank.issued[i as usize] = true;
        match node.kind {
            NodeKind::Compute => {
                let d = node.duration_ps;
                let end = now.saturating_add(d);
                match rank.compute_intervals.as_mut() {
                    Some(v) => v.push((now, end)),
                    None => rank.compute_ps = rank.compute_ps.saturating_add(d),
                }
                if !node.cpu {
                    rank.gpu_compute_ps = rank.gpu_compute_ps.saturating_add(d);
                }
                self.timer(end, Timer::NodeDone(r, i));
            }
            NodeKind::Memory => {
                self.timer(now.saturating_add(node.duration_ps), Timer::NodeDone(r, i))
            }
            NodeKind::Instant => self.node_done(r, i, now),
            // ASTRA-sim replays a broadcast's recorded duration (1 ns when none).
            NodeKind::Collective
                if node.collective == Some(crate::algorithms::CollectiveKind::Broadcast) =>
            {
                let d = node.duration_ps.max(PS_PER_NS);
                self.timer(now.saturating_add(d), Timer::NodeDone(r, i));
            }
            NodeKind::Collective => self.issue_rank_collective(r, i)?,
            NodeKind::Send => self.send_pair(self.m.link[r as usize][i as usize], now)?,
            NodeKind::Recv => {
                let k = self.m.link[r as usize][i as usize] as usize;
                self.pairs[k].recv_issued = true;
                if self.pairs[k].arrived.is_some() {
                    self.node_done(r, i, now);
                }
            }
        }
        Ok(())
    }

    /// Astra mode: node (r, i) finished at `t`: its resource is free again.
    pub(super) fn release(&mut self, r: u32, i: u32, t: Ps) {
        let o = &mut self.order[r as usize];
        if let Some(res) = o.holder.iter().position(|&h| h == Some(i)) {
            o.holder[res] = None;
        }
        self.node_done(r, i, t);
        self.mark_dirty(r);
    }

    /// Astra mode: point-to-point pair `k`'s data arrived at `t`: the send is done and so
    /// is the receive, if issued.
    pub(super) fn pair_arrived(&mut self, k: usize, t: Ps) {
        let p = self.m.p2p[k];
        self.pairs[k].arrived = Some(t);
        self.release(p.src, p.send_node, t);
        if self.pairs[k].recv_issued {
            self.node_done(p.dst, p.recv_node, t);
            self.mark_dirty(p.dst);
        }
    }

    /// Why a ready node of rank `r` never issued (astra mode), if a resource holds it back.
    pub(super) fn held_back(&self, r: u32, i: u32) -> Option<String> {
        let rank = &self.w.ranks[r as usize];
        let node = &rank.nodes[i as usize];
        let o = self.order.get(r as usize)?;
        let res = resource_of(node)?;
        let h = o.holder[res].filter(|&h| h != i)?;
        let what = ["GPU compute unit", "CPU compute unit", "communication slot"][res];
        Some(format!(
            "it waits for the rank's {what}, held by node {} that never finishes (ASTRA-sim runs one \
             communication operation per rank at a time, ready nodes in ascending id)",
            rank.nodes[h as usize].id
        ))
    }
}
