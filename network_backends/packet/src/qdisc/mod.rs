//! Queue disciplines: one trait, one file per scheme, a registry by name.
//! A discipline decides, at a switch's output port, what happens to a data frame that
//! does not fit in the buffer (dropped or trimmed to its header) and as it departs (an ECN
//! mark); the engine owns the queues. A discipline may also make the switches lossless
//! (`lossless`: PFC thresholds the engine enforces per ingress, `sim::pfc`).
//!
//! To keep the common path free of calls, the engine asks `on_dequeue` only for departures
//! that leave more than `dequeue_floor()` bytes behind (below it the discipline promises
//! to do nothing).

mod pfc;
mod red;

use crate::config::{LinkConfig, PacketConfig, Params, SwitchConfig};
use crate::error::SimResult;
use crate::topology::PortId;
use crate::units::Dur;

pub struct QdiscInit<'a> {
    pub switch: &'a SwitchConfig,
    pub link: &'a LinkConfig,
    pub packet: &'a PacketConfig,
    pub seed: u64,
    /// The loss-recovery scheme relies on trimming (`LossRecovery::wants_trimming`).
    pub trim: bool,
}

/// Priority flow control thresholds, per ingress (the upstream port feeding a switch), in
/// bytes of data frames held (`qdisc::pfc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lossless {
    /// Above this the switch pauses the upstream port's data priority.
    pub xoff: u64,
    /// At or below this (after a PAUSE) it resumes it.
    pub xon: u64,
    /// Bytes past `xoff` an ingress absorbs before frames are dropped.
    pub headroom: u64,
    /// A cycle of ports paused this long is a deadlock (the run ends with an error).
    pub deadlock_after: Dur,
}

/// What becomes of a data frame that does not fit in its output buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Drop,
    /// Cut it to its header, queued on the control priority (the receiver NACKs it).
    Trim,
}

pub trait QueueDiscipline: Send {
    /// A digest of the state this scheme carries from one flow to the next, if a flow's
    /// behaviour depends on nothing else (not on its index, not on a shared random
    /// stream): exact reuse of busy periods (`crate::reuse`) replays a period only when
    /// the digests are equal. None (the default): never replay.
    fn reuse_digest(&self) -> Option<u64> {
        None
    }

    /// Backlog (bytes left behind a departing data frame) at or below which `on_dequeue`
    /// would do nothing, so the engine does not call it (u64::MAX: never call).
    fn dequeue_floor(&self) -> u64;

    /// A data frame departs `port`, leaving `backlog` bytes queued behind it, after the port
    /// sent `port_tx_bytes` bytes (since the busy period began: `Simulation::draw_bytes`);
    /// true to mark it CE.
    fn on_dequeue(&mut self, port: PortId, backlog: u64, port_tx_bytes: u64) -> bool;

    /// A data frame arriving at `port` does not fit in its buffer.
    fn on_overflow(&mut self, _port: PortId) -> Overflow {
        Overflow::Drop
    }

    /// PFC thresholds if the discipline makes switches lossless (the engine then pauses
    /// upstream ports; None, the default, costs nothing).
    fn lossless(&self) -> Option<Lossless> {
        None
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&QdiscInit, &Params) -> SimResult<Box<dyn QueueDiscipline>>;

const REGISTRY: &[(&str, Factory)] = &[("red", red::build), ("pfc", pfc::build)];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(name: &str, init: &QdiscInit, params: &Params) -> SimResult<Box<dyn QueueDiscipline>> {
    crate::registry::find("qdisc", REGISTRY, name)?(init, params)
}
