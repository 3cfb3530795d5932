//! The transfers of a stream's current phase: starting its initial transfers, handing
//! each to the network as a flow, and releasing successors as flows complete (the
//! phase timing described in the executor's module doc).

use super::{Executor, Timer};
use crate::dag::Transfer;
use crate::error::SystemResult;
use std::collections::HashMap;
use tracefabric_netapi::{FlowRequest, Ps, CLOCK_LIMIT_PS};

impl Executor<'_> {
    pub(super) fn start_phase(&mut self, s: u32) -> SystemResult<()> {
        let now = self.now;
        let st = self.streams[s as usize].as_mut().expect("live stream");
        let k = st.inst as usize;
        st.base = self.ids.offsets[k][st.chunk as usize * st.phases.len() + st.phase];
        let phase = &st.phases[st.phase];
        st.len = phase.dag.len() as u64;
        st.left = st.len * phase.subgroups.len() as u64;
        st.pending.clear();
        st.last_ready = now;
        if st.left == 0 {
            self.timer(now, Timer::PhaseDone(s));
            return Ok(());
        }
        let at = now + self.cfg.endpoint_delay_ps;
        let mut initial = Vec::new();
        phase.dag.for_each_initial(&mut |t| initial.push(t as u64));
        let len = phase.dag.len() as u64;
        for sub in 0..phase.subgroups.len() as u64 {
            for &t in &initial {
                self.start_transfer(s, sub * len + t, at)?;
            }
        }
        Ok(())
    }

    fn start_transfer(&mut self, s: u32, local: u64, at: Ps) -> SystemResult<()> {
        if at >= CLOCK_LIMIT_PS {
            return Err(self.clock_error(
                at,
                &format!("a transfer of {} starts", self.stream_label(s)),
            ));
        }
        let st = self.streams[s as usize].as_ref().expect("live stream");
        let phase = &st.phases[st.phase];
        let (g, ti) = split(local, st.len, phase.subgroups.len());
        let tr = phase.dag.transfer(ti);
        let req = flow_of(st.base + local, &phase.subgroups[g as usize], tr);
        self.send(req, at)
    }

    /// Hands `req` to the network, leaving at `at`.
    pub(super) fn send(&mut self, req: FlowRequest, at: Ps) -> SystemResult<()> {
        self.flows += 1;
        self.net
            .start_flow(req, at)
            .map_err(|why| self.flow_error(&req, &why))
    }

    /// Point-to-point pair `k`'s flow, leaving at `at`.
    pub(super) fn send_pair(&mut self, k: u32, at: Ps) -> SystemResult<()> {
        let p = self.m.p2p[k as usize];
        let req = FlowRequest {
            id: self.ids.p2p_base + k as u64,
            src: p.src,
            dst: p.dst,
            bytes: p.bytes,
        };
        self.send(req, at)
    }

    pub(super) fn on_flow_done(&mut self, t: Ps, id: u64) -> SystemResult<()> {
        if self.astra {
            return if id >= self.ids.p2p_base {
                self.pair_arrived((id - self.ids.p2p_base) as usize, t);
                Ok(())
            } else {
                self.rank_arrival(t, id)
            };
        }
        if id >= self.ids.p2p_base {
            self.send_arrived((id - self.ids.p2p_base) as usize, t);
            return Ok(());
        }
        // Consecutive completions mostly belong to the same phase: try it first.
        let stream_id = match self.last_phase {
            (lo, hi, s) if lo <= id && id < hi => s,
            _ => {
                let s = self.stream_of_flow(id)?;
                let st = self.streams[s as usize].as_ref().expect("live stream");
                let span = st.len * st.phases[st.phase].subgroups.len() as u64;
                self.last_phase = (st.base, st.base + span, s);
                s
            }
        };
        let reduce_time;
        let ready;
        let mut successors = std::mem::take(&mut self.scratch_start);
        let mut next = std::mem::take(&mut self.scratch_next);
        {
            let st = self.streams[stream_id as usize]
                .as_mut()
                .expect("live stream");
            let local = id - st.base;
            let phase = &st.phases[st.phase];
            let len = st.len;
            let (sub, ti) = split(local, len, phase.subgroups.len());
            let tr = phase.dag.transfer(ti);
            reduce_time = if tr.reduce {
                self.cfg.reduce_time_ps(tr.bytes)?
            } else {
                0
            };
            ready = t
                .saturating_add(self.cfg.endpoint_delay_ps)
                .saturating_add(reduce_time);
            st.last_ready = st.last_ready.max(ready);
            st.left -= 1;
            phase.dag.for_each_successor(ti, &mut |j| next.push(j));
            for j in next.drain(..) {
                let g = sub * len + j as u64;
                if let Some(at) = dependency_done(&mut st.pending, g, phase.dag.n_deps(j), ready) {
                    successors.push((g, at));
                }
            }
            if st.left == 0 {
                let at = st.last_ready;
                self.timer(at, Timer::PhaseDone(stream_id));
            }
        }
        self.scratch_next = next;
        for &(g, at) in &successors {
            self.start_transfer(stream_id, g, at)?;
        }
        successors.clear();
        self.scratch_start = successors;
        Ok(())
    }
}

/// Transfer `g`, which waits on `deps` transfers, had one of them processed at `ready`:
/// when it may leave, once all have been (the latest of their times), else None.
/// `pending` holds (dependencies missing, latest time so far) of transfers waiting on several.
pub(super) fn dependency_done(
    pending: &mut HashMap<u64, (u32, Ps)>,
    g: u64,
    deps: u32,
    ready: Ps,
) -> Option<Ps> {
    if deps <= 1 {
        return Some(ready);
    }
    let e = pending.entry(g).or_insert((deps, 0));
    e.0 -= 1;
    e.1 = e.1.max(ready);
    if e.0 > 0 {
        return None;
    }
    let at = e.1;
    pending.remove(&g);
    Some(at)
}

/// The flow that carries transfer `tr` between the members of its subgroup.
pub(super) fn flow_of(id: u64, members: &[u32], tr: Transfer) -> FlowRequest {
    FlowRequest {
        id,
        src: members[tr.src as usize],
        dst: members[tr.dst as usize],
        bytes: tr.bytes,
    }
}

/// (subgroup, transfer) of a phase-local flow index; no division in the common one-group case.
#[inline]
fn split(local: u64, len: u64, subgroups: usize) -> (u64, usize) {
    if subgroups == 1 {
        (0, local as usize)
    } else {
        (local / len, (local % len) as usize)
    }
}
