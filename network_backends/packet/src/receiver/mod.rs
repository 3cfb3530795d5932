//! Receiver policies: one trait, one file per scheme, a registry by name.
//! A policy decides what a receiving host returns for each data packet that reaches it:
//! an ACK (echoing the packet's entropy and ECN mark), nothing (a coalescing receiver
//! waiting for more), or a reply with flags (a NACK, a CNP) about a sequence number of its
//! choosing. The engine sends what the policy returns on the receiver's control priority,
//! ahead of its data. A loss-recovery scheme names the policy it needs
//! (`LossRecovery::receiver`); `scheme.receiver` overrides it. A receiver-driven congestion
//! controller adds a pacer (`CongestionControl::receiver`) that answers data packets with
//! the loss-recovery scheme's policy (`ReceiverInit::inner`) and sends pulls on a timer of
//! its own per receiving host (`paces`, `pacer_wake`, `on_pacer`).

mod ack;
mod cnp;
mod eqds;
mod gbn;

pub use cnp::wrap as with_cnp;

use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::units::{Dur, Time};

/// A data packet at its receiver.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub flow: FlowId,
    pub seq: u32,
    /// Flags the packet carries (`transport::flags::ECN`, `TRIMMED`).
    pub flags: u8,
    pub now: Time,
}

/// What goes back to the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Nothing (yet).
    Nothing,
    /// A reply about sequence number `seq`, with `transport::flags` set.
    Ack { seq: u32, flags: u8 },
}

pub struct ReceiverInit<'a> {
    pub n_flows: usize,
    /// Each flow's receiving host and size in data packets.
    pub dst: &'a [u32],
    pub packets: &'a [u32],
    /// Packets each flow sends before it needs credit (`CongestionControl::unsolicited_packets`).
    pub unsolicited: &'a [u32],
    pub n_hosts: u32,
    /// A full data frame and its inter-frame gap at the line rate.
    pub frame_time: Dur,
    /// The policy a pacer answers data packets with (the loss-recovery scheme's).
    pub inner: &'a str,
}

#[cfg(test)]
impl ReceiverInit<'static> {
    /// `n_flows` flows and nothing else (policies that read no more).
    pub(crate) fn plain(n_flows: usize) -> ReceiverInit<'static> {
        ReceiverInit {
            n_flows,
            dst: &[],
            packets: &[],
            unsolicited: &[],
            n_hosts: 0,
            frame_time: Dur(0),
            inner: "ack",
        }
    }
}

/// A pull a pacer sends: credit for one packet of `flow`, the flow's `seq`-th.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pull {
    pub flow: FlowId,
    pub seq: u32,
}

pub trait ReceiverPolicy: Send {
    /// A digest of the state this scheme carries from one flow to the next, if a flow's
    /// behaviour depends on nothing else (not on its index, not on a shared random
    /// stream): exact reuse of busy periods (`crate::reuse`) replays a period only when
    /// the digests are equal. None (the default): never replay.
    fn reuse_digest(&self) -> Option<u64> {
        None
    }

    fn on_data(&mut self, a: &Arrival) -> Reply;

    /// Whether it sends pulls (cached once: without, the engine never asks the two below).
    fn paces(&self) -> bool {
        false
    }

    /// After a data packet reached `host`: when its pacer, idle, should run (None: it is
    /// running, or has nothing to pull).
    fn pacer_wake(&mut self, _host: u32, _now: Time) -> Option<Time> {
        None
    }

    /// The pacer of `host` runs: the pull to send, and when to run next (None: idle until
    /// `pacer_wake` says otherwise).
    fn on_pacer(&mut self, _host: u32, _now: Time) -> (Option<Pull>, Option<Time>) {
        (None, None)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&ReceiverInit, &Params) -> SimResult<Box<dyn ReceiverPolicy>>;

const REGISTRY: &[(&str, Factory)] = &[
    ("ack", ack::build),
    ("gbn", gbn::build),
    ("eqds", eqds::build),
];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(
    name: &str,
    init: &ReceiverInit,
    params: &Params,
) -> SimResult<Box<dyn ReceiverPolicy>> {
    crate::registry::find("receiver", REGISTRY, name)?(init, params)
}
