use super::*;

    fn run_with_host_nics(cfg: &str, lazy: bool) -> Report {
        let mut sim = Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
        assert!(sim.lazy_hosts, "the config should allow lazy host NICs");
        sim.lazy_hosts = lazy;
        sim.run(&mut |_, _| true).unwrap()
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
        assert_eq!(sim.next_completion(Time(u64::MAX)).unwrap(), None);
    }

    #[test]
    fn lazy_host_nics_decide_exactly_as_a_wake_up_event_per_frame_would() {
        // Staggered flows of mixed sizes on k=4 with small buffers: drops, timeouts, and
        // arrivals at busy NICs. With schemes whose draws do not depend on the order in
        // which hosts are processed (host_spray's one shared generator does), every
        // result but the event count must be the same: lazy NICs only skip events.
        let mut x = 7u64;
        let (mut src, mut dst, mut bytes, mut start) = (vec![], vec![], vec![], vec![]);
        for _ in 0..60 {
            x = mix64(x);
            let s = x % 16;
            src.push(s);
            dst.push((s + 1 + (x >> 8) % 15) % 16);
            bytes.push(1 + (x >> 16) % 40_000);
            start.push((x >> 32) % 3_000_000);
        }
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
