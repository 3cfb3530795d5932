//! `swift` (Kumar et al., SIGCOMM 2020, as UET's and csg-htsim's `swift.cpp` implement
//! it; CC-CATALOGUE §5): a window of bytes per flow, driven by the round trip of each ACK
//! against a target delay.
//!
//! - target = base + hops·h + fs(cwnd), fs = clamp(α_fs/√cwnd + β_fs, 0, fs_range) with
//!   cwnd in packets, α_fs = fs_range / (1/√fs_min − 1/√fs_max), β_fs = −α_fs/√fs_max
//!   (flow scaling: small windows, many flows, get a higher target).
//! - An ACK with delay < target adds ai·MSS·acked/cwnd (ai·acked below one packet): ai
//!   packets per round trip. Otherwise, at most once per smoothed RTT, the window is cut
//!   to cwnd·max(1 − β(d − t)/d, 1 − max_mdf).
//! - Loss: a NACK (a trimmed packet), the highest ACK running more than `dup_acks`
//!   packets ahead of the lowest unacknowledged one (TCP's three duplicate ACKs, see
//!   `reorder`; 0: reordering is never taken for loss), or a timeout cut the window by
//!   max_mdf, at most once per RTT; `rtx_reset` timeouts in a row set it to `min_cwnd`.
//! - Below one packet of window the flow is paced: one packet per srtt·MSS/cwnd.
//!
//! Defaults, scaled to the fabric as the OFAN paper does at 800 Gbps (App. H): Swift's
//! targets (25 µs at 50 Gbps, 50 µs at 100 Gbps over a 6.25 µs zero-load RTT) leave a
//! queueing component of about 113 KB; OFAN keeps those bytes and makes the target
//! proportional to the hops. Here base = the flow's unloaded round trip (the engine
//! knows it exactly) and h = 113 KB at the line rate over the 6 hops of a 3-tier path
//! (`h_ns` = 188.3 ns at 800 Gbps, so a 6-hop target is 6.25 + 1.13 = 7.38 µs). The
//! window starts at that target times the line rate (App. H). ai 1, β 0.8, max_mdf 0.5,
//! fs_min 0.1 and fs_max 100 packets, rtx_reset 5 are UET's. Deviations: UET's
//! fs_range is 5 × its 20 µs base delay, far more queue than a 1-BDP buffer at 800 Gbps
//! holds; here `fs_range_us` = 5 × the 113 KB queueing component (5.65 µs at 800 Gbps),
//! so the largest target still fits the default 800 KB buffer. The window is bounded by
//! `max_cwnd` bandwidth-delay products of the path (2) and `min_cwnd` packets (0.001;
//! UET stops at 10 B). Swift's separate fabric and endpoint windows are not modelled
//! (one window, as in UET).
//!
//! `mswift` is this core with a median delay filter and a reordering-tolerant loss
//! threshold (`mswift.rs`).

use super::reorder::Reorder;
use super::{fitting, fixed, mul_div, us, CcInit, CongestionControl, FX, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};
use std::collections::VecDeque;

/// The queueing component of Swift's target kept by the OFAN paper (App. H), in bytes,
/// and the hops of the path it was sized for.
const QUEUE_BYTES: f64 = 113_000.0;
const QUEUE_HOPS: f64 = 6.0;
/// Largest delay filter (`median_window`, and half the window when that is 0).
const MAX_MEDIAN: usize = 128;

#[derive(Clone, Copy)]
struct Flow {
    /// Window in 2^-FX bytes.
    cwnd: u64,
    /// Smoothed RTT (1/8 EWMA), picoseconds.
    srtt: u64,
    last_decrease: Option<Time>,
    /// Target without flow scaling: base + hops·h, picoseconds.
    target: u64,
    max_cwnd: u64,
    timeouts_in_a_row: u32,
}

/// Flow scaling: fs(c) = clamp(alpha/√c + beta, 0, range), c in packets, in picoseconds.
#[derive(Clone, Copy)]
struct FlowScaling {
    alpha: f64,
    beta: f64,
    range: f64,
}

impl FlowScaling {
    fn at(&self, cwnd_packets: f64) -> u64 {
        if cwnd_packets <= 0.0 || self.range == 0.0 {
            return 0;
        }
        (self.alpha / cwnd_packets.sqrt() + self.beta).clamp(0.0, self.range) as u64
    }
}

/// A flow's last delay samples (ps, saturating at 4.29 ms: a delay that long is far over
/// any target), in arrival order and sorted, so each sample costs a binary search and a
/// move of at most `MAX_MEDIAN` words.
#[derive(Default)]
struct RecentDelays {
    arrival: VecDeque<u32>,
    sorted: Vec<u32>,
}

impl RecentDelays {
    /// Adds `rtt`, keeps the newest `h`, and returns their median (the lower middle one
    /// of an even count).
    fn push(&mut self, rtt: u64, h: usize) -> u64 {
        let d = rtt.min(u32::MAX as u64) as u32;
        self.arrival.push_back(d);
        let at = self.sorted.partition_point(|&x| x < d);
        self.sorted.insert(at, d);
        while self.arrival.len() > h {
            let old = self.arrival.pop_front().expect("longer than h >= 1");
            let at = self.sorted.partition_point(|&x| x < old);
            self.sorted.remove(at);
        }
        self.sorted[(self.sorted.len() - 1) / 2] as u64
    }
}

/// What sets MSwift apart from Swift (see `mswift`).
pub(super) struct Variant {
    /// Whether the decision takes a median of recent delays (`median_window`), not the
    /// latest one.
    pub median: bool,
    /// Default of `dup_acks` (0: reordering is never a loss).
    pub dup_acks: u32,
}

struct SwiftCore {
    flows: Vec<Flow>,
    /// Per flow, with `dup_acks` > 0.
    reorder: Vec<Reorder>,
    /// The median filter's last delay samples per flow, with a median filter; empty
    /// without.
    delays: Vec<RecentDelays>,
    /// Samples the median is taken over (0: half the window in packets, at least 1).
    window: Option<usize>,
    dup_acks: Option<u32>,
    mss: u64,
    /// ai, beta and 1 - max_mdf in 2^-20.
    ai: u64,
    beta: u64,
    keep: u64,
    fs: FlowScaling,
    min_cwnd: u64,
    rtx_reset: u32,
    delay_cuts: u64,
    loss_cuts: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    let swift = Variant {
        median: false,
        dup_acks: 3,
    };
    build_variant("swift", &swift, init, params)
}

/// Swift's core under the scheme name `name`, with `v`'s filter and loss threshold.
pub(super) fn build_variant(
    name: &str,
    v: &Variant,
    init: &CcInit,
    params: &Params,
) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(SwiftCore::new(name, init, params, v)?))
}

impl SwiftCore {
    fn new(name: &str, init: &CcInit, params: &Params, v: &Variant) -> SimResult<SwiftCore> {
        let mut p = ParamReader::new("cc", name, params);
        let rate = init.line_rate.bps() as f64;
        let queue_us = QUEUE_BYTES * 8.0 / rate * 1e6;
        let ai = p.f64_in_open_closed("ai", 1.0, 0.0, 1e3)?;
        let beta = p.f64_in_open_closed("beta", 0.8, 0.0, 1.0)?;
        let max_mdf = p.f64_in_open_closed("max_mdf", 0.5, 0.0, 1.0)?;
        let base_target = p.f64_opt("base_target_us", 0.0, 1e6)?;
        let h_ns = p.f64_in("h_ns", queue_us * 1e3 / QUEUE_HOPS, 0.0, 1e9)?;
        let fs_range = p.f64_in("fs_range_us", 5.0 * queue_us, 0.0, 1e6)?;
        let fs_min = p.f64_in_open_closed("fs_min_cwnd", 0.1, 0.0, 1e6)?;
        let fs_max = p.f64_in_open_closed("fs_max_cwnd", 100.0, 0.0, 1e6)?;
        // Equal bounds would make the flow-scaling slope 1/0.
        p.strictly_ascending(&[("fs_min_cwnd", fs_min), ("fs_max_cwnd", fs_max)])?;
        let min_cwnd = p.f64_in_open_closed("min_cwnd", 0.001, 0.0, 1e6)?;
        let max_cwnd = p.f64_in_open_closed("max_cwnd", 2.0, 0.0, 1e6)?;
        let rtx_reset = p.u32_min("rtx_reset", 5, 1)?;
        let dup_acks = p.u32_min("dup_acks", v.dup_acks, 0)?;
        let window = if v.median {
            Some(p.int_in("median_window", 0, 0, MAX_MEDIAN as u64)? as usize)
        } else {
            None
        };
        p.finish()?;
        let mss = init.mss as u64;
        let alpha = us(fs_range) as f64 / (1.0 / fs_min.sqrt() - 1.0 / fs_max.sqrt());
        let fs = FlowScaling {
            alpha,
            beta: -alpha / fs_max.sqrt(),
            range: us(fs_range) as f64,
        };
        let flows = (init.paths.iter())
            .map(|path| {
                let base = base_target.map_or(path.base_rtt.0, us);
                let target = base + (path.hops as f64 * h_ns * 1e3).round() as u64;
                // OFAN App. H: the window starts at the target times the line rate.
                let start = mul_div(target, init.line_rate.bps(), 8_000_000_000_000);
                let max = ((path.bdp_bytes as f64 * max_cwnd) as u64).max(mss);
                Flow {
                    cwnd: start.clamp(mss, max) << FX,
                    srtt: path.base_rtt.0,
                    last_decrease: None,
                    target,
                    max_cwnd: max << FX,
                    timeouts_in_a_row: 0,
                }
            })
            .collect::<Vec<_>>();
        let n = flows.len();
        Ok(SwiftCore {
            reorder: (0..if dup_acks > 0 { n } else { 0 })
                .map(|_| Reorder::default())
                .collect(),
            delays: (0..if window.is_some() { n } else { 0 })
                .map(|_| RecentDelays::default())
                .collect(),
            flows,
            window,
            dup_acks: (dup_acks > 0).then_some(dup_acks),
            mss,
            ai: fixed(ai),
            beta: fixed(beta),
            keep: ONE - fixed(max_mdf),
            fs,
            min_cwnd: ((min_cwnd * (mss << FX) as f64) as u64).max(1),
            rtx_reset,
            delay_cuts: 0,
            loss_cuts: 0,
        })
    }

    /// The target delay of flow `f` at its current window (picoseconds).
    fn target(&self, f: FlowId) -> u64 {
        let fl = &self.flows[f as usize];
        let packets = fl.cwnd as f64 / (self.mss << FX) as f64;
        fl.target + self.fs.at(packets)
    }

    /// Flow scaling at a window of `packets` (picoseconds).
    #[cfg(test)]
    fn flow_scaling(&self, packets: f64) -> u64 {
        self.fs.at(packets)
    }

    #[cfg(test)]
    fn cwnd_bytes(&self, f: FlowId) -> f64 {
        self.flows[f as usize].cwnd as f64 / (1u64 << FX) as f64
    }

    /// The delay the decision uses: the latest sample, or the median of the last
    /// `window` (the lower one of an even count, while the filter fills). A window that
    /// follows the flow's window keeps the newest samples when it shrinks.
    fn filtered(&mut self, f: usize, rtt: u64) -> u64 {
        let Some(fixed) = self.window else {
            return rtt;
        };
        let h = if fixed > 0 {
            fixed
        } else {
            let packets = (self.flows[f].cwnd >> FX) / self.mss;
            ((packets / 2) as usize).clamp(1, MAX_MEDIAN)
        };
        self.delays[f].push(rtt, h)
    }

    /// Cuts flow `f` to `factor` (2^-20) of its window if a round trip has passed since
    /// its last cut.
    fn cut(&mut self, f: usize, factor: u64, now: Time) -> bool {
        let fl = &mut self.flows[f];
        if fl.last_decrease.is_some_and(|t| now.0 < t.0 + fl.srtt) {
            return false;
        }
        fl.cwnd = mul_div(fl.cwnd, factor, ONE);
        fl.last_decrease = Some(now);
        true
    }

    fn clamp(&mut self, f: usize) {
        let fl = &mut self.flows[f];
        fl.cwnd = fl.cwnd.clamp(self.min_cwnd, fl.max_cwnd);
    }
}

impl CongestionControl for SwiftCore {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn window_bytes(&self, flow: FlowId) -> u64 {
        fitting(self.flows[flow as usize].cwnd >> FX, self.mss, self.mss)
    }

    fn pacing_gap(&self, flow: FlowId, _wire_bytes: u32) -> Option<Dur> {
        let fl = &self.flows[flow as usize];
        (fl.cwnd < self.mss << FX).then(|| Dur(mul_div(fl.srtt, self.mss << FX, fl.cwnd)))
    }

    fn on_feedback(&mut self, fb: &Feedback, _timers: &mut CcTimers) {
        let f = fb.flow as usize;
        if fb.nack() {
            if self.cut(f, self.keep, fb.now) {
                self.loss_cuts += 1;
            }
            self.clamp(f);
            return;
        }
        let acked = fb.newly_acked as u64;
        if acked == 0 {
            return;
        }
        let rtt = fb.rtt.0;
        let delay = self.filtered(f, rtt);
        let target = self.target(fb.flow);
        let (ai, mss) = (self.ai, self.mss);
        let fl = &mut self.flows[f];
        fl.srtt = (7 * fl.srtt + rtt) / 8;
        fl.timeouts_in_a_row = 0;
        if delay < target {
            let step = if fl.cwnd >= mss << FX {
                // ai·MSS·acked/cwnd bytes, in 2^-FX bytes.
                mul_div(mul_div(mss * acked, ai, ONE), 1 << (2 * FX), fl.cwnd)
            } else {
                mul_div(acked << FX, ai, ONE)
            };
            fl.cwnd += step;
        } else {
            // max(1 - β(d - t)/d, 1 - max_mdf), in 2^-20.
            let drop = mul_div(self.beta, delay - target, delay);
            if self.cut(f, (ONE - drop.min(ONE)).max(self.keep), fb.now) {
                self.delay_cuts += 1;
            }
        }
        if let Some(threshold) = self.dup_acks {
            if self.reorder[f].ack(fb.seq, threshold) && self.cut(f, self.keep, fb.now) {
                self.loss_cuts += 1;
            }
        }
        if fb.complete && self.window.is_some() {
            // An iteration declares far more flows than it has in flight: free the filter.
            self.delays[f] = RecentDelays::default();
        }
        self.clamp(f);
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time, _timers: &mut CcTimers) {
        let f = flow as usize;
        self.flows[f].timeouts_in_a_row += 1;
        if self.flows[f].timeouts_in_a_row >= self.rtx_reset {
            self.flows[f].cwnd = self.min_cwnd;
        } else if self.cut(f, self.keep, now) {
            self.loss_cuts += 1;
        }
        self.clamp(f);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("delay_cuts", self.delay_cuts),
            ("loss_cuts", self.loss_cuts),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths, MSS};
    use crate::transport::flags;
    use serde_json::json;

    const SWIFT: Variant = Variant {
        median: false,
        dup_acks: 3,
    };
    const MSWIFT: Variant = Variant {
        median: true,
        dup_acks: 0,
    };

    /// One flow over 6 hops at 800 Gbps, 500 ns links: OFAN's setting (base RTT 6.25 µs).
    fn core(v: &Variant, params: serde_json::Value) -> SimResult<SwiftCore> {
        let paths = Paths::new(1, 6, 800.0, 500);
        let name = if v.median { "mswift" } else { "swift" };
        SwiftCore::new(
            name,
            &paths.init(),
            &serde_json::from_value(params).unwrap(),
            v,
        )
    }

    fn ack(seq: u32, now_us: f64, rtt_ps: u64) -> Feedback {
        reply(0, seq, (now_us * 1e6) as u64, rtt_ps, MSS, 0)
    }

    #[test]
    fn ofan_targets_and_windows_at_800_gbps() {
        // App. H: 113 KB over 6 hops = 1.13 µs on a 6.25 µs zero-load RTT (6,253.32 ns:
        // 6 × (41.58 + 500) out, 6 × (0.64 + 500) back); the window starts at that target
        // times the line rate (7.383 µs × 100 B/ns = 738 KB).
        let c = core(&SWIFT, json!({})).unwrap();
        assert_eq!(c.flows[0].target, 6_253_320 + 1_130_000);
        assert!((c.cwnd_bytes(0) - 738_332.0).abs() < 1e-3);
    }

    #[test]
    fn the_decrease_factor_is_one_minus_beta_times_the_excess_clamped_at_max_mdf() {
        // CC-CATALOGUE §5: d = 2t gives 1 − 0.8·½ = 0.6; the 0.5 clamp binds once
        // 1 − 0.8(1 − t/d) < 0.5, i.e. d > t/0.375 = 2.67t.
        for (ratio, want) in [
            (2.0, 0.6),
            (2.5, 0.52),
            (2.6, 1.0 - 0.8 * 1.6 / 2.6),
            (2.7, 0.5),
            (4.0, 0.5),
        ] {
            let mut c = core(&SWIFT, json!({})).unwrap();
            let (before, t) = (c.cwnd_bytes(0), c.target(0));
            c.on_feedback(
                &ack(0, 10.0, (t as f64 * ratio) as u64),
                &mut CcTimers::default(),
            );
            let got = c.cwnd_bytes(0) / before;
            assert!(
                (got - want).abs() < 1e-5,
                "d = {ratio}t: factor {got}, want {want}"
            );
        }
    }

    #[test]
    fn flow_scaling_spans_its_range_between_fs_min_and_fs_max() {
        // fs(100 packets) = 0, fs(0.1) = fs_range (5 × 1.13 µs at 800 Gbps), and in
        // between α/√c + β: fs(1) = range·(1 − 0.1)/(√10 − 0.1).
        let c = core(&SWIFT, json!({})).unwrap();
        let range = 5_650_000.0;
        assert_eq!(c.flow_scaling(100.0), 0);
        assert_eq!(c.flow_scaling(1000.0), 0);
        assert!((c.flow_scaling(0.1) as f64 - range).abs() <= 1.0);
        assert!((c.flow_scaling(0.01) as f64 - range).abs() <= 1.0);
        let fs1 = range * 0.9 / (10f64.sqrt() - 0.1);
        assert!(
            (c.flow_scaling(1.0) as f64 - fs1).abs() <= 1.0,
            "{}",
            c.flow_scaling(1.0)
        );
    }

    #[test]
    fn below_target_a_window_of_acks_adds_ai_packets_and_cuts_come_once_per_rtt() {
        let mut c = core(&SWIFT, json!({"ai": 2.0})).unwrap();
        let mut t = CcTimers::default();
        let w0 = c.cwnd_bytes(0);
        let packets = (w0 / MSS as f64) as u32;
        for seq in 0..packets {
            c.on_feedback(&ack(seq, 10.0, 6_300_000), &mut t);
        }
        // Σ ai·MSS²/cwnd over one window: a little under ai packets as it grows.
        let grown = (c.cwnd_bytes(0) - w0) / MSS as f64;
        assert!((grown - 2.0).abs() < 0.02, "grew {grown} packets");
        // A cut, then none until a smoothed RTT (6.3 µs, growing with these samples) passed.
        let high = 3 * c.target(0);
        let before = c.cwnd_bytes(0);
        c.on_feedback(&ack(packets, 20.0, high), &mut t);
        let once = c.cwnd_bytes(0);
        assert!((once / before - 0.5).abs() < 1e-6);
        c.on_feedback(&ack(packets + 1, 23.0, high), &mut t);
        assert_eq!(c.cwnd_bytes(0), once);
        c.on_feedback(&ack(packets + 2, 40.0, high), &mut t);
        assert!((c.cwnd_bytes(0) / once - 0.5).abs() < 1e-6);
    }

    #[test]
    fn timeouts_reset_to_min_cwnd_and_below_one_packet_the_flow_is_paced() {
        let mut c = core(&SWIFT, json!({})).unwrap();
        let mut t = CcTimers::default();
        assert_eq!(c.pacing_gap(0, 4158), None);
        for i in 0..5 {
            c.on_timeout(0, Time(i * 100_000_000), &mut t);
        }
        // 0.001 packets: one packet per 1000 smoothed RTTs (the base RTT so far), one in flight.
        assert!((c.cwnd_bytes(0) / (0.001 * MSS as f64) - 1.0).abs() < 1e-5);
        assert_eq!(c.window_bytes(0), 1);
        let gap = c.pacing_gap(0, 4158).unwrap().0 as f64;
        assert!(
            (gap / (1000.0 * 6_253_320.0) - 1.0).abs() < 1e-3,
            "gap {gap}"
        );
        // A NACK (a trimmed packet) is a loss: one cut by max_mdf.
        let mut c = core(&SWIFT, json!({})).unwrap();
        let w = c.cwnd_bytes(0);
        c.on_feedback(
            &reply(0, 3, 1_000_000, 0, 0, flags::NACK | flags::TRIMMED),
            &mut t,
        );
        assert!((c.cwnd_bytes(0) / w - 0.5).abs() < 1e-6);
    }

    #[test]
    fn mswift_ignores_a_minority_of_slow_paths_and_reordering_that_swift_cuts_on() {
        let mut t = CcTimers::default();
        // Nine sprayed ACKs, four from a path 3x over target: the median stays below it.
        let (mut swift, mut mswift) = (
            core(&SWIFT, json!({})).unwrap(),
            core(&MSWIFT, json!({})).unwrap(),
        );
        let (low, high) = (6_400_000, 3 * swift.target(0));
        for (seq, slow) in [false, true, false, true, false, true, false, true, false]
            .into_iter()
            .enumerate()
        {
            let rtt = if slow { high } else { low };
            swift.on_feedback(&ack(seq as u32, 10.0, rtt), &mut t);
            mswift.on_feedback(&ack(seq as u32, 10.0, rtt), &mut t);
        }
        assert_eq!(swift.delay_cuts, 1);
        assert_eq!(mswift.delay_cuts, 0);
        // Packet 0 overtaken by 10 others (sprayed): a loss to Swift (3), not to MSwift
        // with a threshold of 32; 40 ahead of a hole is a loss to both. By default MSwift
        // never takes reordering for loss (a NACK or a timeout cuts it).
        let (mut swift, mut mswift, mut lazy) = (
            core(&SWIFT, json!({})).unwrap(),
            core(&MSWIFT, json!({"dup_acks": 32})).unwrap(),
            core(&MSWIFT, json!({})).unwrap(),
        );
        for seq in (1..=10).chain([0]) {
            swift.on_feedback(&ack(seq, 10.0, low), &mut t);
            mswift.on_feedback(&ack(seq, 10.0, low), &mut t);
            lazy.on_feedback(&ack(seq, 10.0, low), &mut t);
        }
        assert_eq!((swift.loss_cuts, mswift.loss_cuts), (1, 0));
        for seq in 12..=52 {
            mswift.on_feedback(&ack(seq, 20.0, low), &mut t);
            lazy.on_feedback(&ack(seq, 20.0, low), &mut t);
        }
        assert_eq!((mswift.loss_cuts, lazy.loss_cuts), (1, 0));
    }

    #[test]
    fn mswift_takes_the_median_of_the_last_half_window_of_delays() {
        // MSwift's Eq. 8: H = max(W/2, 1), W the window in packets. At the starting
        // window (738 KB, 180 packets) H = 90: 45 slow samples after 44 fast ones move the
        // median (the lower middle one of 89) over the target, 44 do not; at 2 packets
        // H = 1, the latest sample.
        let mut t = CcTimers::default();
        let mut c = core(&MSWIFT, json!({})).unwrap();
        let (low, high) = (6_400_000, 2 * c.target(0));
        for seq in 0..44 {
            c.on_feedback(&ack(seq, 10.0, low), &mut t);
        }
        assert_eq!(((c.flows[0].cwnd >> FX) / MSS as u64) / 2, 90);
        for seq in 44..88 {
            c.on_feedback(&ack(seq, 10.0, high), &mut t);
        }
        assert_eq!(c.delay_cuts, 0);
        c.on_feedback(&ack(88, 10.0, high), &mut t);
        assert_eq!(c.delay_cuts, 1);
        let mut small = core(&MSWIFT, json!({})).unwrap();
        small.flows[0].cwnd = (2 * MSS as u64) << FX;
        small.on_feedback(&ack(0, 10.0, low), &mut t);
        small.on_feedback(&ack(1, 10.0, high), &mut t);
        assert_eq!(small.delay_cuts, 1);
    }

    #[test]
    fn bad_parameters_are_refused_naming_scheme_and_parameter() {
        for (v, params, name) in [
            (&SWIFT, json!({"base_target_us": -5.0}), "`base_target_us`"),
            (&SWIFT, json!({"beta": 0.0}), "`beta`"),
            (&SWIFT, json!({"beta": 1.2}), "`beta`"),
            (&SWIFT, json!({"max_mdf": -0.5}), "`max_mdf`"),
            (&SWIFT, json!({"fs_min_cwnd": 200.0}), "`fs_min_cwnd`"),
            (
                &SWIFT,
                json!({"fs_max_cwnd": 0.1}),
                "fs_min_cwnd < fs_max_cwnd",
            ),
            (&SWIFT, json!({"target": 10.0}), "`target`"),
            (&SWIFT, json!({"median_window": 9}), "`median_window`"),
            (&MSWIFT, json!({"median_window": 200}), "`median_window`"),
            (&MSWIFT, json!({"h_ns": -1.0}), "`h_ns`"),
        ] {
            let err = refusal(core(v, params));
            let scheme = if v.median { "mswift" } else { "swift" };
            assert!(err.contains(name) && err.contains(scheme), "{err}");
        }
        assert!(core(&SWIFT, json!({"beta": 1.0, "base_target_us": 20.0})).is_ok());
    }
}
