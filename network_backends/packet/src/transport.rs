//! The transport seam: what the engine tells the scheme families about a flow.
//!
//! Every reply that reaches a sender (an ACK, or a NACK or CNP a receiver policy returns)
//! becomes one [`Feedback`], handed to the families in this fixed order:
//! 1. loss recovery (`LossRecovery::on_feedback`) decides what it acknowledges and fills
//!    in `newly_acked` and `complete` (the engine then sets `in_flight`);
//! 2. load balancing (`LoadBalancer::on_feedback`) learns from the path signals;
//! 3. congestion control (`CongestionControl::on_feedback`) sees all of it.
//!
//! A retransmission timeout goes to the three in the same order. Congestion control may
//! also arm one timer per flow ([`CcTimers`]), which fires as its own event.

use crate::lb::FlowId;
use crate::units::{Dur, Time};

/// Reply flags a receiver policy sets and a sender reads back.
pub mod flags {
    /// The data packet arrived CE-marked (the ACK echoes it).
    pub const ECN: u8 = 1 << 1;
    /// The receiver asks for the packet again (it arrived trimmed, or out of order).
    pub const NACK: u8 = 1 << 2;
    /// The data packet arrived trimmed to its header by a queue discipline.
    pub const TRIMMED: u8 = 1 << 3;
    /// A congestion notification (DCQCN's CNP), carried by the reply.
    pub const CNP: u8 = 1 << 4;
    /// A pull: credit for one more packet from a receiver's pacer (EQDS). Its `seq` counts
    /// the flow's pulls so far (a lost pull is made up by the next); it acknowledges
    /// nothing, so only congestion control sees it.
    pub const PULL: u8 = 1 << 6;
}

/// An in-band telemetry summary of the data packet's path: filled in only for a scheme
/// that asks for INT (`CongestionControl::wants_int`; 0 otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntSummary {
    /// Largest queue the packet met, in bytes.
    pub max_queue_bytes: u32,
    /// Hops that stamped a record.
    pub hops: u8,
}

/// Most switch hops that stamp an INT record into a data packet (HPCC's limit).
pub const INT_MAX_HOPS: usize = 5;

/// One switch hop's INT record (HPCC; CC-CATALOGUE §0), stamped as the data packet left
/// the hop's output port. The engine keeps the records in a side table keyed by the
/// packet, so packets stay 32 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntHop {
    /// The output port (a record compares with an earlier one only on the same port).
    pub port: u32,
    /// Departure time of the packet.
    pub ts: Time,
    /// Bytes the port had sent, this frame included.
    pub tx_bytes: u64,
    /// Bytes queued behind the packet as it left.
    pub qlen: u64,
    /// The port's line rate, bits per second.
    pub rate_bps: u64,
}

/// One reply at the sender, as every family sees it.
#[derive(Clone, Copy, Debug)]
pub struct Feedback {
    pub flow: FlowId,
    pub now: Time,
    /// Sequence number of the data packet the reply is about.
    pub seq: u32,
    /// Entropy (path label) the data packet used, echoed back.
    pub echo: u32,
    /// Reply flags (`flags::*`).
    pub flags: u8,
    /// Now minus the data packet's send time.
    pub rtt: Dur,
    /// Links the data packet crossed (every path is a shortest path).
    pub hops: u32,
    pub int: IntSummary,
    /// Payload bytes this reply newly acknowledged (set by loss recovery; 0 before).
    pub newly_acked: u32,
    /// The flow is complete (set by loss recovery).
    pub complete: bool,
    /// Payload bytes of the flow in flight once loss recovery handled this reply (0
    /// before): what a scheme that ignores the feedback of the bytes then in flight
    /// (SMaRTT's and NSCC's QuickAdapt) counts.
    pub in_flight: u64,
}

impl Feedback {
    #[inline]
    pub fn ecn(&self) -> bool {
        self.flags & flags::ECN != 0
    }
    #[inline]
    pub fn nack(&self) -> bool {
        self.flags & flags::NACK != 0
    }
    #[inline]
    pub fn trimmed(&self) -> bool {
        self.flags & flags::TRIMMED != 0
    }
    #[inline]
    pub fn pull(&self) -> bool {
        self.flags & flags::PULL != 0
    }
    #[inline]
    pub fn cnp(&self) -> bool {
        self.flags & flags::CNP != 0
    }
}

/// What a flow's path looks like with nothing queued: the context a congestion controller
/// scales its targets and windows by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPath {
    /// Links each way.
    pub hops: u32,
    /// Round trip of a full data packet and its ACK.
    pub base_rtt: Dur,
    /// Bytes the sender's line rate puts on the wire in one base RTT (frames and gaps).
    pub bdp_bytes: u64,
}

/// Timer requests a congestion controller makes during a call; the engine applies them
/// after it. One timer per flow: arming again replaces it, cancelling forgets it.
#[derive(Default)]
pub struct CcTimers {
    requests: Vec<(FlowId, Option<Time>)>,
}

impl CcTimers {
    /// Fire `CongestionControl::on_timer` for `flow` at `at` (not before now).
    pub fn arm(&mut self, flow: FlowId, at: Time) {
        self.requests.push((flow, Some(at)));
    }

    pub fn cancel(&mut self, flow: FlowId) {
        self.requests.push((flow, None));
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, (FlowId, Option<Time>)> {
        self.requests.drain(..)
    }
}
