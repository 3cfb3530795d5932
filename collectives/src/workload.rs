//! The workload layer's input: each rank's ET graph (as the Python reader hands it
//! over, dependencies already turned into node indices), and its static checks:
//! dependency cycles, collectives matched across the ranks of a group (same sequence,
//! same type and size), sends matched with receives.

use crate::algorithms::CollectiveKind;
use crate::error::{SystemError, SystemResult};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Runs on the rank's compute unit, one at a time.
    Compute,
    Collective,
    Send,
    Recv,
    /// Remote memory load/store: a delay that does not occupy the compute unit.
    Memory,
    /// Metadata and the like: done as soon as it is ready.
    Instant,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct NodeInput {
    pub id: u64,
    pub kind: NodeKind,
    /// Indices (into this rank's node list) of the nodes this one waits for.
    #[serde(default)]
    pub deps: Vec<u32>,
    #[serde(default)]
    pub duration_ps: u64,
    /// Compute: runs on the CPU (Chakra's `is_cpu_op`), not the GPU.
    #[serde(default)]
    pub cpu: bool,
    #[serde(default)]
    pub collective: Option<CollectiveKind>,
    #[serde(default)]
    pub bytes: u64,
    /// Index into `WorkloadInput::groups` (0 = every rank).
    #[serde(default)]
    pub group: u32,
    /// Send: destination rank; receive: source rank.
    #[serde(default)]
    pub peer: u32,
    #[serde(default)]
    pub tag: i64,
    /// All-to-all-v: bytes this rank sends to each position of the group.
    #[serde(default)]
    pub split_bytes: Option<Vec<u64>>,
    /// All-to-all-v: bytes this rank expects from each position of the group.
    #[serde(default)]
    pub recv_split_bytes: Option<Vec<u64>>,
    /// Collective: the network dimensions it spans (Chakra's `involved_dim`; absent: all).
    /// Honoured on the world group only, as ASTRA-sim honours it without a comm group.
    #[serde(default)]
    pub involved_dim: Option<Vec<bool>>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct RankInput {
    pub file: String,
    pub nodes: Vec<NodeInput>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct WorkloadInput {
    pub ranks: Vec<RankInput>,
    /// Member ranks of every communicator group, in group-position order.
    pub groups: Vec<Vec<u32>>,
    /// Group names as the traces spell them (for reports).
    #[serde(default)]
    pub group_names: Vec<String>,
}

/// One collective as all members of its group see it.
#[derive(Clone, Debug)]
pub struct Instance {
    pub group: u32,
    /// Its place in the group's sequence of collectives.
    pub seq: u32,
    pub kind: CollectiveKind,
    pub bytes: u64,
    /// All-to-all-v: n x n bytes, row = sender position.
    pub matrix: Option<Vec<u64>>,
    /// `involved_dim` of a collective on the world group in rank order (else None).
    pub involved: Option<Vec<bool>>,
    /// Node index of this collective on each member (by group position).
    pub nodes: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
pub struct PointToPoint {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub send_node: u32,
    pub recv_node: u32,
}

/// Which instance or point-to-point pair a node belongs to.
pub const NONE: u32 = u32::MAX;

pub struct Matched {
    pub instances: Vec<Instance>,
    pub p2p: Vec<PointToPoint>,
    /// Per rank, per node: instance index (collectives) or p2p index (send/recv), else NONE.
    pub link: Vec<Vec<u32>>,
}

fn err(w: &WorkloadInput, rank: u32, node: u32, message: String) -> SystemError {
    let r = &w.ranks[rank as usize];
    SystemError::Workload {
        file: r.file.clone(),
        node: r.nodes[node as usize].id,
        message,
    }
}

/// Checks the graphs and matches communication across ranks.
pub fn check_and_match(w: &WorkloadInput) -> SystemResult<Matched> {
    let n_ranks = w.ranks.len() as u32;
    if w.groups.is_empty() {
        return Err(SystemError::Config {
            field: "groups".into(),
            message: "no communicator groups (group 0 must list every rank)".into(),
        });
    }
    for (g, members) in w.groups.iter().enumerate() {
        let mut seen = vec![false; n_ranks as usize];
        for &r in members {
            if r >= n_ranks || std::mem::replace(&mut seen[r as usize], true) {
                return Err(SystemError::Config {
                    field: format!("groups[{g}]"),
                    message: format!("rank {r} is out of range (the workload has {n_ranks} ranks) or listed twice"),
                });
            }
        }
    }
    for r in 0..n_ranks {
        check_graph(w, r)?;
    }
    let mut link: Vec<Vec<u32>> = w.ranks.iter().map(|r| vec![NONE; r.nodes.len()]).collect();
    let instances = match_collectives(w, &mut link)?;
    let p2p = match_point_to_point(w, &mut link)?;
    Ok(Matched {
        instances,
        p2p,
        link,
    })
}

/// Dependencies in range and acyclic (Kahn's algorithm; a leftover node lies on a cycle).
fn check_graph(w: &WorkloadInput, r: u32) -> SystemResult<()> {
    let nodes = &w.ranks[r as usize].nodes;
    let n = nodes.len();
    let mut indegree = vec![0u32; n];
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        for &d in &node.deps {
            if d as usize >= n || d as usize == i {
                return Err(err(
                    w,
                    r,
                    i as u32,
                    format!("dependency index {d} does not name another node of this trace"),
                ));
            }
            indegree[i] += 1;
            succ[d as usize].push(i as u32);
        }
        if matches!(node.kind, NodeKind::Send | NodeKind::Recv) && node.peer >= w.ranks.len() as u32
        {
            return Err(err(
                w,
                r,
                i as u32,
                format!(
                    "peer rank {} does not exist (the workload has {} ranks)",
                    node.peer,
                    w.ranks.len()
                ),
            ));
        }
    }
    let mut queue: VecDeque<u32> = (0..n as u32)
        .filter(|&i| indegree[i as usize] == 0)
        .collect();
    let mut done = 0;
    while let Some(i) = queue.pop_front() {
        done += 1;
        for &s in &succ[i as usize] {
            indegree[s as usize] -= 1;
            if indegree[s as usize] == 0 {
                queue.push_back(s);
            }
        }
    }
    if done < n {
        // Walk backwards along unfinished dependencies until a node repeats: that is a cycle.
        let mut at = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0) as u32;
        let mut path = vec![at];
        loop {
            let next = nodes[at as usize]
                .deps
                .iter()
                .copied()
                .find(|&d| indegree[d as usize] > 0)
                .unwrap_or(at);
            if let Some(pos) = path.iter().position(|&p| p == next) {
                let ids: Vec<String> = path[pos..]
                    .iter()
                    .rev()
                    .map(|&p| nodes[p as usize].id.to_string())
                    .collect();
                return Err(err(
                    w,
                    r,
                    path[pos],
                    format!("dependency cycle: {} -> {}", ids.join(" -> "), ids[0]),
                ));
            }
            path.push(next);
            at = next;
        }
    }
    Ok(())
}

fn match_collectives(w: &WorkloadInput, link: &mut [Vec<u32>]) -> SystemResult<Vec<Instance>> {
    // Per (group, rank): that rank's collectives on the group, in node order.
    let mut seqs: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for (r, rank) in w.ranks.iter().enumerate() {
        for (i, node) in rank.nodes.iter().enumerate() {
            if node.kind != NodeKind::Collective {
                continue;
            }
            let g = node.group;
            let Some(members) = w.groups.get(g as usize) else {
                return Err(err(
                    w,
                    r as u32,
                    i as u32,
                    format!(
                        "communicator group index {g} is not defined ({} groups)",
                        w.groups.len()
                    ),
                ));
            };
            if !members.contains(&(r as u32)) {
                return Err(err(
                    w,
                    r as u32,
                    i as u32,
                    format!(
                        "rank {r} is not a member of its collective's group {}",
                        group_label(w, g)
                    ),
                ));
            }
            if node.collective.is_none() {
                return Err(err(
                    w,
                    r as u32,
                    i as u32,
                    "collective node without a collective type (field `comm_type`)".into(),
                ));
            }
            seqs.entry((g, r as u32)).or_default().push(i as u32);
        }
    }
    let mut instances = Vec::new();
    for (g, members) in w.groups.iter().enumerate() {
        let g = g as u32;
        let lists: Vec<&[u32]> = members
            .iter()
            .map(|&r| seqs.get(&(g, r)).map_or(&[][..], |v| v.as_slice()))
            .collect();
        let longest = (0..members.len())
            .min_by_key(|&p| std::cmp::Reverse(lists[p].len()))
            .unwrap_or(0);
        for p in 0..members.len() {
            if lists[p].len() != lists[longest].len() {
                let (r_long, k) = (members[longest], lists[p].len());
                return Err(err(
                    w,
                    r_long,
                    lists[longest][k],
                    format!(
                        "collective #{k} on group {} has no counterpart on rank {} ({}), which issues only {k} collectives on that group",
                        group_label(w, g),
                        members[p],
                        w.ranks[members[p] as usize].file
                    ),
                ));
            }
        }
        let count = lists.first().map_or(0, |l| l.len());
        for k in 0..count {
            let first = &w.ranks[members[0] as usize].nodes[lists[0][k] as usize];
            let mut matrix: Option<Vec<u64>> = None;
            for (p, &r) in members.iter().enumerate() {
                let node = &w.ranks[r as usize].nodes[lists[p][k] as usize];
                // All-to-all-v: each rank sends its own total; its split sizes say what.
                let sizes_may_differ = node.split_bytes.is_some() && first.split_bytes.is_some();
                if node.involved_dim != first.involved_dim {
                    return Err(err(
                        w,
                        r,
                        lists[p][k],
                        format!(
                            "collective #{k} on group {} has involved_dim {:?} here but {:?} on rank {} ({} node {})",
                            group_label(w, g),
                            node.involved_dim,
                            first.involved_dim,
                            members[0],
                            w.ranks[members[0] as usize].file,
                            first.id
                        ),
                    ));
                }
                if node.collective != first.collective
                    || (node.bytes != first.bytes && !sizes_may_differ)
                {
                    return Err(err(
                        w,
                        r,
                        lists[p][k],
                        format!(
                            "collective #{k} on group {} is {} of {} bytes here but {} of {} bytes on rank {} ({} node {})",
                            group_label(w, g),
                            kind_name(node.collective),
                            node.bytes,
                            kind_name(first.collective),
                            first.bytes,
                            members[0],
                            w.ranks[members[0] as usize].file,
                            first.id
                        ),
                    ));
                }
                if let Some(row) = &node.split_bytes {
                    if row.len() != members.len() {
                        return Err(err(w, r, lists[p][k], format!("comm_split_sizes has {} entries, expected one per group member ({})", row.len(), members.len())));
                    }
                    matrix.get_or_insert_with(|| vec![0; members.len() * members.len()])
                        [p * members.len()..(p + 1) * members.len()]
                        .copy_from_slice(row);
                } else if matrix.is_some() {
                    return Err(err(
                        w,
                        r,
                        lists[p][k],
                        "all-to-all-v: this rank gives no comm_split_sizes while others do".into(),
                    ));
                }
                link[r as usize][lists[p][k] as usize] = instances.len() as u32;
            }
            if matrix.is_some()
                && w.ranks[members[0] as usize].nodes[lists[0][k] as usize]
                    .split_bytes
                    .is_none()
            {
                return Err(err(
                    w,
                    members[0],
                    lists[0][k],
                    "all-to-all-v: this rank gives no comm_split_sizes while others do".into(),
                ));
            }
            check_receive_splits(w, members, &lists, k, matrix.as_deref())?;
            instances.push(Instance {
                group: g,
                seq: k as u32,
                kind: first.collective.expect("checked above"),
                // All-to-all-v: the largest sender's buffer (what chunking cuts).
                bytes: match &matrix {
                    Some(m) => m
                        .chunks(members.len())
                        .map(|row| row.iter().sum::<u64>())
                        .max()
                        .unwrap_or(0),
                    None => first.bytes,
                },
                matrix,
                involved: first.involved_dim.clone().filter(|_| {
                    members.iter().enumerate().all(|(i, &r)| i == r as usize)
                        && members.len() == w.ranks.len()
                }),
                nodes: (0..members.len()).map(|p| lists[p][k]).collect(),
            });
        }
    }
    Ok(instances)
}

fn match_point_to_point(
    w: &WorkloadInput,
    link: &mut [Vec<u32>],
) -> SystemResult<Vec<PointToPoint>> {
    // (src, dst, tag) -> node indices of the sends on src / the receives on dst, in node order.
    let mut sends: BTreeMap<(u32, u32, i64), VecDeque<u32>> = BTreeMap::new();
    let mut recvs: BTreeMap<(u32, u32, i64), VecDeque<u32>> = BTreeMap::new();
    for (r, rank) in w.ranks.iter().enumerate() {
        for (i, node) in rank.nodes.iter().enumerate() {
            match node.kind {
                NodeKind::Send => sends
                    .entry((r as u32, node.peer, node.tag))
                    .or_default()
                    .push_back(i as u32),
                NodeKind::Recv => recvs
                    .entry((node.peer, r as u32, node.tag))
                    .or_default()
                    .push_back(i as u32),
                _ => {}
            }
        }
    }
    let mut pairs = Vec::new();
    for (&(src, dst, tag), list) in &sends {
        let mut matching = recvs.remove(&(src, dst, tag)).unwrap_or_default();
        for &s in list {
            let Some(rv) = matching.pop_front() else {
                return Err(err(w, src, s, format!("send to rank {dst} (tag {tag}) has no matching receive in {}: it would wait forever", w.ranks[dst as usize].file)));
            };
            let bytes = w.ranks[src as usize].nodes[s as usize].bytes;
            let recv_bytes = w.ranks[dst as usize].nodes[rv as usize].bytes;
            if recv_bytes != bytes && recv_bytes != 0 {
                return Err(err(w, dst, rv, format!("receive of {recv_bytes} bytes from rank {src} (tag {tag}) matches a send of {bytes} bytes")));
            }
            link[src as usize][s as usize] = pairs.len() as u32;
            link[dst as usize][rv as usize] = pairs.len() as u32;
            pairs.push(PointToPoint {
                src,
                dst,
                bytes,
                send_node: s,
                recv_node: rv,
            });
        }
        if let Some(&rv) = matching.front() {
            return Err(err(w, dst, rv, format!("receive from rank {src} (tag {tag}) has no matching send in {}: it would wait forever", w.ranks[src as usize].file)));
        }
    }
    if let Some((&(src, dst, tag), list)) = recvs.iter().next() {
        return Err(err(w, dst, list[0], format!("receive from rank {src} (tag {tag}) has no matching send in {}: it would wait forever", w.ranks[src as usize].file)));
    }
    Ok(pairs)
}

/// All-to-all-v: what each rank expects from a peer (`comm_recv_split_sizes`, where the
/// trace gives it) must be what that peer sends it (its `comm_split_sizes`).
fn check_receive_splits(
    w: &WorkloadInput,
    members: &[u32],
    lists: &[&[u32]],
    k: usize,
    matrix: Option<&[u64]>,
) -> SystemResult<()> {
    let n = members.len();
    for (p, &r) in members.iter().enumerate() {
        let node = &w.ranks[r as usize].nodes[lists[p][k] as usize];
        let Some(expected) = &node.recv_split_bytes else {
            continue;
        };
        let Some(matrix) = matrix else {
            return Err(err(
                w,
                r,
                lists[p][k],
                "comm_recv_split_sizes without comm_split_sizes: an all-to-all-v gives both".into(),
            ));
        };
        if expected.len() != n {
            return Err(err(
                w,
                r,
                lists[p][k],
                format!(
                    "comm_recv_split_sizes has {} entries, expected one per group member ({n})",
                    expected.len()
                ),
            ));
        }
        for (a, &want) in expected.iter().enumerate() {
            let sent = matrix[a * n + p];
            if sent != want {
                let sender = &w.ranks[members[a] as usize];
                return Err(err(w, r, lists[p][k], format!(
                    "all-to-all-v: this rank expects {want} bytes from rank {} (comm_recv_split_sizes), \
                     but that rank sends it {sent} ({} node {}, comm_split_sizes)",
                    members[a],
                    sender.file,
                    sender.nodes[lists[a][k] as usize].id
                )));
            }
        }
    }
    Ok(())
}

pub fn group_label(w: &WorkloadInput, g: u32) -> String {
    match w.group_names.get(g as usize) {
        Some(name) if !name.is_empty() => format!("`{name}`"),
        _ => format!("#{g}"),
    }
}

fn kind_name(k: Option<CollectiveKind>) -> &'static str {
    k.map_or("?", |k| k.name())
}
