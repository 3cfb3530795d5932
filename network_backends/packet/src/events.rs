//! The event set, ordered by (time, insertion sequence), so events at the same
//! picosecond run in the order they were scheduled (deterministic FIFO).
//! Components keep at most one pending event each, so the heap holds about one
//! entry per busy port rather than one per packet.

use crate::units::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A port finished serializing a frame and its inter-frame gap.
    PortFree(u32),
    /// The oldest frame on the link behind a port reaches the far end.
    LinkArrive(u32),
    /// A flow's start time has come.
    FlowStart(u32),
    /// A paced host may send again.
    HostWake(u32),
    /// A flow's retransmission timer.
    Rto(u32),
}

impl Event {
    #[inline]
    fn pack(self) -> u64 {
        let (kind, id) = match self {
            Event::PortFree(i) => (0u64, i),
            Event::LinkArrive(i) => (1, i),
            Event::FlowStart(i) => (2, i),
            Event::HostWake(i) => (3, i),
            Event::Rto(i) => (4, i),
        };
        kind << 32 | id as u64
    }
    #[inline]
    fn unpack(x: u64) -> Event {
        let id = x as u32;
        match x >> 32 {
            0 => Event::PortFree(id),
            1 => Event::LinkArrive(id),
            2 => Event::FlowStart(id),
            3 => Event::HostWake(id),
            _ => Event::Rto(id),
        }
    }
}

/// A calendar queue: time is cut into buckets of `2^BUCKET_BITS` ps; events within
/// the next `WHEEL` buckets go unsorted into their bucket, later ones into an
/// overflow heap. The bucket being drained is sorted once, then read front to back.
/// Most events land one frame time (~42 ns) ahead, so pushes are O(1) and pops sort a
/// few dozen entries per bucket. The horizon is kept short (~0.26 us) on purpose: every
/// bucket's buffer is rewritten once per turn of the wheel, so a long wheel streams
/// megabytes through the cache, while the rarer far events (link latency, timers) cost
/// only a log-sized heap operation on a heap of about one entry per link.
const BUCKET_BITS: u32 = 8; // 256 ps
const WHEEL: usize = 1 << 10;

/// One event as a single sortable integer: time (48 bits, ps: up to 281 s),
/// insertion sequence (45 bits), event kind and id (35 bits).
type Key = u128;
const TIME_BITS: u32 = 48;
const SEQ_BITS: u32 = 45;
const EVENT_BITS: u32 = 35;
/// Latest time an event can carry.
pub const MAX_TIME: Time = Time((1u64 << TIME_BITS) - 1);

#[inline]
fn key(at: u64, seq: u64, ev: u64) -> Key {
    (at as u128) << (SEQ_BITS + EVENT_BITS) | (seq as u128) << EVENT_BITS | ev as u128
}

#[inline]
fn key_time(k: Key) -> u64 {
    (k >> (SEQ_BITS + EVENT_BITS)) as u64
}

pub struct EventQueue {
    /// Events of the bucket being drained, sorted; `next` indexes the first not yet popped.
    current: Vec<Key>,
    next: usize,
    /// Index of the bucket being drained (absolute: time >> BUCKET_BITS).
    cur_bucket: u64,
    wheel: Vec<Vec<Key>>,
    in_wheel: usize,
    overflow: BinaryHeap<Reverse<Key>>,
    seq: u64,
    popped: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            current: Vec::new(),
            next: 0,
            cur_bucket: 0,
            wheel: (0..WHEEL).map(|_| Vec::new()).collect(),
            in_wheel: 0,
            overflow: BinaryHeap::new(),
            seq: 0,
            popped: 0,
        }
    }
}

impl EventQueue {
    #[inline]
    pub fn push(&mut self, at: Time, ev: Event) {
        // Callers keep times below MAX_TIME (config validation bounds max_time_ms).
        debug_assert!(at <= MAX_TIME && self.seq < 1 << SEQ_BITS);
        let k = key(at.0, self.seq, ev.pack());
        self.seq += 1;
        let b = at.0 >> BUCKET_BITS;
        if b <= self.cur_bucket {
            // Rare (an event less than a bucket ahead): keep `current` sorted.
            let at = self.next + self.current[self.next..].partition_point(|&e| e < k);
            self.current.insert(at, k);
        } else if b < self.cur_bucket + WHEEL as u64 {
            self.wheel[b as usize % WHEEL].push(k);
            self.in_wheel += 1;
        } else {
            self.overflow.push(Reverse(k));
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        if self.next == self.current.len() && !self.advance() {
            return None;
        }
        let k = self.current[self.next];
        self.next += 1;
        self.popped += 1;
        Some((
            Time(key_time(k)),
            Event::unpack(k as u64 & ((1 << EVENT_BITS) - 1)),
        ))
    }

    /// Move to the next bucket that holds events; false if there are none at all.
    fn advance(&mut self) -> bool {
        self.current.clear();
        self.next = 0;
        loop {
            let next_overflow = self
                .overflow
                .peek()
                .map(|&Reverse(k)| key_time(k) >> BUCKET_BITS);
            if self.in_wheel == 0 {
                // Nothing within the horizon: jump straight to the next far event.
                match next_overflow {
                    None => return false,
                    Some(b) => self.cur_bucket = b,
                }
            } else {
                self.cur_bucket += 1;
            }
            let slot = &mut self.wheel[self.cur_bucket as usize % WHEEL];
            self.in_wheel -= slot.len();
            self.current.append(slot);
            while let Some(&Reverse(k)) = self.overflow.peek() {
                if key_time(k) >> BUCKET_BITS > self.cur_bucket {
                    break;
                }
                self.overflow.pop();
                self.current.push(k);
            }
            if !self.current.is_empty() {
                // Pushes arrive in sequence order, so buckets are often nearly sorted already.
                self.current.sort_unstable();
                return true;
            }
        }
    }

    /// Time of the earliest event, without removing it.
    pub fn peek_time(&mut self) -> Option<Time> {
        if self.next == self.current.len() && !self.advance() {
            return None;
        }
        Some(Time(key_time(self.current[self.next])))
    }

    pub fn processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn pops_in_time_then_fifo_order_like_a_sorted_shadow() {
        let mut q = EventQueue::default();
        let mut shadow = BTreeMap::new();
        let mut x = 12345u64;
        let mut now = 0u64;
        let mut id = 0u32;
        // Interleave pushes and pops, with ties, near events and far (overflow) events.
        for round in 0..200 {
            for _ in 0..50 {
                x = crate::rng::mix64(x);
                let t = now
                    + match x % 4 {
                        0 => x % 97,                 // ties and same-bucket events
                        1 => (x >> 8) % 2_000_000,   // within the horizon
                        2 => (x >> 8) % 500_000_000, // beyond it (overflow)
                        _ => 0,
                    };
                q.push(Time(t), Event::PortFree(id));
                shadow.insert((t, id), id);
                id += 1;
            }
            for _ in 0..(if round % 3 == 0 { 60 } else { 30 }) {
                let Some((&(t, want), _)) = shadow.iter().next() else {
                    break;
                };
                shadow.remove(&(t, want));
                assert_eq!(q.pop(), Some((Time(t), Event::PortFree(want))));
                now = t;
            }
        }
        for ((t, want), _) in shadow {
            assert_eq!(q.pop(), Some((Time(t), Event::PortFree(want))));
        }
        assert!(q.pop().is_none());
    }
}
