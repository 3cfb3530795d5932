//! Lower bounds on completion time, computed exactly in picoseconds.
//!
//! - One flow on an idle fabric: its packets pipelined store-and-forward over H
//!   links, then the last ACK's way back.
//! - Host link bounds (the all-to-all bound, OFAN paper §5 "propagation + host
//!   serialization"): a host's NIC must serialize every data frame it sends *and*
//!   every ACK frame it returns; then its last data frame still has to reach its
//!   destination and be ACKed (a round trip), during which an ACK-first NIC can only
//!   send ACKs for what arrives meanwhile. Likewise the link down to a host carries
//!   every frame addressed to it (an incast's bound).
//! - Permutation (OFAN paper App. B): every host both sends and receives one flow,
//!   so after the first i1 data packets its NIC interleaves data with the ACKs it
//!   owes. We evaluate that contention-free schedule exactly, packet by packet,
//!   instead of the appendix's closed-form recurrence (see README, "Lower bounds").

use crate::config::SimConfig;
use crate::topology::Topology;
use crate::traffic::FlowSpec;
use crate::units::{Dur, Rate, Time};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug)]
pub struct FrameTiming {
    pub rate: Rate,
    pub payload: u32,
    pub header: u32,
    pub gap: Dur,
    pub ack: Dur,
    pub link: Dur,
    pub switch: Dur,
}

impl FrameTiming {
    pub fn from_config(cfg: &SimConfig) -> FrameTiming {
        let rate = Rate::from_gbps(cfg.link.rate_gbps);
        FrameTiming {
            rate,
            payload: cfg.packet.payload_bytes,
            header: cfg.packet.header_bytes,
            gap: rate.serialization(cfg.packet.gap_bytes as u64),
            ack: rate.serialization(cfg.packet.ack_bytes as u64),
            link: Dur::from_ns_f64(cfg.link.latency_ns),
            switch: Dur::from_ns_f64(cfg.switch.latency_ns),
        }
    }

    pub fn data(&self, payload: u32) -> Dur {
        self.rate.serialization((payload + self.header) as u64)
    }

    /// A `bytes` message's packets: how many, and the last one's payload (all the others
    /// are full).
    pub fn packets(&self, bytes: u64) -> (u64, u32) {
        let n = bytes.div_ceil(self.payload as u64).max(1);
        (n, (bytes - (n - 1) * self.payload as u64) as u32)
    }

    /// One-way latency of a frame over `hops` links, store-and-forward.
    fn one_way(&self, ser: Dur, hops: u32) -> Dur {
        Dur(hops as u64 * (ser.0 + self.link.0) + (hops as u64 - 1) * self.switch.0)
    }

    /// Round trip of a full data packet and its ACK over `hops` links each way.
    pub fn base_rtt(&self, hops: u32) -> Dur {
        self.one_way(self.data(self.payload), hops) + self.one_way(self.ack, hops)
    }

    /// Bandwidth-delay product in full data packets.
    pub fn bdp_packets(&self, hops: u32) -> u32 {
        let per = self.data(self.payload).0 + self.gap.0;
        self.base_rtt(hops).0.div_ceil(per) as u32
    }
}

/// Completion time of one flow alone on an idle fabric, over paths of `hops` links. Its
/// frames leave the NIC back to back and meet again on the link into the destination;
/// in between, a spraying scheme may send a short last frame another way, past the one
/// ahead of it, so nothing is assumed to wait there. The last link serves frames in the
/// order they can reach it, which finishes soonest. With frames of one size (or on one
/// path, where the short one cannot pass) this is the exact idle FCT.
pub fn single_flow_fct(t: &FrameTiming, bytes: u64, hops: u32) -> Dur {
    let (n, last_payload) = t.packets(bytes);
    let (full, last) = (t.data(t.payload).0, t.data(last_payload).0);
    let before_last_link = |ser: u64| (hops as u64 - 1) * (ser + t.link.0 + t.switch.0);
    // Full frames reach the last link exactly one frame time apart, as it frees: it is busy
    // from the first one on. On one server with release times, serving in release order
    // ends at max over frames j of (release_j + the work released at or after it), here
    // either the first full frame's or the last frame's term.
    let (step, tail) = (full + t.gap.0, last + t.gap.0);
    let r_last = (n - 1) * step + before_last_link(last);
    let end = if n == 1 {
        r_last + tail
    } else {
        let r0 = before_last_link(full);
        // Full frames j (of n - 1) released at or after `at`: r0 + j * step >= at.
        let fulls_after = |at: u64| (n - 1).saturating_sub(at.saturating_sub(r0).div_ceil(step));
        let from_first = r0 + (n - 1) * step + if r_last >= r0 { tail } else { 0 };
        from_first.max(r_last + tail + fulls_after(r_last) * step)
    };
    Dur(end - t.gap.0 + t.link.0) + t.one_way(t.ack, hops)
}

/// How a host NIC orders the data it sends and the ACKs it owes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NicPolicy {
    /// Alternate data and ACKs while both are pending (the appendix's assumption).
    RoundRobin,
    /// ACKs first (what the engine's NIC does).
    AckFirst,
}

/// App. B: two symmetric hosts each send `bytes` to the other over `hops` links and
/// ACK every packet they receive; nothing queues in the fabric. Returns the time the
/// last ACK reaches its sender.
pub fn symmetric_exchange_cct(t: &FrameTiming, bytes: u64, hops: u32, policy: NicPolicy) -> Dur {
    symmetric_exchange(t, bytes, hops, policy).0
}

/// The exchange's CCT, and how many data packets each host sends before its first ACK
/// (the appendix's i1, Eq. 6).
fn symmetric_exchange(t: &FrameTiming, bytes: u64, hops: u32, policy: NicPolicy) -> (Dur, u64) {
    let (m, last_payload) = t.packets(bytes);
    let size = |i: u64| t.data(if i + 1 < m { t.payload } else { last_payload });
    // When our data packets not yet ACKed reach the peer, in time order (memory: about a
    // BDP of packets, whatever the message size).
    let mut pending: VecDeque<u64> = VecDeque::new();
    let (mut now, mut sent, mut acked) = (0u64, 0u64, 0u64);
    let mut last_ack_start = 0u64;
    let mut ack_turn = false;
    let mut data_before_first_ack = 0;
    while acked < m {
        // By symmetry the peer's data reaches us exactly when ours reaches it.
        let ready = pending.partition_point(|&a| a <= now);
        let send_ack = ready > 0 && (sent == m || policy == NicPolicy::AckFirst || ack_turn);
        if send_ack {
            if acked == 0 {
                data_before_first_ack = sent;
            }
            last_ack_start = now;
            acked += 1;
            pending.pop_front();
            now += t.ack.0 + t.gap.0;
            ack_turn = false;
        } else if sent < m {
            let ser = size(sent);
            // A short last packet may pass the one ahead on another path (see
            // `single_flow_fct`): keep arrivals in time order, not sending order.
            let arrive = now + t.one_way(ser, hops).0;
            let at = pending.partition_point(|&a| a <= arrive);
            pending.insert(at, arrive);
            sent += 1;
            now += ser.0 + t.gap.0;
            ack_turn = true;
        } else {
            now = pending[0]; // idle until the next data packet arrives
        }
    }
    (
        Dur(last_ack_start) + t.one_way(t.ack, hops),
        data_before_first_ack,
    )
}

/// The lower bound on the completion time of all `flows` (absolute time), counted from
/// their requested starts. `nic_starts`, when given, are the times the flows actually start
/// at NICs that serve their flows in strict round robin (no flow with a packet due is ever
/// held back): the bound then also follows that order (`round_robin_ends`).
pub fn cct_lower_bound(
    topo: &Topology,
    flows: &[FlowSpec],
    nic_starts: Option<&[Time]>,
    t: &FrameTiming,
) -> Time {
    let mut bound = Time::ZERO;
    for f in flows {
        bound = bound.max(f.start + single_flow_fct(t, f.bytes, topo.hops_between(f.src, f.dst)));
    }
    // Host links, both ways. Out: all data frames the host sends and all ACK frames it
    // returns, then the last frame still crosses >= two links. In: all data frames it
    // receives and all ACKs it gets back, none before the earliest a frame can reach the
    // host's link (a flow's first packet, or an ACK at best, sent at its start, then a link
    // and a switch); the last of them crosses that link too.
    let n = topo.n_hosts as usize;
    let (mut busy_out, mut busy_in, mut acks_out) = (vec![0u64; n], vec![0u64; n], vec![0u64; n]);
    let (mut first_out, mut first_in) = (vec![u64::MAX; n], vec![u64::MAX; n]);
    // Per host: the shortest round trip left once its NIC has sent a flow's smallest
    // frame, and the shortest slot a data frame addressed to it takes on its link.
    let (mut trip, mut in_slot) = (vec![u64::MAX; n], vec![u64::MAX; n]);
    for f in flows {
        let (n, last_payload) = t.packets(f.bytes);
        let data = (n - 1) * (t.data(t.payload).0 + t.gap.0) + t.data(last_payload).0 + t.gap.0;
        let acks = n * (t.ack.0 + t.gap.0);
        let (s, d) = (f.src as usize, f.dst as usize);
        busy_out[s] += data;
        busy_in[d] += data;
        busy_out[d] += acks;
        acks_out[d] += acks;
        busy_in[s] += acks;
        let first_packet = t.data(if n > 1 { t.payload } else { last_payload }).0;
        first_out[s] = first_out[s].min(f.start.0);
        first_out[d] = first_out[d].min(f.start.0);
        first_in[d] = first_in[d].min(f.start.0 + first_packet);
        first_in[s] = first_in[s].min(f.start.0 + t.ack.0);
        let smallest = t.data(last_payload);
        let hops = topo.hops_between(f.src, f.dst);
        trip[s] = trip[s].min(t.one_way(smallest, hops).0 - smallest.0 + t.one_way(t.ack, hops).0);
        in_slot[d] = in_slot[d].min(smallest.0 + t.gap.0);
    }
    let tail_out = 2 * t.link.0 + t.switch.0 + t.ack.0 - t.gap.0;
    for h in 0..n {
        if busy_out[h] > 0 {
            bound = bound.max(Time(first_out[h] + busy_out[h] + tail_out));
        }
        if trip[h] < u64::MAX {
            let out = first_out[h] + busy_out[h] - t.gap.0;
            bound = bound.max(Time(out + last_data_round_trip(t, trip[h], in_slot[h])));
        }
        if busy_in[h] > 0 {
            let head = first_in[h] + t.link.0 + t.switch.0;
            bound = bound.max(Time(head + busy_in[h] - t.gap.0 + t.link.0));
        }
    }
    if let Some(starts) = nic_starts {
        let ends = round_robin_ends(topo, flows, starts, &in_slot, t);
        for h in 0..n {
            if let Some(end) = ends[h] {
                // The gap comes off last: a host that returns no ACKs has none to spare.
                bound = bound.max(Time(first_out[h] + acks_out[h] + end - t.gap.0));
            }
        }
    }
    let exchange =
        |bytes, hops| {
            symmetric_exchange_cct(t, bytes, hops, NicPolicy::RoundRobin)
                .min(symmetric_exchange_cct(t, bytes, hops, NicPolicy::AckFirst))
        };
    if let Some((bytes, hops)) = as_permutation(topo, flows) {
        bound = bound.max(Time(exchange(bytes, hops).0));
    }
    for (a, b) in reciprocal_pairs(topo, flows) {
        let (a, b) = (&flows[a], &flows[b]);
        bound = bound.max(a.start + exchange(a.bytes, topo.hops_between(a.src, b.src)));
    }
    bound
}

/// How long after W - gap a host's flows end, at least, where W is all its NIC must send
/// (from its first start). The data frame that completes its last message leaves the NIC
/// no sooner than W - gap minus the ACKs still owed then, and must still make a round trip
/// of at least `trip` (to its destination, and the ACK back). Of W, an ACK-first NIC has
/// only ACKs left after that frame, for data that reach the host from the frame's start on
/// (none waited then, but for one at a tie): at most one per `in_slot` (the shortest data
/// frame addressed to the host, with its gap), plus two. Over a round trip of x >= trip that
/// hides at most ack_slot * ((x + full_slot) / in_slot + 2) of W, which grows slower than x
/// when ACK slots are the shorter, so the least end is at x = trip.
fn last_data_round_trip(t: &FrameTiming, trip: u64, in_slot: u64) -> u64 {
    let ack_slot = t.ack.0 + t.gap.0;
    if in_slot == u64::MAX {
        return trip; // receives no data, so owes no ACKs
    }
    if ack_slot >= in_slot {
        return 0; // ACK slots no shorter than data ones: the argument gives nothing
    }
    let full_slot = t.data(t.payload).0 + t.gap.0;
    let hidden = (ack_slot as u128 * (trip + full_slot) as u128).div_ceil(in_slot as u128) as u64;
    trip.saturating_sub(hidden + 2 * ack_slot)
}

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
fn round_robin_ends(
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

/// Pairs of flows a -> b and b -> a of the same size and start, where hosts a and b
/// send and receive nothing else: App. B's two-host exchange, wherever it occurs.
fn reciprocal_pairs(topo: &Topology, flows: &[FlowSpec]) -> Vec<(usize, usize)> {
    let n = topo.n_hosts as usize;
    let (mut sends, mut recvs) = (vec![0u32; n], vec![0u32; n]);
    // The flow each host sends (meaningful where it sends exactly one).
    let mut sent_by = vec![usize::MAX; n];
    for (i, f) in flows.iter().enumerate() {
        sends[f.src as usize] += 1;
        recvs[f.dst as usize] += 1;
        sent_by[f.src as usize] = i;
    }
    let alone = |h: u32| sends[h as usize] == 1 && recvs[h as usize] == 1;
    flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.src < f.dst && alone(f.src) && alone(f.dst))
        .filter_map(|(i, f)| {
            let j = sent_by[f.dst as usize];
            let back = &flows[j];
            (back.dst == f.src && back.bytes == f.bytes && back.start == f.start).then_some((i, j))
        })
        .collect()
}

/// (message size, longest path) if every host sends one flow and receives one, all
/// of the same size and starting at time zero.
fn as_permutation(topo: &Topology, flows: &[FlowSpec]) -> Option<(u64, u32)> {
    let n = topo.n_hosts as usize;
    if flows.len() != n {
        return None;
    }
    let (mut out, mut inn) = (vec![false; n], vec![false; n]);
    for f in flows {
        if f.bytes != flows[0].bytes
            || f.start != Time::ZERO
            || out[f.src as usize]
            || inn[f.dst as usize]
        {
            return None;
        }
        out[f.src as usize] = true;
        inn[f.dst as usize] = true;
    }
    Some((
        flows[0].bytes,
        flows
            .iter()
            .map(|f| topo.hops_between(f.src, f.dst))
            .max()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;

    fn paper() -> FrameTiming {
        // OFAN paper §5: 800 Gbps, 0.5 us links, 4096 B + 62 B, 64 B ACKs, 20 B gaps.
        let rate = Rate::from_gbps(800.0);
        FrameTiming {
            rate,
            payload: 4096,
            header: 62,
            gap: Dur(200),
            ack: Dur(640),
            link: Dur(500_000),
            switch: Dur(0),
        }
    }

    #[test]
    fn i1_is_78_with_the_papers_defaults() {
        // The schedule sends i1 data packets before its first ACK, under either NIC order;
        // Eq. (6) gives the same: i1 = ceil((Tp + (H-1) Td) / T'd) + 1 with H = 6.
        let t = paper();
        let (td, tdp, tp) = (t.data(4096).0, t.data(4096).0 + t.gap.0, 6 * t.link.0);
        let eq6 = (tp + 5 * td).div_ceil(tdp) + 1;
        for policy in [NicPolicy::RoundRobin, NicPolicy::AckFirst] {
            assert_eq!(
                symmetric_exchange(&t, 256 * 4096, 6, policy).1,
                78,
                "{policy:?}"
            );
        }
        assert_eq!(eq6, 78);
    }

    #[test]
    fn idle_flow_fct_is_serialization_plus_propagation() {
        let t = paper();
        // 256 full packets over 6 hops: 255 x (41,580 + 200) + 6 x 41,580 + 6 x 500,000, then the ACK: 6 x (640 + 500,000)
        let want = 255 * 41_780 + 6 * 41_580 + 6 * 500_000 + 6 * 500_640;
        assert_eq!(single_flow_fct(&t, 256 * 4096, 6), Dur(want));
    }

    #[test]
    fn a_short_last_frame_may_pass_the_full_one_ahead() {
        // 6,567 B over 6 hops: a full frame (41,580 ps), then one of 2,471 + 62 B (25,330 ps)
        // 41,780 ps later. Each store-and-forward hop before the last link saves the short
        // one 16,250 ps, so on another path it reaches that link first (2,668,430 against
        // 2,707,900 ps); the full frame lands at 2,707,900 + 41,580 + 500,000, then the ACK.
        let t = paper();
        let want = 2_707_900 + 41_580 + 500_000 + 6 * (640 + 500_000);
        assert_eq!(single_flow_fct(&t, 6567, 6), Dur(want));
        // Frames of one size never pass each other: the plain pipeline.
        let full = 2 * 4096;
        let pipeline = 41_780 + 6 * (41_580 + 500_000) + 6 * (640 + 500_000);
        assert_eq!(single_flow_fct(&t, full, 6), Dur(pipeline));
    }

    #[test]
    fn a_lone_pair_exchanging_equal_flows_gets_the_appendix_bound() {
        let t = paper();
        let topo = Topology::build(&TopologyConfig::FatTree { k: 4 }, t.rate, t.link).unwrap();
        let flow = |src, dst, bytes, start| FlowSpec {
            src,
            dst,
            bytes,
            start: Time(start),
        };
        let m = 256 * 4096;
        // The round-robin schedule of the test below, 6 hops.
        let exch = Dur(17_056_740);
        // Hosts 0 and 15 (different pods), starting at 2 us: App. B's exchange, shifted.
        let pair = [flow(0, 15, m, 2_000_000), flow(15, 0, m, 2_000_000)];
        assert_eq!(
            cct_lower_bound(&topo, &pair, None, &t),
            Time(2_000_000) + exch
        );
        // Not a lone pair: a third flow into host 0, unequal sizes or starts. Then only the
        // single-flow and NIC bounds apply, and they are lower.
        let single = Time(2_000_000) + single_flow_fct(&t, m, 6);
        for flows in [
            vec![pair[0], pair[1], flow(3, 0, 4096, 2_000_000)],
            vec![pair[0], flow(15, 0, m - 1, 2_000_000)],
            vec![pair[0], flow(15, 0, m, 2_000_001)],
        ] {
            let b = cct_lower_bound(&topo, &flows, None, &t);
            assert!(b < Time(2_000_000) + exch && b >= single, "{flows:?}");
        }
    }

    #[test]
    fn an_incast_is_bounded_by_the_receivers_link() {
        // 16 senders x 1 MB into host 0 on k = 8: the link down to host 0 carries every
        // data frame (245 per flow: 244 full, one of 576 B), so it, not any sender's NIC,
        // sets the bound: first frame in (a full frame's time, a link, a switch), all
        // frames back to back, the last one's link.
        let t = paper();
        let topo = Topology::build(&TopologyConfig::FatTree { k: 8 }, t.rate, t.link).unwrap();
        let flows: Vec<FlowSpec> = (1..=16)
            .map(|src| FlowSpec {
                src,
                dst: 0,
                bytes: 1_000_000,
                start: Time::ZERO,
            })
            .collect();
        let frames_ps = 16 * (244 * (41_580 + 200) + (576 + 62) * 10 + 200);
        let want = 41_580 + 500_000 + frames_ps - 200 + 500_000;
        assert_eq!(cct_lower_bound(&topo, &flows, None, &t), Time(want));
        // ~164 us: 16 MB through one 800 Gbps link, ten times one flow's own FCT.
        assert!(want > 10 * single_flow_fct(&t, 1_000_000, 6).0);
    }

    #[test]
    fn round_robin_ends_match_a_flow_by_flow_count() {
        // The tree-indexed sums against the rule spelled out flow by flow: by f's n_f-th
        // send, a flow started earlier (or with f and listed before it) has made
        // min(n_g, n_f) sends, one started with f and listed after it min(n_g, n_f - 1),
        // one started later none; each send counted at its frame's slot.
        use rand::{Rng, SeedableRng};
        let t = paper();
        let topo = Topology::build(&TopologyConfig::FatTree { k: 4 }, t.rate, t.link).unwrap();
        let full = t.data(t.payload).0 + t.gap.0;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        for _ in 0..200 {
            let flows: Vec<FlowSpec> = (0..rng.gen_range(1..40))
                .map(|_| {
                    let src = rng.gen_range(0..4u32);
                    FlowSpec {
                        src,
                        dst: (src + rng.gen_range(1..16u32)) % 16,
                        bytes: [1, 4096, 4097, 3 * 4096, 5 * 4096 + 7][rng.gen_range(0..5)],
                        start: Time(0),
                    }
                })
                .collect();
            let starts: Vec<Time> = flows
                .iter()
                .map(|_| Time(rng.gen_range(0..3) * 1000))
                .collect();
            let mut in_slot = vec![u64::MAX; 16];
            for f in &flows {
                let slot = t.data(t.packets(f.bytes).1).0 + t.gap.0;
                in_slot[f.dst as usize] = in_slot[f.dst as usize].min(slot);
            }
            let sends = |g: &FlowSpec, k: u64| {
                let (n, last) = t.packets(g.bytes);
                let last_slot = t.data(last).0 + t.gap.0;
                if k < n {
                    k * full
                } else {
                    (n - 1) * full + last_slot
                }
            };
            let ends = round_robin_ends(&topo, &flows, &starts, &in_slot, &t);
            for h in 0..16u32 {
                let mut want: Option<u64> = None;
                for (i, f) in flows.iter().enumerate().filter(|(_, f)| f.src == h) {
                    let n_f = t.packets(f.bytes).0;
                    let mut data = sends(f, n_f);
                    for (j, g) in flows
                        .iter()
                        .enumerate()
                        .filter(|&(j, g)| g.src == h && j != i)
                    {
                        let n_g = t.packets(g.bytes).0;
                        let before = (starts[j], j) < (starts[i], i);
                        if before {
                            data += sends(g, n_g.min(n_f));
                        } else if starts[j] == starts[i] {
                            data += sends(g, n_g.min(n_f - 1));
                        }
                    }
                    let hops = topo.hops_between(f.src, f.dst);
                    let smallest = t.data(t.packets(f.bytes).1);
                    let trip = t.one_way(smallest, hops).0 - smallest.0 + t.one_way(t.ack, hops).0;
                    let end = data + last_data_round_trip(&t, trip, in_slot[h as usize]);
                    want = Some(want.map_or(end, |w| w.max(end)));
                }
                assert_eq!(ends[h as usize], want, "host {h}");
            }
        }
    }

    #[test]
    fn symmetric_exchange_matches_the_appendix_example() {
        // App. B: 17.05694 us for m = 256 with the defaults. The exact schedule under
        // round-robin lands one inter-frame gap (0.2 ns) below it, ACK-first 0.64 ns above.
        let t = paper();
        let rr = symmetric_exchange_cct(&t, 256 * 4096, 6, NicPolicy::RoundRobin);
        let ack_first = symmetric_exchange_cct(&t, 256 * 4096, 6, NicPolicy::AckFirst);
        assert_eq!(rr, Dur(17_056_740));
        assert_eq!(ack_first, Dur(17_057_580));
        assert!((rr.0 as f64 - 17_056_940.0).abs() / 17_056_940.0 < 1e-4);
    }
}
