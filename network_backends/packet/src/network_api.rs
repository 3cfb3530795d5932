//! The packet engine as a `tracefabric_netapi::Network`: the system layer declares
//! every flow up front (the config's flow list, so load balancers that plan per flow
//! see them all), then starts each one when its dependencies allow.

use crate::sim::Simulation;
use crate::units::Time;
use tracefabric_netapi::{FlowRequest, Network, Ps};

/// A simulation driven by a system layer.
pub struct DrivenPacket {
    pub sim: Simulation,
}

impl DrivenPacket {
    pub fn new(mut sim: Simulation) -> DrivenPacket {
        sim.drive();
        DrivenPacket { sim }
    }
}

impl Network for DrivenPacket {
    fn endpoints(&self) -> u32 {
        self.sim.topology().n_hosts
    }

    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        let declared = u32::try_from(f.id).ok().and_then(|i| self.sim.flow_spec(i));
        match declared {
            Some(spec) if spec.src == f.src && spec.dst == f.dst && spec.bytes == f.bytes => {}
            _ => {
                return Err(format!(
                    "flow {} ({} -> {}, {} bytes) was not declared to the packet engine",
                    f.id, f.src, f.dst, f.bytes
                ))
            }
        }
        self.sim
            .start_flow(f.id as u32, Time(at))
            .map_err(|e| e.to_string())
    }

    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        Ok(self
            .sim
            .next_completion(Time(limit))
            .map_err(|e| e.to_string())?
            .map(|(t, f)| (t.0, f as u64)))
    }
}
