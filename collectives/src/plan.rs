//! The system layer's plan for one collective: how it is cut into chunks
//! (`preferred-dataset-splits`), and the phases each chunk goes through: one per
//! network dimension for a collective over the world (ASTRA-sim's hierarchical scheme),
//! one over the group otherwise.
//!
//! Sizes follow the trace's `comm_size`, which is each rank's input (as PyTorch records
//! it, Chakra converts it and ASTRA-sim reads it): the all-reduce buffer, the
//! reduce-scatter input, the all-gather shard, the all-to-all send buffer. Chunks cut
//! that input; a phase's DAG takes the algorithms' convention (the all-gather output).

use crate::algorithms::{self, Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::Dag;
use crate::error::{SystemError, SystemResult};
use crate::system::SystemConfig;
use std::sync::Arc;

/// Sizes of the chunks a collective of `bytes` (its comm_size) on `n` ranks is cut into.
/// As in ASTRA-sim: chunk = bytes / splits, raised to n bytes (and the total to
/// splits * n) when smaller, except for all-gather, whose chunks cut the shard.
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
    pub subgroups: Arc<Vec<Vec<u32>>>,
    /// The subgroups are the network's dimension `dim` (rank r sits at `Layout::locate`);
    /// else one subgroup, the group's members in their listed order.
    pub by_dimension: bool,
}

/// What a collective asks of the plan, the same for every chunk.
pub struct Shape<'a> {
    pub kind: CollectiveKind,
    pub members: &'a [u32],
    /// `involved_dim` of a collective on the world group (None: every dimension).
    pub involved: Option<&'a [bool]>,
}

impl Shape<'_> {
    /// Whether the collective runs over the world's dimensions. ASTRA-sim takes any group
    /// of every rank for the world (in rank order); the physical model only the world in
    /// rank order.
    pub fn on_world(&self, cfg: &SystemConfig, layout: &Layout) -> bool {
        let full = self.members.len() as u64 == layout.ranks as u64;
        full && (cfg.astra || self.members.iter().enumerate().all(|(i, &r)| i as u32 == r))
    }

    /// The dimensions a world collective runs on: more than one NPU and involved.
    pub fn dims(&self, cfg: &SystemConfig) -> Vec<usize> {
        let involved = |d: usize| {
            self.involved
                .is_none_or(|v| v.get(d).copied().unwrap_or(true))
        };
        (0..cfg.dims.len())
            .filter(|&d| cfg.dims[d] > 1 && involved(d))
            .collect()
    }
}

/// The phases one chunk of `bytes` (a chunk of comm_size) goes through.
pub fn plan_chunk(
    cfg: &SystemConfig,
    shape: &Shape,
    bytes: u64,
    matrix: Option<&[u64]>,
    layout: &Layout,
) -> SystemResult<Vec<Phase>> {
    let kind = shape.kind;
    let n = shape.members.len() as u32;
    let build = |algorithm: &'static dyn Algorithm,
                 phase_kind: CollectiveKind,
                 size: u32,
                 bytes: u64,
                 matrix: Option<&[u64]>|
     -> SystemResult<Box<dyn Dag>> {
        let spec = CollectiveSpec {
            kind: phase_kind,
            n: size,
            bytes,
            blocks: cfg.blocks,
            matrix,
            root: 0,
            astra: cfg.astra,
        };
        algorithm
            .build(&spec)
            .map_err(|message| SystemError::Config {
                field: implementation_key(kind),
                message,
            })
    };
    let dims = shape.dims(cfg);
    if !shape.on_world(cfg, layout) || matrix.is_some() || dims.is_empty() {
        // A sub-group: ASTRA-sim runs it as a ring over the members, whatever the config
        // names; the physical model runs the configured algorithm.
        let algorithm = if cfg.astra {
            algorithms::by_name("ring").expect("ring is registered")
        } else {
            cfg.algorithm(kind, 0)?
        };
        let dag_bytes = gathered(kind, bytes, n)?;
        let matrix = matrix.filter(|_| kind == CollectiveKind::AllToAll);
        return Ok(vec![Phase {
            dim: 0,
            kind,
            dag: build(algorithm, kind, n, dag_bytes, matrix)?,
            subgroups: Arc::new(vec![shape.members.to_vec()]),
            by_dimension: false,
        }]);
    }
    // (dimension, phase kind, DAG bytes) per phase.
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
        // Highest dimension first; each phase gathers the previous one's output.
        CollectiveKind::AllGather => {
            let mut x = bytes;
            for &d in dims.iter().rev() {
                x = gathered(kind, x, cfg.dims[d])?;
                steps.push((d, kind, x));
            }
        }
        _ => steps.extend(dims.iter().map(|&d| (d, kind, bytes))),
    }
    steps
        .into_iter()
        .map(|(d, phase_kind, size_bytes)| {
            Ok(Phase {
                dim: d,
                kind: phase_kind,
                dag: build(
                    cfg.algorithm(kind, d)?,
                    phase_kind,
                    cfg.dims[d],
                    size_bytes,
                    None,
                )?,
                subgroups: layout.subgroups[d].clone(),
                by_dimension: true,
            })
        })
        .collect()
}

fn implementation_key(kind: CollectiveKind) -> String {
    format!("{}-implementation", kind.name().replace('_', "-"))
}

/// The bytes an algorithm takes for `bytes` of comm_size on `n` ranks: the gathered
/// output for an all-gather, else the same.
fn gathered(kind: CollectiveKind, bytes: u64, n: u32) -> SystemResult<u64> {
    if kind != CollectiveKind::AllGather {
        return Ok(bytes);
    }
    bytes
        .checked_mul(n as u64)
        .ok_or_else(|| SystemError::Config {
            field: implementation_key(kind),
            message: format!(
                "an all-gather of {bytes} B per rank on {n} ranks gathers more than 2^64 B"
            ),
        })
}

/// Subgroups of every dimension of the network (ranks that differ only in that coordinate).
pub struct Layout {
    pub ranks: u32,
    pub hierarchical: bool,
    pub subgroups: Vec<Arc<Vec<Vec<u32>>>>,
    dims: Vec<u32>,
    strides: Vec<u32>,
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
        let mut strides = Vec::new();
        let mut stride = 1u32;
        for &d in dims {
            let mut groups = Vec::new();
            for base in 0..n_ranks {
                if (base / stride) % d == 0 {
                    groups.push((0..d).map(|i| base + i * stride).collect());
                }
            }
            subgroups.push(Arc::new(groups));
            strides.push(stride);
            stride *= d;
        }
        Ok(Layout {
            ranks: n_ranks,
            hierarchical: dims.iter().filter(|&&d| d > 1).count() > 1,
            subgroups,
            dims: dims.to_vec(),
            strides,
        })
    }

    /// (subgroup, position) of rank `r` in dimension `d`: `subgroups[d][sub][pos] == r`.
    pub fn locate(&self, d: usize, r: u32) -> (u32, u32) {
        let (stride, size) = (self.strides[d], self.dims[d]);
        let pos = (r / stride) % size;
        let base = r - pos * stride;
        (base / (stride * size) * stride + base % stride, pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::tests::cfg;

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
    fn locate_finds_every_rank_in_its_subgroup() {
        let l = Layout::new(&[3, 2, 4], 24).unwrap();
        for d in 0..3 {
            for r in 0..24 {
                let (s, p) = l.locate(d, r);
                assert_eq!(
                    l.subgroups[d][s as usize][p as usize], r,
                    "dim {d} rank {r}"
                );
            }
        }
    }

    fn world(c: &SystemConfig, kind: CollectiveKind, involved: Option<&[bool]>) -> Vec<Phase> {
        let members: Vec<u32> = (0..8).collect();
        let layout = Layout::new(&c.dims, 8).unwrap();
        let shape = Shape {
            kind,
            members: &members,
            involved,
        };
        plan_chunk(c, &shape, 1 << 20, None, &layout).unwrap()
    }

    fn two_dims() -> SystemConfig {
        let mut c = cfg(1);
        c.dims = vec![2, 4];
        for k in ["all-reduce-implementation", "all-gather-implementation"] {
            c.implementations
                .insert(k.into(), vec!["ring".into(), "direct".into()]);
        }
        c
    }

    #[test]
    fn hierarchical_all_reduce_is_rs_ar_ag() {
        let phases = world(&two_dims(), CollectiveKind::AllReduce, None);
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

    #[test]
    fn all_gather_gathers_the_shard_highest_dimension_first() {
        // 1 MiB per rank: dimension 1 (4 ranks) moves the shard, dimension 0 (2 ranks) 4 shards.
        let phases = world(&two_dims(), CollectiveKind::AllGather, None);
        let got: Vec<_> = phases
            .iter()
            .map(|p| (p.dim, p.dag.transfer(0).bytes))
            .collect();
        assert_eq!(got, vec![(1, 1 << 20), (0, 4 << 20)]);
    }

    #[test]
    fn involved_dim_drops_dimensions() {
        let phases = world(&two_dims(), CollectiveKind::AllReduce, Some(&[false, true]));
        assert_eq!(phases.len(), 1);
        assert_eq!(
            (phases[0].dim, phases[0].kind),
            (1, CollectiveKind::AllReduce)
        );
        // An absent entry counts as involved, as ASTRA-sim's default of all true.
        let phases = world(&two_dims(), CollectiveKind::AllReduce, Some(&[true]));
        assert_eq!(phases.len(), 3);
    }
}
