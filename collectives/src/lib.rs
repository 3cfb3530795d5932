//! tracefabric's workload and system layers (the part of ASTRA-sim that walks Chakra
//! ETs and schedules collectives), network-agnostic: they drive any backend through
//! `tracefabric_netapi::Network`.
//!
//! Layers, lowest first: `dag` (a collective as transfers) -> `algorithms` (one file per
//! algorithm, registered by name) -> `workload` (per-rank ET graphs, matched across
//! ranks) -> `system` (the system config) and `plan` (chunks, phases per dimension) ->
//! `executor` (the event loop) -> `report`.

pub mod algorithms;
pub mod dag;
pub mod error;
pub mod executor;
pub mod plan;
pub mod report;
pub mod system;
pub mod workload;

pub use error::{SystemError, SystemResult};
pub use executor::run;
