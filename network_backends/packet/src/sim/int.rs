//! INT stamping (HPCC; CC-CATALOGUE §0) as a side table: each data packet of a scheme that
//! wants INT collects one record per switch hop (at most `INT_MAX_HOPS`) as it leaves the
//! hop's output port, kept here under (flow, send time) — unique per transmission, since a
//! NIC sends one frame at a time — and handed to the CC with the packet's reply. Packets
//! stay 32 bytes and schemes without INT never touch the table (`Simulation::int_on`).
//! An entry leaves the table when its reply reaches the sender, or when the packet or its
//! reply is dropped or goes unanswered, so the table holds at most the packets in flight.
//!
//! Memory: the stacks (128 B) live in a slab whose freed slots are reused last-in first-out,
//! so it never holds more stacks than were in flight at once; the hash map keeps only
//! (key, slot), 24 B, for the reply, whose 32 bytes have no room for the slot. The data
//! packet carries its slot and hop count (`Packet::int_tag`), so only its first hop looks
//! anything up. (With the stacks in the map itself, 144 B a slot, removals left tombstones
//! that doubled the map past twice the packets in flight, copying it as it grew: 302 MiB
//! peak on benchmark (e) for ~270 k packets in flight, now 157 MiB.)

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

#[derive(Default)]
pub(super) struct IntTable {
    /// (flow, send time) → index into `stacks`.
    slot: HashMap<(u32, u64), u32, BuildHasherDefault<KeyHasher>>,
    /// Every slot is either in `slot`'s values or in `free`, never both.
    stacks: Vec<IntStack>,
    free: Vec<u32>,
}

impl IntTable {
    /// Entries held: packets (or their replies) in flight that have passed a switch.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slot.len()
    }
}

impl Simulation {
    /// The data packet just queued on switch port `port`'s link (the back of its FIFO)
    /// left at `at` with `qlen` bytes queued behind it (the port's `tx_bytes` already
    /// counts it). Its first stamp takes a slot; the packet's tag then says which slot
    /// and how many hops it holds, so later hops only store into the stack (no lookup,
    /// no load to wait for: at scale the stack is rarely in cache).
    #[cold]
    #[inline(never)]
    pub(super) fn int_stamp(&mut self, port: usize, at: Time, qlen: u64) {
        let hop = IntRecord {
            ts: at.0,
            tx_bytes: self.ports[port].tx_bytes,
            port: port as u32,
            qlen: qlen.min(u32::MAX as u64) as u32,
        };
        let t = &mut self.int;
        let pkt = (self.ports[port].wire.back_mut()).expect("the frame just queued");
        let (i, n) = pkt.int_tag().unwrap_or_else(|| {
            let i = t.free.pop().unwrap_or_else(|| {
                t.stacks.push(IntStack::default());
                (t.stacks.len() - 1) as u32
            });
            t.slot.insert((pkt.flow(), pkt.sent_at().0), i);
            (i, 0)
        });
        if (n as usize) < INT_MAX_HOPS {
            let stack = &mut t.stacks[i as usize];
            stack.hops[n as usize] = hop;
            stack.n = n + 1;
            pkt.set_int_tag(i, n + 1);
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
        let t = &mut self.int;
        match t.slot.remove(&(pkt.flow(), pkt.sent_at().0)) {
            Some(i) => {
                t.free.push(i);
                t.stacks[i as usize]
            }
            None => IntStack::default(),
        }
    }
}
