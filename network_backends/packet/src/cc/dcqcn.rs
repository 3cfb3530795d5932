//! `dcqcn` (Zhu et al., SIGCOMM 2015; CC-CATALOGUE §2): a paced rate per flow, no window.
//! Switches mark CE with RED (`switch.ecn_kmin`/`ecn_kmax`/`ecn_pmax`); the receiver is
//! the notification point (NP): its reply to a marked packet carries a CNP, at most once
//! per flow per `cnp_interval_us` (`receiver::with_cnp`, asked for by `cnp_interval`). The
//! sender is the reaction point (RP), in one of two variants (`variant`):
//!
//! - `paper` (the paper's RP as UET's `dcqcn.cpp` follows it): on a CNP, R_T ← R_C,
//!   R_C ← R_C(1 − α/2), α ← (1 − g)α + g, and the timer count T and byte count BC restart;
//!   α ← (1 − g)α for every `alpha_interval_us` without a CNP. An increase event comes
//!   every `timer_us` (T += 1) and every `byte_counter` bytes (BC += 1): max(T, BC) ≤ F is
//!   fast recovery, R_C ← (R_T + R_C)/2; min(T, BC) > F is hyper increase, R_T +=
//!   (min − F)·R_HAI; otherwise additive, R_T += R_AI; both then R_C ← (R_T + R_C)/2.
//! - `vendor` (the NIC model of HPCC's ns-3, `RdmaHw::*Mlx`): the first CNP sets α = 1
//!   (the rate is kept, `rate_on_first_cnp` = 1); α ticks every `alpha_interval_us`
//!   (+g if a CNP came during the tick); every `decrease_interval_us` after the first
//!   CNP, if a CNP came: R_T ← R_C (unless at stage 0, clamping off), R_C ← R_C(1 − α/2)
//!   and the stage restarts. Only the timer increases: stage < F fast recovery, = F
//!   additive, > F hyper; the stage counts timer events since the last cut.
//!
//! Rates stay in [`min_rate_gbps`, line rate] and start at the line rate (no slow start).
//! α is kept in 2^-20, rates in bits per second. α's periodic decay is worked out when it
//! is next read, so the only events are the increase timer (while the rate is below the
//! line rate) and, in the vendor variant, the decrease check after a CNP.
//!
//! Defaults. `paper`: g 1/256, α period and timer 55 µs, F 5, CNPs 50 µs apart (the
//! paper, UET, NS3RDMA), byte counter 10 MB (UET), R_AI = line/1000 and R_HAI = line/200
//! (NS3RDMA's 40/200 Mb/s at 40 Gbps, scaled with the line rate). `vendor`: HPCC's
//! `dcqcn` — α tick 1 µs, decrease check 4 µs, timer 300 µs, F 1, a CNP on every marked
//! packet, R_AI = line/5000, R_HAI = line/500 (20 and 200 Mb/s at 100 Gbps). R_min
//! = line/100 (HPCC's 1 Gb/s at 100 Gbps) for both.
//!
//! Deviation: the byte counter counts bytes acknowledged, not sent (the seam shows a CC
//! its replies, not its sends); at a steady rate the two differ by one round trip.
//! A timeout leaves the rate alone (RoCE NICs do not cut on a retransmission).

use super::{fixed, mul_div, us, CcInit, CongestionControl, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};

/// A flow's α clock before its first reply: α = 1 decays only while the flow exists.
const NOT_STARTED: Time = Time(u64::MAX);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Paper,
    Vendor,
}

#[derive(Clone, Copy)]
struct Flow {
    /// Current and target rate, bits per second.
    rc: u64,
    rt: u64,
    /// α in 2^-20.
    alpha: u64,
    /// Start of the α period not yet applied (paper: from the flow's first send, restarted
    /// at each CNP; vendor: the tick grid from the first CNP). `NOT_STARTED` until then.
    alpha_clock: Time,
    /// Vendor: a CNP came during the current α tick / since the last decrease check.
    cnp_alpha: bool,
    cnp_decrease: bool,
    /// Vendor: the first CNP came (α and the decrease grid started) at this time.
    first_cnp: Option<Time>,
    /// Timer events and byte-counter events since the last cut (vendor: the stage).
    t: u32,
    bc: u32,
    /// Bytes acknowledged towards the next byte-counter event.
    bytes: u64,
    next_increase: Option<Time>,
    next_decrease: Option<Time>,
}

pub struct Dcqcn {
    flows: Vec<Flow>,
    variant: Variant,
    g: u64,
    alpha_interval: u64,
    decrease_interval: u64,
    timer: u64,
    byte_counter: u64,
    f: u32,
    ai: u64,
    hai: u64,
    line: u64,
    min_rate: u64,
    clamp_target: bool,
    cnp_interval: Dur,
    cuts: u64,
    increases: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Dcqcn::new(init, params)?))
}

impl Dcqcn {
    fn new(init: &CcInit, params: &Params) -> SimResult<Dcqcn> {
        let line = init.line_rate.bps();
        let gbps = line as f64 / 1e9;
        let mut p = ParamReader::new("cc", "dcqcn", params);
        let variant = match p.choice("variant", "paper", &["paper", "vendor"])? {
            "paper" => Variant::Paper,
            _ => Variant::Vendor,
        };
        let paper = variant == Variant::Paper;
        let g = p.f64_in_open_closed("g", 1.0 / 256.0, 0.0, 1.0)?;
        let alpha_us = p.f64_in_open_closed(
            "alpha_interval_us",
            if paper { 55.0 } else { 1.0 },
            0.0,
            1e6,
        )?;
        let decrease_us = p.f64_in_open_closed("decrease_interval_us", 4.0, 0.0, 1e6)?;
        let timer_us =
            p.f64_in_open_closed("timer_us", if paper { 55.0 } else { 300.0 }, 0.0, 1e6)?;
        let byte_counter = p.f64_in_open_closed("byte_counter", 10e6, 0.0, 1e15)?;
        let f = p.int_in("f", if paper { 5 } else { 1 }, 0, 1000)? as u32;
        let ai = p.f64_in_open_closed(
            "ai_gbps",
            gbps / if paper { 1000.0 } else { 5000.0 },
            0.0,
            1e6,
        )?;
        let hai = p.f64_in_open_closed(
            "hai_gbps",
            gbps / if paper { 200.0 } else { 500.0 },
            0.0,
            1e6,
        )?;
        let min_rate = p.f64_in_open_closed("min_rate_gbps", gbps / 100.0, 0.0, gbps)?;
        let cnp_us = p.f64_in("cnp_interval_us", if paper { 50.0 } else { 0.0 }, 0.0, 1e6)?;
        let clamp_target = p.bool("clamp_target", false)?;
        let init_rate = p.f64_in_open_closed("init_rate", 1.0, 0.0, 1.0)?;
        p.finish()?;
        let min_rate = (min_rate * 1e9).round() as u64;
        let start = ((line as f64 * init_rate) as u64).max(min_rate);
        let flow = Flow {
            rc: start,
            rt: start,
            alpha: ONE,
            alpha_clock: NOT_STARTED,
            cnp_alpha: false,
            cnp_decrease: false,
            first_cnp: None,
            t: 0,
            bc: 0,
            bytes: 0,
            next_increase: None,
            next_decrease: None,
        };
        Ok(Dcqcn {
            flows: vec![flow; init.paths.len()],
            variant,
            g: fixed(g).clamp(1, ONE),
            alpha_interval: us(alpha_us).max(1),
            decrease_interval: us(decrease_us).max(1),
            timer: us(timer_us).max(1),
            byte_counter: byte_counter as u64,
            f,
            ai: (ai * 1e9).round() as u64,
            hai: (hai * 1e9).round() as u64,
            line,
            min_rate,
            clamp_target,
            cnp_interval: Dur(us(cnp_us)),
            cuts: 0,
            increases: 0,
        })
    }

    #[cfg(test)]
    fn rate_bps(&self, f: FlowId) -> u64 {
        self.flows[f as usize].rc
    }

    /// Applies α's periodic updates that completed by `now` (the first of them adds g if
    /// a CNP came during it, vendor variant; the paper's CNPs update α at once).
    fn advance_alpha(&self, fl: &mut Flow, now: Time) {
        if now < fl.alpha_clock {
            return;
        }
        let mut ticks = (now - fl.alpha_clock).0 / self.alpha_interval;
        fl.alpha_clock = fl.alpha_clock + Dur(ticks * self.alpha_interval);
        if ticks > 0 && fl.cnp_alpha {
            fl.alpha = (fl.alpha * (ONE - self.g) + self.g * ONE) / ONE;
            fl.cnp_alpha = false;
            ticks -= 1;
        }
        // (1 − g)^ticks; past ~6000 ticks of 1/256 α is below 2^-20.
        for _ in 0..ticks.min(20_000) {
            if fl.alpha == 0 {
                break;
            }
            fl.alpha = fl.alpha * (ONE - self.g) / ONE;
        }
    }

    /// R_C ← R_C(1 − α/2), at least R_min.
    fn cut(&mut self, fl: &mut Flow) {
        fl.rc = (fl.rc - mul_div(fl.rc, fl.alpha, 2 * ONE)).max(self.min_rate);
        self.cuts += 1;
    }

    /// One increase event at stage `stage` (paper: `hyper` = min(T, BC) − F when > 0).
    fn increase(&mut self, fl: &mut Flow, fast: bool, hyper: u64) {
        if !fast {
            fl.rt += if hyper > 0 { hyper * self.hai } else { self.ai };
        }
        fl.rt = fl.rt.min(self.line);
        // Rounded up, so that R_C reaches R_T (and the line rate, ending the timer).
        fl.rc = (fl.rt + fl.rc).div_ceil(2).min(self.line);
        self.increases += 1;
    }

    fn paper_increase(&mut self, fl: &mut Flow) {
        let (hi, lo) = (fl.t.max(fl.bc), fl.t.min(fl.bc));
        let fast = hi <= self.f;
        let hyper = if !fast && lo > self.f {
            (lo - self.f) as u64
        } else {
            0
        };
        self.increase(fl, fast, hyper);
    }

    fn recovered(&self, fl: &Flow) -> bool {
        fl.rc >= self.line && fl.rt >= self.line
    }

    fn arm(&self, f: FlowId, fl: &Flow, timers: &mut CcTimers) {
        match (fl.next_increase, fl.next_decrease) {
            (Some(a), Some(b)) => timers.arm(f, a.min(b)),
            (Some(a), None) | (None, Some(a)) => timers.arm(f, a),
            (None, None) => timers.cancel(f),
        }
    }

    fn on_cnp(&mut self, fl: &mut Flow, now: Time) {
        match self.variant {
            Variant::Paper => {
                self.advance_alpha(fl, now);
                fl.rt = fl.rc;
                self.cut(fl);
                fl.alpha = (fl.alpha * (ONE - self.g) + self.g * ONE) / ONE;
                fl.alpha_clock = now;
                (fl.t, fl.bc, fl.bytes) = (0, 0, 0);
                fl.next_increase = Some(now + Dur(self.timer));
            }
            Variant::Vendor => match fl.first_cnp {
                None => {
                    // α = 1, the rate kept (rate_on_first_cnp = 1); the first decrease
                    // check comes a decrease interval (+1 ns, after that tick of α) later.
                    fl.first_cnp = Some(now);
                    (fl.alpha, fl.alpha_clock, fl.cnp_alpha) = (ONE, now, false);
                    fl.rt = fl.rc;
                    fl.cnp_decrease = true;
                    fl.next_decrease = Some(now + Dur(self.decrease_interval + 1000));
                }
                Some(first) => {
                    self.advance_alpha(fl, now);
                    (fl.cnp_alpha, fl.cnp_decrease) = (true, true);
                    // The next point of the decrease grid after now.
                    let d0 = first.0 + self.decrease_interval + 1000;
                    let k = if now.0 < d0 {
                        0
                    } else {
                        (now.0 - d0) / self.decrease_interval + 1
                    };
                    fl.next_decrease = Some(Time(d0 + k * self.decrease_interval));
                }
            },
        }
    }
}

impl CongestionControl for Dcqcn {
    fn window_bytes(&self, _flow: FlowId) -> u64 {
        u64::MAX
    }

    fn pacing_gap(&self, flow: FlowId, wire_bytes: u32) -> Option<Dur> {
        let rate = self.flows[flow as usize].rc;
        (rate < self.line).then(|| Dur(mul_div(wire_bytes as u64 * 8, 1_000_000_000_000, rate)))
    }

    fn cnp_interval(&self) -> Option<Dur> {
        Some(self.cnp_interval)
    }

    fn on_feedback(&mut self, fb: &Feedback, timers: &mut CcTimers) {
        let mut fl = self.flows[fb.flow as usize];
        let before = (fl.next_increase, fl.next_decrease);
        if self.variant == Variant::Paper && fl.alpha_clock == NOT_STARTED {
            // The α timer runs from the flow's start: its first reply's packet left one
            // round trip ago.
            fl.alpha_clock = Time(fb.now.0.saturating_sub(fb.rtt.0));
        }
        if fb.cnp() {
            self.on_cnp(&mut fl, fb.now);
        } else if self.variant == Variant::Paper && !self.recovered(&fl) {
            fl.bytes += fb.newly_acked as u64;
            while fl.bytes >= self.byte_counter && !self.recovered(&fl) {
                fl.bytes -= self.byte_counter;
                fl.bc += 1;
                self.paper_increase(&mut fl);
            }
        }
        if self.recovered(&fl) && fl.next_decrease.is_none() {
            fl.next_increase = None;
        }
        if (fl.next_increase, fl.next_decrease) != before {
            self.arm(fb.flow, &fl, timers);
        }
        self.flows[fb.flow as usize] = fl;
    }

    fn on_timer(&mut self, flow: FlowId, now: Time, timers: &mut CcTimers) {
        let mut fl = self.flows[flow as usize];
        if fl.next_decrease.is_some_and(|t| t <= now) {
            // Vendor: the decrease check (only armed after a CNP).
            self.advance_alpha(&mut fl, now);
            if fl.cnp_decrease {
                if self.clamp_target || fl.t != 0 {
                    fl.rt = fl.rc;
                }
                self.cut(&mut fl);
                (fl.t, fl.cnp_decrease) = (0, false);
                fl.next_increase = Some(now + Dur(self.timer));
            }
            fl.next_decrease = None;
        }
        if fl.next_increase.is_some_and(|t| t <= now) {
            match self.variant {
                Variant::Paper => {
                    fl.t += 1;
                    self.paper_increase(&mut fl);
                }
                Variant::Vendor => {
                    let (fast, hyper) = (fl.t < self.f, (fl.t > self.f) as u64);
                    self.increase(&mut fl, fast, hyper);
                    fl.t += 1;
                }
            }
            fl.next_increase = (!self.recovered(&fl)).then(|| now + Dur(self.timer));
        }
        self.arm(flow, &fl, timers);
        self.flows[flow as usize] = fl;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("rate_cuts", self.cuts), ("rate_increases", self.increases)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths};
    use crate::transport::flags;

    fn dcqcn(params: serde_json::Value) -> Dcqcn {
        let paths = Paths::new(1, 2, 100.0, 1000);
        Dcqcn::new(&paths.init(), &serde_json::from_value(params).unwrap()).unwrap()
    }

    /// Runs the flow's timers up to `until`, returning (time, rate in Gb/s) after each.
    fn timers_until(cc: &mut Dcqcn, until: u64) -> Vec<(u64, f64)> {
        let mut out = Vec::new();
        let mut t = CcTimers::default();
        loop {
            let fl = cc.flows[0];
            let next = [fl.next_increase, fl.next_decrease]
                .into_iter()
                .flatten()
                .min();
            let Some(at) = next.filter(|a| a.0 <= until) else {
                return out;
            };
            cc.on_timer(0, at, &mut t);
            out.push((at.0, cc.rate_bps(0) as f64 / 1e9));
        }
    }

    #[test]
    fn paper_recovery_after_one_cnp_halves_then_closes_half_the_gap_every_55us() {
        // CC-CATALOGUE §2 acceptance 1: 100 Gbps, α = 1: 50, then 75, 87.5, 93.75,
        // 96.875, 98.44 Gb/s at 55..275 µs (fast recovery, F = 5).
        let mut cc = dcqcn(serde_json::json!({}));
        let mut t = CcTimers::default();
        cc.on_feedback(
            &reply(0, 0, 0, 10_000_000, 4096, flags::CNP | flags::ECN),
            &mut t,
        );
        assert_eq!(cc.rate_bps(0), 50_000_000_000);
        let trace = timers_until(&mut cc, 275_000_000);
        let want = [75.0, 87.5, 93.75, 96.875, 98.4375];
        assert_eq!(trace.len(), want.len(), "{trace:?}");
        for (i, ((at, gbps), w)) in trace.iter().zip(want).enumerate() {
            assert_eq!(*at, (i as u64 + 1) * 55_000_000);
            assert!((gbps / w - 1.0).abs() < 1e-3, "step {i}: {gbps} vs {w}");
        }
        // α stays 1 through the cut (α ← (1 − g)·1 + g).
        assert_eq!(cc.flows[0].alpha, ONE);
    }

    #[test]
    fn paper_alpha_decays_per_quiet_period_and_sets_the_next_cut() {
        // A second CNP 550 µs (10 periods) after the first: α = (255/256)^10 = 0.9616
        // when it cuts, so R_C ← R_C(1 − 0.4808).
        let mut cc = dcqcn(serde_json::json!({}));
        let mut t = CcTimers::default();
        cc.on_feedback(&reply(0, 0, 0, 1, 0, flags::CNP), &mut t);
        timers_until(&mut cc, 549_000_000);
        let before = cc.rate_bps(0) as f64;
        cc.on_feedback(&reply(0, 1, 550_000_000, 1, 0, flags::CNP), &mut t);
        let alpha = (255.0f64 / 256.0).powi(10);
        let want = before * (1.0 - alpha / 2.0);
        assert!((cc.rate_bps(0) as f64 / want - 1.0).abs() < 1e-5);
    }

    #[test]
    fn paper_alpha_decays_from_the_flows_start_not_the_runs() {
        // A flow starting at 50 ms (its first reply at 50.01 ms, RTT 10 µs): α = 1 at a
        // CNP 20 µs in, so the rate halves; from t = 0 it would be (255/256)^909 ≈ 0.03.
        // Ten quiet periods of 55 µs after its start: α = (255/256)^10 at the first CNP.
        let start = 50_000_000_000u64;
        let rate_after_cnp_at = |cnp_ps: u64| {
            let (mut cc, mut t) = (dcqcn(serde_json::json!({})), CcTimers::default());
            for (seq, at, f) in [(0, start + 10_000_000, 0), (1, start + cnp_ps, flags::CNP)] {
                cc.on_feedback(&reply(0, seq, at, 10_000_000, 4096, f), &mut t);
            }
            cc.rate_bps(0) as f64
        };
        assert_eq!(rate_after_cnp_at(20_000_000), 50e9);
        let alpha = (255.0f64 / 256.0).powi(10);
        let want = 100e9 * (1.0 - alpha / 2.0);
        let got = rate_after_cnp_at(555_000_000);
        assert!((got / want - 1.0).abs() < 1e-5, "{got}");
    }

    #[test]
    fn recovery_reaches_the_line_rate_and_stops_the_timer() {
        // R_C ← ⌈(R_T + R_C)/2⌉: after a cut the rate gets back to exactly the line rate
        // (a floor would leave it 1 b/s short and the timer firing for the flow's life).
        let mut cc = dcqcn(serde_json::json!({}));
        let mut t = CcTimers::default();
        cc.on_feedback(&reply(0, 0, 0, 1, 0, flags::CNP), &mut t);
        let trace = timers_until(&mut cc, 1_000_000_000_000);
        assert_eq!(trace.last().unwrap().1, 100.0, "{trace:?}");
        assert!(
            trace.len() < 60,
            "the timer stopped after {} events",
            trace.len()
        );
    }

    #[test]
    fn paper_byte_counter_and_timer_reach_hyper_increase() {
        // F = 5: after 6 timer and 6 byte-counter events min(T, BC) − F = 1 adds R_HAI.
        let mut cc = dcqcn(
            serde_json::json!({"byte_counter": 4096, "f": 5, "ai_gbps": 1.0, "hai_gbps": 10.0, "init_rate": 0.5}),
        );
        let mut t = CcTimers::default();
        cc.on_feedback(&reply(0, 0, 0, 1, 0, flags::CNP), &mut t);
        let (rc, rt) = (cc.flows[0].rc, cc.flows[0].rt);
        assert_eq!((rc, rt), (25_000_000_000, 50_000_000_000));
        // 6 timer events: fast recovery while max(T, BC) <= 5, then additive (+1 Gb/s).
        timers_until(&mut cc, 6 * 55_000_000);
        assert_eq!(cc.flows[0].rt, 51_000_000_000);
        // 6 byte-counter events: T = 6, BC = 1..5 additive, BC = 6 hyper (+10).
        for s in 1..=6 {
            cc.on_feedback(&reply(0, s, 6 * 55_000_000 + s as u64, 1, 4096, 0), &mut t);
        }
        assert_eq!(
            cc.flows[0].rt,
            51_000_000_000 + 5_000_000_000 + 10_000_000_000
        );
    }

    #[test]
    fn vendor_variant_follows_hpcc_ns3() {
        // CC-CATALOGUE §2 acceptance 2: R ≈ 50 Gb/s 4 µs after the CNP (α has ticked 4
        // times: 100·(1 − (255/256)^4/2) = 50.78), fast recovery at +300 µs to the
        // midpoint with R_T = 100 (75.39), then additive at F = 1 (R_T capped at the line
        // rate: 87.70), each 300 µs; α ≈ 0.31 after 300 µs without CNPs.
        let mut cc = dcqcn(serde_json::json!({"variant": "vendor"}));
        let mut t = CcTimers::default();
        cc.on_feedback(&reply(0, 0, 0, 1, 0, flags::CNP | flags::ECN), &mut t);
        assert_eq!(cc.rate_bps(0), 100_000_000_000, "first CNP keeps the rate");
        let trace = timers_until(&mut cc, 1_000_000_000);
        let a4 = (255.0f64 / 256.0).powi(4);
        let r0 = 100.0 * (1.0 - a4 / 2.0);
        let want = [
            (4_001_000, r0),
            (304_001_000, (r0 + 100.0) / 2.0),
            (604_001_000, ((r0 + 100.0) / 2.0 + 100.0) / 2.0),
        ];
        for ((at, gbps), (wat, w)) in trace.iter().zip(want) {
            assert_eq!(*at, wat);
            assert!((gbps / w - 1.0).abs() < 1e-4, "{gbps} vs {w}");
        }
        assert!((r0 - 50.0).abs() < 1.0);
        // α after 300 µs: advance it and compare with (255/256)^300 = 0.309.
        let mut fl = cc.flows[0];
        cc.advance_alpha(&mut fl, Time(300_000_000));
        let alpha = fl.alpha as f64 / ONE as f64;
        assert!(
            (alpha - (255.0f64 / 256.0).powi(300)).abs() < 1e-3,
            "{alpha}"
        );
        assert!((alpha - 0.31).abs() < 0.01);
    }

    #[test]
    fn vendor_cuts_once_per_decrease_interval_however_many_cnps() {
        let mut cc = dcqcn(serde_json::json!({"variant": "vendor"}));
        let mut t = CcTimers::default();
        cc.on_feedback(&reply(0, 0, 0, 1, 0, flags::CNP), &mut t);
        timers_until(&mut cc, 5_000_000);
        let cuts = cc.cuts;
        for s in 1..20 {
            cc.on_feedback(
                &reply(0, s, 5_000_000 + s as u64 * 100_000, 1, 0, flags::CNP),
                &mut t,
            );
        }
        // All 19 CNPs fall between 5.1 and 6.9 µs: one check at 8.001 µs cuts once.
        timers_until(&mut cc, 9_000_000);
        assert_eq!(cc.cuts, cuts + 1);
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let paths = Paths::new(1, 2, 100.0, 1000);
        for (params, name) in [
            (serde_json::json!({"variant": "mellanox"}), "`variant`"),
            (serde_json::json!({"g": 0.0}), "`g`"),
            (serde_json::json!({"timer_us": -1.0}), "`timer_us`"),
            (
                serde_json::json!({"min_rate_gbps": 200.0}),
                "`min_rate_gbps`",
            ),
            (serde_json::json!({"kmin": 1}), "`kmin`"),
        ] {
            let err = refusal(Dcqcn::new(
                &paths.init(),
                &serde_json::from_value(params).unwrap(),
            ));
            assert!(err.contains(name) && err.contains("dcqcn"), "{err}");
        }
    }
}
