//! The event loop of the workload and system layers. Each rank walks its ET graph:
//! a node is issued once all its dependencies are done; compute nodes run one at a
//! time per rank (lowest node id first, as ASTRA-sim scans its ready set);
//! communication overlaps them as the dependencies allow. A collective starts once
//! every member of its group has issued it; its chunks queue per (group, dimension)
//! with at most `active-chunks-per-dimension` in flight, and each chunk's phase is a
//! DAG of transfers handed to the network as flows.
//!
//! Timing of a phase (ASTRA-sim's system layer): the first transfers leave one
//! endpoint delay after the phase starts; every arrival costs the receiver an endpoint
//! delay plus, for a reducing transfer, the local reduction time; a transfer leaves
//! when the last transfer it waits on has been processed; the phase ends when its
//! last arrival has been processed.
//!
//! In astra mode (`SystemConfig::astra`, the `analytical:astra-*` backends) the ranks
//! follow ASTRA-sim 2.x instead: one communication operation per rank at a time, ready
//! nodes issued in ascending id (`issue_order`), and every member progressing through a
//! collective's chunks and phases on its own clock (`rank_streams`).
//!
//! Rooms: `prepared` (checking and planning before a run), `flow_layout` (where each
//! flow id lives, and every chunk's plan), `ranks` (the rank DAG walk: issuing nodes,
//! compute units, point-to-point pairs), `streams` (collective instances, chunk streams,
//! dimension queues), `transfers` (a phase's transfers and their completions),
//! `issue_order` and `rank_streams` (astra mode), `diagnostics` (deadlocks, clock errors,
//! labels), `finish` (the report).

mod diagnostics;
mod finish;
mod flow_layout;
mod issue_order;
mod prepared;
mod rank_streams;
mod ranks;
mod streams;
mod transfers;

pub use prepared::Prepared;

use crate::error::{SystemError, SystemResult};
use crate::plan::Layout;
use crate::report::SystemReport;
use crate::system::SystemConfig;
use crate::workload::{Matched, NodeKind, WorkloadInput};
use flow_layout::{FlowLayout, InstancePlan};
use issue_order::IssueOrder;
use rank_streams::{RankColl, RankInst, RankPhase, RankQueue};
use ranks::{unit_of, PairRt, RankRt};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use streams::{DimQueue, InstanceRt, Stream};
use tracefabric_netapi::{Network, Ps, CLOCK_LIMIT_PS};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// A compute, memory or receive node of (rank, node) finishes.
    NodeDone(u32, u32),
    /// The phase a stream is in has processed its last arrival.
    PhaseDone(u32),
    /// Astra mode: a member (run, flat position) finished its part of a phase.
    RankPhaseDone(u32, u32),
}

pub struct Executor<'a> {
    w: &'a WorkloadInput,
    cfg: &'a SystemConfig,
    m: Matched,
    ids: FlowLayout,
    layout: Layout,
    /// Each instance's chunk plans, where made before the run (taken when it starts);
    /// empty when instances are planned as they start.
    plans: Vec<InstancePlan>,
    net: &'a mut dyn Network,
    now: Ps,
    seq: u64,
    timers: BinaryHeap<Reverse<(Ps, u64, Timer)>>,
    ranks: Vec<RankRt>,
    inst: Vec<InstanceRt>,
    streams: Vec<Option<Stream>>,
    free_streams: Vec<u32>,
    /// Flow-id range [lo, hi) of the phase that completed last, and its stream.
    last_phase: (u64, u64, u32),
    /// Reused buffers of the per-completion hot path.
    scratch_next: Vec<usize>,
    scratch_start: Vec<(u64, Ps)>,
    queues: HashMap<(u32, usize), DimQueue>,
    pairs: Vec<PairRt>,
    started_instances: u64,
    flows: u64,
    /// (rank, node) issued and waiting to be handled (a worklist instead of recursion).
    to_issue: Vec<(u32, u32, Ps)>,
    /// Astra mode (the rest is empty otherwise): each rank's ready set and resources,
    /// ranks with an event to offer, members' collectives, rank queues per dimension,
    /// phases as members run them, instances' shared plans, collectives issued per rank.
    astra: bool,
    order: Vec<IssueOrder>,
    dirty_ranks: Vec<u32>,
    rank_colls: HashMap<(u32, u32), RankColl>,
    rank_queues: Vec<Vec<RankQueue>>,
    runs: Vec<Option<RankPhase>>,
    free_runs: Vec<u32>,
    rank_inst: Vec<RankInst>,
    rank_issued: Vec<u64>,
    scratch_succ: Vec<(usize, u32)>,
}

/// Puts `item` in a free slot of `slots` (one `free` lists), else a new one; returns its index.
fn reuse_slot<T>(slots: &mut Vec<Option<T>>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(s) => {
            slots[s as usize] = Some(item);
            s
        }
        None => {
            slots.push(Some(item));
            (slots.len() - 1) as u32
        }
    }
}

/// Runs the workload to completion on `net`.
pub fn run(
    w: &WorkloadInput,
    cfg: &SystemConfig,
    net: &mut dyn Network,
) -> SystemResult<SystemReport> {
    Prepared::new(w, cfg, false)?.0.run(net)
}

impl Executor<'_> {
    fn timer(&mut self, at: Ps, t: Timer) {
        self.seq += 1;
        self.timers.push(Reverse((at, self.seq, t)));
    }

    fn run_loop(mut self) -> SystemResult<SystemReport> {
        for r in 0..self.ranks.len() as u32 {
            for i in 0..self.ranks[r as usize].waiting_deps.len() as u32 {
                if self.ranks[r as usize].waiting_deps[i as usize] == 0 {
                    self.to_issue.push((r, i, 0));
                }
            }
        }
        self.drain_issues()?;
        loop {
            let limit = self.timers.peek().map_or(Ps::MAX, |Reverse((t, _, _))| *t);
            match self
                .net
                .next_completion(limit)
                .map_err(SystemError::Network)?
            {
                Some((t, id)) => {
                    if t >= CLOCK_LIMIT_PS {
                        return Err(self.clock_error(t, "a flow completes"));
                    }
                    self.now = t;
                    self.on_flow_done(t, id)?;
                }
                None => match self.timers.pop() {
                    Some(Reverse((t, _, timer))) => {
                        if t >= CLOCK_LIMIT_PS {
                            return Err(self.timer_clock_error(t, timer));
                        }
                        self.now = t;
                        match timer {
                            Timer::NodeDone(r, i) if self.astra => self.release(r, i, t),
                            Timer::NodeDone(r, i) => {
                                let node = &self.w.ranks[r as usize].nodes[i as usize];
                                if node.kind == NodeKind::Compute {
                                    let unit = unit_of(node);
                                    self.ranks[r as usize].computing[unit] = false;
                                    self.start_compute(r, unit);
                                }
                                self.node_done(r, i, t);
                            }
                            Timer::PhaseDone(s) => self.phase_done(s)?,
                            Timer::RankPhaseDone(run, q) => self.rank_phase_done(run, q)?,
                        }
                    }
                    None => break,
                },
            }
            self.drain_issues()?;
        }
        self.finish()
    }
}
