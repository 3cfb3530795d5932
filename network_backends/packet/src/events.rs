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
///
/// The horizon (~2.1 us) covers a frame time plus a link's latency, so the common
/// events (port free, link arrival) never touch the heap; only timers do. Wheel
/// entries are one `u64` (offset in the bucket, event) and carry no sequence number:
/// a bucket holds its events in push order, and any of them that waited in the heap
/// were pushed before every one that went straight to the wheel (the horizon only
/// moves forward). So sorting a bucket by offset, stably, gives (time, push order).
const BUCKET_BITS: u32 = 8; // 256 ps
const WHEEL_BITS: u32 = 13;
const WHEEL: usize = 1 << WHEEL_BITS;

/// A far event as a single sortable integer: time (48 bits, ps: up to 281 s),
/// insertion sequence (45 bits), event kind and id (35 bits).
type Key = u128;
const TIME_BITS: u32 = 48;
const SEQ_BITS: u32 = 45;
const EVENT_BITS: u32 = 35;
const EVENT_MASK: u64 = (1 << EVENT_BITS) - 1;
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

/// Entries of a bucket: offset in the bucket (top BUCKET_BITS bits), then the event.
const OFFSET_SHIFT: u32 = 64 - BUCKET_BITS;

#[inline]
fn entry(at: u64, ev: u64) -> u64 {
    (at & ((1 << BUCKET_BITS) - 1)) << OFFSET_SHIFT | ev
}

/// Stable sort by offset of a short bucket (push order already breaks ties).
fn insertion_sort_by_offset(v: &mut [u64]) {
    for i in 1..v.len() {
        let e = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] >> OFFSET_SHIFT > e >> OFFSET_SHIFT {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = e;
    }
}

/// Stable sort by offset of a long bucket: one counting pass over the 2^BUCKET_BITS
/// offsets, then a scatter into `out`.
fn counting_sort_by_offset(v: &[u64], out: &mut Vec<u64>) {
    let mut start = [0u32; 1 << BUCKET_BITS];
    for &e in v {
        start[(e >> OFFSET_SHIFT) as usize] += 1;
    }
    let mut sum = 0;
    for c in start.iter_mut() {
        (*c, sum) = (sum, sum + *c);
    }
    out.clear();
    out.resize(v.len(), 0);
    for &e in v {
        let c = &mut start[(e >> OFFSET_SHIFT) as usize];
        out[*c as usize] = e;
        *c += 1;
    }
}

pub struct EventQueue {
    /// Entries of the bucket being drained, sorted; `next` indexes the first not yet popped.
    current: Vec<u64>,
    next: usize,
    /// Index of the bucket being drained (absolute: time >> BUCKET_BITS).
    cur_bucket: u64,
    wheel: Vec<Vec<u64>>,
    in_wheel: usize,
    overflow: BinaryHeap<Reverse<Key>>,
    /// Events pushed for a bucket before the current one, as full keys, sorted. Only a
    /// caller that peeks (the next event is then already the current bucket's) and then
    /// schedules something earlier puts anything here.
    early: Vec<Key>,
    /// Spare buffer for sorting a bucket.
    scratch: Vec<u64>,
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
            early: Vec::new(),
            scratch: Vec::new(),
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
        let b = at.0 >> BUCKET_BITS;
        if b.wrapping_sub(self.cur_bucket + 1) < WHEEL as u64 - 1 {
            // The common case: a later bucket within the horizon.
            self.wheel[b as usize % WHEEL].push(entry(at.0, ev.pack()));
            self.in_wheel += 1;
        } else {
            self.push_other(at, ev);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_other(&mut self, at: Time, ev: Event) {
        let b = at.0 >> BUCKET_BITS;
        if b > self.cur_bucket {
            self.overflow.push(Reverse(key(at.0, self.seq, ev.pack())));
            self.seq += 1;
        } else if b == self.cur_bucket {
            // An event less than a bucket ahead: keep `current` sorted; it is the
            // newest, so it goes after every entry at its time or earlier.
            let e = entry(at.0, ev.pack());
            let at = self.next
                + self.current[self.next..]
                    .partition_point(|&x| x >> OFFSET_SHIFT <= e >> OFFSET_SHIFT);
            self.current.insert(at, e);
        } else {
            let k = key(at.0, self.seq, ev.pack());
            self.seq += 1;
            let at = self.early.partition_point(|&x| x < k);
            self.early.insert(at, k);
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        if !self.early.is_empty() {
            let k = self.early.remove(0);
            self.popped += 1;
            return Some((Time(key_time(k)), Event::unpack(k as u64 & EVENT_MASK)));
        }
        if self.next == self.current.len() && !self.advance() {
            return None;
        }
        let e = self.current[self.next];
        self.next += 1;
        self.popped += 1;
        Some((
            Time(self.cur_bucket << BUCKET_BITS | e >> OFFSET_SHIFT),
            Event::unpack(e & EVENT_MASK),
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
            // Far events first: they were all pushed before the wheel's.
            if next_overflow == Some(self.cur_bucket) {
                while let Some(&Reverse(k)) = self.overflow.peek() {
                    if key_time(k) >> BUCKET_BITS > self.cur_bucket {
                        break;
                    }
                    self.overflow.pop();
                    self.current.push(entry(key_time(k), k as u64 & EVENT_MASK));
                }
            }
            let slot = &mut self.wheel[self.cur_bucket as usize % WHEEL];
            self.in_wheel -= slot.len();
            self.current.append(slot);
            match self.current.len() {
                0 => continue,
                n if n <= 16 => insertion_sort_by_offset(&mut self.current),
                _ => {
                    counting_sort_by_offset(&self.current, &mut self.scratch);
                    std::mem::swap(&mut self.current, &mut self.scratch);
                }
            }
            return true;
        }
    }

    /// Time of the earliest event, without removing it.
    pub fn peek_time(&mut self) -> Option<Time> {
        if let Some(&k) = self.early.first() {
            return Some(Time(key_time(k)));
        }
        if self.next == self.current.len() && !self.advance() {
            return None;
        }
        Some(Time(
            self.cur_bucket << BUCKET_BITS | self.current[self.next] >> OFFSET_SHIFT,
        ))
    }

    /// The port of the `n`-th event after the next one to pop, if that event is already
    /// in the bucket being drained and is a port's (PortFree or LinkArrive, the latter
    /// flagged `true`). For prefetching only.
    #[inline]
    pub fn port_event_ahead(&self, n: usize) -> Option<(u32, bool)> {
        let ev = self.current.get(self.next + n)? & EVENT_MASK;
        // PortFree and LinkArrive are kinds 0 and 1 (see `Event::pack`).
        (ev >> 32 <= 1).then_some((ev as u32, ev >> 32 == 1))
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

    #[test]
    fn an_event_scheduled_between_now_and_a_peeked_bucket_still_comes_first() {
        let mut q = EventQueue::default();
        q.push(Time(100), Event::PortFree(0));
        q.push(Time(5_000_000), Event::PortFree(1));
        q.push(Time(5_000_000), Event::PortFree(2));
        assert_eq!(q.pop(), Some((Time(100), Event::PortFree(0))));
        assert_eq!(q.peek_time(), Some(Time(5_000_000)));
        // Earlier than the bucket peek moved to, and a tie with a peeked event.
        q.push(Time(3_000), Event::Rto(7));
        q.push(Time(2_000), Event::Rto(8));
        q.push(Time(5_000_000), Event::Rto(9));
        assert_eq!(q.peek_time(), Some(Time(2_000)));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Time(2_000), Event::Rto(8)),
                (Time(3_000), Event::Rto(7)),
                (Time(5_000_000), Event::PortFree(1)),
                (Time(5_000_000), Event::PortFree(2)),
                (Time(5_000_000), Event::Rto(9)),
            ]
        );
    }
}
