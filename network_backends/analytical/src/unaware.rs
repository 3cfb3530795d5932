//! ASTRA-sim 2.x's congestion-unaware analytical backend: a message between two NPUs
//! takes hops x latency + bytes / bandwidth of the lowest dimension in which they
//! differ, truncated to whole ns, independent of all other traffic.

use crate::topology::AstraTopology;
use std::collections::{BTreeMap, VecDeque};
use tracefabric_netapi::{FlowRequest, Network, Ps, PS_PER_NS};

pub struct Unaware {
    topo: AstraTopology,
    /// Completions by time, in start order within a time: collectives complete in
    /// waves (every flow of a ring step at once), so this beats a heap of flows.
    done: BTreeMap<Ps, VecDeque<u64>>,
    flows: u64,
    bytes_per_ns: Vec<f64>,
    single_switch: bool,
}

impl Unaware {
    pub fn new(topo: AstraTopology) -> Unaware {
        let bytes_per_ns = topo.dims.iter().map(|d| d.bytes_per_ns()).collect();
        let single_switch =
            topo.dims.len() == 1 && topo.dims[0].kind == crate::topology::DimKind::Switch;
        Unaware {
            topo,
            done: BTreeMap::new(),
            flows: 0,
            bytes_per_ns,
            single_switch,
        }
    }

    pub fn delay_ns(&self, src: u32, dst: u32, bytes: u64) -> u64 {
        if src != dst && self.single_switch {
            // The common one-switch network, without address arithmetic.
            return (2.0 * self.topo.dims[0].latency_ns + bytes as f64 / self.bytes_per_ns[0])
                as u64;
        }
        let Some(d) = self.topo.first_differing_dim(src, dst) else {
            return 0;
        };
        let hops = self.topo.hops_in_dim(d, src, dst) as f64;
        (hops * self.topo.dims[d].latency_ns + bytes as f64 / self.bytes_per_ns[d]) as u64
    }
}

impl Network for Unaware {
    fn endpoints(&self) -> u32 {
        self.topo.npus
    }
    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        check_endpoints(&f, self.topo.npus)?;
        self.topo.check_fits_clock(f.bytes, at)?;
        self.flows += 1;
        let t = at + self.delay_ns(f.src, f.dst, f.bytes) * PS_PER_NS;
        self.done.entry(t).or_default().push_back(f.id);
        Ok(())
    }
    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        let Some(mut first) = self.done.first_entry() else {
            return Ok(None);
        };
        let t = *first.key();
        if t >= limit {
            return Ok(None);
        }
        let id = first
            .get_mut()
            .pop_front()
            .expect("no empty time slots are kept");
        if first.get().is_empty() {
            first.remove();
        }
        Ok(Some((t, id)))
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
