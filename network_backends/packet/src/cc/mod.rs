//! Congestion control: one trait, one file per scheme, a registry by name.
//! A scheme limits each flow by a window of bytes in flight and/or a pacing gap, and
//! learns from feedback, timeouts and its own timers (see `transport`).

mod dctcp;
mod ideal;

use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::transport::{CcTimers, Feedback, FlowPath};
use crate::units::{Dur, Rate, Time};

/// Everything a scheme may read when it is built.
pub struct CcInit<'a> {
    /// Each flow's unloaded path (hops, base RTT, BDP), indexed by flow id.
    pub paths: &'a [FlowPath],
    pub line_rate: Rate,
    /// Payload bytes of a full data packet (the MSS).
    pub mss: u32,
    /// Bytes a full data packet takes on the wire (payload and header).
    pub packet_wire_bytes: u32,
}

/// A flow's sending limit: a window of bytes in flight and/or a pacing gap.
///
/// The engine asks `window_bytes` before each send; a flow whose window is full is not
/// asked again before its next feedback, timeout or timer, the only calls in which a
/// scheme may change it. The same holds for `pacing_gap`'s rate.
pub trait CongestionControl: Send {
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

    /// The flow's retransmission timer fired and declared packets lost.
    fn on_timeout(&mut self, _flow: FlowId, _now: Time, _timers: &mut CcTimers) {}

    /// A timer the scheme armed for `flow` is due.
    fn on_timer(&mut self, _flow: FlowId, _now: Time, _timers: &mut CcTimers) {}

    /// Named counts for reports (e.g. window cuts).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&CcInit, &Params) -> SimResult<Box<dyn CongestionControl>>;

const REGISTRY: &[(&str, Factory)] = &[("ideal", ideal::build), ("dctcp", dctcp::build)];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(name: &str, init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    crate::registry::find("cc", REGISTRY, name)?(init, params)
}
