//! Ring: position p sends to p+1. All-reduce = reduce-scatter (n-1 steps, each a
//! reducing transfer of one block of S/n) then all-gather (n-1 steps of one block);
//! step k of p waits for step k-1 of p-1 to arrive. The DAG is implicit (index =
//! step * n + position), so a 1,024-rank ring costs no memory per transfer.
//! All-to-all relays blocks along the ring: a block from s to d rides (d-s) mod n hops,
//! so step k carries every block still on its way. ASTRA-sim's ring all-to-all (the
//! `astra` spec) is instead n(n-1)/2 plain ring steps of S/n each, whatever the per-peer
//! splits. Broadcast is a pipeline-free chain.
//!
//! Every position sends and receives once per step, so a receiver posts the receive of
//! step k with its own send of step k (`recv_step`), as ASTRA-sim's ring does.

use super::{Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::{Dag, DagBuilder, Transfer};

pub struct Ring;

struct RingDag {
    n: u32,
    /// Reducing steps first, then plain steps.
    reduce_steps: u32,
    steps: u32,
    /// Blocks are `block` bytes, the first `rem` of them one byte more (Blocks::Exact).
    block: u64,
    rem: u64,
}

impl Dag for RingDag {
    fn len(&self) -> usize {
        self.steps as usize * self.n as usize
    }
    fn transfer(&self, i: usize) -> Transfer {
        let n = self.n;
        let k = i as u32 / n;
        let p = i as u32 - k * n;
        let reduce = k < self.reduce_steps;
        let dst = if p + 1 == n { 0 } else { p + 1 };
        // Which block only matters when blocks are uneven. Reduce-scatter: p sends block
        // p-k; afterwards p owns block p+1 and the all-gather sends p+1-j at its step j.
        let bytes = if self.rem == 0 {
            self.block
        } else {
            let block = if reduce {
                (p + n - k % n) % n
            } else {
                (p + 1 + n - (k - self.reduce_steps) % n) % n
            };
            self.block + u64::from((block as u64) < self.rem)
        };
        Transfer {
            src: p,
            dst,
            bytes,
            reduce,
        }
    }
    fn n_deps(&self, i: usize) -> u32 {
        u32::from(i >= self.n as usize)
    }
    fn for_each_successor(&self, i: usize, f: &mut dyn FnMut(usize)) {
        let n = self.n as usize;
        let (k, p) = (i / n, i % n);
        if k + 1 < self.steps as usize {
            f((k + 1) * n + (p + 1) % n)
        }
    }
    fn algorithm(&self) -> &'static str {
        "ring"
    }
    fn for_each_initial(&self, f: &mut dyn FnMut(usize)) {
        (0..self.n.min(self.len() as u32) as usize).for_each(f)
    }
    fn receives_of(&self, pos: u32) -> u32 {
        if pos < self.n {
            self.steps
        } else {
            0
        }
    }
    fn for_each_initial_from(&self, pos: u32, f: &mut dyn FnMut(usize)) {
        if pos < self.n && self.steps > 0 {
            f(pos as usize)
        }
    }
    fn recv_step(&self, i: usize) -> Option<u32> {
        Some(i as u32 / self.n)
    }
}

impl Algorithm for Ring {
    fn name(&self) -> &'static str {
        "ring"
    }
    fn build(&self, spec: &CollectiveSpec) -> Result<Box<dyn Dag>, String> {
        let n = spec.n;
        let steps = n.saturating_sub(1);
        let implicit = |reduce_steps, steps| -> Box<dyn Dag> {
            Box::new(RingDag {
                n,
                reduce_steps,
                steps,
                block: spec.blocks.size(spec.bytes, n as u64, u64::MAX),
                rem: if spec.blocks == crate::dag::Blocks::Exact {
                    spec.bytes % n as u64
                } else {
                    0
                },
            })
        };
        Ok(match spec.kind {
            CollectiveKind::AllReduce => implicit(steps, 2 * steps),
            CollectiveKind::ReduceScatter => implicit(steps, steps),
            // Without a reduce half the block rule shifts by one; sizes are what matter.
            CollectiveKind::AllGather => implicit(0, steps),
            CollectiveKind::AllToAll if spec.astra => implicit(0, n * steps / 2),
            CollectiveKind::AllToAll => Box::new(relay_all_to_all(spec)),
            CollectiveKind::Broadcast => {
                let mut b = DagBuilder::new("ring");
                let mut prev = None;
                for j in 1..n {
                    let (s, d) = ((spec.root + j - 1) % n, (spec.root + j) % n);
                    let t = b.add(s, d, spec.bytes, false);
                    if let Some(p) = prev {
                        b.edge(p, t);
                    }
                    prev = Some(t);
                }
                Box::new(b.build())
            }
        })
    }
}

/// Step k (1..n): p forwards to p+1 the blocks that left their source s = p-k+1 and
/// still have to travel at least k hops.
fn relay_all_to_all(spec: &CollectiveSpec) -> crate::dag::ExplicitDag {
    let n = spec.n;
    let mut b = DagBuilder::new("ring");
    let mut prev_step: Vec<Option<u32>> = vec![None; n as usize];
    for k in 1..n {
        let mut this_step = vec![None; n as usize];
        for p in 0..n {
            let s = (p + n + 1 - k) % n;
            let bytes: u64 = (0..n)
                .filter(|&d| (d + n - s) % n >= k)
                .map(|d| spec.a2a_bytes(s, d))
                .sum();
            if bytes == 0 {
                continue;
            }
            let t = b.add(p, (p + 1) % n, bytes, false);
            // What p forwards at step k arrived from p-1 at step k-1.
            if let Some(before) = prev_step[((p + n - 1) % n) as usize] {
                b.edge(before, t);
            }
            this_step[p as usize] = Some(t);
        }
        prev_step = this_step;
    }
    b.build()
}
