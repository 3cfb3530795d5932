//! Lossless fabrics (`qdisc: pfc`, CC-CATALOGUE §11) and receiver-driven transport (`eqds`,
//! §8): the acceptance numbers.

use serde_json::json;
use tracefabric_packet::{simulate_json, Report};

mod common;
use common::conserved;

fn run(cfg: serde_json::Value) -> Report {
    let text = cfg.to_string();
    simulate_json(&text, &mut |_, _| true).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn counter(r: &Report, k: &str) -> u64 {
    r.scheme_counters.iter().find(|(n, _)| n == k).map_or_else(
        || panic!("no counter {k}: {:?}", r.scheme_counters),
        |c| c.1,
    )
}

const GBPS: f64 = 100.0;
const LATENCY_NS: f64 = 1000.0;
const PAYLOAD: u64 = 4096;
const FRAME: u64 = 4096 + 62;
const GAP: u64 = 20;

/// 2·C·d + 2·MTU at 100 Gbps and 1 us (§11: 33.3 KB with 4160 B frames; 33.36 KB here
/// with 4178 B frames and gaps).
fn headroom_rule() -> u64 {
    let cd = (GBPS * 1e9 / 8.0 * LATENCY_NS * 1e-9) as u64;
    2 * cd + 2 * (FRAME + GAP)
}

/// A 16:1 incast to host 0 from the hosts of the other four leaves (4 per leaf, 4
/// spines), ideal CC (no CC), PFC with `pfc` parameters, plus `extra` flows.
fn incast(pfc: serde_json::Value, extra: &[(u32, u32, u64)], incast_bytes: u64) -> Report {
    let (mut src, mut dst, mut bytes, mut start) = (vec![], vec![], vec![], vec![]);
    if incast_bytes > 0 {
        for s in 4..20 {
            src.push(s);
            dst.push(0);
            bytes.push(incast_bytes);
            start.push(0);
        }
    }
    for &(s, d, b) in extra {
        src.push(s);
        dst.push(d);
        bytes.push(b);
        start.push(0);
    }
    run(json!({
        "topology": {"kind": "leaf_spine", "leaves": 5, "spines": 4, "hosts_per_leaf": 4},
        "link": {"rate_gbps": GBPS, "latency_ns": LATENCY_NS},
        "switch": {"buffer_bytes": 400_000, "ecn": false},
        "seed": 1,
        // Lossless: nothing is lost, so a timeout may only be spurious (packets wait behind
        // paused ports far longer than the default 100 us).
        "limits": {"rto_us": 5000.0},
        "scheme": {"lb": "ecmp", "cc": "ideal", "loss": "sack", "qdisc": "pfc", "qdisc_params": pfc},
        "traffic": {"kind": "flows", "src": src, "dst": dst, "bytes": bytes, "start_ps": start}}))
}

#[test]
fn pfc_incast_with_enough_headroom_is_lossless_and_keeps_the_bottleneck_busy() {
    let size = 1 << 20;
    let r = incast(json!({"headroom_bytes": headroom_rule()}), &[], size);
    conserved(&r, "pfc incast");
    assert_eq!(r.data_packets_dropped, 0);
    assert_eq!(counter(&r, "qdisc.pfc_drops"), 0);
    assert!(
        counter(&r, "qdisc.pauses") > 16,
        "{}",
        counter(&r, "qdisc.pauses")
    );
    // Pauses reach back to the senders' NICs (propagation), and every pause is counted on
    // the port it stopped.
    let host_pauses: u64 = r
        .links
        .iter()
        .filter(|l| l.owner >= 4 && l.owner < 20)
        .map(|l| l.pauses)
        .sum();
    assert!(host_pauses > 0);
    assert_eq!(
        r.links.iter().map(|l| l.pauses).sum::<u64>(),
        counter(&r, "qdisc.pauses")
    );
    assert!(r
        .links
        .iter()
        .all(|l| (l.pauses == 0) == (l.paused_ps == 0)));
    // Bottleneck (leaf 20 -> host 0) busy from the first frame's arrival (3 links in) to
    // the last (the last ACK takes 4 links back): >= 98%.
    let bottleneck = r.links.iter().find(|l| l.peer == 0).unwrap();
    let ps = |bytes: u64| bytes as f64 * 8.0 / GBPS * 1e3;
    let one_way = |hops: f64, frame: u64| hops * (ps(frame) + LATENCY_NS * 1e3);
    let window = r.cct_ps as f64 - one_way(3.0, FRAME) - one_way(4.0, 64);
    let frames = (16 * size).div_ceil(PAYLOAD);
    let busy = ps(frames * (FRAME + GAP)) / window;
    eprintln!(
        "pfc incast: bottleneck busy {busy:.4}, {} pauses",
        counter(&r, "qdisc.pauses")
    );
    assert!(
        busy >= 0.98 && busy <= 1.0 + 1e-9,
        "bottleneck busy {busy:.4}"
    );
    assert_eq!(bottleneck.data_bytes, frames * FRAME);
}

#[test]
fn pfc_with_too_little_headroom_drops_and_counts_the_drops() {
    // One frame of headroom: the frames already on the wire when the PAUSE leaves are lost.
    let r = incast(json!({"headroom_bytes": FRAME + GAP}), &[], 1 << 19);
    conserved(&r, "small headroom");
    assert!(r.data_packets_dropped > 0);
    assert_eq!(counter(&r, "qdisc.pfc_drops"), r.data_packets_dropped);
    assert!(counter(&r, "qdisc.pauses") > 0);
}

#[test]
fn a_victim_flow_behind_a_paused_link_loses_throughput() {
    // Host 4 (leaf 21) sends to host 1, idle, on the incast's leaf: it shares only the
    // spine -> leaf 20 link, which PFC pauses, never the bottleneck to host 0.
    let victim = (4u32, 1u32, 1u64 << 20);
    let alone = incast(json!({}), &[victim], 0);
    let with = incast(json!({}), &[victim], 1 << 20);
    conserved(&with, "victim");
    let fct = |r: &Report| {
        let f = r.flows.iter().find(|f| f.src == 4 && f.dst == 1).unwrap();
        f.fct_ps() as f64
    };
    // Alone it runs at line rate: 1 MiB of frames plus the path's latency (4 links).
    let frames = (1u64 << 20).div_ceil(PAYLOAD);
    let ideal =
        frames as f64 * (FRAME + GAP) as f64 * 8.0 / GBPS * 1e3 + 4.0 * 2.0 * LATENCY_NS * 1e3;
    assert!(
        (fct(&alone) / ideal - 1.0).abs() < 0.02,
        "alone {:.0} vs {ideal:.0}",
        fct(&alone)
    );
    // With the incast its packets wait behind paused data: it gets under half its rate.
    let slowdown = fct(&with) / fct(&alone);
    eprintln!("victim: {slowdown:.2}x slower behind paused links");
    assert!(slowdown > 2.0, "victim slowed only {slowdown:.2}x");
    assert_eq!(with.data_packets_dropped, 0);
}

#[test]
fn a_pfc_deadlock_ends_with_an_error_naming_the_ports_of_the_cycle() {
    use tracefabric_packet::config::{LimitsConfig, SchemeConfig, SimConfig};
    use tracefabric_packet::traffic::FlowSpec;
    use tracefabric_packet::units::Time;
    use tracefabric_packet::{Fabric, Simulation};
    // Three leaves, three spines, valley routes around a ring (the classic cyclic buffer
    // dependency): L0 -> S0 -> L1 -> S1 -> L2 -> S2 -> L0, every flow two leaves ahead.
    let cfg = SimConfig::from_json(
        &json!({"topology": {"kind": "leaf_spine", "leaves": 3, "spines": 3, "hosts_per_leaf": 2},
            "link": {"rate_gbps": 100}, "switch": {"ecn": false}})
        .to_string(),
    )
    .unwrap();
    let mut fabric = Fabric::build(cfg.fabric()).unwrap();
    let t = &fabric.topology;
    let (leaf, spine) = (|i: u32| 6 + i, |i: u32| 9 + i);
    assert_eq!((t.tier[6], t.tier[9]), (1, 2));
    let port = |t: &tracefabric_packet::topology::Topology, a: u32, b: u32| {
        t.node_ports[a as usize]
            .iter()
            .copied()
            .find(|&p| t.ports[p as usize].peer == b)
            .unwrap()
    };
    let mut cycle = vec![];
    for i in 0..3 {
        let (l, s, next) = (leaf(i), spine(i), leaf((i + 1) % 3));
        let (up, down) = (
            port(&fabric.topology, l, s),
            port(&fabric.topology, s, next),
        );
        cycle.extend([up, down]);
        for far in 0..3 {
            if far != i {
                fabric.topology.force_route(l, leaf(far), up).unwrap();
                fabric.topology.force_route(s, leaf(far), down).unwrap();
            }
        }
    }
    // Hosts 2i, 2i+1 on leaf i send 4 MiB to the hosts of leaf i + 2: two flows per port of
    // the ring, twice its rate, at line rate (ideal CC).
    let specs: Vec<FlowSpec> = (0..6)
        .map(|h| FlowSpec {
            src: h,
            dst: (h + 4) % 6,
            bytes: 4 << 20,
            start: Time(0),
        })
        .collect();
    let mut scheme = SchemeConfig::default();
    // Lossy, the same routes deliver everything (DCTCP, drops resent).
    (scheme.cc, scheme.loss) = ("dctcp".into(), "sack".into());
    let lossy = Simulation::build(
        fabric.clone(),
        specs.clone(),
        &scheme,
        &LimitsConfig::default(),
        1,
    );
    conserved(
        &lossy.unwrap().run(&mut |_, _| true).unwrap(),
        "valley routes, lossy",
    );
    (scheme.cc, scheme.loss, scheme.qdisc) = ("ideal".into(), "erasure".into(), "pfc".into());
    let sim = Simulation::build(fabric, specs, &scheme, &LimitsConfig::default(), 1).unwrap();
    let err = sim.run(&mut |_, _| true).unwrap_err().to_string();
    eprintln!("{err}");
    assert!(err.contains("PFC deadlock"), "{err}");
    // It names the six ports of the ring, and only them.
    let named: Vec<u32> = err
        .split("port ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next()?.parse().ok())
        .collect();
    let (mut a, mut b) = (named.clone(), cycle.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "{err}");
}

#[test]
fn eqds_incast_is_fair_and_ends_at_the_pacers_rate() {
    // N:1 incast on the 128-host k = 8 fat tree (800 Gbps, 0.5 us links), 1 MiB each
    // (256 packets; a window is 147).
    let size: u64 = 1 << 20;
    for n in [15u32, 127] {
        let r = run(json!({"topology": {"kind": "fat_tree", "k": 8}, "seed": 1,
            "scheme": {"lb": "host_spray", "cc": "eqds", "loss": "trim"},
            "traffic": {"kind": "incast", "dst": 0, "senders": n, "bytes": size}}));
        conserved(&r, &format!("eqds {n}:1"));
        let fct: Vec<f64> = r.flows.iter().map(|f| f.fct_ps() as f64).collect();
        let (lo, hi) = fct
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        // Tail: N·size·(wire/payload)/(0.99·C) + RTT (CC-CATALOGUE §8), wire = frame + gap.
        let frames = n as f64 * size.div_ceil(PAYLOAD) as f64;
        let rtt_ps = 6.0 * (2.0 * 500e3) + 6.0 * ((FRAME + 64) as f64 * 8.0 / 800.0);
        let tail = frames * (FRAME + GAP) as f64 * 8.0 / (0.99 * 800.0) * 1e3 + rtt_ps;
        let err = hi / tail - 1.0;
        eprintln!(
            "eqds {n}:1: spread {:.3}, tail {:.1} us vs {:.1} us ({:+.2}%), trims {}, late {}, probes {}",
            hi / lo, hi / 1e6, tail / 1e6, 100.0 * err, counter(&r, "cc.trims"),
            counter(&r, "cc.late_trims"), counter(&r, "cc.probes")
        );
        assert!(hi / lo <= 1.1, "{n}:1 spread {}", hi / lo);
        assert!(err.abs() <= 0.03, "{n}:1 tail off by {:.2}%", 100.0 * err);
        assert_eq!(r.data_packets_trimmed, counter(&r, "cc.trims"));
        assert_eq!(counter(&r, "cc.late_trims"), 0);
    }
}

#[test]
fn every_cc_and_lb_runs_lossless_over_pfc() {
    use tracefabric_packet::{cc, lb};
    // An 8:1 incast and an all-to-all on k = 4 at 100 Gbps: with the default headroom
    // nothing is dropped, whatever the CC and LB; the incast pauses.
    let traffics = [
        json!({"kind": "incast", "dst": 0, "senders": 8, "bytes": 65_536}),
        json!({"kind": "all_to_all", "bytes": 16_384}),
    ];
    let mut runs = 0;
    for cc in cc::names() {
        for lb in lb::names() {
            for traffic in &traffics {
                let r = run(json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": 3,
                    "link": {"rate_gbps": 100},
                    "scheme": {"lb": lb, "cc": cc, "loss": "sack", "qdisc": "pfc"},
                    "traffic": traffic}));
                let what = format!("{cc}/{lb}/pfc/{}", traffic["kind"]);
                conserved(&r, &what);
                assert_eq!(r.data_packets_dropped, 0, "{what}");
                if traffic["kind"] == "incast" && cc == "ideal" {
                    assert!(counter(&r, "qdisc.pauses") > 0, "{what}");
                }
                runs += 1;
            }
        }
    }
    assert_eq!(runs, cc::names().len() * lb::names().len() * 2);
}

#[test]
fn bad_pfc_and_eqds_parameters_are_refused_by_name() {
    let refused = |scheme: serde_json::Value| {
        let cfg = json!({"topology": {"kind": "fat_tree", "k": 4}, "scheme": scheme,
            "traffic": {"kind": "incast", "dst": 0, "senders": 2, "bytes": 4096}});
        simulate_json(&cfg.to_string(), &mut |_, _| true)
            .unwrap_err()
            .to_string()
    };
    let e = refused(
        json!({"qdisc": "pfc", "qdisc_params": {"xon_bytes": 90_000, "xoff_bytes": 80_000}}),
    );
    assert!(
        e.contains("`xon_bytes` must satisfy xon_bytes < xoff_bytes, got 90000 >= 80000"),
        "{e}"
    );
    let e = refused(json!({"qdisc": "pfc", "qdisc_params": {"xoff_bytes": 100}}));
    assert!(e.contains("`xoff_bytes` must be in 4158..="), "{e}");
    let e = refused(json!({"qdisc": "pfc", "qdisc_params": {"headroom": 1}}));
    assert!(
        e.contains("`headroom` is not a parameter of this scheme"),
        "{e}"
    );
    let e = refused(json!({"cc": "eqds", "cc_params": {"probe_us": 0}}));
    assert!(e.contains("`probe_us` must be in (0, 1000000]"), "{e}");
    let e = refused(json!({"cc": "eqds", "receiver_params": {"rate_fraction": 1.5}}));
    assert!(
        e.contains("receiver scheme `eqds`: parameter `rate_fraction` must be in (0, 1]"),
        "{e}"
    );
}
