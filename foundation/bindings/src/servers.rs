//! GPUs in servers for the packet-fabric backends (`analytical:flow` on a fabric, `packet`):
//! the backend spec's `servers` and `placement`, checked against the fabric.

use crate::{bad_input, SystemLayerError};
use pyo3::PyErr;
use tracefabric_analytical::scale_up::{ScaleUpSpec, Servers};
use tracefabric_fabric::servers::{NicLayout, ServerLayout};
use tracefabric_fabric::Topology;
use tracefabric_netapi::Network;

/// `servers` of a backend spec (the network file's `servers`, with defaults filled in).
#[derive(serde::Deserialize, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
pub struct ServersSpec {
    pub gpus: u32,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
    #[serde(default)]
    pub nics: NicLayout,
}

/// The layout of a run: `placement[rank]` is the rank's GPU slot (default: rank r on slot
/// r); without `servers` every GPU is its own server (no scale-up domain).
pub fn layout(
    servers: Option<ServersSpec>,
    placement: Option<Vec<u32>>,
    ranks: u32,
    topo: &Topology,
) -> Result<Option<(ServerLayout, ScaleUpSpec)>, PyErr> {
    if servers.is_none() && placement.is_none() {
        return Ok(None);
    }
    let spec = servers.unwrap_or(ServersSpec {
        gpus: 1,
        bandwidth_gbps: 0.0,
        latency_ns: 0.0,
        nics: NicLayout::Packed,
    });
    let placement = placement.unwrap_or_else(|| (0..ranks).collect());
    if placement.len() as u32 != ranks {
        return Err(config_error(
            "placement",
            format!(
                "{} ranks placed but the workload has {ranks}",
                placement.len()
            ),
        ));
    }
    let layout = ServerLayout::new(placement, spec.gpus, spec.nics, topo)
        .map_err(|(field, message)| config_error(&field, message))?;
    let up = ScaleUpSpec {
        bandwidth_gbps: spec.bandwidth_gbps,
        latency_ns: spec.latency_ns,
    };
    Ok(Some((layout, up)))
}

pub fn servers<N: Network>(
    layout: ServerLayout,
    up: ScaleUpSpec,
    fabric: N,
) -> Result<Servers<N>, PyErr> {
    Servers::new(layout, up, fabric).map_err(|e| bad_input("servers", e))
}

fn config_error(field: &str, message: String) -> PyErr {
    SystemLayerError::new_err((
        "Config".to_string(),
        format!("{field}: {message}"),
        field.to_string(),
    ))
}
