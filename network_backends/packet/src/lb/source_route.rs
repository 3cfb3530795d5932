//! Source routing by path id, for the host schemes that pick whole paths (`host_dr`,
//! `ethereal`). A path id is a mixed-radix number: its first digit picks the uplink
//! at the edge (leaf) switch, its second the uplink at the aggregation switch. The
//! way down from the top of the path is unique in a fat tree; on parallel leaf-spine
//! links the spine takes the same link index the leaf took. Ports are numbered in
//! the same order in every switch of a tier, so an ACK carrying its data packet's
//! path id climbs the mirror image of that path and returns through the same core.
//!
//! A digit names a physical link of the intact fabric: when failures shrink a group,
//! the other ids keep their links (only an id whose link is gone is folded onto the
//! group left), so a path marked bad stays the same path.

use super::SwitchView;
use crate::topology::{PortId, Topology};
use std::collections::HashMap;

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
    /// Per switch: its uplinks in the intact fabric, in group order (empty at the top).
    intact_up: Vec<Vec<PortId>>,
    /// Parallel links down to one switch (leaf-spine `links_per_pair`), intact, in group
    /// order, and the set each such port belongs to.
    intact_parallel: Vec<Vec<PortId>>,
    parallel_of: HashMap<PortId, u32>,
}

impl SourceRoutes {
    /// From the intact fabric (before any failure).
    pub fn new(topo: &Topology) -> SourceRoutes {
        let mut up_radix = [1u32; 4];
        let mut intact_up = vec![Vec::new(); topo.tier.len()];
        let (mut intact_parallel, mut parallel_of) = (Vec::new(), HashMap::new());
        for g in &topo.groups {
            let owner = topo.ports[g[0] as usize].owner;
            if Self::leads_up(topo, g) {
                let t = topo.tier[owner as usize] as usize;
                up_radix[t] = up_radix[t].max(g.len() as u32);
                if g.len() > intact_up[owner as usize].len() {
                    intact_up[owner as usize] = g.clone();
                }
            } else if g.len() > 1 && !parallel_of.contains_key(&g[0]) {
                for &p in g {
                    parallel_of.insert(p, intact_parallel.len() as u32);
                }
                intact_parallel.push(g.clone());
            }
        }
        let mut stride = [1u32; 4];
        for t in 2..4 {
            stride[t] = stride[t - 1] * up_radix[t - 1];
        }
        let mut routes = SourceRoutes {
            tier: topo.tier.clone(),
            pod: topo.pod.clone(),
            host_edge: topo.host_edge.clone(),
            group_up: Vec::new(),
            group_len: Vec::new(),
            up_radix,
            stride,
            three_tier: topo.tier.iter().any(|&t| t == 3),
            intact_up,
            intact_parallel,
            parallel_of,
        };
        routes.routes_changed(topo);
        routes
    }

    /// The groups changed (failures, repairs): path ids keep their meaning.
    pub fn routes_changed(&mut self, topo: &Topology) {
        self.group_up = topo
            .groups
            .iter()
            .map(|g| Self::leads_up(topo, g))
            .collect();
        self.group_len = topo.groups.iter().map(|g| g.len() as u32).collect();
    }

    fn leads_up(topo: &Topology, g: &[PortId]) -> bool {
        let owner = topo.ports[g[0] as usize].owner as usize;
        g.iter()
            .all(|&p| topo.tier[topo.ports[p as usize].peer as usize] > topo.tier[owner])
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
        let group = &view.candidates[..c as usize];
        let (digit, intact) = if self.group_up[view.group as usize] {
            let digit = path / self.stride[self.tier[view.node as usize] as usize];
            (digit, &self.intact_up[view.node as usize][..])
        } else if c > 1 {
            let links =
                (self.parallel_of.get(&group[0])).map(|&i| &self.intact_parallel[i as usize][..]);
            (path, links.unwrap_or(group))
        } else {
            return group[0];
        };
        if intact.len() == group.len() {
            return group[(digit % c) as usize]; // the intact group itself
        }
        // A shrunken group: the id's own link if it is still here, else one that is.
        let own = intact[(digit % intact.len() as u32) as usize];
        if group.contains(&own) {
            own
        } else {
            group[(digit % c) as usize]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::units::{Dur, Rate, Time};

    #[test]
    fn a_shrunken_group_keeps_every_other_path_id_on_its_own_link() {
        // k = 8: the first edge switch's up group holds its 4 aggregations, and path ids
        // 0-3 name them. Its link to the second goes: ids 0, 2, 3 keep their links (taken
        // modulo the 3 left, 2 and 3 moved to the third and first aggregations), and the
        // dead id 1 folds onto a link left.
        let topo = Topology::build(
            &TopologyConfig::fat_tree(8),
            Rate::from_gbps(100.0),
            Dur(500_000),
        )
        .unwrap();
        let mut routes = SourceRoutes::new(&topo);
        let edge = topo.tier.iter().position(|&t| t == 1).unwrap() as u32;
        let g = (topo.groups.iter().position(|g| {
            topo.ports[g[0] as usize].owner == edge && SourceRoutes::leads_up(&topo, g)
        }))
        .unwrap();
        let up = topo.groups[g].clone();
        assert_eq!(up.len(), 4);
        let backlog = |_: PortId| 0u64;
        let ports = |routes: &SourceRoutes, candidates: &[PortId]| -> Vec<PortId> {
            let v = SwitchView {
                now: Time::ZERO,
                node: edge,
                group: g as u32,
                candidates,
                backlog: &backlog,
                buffer_bytes: 0,
                salt: 0,
            };
            (0..4).map(|id| routes.port(&v, id)).collect()
        };
        assert_eq!(ports(&routes, &up), up);
        let left = vec![up[0], up[2], up[3]];
        let mut shrunk = topo.clone();
        shrunk.groups[g] = left.clone();
        routes.routes_changed(&shrunk);
        assert_eq!(ports(&routes, &left), vec![up[0], up[2], up[2], up[3]]);
    }
}
