//! The discrete-event engine: hosts with one NIC, switches with per-port output
//! queues, links with propagation delay. Packets move by value (32 bytes) through
//! the link and queue FIFOs of the ports, so a hop touches only the ports it crosses.
//!
//! Life of a data packet: the sending host's NIC pulls it from a flow (round-robin
//! over the host's active flows, ACKs first) -> it serializes onto the link ->
//! each switch picks an output port (one shortest-path next hop, chosen by the LB
//! scheme when there are several) and queues it (drop-tail; the queue discipline marks
//! at dequeue; ACKs in a high-priority queue) -> at the destination the receiver policy
//! answers (an ACK that carries its entropy and ECN mark back) -> at the sender the
//! reply becomes one `transport::Feedback` for loss recovery, LB and CC, in that order.

use crate::bounds;
use crate::cc::{self, CcInit, CongestionControl};
use crate::config::{LimitsConfig, SchemeConfig, SimConfig, DEFAULT_RTO_US};
use crate::error::{config_err, SimError, SimResult};
use crate::events::{Event, EventQueue};
use crate::lb::{self, FlowInfo, Header, LbInit, LoadBalancer, SwitchView};
use crate::loss::{self, LossInit, LossRecovery};
use crate::prefetch::{prefetch, prefetch_addr};
use crate::qdisc::{self, Overflow, QdiscInit, QueueDiscipline};
use crate::receiver::{self, Arrival, ReceiverInit, ReceiverPolicy, Reply};
use crate::report::{FlowResult, LinkResult, Report, StageStats};
use crate::rng::{derive_seed, mix64};
use crate::topology::{PortId, Topology, NO_GROUP};
use crate::traffic::{self, FlowSpec};
use crate::transport::{CcTimers, Feedback, FlowPath, IntSummary};
use crate::units::{Dur, Rate, Time, PS_PER_US};
use std::collections::{BTreeMap, HashMap, VecDeque};
use tracefabric_fabric::failures::FailurePlan;
use tracefabric_fabric::{Fabric, FabricConfig, FrameTiming};

mod driven;
mod event_loop;
mod failures;
mod host;
mod int;
mod packet;
mod pfc;
mod ports;
#[cfg(test)]
pub(crate) mod probe;
mod results;
pub mod reuse;
mod sender;
mod setup;
#[cfg(test)]
mod tests;

use crate::transport::flags::PULL;
use failures::FailureState;
use packet::{Packet, ACK, GAP_LATE, LOST, TRIMMED};

/// Fields are grouped by the events that touch them together, hot first, so an event
/// touches one or two cache lines of its port: a link arrival only the first, a
/// transmission the first two, a queued packet the first and its queue's (the second
/// for an ACK, the third for data). (The engine's speed at scale is mostly cache misses.)
#[repr(C, align(64))]
struct PortRt {
    /// Frames on the wire, oldest first; only the oldest has a pending event. Each
    /// later one carries its arrival time as `Packet::gap` after the one ahead of it,
    /// which is the change in `busy_until` its transmission made (every frame arrives
    /// `arrive_delay` minus the inter-frame `gap` after its port frees up).
    wire: VecDeque<Packet>,
    /// The port is serializing (frame + gap) until then.
    busy_until: Time,
    /// Propagation plus, if the far end is a switch, its forwarding latency.
    arrive_delay: Dur,
    /// Bytes in `q_hi` and `q_lo` (switch ports). On this line, not the queues', since a
    /// packet routed here reads it with `busy_until` before anything else (see `enqueue`).
    queued: u64,
    peer: u32,
    owner_is_host: bool,
    /// A PortFree event is pending (only scheduled when someone waits for the port).
    wake_pending: bool,
    /// A host NIC owes the decision on its next frame at `busy_until` (see `host_catch_up`).
    send_owed: bool,
    /// Its link has failed: what it sends is lost (blackholed).
    down: bool,

    /// (The inter-frame gap, `PacketConfig::gap_bytes` serialized at `rate`, is worked
    /// out per frame: lines 1 and 2 are full.)
    rate: Rate,
    tx_bytes: u64,
    /// Data frame bytes sent (link load for the per-stage balance metrics).
    data_tx_bytes: u64,
    q_hi: VecDeque<Packet>,

    q_lo: VecDeque<Packet>,
    max_queue: u64,
    last_change: Time,
    queue_area: u128,
}

// What a link arrival and a packet routed to the port read must share the first line.
const _: () = assert!(std::mem::offset_of!(PortRt, queued) + 8 <= 64);
const _: () = assert!(std::mem::offset_of!(PortRt, busy_until) + 8 <= 64);
const _: () = assert!(std::mem::size_of::<PortRt>() == 192);

/// Rare per-port counts, kept out of the hot records.
#[derive(Clone, Copy, Default)]
struct PortCounts {
    drops: u64,
    marks: u64,
    trims: u64,
}

#[derive(Default)]
struct HostRt {
    active: Vec<u32>,
    /// Active flows not marked `blocked`: with none (and no pacing) the send loop has
    /// nothing to look at. At the end of an all-to-all most ACKs find every flow of their
    /// host waiting for ACKs.
    unblocked: u32,
    rr: usize,
    wake_at: Option<Time>,
    /// PFC paused its NIC's data priority (as `pfc::PfcState::paused` for its port; kept
    /// here too, beside what the send loop reads anyway).
    paused: bool,
}

/// The per-flow fields read on every packet, kept apart from `FlowRt` in one small
/// array: a host's send loop passes over flows that cannot send (with many flows per
/// host, most wait for ACKs most of the time) reading only this, and a receiver turns
/// a data packet into an ACK, and a sender checks an arriving ACK, reading only this.
/// A send reads and writes only this too: one cache line per data packet, where `FlowRt`
/// would be two with 16 K flows (all-to-all (c) of the benchmarks).
#[derive(Clone, Copy)]
#[repr(align(32))] // two per cache line, never straddling one
struct FlowHot {
    /// Pacing: no packet before then.
    next_allowed: Time,
    /// Data packets sent (`FlowResult::packets_sent`).
    sent: u64,
    /// The sender (an ACK's destination).
    src: u32,
    /// The receiver (a data packet's destination).
    dst: u32,
    /// Its window was full or loss recovery had nothing to send; neither changes
    /// before the flow's next ACK or timeout (see `LossRecovery::next_packet`).
    blocked: bool,
    /// The flow is complete (`FlowRt::finish` is set).
    done: bool,
    /// `FlowRt::timeouts_in_a_row` is not zero (so an ACK need not touch `FlowRt`).
    timed_out: bool,
    /// Its retransmission timer is armed (an `Event::Rto` is pending).
    rto_pending: bool,
    /// Links each way (`transport::Feedback::hops`).
    hops: u8,
}

struct FlowRt {
    spec: FlowSpec,
    finish: Option<Time>,
    slot: usize,
    /// Started by `start_flow` (driven runs): a second start is refused.
    started: bool,
    timeouts_in_a_row: u32,
    /// When the latest timeout counted as a loss event fired: per-packet timers expiring
    /// within one timeout of it belong to the same event.
    counted_timeout: Option<Time>,
    timeouts: u64,
    retransmitted: u64,
    /// When the CC timer the scheme armed fires (an `Event::CcTimer` at another time is stale).
    cc_timer: Option<Time>,
}

pub struct Simulation {
    fabric: FabricConfig,
    limits: LimitsConfig,
    topo: Topology,
    flows: Vec<FlowRt>,
    hot: Vec<FlowHot>,
    ports: Vec<PortRt>,
    port_counts: Vec<PortCounts>,
    hosts: Vec<HostRt>,
    /// Packets in flight or queued (a packet and the ACK it turns into count once).
    live_packets: u64,
    events: EventQueue,
    lb: Box<dyn LoadBalancer>,
    cc: Box<dyn CongestionControl>,
    loss: Box<dyn LossRecovery>,
    receiver: Box<dyn ReceiverPolicy>,
    qdisc: Box<dyn QueueDiscipline>,
    /// `receiver.paces()`: data arrivals may wake the receiver's pull pacer.
    rx_paces: bool,
    /// `cc.counts_sends()`: each data packet sent goes to `cc.on_send`.
    cc_counts_sends: bool,
    /// PFC's ingress accounting and pause state, if the queue discipline is lossless.
    pfc: Option<Box<pfc::PfcState>>,
    /// `qdisc.dequeue_floor()`: departures leaving no more behind skip the discipline.
    qdisc_floor: u64,
    /// Requests the CC scheme made during its last call (applied by `apply_cc_timers`).
    cc_timers: CcTimers,
    /// The CC scheme wants INT records (`CongestionControl::wants_int`): switch ports
    /// stamp data packets into `int` (see `int`).
    int_on: bool,
    int: int::IntTable,
    /// Host NICs decide their next frame lazily (see `host_catch_up`).
    lazy_hosts: bool,
    /// The LB scheme reads queue lengths (switch ports must be caught up for it).
    lb_reads_queues: bool,
    /// Prefetch the state of coming events (see `prefetch_ahead`): only when the
    /// network's state outgrows a core's L2.
    prefetch: bool,
    salts: Vec<u64>,
    now: Time,
    done: usize,
    draining: bool,
    rto: Dur,
    /// Each flow's start as declared, before any delay the LB scheme adds (the bound's).
    requested_starts: Vec<Time>,
    /// Earliest requested flow start: CCTs count from here.
    requested_start: Time,
    error: Option<SimError>,
    data_hops: u64,
    bytes_sent: u64,
    bytes_delivered: u64,
    bytes_dropped: u64,
    pkts_dropped: u64,
    acks_dropped: u64,
    pkts_trimmed: u64,
    /// Data frames lost on links (`link.loss_rate`; counted among the drops too).
    pkts_lost: u64,
    bytes_trimmed: u64,
    /// A frame is lost on its link with probability `link.loss_rate`: below this draw
    /// (of 2^64), decided by a hash of the port and its byte count when it is sent.
    loss_threshold: u64,
    loss_seed: u64,
    /// Driven by a system layer (`start_flow` / `next_completion`): finished flows are
    /// handed out here instead of ending the run.
    driven: bool,
    completions: VecDeque<(Time, u32)>,
    /// Arrival times of frames whose gap did not fit (`GAP_LATE`), per port, in order.
    late_arrivals: HashMap<u32, VecDeque<Time>>,
    /// Scheduled changes of the fabric (`Event::Fabric`), and what they did.
    failures: FailureState,
    /// Each flow's connection key, the 5-tuple ECMP hashes (`set_connection`); empty:
    /// every flow is its own connection, keyed by its index.
    tuples: Vec<u32>,
    /// Each port's `tx_bytes` when the engine was last quiescent at a flow start
    /// (`draw_bytes`).
    draw_origin: Vec<u64>,
    /// Flows started so far (driven runs), and when the last packet left the network.
    n_started: usize,
    idle_since: Time,
    /// Events of replayed periods, never simulated (`reuse`), and their scheme counters.
    events_skipped: u64,
    replayed_counters: BTreeMap<String, u64>,
}

/// Networks with fewer ports than this run without the look-ahead (`prefetch_ahead`;
/// the single prefetches in `on_link_arrive` and `dequeue_at` stay on). At k=8 (768
/// ports) the ports' records and FIFOs stay in L2, so its hints only cost instructions
/// (14% of all at k=8; measured slower on all-to-all there); at k=16 (6,144 ports) they
/// save 30% of the CPU time (permutation (d) of the benchmarks).
const PREFETCH_MIN_PORTS: usize = 2048;

/// Why the event loop (`Simulation::process`) stopped.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// No event left before its time limit (or none at all).
    Waiting,
    /// A flow completed in a driven run.
    Completion,
    /// Every flow is complete (not driven).
    AllComplete,
}

/// Called now and then with (flows finished, flows total); return false to cancel.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize) -> bool;
