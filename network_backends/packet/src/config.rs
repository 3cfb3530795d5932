//! Run configuration as plain serde structs. Unknown keys are rejected by name
//! (`deny_unknown_fields`); ranges are checked in `validate`.

use crate::error::{config_err, SimResult};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Free-form scheme parameters; each scheme reads and checks its own.
pub type Params = BTreeMap<String, serde_json::Value>;

pub use tracefabric_fabric::config::{
    FabricConfig, FailureConfig, LinkConfig, PacketConfig, SwitchConfig, TopologyConfig,
    MAX_BUFFER_BYTES, MAX_FRAME_BYTES, MAX_RATE_GBPS, MAX_TIME_MS, MIN_RATE_GBPS,
};
/// The retransmission timeout unless the fabric's round trip needs a longer one.
pub const DEFAULT_RTO_US: f64 = 100.0;

/// A run's config as JSON: the fabric's sections (`fabric()`) at the top level beside the
/// schemes, traffic, seed and limits (serde cannot flatten a section and still refuse
/// unknown keys, so the fabric's four fields are listed here too).
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
    pub failures: FailureConfig,
    #[serde(default)]
    pub scheme: SchemeConfig,
    /// The flows of a standalone run; absent where the system layer gives them.
    #[serde(default)]
    pub traffic: Option<TrafficConfig>,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub limits: LimitsConfig,
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
    /// What a receiver returns per data packet (`receiver::names`); unset: the policy the
    /// loss-recovery scheme needs (`LossRecovery::receiver`).
    pub receiver: Option<String>,
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
            receiver: None,
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
    /// One timer per packet (the SMaRTT-REPS authors' htsim transport): after a timeout the
    /// flow's timer is re-armed at the next expiry among the packets still in flight.
    /// Off: one RTO after the timeout, so a loss sent just after the one that fired waits
    /// up to two RTOs (fewer spurious resends when queues outlast the RTO). The `rto` loss
    /// scheme has per-packet timers whatever this says.
    pub rto_per_packet: bool,
    /// Simulated time after which a run that has not finished is an error.
    pub max_time_ms: f64,
    /// Consecutive timeouts without progress after which a flow is declared stuck.
    pub max_timeouts: u32,
    /// Most flows one engine declares (`traffic::MAX_FLOWS` unless set: each takes a few
    /// hundred bytes). A driven run with more runs on engine windows of this many
    /// (`network_api::windows`); a standalone run is refused.
    pub max_flows: u64,
}
impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            rto_us: None,
            rto_per_packet: false,
            max_time_ms: 1000.0,
            max_timeouts: 32,
            max_flows: crate::traffic::MAX_FLOWS,
        }
    }
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

    /// The fabric's sections of the config.
    pub fn fabric(&self) -> FabricConfig {
        FabricConfig {
            topology: self.topology.clone(),
            link: self.link.clone(),
            switch: self.switch.clone(),
            packet: self.packet.clone(),
            failures: self.failures.clone(),
        }
    }

    pub fn validate(&self) -> SimResult<()> {
        self.fabric().validate()?;
        self.limits.validate()
    }
}

impl LimitsConfig {
    /// Simulated time stays within the clock (`MAX_TIME_MS`).
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
        let rto_us = self.rto_us.unwrap_or(DEFAULT_RTO_US);
        positive("limits.rto_us", rto_us)?;
        positive("limits.max_time_ms", self.max_time_ms)?;
        for (field, ms) in [
            ("limits.max_time_ms", self.max_time_ms),
            ("limits.rto_us", rto_us / 1e3),
        ] {
            if ms > MAX_TIME_MS {
                return Err(config_err(
                    field,
                    format!("simulated time is limited to {MAX_TIME_MS} ms, got {ms:.3e} ms"),
                ));
            }
        }
        if self.max_timeouts == 0 {
            return Err(config_err("limits.max_timeouts", "must be >= 1"));
        }
        if !(1..=u32::MAX as u64).contains(&self.max_flows) {
            return Err(config_err(
                "limits.max_flows",
                format!("= {}: expected 1..=2^32-1 flows", self.max_flows),
            ));
        }
        Ok(())
    }
}
