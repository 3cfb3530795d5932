//! `gbn`: Go-Back-N with NACKs, as RoCE NICs recover (CC-CATALOGUE §10). The receiver
//! (`receiver::gbn`) accepts packets only in order and acknowledges cumulatively; on a gap
//! it NACKs the packet it expects, and the sender goes back to it and resends everything
//! from there. A retransmission timeout does the same when the tail or an ACK is lost
//! (peers without one hang forever on a lost tail packet, §13).

use super::{AckOutcome, LossInit, LossRecovery, Send};
use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::params::ParamReader;
use crate::transport::Feedback;
use crate::units::{Dur, Time};

struct Flow {
    n_packets: u32,
    last_payload: u32,
    /// Lowest unacknowledged packet (everything below it arrived in order).
    una: u32,
    /// Next packet to send; below `sent_max` a retransmission.
    next: u32,
    sent_max: u32,
    /// When `una` was last sent (the timeout's reference).
    una_sent: Time,
    sent_at: Vec<Time>,
}

pub struct GoBackN {
    flows: Vec<Flow>,
    payload: u32,
    rewinds: u64,
}

pub fn build(init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    ParamReader::new("loss", "gbn", params).finish()?;
    let payload = init.payload_bytes;
    let flows = (init.flow_bytes.iter())
        .map(|&bytes| {
            let n = bytes.div_ceil(payload as u64) as u32;
            Flow {
                n_packets: n,
                last_payload: (bytes - (n as u64 - 1) * payload as u64) as u32,
                una: 0,
                next: 0,
                sent_max: 0,
                una_sent: Time::ZERO,
                sent_at: vec![Time::ZERO; n as usize],
            }
        })
        .collect();
    Ok(Box::new(GoBackN {
        flows,
        payload,
        rewinds: 0,
    }))
}

impl Flow {
    /// Payload bytes of packets `from..to`.
    fn bytes(&self, from: u32, to: u32, full: u32) -> u64 {
        if from >= to {
            return 0;
        }
        let short = if to == self.n_packets {
            full - self.last_payload
        } else {
            0
        };
        (to - from) as u64 * full as u64 - short as u64
    }

    /// Everything below `upto` has arrived; returns the bytes newly acknowledged.
    fn advance(&mut self, upto: u32, full: u32) -> u32 {
        let upto = upto.min(self.n_packets);
        if upto <= self.una {
            return 0;
        }
        let newly = self.bytes(self.una, upto, full);
        self.una = upto;
        self.next = self.next.max(upto);
        if self.una < self.n_packets {
            self.una_sent = self.sent_at[self.una as usize];
        }
        newly as u32
    }
}

impl LossRecovery for GoBackN {
    /// Per-flow state and constants only.
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn next_packet(&mut self, flow: FlowId, now: Time) -> Option<Send> {
        let full = self.payload;
        let f = &mut self.flows[flow as usize];
        if f.next >= f.n_packets {
            return None;
        }
        let seq = f.next;
        f.next += 1;
        f.sent_at[seq as usize] = now;
        if seq == f.una {
            f.una_sent = now;
        }
        let retransmission = seq < f.sent_max;
        f.sent_max = f.sent_max.max(f.next);
        let payload = if seq + 1 == f.n_packets {
            f.last_payload
        } else {
            full
        };
        Some(Send {
            seq,
            payload,
            retransmission,
        })
    }

    fn on_feedback(&mut self, fb: &Feedback) -> AckOutcome {
        let full = self.payload;
        let f = &mut self.flows[fb.flow as usize];
        let newly = if fb.nack() {
            // Everything below the expected packet arrived; go back to it.
            let newly = f.advance(fb.seq, full);
            if f.next > f.una {
                f.next = f.una;
                self.rewinds += 1;
            }
            newly
        } else {
            f.advance(fb.seq.saturating_add(1), full)
        };
        AckOutcome {
            newly_acked: newly,
            complete: f.una == f.n_packets,
        }
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time, rto: Dur) -> u32 {
        let f = &mut self.flows[flow as usize];
        if f.una >= f.next || f.una_sent + rto > now {
            return 0;
        }
        let lost = f.next - f.una;
        f.next = f.una;
        self.rewinds += 1;
        lost
    }

    fn oldest_outstanding(&self, flow: FlowId) -> Option<Time> {
        let f = &self.flows[flow as usize];
        (f.una < f.next).then_some(f.una_sent)
    }

    fn in_flight_bytes(&self, flow: FlowId) -> u64 {
        let f = &self.flows[flow as usize];
        f.bytes(f.una, f.next, self.payload)
    }

    fn nothing_due(&self, flow: FlowId) -> bool {
        let f = &self.flows[flow as usize];
        f.next >= f.n_packets
    }

    fn receiver(&self) -> &'static str {
        "gbn"
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("rewinds", self.rewinds)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nack_after_one_drop_resends_exactly_the_window_behind_it() {
        let init = LossInit {
            flow_bytes: &[10 * 1000 - 300],
            payload_bytes: 1000,
        };
        let mut g = build(&init, &Params::new()).unwrap();
        let sent: Vec<u32> = (0..10)
            .map(|i| g.next_packet(0, Time(i)).unwrap().seq)
            .collect();
        assert_eq!(sent, (0..10).collect::<Vec<_>>());
        assert!(g.nothing_due(0));
        // Packets 0-2 arrive; 3 is dropped; the receiver NACKs 3 at packet 4's arrival.
        let ack = |seq, nack| {
            let mut fb = crate::loss::feedback(0, seq, Time(20));
            fb.flags = if nack {
                crate::transport::flags::NACK
            } else {
                0
            };
            fb
        };
        for s in 0..3 {
            assert_eq!(g.on_feedback(&ack(s, false)).newly_acked, 1000);
        }
        assert_eq!(g.in_flight_bytes(0), 7 * 1000 - 300);
        let out = g.on_feedback(&ack(3, true));
        assert_eq!((out.newly_acked, out.complete), (0, false));
        // Exactly packets 3..9 again, as retransmissions, then nothing.
        let again: Vec<Send> = std::iter::from_fn(|| g.next_packet(0, Time(30))).collect();
        assert_eq!(
            again.iter().map(|s| s.seq).collect::<Vec<_>>(),
            (3..10).collect::<Vec<_>>()
        );
        assert!(again.iter().all(|s| s.retransmission));
        assert_eq!(again.last().unwrap().payload, 700);
        let done = g.on_feedback(&ack(9, false));
        assert_eq!((done.newly_acked, done.complete), (7 * 1000 - 300, true));
    }

    #[test]
    fn a_timeout_goes_back_to_the_oldest_unacknowledged_packet() {
        let init = LossInit {
            flow_bytes: &[4000],
            payload_bytes: 1000,
        };
        let mut g = build(&init, &Params::new()).unwrap();
        for i in 0..4 {
            g.next_packet(0, Time(i * 10));
        }
        assert_eq!(g.oldest_outstanding(0), Some(Time(0)));
        assert_eq!(g.on_timeout(0, Time(50), Dur(100)), 0);
        assert_eq!(g.on_timeout(0, Time(100), Dur(100)), 4);
        assert_eq!(
            g.next_packet(0, Time(100))
                .map(|s| (s.seq, s.retransmission)),
            Some((0, true))
        );
    }
}
