//! GPUs inside servers: which GPU slot each rank runs on, and which fabric host (NIC) each
//! GPU slot sends through. Slot `s * gpus + i` is GPU `i` of server `s`; every GPU has its
//! own NIC into the scale-out fabric.

use crate::topology::Topology;
use serde::Deserialize;

/// How the GPUs' NICs attach to the fabric's edge switches.
#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum NicLayout {
    /// A server's NICs fill consecutive host ports: slot `n` is host `n`.
    #[default]
    Packed,
    /// Rail-aligned: GPU `i` of the servers of one rail group (as many servers as an edge
    /// switch has hosts) shares edge switch `group * gpus + i`, so the same GPU of
    /// neighbouring servers talks through one switch.
    Rail,
}

/// Rank -> GPU slot -> fabric host, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerLayout {
    pub gpus_per_server: u32,
    /// GPU slot of every rank (distinct).
    pub slot_of_rank: Vec<u32>,
    /// Fabric host of every GPU slot (distinct).
    pub host_of_slot: Vec<u32>,
}

impl ServerLayout {
    /// `placement[rank]` is the rank's GPU slot; the fabric gives `servers = hosts / gpus`
    /// servers. Errors name the field ("placement", "servers.gpus", "servers.nics").
    pub fn new(
        placement: Vec<u32>,
        gpus_per_server: u32,
        nics: NicLayout,
        topo: &Topology,
    ) -> Result<ServerLayout, (String, String)> {
        let bad = |field: &str, message: String| Err((field.to_string(), message));
        let hosts = topo.n_hosts;
        if gpus_per_server == 0 || hosts % gpus_per_server != 0 {
            return bad(
                "servers.gpus",
                format!("{gpus_per_server}: expected a divisor of the fabric's {hosts} hosts (one NIC per GPU)"),
            );
        }
        let mut seen = vec![false; hosts as usize];
        for (rank, &slot) in placement.iter().enumerate() {
            if slot >= hosts {
                return bad(
                    "placement",
                    format!("rank {rank} on GPU slot {slot}: expected a slot below {hosts} (servers x GPUs)"),
                );
            }
            if std::mem::replace(&mut seen[slot as usize], true) {
                return bad(
                    "placement",
                    format!("rank {rank} on GPU slot {slot}, already taken by another rank"),
                );
            }
        }
        let host_of_slot = match nics {
            NicLayout::Packed => (0..hosts).collect(),
            NicLayout::Rail => {
                rail_hosts(gpus_per_server, topo).map_err(|m| ("servers.nics".to_string(), m))?
            }
        };
        Ok(ServerLayout {
            gpus_per_server,
            slot_of_rank: placement,
            host_of_slot,
        })
    }

    pub fn server(&self, rank: u32) -> u32 {
        self.slot_of_rank[rank as usize] / self.gpus_per_server
    }

    pub fn host(&self, rank: u32) -> u32 {
        self.host_of_slot[self.slot_of_rank[rank as usize] as usize]
    }

    pub fn servers(&self) -> u32 {
        self.host_of_slot.len() as u32 / self.gpus_per_server
    }
}

/// Rail-aligned NICs: slot (server s, GPU i) -> the `s % per_edge`-th host of edge switch
/// `(s / per_edge) * gpus + i`.
fn rail_hosts(gpus: u32, topo: &Topology) -> Result<Vec<u32>, String> {
    let mut on_edge: Vec<Vec<u32>> = vec![Vec::new(); topo.n_edges as usize];
    for h in 0..topo.n_hosts {
        on_edge[topo.edge_index[topo.host_edge[h as usize] as usize] as usize].push(h);
    }
    let per_edge = on_edge[0].len() as u32;
    if on_edge.iter().any(|e| e.len() as u32 != per_edge) || topo.n_edges % gpus != 0 {
        return Err(format!(
            "rail: expected every edge switch to hold the same number of hosts and the {} edge \
             switches to be a multiple of the {gpus} GPUs per server",
            topo.n_edges
        ));
    }
    let servers = topo.n_hosts / gpus;
    let mut out = Vec::with_capacity(topo.n_hosts as usize);
    for s in 0..servers {
        for i in 0..gpus {
            let edge = (s / per_edge) * gpus + i;
            out.push(on_edge[edge as usize][(s % per_edge) as usize]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::units::{Dur, Rate};

    fn fat_tree(k: u32) -> Topology {
        Topology::build(
            &TopologyConfig::fat_tree(k),
            Rate::from_gbps(100.0),
            Dur(500_000),
        )
        .unwrap()
    }

    #[test]
    fn rail_puts_the_same_gpu_of_a_rail_group_on_one_edge_switch() {
        // k = 8: 32 edge switches of 4 hosts; 8 GPUs per server -> 16 servers, rail groups of 4.
        let topo = fat_tree(8);
        let hosts = rail_hosts(8, &topo).unwrap();
        let mut sorted = hosts.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..128).collect::<Vec<_>>(),
            "a permutation of the hosts"
        );
        let edge = |slot: u32| topo.host_edge[hosts[slot as usize] as usize];
        for s in 0..16u32 {
            for i in 0..8u32 {
                let group_mate = (s / 4) * 4 + (s + 1) % 4; // another server of the rail group
                assert_eq!(edge(s * 8 + i), edge(group_mate * 8 + i));
                assert_ne!(
                    edge(s * 8 + i),
                    edge(s * 8 + (i + 1) % 8),
                    "a server's GPUs on different rails"
                );
            }
        }
    }

    #[test]
    fn placement_is_checked() {
        let topo = fat_tree(4); // 16 hosts
        let ok = ServerLayout::new(vec![15, 0, 4], 4, NicLayout::Packed, &topo).unwrap();
        assert_eq!((ok.server(0), ok.server(1), ok.server(2)), (3, 0, 1));
        assert_eq!(ok.host(0), 15);
        let field = |r: Result<ServerLayout, (String, String)>| r.unwrap_err().0;
        assert_eq!(
            field(ServerLayout::new(vec![16], 4, NicLayout::Packed, &topo)),
            "placement"
        );
        assert_eq!(
            field(ServerLayout::new(vec![1, 1], 4, NicLayout::Packed, &topo)),
            "placement"
        );
        assert_eq!(
            field(ServerLayout::new(vec![0], 3, NicLayout::Packed, &topo)),
            "servers.gpus"
        );
        // k = 4: 8 edge switches of 2 hosts; 8 GPUs per server -> rails fit (8 % 8 == 0).
        assert!(ServerLayout::new(vec![0], 8, NicLayout::Rail, &topo).is_ok());
        assert_eq!(
            field(ServerLayout::new(vec![0], 16, NicLayout::Rail, &topo)),
            "servers.nics"
        );
    }
}
