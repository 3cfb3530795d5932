//! ASTRA-sim's analytical topologies: a list of dimensions (innermost first), each a
//! Ring (bidirectional), FullyConnected or Switch of `npus` NPUs with its own bandwidth
//! and latency. NPU id -> address: addr[d] = (id / prod(npus[..d])) % npus[d].

use serde::Deserialize;
use tracefabric_netapi::CLOCK_LIMIT_PS;

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimKind {
    Ring,
    FullyConnected,
    Switch,
}

#[derive(Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DimSpec {
    pub kind: DimKind,
    pub npus: u32,
    /// GB/s as ASTRA-sim reads it: x * 2^30 / 1e9 bytes per ns.
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

impl DimSpec {
    pub fn bytes_per_ns(&self) -> f64 {
        self.bandwidth_gbps * (1u64 << 30) as f64 / 1e9
    }
}

/// A directed link: (dimension, from, to), where a device is an NPU id or, for a
/// Switch dimension, `npus + subgroup` (one switch per subgroup of that dimension).
pub type LinkKey = (u8, u32, u32);

#[derive(Clone, Debug)]
pub struct AstraTopology {
    pub dims: Vec<DimSpec>,
    strides: Vec<u32>,
    pub npus: u32,
    /// A message's longest uncontended time: every dimension's longest route, store and
    /// forward: `worst_latency_ns + bytes * worst_ns_per_byte` (see `check_fits_clock`).
    worst_latency_ns: f64,
    worst_ns_per_byte: f64,
}

/// Accepted bandwidth and latency per dimension (as the packet engine's link rate and
/// latency): beyond them the rate arithmetic and the picosecond clock lose meaning.
pub const BANDWIDTH_GBS: std::ops::RangeInclusive<f64> = 1e-3..=1e6;
pub const LATENCY_NS: std::ops::RangeInclusive<f64> = 0.0..=1e11;

impl AstraTopology {
    pub fn new(dims: Vec<DimSpec>) -> Result<AstraTopology, String> {
        if dims.is_empty() {
            return Err("the network has no dimensions".into());
        }
        let mut strides = Vec::new();
        let mut npus: u64 = 1;
        for (d, spec) in dims.iter().enumerate() {
            if spec.npus < 2 {
                return Err(format!(
                    "npus_count[{d}] = {}: every dimension needs at least 2 NPUs",
                    spec.npus
                ));
            }
            if !BANDWIDTH_GBS.contains(&spec.bandwidth_gbps) {
                return Err(format!(
                    "bandwidth[{d}] = {}: expected a number of GB/s in {BANDWIDTH_GBS:?}",
                    spec.bandwidth_gbps
                ));
            }
            if !LATENCY_NS.contains(&spec.latency_ns) {
                return Err(format!(
                    "latency[{d}] = {}: expected a number of ns in {LATENCY_NS:?}",
                    spec.latency_ns
                ));
            }
            strides.push(npus as u32);
            npus *= spec.npus as u64;
            if npus > u32::MAX as u64 / 2 {
                return Err("the network has too many NPUs".into());
            }
        }
        let longest_route = |d: &DimSpec| match d.kind {
            DimKind::Ring => d.npus / 2,
            DimKind::FullyConnected => 1,
            DimKind::Switch => 2,
        } as f64;
        let worst_latency_ns = dims.iter().map(|d| longest_route(d) * d.latency_ns).sum();
        let worst_ns_per_byte = dims
            .iter()
            .map(|d| longest_route(d) / d.bytes_per_ns())
            .sum();
        Ok(AstraTopology {
            dims,
            strides,
            npus: npus as u32,
            worst_latency_ns,
            worst_ns_per_byte,
        })
    }

    pub fn coord(&self, id: u32, d: usize) -> u32 {
        (id / self.strides[d]) % self.dims[d].npus
    }

    /// The lowest dimension in which two NPUs differ (ASTRA-sim sends there).
    pub fn first_differing_dim(&self, a: u32, b: u32) -> Option<usize> {
        (0..self.dims.len()).find(|&d| self.coord(a, d) != self.coord(b, d))
    }

    /// Refuses a message whose uncontended time, at its most (every dimension's longest
    /// route, store-and-forward), would carry the picosecond clock past 2^62 from `at`:
    /// the times would wrap or saturate and the run would end silently wrong.
    pub fn check_fits_clock(&self, bytes: u64, at: u64) -> Result<(), String> {
        let ns = self.worst_latency_ns + bytes as f64 * self.worst_ns_per_byte;
        let limit = CLOCK_LIMIT_PS as f64;
        if at as f64 + ns * 1e3 < limit {
            return Ok(());
        }
        Err(format!(
            "a message of {bytes} B could take up to {:.3e} s on this network (bandwidth and \
             latency per dimension), past the simulators' picosecond clock (2^62 ps, 53 days)",
            ns / 1e9
        ))
    }

    /// Links crossed inside dimension `d` between two NPUs that differ only there.
    pub fn hops_in_dim(&self, d: usize, a: u32, b: u32) -> u32 {
        let n = self.dims[d].npus;
        let (ca, cb) = (self.coord(a, d), self.coord(b, d));
        match self.dims[d].kind {
            DimKind::Ring => {
                let cw = (cb + n - ca) % n;
                cw.min(n - cw)
            }
            DimKind::FullyConnected => 1,
            DimKind::Switch => 2,
        }
    }

    /// The route from `a` to `b`: dimension by dimension, lowest first; along the shorter
    /// way round a ring (clockwise on a tie); through the dimension's switch.
    pub fn route(&self, a: u32, b: u32, out: &mut Vec<(usize, LinkKey)>) {
        out.clear();
        let mut at = a;
        for d in 0..self.dims.len() {
            let (ca, cb) = (self.coord(at, d), self.coord(b, d));
            if ca == cb {
                continue;
            }
            let stride = self.strides[d];
            let n = self.dims[d].npus;
            let with = |id: u32, c: u32| id - self.coord(id, d) * stride + c * stride;
            let target = with(at, cb);
            match self.dims[d].kind {
                DimKind::Ring => {
                    let cw = (cb + n - ca) % n;
                    let step = if cw <= n - cw { 1 } else { n - 1 };
                    let mut c = ca;
                    while c != cb {
                        let nc = (c + step) % n;
                        out.push((d, (d as u8, with(at, c), with(at, nc))));
                        c = nc;
                    }
                }
                DimKind::FullyConnected => out.push((d, (d as u8, at, target))),
                DimKind::Switch => {
                    let switch = self.npus + with(at, 0);
                    out.push((d, (d as u8, at, switch)));
                    out.push((d, (d as u8, switch, target)));
                }
            }
            at = target;
        }
    }
}
