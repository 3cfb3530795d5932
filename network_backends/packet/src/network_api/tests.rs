//! The packet engine driven as a network: empty transfers, declared flows, reuse.

use super::*;
use crate::config::SimConfig;

fn request(id: u64, src: u32, dst: u32, bytes: u64) -> FlowRequest {
    FlowRequest {
        id,
        src,
        dst,
        bytes,
    }
}

#[test]
fn empty_transfers_end_at_their_start_between_the_engine_completions() {
    // Requests 0 and 2 cross the network (engine flows 0 and 1); 1 is empty and 3 is
    // rank 3's send to itself.
    let requests = [
        request(0, 0, 5, 8192),
        request(1, 1, 6, 0),
        request(2, 2, 7, 4096),
        request(3, 3, 3, 1 << 20),
    ];
    let declared = DrivenPacket::declared(&requests);
    assert_eq!(declared.iter().map(|f| f.id).collect::<Vec<_>>(), [0, 2]);
    let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
        "traffic": {"kind": "flows", "src": [0, 2], "dst": [5, 7], "bytes": [8192, 4096],
                    "start_ps": [0, 0]}}"#;
    let sim = || Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
    // The same two flows driven alone (no empty transfer), for the times to expect.
    let mut alone = DrivenPacket::new(sim(), &requests).unwrap();
    alone.start_flow(requests[0], 0).unwrap();
    alone.start_flow(requests[2], 0).unwrap();
    let first = alone.next_completion(u64::MAX).unwrap().unwrap();
    let second = alone.next_completion(u64::MAX).unwrap().unwrap();
    let (fct2, fct0) = match (first, second) {
        ((t2, 2), (t0, 0)) => (t2, t0),
        other => panic!("flow 2 (4 KB) should finish first: {other:?}"),
    };
    let mut net = DrivenPacket::new(sim(), &requests).unwrap();
    net.start_flow(requests[0], 0).unwrap();
    net.start_flow(requests[2], 0).unwrap();
    net.start_flow(requests[1], 0).unwrap();
    net.start_flow(requests[3], fct2 + 7).unwrap();
    let mut got = Vec::new();
    while let Some(done) = net.next_completion(u64::MAX).unwrap() {
        got.push(done);
    }
    assert_eq!(got, [(0, 1), (fct2, 2), (fct2 + 7, 3), (fct0, 0)]);
    // An engine limit before an empty transfer's time leaves it pending.
    let mut net = DrivenPacket::new(sim(), &requests).unwrap();
    net.start_flow(requests[1], 50).unwrap();
    assert_eq!(net.next_completion(50).unwrap(), None);
    assert_eq!(net.next_completion(51).unwrap(), Some((50, 1)));
}

#[test]
fn requests_must_match_what_the_engine_declared() {
    let cfg = r#"{"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 100},
        "traffic": {"kind": "flows", "src": [0], "dst": [5], "bytes": [8192], "start_ps": [0]}}"#;
    let sim = || Simulation::new(SimConfig::from_json(cfg).unwrap()).unwrap();
    let two = [request(0, 0, 5, 8192), request(1, 1, 5, 10)];
    let e = DrivenPacket::new(sim(), &two).err().unwrap();
    assert!(
        e.contains("other flows than the 2 requests it must carry"),
        "{e}"
    );
    let mut net = DrivenPacket::new(sim(), &[request(0, 0, 5, 8192), request(1, 1, 5, 0)]).unwrap();
    for bad in [
        request(1, 1, 5, 3),
        request(0, 0, 6, 8192),
        request(9, 0, 5, 0),
    ] {
        let e = net.start_flow(bad, 0).unwrap_err();
        assert!(e.contains("was not declared to the packet engine"), "{e}");
    }
}

/// Five rounds of a 4-host ring exchange on a k=4 fat tree, each round starting 2 us
/// after the last one ended; with `extra`, round 3 also starts a flow 1 us in (a
/// collective starting inside the period). Returns the completions, what reuse did and
/// the report's per-flow and per-link numbers.
fn rounds(lb: &str, mode: ReuseMode, extra: bool) -> (Vec<(Ps, u64)>, ReuseStats, Vec<u64>) {
    rounds_in(lb, mode, extra, None)
}

/// `rounds` on engine windows of `window` declared flows, if given.
fn rounds_in(
    lb: &str,
    mode: ReuseMode,
    extra: bool,
    window: Option<usize>,
) -> (Vec<(Ps, u64)>, ReuseStats, Vec<u64>) {
    let (got, reuse, rep) = run_rounds(lb, mode, extra, window, &[64_000; 5]);
    let flows = rep
        .flows
        .iter()
        .flat_map(|f| [f.start_ps, f.finish_ps, f.packets_sent]);
    let links = rep.links.iter().flat_map(|l| [l.bytes, l.max_queue_bytes]);
    let counts = [
        rep.data_packet_hops,
        rep.data_bytes_delivered,
        rep.ecn_marks,
    ];
    (got, reuse, flows.chain(links).chain(counts).collect())
}

/// `rounds_in`'s run with round r's flows of `sizes[r]` bytes (and 1000 more every other
/// host): the completions, the reuse statistics and the report.
fn run_rounds(
    lb: &str,
    mode: ReuseMode,
    extra: bool,
    window: Option<usize>,
    sizes: &[u64; 5],
) -> (Vec<(Ps, u64)>, ReuseStats, Report) {
    let hosts = [0u32, 5, 10, 15];
    let mut requests = Vec::new();
    for r in 0..5u64 {
        for (k, &h) in hosts.iter().enumerate() {
            let (dst, bytes) = (
                hosts[(k + 1) % 4],
                sizes[r as usize] + 1000 * (k as u64 % 2),
            );
            requests.push(request(requests.len() as u64, h, dst, bytes));
        }
        if r == 3 {
            requests.push(request(requests.len() as u64, 1, 6, 30_000));
        }
    }
    let declared = DrivenPacket::declared(&requests);
    let column = |f: fn(&FlowRequest) -> u64| declared.iter().map(f).collect::<Vec<_>>();
    let cfg = format!(
        r#"{{"topology": {{"kind": "fat_tree", "k": 4}}, "link": {{"rate_gbps": 100}},
        "scheme": {{"lb": "{lb}", "cc": "dctcp", "loss": "sack"}},
        "traffic": {{"kind": "flows", "src": {:?}, "dst": {:?}, "bytes": {:?},
                     "start_ps": {:?}}}}}"#,
        column(|f| f.src as u64),
        column(|f| f.dst as u64),
        column(|f| f.bytes),
        vec![0; declared.len()]
    );
    let c = SimConfig::from_json(&cfg).unwrap();
    let mut net = match window {
        None => DrivenPacket::with_reuse(Simulation::new(c).unwrap(), &requests, mode).unwrap(),
        Some(size) => {
            let fabric = crate::Fabric::build(c.fabric()).unwrap();
            let build: EngineFactory = Box::new(move |specs| {
                Simulation::build(fabric.clone(), specs, &c.scheme, &c.limits, c.seed)
            });
            let mut windows = Windows::new(&requests, size, build);
            assert_eq!(windows.len(), declared.len());
            let first = windows.engine(0).unwrap();
            DrivenPacket::with_windows(first, &requests, mode, Some(windows)).unwrap()
        }
    };
    let (mut at, mut next, mut got) = (0u64, 0usize, Vec::new());
    for r in 0..5 {
        let mut left = 4;
        for _ in 0..4 {
            net.start_flow(requests[next], at).unwrap();
            next += 1;
        }
        if r == 3 {
            if extra {
                assert_eq!(net.next_completion(at + 1_000_000).unwrap(), None);
                net.start_flow(requests[next], at + 1_000_000).unwrap();
                left += 1;
            }
            next += 1;
        }
        for _ in 0..left {
            let done = net.next_completion(u64::MAX).unwrap().unwrap();
            got.push(done);
            at = done.0;
        }
        at += 2_000_000;
    }
    let reuse = net.stats();
    (got, reuse, net.report(true))
}

#[test]
fn exact_reuse_replays_repeated_rounds_bit_for_bit() {
    for lb in ["ecmp", "reps"] {
        for extra in [false, true] {
            let (full, none, full_rep) = rounds(lb, ReuseMode::Off, extra);
            let (reused, stats, reused_rep) = rounds(lb, ReuseMode::Exact, extra);
            assert_eq!(none.replayed, 0);
            assert_eq!(full, reused, "{lb}, extra flow {extra}");
            assert_eq!(full_rep, reused_rep, "{lb}, extra flow {extra}");
            assert_eq!(stats.periods, 5);
            // Round 1 is logged and rounds 2..5 replayed, but for the one that a flow
            // starting inside it cut short: that one runs on the engine.
            assert_eq!(stats.replayed, if extra { 3 } else { 4 }, "{lb} {stats:?}");
            assert_eq!(stats.materialized, extra as u64, "{lb}");
        }
    }
    // The same rounds at other times are other periods' equals: every round takes as
    // long as the first.
    let (full, _, _) = rounds("ecmp", ReuseMode::Off, false);
    let round = |r: usize| full[4 * r + 3].0 - (full[4 * r].0.min(full[4 * r + 3].0));
    assert!(round(0) > 0 && (1..5).all(|r| round(r) == round(0)));
}

#[test]
fn a_scheme_with_state_across_flows_is_never_replayed_exactly() {
    // host_spray draws every packet's path from one random stream.
    let (full, _, full_rep) = rounds("host_spray", ReuseMode::Off, false);
    let (reused, stats, reused_rep) = rounds("host_spray", ReuseMode::Exact, false);
    assert_eq!((stats.periods, stats.replayed), (5, 0));
    assert_eq!((&full, &full_rep), (&reused, &reused_rep));
    // Fast mode replays it: the same bytes, other draws.
    let (_, fast, fast_rep) = rounds("host_spray", ReuseMode::Fast, false);
    assert_eq!(fast.replayed, 4, "{fast:?}");
    let hops = |rep: &[u64]| rep[rep.len() - 3];
    assert_eq!(hops(&fast_rep), hops(&full_rep));
}

#[test]
fn engine_windows_give_the_single_engines_results() {
    // Windows of 10 declared flows (rounds of 4 and 5): the engine moves on at rounds 3
    // and 5, which start with less than half a window left.
    for lb in ["ecmp", "reps"] {
        for mode in [ReuseMode::Off, ReuseMode::Exact] {
            let (full, _, full_rep) = rounds_in(lb, ReuseMode::Off, true, None);
            let (windowed, stats, rep) = rounds_in(lb, mode, true, Some(10));
            assert_eq!(full, windowed, "{lb} {mode:?}");
            // Per link and in all; the per-flow list holds only the last engine's flows, round
            // 5's 4 (with reuse the engine moves on as the period opens, replayed or not).
            let links = full_rep.len() - 3 * 21;
            assert_eq!(rep.len() - links, 3 * 4);
            assert_eq!(
                full_rep[3 * 21..],
                rep[rep.len() - links..],
                "{lb} {mode:?}"
            );
            assert_eq!(stats.replayed > 0, mode == ReuseMode::Exact);
        }
    }
}

#[test]
fn a_period_opened_on_a_new_window_records_its_own_statistics() {
    // Rounds of 64, 64, 16, 16, 16 KB on windows of 10 flows: round 3 opens the second
    // engine and is logged there, rounds 4 and 5 replay it. Events (simulated and
    // skipped) and scheme counters are those of one engine with the same reuse: round 3's
    // statistics were once marked on the first engine (more events than round 3 had: the
    // difference wrapped) and its counters floored to 0.
    let sizes = [64_000, 64_000, 16_000, 16_000, 16_000];
    let counts = |window| {
        let (_, stats, rep) = run_rounds("ecmp", ReuseMode::Exact, false, window, &sizes);
        (
            stats.replayed,
            rep.events + rep.events_skipped,
            rep.scheme_counters,
        )
    };
    let one = counts(None);
    assert_eq!(one.0, 3, "rounds 2, 4 and 5 replayed");
    assert_eq!(counts(Some(10)), one);
}
