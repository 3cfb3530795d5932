//! tracefabric's packet-level network engine.
//!
//! Layers, lowest first (a module only names those above it in this list):
//! the fabric crate (`units`, `topology`, `timing`, re-exported) -> `rng`, `error` ->
//! `config`, `params` -> `traffic`,
//! `bounds` -> `transport` (what the engine tells the schemes) -> the scheme families
//! `lb`, `cc`, `loss`, `receiver`, `qdisc` (one trait each, one file per scheme, a
//! registry by name) -> `events` -> `sim` (the event loop) -> `report`, `network_api`
//! (the engine as a backend of the system layer).
//!
//! Panic contract: no input makes the engine panic; bad input is a [`SimError`].
//! Determinism: the same config (seed included) gives a bit-identical [`Report`].

pub mod bounds;
pub mod cc;
pub mod config;
pub mod error;
pub mod events;
pub mod lb;
pub mod loss;
pub mod network_api;
pub mod params;
mod prefetch;
pub mod qdisc;
pub mod receiver;
mod registry;
pub mod report;
pub mod reuse;
pub mod rng;
pub mod sim;
pub mod traffic;
pub mod transport;

pub use config::SimConfig;
pub use error::{SimError, SimResult};
pub use report::Report;
pub use sim::Simulation;
pub use tracefabric_fabric::{timing, topology, units, Fabric, FabricConfig};

/// Parse, build and run a simulation from a JSON config.
pub fn simulate_json(config_json: &str, progress: sim::Progress) -> SimResult<Report> {
    Simulation::new(SimConfig::from_json(config_json)?)?.run(progress)
}
