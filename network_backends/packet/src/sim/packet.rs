//! The packet as the engine moves it: four 8-byte words.

use crate::topology::MAX_HOSTS;
use crate::units::Time;

/// A packet: four 8-byte words, read through accessors. Stored as named fields (a u32
/// and a u16 among them), the compiler copied packets as a 28-byte block plus the
/// fields it had touched, with overlapping 16-byte moves through the stack; a reload
/// that spans two such stores cannot be forwarded and waits for both (measured: the
/// hottest instruction of the dequeue and arrival paths). Whole words copy cleanly.
/// A frame on a link carries its arrival time in spare bits (see `PortRt::wire`), so
/// link FIFOs hold 32 bytes per frame, not 40: with ~200 frames in flight per 1 us link
/// they are most of the engine's memory traffic (measured: a third fewer last-level
/// misses on all-to-all (c) of the benchmarks, 5-9% less CPU time on (c)-(e)).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Packet {
    /// sent_at (48 bits: events keep times within `events::MAX_TIME`) | wire << 48
    /// (frame size on the wire: config validation keeps frames within 16 bits)
    sent_wire: u64,
    /// flow | seq << 32
    flow_seq: u64,
    /// entropy (the label switches route on: ECMP hash input or source-routed path id)
    /// | echo << 32 (an ACK: its data packet's entropy, echoed back to the sender; a data
    /// packet: its entropy again, or its INT tag, `int_tag`)
    entropy_echo: u64,
    /// dst (destination host, 24 bits: `topology::MAX_HOSTS`; for an ACK, the data sender)
    /// | flags << 24 (ACK, `transport::flags`) | gap << 32 (on a link: see `PortRt::wire`)
    dst_flags_gap: u64,
}

/// A frame's `gap` when its arrival is too far behind the frame ahead for 32 bits
/// (links over ~4.3 ms long): its arrival time waits in `Simulation::late_arrivals`.
pub(super) const GAP_LATE: u32 = u32::MAX;

pub(super) const ACK: u8 = 1;
/// The other flag bits are `transport::flags` (ECN, NACK, TRIMMED, CNP), and LOST.
const ECN: u8 = crate::transport::flags::ECN;
pub(super) const TRIMMED: u8 = crate::transport::flags::TRIMMED;
/// The engine's own: a frame its link loses (never seen by a scheme).
pub(super) const LOST: u8 = 1 << 5;
const _: () = assert!(
    LOST & (ACK
        | ECN
        | TRIMMED
        | crate::transport::flags::NACK
        | crate::transport::flags::CNP
        | crate::transport::flags::PULL)
        == 0
);
const _: () = assert!(
    ACK & (ECN
        | crate::transport::flags::NACK
        | crate::transport::flags::TRIMMED
        | crate::transport::flags::CNP)
        == 0
);

impl Packet {
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn new(
        sent_at: Time,
        flow: u32,
        seq: u32,
        entropy: u32,
        echo: u32,
        dst: u32,
        wire: u16,
        flags: u8,
    ) -> Packet {
        debug_assert!(sent_at <= crate::events::MAX_TIME && dst < MAX_HOSTS);
        Packet {
            sent_wire: sent_at.0 | (wire as u64) << 48,
            flow_seq: flow as u64 | (seq as u64) << 32,
            entropy_echo: entropy as u64 | (echo as u64) << 32,
            dst_flags_gap: dst as u64 | (flags as u64) << 24,
        }
    }
    #[inline]
    pub(super) fn sent_at(&self) -> Time {
        Time(self.sent_wire & ((1 << 48) - 1))
    }
    #[inline]
    pub(super) fn flow(&self) -> u32 {
        self.flow_seq as u32
    }
    #[inline]
    pub(super) fn seq(&self) -> u32 {
        (self.flow_seq >> 32) as u32
    }
    #[inline]
    pub(super) fn entropy(&self) -> u32 {
        self.entropy_echo as u32
    }
    #[inline]
    pub(super) fn echo(&self) -> u32 {
        (self.entropy_echo >> 32) as u32
    }
    #[inline]
    pub(super) fn dst(&self) -> u32 {
        self.dst_flags_gap as u32 & (MAX_HOSTS - 1)
    }
    #[inline]
    pub(super) fn wire(&self) -> u16 {
        (self.sent_wire >> 48) as u16
    }
    #[inline]
    pub(super) fn flags(&self) -> u8 {
        (self.dst_flags_gap >> 24) as u8
    }
    #[inline]
    pub(super) fn gap(&self) -> u32 {
        (self.dst_flags_gap >> 32) as u32
    }
    #[inline]
    pub(super) fn set_gap(&mut self, gap: u32) {
        self.dst_flags_gap = self.dst_flags_gap as u32 as u64 | (gap as u64) << 32;
    }
    #[inline]
    pub(super) fn is_ack(&self) -> bool {
        self.flags() & ACK != 0
    }
    #[inline]
    pub(super) fn mark_ecn(&mut self) {
        self.dst_flags_gap |= (ECN as u64) << 24;
    }
    /// A data packet's echo half repeats its entropy (nothing rewrites a packet's entropy,
    /// and replies echo `entropy()`), so with INT it holds entropy ^ (slot << 3 | hops) + 1
    /// once the packet has a stack in `Simulation::int`: (slot, hops stamped), or None
    /// before its first stamp.
    #[inline]
    pub(super) fn int_tag(&self) -> Option<(u32, u8)> {
        debug_assert!(!self.is_ack());
        let tag = (self.echo() ^ self.entropy()).checked_sub(1)?;
        Some((tag >> 3, tag as u8 & 7))
    }
    pub(super) fn set_int_tag(&mut self, slot: u32, hops: u8) {
        const _: () = assert!(crate::transport::INT_MAX_HOPS < 8);
        assert!(slot < 1 << 29, "more than 2^29 INT stacks in flight");
        let tag = self.entropy() ^ ((slot << 3 | hops as u32) + 1);
        self.entropy_echo = self.entropy_echo as u32 as u64 | (tag as u64) << 32;
    }
    /// The data packet cut to its `header` bytes, flagged TRIMMED.
    pub(super) fn trimmed(mut self, header: u16) -> Packet {
        self.sent_wire = self.sent_wire & ((1 << 48) - 1) | (header as u64) << 48;
        self.dst_flags_gap |= (TRIMMED as u64) << 24;
        self
    }
    /// The link it is on loses it (decided when it was sent).
    pub(super) fn mark_lost(&mut self) {
        self.dst_flags_gap |= (LOST as u64) << 24;
    }
    #[inline]
    pub(super) fn is_lost(&self) -> bool {
        self.flags() & LOST != 0
    }
}
