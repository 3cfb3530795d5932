//! Receiver policies: one trait, one file per scheme, a registry by name.
//! A policy decides what a receiving host returns for each data packet that reaches it:
//! an ACK (echoing the packet's entropy and ECN mark), nothing (a coalescing receiver
//! waiting for more), or a reply with flags (a NACK, a CNP) about a sequence number of its
//! choosing. The engine sends what the policy returns on the receiver's control priority,
//! ahead of its data. A loss-recovery scheme names the policy it needs
//! (`LossRecovery::receiver`); `scheme.receiver` overrides it.

mod ack;
mod cnp;
mod gbn;

pub use cnp::wrap as with_cnp;

use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::units::Time;

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

pub struct ReceiverInit {
    pub n_flows: usize,
}

pub trait ReceiverPolicy: Send {
    fn on_data(&mut self, a: &Arrival) -> Reply;

    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&ReceiverInit, &Params) -> SimResult<Box<dyn ReceiverPolicy>>;

const REGISTRY: &[(&str, Factory)] = &[("ack", ack::build), ("gbn", gbn::build)];

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
