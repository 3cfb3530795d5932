//! The system configuration (ASTRA-sim's system JSON, normalized by the Python reader):
//! scheduling, chunking, algorithms per collective and dimension, local reduction.
//! How a collective is planned with it lives in `plan`.

use crate::algorithms::{self, Algorithm, CollectiveKind};
use crate::dag::Blocks;
use crate::error::{SystemError, SystemResult};
use serde::Deserialize;
use std::collections::BTreeMap;
use tracefabric_netapi::CLOCK_LIMIT_PS;

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// The newest collective's chunks go first (ASTRA-sim's default).
    Lifo,
    Fifo,
}

/// The system configuration, normalized by the Python config reader (which owns
/// ASTRA-sim's JSON keys, their units and their errors).
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct SystemConfig {
    pub scheduling_policy: Policy,
    /// Paid by the receiver for every arriving message, and once when a phase starts.
    pub endpoint_delay_ps: u64,
    pub active_chunks_per_dimension: u32,
    pub preferred_dataset_splits: u32,
    /// Algorithm names per collective type, one per network dimension.
    pub implementations: BTreeMap<String, Vec<String>>,
    /// All-reduce over several dimensions as reduce-scatter up, all-reduce on the last
    /// dimension, all-gather down (ASTRA-sim's `localBWAware`); else all-reduce per dimension.
    pub local_bw_aware: bool,
    /// Local reduction: 3 memory passes (one write, two reads) of the received bytes at
    /// this rate, each rounded down to whole ns (ASTRA-sim's model). 0 disables it.
    pub local_mem_bw_bytes_per_ns: f64,
    pub blocks: Blocks,
    /// NPUs per network dimension (innermost first); their product is the rank count.
    pub dims: Vec<u32>,
    /// ASTRA-sim 2.x's semantics (the `analytical:astra-*` backends): one communication
    /// operation per rank at a time, per-rank collective progress, ring all-to-all as
    /// n(n-1)/2 ring steps, sub-groups as a flat ring (see `docs/astra-sim.md`).
    #[serde(default)]
    pub astra: bool,
}

impl SystemConfig {
    /// The local reduction of `bytes`, or an error naming `local-mem-bw` when it would
    /// pass the clock limit (instead of a saturated, wrapped time).
    pub fn reduce_time_ps(&self, bytes: u64) -> SystemResult<u64> {
        if self.local_mem_bw_bytes_per_ns <= 0.0 {
            return Ok(0);
        }
        let ns = (bytes as f64 / self.local_mem_bw_bytes_per_ns).floor();
        if ns < (CLOCK_LIMIT_PS / 3_000) as f64 {
            return Ok(3 * ns as u64 * 1_000);
        }
        Err(SystemError::Config {
            field: "local-mem-bw".into(),
            message: format!(
                "a local reduction of {bytes} B at {:e} GB/s takes {:.3e} s, past the picosecond \
                 clock (2^62 ps, 53 days)",
                self.local_mem_bw_bytes_per_ns,
                3.0 * ns / 1e9
            ),
        })
    }

    pub(crate) fn algorithm(
        &self,
        kind: CollectiveKind,
        dim: usize,
    ) -> SystemResult<&'static dyn Algorithm> {
        let key = format!("{}-implementation", kind.name().replace('_', "-"));
        let list = self
            .implementations
            .get(&key)
            .ok_or_else(|| SystemError::Config {
                field: key.clone(),
                message: format!(
                    "the workload has a {} but the system config names no algorithm for it",
                    kind.name()
                ),
            })?;
        let name = list.get(dim).ok_or_else(|| SystemError::Config {
            field: key.clone(),
            message: format!(
                "{} entries, but dimension {dim} needs one (the network has {} dimensions)",
                list.len(),
                self.dims.len()
            ),
        })?;
        algorithms::by_name(name).map_err(|message| SystemError::Config {
            field: key,
            message,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn cfg(splits: u32) -> SystemConfig {
        SystemConfig {
            scheduling_policy: Policy::Lifo,
            endpoint_delay_ps: 0,
            active_chunks_per_dimension: 1,
            preferred_dataset_splits: splits,
            implementations: BTreeMap::new(),
            local_bw_aware: true,
            local_mem_bw_bytes_per_ns: 1600.0,
            blocks: Blocks::Truncate,
            dims: vec![8],
            astra: false,
        }
    }

    #[test]
    fn reduction_time_is_three_floored_memory_passes() {
        // 131072 B at 1600 B/ns: floor(81.92) = 81 ns per pass.
        assert_eq!(cfg(1).reduce_time_ps(131_072), Ok(243_000));
    }

    #[test]
    fn reduction_past_the_clock_names_local_mem_bw() {
        let mut c = cfg(1);
        c.local_mem_bw_bytes_per_ns = 1e-300;
        match c.reduce_time_ps(1) {
            Err(SystemError::Config { field, .. }) => assert_eq!(field, "local-mem-bw"),
            other => panic!("expected a local-mem-bw error, got {other:?}"),
        }
        // 2^62 ps / 3 passes is 1.537e15 ns: one byte per ns stays below it.
        c.local_mem_bw_bytes_per_ns = 1.0;
        assert_eq!(c.reduce_time_ps(1 << 40), Ok(3 * (1 << 40) * 1_000));
    }
}
