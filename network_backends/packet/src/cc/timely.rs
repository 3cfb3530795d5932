//! `timely` (Mittal et al., SIGCOMM 2015, Algorithm 1; CC-CATALOGUE §3): a sending rate
//! per flow, paced, no window, updated on every completion event (the reply that
//! completes a `segment_bytes` segment of the flow, 64 KB as the paper's NIC offload)
//! from the RTT and its gradient:
//!
//! rtt_diff ← (1 − α)·rtt_diff + α·(rtt − prev_rtt); gradient = rtt_diff / min_rtt;
//! - rtt < T_low: R += δ (additive increase);
//! - rtt > T_high: R ← R·(1 − β(1 − T_high/rtt));
//! - gradient ≤ 0: R += δ, or R_HAI once `hai_after` increases came in a row
//!   (hyper-active increase);
//! - else R ← R·max(0, 1 − β·gradient);
//!
//! with R in [δ, line rate]. Hyper-active increase counts increases in the gradient
//! region only, as TIMELY's Algorithm 1 and CC-CATALOGUE §3 put it (HPCC's code also
//! applies R_HAI below T_low). `segment_bytes` 0 gives HPCC's ns-3 rule instead (one
//! update per round trip: the first ACK at least its own RTT after the last update).
//!
//! Defaults are HPCC's (SwCC quotes α and β): α 0.875, β 0.8, T_low 50 µs, T_high
//! 500 µs, δ = line rate / 1000 (100 Mb/s at 100 Gbps), R_HAI = 5·δ after 5 increases,
//! rates start at the line rate. The gradient is normalized by the flow's unloaded
//! round trip (TIMELY's minimum RTT; HPCC fixes 20 µs, `min_rtt_us`). A timeout leaves
//! the rate alone (HPCC has none).
//!
//! Any constant RTT between T_low and T_high is an equilibrium, but not a stable one: a
//! rate excess e shows as a gradient of e·τ/min_rtt per completion τ apart, and the
//! cuts go on for the round trip the first one takes to show, so the loop's gain is
//! β·RTT/min_rtt (4.6 at T_low = 50 µs over a base RTT of 8.7 µs; 2 with HPCC's 20 µs).
//! Above 1 the cut overshoots: the queue rises to about T_low − base RTT, drains to
//! empty, and the additive increase refills it (a sawtooth, `cc::tests`). T_low = 50 µs
//! is 5 MB of queue at 800 Gbps: on shallow buffers set `t_low_us`/`t_high_us` to what
//! the buffer holds.

use super::{fixed, mul_div, us, CcInit, CongestionControl, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};

#[derive(Clone, Copy)]
struct Flow {
    /// Bits per second.
    rate: u64,
    prev_rtt: Option<u64>,
    /// Smoothed RTT difference, picoseconds.
    rtt_diff: i64,
    increases: u32,
    /// HPCC's once-per-round-trip rule (`segment_bytes` 0): the next update's earliest time.
    next_update: Time,
    /// Payload bytes acknowledged; a completion event is each `segment` of them.
    acked: u64,
    min_rtt: u64,
}

pub struct Timely {
    flows: Vec<Flow>,
    alpha: u64,
    beta: u64,
    t_low: u64,
    t_high: u64,
    delta: u64,
    hai: u64,
    hai_after: u32,
    /// Bytes of a completion event (TIMELY's segment); 0: once per round trip.
    segment: u64,
    line_rate: u64,
    min_rate: u64,
    decreases: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Timely::new(init, params)?))
}

impl Timely {
    fn new(init: &CcInit, params: &Params) -> SimResult<Timely> {
        let line = init.line_rate.bps();
        let mut p = ParamReader::new("cc", "timely", params);
        let alpha = p.f64_in_open_closed("alpha", 0.875, 0.0, 1.0)?;
        let beta = p.f64_in_open_closed("beta", 0.8, 0.0, 1.0)?;
        let t_low = p.f64_in_open_closed("t_low_us", 50.0, 0.0, 1e6)?;
        let t_high = p.f64_in_open_closed("t_high_us", 500.0, 0.0, 1e6)?;
        p.ascending(&[("t_low_us", t_low), ("t_high_us", t_high)])?;
        let min_rtt = p.f64_opt("min_rtt_us", 0.0, 1e6)?;
        let delta = p.f64_in_open_closed("delta_gbps", line as f64 / 1e12, 0.0, 1e6)?;
        let hai = p.f64_in_open_closed("hai_gbps", 5.0 * delta, 0.0, 1e6)?;
        let hai_after = p.u32_min("hai_after", 5, 1)?;
        let init_rate = p.f64_in_open_closed("init_rate", 1.0, 0.0, 1.0)?;
        let segment = p.int_in("segment_bytes", 65_536, 0, 1 << 30)?;
        p.finish()?;
        let delta = (delta * 1e9).round() as u64;
        let flows = (init.paths.iter())
            .map(|path| Flow {
                rate: ((line as f64 * init_rate) as u64).max(delta),
                prev_rtt: None,
                rtt_diff: 0,
                increases: 0,
                next_update: Time::ZERO,
                acked: 0,
                min_rtt: min_rtt.map_or(path.base_rtt.0, us).max(1),
            })
            .collect();
        Ok(Timely {
            flows,
            alpha: fixed(alpha),
            beta: fixed(beta),
            t_low: us(t_low),
            t_high: us(t_high),
            delta,
            hai: (hai * 1e9).round() as u64,
            hai_after,
            segment,
            line_rate: line,
            min_rate: delta.min(line),
            decreases: 0,
        })
    }

    #[cfg(test)]
    fn rate_bps(&self, f: FlowId) -> u64 {
        self.flows[f as usize].rate
    }

    /// The multiplicative factor (2^-20) of an update at `rtt`, None for an increase.
    fn factor(&self, fl: &Flow, rtt: u64) -> Option<u64> {
        if rtt < self.t_low {
            None
        } else if rtt > self.t_high {
            // 1 − β(1 − T_high/rtt)
            Some(ONE - mul_div(self.beta, rtt - self.t_high, rtt))
        } else if fl.rtt_diff <= 0 {
            None
        } else {
            let drop = mul_div(self.beta, fl.rtt_diff as u64, fl.min_rtt);
            Some(ONE.saturating_sub(drop))
        }
    }
}

impl CongestionControl for Timely {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn window_bytes(&self, _flow: FlowId) -> u64 {
        u64::MAX
    }

    fn pacing_gap(&self, flow: FlowId, wire_bytes: u32) -> Option<Dur> {
        let rate = self.flows[flow as usize].rate;
        (rate < self.line_rate)
            .then(|| Dur(mul_div(wire_bytes as u64 * 8, 1_000_000_000_000, rate)))
    }

    fn on_feedback(&mut self, fb: &Feedback, _timers: &mut CcTimers) {
        let f = fb.flow as usize;
        let mut fl = self.flows[f];
        if fb.newly_acked == 0 {
            return;
        }
        if self.segment == 0 {
            if fb.now < fl.next_update {
                return;
            }
        } else {
            // One update per completion event: the reply that completes a segment.
            let before = fl.acked / self.segment;
            fl.acked += fb.newly_acked as u64;
            if fl.acked / self.segment == before && !fb.complete {
                self.flows[f] = fl;
                return;
            }
        }
        let rtt = fb.rtt.0;
        fl.next_update = Time(fb.now.0 + rtt);
        if let Some(prev) = fl.prev_rtt {
            // rtt_diff ← (1 − α)·rtt_diff + α·(rtt − prev_rtt)
            let new = rtt as i128 - prev as i128;
            let (a, one) = (self.alpha as i128, ONE as i128);
            fl.rtt_diff = ((fl.rtt_diff as i128 * (one - a) + new * a) / one) as i64;
            match self.factor(&fl, rtt) {
                None if rtt < self.t_low => {
                    fl.increases = 0;
                    fl.rate = (fl.rate + self.delta).min(self.line_rate);
                }
                None => {
                    // R_HAI once `hai_after` increases came before this one (HPCC's
                    // incStage >= 5).
                    let step = if fl.increases >= self.hai_after {
                        self.hai
                    } else {
                        self.delta
                    };
                    fl.increases += 1;
                    fl.rate = (fl.rate + step).min(self.line_rate);
                }
                Some(c) => {
                    fl.increases = 0;
                    fl.rate = mul_div(fl.rate, c, ONE).max(self.min_rate);
                    self.decreases += 1;
                }
            }
        }
        fl.prev_rtt = Some(rtt);
        self.flows[f] = fl;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("rate_decreases", self.decreases)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths, MSS};
    use serde_json::json;

    const SEGMENT: u32 = 65_536;

    /// One flow at 100 Gbps, 2 hops of 2 µs (base RTT 8.7 µs).
    fn timely(params: serde_json::Value) -> SimResult<Timely> {
        let paths = Paths::new(1, 2, 100.0, 2_000);
        Timely::new(&paths.init(), &serde_json::from_value(params).unwrap())
    }

    /// Feeds replies of the given RTTs (µs), each one RTT after the last and completing
    /// a 64 KB segment; the rate after each, in Gbps.
    fn rates(t: &mut Timely, rtts_us: &[f64]) -> Vec<f64> {
        let mut now = 1_000_000u64;
        let mut timers = CcTimers::default();
        rtts_us
            .iter()
            .enumerate()
            .map(|(i, &rtt)| {
                let rtt = (rtt * 1e6) as u64;
                t.on_feedback(&reply(0, i as u32, now, rtt, SEGMENT, 0), &mut timers);
                now += rtt;
                t.rate_bps(0) as f64 / 1e9
            })
            .collect()
    }

    #[test]
    fn above_t_high_the_rate_is_cut_by_beta_times_the_excess() {
        // CC-CATALOGUE §3: 1 − 0.8·(1 − 500/1000) = 0.6 at rtt = 1000 µs.
        let mut t = timely(json!({})).unwrap();
        let r = rates(&mut t, &[1000.0, 1000.0, 2000.0]);
        assert_eq!(r[0], 100.0, "the first sample only sets prev_rtt");
        assert!((r[1] / 60.0 - 1.0).abs() < 1e-6, "{r:?}");
        // 2000 µs: 1 − 0.8·0.75 = 0.4.
        assert!((r[2] / (60.0 * 0.4) - 1.0).abs() < 1e-5, "{r:?}");
    }

    #[test]
    fn increases_add_delta_below_t_low_and_hyperactively_on_a_falling_gradient() {
        // δ = 100 Mb/s at 100 Gbps; below T_low plain additive, once per completion event.
        let mut t = timely(json!({"init_rate": 0.5})).unwrap();
        let r = rates(&mut t, &[10.0; 8]);
        for (i, rate) in r.iter().enumerate() {
            assert!((rate - (50.0 + 0.1 * i as f64)).abs() < 1e-9, "{r:?}");
        }
        // Replies within a segment: no completion event, no update (15 MSS of 16).
        let mut timers = CcTimers::default();
        for i in 0..15 {
            let now = 1_000_000 + 80_000_000 + i * 1000;
            t.on_feedback(&reply(0, 99, now, 10_000_000, MSS, 0), &mut timers);
        }
        assert!((t.rate_bps(0) as f64 / 1e9 - 50.7).abs() < 1e-9);
        t.on_feedback(&reply(0, 99, 82_000_000, 10_000_000, MSS, 0), &mut timers);
        assert!(
            (t.rate_bps(0) as f64 / 1e9 - 50.8).abs() < 1e-9,
            "the 16th completes it"
        );
        // HPCC's rule (`segment_bytes` 0): once per round trip, whatever the bytes.
        let mut t = timely(json!({"init_rate": 0.5, "segment_bytes": 0})).unwrap();
        for i in 0..20u64 {
            // Replies 1 µs apart with an RTT of 10 µs: updates at 0, 10 µs (two).
            let now = 1_000_000 + i * 1_000_000;
            t.on_feedback(&reply(0, i as u32, now, 10_000_000, MSS, 0), &mut timers);
        }
        assert!(
            (t.rate_bps(0) as f64 / 1e9 - 50.1).abs() < 1e-9,
            "{}",
            t.rate_bps(0)
        );
        // Between T_low and T_high with a flat RTT: δ five times, then R_HAI = 5δ.
        let mut t = timely(json!({"init_rate": 0.5})).unwrap();
        let r = rates(&mut t, &[100.0; 9]);
        let want = [50.0, 50.1, 50.2, 50.3, 50.4, 50.5, 51.0, 51.5, 52.0];
        for (got, want) in r.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{r:?}");
        }
    }

    #[test]
    fn a_rising_rtt_cuts_by_beta_times_the_gradient() {
        // rtt 100 -> 110 µs: rtt_diff = 0.875 × 10 µs; gradient over the base RTT 8.7 µs.
        let mut t = timely(json!({"init_rate": 0.5})).unwrap();
        let r = rates(&mut t, &[100.0, 110.0]);
        let base = Paths::new(1, 2, 100.0, 2_000).paths[0].base_rtt.0 as f64 / 1e6;
        let want = 50.0 * (1.0 - 0.8 * 0.875 * 10.0 / base).max(0.0);
        assert!((r[1] - want.max(0.1)).abs() < 1e-3, "{r:?} vs {want}");
        // With HPCC's fixed 20 µs: 1 − 0.8 × 8.75/20 = 0.65.
        let mut t = timely(json!({"init_rate": 0.5, "min_rtt_us": 20.0})).unwrap();
        let r = rates(&mut t, &[100.0, 110.0]);
        assert!((r[1] - 50.0 * 0.65).abs() < 1e-3, "{r:?}");
        // Paced at the rate: 4158 B at 32.5 Gbps.
        let gap = t.pacing_gap(0, 4158).unwrap().0 as f64;
        assert!((gap - 4158.0 * 8.0 / 32.5e9 * 1e12).abs() < 10.0, "{gap}");
    }

    #[test]
    fn bad_parameters_are_refused_naming_scheme_and_parameter() {
        for (params, name) in [
            (json!({"t_low_us": -50.0}), "`t_low_us`"),
            (json!({"t_high_us": 20.0}), "`t_high_us`"),
            (json!({"beta": 1.5}), "`beta`"),
            (json!({"alpha": 0.0}), "`alpha`"),
            (json!({"init_rate": 2.0}), "`init_rate`"),
            (json!({"t_low": 50.0}), "`t_low`"),
        ] {
            let err = refusal(timely(params));
            assert!(err.contains(name) && err.contains("timely"), "{err}");
        }
    }
}
