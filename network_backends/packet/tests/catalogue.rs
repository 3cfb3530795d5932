//! Every scheme with every other: each CC x LB x loss-recovery combination runs, conserves
//! bytes and respects its lower bound; trimming and Go-Back-N recover what they lose; a
//! random loss on every link does not hang any CC.

use serde_json::json;
use tracefabric_packet::{cc, lb, loss, simulate_json, Report};

mod common;
use common::conserved;

fn run(cfg: serde_json::Value) -> Report {
    let text = cfg.to_string();
    simulate_json(&text, &mut |_, _| true).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn every_cc_lb_and_loss_scheme_runs_with_every_other() {
    // An 8:1 incast through 30 KB buffers (drops or trims) and an all-to-all on k = 4.
    let traffics = [
        json!({"kind": "incast", "dst": 0, "senders": 8, "bytes": 65_536}),
        json!({"kind": "all_to_all", "bytes": 16_384}),
    ];
    let (mut runs, mut trimmed, mut dropped) = (0, 0, 0);
    for cc in cc::names() {
        for lb in lb::names() {
            for loss in loss::names() {
                for traffic in &traffics {
                    let cfg = json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": 3,
                        "link": {"rate_gbps": 100}, "switch": {"buffer_bytes": 30_000},
                        "scheme": {"lb": lb, "cc": cc, "loss": loss}, "traffic": traffic});
                    let r = run(cfg);
                    conserved(&r, &format!("{cc}/{lb}/{loss}/{}", traffic["kind"]));
                    if loss == "trim" {
                        trimmed += r.data_packets_trimmed;
                    } else {
                        assert_eq!(
                            r.data_packets_trimmed, 0,
                            "{cc}/{lb}/{loss}: trimmed without trim"
                        );
                    }
                    dropped += r.data_packets_dropped;
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(
        runs,
        cc::names().len() * lb::names().len() * loss::names().len() * 2
    );
    assert!(
        trimmed > 0 && dropped > 0,
        "trimmed {trimmed}, dropped {dropped}"
    );
}

#[test]
fn trimmed_packets_are_all_resent_and_delivered_instead_of_timing_out() {
    // 16:1 incast of 512 KiB through buffers of about one BDP (REPS, as SMaRTT-REPS §4).
    let incast = |loss: &str| {
        run(json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": 1,
            "link": {"rate_gbps": 800, "latency_ns": 600}, "switch": {"buffer_bytes": 400_000},
            "scheme": {"lb": "reps", "loss": loss},
            "traffic": {"kind": "incast", "dst": 0, "senders": 15, "bytes": 524_288}}))
    };
    let (trim, sack) = (incast("trim"), incast("sack"));
    conserved(&trim, "trim");
    conserved(&sack, "sack");
    assert!(trim.data_packets_trimmed > 100 && trim.data_packets_dropped == 0);
    // Each trimmed packet is resent (SACK's threshold may resend a reordered one too) and
    // nothing times out.
    let resent: u64 = trim.flows.iter().map(|f| f.retransmissions).sum();
    assert!(resent >= trim.data_packets_trimmed, "{resent} resent");
    assert_eq!(trim.flows.iter().map(|f| f.timeouts).sum::<u64>(), 0);
    // Without trimming the drops wait for SACK's threshold or a timeout: later.
    assert!(sack.data_packets_dropped > 0);
    assert!(
        trim.cct_ps < sack.cct_ps,
        "trim {} vs sack {}",
        trim.cct_ps,
        sack.cct_ps
    );
}

#[test]
fn go_back_n_resends_from_the_gap_and_completes() {
    // A 30 KB buffer drops part of an 8:1 incast; every sender goes back and finishes.
    let r = run(json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": 1,
        "link": {"rate_gbps": 100}, "switch": {"buffer_bytes": 30_000},
        "scheme": {"lb": "ecmp", "loss": "gbn"},
        "traffic": {"kind": "incast", "dst": 0, "senders": 8, "bytes": 262_144}}));
    conserved(&r, "gbn");
    let counter = |k: &str| r.scheme_counters.iter().find(|(n, _)| n == k).map(|c| c.1);
    assert!(r.data_packets_dropped > 0);
    assert!(counter("loss.rewinds").unwrap() > 0 && counter("receiver.nacks").unwrap() > 0);
    // Go-Back-N resends the window behind a loss, so more than the lost packets.
    let resent: u64 = r.flows.iter().map(|f| f.retransmissions).sum();
    assert!(
        resent > r.data_packets_dropped,
        "resent {resent}, dropped {}",
        r.data_packets_dropped
    );
}

#[test]
fn random_link_loss_hangs_no_cc_and_no_loss_recovery() {
    // 10^-3 per frame on every link (ACKs too) on a 128-host permutation: every flow ends.
    for cc in cc::names() {
        for loss in loss::names() {
            let r = run(json!({"topology": {"kind": "fat_tree", "k": 8}, "seed": 5,
                "link": {"loss_rate": 1e-3}, "limits": {"rto_us": 50.0},
                "scheme": {"lb": "reps", "cc": cc, "loss": loss},
                "traffic": {"kind": "permutation", "bytes": 1_048_576}}));
            conserved(&r, &format!("{cc}/{loss}"));
            // About one frame in a thousand per link: data frames cross 2-6 links.
            let per_hop = r.data_packets_lost_on_links as f64 / r.data_packet_hops as f64;
            assert!(
                (0.5e-3..2e-3).contains(&per_hop),
                "{cc}/{loss}: {per_hop:.2e} per hop"
            );
        }
    }
}

#[test]
fn bad_loss_and_trimming_settings_are_refused_by_name() {
    let cfg = |link: serde_json::Value, scheme: serde_json::Value| {
        json!({"topology": {"kind": "fat_tree", "k": 4}, "link": link, "scheme": scheme,
               "traffic": {"kind": "permutation", "bytes": 4096}})
        .to_string()
    };
    let err =
        simulate_json(&cfg(json!({"loss_rate": 1.0}), json!({})), &mut |_, _| true).unwrap_err();
    assert!(
        err.to_string().contains("`link.loss_rate`") && err.to_string().contains("[0, 1)"),
        "{err}"
    );
    let err = simulate_json(
        &cfg(json!({}), json!({"qdisc_params": {"trim": 1}})),
        &mut |_, _| true,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("qdisc scheme `red`: parameter `trim` must be true or false"),
        "{err}"
    );
    let err = simulate_json(&cfg(json!({}), json!({"receiver": "nope"})), &mut |_, _| {
        true
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown receiver scheme `nope`; expected one of: ack, gbn"),
        "{err}"
    );
}

#[test]
fn rate_and_telemetry_cc_run_with_every_lb_and_loss_scheme_and_react() {
    // Issue 39 acceptance 7 (DCQCN in both variants, HPCC, MCC): an 8:1 incast of 256 KiB
    // through 60 KB buffers marking from 20 % on k = 4, under every LB and every loss
    // recovery: bytes conserved, no CCT below its bound, and each scheme saw its signal
    // (CNPs and cuts, INT windows committed, chunks judged).
    let ccs = [
        ("dcqcn", json!({"variant": "paper"}), "cc.rate_cuts"),
        ("dcqcn", json!({"variant": "vendor"}), "cc.rate_cuts"),
        ("hpcc", json!({}), "cc.window_commits"),
        ("mcc", json!({}), "cc.chunks_"),
    ];
    for (cc, params, signal) in &ccs {
        let mut reacted = 0;
        for lb in lb::names() {
            for loss in ["erasure", "sack", "trim", "gbn"] {
                let cfg = json!({"topology": {"kind": "fat_tree", "k": 4}, "seed": 5,
                    "link": {"rate_gbps": 100}, "switch": {"buffer_bytes": 60_000},
                    "scheme": {"lb": lb, "cc": cc, "cc_params": params, "loss": loss},
                    "traffic": {"kind": "incast", "dst": 0, "senders": 8, "bytes": 262_144}});
                let r = run(cfg);
                conserved(&r, &format!("{cc} {params}/{lb}/{loss}"));
                // The sum of the counters whose names start with `name`.
                let count = |name: &str| -> u64 {
                    r.scheme_counters
                        .iter()
                        .filter(|(n, _)| n.starts_with(name))
                        .map(|(_, v)| *v)
                        .sum()
                };
                if *cc == "dcqcn" {
                    // Each cut answers a CNP (paper: every CNP; vendor: at most one per 4 µs).
                    assert!(
                        count("cc.rate_cuts") <= count("receiver.cnps"),
                        "{lb}/{loss}"
                    );
                }
                reacted += (count(signal) > 0) as usize;
            }
        }
        assert_eq!(reacted, lb::names().len() * 4, "{cc} {params}: {signal}");
    }
}
