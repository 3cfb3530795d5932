//! `dctcp` (Alizadeh et al., SIGCOMM 2010, §3; CC-CATALOGUE §1): a window of bytes per
//! flow. Switches mark CE above K (the `red` discipline with `ecn_kmin` = `ecn_kmax`);
//! the receiver echoes each mark. Once per window of data the sender sets
//! α ← (1 − g)α + g·F, F the fraction of that window's bytes that came back marked. A
//! mark cuts W ← W(1 − α/2), at most once per window; a window without a cut grows W by
//! one MSS (the additive increase of TCP's congestion avoidance).
//!
//! A window is the bytes acknowledged until then: it ends once as many bytes as the
//! window held at its start are acknowledged (one round trip at a steady rate). Like the
//! datacenter simulators (HPCC's ns-3, htsim) there is no slow start: W starts at
//! `init_window` bandwidth-delay products of the flow's path, α at 1 (as Linux does). A
//! timeout halves W (without slow start, TCP's reset to one MSS would take a window's
//! worth of round trips to recover), unless `timeout_halves` is false: the Ethereal paper's
//! transport runs DCTCP on ACKs only, its timeout and NACK handlers reroute and go back
//! without a CC step (Algorithm 1), as befits a lossless fabric where a loss is a failure,
//! not congestion. α is kept in fixed point (2^-20).

use super::{CcInit, CongestionControl};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};

const ONE: u64 = 1 << 20;

#[derive(Clone, Copy, Debug)]
struct Flow {
    window: u64,
    /// α in units of 2^-20.
    alpha: u64,
    /// Bytes acknowledged, and those of them marked, in the current observation window.
    acked: u64,
    marked: u64,
    /// Bytes the current observation window ends after (the window when it began).
    span: u64,
    /// Bytes still to acknowledge before another cut is allowed (0: allowed).
    cut_guard: u64,
    /// Bytes acknowledged towards the next one-MSS increase.
    growth: u64,
}

pub struct Dctcp {
    flows: Vec<Flow>,
    /// g in units of 2^-20.
    g: u64,
    mss: u64,
    min_window: u64,
    timeout_halves: bool,
    cuts: u64,
    increases: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Dctcp::new(init, params)?))
}

impl Dctcp {
    fn new(init: &CcInit, params: &Params) -> SimResult<Dctcp> {
        let mut p = ParamReader::new("cc", "dctcp", params);
        let g = p.f64_in_open_closed("g", 1.0 / 16.0, 0.0, 1.0)?;
        let init_window = p.f64_in_open_closed("init_window", 1.0, 0.0, 1e6)?;
        let timeout_halves = p.bool("timeout_halves", true)?;
        p.finish()?;
        let mss = init.mss as u64;
        let flows = (init.paths.iter())
            .map(|path| {
                let window = ((path.bdp_bytes as f64 * init_window) as u64).max(mss);
                Flow {
                    window,
                    alpha: ONE,
                    acked: 0,
                    marked: 0,
                    span: window,
                    cut_guard: 0,
                    growth: 0,
                }
            })
            .collect();
        Ok(Dctcp {
            flows,
            g: ((g * ONE as f64).round() as u64).clamp(1, ONE),
            mss,
            min_window: mss,
            timeout_halves,
            cuts: 0,
            increases: 0,
        })
    }
}

impl CongestionControl for Dctcp {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn window_bytes(&self, flow: FlowId) -> u64 {
        self.flows[flow as usize].window
    }

    fn pacing_gap(&self, _flow: FlowId, _wire_bytes: u32) -> Option<Dur> {
        None
    }

    fn on_feedback(&mut self, fb: &Feedback, _timers: &mut CcTimers) {
        let bytes = fb.newly_acked as u64;
        if bytes == 0 {
            return;
        }
        let f = &mut self.flows[fb.flow as usize];
        f.acked += bytes;
        if fb.ecn() {
            f.marked += bytes;
        }
        if f.acked >= f.span {
            // α ← α + g(F − α), F = marked / acked.
            let frac = f.marked * ONE / f.acked;
            f.alpha = ((f.alpha * (ONE - self.g) + frac * self.g) / ONE).min(ONE);
            (f.acked, f.marked, f.span) = (0, 0, f.window);
        }
        f.cut_guard = f.cut_guard.saturating_sub(bytes);
        if fb.ecn() {
            if f.cut_guard == 0 {
                let cut = f.window * f.alpha / (2 * ONE);
                f.window = (f.window - cut).max(self.min_window);
                (f.cut_guard, f.growth) = (f.window, 0);
                self.cuts += 1;
            }
        } else if f.cut_guard == 0 {
            f.growth += bytes;
            if f.growth >= f.window {
                f.growth -= f.window;
                f.window += self.mss;
                self.increases += 1;
            }
        }
    }

    fn on_timeout(&mut self, flow: FlowId, _now: Time, _timers: &mut CcTimers) {
        if !self.timeout_halves {
            return;
        }
        let f = &mut self.flows[flow as usize];
        f.window = (f.window / 2).max(self.min_window);
        (f.cut_guard, f.growth) = (f.window, 0);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("window_cuts", self.cuts),
            ("window_increases", self.increases),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{flags, FlowPath};

    fn dctcp(params: serde_json::Value) -> SimResult<Dctcp> {
        let paths = [FlowPath {
            hops: 2,
            base_rtt: Dur(10_000_000),
            bdp_bytes: 100 * 4096,
        }];
        let init = CcInit {
            paths: &paths,
            flow_bytes: &[],
            line_rate: crate::units::Rate::from_gbps(100.0),
            mss: 4096,
            packet_wire_bytes: 4158,
            trimming: false,
        };
        Dctcp::new(&init, &serde_json::from_value(params).unwrap())
    }

    fn ack(seq: u32, marked: bool) -> Feedback {
        let mut fb = crate::loss::feedback(0, seq, Time(0));
        fb.newly_acked = 4096;
        fb.flags = if marked { flags::ECN } else { 0 };
        fb
    }

    #[test]
    fn alpha_decays_by_one_minus_g_per_unmarked_window() {
        // CC-CATALOGUE §1: with F = 0, α_n = (15/16)^n; α_11 = 0.49, α_16 = 0.356.
        let mut cc = dctcp(serde_json::json!({})).unwrap();
        let mut t = CcTimers::default();
        let mut seq = 0;
        let mut ends = 0;
        while ends < 16 {
            // Acknowledge exactly one window (its bytes at the window's start).
            let w = cc.window_bytes(0) / 4096;
            for _ in 0..w {
                cc.on_feedback(&ack(seq, false), &mut t);
                seq += 1;
            }
            ends += 1;
            let alpha = cc.flows[0].alpha as f64 / ONE as f64;
            let want = (15.0f64 / 16.0).powi(ends);
            assert!(
                (alpha - want).abs() < 1e-4,
                "window {ends}: α = {alpha}, want {want}"
            );
        }
    }

    #[test]
    fn a_mark_cuts_once_per_window_and_unmarked_windows_grow_one_mss() {
        let mut cc = dctcp(serde_json::json!({"g": 0.5})).unwrap();
        let mut t = CcTimers::default();
        assert_eq!(cc.window_bytes(0), 100 * 4096);
        // α = 1: the first mark halves the window; more marks in that window change nothing.
        cc.on_feedback(&ack(0, true), &mut t);
        assert_eq!(cc.window_bytes(0), 50 * 4096);
        for seq in 1..40 {
            cc.on_feedback(&ack(seq, true), &mut t);
        }
        assert_eq!(cc.window_bytes(0), 50 * 4096);
        // Once a window of 50 packets is acknowledged after the cut, unmarked ACKs grow it
        // by one MSS per window.
        for seq in 40..50 + 50 {
            cc.on_feedback(&ack(seq, false), &mut t);
        }
        assert_eq!(cc.window_bytes(0), 51 * 4096);
    }

    #[test]
    fn a_timeout_halves_the_window_unless_timeout_halves_is_off() {
        let mut t = CcTimers::default();
        let mut cc = dctcp(serde_json::json!({})).unwrap();
        cc.on_timeout(0, Time(0), &mut t);
        assert_eq!(cc.window_bytes(0), 50 * 4096);
        // Ethereal Algorithm 1: DCTCP on ACKs only; a timeout reroutes and goes back.
        let mut cc = dctcp(serde_json::json!({"timeout_halves": false})).unwrap();
        cc.on_timeout(0, Time(0), &mut t);
        assert_eq!(cc.window_bytes(0), 100 * 4096);
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        for (params, name) in [
            (serde_json::json!({"g": 0.0}), "`g`"),
            (serde_json::json!({"g": 1.5}), "`g`"),
            (serde_json::json!({"init_window": -1.0}), "`init_window`"),
            (serde_json::json!({"K": 3}), "`K`"),
        ] {
            let err = dctcp(params).err().expect("refused").to_string();
            assert!(err.contains(name) && err.contains("dctcp"), "{err}");
        }
        assert!(dctcp(serde_json::json!({"g": 1.0})).is_ok());
    }
}
