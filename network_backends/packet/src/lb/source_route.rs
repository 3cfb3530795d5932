//! Source routing by path id, for the host schemes that pick whole paths (`host_dr`,
//! `ethereal`). A path id is a mixed-radix number: its first digit picks the uplink
//! at the edge (leaf) switch, its second the uplink at the aggregation switch. The
//! way down from the top of the path is unique in a fat tree; on parallel leaf-spine
//! links the spine takes the same link index the leaf took. Ports are numbered in
//! the same order in every switch of a tier, so an ACK carrying its data packet's
//! path id climbs the mirror image of that path and returns through the same core.

use super::SwitchView;
use crate::topology::{PortId, Topology};

pub struct SourceRoutes {
    tier: Vec<u8>,
    pod: Vec<u32>,
    host_edge: Vec<u32>,
    /// Per next-hop group: do its ports lead up a tier?
    group_up: Vec<bool>,
    /// Per next-hop group: its ports, once each (the first entries of its schedule).
    group_len: Vec<u32>,
    /// Per tier: number of uplink choices (1 where there are none).
    up_radix: [u32; 4],
    /// Per tier: the place value of that tier's digit in a path id.
    stride: [u32; 4],
    three_tier: bool,
}

impl SourceRoutes {
    pub fn new(topo: &Topology) -> SourceRoutes {
        let mut up_radix = [1u32; 4];
        let group_up: Vec<bool> = topo
            .groups
            .iter()
            .map(|g| {
                let owner = topo.ports[g[0] as usize].owner as usize;
                let up = g
                    .iter()
                    .all(|&p| topo.tier[topo.ports[p as usize].peer as usize] > topo.tier[owner]);
                if up {
                    let t = topo.tier[owner] as usize;
                    up_radix[t] = up_radix[t].max(g.len() as u32);
                }
                up
            })
            .collect();
        let group_len = topo.groups.iter().map(|g| g.len() as u32).collect();
        let mut stride = [1u32; 4];
        for t in 2..4 {
            stride[t] = stride[t - 1] * up_radix[t - 1];
        }
        SourceRoutes {
            tier: topo.tier.clone(),
            pod: topo.pod.clone(),
            host_edge: topo.host_edge.clone(),
            group_up,
            group_len,
            up_radix,
            stride,
            three_tier: topo.tier.iter().any(|&t| t == 3),
        }
    }

    /// Number of distinct paths between two hosts: 1 under one edge switch, the
    /// aggregation switches of a pod within it, every core (or every leaf uplink) otherwise.
    pub fn paths_between(&self, src: u32, dst: u32) -> u32 {
        let (se, de) = (self.host_edge[src as usize], self.host_edge[dst as usize]);
        if se == de {
            1
        } else if self.three_tier && self.pod[se as usize] == self.pod[de as usize] {
            self.up_radix[1]
        } else {
            self.up_radix[1] * self.up_radix[2]
        }
    }

    pub fn dst_edge(&self, host: u32) -> u32 {
        self.host_edge[host as usize]
    }

    /// The port a switch takes for a packet source-routed on `path`.
    #[inline]
    pub fn port(&self, view: &SwitchView, path: u32) -> PortId {
        // A path names a next hop, not a weighted turn: the schedule's first round.
        let c = self.group_len[view.group as usize];
        let digit = if self.group_up[view.group as usize] {
            path / self.stride[self.tier[view.node as usize] as usize]
        } else {
            path
        };
        view.candidates[(digit % c) as usize]
    }
}
