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
use crate::units::{Dur, Time};
use std::collections::VecDeque;

/// A symbol in one word: its send time << 16 | its payload, or 0 once settled (acked
/// or presumed lost). Event times fit in 48 bits (`events::MAX_TIME`), and payloads in
/// 16 (`SimConfig::validate` rejects frames over `config::MAX_FRAME_BYTES`). Half the
/// size of an enum of the two: with thousands of flows an ACK's slot is usually a cache
/// miss, and (c) of the benchmarks touches megabytes of them.
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

#[derive(Default)]
struct Flow {
    bytes: u64,
    acked: u64,
    in_flight: u64,
    /// Symbols from `base_seq` on; settled ones are popped off the front.
    window: VecDeque<Symbol>,
    base_seq: u32,
}

pub struct Erasure {
    flows: Vec<Flow>,
    payload: u32,
}

pub fn build(init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    ParamReader::new("loss", "erasure", params).finish()?;
    let flows = init
        .flow_bytes
        .iter()
        .map(|&bytes| Flow {
            bytes,
            ..Flow::default()
        })
        .collect();
    Ok(Box::new(Erasure {
        flows,
        payload: init.payload_bytes,
    }))
}

impl Flow {
    fn settle_front(&mut self) {
        while self.window.front() == Some(&Symbol::DONE) {
            self.window.pop_front();
            self.base_seq += 1;
        }
    }
}

impl LossRecovery for Erasure {
    fn next_packet(&mut self, flow: FlowId, now: Time) -> Option<Send> {
        let f = &mut self.flows[flow as usize];
        let covered = f.acked + f.in_flight;
        if covered >= f.bytes {
            return None;
        }
        let payload = (f.bytes - covered).min(self.payload as u64) as u32;
        let seq = f.base_seq + f.window.len() as u32;
        f.window.push_back(Symbol::in_flight(now, payload));
        f.in_flight += payload as u64;
        Some(Send {
            seq,
            payload,
            retransmission: false,
        })
    }

    fn on_ack(&mut self, flow: FlowId, seq: u32, _now: Time) -> AckOutcome {
        let f = &mut self.flows[flow as usize];
        let mut newly = 0;
        if seq >= f.base_seq {
            if let Some(slot) = f.window.get_mut((seq - f.base_seq) as usize) {
                if let Some((_, payload)) = slot.outstanding() {
                    f.in_flight -= payload as u64;
                    newly = payload;
                }
                *slot = Symbol::DONE;
            }
        }
        // An ACK for a symbol already presumed lost counts nothing: its replacement covers it.
        f.acked += newly as u64;
        f.settle_front();
        AckOutcome {
            newly_acked: newly,
            complete: f.acked >= f.bytes,
        }
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time, rto: Dur) -> u32 {
        let f = &mut self.flows[flow as usize];
        let mut lost = 0;
        for slot in f.window.iter_mut() {
            if let Some((sent, payload)) = slot.outstanding() {
                if sent + rto <= now {
                    // Late ACKs of a lost symbol are ignored; a replacement symbol covers it.
                    f.in_flight -= payload as u64;
                    *slot = Symbol::DONE;
                    lost += 1;
                }
            }
        }
        f.settle_front();
        lost
    }

    fn oldest_outstanding(&self, flow: FlowId) -> Option<Time> {
        self.flows[flow as usize]
            .window
            .iter()
            .find_map(|s| s.outstanding().map(|(sent, _)| sent))
    }

    fn in_flight_bytes(&self, flow: FlowId) -> u64 {
        self.flows[flow as usize].in_flight
    }

    fn prefetch_ack(&self, flow: FlowId) {
        prefetch_addr(self.flows.as_ptr().wrapping_add(flow as usize));
    }

    fn nothing_due(&self, flow: FlowId) -> bool {
        let f = &self.flows[flow as usize];
        f.acked + f.in_flight >= f.bytes
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
        assert!(!e.on_ack(0, 0, Time(1)).complete);
        assert_eq!(e.on_timeout(0, Time(100), Dur(50)), 2); // seq 1 and 2 lost
        let replacement = e.next_packet(0, Time(100)).unwrap();
        assert_eq!((replacement.seq, replacement.payload), (3, 4096));
        assert_eq!(
            e.on_ack(0, 3, Time(150)),
            AckOutcome {
                newly_acked: 4096,
                complete: false
            }
        );
        assert!(e.next_packet(0, Time(150)).is_some());
    }
}
