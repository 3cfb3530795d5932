//! Errors that name what went wrong in the inputs: a flow the network refuses, a time
//! past the picosecond clock, and ranks that deadlock.

use super::flow_layout::FlowLayout;
use super::{Executor, Prepared, Timer};
use crate::error::SystemError;
use crate::workload::{group_label, Matched, NodeKind, WorkloadInput, NONE};
use tracefabric_netapi::{FlowRequest, Ps};

/// Names the ET file and node that issue `flow`, which the network backend refuses for `why`.
fn refused_flow(
    w: &WorkloadInput,
    m: &Matched,
    ids: &FlowLayout,
    flow: &FlowRequest,
    why: &str,
) -> SystemError {
    let (rank, node, what) = if flow.id >= ids.p2p_base {
        let p = &m.p2p[(flow.id - ids.p2p_base) as usize];
        (p.src, p.send_node, "send".to_string())
    } else {
        let k = ids.inst_base.partition_point(|&b| b <= flow.id) - 1;
        let inst = &m.instances[k];
        let members = &w.groups[inst.group as usize];
        let pos = members.iter().position(|&r| r == flow.src).unwrap_or(0);
        let what = format!(
            "{} on group {}",
            inst.kind.name(),
            group_label(w, inst.group)
        );
        (members[pos], inst.nodes[pos], what)
    };
    let r = &w.ranks[rank as usize];
    SystemError::Workload {
        file: r.file.clone(),
        node: r.nodes[node as usize].id,
        message: format!(
            "{what}: its transfer of {} bytes from rank {} to rank {} is refused by the \
             network backend: {why}",
            flow.bytes, flow.src, flow.dst
        ),
    }
}

impl Prepared<'_> {
    /// Names the ET node that issues `flow` (one of the list `new` returned), for a
    /// backend that refuses it before the run: `why` is the backend's reason.
    pub fn flow_error(&self, flow: &FlowRequest, why: &str) -> SystemError {
        refused_flow(self.w, &self.m, &self.ids, flow, why)
    }
}

impl Executor<'_> {
    /// Names the ET node that issues `flow`, refused by the backend when it starts.
    pub(super) fn flow_error(&self, flow: &FlowRequest, why: &str) -> SystemError {
        refused_flow(self.w, &self.m, &self.ids, flow, why)
    }

    /// "all_reduce on group `world`": the collective a stream belongs to.
    pub(super) fn stream_label(&self, s: u32) -> String {
        let st = self.streams[s as usize].as_ref().expect("live stream");
        let inst = &self.m.instances[st.inst as usize];
        format!(
            "{} on group {}",
            inst.kind.name(),
            group_label(self.w, inst.group)
        )
    }

    pub(super) fn timer_clock_error(&self, t: Ps, timer: Timer) -> SystemError {
        let what = match timer {
            Timer::NodeDone(r, i) => format!(
                "{}: node {} finishes",
                self.w.ranks[r as usize].file, self.w.ranks[r as usize].nodes[i as usize].id
            ),
            Timer::PhaseDone(s) => format!("a phase of {} ends", self.stream_label(s)),
            Timer::RankPhaseDone(..) => "a rank's part of a collective phase ends".to_string(),
        };
        self.clock_error(t, &what)
    }

    pub(super) fn clock_error(&self, t: Ps, what: &str) -> SystemError {
        let when = if t == Ps::MAX {
            "beyond".to_string()
        } else {
            format!("at {:.3e} s,", t as f64 / 1e12)
        };
        SystemError::Clock {
            message: format!(
                "{what} {when} past the picosecond clock (2^62 ps, 53 days): a duration, \
                 delay or size in the inputs is out of scale"
            ),
        }
    }

    pub(super) fn deadlock(&self, r: u32) -> SystemError {
        let rank = &self.ranks[r as usize];
        let file = &self.w.ranks[r as usize].file;
        let stuck: Vec<usize> = (0..rank.done.len())
            .filter(|&i| !rank.done[i] && rank.waiting_deps[i] == 0)
            .collect();
        let mut why = Vec::new();
        for &i in stuck.iter().take(3) {
            let node = &self.w.ranks[r as usize].nodes[i];
            let k = self.m.link[r as usize][i];
            let held = if rank.issued[i] {
                None
            } else {
                self.held_back(r, i as u32)
            };
            let reason = match node.kind {
                _ if held.is_some() => held.unwrap_or_default(),
                NodeKind::Collective if k != NONE => {
                    let inst = &self.m.instances[k as usize];
                    let members = &self.w.groups[inst.group as usize];
                    let missing: Vec<String> = members
                        .iter()
                        .enumerate()
                        .filter(|&(p, &m)| !self.ranks[m as usize].issued[inst.nodes[p] as usize])
                        .map(|(_, &m)| m.to_string())
                        .take(8)
                        .collect();
                    format!(
                        "its {} on group {} waits for ranks [{}] that never issue theirs",
                        inst.kind.name(),
                        group_label(self.w, inst.group),
                        missing.join(", ")
                    )
                }
                NodeKind::Recv => format!(
                    "its receive from rank {} never gets its data (the send never issues)",
                    node.peer
                ),
                _ => "it never completes".to_string(),
            };
            why.push(format!("{file}: node {}: {reason}", node.id));
        }
        let blocked = rank.done.len() - rank.finished;
        SystemError::Deadlock {
            message: format!(
                "rank {r} has {blocked} nodes that can never run; {}",
                why.join("; ")
            ),
        }
    }
}
