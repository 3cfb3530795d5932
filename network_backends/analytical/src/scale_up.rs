//! GPUs inside servers. A flow between two GPUs of one server crosses the server's scale-up
//! domain, modelled at flow level as a non-blocking NVSwitch-like switch: each GPU has one
//! port of the scale-up bandwidth each way, and flows share ports max-min fairly. Every
//! other flow crosses the scale-out fabric `N` (packet or flow level) between the two GPUs'
//! NICs. A lossless, credit-based scale-up domain has no LB or CC choice to study, so its
//! packets are not simulated: only how the GPUs' ports are shared matters.
//!
//! The two networks run on one clock: the fabric runs only up to the scale-up domain's next
//! event, so neither is ever asked to start a flow in its past. On a tie the scale-up
//! domain's completion comes first.

use crate::flow::FlowModel;
use crate::topology::{AstraTopology, DimKind, DimSpec};
use tracefabric_fabric::servers::ServerLayout;
use tracefabric_netapi::{FlowRequest, Network, Ps};

/// The scale-up domain of every server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaleUpSpec {
    /// Per GPU and direction, Gbit/s (H100 NVLink 4: 18 links x 25 GB/s = 3600 Gbit/s).
    pub bandwidth_gbps: f64,
    /// GPU to GPU through the switch, ns.
    pub latency_ns: f64,
}

pub struct Servers<N: Network> {
    layout: ServerLayout,
    /// Absent with one GPU per server.
    up: Option<FlowModel>,
    out: N,
    up_bytes: u64,
    out_bytes: u64,
}

impl<N: Network> Servers<N> {
    /// `out` connects the fabric's hosts (the GPUs' NICs, `layout.host_of_slot`).
    pub fn new(layout: ServerLayout, spec: ScaleUpSpec, out: N) -> Result<Servers<N>, String> {
        let g = layout.gpus_per_server;
        let up = if g > 1 {
            // ASTRA-sim's GB/s is 2^30 bytes per second; a flow crosses two links of the switch.
            let gbs = spec.bandwidth_gbps / 8.0 * 1e9 / (1u64 << 30) as f64;
            let switch = |npus| DimSpec {
                kind: DimKind::Switch,
                npus,
                bandwidth_gbps: gbs,
                latency_ns: spec.latency_ns / 2.0,
            };
            let mut dims = vec![switch(g)];
            if layout.servers() > 1 {
                dims.push(switch(layout.servers())); // never crossed: flows stay in a server
            }
            let topo = AstraTopology::new(dims).map_err(|e| format!("servers.scale_up: {e}"))?;
            Some(FlowModel::on_astra(topo))
        } else {
            None
        };
        Ok(Servers {
            layout,
            up,
            out,
            up_bytes: 0,
            out_bytes: 0,
        })
    }

    pub fn fabric(&self) -> &N {
        &self.out
    }

    pub fn into_fabric(self) -> N {
        self.out
    }

    /// Whether a flow between two ranks stays inside a server.
    pub fn inside(&self, src: u32, dst: u32) -> bool {
        self.up.is_some() && self.layout.server(src) == self.layout.server(dst)
    }
}

/// The request as the fabric sees it: between the ranks' NICs (`layout`), or declared empty
/// when the scale-up domain carries it (the fabric then never sees it started).
pub fn fabric_request(layout: &ServerLayout, f: &FlowRequest) -> FlowRequest {
    let (src, dst) = (layout.host(f.src), layout.host(f.dst));
    if layout.gpus_per_server > 1 && layout.server(f.src) == layout.server(f.dst) {
        return FlowRequest {
            bytes: 0,
            src,
            dst: src,
            ..*f
        };
    }
    FlowRequest { src, dst, ..*f }
}

impl<N: Network> Network for Servers<N> {
    fn endpoints(&self) -> u32 {
        self.layout.slot_of_rank.len() as u32
    }

    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        crate::unaware::check_endpoints(&f, self.endpoints())?;
        if self.inside(f.src, f.dst) {
            if f.src != f.dst {
                self.up_bytes += f.bytes; // a send to itself is a local copy
            }
            let slot = |r: u32| self.layout.slot_of_rank[r as usize];
            let req = FlowRequest {
                src: slot(f.src),
                dst: slot(f.dst),
                ..f
            };
            return self.up.as_mut().expect("inside").start_flow(req, at);
        }
        if f.src != f.dst {
            self.out_bytes += f.bytes;
        }
        self.out.start_flow(fabric_request(&self.layout, &f), at)
    }

    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        let Some(up) = self.up.as_mut() else {
            return self.out.next_completion(limit);
        };
        loop {
            let t_up = up.next_event_time();
            if let Some(done) = self.out.next_completion(t_up.min(limit))? {
                return Ok(Some(done));
            }
            if t_up >= limit {
                return Ok(None);
            }
            // Only the scale-up domain's events at t_up: the fabric has run up to them.
            if let Some(done) = up.next_completion(t_up + 1)? {
                return Ok(Some(done));
            }
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut c = self.out.counters();
        c.push(("scale_up_bytes".into(), self.up_bytes));
        c.push(("scale_out_bytes".into(), self.out_bytes));
        if let Some(up) = &self.up {
            c.extend(
                up.counters()
                    .into_iter()
                    .map(|(k, v)| (format!("scale_up.{k}"), v)),
            );
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracefabric_fabric::servers::NicLayout;
    use tracefabric_fabric::{Fabric, FabricConfig};

    /// k = 4: 16 hosts, 4 servers of 4 GPUs; 100 Gbit/s links.
    fn built() -> Fabric {
        let cfg: FabricConfig = serde_json::from_str(
            r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100, "latency_ns": 500}}"#,
        )
        .unwrap();
        Fabric::build(cfg).unwrap()
    }

    fn fabric() -> FlowModel {
        FlowModel::on_packet_fabric(built())
    }

    const UP: ScaleUpSpec = ScaleUpSpec {
        bandwidth_gbps: 800.0,
        latency_ns: 300.0,
    };

    fn servers(placement: Vec<u32>) -> Servers<FlowModel> {
        let f = built();
        let layout = ServerLayout::new(placement, 4, NicLayout::Packed, &f.topology).unwrap();
        Servers::new(layout, UP, FlowModel::on_packet_fabric(f)).unwrap()
    }

    fn req(id: u64, src: u32, dst: u32, bytes: u64) -> FlowRequest {
        FlowRequest {
            id,
            src,
            dst,
            bytes,
        }
    }

    /// bytes at `gbps` plus latency, in ps.
    fn alone(bytes: u64, gbps: f64, latency_ns: f64) -> f64 {
        bytes as f64 * 8.0 / gbps * 1e3 + latency_ns * 1e3
    }

    #[test]
    fn a_flow_inside_a_server_takes_bytes_over_the_scale_up_bandwidth_plus_its_latency() {
        let mut net = servers((0..16).collect());
        net.start_flow(req(0, 0, 3, 1 << 20), 1_000).unwrap();
        let (t, id) = net.next_completion(Ps::MAX).unwrap().unwrap();
        assert_eq!(id, 0);
        let want = 1_000.0 + alone(1 << 20, 800.0, 300.0);
        assert!((t as f64 - want).abs() <= 2.0, "{t} vs {want}");
        // Two flows into one GPU share its port: each at half the bandwidth.
        net.start_flow(req(1, 1, 2, 1 << 20), t).unwrap();
        net.start_flow(req(2, 3, 2, 1 << 20), t).unwrap();
        let (t1, _) = net.next_completion(Ps::MAX).unwrap().unwrap();
        let want = t as f64 + alone(1 << 20, 400.0, 300.0);
        assert!((t1 as f64 - want).abs() <= 2.0, "{t1} vs {want}");
        // A send to itself is a local copy: done at once, carried by no network.
        net.start_flow(req(3, 2, 2, 1 << 20), t1).unwrap();
        assert_eq!(net.next_completion(Ps::MAX).unwrap().unwrap().1, 2);
        assert_eq!(net.next_completion(Ps::MAX).unwrap(), Some((t1, 3)));
        let c: std::collections::HashMap<_, _> = net.counters().into_iter().collect();
        assert_eq!((c["scale_up_bytes"], c["scale_out_bytes"]), (3 << 20, 0));
    }

    #[test]
    fn flows_across_servers_run_on_the_fabric_between_the_placed_gpus_nics() {
        // Rank r on slot 15 - r: ranks 0 and 4 sit on hosts 15 and 11 (servers 3 and 2).
        let mut net = servers((0..16).rev().collect());
        let mut fab = fabric();
        net.start_flow(req(7, 0, 4, 300_000), 0).unwrap();
        fab.start_flow(req(7, 15, 11, 300_000), 0).unwrap();
        // A scale-up flow finishing first, then one started at its completion, interleave
        // with the fabric flow without moving it.
        net.start_flow(req(8, 1, 2, 10_000), 0).unwrap();
        let (t8, id8) = net.next_completion(Ps::MAX).unwrap().unwrap();
        assert_eq!(id8, 8);
        net.start_flow(req(9, 2, 3, 10_000), t8).unwrap();
        let (t9, id9) = net.next_completion(Ps::MAX).unwrap().unwrap();
        assert_eq!((id9, t9), (9, 2 * t8));
        let (t7, id7) = net.next_completion(Ps::MAX).unwrap().unwrap();
        assert_eq!((t7, id7), fab.next_completion(Ps::MAX).unwrap().unwrap());
        assert_eq!(net.next_completion(Ps::MAX).unwrap(), None);
        // Nothing completes before a limit that is due first.
        net.start_flow(req(10, 0, 1, 1000), t7).unwrap();
        assert_eq!(net.next_completion(t7 + 10).unwrap(), None);
        assert!(net.next_completion(Ps::MAX).unwrap().is_some());
    }
}
