//! Recursive doubling (power-of-two groups): at step k position p exchanges with
//! p xor 2^k. All-reduce sends the whole buffer every step (log2 n steps of S);
//! all-gather doubles what it holds (S/n * 2^k at step k); reduce-scatter halves
//! it (S/2^(k+1)); broadcast is the binomial tree from the root. Step k of p waits
//! for everything p received in steps 0..k.

use super::{log2_exact, Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::{Dag, DagBuilder};

pub struct RecursiveDoubling;

impl Algorithm for RecursiveDoubling {
    fn name(&self) -> &'static str {
        "recursive_doubling"
    }
    fn build(&self, spec: &CollectiveSpec) -> Result<Box<dyn Dag>, String> {
        let n = spec.n;
        let steps = log2_exact(n, self.name())?;
        let mut b = DagBuilder::new("recursive_doubling");
        match spec.kind {
            CollectiveKind::AllReduce
            | CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter => {
                let distances: Vec<u32> = (0..steps).map(|k| 1 << k).collect();
                let bytes = |k: u32| match spec.kind {
                    CollectiveKind::AllReduce => spec.bytes,
                    CollectiveKind::AllGather => spec.span(1 << k),
                    _ => spec.span((n >> (k + 1)) as u64),
                };
                pairwise_steps(&mut b, n, &distances, |k| {
                    (bytes(k), spec.kind != CollectiveKind::AllGather)
                });
            }
            CollectiveKind::Broadcast => {
                // Relative rank v = p - root; at step k every v < 2^k sends to v + 2^k.
                let mut got: Vec<Option<u32>> = vec![None; n as usize];
                for k in 0..steps {
                    for v in 0..(1u32 << k) {
                        let (s, d) = ((v + spec.root) % n, (v + (1 << k) + spec.root) % n);
                        let t = b.add(s, d, spec.bytes, false);
                        if let Some(before) = got[s as usize] {
                            b.edge(before, t);
                        }
                        got[d as usize] = Some(t);
                    }
                }
            }
            CollectiveKind::AllToAll => {
                return Err(spec.unsupported(self.name(), "use `direct` or `ring` for all-to-all"))
            }
        }
        Ok(Box::new(b.build()))
    }
}

/// One exchange step per entry of `distances`: p sends to p xor d; each transfer of
/// step k waits for every transfer that arrived at its sender in steps 0..k (what it
/// sends holds all of them: waiting for step k-1's alone would let a late step-0
/// arrival be sent on before it came).
pub(super) fn pairwise_steps(
    b: &mut DagBuilder,
    n: u32,
    distances: &[u32],
    step: impl Fn(u32) -> (u64, bool),
) {
    let mut arrived: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
    for (k, &d) in distances.iter().enumerate() {
        let (bytes, reduce) = step(k as u32);
        let mut now = Vec::with_capacity(n as usize);
        for p in 0..n {
            let t = b.add(p, p ^ d, bytes, reduce);
            for &before in &arrived[p as usize] {
                b.edge(before, t);
            }
            now.push((p ^ d, t));
        }
        for (dst, t) in now {
            arrived[dst as usize].push(t);
        }
    }
}
