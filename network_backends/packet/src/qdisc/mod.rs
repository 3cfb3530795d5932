//! Queue disciplines: one trait, one file per scheme, a registry by name.
//! A discipline decides, at a switch's output port, what happens to a data frame that
//! does not fit in the buffer (dropped or trimmed to its header) and as it departs (an ECN
//! mark); the engine owns the queues. INT stamping and PFC are for this family next.
//!
//! To keep the common path free of calls, the engine asks `on_dequeue` only for departures
//! that leave more than `dequeue_floor()` bytes behind (below it the discipline promises
//! to do nothing).

mod red;

use crate::config::{Params, SwitchConfig};
use crate::error::SimResult;
use crate::topology::PortId;

pub struct QdiscInit<'a> {
    pub switch: &'a SwitchConfig,
    pub seed: u64,
    /// The loss-recovery scheme relies on trimming (`LossRecovery::wants_trimming`).
    pub trim: bool,
}

/// What becomes of a data frame that does not fit in its output buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Drop,
    /// Cut it to its header, queued on the control priority (the receiver NACKs it).
    Trim,
}

pub trait QueueDiscipline: Send {
    /// Backlog (bytes left behind a departing data frame) at or below which `on_dequeue`
    /// would do nothing, so the engine does not call it (u64::MAX: never call).
    fn dequeue_floor(&self) -> u64;

    /// A data frame departs `port`, leaving `backlog` bytes queued behind it, after the port
    /// sent `port_tx_bytes` bytes in all; true to mark it CE.
    fn on_dequeue(&mut self, port: PortId, backlog: u64, port_tx_bytes: u64) -> bool;

    /// A data frame arriving at `port` does not fit in its buffer.
    fn on_overflow(&mut self, _port: PortId) -> Overflow {
        Overflow::Drop
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&QdiscInit, &Params) -> SimResult<Box<dyn QueueDiscipline>>;

const REGISTRY: &[(&str, Factory)] = &[("red", red::build)];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(name: &str, init: &QdiscInit, params: &Params) -> SimResult<Box<dyn QueueDiscipline>> {
    crate::registry::find("qdisc", REGISTRY, name)?(init, params)
}
