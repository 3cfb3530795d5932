//! `sack`: selective acknowledgement (OFAN paper §4). Each ACK names the packet it
//! acknowledges; when the highest acknowledged sequence number runs more than
//! `threshold` packets ahead of the lowest unacknowledged one, every missing packet
//! in between is retransmitted once. Timeouts (`limits.rto_us`) are the last resort.
//!
//! Packet spraying reorders by up to a window: on 1-BDP queues under REPS a fixed
//! threshold of 32 resends most packets of a permutation needlessly. `reorder_window` w
//! (UET's SLEEK: 1.5) replaces the threshold with max(⌈w × window⌉, 5) packets, the window
//! being the most packets the flow has had in flight (SLEEK takes the congestion window;
//! in flight shrinks at a flow's tail while its holes may still be overtaken): a packet
//! sent after a hole overtakes it only while both are in flight, so w ≥ 1 tolerates any
//! reordering shorter than a round trip. Each hole is then judged by its own distance
//! below the highest ACK (as FACK), not all holes once the lowest is far enough.

use super::{AckOutcome, LossInit, LossRecovery, Send};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::prefetch::prefetch_addr;
use crate::transport::Feedback;
use crate::units::{Dur, Time};
use std::collections::VecDeque;

const NEVER: Time = Time(u64::MAX);

/// A flow's per-packet state: allocated when it first sends, freed once every packet is
/// acknowledged (an iteration declares tens of millions of flows, a few run at a time).
struct Packets {
    acked: Vec<bool>,
    /// Time each packet was last sent (NEVER before its first transmission).
    sent_at: Vec<Time>,
    /// Queued for retransmission and not yet resent.
    queued: Vec<bool>,
    retransmit: VecDeque<u32>,
}

impl Packets {
    fn new(n: u32) -> Box<Packets> {
        Box::new(Packets {
            acked: vec![false; n as usize],
            sent_at: vec![NEVER; n as usize],
            queued: vec![false; n as usize],
            retransmit: VecDeque::new(),
        })
    }

    fn queue(&mut self, seq: u32) {
        if !self.queued[seq as usize] && !self.acked[seq as usize] {
            self.queued[seq as usize] = true;
            self.retransmit.push_back(seq);
        }
    }
}

struct Flow {
    n_packets: u32,
    last_payload: u32,
    /// None before the first send and after the last packet is acknowledged.
    packets: Option<Box<Packets>>,
    next_new: u32,
    lowest_unacked: u32,
    highest_acked: Option<u32>,
    /// Latest send time among acknowledged packets: anything missing that was sent
    /// before it and lies below the highest ACK is a reordering or a loss.
    latest_acked_send: Time,
    acked_count: u32,
    in_flight: u64,
    /// The most bytes ever in flight: the window SLEEK's tolerance scales with (in flight
    /// itself shrinks at a flow's tail while its holes may still be overtaken).
    peak_in_flight: u64,
}

pub struct Sack {
    flows: Vec<Flow>,
    payload: u32,
    threshold: u32,
    /// SLEEK's out-of-order tolerance in packets in flight, 2^-20 (0: the fixed threshold).
    reorder_window: u64,
    /// Holes declared lost by the threshold (not by a timeout or a NACK).
    fast_resends: u64,
    /// Switches trim what they cannot queue (the `trim` scheme).
    trimming: bool,
    /// Each packet times out on its own deadline (the `rto` scheme).
    per_packet_timers: bool,
}

pub fn build(init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    Ok(Box::new(Sack::new("sack", init, params, false)?))
}

impl Sack {
    pub(super) fn new(
        name: &str,
        init: &LossInit,
        params: &Params,
        trimming: bool,
    ) -> SimResult<Sack> {
        let mut p = ParamReader::new("loss", name, params);
        let threshold = p.u32_min("threshold", 32, 1)?;
        let reorder_window = p.f64_in("reorder_window", 0.0, 0.0, 1e3)?;
        p.finish()?;
        let payload = init.payload_bytes;
        let flows = init
            .flow_bytes
            .iter()
            .map(|&bytes| {
                let n = bytes.div_ceil(payload as u64) as u32;
                let last_payload = (bytes - (n as u64 - 1) * payload as u64) as u32;
                Flow {
                    n_packets: n,
                    last_payload,
                    packets: None,
                    next_new: 0,
                    lowest_unacked: 0,
                    highest_acked: None,
                    latest_acked_send: Time::ZERO,
                    acked_count: 0,
                    in_flight: 0,
                    peak_in_flight: 0,
                }
            })
            .collect();
        Ok(Sack {
            flows,
            payload,
            threshold,
            reorder_window: (reorder_window * (1u64 << 20) as f64).round() as u64,
            fast_resends: 0,
            trimming,
            per_packet_timers: false,
        })
    }

    /// No gap ever counts as a loss (the receiver's reorder buffer absorbs any order):
    /// only a packet's own timer declares it lost (the `rto` scheme).
    pub(super) fn timers_only(mut self) -> Sack {
        self.threshold = u32::MAX;
        self.per_packet_timers = true;
        self
    }
}

/// ⌈x · w⌉ for w in 2^-20.
fn mul_fixed(x: u64, w: u64) -> u64 {
    (x * w).div_ceil(1 << 20)
}

impl Flow {
    fn payload_of(&self, seq: u32, full: u32) -> u32 {
        if seq + 1 == self.n_packets {
            self.last_payload
        } else {
            full
        }
    }

    fn complete(&self) -> bool {
        self.acked_count == self.n_packets
    }

    /// Splits the flow into its scalars and its packets (allocated on first use).
    fn parts(&mut self) -> (&mut Flow, Box<Packets>) {
        let p = self
            .packets
            .take()
            .unwrap_or_else(|| Packets::new(self.n_packets));
        (self, p)
    }

    /// Puts the packets back, or frees them once every packet is acknowledged.
    fn keep(&mut self, p: Box<Packets>) {
        if !self.complete() {
            self.packets = Some(p);
        }
    }
}

impl LossRecovery for Sack {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn next_packet(&mut self, flow: FlowId, now: Time) -> Option<Send> {
        let full = self.payload;
        let f = &mut self.flows[flow as usize];
        if f.complete() {
            return None;
        }
        let (f, mut p) = f.parts();
        let mut send = None;
        while let Some(seq) = p.retransmit.pop_front() {
            p.queued[seq as usize] = false;
            if !p.acked[seq as usize] {
                p.sent_at[seq as usize] = now;
                // Its earlier copy was counted out of flight when declared missing.
                let payload = f.payload_of(seq, full);
                f.in_flight += payload as u64;
                f.peak_in_flight = f.peak_in_flight.max(f.in_flight);
                send = Some(Send {
                    seq,
                    payload,
                    retransmission: true,
                });
                break;
            }
        }
        if send.is_none() && f.next_new < f.n_packets {
            let seq = f.next_new;
            f.next_new += 1;
            p.sent_at[seq as usize] = now;
            let payload = f.payload_of(seq, full);
            f.in_flight += payload as u64;
            f.peak_in_flight = f.peak_in_flight.max(f.in_flight);
            send = Some(Send {
                seq,
                payload,
                retransmission: false,
            });
        }
        f.keep(p);
        send
    }

    fn on_feedback(&mut self, fb: &Feedback) -> AckOutcome {
        let (flow, seq) = (fb.flow, fb.seq);
        let full = self.payload;
        let threshold = self.threshold;
        let f = &mut self.flows[flow as usize];
        if f.complete() || seq >= f.n_packets || f.packets.is_none() {
            // A late copy after the last ACK (or before any send: none can be).
            return AckOutcome {
                newly_acked: 0,
                complete: f.complete(),
            };
        }
        let (f, mut p) = f.parts();
        let s = seq as usize;
        if fb.nack() {
            // The receiver asks for `seq` again (it was trimmed on its way): resend it now.
            if !p.acked[s] && p.sent_at[s] != NEVER {
                f.in_flight = f.in_flight.saturating_sub(f.payload_of(seq, full) as u64);
                p.queue(seq);
                p.sent_at[s] = NEVER;
            }
            f.keep(p);
            return AckOutcome {
                newly_acked: 0,
                complete: false,
            };
        }
        if p.acked[s] {
            f.keep(p);
            return AckOutcome {
                newly_acked: 0,
                complete: false,
            };
        }
        p.acked[s] = true;
        f.acked_count += 1;
        let payload = f.payload_of(seq, full);
        if p.sent_at[s] != NEVER {
            f.latest_acked_send = f.latest_acked_send.max(p.sent_at[s]);
            f.in_flight = f.in_flight.saturating_sub(payload as u64);
        }
        // (A copy declared lost and not yet resent left `in_flight` then: its late ACK
        // takes nothing off again.)
        f.highest_acked = Some(f.highest_acked.map_or(seq, |h| h.max(seq)));
        while f.lowest_unacked < f.n_packets && p.acked[f.lowest_unacked as usize] {
            f.lowest_unacked += 1;
        }
        let limit = if self.reorder_window > 0 {
            let packets = f.peak_in_flight.div_ceil(full as u64);
            (mul_fixed(packets, self.reorder_window) as u32).max(5)
        } else {
            threshold
        };
        if let Some(high) = f.highest_acked {
            if high > f.lowest_unacked && high - f.lowest_unacked > limit {
                // OFAN's SACK resends every hole below the highest ACK; with SLEEK's
                // tolerance each hole is judged by its own distance (as FACK), or a real
                // loss at the bottom would resend every packet reordered above it.
                let top = if self.reorder_window > 0 {
                    high - limit
                } else {
                    high
                };
                for s in f.lowest_unacked..top {
                    // Only copies sent before an acknowledged packet count as missing, so a
                    // retransmission is not retransmitted again by the next ACK.
                    let sent = p.sent_at[s as usize];
                    if !p.acked[s as usize]
                        && !p.queued[s as usize]
                        && sent != NEVER
                        && sent < f.latest_acked_send
                    {
                        let lost = f.payload_of(s, full) as u64;
                        f.in_flight = f.in_flight.saturating_sub(lost);
                        p.queue(s);
                        p.sent_at[s as usize] = NEVER;
                        self.fast_resends += 1;
                    }
                }
            }
        }
        let complete = f.complete();
        f.keep(p);
        AckOutcome {
            newly_acked: payload,
            complete,
        }
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time, rto: Dur) -> u32 {
        let full = self.payload;
        let f = &mut self.flows[flow as usize];
        if f.packets.is_none() {
            return 0;
        }
        let (f, mut p) = f.parts();
        let mut lost = 0;
        for s in f.lowest_unacked..f.next_new {
            let sent = p.sent_at[s as usize];
            if !p.acked[s as usize] && sent != NEVER && sent + rto <= now {
                let bytes = f.payload_of(s, full) as u64;
                f.in_flight = f.in_flight.saturating_sub(bytes);
                p.queue(s);
                p.sent_at[s as usize] = NEVER;
                lost += 1;
            }
        }
        f.keep(p);
        lost
    }

    fn oldest_outstanding(&self, flow: FlowId) -> Option<Time> {
        let f = &self.flows[flow as usize];
        let p = f.packets.as_ref()?;
        (f.lowest_unacked..f.next_new)
            .filter(|&s| !p.acked[s as usize])
            .map(|s| p.sent_at[s as usize])
            .filter(|&t| t != NEVER)
            .min()
    }

    fn in_flight_bytes(&self, flow: FlowId) -> u64 {
        self.flows[flow as usize].in_flight
    }

    fn prefetch_ack(&self, flow: FlowId, _seq: u32) {
        prefetch_addr(self.flows.as_ptr().wrapping_add(flow as usize));
    }

    fn wants_trimming(&self) -> bool {
        self.trimming
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("fast_resends", self.fast_resends)]
    }

    fn per_packet_timers(&self) -> bool {
        self.per_packet_timers
    }

    fn nothing_due(&self, flow: FlowId) -> bool {
        // `next_packet` skips queued packets acknowledged meanwhile.
        let f = &self.flows[flow as usize];
        f.next_new >= f.n_packets
            && (f.packets.as_ref())
                .is_none_or(|p| p.retransmit.iter().all(|&seq| p.acked[seq as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sack(bytes: u64, threshold: u64) -> Box<dyn LossRecovery> {
        let mut params = Params::new();
        params.insert("threshold".into(), threshold.into());
        with(bytes, params)
    }

    fn with(bytes: u64, params: Params) -> Box<dyn LossRecovery> {
        build(
            &LossInit {
                flow_bytes: &[bytes],
                payload_bytes: 1000,
            },
            &params,
        )
        .unwrap()
    }

    #[test]
    fn gap_beyond_threshold_retransmits_each_missing_packet_once() {
        let mut s = sack(10_000, 3);
        for i in 0..10 {
            s.next_packet(0, Time(i)).unwrap();
        }
        // packet 0 and 2 missing; ACKs for 1 and 3 keep the gap (high - lowest) at 3, not above
        for seq in [1, 3] {
            s.on_feedback(&super::super::feedback(0, seq, Time(10)));
        }
        assert_eq!(s.next_packet(0, Time(10)), None);
        s.on_feedback(&super::super::feedback(0, 5, Time(11))); // gap 5 - 0 = 5 > 3: retransmit 0, 2 and 4
        let r: Vec<u32> =
            std::iter::from_fn(|| s.next_packet(0, Time(12)).map(|p| p.seq)).collect();
        assert_eq!(r, vec![0, 2, 4]);
        s.on_feedback(&super::super::feedback(0, 6, Time(13))); // the copies sent at t=12 are younger than packet 6: no duplicates
        assert_eq!(s.next_packet(0, Time(13)), None);
        s.on_feedback(&super::super::feedback(0, 0, Time(14)));
        s.on_feedback(&super::super::feedback(0, 2, Time(14)));
        s.on_feedback(&super::super::feedback(0, 4, Time(14)));
        for seq in [7, 8] {
            s.on_feedback(&super::super::feedback(0, seq, Time(15)));
        }
        assert!(
            s.on_feedback(&super::super::feedback(0, 9, Time(16)))
                .complete
        );
    }

    #[test]
    fn a_late_ack_of_a_packet_declared_lost_takes_nothing_more_out_of_flight() {
        // 50 packets out; ACKs of 1..=33 pass the threshold of 32: packet 0 is declared
        // lost (out of flight) and queued. Its first copy's ACK then beats the resend:
        // 16 packets (34..50) are in flight, not 15.
        let mut s = sack(50_000, 32);
        for i in 0..50 {
            s.next_packet(0, Time(i)).unwrap();
        }
        for seq in 1..=33 {
            s.on_feedback(&super::super::feedback(0, seq, Time(100)));
        }
        assert_eq!(s.in_flight_bytes(0), 16 * 1000);
        s.on_feedback(&super::super::feedback(0, 0, Time(101)));
        assert_eq!(s.in_flight_bytes(0), 16 * 1000);
        // Nothing to resend (all 50 sent once).
        assert_eq!(s.next_packet(0, Time(102)), None);
    }

    #[test]
    fn sleek_tolerates_a_share_of_the_window_and_judges_each_hole_by_its_distance() {
        // 20 packets in flight at most; w = 0.5: holes more than max(10, 5) packets below
        // the highest ACK are lost. Holes 0 and 9 under ACKs of 1..=12: 0 is 12 below, lost;
        // 9 is 3 below, a reordering (OFAN's rule would resend both).
        let mut params = Params::new();
        params.insert("reorder_window".into(), 0.5.into());
        let mut s = with(20_000, params);
        for i in 0..20 {
            s.next_packet(0, Time(i)).unwrap();
        }
        for seq in (1..=12).filter(|&q| q != 9) {
            s.on_feedback(&super::super::feedback(0, seq, Time(30)));
        }
        let r: Vec<u32> =
            std::iter::from_fn(|| s.next_packet(0, Time(31)).map(|p| p.seq)).collect();
        assert_eq!(r, vec![0]);
        // The tail: in flight falls to 7 packets (13..20), the tolerance stays 10 (the peak):
        // ACKs of 13..=18 put hole 9 at 9 below, still not lost; 19 puts it at 10, not above.
        for seq in 13..=19 {
            s.on_feedback(&super::super::feedback(0, seq, Time(32)));
        }
        assert_eq!(s.next_packet(0, Time(33)), None);
        // One hole declared lost by the tolerance.
        assert_eq!(s.counters(), vec![("fast_resends", 1)]);
    }

    #[test]
    fn timeout_resends_old_unacked_packets_and_completion_needs_all() {
        let mut s = sack(2_500, 32);
        let sizes: Vec<u32> =
            std::iter::from_fn(|| s.next_packet(0, Time(0)).map(|p| p.payload)).collect();
        assert_eq!(sizes, vec![1000, 1000, 500]);
        s.on_feedback(&super::super::feedback(0, 0, Time(5)));
        assert_eq!(s.on_timeout(0, Time(100), Dur(100)), 2);
        assert_eq!(s.next_packet(0, Time(100)).unwrap().seq, 1);
        assert_eq!(s.next_packet(0, Time(100)).unwrap().seq, 2);
        assert!(
            !s.on_feedback(&super::super::feedback(0, 1, Time(101)))
                .complete
        );
        assert!(
            s.on_feedback(&super::super::feedback(0, 2, Time(102)))
                .complete
        );
    }
}
