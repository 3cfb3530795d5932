//! Analytical network backends, each a `tracefabric_netapi::Network`:
//!
//! - `unaware`: ASTRA-sim 2.x's congestion-unaware model: a message takes
//!   hops x latency + bytes / bandwidth (truncated to whole ns), whatever else is in flight.
//! - `aware`: ASTRA-sim 2.x's congestion-aware model: every link is a FIFO that stores and
//!   forwards whole messages.
//! - `flow`: a physically sound flow-level model: max-min fair fluid sharing of every link
//!   (with multipath splitting on fat trees), cut-through (a flow's last byte arrives one
//!   path latency after it leaves), ACK and header overheads when the packet framing is given.
//!
//! `topology` holds ASTRA-sim's multi-dimensional analytical topologies (Ring,
//! FullyConnected, Switch per dimension).

pub mod aware;
pub mod flow;
pub mod topology;
pub mod unaware;

pub use topology::{AstraTopology, DimKind, DimSpec};
