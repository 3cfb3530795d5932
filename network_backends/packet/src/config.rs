//! Run configuration as plain serde structs. Unknown keys are rejected by name
//! (`deny_unknown_fields`); ranges are checked in `validate`.

use crate::error::{config_err, SimResult};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Free-form scheme parameters; each scheme reads and checks its own.
pub type Params = BTreeMap<String, serde_json::Value>;

/// Frames are at most this large: packets keep sizes in 16 bits to stay small.
pub const MAX_FRAME_BYTES: u64 = u16::MAX as u64;
/// See `SimConfig::validate`.
pub const MAX_TIME_MS: f64 = 100_000.0;
/// Largest switch buffer: far past any switch, and its drain time stays in picoseconds.
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;
/// Link rates the engine accepts: a 64 KiB frame at 1 Mbps still takes half a second.
pub const MIN_RATE_GBPS: f64 = 1e-3;
pub const MAX_RATE_GBPS: f64 = 1e6;
/// The retransmission timeout unless the fabric's round trip needs a longer one.
pub const DEFAULT_RTO_US: f64 = 100.0;

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    pub topology: TopologyConfig,
    #[serde(default)]
    pub link: LinkConfig,
    #[serde(default)]
    pub switch: SwitchConfig,
    #[serde(default)]
    pub packet: PacketConfig,
    #[serde(default)]
    pub scheme: SchemeConfig,
    pub traffic: TrafficConfig,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub limits: LimitsConfig,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TopologyConfig {
    /// 3-tier k-ary fat tree: k pods, k^3/4 hosts, full bisection.
    FatTree { k: u32 },
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

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields, default)]
pub struct LinkConfig {
    pub rate_gbps: f64,
    pub latency_ns: f64,
}
impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_gbps: 800.0,
            latency_ns: 500.0,
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
    /// RED marking at dequeue between kmin and kmax (fractions of the buffer).
    pub ecn: bool,
    pub ecn_kmin: f64,
    pub ecn_kmax: f64,
}
impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer_bytes: 800_000,
            latency_ns: 0.0,
            ecn: true,
            ecn_kmin: 0.2,
            ecn_kmax: 0.8,
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

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields, default)]
pub struct SchemeConfig {
    pub lb: String,
    pub lb_params: Params,
    pub cc: String,
    pub cc_params: Params,
    pub loss: String,
    pub loss_params: Params,
    /// What a receiver returns per data packet (`receiver::names`).
    pub receiver: String,
    pub receiver_params: Params,
    /// The switches' queue discipline (`qdisc::names`).
    pub qdisc: String,
    pub qdisc_params: Params,
}
impl Default for SchemeConfig {
    fn default() -> Self {
        SchemeConfig {
            lb: "ecmp".into(),
            lb_params: Params::new(),
            cc: "ideal".into(),
            cc_params: Params::new(),
            loss: "erasure".into(),
            loss_params: Params::new(),
            receiver: "ack".into(),
            receiver_params: Params::new(),
            qdisc: "red".into(),
            qdisc_params: Params::new(),
        }
    }
}

#[derive(Deserialize, Clone, Debug)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TrafficConfig {
    /// Random derangement: every host sends `bytes` to one other host and receives from one.
    Permutation {
        bytes: u64,
        #[serde(default)]
        inter_pod: bool,
    },
    /// Every ordered pair of distinct hosts exchanges `bytes`. Each host lists its peers
    /// in ascending order (htsim's many-to-many matrix), or with `staggered` from its
    /// own id on (s+1, s+2, ... mod n, as collective libraries schedule them). With
    /// `shuffled` both orders run over a ring of the hosts shuffled by the seed, as
    /// htsim's all-to-all matrix generators lay hosts out.
    AllToAll {
        bytes: u64,
        #[serde(default)]
        staggered: bool,
        #[serde(default)]
        shuffled: bool,
    },
    /// `senders` hosts (the lowest ids other than `dst`) each send `bytes` to `dst`.
    Incast { dst: u32, senders: u32, bytes: u64 },
    /// An explicit flow list (start times in picoseconds).
    Flows {
        src: Vec<u32>,
        dst: Vec<u32>,
        bytes: Vec<u64>,
        start_ps: Vec<u64>,
    },
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Retransmission timeout: a packet unacknowledged this long is presumed lost. Unset:
    /// `DEFAULT_RTO_US`, or twice the unloaded round trip of a full packet on the longest
    /// path where that is longer (slow or long links), so no packet is presumed lost
    /// before its ACK could be back.
    pub rto_us: Option<f64>,
    /// Simulated time after which a run that has not finished is an error.
    pub max_time_ms: f64,
    /// Consecutive timeouts without progress after which a flow is declared stuck.
    pub max_timeouts: u32,
}
impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            rto_us: None,
            max_time_ms: 1000.0,
            max_timeouts: 32,
        }
    }
}

fn one_u32() -> u32 {
    1
}

/// The key of a `kind`-tagged section that caused `message`. Serde buffers such a section
/// before choosing the variant, so the error path stops at the section. With only `kind` and
/// one key, a bad value gives the same error (missing fields are reported after the keys),
/// and a good one a different error or none.
fn key_in_tagged<T: serde::de::DeserializeOwned>(
    text: &str,
    section: &str,
    message: &str,
) -> Option<String> {
    // A missing key is named by the message itself; every key present would repeat it.
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        return Some(missing.to_string());
    }
    let root: serde_json::Value = serde_json::from_str(text).ok()?;
    let map = root.get(section)?.as_object()?;
    let kind = map.get("kind")?;
    map.iter().filter(|(k, _)| *k != "kind").find_map(|(k, v)| {
        let alone = serde_json::json!({ "kind": kind, k.as_str(): v });
        match serde_json::from_value::<T>(alone) {
            Err(e) if e.to_string() == message => Some(k.clone()),
            _ => None,
        }
    })
}
impl SimConfig {
    pub fn from_json(text: &str) -> SimResult<SimConfig> {
        // The path names the offending key (`link.bogus`), not just the whole config.
        let de = &mut serde_json::Deserializer::from_str(text);
        let cfg: SimConfig = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "config".to_string()
            } else {
                path
            };
            let inner = e.inner();
            // serde_json appends where in the generated JSON text it stopped: not the user's.
            let place = format!(" at line {} column {}", inner.line(), inner.column());
            let message = inner.to_string();
            let message = message.strip_suffix(&place).unwrap_or(&message);
            let key = match field.as_str() {
                "topology" => key_in_tagged::<TopologyConfig>(text, &field, message),
                "traffic" => key_in_tagged::<TrafficConfig>(text, &field, message),
                _ => None,
            };
            match key {
                Some(key) => config_err(&format!("{field}.{key}"), message),
                None => config_err(&field, message),
            }
        })?;
        de.end().map_err(|e| config_err("config", e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Longest run the engine accepts: event times are 48-bit picoseconds (281 s), and
    /// a run may drain and time out a little past its limit.
    pub fn validate(&self) -> SimResult<()> {
        let positive = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(config_err(
                    field,
                    format!("must be a positive number, got {v:?}"),
                ))
            }
        };
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
        if s.ecn_kmin > s.ecn_kmax {
            return Err(config_err(
                "switch.ecn_kmax",
                format!(
                    "= {} is below ecn_kmin = {}: need ecn_kmin <= ecn_kmax",
                    s.ecn_kmax, s.ecn_kmin
                ),
            ));
        }
        let rto_us = self.limits.rto_us.unwrap_or(DEFAULT_RTO_US);
        positive("limits.rto_us", rto_us)?;
        positive("limits.max_time_ms", self.limits.max_time_ms)?;
        for (field, ms) in [
            ("limits.max_time_ms", self.limits.max_time_ms),
            ("limits.rto_us", rto_us / 1e3),
        ] {
            if ms > MAX_TIME_MS {
                return Err(config_err(
                    field,
                    format!("simulated time is limited to {MAX_TIME_MS} ms, got {ms:.3e} ms"),
                ));
            }
        }
        if self.limits.max_timeouts == 0 {
            return Err(config_err("limits.max_timeouts", "must be >= 1"));
        }
        Ok(())
    }
}
