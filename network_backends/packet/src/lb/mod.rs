//! Load balancing: one trait, one file per scheme, a registry by name.
//!
//! A scheme acts at two places and may use either or both:
//! - at the sending host, it picks the *entropy* (flow label) of each data packet
//!   and learns from ACKs (ECN echo, entropy) and timeouts;
//! - at each switch with more than one shortest-path next hop, it picks the output
//!   port. The default is ECMP: a hash of the 5-tuple and the entropy.
//! The receiving host may give an ACK its own entropy (source-routed schemes send
//! ACKs back on a path of their choosing); the data packet's entropy is echoed to
//! the sender either way. Schemes keep their own per-flow and per-switch state.
//! Adding a scheme means adding a file here and a line to `REGISTRY`; the engine
//! never names a scheme.

mod drill;
mod ecmp;
mod ethereal;
mod host_dr;
mod host_spray;
mod jsq;
mod letflow;
mod ofan;
mod paralet;
mod plb;
mod reps;
mod rsq;
mod simple_rr;
mod source_route;
mod subflow;
mod switch_ar;
mod switch_rr;

use crate::config::Params;
use crate::error::SimResult;
use crate::rng::mix64;
use crate::topology::{GroupId, NodeId, PortId, Topology};
use crate::transport::Feedback;
use crate::units::{Dur, Time};

pub type FlowId = u32;

/// What a scheme may know about a flow when the run starts.
#[derive(Clone, Copy, Debug)]
pub struct FlowInfo {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

/// The header fields a switch sees. The flow id stands for the 5-tuple.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub flow: FlowId,
    /// The connection the flow runs on (its 5-tuple): the flow id, unless a system layer
    /// runs flows on long-lived connections (`Simulation::set_connection`).
    pub tuple: u32,
    /// Destination host (for an ACK, the data sender).
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
    /// Bytes waiting in an output port's queues (read through `queued_bytes`).
    pub backlog: &'a dyn Fn(PortId) -> u64,
    pub buffer_bytes: u64,
    /// Per-switch hash salt, so switches hash independently (no polarization).
    pub salt: u64,
}

impl SwitchView<'_> {
    /// Bytes waiting in output port `port`'s queues. (The engine keeps each port's count
    /// in its port record, on the line a packet routed there reads first.)
    #[inline]
    pub fn queued_bytes(&self, port: PortId) -> u64 {
        (self.backlog)(port)
    }
}

/// Everything a scheme may read when it is built.
pub struct LbInit<'a> {
    pub topo: &'a Topology,
    pub flows: &'a [FlowInfo],
    pub seed: u64,
    /// Bandwidth-delay product of the longest path, in data packets.
    pub bdp_packets: u32,
    /// The retransmission timeout (`limits.rto_us`, or the engine's default).
    pub rto: Dur,
}

pub trait LoadBalancer: Send {
    /// A digest of the state this scheme carries from one flow to the next, if a flow's
    /// behaviour depends on nothing else (not on its index, not on a shared random
    /// stream): exact reuse of busy periods (`crate::reuse`) replays a period only when
    /// the digests are equal. None (the default): never replay.
    fn reuse_digest(&self) -> Option<u64> {
        None
    }

    /// Entropy for the next data packet of `flow` (its sequence number is `seq`).
    fn entropy(&mut self, flow: FlowId, seq: u32, now: Time) -> u32;

    /// Entropy of the ACK the receiver returns for a data packet that arrived with
    /// `data_entropy`. By default the ACK reuses it, so it hashes like its data packet.
    fn ack_entropy(&mut self, _flow: FlowId, data_entropy: u32, _now: Time) -> u32 {
        data_entropy
    }

    /// A reply reached the sender (after loss recovery saw it; see `transport`): it
    /// echoes the entropy its data packet used (`fb.echo`) and its ECN mark.
    fn on_feedback(&mut self, _fb: &Feedback) {}

    /// The flow's retransmission timer fired.
    fn on_timeout(&mut self, _flow: FlowId, _now: Time) {}

    /// Switches' next-hop groups changed (a link failed or came back): group ids may now
    /// name other port sets, and a port chosen before may no longer be a candidate, so
    /// state keyed by group or holding ports must be rebuilt for `topo`.
    fn on_routes_changed(&mut self, _topo: &Topology) {}

    /// Delay added to the flow's start time (asked once per flow, before the run).
    fn start_delay(&mut self, _flow: FlowId) -> Dur {
        Dur(0)
    }

    /// Output port among `view.candidates` (called only when there are two or more).
    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        view.candidates[ecmp_index(view.salt, hdr, view.candidates.len())]
    }

    /// True if `choose_port` reads `view.queued_bytes()` (the engine then brings the
    /// candidates' queues up to date first; see `Simulation::catch_up`).
    fn reads_queues(&self) -> bool {
        false
    }

    /// Named counts of the state the scheme used, for reports: `queue_pairs` (host
    /// connections, as the Ethereal paper counts them; the engine reports one per flow
    /// when a scheme does not say), `pointers` (round-robin pointers, as the OFAN paper
    /// counts them), and scheme-specific ones.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Each node's hash salt (`SwitchView::salt`), so switches hash independently.
pub fn switch_salts(seed: u64, n_nodes: usize) -> Vec<u64> {
    (0..n_nodes as u64)
        .map(|n| crate::rng::derive_seed(seed, "ecmp.salt", n))
        .collect()
}

/// A scheme's counters for the report; `queue_pairs` is one per flow where it does not say.
pub fn report_counters(lb: &dyn LoadBalancer, n_flows: usize) -> Vec<(String, u64)> {
    let mut c: Vec<(String, u64)> = (lb.counters().into_iter())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if !c.iter().any(|(k, _)| k == "queue_pairs") {
        c.insert(0, ("queue_pairs".to_string(), n_flows as u64));
    }
    c
}

/// ECMP: hash of (5-tuple = connection and direction, entropy), salted per switch.
#[inline]
pub fn ecmp_index(salt: u64, hdr: &Header, n: usize) -> usize {
    let key = mix64((hdr.tuple as u64) << 33 | (hdr.is_ack as u64) << 32 | hdr.entropy as u64);
    (mix64(key ^ salt) % n as u64) as usize
}

/// Uniform choice among the ports whose key is smallest (one pass, reservoir sampling
/// over the ties): JSQ uses queued bytes, SWITCH PKT AR its queue bins.
pub fn argmin_random_tie(
    ports: &[PortId],
    key: impl Fn(PortId) -> u64,
    rng: &mut crate::rng::Rng,
) -> PortId {
    use rand::Rng as _;
    let (mut best, mut best_key, mut ties) = (ports[0], key(ports[0]), 1u32);
    for &p in &ports[1..] {
        let k = key(p);
        if k < best_key {
            (best, best_key, ties) = (p, k, 1);
        } else if k == best_key {
            ties += 1;
            if rng.gen_range(0..ties) == 0 {
                best = p;
            }
        }
    }
    best
}

/// A round-robin pointer over `n` ports: a random start and a random traversal
/// order (OFAN §7), advanced by one per packet.
pub struct Pointer {
    order: Vec<u16>,
    next: u16,
}

impl Pointer {
    pub fn random(n: usize, rng: &mut crate::rng::Rng) -> Pointer {
        use rand::seq::SliceRandom;
        use rand::Rng as _;
        let mut order: Vec<u16> = (0..n as u16).collect();
        order.shuffle(rng);
        Pointer {
            next: rng.gen_range(0..n as u16),
            order,
        }
    }

    /// The index to use now; `true` in the second value when the pointer wrapped around.
    pub fn advance(&mut self) -> (usize, bool) {
        let i = self.order[self.next as usize] as usize;
        self.next += 1;
        let wrapped = self.next as usize == self.order.len();
        if wrapped {
            self.next = 0;
        }
        (i, wrapped)
    }

    pub fn reshuffle(&mut self, rng: &mut crate::rng::Rng) {
        use rand::seq::SliceRandom;
        self.order.shuffle(rng);
    }
}

type Factory = fn(&LbInit, &Params) -> SimResult<Box<dyn LoadBalancer>>;

/// Every LB scheme, by the name users select it with.
const REGISTRY: &[(&str, Factory)] = &[
    ("ecmp", ecmp::build),
    ("host_spray", host_spray::build),
    ("switch_rr", switch_rr::build),
    ("reps", reps::build),
    ("switch_ar", switch_ar::build),
    ("subflow", subflow::build),
    ("plb", plb::build),
    ("simple_rr", simple_rr::build),
    ("jsq", jsq::build),
    ("rsq", rsq::build),
    ("host_dr", host_dr::build),
    ("ofan", ofan::build),
    ("ethereal", ethereal::build),
    ("paralet", paralet::build),
    ("letflow", letflow::build),
    ("drill", drill::build),
];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(name: &str, init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    crate::registry::find("lb", REGISTRY, name)?(init, params)
}
