//! The packet engine as a `tracefabric_netapi::Network`: the system layer declares
//! every flow up front (the config's flow list, so load balancers that plan per flow
//! see them all), then starts each one when its dependencies allow.
//!
//! A transfer of 0 bytes (a collective's empty share, e.g. an all-gather of 2 B on 4
//! ranks) or to the sender itself (a send to its own rank: a local copy, which the
//! analytical backends also run in no time) sends no packet: it is not declared to the
//! engine and completes at its start.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::sim::Simulation;
use crate::units::Time;
use tracefabric_netapi::{FlowRequest, Network, Ps};

/// `engine_flow` entry of a request that puts no bytes on the network.
const EMPTY: u32 = u32::MAX;

/// Whether a request puts bytes on the network (see the module's note).
fn on_network(f: &FlowRequest) -> bool {
    f.bytes > 0 && f.src != f.dst
}

/// A simulation driven by a system layer.
pub struct DrivenPacket {
    pub sim: Simulation,
    /// Request id -> the engine's flow index, or `EMPTY`.
    engine_flow: Vec<u32>,
    /// Engine flow index -> request id.
    request_id: Vec<u64>,
    /// Started transfers that put no bytes on the network: (completion time, request id).
    empty_done: BinaryHeap<Reverse<(Ps, u64)>>,
}

impl DrivenPacket {
    /// The requests whose bytes the engine must carry, in id order: declare exactly these
    /// in the config's flow list (their position is their engine flow index).
    pub fn declared(requests: &[FlowRequest]) -> Vec<FlowRequest> {
        requests.iter().filter(|f| on_network(f)).copied().collect()
    }

    /// `requests` is every flow of the run in id order (ids 0..n); `sim` was built from
    /// `declared(requests)`.
    pub fn new(mut sim: Simulation, requests: &[FlowRequest]) -> Result<DrivenPacket, String> {
        sim.drive();
        let mut engine_flow = Vec::with_capacity(requests.len());
        let mut request_id = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            if r.id != i as u64 {
                return Err(format!(
                    "flow requests must be in id order: position {i} has id {}",
                    r.id
                ));
            }
            if !on_network(r) {
                engine_flow.push(EMPTY);
            } else {
                engine_flow.push(request_id.len() as u32);
                request_id.push(r.id);
            }
        }
        // Each start compares its request with the declared flow; here only the count.
        let n = request_id.len() as u32;
        if sim.flow_spec(n).is_some() || (n > 0 && sim.flow_spec(n - 1).is_none()) {
            return Err(format!(
                "the engine declares other flows than the {} requests it must carry",
                request_id.len()
            ));
        }
        Ok(DrivenPacket {
            sim,
            engine_flow,
            request_id,
            empty_done: BinaryHeap::new(),
        })
    }

    fn not_declared(f: &FlowRequest) -> String {
        format!(
            "flow {} ({} -> {}, {} bytes) was not declared to the packet engine",
            f.id, f.src, f.dst, f.bytes
        )
    }
}

impl Network for DrivenPacket {
    fn endpoints(&self) -> u32 {
        self.sim.topology().n_hosts
    }

    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        let engine = usize::try_from(f.id)
            .ok()
            .and_then(|i| self.engine_flow.get(i).copied());
        match engine {
            Some(EMPTY) if !on_network(&f) => {
                self.empty_done.push(Reverse((at, f.id)));
                Ok(())
            }
            Some(i) if i != EMPTY => {
                match self.sim.flow_spec(i) {
                    Some(spec)
                        if spec.src == f.src && spec.dst == f.dst && spec.bytes == f.bytes => {}
                    _ => return Err(Self::not_declared(&f)),
                }
                // The engine numbers its own flows: name the request instead.
                self.sim.start_flow(i, Time(at)).map_err(|e| {
                    e.to_string()
                        .replacen(&format!("flow {i}:"), &format!("flow {}:", f.id), 1)
                })
            }
            _ => Err(Self::not_declared(&f)),
        }
    }

    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        // An empty transfer due before `limit` bounds how far the engine may run first.
        let empty_at = self.empty_done.peek().map(|Reverse((t, _))| *t);
        let engine_limit = empty_at.map_or(limit, |t| t.min(limit));
        let engine = self
            .sim
            .next_completion(Time(engine_limit))
            .map_err(|e| e.to_string())?;
        if let Some((t, i)) = engine {
            return Ok(Some((t.0, self.request_id[i as usize])));
        }
        match empty_at {
            Some(t) if t < limit => Ok(self.empty_done.pop().map(|Reverse(done)| done)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimConfig;

    fn request(id: u64, src: u32, dst: u32, bytes: u64) -> FlowRequest {
        FlowRequest {
            id,
            src,
            dst,
            bytes,
        }
    }

    #[test]
    fn empty_transfers_end_at_their_start_between_the_engine_completions() {
        // Requests 0 and 2 cross the network (engine flows 0 and 1); 1 is empty and 3 is
        // rank 3's send to itself.
        let requests = [
            request(0, 0, 5, 8192),
            request(1, 1, 6, 0),
            request(2, 2, 7, 4096),
            request(3, 3, 3, 1 << 20),
        ];
        let declared = DrivenPacket::declared(&requests);
        assert_eq!(declared.iter().map(|f| f.id).collect::<Vec<_>>(), [0, 2]);
        let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
            "traffic": {"kind": "flows", "src": [0, 2], "dst": [5, 7], "bytes": [8192, 4096],
                        "start_ps": [0, 0]}}"#;
        let sim = || Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
        // The same two flows, undriven, for the times to expect.
        let alone = sim().run(&mut |_, _| true).unwrap();
        let (fct0, fct2) = (alone.flows[0].finish_ps, alone.flows[1].finish_ps);
        assert!(fct2 < fct0);
        let mut net = DrivenPacket::new(sim(), &requests).unwrap();
        net.start_flow(requests[0], 0).unwrap();
        net.start_flow(requests[2], 0).unwrap();
        net.start_flow(requests[1], 0).unwrap();
        net.start_flow(requests[3], fct2 + 7).unwrap();
        let mut got = Vec::new();
        while let Some(done) = net.next_completion(u64::MAX).unwrap() {
            got.push(done);
        }
        assert_eq!(got, [(0, 1), (fct2, 2), (fct2 + 7, 3), (fct0, 0)]);
        // An engine limit before an empty transfer's time leaves it pending.
        let mut net = DrivenPacket::new(sim(), &requests).unwrap();
        net.start_flow(requests[1], 50).unwrap();
        assert_eq!(net.next_completion(50).unwrap(), None);
        assert_eq!(net.next_completion(51).unwrap(), Some((50, 1)));
    }

    #[test]
    fn requests_must_match_what_the_engine_declared() {
        let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
            "traffic": {"kind": "flows", "src": [0], "dst": [5], "bytes": [8192], "start_ps": [0]}}"#;
        let sim = || Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
        let two = [request(0, 0, 5, 8192), request(1, 1, 5, 10)];
        let e = DrivenPacket::new(sim(), &two).err().unwrap();
        assert!(
            e.contains("other flows than the 2 requests it must carry"),
            "{e}"
        );
        let mut net =
            DrivenPacket::new(sim(), &[request(0, 0, 5, 8192), request(1, 1, 5, 0)]).unwrap();
        for bad in [
            request(1, 1, 5, 3),
            request(0, 0, 6, 8192),
            request(9, 0, 5, 0),
        ] {
            let e = net.start_flow(bad, 0).unwrap_err();
            assert!(e.contains("was not declared to the packet engine"), "{e}");
        }
    }
}
