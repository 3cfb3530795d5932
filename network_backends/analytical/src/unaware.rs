//! ASTRA-sim 2.x's congestion-unaware analytical backend: a message between two NPUs
//! takes hops x latency + bytes / bandwidth of the lowest dimension in which they
//! differ, truncated to whole ns, independent of all other traffic.

use crate::topology::AstraTopology;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tracefabric_netapi::{FlowRequest, Network, Ps, PS_PER_NS};

pub struct Unaware {
    topo: AstraTopology,
    done: BinaryHeap<Reverse<(Ps, u64, u64)>>,
    seq: u64,
    flows: u64,
}

impl Unaware {
    pub fn new(topo: AstraTopology) -> Unaware {
        Unaware {
            topo,
            done: BinaryHeap::new(),
            seq: 0,
            flows: 0,
        }
    }

    pub fn delay_ns(&self, src: u32, dst: u32, bytes: u64) -> u64 {
        let Some(d) = self.topo.first_differing_dim(src, dst) else {
            return 0;
        };
        let spec = &self.topo.dims[d];
        let hops = self.topo.hops_in_dim(d, src, dst) as f64;
        (hops * spec.latency_ns + bytes as f64 / spec.bytes_per_ns()) as u64
    }
}

impl Network for Unaware {
    fn endpoints(&self) -> u32 {
        self.topo.npus
    }
    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        check_endpoints(&f, self.topo.npus)?;
        self.seq += 1;
        self.flows += 1;
        self.done.push(Reverse((
            at + self.delay_ns(f.src, f.dst, f.bytes) * PS_PER_NS,
            self.seq,
            f.id,
        )));
        Ok(())
    }
    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        match self.done.peek() {
            Some(&Reverse((t, _, id))) if t < limit => {
                self.done.pop();
                Ok(Some((t, id)))
            }
            _ => Ok(None),
        }
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![("flows".into(), self.flows)]
    }
}

pub(crate) fn check_endpoints(f: &FlowRequest, npus: u32) -> Result<(), String> {
    if f.src >= npus || f.dst >= npus {
        return Err(format!(
            "flow {} from NPU {} to NPU {}: the network has {npus} NPUs",
            f.id, f.src, f.dst
        ));
    }
    Ok(())
}
