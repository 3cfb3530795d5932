//! Queue disciplines: one trait, one file per scheme, a registry by name.
//! A discipline decides, at a switch's output port, what happens to a frame that does not
//! fit in the buffer (drop or trim) and to a data frame as it departs (ECN mark). The
//! engine owns the queues and the byte limit; a discipline owns the decisions.
//!
//! To keep the common path free of calls, the engine asks `on_dequeue` only for departures
//! that leave more than `dequeue_floor()` bytes behind (below it the discipline promises
//! to do nothing), and `on_overflow` only when a frame does not fit.

mod red;

use crate::config::{Params, SwitchConfig};
use crate::error::{SimError, SimResult};
use crate::topology::PortId;

pub struct QdiscInit<'a> {
    pub switch: &'a SwitchConfig,
    pub seed: u64,
}

/// What becomes of a frame that does not fit in its output buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Drop,
    /// Cut the data frame to its header and queue it on the control priority.
    Trim,
}

pub trait QueueDiscipline: Send {
    /// Backlog (bytes left behind a departing data frame) at or below which `on_dequeue`
    /// would do nothing, so the engine does not call it (u64::MAX: never call).
    fn dequeue_floor(&self) -> u64;

    /// A data frame departs `port`, leaving `backlog` bytes queued behind it, after the port
    /// sent `port_tx_bytes` bytes in all; true to mark it CE.
    fn on_dequeue(&mut self, port: PortId, backlog: u64, port_tx_bytes: u64) -> bool;

    /// A frame arriving at `port` does not fit in its buffer.
    fn on_overflow(&mut self, _port: PortId, _is_ack: bool) -> Overflow {
        Overflow::Drop
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

type Factory = fn(&QdiscInit, &Params) -> SimResult<Box<dyn QueueDiscipline>>;

const REGISTRY: &[(&str, Factory)] = &[("red", red::build)];

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|(n, _)| *n).collect()
}

pub fn build(name: &str, init: &QdiscInit, params: &Params) -> SimResult<Box<dyn QueueDiscipline>> {
    match REGISTRY.iter().find(|(n, _)| *n == name) {
        Some((_, make)) => make(init, params),
        None => Err(SimError::UnknownScheme {
            family: "qdisc",
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}
