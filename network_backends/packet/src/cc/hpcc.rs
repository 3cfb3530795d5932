//! `hpcc` (Li et al., SIGCOMM 2019, as HPCC's ns-3 `RdmaHw::UpdateRateHp` and UET's
//! `hpcc.cpp` implement it; CC-CATALOGUE §4): a window per flow, paced at W/T, set from
//! in-band telemetry. Switches stamp (timestamp, tx bytes, queue, line rate) into each data
//! packet at dequeue, on up to 5 hops (`wants_int`; the engine's side table). Per reply:
//!
//! 1. each hop j with an earlier record from the same port gives
//!    u_j = min(q, q_prev)/(B_j·T) + (Δtx/Δts)/B_j;
//! 2. u = max_j u_j, τ = that hop's Δts capped at T; U ← (1 − τ/T)·U + (τ/T)·u;
//! 3. U ≥ η or stage ≥ max_stage: W = W_c·η/U + W_AI (stage restarts); else
//!    W = W_c + W_AI (stage + 1);
//! 4. W applies at once ("fast react"); W_c and the stage commit once per round trip, on
//!    the first reply after everything in flight at the last commit is acknowledged
//!    (ns-3's lastUpdateSeq = snd_nxt).
//!
//! W stays in [min_rate·T, B·T] (B·T = the flow's BDP, where it starts). At the fixed
//! point N flows hold U = η + N·W_AI/(B·T) = η + N·R_AI/B with no standing queue.
//!
//! Defaults: η 0.95, max_stage 5 (UET, the paper; ns-3's run.py passes 0), R_AI = line
//! rate / 2500 (ns-3's 40 Mb/s at 100 Gbps), R_min = line / 100 (ns-3's 1 Gb/s at 100
//! Gbps, as `dcqcn`), T = the flow's unloaded round trip (ns-3 takes the largest over all
//! host pairs; `t_us` sets one for all).
//!
//! Multipath: a hop's record is compared only with the last record from the same port,
//! so under spraying the hops a flow's packets share (the first and the last) carry the
//! signal and the others resample. A timeout leaves W alone (ns-3 has none).

use super::{fixed, mul_div, us, CcInit, CongestionControl, FX, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback, IntHop, INT_MAX_HOPS};
use crate::units::Dur;

#[derive(Clone, Copy)]
struct Flow {
    /// Window and committed window, bytes in 2^-FX.
    w: u64,
    wc: u64,
    /// U in 2^-20.
    u: u64,
    stage: u32,
    /// The previous record of each hop.
    prev: [IntHop; INT_MAX_HOPS],
    n_prev: u8,
    acked: u64,
    /// Acknowledged bytes at which the next commit comes (None before the first reply).
    commit_at: Option<u64>,
    /// T, picoseconds; W bounds and W_AI in 2^-FX bytes.
    t: u64,
    w_max: u64,
    w_min: u64,
    w_ai: u64,
}

pub struct Hpcc {
    flows: Vec<Flow>,
    eta: u64,
    max_stage: u32,
    decreases: u64,
    commits: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Hpcc::new(init, params)?))
}

/// Bytes `bps` sends in `t_ps`, in 2^-FX.
fn bytes_fx(bps: f64, t_ps: u64) -> u64 {
    (bps * t_ps as f64 / 8e12 * (1u64 << FX) as f64) as u64
}

impl Hpcc {
    fn new(init: &CcInit, params: &Params) -> SimResult<Hpcc> {
        let line = init.line_rate.bps() as f64;
        let gbps = line / 1e9;
        let mut p = ParamReader::new("cc", "hpcc", params);
        let eta = p.f64_in_open_closed("eta", 0.95, 0.0, 1.0)?;
        let max_stage = p.int_in("max_stage", 5, 0, 1_000_000)? as u32;
        let ai = p.f64_in_open_closed("ai_gbps", gbps / 2500.0, 0.0, gbps)?;
        let min_rate = p.f64_in_open_closed("min_rate_gbps", gbps / 100.0, 0.0, gbps)?;
        let t_us = p.f64_opt("t_us", 0.0, 1e6)?;
        p.finish()?;
        let flows = (init.paths.iter())
            .map(|path| {
                let t = t_us.map_or(path.base_rtt.0, us).max(1);
                let w_max = bytes_fx(line, t).max(1);
                Flow {
                    w: w_max,
                    wc: w_max,
                    u: 0,
                    stage: 0,
                    prev: [IntHop::default(); INT_MAX_HOPS],
                    n_prev: 0,
                    acked: 0,
                    commit_at: None,
                    t,
                    w_max,
                    w_min: bytes_fx(min_rate * 1e9, t).clamp(1, w_max),
                    w_ai: bytes_fx(ai * 1e9, t),
                }
            })
            .collect();
        Ok(Hpcc {
            flows,
            eta: fixed(eta),
            max_stage,
            decreases: 0,
            commits: 0,
        })
    }

    #[cfg(test)]
    fn window(&self, f: FlowId) -> f64 {
        self.flows[f as usize].w as f64 / (1u64 << FX) as f64
    }

    /// Step 1-2: the largest normalized inflight over the hops with a fresh record from
    /// the same port as before, and that hop's Δts (None: no such hop).
    fn max_hop(fl: &Flow, hops: &[IntHop]) -> Option<(u64, u64)> {
        let mut best: Option<(u64, u64)> = None;
        for (now, prev) in hops.iter().zip(&fl.prev[..fl.n_prev as usize]) {
            if now.port != prev.port || now.ts <= prev.ts || now.tx_bytes < prev.tx_bytes {
                continue;
            }
            let tau = (now.ts - prev.ts).0;
            let rate = now.rate_bps.max(1) as u128;
            let q = now.qlen.min(prev.qlen) as u128;
            let scale = 8_000_000_000_000u128 * ONE as u128;
            let u_q = q * scale / (rate * fl.t as u128);
            let u_tx = (now.tx_bytes - prev.tx_bytes) as u128 * scale / (rate * tau as u128);
            let u = (u_q + u_tx).min(u64::MAX as u128) as u64;
            if best.map_or(true, |(b, _)| u > b) {
                best = Some((u, tau));
            }
        }
        best
    }
}

impl CongestionControl for Hpcc {
    fn window_bytes(&self, flow: FlowId) -> u64 {
        // Sends while the bytes in flight are below W (as ns-3), at least one packet.
        (self.flows[flow as usize].w >> FX).max(1)
    }

    fn pacing_gap(&self, flow: FlowId, wire_bytes: u32) -> Option<Dur> {
        // Rate W/T: a frame of `wire` bytes every wire·T/W.
        let fl = &self.flows[flow as usize];
        (fl.w < fl.w_max).then(|| Dur(mul_div((wire_bytes as u64) << FX, fl.t, fl.w.max(1))))
    }

    fn wants_int(&self) -> bool {
        true
    }

    fn on_feedback_int(&mut self, fb: &Feedback, hops: &[IntHop], _timers: &mut CcTimers) {
        let fl = &mut self.flows[fb.flow as usize];
        fl.acked += fb.newly_acked as u64;
        let Some(commit_at) = fl.commit_at else {
            // The first reply: records to compare the next ones with, and the first
            // round trip to wait out.
            fl.prev[..hops.len()].copy_from_slice(hops);
            fl.n_prev = hops.len() as u8;
            fl.commit_at = Some(fl.acked + fb.in_flight);
            return;
        };
        let sample = Self::max_hop(fl, hops);
        fl.prev[..hops.len()].copy_from_slice(hops);
        fl.n_prev = hops.len() as u8;
        let commit = fl.acked >= commit_at;
        if let Some((u, tau)) = sample {
            let tau = tau.min(fl.t);
            fl.u = ((fl.u as u128 * (fl.t - tau) as u128 + u as u128 * tau as u128) / fl.t as u128)
                as u64;
            let (w, stage) = if fl.u >= self.eta || fl.stage >= self.max_stage {
                (mul_div(fl.wc, self.eta, fl.u.max(1)) + fl.w_ai, 0)
            } else {
                (fl.wc + fl.w_ai, fl.stage + 1)
            };
            fl.w = w.clamp(fl.w_min, fl.w_max);
            if commit {
                if fl.w < fl.wc {
                    self.decreases += 1;
                }
                (fl.wc, fl.stage) = (fl.w, stage);
                self.commits += 1;
            }
        }
        if commit {
            fl.commit_at = Some(fl.acked + fb.in_flight);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("window_commits", self.commits),
            ("window_decreases", self.decreases),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths};
    use crate::units::Time;

    fn hop(port: u32, ts_ps: u64, tx: u64, qlen: u64) -> IntHop {
        IntHop {
            port,
            ts: Time(ts_ps),
            tx_bytes: tx,
            qlen,
            rate_bps: 100_000_000_000,
        }
    }

    #[test]
    fn normalized_inflight_takes_the_busiest_hop_and_cuts_by_u_over_eta() {
        // T = 10 µs, B = 100 Gbps: a hop sending at the line rate with 0.05·B·T queued
        // (6.25 KB) has u = 1.05; the other hop at half rate, u = 0.5. One full
        // sample (τ = T) sets U = 1.05, so W = W_c·0.95/1.05 + W_AI.
        let paths = Paths::new(1, 2, 100.0, 1000);
        let mut cc = Hpcc::new(
            &paths.init(),
            &serde_json::from_value(serde_json::json!({"t_us": 10.0})).unwrap(),
        )
        .unwrap();
        let mut t = CcTimers::default();
        let w0 = cc.window(0);
        assert!((w0 - 125_000.0).abs() < 1.0, "{w0}");
        let mut fb = reply(0, 0, 0, 1, 4096, 0);
        fb.in_flight = 4096;
        cc.on_feedback_int(&fb, &[hop(1, 0, 0, 0), hop(2, 0, 0, 6_250)], &mut t);
        let mut fb = reply(0, 1, 10_000_000, 1, 4096, 0);
        fb.in_flight = 4096;
        let tx_full = 125_000; // 10 µs at 100 Gbps
        cc.on_feedback_int(
            &fb,
            &[
                hop(1, 10_000_000, tx_full / 2, 0),
                hop(2, 10_000_000, tx_full, 6_250),
            ],
            &mut t,
        );
        let u = cc.flows[0].u as f64 / ONE as f64;
        assert!((u - 1.05).abs() < 1e-5, "U = {u}");
        let w_ai = 100e9 / 2500.0 * 10e-6 / 8.0;
        let want = 125_000.0 * 0.95 / 1.05 + w_ai;
        assert!(
            (cc.window(0) / want - 1.0).abs() < 1e-5,
            "{} vs {want}",
            cc.window(0)
        );
        // Committed (everything in flight at the first reply is acknowledged).
        assert_eq!(cc.commits, 1);
    }

    #[test]
    fn below_eta_the_window_grows_additively_then_multiplicatively_after_max_stage() {
        let paths = Paths::new(1, 2, 100.0, 1000);
        let mut cc = Hpcc::new(
            &paths.init(),
            &serde_json::from_value(serde_json::json!({"t_us": 10.0, "min_rate_gbps": 1.0}))
                .unwrap(),
        )
        .unwrap();
        cc.flows[0].wc = cc.flows[0].w_max / 8;
        let mut t = CcTimers::default();
        let w_ai = cc.flows[0].w_ai;
        let wc0 = cc.flows[0].wc;
        // Hop at 20 % load, empty queue: U → 0.2 < η. Each commit (every reply here: one
        // packet in flight) adds W_AI for 5 stages, then W = W_c·η/U + W_AI.
        let mut tx = 0;
        for k in 0..=6u64 {
            let mut fb = reply(0, k as u32, k * 10_000_000, 1, 4096, 0);
            fb.in_flight = 0;
            cc.on_feedback_int(&fb, &[hop(1, k * 10_000_000, tx, 0)], &mut t);
            tx += 25_000;
        }
        let fl = cc.flows[0];
        let u = fl.u as f64 / ONE as f64;
        assert!((u - 0.2).abs() < 1e-5);
        let after5 = wc0 + 5 * w_ai;
        let want = (after5 as f64 * 0.95 / 0.2 + w_ai as f64) / (1u64 << FX) as f64;
        assert!(
            (cc.window(0) / want - 1.0).abs() < 1e-4,
            "{} vs {want}",
            cc.window(0)
        );
        assert_eq!(fl.stage, 0);
    }

    #[test]
    fn a_hop_from_another_port_is_not_compared() {
        let paths = Paths::new(1, 2, 100.0, 1000);
        let mut cc = Hpcc::new(&paths.init(), &Params::new()).unwrap();
        let mut t = CcTimers::default();
        let w0 = cc.window(0);
        cc.on_feedback_int(&reply(0, 0, 0, 1, 4096, 0), &[hop(1, 0, 0, 0)], &mut t);
        cc.on_feedback_int(
            &reply(0, 1, 9_000_000, 1, 4096, 0),
            &[hop(7, 9_000_000, 1_000_000, 500_000)],
            &mut t,
        );
        assert_eq!(cc.window(0), w0);
        assert_eq!(cc.flows[0].u, 0);
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let paths = Paths::new(1, 2, 100.0, 1000);
        for (params, name) in [
            (serde_json::json!({"eta": 1.5}), "`eta`"),
            (serde_json::json!({"ai_gbps": 0.0}), "`ai_gbps`"),
            (serde_json::json!({"max_stage": -1}), "`max_stage`"),
            (serde_json::json!({"window": 1}), "`window`"),
        ] {
            let err = refusal(Hpcc::new(
                &paths.init(),
                &serde_json::from_value(params).unwrap(),
            ));
            assert!(err.contains(name) && err.contains("hpcc"), "{err}");
        }
    }
}
