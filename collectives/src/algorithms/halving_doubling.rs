//! Halving-doubling (Rabenseifner, power-of-two groups): reduce-scatter by recursive
//! halving (partner at distance n/2, n/4, ..., 1, sending S/2, S/4, ..., S/n), then
//! all-gather by recursive doubling (distance 1, 2, ..., n/2, sending S/n, ..., S/2).
//! 2 log2 n steps of n transfers for all-reduce; each half alone for RS / AG. In
//! ASTRA-sim mode the distances run the other way (RS from 1 up, AG from n/2 down), as
//! its HalvingDoubling.cc: the same bytes, the largest sent to the nearest partner.

use super::recursive_doubling::pairwise_steps;
use super::{log2_exact, Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::{Dag, DagBuilder};

pub struct HalvingDoubling;

impl Algorithm for HalvingDoubling {
    fn name(&self) -> &'static str {
        "halving_doubling"
    }
    fn build(&self, spec: &CollectiveSpec) -> Result<Box<dyn Dag>, String> {
        let n = spec.n;
        let steps = log2_exact(n, self.name())?;
        let mut halving: Vec<u32> = (0..steps).map(|k| n >> (k + 1)).collect();
        let mut doubling: Vec<u32> = (0..steps).map(|k| 1 << k).collect();
        if spec.astra {
            // ASTRA-sim's HalvingDoubling.cc pairs the largest message with the nearest
            // partner: reduce-scatter from distance 1, all-gather from n/2 (same sizes).
            std::mem::swap(&mut halving, &mut doubling);
        }
        let (distances, reduce_steps) = match spec.kind {
            CollectiveKind::AllReduce => ([halving, doubling].concat(), steps),
            CollectiveKind::ReduceScatter => (halving, steps),
            CollectiveKind::AllGather => (doubling, 0),
            _ => {
                return Err(spec.unsupported(
                    self.name(),
                    "use `direct` or `ring` (all-to-all) or `recursive_doubling` (broadcast)",
                ))
            }
        };
        let mut b = DagBuilder::new("halving_doubling");
        pairwise_steps(&mut b, n, &distances, |k| {
            if k < reduce_steps {
                (spec.span((n >> (k + 1)) as u64), true)
            } else {
                (spec.span(1 << (k - reduce_steps)), false)
            }
        });
        Ok(Box::new(b.build()))
    }
}
