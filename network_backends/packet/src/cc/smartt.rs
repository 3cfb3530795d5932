//! `smartt` (SMaRTT-REPS, Bonato et al., §3, Algorithms 1-3; CC-CATALOGUE §6): a window
//! of bytes per flow, updated on every ACK by which of four quadrants of (ECN mark,
//! RTT vs target RTT) it falls in. With `size` the acknowledged bytes, `mtu` the MSS:
//!
//! | | RTT <= trtt | RTT > trtt |
//! |---|---|---|
//! | marked | FD: cwnd −= (cwnd/bdp)·fd·size | MD: cwnd −= min(size, md·(rtt − trtt)/rtt·size + FD) |
//! | unmarked | MI: cwnd += min(size, mi·(trtt − rtt)/rtt·(size/cwnd)·mtu) + FI | FI: cwnd += (size/cwnd)·mtu·fi |
//!
//! (The paper's Eqs. 1-2 read "cwnd = ..." but are decrements; md = 2 makes MD remove
//! exactly one packet per ACK at rtt = 2·trtt. §3.2.2 adds FD to MD "not shown in Eq. 2"
//! and caps the decrease at one packet; the cap covers both, as the authors' htsim code.) Decreases wait for congestion to be
//! persistent (Wait-to-Decrease, §3.6.1): an EWMA of the ECN marks must be at least
//! `wtd`, so that REPS can move traffic off a transiently marked path first.
//!
//! - **QuickAdapt** (Alg. 2, §3.3). A trimmed packet (a NACK) or a timeout takes one
//!   packet off the window and arms a trigger; at the first feedback after the current
//!   window of `trtt` ends, the window becomes `qa_scaling` × the bytes received during it
//!   (acknowledged payload, and the header of each trimmed packet as Alg. 1 line 4 counts
//!   it: the rate the bottleneck delivered), and the feedback of the bytes then in flight
//!   is ignored. At most once per trtt. Alg. 1 line 29 prints "cwnd = p.size"; read, as
//!   Eqs. 1-2, as a decrement: Fig. 4's senders keep sending until QuickAdapt, and the
//!   authors' htsim code takes the NACKed packet off the window. (Setting the window to
//!   one packet idles the bottleneck for a trtt after an incast's first trims.)
//! - **FastIncrease** (Alg. 3, §3.4). Once a window's worth of bytes came back unmarked
//!   with rtt ≈ brtt, every such ACK adds k·mtu, until one does not.
//! - **Bounds**: [1 mtu, `max_window` bdp].
//!
//! Defaults (§3.5): trtt = 1.5·brtt (brtt: the flow's unloaded round trip, which the
//! engine knows exactly); fd 0.8; md 2; fi 0.25 and mi = brtt/(trtt − brtt) = 2, both
//! multiplied by γ = bdp/150 KB (the BDP of 100 Gbps × 12 µs); k 2; qa_scaling 0.8; wtd
//! 0.25; window bounds [1 MTU, 1.25 BDP]; the window starts at 1 BDP. The paper leaves
//! two values open (CC-CATALOGUE §14), taken from its authors' htsim code: the WTD EWMA
//! weight (`wtd_alpha` 0.125) and "rtt ≈ brtt" (within `near_base` = 5 packet times of
//! brtt). QuickAdapt ignores the feedback of the bytes in flight when it adapts
//! (`Feedback::in_flight`; none after a timeout, which declared them lost). Without trimming
//! the paper doubles md (set `md` = 4).

use super::{fitting, fixed, mul_div, CcInit, CongestionControl, FX, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};

/// The BDP the paper's fi and mi were tuned for: 100 Gbps × 12 µs.
pub(super) const REFERENCE_BDP: f64 = 100e9 / 8.0 * 12e-6;

#[derive(Clone, Copy)]
struct Flow {
    /// Window, and its bounds, in 2^-FX bytes.
    cwnd: u64,
    max_cwnd: u64,
    bdp: u64,
    trtt: u64,
    /// FastIncrease's "rtt ≈ brtt": rtt at most this.
    near: u64,
    /// fi·γ and mi·γ in 2^-20.
    fi: u64,
    mi: u64,
    /// Wait-to-Decrease EWMA of ECN marks, in 2^-20.
    wtd: u64,
    /// FastIncrease: unmarked near-base bytes in a row, and whether it is on.
    good_bytes: u64,
    increasing: bool,
    /// QuickAdapt: bytes received in the current trtt window (acknowledged payload and
    /// trimmed headers), its end, the trigger, the bytes in flight at the last feedback,
    /// and the feedback bytes to ignore after adapting.
    acked: u64,
    qa_end: Option<Time>,
    trigger: bool,
    in_flight: u64,
    to_ignore: u64,
    ignored: u64,
}

pub struct Smartt {
    flows: Vec<Flow>,
    mss: u64,
    /// What a trimmed packet carries to the receiver: its header.
    header: u64,
    fd: u64,
    md: u64,
    k: u64,
    qa_scaling: u64,
    wtd_threshold: u64,
    wtd_alpha: u64,
    quick_adapts: u64,
    fast_increases: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Smartt::new(init, params)?))
}

impl Smartt {
    fn new(init: &CcInit, params: &Params) -> SimResult<Smartt> {
        let mut p = ParamReader::new("cc", "smartt", params);
        let trtt = p.f64_in_open_closed("trtt", 1.5, 1.0, 100.0)?;
        let fd = p.f64_in_open_closed("fd", 0.8, 0.0, 1e3)?;
        let md = p.f64_in_open_closed("md", 2.0, 0.0, 1e3)?;
        let fi = p.f64_in("fi", 0.25, 0.0, 1e3)?;
        let mi = p.f64_in("mi", 1.0 / (trtt - 1.0), 0.0, 1e3)?;
        let k = p.f64_in("k", 2.0, 0.0, 1e3)?;
        let qa_scaling = p.f64_in_open_closed("qa_scaling", 0.8, 0.0, 10.0)?;
        let wtd = p.f64_in("wtd", 0.25, 0.0, 1.0)?;
        let wtd_alpha = p.f64_in_open_closed("wtd_alpha", 0.125, 0.0, 1.0)?;
        let near_base = p.f64_in("near_base", 5.0, 0.0, 1e6)?;
        let max_window = p.f64_in_open_closed("max_window", 1.25, 0.0, 1e3)?;
        let init_window = p.f64_in_open_closed("init_window", 1.0, 0.0, 1e3)?;
        p.ascending(&[("init_window", init_window), ("max_window", max_window)])?;
        p.finish()?;
        let mss = init.mss as u64;
        let packet_time = init
            .line_rate
            .serialization(init.packet_wire_bytes as u64)
            .0;
        let flows = (init.paths.iter())
            .map(|path| {
                let bdp = path.bdp_bytes.max(mss);
                let gamma = bdp as f64 / REFERENCE_BDP;
                let brtt = path.base_rtt.0;
                let max_cwnd = ((bdp as f64 * max_window) as u64).max(mss) << FX;
                Flow {
                    cwnd: (((bdp as f64 * init_window) as u64) << FX).clamp(mss << FX, max_cwnd),
                    max_cwnd,
                    bdp,
                    trtt: (brtt as f64 * trtt).round() as u64,
                    near: brtt + (near_base * packet_time as f64).round() as u64,
                    fi: fixed(fi * gamma),
                    mi: fixed(mi * gamma),
                    wtd: 0,
                    good_bytes: 0,
                    increasing: false,
                    acked: 0,
                    qa_end: None,
                    trigger: false,
                    in_flight: 0,
                    to_ignore: 0,
                    ignored: 0,
                }
            })
            .collect();
        Ok(Smartt {
            flows,
            mss,
            header: init.packet_wire_bytes.saturating_sub(init.mss) as u64,
            fd: fixed(fd),
            md: fixed(md),
            k: fixed(k),
            qa_scaling: fixed(qa_scaling),
            wtd_threshold: fixed(wtd),
            wtd_alpha: fixed(wtd_alpha),
            quick_adapts: 0,
            fast_increases: 0,
        })
    }

    #[cfg(test)]
    fn cwnd_bytes(&self, f: FlowId) -> f64 {
        self.flows[f as usize].cwnd as f64 / (1u64 << FX) as f64
    }

    /// Alg. 2: once the current trtt window is over, adapt if triggered; true if it did.
    fn quick_adapt(&mut self, f: usize, now: Time) -> bool {
        let (mss, scaling) = (self.mss, self.qa_scaling);
        let fl = &mut self.flows[f];
        if fl.qa_end.is_some_and(|end| now <= end) {
            return false;
        }
        let adapt = fl.trigger && fl.qa_end.is_some();
        if adapt {
            fl.trigger = false;
            fl.cwnd = mul_div(fl.acked.max(mss) << FX, scaling, ONE);
            fl.to_ignore = fl.in_flight;
            fl.ignored = 0;
            self.quick_adapts += 1;
        }
        fl.qa_end = Some(Time(now.0 + fl.trtt));
        fl.acked = 0;
        adapt
    }

    /// A trimmed packet or a timeout (Alg. 1, lines 28-34): one packet less of window.
    fn on_loss(&mut self, f: usize, now: Time) {
        let mss = self.mss;
        let fl = &mut self.flows[f];
        fl.cwnd = fl.cwnd.saturating_sub(mss << FX);
        fl.trigger = true;
        if fl.ignored >= fl.to_ignore {
            self.quick_adapt(f, now);
        }
        self.clamp(f);
    }

    fn clamp(&mut self, f: usize) {
        let fl = &mut self.flows[f];
        fl.cwnd = fl.cwnd.clamp(self.mss << FX, fl.max_cwnd);
    }

    /// The window change of one ACK of `size` bytes outside QuickAdapt and FastIncrease
    /// (2^-FX bytes; negative: a decrease).
    fn quadrant(&self, f: usize, size: u64, rtt: u64, ecn: bool) -> i64 {
        let fl = &self.flows[f];
        let mss = self.mss;
        let fair_decrease = || mul_div(mul_div(fl.cwnd, self.fd, ONE), size, fl.bdp);
        // (size/cwnd)·mtu·fi: size·mtu·fi·2^FX / cwnd_bytes = size·mtu·fi·2^(2FX) / cwnd.
        let fair_increase = || mul_div(mul_div(size * mss, fl.fi, ONE), 1 << (2 * FX), fl.cwnd);
        if ecn {
            if fl.wtd < self.wtd_threshold {
                return 0;
            }
            if rtt <= fl.trtt {
                -(fair_decrease() as i64)
            } else {
                let md = mul_div(mul_div(size << FX, self.md, ONE), rtt - fl.trtt, rtt);
                -((md + fair_decrease()).min(size << FX) as i64)
            }
        } else if rtt > fl.trtt {
            fair_increase() as i64
        } else {
            // mi·(trtt − rtt)/rtt·(size/cwnd)·mtu, at most size.
            let mi = mul_div(mul_div(size * mss, fl.mi, ONE), 1 << (2 * FX), fl.cwnd);
            let mi = mul_div(mi, fl.trtt - rtt, rtt.max(1)).min(size << FX);
            (mi + fair_increase()) as i64
        }
    }
}

impl CongestionControl for Smartt {
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
        self.flows[f].in_flight = fb.in_flight;
        if fb.nack() || fb.trimmed() {
            // Alg. 1 lines 4-5 count every packet that came back, a trimmed one by its header.
            self.flows[f].acked += self.header;
            self.flows[f].ignored += self.mss;
            self.on_loss(f, fb.now);
            return;
        }
        let size = fb.newly_acked as u64;
        if size == 0 {
            return;
        }
        let (rtt, ecn) = (fb.rtt.0, fb.ecn());
        let fl = &mut self.flows[f];
        fl.acked += size;
        fl.ignored += size;
        if fl.ignored < fl.to_ignore {
            return;
        }
        // Wait-to-Decrease: wtd ← α·ecn + (1 − α)·wtd.
        fl.wtd =
            (fl.wtd * (ONE - self.wtd_alpha) + if ecn { ONE * self.wtd_alpha } else { 0 }) / ONE;
        if self.quick_adapt(f, fb.now) {
            self.clamp(f);
            return;
        }
        // Alg. 3: FastIncrease.
        let (k, mss) = (self.k, self.mss);
        let fl = &mut self.flows[f];
        if rtt <= fl.near && !ecn {
            fl.good_bytes += size;
            if fl.good_bytes << FX > fl.cwnd || fl.increasing {
                fl.cwnd += mul_div(mss << FX, k, ONE);
                fl.increasing = true;
                self.fast_increases += 1;
                self.clamp(f);
                return;
            }
        } else {
            fl.good_bytes = 0;
            fl.increasing = false;
        }
        let step = self.quadrant(f, size, rtt, ecn);
        let fl = &mut self.flows[f];
        fl.cwnd = fl.cwnd.saturating_add_signed(step);
        self.clamp(f);
    }

    /// QuickAdapt takes each timeout as it takes each trim (the authors' transport times
    /// out per packet).
    fn reacts_to_every_expiry(&self) -> bool {
        true
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time, _timers: &mut CcTimers) {
        // The timeout declared what was in flight lost: nothing of it will come back to ignore.
        let fl = &mut self.flows[flow as usize];
        (fl.in_flight, fl.to_ignore) = (0, 0);
        self.on_loss(flow as usize, now);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("quick_adapts", self.quick_adapts),
            ("fast_increases", self.fast_increases),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths, MSS, WIRE};
    use crate::transport::flags;
    use serde_json::json;

    /// One flow over 6 hops at 800 Gbps, 500 ns links (base RTT 6.25 µs, BDP 625 KB).
    fn smartt(params: serde_json::Value) -> (Smartt, u64, f64) {
        let paths = Paths::new(1, 6, 800.0, 500);
        let s = Smartt::new(&paths.init(), &serde_json::from_value(params).unwrap()).unwrap();
        (
            s,
            paths.paths[0].base_rtt.0,
            paths.paths[0].bdp_bytes as f64,
        )
    }

    fn ack(seq: u32, now_ps: u64, rtt_ps: f64, marked: bool) -> Feedback {
        reply(
            0,
            seq,
            now_ps,
            rtt_ps as u64,
            MSS,
            if marked { flags::ECN } else { 0 },
        )
    }

    /// The window change of one ACK (bytes).
    fn step(s: &mut Smartt, seq: u32, rtt: f64, marked: bool) -> f64 {
        let before = s.cwnd_bytes(0);
        s.on_feedback(&ack(seq, 1_000_000, rtt, marked), &mut CcTimers::default());
        s.cwnd_bytes(0) - before
    }

    #[test]
    fn each_quadrant_moves_the_window_as_section_3_2_says() {
        let (mut s, brtt, bdp) = smartt(json!({"wtd": 0.0}));
        let (brtt, mss) = (brtt as f64, MSS as f64);
        let (trtt, gamma) = (1.5 * brtt, bdp / 150_000.0);
        // FD (marked, rtt <= trtt), at cwnd = bdp: (cwnd/bdp)·fd·size = 0.8·4096.
        assert!((step(&mut s, 0, trtt, true) + 0.8 * mss).abs() < 1e-3);
        // MD at rtt = 2·trtt: md·(rtt − trtt)/rtt = 1 packet, capped at one packet with FD.
        assert_eq!(step(&mut s, 1, 2.0 * trtt, true), -mss);
        // Below the cap, at rtt = 1.05·trtt: md·(0.05/1.05)·4096 + FD.
        let cwnd = s.cwnd_bytes(0);
        let want = 2.0 * 0.05 / 1.05 * mss + cwnd / bdp * 0.8 * mss;
        assert!(want < mss);
        assert!((step(&mut s, 2, 1.05 * trtt, true) + want).abs() < 1e-2);
        // FI (unmarked, rtt > trtt): (size/cwnd)·mtu·fi·γ.
        let cwnd = s.cwnd_bytes(0);
        let fi = mss / cwnd * mss * 0.25 * gamma;
        assert!((step(&mut s, 3, 1.6 * brtt, false) - fi).abs() < 1e-2);
        // MI (unmarked, rtt <= trtt; above FastIncrease's band): mi = brtt/(trtt − brtt) = 2.
        let cwnd = s.cwnd_bytes(0);
        let rtt = 1.2 * brtt;
        let mi = ((trtt - rtt) / rtt * mss / cwnd * mss * 2.0 * gamma).min(mss);
        let fi = mss / cwnd * mss * 0.25 * gamma;
        assert!((step(&mut s, 4, rtt, false) - (mi + fi)).abs() < 1e-2);
    }

    #[test]
    fn wait_to_decrease_holds_cuts_until_a_quarter_of_acks_are_marked() {
        // EWMA α = 0.125 from 0: 1 − 0.875² = 0.23 < 0.25 <= 1 − 0.875³ = 0.33.
        let (mut s, brtt, _) = smartt(json!({}));
        let trtt = 1.5 * brtt as f64;
        assert_eq!(step(&mut s, 0, trtt, true), 0.0);
        assert_eq!(step(&mut s, 1, trtt, true), 0.0);
        assert!(step(&mut s, 2, trtt, true) < -3000.0);
    }

    #[test]
    fn quickadapt_sets_the_window_to_what_came_back_in_the_last_target_rtt() {
        let (mut s, brtt, _) = smartt(json!({}));
        let mut t = CcTimers::default();
        let trtt = 1.5 * brtt as f64;
        let at = |us: f64| (us * 1e6) as u64;
        // The first ACK opens a trtt window (9.38 µs); 50 more arrive within it.
        for seq in 0..=50 {
            s.on_feedback(
                &ack(seq, at(0.1 * seq as f64), 1.2 * brtt as f64, false),
                &mut t,
            );
        }
        // A trim: one packet less of window, QuickAdapt armed.
        let before = s.cwnd_bytes(0);
        s.on_feedback(
            &reply(0, 51, at(6.0), brtt, 0, flags::NACK | flags::TRIMMED),
            &mut t,
        );
        assert_eq!(s.cwnd_bytes(0), before - MSS as f64);
        // The first ACK after the window: 0.8 × what came back in it, the 51 packets
        // acknowledged and the trimmed one's header.
        let mut first = ack(52, at(10.0), 1.2 * brtt as f64, false);
        first.in_flight = 100 * MSS as u64;
        s.on_feedback(&first, &mut t);
        let received = 51.0 * MSS as f64 + (WIRE - MSS) as f64;
        assert!((s.cwnd_bytes(0) - 0.8 * received).abs() < 0.1);
        assert_eq!(s.quick_adapts, 1);
        // The feedback of the 100 packets then in flight is ignored, marks included...
        let w = s.cwnd_bytes(0);
        for seq in 53..53 + 99 {
            s.on_feedback(&ack(seq, at(11.0), 2.0 * trtt, true), &mut t);
        }
        assert_eq!(s.cwnd_bytes(0), w);
        // ... then marks count again: the third in a row passes Wait-to-Decrease.
        for seq in 0..3 {
            s.on_feedback(&ack(1000 + seq, at(11.0), 2.0 * trtt, true), &mut t);
        }
        assert_eq!(s.cwnd_bytes(0), w - MSS as f64);
    }

    #[test]
    fn fast_increase_adds_k_mtu_per_ack_after_a_window_of_clean_acks() {
        let (mut s, brtt, _) = smartt(json!({"init_window": 0.1}));
        let brtt = brtt as f64;
        let mut seq = 0;
        let mut cwnd = s.cwnd_bytes(0);
        while s.fast_increases == 0 {
            cwnd = s.cwnd_bytes(0);
            step(&mut s, seq, brtt, false);
            seq += 1;
        }
        // Once the clean bytes exceed the window (62.5 KB, growing by MI meanwhile)...
        let clean = seq as f64 * MSS as f64;
        assert!(
            clean > cwnd && clean - (MSS as f64) <= cwnd,
            "{seq} ACKs, cwnd {cwnd}"
        );
        // ... every clean ACK adds k = 2 MTU.
        assert_eq!(step(&mut s, seq, brtt, false), 2.0 * MSS as f64);
        assert_eq!(step(&mut s, seq + 1, brtt, false), 2.0 * MSS as f64);
        // An ACK outside the band ends it (MI applies instead).
        assert!(step(&mut s, seq + 2, 1.2 * brtt, false) < MSS as f64);
    }

    #[test]
    fn the_window_stays_within_one_mtu_and_a_quarter_over_the_bdp() {
        let (mut s, brtt, bdp) = smartt(json!({"wtd": 0.0}));
        for seq in 0..2000 {
            step(&mut s, seq, brtt as f64, false);
        }
        assert!((s.cwnd_bytes(0) - (1.25 * bdp).floor()).abs() < 1.0);
        for seq in 2000..2400 {
            step(&mut s, seq, 4.0 * brtt as f64, true);
        }
        assert_eq!(s.cwnd_bytes(0), MSS as f64);
    }

    #[test]
    fn bad_parameters_are_refused_naming_scheme_and_parameter() {
        let paths = Paths::new(1, 6, 800.0, 500);
        for (params, name) in [
            (json!({"trtt": 0.9}), "`trtt`"),
            (json!({"fd": -1.0}), "`fd`"),
            (json!({"qa_scaling": 0.0}), "`qa_scaling`"),
            (json!({"wtd": 1.5}), "`wtd`"),
            (json!({"max_window": 0.5}), "`max_window`"),
            (json!({"beta": 0.5}), "`beta`"),
        ] {
            let err = refusal(Smartt::new(
                &paths.init(),
                &serde_json::from_value(params).unwrap(),
            ));
            assert!(err.contains(name) && err.contains("smartt"), "{err}");
        }
    }
}
