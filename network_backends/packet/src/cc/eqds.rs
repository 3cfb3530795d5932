//! `eqds`: EQDS's sender (CC-CATALOGUE §8): receiver-driven. A flow first speculates one
//! window (`window_bdp` bandwidth-delay products of its path, default 1, as many whole
//! packets: what fills the pipe on any fabric, where UET's `eqds.cpp` fixes 64 packets),
//! then sends only on credit: each PULL from the receiver's pacer
//! (`receiver::eqds`, which this scheme installs) allows one more packet. A PULL's `seq`
//! is the flow's pull count, so credit = the largest seen (a lost pull is made up by the
//! next). Loss recovery decides which packet a credit sends (a NACKed one first).
//!
//! Credit the receiver cannot see: a packet lost without a trace holds a credit the
//! receiver thinks is still out, so each retransmission timeout allows one packet
//! without a pull; and a flow that has used all its credit and hears no pull for
//! `probe_us` (a lost last pull) sends one more (each such packet counts against the
//! credit the receiver thinks is out, so it pulls that much less).
//!
//! Deviation: EQDS drops the unused part of its speculative window at the first reply;
//! here the receiver assumes the whole window was sent, so the sender keeps it until used
//! (the same where a sender's NIC is not shared, as in an incast).

use super::{CcInit, CongestionControl};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::{CcTimers, Feedback};
use crate::units::{Dur, Time};

#[derive(Clone, Copy, Default)]
struct Flow {
    unsolicited: u32,
    sent: u64,
    /// Largest pull count heard.
    pulled: u64,
    /// Packets allowed by timeouts and probes.
    free: u64,
    /// `pulled` when the flow ran out of credit (a probe is due if it has not moved).
    pulled_at_empty: u64,
    /// When it sent the last packet of its speculative window (None: not yet).
    window_sent: Option<Time>,
}

impl Flow {
    fn allowance(&self) -> u64 {
        self.unsolicited as u64 + self.pulled + self.free
    }
}

pub struct Eqds {
    flows: Vec<Flow>,
    probe: Dur,
    probes: u64,
    credit_waits: u64,
    trims: u64,
    /// Trimmed packets sent after their flow's speculative window (one BDP: its first
    /// RTT): none expected, the receiver paces everything after it.
    late_trims: u64,
}

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    let mut p = ParamReader::new("cc", "eqds", params);
    // Above 0: a flow that speculates nothing is never pulled (its receiver learns of it
    // from its first packet).
    let window_bdp = p.f64_in_open_closed("window_bdp", 1.0, 0.0, 1e6)?;
    let probe_us = p.f64_in_open_closed("probe_us", 250.0, 0.0, 1e6)?;
    p.finish()?;
    let mss = init.mss as f64;
    let flows = (init.paths.iter().enumerate())
        .map(|(i, path)| Flow {
            // A window, or the whole flow if that is less.
            unsolicited: ((path.bdp_bytes as f64 * window_bdp / mss).ceil() as u64)
                .min(
                    init.flow_bytes
                        .get(i)
                        .map_or(u64::MAX, |&b| b.div_ceil(init.mss as u64).max(1)),
                )
                .min(u32::MAX as u64) as u32,
            ..Flow::default()
        })
        .collect();
    Ok(Box::new(Eqds {
        flows,
        probe: Dur(super::us(probe_us)),
        probes: 0,
        credit_waits: 0,
        trims: 0,
        late_trims: 0,
    }))
}

impl CongestionControl for Eqds {
    /// Unlimited while the flow has credit, else nothing (0 blocks every send).
    fn window_bytes(&self, flow: FlowId) -> u64 {
        let f = &self.flows[flow as usize];
        if f.sent < f.allowance() {
            u64::MAX
        } else {
            0
        }
    }

    fn pacing_gap(&self, _flow: FlowId, _wire_bytes: u32) -> Option<Dur> {
        None
    }

    fn receiver(&self) -> Option<&'static str> {
        Some("eqds")
    }

    fn unsolicited_packets(&self, flow: FlowId) -> u32 {
        self.flows[flow as usize].unsolicited
    }

    fn counts_sends(&self) -> bool {
        true
    }

    fn on_send(&mut self, flow: FlowId, now: Time, timers: &mut CcTimers) {
        let f = &mut self.flows[flow as usize];
        f.sent += 1;
        if f.sent == f.unsolicited as u64 {
            f.window_sent = Some(now);
        }
        if f.sent >= f.allowance() {
            f.pulled_at_empty = f.pulled;
            self.credit_waits += 1;
            timers.arm(flow, now + self.probe);
        }
    }

    fn on_feedback(&mut self, fb: &Feedback, _timers: &mut CcTimers) {
        let f = &mut self.flows[fb.flow as usize];
        if fb.pull() {
            f.pulled = f.pulled.max(fb.seq as u64);
        } else if fb.trimmed() {
            self.trims += 1;
            let sent = fb.now.0 - fb.rtt.0;
            if f.window_sent.is_some_and(|t| sent > t.0) {
                self.late_trims += 1;
            }
        }
    }

    fn on_timeout(&mut self, flow: FlowId, _now: Time, _timers: &mut CcTimers) {
        self.flows[flow as usize].free += 1;
    }

    fn on_timer(&mut self, flow: FlowId, _now: Time, _timers: &mut CcTimers) {
        let f = &mut self.flows[flow as usize];
        if f.pulled == f.pulled_at_empty && f.sent >= f.allowance() {
            f.free += 1;
            self.probes += 1;
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("probes", self.probes),
            ("credit_waits", self.credit_waits),
            ("trims", self.trims),
            ("late_trims", self.late_trims),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{reply, Paths, MSS};
    use super::*;
    use crate::transport::flags;

    #[test]
    fn speculates_a_window_then_sends_one_packet_per_pull() {
        // 2 hops at 100 Gbps, 1 us links: a BDP of 58,444 B, 15 packets.
        let paths = Paths::new(1, 2, 100.0, 1000);
        let bdp = paths.paths[0].bdp_bytes;
        let mut cc = build(&paths.init(), &Params::new()).unwrap();
        let window = bdp.div_ceil(MSS as u64);
        assert_eq!((bdp, window), (58_444, 15));
        assert_eq!(cc.unsolicited_packets(0) as u64, window);
        let mut timers = CcTimers::default();
        for i in 0..window {
            assert_eq!(cc.window_bytes(0), u64::MAX, "packet {i}");
            cc.on_send(0, Time(i), &mut timers);
        }
        assert_eq!(cc.window_bytes(0), 0, "out of credit");
        // Pulls 1 and 3 arrive (2 was lost): credit for 3 packets.
        cc.on_feedback(&reply(0, 1, 5, 0, 0, flags::PULL), &mut timers);
        cc.on_feedback(&reply(0, 3, 6, 0, 0, flags::PULL), &mut timers);
        for _ in 0..3 {
            assert_eq!(cc.window_bytes(0), u64::MAX);
            cc.on_send(0, Time(7), &mut timers);
        }
        assert_eq!(cc.window_bytes(0), 0);
        // A timeout allows one packet without a pull.
        cc.on_timeout(0, Time(8), &mut timers);
        assert_eq!(cc.window_bytes(0), u64::MAX);
        cc.on_send(0, Time(9), &mut timers);
        // No pull for probe_us: one more (a probe); a pull since cancels it.
        cc.on_timer(0, Time(9 + 250_000_000), &mut timers);
        assert_eq!(cc.window_bytes(0), u64::MAX);
        assert_eq!(cc.counters()[0], ("probes", 1));
    }
}
