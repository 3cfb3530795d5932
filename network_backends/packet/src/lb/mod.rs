//! Load balancing: one trait, one file per scheme, a registry by name.
//!
//! A scheme acts at two places and may use either or both:
//! - at the sending host, it picks the *entropy* (flow label) of each data packet
//!   and learns from ACKs (ECN echo, entropy) and timeouts;
//! - at each switch with more than one shortest-path next hop, it picks the output
//!   port. The default is ECMP: a hash of the 5-tuple and the entropy.
//! Schemes keep their own per-flow and per-switch state in flat vectors.

mod ecmp;
mod host_spray;
mod reps;
mod switch_ar;
mod switch_rr;

use crate::config::Params;
use crate::error::{SimError, SimResult};
use crate::rng::mix64;
use crate::topology::{GroupId, NodeId, PortId, Topology};
use crate::units::Time;

pub type FlowId = u32;

/// What a scheme may know about a flow when the run starts.
#[derive(Clone, Copy, Debug)]
pub struct FlowInfo {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

/// The header fields a switch sees.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub flow: FlowId,
    pub src: u32,
    pub dst: u32,
    pub entropy: u32,
    pub is_ack: bool,
    pub wire_bytes: u32,
}

/// A switch's view when it must choose among equal-cost next hops.
pub struct SwitchView<'a> {
    pub now: Time,
    pub node: NodeId,
    /// Identifies this candidate set; state keyed by it is per (switch, next-hop set).
    pub group: GroupId,
    pub candidates: &'a [PortId],
    /// Bytes waiting in every output port's queue, indexed by port id.
    pub queued_bytes: &'a [u64],
    pub buffer_bytes: u64,
    /// Per-switch hash salt, so switches hash independently (no polarization).
    pub salt: u64,
}

/// Everything a scheme may read when it is built.
pub struct LbInit<'a> {
    pub topo: &'a Topology,
    pub flows: &'a [FlowInfo],
    pub seed: u64,
    /// Bandwidth-delay product of the longest path, in data packets.
    pub bdp_packets: u32,
}

pub trait LoadBalancer: Send {
    /// Entropy for the next data packet of `flow` (its sequence number is `seq`).
    fn entropy(&mut self, flow: FlowId, seq: u32, now: Time) -> u32;

    /// An ACK came back carrying the entropy its data packet used and the ECN echo.
    fn on_ack(&mut self, _flow: FlowId, _entropy: u32, _ecn: bool, _now: Time) {}

    /// The flow's retransmission timer fired.
    fn on_timeout(&mut self, _flow: FlowId, _now: Time) {}

    /// Output port among `view.candidates` (called only when there are two or more).
    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        view.candidates[ecmp_index(view.salt, hdr, view.candidates.len())]
    }

    /// Pieces of LB state this run used (per-flow labels, pointers, counters), for reports.
    fn state_entries(&self) -> u64 {
        0
    }
}

/// ECMP: hash of (src, dst, src port = flow id, entropy), salted per switch.
#[inline]
pub fn ecmp_index(salt: u64, hdr: &Header, n: usize) -> usize {
    let (a, b) = if hdr.is_ack { (hdr.dst, hdr.src) } else { (hdr.src, hdr.dst) };
    let key = ((a as u64) << 32 | b as u64) ^ mix64((hdr.flow as u64) << 32 | hdr.entropy as u64);
    (mix64(key ^ salt) % n as u64) as usize
}

type Factory = fn(&LbInit, &Params) -> SimResult<Box<dyn LoadBalancer>>;

/// Every LB scheme, by the name users select it with.
const REGISTRY: &[(&str, Factory)] = &[
    ("ecmp", ecmp::build),
    ("host_spray", host_spray::build),
    ("switch_rr", switch_rr::build),
    ("reps", reps::build),
    ("switch_ar", switch_ar::build),
];

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|(n, _)| *n).collect()
}

pub fn build(name: &str, init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    match REGISTRY.iter().find(|(n, _)| *n == name) {
        Some((_, make)) => make(init, params),
        None => Err(SimError::UnknownScheme { family: "lb", name: name.to_string(), known: names().join(", ") }),
    }
}
