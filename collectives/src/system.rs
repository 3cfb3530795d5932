//! The system layer's plan for one collective: how it is cut into chunks
//! (`preferred-dataset-splits`), and the phases each chunk goes through: one per
//! network dimension for a collective over every rank of a multi-dimensional network
//! (ASTRA-sim's hierarchical scheme), one over the group otherwise.

use crate::algorithms::{self, Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::{Blocks, Dag};
use crate::error::{SystemError, SystemResult};
use serde::Deserialize;
use std::collections::BTreeMap;
use tracefabric_netapi::CLOCK_LIMIT_PS;

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// The newest collective's chunks go first (ASTRA-sim's default).
    Lifo,
    Fifo,
}

/// The system configuration, normalized by the Python config reader (which owns
/// ASTRA-sim's JSON keys, their units and their errors).
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct SystemConfig {
    pub scheduling_policy: Policy,
    /// Paid by the receiver for every arriving message, and once when a phase starts.
    pub endpoint_delay_ps: u64,
    pub active_chunks_per_dimension: u32,
    pub preferred_dataset_splits: u32,
    /// Algorithm names per collective type, one per network dimension.
    pub implementations: BTreeMap<String, Vec<String>>,
    /// All-reduce over several dimensions as reduce-scatter up, all-reduce on the last
    /// dimension, all-gather down (ASTRA-sim's `localBWAware`); else all-reduce per dimension.
    pub local_bw_aware: bool,
    /// Local reduction: 3 memory passes (one write, two reads) of the received bytes at
    /// this rate, each rounded down to whole ns (ASTRA-sim's model). 0 disables it.
    pub local_mem_bw_bytes_per_ns: f64,
    pub blocks: Blocks,
    /// NPUs per network dimension (innermost first); their product is the rank count.
    pub dims: Vec<u32>,
}

impl SystemConfig {
    /// The local reduction of `bytes`, or an error naming `local-mem-bw` when it would
    /// pass the clock limit (instead of a saturated, wrapped time).
    pub fn reduce_time_ps(&self, bytes: u64) -> SystemResult<u64> {
        if self.local_mem_bw_bytes_per_ns <= 0.0 {
            return Ok(0);
        }
        let ns = (bytes as f64 / self.local_mem_bw_bytes_per_ns).floor();
        if ns < (CLOCK_LIMIT_PS / 3_000) as f64 {
            return Ok(3 * ns as u64 * 1_000);
        }
        Err(SystemError::Config {
            field: "local-mem-bw".into(),
            message: format!(
                "a local reduction of {bytes} B at {:e} GB/s takes {:.3e} s, past the picosecond \
                 clock (2^62 ps, 53 days)",
                self.local_mem_bw_bytes_per_ns,
                3.0 * ns / 1e9
            ),
        })
    }

    fn algorithm(&self, kind: CollectiveKind, dim: usize) -> SystemResult<&'static dyn Algorithm> {
        let key = format!("{}-implementation", kind.name().replace('_', "-"));
        let list = self
            .implementations
            .get(&key)
            .ok_or_else(|| SystemError::Config {
                field: key.clone(),
                message: format!(
                    "the workload has a {} but the system config names no algorithm for it",
                    kind.name()
                ),
            })?;
        let name = list.get(dim).ok_or_else(|| SystemError::Config {
            field: key.clone(),
            message: format!(
                "{} entries, but dimension {dim} needs one (the network has {} dimensions)",
                list.len(),
                self.dims.len()
            ),
        })?;
        algorithms::by_name(name).map_err(|message| SystemError::Config {
            field: key,
            message,
        })
    }
}

/// Sizes of the chunks a collective of `bytes` on `n` ranks is cut into. As in
/// ASTRA-sim: chunk = bytes / splits, raised to n bytes (and the total to splits * n)
/// when smaller, except for all-gather.
pub fn chunk_sizes(cfg: &SystemConfig, kind: CollectiveKind, bytes: u64, n: u32) -> Vec<u64> {
    let splits = cfg.preferred_dataset_splits.max(1) as u64;
    let mut chunk = bytes / splits;
    let mut total = bytes;
    if chunk < n as u64 && kind != CollectiveKind::AllGather {
        chunk = n as u64;
        total = splits * chunk;
    }
    if chunk == 0 {
        return vec![total];
    }
    let count = total.div_ceil(chunk);
    (0..count)
        .map(|c| {
            if c + 1 < count {
                chunk
            } else {
                total - chunk * (count - 1)
            }
        })
        .collect()
}

/// One phase of a chunk: an algorithm over every subgroup of one dimension at once.
pub struct Phase {
    /// Scheduling queue (network dimension; 0 for a flat collective).
    pub dim: usize,
    pub kind: CollectiveKind,
    pub dag: Box<dyn Dag>,
    /// Global rank of position p in subgroup s: `subgroups[s][p]`.
    pub subgroups: std::sync::Arc<Vec<Vec<u32>>>,
}

/// The phases one chunk of `bytes` goes through.
pub fn plan_chunk(
    cfg: &SystemConfig,
    kind: CollectiveKind,
    bytes: u64,
    matrix: Option<&[u64]>,
    members: &[u32],
    layout: &Layout,
) -> SystemResult<Vec<Phase>> {
    let n = members.len() as u32;
    let world_in_order =
        layout.hierarchical && members.iter().enumerate().all(|(i, &r)| i as u32 == r);
    let build = |phase_kind: CollectiveKind,
                 algo_kind: CollectiveKind,
                 dim: usize,
                 size: u32,
                 bytes: u64|
     -> SystemResult<Box<dyn Dag>> {
        let algorithm = cfg.algorithm(algo_kind, dim)?;
        let spec = CollectiveSpec {
            kind: phase_kind,
            n: size,
            bytes,
            blocks: cfg.blocks,
            matrix: if phase_kind == CollectiveKind::AllToAll && size == n {
                matrix
            } else {
                None
            },
            root: 0,
        };
        algorithm
            .build(&spec)
            .map_err(|message| SystemError::Config {
                field: format!("{}-implementation", algo_kind.name().replace('_', "-")),
                message,
            })
    };
    if !world_in_order || matrix.is_some() {
        let dag = build(kind, kind, 0, n, bytes)?;
        return Ok(vec![Phase {
            dim: 0,
            kind,
            dag,
            subgroups: std::sync::Arc::new(vec![members.to_vec()]),
        }]);
    }
    // Hierarchical: only dimensions with more than one NPU take part.
    let dims: Vec<usize> = (0..cfg.dims.len()).filter(|&d| cfg.dims[d] > 1).collect();
    let mut steps: Vec<(usize, CollectiveKind, u64)> = Vec::new();
    // Buffer a dimension works on when the data shrinks dimension by dimension.
    let mut shrinking = Vec::new();
    let mut b = bytes;
    for &d in &dims {
        shrinking.push(b);
        b /= cfg.dims[d] as u64;
    }
    match kind {
        CollectiveKind::AllReduce if cfg.local_bw_aware && dims.len() > 1 => {
            let last = dims.len() - 1;
            for i in 0..last {
                steps.push((dims[i], CollectiveKind::ReduceScatter, shrinking[i]));
            }
            steps.push((dims[last], CollectiveKind::AllReduce, shrinking[last]));
            for i in (0..last).rev() {
                steps.push((dims[i], CollectiveKind::AllGather, shrinking[i]));
            }
        }
        CollectiveKind::ReduceScatter => {
            steps.extend(dims.iter().zip(&shrinking).map(|(&d, &s)| (d, kind, s)))
        }
        CollectiveKind::AllGather => steps.extend(
            dims.iter()
                .zip(&shrinking)
                .rev()
                .map(|(&d, &s)| (d, kind, s)),
        ),
        _ => steps.extend(dims.iter().map(|&d| (d, kind, bytes))),
    }
    steps
        .into_iter()
        .map(|(d, phase_kind, size_bytes)| {
            Ok(Phase {
                dim: d,
                kind: phase_kind,
                dag: build(phase_kind, kind, d, cfg.dims[d], size_bytes)?,
                subgroups: layout.subgroups[d].clone(),
            })
        })
        .collect()
}

/// Subgroups of every dimension of the network (ranks that differ only in that coordinate).
pub struct Layout {
    pub hierarchical: bool,
    pub subgroups: Vec<std::sync::Arc<Vec<Vec<u32>>>>,
}

impl Layout {
    pub fn new(dims: &[u32], n_ranks: u32) -> SystemResult<Layout> {
        let product: u64 = dims.iter().map(|&d| d as u64).product();
        if dims.is_empty() || product != n_ranks as u64 {
            return Err(SystemError::Config {
                field: "dims".into(),
                message: format!("the network's dimensions {dims:?} hold {product} NPUs but the workload has {n_ranks} ranks"),
            });
        }
        let mut subgroups = Vec::new();
        let mut stride = 1u32;
        for &d in dims {
            let mut groups = Vec::new();
            for base in 0..n_ranks {
                if (base / stride) % d == 0 {
                    groups.push((0..d).map(|i| base + i * stride).collect());
                }
            }
            subgroups.push(std::sync::Arc::new(groups));
            stride *= d;
        }
        Ok(Layout {
            hierarchical: dims.iter().filter(|&&d| d > 1).count() > 1,
            subgroups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(splits: u32) -> SystemConfig {
        SystemConfig {
            scheduling_policy: Policy::Lifo,
            endpoint_delay_ps: 0,
            active_chunks_per_dimension: 1,
            preferred_dataset_splits: splits,
            implementations: BTreeMap::new(),
            local_bw_aware: true,
            local_mem_bw_bytes_per_ns: 1600.0,
            blocks: Blocks::Truncate,
            dims: vec![8],
        }
    }

    #[test]
    fn chunks_follow_astra_sim() {
        assert_eq!(
            chunk_sizes(&cfg(4), CollectiveKind::AllReduce, 1 << 20, 8),
            vec![1 << 18; 4]
        );
        assert_eq!(
            chunk_sizes(&cfg(3), CollectiveKind::AllReduce, 10, 2),
            vec![3, 3, 3, 1]
        );
        // Chunks below the NPU count are raised to it (not for all-gather).
        assert_eq!(
            chunk_sizes(&cfg(4), CollectiveKind::AllReduce, 16, 8),
            vec![8; 4]
        );
        assert_eq!(
            chunk_sizes(&cfg(4), CollectiveKind::AllGather, 16, 8),
            vec![4; 4]
        );
    }

    #[test]
    fn reduction_time_is_three_floored_memory_passes() {
        // 131072 B at 1600 B/ns: floor(81.92) = 81 ns per pass.
        assert_eq!(cfg(1).reduce_time_ps(131_072), Ok(243_000));
    }

    #[test]
    fn reduction_past_the_clock_names_local_mem_bw() {
        let mut c = cfg(1);
        c.local_mem_bw_bytes_per_ns = 1e-300;
        match c.reduce_time_ps(1) {
            Err(SystemError::Config { field, .. }) => assert_eq!(field, "local-mem-bw"),
            other => panic!("expected a local-mem-bw error, got {other:?}"),
        }
        // 2^62 ps / 3 passes is 1.537e15 ns: one byte per ns stays below it.
        c.local_mem_bw_bytes_per_ns = 1.0;
        assert_eq!(c.reduce_time_ps(1 << 40), Ok(3 * (1 << 40) * 1_000));
    }

    #[test]
    fn layout_subgroups_per_dimension() {
        let l = Layout::new(&[2, 4], 8).unwrap();
        assert!(l.hierarchical);
        assert_eq!(
            *l.subgroups[0],
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(*l.subgroups[1], vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        assert!(Layout::new(&[2, 4], 6).is_err());
    }

    #[test]
    fn hierarchical_all_reduce_is_rs_ar_ag() {
        let mut c = cfg(1);
        c.dims = vec![2, 4];
        for k in ["all-reduce-implementation"] {
            c.implementations
                .insert(k.into(), vec!["ring".into(), "direct".into()]);
        }
        let layout = Layout::new(&c.dims, 8).unwrap();
        let members: Vec<u32> = (0..8).collect();
        let phases = plan_chunk(
            &c,
            CollectiveKind::AllReduce,
            1 << 20,
            None,
            &members,
            &layout,
        )
        .unwrap();
        let kinds: Vec<_> = phases
            .iter()
            .map(|p| (p.dim, p.kind, p.dag.algorithm()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (0, CollectiveKind::ReduceScatter, "ring"),
                (1, CollectiveKind::AllReduce, "direct"),
                (0, CollectiveKind::AllGather, "ring")
            ]
        );
        // The dimension-1 all-reduce works on half the buffer; every transfer is 1/(2*4) of it.
        assert_eq!(phases[1].dag.transfer(0).bytes, (1 << 19) / 4);
    }
}
