use super::*;

fn run_with_host_nics(cfg: &str, lazy: bool) -> Report {
    let mut sim = Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
    assert!(sim.lazy_hosts, "the config should allow lazy host NICs");
    sim.lazy_hosts = lazy;
    sim.run(&mut |_, _| true).unwrap()
}

/// `n` random flows on 16 hosts (k = 4), each to another host, of 1..=`max_bytes` bytes,
/// starting in [0, `max_start_ps`) (all at 0 if it is 0): (src, dst, bytes, start_ps).
fn random_flows(seed: u64, n: usize, max_bytes: u64, max_start_ps: u64) -> [Vec<u64>; 4] {
    let mut x = seed;
    let mut flows: [Vec<u64>; 4] = Default::default();
    for _ in 0..n {
        x = mix64(x);
        let s = x % 16;
        flows[0].push(s);
        flows[1].push((s + 1 + (x >> 8) % 15) % 16);
        flows[2].push(1 + (x >> 16) % max_bytes);
        flows[3].push(if max_start_ps == 0 {
            0
        } else {
            (x >> 32) % max_start_ps
        });
    }
    flows
}

#[test]
fn a_driven_flow_starts_once_and_not_in_the_past() {
    let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
            "traffic": {"kind": "flows", "src": [0, 1], "dst": [5, 6], "bytes": [8192, 4096],
                        "start_ps": [0, 0]}}"#;
    let mut sim = Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
    sim.drive();
    sim.start_flow(0, Time(1_000)).unwrap();
    let twice = sim.start_flow(0, Time(2_000)).unwrap_err().to_string();
    assert!(
        twice.contains("started twice (first at 1000 ps)"),
        "{twice}"
    );
    let (t, f) = sim.next_completion(Time(u64::MAX)).unwrap().unwrap();
    assert_eq!(f, 0);
    // The same flow alone, declared to start then and run undriven, ends at the same ps.
    let alone = cfg.replace(
        r#""src": [0, 1], "dst": [5, 6], "bytes": [8192, 4096],
                        "start_ps": [0, 0]"#,
        r#""src": [0], "dst": [5], "bytes": [8192], "start_ps": [1000]"#,
    );
    assert_ne!(alone, cfg);
    let undriven = Simulation::new(SimConfig::from_json(&alone).unwrap()).unwrap();
    assert_eq!(
        t.0,
        undriven.run(&mut |_, _| true).unwrap().flows[0].finish_ps
    );
    let past = sim.start_flow(1, Time(500)).unwrap_err().to_string();
    assert!(past.contains("before the engine's clock"), "{past}");
    // 300 s is past the time limit and the event clock's 2^48 ps (281 s): refused, as
    // a declared start would be (it wrapped to 19 s).
    let late = sim
        .start_flow(1, Time(300_000_000_000_000))
        .unwrap_err()
        .to_string();
    assert!(late.contains("after limits.max_time_ms"), "{late}");
    assert_eq!(sim.next_completion(Time(u64::MAX)).unwrap(), None);
}

#[test]
fn lazy_host_nics_decide_exactly_as_a_wake_up_event_per_frame_would() {
    // Staggered flows of mixed sizes on k=4 with small buffers: drops, timeouts, and
    // arrivals at busy NICs. With schemes whose draws do not depend on the order in
    // which hosts are processed (host_spray's one shared generator does), every
    // result but the event count must be the same: lazy NICs only skip events.
    let [src, dst, bytes, start] = random_flows(7, 60, 40_000, 3_000_000);
    let mut dropped = 0;
    // Paced flows (rho < 1) become sendable with time alone, also while the NIC is idle.
    for (lb, loss, rho) in [
        ("ecmp", "sack", 1.0),
        ("reps", "erasure", 1.0),
        ("switch_ar", "sack", 1.0),
        ("switch_rr", "erasure", 1.0),
        ("ecmp", "sack", 0.7),
        ("switch_rr", "erasure", 0.35),
    ] {
        let cfg = serde_json::json!({
                "topology": {"kind": "fat_tree", "k": 4}, "switch": {"buffer_bytes": 20_000},
                "scheme": {"lb": lb, "loss": loss, "cc_params": {"rho": rho}}, "limits": {"rto_us": 20.0},
                "traffic": {"kind": "flows", "src": src, "dst": dst, "bytes": bytes, "start_ps": start}})
            .to_string();
        let (mut lazy, eager) = (
            run_with_host_nics(&cfg, true),
            run_with_host_nics(&cfg, false),
        );
        assert!(lazy.events < eager.events, "{lb}");
        dropped += lazy.data_packets_dropped;
        (lazy.events, lazy.digest) = (eager.events, eager.digest);
        assert!(
            lazy == eager,
            "{lb}/{loss}/rho={rho}: lazy and eager host NICs differ"
        );
    }
    assert!(dropped > 0, "the check should cover drops and timeouts");
}

/// DCTCP's steady state (Alizadeh et al. §3.3, eqs. 8-12; CC-CATALOGUE §1): N synchronized
/// long flows through one bottleneck with marking threshold K (packets) give a queue that
/// peaks at Q_max = K + N and swings by A = ½·√(2N(C·RTT + K)) packets, with the link busy.
/// Returns (Q_max, A, C·RTT) in packets and the bottleneck's utilization, measured by
/// sampling its queue every 100 ns over the second half of the run.
fn dctcp_sawtooth(n: u32, k: u64) -> (f64, f64, f64, f64) {
    let wire = 4096 + 62;
    let buffer = 4_000_000u64;
    let k_fraction = (k * wire) as f64 / buffer as f64;
    let bytes = 40_000_000u64;
    let cfg = serde_json::json!({
        "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": n + 1},
        "link": {"rate_gbps": 100, "latency_ns": 5_000},
        "switch": {"buffer_bytes": buffer, "ecn_kmin": k_fraction, "ecn_kmax": k_fraction},
        "scheme": {"cc": "dctcp", "loss": "sack"},
        "traffic": {"kind": "incast", "dst": 0, "senders": n, "bytes": bytes},
    });
    // Every flow's bytes through one 100 Gbps link: the run's length at line rate.
    let span_ps = (n as u64 * bytes) as f64 * 8.0 / 100e9 * 1e12;
    let (from, to) = (Time((span_ps * 0.5) as u64), Time((span_ps * 0.9) as u64));
    let w = probe::watch_downlink(&cfg, 0, from, to, Dur(100_000));
    let slot = (wire + 20) as f64;
    let c_rtt = w.timing.base_rtt(2).0 as f64 * 100e9 / 8e12 / slot;
    let q = |b: u64| b as f64 / wire as f64;
    (
        q(w.max_bytes),
        q(w.max_bytes) - q(w.min_bytes),
        c_rtt,
        w.data_bytes as f64 / w.capacity_bytes,
    )
}

#[test]
fn dctcp_sawtooth_matches_the_papers_steady_state() {
    let k = 40;
    for n in [2u32, 10] {
        let (q_max, amplitude, c_rtt, utilization) = dctcp_sawtooth(n, k);
        let want_max = (k + n as u64) as f64;
        let want_amplitude = 0.5 * (2.0 * n as f64 * (c_rtt + k as f64)).sqrt();
        eprintln!(
            "N = {n}: Q_max {q_max:.1} (theory {want_max}), A {amplitude:.1} (theory {want_amplitude:.1}), C·RTT {c_rtt:.1}, utilization {utilization:.4}"
        );
        assert!(
            (q_max - want_max).abs() <= (0.1 * want_max).max(3.0),
            "N = {n}: Q_max = {q_max:.1}, theory {want_max}"
        );
        assert!(
            (amplitude / want_amplitude - 1.0).abs() <= 0.25,
            "N = {n}: A = {amplitude:.1}, theory {want_amplitude:.1}"
        );
        assert!(utilization >= 0.95, "N = {n}: utilization {utilization:.4}");
    }
}

#[test]
fn trimmed_headers_are_never_ecn_marked() {
    // A 15:1 incast with trimming under one switch (its only queue is the one to host 0)
    // into 50 KB buffers marking every departure over 1 %: data frames on the wire carry
    // marks, trimmed headers (which leave a full queue behind them) none: their NACK is
    // the congestion signal, once.
    let cfg = serde_json::json!({
        "topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 16},
        "switch": {"buffer_bytes": 50_000, "ecn_kmin": 0.01, "ecn_kmax": 0.01},
        "scheme": {"loss": "trim"},
        "traffic": {"kind": "incast", "dst": 0, "senders": 15, "bytes": 200_000}})
    .to_string();
    let mut sim = Simulation::new(SimConfig::from_json(&cfg).unwrap()).unwrap();
    sim.drive();
    for f in 0..15 {
        sim.start_flow(f, Time(0)).unwrap();
    }
    let (mut until, mut marked_data, mut headers) = (Time(0), 0, 0);
    while !sim.quiescent() {
        until = until + Dur(50_000);
        while sim.next_completion(until).unwrap().is_some() {}
        for p in sim.ports.iter().flat_map(|rt| rt.wire.iter()) {
            let (trimmed, ecn) = (
                p.flags() & TRIMMED != 0,
                p.flags() & crate::transport::flags::ECN != 0,
            );
            assert!(!(trimmed && ecn), "a trimmed header was marked");
            headers += trimmed as u32;
            marked_data += (ecn && !trimmed && !p.is_ack()) as u32;
        }
    }
    assert!(
        headers > 0 && marked_data > 0,
        "{headers} headers, {marked_data} marked"
    );
}

#[test]
fn int_table_holds_at_most_the_packets_in_flight_and_empties() {
    // HPCC over small buffers: drops of data and replies, timeouts, retransmissions, and
    // replies for flows already done. Sampled every 200 ns, the INT table never holds
    // more entries than there are packets in flight, and it is empty at the end.
    let [src, dst, bytes, start] = random_flows(11, 40, 200_000, 0);
    for lb in ["host_spray", "reps"] {
        let cfg = serde_json::json!({
            "topology": {"kind": "fat_tree", "k": 4}, "switch": {"buffer_bytes": 20_000},
            "scheme": {"lb": lb, "cc": "hpcc", "loss": "sack"}, "limits": {"rto_us": 20.0},
            "traffic": {"kind": "flows", "src": src, "dst": dst, "bytes": bytes, "start_ps": start}})
        .to_string();
        let mut sim = Simulation::new(SimConfig::from_json(&cfg).unwrap()).unwrap();
        assert!(sim.int_on);
        sim.drive();
        for f in 0..src.len() as u32 {
            sim.start_flow(f, Time(0)).unwrap();
        }
        let mut until = Time(0);
        while !sim.quiescent() {
            assert!(until < Time(100_000_000_000), "{lb}: the run should end");
            until = until + Dur(200_000);
            while sim.next_completion(until).unwrap().is_some() {}
            let held = sim.int.len();
            assert!(held as u64 <= sim.live_packets, "{lb}: {held} entries");
        }
        assert!(sim.pkts_dropped > 0, "{lb}: the check should cover drops");
        assert_eq!(sim.int.len(), 0, "{lb}: entries left after the run");
    }
}
