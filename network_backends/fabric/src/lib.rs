//! tracefabric's fabric: units, the network's configuration, topologies with their
//! next-hop groups, and frame timing, shared by the packet engine, its lower bounds and the
//! analytical flow-level model.
//!
//! Layers, lowest first: `units`, `error` -> `config` -> `topology` (with `routes`: next-hop
//! groups over the links that are up), `timing` -> [`Fabric`]; `servers` places GPUs and
//! their NICs on the fabric's hosts.

pub mod config;
pub mod error;
pub mod failures;
pub mod routes;
pub mod seed;
pub mod servers;
pub mod timing;
pub mod topology;
pub mod units;

pub use config::FabricConfig;
pub use error::{FabricError, FabricResult};
pub use timing::FrameTiming;
pub use topology::Topology;

/// A checked fabric configuration and the topology it builds.
#[derive(Clone, Debug)]
pub struct Fabric {
    pub config: FabricConfig,
    pub topology: Topology,
}

impl Fabric {
    pub fn build(config: FabricConfig) -> FabricResult<Fabric> {
        config.validate()?;
        let topology = Topology::build(
            &config.topology,
            units::Rate::from_gbps(config.link.rate_gbps),
            units::Dur::from_ns_f64(config.link.latency_ns),
        )?;
        Ok(Fabric { config, topology })
    }

    pub fn timing(&self) -> FrameTiming {
        FrameTiming::new(&self.config)
    }

    pub fn hosts(&self) -> u32 {
        self.topology.n_hosts
    }
}
