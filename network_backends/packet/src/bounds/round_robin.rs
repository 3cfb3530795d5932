//! The round-robin term of the lower bound: what a host NIC that serves its flows in
//! strict round robin must have sent by each flow's last send.

use super::*;

/// Per host, the most that the round robin of its NIC adds to its ACK work (from its first
/// start, minus a gap; None where it sends nothing): over its flows f, the data it must
/// have sent by the time f has made its n_f-th send, plus `last_data_round_trip` over f's
/// own path. A NIC in strict round robin (its flows in the order they start, the order kept
/// as flows end, and none held back while it has a packet due) serves every flow g once
/// between two turns of f, so by f's n_f-th send a flow g started before f (or at the same
/// time and listed before it) has made min(n_g, n_f) sends, and one started with f and
/// listed after it min(n_g, n_f - 1); a flow started after f may come wholly after it. The
/// first k sends of a flow are at least its first k frames (only its last may be short, and
/// it is sent after all the others). f ends no sooner than its n_f-th send and a round trip:
/// at least n_f sends must be delivered (and ACKed) for n_f packets or symbols.
///
/// With all its flows started at once and of one size, the last flow in a host's list gets
/// all the host's data: the host's work ends a round trip to that flow's destination later,
/// not one to its nearest peer (as in `last_data_round_trip`'s order-free use). In an
/// ascending all-to-all, host 0's last peer is in another pod. App. B evaluates a NIC's
/// schedule the same way for a permutation.
pub(super) fn round_robin_ends(
    topo: &Topology,
    flows: &[FlowSpec],
    starts: &[Time],
    in_slot: &[u64],
    t: &FrameTiming,
) -> Vec<Option<u64>> {
    let n = topo.n_hosts as usize;
    let full_slot = t.data(t.payload).0 + t.gap.0;
    let mut by_host: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, f) in flows.iter().enumerate() {
        by_host[f.src as usize].push(i);
    }
    let mut ends = vec![None; n];
    for (h, mine) in by_host.iter_mut().enumerate() {
        if mine.is_empty() {
            continue;
        }
        // The NIC's order: by actual start, then as listed (start events run in FIFO order).
        mine.sort_by_key(|&i| (starts[i], i));
        let sent: Vec<FlowSends> = mine
            .iter()
            .map(|&i| FlowSends::new(t, flows[i].bytes, full_slot))
            .collect();
        let mut counts: Vec<u64> = sent.iter().map(|s| s.n).collect();
        counts.sort_unstable();
        counts.dedup();
        let rank = |c: u64| counts.partition_point(|&x| x <= c); // ranks 1..: count <= c
        let mut started = Fenwick::new(counts.len());
        let mut later_in_group = Fenwick::new(counts.len());
        let mut same_n_last_slots = vec![0u64; counts.len() + 1];
        let mut best = 0u64;
        let mut group = 0;
        while group < mine.len() {
            let end = group
                + mine[group..]
                    .iter()
                    .take_while(|&&i| starts[i] == starts[mine[group]])
                    .count();
            for s in &sent[group..end] {
                started.add(rank(s.n), 1, s.data);
            }
            // Listed after f within its group: walked backwards, those already seen.
            for k in (group..end).rev() {
                let f = &sent[k];
                let r = rank(f.n);
                let (below, data_below) = started.prefix(r);
                let above = started.total_count() - below;
                // Every flow started by f's start (f included), capped at n_f sends ...
                let mut data = data_below + above * f.n * full_slot;
                // ... less the n_f-th send of those listed after f in its group.
                let (later_below, _) = later_in_group.prefix(r);
                let later_above = later_in_group.total_count() - later_below;
                data -= later_above * full_slot + same_n_last_slots[r];
                let i = mine[k];
                let hops = topo.hops_between(flows[i].src, flows[i].dst);
                let smallest = t.data(t.packets(flows[i].bytes).1);
                let trip = t.one_way(smallest, hops).0 - smallest.0 + t.one_way(t.ack, hops).0;
                best = best.max(data + last_data_round_trip(t, trip, in_slot[h]));
                later_in_group.add(r, 1, 0);
                same_n_last_slots[r] += f.last_slot;
            }
            later_in_group.clear();
            for s in &sent[group..end] {
                same_n_last_slots[rank(s.n)] = 0;
            }
            group = end;
        }
        ends[h] = Some(best);
    }
    ends
}

/// A flow's frames on its NIC: how many, their slots in all, and its last (maybe short) one's.
struct FlowSends {
    n: u64,
    data: u64,
    last_slot: u64,
}

impl FlowSends {
    fn new(t: &FrameTiming, bytes: u64, full_slot: u64) -> FlowSends {
        let (n, last_payload) = t.packets(bytes);
        let last_slot = t.data(last_payload).0 + t.gap.0;
        FlowSends {
            n,
            data: (n - 1) * full_slot + last_slot,
            last_slot,
        }
    }
}

/// Counts and sums by rank (1-based), with prefix queries: a binary indexed tree.
struct Fenwick {
    count: Vec<u64>,
    sum: Vec<u64>,
    touched: Vec<usize>,
}

impl Fenwick {
    fn new(ranks: usize) -> Fenwick {
        Fenwick {
            count: vec![0; ranks + 1],
            sum: vec![0; ranks + 1],
            touched: Vec::new(),
        }
    }

    fn add(&mut self, rank: usize, count: u64, sum: u64) {
        let mut i = rank;
        while i < self.count.len() {
            self.count[i] += count;
            self.sum[i] += sum;
            self.touched.push(i);
            i += i & i.wrapping_neg();
        }
    }

    /// (count, sum) over ranks 1..=rank.
    fn prefix(&self, rank: usize) -> (u64, u64) {
        let (mut c, mut s, mut i) = (0, 0, rank);
        while i > 0 {
            c += self.count[i];
            s += self.sum[i];
            i -= i & i.wrapping_neg();
        }
        (c, s)
    }

    fn total_count(&self) -> u64 {
        self.prefix(self.count.len() - 1).0
    }

    fn clear(&mut self) {
        for i in self.touched.drain(..) {
            self.count[i] = 0;
            self.sum[i] = 0;
        }
    }
}
