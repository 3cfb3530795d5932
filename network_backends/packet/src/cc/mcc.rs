//! `mcc` (message-level congestion control, the MCC slides; CC-CATALOGUE §9): a window of
//! bytes per flow, set once per message chunk from two delay signals, so that congestion
//! on some paths, which adaptive routing or spraying absorbs, does not slow the flow.
//!
//! A flow's bytes are cut into chunks of `chunk_bytes` (64 KB, the slides' collective-
//! library chunk). When a chunk is acknowledged the sender looks at the round trips of
//! the packets acknowledged during it:
//! - message delay = their median: the delay of the pipe (all paths together) as the
//!   message as a whole sees it, which a minority of queued paths does not move;
//! - packet delay = their largest: the worst single path.
//!
//! Then (the slides' signal grid):
//! - message delay > target_msg (global congestion: every path queues): slow down,
//!   W ← W·max(1 − β·(msg − target_msg)/msg, 1 − max_mdf);
//! - else packet delay > target_pkt (partial congestion: some paths queue, the pipe does
//!   not): keep W (the slides' "keep rate": with a minority of paths queued the rate
//!   W/RTT barely moves), and let adaptive routing rebalance;
//! - else (no congestion): W += ai·MSS·chunk/W, about `ai` MSS per round trip.
//!
//! Values the slides leave open, and the choices made here: the signals' definitions
//! (above: median and largest RTT of a chunk's replies, of its last 64; the slides say "message RTT" and
//! "sampled packet RTTs"); target_msg = base RTT·(1 + `msg_slack`), `msg_slack` 0.25;
//! target_pkt = base RTT·(1 + `pkt_slack`), `pkt_slack` 1; the decrease rule and its
//! constants (Swift's: β 0.8, max_mdf 0.5, at most once per chunk); the increase (one
//! MSS per window, `ai` 1); the start (one BDP, `init_window`) and the cap (`max_window`
//! 4 BDP); a timeout cuts by max_mdf. The window lives in the transport here, per flow,
//! where the slides put it in the collective library over a message's chunks: a
//! collective's flows are its messages, so the two coincide. W is kept in 2^-FX bytes.

use super::{fitting, fixed, mul_div, CcInit, CongestionControl, FX, ONE};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};

/// Round trips kept per chunk for its median (a 64 KB chunk is 16 packets of 4 KB, 64 of
/// 1 KB: the last 64 replies of a chunk are all or most of it).
const SAMPLES: usize = 64;

#[derive(Clone, Copy)]
struct Flow {
    /// Window, bytes in 2^-FX.
    w: u64,
    w_max: u64,
    acked: u64,
    /// Acknowledged bytes at which the current chunk ends.
    chunk_end: u64,
    /// Round trips seen during the chunk: the last `SAMPLES` (ns), their count, largest (ps).
    rtts: [u32; SAMPLES],
    rtt_n: u64,
    rtt_max: u64,
    target_msg: u64,
    target_pkt: u64,
}

pub struct Mcc {
    flows: Vec<Flow>,
    chunk: u64,
    beta: u64,
    max_mdf: u64,
    ai: u64,
    mss: u64,
    /// Chunks judged: global congestion, partial congestion, none.
    global: u64,
    partial: u64,
    none: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    Ok(Box::new(Mcc::new(init, params)?))
}

impl Mcc {
    fn new(init: &CcInit, params: &Params) -> SimResult<Mcc> {
        let mut p = ParamReader::new("cc", "mcc", params);
        let chunk = p.int_in("chunk_bytes", 65_536, 1, 1 << 40)?;
        let msg_slack = p.f64_in_open_closed("msg_slack", 0.25, 0.0, 1e3)?;
        let pkt_slack = p.f64_in_open_closed("pkt_slack", 1.0, 0.0, 1e3)?;
        p.ascending(&[("msg_slack", msg_slack), ("pkt_slack", pkt_slack)])?;
        let beta = p.f64_in_open_closed("beta", 0.8, 0.0, 1.0)?;
        let max_mdf = p.f64_in_open_closed("max_mdf", 0.5, 0.0, 1.0)?;
        let ai = p.f64_in_open_closed("ai", 1.0, 0.0, 1e6)?;
        let init_window = p.f64_in_open_closed("init_window", 1.0, 0.0, 1e6)?;
        let max_window = p.f64_in_open_closed("max_window", 4.0, 0.0, 1e6)?;
        p.ascending(&[("init_window", init_window), ("max_window", max_window)])?;
        p.finish()?;
        let mss = init.mss as u64;
        let one = (1u64 << FX) as f64;
        let flows = (init.paths.iter())
            .map(|path| {
                let bdp = path.bdp_bytes.max(mss) as f64;
                let base = path.base_rtt.0 as f64;
                Flow {
                    w: (bdp * init_window * one) as u64,
                    w_max: (bdp * max_window * one) as u64,
                    acked: 0,
                    chunk_end: chunk,
                    rtts: [0; SAMPLES],
                    rtt_n: 0,
                    rtt_max: 0,
                    target_msg: (base * (1.0 + msg_slack)) as u64,
                    target_pkt: (base * (1.0 + pkt_slack)) as u64,
                }
            })
            .collect();
        Ok(Mcc {
            flows,
            chunk,
            beta: fixed(beta),
            max_mdf: fixed(max_mdf),
            ai: fixed(ai),
            mss,
            global: 0,
            partial: 0,
            none: 0,
        })
    }

    /// The chunk just acknowledged: judge its delays and set the window.
    fn judge(&mut self, fl: &mut Flow) {
        if fl.rtt_n == 0 {
            return;
        }
        let n = (fl.rtt_n as usize).min(SAMPLES);
        let kept = &mut fl.rtts[..n];
        let (_, median, _) = kept.select_nth_unstable(n / 2);
        let msg = (*median as u64 * 1000).max(1);
        let floor = self.mss << FX;
        if msg > fl.target_msg {
            // 1 − β(msg − target)/msg, at least 1 − max_mdf (2^-20).
            let cut = mul_div(self.beta, msg - fl.target_msg, msg).min(self.max_mdf);
            fl.w = mul_div(fl.w, ONE - cut, ONE).max(floor);
            self.global += 1;
        } else if fl.rtt_max > fl.target_pkt {
            // Keep the window (and so, the queued paths being few, about the rate).
            self.partial += 1;
        } else {
            // ai MSS per window: ai·MSS·chunk/W per chunk (in 2^-FX bytes).
            let step = mul_div(
                mul_div(self.ai, self.mss * self.chunk, ONE),
                1 << (2 * FX),
                fl.w.max(1),
            );
            fl.w = (fl.w + step).min(fl.w_max);
            self.none += 1;
        }
        fl.rtt_n = 0;
        fl.rtt_max = 0;
    }
}

impl CongestionControl for Mcc {
    fn window_bytes(&self, flow: FlowId) -> u64 {
        fitting(self.flows[flow as usize].w >> FX, self.mss, self.mss)
    }

    fn pacing_gap(&self, _flow: FlowId, _wire_bytes: u32) -> Option<Dur> {
        None
    }

    fn on_feedback(&mut self, fb: &Feedback, _timers: &mut CcTimers) {
        let mut fl = self.flows[fb.flow as usize];
        if fb.newly_acked == 0 && !fb.nack() {
            return;
        }
        fl.rtts[fl.rtt_n as usize % SAMPLES] = (fb.rtt.0 / 1000).min(u32::MAX as u64) as u32;
        fl.rtt_n += 1;
        fl.rtt_max = fl.rtt_max.max(fb.rtt.0);
        fl.acked += fb.newly_acked as u64;
        if fl.acked >= fl.chunk_end {
            self.judge(&mut fl);
            fl.chunk_end = (fl.acked / self.chunk + 1) * self.chunk;
        }
        self.flows[fb.flow as usize] = fl;
    }

    fn on_timeout(&mut self, flow: FlowId, _now: Time, _timers: &mut CcTimers) {
        let fl = &mut self.flows[flow as usize];
        fl.w = mul_div(fl.w, ONE - self.max_mdf, ONE).max(self.mss << FX);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("chunks_global_congestion", self.global),
            ("chunks_partial_congestion", self.partial),
            ("chunks_uncongested", self.none),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{refusal, reply, Paths, MSS};

    fn mcc() -> (Mcc, u64) {
        let paths = Paths::new(1, 2, 100.0, 1000);
        let base = paths.paths[0].base_rtt.0;
        (Mcc::new(&paths.init(), &Params::new()).unwrap(), base)
    }

    /// Acknowledges one 64 KB chunk (16 packets) whose replies have the given RTTs.
    fn chunk(cc: &mut Mcc, rtts: &[u64]) {
        let mut t = CcTimers::default();
        for (i, &rtt) in rtts.iter().enumerate() {
            cc.on_feedback(&reply(0, i as u32, 0, rtt, MSS, 0), &mut t);
        }
    }

    #[test]
    fn one_slow_path_keeps_the_window_and_a_slow_pipe_cuts_it() {
        let (mut cc, base) = mcc();
        let w0 = cc.flows[0].w;
        // No congestion: +1 MSS·chunk/W.
        chunk(&mut cc, &[base; 16]);
        let step = ((MSS as u64 * 65_536) << FX) as f64 / w0 as f64 * (1u64 << FX) as f64;
        assert!(((cc.flows[0].w - w0) as f64 / step - 1.0).abs() < 1e-3);
        // Partial: a quarter of the packets wait 3 base RTTs (one queued path of four);
        // the median is 1 base RTT, under the 1.25 target: the window is kept.
        let w1 = cc.flows[0].w;
        let mut rtts = [base; 16];
        for i in [1, 5, 9, 13] {
            rtts[i] = 4 * base;
        }
        chunk(&mut cc, &rtts);
        assert_eq!(cc.flows[0].w, w1);
        assert_eq!(cc.partial, 1);
        // Global: every packet waits 1 base RTT (mean 2 base RTTs, 0.75 over the target):
        // W·(1 − 0.8·0.75/2) = 0.7·W.
        chunk(&mut cc, &[2 * base; 16]);
        let ratio = cc.flows[0].w as f64 / w1 as f64;
        assert!((ratio - 0.7).abs() < 1e-3, "{ratio}");
        // A very slow pipe cuts by at most max_mdf.
        let w2 = cc.flows[0].w;
        chunk(&mut cc, &[20 * base; 16]);
        assert!((cc.flows[0].w as f64 / w2 as f64 - 0.5).abs() < 1e-3);
        assert_eq!((cc.global, cc.partial, cc.none), (2, 1, 1));
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let paths = Paths::new(1, 2, 100.0, 1000);
        for (params, name) in [
            (serde_json::json!({"chunk_bytes": 0}), "`chunk_bytes`"),
            (serde_json::json!({"msg_slack": 2.0}), "`msg_slack`"),
            (serde_json::json!({"beta": 0.0}), "`beta`"),
            (serde_json::json!({"target": 1}), "`target`"),
        ] {
            let err = refusal(Mcc::new(
                &paths.init(),
                &serde_json::from_value(params).unwrap(),
            ));
            assert!(err.contains(name) && err.contains("mcc"), "{err}");
        }
    }
}
