//! Congestion control: one trait, one file per scheme, a registry by name.
//! A scheme limits each flow by a window of bytes in flight and/or a pacing gap.

mod ideal;

use crate::config::Params;
use crate::error::{SimError, SimResult};
use crate::lb::FlowId;
use crate::units::{Dur, Rate, Time};

pub struct CcInit {
    pub n_flows: usize,
    pub line_rate: Rate,
}

pub trait CongestionControl: Send {
    /// Bytes the flow may have in flight (u64::MAX: no window). Changes only in
    /// `on_ack` and `on_timeout` (the engine does not ask a flow with a full window
    /// again before one of them).
    fn window_bytes(&self, flow: FlowId) -> u64;

    /// Minimum time between the starts of two packets of `wire_bytes`
    /// (None: the NIC's line rate is the only limit).
    fn pacing_gap(&self, flow: FlowId, wire_bytes: u32) -> Option<Dur>;

    /// Whether `pacing_gap` can ever return a gap. Host NICs then keep a wake-up event
    /// per frame (a paced flow becomes sendable with time alone); without pacing they
    /// decide their next frame lazily (see `Simulation::host_catch_up`).
    fn paces(&self) -> bool {
        true
    }

    /// True if no flow with a packet due is ever held back (no window, no pacing): each
    /// host NIC then serves its flows in strict round robin, which the lower bound uses
    /// (`bounds::round_robin_ends`).
    fn never_holds_back(&self) -> bool {
        false
    }

    fn on_ack(&mut self, _flow: FlowId, _acked_bytes: u32, _ecn: bool, _rtt: Dur, _now: Time) {}

    fn on_timeout(&mut self, _flow: FlowId, _now: Time) {}
}

type Factory = fn(&CcInit, &Params) -> SimResult<Box<dyn CongestionControl>>;

const REGISTRY: &[(&str, Factory)] = &[("ideal", ideal::build)];

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|(n, _)| *n).collect()
}

pub fn build(name: &str, init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    match REGISTRY.iter().find(|(n, _)| *n == name) {
        Some((_, make)) => make(init, params),
        None => Err(SimError::UnknownScheme {
            family: "cc",
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}
