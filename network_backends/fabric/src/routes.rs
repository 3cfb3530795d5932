//! Next-hop groups: at each switch, towards each edge switch, the output ports one step
//! closer over links that are up (BFS from every edge switch). Recomputed when a link's
//! state changes, so routing follows failures. Each next hop is weighted by the shortest
//! paths it still has to the destination (W-ECMP, OFAN App. F.4): the weights divided by
//! their gcd give an interleaved weighted round-robin schedule that switches forward over.

use crate::error::{config_err, FabricResult};
use crate::topology::{GroupId, NodeId, PortId, Topology, NO_GROUP};
use crate::units::Rate;
use std::collections::HashMap;

/// A link's state; both of its directions share it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LinkState {
    Up,
    /// Carries nothing; routing avoids it.
    Down,
}

impl Topology {
    pub fn link_state(&self, port: PortId) -> LinkState {
        self.link_state[port as usize]
    }

    /// Sets the state of the link behind `port` (both directions); `compute_routes` makes
    /// routing follow it. A host's only link cannot go down.
    pub fn set_link_state(&mut self, port: PortId, state: LinkState) -> FabricResult<()> {
        let p = &self.ports[port as usize];
        if (p.owner < self.n_hosts || p.peer < self.n_hosts) && state == LinkState::Down {
            return Err(config_err(
                "link",
                format!(
                    "port {port} is the link of host {}: taking it down would isolate the host",
                    p.owner.min(p.peer)
                ),
            ));
        }
        self.link_state[port as usize] = state;
        self.link_state[(port ^ 1) as usize] = state;
        Ok(())
    }

    /// Sets the rate of the link behind `port` (both directions), e.g. a degraded link.
    pub fn set_link_rate(&mut self, port: PortId, rate: Rate) {
        self.ports[port as usize].rate = rate;
        self.ports[(port ^ 1) as usize].rate = rate;
    }

    fn up(&self, port: PortId) -> bool {
        self.link_state[port as usize] == LinkState::Up
    }

    /// Next-hop groups over the links that are up. Refused when that leaves an edge switch
    /// unable to reach another (the failures disconnect the fabric).
    pub fn compute_routes(&mut self) -> FabricResult<()> {
        self.routes_over_up_links(true).map(|_| ())
    }

    /// As `compute_routes`, but a fabric cut in parts is routed within each part (no route
    /// between parts): per edge switch (by edge index), the lowest edge index it reaches,
    /// so two edge switches are connected when their entries are equal.
    pub fn compute_routes_in_parts(&mut self) -> Vec<u32> {
        self.routes_over_up_links(false)
            .expect("only a strict run refuses a cut")
    }

    fn routes_over_up_links(&mut self, strict: bool) -> FabricResult<Vec<u32>> {
        let n = self.tier.len();
        let n_hosts = self.n_hosts as usize;
        let n_edges = self.n_edges as usize;
        // Hosts are numbered first; only switches have routing rows.
        debug_assert!(self.tier[..n_hosts].iter().all(|&t| t == 0));
        debug_assert!(self.tier[n_hosts..].iter().all(|&t| t != 0));
        // Each switch's links to switches that are up, in port order: (its port, the peer).
        // Every BFS below walks these instead of filtering all ports again.
        let adj: Vec<Vec<(PortId, u32)>> = (0..n)
            .map(|u| {
                let ports = if u < n_hosts {
                    &[][..]
                } else {
                    &self.node_ports[u][..]
                };
                (ports.iter())
                    .map(|&p| (p, self.ports[p as usize].peer))
                    .filter(|&(p, v)| self.up(p) && self.tier[v as usize] != 0)
                    .collect()
            })
            .collect();
        let mut route = vec![NO_GROUP; (n - n_hosts) * n_edges];
        let mut groups: Vec<Vec<PortId>> = Vec::new();
        let mut weights: Vec<Vec<u32>> = Vec::new();
        let mut group_ids: HashMap<(Vec<PortId>, Vec<u32>), GroupId> = HashMap::new();
        let mut dist = vec![u32::MAX; n];
        // Shortest paths from each switch to the edge switch (saturating: only ratios matter).
        let mut paths = vec![0u64; n];
        // BFS order (the queue itself): by distance, so every next hop comes before its user.
        let mut order: Vec<u32> = Vec::with_capacity(n - n_hosts);
        let mut diameter = 2;
        // A switch's next hops are mostly the same towards one edge as towards the last
        // (all uplinks, say): compared in place, not hashed and allocated again.
        let mut last_group = vec![NO_GROUP; n];
        let (mut hops, mut raw, mut w) = (Vec::new(), Vec::new(), Vec::new());
        let mut part = vec![u32::MAX; n_edges];
        for edge in n_hosts as u32..n as u32 {
            if self.edge_index[edge as usize] == u32::MAX {
                continue;
            }
            let ei = self.edge_index[edge as usize] as usize;
            for &u in &order {
                dist[u as usize] = u32::MAX;
            }
            order.clear();
            dist[edge as usize] = 0;
            paths[edge as usize] = 1;
            order.push(edge);
            let mut head = 0;
            // A switch is popped after every switch one step closer to the edge switch, so its
            // path count is complete when it passes the count on to those one step further.
            while let Some(&u) = order.get(head) {
                head += 1;
                let (du, pu) = (dist[u as usize], paths[u as usize]);
                for &(_, v) in &adj[u as usize] {
                    let v = v as usize;
                    if dist[v] == u32::MAX {
                        dist[v] = du + 1;
                        paths[v] = 0;
                        order.push(v as u32);
                    }
                    if dist[v] == du + 1 {
                        paths[v] = paths[v].saturating_add(pu);
                    }
                }
            }
            let reached = order
                .iter()
                .filter(|&&u| self.edge_index[u as usize] != u32::MAX);
            let mut count = 0;
            for &u in reached {
                let r = self.edge_index[u as usize] as usize;
                part[r] = part[r].min(ei as u32);
                count += 1;
            }
            if count < n_edges && strict {
                let cut = (n_hosts..n)
                    .find(|&u| self.edge_index[u] != u32::MAX && dist[u] == u32::MAX)
                    .expect("an edge switch the BFS missed");
                return Err(config_err(
                    "link",
                    format!(
                        "the links that are down disconnect edge switch {cut} from edge switch {edge}"
                    ),
                ));
            }
            let closer = |u: usize, v: u32| dist[v as usize] + 1 == dist[u];
            for u in n_hosts..n {
                if u as u32 == edge || dist[u] == u32::MAX {
                    continue;
                }
                if self.tier[u] == 1 {
                    diameter = diameter.max(dist[u] + 2);
                }
                hops.clear();
                raw.clear();
                for &(p, v) in adj[u].iter().filter(|&&(_, v)| closer(u, v)) {
                    hops.push(p);
                    raw.push(if self.equal_weights {
                        1
                    } else {
                        paths[v as usize]
                    });
                }
                reduce_weights_into(&raw, &mut w);
                let last = last_group[u];
                let g = if last != NO_GROUP
                    && groups[last as usize] == hops
                    && weights[last as usize] == w
                {
                    last
                } else {
                    let next = groups.len() as GroupId;
                    let g = *group_ids.entry((hops.clone(), w.clone())).or_insert(next);
                    if g == next {
                        groups.push(hops.clone());
                        weights.push(w.clone());
                    }
                    g
                };
                last_group[u] = g;
                route[(u - n_hosts) * n_edges + ei] = g;
            }
        }
        self.groups = groups;
        self.weights = weights;
        self.route = route;
        self.diameter_hops = diameter;
        self.flatten_groups();
        Ok(part)
    }

    /// Switch `node` sends everything for edge switch `dst_edge` out of its port `port` alone,
    /// shortest or not: a fixture for what the engine must survive (routing loops, the
    /// cyclic buffer dependencies of a PFC deadlock), never a routing scheme. Undone by the
    /// next `compute_routes`.
    pub fn force_route(
        &mut self,
        node: NodeId,
        dst_edge: NodeId,
        port: PortId,
    ) -> FabricResult<()> {
        let owner = self.ports.get(port as usize).map(|p| p.owner);
        if node < self.n_hosts
            || owner != Some(node)
            || self
                .edge_index
                .get(dst_edge as usize)
                .is_none_or(|&e| e == u32::MAX)
        {
            return Err(config_err(
                "route",
                format!("port {port} is not a port of switch {node}, or {dst_edge} is not an edge switch"),
            ));
        }
        let group = match self.groups.iter().position(|g| g[..] == [port]) {
            Some(g) => g,
            None => {
                self.groups.push(vec![port]);
                self.weights.push(vec![1]);
                self.groups.len() - 1
            }
        };
        let e = self.edge_index[dst_edge as usize] as usize;
        self.route[(node - self.n_hosts) as usize * self.n_edges as usize + e] = group as GroupId;
        self.flatten_groups();
        Ok(())
    }

    /// The groups' schedules, flat, for the forwarding path (`group_ports`).
    fn flatten_groups(&mut self) {
        let mut group_start = vec![0u32];
        let mut flat = Vec::with_capacity(self.groups.len() * 2);
        for (g, w) in self.groups.iter().zip(&self.weights) {
            flat.extend(iwrr_schedule(g, w));
            group_start.push(flat.len() as u32);
        }
        self.group_ports = flat;
        self.group_start = group_start;
    }

    /// Switch `node` stops using its port `port` towards every destination for which it
    /// has another next hop (a local reroute; elsewhere nothing changes). Returns whether
    /// any route changed.
    pub fn exclude_locally(&mut self, node: NodeId, port: PortId) -> bool {
        if node < self.n_hosts || self.ports[port as usize].owner != node {
            return false;
        }
        let row = (node - self.n_hosts) as usize * self.n_edges as usize;
        let mut replaced: HashMap<GroupId, GroupId> = HashMap::new();
        for e in 0..self.n_edges as usize {
            let g = self.route[row + e];
            if g == NO_GROUP {
                continue;
            }
            let ports = &self.groups[g as usize];
            if ports.len() < 2 || !ports.contains(&port) {
                continue;
            }
            let next = self.groups.len() as GroupId;
            let ng = *replaced.entry(g).or_insert(next);
            if ng == next {
                // The other next hops keep their weights until global convergence.
                let (kept, w): (Vec<PortId>, Vec<u64>) = (ports.iter().copied())
                    .zip(self.weights[g as usize].iter().map(|&w| w as u64))
                    .filter(|&(p, _)| p != port)
                    .unzip();
                self.groups.push(kept);
                self.weights.push(reduced_weights(&w));
            }
            self.route[row + e] = ng;
        }
        if !replaced.is_empty() {
            self.flatten_groups();
        }
        !replaced.is_empty()
    }
}

/// Longest schedule a group may have; longer ones are scaled down (rounding, each weight
/// at least 1), so a switch's table stays small whatever the path counts.
pub const MAX_SCHEDULE: u64 = 1024;

/// Weights divided by their gcd (App. F.4), scaled to at most `MAX_SCHEDULE` in all.
pub fn reduced_weights(raw: &[u64]) -> Vec<u32> {
    let mut w = Vec::new();
    reduce_weights_into(raw, &mut w);
    w
}

/// `reduced_weights` into `out`, allocating only when `out` must grow: equal weights, by
/// far the most common, are all ones.
fn reduce_weights_into(raw: &[u64], out: &mut Vec<u32>) {
    out.clear();
    if raw.iter().all(|&x| x == raw[0]) {
        out.resize(raw.len(), 1);
    } else {
        out.extend(reduced_weights_general(raw));
    }
}

/// Unequal weights: divided by their gcd, then scaled down until the schedule fits.
fn reduced_weights_general(raw: &[u64]) -> Vec<u32> {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let g = raw.iter().fold(0, |a, &w| gcd(a, w)).max(1);
    let mut w: Vec<u64> = raw.iter().map(|&x| (x / g).max(1)).collect();
    // Scaled down (each weight floored, at least 1) until the schedule fits; a group of more
    // than MAX_SCHEDULE ports (a leaf-spine with many spines and parallel links) ends at all
    // ones. Every pass lowers some weight above 1, so the loop ends.
    let limit = MAX_SCHEDULE.max(w.len() as u64);
    while w.iter().sum::<u64>() > limit {
        let scale = limit as f64 / w.iter().sum::<u64>() as f64;
        w.iter_mut()
            .for_each(|x| *x = ((*x as f64 * scale) as u64).max(1));
        let g = w.iter().fold(0, |a, &x| gcd(a, x)).max(1);
        w.iter_mut().for_each(|x| *x /= g);
    }
    w.into_iter().map(|x| x as u32).collect()
}

/// Interleaved weighted round robin: round r lists, in group order, every port whose weight
/// is at least r. Round 1 lists every port once, so the first `ports.len()` entries are the
/// group itself (source routing indexes them).
pub fn iwrr_schedule(ports: &[PortId], weights: &[u32]) -> Vec<PortId> {
    let rounds = weights.iter().copied().max().unwrap_or(0);
    (1..=rounds)
        .flat_map(|r| {
            (ports.iter().zip(weights))
                .filter(move |&(_, &w)| w >= r)
                .map(|(&p, _)| p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::units::Dur;

    #[test]
    fn weights_of_a_group_larger_than_the_schedule_end_at_all_ones() {
        // 1,200 ports (600 spines x 2 links), two of them with half the paths: the schedule
        // cannot hold the 2:1 ratio in 1,024 entries, so every port gets one (this looped).
        let raw: Vec<u64> = (0..1200).map(|i| if i < 2 { 1 } else { 2 }).collect();
        assert_eq!(reduced_weights(&raw), vec![1; 1200]);
        // Within the limit the ratio stays: 3:4:4:4 (OFAN App. F.4's example).
        assert_eq!(reduced_weights(&[6, 8, 8, 8]), vec![3, 4, 4, 4]);
    }

    fn fat_tree(k: u32) -> Topology {
        let cfg = TopologyConfig::fat_tree(k);
        Topology::build(&cfg, Rate::from_gbps(800.0), Dur(500_000)).unwrap()
    }

    /// The port of `from`'s link to `to`.
    fn port(t: &Topology, from: u32, to: u32) -> PortId {
        let mut found = t.node_ports[from as usize].iter().copied();
        found.find(|&p| t.ports[p as usize].peer == to).unwrap()
    }

    /// Hops from every switch to `edge` over up links, by an independent BFS.
    fn distances(t: &Topology, edge: u32) -> Vec<u32> {
        let mut dist = vec![u32::MAX; t.n_nodes()];
        dist[edge as usize] = 0;
        let mut frontier = vec![edge];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for u in frontier {
                for p in 0..t.ports.len() as u32 {
                    let (owner, peer) = (t.ports[p as usize].owner, t.ports[p as usize].peer);
                    let switch = t.tier[owner as usize] != 0;
                    if peer == u
                        && switch
                        && t.link_state(p) == LinkState::Up
                        && dist[owner as usize] == u32::MAX
                    {
                        dist[owner as usize] = dist[u as usize] + 1;
                        next.push(owner);
                    }
                }
            }
            frontier = next;
        }
        dist
    }

    #[test]
    fn routes_avoid_a_down_link_and_stay_shortest_over_the_rest() {
        let mut t = fat_tree(4);
        let (edge0, agg0) = (t.host_edge[0], t.n_hosts + 8); // first edge, first aggregation
        assert_eq!(t.tier[agg0 as usize], 2);
        let down = port(&t, edge0, agg0);
        t.set_link_state(down, LinkState::Down).unwrap();
        t.compute_routes().unwrap();
        let edges: Vec<u32> = (0..t.n_hosts).map(|h| t.host_edge[h as usize]).collect();
        for &dst in &edges {
            let dist = distances(&t, dst);
            for u in t.n_hosts..t.n_nodes() as u32 {
                if u == dst || dist[u as usize] == u32::MAX {
                    continue;
                }
                let g = t.group_towards(u, dst);
                for &p in t.group_ports(g) {
                    assert_eq!(t.link_state(p), LinkState::Up);
                    let v = t.ports[p as usize].peer;
                    assert_eq!(
                        dist[v as usize] + 1,
                        dist[u as usize],
                        "switch {u} towards {dst}"
                    );
                }
            }
        }
        // Edge 0 keeps one of its two uplinks; aggregation 0 reaches it through edge 1 and
        // aggregation 1 (3 links, not 1); host 0 still reaches every host.
        let other = edges[t.n_hosts as usize - 1];
        assert_eq!(t.group_ports(t.group_towards(edge0, other)).len(), 1);
        assert_eq!(distances(&t, edge0)[agg0 as usize], 3);
        assert_eq!(t.hops_between(0, t.n_hosts - 1), 6);
        // Back up: the routes are those of the intact fabric again.
        t.set_link_state(down, LinkState::Up).unwrap();
        t.compute_routes().unwrap();
        assert_eq!(t.route, fat_tree(4).route);
    }

    #[test]
    fn failures_that_disconnect_an_edge_or_isolate_a_host_are_refused() {
        let mut t = fat_tree(4);
        let edge0 = t.host_edge[0];
        for agg in [t.n_hosts + 8, t.n_hosts + 9] {
            let p = port(&t, edge0, agg);
            t.set_link_state(p, LinkState::Down).unwrap();
        }
        let err = t.compute_routes().unwrap_err().to_string();
        assert!(
            err.contains("disconnect edge switch") && err.contains(&format!("edge switch {edge0}")),
            "{err}"
        );
        let host_link = t.host_port[3];
        let err = t
            .set_link_state(host_link, LinkState::Down)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("would isolate the host") && err.contains("host 3"),
            "{err}"
        );
    }

    #[test]
    fn a_local_reroute_changes_only_the_switch_next_to_the_link() {
        let mut t = fat_tree(4);
        let before = t.clone();
        let (edge0, agg0) = (t.host_edge[0], t.n_hosts + 8);
        let up = port(&t, edge0, agg0);
        assert!(t.exclude_locally(edge0, up));
        for dst in (0..t.n_hosts).map(|h| t.host_edge[h as usize]) {
            for u in t.n_hosts..t.n_nodes() as u32 {
                if u == dst {
                    continue;
                }
                let (now, was) = (
                    t.group_ports(t.group_towards(u, dst)),
                    before.group_ports(before.group_towards(u, dst)),
                );
                if u == edge0 && was.len() == 2 {
                    assert_eq!(
                        now,
                        &was.iter().copied().filter(|&p| p != up).collect::<Vec<_>>()[..]
                    );
                } else {
                    assert_eq!(now, was, "switch {u} towards {dst}");
                }
            }
        }
        // Aggregation 0 has one way down to edge 0: it keeps it (nothing else to use).
        assert!(!t.exclude_locally(agg0, up ^ 1));
    }

    #[test]
    fn a_degraded_link_changes_both_directions() {
        let mut t = fat_tree(4);
        let p = port(&t, t.host_edge[0], t.n_hosts + 8);
        t.set_link_rate(p, Rate::from_gbps(200.0));
        assert_eq!(t.ports[p as usize].rate.bps(), 200_000_000_000);
        assert_eq!(t.ports[(p ^ 1) as usize].rate.bps(), 200_000_000_000);
    }
    #[test]
    fn the_app_f4_example_gives_its_weights_and_schedule() {
        // Ports {P1..P4} at {1600, 1600, 1600, 800} Gbps: weights {2, 2, 2, 1}; in the order
        // {P3, P2, P4, P1}, the IWRR schedule {P3, P2, P4, P1, P3, P2, P1}.
        assert_eq!(reduced_weights(&[1600, 1600, 1600, 800]), vec![2, 2, 2, 1]);
        assert_eq!(
            iwrr_schedule(&[3, 2, 4, 1], &[2, 2, 1, 2]),
            vec![3, 2, 4, 1, 3, 2, 1]
        );
        // Coprime counts past the cap keep their ratio to within rounding and fit, however
        // many small weights round up to 1.
        let w = reduced_weights(&[3000, 1001]);
        assert!(w.iter().sum::<u32>() as u64 <= MAX_SCHEDULE);
        assert!(
            (w[0] as f64 / w[1] as f64 - 3000.0 / 1001.0).abs() < 0.01,
            "{w:?}"
        );
        let mut many = vec![1_000_003u64];
        many.extend(std::iter::repeat_n(1u64, 200));
        let w = reduced_weights(&many);
        assert!(w.iter().sum::<u32>() as u64 <= MAX_SCHEDULE);
        assert!(w[0] > 500 && w[1..].iter().all(|&x| x == 1), "{w:?}");
    }

    /// Shortest paths from `u` to `dst` over up links, counted on an independent BFS.
    fn count_paths(t: &Topology, dist: &[u32], u: u32, dst: u32) -> u64 {
        if u == dst {
            return 1;
        }
        (t.node_ports[u as usize].iter())
            .filter(|&&p| t.link_state(p) == LinkState::Up)
            .map(|&p| t.ports[p as usize].peer)
            .filter(|&v| t.tier[v as usize] != 0 && dist[v as usize] + 1 == dist[u as usize])
            .map(|v| count_paths(t, dist, v, dst))
            .sum()
    }

    #[test]
    fn converged_weights_follow_the_paths_left_behind_each_next_hop() {
        // k = 8 (hosts 0..128, edges 128.., aggregations 160.., cores 192..): pod 0's
        // first aggregation loses core 0. Every switch's weights must be its next hops'
        // path counts over their gcd; an edge of pod 1 weights its aggregations 3:4:4:4
        // towards pod 0 (its first aggregation reaches pod 0 through 3 cores, not 4).
        let mut t = fat_tree(8);
        let down = port(&t, 160, 192);
        t.set_link_state(down, LinkState::Down).unwrap();
        t.compute_routes().unwrap();
        let mut uneven = 0;
        for dst in (0..t.n_hosts).step_by(4).map(|h| t.host_edge[h as usize]) {
            let dist = distances(&t, dst);
            for u in t.n_hosts..t.n_nodes() as u32 {
                if u == dst {
                    continue;
                }
                let g = t.group_towards(u, dst) as usize;
                let counts: Vec<u64> = (t.groups[g].iter())
                    .map(|&p| count_paths(&t, &dist, t.ports[p as usize].peer, dst))
                    .collect();
                let w: Vec<u64> = t.weights[g].iter().map(|&w| w as u64).collect();
                let ratio = counts[0] / w[0];
                assert!(
                    counts.iter().zip(&w).all(|(&c, &w)| c == w * ratio),
                    "{u}->{dst}"
                );
                uneven += (w.iter().any(|&x| x != w[0])) as u32;
                // The schedule lists each port as often as its weight, the group first.
                let sched = t.group_ports(g as u32);
                assert_eq!(&sched[..t.groups[g].len()], &t.groups[g][..]);
                for (p, &w) in t.groups[g].iter().zip(&t.weights[g]) {
                    assert_eq!(sched.iter().filter(|&q| q == p).count() as u32, w);
                }
            }
        }
        assert!(uneven > 0);
        let (edge_pod1, edge_pod0) = (t.host_edge[16], t.host_edge[0]);
        let g = t.group_towards(edge_pod1, edge_pod0) as usize;
        assert_eq!(t.weights[g], vec![3, 4, 4, 4]);
        assert_eq!(t.group_ports(g as u32).len(), 15);
        // Reachability alone: every next hop once.
        t.equal_weights = true;
        t.compute_routes().unwrap();
        let g = t.group_towards(edge_pod1, edge_pod0);
        assert_eq!(t.weights[g as usize], vec![1, 1, 1, 1]);
        assert_eq!(t.group_ports(g), &t.groups[g as usize][..]);
    }
}
