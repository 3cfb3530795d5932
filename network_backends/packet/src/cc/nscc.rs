//! `nscc`: the Ultra Ethernet sender-side congestion control as the public UEC simulator
//! implements it (ultraethernet/uet-htsim `uec.cpp`, `updateCwndOnAck_NSCC`,
//! `initNsccParams`; CC-CATALOGUE §7). A window of bytes per flow. Each ACK brings
//! `acked` bytes, its ECN echo and delay = rtt − base_rtt:
//!
//! | | no ECN | ECN |
//! |---|---|---|
//! | delay ≥ target | fair increase: inc += fi·acked | multiplicative decrease |
//! | delay < target | proportional increase: inc += α·acked·(target − delay) | nothing (the LB moves) |
//!
//! - **Fulfil**: once 8 MTU were acknowledged since the last one, or a base RTT passed,
//!   cwnd += inc/cwnd (so fi and α·(target − delay) are bytes per round trip), plus η
//!   once per base RTT.
//! - **Fast increase**: while delay < 1 µs, once a window of such bytes came back, each
//!   such ACK adds acked·fi_scale instead of the proportional increase.
//! - **Multiplicative decrease** on the averaged delay (EWMA, weight 0.0125; an unmarked
//!   sample above target counts as base/4): at most once per base RTT,
//!   cwnd ×= max(1 − γ(avg − target)/avg, 0.5).
//! - **QuickAdapt**: on a NACK, a delay above 4·target or an armed trigger, at most once
//!   per base RTT + target and only if the bytes acknowledged in that window are below
//!   maxwnd/2^qa_gate: cwnd = max(those bytes, MTU), and the ECN-marked feedback of the
//!   bytes then in flight is ignored.
//! - **NACK** (a trimmed packet): the average delay takes a sample of one base RTT, the
//!   trigger is armed, and unless QuickAdapt runs, cwnd −= the packet.
//! - **Timeout**: cwnd −= the packet presumed lost (UET's `mark_packet_for_retransmission`).
//! - **Bounds**: [MTU, 1.5·BDP]; the window starts at 1.5·BDP.
//!
//! Defaults (`initNsccParams`), per flow from its path: target = 0.75 × base RTT
//! (`target_qdelay`; 1.0 without trimming), a = BDP/(100 Gbps × 12 µs), b = target/12 µs,
//! α = 4·MSS·a·b/target, fi = 5·MSS·a, η = 0.15·MSS·a, γ 0.8, fi_scale = 0.25·a,
//! qa_gate 3. Deviations: UET sizes a, b and the fulfil period from one network RTT and
//! tracks base_rtt as the least RTT seen; here each flow uses its own unloaded round trip,
//! which the engine knows exactly. UET ACKs every 16 KiB; the engine ACKs each packet
//! (`acked` is that packet's bytes).

use super::{fitting, fixed, mul_div, CcInit, CongestionControl, FX, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time, PS_PER_US};

/// UET's reference network: 100 Gbps, 12 µs.
const REFERENCE_RTT: u64 = 12 * PS_PER_US;
const REFERENCE_BDP: f64 = 100e9 / 8.0 * 12e-6;
/// Fast increase below this delay (UET: 1 µs, not scaled).
const FAST_DELAY: u64 = PS_PER_US;
/// The delay average's weight, 0.0125, in 2^-20.
const DELAY_ALPHA: u64 = 13_107;

#[derive(Clone, Copy)]
struct Flow {
    /// Window in 2^-FX bytes; increments pending the next fulfil (bytes²).
    cwnd: u64,
    inc: u64,
    max_cwnd: u64,
    base: u64,
    target: u64,
    avg_delay: u64,
    /// Per-flow constants: α·target (bytes, so inc += alpha·acked·(target − delay)/target),
    /// fi and η (bytes), fi_scale (2^-20).
    alpha: u64,
    fi: u64,
    eta: u64,
    fi_scale: u64,
    fast_count: u64,
    increasing: bool,
    received: u64,
    last_adjust: Option<Time>,
    last_decrease: Option<Time>,
    /// QuickAdapt: bytes acknowledged in the current window and its end.
    achieved: u64,
    qa_end: Option<Time>,
    trigger: bool,
    to_ignore: u64,
    ignored: u64,
}

pub struct Nscc {
    flows: Vec<Flow>,
    mss: u64,
    /// A fulfil is due once more than this many bytes were acknowledged (8 MTU).
    fulfil_bytes: u64,
    gamma: u64,
    qa_gate: u32,
    quick_adapts: u64,
    decreases: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Nscc::new(init, params)?))
}

impl Nscc {
    fn new(init: &CcInit, params: &Params) -> SimResult<Nscc> {
        let mut p = ParamReader::new("cc", "nscc", params);
        let default_target = if init.trimming { 0.75 } else { 1.0 };
        let target_qdelay = p.f64_in_open_closed("target_qdelay", default_target, 0.0, 100.0)?;
        let gamma = p.f64_in_open_closed("gamma", 0.8, 0.0, 1.0)?;
        let qa_gate = p.int_in("qa_gate", 3, 0, 30)? as u32;
        let max_window = p.f64_in_open_closed("max_window", 1.5, 0.0, 1e3)?;
        p.finish()?;
        let mss = init.mss as u64;
        let flows = (init.paths.iter())
            .map(|path| {
                let bdp = path.bdp_bytes.max(mss);
                let base = path.base_rtt.0;
                let target = (base as f64 * target_qdelay).round() as u64;
                let a = bdp as f64 / REFERENCE_BDP;
                let b = target as f64 / REFERENCE_RTT as f64;
                let max_cwnd = ((bdp as f64 * max_window) as u64).max(mss) << FX;
                Flow {
                    cwnd: max_cwnd,
                    inc: 0,
                    max_cwnd,
                    base,
                    target,
                    avg_delay: 0,
                    alpha: (4.0 * mss as f64 * a * b).round() as u64,
                    fi: (5.0 * mss as f64 * a).round() as u64,
                    eta: (0.15 * mss as f64 * a).round() as u64,
                    fi_scale: fixed(0.25 * a),
                    fast_count: 0,
                    increasing: false,
                    received: 0,
                    last_adjust: None,
                    last_decrease: None,
                    achieved: 0,
                    qa_end: None,
                    trigger: false,
                    to_ignore: 0,
                    ignored: 0,
                }
            })
            .collect();
        Ok(Nscc {
            flows,
            mss,
            fulfil_bytes: 8 * init.packet_wire_bytes as u64,
            gamma: fixed(gamma),
            qa_gate,
            quick_adapts: 0,
            decreases: 0,
        })
    }

    #[cfg(test)]
    fn cwnd_bytes(&self, f: FlowId) -> f64 {
        self.flows[f as usize].cwnd as f64 / (1u64 << FX) as f64
    }

    /// avg ← (1 − 0.0125)·avg + 0.0125·sample, an unmarked sample above target counting
    /// as base/4 (UET's `update_delay`).
    fn average(fl: &mut Flow, delay: u64, ecn: bool) {
        let sample = if !ecn && delay > fl.target {
            fl.base / 4
        } else {
            delay
        };
        fl.avg_delay = (fl.avg_delay * (ONE - DELAY_ALPHA) + sample * DELAY_ALPHA) / ONE;
    }

    /// UET's `quick_adapt`: true if it adapted, or if this marked feedback is ignored.
    /// `skip`: the feedback is marked (a NACK counts as marked).
    fn quick_adapt(&mut self, f: usize, fb: &Feedback, skip: bool, delay: u64) -> bool {
        let (now, loss) = (fb.now, fb.nack() || fb.trimmed());
        let (mss, gate) = (self.mss, self.qa_gate);
        let fl = &mut self.flows[f];
        let mut done = false;
        if fl.ignored < fl.to_ignore && skip {
            done = true;
        } else if fl.qa_end.is_none_or(|end| now > end) {
            if fl.qa_end.is_some()
                && (fl.trigger || loss || delay > 4 * fl.target)
                && fl.achieved << FX < fl.max_cwnd >> gate
            {
                fl.to_ignore = fb.in_flight;
                fl.cwnd = fl.achieved.max(mss) << FX;
                fl.ignored = 0;
                fl.trigger = false;
                done = true;
                self.quick_adapts += 1;
            }
            fl.achieved = 0;
            fl.qa_end = Some(Time(now.0 + fl.base + fl.target));
        }
        if done {
            fl.inc = 0;
            fl.received = 0;
        }
        done
    }

    fn clamp(&mut self, f: usize) {
        let fl = &mut self.flows[f];
        fl.cwnd = fl.cwnd.clamp(self.mss << FX, fl.max_cwnd);
    }

    fn on_ack(&mut self, f: usize, fb: &Feedback) {
        let (now, acked, rtt, ecn) = (fb.now, fb.newly_acked as u64, fb.rtt.0, fb.ecn());
        let fl = &mut self.flows[f];
        fl.achieved += acked;
        fl.received += acked;
        fl.ignored += acked;
        let delay = if rtt >= fl.base {
            Self::average(fl, rtt - fl.base, ecn);
            rtt - fl.base
        } else {
            fl.avg_delay
        };
        if self.quick_adapt(f, fb, ecn, delay) {
            return;
        }
        let fl = &mut self.flows[f];
        match (ecn, delay >= fl.target) {
            (false, true) => fl.inc += fl.fi * acked,
            (false, false) => {
                // Fast increase, else proportional increase.
                if delay < FAST_DELAY {
                    fl.fast_count += acked;
                    if fl.fast_count << FX > fl.cwnd || fl.increasing {
                        fl.cwnd += mul_div(acked << FX, fl.fi_scale, ONE);
                        fl.increasing = true;
                    }
                } else {
                    fl.fast_count = 0;
                    fl.increasing = false;
                }
                if !fl.increasing {
                    fl.inc += mul_div(fl.alpha * acked, fl.target - delay, fl.target);
                }
            }
            (true, true) => {
                (fl.increasing, fl.fast_count) = (false, 0);
                let avg = fl.avg_delay;
                if avg > fl.target && fl.last_decrease.is_none_or(|t| now.0 - t.0 > fl.base) {
                    // max(1 − γ(avg − target)/avg, 0.5), in 2^-20.
                    let drop = mul_div(self.gamma, avg - fl.target, avg).min(ONE / 2);
                    fl.cwnd = mul_div(fl.cwnd, ONE - drop, ONE);
                    fl.last_decrease = Some(now);
                    self.decreases += 1;
                }
            }
            (true, false) => {}
        }
        self.clamp(f);
        let fl = &mut self.flows[f];
        let period_over = fl.last_adjust.is_none_or(|t| now.0 - t.0 >= fl.base);
        if fl.received > self.fulfil_bytes || period_over {
            // Fulfil: cwnd += inc/cwnd (bytes² / bytes), in 2^-FX bytes.
            fl.cwnd += mul_div(fl.inc, 1 << (2 * FX), fl.cwnd);
            if period_over {
                fl.cwnd += fl.eta << FX;
                fl.last_adjust = Some(now);
            }
            (fl.inc, fl.received) = (0, 0);
            self.clamp(f);
        }
    }

    fn on_nack(&mut self, f: usize, fb: &Feedback) {
        let mss = self.mss;
        let fl = &mut self.flows[f];
        fl.ignored += mss;
        // A trimmed packet: the delay average takes a sample of one base RTT.
        let sample = fl.base;
        Self::average(fl, sample, true);
        fl.trigger = true;
        if !self.quick_adapt(f, fb, true, 0) {
            let fl = &mut self.flows[f];
            fl.cwnd = fl.cwnd.saturating_sub(mss << FX);
            self.clamp(f);
        }
    }
}

impl CongestionControl for Nscc {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn window_bytes(&self, flow: FlowId) -> u64 {
        fitting(self.flows[flow as usize].cwnd >> FX, self.mss, self.mss)
    }

    fn pacing_gap(&self, _flow: FlowId, _wire_bytes: u32) -> Option<Dur> {
        None
    }

    fn on_feedback(&mut self, fb: &Feedback, _timers: &mut CcTimers) {
        let f = fb.flow as usize;
        if fb.nack() || fb.trimmed() {
            self.on_nack(f, fb);
        } else if fb.newly_acked > 0 {
            self.on_ack(f, fb);
        }
    }

    fn on_timeout(&mut self, flow: FlowId, _now: Time, _timers: &mut CcTimers) {
        let f = flow as usize;
        self.flows[f].cwnd = self.flows[f].cwnd.saturating_sub(self.mss << FX);
        self.clamp(f);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("quick_adapts", self.quick_adapts),
            ("multiplicative_decreases", self.decreases),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths, MSS};
    use crate::transport::{flags, FlowPath};
    use crate::units::Rate;
    use serde_json::json;

    /// CC-CATALOGUE §7's setting: 800 Gbps, RTT 12.25 µs (BDP 1.225 MB), MSS 4096, trimming.
    fn nscc(params: serde_json::Value) -> Nscc {
        nscc_trimming(params, true)
    }

    fn nscc_trimming(params: serde_json::Value, trimming: bool) -> Nscc {
        let paths = Paths {
            paths: vec![FlowPath {
                hops: 6,
                base_rtt: Dur(12_250_000),
                bdp_bytes: 1_225_000,
            }],
            rate: Rate::from_gbps(800.0),
        };
        let init = CcInit {
            trimming,
            ..paths.init()
        };
        Nscc::new(&init, &serde_json::from_value(params).unwrap()).unwrap()
    }

    fn ack(seq: u32, now_us: f64, delay_us: f64, marked: bool) -> Feedback {
        let rtt = 12_250_000 + (delay_us * 1e6) as u64;
        reply(
            0,
            seq,
            (now_us * 1e6) as u64,
            rtt,
            MSS,
            if marked { flags::ECN } else { 0 },
        )
    }

    /// Sets flow 0's window (bytes) and returns the window change of the given ACKs.
    fn change(n: &mut Nscc, cwnd: f64, acks: &[Feedback]) -> f64 {
        n.flows[0].cwnd = (cwnd * (1u64 << FX) as f64) as u64;
        for fb in acks {
            n.on_feedback(fb, &mut CcTimers::default());
        }
        n.cwnd_bytes(0) - cwnd
    }

    #[test]
    fn init_nscc_params_scale_with_the_bdp_as_the_catalogue_works_out() {
        // a = 1.225 MB / 150 KB = 8.17, target = 0.75 × 12.25 = 9.19 µs, fi = 167 KB,
        // η = 5.0 KB, maxwnd = 1.84 MB (the starting window), QuickAdapt above 36.8 µs.
        let n = nscc(json!({}));
        let f = &n.flows[0];
        let a: f64 = 1_225_000.0 / 150_000.0;
        assert_eq!(f.target, 9_187_500);
        assert_eq!(f.fi, (5.0 * 4096.0 * a).round() as u64);
        assert_eq!((f.fi, f.eta), (167_253, 5_018));
        assert_eq!(n.cwnd_bytes(0), 1_837_500.0);
        assert_eq!(f.alpha, (4.0 * 4096.0 * a * 9.1875 / 12.0).round() as u64);
        assert_eq!(f.fi_scale, fixed(0.25 * a));
        // Without trimming the target is one base RTT (UET's initNsccParams).
        assert_eq!(nscc_trimming(json!({}), false).flows[0].target, 12_250_000);
    }

    #[test]
    fn increases_reach_the_window_at_each_fulfil() {
        let cw = 600_000.0;
        let mss = MSS as f64;
        let (fi, eta) = (167_253.0, 5_018.0);
        // Fair increase (unmarked, delay >= target): the first ACK fulfils at once
        // (no period yet), with η; then after 8 MTU (9 packets of 4096 B).
        let mut n = nscc(json!({}));
        let first = change(&mut n, cw, &[ack(0, 1.0, 12.0, false)]);
        assert!((first - (fi * mss / cw + eta)).abs() < 0.01, "{first}");
        let cw1 = n.cwnd_bytes(0);
        let nine: Vec<_> = (1..=9).map(|s| ack(s, 2.0, 12.0, false)).collect();
        let second = change(&mut n, cw1, &nine);
        assert!((second - fi * 9.0 * mss / cw1).abs() < 0.01, "{second}");
        // Proportional increase at delay 2 µs: α·acked·(target − delay), α·target = 4·MSS·a·b.
        let mut n = nscc(json!({}));
        let alpha = n.flows[0].alpha as f64;
        let prop = change(&mut n, cw, &[ack(0, 1.0, 2.0, false)]);
        let want = alpha * mss * (9.1875 - 2.0) / 9.1875 / cw + eta;
        assert!((prop - want).abs() < 0.01, "{prop} vs {want}");
        // Fast increase: below 1 µs, once a window of such bytes came back, acked·fi_scale per ACK.
        let mut n = nscc(json!({}));
        change(&mut n, 100_000.0, &[]);
        let mut seq = 0;
        while !n.flows[0].increasing {
            let cwnd = n.cwnd_bytes(0);
            n.on_feedback(
                &ack(seq, 1.0 + 0.01 * seq as f64, 0.5, false),
                &mut CcTimers::default(),
            );
            seq += 1;
            assert!(n.flows[0].increasing == (seq as f64 * mss > cwnd), "{seq}");
        }
        let now = n.cwnd_bytes(0);
        let step = change(&mut n, now, &[ack(seq, 5.0, 0.5, false)]);
        assert!(
            (step - 0.25 * 1_225_000.0 / 150_000.0 * mss).abs() < 0.01,
            "{step}"
        );
    }

    #[test]
    fn a_marked_ack_over_target_cuts_by_gamma_on_the_average_delay_once_per_rtt() {
        let mut n = nscc(json!({}));
        let target = 9.1875;
        // avg = 2·target (and the sample keeps it there): × (1 − 0.8·½) = 0.6.
        n.flows[0].avg_delay = 2 * 9_187_500;
        // (The first ACK also fulfils with η, as no period has passed yet.)
        let cut = change(&mut n, 1_000_000.0, &[ack(0, 1.0, 2.0 * target, true)]);
        assert!((cut + 400_000.0 - 5_018.0).abs() < 1.0, "{cut}");
        // Within a base RTT: nothing more; after it, avg = 4·target: clamped at × 0.5.
        n.flows[0].avg_delay = 4 * 9_187_500;
        assert_eq!(
            change(&mut n, 600_000.0, &[ack(1, 5.0, 4.0 * target - 1.0, true)]),
            0.0
        );
        let cut = change(&mut n, 600_000.0, &[ack(2, 14.0, 4.0 * target - 1.0, true)]);
        assert!((cut + 300_000.0 - 5_018.0).abs() < 1.0, "{cut}");
    }

    #[test]
    fn a_nack_takes_a_packet_and_quickadapt_sets_the_window_to_what_was_achieved() {
        let mut n = nscc(json!({}));
        let mut t = CcTimers::default();
        let nack = |now_us: f64| {
            reply(
                0,
                7,
                (now_us * 1e6) as u64,
                0,
                0,
                flags::NACK | flags::TRIMMED,
            )
        };
        // The first ACK opens QuickAdapt's window (base RTT + target = 21.4 µs).
        n.on_feedback(&ack(0, 1.0, 1.0, false), &mut t);
        let w = n.cwnd_bytes(0);
        n.on_feedback(&nack(2.0), &mut t);
        assert_eq!(n.cwnd_bytes(0), w - MSS as f64);
        // 20 packets come back in the window; a NACK after it: cwnd = 20 packets (below
        // maxwnd/8 = 230 KB).
        for s in 1..=20 {
            n.on_feedback(&ack(s, 3.0, 1.0, false), &mut t);
        }
        n.on_feedback(&nack(23.0), &mut t);
        assert_eq!(n.cwnd_bytes(0), 20.0 * MSS as f64);
        assert_eq!(n.quick_adapts, 1);
        // A delay above 4·target adapts too, once the next window is over.
        for s in 21..=30 {
            n.on_feedback(&ack(s, 30.0, 1.0, false), &mut t);
        }
        n.on_feedback(&ack(31, 46.0, 40.0, false), &mut t);
        assert_eq!(n.cwnd_bytes(0), 11.0 * MSS as f64);
    }

    #[test]
    fn bad_parameters_are_refused_naming_scheme_and_parameter() {
        let paths = Paths::new(1, 6, 800.0, 500);
        for (params, name) in [
            (json!({"target_qdelay": -0.75}), "`target_qdelay`"),
            (json!({"gamma": 1.5}), "`gamma`"),
            (json!({"gamma": 0.0}), "`gamma`"),
            (json!({"qa_gate": -1}), "`qa_gate`"),
            (json!({"target": 1.0}), "`target`"),
        ] {
            let err = refusal(Nscc::new(
                &paths.init(),
                &serde_json::from_value(params).unwrap(),
            ));
            assert!(err.contains(name) && err.contains("nscc"), "{err}");
        }
    }
}
