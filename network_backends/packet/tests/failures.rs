//! Link failures at run time: blackholing until detection, local reroute, global
//! convergence; determinism; a disconnected fabric named, not hung; the ρ_max bound.

use serde_json::{json, Value};
use tracefabric_packet::{simulate_json, Report, SimError};

mod common;
use common::conserved;

fn run(cfg: Value) -> Result<Report, SimError> {
    simulate_json(&cfg.to_string(), &mut |_, _| true)
}

fn k8(scheme: Value, traffic: Value, failures: Value) -> Value {
    json!({"topology": {"kind": "fat_tree", "k": 8}, "seed": 1, "scheme": scheme,
           "traffic": traffic, "failures": failures})
}

/// Hosts 0..128, then 32 edges (128 ..), 32 aggregations (pod p: 160 + 4p ..), 16 cores (192 ..).
const AGG0: u32 = 160;
const CORE0: u32 = 192;

#[test]
fn a_link_failing_mid_run_blackholes_until_rerouted_and_every_loss_scheme_recovers() {
    // Pod 0's first aggregation loses its link to core 0 at 2 us: frames sent into it are
    // lost until the aggregation stops using it (10 us) and every switch's routes avoid it
    // (50 us; core 0 could only reach pod 0 that way).
    let failures = json!({"links": [{"nodes": [AGG0, CORE0], "down_at_us": 2}],
                          "detection_us": 8, "convergence_us": 48});
    let traffic = json!({"kind": "permutation", "bytes": 2_097_152});
    for loss in ["sack", "trim", "gbn", "erasure"] {
        let r = run(k8(
            json!({"lb": "ecmp", "loss": loss}),
            traffic.clone(),
            failures.clone(),
        ))
        .unwrap();
        conserved(&r, loss);
        assert!(r.frames_blackholed > 0, "{loss}: nothing was blackholed");
        assert_eq!(r.reroutes, 2, "{loss}: a local reroute and a convergence");
        // The link stays down to the end: its down time is the run from 2 us on.
        let down: Vec<u64> = r
            .links
            .iter()
            .filter(|l| l.down_ps > 0)
            .map(|l| l.down_ps)
            .collect();
        assert_eq!(down.len(), 2, "{loss}: both directions");
        assert!(down.iter().all(
            |&d| d + 2_000_000 == r.cct_ps + r.flows.iter().map(|f| f.start_ps).min().unwrap()
        ));
        assert!(
            r.rho_max < 1.0 && r.rho_max > 0.9,
            "{loss}: rho_max {}",
            r.rho_max
        );
        // Per flow: the data frames each lost into the link (all full-size here) add up to
        // the run's, and every one was resent (erasure coding may repair them instead).
        let per_flow: u64 = r.flows.iter().map(|f| f.blackholed).sum();
        assert_eq!(per_flow * 4096, r.data_bytes_blackholed, "{loss}");
        assert!(r.flows.iter().filter(|f| f.blackholed > 0).count() > 1);
        if loss != "erasure" {
            assert!(
                (r.flows.iter()).all(|f| f.retransmissions >= f.blackholed),
                "{loss}"
            );
        }
    }
}

#[test]
fn failures_converged_before_the_run_blackhole_nothing_and_follow_the_seed() {
    let failures = json!({"probability": 0.05, "convergence_us": 0});
    let cfg = |seed: u64| {
        let mut c = k8(
            json!({"lb": "reps"}),
            json!({"kind": "permutation", "bytes": 1_048_576}),
            failures.clone(),
        );
        c["seed"] = json!(seed);
        c
    };
    let (a, b, c) = (
        run(cfg(1)).unwrap(),
        run(cfg(1)).unwrap(),
        run(cfg(2)).unwrap(),
    );
    assert_eq!(a.digest, b.digest);
    assert_ne!(a.digest, c.digest);
    for r in [&a, &c] {
        conserved(r, "converged");
        assert_eq!(r.frames_blackholed, 0);
        assert!(r.links.iter().filter(|l| l.down_ps > 0).count() >= 2);
    }
}

#[test]
fn a_failure_set_that_cuts_flows_off_is_named_not_hung() {
    // Both uplinks of pod 0's... every uplink of edge switch 128 (hosts 0-3) fails.
    let edge = 128;
    let links: Vec<Value> = (0..4).map(|a| json!({"nodes": [edge, AGG0 + a]})).collect();
    let err = run(k8(
        json!({}),
        json!({"kind": "permutation", "bytes": 65_536}),
        json!({"links": links, "convergence_us": 0}),
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("invalid config field `failures`"), "{err}");
    assert!(
        err.contains("cannot reach its destination")
            && err.contains(&format!("edge switch {edge}")),
        "{err}"
    );
    assert!(
        err.contains("links down: 128-160, 128-161, 128-162, 128-163"),
        "{err}"
    );
}

#[test]
fn spraying_that_learns_beats_switch_adaptive_routing_when_routes_never_converge() {
    // OFAN Fig. 3 (G = infinity): with 2 % of switch links failed and no convergence,
    // REPS learns to avoid entropies whose packets vanish; switch AR sees the dead ports'
    // empty queues and keeps choosing them until detection.
    let failures = json!({"probability": 0.02, "detection_us": 1000.0});
    let traffic = json!({"kind": "permutation", "bytes": 1_048_576});
    let mut cct = std::collections::BTreeMap::new();
    for scheme in ["reps", "switch_ar"] {
        let r = run(k8(json!({"lb": scheme}), traffic.clone(), failures.clone())).unwrap();
        conserved(&r, scheme);
        cct.insert(scheme, r.cct_ps);
    }
    assert!(cct["reps"] < cct["switch_ar"], "{cct:?}");
}

#[test]
fn frames_on_a_failing_links_wire_are_lost_with_it() {
    // One path (2 leaves, 1 spine, 800 Gbps, 500 ns links): the leaf-spine link is down from
    // 5 to 10 us while a 2 MiB flow streams over it at line rate. Lost: every frame on the
    // wire at 5 us (one link latency of frames) and every frame sent in the 5 us outage.
    let cfg = json!({"topology": {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 1},
        "scheme": {"loss": "sack"}, "limits": {"rto_us": 20.0},
        "traffic": {"kind": "flows", "src": [0], "dst": [1], "bytes": [2_097_152], "start_ps": [0]},
        "failures": {"links": [{"nodes": [2, 4], "down_at_us": 5, "up_at_us": 10}], "detection_us": 1000}});
    let r = run(cfg).unwrap();
    conserved(&r, "one path");
    let slot = (4096 + 62 + 20) as f64 * 10.0; // ps per data frame at 800 Gbps
    let on_wire = 500_000.0 / slot; // frames within one link latency
    let in_outage = 5_000_000.0 / slot;
    let lost = r.data_bytes_blackholed as f64 / 4096.0;
    assert!(
        (lost - (on_wire + in_outage)).abs() <= 2.0,
        "{lost} lost, expected {:.1}",
        on_wire + in_outage
    );
}

#[test]
fn converged_w_ecmp_weights_spread_traffic_evenly_over_the_paths_left() {
    // Pod 1's 16 hosts each send 1 MiB to a host of pod 0 after pod 0's first aggregation
    // lost core 0 (converged before the run). 15 aggregation-core links of pod 1 lead to
    // pod 0: its first aggregation keeps 3 cores, the others 4. With W-ECMP (weights
    // 3:4:4:4 at the edges, IWRR under switch_rr) each link carries 1/15 of the bytes;
    // weighting by reachability alone, the first aggregation's 3 links carry 1/12 each
    // and the other 12 links 1/16.
    let traffic = json!({"kind": "flows", "src": (16..32).collect::<Vec<u32>>(),
        "dst": (0..16).collect::<Vec<u32>>(), "bytes": vec![1_048_576u64; 16],
        "start_ps": vec![0u64; 16]});
    for equal in [false, true] {
        let failures = json!({"links": [{"nodes": [AGG0, CORE0]}], "convergence_us": 0,
                              "equal_weights": equal});
        let r = run(k8(json!({"lb": "switch_rr"}), traffic.clone(), failures)).unwrap();
        conserved(&r, "w-ecmp");
        let up: Vec<(u32, f64)> = (r.links.iter())
            .filter(|l| (AGG0 + 4..AGG0 + 8).contains(&l.owner) && l.peer >= CORE0)
            .filter(|l| l.data_bytes > 0)
            .map(|l| (l.owner, l.data_bytes as f64))
            .collect();
        assert_eq!(up.len(), 15, "equal weights {equal}: {up:?}");
        let total: f64 = up.iter().map(|l| l.1).sum();
        for (agg, bytes) in up {
            let share = match (equal, agg == AGG0 + 4) {
                (false, _) => 1.0 / 15.0,
                (true, true) => 1.0 / 12.0,
                (true, false) => 1.0 / 16.0,
            };
            assert!(
                (bytes / total / share - 1.0).abs() < 0.02,
                "equal weights {equal}: aggregation {agg} carries {:.4} of the bytes, expected {share:.4}",
                bytes / total
            );
        }
    }
}

#[test]
fn each_lost_frame_is_resent_one_timeout_after_its_own_send() {
    // The outage above (data out and ACKs back over the link, 5-10 us), recovered by
    // timeouts alone (SACK's threshold out of reach). Each packet has its own timer
    // (`limits.rto_per_packet`): the last loss (a frame sent at 10 us) is resent at
    // 10 + 20 us, and the flow ends within the time to resend the losses in a row after
    // that, before the first loss's timer (about 5 us) plus two timeouts.
    let cfg = json!({"topology": {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 1},
        "scheme": {"loss": "sack", "loss_params": {"threshold": 1_000_000}},
        "limits": {"rto_us": 20.0, "rto_per_packet": true},
        "traffic": {"kind": "flows", "src": [0], "dst": [1], "bytes": [2_097_152], "start_ps": [0]},
        "failures": {"links": [{"nodes": [2, 4], "down_at_us": 5, "up_at_us": 10}], "detection_us": 1000}});
    let r = run(cfg).unwrap();
    conserved(&r, "one path");
    let slot = (4096 + 62 + 20) as f64 * 10.0; // ps per data frame at 800 Gbps
    let ack = (64 + 20) as f64 * 10.0;
    let trip = 2.0 * (slot + 500_000.0) + 2.0 * (ack + 500_000.0);
    let resent: u64 = r.flows.iter().map(|f| f.retransmissions).sum();
    let earliest = 10e6 + 20e6 + trip;
    let cct = r.cct_ps as f64;
    assert!(
        cct >= earliest - slot && cct <= earliest + resent as f64 * slot,
        "cct {cct} ps, earliest {earliest:.0} ps, {resent} resent"
    );
    assert!(cct < 5e6 + 2.0 * 20e6, "{cct}");
}
