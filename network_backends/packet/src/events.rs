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
    /// A timer its congestion controller armed for a flow.
    CcTimer(u32),
    /// The fabric's i-th scheduled change (a link failing, detected, repaired; routes
    /// converging).
    Fabric(u32),
    /// A receiver's pull pacer (`ReceiverPolicy::on_pacer`) at a host.
    Pacer(u32),
    /// Priority flow control at a port (`sim::pfc`): its id and what happens (PAUSE,
    /// RESUME arriving there, or a deadlock check), packed by `sim::pfc::code`.
    Pfc(u32),
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
            Event::CcTimer(i) => (5, i),
            Event::Fabric(i) => (6, i),
            Event::Pfc(i) => (7, i),
            Event::Pacer(i) => (8, i),
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
            4 => Event::Rto(id),
            5 => Event::CcTimer(id),
            6 => Event::Fabric(id),
            7 => Event::Pfc(id),
            _ => Event::Pacer(id),
        }
    }
}

/// A two-level calendar queue. Time is cut into buckets of `2^BUCKET_BITS` ps, and
/// buckets into spans of `NEAR` buckets (~262 ns). Events in the current span go
/// unsorted into their bucket on the near wheel; events in the next `FAR - 1` spans
/// (~16 us) are appended to their span's list on the far wheel and spread over the
/// near wheel when their span begins; later ones (timers) wait in a heap. The bucket
/// being drained is sorted once, then read front to back.
///
/// Both wheels stay small (their slot headers fit in L1), and link arrivals (a frame
/// time plus a link's latency ahead) cost two appends instead of a heap push and pop.
/// Wheel entries are one `u64` without a sequence number: a bucket holds its events in
/// push order, and an event reaches a bucket from the heap, the far wheel or directly
/// only in that order in time (each level's horizon only moves forward), so heap
/// events (moved in (time, seq) order) come first, then far ones, then direct ones. A
/// stable sort by offset therefore gives (time, push order) exactly.
const BUCKET_BITS: u32 = 8; // 256 ps
const NEAR_BITS: u32 = 10;
const NEAR: usize = 1 << NEAR_BITS;
const FAR: usize = 64;
/// Bits of time a far-wheel entry keeps: the bucket within its span and the offset.
const SPAN_BITS: u32 = BUCKET_BITS + NEAR_BITS;

/// A heap event as a single sortable integer: time (48 bits, ps: up to 281 s),
/// insertion sequence (44 bits), event kind (4 bits) and id (32 bits).
type Key = u128;
const TIME_BITS: u32 = 48;
const SEQ_BITS: u32 = 44;
const EVENT_BITS: u32 = 36;
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

/// Near-wheel entries: offset in the bucket (top BUCKET_BITS bits), then the event.
const OFFSET_SHIFT: u32 = 64 - BUCKET_BITS;

#[inline]
fn entry(at: u64, ev: u64) -> u64 {
    (at & ((1 << BUCKET_BITS) - 1)) << OFFSET_SHIFT | ev
}

/// Far-wheel entries: time within the span, then the event.
#[inline]
fn far_entry(at: u64, ev: u64) -> u64 {
    (at & ((1 << SPAN_BITS) - 1)) << EVENT_BITS | ev
}

/// Stable sort of a bucket by offset (push order already breaks ties). Long buckets
/// first go through one counting pass on the offset's top 4 bits, which leaves the
/// final insertion sort only short moves within each sixteenth of the bucket.
fn sort_bucket(v: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    const COARSE_SHIFT: u32 = 64 - 4;
    if v.len() > 16 {
        let mut start = [0u32; 16];
        for &e in v.iter() {
            start[(e >> COARSE_SHIFT) as usize] += 1;
        }
        let mut sum = 0;
        for c in start.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        scratch.clear();
        scratch.resize(v.len(), 0);
        for &e in v.iter() {
            let c = &mut start[(e >> COARSE_SHIFT) as usize];
            scratch[*c as usize] = e;
            *c += 1;
        }
        std::mem::swap(v, scratch);
    }
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

pub struct EventQueue {
    /// Entries of the bucket being drained, sorted; `next` indexes the first not yet popped.
    current: Vec<u64>,
    next: usize,
    /// Index of the bucket being drained (absolute: time >> BUCKET_BITS).
    cur_bucket: u64,
    /// Span of the bucket being drained (cur_bucket >> NEAR_BITS).
    cur_span: u64,
    near: Vec<Vec<u64>>,
    in_near: usize,
    far: Vec<Vec<u64>>,
    in_far: usize,
    heap: BinaryHeap<Reverse<Key>>,
    /// Events pushed for a bucket before the current one, as full keys, sorted. Only a
    /// caller whose `pop_before` declined (the next event is then already the current
    /// bucket's) and who then schedules something earlier puts anything here.
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
            cur_span: 0,
            near: (0..NEAR).map(|_| Vec::new()).collect(),
            in_near: 0,
            far: (0..FAR).map(|_| Vec::new()).collect(),
            in_far: 0,
            heap: BinaryHeap::new(),
            early: Vec::new(),
            scratch: Vec::new(),
            seq: 0,
            popped: 0,
        }
    }
}

impl EventQueue {
    // Always inlined: called a few times per event, its prologue and epilogue alone
    // were 2.6% of all instructions (cachegrind, k=8).
    #[inline(always)]
    pub fn push(&mut self, at: Time, ev: Event) {
        // Callers keep times below MAX_TIME (config validation bounds max_time_ms).
        debug_assert!(at <= MAX_TIME && self.seq < 1 << SEQ_BITS);
        let b = at.0 >> BUCKET_BITS;
        let ahead = (b >> NEAR_BITS).wrapping_sub(self.cur_span);
        if ahead == 0 && b > self.cur_bucket {
            self.near[b as usize % NEAR].push(entry(at.0, ev.pack()));
            self.in_near += 1;
        } else if ahead.wrapping_sub(1) < FAR as u64 - 1 {
            self.far[(b >> NEAR_BITS) as usize % FAR].push(far_entry(at.0, ev.pack()));
            self.in_far += 1;
        } else {
            self.push_other(at, ev);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_other(&mut self, at: Time, ev: Event) {
        let b = at.0 >> BUCKET_BITS;
        if b > self.cur_bucket {
            self.heap.push(Reverse(key(at.0, self.seq, ev.pack())));
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
        self.pop_before(Time(u64::MAX))
    }

    /// The earliest event if it comes before `limit`; otherwise it stays queued.
    #[inline]
    pub fn pop_before(&mut self, limit: Time) -> Option<(Time, Event)> {
        if let Some(&k) = self.early.first() {
            if key_time(k) >= limit.0 {
                return None;
            }
            self.early.remove(0);
            self.popped += 1;
            return Some((Time(key_time(k)), Event::unpack(k as u64 & EVENT_MASK)));
        }
        if self.next == self.current.len() && !self.advance() {
            return None;
        }
        let e = self.current[self.next];
        let at = Time(self.cur_bucket << BUCKET_BITS | e >> OFFSET_SHIFT);
        if at >= limit {
            return None;
        }
        self.next += 1;
        self.popped += 1;
        Some((at, Event::unpack(e & EVENT_MASK)))
    }

    /// Move to the next bucket that holds events; false if there are none at all.
    fn advance(&mut self) -> bool {
        self.current.clear();
        self.next = 0;
        loop {
            if self.in_near == 0 {
                // The current span is done: on to the next span with events.
                let span = if self.in_far > 0 {
                    self.cur_span + 1
                } else {
                    match self.heap.peek() {
                        None => return false,
                        Some(&Reverse(k)) => key_time(k) >> SPAN_BITS,
                    }
                };
                self.enter_span(span);
                continue;
            }
            self.cur_bucket += 1;
            // Events left on the near wheel all lie in the rest of the current span.
            debug_assert_eq!(self.cur_bucket >> NEAR_BITS, self.cur_span);
            let slot = &mut self.near[self.cur_bucket as usize % NEAR];
            if slot.is_empty() {
                continue;
            }
            self.in_near -= slot.len();
            std::mem::swap(&mut self.current, slot);
            sort_bucket(&mut self.current, &mut self.scratch);
            return true;
        }
    }

    /// Start span `span` (its first bucket not yet drained): spread its heap events,
    /// then its far-wheel events, over the near wheel.
    fn enter_span(&mut self, span: u64) {
        debug_assert!(self.in_near == 0 && span > self.cur_span);
        self.cur_span = span;
        // One before the span's first bucket, so `advance` drains that bucket next.
        self.cur_bucket = (span << NEAR_BITS).wrapping_sub(1);
        while let Some(&Reverse(k)) = self.heap.peek() {
            let t = key_time(k);
            if t >> SPAN_BITS != span {
                break;
            }
            self.heap.pop();
            self.near[(t >> BUCKET_BITS) as usize % NEAR].push(entry(t, k as u64 & EVENT_MASK));
            self.in_near += 1;
        }
        let slot = std::mem::take(&mut self.far[span as usize % FAR]);
        self.in_far -= slot.len();
        for &e in &slot {
            let t = e >> EVENT_BITS;
            self.near[(t >> BUCKET_BITS) as usize % NEAR].push(entry(t, e & EVENT_MASK));
        }
        self.in_near += slot.len();
        // Hand the buffer back, keeping its capacity for the span FAR spans later.
        let mut slot = slot;
        slot.clear();
        self.far[span as usize % FAR] = slot;
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
    fn an_event_scheduled_before_a_declined_bucket_still_comes_first() {
        let mut q = EventQueue::default();
        q.push(Time(100), Event::PortFree(0));
        q.push(Time(5_000_000), Event::PortFree(1));
        q.push(Time(5_000_000), Event::PortFree(2));
        assert_eq!(
            q.pop_before(Time(101)),
            Some((Time(100), Event::PortFree(0)))
        );
        // Declined at the limit (exclusive), after moving on to the later bucket.
        assert_eq!(q.pop_before(Time(5_000_000)), None);
        // Earlier than that bucket, and a tie with its events.
        q.push(Time(3_000), Event::Rto(7));
        q.push(Time(2_000), Event::Rto(8));
        q.push(Time(5_000_000), Event::Rto(9));
        assert_eq!(q.pop_before(Time(2_000)), None);
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
