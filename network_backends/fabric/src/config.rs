//! The fabric's configuration: topology, links, switches, frames. Plain serde structs;
//! unknown keys are refused by name (`deny_unknown_fields`), ranges in `validate`.

use crate::error::{config_err, FabricResult};
pub use crate::failures::FailureConfig;
use serde::Deserialize;

/// Frames are at most this large: packets keep sizes in 16 bits to stay small.
pub const MAX_FRAME_BYTES: u64 = u16::MAX as u64;
/// Longest simulated time in milliseconds: event times are 48-bit picoseconds (281 s), and
/// a run may drain and time out a little past its limit. No latency may exceed it.
pub const MAX_TIME_MS: f64 = 100_000.0;
/// Largest switch buffer: far past any switch, and its drain time stays in picoseconds.
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;
/// Link rates the engine accepts: a 64 KiB frame at 1 Mbps still takes half a second.
pub const MIN_RATE_GBPS: f64 = 1e-3;
pub const MAX_RATE_GBPS: f64 = 1e6;

/// Everything about the fabric a backend needs, without traffic or schemes.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct FabricConfig {
    pub topology: TopologyConfig,
    #[serde(default)]
    pub link: LinkConfig,
    #[serde(default)]
    pub switch: SwitchConfig,
    #[serde(default)]
    pub packet: PacketConfig,
    #[serde(default)]
    pub failures: FailureConfig,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TopologyConfig {
    /// 3-tier k-ary fat tree: k pods, k^3/4 hosts; full bisection, or `oversubscription`:1
    /// at the aggregation-core tier (each aggregation keeps k/2 / oversubscription uplinks).
    FatTree {
        k: u32,
        #[serde(default = "one_u32")]
        oversubscription: u32,
    },
    /// 2-tier leaf-spine. Hosts per leaf: `hosts_per_leaf`, or else
    /// oversubscription (default 1) x spines x links_per_pair; not both.
    LeafSpine {
        leaves: u32,
        spines: u32,
        #[serde(default = "one_u32")]
        links_per_pair: u32,
        #[serde(default)]
        oversubscription: Option<f64>,
        #[serde(default)]
        hosts_per_leaf: Option<u32>,
    },
}

impl TopologyConfig {
    /// The full-bisection k-ary fat tree.
    pub fn fat_tree(k: u32) -> TopologyConfig {
        TopologyConfig::FatTree {
            k,
            oversubscription: 1,
        }
    }
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields, default)]
pub struct LinkConfig {
    pub rate_gbps: f64,
    pub latency_ns: f64,
    /// Probability that a link loses a frame (each frame, each link, independently).
    pub loss_rate: f64,
}
impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_gbps: 800.0,
            latency_ns: 500.0,
            loss_rate: 0.0,
        }
    }
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// Output buffer per port, in bytes (drop-tail beyond it).
    pub buffer_bytes: u64,
    /// Forwarding latency added to every packet entering a switch.
    pub latency_ns: f64,
    /// RED marking at dequeue between kmin and kmax (fractions of the buffer): the
    /// probability rises linearly from 0 at kmin to `ecn_pmax` at kmax, and is 1 above.
    pub ecn: bool,
    pub ecn_kmin: f64,
    pub ecn_kmax: f64,
    pub ecn_pmax: f64,
}
impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer_bytes: 800_000,
            latency_ns: 0.0,
            ecn: true,
            ecn_kmin: 0.2,
            ecn_kmax: 0.8,
            ecn_pmax: 1.0,
        }
    }
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields, default)]
pub struct PacketConfig {
    pub payload_bytes: u32,
    pub header_bytes: u32,
    pub ack_bytes: u32,
    /// Inter-frame gap + preamble charged after every frame on a link.
    pub gap_bytes: u32,
}
impl Default for PacketConfig {
    fn default() -> Self {
        PacketConfig {
            payload_bytes: 4096,
            header_bytes: 62,
            ack_bytes: 64,
            gap_bytes: 20,
        }
    }
}

fn one_u32() -> u32 {
    1
}

impl FabricConfig {
    /// Range checks of every section but the topology's (`Topology::build` checks those).
    pub fn validate(&self) -> FabricResult<()> {
        // Times are integer picoseconds below 2^48: a frame must take well under a second,
        // a latency no longer than the longest run.
        if !(MIN_RATE_GBPS..=MAX_RATE_GBPS).contains(&self.link.rate_gbps) {
            return Err(config_err(
                "link.rate_gbps",
                format!(
                    "must be between {MIN_RATE_GBPS} and {MAX_RATE_GBPS}, got {:?}",
                    self.link.rate_gbps
                ),
            ));
        }
        let max_latency_ns = MAX_TIME_MS * 1e6;
        for (field, v) in [
            ("link.latency_ns", self.link.latency_ns),
            ("switch.latency_ns", self.switch.latency_ns),
        ] {
            if !(v.is_finite() && (0.0..=max_latency_ns).contains(&v)) {
                return Err(config_err(
                    field,
                    format!(
                        "must be between 0 and {max_latency_ns:e} (the longest run), got {v:?}"
                    ),
                ));
            }
        }
        if !(0.0..1.0).contains(&self.link.loss_rate) {
            return Err(config_err(
                "link.loss_rate",
                format!(
                    "= {:?}: expected a probability in [0, 1)",
                    self.link.loss_rate
                ),
            ));
        }
        let p = &self.packet;
        if p.payload_bytes == 0 {
            return Err(config_err("packet.payload_bytes", "must be > 0"));
        }
        if p.ack_bytes == 0 {
            return Err(config_err("packet.ack_bytes", "must be > 0"));
        }
        let frame = p.payload_bytes as u64 + p.header_bytes as u64;
        for (field, what, bytes) in [
            (
                "packet.payload_bytes",
                "a data frame (payload + header)",
                frame,
            ),
            ("packet.ack_bytes", "an ACK frame", p.ack_bytes as u64),
            (
                "packet.gap_bytes",
                "the gap after a frame",
                p.gap_bytes as u64,
            ),
        ] {
            if bytes > MAX_FRAME_BYTES {
                return Err(config_err(
                    field,
                    format!("{what} is limited to {MAX_FRAME_BYTES} B, got {bytes}"),
                ));
            }
        }
        if self.switch.buffer_bytes < frame {
            return Err(config_err(
                "switch.buffer_bytes",
                format!(
                    "must hold at least one data frame ({frame} B), got {}",
                    self.switch.buffer_bytes
                ),
            ));
        }
        if self.switch.buffer_bytes > MAX_BUFFER_BYTES {
            return Err(config_err(
                "switch.buffer_bytes",
                format!(
                    "= {} B: expected at most 2^40 B (1 TiB; switches hold ~100 MB)",
                    self.switch.buffer_bytes
                ),
            ));
        }
        let s = &self.switch;
        for (field, v) in [
            ("switch.ecn_kmin", s.ecn_kmin),
            ("switch.ecn_kmax", s.ecn_kmax),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(config_err(
                    field,
                    format!("= {v}: expected a fraction of the buffer in 0..1"),
                ));
            }
        }
        if !(s.ecn_pmax > 0.0 && s.ecn_pmax <= 1.0) {
            return Err(config_err(
                "switch.ecn_pmax",
                format!("= {}: expected a marking probability in (0, 1]", s.ecn_pmax),
            ));
        }
        if s.ecn_kmin > s.ecn_kmax {
            return Err(config_err(
                "switch.ecn_kmax",
                format!(
                    "= {} is below ecn_kmin = {}: need ecn_kmin <= ecn_kmax",
                    s.ecn_kmax, s.ecn_kmin
                ),
            ));
        }
        Ok(())
    }
}
