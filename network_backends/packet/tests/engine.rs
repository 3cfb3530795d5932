//! End-to-end checks of the engine against closed-form values.

use serde_json::json;
use tracefabric_packet::{simulate_json, Report, SimError};

fn run(cfg: serde_json::Value) -> Result<Report, SimError> {
    simulate_json(&cfg.to_string(), &mut |_, _| true)
}

fn flows(list: &[(u32, u32, u64)]) -> serde_json::Value {
    json!({"kind": "flows",
           "src": list.iter().map(|f| f.0).collect::<Vec<_>>(),
           "dst": list.iter().map(|f| f.1).collect::<Vec<_>>(),
           "bytes": list.iter().map(|f| f.2).collect::<Vec<_>>(),
           "start_ps": list.iter().map(|_| 0).collect::<Vec<_>>()})
}

fn conserved(r: &Report) {
    assert_eq!(
        r.data_bytes_sent,
        r.data_bytes_delivered + r.data_bytes_dropped + r.data_bytes_trimmed
    );
    assert_eq!(r.packets_alive_at_end, 0);
    assert!(
        r.cct_ps >= r.lower_bound_ps,
        "cct {} beat its bound {}",
        r.cct_ps,
        r.lower_bound_ps
    );
}

#[test]
fn one_flow_on_an_idle_fat_tree_takes_exactly_serialization_plus_propagation() {
    for (lb, src, dst, hops) in [
        ("ecmp", 0, 127, 6u64),
        ("host_spray", 0, 1, 2),
        ("switch_ar", 0, 5, 4),
    ] {
        let r = run(json!({"topology": {"kind": "fat_tree", "k": 8}, "traffic": flows(&[(src, dst, 100 * 4096)]),
                           "scheme": {"lb": lb}})).unwrap();
        // 100 packets of 4158 B at 10 ps/B with 200 ps gaps; ACK of 64 B back over the same hop count.
        let want = 99 * (41_580 + 200) + hops * (41_580 + 500_000) + hops * (640 + 500_000);
        assert_eq!(r.flows[0].finish_ps, want, "{lb}");
        assert_eq!(r.cct_ps, r.lower_bound_ps);
        conserved(&r);
    }
}

#[test]
fn a_paced_flow_starts_a_packet_every_paced_serialization_time() {
    // rho = 0.5 (paper App. A): a packet starts every 4,158 B at 400 Gbps = 83,160 ps,
    // longer than frame + gap at line rate; the path adds what it adds above.
    let r = run(
        json!({"topology": {"kind": "fat_tree", "k": 8}, "traffic": flows(&[(0, 127, 100 * 4096)]),
                       "scheme": {"lb": "ecmp", "cc_params": {"rho": 0.5}}}),
    )
    .unwrap();
    let hops = 6u64;
    let want = 99 * 83_160 + hops * (41_580 + 500_000) + hops * (640 + 500_000);
    assert_eq!(r.flows[0].finish_ps, want);
    conserved(&r);
}

#[test]
fn a_two_to_one_incast_drains_its_bottleneck_back_to_back() {
    // Hosts 2 and 3 (one edge switch) each send 50 packets to host 0 (another edge, same
    // pod). Wherever the two flows first share a port (the edge uplink or host 0's
    // downlink), that port sends all 100 frames back to back, so the last one reaches
    // host 0 after four store-and-forward hops plus 99 frame periods, and its ACK comes
    // back over four idle hops. With zero link latency a port's frame lands before the
    // port is free again, so switch queues drain through PortFree events, not through
    // their links' arrivals (see `Simulation::catch_up`).
    for latency_ps in [0u64, 500_000] {
        for lb in ["ecmp", "host_spray"] {
            let r = run(json!({"topology": {"kind": "fat_tree", "k": 4},
                               "link": {"latency_ns": latency_ps as f64 / 1e3},
                               "traffic": flows(&[(2, 0, 50 * 4096), (3, 0, 50 * 4096)]),
                               "scheme": {"lb": lb}}))
            .unwrap();
            let want = 4 * (41_580 + latency_ps) + 99 * (41_580 + 200) + 4 * (640 + latency_ps);
            assert_eq!(r.cct_ps, want, "{lb}, latency {latency_ps} ps");
            assert_eq!(r.data_packet_hops, 100 * 4);
            conserved(&r);
        }
    }
}

#[test]
fn switch_latency_adds_once_per_switch_each_way() {
    let r = run(
        json!({"topology": {"kind": "fat_tree", "k": 4}, "switch": {"latency_ns": 100.0},
                       "traffic": flows(&[(0, 15, 4096)])}),
    )
    .unwrap();
    assert_eq!(
        r.flows[0].finish_ps,
        6 * (41_580 + 500_000) + 6 * (640 + 500_000) + 2 * 5 * 100_000
    );
}

#[test]
fn there_and_back_on_k4_is_within_a_thousandth_of_the_appendix_b_bound() {
    // App. B: one flow from the first host to the last and one back, m = 256 packets.
    let mut best = u64::MAX;
    for seed in 0..20 {
        for lb in ["ecmp", "host_spray", "switch_rr", "reps", "switch_ar"] {
            let r = run(
                json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": seed, "scheme": {"lb": lb},
                               "traffic": flows(&[(0, 15, 256 * 4096), (15, 0, 256 * 4096)])}),
            )
            .unwrap();
            conserved(&r);
            best = best.min(r.cct_ps);
        }
    }
    let bound = 17_056_740.0; // the exact contention-free schedule (bounds.rs)
    let gap = (best as f64 - bound) / bound;
    println!(
        "best there-and-back CCT {best} ps, bound {bound} ps, excess {:.2e}",
        gap
    );
    assert!(gap >= 0.0 && gap < 1e-3, "excess {gap}");
}

/// A fabric for random flow lists, varied by `case`: 0 / 0.01 / 500 ns links, switch
/// latency or none, 800 KB or 30 KB (dropping) buffers, SACK on every seventh case, and 16
/// hosts every way: k = 4, 4 leaves x 4 hosts over 2 spines with 1 link each (2:1), or
/// k = 4 with one core uplink per aggregation switch (2:1 at the pods' edge).
fn stress_config(case: usize, lb: &str, rho: f64, traffic: serde_json::Value) -> serde_json::Value {
    let latency_ns = [0.0, 0.01, 500.0][case % 3];
    let switch_ns = [0.0, 100.0][case % 2];
    let buffer = [800_000u64, 30_000][(case / 5) % 2];
    let topology = [
        json!({"kind": "fat_tree", "k": 4}),
        json!({"kind": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 4}),
        json!({"kind": "fat_tree", "k": 4, "oversubscription": 2}),
    ][(case / 2) % 3]
        .clone();
    let mut scheme = json!({"lb": lb, "cc_params": {"rho": rho}});
    if case % 7 == 3 {
        scheme["loss"] = json!("sack");
        scheme["loss_params"] = json!({"threshold": 4});
    }
    json!({"topology": topology, "seed": case,
           "link": {"latency_ns": latency_ns}, "switch": {"latency_ns": switch_ns, "buffer_bytes": buffer},
           "scheme": scheme, "limits": {"rto_us": 20.0}, "traffic": traffic})
}

#[test]
fn no_run_beats_its_bound_on_random_flow_lists() {
    // Every term of the bound (one flow alone, a NIC's work and then its last data frame's
    // round trip, a host's downlink, App. B pairs) holds for any schedule. Random lists
    // stress them: short last frames (more ACKs per unit of time), late starts, hosts that
    // both send and receive, zero-latency links (the round trip is all serialization),
    // switch latency, small buffers that drop, an oversubscribed leaf-spine with parallel
    // links and an oversubscribed fat tree (the cut terms), SACK retransmissions and paced
    // flows.
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let lbs = ["ecmp", "host_spray", "switch_rr", "reps", "switch_ar"];
    for case in 0..60usize {
        let n = rng.gen_range(1..=24);
        let (mut src, mut dst, mut bytes, mut start) = (vec![], vec![], vec![], vec![]);
        for _ in 0..n {
            let s = rng.gen_range(0..16u32);
            let d = (s + rng.gen_range(1..16u32)) % 16;
            src.push(s);
            dst.push(d);
            bytes.push(if rng.gen_bool(0.3) {
                rng.gen_range(1..5000u64)
            } else {
                rng.gen_range(1..300_000u64)
            });
            start.push(if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(0..5_000_000u64)
            });
        }
        let rho = if case % 11 == 5 { 0.6 } else { 1.0 };
        let traffic =
            json!({"kind": "flows", "src": src, "dst": dst, "bytes": bytes, "start_ps": start});
        let r = run(stress_config(case, lbs[case % lbs.len()], rho, traffic)).unwrap();
        conserved(&r);
    }
}

#[test]
fn an_all_to_all_ends_at_least_a_round_trip_after_its_nics_work() {
    // k = 4, 64 KiB per pair: every NIC sends 15 x 16 data frames and as many ACKs, and its
    // last data frame then needs a round trip (to its destination and back), with only the
    // ACKs for data arriving meanwhile left to send. In any order that trip could be to a
    // neighbour (two links each way); a round-robin NIC serving host 0's peers in ascending
    // order sends its last frame to host 15, in another pod (six links each way). Paced
    // (rho < 1), NICs may skip a flow, so only the order-free bound holds.
    let frames: u64 = 15 * 16;
    let nic = frames * (41_580 + 200) + frames * (640 + 200) - 200;
    let trip = |hops: u64| hops * (500_000 + 41_580) - 41_580 + hops * (500_000 + 640);
    let owed = |trip: u64| (840 * (trip + 41_780)).div_ceil(41_780) + 2 * 840;
    for (lb, rho) in [
        ("host_spray", 1.0),
        ("switch_ar", 1.0),
        ("host_spray", 0.999),
    ] {
        let r = run(json!({"topology": {"kind": "fat_tree", "k": 4}, "scheme": {"lb": lb, "cc_params": {"rho": rho}},
                           "traffic": {"kind": "all_to_all", "bytes": 16 * 4096}}))
        .unwrap();
        conserved(&r);
        let hops = if rho == 1.0 { 6 } else { 2 };
        assert_eq!(
            r.lower_bound_ps,
            nic + trip(hops) - owed(trip(hops)),
            "{lb} rho {rho}"
        );
    }
}

#[test]
fn a_round_robin_nic_makes_the_bound_exact_for_one_sender() {
    // Host 0 of a k = 4 fat tree sends to host 15 (another pod, six links each way) and to
    // host 1 (same edge, two), its NIC taking turns. The far flow ends last (its round trip
    // is 4.17 us longer than a dozen frames), a round trip after its own last frame: that
    // frame is the NIC's 31st when it is listed first (its neighbour's 16th frame comes
    // after it), the 32nd when it is listed second, and with 8 frames against 20 the 16th.
    // A one-frame flow listed first ends ~2 us in, amid the turns: the NIC must not skip or
    // repeat a turn then (with the ended flow's place filled by the last one, it did, and
    // the far flow came one frame early on some of these sizes).
    // Nothing waits anywhere else, so the bound is the CCT.
    let slot = |payload: u64| (payload + 62) * 10 + 200;
    let trip6 = 6 * (500_000 + 41_580) - 41_580 + 6 * (500_000 + 640);
    let mut cases = vec![
        (vec![(0, 15, 16 * 4096), (0, 1, 16 * 4096)], 31 * slot(4096)),
        (vec![(0, 1, 16 * 4096), (0, 15, 16 * 4096)], 32 * slot(4096)),
        (vec![(0, 1, 20 * 4096), (0, 15, 8 * 4096)], 16 * slot(4096)),
    ];
    for first in [64, 1400, 2800, 4096] {
        cases.push((
            vec![(0, 1, first), (0, 15, 100 * 4096), (0, 1, 100 * 4096)],
            slot(first) + 199 * slot(4096),
        ));
    }
    for (list, far_frame_done) in cases {
        for lb in ["ecmp", "host_spray", "switch_rr"] {
            let r = run(
                json!({"topology": {"kind": "fat_tree", "k": 4}, "scheme": {"lb": lb},
                               "traffic": flows(&list)}),
            )
            .unwrap();
            conserved(&r);
            assert_eq!(r.cct_ps, far_frame_done - 200 + trip6, "{list:?} {lb}");
            assert_eq!(r.lower_bound_ps, r.cct_ps, "{list:?} {lb}");
        }
    }
}

#[test]
fn no_run_beats_its_round_robin_bound() {
    // The bound's round-robin term credits, by a flow's last send, every flow its NIC
    // started earlier or with it (capped at that flow's count, less one for those listed
    // after it). Random groups stress it: hosts with one to six flows starting together and
    // others starting later, sizes from one short frame to 60 frames (so flows end while
    // others still send), zero-latency links (where the round trip is all serialization),
    // switch latency, small buffers that drop, SACK retransmissions, and Ethereal's start
    // jitter (the term then follows the flows' jittered starts).
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
    let lbs = [
        "host_spray",
        "switch_rr",
        "reps",
        "switch_ar",
        "ecmp",
        "ethereal",
    ];
    let mut binding = 0;
    for case in 0..60usize {
        let (mut src, mut dst, mut bytes, mut start) = (vec![], vec![], vec![], vec![]);
        for s in 0..16u32 {
            let at = if rng.gen_bool(0.7) {
                0
            } else {
                rng.gen_range(0..3_000_000u64)
            };
            for _ in 0..rng.gen_range(0..=6) {
                src.push(s);
                dst.push((s + rng.gen_range(1..16u32)) % 16);
                bytes.push(match rng.gen_range(0..3) {
                    0 => rng.gen_range(1..4097u64),
                    1 => 16 * 4096,
                    _ => rng.gen_range(4097..60 * 4096u64),
                });
                start.push(if rng.gen_bool(0.8) {
                    at
                } else {
                    at + rng.gen_range(1..2_000_000u64)
                });
            }
        }
        if src.is_empty() {
            continue;
        }
        let traffic =
            json!({"kind": "flows", "src": src, "dst": dst, "bytes": bytes, "start_ps": start});
        let lb = lbs[case % lbs.len()];
        let r = run(stress_config(case, lb, 1.0, traffic.clone())).unwrap();
        conserved(&r);
        // Paced, the same flows get only the order-free bound: count where the term binds.
        let order_free = run(stress_config(case, lb, 0.999_999, traffic))
            .unwrap()
            .lower_bound_ps;
        assert!(r.lower_bound_ps >= order_free);
        binding += (r.lower_bound_ps > order_free) as u32;
    }
    assert!(
        binding >= 20,
        "the round-robin term binds in only {binding} of 60 cases"
    );
}

#[test]
fn same_seed_same_digest_and_different_seed_different_draws() {
    let cfg = |seed: u64| {
        json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": seed, "scheme": {"lb": "host_spray"},
                                 "traffic": {"kind": "permutation", "bytes": 200_000}})
    };
    let (a, b, c) = (
        run(cfg(3)).unwrap(),
        run(cfg(3)).unwrap(),
        run(cfg(4)).unwrap(),
    );
    assert_eq!(a, b);
    assert_ne!(a.digest, c.digest);
}

#[test]
fn tiny_buffers_drop_and_sack_still_conserves_bytes() {
    let r = run(
        json!({"topology": {"kind": "fat_tree", "k": 4}, "switch": {"buffer_bytes": 9000},
                       "scheme": {"lb": "ecmp", "loss": "sack", "loss_params": {"threshold": 8}},
                       "limits": {"rto_us": 20.0},
                       "traffic": {"kind": "incast", "dst": 0, "senders": 6, "bytes": 100_000}}),
    )
    .unwrap();
    assert!(r.data_packets_dropped > 0);
    assert!(r.flows.iter().map(|f| f.retransmissions).sum::<u64>() >= r.data_packets_dropped);
    conserved(&r);
}

#[test]
fn a_run_that_cannot_finish_ends_with_an_error_not_a_hang() {
    // rho = 1e-6 paces one packet per ~5 ms: the run hits max_time first.
    let e = run(
        json!({"topology": {"kind": "fat_tree", "k": 4}, "limits": {"max_time_ms": 1.0},
                       "scheme": {"cc_params": {"rho": 0.000001}},
                       "traffic": flows(&[(0, 15, 40_000)])}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("max_time_ms"), "{e}");
}

#[test]
fn bad_input_names_the_field() {
    let cases = [
        (
            json!({"topology": {"kind": "fat_tree", "k": 7}, "traffic": {"kind": "all_to_all", "bytes": 1}}),
            "topology.k",
        ),
        (
            json!({"topology": {"kind": "fat_tree", "k": 4}, "traffic": {"kind": "all_to_all", "bytes": 1}, "scheme": {"lb": "nope"}}),
            "unknown lb scheme `nope`",
        ),
        (
            json!({"topology": {"kind": "fat_tree", "k": 4}, "traffic": {"kind": "all_to_all", "bytes": 1}, "scheme": {"lb": "switch_rr", "lb_params": {"wraps": 3}}}),
            "parameter `wraps`",
        ),
        (
            json!({"topology": {"kind": "fat_tree", "k": 4}, "traffic": flows(&[(3, 3, 10)])}),
            "flow 0: field `dst`",
        ),
        (
            json!({"topology": {"kind": "fat_tree", "k": 4}, "traffic": flows(&[(0, 3, 0)])}),
            "flow 0: field `bytes`",
        ),
        (
            json!({"topology": {"kind": "fat_tree", "k": 4}, "traffic": flows(&[(0, 99, 10)])}),
            "flow 0: field `dst`",
        ),
        (
            json!({"topology": {"kind": "fat_tree", "k": 4}, "traffic": {"kind": "all_to_all", "bytes": 1}, "linkz": {}}),
            "unknown field `linkz`",
        ),
    ];
    for (cfg, want) in cases {
        let e = run(cfg).unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} should mention {want:?}");
    }
}
