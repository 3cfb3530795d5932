//! Congestion control: one trait, one file per scheme, a registry by name.
//! A scheme limits each flow by a window of bytes in flight and/or a pacing gap, and
//! learns from feedback, timeouts and its own timers (see `transport`).

mod dcqcn;
mod dctcp;
mod eqds;
mod hpcc;
mod ideal;
mod mcc;
mod mswift;
mod nscc;
mod reorder;
mod smartt;
mod swift;
#[cfg(test)]
mod tests;
mod timely;

use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::transport::{CcTimers, Feedback, FlowPath, IntHop};
use crate::units::{Dur, Rate, Time};

/// Everything a scheme may read when it is built.
pub struct CcInit<'a> {
    /// Each flow's unloaded path (hops, base RTT, BDP), indexed by flow id.
    pub paths: &'a [FlowPath],
    /// Each flow's size in bytes, indexed by flow id (empty where not known: unit tests).
    pub flow_bytes: &'a [u64],
    pub line_rate: Rate,
    /// Payload bytes of a full data packet (the MSS).
    pub mss: u32,
    /// Bytes a full data packet takes on the wire (payload and header).
    pub packet_wire_bytes: u32,
    /// Whether the loss recovery has switches trim (NACKs) rather than drop.
    pub trimming: bool,
}

/// A flow's sending limit: a window of bytes in flight and/or a pacing gap.
///
/// The engine asks `window_bytes` before each send; a flow whose window is full is not
/// asked again before its next feedback, timeout or timer, the only calls in which a
/// scheme may change it. The same holds for `pacing_gap`'s rate.
pub trait CongestionControl: Send {
    /// A digest of the state this scheme carries from one flow to the next, if a flow's
    /// behaviour depends on nothing else (not on its index, not on a shared random
    /// stream): exact reuse of busy periods (`crate::reuse`) replays a period only when
    /// the digests are equal. None (the default): never replay.
    fn reuse_digest(&self) -> Option<u64> {
        None
    }

    /// Bytes the flow may have in flight (u64::MAX: no window).
    fn window_bytes(&self, flow: FlowId) -> u64;

    /// Minimum time between the starts of two packets of `wire_bytes`
    /// (None: the NIC's line rate is the only limit).
    fn pacing_gap(&self, flow: FlowId, wire_bytes: u32) -> Option<Dur>;

    /// True if no flow with a packet due is ever held back (no window, no pacing): each
    /// host NIC then serves its flows in strict round robin, which the lower bound uses
    /// (`bounds::round_robin_ends`).
    fn never_holds_back(&self) -> bool {
        false
    }

    /// A reply reached the sender (after loss recovery and LB saw it; see `transport`).
    fn on_feedback(&mut self, _fb: &Feedback, _timers: &mut CcTimers) {}

    /// True if switches should stamp INT records into this scheme's data packets; the
    /// engine then calls `on_feedback_int` instead of `on_feedback`. Off, INT costs the
    /// engine one untaken branch per switch departure.
    fn wants_int(&self) -> bool {
        false
    }

    /// A reply with the INT records its data packet collected, first hop first (at most
    /// `transport::INT_MAX_HOPS`).
    fn on_feedback_int(&mut self, fb: &Feedback, _hops: &[IntHop], timers: &mut CcTimers) {
        self.on_feedback(fb, timers);
    }

    /// The congestion notification point the scheme needs at receivers (DCQCN's NP):
    /// Some(gap) makes every receiver set the CNP flag on its reply to a CE-marked data
    /// packet, at most once per flow per `gap` (zero: on every marked packet).
    fn cnp_interval(&self) -> Option<Dur> {
        None
    }

    /// The flow's retransmission timer fired and declared packets lost. Under per-packet
    /// timers the expiries within one timeout of the last reported one are the same loss
    /// event and come here only if `reacts_to_every_expiry`.
    fn on_timeout(&mut self, _flow: FlowId, _now: Time, _timers: &mut CcTimers) {}

    /// Whether every per-packet timer expiry is a reaction of its own, as every trim is.
    fn reacts_to_every_expiry(&self) -> bool {
        false
    }

    /// A timer the scheme armed for `flow` is due.
    fn on_timer(&mut self, _flow: FlowId, _now: Time, _timers: &mut CcTimers) {}

    /// The receiver policy the scheme needs on top of the loss-recovery scheme's (a pull
    /// pacer, `receiver::names`); None: the loss-recovery scheme's alone.
    fn receiver(&self) -> Option<&'static str> {
        None
    }

    /// Packets `flow` may send before it needs a receiver's credit (receiver-driven
    /// schemes; the pacer counts on it).
    fn unsolicited_packets(&self, _flow: FlowId) -> u32 {
        0
    }

    /// Whether the engine should call `on_send` (cached once: off, sends cost nothing).
    fn counts_sends(&self) -> bool {
        false
    }

    /// `flow` sent a data packet (only if `counts_sends`).
    fn on_send(&mut self, _flow: FlowId, _now: Time, _timers: &mut CcTimers) {}

    /// Named counts for reports (e.g. window cuts).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&CcInit, &Params) -> SimResult<Box<dyn CongestionControl>>;

const REGISTRY: &[(&str, Factory)] = &[
    ("ideal", ideal::build),
    ("dctcp", dctcp::build),
    ("swift", swift::build),
    ("mswift", mswift::build),
    ("smartt", smartt::build),
    ("nscc", nscc::build),
    ("timely", timely::build),
    ("dcqcn", dcqcn::build),
    ("hpcc", hpcc::build),
    ("mcc", mcc::build),
    ("eqds", eqds::build),
];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(name: &str, init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    crate::registry::find("cc", REGISTRY, name)?(init, params)
}

/// Fixed point of the window-based schemes: a window is kept in 2^-FX bytes, so the
/// per-ACK steps of a few bytes (an additive increase spread over a window) add up
/// exactly as integers.
pub(super) const FX: u32 = 16;

/// Constants in (0, a few hundred] kept in 2^-20 (as DCTCP's g and alpha).
pub(super) const ONE: u64 = 1 << 20;

/// `x` as a 2^-20 fixed-point constant.
pub(super) fn fixed(x: f64) -> u64 {
    (x * ONE as f64).round() as u64
}

/// a * b / c without overflow (saturating at u64::MAX; c > 0).
#[inline]
pub(super) fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    (a as u128 * b as u128 / c as u128).min(u64::MAX as u128) as u64
}

/// The `window_bytes` of a window of `cwnd` bytes (at least `floor`): the engine sends
/// while bytes in flight are below it, so this lets a packet go only if a whole one fits
/// (in flight + MSS <= cwnd), as the reference simulators do.
#[inline]
pub(super) fn fitting(cwnd: u64, floor: u64, mss: u64) -> u64 {
    cwnd.max(floor).saturating_sub(mss) + 1
}

/// A time parameter given in microseconds, as picoseconds.
pub(super) fn us(x: f64) -> u64 {
    (x * 1e6).round() as u64
}

/// Test support: a fabric's flow paths and feedback, as the engine would give them.
#[cfg(test)]
pub(crate) mod testkit {
    use super::CcInit;
    use crate::lb::FlowId;
    use crate::transport::{Feedback, FlowPath};
    use crate::units::{Dur, Rate, Time};

    pub const MSS: u32 = 4096;
    pub const WIRE: u32 = 4096 + 62;

    /// `n` flows over `hops` links each way at `gbps`, links of `latency_ns`: base RTT and
    /// BDP as the engine computes them (store-and-forward, 64-B ACKs).
    pub struct Paths {
        pub paths: Vec<FlowPath>,
        pub rate: Rate,
    }

    impl Paths {
        pub fn new(n: usize, hops: u32, gbps: f64, latency_ns: u64) -> Paths {
            let rate = Rate::from_gbps(gbps);
            let link = latency_ns * 1000;
            let one_way = |bytes: u64| hops as u64 * (rate.serialization(bytes).0 + link);
            let base_rtt = Dur(one_way(WIRE as u64) + one_way(64));
            let bdp_bytes = (rate.bps() as u128 * base_rtt.0 as u128 / 8_000_000_000_000) as u64;
            let path = FlowPath {
                hops,
                base_rtt,
                bdp_bytes,
            };
            Paths {
                paths: vec![path; n],
                rate,
            }
        }

        pub fn init(&self) -> CcInit<'_> {
            CcInit {
                paths: &self.paths,
                flow_bytes: &[],
                line_rate: self.rate,
                mss: MSS,
                packet_wire_bytes: WIRE,
                trimming: false,
            }
        }
    }

    /// Feedback for `flow`'s packet `seq` at `now_ps`, `rtt_ps` after it was sent,
    /// acknowledging `acked` new bytes, with reply `flags`.
    pub fn reply(
        flow: FlowId,
        seq: u32,
        now_ps: u64,
        rtt_ps: u64,
        acked: u32,
        flags: u8,
    ) -> Feedback {
        let mut fb = crate::loss::feedback(flow, seq, Time(now_ps));
        (fb.rtt, fb.newly_acked, fb.flags) = (Dur(rtt_ps), acked, flags);
        fb
    }

    /// The error text of a scheme built with bad `params`.
    pub fn refusal<T>(built: crate::error::SimResult<T>) -> String {
        match built {
            Ok(_) => panic!("the parameters should be refused"),
            Err(e) => e.to_string(),
        }
    }
}
