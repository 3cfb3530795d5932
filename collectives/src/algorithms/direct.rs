//! Direct: every position talks to every other in one step. All-reduce = direct
//! reduce-scatter (p sends block q to q) then direct all-gather (q sends its reduced
//! block to everyone once all n-1 pieces of it arrived). All-to-all(-v) sends each
//! peer its block (per-peer sizes when the trace gives them); zero-byte blocks are skipped.

use super::{Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::{Dag, DagBuilder};

pub struct Direct;

impl Algorithm for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }
    fn build(&self, spec: &CollectiveSpec) -> Result<Box<dyn Dag>, String> {
        let n = spec.n;
        let nb = n as u64;
        let mut b = DagBuilder::new("direct");
        // Peers staggered (p+1, p+2, ... mod n), as collective libraries schedule them:
        // each round of the senders' round-robin is then a permutation, not an incast.
        let peers = |p: u32| (1..n).map(move |i| (p + i) % n);
        match spec.kind {
            CollectiveKind::AllReduce | CollectiveKind::ReduceScatter => {
                let mut into: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
                for p in 0..n {
                    for q in peers(p) {
                        into[q as usize].push(b.add(p, q, spec.block(nb, q as u64), true));
                    }
                }
                if spec.kind == CollectiveKind::AllReduce {
                    for q in 0..n {
                        for r in peers(q) {
                            let t = b.add(q, r, spec.block(nb, q as u64), false);
                            for &before in &into[q as usize] {
                                b.edge(before, t);
                            }
                        }
                    }
                }
            }
            CollectiveKind::AllGather => {
                for p in 0..n {
                    for q in peers(p) {
                        b.add(p, q, spec.block(nb, p as u64), false);
                    }
                }
            }
            CollectiveKind::AllToAll => {
                for p in 0..n {
                    for q in peers(p) {
                        let bytes = spec.a2a_bytes(p, q);
                        if bytes > 0 {
                            b.add(p, q, bytes, false);
                        }
                    }
                }
            }
            CollectiveKind::Broadcast => {
                for q in peers(spec.root) {
                    b.add(spec.root, q, spec.bytes, false);
                }
            }
        }
        Ok(Box::new(b.build()))
    }
}
