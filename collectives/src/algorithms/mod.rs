//! Collective algorithms, one per file behind the [`Algorithm`] trait, registered by
//! name. Each turns one collective on an n-member group into a [`Dag`] of transfers
//! between group positions; hierarchical (multi-dimensional) collectives are built
//! by the system layer as a sequence of these, one per network dimension.
//!
//! Byte convention (the same as tracefabric's traces): `bytes` is the whole buffer:
//! the all-reduce buffer, the all-gather output, the reduce-scatter input, what one
//! rank sends in an all-to-all (its own block included), the broadcast payload.

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

/// Looks up an algorithm by tracefabric name or by ASTRA-sim's name for it
/// (`doubleBinaryTree`, `halvingDoubling`, and the flat `oneRing`/`oneDirect`/...
/// variants, which tracefabric runs over the whole group in one dimension).
pub fn by_name(name: &str) -> Result<&'static dyn Algorithm, String> {
    let canonical = match name {
        "oneRing" => "ring",
        "oneDirect" => "direct",
        "doubleBinaryTree" | "oneDoubleBinaryTree" => "double_binary_tree",
        "halvingDoubling" | "oneHalvingDoubling" => "halving_doubling",
        "recursiveDoubling" => "recursive_doubling",
        other => other,
    };
    registry()
        .into_iter()
        .find(|a| a.name() == canonical)
        .ok_or_else(|| {
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
