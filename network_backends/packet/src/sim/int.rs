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

/// A hop's record as the table keeps it: 24 bytes. The port's rate is read when the
/// record is handed over (`int_hops`), and a queue past 4 GiB saturates.
#[derive(Clone, Copy, Default)]
struct IntRecord {
    ts: u64,
    tx_bytes: u64,
    port: u32,
    qlen: u32,
}

#[derive(Clone, Copy, Default)]
pub(super) struct IntStack {
    n: u8,
    hops: [IntRecord; INT_MAX_HOPS],
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
        let hop = IntRecord {
            ts: at.0,
            tx_bytes: self.ports[port].tx_bytes,
            port: port as u32,
            qlen: qlen.min(u32::MAX as u64) as u32,
        };
        let stack = self.int.entry((pkt.flow(), pkt.sent_at().0)).or_default();
        if (stack.n as usize) < INT_MAX_HOPS {
            stack.hops[stack.n as usize] = hop;
            stack.n += 1;
        }
    }

    /// A stack's records as the CC reads them, with each port's rate now, and how many.
    pub(super) fn int_hops(&self, stack: &IntStack) -> ([IntHop; INT_MAX_HOPS], usize) {
        let mut hops = [IntHop::default(); INT_MAX_HOPS];
        for (h, r) in hops.iter_mut().zip(&stack.hops[..stack.n as usize]) {
            *h = IntHop {
                port: r.port,
                ts: Time(r.ts),
                tx_bytes: r.tx_bytes,
                qlen: r.qlen as u64,
                rate_bps: self.ports[r.port as usize].rate.bps(),
            };
        }
        (hops, stack.n as usize)
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
