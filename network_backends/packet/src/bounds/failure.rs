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
    // Flow units entering the fabric at each source edge switch, per destination edge.
    let mut demand: BTreeMap<NodeId, BTreeMap<NodeId, f64>> = BTreeMap::new();
    for f in flows.iter().filter(|f| f.src != f.dst) {
        units[topo.host_port[f.src as usize] as usize] += 1.0;
        units[topo.host_down_port[f.dst as usize] as usize] += 1.0;
        let (src, dst) = (
            topo.host_edge[f.src as usize],
            topo.host_edge[f.dst as usize],
        );
        if src != dst {
            *demand.entry(dst).or_default().entry(src).or_default() += 1.0;
        }
    }
    let n = topo.node_ports.len();
    let mut paths = vec![0.0; n];
    let mut amount = vec![0.0; n];
    let mut seen = vec![false; n];
    for (&dst, sources) in &demand {
        let order = towards(topo, dst, sources.keys().copied(), &mut paths, &mut seen);
        for (&src, &a) in sources {
            amount[src as usize] += a;
        }
        // Reverse post-order: every switch before its next hops, so each passes on all it
        // receives, split by the shortest paths behind each next hop.
        for &u in order.iter().rev() {
            let a = std::mem::take(&mut amount[u as usize]);
            let total = paths[u as usize];
            if u == dst || a == 0.0 || total == 0.0 {
                continue;
            }
            for &p in &topo.groups[topo.group_towards(u, dst) as usize] {
                let v = topo.ports[p as usize].peer as usize;
                let share = a * paths[v] / total;
                units[p as usize] += share;
                amount[v] += share;
            }
        }
        for &u in &order {
            seen[u as usize] = false;
        }
    }
    units
}

/// The switches on shortest paths from `sources` to edge switch `dst`, in DFS post-order
/// (each after its next hops), with `paths[u]` set to u's number of shortest paths to
/// `dst` (0 without a route). Next hops lie one step closer, so the walk is acyclic.
fn towards(
    topo: &Topology,
    dst: NodeId,
    sources: impl Iterator<Item = NodeId>,
    paths: &mut [f64],
    seen: &mut [bool],
) -> Vec<NodeId> {
    let next_hops = |u: NodeId| -> &[PortId] {
        match topo.group_towards(u, dst) {
            _ if u == dst => &[],
            NO_GROUP => &[],
            g => &topo.groups[g as usize],
        }
    };
    let mut order = Vec::new();
    let mut stack: Vec<(NodeId, usize)> = Vec::new();
    for s in sources {
        if seen[s as usize] {
            continue;
        }
        seen[s as usize] = true;
        stack.push((s, 0));
        while let Some(top) = stack.last_mut() {
            let u = top.0;
            let hops = next_hops(u);
            if let Some(&p) = hops.get(top.1) {
                top.1 += 1;
                let v = topo.ports[p as usize].peer;
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    stack.push((v, 0));
                }
                continue;
            }
            paths[u as usize] = if u == dst {
                1.0
            } else {
                hops.iter()
                    .map(|&p| paths[topo.ports[p as usize].peer as usize])
                    .sum()
            };
            order.push(u);
            stack.pop();
        }
    }
    order
}

/// F_host / F (see the module's note); 1 when no flow crosses the fabric.
pub fn rho_max(topo: &Topology, flows: &[FlowSpec]) -> f64 {
    rho_max_degraded(topo, flows, &HashMap::new())
}

/// `rho_max` with links that run at a fraction of their rate (per port, both directions
/// given): a link at fraction r carrying u flow units loads like u / r at full rate.
pub fn rho_max_degraded(
    topo: &Topology,
    flows: &[FlowSpec],
    fraction: &HashMap<PortId, f64>,
) -> f64 {
    let mut units = flow_units(topo, flows);
    for (&p, &r) in fraction {
        units[p as usize] /= r;
    }
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
