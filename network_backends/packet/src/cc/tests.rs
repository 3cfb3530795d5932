//! The schemes in simulations: steady states and completion times against theory and
//! the papers' numbers.

use crate::sim::probe::watch_downlink;
use crate::units::{Dur, Time, PS_PER_US};
use serde_json::json;

/// Swift's steady state (acceptance 1 of issue 38): N = 8 long flows into one 800 Gbps
/// host downlink, 6 hops each (other pods of a k=4 fat tree). The delay-based loop
/// settles where the round trip meets the target, so the queue it holds is the target's
/// queueing part, hops·h + fs(cwnd), with cwnd = C·(base RTT + queue)/N per flow.
/// Returns (mean queueing delay, that target) in µs over 1.2-2.4 ms of a 3.3 ms run.
fn swift_queue(cc: &str) -> (f64, f64) {
    let n = 8u32;
    let cfg = json!({
        "topology": {"kind": "fat_tree", "k": 4},
        "link": {"rate_gbps": 800, "latency_ns": 500},
        // Deep enough that the first round trip (every window at the target) drops nothing.
        "switch": {"buffer_bytes": 16_000_000},
        "scheme": {"cc": cc, "loss": "sack", "lb": "ecmp"},
        "traffic": {"kind": "incast", "dst": 15, "senders": n, "bytes": 40_000_000},
    });
    let us = |t: f64| Time((t * PS_PER_US as f64) as u64);
    let w = watch_downlink(&cfg, 15, us(1200.0), us(2400.0), Dur(50_000));
    let t = w.timing;
    let slot_us = (t.data(t.payload) + t.gap).as_us();
    let wire = (t.payload + t.header) as f64;
    let queue_us = w.mean_bytes / wire * slot_us;
    // Defaults at 800 Gbps: h = 113 KB / 6 hops, fs over [0.1, 100] packets up to 5 × 113 KB.
    let queue_part = 113_000.0 * 8.0 / 800e9 * 1e6;
    let (h, fs_range) = (queue_part / 6.0, 5.0 * queue_part);
    let base_us = t.base_rtt(6).as_us();
    let cwnd_packets = (base_us + queue_us) / slot_us / n as f64;
    let alpha = fs_range / (1.0 / 0.1f64.sqrt() - 1.0 / 100f64.sqrt());
    let fs = (alpha / cwnd_packets.sqrt() - alpha / 10.0).clamp(0.0, fs_range);
    let target = 6.0 * h + fs;
    let utilization = w.data_bytes as f64 / w.capacity_bytes;
    eprintln!(
        "{cc}: mean queue {queue_us:.3} us (samples {:.0}-{:.0} B), target {target:.3} us (6h {:.3} + fs {fs:.3} at {cwnd_packets:.1} packets), utilization {utilization:.4}",
        w.min_bytes, w.max_bytes, 6.0 * h
    );
    assert!(utilization > 0.97, "{cc}: utilization {utilization}");
    (queue_us, target)
}

#[test]
fn swift_and_mswift_hold_the_bottleneck_queue_at_their_target() {
    for cc in ["swift", "mswift"] {
        let (queue, target) = swift_queue(cc);
        assert!(
            (queue / target - 1.0).abs() <= 0.25,
            "{cc}: mean queueing delay {queue:.3} us vs target {target:.3} us"
        );
    }
}

/// TIMELY's standing queue (acceptance 4 of issue 38; CC-CATALOGUE §3): with the base
/// RTT below T_low every update adds δ until the RTT passes T_low, so the bottleneck's
/// queue rises to about T_low − base RTT before the first cut; the gradient then takes
/// over (a cut of β·gradient, so a queue that stops growing stops the cuts). Two flows
/// into one 100 Gbps host link, 2 hops, 2 µs links (base RTT 8.7 µs), starting at 45 %
/// of the line rate each. Returns the largest queue (µs) over the first 3 ms, the mean
/// over them, T_low − base RTT, and the utilization.
fn timely_queue() -> (f64, f64, f64, f64) {
    let cfg = json!({
        "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 3},
        "link": {"rate_gbps": 100, "latency_ns": 2_000},
        "switch": {"buffer_bytes": 4_000_000},
        "scheme": {"cc": "timely", "loss": "sack", "cc_params": {"init_rate": 0.45}},
        "traffic": {"kind": "incast", "dst": 0, "senders": 2, "bytes": 50_000_000},
    });
    let w = watch_downlink(&cfg, 0, Time::ZERO, Time(3000 * PS_PER_US), Dur(1_000_000));
    let t = w.timing;
    let slot_us = (t.data(t.payload) + t.gap).as_us();
    let in_us = |bytes: f64| bytes / (t.payload + t.header) as f64 * slot_us;
    (
        in_us(w.max_bytes as f64),
        in_us(w.mean_bytes),
        50.0 - t.base_rtt(2).as_us(),
        w.data_bytes as f64 / w.capacity_bytes,
    )
}

#[test]
fn timely_lets_the_queue_stand_at_t_low_minus_the_base_rtt() {
    let (peak, mean, want, utilization) = timely_queue();
    let _ = utilization;
    eprintln!("timely: queue peaks at {peak:.2} us (mean {mean:.2} us), T_low - base RTT = {want:.2} us, utilization {utilization:.3}");
    assert!(
        (peak / want - 1.0).abs() <= 0.2,
        "queue peaks at {peak:.2} us, want {want:.2} us"
    );
    // Far from T_high − base RTT (491 µs), where the other rule would cut. The gradient's
    // cut overshoots (a round trip of feedback delay), the queue drains and the additive
    // increase refills it: the mean is a sawtooth's, below the peak.
    assert!(
        mean < peak && peak < 450.0,
        "mean {mean:.2} us, peak {peak:.2} us"
    );
}
