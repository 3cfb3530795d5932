//! The end of a run: every rank must have finished its graph; then each rank's busy
//! times and each collective's record become the report.

use super::Executor;
use crate::error::SystemResult;
use crate::report::{CollectiveRecord, RankStats, SystemReport};
use tracefabric_netapi::Ps;

impl Executor<'_> {
    pub(super) fn finish(self) -> SystemResult<SystemReport> {
        for (r, rank) in self.ranks.iter().enumerate() {
            if rank.finished < rank.done.len() {
                return Err(self.deadlock(r as u32));
            }
        }
        let ranks = self
            .ranks
            .iter()
            .map(|rank| {
                let comm = union_length(rank.comm_intervals.clone());
                let compute = match &rank.compute_intervals {
                    Some(v) => union_length(v.clone()),
                    None => rank.compute_ps,
                };
                // ASTRA-sim counts only the GPU's compute against the wall time.
                let hidden = if self.astra {
                    rank.gpu_compute_ps
                } else {
                    compute
                };
                RankStats {
                    wall_ps: rank.wall,
                    compute_ps: compute,
                    comm_ps: comm,
                    exposed_comm_ps: rank.wall.saturating_sub(hidden),
                    overlap_ps: (compute + comm).saturating_sub(rank.wall),
                    nodes: rank.done.len() as u64,
                }
            })
            .collect();
        let collectives = self
            .m
            .instances
            .iter()
            .zip(&self.inst)
            .enumerate()
            .map(|(k, (inst, rt))| CollectiveRecord {
                group: inst.group,
                seq: inst.seq,
                kind: inst.kind.name(),
                bytes: inst.bytes,
                algorithm: rt.algorithm.clone(),
                chunks: rt.chunks,
                flows: self.ids.inst_base[k + 1] - self.ids.inst_base[k],
                first_issue_ps: rt.first_issue,
                start_ps: rt.start,
                end_ps: rt.end,
            })
            .collect();
        Ok(SystemReport {
            ranks,
            collectives,
            flows: self.flows,
            network_counters: self.net.counters(),
        })
    }
}

/// Total length of the union of intervals.
fn union_length(mut v: Vec<(Ps, Ps)>) -> Ps {
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(Ps, Ps)> = None;
    for (a, b) in v {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::union_length;
    #[test]
    fn union_merges_overlaps() {
        assert_eq!(union_length(vec![(0, 10), (5, 20), (30, 40)]), 30);
        assert_eq!(union_length(vec![]), 0);
    }
}
