//! `sack`: selective acknowledgement (OFAN paper §4). Each ACK names the packet it
//! acknowledges; when the highest acknowledged sequence number runs more than
//! `threshold` packets ahead of the lowest unacknowledged one, every missing packet
//! in between is retransmitted once. Timeouts (`limits.rto_us`) are the last resort.

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
}

pub struct Sack {
    flows: Vec<Flow>,
    payload: u32,
    threshold: u32,
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
                }
            })
            .collect();
        Ok(Sack {
            flows,
            payload,
            threshold,
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
        if p.sent_at[s] != NEVER {
            f.latest_acked_send = f.latest_acked_send.max(p.sent_at[s]);
        }
        let payload = f.payload_of(seq, full);
        f.in_flight = f.in_flight.saturating_sub(payload as u64);
        f.highest_acked = Some(f.highest_acked.map_or(seq, |h| h.max(seq)));
        while f.lowest_unacked < f.n_packets && p.acked[f.lowest_unacked as usize] {
            f.lowest_unacked += 1;
        }
        if let Some(high) = f.highest_acked {
            if high > f.lowest_unacked && high - f.lowest_unacked > threshold {
                for s in f.lowest_unacked..high {
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
