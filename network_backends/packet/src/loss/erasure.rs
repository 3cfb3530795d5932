//! `erasure`: ideal rateless erasure coding with zero overhead (OFAN paper §4).
//! Every packet is a fresh symbol, any m bytes of symbols decode the message.
//! The sender stops once acknowledged + in-flight bytes cover the message (it
//! "stops opportunistically in the final BDP", footnote 3) and sends replacement
//! symbols only for packets a timeout declares lost.

use super::{AckOutcome, LossInit, LossRecovery, Send};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::prefetch::prefetch_addr;
use crate::transport::Feedback;
use crate::units::{Dur, Time};
use std::collections::VecDeque;

/// A symbol in one word: its send time << 16 | its payload, or 0 once settled (acked
/// or presumed lost). Event times fit in 48 bits (`events::MAX_TIME`), and payloads in
/// 16 (`SimConfig::validate` rejects frames over `config::MAX_FRAME_BYTES`). Half the
/// size of an enum of the two, so that `INLINE` of them fit in a flow's cache line.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Symbol(u64);

impl Symbol {
    const DONE: Symbol = Symbol(0);
    fn in_flight(sent: Time, payload: u32) -> Symbol {
        debug_assert!(sent <= crate::events::MAX_TIME && payload > 0 && payload <= u16::MAX as u32);
        Symbol(sent.0 << 16 | payload as u64)
    }
    /// (send time, payload) of a symbol still in flight.
    fn outstanding(self) -> Option<(Time, u32)> {
        (self != Symbol::DONE).then_some((Time(self.0 >> 16), self.0 as u16 as u32))
    }
}

/// Symbols a flow keeps in its own record. An all-to-all's flows (thousands, each with a
/// few packets in flight) fit, so an ACK finds its slot on the line `prefetch_ack` loads,
/// not behind a pointer read from it; a larger window spills to the heap whole.
const INLINE: usize = 4;

/// A flow's window: symbols from `base_seq` on, settled ones dropped off the front.
enum Window {
    /// Symbol `s` at `symbols[s % INLINE]`.
    Inline { len: u32, symbols: [Symbol; INLINE] },
    /// A window larger than `INLINE`, oldest first; back inline once it drains.
    Spilled(VecDeque<Symbol>),
}

impl Default for Window {
    fn default() -> Self {
        Window::Inline {
            len: 0,
            symbols: [Symbol::DONE; INLINE],
        }
    }
}

/// One cache line, aligned: with thousands of flows, an ACK's record is usually a miss.
/// Byte counts are kept as what is left to acknowledge and what is left to send for the
/// first time or again, so that both fit beside the inline window.
#[derive(Default)]
#[repr(C, align(64))]
struct Flow {
    /// Message bytes not yet acknowledged (the flow is complete at 0).
    unacked: u64,
    /// Message bytes neither acknowledged nor in flight (nothing to send at 0).
    unsent: u64,
    /// Sequence number of the window's first symbol.
    base_seq: u32,
    window: Window,
}

const _: () = assert!(std::mem::size_of::<Flow>() == 64);

/// Up to this many flows (256 KiB of records), `prefetch_ack` reads the flow's record.
const FEW_FLOWS: usize = 4096;

pub struct Erasure {
    flows: Vec<Flow>,
    payload: u32,
}

pub fn build(init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    ParamReader::new("loss", "erasure", params).finish()?;
    Ok(Box::new(Erasure::new(init)))
}

impl Erasure {
    fn new(init: &LossInit) -> Erasure {
        let flows = init
            .flow_bytes
            .iter()
            .map(|&bytes| Flow {
                unacked: bytes,
                unsent: bytes,
                ..Flow::default()
            })
            .collect();
        Erasure {
            flows,
            payload: init.payload_bytes,
        }
    }
}

impl Flow {
    fn in_flight(&self) -> u64 {
        self.unacked - self.unsent
    }

    fn window_len(&self) -> u32 {
        match &self.window {
            Window::Inline { len, .. } => *len,
            Window::Spilled(symbols) => symbols.len() as u32,
        }
    }

    /// The window's symbols, oldest first.
    fn symbols(&self) -> impl Iterator<Item = Symbol> + '_ {
        let base = self.base_seq;
        let (inline, spilled) = match &self.window {
            Window::Inline { len, symbols } => (Some((*len, symbols)), None),
            Window::Spilled(symbols) => (None, Some(symbols)),
        };
        let inline = inline.into_iter().flat_map(move |(len, symbols)| {
            (0..len).map(move |i| symbols[(base + i) as usize % INLINE])
        });
        inline.chain(spilled.into_iter().flatten().copied())
    }

    fn push(&mut self, symbol: Symbol) {
        let seq = self.base_seq + self.window_len();
        match &mut self.window {
            Window::Inline { len, symbols } if (*len as usize) < INLINE => {
                symbols[seq as usize % INLINE] = symbol;
                *len += 1;
            }
            Window::Inline { .. } => {
                let mut spilled = VecDeque::with_capacity(4 * INLINE);
                spilled.extend(self.symbols());
                spilled.push_back(symbol);
                self.window = Window::Spilled(spilled);
            }
            Window::Spilled(symbols) => symbols.push_back(symbol),
        }
    }

    fn slot(&mut self, seq: u32) -> Option<&mut Symbol> {
        let offset = seq.checked_sub(self.base_seq)?;
        match &mut self.window {
            Window::Inline { len, symbols } => {
                (offset < *len).then(|| &mut symbols[seq as usize % INLINE])
            }
            Window::Spilled(symbols) => symbols.get_mut(offset as usize),
        }
    }

    fn symbols_mut(&mut self) -> impl Iterator<Item = &mut Symbol> {
        let base = self.base_seq as usize % INLINE;
        let (inline, spilled) = match &mut self.window {
            Window::Inline { len, symbols } => {
                // The window runs from `base` to the array's end, then wraps.
                let (front, back) = symbols.split_at_mut(base);
                let wrapped = back.iter_mut().chain(front.iter_mut());
                (Some(wrapped.take(*len as usize)), None)
            }
            Window::Spilled(symbols) => (None, Some(symbols.iter_mut())),
        };
        inline
            .into_iter()
            .flatten()
            .chain(spilled.into_iter().flatten())
    }

    fn settle_front(&mut self) {
        match &mut self.window {
            Window::Inline { len, symbols } => {
                while *len > 0 && symbols[self.base_seq as usize % INLINE] == Symbol::DONE {
                    *len -= 1;
                    self.base_seq += 1;
                }
            }
            Window::Spilled(symbols) => {
                while symbols.front() == Some(&Symbol::DONE) {
                    symbols.pop_front();
                    self.base_seq += 1;
                }
                if symbols.is_empty() {
                    self.window = Window::default();
                }
            }
        }
    }
}

impl LossRecovery for Erasure {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn next_packet(&mut self, flow: FlowId, now: Time) -> Option<Send> {
        let f = &mut self.flows[flow as usize];
        if f.unsent == 0 {
            return None;
        }
        let payload = f.unsent.min(self.payload as u64) as u32;
        let seq = f.base_seq + f.window_len();
        f.push(Symbol::in_flight(now, payload));
        f.unsent -= payload as u64;
        Some(Send {
            seq,
            payload,
            retransmission: false,
        })
    }

    fn on_feedback(&mut self, fb: &Feedback) -> AckOutcome {
        let (flow, seq) = (fb.flow, fb.seq);
        let f = &mut self.flows[flow as usize];
        let mut newly = 0;
        let mut trimmed = 0;
        if let Some(slot) = f.slot(seq) {
            if let Some((_, payload)) = slot.outstanding() {
                if fb.nack() {
                    trimmed = payload;
                } else {
                    newly = payload;
                }
            }
            *slot = Symbol::DONE;
        }
        // Trimmed on its way: in flight to unsent, a replacement symbol covers it.
        f.unsent += trimmed as u64;
        // An ACK for a symbol already presumed lost counts nothing: its replacement covers it.
        // In flight to acknowledged: `unsent` stays.
        f.unacked -= newly as u64;
        f.settle_front();
        AckOutcome {
            newly_acked: newly,
            complete: f.unacked == 0,
        }
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time, rto: Dur) -> u32 {
        let f = &mut self.flows[flow as usize];
        let (mut lost, mut lost_bytes) = (0, 0);
        for slot in f.symbols_mut() {
            if let Some((sent, payload)) = slot.outstanding() {
                if sent + rto <= now {
                    // Late ACKs of a lost symbol are ignored; a replacement symbol covers it.
                    lost_bytes += payload as u64;
                    *slot = Symbol::DONE;
                    lost += 1;
                }
            }
        }
        f.unsent += lost_bytes;
        f.settle_front();
        lost
    }

    fn oldest_outstanding(&self, flow: FlowId) -> Option<Time> {
        self.flows[flow as usize]
            .symbols()
            .find_map(|s| s.outstanding().map(|(sent, _)| sent))
    }

    fn in_flight_bytes(&self, flow: FlowId) -> u64 {
        self.flows[flow as usize].in_flight()
    }

    fn prefetch_ack(&self, flow: FlowId, seq: u32) {
        prefetch_addr(self.flows.as_ptr().wrapping_add(flow as usize));
        // A spilled window's slot lies behind a pointer in the record. With few flows
        // the records stay cached, so reading one here is cheap and the slot can load
        // early too; with many, the read would stall here instead of in `on_feedback`.
        if self.flows.len() <= FEW_FLOWS {
            let f = &self.flows[flow as usize];
            if let Window::Spilled(symbols) = &f.window {
                if let Some(slot) = symbols.get(seq.wrapping_sub(f.base_seq) as usize) {
                    prefetch_addr(slot);
                }
            }
        }
    }

    fn nothing_due(&self, flow: FlowId) -> bool {
        self.flows[flow as usize].unsent == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_keeps_the_latest_event_time_and_the_largest_payload() {
        let (t, p) = (
            crate::events::MAX_TIME,
            crate::config::MAX_FRAME_BYTES as u32,
        );
        assert_eq!(Symbol::in_flight(t, p).outstanding(), Some((t, p)));
        assert_eq!(
            Symbol::in_flight(Time(0), 1).outstanding(),
            Some((Time(0), 1))
        );
        assert_eq!(Symbol::DONE.outstanding(), None);
    }

    #[test]
    fn sends_exactly_the_message_then_replaces_lost_symbols() {
        let bytes = [10_000u64];
        let mut e = build(
            &LossInit {
                flow_bytes: &bytes,
                payload_bytes: 4096,
            },
            &Params::new(),
        )
        .unwrap();
        let sizes: Vec<u32> =
            std::iter::from_fn(|| e.next_packet(0, Time(0)).map(|s| s.payload)).collect();
        assert_eq!(sizes, vec![4096, 4096, 1808]);
        assert!(
            !e.on_feedback(&super::super::feedback(0, 0, Time(1)))
                .complete
        );
        assert_eq!(e.on_timeout(0, Time(100), Dur(50)), 2); // seq 1 and 2 lost
        let replacement = e.next_packet(0, Time(100)).unwrap();
        assert_eq!((replacement.seq, replacement.payload), (3, 4096));
        assert_eq!(
            e.on_feedback(&super::super::feedback(0, 3, Time(150))),
            AckOutcome {
                newly_acked: 4096,
                complete: false
            }
        );
        assert!(e.next_packet(0, Time(150)).is_some());
    }

    /// Every symbol ever sent, kept in full: what the window must agree with.
    #[derive(Default)]
    struct Reference {
        outstanding: Vec<Option<(Time, u32)>>,
        unacked: u64,
        unsent: u64,
    }

    #[test]
    fn the_inline_and_spilled_windows_agree_with_a_full_record_of_symbols() {
        // Random sends, ACKs (in and out of order, duplicates, unsent sequence numbers)
        // and timeouts, with bursts that push a window past `INLINE` and ACK runs that
        // drain it back inline: every answer must match the reference.
        let bytes = [300 * 4096 + 77, 3 * 4096, 1];
        let mut e = Erasure::new(&LossInit {
            flow_bytes: &bytes,
            payload_bytes: 4096,
        });
        let mut reference: Vec<Reference> = bytes
            .iter()
            .map(|&b| Reference {
                unacked: b,
                unsent: b,
                ..Reference::default()
            })
            .collect();
        let (mut x, mut now) = (7u64, 0u64);
        let (mut spills, mut returns, mut widest) = (0, 0, 0);
        for _ in 0..20_000 {
            x = crate::rng::mix64(x);
            now += 1 + x % 300;
            let f = (x >> 8) as usize % bytes.len();
            let (flow, r) = (f as FlowId, &mut reference[f]);
            let spilled = |e: &Erasure| matches!(e.flows[f].window, Window::Spilled(_));
            let before = spilled(&e);
            match (x >> 16) % 16 {
                0..=7 => {
                    let got = e.next_packet(flow, Time(now));
                    let want = (r.unsent > 0).then(|| {
                        let payload = r.unsent.min(4096) as u32;
                        r.unsent -= payload as u64;
                        r.outstanding.push(Some((Time(now), payload)));
                        (r.outstanding.len() as u32 - 1, payload)
                    });
                    assert_eq!(got.map(|s| (s.seq, s.payload)), want);
                }
                8..=13 => {
                    let seq = (x >> 24) as u32 % (r.outstanding.len() as u32 + 2);
                    let newly = match r.outstanding.get_mut(seq as usize) {
                        Some(slot) => slot.take().map_or(0, |(_, payload)| payload),
                        None => 0,
                    };
                    r.unacked -= newly as u64;
                    let want = AckOutcome {
                        newly_acked: newly,
                        complete: r.unacked == 0,
                    };
                    assert_eq!(
                        e.on_feedback(&super::super::feedback(flow, seq, Time(now))),
                        want
                    );
                }
                _ => {
                    let rto = Dur(500 + (x >> 32) % 3000);
                    let mut lost = 0;
                    for slot in r.outstanding.iter_mut() {
                        if slot.is_some_and(|(sent, _)| sent + rto <= Time(now)) {
                            r.unsent += slot.take().unwrap().1 as u64;
                            lost += 1;
                        }
                    }
                    assert_eq!(e.on_timeout(flow, Time(now), rto), lost);
                }
            }
            let want_oldest = r.outstanding.iter().flatten().map(|&(sent, _)| sent).next();
            assert_eq!(e.oldest_outstanding(flow), want_oldest);
            assert_eq!(e.in_flight_bytes(flow), r.unacked - r.unsent);
            assert_eq!(e.nothing_due(flow), r.unsent == 0);
            let after = spilled(&e);
            widest = widest.max(e.flows[f].window_len());
            spills += (!before && after) as u32;
            returns += (before && !after) as u32;
        }
        assert!(
            spills > 2 && returns > 2 && widest > 4 * INLINE as u32,
            "{spills} spills, {returns} returns, widest window {widest}"
        );
    }
}
