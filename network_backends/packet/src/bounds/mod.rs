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
//!   instead of the appendix's closed-form recurrence (docs/engine/bounds.md).
//! - Cuts (`cuts`): what an edge switch's hosts or a pod exchange with the rest of the
//!   fabric crosses its uplinks, at best all of them in parallel (oversubscribed fabrics).

use crate::timing::FrameTiming;
use crate::topology::Topology;
use crate::traffic::FlowSpec;
use crate::units::{Dur, Time};
use std::collections::VecDeque;

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
    bound.max(cuts::cut_bound(topo, flows, t))
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

mod cuts;
pub mod failure;
mod round_robin;
#[cfg(test)]
mod tests;

use round_robin::round_robin_ends;
