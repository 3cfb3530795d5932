//! INT stamping (HPCC; CC-CATALOGUE §0) as a side table: each data packet of a scheme that
//! wants INT collects one record per switch hop (at most `INT_MAX_HOPS`) as it leaves the
//! hop's output port, kept here under (flow, send time) — unique per transmission, since a
//! NIC sends one frame at a time — and handed to the CC with the packet's reply. Packets
//! stay 32 bytes and schemes without INT never touch the table (`Simulation::int_on`).
//! An entry leaves the table when its reply reaches the sender, or when the packet or its
//! reply is dropped or goes unanswered, so the table holds about the packets in flight.

use super::*;
use crate::transport::{IntHop, INT_MAX_HOPS};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Clone, Copy, Default)]
pub(super) struct IntStack {
    n: u8,
    hops: [IntHop; INT_MAX_HOPS],
}

impl IntStack {
    pub(super) fn hops(&self) -> &[IntHop] {
        &self.hops[..self.n as usize]
    }
}

/// Keys are already unique small integers: one multiply-xorshift mixes them enough.
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = self.0.rotate_left(32) ^ x as u64;
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = self.0.rotate_left(17) ^ x;
    }
}

pub(super) type IntTable = HashMap<(u32, u64), IntStack, BuildHasherDefault<KeyHasher>>;

impl Simulation {
    /// A data packet leaves switch port `port` at `at` with `qlen` bytes queued behind it
    /// (the port's `tx_bytes` already counts it).
    #[cold]
    #[inline(never)]
    pub(super) fn int_stamp(&mut self, port: usize, pkt: &Packet, at: Time, qlen: u64) {
        let rt = &self.ports[port];
        let hop = IntHop {
            port: port as u32,
            ts: at,
            tx_bytes: rt.tx_bytes,
            qlen,
            rate_bps: rt.rate.bps(),
        };
        let stack = self.int.entry((pkt.flow(), pkt.sent_at().0)).or_default();
        if (stack.n as usize) < INT_MAX_HOPS {
            stack.hops[stack.n as usize] = hop;
            stack.n += 1;
        }
    }

    /// The records of the data packet a reply (or a lost frame) is about, removed.
    #[cold]
    #[inline(never)]
    pub(super) fn int_take(&mut self, pkt: &Packet) -> IntStack {
        self.int
            .remove(&(pkt.flow(), pkt.sent_at().0))
            .unwrap_or_default()
    }
}
