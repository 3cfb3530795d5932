//! Per-rank collective progress (the astra modes), as ASTRA-sim runs a collective: each
//! member starts it when it issues it, and moves its chunks through their phases on its
//! own clock, queueing each chunk's phase in the rank's queue of that phase's dimension
//! (at most `active-chunks-per-dimension` running, lowest chunk first, the newest
//! collective first under LIFO).
//!
//! Timing of a rank's part of a phase started at S (endpoint delay d): its first transfers
//! leave at S + d; a receive is posted at S + d, or, for a ring, with the rank's own send
//! of the same step; an arrival is processed from max(arrival, post) for d plus, for a
//! reducing transfer, the local reduction; a transfer leaves when the last transfer it
//! waits on has been processed; the rank's part ends when its last receive is processed.
//! Arrivals before their receive is posted wait (ASTRA-sim's network keeps them).

use super::flow_layout::{plan_instance, InstancePlan};
use super::transfers::{dependency_done, flow_of};
use super::{reuse_slot, Executor, Timer};
use crate::error::{SystemError, SystemResult};
use crate::system::Policy;
use crate::workload::NONE;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tracefabric_netapi::{Ps, CLOCK_LIMIT_PS};

const NOT_STARTED: Ps = Ps::MAX;

/// One member's run of a collective instance.
pub(super) struct RankColl {
    node: u32,
    priority: u64,
    /// Position of the rank in the group's member list.
    pos: u32,
    /// Current phase of each chunk.
    chunk_phase: Vec<u32>,
    chunks_left: u32,
}

/// A rank's queue for one network dimension.
#[derive(Default)]
pub(super) struct RankQueue {
    active: u32,
    /// (priority, chunk, instance): highest priority first, then the lowest chunk.
    waiting: BinaryHeap<(u64, Reverse<u32>, u32)>,
}

/// One (instance, chunk, phase) as its members run it, indexed by flat position
/// (subgroup * subgroup size + position).
pub(super) struct RankPhase {
    inst: u32,
    slot: u32,
    base: u64,
    /// Transfers per subgroup.
    len: u64,
    sub_len: u32,
    start: Vec<Ps>,
    /// Transfers the position has started, and when the last one leaves.
    sent: Vec<u32>,
    last_send: Vec<Ps>,
    /// Next ring step to receive.
    recv_next: Vec<u32>,
    left_in: Vec<u32>,
    done_at: Vec<Ps>,
    /// Arrivals waiting for their receive to be posted: position -> (local flow, arrival).
    early: HashMap<u32, Vec<(u64, Ps)>>,
    /// Transfers waiting on several others: (dependencies missing, latest ready time).
    pending: HashMap<u64, (u32, Ps)>,
    unfinished: u32,
}

/// A collective instance's shared state in astra mode.
#[derive(Default)]
pub(super) struct RankInst {
    plan: Option<InstancePlan>,
    phases_per_chunk: usize,
    /// Run of each (chunk, phase) slot, or NONE.
    run_of: Vec<u32>,
    finished: u32,
}

impl Executor<'_> {
    /// Rank `r` issues collective node `i`: its chunks join its dimension queues.
    pub(super) fn issue_rank_collective(&mut self, r: u32, i: u32) -> SystemResult<()> {
        let now = self.now;
        let k = self.m.link[r as usize][i as usize];
        let w = self.w;
        let members = &w.groups[self.m.instances[k as usize].group as usize];
        if self.rank_inst[k as usize].plan.is_none() {
            let plan = plan_instance(w, self.cfg, &self.m.instances[k as usize], &self.layout)?;
            let ri = &mut self.rank_inst[k as usize];
            ri.phases_per_chunk = plan.first().map_or(0, |c| c.len());
            ri.run_of = vec![NONE; plan.len() * ri.phases_per_chunk];
            let rt = &mut self.inst[k as usize];
            rt.first_issue = now;
            rt.chunks = plan.len() as u32;
            rt.algorithm = plan.first().map_or(String::new(), |c| {
                c.iter()
                    .map(|p| p.dag.algorithm())
                    .collect::<Vec<_>>()
                    .join("+")
            });
            ri.plan = Some(plan);
        }
        let rt = &mut self.inst[k as usize];
        rt.issued += 1;
        if rt.issued as usize == members.len() {
            rt.start = now;
        }
        self.rank_issued[r as usize] += 1;
        let order = self.rank_issued[r as usize];
        let priority = match self.cfg.scheduling_policy {
            Policy::Lifo => order,
            Policy::Fifo => u64::MAX - order,
        };
        let pos = members.iter().position(|&m| m == r).expect("member") as u32;
        let chunks = self.rank_inst[k as usize]
            .plan
            .as_ref()
            .map_or(0, |p| p.len()) as u32;
        self.rank_colls.insert(
            (r, k),
            RankColl {
                node: i,
                priority,
                pos,
                chunk_phase: vec![0; chunks as usize],
                chunks_left: chunks,
            },
        );
        if chunks == 0 {
            return self.rank_collective_done(r, k);
        }
        let mut dims = Vec::new();
        for c in 0..chunks {
            dims.push(self.enqueue_chunk(r, k, c, priority));
        }
        dims.sort_unstable();
        dims.dedup();
        for d in dims {
            self.dispatch_rank(r, d)?;
        }
        Ok(())
    }

    fn phase_of(&self, k: u32, c: u32, p: u32) -> &crate::plan::Phase {
        let plan = self.rank_inst[k as usize].plan.as_ref().expect("planned");
        &plan[c as usize][p as usize]
    }

    /// Puts chunk `c` of instance `k` in rank `r`'s queue of its current phase; returns the dimension.
    fn enqueue_chunk(&mut self, r: u32, k: u32, c: u32, priority: u64) -> usize {
        let phase = self.rank_colls[&(r, k)].chunk_phase[c as usize];
        let d = self.phase_of(k, c, phase).dim;
        self.rank_queues[r as usize][d]
            .waiting
            .push((priority, Reverse(c), k));
        d
    }

    fn dispatch_rank(&mut self, r: u32, d: usize) -> SystemResult<()> {
        let limit = self.cfg.active_chunks_per_dimension.max(1);
        loop {
            let q = &mut self.rank_queues[r as usize][d];
            if q.active >= limit {
                return Ok(());
            }
            let Some((_, Reverse(c), k)) = q.waiting.pop() else {
                return Ok(());
            };
            q.active += 1;
            self.start_rank_phase(r, k, c)?;
        }
    }

    /// Flat position of rank `r` in a phase.
    fn flat_position(&self, r: u32, k: u32, c: u32, p: u32) -> u32 {
        let phase = self.phase_of(k, c, p);
        if phase.by_dimension {
            let (sub, pos) = self.layout.locate(phase.dim, r);
            sub * phase.subgroups[0].len() as u32 + pos
        } else {
            self.rank_colls[&(r, k)].pos
        }
    }

    /// The run of (instance, chunk, phase), created when first needed.
    fn run_of(&mut self, k: u32, c: u32, p: u32) -> u32 {
        let ri = &self.rank_inst[k as usize];
        let slot = c as usize * ri.phases_per_chunk + p as usize;
        if ri.run_of[slot] != NONE {
            return ri.run_of[slot];
        }
        let phase = self.phase_of(k, c, p);
        let (subs, sub_len) = (phase.subgroups.len(), phase.subgroups[0].len());
        let n = subs * sub_len;
        let run = RankPhase {
            inst: k,
            slot: slot as u32,
            base: self.ids.offsets[k as usize][slot],
            len: phase.dag.len() as u64,
            sub_len: sub_len as u32,
            start: vec![NOT_STARTED; n],
            sent: vec![0; n],
            last_send: vec![0; n],
            recv_next: vec![0; n],
            left_in: (0..n)
                .map(|q| phase.dag.receives_of((q % sub_len) as u32))
                .collect(),
            done_at: vec![0; n],
            early: HashMap::new(),
            pending: HashMap::new(),
            unfinished: n as u32,
        };
        let id = reuse_slot(&mut self.runs, &mut self.free_runs, run);
        self.rank_inst[k as usize].run_of[slot] = id;
        id
    }

    fn start_rank_phase(&mut self, r: u32, k: u32, c: u32) -> SystemResult<()> {
        let p = self.rank_colls[&(r, k)].chunk_phase[c as usize];
        let q = self.flat_position(r, k, c, p);
        let run = self.run_of(k, c, p);
        let at = self.now + self.cfg.endpoint_delay_ps;
        let rp = self.runs[run as usize].as_mut().expect("live run");
        rp.start[q as usize] = self.now;
        rp.last_send[q as usize] = at;
        let (sub, pos, len) = (q / rp.sub_len, q % rp.sub_len, rp.len);
        let mut initial = std::mem::take(&mut self.scratch_next);
        self.phase_of(k, c, p)
            .dag
            .for_each_initial_from(pos, &mut |t| initial.push(t));
        for &t in &initial {
            self.start_rank_transfer(run, sub as u64 * len + t as u64, at)?;
        }
        initial.clear();
        self.scratch_next = initial;
        let rp = self.runs[run as usize].as_ref().expect("live run");
        if rp.left_in[q as usize] == 0 {
            self.timer(at, Timer::RankPhaseDone(run, q));
            return Ok(());
        }
        self.drain_early(run, q)
    }

    fn start_rank_transfer(&mut self, run: u32, local: u64, at: Ps) -> SystemResult<()> {
        let rp = self.runs[run as usize].as_mut().expect("live run");
        let (k, slot) = (rp.inst, rp.slot as usize);
        let (sub, ti) = ((local / rp.len) as u32, (local % rp.len) as usize);
        let ri = &self.rank_inst[k as usize];
        let (c, p) = (slot / ri.phases_per_chunk, slot % ri.phases_per_chunk);
        let phase = &ri.plan.as_ref().expect("planned")[c][p];
        let tr = phase.dag.transfer(ti);
        let src = sub * rp.sub_len + tr.src;
        rp.sent[src as usize] += 1;
        rp.last_send[src as usize] = rp.last_send[src as usize].max(at);
        if at >= CLOCK_LIMIT_PS {
            return Err(self.clock_error(at, "a collective transfer starts"));
        }
        let req = flow_of(rp.base + local, &phase.subgroups[sub as usize], tr);
        self.send(req, at)
    }

    /// Collective flow `id` arrived at `t`.
    pub(super) fn rank_arrival(&mut self, t: Ps, id: u64) -> SystemResult<()> {
        let (k, slot, local) = self.ids.locate(id);
        let run = self.rank_inst[k].run_of[slot];
        if run == NONE {
            return Err(SystemError::Network(format!(
                "completion of unknown flow {id}"
            )));
        }
        let rp = self.runs[run as usize].as_ref().expect("live run");
        let (sub, ti) = ((local / rp.len) as u32, (local % rp.len) as usize);
        let q = sub * rp.sub_len + self.run_phase(rp).dag.transfer(ti).dst;
        match self.posted_at(run, q, local) {
            Some(post) => {
                self.process(run, q, local, t.max(post))?;
                self.drain_early(run, q)
            }
            None => {
                let rp = self.runs[run as usize].as_mut().expect("live run");
                rp.early.entry(q).or_default().push((local, t));
                Ok(())
            }
        }
    }

    fn run_phase(&self, rp: &RankPhase) -> &crate::plan::Phase {
        let ri = &self.rank_inst[rp.inst as usize];
        let (c, p) = (
            rp.slot as usize / ri.phases_per_chunk,
            rp.slot as usize % ri.phases_per_chunk,
        );
        &ri.plan.as_ref().expect("planned")[c][p]
    }

    /// When position `q` posts the receive of transfer `local`, or None while it has not.
    fn posted_at(&self, run: u32, q: u32, local: u64) -> Option<Ps> {
        let rp = self.runs[run as usize].as_ref().expect("live run");
        let start = rp.start[q as usize];
        if start == NOT_STARTED {
            return None;
        }
        let ti = (local % rp.len) as usize;
        match self.run_phase(rp).dag.recv_step(ti) {
            None => Some(start + self.cfg.endpoint_delay_ps),
            Some(k) => (rp.recv_next[q as usize] == k && rp.sent[q as usize] > k)
                .then_some(rp.last_send[q as usize]),
        }
    }

    /// Receives of position `q` that arrived before they were posted, while it posts them
    /// (lowest transfer first: ring steps in order).
    fn drain_early(&mut self, run: u32, q: u32) -> SystemResult<()> {
        loop {
            let rp = self.runs[run as usize].as_ref().expect("live run");
            if rp.early.is_empty() {
                return Ok(());
            }
            let Some(list) = rp.early.get(&q) else {
                return Ok(());
            };
            let best = (0..list.len())
                .min_by_key(|&j| list[j].0)
                .expect("non-empty");
            let (local, arrival) = list[best];
            let Some(post) = self.posted_at(run, q, local) else {
                return Ok(());
            };
            let rp = self.runs[run as usize].as_mut().expect("live run");
            let list = rp.early.get_mut(&q).expect("listed");
            list.swap_remove(best);
            if list.is_empty() {
                rp.early.remove(&q);
            }
            self.process(run, q, local, arrival.max(post))?;
        }
    }

    /// Position `q` processes transfer `local` from `from`: its successors may leave.
    fn process(&mut self, run: u32, q: u32, local: u64, from: Ps) -> SystemResult<()> {
        let mut successors = std::mem::take(&mut self.scratch_start);
        let mut next = std::mem::take(&mut self.scratch_succ);
        let (sub, len, ready, stepped) = {
            let rp = self.runs[run as usize].as_ref().expect("live run");
            let ti = (local % rp.len) as usize;
            let dag = &self.run_phase(rp).dag;
            let tr = dag.transfer(ti);
            let reduce = if tr.reduce {
                self.cfg.reduce_time_ps(tr.bytes)?
            } else {
                0
            };
            dag.for_each_successor(ti, &mut |j| next.push((j, 0)));
            for e in next.iter_mut() {
                e.1 = dag.n_deps(e.0);
            }
            let ready = from
                .saturating_add(self.cfg.endpoint_delay_ps)
                .saturating_add(reduce);
            (local / rp.len, rp.len, ready, dag.recv_step(ti).is_some())
        };
        let rp = self.runs[run as usize].as_mut().expect("live run");
        rp.done_at[q as usize] = rp.done_at[q as usize].max(ready);
        rp.left_in[q as usize] -= 1;
        if stepped {
            rp.recv_next[q as usize] += 1;
        }
        for (j, deps) in next.drain(..) {
            let g = sub * len + j as u64;
            if let Some(at) = dependency_done(&mut rp.pending, g, deps, ready) {
                successors.push((g, at));
            }
        }
        let done_at = (rp.left_in[q as usize] == 0).then_some(rp.done_at[q as usize]);
        self.scratch_succ = next;
        for &(g, at) in &successors {
            self.start_rank_transfer(run, g, at)?;
        }
        successors.clear();
        self.scratch_start = successors;
        if let Some(at) = done_at {
            self.timer(at, Timer::RankPhaseDone(run, q));
        }
        Ok(())
    }

    /// Position `q` of a run finished its part of the phase (now).
    pub(super) fn rank_phase_done(&mut self, run: u32, q: u32) -> SystemResult<()> {
        let (k, c, p, r) = {
            let rp = self.runs[run as usize].as_mut().expect("live run");
            rp.unfinished -= 1;
            let (k, slot, sub_len) = (rp.inst, rp.slot as usize, rp.sub_len);
            let ri = &self.rank_inst[k as usize];
            let (c, p) = (slot / ri.phases_per_chunk, slot % ri.phases_per_chunk);
            let phase = &ri.plan.as_ref().expect("planned")[c][p];
            let r = phase.subgroups[(q / sub_len) as usize][(q % sub_len) as usize];
            (k, c as u32, p as u32, r)
        };
        if self.runs[run as usize]
            .as_ref()
            .is_some_and(|rp| rp.unfinished == 0)
        {
            self.runs[run as usize] = None;
            self.free_runs.push(run);
            let ri = &mut self.rank_inst[k as usize];
            let slot = c as usize * ri.phases_per_chunk + p as usize;
            ri.run_of[slot] = NONE;
        }
        let d = self.phase_of(k, c, p).dim;
        self.rank_queues[r as usize][d].active -= 1;
        let phases = self.rank_inst[k as usize].phases_per_chunk as u32;
        let coll = self.rank_colls.get_mut(&(r, k)).expect("running");
        coll.chunk_phase[c as usize] += 1;
        let priority = coll.priority;
        let next = if p + 1 < phases {
            Some(self.enqueue_chunk(r, k, c, priority))
        } else {
            coll.chunks_left -= 1;
            None
        };
        self.dispatch_rank(r, d)?;
        if let Some(nd) = next {
            self.dispatch_rank(r, nd)?;
        }
        if self.rank_colls[&(r, k)].chunks_left == 0 {
            self.rank_collective_done(r, k)?;
        }
        Ok(())
    }

    fn rank_collective_done(&mut self, r: u32, k: u32) -> SystemResult<()> {
        let coll = self.rank_colls.remove(&(r, k)).expect("running");
        let now = self.now;
        let members = self.w.groups[self.m.instances[k as usize].group as usize].len() as u32;
        let ri = &mut self.rank_inst[k as usize];
        ri.finished += 1;
        if ri.finished == members {
            ri.plan = None;
            self.inst[k as usize].end = now;
        }
        self.release(r, coll.node, now);
        Ok(())
    }
}
