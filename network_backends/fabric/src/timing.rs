//! How long frames take: serialization at the line rate, propagation, switch latency.
//! The packet engine, its lower bounds and the flow-level model price frames alike.

use crate::config::FabricConfig;
use crate::units::{Dur, Rate};

/// A fabric's frame timing (all links share one rate and latency).
#[derive(Clone, Copy, Debug)]
pub struct FrameTiming {
    pub rate: Rate,
    pub payload: u32,
    pub header: u32,
    pub gap: Dur,
    pub ack: Dur,
    pub link: Dur,
    pub switch: Dur,
}

impl FrameTiming {
    pub fn new(cfg: &FabricConfig) -> FrameTiming {
        let rate = Rate::from_gbps(cfg.link.rate_gbps);
        FrameTiming {
            rate,
            payload: cfg.packet.payload_bytes,
            header: cfg.packet.header_bytes,
            gap: rate.serialization(cfg.packet.gap_bytes as u64),
            ack: rate.serialization(cfg.packet.ack_bytes as u64),
            link: Dur::from_ns_f64(cfg.link.latency_ns),
            switch: Dur::from_ns_f64(cfg.switch.latency_ns),
        }
    }

    pub fn data(&self, payload: u32) -> Dur {
        self.rate.serialization((payload + self.header) as u64)
    }

    /// A `bytes` message's packets: how many, and the last one's payload (all the others
    /// are full).
    pub fn packets(&self, bytes: u64) -> (u64, u32) {
        let n = bytes.div_ceil(self.payload as u64).max(1);
        (n, (bytes - (n - 1) * self.payload as u64) as u32)
    }

    /// One-way latency of a frame over `hops` links, store-and-forward.
    pub fn one_way(&self, ser: Dur, hops: u32) -> Dur {
        Dur(hops as u64 * (ser.0 + self.link.0) + (hops as u64 - 1) * self.switch.0)
    }

    /// Round trip of a full data packet and its ACK over `hops` links each way.
    pub fn base_rtt(&self, hops: u32) -> Dur {
        self.one_way(self.data(self.payload), hops) + self.one_way(self.ack, hops)
    }

    /// Bandwidth-delay product in full data packets.
    pub fn bdp_packets(&self, hops: u32) -> u32 {
        let per = self.data(self.payload).0 + self.gap.0;
        self.base_rtt(hops).0.div_ceil(per) as u32
    }
}
