//! Traffic matrices: generated (permutation, all-to-all, incast) or given as a
//! flow list. Every flow is checked before the run starts.

use crate::config::TrafficConfig;
use crate::error::{config_err, SimError, SimResult};
use crate::rng::derive_rng;
use crate::topology::Topology;
use crate::units::Time;
use rand::seq::SliceRandom;
use rand::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub start: Time,
}

/// Most flows one run may have. A run takes ~0.8 KB per flow with its Python results (1.05 M
/// flows: 0.99 GB peak), so this is ~7 GB; an all-to-all on 4,096 hosts (16.8 M flows) is
/// refused before it fills memory.
pub const MAX_FLOWS: u64 = 1 << 23;

pub fn generate(cfg: &TrafficConfig, topo: &Topology, seed: u64) -> SimResult<Vec<FlowSpec>> {
    let n = topo.n_hosts;
    let count = match cfg {
        TrafficConfig::AllToAll { .. } => n as u64 * (n as u64 - 1),
        TrafficConfig::Flows { src, .. } => src.len() as u64,
        _ => n as u64,
    };
    if count > MAX_FLOWS {
        return Err(config_err(
            "traffic",
            format!("{count} flows on {n} hosts exceeds the supported maximum of {MAX_FLOWS} flows per run"),
        ));
    }
    let flows = match cfg {
        TrafficConfig::Permutation { bytes, inter_pod } => {
            let dst = if *inter_pod {
                inter_pod_permutation(topo, seed)?
            } else {
                derangement(n, seed)?
            };
            (0..n)
                .map(|s| FlowSpec {
                    src: s,
                    dst: dst[s as usize],
                    bytes: *bytes,
                    start: Time::ZERO,
                })
                .collect()
        }
        TrafficConfig::AllToAll {
            bytes,
            staggered,
            shuffled,
        } => {
            // A host's NIC serves its flows round-robin in list order. In ascending
            // order every host sends to host 0, then all to host 1, ... (a rolling
            // incast); staggered, each round is a permutation. Shuffled, host `ring[i]`
            // stands in ring position i, so consecutive peers are rarely in one pod.
            let mut ring: Vec<u32> = (0..n).collect();
            if *shuffled {
                ring.shuffle(&mut derive_rng(seed, "traffic.all_to_all", 0));
            }
            let mut v = Vec::with_capacity((n as usize) * (n as usize - 1));
            for s in 0..n {
                for i in 1..n {
                    let dst = if *staggered {
                        (s + i) % n
                    } else {
                        i - (i <= s) as u32 // 0, 1, ..., n-1 without s
                    };
                    v.push(FlowSpec {
                        src: ring[s as usize],
                        dst: ring[dst as usize],
                        bytes: *bytes,
                        start: Time::ZERO,
                    });
                }
            }
            v
        }
        TrafficConfig::Incast {
            dst,
            senders,
            bytes,
        } => {
            if *dst >= n {
                return Err(config_err(
                    "traffic.dst",
                    format!("host {dst} does not exist (the topology has {n} hosts)"),
                ));
            }
            if *senders == 0 || *senders >= n {
                return Err(config_err(
                    "traffic.senders",
                    format!("must be between 1 and {} for {n} hosts", n - 1),
                ));
            }
            (0..n)
                .filter(|&s| s != *dst)
                .take(*senders as usize)
                .map(|s| FlowSpec {
                    src: s,
                    dst: *dst,
                    bytes: *bytes,
                    start: Time::ZERO,
                })
                .collect()
        }
        TrafficConfig::Flows {
            src,
            dst,
            bytes,
            start_ps,
        } => {
            let len = src.len();
            if dst.len() != len || bytes.len() != len || start_ps.len() != len {
                return Err(config_err(
                    "traffic",
                    "src, dst, bytes and start_ps must have the same length",
                ));
            }
            (0..len)
                .map(|i| FlowSpec {
                    src: src[i],
                    dst: dst[i],
                    bytes: bytes[i],
                    start: Time(start_ps[i]),
                })
                .collect()
        }
    };
    Ok(flows)
}

/// Every flow names two distinct hosts of the topology and carries bytes.
pub fn check(flows: &[FlowSpec], n_hosts: u32) -> SimResult<()> {
    for (index, f) in flows.iter().enumerate() {
        let bad = |field, message: String| {
            Err(SimError::BadFlow {
                index,
                field,
                message,
            })
        };
        if f.src >= n_hosts {
            return bad(
                "src",
                format!(
                    "is host {}, but the topology has hosts 0..{}",
                    f.src,
                    n_hosts - 1
                ),
            );
        }
        if f.dst >= n_hosts {
            return bad(
                "dst",
                format!(
                    "is host {}, but the topology has hosts 0..{}",
                    f.dst,
                    n_hosts - 1
                ),
            );
        }
        if f.src == f.dst {
            return bad(
                "dst",
                format!("equals src ({}): a host cannot send to itself", f.src),
            );
        }
        if f.bytes == 0 {
            return bad("bytes", "must be > 0".to_string());
        }
    }
    Ok(())
}

/// Uniform random permutation without fixed points (rejection sampling, ~e draws).
fn derangement(n: u32, seed: u64) -> SimResult<Vec<u32>> {
    if n < 2 {
        return Err(config_err(
            "traffic",
            "a permutation needs at least 2 hosts",
        ));
    }
    let mut rng = derive_rng(seed, "traffic.permutation", 0);
    let mut p: Vec<u32> = (0..n).collect();
    loop {
        p.shuffle(&mut rng);
        if p.iter().enumerate().all(|(i, &d)| i as u32 != d) {
            return Ok(p);
        }
    }
}

/// Greedy draws tried before the last one is repaired instead of redrawn. Most greedy draws
/// fail at the end (81 % on k = 8, every one on k = 64), so redrawing alone never ends on
/// large trees; repairing only the last keeps the earlier draws (all of k <= 8's seeds).
const INTER_POD_DRAWS: usize = 64;

/// Random permutation in which every host sends to a host in another pod: each source in
/// turn picks uniformly among the free destinations outside its pod. A source that finds
/// only its own pod's hosts left (on the last draw) takes one of them and swaps with a
/// random earlier source whose pod and destination are both elsewhere.
fn inter_pod_permutation(topo: &Topology, seed: u64) -> SimResult<Vec<u32>> {
    let pod_of: Vec<usize> = (0..topo.n_hosts as usize)
        .map(|h| topo.pod[topo.host_edge[h] as usize] as usize)
        .collect();
    draw_inter_pod(&pod_of, seed, INTER_POD_DRAWS)
}

/// The draw for hosts in pods `pod_of`, repairing the `draws`-th greedy draw.
fn draw_inter_pod(pod_of: &[usize], seed: u64, draws: usize) -> SimResult<Vec<u32>> {
    let n = pod_of.len();
    let n_pods = pod_of.iter().max().map_or(0, |&p| p + 1);
    let mut pod_size = vec![0usize; n_pods];
    for &p in pod_of {
        pod_size[p] += 1;
    }
    if n_pods < 2 {
        return Err(config_err(
            "traffic.inter_pod",
            "the topology has a single pod",
        ));
    }
    let largest = pod_size.iter().copied().max().unwrap_or(0);
    if 2 * largest > n {
        return Err(config_err(
            "traffic.inter_pod",
            format!(
                "needs every pod to hold at most half of the hosts (largest pod: {largest} of {n})"
            ),
        ));
    }
    let mut rng = derive_rng(seed, "traffic.permutation.inter_pod", 0);
    for attempt in 1..=draws {
        let mut free: Vec<u32> = (0..n as u32).collect();
        free.shuffle(&mut rng);
        // Each pod's positions in `free`, sorted: the k-th free destination outside a pod is
        // then found by bisection, not by listing them all: O(n log n) per draw.
        let mut at: Vec<Vec<usize>> = vec![Vec::new(); n_pods];
        for (i, &h) in free.iter().enumerate() {
            at[pod_of[h as usize]].push(i);
        }
        // Removes free[i] (swap_remove: the last entry moves to position i).
        let take = |i: usize, free: &mut Vec<u32>, at: &mut [Vec<usize>]| -> u32 {
            let last = free.len() - 1;
            let q = &mut at[pod_of[free[i] as usize]];
            q.remove(q.binary_search(&i).expect("position listed"));
            if i != last {
                let q = &mut at[pod_of[free[last] as usize]];
                q.remove(q.binary_search(&last).expect("position listed"));
                let to = q.partition_point(|&x| x < i);
                q.insert(to, i);
            }
            free.swap_remove(i)
        };
        let mut dst = vec![u32::MAX; n];
        let mut ok = true;
        for s in 0..n {
            let p = pod_of[s];
            let outside = free.len() - at[p].len();
            if outside == 0 {
                if attempt < draws {
                    ok = false;
                    break;
                }
                let d = take(rng.gen_range(0..free.len()), &mut free, &mut at);
                // n - 2 * largest + 1 >= 1 earlier sources qualify (pigeonhole on pod p).
                let swappable: Vec<usize> = (0..s)
                    .filter(|&t| pod_of[t] != p && pod_of[dst[t] as usize] != p)
                    .collect();
                let t = swappable[rng.gen_range(0..swappable.len())];
                dst[s] = dst[t];
                dst[t] = d;
                continue;
            }
            // The same draw as picking uniformly among the outside positions in index order.
            let k = rng.gen_range(0..outside);
            let (mut lo, mut hi) = (0, free.len() - 1);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let outside_upto = mid + 1 - at[p].partition_point(|&x| x <= mid);
                if outside_upto > k {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            dst[s] = take(lo, &mut free, &mut at);
        }
        if ok {
            return Ok(dst);
        }
    }
    unreachable!("the last draw is repaired, never abandoned")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::units::{Dur, Rate};

    /// Checks that `d` is a permutation in which every host leaves its pod.
    fn assert_inter_pod(pod_of: &[usize], d: &[u32]) {
        let mut seen = vec![false; pod_of.len()];
        for (s, &x) in d.iter().enumerate() {
            assert_ne!(pod_of[s], pod_of[x as usize], "host {s} -> {x}");
            assert!(!std::mem::replace(&mut seen[x as usize], true), "{x} twice");
        }
    }

    #[test]
    fn a_repaired_inter_pod_draw_is_valid_and_impossible_pods_are_refused() {
        // One draw only, so nearly every seed takes the repair (81 % of greedy draws fail
        // on k = 8 pods); uneven pods as well, the last holding exactly half the hosts, so
        // its sources often find only one earlier source to swap with.
        let k8: Vec<usize> = (0..128).map(|h| h / 16).collect();
        let uneven: Vec<usize> = [1, 1, 2, 3, 3, 3].into_iter().chain([0; 6]).collect();
        for pods in [&k8, &uneven] {
            let mut distinct = std::collections::HashSet::new();
            for seed in 0..200 {
                let d = draw_inter_pod(pods, seed, 1).unwrap();
                assert_inter_pod(pods, &d);
                distinct.insert(d);
            }
            assert!(distinct.len() > 20, "draws vary with the seed");
        }
        // A pod holding more than half the hosts has nowhere to send them all.
        let e = draw_inter_pod(&[0, 0, 0, 1], 1, 64)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("traffic.inter_pod") && e.contains("largest pod: 3 of 4"),
            "{e}"
        );
        let e = draw_inter_pod(&[0, 0], 1, 64).unwrap_err().to_string();
        assert!(e.contains("single pod"), "{e}");
    }

    #[test]
    fn permutations_are_derangements_and_all_to_all_rounds_are_permutations() {
        let topo =
            Topology::build(&TopologyConfig::fat_tree(8), Rate::from_gbps(800.0), Dur(1)).unwrap();
        for inter_pod in [false, true] {
            let f = generate(
                &TrafficConfig::Permutation {
                    bytes: 1,
                    inter_pod,
                },
                &topo,
                7,
            )
            .unwrap();
            // One flow from every host, to every host once: a derangement.
            assert_eq!(f.len(), 128);
            assert!(f.iter().enumerate().all(|(i, x)| x.src == i as u32));
            let mut seen = vec![false; 128];
            for x in &f {
                assert_ne!(x.src, x.dst);
                assert!(!seen[x.dst as usize]);
                seen[x.dst as usize] = true;
                if inter_pod {
                    assert_ne!(
                        topo.pod[topo.host_edge[x.src as usize] as usize],
                        topo.pod[topo.host_edge[x.dst as usize] as usize]
                    );
                }
            }
        }
        for staggered in [false, true] {
            let a = generate(
                &TrafficConfig::AllToAll {
                    bytes: 5,
                    staggered,
                    shuffled: false,
                },
                &topo,
                0,
            )
            .unwrap();
            assert_eq!(a.len(), 128 * 127);
            let mut pairs = std::collections::HashSet::new();
            for (k, x) in a.iter().enumerate() {
                assert_eq!(x.src as usize, k / 127);
                assert!(x.src != x.dst && pairs.insert((x.src, x.dst)));
                if !staggered {
                    assert!(k % 127 == 0 || a[k - 1].dst < x.dst, "ascending");
                }
            }
            if !staggered {
                continue;
            }
            // Staggered: the i-th flow of every host goes to a different host, so each
            // round of the NICs' round-robin is a permutation, not an incast.
            for i in 0..127 {
                let mut dsts: Vec<u32> = (0..128).map(|s| a[s * 127 + i].dst).collect();
                dsts.sort_unstable();
                assert_eq!(dsts, (0..128).collect::<Vec<u32>>(), "round {i}");
            }
        }
    }

    #[test]
    fn a_shuffled_all_to_all_is_a_seeded_ring_of_every_pair() {
        let topo =
            Topology::build(&TopologyConfig::fat_tree(8), Rate::from_gbps(800.0), Dur(1)).unwrap();
        let ata = |staggered, seed| {
            let cfg = TrafficConfig::AllToAll {
                bytes: 5,
                staggered,
                shuffled: true,
            };
            generate(&cfg, &topo, seed).unwrap()
        };
        for staggered in [false, true] {
            let a = ata(staggered, 7);
            assert_eq!(a, ata(staggered, 7), "deterministic given the seed");
            assert_ne!(a, ata(staggered, 8), "another seed, another ring");
            let pairs: std::collections::HashSet<_> = a.iter().map(|x| (x.src, x.dst)).collect();
            assert_eq!(pairs.len(), 128 * 127);
            assert!(a.iter().all(|x| x.src != x.dst));
            // Host `ring[p]` stands at ring position p: each host's list starts after it
            // (staggered) or at the ring's start, and runs on around the same ring.
            let ring: Vec<u32> = (0..128).map(|p| a[p * 127].src).collect();
            let pos = |h: u32| ring.iter().position(|&r| r == h).unwrap();
            for (k, x) in a.iter().enumerate() {
                let (p, i) = (k / 127, k % 127 + 1);
                let expected = if staggered {
                    (p + i) % 128
                } else {
                    i - (i <= p) as usize
                };
                assert_eq!(pos(x.dst), expected, "flow {k}");
            }
            // A shuffled ring scatters pods: of 127 consecutive pairs of positions, an
            // ascending ring of k = 8 has 120 in one pod, a shuffled one about 127 / 8.
            let same_pod = (0..127)
                .filter(|&p| {
                    topo.pod[topo.host_edge[ring[p] as usize] as usize]
                        == topo.pod[topo.host_edge[ring[p + 1] as usize] as usize]
                })
                .count();
            assert!(
                same_pod < 40,
                "{same_pod} consecutive ring positions share a pod"
            );
        }
    }
}
