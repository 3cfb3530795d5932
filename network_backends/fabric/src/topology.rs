//! Topologies as flat arrays: nodes, one-directional ports (an output queue plus
//! the link behind it), and shortest-path next-hop groups computed by BFS, so
//! routing works unchanged for any tree (and, later, after link failures).

use crate::config::TopologyConfig;
use crate::error::{config_err, FabricResult};
pub use crate::routes::LinkState;
use crate::units::{Dur, Rate};

pub type NodeId = u32;
pub type PortId = u32;
/// A set of equal-cost next-hop ports at one switch, shared by all destinations that use it.
pub type GroupId = u32;

#[derive(Clone, Debug)]
pub struct PortSpec {
    pub owner: NodeId,
    pub peer: NodeId,
    pub rate: Rate,
    pub latency: Dur,
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub n_hosts: u32,
    /// Tier of every node: 0 host, 1 edge/leaf, 2 aggregation/spine, 3 core.
    pub tier: Vec<u8>,
    /// Short names of the tiers, used to label stages ("E->A").
    pub tier_names: Vec<&'static str>,
    /// Pod of every node (fat tree); leaf-spine puts every node in pod 0.
    pub pod: Vec<u32>,
    pub ports: Vec<PortSpec>,
    /// Output ports of each node (CSR).
    pub node_ports: Vec<Vec<PortId>>,
    /// The single NIC port of each host, and the edge-switch port facing it.
    pub host_port: Vec<PortId>,
    pub host_down_port: Vec<PortId>,
    pub host_edge: Vec<NodeId>,
    /// Dense index of each edge switch (u32::MAX for other nodes).
    pub edge_index: Vec<u32>,
    pub n_edges: u32,
    /// route[((node - n_hosts) * n_edges) + edge] = group of next hops at switch `node`
    /// towards that edge switch (hosts come first among nodes and have no row).
    pub(crate) route: Vec<GroupId>,
    /// Each group's next hops, once each, in port order.
    pub groups: Vec<Vec<PortId>>,
    /// Each next hop's W-ECMP weight (its shortest paths onward, divided by the gcd).
    pub weights: Vec<Vec<u32>>,
    /// Weight every next hop alike (routing by reachability alone, no W-ECMP).
    pub equal_weights: bool,
    /// The groups' IWRR schedules, flat (group g's is group_ports[group_start[g]..group_start[g + 1]]),
    /// so a lookup on the forwarding path reads one small hot array.
    pub(crate) group_start: Vec<u32>,
    pub(crate) group_ports: Vec<PortId>,
    /// Hops of the longest shortest host-to-host path (6 for a 3-tier fat tree).
    pub diameter_hops: u32,
    /// State of each port's link (both directions of a link share it).
    pub(crate) link_state: Vec<LinkState>,
}

pub const NO_GROUP: GroupId = u32::MAX;

/// Most hosts a topology may have: packets address hosts with 24 bits.
pub const MAX_HOSTS: u32 = 1 << 24;
/// Most links, and routing-table entries (switches x edge switches, 4 B each), a topology
/// may have: 20x and 6x the largest fat tree's (k = 64), so a mistyped size is refused
/// before it fills memory.
pub const MAX_LINKS: u64 = 1 << 22;
pub const MAX_ROUTE_ENTRIES: u64 = 1 << 26;
/// Ports of one next-hop group (a leaf's uplinks): LB pointers index them with 16 bits.
pub const MAX_GROUP_PORTS: u64 = u16::MAX as u64;

impl Topology {
    pub fn build(cfg: &TopologyConfig, rate: Rate, latency: Dur) -> FabricResult<Topology> {
        let mut b = Builder::default();
        match *cfg {
            TopologyConfig::FatTree {
                k,
                oversubscription,
            } => {
                if k < 2 || k % 2 != 0 {
                    return Err(config_err(
                        "topology.k",
                        format!("a k-ary fat tree needs an even k >= 2, got {k}"),
                    ));
                }
                if k > 64 {
                    return Err(config_err(
                        "topology.k",
                        format!("k = {k} exceeds the supported maximum of 64"),
                    ));
                }
                let h = k / 2;
                if oversubscription < 1 || h % oversubscription != 0 {
                    return Err(config_err(
                        "topology.oversubscription",
                        format!(
                            "= {oversubscription}: expected a divisor of k/2 = {h} (each aggregation \
                             switch keeps k/2 / oversubscription uplinks)"
                        ),
                    ));
                }
                // Uplinks per aggregation switch; core group a has u cores.
                let u = h / oversubscription;
                let n_hosts = k * k * k / 4;
                b.tier_names = vec!["host", "E", "A", "C"];
                for host in 0..n_hosts {
                    b.add_node(0, host / (h * h));
                }
                let edge0 = b.tier.len() as u32;
                for e in 0..k * h {
                    b.add_node(1, e / h);
                }
                let agg0 = b.tier.len() as u32;
                for a in 0..k * h {
                    b.add_node(2, a / h);
                }
                let core0 = b.tier.len() as u32;
                for _ in 0..h * u {
                    b.add_node(3, u32::MAX);
                }
                for host in 0..n_hosts {
                    b.link(host, edge0 + host / h, rate, latency);
                }
                for pod in 0..k {
                    for e in 0..h {
                        for a in 0..h {
                            b.link(edge0 + pod * h + e, agg0 + pod * h + a, rate, latency);
                        }
                    }
                    for a in 0..h {
                        for c in 0..u {
                            b.link(agg0 + pod * h + a, core0 + a * u + c, rate, latency);
                        }
                    }
                }
                b.finish(n_hosts)
            }
            TopologyConfig::LeafSpine {
                leaves,
                spines,
                links_per_pair,
                oversubscription,
                hosts_per_leaf,
            } => {
                for (field, v) in [
                    ("topology.leaves", leaves),
                    ("topology.spines", spines),
                    ("topology.links_per_pair", links_per_pair),
                ] {
                    if v < 1 {
                        return Err(config_err(field, format!("must be >= 1, got {v}")));
                    }
                }
                // u64: the product of three u32 settings may not fit 32 bits.
                let uplinks = spines as u64 * links_per_pair as u64;
                if uplinks > MAX_GROUP_PORTS {
                    return Err(config_err(
                        "topology",
                        format!(
                            "spines x links_per_pair = {uplinks} uplinks per leaf exceeds the supported maximum of {MAX_GROUP_PORTS} (the next hops of one group)"
                        ),
                    ));
                }
                let hpl = match hosts_per_leaf {
                    Some(_) if oversubscription.is_some() => {
                        return Err(config_err(
                            "topology.oversubscription",
                            "give hosts_per_leaf or oversubscription, not both (each sets the hosts per leaf)",
                        ))
                    }
                    Some(n) if n >= 1 => n,
                    Some(_) => return Err(config_err("topology.hosts_per_leaf", "must be >= 1")),
                    None => {
                        let oversubscription = oversubscription.unwrap_or(1.0);
                        // Hosts per leaf over its uplinks: past 2^24 no fabric fits.
                        if !(oversubscription > 0.0 && oversubscription <= MAX_HOSTS as f64) {
                            return Err(config_err(
                                "topology.oversubscription",
                                format!("must be in (0, {MAX_HOSTS}] (hosts per leaf over its uplinks), got {oversubscription:?}"),
                            ));
                        }
                        let x = oversubscription * uplinks as f64;
                        if (x - x.round()).abs() > 1e-9 || x.round() < 1.0 {
                            return Err(config_err(
                                "topology.oversubscription",
                                format!("oversubscription x spines x links_per_pair must be a whole number of hosts per leaf, got {x}"),
                            ));
                        }
                        if x.round() > MAX_HOSTS as f64 {
                            return Err(config_err(
                                "topology.oversubscription",
                                format!("gives {x:.0} hosts per leaf, more than the supported maximum of {MAX_HOSTS} hosts"),
                            ));
                        }
                        x.round() as u32
                    }
                };
                let n_hosts = match leaves.checked_mul(hpl) {
                    Some(n) if n <= MAX_HOSTS => n,
                    _ => {
                        return Err(config_err(
                            "topology",
                            format!(
                                "leaves x hosts per leaf = {} exceeds the supported maximum of {MAX_HOSTS} hosts",
                                leaves as u64 * hpl as u64
                            ),
                        ))
                    }
                };
                let links = n_hosts as u64 + leaves as u64 * uplinks;
                if links > MAX_LINKS {
                    return Err(config_err(
                        "topology",
                        format!(
                            "hosts + leaves x spines x links_per_pair = {links} links exceeds the supported maximum of {MAX_LINKS}"
                        ),
                    ));
                }
                let route = (leaves as u64 + spines as u64) * leaves as u64;
                if route > MAX_ROUTE_ENTRIES {
                    return Err(config_err(
                        "topology",
                        format!(
                            "(leaves + spines) x leaves = {route} routing entries exceeds the supported maximum of {MAX_ROUTE_ENTRIES}"
                        ),
                    ));
                }
                b.tier_names = vec!["host", "L", "S"];
                for _ in 0..n_hosts {
                    b.add_node(0, 0);
                }
                let leaf0 = b.tier.len() as u32;
                for _ in 0..leaves {
                    b.add_node(1, 0);
                }
                let spine0 = b.tier.len() as u32;
                for _ in 0..spines {
                    b.add_node(2, 0);
                }
                for host in 0..n_hosts {
                    b.link(host, leaf0 + host / hpl, rate, latency);
                }
                for l in 0..leaves {
                    for s in 0..spines {
                        for _ in 0..links_per_pair {
                            b.link(leaf0 + l, spine0 + s, rate, latency);
                        }
                    }
                }
                b.finish(n_hosts)
            }
        }
    }

    pub fn n_nodes(&self) -> usize {
        self.tier.len()
    }

    /// Next-hop group at `node` towards host `dst` (the caller handles the last hop at the edge).
    #[inline]
    pub fn group_towards(&self, node: NodeId, dst_edge: NodeId) -> GroupId {
        let e = self.edge_index[dst_edge as usize];
        self.route[(node - self.n_hosts) as usize * self.n_edges as usize + e as usize]
    }

    /// Where `group_towards(node, dst_edge)` reads, for prefetching: computed without
    /// branches or checks, so it is any address when `node` is a host.
    #[inline]
    pub fn route_addr(&self, node: NodeId, dst_edge: NodeId) -> *const GroupId {
        let e = self.edge_index[dst_edge as usize];
        let row = node.wrapping_sub(self.n_hosts) as usize;
        self.route
            .as_ptr()
            .wrapping_add(row.wrapping_mul(self.n_edges as usize) + e as usize)
    }

    /// The forwarding schedule of group `g`: its ports, each as often as its weight,
    /// interleaved (equal to `groups[g]` when the weights are equal).
    #[inline]
    pub fn group_ports(&self, g: GroupId) -> &[PortId] {
        let (a, b) = (
            self.group_start[g as usize],
            self.group_start[g as usize + 1],
        );
        &self.group_ports[a as usize..b as usize]
    }

    pub fn stage_name(&self, port: PortId) -> String {
        let p = &self.ports[port as usize];
        format!(
            "{}->{}",
            self.tier_names[self.tier[p.owner as usize] as usize],
            self.tier_names[self.tier[p.peer as usize] as usize]
        )
    }

    /// Where a port's stage comes along a path: up the tiers first, then down.
    pub fn stage_order(&self, port: PortId) -> u32 {
        let p = &self.ports[port as usize];
        let (from, to) = (
            self.tier[p.owner as usize] as u32,
            self.tier[p.peer as usize] as u32,
        );
        let top = self.tier_names.len() as u32 - 1;
        if to > from {
            from
        } else {
            2 * top - from
        }
    }

    /// Number of links crossed from host `src` to host `dst` on a shortest path.
    pub fn hops_between(&self, src: u32, dst: u32) -> u32 {
        let (se, de) = (self.host_edge[src as usize], self.host_edge[dst as usize]);
        if se == de {
            return 2;
        }
        let mut node = se;
        let mut hops = 2;
        while node != de {
            let g = self.group_towards(node, de);
            node = self.ports[self.groups[g as usize][0] as usize].peer;
            hops += 1;
        }
        hops
    }
}

#[derive(Default)]
struct Builder {
    tier: Vec<u8>,
    pod: Vec<u32>,
    tier_names: Vec<&'static str>,
    ports: Vec<PortSpec>,
}

impl Builder {
    fn add_node(&mut self, tier: u8, pod: u32) {
        self.tier.push(tier);
        self.pod.push(pod);
    }

    fn link(&mut self, a: NodeId, b: NodeId, rate: Rate, latency: Dur) {
        self.ports.push(PortSpec {
            owner: a,
            peer: b,
            rate,
            latency,
        });
        self.ports.push(PortSpec {
            owner: b,
            peer: a,
            rate,
            latency,
        });
    }

    fn finish(self, n_hosts: u32) -> FabricResult<Topology> {
        let n = self.tier.len();
        let mut node_ports = vec![Vec::new(); n];
        for (i, p) in self.ports.iter().enumerate() {
            node_ports[p.owner as usize].push(i as PortId);
        }
        let mut host_port = vec![0; n_hosts as usize];
        let mut host_down_port = vec![0; n_hosts as usize];
        let mut host_edge = vec![0; n_hosts as usize];
        for h in 0..n_hosts as usize {
            if node_ports[h].len() != 1 {
                return Err(config_err(
                    "topology",
                    format!("host {h} must have exactly one NIC"),
                ));
            }
            let p = node_ports[h][0];
            host_port[h] = p;
            host_edge[h] = self.ports[p as usize].peer;
            host_down_port[h] = p ^ 1; // ports are created in pairs
        }
        let mut edge_index = vec![u32::MAX; n];
        let mut n_edges = 0u32;
        for &e in &host_edge {
            if edge_index[e as usize] == u32::MAX {
                edge_index[e as usize] = n_edges;
                n_edges += 1;
            }
        }
        let mut topo = Topology {
            n_hosts,
            group_start: Vec::new(),
            group_ports: Vec::new(),
            link_state: vec![LinkState::Up; self.ports.len()],
            tier: self.tier,
            tier_names: self.tier_names,
            pod: self.pod,
            ports: self.ports,
            node_ports,
            host_port,
            host_down_port,
            host_edge,
            edge_index,
            n_edges,
            route: Vec::new(),
            groups: Vec::new(),
            weights: Vec::new(),
            equal_weights: false,
            diameter_hops: 2,
        };
        topo.compute_routes()?;
        Ok(topo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fat_tree(k: u32) -> Topology {
        Topology::build(
            &TopologyConfig::fat_tree(k),
            Rate::from_gbps(800.0),
            Dur(500_000),
        )
        .unwrap()
    }

    #[test]
    fn fat_tree_sizes() {
        for k in [4u32, 8, 16] {
            let t = fat_tree(k);
            assert_eq!(t.n_hosts, k * k * k / 4);
            assert_eq!(t.n_nodes() as u32, k * k * k / 4 + k * k + k * k / 4);
            // every link is two ports: hosts + 2 tiers of k^3/4 switch links
            assert_eq!(t.ports.len() as u32, 2 * 3 * k * k * k / 4);
            assert_eq!(t.diameter_hops, 6);
        }
    }

    #[test]
    fn every_next_hop_is_on_a_shortest_path_and_multiplicity_is_right() {
        let k = 8;
        let t = fat_tree(k);
        // inter-pod: an edge has k/2 choices up, an aggregation k/2, a core exactly 1
        let (src, dst) = (0u32, t.n_hosts - 1);
        let e = t.host_edge[src as usize];
        let de = t.host_edge[dst as usize];
        let g = t.group_towards(e, de);
        assert_eq!(t.groups[g as usize].len(), (k / 2) as usize);
        let agg = t.ports[t.groups[g as usize][0] as usize].peer;
        assert_eq!(
            t.groups[t.group_towards(agg, de) as usize].len(),
            (k / 2) as usize
        );
        assert_eq!(t.hops_between(src, dst), 6);
        assert_eq!(t.hops_between(0, 1), 2);
        assert_eq!(t.hops_between(0, k / 2), 4); // same pod, other edge
    }

    #[test]
    fn leaf_spine_parallel_links_and_oversubscription() {
        let cfg = TopologyConfig::LeafSpine {
            leaves: 4,
            spines: 2,
            links_per_pair: 2,
            oversubscription: Some(2.0),
            hosts_per_leaf: None,
        };
        let t = Topology::build(&cfg, Rate::from_gbps(400.0), Dur(1000)).unwrap();
        assert_eq!(t.n_hosts, 4 * 8);
        let g = t.group_towards(t.host_edge[0], t.host_edge[31]);
        assert_eq!(t.groups[g as usize].len(), 4); // 2 spines x 2 parallel links
        assert_eq!(t.diameter_hops, 4);
        // Both set the hosts per leaf: giving both is refused, naming the field.
        let both = TopologyConfig::LeafSpine {
            leaves: 4,
            spines: 2,
            links_per_pair: 2,
            oversubscription: Some(2.0),
            hosts_per_leaf: Some(8),
        };
        let err = Topology::build(&both, Rate::from_gbps(400.0), Dur(1000)).unwrap_err();
        assert!(
            err.to_string().contains("topology.oversubscription"),
            "{err}"
        );
    }

    #[test]
    fn odd_k_is_refused_with_the_field_name() {
        let err = Topology::build(&TopologyConfig::fat_tree(7), Rate::from_gbps(800.0), Dur(0))
            .unwrap_err();
        assert!(err.to_string().contains("topology.k"), "{err}");
    }
    #[test]
    fn an_oversubscribed_fat_tree_keeps_k_over_2r_uplinks_per_aggregation() {
        for (k, r) in [(8u32, 2u32), (8, 4), (16, 8)] {
            let cfg = TopologyConfig::FatTree {
                k,
                oversubscription: r,
            };
            let t = Topology::build(&cfg, Rate::from_gbps(800.0), Dur(500_000)).unwrap();
            let (h, u) = (k / 2, k / 2 / r);
            assert_eq!(t.n_hosts, k * k * k / 4);
            assert_eq!(t.tier.iter().filter(|&&x| x == 3).count() as u32, h * u);
            let agg = t.n_hosts + k * h; // the first aggregation switch
            let ups = t.node_ports[agg as usize]
                .iter()
                .filter(|&&p| t.tier[t.ports[p as usize].peer as usize] == 3);
            assert_eq!(ups.count() as u32, u);
            // Another pod is reached over every aggregation switch, then u cores each.
            let (e0, far) = (t.host_edge[0], t.host_edge[(t.n_hosts - 1) as usize]);
            assert_eq!(t.groups[t.group_towards(e0, far) as usize].len() as u32, h);
            assert_eq!(t.groups[t.group_towards(agg, far) as usize].len() as u32, u);
            assert_eq!(t.hops_between(0, t.n_hosts - 1), 6);
        }
        let bad = TopologyConfig::FatTree {
            k: 8,
            oversubscription: 3,
        };
        let e = Topology::build(&bad, Rate::from_gbps(800.0), Dur(500_000)).unwrap_err();
        assert!(e.to_string().contains("topology.oversubscription"), "{e}");
    }
}
