use super::*;
use crate::config::TopologyConfig;
use crate::units::Rate;

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
    let topo = Topology::build(&TopologyConfig::fat_tree(4), t.rate, t.link).unwrap();
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
    let topo = Topology::build(&TopologyConfig::fat_tree(8), t.rate, t.link).unwrap();
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
fn a_pod_behind_oversubscribed_uplinks_is_bounded_by_them() {
    // k = 4 at 2:1: each aggregation switch keeps one core uplink, so pod 0's four hosts
    // sending 1 MB each to pod 1 share two links: 4 x 245 frames (244 full, one of 576 B)
    // over 2 links, from 0, then the link. No host link comes near (one flow each way).
    let t = paper();
    let cfg = TopologyConfig::FatTree {
        k: 4,
        oversubscription: 2,
    };
    let topo = Topology::build(&cfg, t.rate, t.link).unwrap();
    let flows: Vec<FlowSpec> = (0..4)
        .map(|src| FlowSpec {
            src,
            dst: src + 4,
            bytes: 1_000_000,
            start: Time::ZERO,
        })
        .collect();
    let per_flow = 244 * (41_580 + 200) + (576 + 62) * 10 + 200;
    let want = 4 * per_flow / 2 - 200 + 500_000;
    assert_eq!(super::cuts::cut_bound(&topo, &flows, &t), Time(want));
    assert_eq!(cct_lower_bound(&topo, &flows, None, &t), Time(want));
    // Full bisection: the same flows are bounded by one flow's own FCT (~10.2 us of frames
    // and six links each way), not by the pod's four uplinks.
    let full = Topology::build(&TopologyConfig::fat_tree(4), t.rate, t.link).unwrap();
    let single = Time(single_flow_fct(&t, 1_000_000, 6).0);
    assert_eq!(cct_lower_bound(&full, &flows, None, &t), single);
    assert!(single < Time(want));
}

#[test]
fn round_robin_ends_match_a_flow_by_flow_count() {
    // The tree-indexed sums against the rule spelled out flow by flow: by f's n_f-th
    // send, a flow started earlier (or with f and listed before it) has made
    // min(n_g, n_f) sends, one started with f and listed after it min(n_g, n_f - 1),
    // one started later none; each send counted at its frame's slot.
    use rand::{Rng, SeedableRng};
    let t = paper();
    let topo = Topology::build(&TopologyConfig::fat_tree(4), t.rate, t.link).unwrap();
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
