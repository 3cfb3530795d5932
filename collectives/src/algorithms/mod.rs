//! Collective algorithms, one per file behind the [`Algorithm`] trait, registered by
//! name. Each turns one collective on an n-member group into a [`Dag`] of transfers
//! between group positions; hierarchical (multi-dimensional) collectives are built
//! by the system layer as a sequence of these, one per network dimension.
//!
//! Byte convention: `bytes` is the whole buffer: the all-reduce buffer, the all-gather
//! output, the reduce-scatter input, what one rank sends in an all-to-all (its own block
//! included), the broadcast payload. (A trace's all-gather comm_size is each rank's shard;
//! the planner, `plan.rs`, hands the algorithm the gathered output.)

mod direct;
mod double_binary_tree;
mod halving_doubling;
mod recursive_doubling;
mod ring;

use crate::dag::{Blocks, Dag};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
}

impl CollectiveKind {
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::Broadcast => "broadcast",
        }
    }
}

/// One collective (one chunk of it) on a group of `n` positions.
pub struct CollectiveSpec<'a> {
    pub kind: CollectiveKind,
    pub n: u32,
    pub bytes: u64,
    pub blocks: Blocks,
    /// All-to-all-v: bytes from position s to position d, row-major n x n.
    pub matrix: Option<&'a [u64]>,
    /// Broadcast root (group position).
    pub root: u32,
    /// ASTRA-sim 2.x's variant where it differs from the physical one (ring all-to-all).
    pub astra: bool,
}

impl CollectiveSpec<'_> {
    /// Size of block `index` when the buffer is cut into `parts` blocks.
    pub fn block(&self, parts: u64, index: u64) -> u64 {
        self.blocks.size(self.bytes, parts, index)
    }
    /// Bytes of `count` consecutive blocks of n (recursive doubling and halving move these).
    pub fn span(&self, count: u64) -> u64 {
        let n = self.n as u64;
        match self.blocks {
            Blocks::Truncate => self.bytes / n * count,
            Blocks::Exact => ((self.bytes as u128 * count as u128) / n as u128) as u64,
        }
    }
    /// Bytes position `s` sends position `d` in an all-to-all.
    pub fn a2a_bytes(&self, s: u32, d: u32) -> u64 {
        match self.matrix {
            Some(m) => m[s as usize * self.n as usize + d as usize],
            None => self.block(self.n as u64, d as u64),
        }
    }
    fn unsupported(&self, algorithm: &str, hint: &str) -> String {
        format!(
            "algorithm `{algorithm}` does not implement {}; {hint}",
            self.kind.name()
        )
    }
}

pub trait Algorithm: Sync {
    fn name(&self) -> &'static str;
    fn build(&self, spec: &CollectiveSpec) -> Result<Box<dyn Dag>, String>;
}

static RING: ring::Ring = ring::Ring;
static DIRECT: direct::Direct = direct::Direct;
static RECURSIVE_DOUBLING: recursive_doubling::RecursiveDoubling =
    recursive_doubling::RecursiveDoubling;
static HALVING_DOUBLING: halving_doubling::HalvingDoubling = halving_doubling::HalvingDoubling;
static DOUBLE_BINARY_TREE: double_binary_tree::DoubleBinaryTree =
    double_binary_tree::DoubleBinaryTree;

/// Every registered algorithm, by its tracefabric name.
pub fn registry() -> [&'static dyn Algorithm; 5] {
    [
        &RING,
        &DIRECT,
        &RECURSIVE_DOUBLING,
        &HALVING_DOUBLING,
        &DOUBLE_BINARY_TREE,
    ]
}

pub fn names() -> Vec<&'static str> {
    registry().iter().map(|a| a.name()).collect()
}

/// ASTRA-sim's names for tracefabric's algorithms. Its flat `one*` variants run over
/// the whole group in one dimension, as tracefabric runs every algorithm; `direct<N>`
/// and `oneDirect<N>` (a window of N peers in flight) read as `direct`.
pub const ASTRA_NAMES: [(&str, &str); 7] = [
    ("oneRing", "ring"),
    ("oneDirect", "direct"),
    ("doubleBinaryTree", "double_binary_tree"),
    ("oneDoubleBinaryTree", "double_binary_tree"),
    ("halvingDoubling", "halving_doubling"),
    ("oneHalvingDoubling", "halving_doubling"),
    ("recursiveDoubling", "recursive_doubling"),
];

/// The algorithm named by tracefabric or by ASTRA-sim, if known.
fn lookup(name: &str) -> Option<&'static dyn Algorithm> {
    let windowless = ["oneDirect", "direct"].into_iter().find_map(|prefix| {
        let digits = name.strip_prefix(prefix)?;
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(prefix)
    });
    let name = windowless.unwrap_or(name);
    let name = ASTRA_NAMES
        .iter()
        .find(|(astra, _)| *astra == name)
        .map_or(name, |(_, ours)| ours);
    registry().into_iter().find(|a| a.name() == name)
}

/// tracefabric's name for an algorithm named by tracefabric or by ASTRA-sim, if known.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    lookup(name).map(|a| a.name())
}

/// Looks up an algorithm by tracefabric name or by ASTRA-sim's name for it.
pub fn by_name(name: &str) -> Result<&'static dyn Algorithm, String> {
    lookup(name).ok_or_else(|| {
        format!(
            "unknown collective algorithm `{name}`; expected one of: {}",
            names().join(", ")
        )
    })
}

/// log2(n) when n is a power of two, else an error naming the algorithm.
pub(crate) fn log2_exact(n: u32, algorithm: &str) -> Result<u32, String> {
    if n.is_power_of_two() {
        Ok(n.trailing_zeros())
    } else {
        Err(format!(
            "algorithm `{algorithm}` needs a power-of-two group size, got {n} ranks"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: CollectiveKind, n: u32, bytes: u64) -> CollectiveSpec<'static> {
        CollectiveSpec {
            kind,
            n,
            bytes,
            blocks: Blocks::Exact,
            matrix: None,
            root: 0,
            astra: false,
        }
    }

    /// Bytes every position receives, summed over the DAG.
    fn received(dag: &dyn Dag, n: u32) -> Vec<u64> {
        let mut r = vec![0; n as usize];
        for i in 0..dag.len() {
            r[dag.transfer(i).dst as usize] += dag.transfer(i).bytes;
        }
        r
    }

    #[test]
    fn every_algorithm_moves_the_bytes_its_definition_says() {
        let (n, s) = (8u32, 8 * 1024u64);
        // All-reduce: ring and direct move 2(n-1)/n S into every rank; recursive doubling
        // log2(n) S; halving-doubling 2(n-1)/n S; the double binary tree S per tree edge direction.
        let expect = [
            ("ring", 2 * 7 * s / 8),
            ("direct", 2 * 7 * s / 8),
            ("recursive_doubling", 3 * s),
            ("halving_doubling", 2 * 7 * s / 8),
        ];
        for (name, per_rank) in expect {
            let dag = by_name(name)
                .unwrap()
                .build(&spec(CollectiveKind::AllReduce, n, s))
                .unwrap();
            assert_eq!(
                received(dag.as_ref(), n),
                vec![per_rank; n as usize],
                "{name}"
            );
        }
        for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter] {
            for name in ["ring", "direct", "recursive_doubling", "halving_doubling"] {
                let dag = by_name(name).unwrap().build(&spec(kind, n, s)).unwrap();
                assert_eq!(
                    received(dag.as_ref(), n),
                    vec![7 * s / 8; n as usize],
                    "{name} {kind:?}"
                );
            }
        }
        for name in ["ring", "direct"] {
            let dag = by_name(name)
                .unwrap()
                .build(&spec(CollectiveKind::AllToAll, n, s))
                .unwrap();
            let direct_bytes = 7 * s / 8;
            let got = received(dag.as_ref(), n);
            // Direct delivers each block once; the ring relays a block over (d-s) mod n hops.
            let hops: u64 = (1..n as u64).sum();
            assert_eq!(
                got,
                vec![
                    if name == "direct" {
                        direct_bytes
                    } else {
                        hops * s / 8
                    };
                    n as usize
                ],
                "{name}"
            );
        }
        for name in ["ring", "direct", "recursive_doubling", "double_binary_tree"] {
            let dag = by_name(name)
                .unwrap()
                .build(&spec(CollectiveKind::Broadcast, n, s))
                .unwrap();
            let got = received(dag.as_ref(), n);
            assert_eq!(got[0], 0, "{name}");
            assert!(got[1..].iter().all(|&b| b == s), "{name}: {got:?}");
        }
    }

    #[test]
    fn pairwise_exchanges_send_only_what_has_arrived() {
        // Recursive doubling and halving-doubling add n transfers per step; what p sends at
        // step k holds everything p received before, so every earlier arrival at p must be
        // an ancestor (0 -> 4 at step 2 of an 8-rank all-reduce waits for 1 -> 0 at step 0).
        use CollectiveKind::*;
        let n = 8u32;
        for (name, kind) in [
            ("recursive_doubling", AllReduce),
            ("recursive_doubling", AllGather),
            ("recursive_doubling", ReduceScatter),
            ("halving_doubling", AllReduce),
        ] {
            let dag = by_name(name)
                .unwrap()
                .build(&spec(kind, n, 1 << 16))
                .unwrap();
            let mut preds = vec![Vec::new(); dag.len()];
            for i in 0..dag.len() {
                dag.for_each_successor(i, &mut |j| preds[j].push(i));
            }
            for t in 0..dag.len() {
                let mut seen = vec![false; dag.len()];
                let mut stack = preds[t].clone();
                while let Some(a) = stack.pop() {
                    if !std::mem::replace(&mut seen[a], true) {
                        stack.extend(&preds[a]);
                    }
                }
                let (step, src) = (t / n as usize, dag.transfer(t).src);
                for j in 0..step * n as usize {
                    if dag.transfer(j).dst == src {
                        assert!(
                            seen[j],
                            "{name} {kind:?}: transfer {t} does not wait for {j}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn astra_halving_doubling_sends_its_largest_messages_to_the_nearest_partner() {
        // 8 ranks, S = 64 KiB: ASTRA-sim's reduce-scatter goes 1, 2, 4 apart with S/2, S/4,
        // S/8, its all-gather 4, 2, 1 apart with S/8, S/4, S/2; ours (MPICH's order) the
        // reverse distances with the same sizes.
        let (n, s) = (8u32, 1u64 << 16);
        for (astra, dist) in [(true, [1, 2, 4, 4, 2, 1]), (false, [4, 2, 1, 1, 2, 4])] {
            let dag = by_name("halving_doubling")
                .unwrap()
                .build(&CollectiveSpec {
                    astra,
                    ..spec(CollectiveKind::AllReduce, n, s)
                })
                .unwrap();
            for (k, (&d, bytes)) in dist.iter().zip([2, 4, 8, 8, 4, 2]).enumerate() {
                let t = dag.transfer(k * n as usize);
                assert_eq!(
                    (t.src, t.dst, t.bytes),
                    (0, d, s / bytes),
                    "astra {astra} step {k}"
                );
            }
        }
    }

    #[test]
    fn astra_sim_names_read_as_ours() {
        let read = |n: &str| canonical_name(n);
        assert_eq!(read("direct8"), Some("direct"));
        assert_eq!(read("oneDirect16"), Some("direct"));
        assert_eq!(read("oneRing"), Some("ring"));
        assert_eq!(read("doubleBinaryTree"), Some("double_binary_tree"));
        assert_eq!(read("halving_doubling"), Some("halving_doubling"));
        for unknown in ["direct8x", "direct-8", "ring8", "ringy", ""] {
            assert_eq!(read(unknown), None, "{unknown}");
        }
        let e = by_name("ring8").err().unwrap();
        assert!(
            e.starts_with("unknown collective algorithm `ring8`; expected one of: ring, direct"),
            "{e}"
        );
    }

    #[test]
    fn dags_are_acyclic_and_every_transfer_can_start() {
        use CollectiveKind::*;
        let mut checked = 0;
        for n in [2u32, 3, 5, 8, 13, 16, 64] {
            for name in names() {
                for kind in [AllReduce, AllGather, AllToAll, Broadcast] {
                    // Only these combinations are refused, each with its reason.
                    let refusal = match (name, kind) {
                        ("recursive_doubling" | "halving_doubling", _) if !n.is_power_of_two() => {
                            Some("needs a power-of-two group size")
                        }
                        ("recursive_doubling", AllToAll)
                        | ("halving_doubling", AllToAll | Broadcast) => Some("does not implement"),
                        ("double_binary_tree", AllGather | AllToAll) => Some("trees implement"),
                        _ => None,
                    };
                    let built = by_name(name).unwrap().build(&spec(kind, n, 1 << 16));
                    let dag = match (built, refusal) {
                        (Ok(dag), None) => dag,
                        (Err(e), Some(why)) => {
                            assert!(e.contains(why), "{name} {kind:?} n={n}: {e}");
                            continue;
                        }
                        (Ok(_), Some(why)) => {
                            panic!("{name} {kind:?} n={n} built; expected `{why}`")
                        }
                        (Err(e), None) => panic!("{name} {kind:?} n={n}: {e}"),
                    };
                    checked += 1;
                    let mut waiting: Vec<u32> = (0..dag.len()).map(|i| dag.n_deps(i)).collect();
                    let mut ready = Vec::new();
                    dag.for_each_initial(&mut |i| ready.push(i));
                    let mut done = 0;
                    while let Some(i) = ready.pop() {
                        done += 1;
                        dag.for_each_successor(i, &mut |j| {
                            waiting[j] -= 1;
                            if waiting[j] == 0 {
                                ready.push(j)
                            }
                        });
                    }
                    assert_eq!(done, dag.len(), "{name} {kind:?} n={n}");
                }
            }
        }
        // 7 sizes x 4 kinds: ring and direct build all 28 each; the tree builds 2 kinds on
        // 7 sizes; recursive doubling 3 kinds and halving-doubling 2 on the 4 powers of two.
        assert_eq!(checked, 28 + 28 + 14 + 12 + 8);
    }

    #[test]
    fn direct_all_to_all_staggers_peers_so_each_round_is_a_permutation() {
        let n = 6u32;
        let dag = by_name("direct")
            .unwrap()
            .build(&spec(CollectiveKind::AllToAll, n, 6 * 1024))
            .unwrap();
        // Transfers come sender by sender; the i-th of every sender goes to sender + i + 1.
        assert_eq!(dag.len(), (n * (n - 1)) as usize);
        for k in 0..dag.len() {
            let (p, i) = (k as u32 / (n - 1), k as u32 % (n - 1));
            let t = dag.transfer(k);
            assert_eq!((t.src, t.dst), (p, (p + i + 1) % n), "transfer {k}");
        }
    }

    #[test]
    fn names_and_aliases() {
        assert_eq!(
            by_name("doubleBinaryTree").unwrap().name(),
            "double_binary_tree"
        );
        assert_eq!(by_name("oneRing").unwrap().name(), "ring");
        assert!(by_name("mesh")
            .err()
            .unwrap()
            .contains("expected one of: ring, direct"));
        assert!(log2_exact(12, "x").unwrap_err().contains("got 12 ranks"));
    }
}
