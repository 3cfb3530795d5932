//! The failure-aware rate bound ρ_max (OFAN paper App. A): every flow is split evenly over
//! its valid shortest paths (those over links that are up); F is the largest number of
//! flow units any link then carries; each flow can send at B/F. Reported as the fraction of
//! its line rate the busiest host can use that way, F_host / F: 1 with no failure (a host's
//! own link is the bottleneck), below 1 where failures concentrate paths.

use crate::topology::{NodeId, PortId, Topology, NO_GROUP};
use crate::traffic::FlowSpec;
use std::collections::{BTreeMap, HashMap};

/// Flow units on every port when each flow splits evenly over its shortest paths.
pub fn flow_units(topo: &Topology, flows: &[FlowSpec]) -> Vec<f64> {
    let mut units = vec![0.0; topo.ports.len()];
    let mut pairs: BTreeMap<(NodeId, NodeId), f64> = BTreeMap::new();
    for f in flows.iter().filter(|f| f.src != f.dst) {
        units[topo.host_port[f.src as usize] as usize] += 1.0;
        units[topo.host_down_port[f.dst as usize] as usize] += 1.0;
        let edges = (
            topo.host_edge[f.src as usize],
            topo.host_edge[f.dst as usize],
        );
        if edges.0 != edges.1 {
            *pairs.entry(edges).or_default() += 1.0;
        }
    }
    let mut paths: HashMap<(NodeId, NodeId), f64> = HashMap::new();
    for (&(src, dst), &n) in &pairs {
        spread(topo, src, dst, n, &mut units, &mut paths);
    }
    units
}

/// Shortest paths from switch `u` to edge switch `dst` (0 without a route).
fn path_count(
    topo: &Topology,
    u: NodeId,
    dst: NodeId,
    memo: &mut HashMap<(NodeId, NodeId), f64>,
) -> f64 {
    if u == dst {
        return 1.0;
    }
    if let Some(&c) = memo.get(&(u, dst)) {
        return c;
    }
    let g = topo.group_towards(u, dst);
    let c = if g == NO_GROUP {
        0.0
    } else {
        let next: Vec<NodeId> = topo.groups[g as usize]
            .iter()
            .map(|&p| topo.ports[p as usize].peer)
            .collect();
        next.into_iter()
            .map(|v| path_count(topo, v, dst, memo))
            .sum()
    };
    memo.insert((u, dst), c);
    c
}

/// Sends `amount` flow units from switch `u` towards `dst`, each next hop taking its share
/// of the paths.
fn spread(
    topo: &Topology,
    u: NodeId,
    dst: NodeId,
    amount: f64,
    units: &mut [f64],
    memo: &mut HashMap<(NodeId, NodeId), f64>,
) {
    if u == dst {
        return;
    }
    let total = path_count(topo, u, dst, memo);
    let g = topo.group_towards(u, dst);
    if g == NO_GROUP || total == 0.0 {
        return;
    }
    let ports: Vec<PortId> = topo.groups[g as usize].clone();
    for p in ports {
        let v = topo.ports[p as usize].peer;
        let share = amount * path_count(topo, v, dst, memo) / total;
        units[p as usize] += share;
        spread(topo, v, dst, share, units, memo);
    }
}

/// F_host / F (see the module's note); 1 when no flow crosses the fabric.
pub fn rho_max(topo: &Topology, flows: &[FlowSpec]) -> f64 {
    let units = flow_units(topo, flows);
    let host = |p: usize| topo.ports[p].owner < topo.n_hosts || topo.ports[p].peer < topo.n_hosts;
    let f_host = (0..units.len())
        .filter(|&p| host(p))
        .map(|p| units[p])
        .fold(0.0, f64::max);
    let f = units.iter().copied().fold(0.0, f64::max);
    if f > 0.0 {
        f_host / f
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::units::{Dur, Rate, Time};
    use tracefabric_fabric::routes::LinkState;

    fn fat_tree(k: u32) -> Topology {
        Topology::build(
            &TopologyConfig::fat_tree(k),
            Rate::from_gbps(800.0),
            Dur(500_000),
        )
        .unwrap()
    }

    fn all_to_all(n: u32) -> Vec<FlowSpec> {
        (0..n)
            .flat_map(|s| {
                (0..n).filter(move |&d| d != s).map(move |d| FlowSpec {
                    src: s,
                    dst: d,
                    bytes: 1,
                    start: Time::ZERO,
                })
            })
            .collect()
    }

    #[test]
    fn one_aggregation_core_link_down_leaves_an_all_to_all_host_0966_of_its_rate() {
        // CC-CATALOGUE §12: k = 8, that pod's inter-pod flows keep 15 of 16 paths; its
        // edge->agg links carry 12 + 4 x 112 x 4 / 15 = 131.47 units against 127 on host links.
        let mut t = fat_tree(8);
        let flows = all_to_all(t.n_hosts);
        assert_eq!(rho_max(&t, &flows), 1.0);
        let agg = t.n_hosts + 32; // first aggregation switch of pod 0
        let up = (t.node_ports[agg as usize].iter().copied())
            .find(|&p| t.tier[t.ports[p as usize].peer as usize] == 3)
            .unwrap();
        t.set_link_state(up, LinkState::Down).unwrap();
        t.compute_routes().unwrap();
        let units = flow_units(&t, &flows);
        let worst = units.iter().copied().fold(0.0, f64::max);
        assert!(
            (worst - (12.0 + 4.0 * 112.0 * 4.0 / 15.0)).abs() < 1e-9,
            "{worst}"
        );
        assert!((rho_max(&t, &flows) - 127.0 / 131.4666666).abs() < 1e-6);
    }

    /// Units per port by brute force: every shortest path over up links, enumerated from
    /// the adjacency alone, carries an equal share of its flow.
    fn brute_force_units(t: &Topology, flows: &[FlowSpec]) -> Vec<f64> {
        let n = t.n_nodes();
        let mut units = vec![0.0; t.ports.len()];
        for f in flows {
            let (s, d) = (f.src, f.dst);
            // BFS distances to d over up links (hosts only as endpoints).
            let mut dist = vec![u32::MAX; n];
            dist[d as usize] = 0;
            let mut frontier = vec![d];
            while !frontier.is_empty() {
                let mut next = vec![];
                for v in frontier {
                    for p in 0..t.ports.len() {
                        let (a, b) = (t.ports[p].owner, t.ports[p].peer);
                        let usable =
                            t.link_state(p as u32) == LinkState::Up && (a >= t.n_hosts || a == s);
                        if b == v && usable && dist[a as usize] == u32::MAX {
                            dist[a as usize] = dist[v as usize] + 1;
                            next.push(a);
                        }
                    }
                }
                frontier = next;
            }
            let mut paths: Vec<Vec<usize>> = vec![];
            let mut stack = vec![(s, vec![])];
            while let Some((u, path)) = stack.pop() {
                if u == d {
                    paths.push(path);
                    continue;
                }
                for &p in &t.node_ports[u as usize] {
                    let v = t.ports[p as usize].peer;
                    if t.link_state(p) == LinkState::Up
                        && dist[v as usize] != u32::MAX
                        && dist[v as usize] + 1 == dist[u as usize]
                    {
                        let mut q = path.clone();
                        q.push(p as usize);
                        stack.push((v, q));
                    }
                }
            }
            for path in &paths {
                for &p in path {
                    units[p] += 1.0 / paths.len() as f64;
                }
            }
        }
        units
    }

    #[test]
    fn even_split_units_match_a_brute_force_path_count_under_random_failures() {
        let mut draws = 0u64;
        let mut checked = 0;
        while checked < 20 {
            let mut t = fat_tree(4);
            for p in (0..t.ports.len() as u32).step_by(2) {
                draws += 1;
                let sw =
                    t.ports[p as usize].owner >= t.n_hosts && t.ports[p as usize].peer >= t.n_hosts;
                if sw && tracefabric_fabric::seed::uniform(11, draws) < 0.15 {
                    t.set_link_state(p, LinkState::Down).unwrap();
                }
            }
            if t.compute_routes().is_err() {
                continue; // a disconnected fabric has no rate bound
            }
            let flows = all_to_all(t.n_hosts);
            let (fast, slow) = (flow_units(&t, &flows), brute_force_units(&t, &flows));
            for (p, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!((a - b).abs() < 1e-9, "port {p}: {a} vs {b}");
            }
            checked += 1;
        }
    }
}
