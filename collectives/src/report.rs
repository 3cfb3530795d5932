//! What a run reports: per rank (ASTRA-sim's statistics) and per collective.

use tracefabric_netapi::Ps;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankStats {
    /// When the rank's last node finished (ASTRA-sim's `sys[r] finished, T cycles`).
    pub wall_ps: Ps,
    /// Time the compute unit was busy.
    pub compute_ps: Ps,
    /// Union of the intervals during which a communication node was in flight.
    pub comm_ps: Ps,
    /// wall - compute (ASTRA-sim's "exposed communication").
    pub exposed_comm_ps: Ps,
    /// compute + comm - wall, floored at 0 (ASTRA-sim's "compute-communication overlap").
    pub overlap_ps: Ps,
    pub nodes: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveRecord {
    pub group: u32,
    pub seq: u32,
    pub kind: &'static str,
    pub bytes: u64,
    /// Algorithm per phase, joined by `+` (e.g. `ring+direct+ring` across dimensions).
    pub algorithm: String,
    pub chunks: u32,
    pub flows: u64,
    /// When the first member issued it, when the last did (it starts then), when it ended.
    pub first_issue_ps: Ps,
    pub start_ps: Ps,
    pub end_ps: Ps,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemReport {
    pub ranks: Vec<RankStats>,
    pub collectives: Vec<CollectiveRecord>,
    pub flows: u64,
    pub network_counters: Vec<(String, u64)>,
}
