//! Loss recovery: one trait, one file per scheme, a registry by name.
//! The scheme owns each flow's sequence space: what to send next, what an ACK
//! acknowledges, what a timeout declares lost, and when the flow is complete.

mod erasure;
mod gbn;
mod rto;
mod sack;
mod trim;

use crate::config::Params;
use crate::error::SimResult;
use crate::lb::FlowId;
use crate::transport::Feedback;
use crate::units::{Dur, Time};

pub struct LossInit<'a> {
    /// Message size of every flow, in bytes.
    pub flow_bytes: &'a [u64],
    pub payload_bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Send {
    pub seq: u32,
    pub payload: u32,
    pub retransmission: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Payload bytes this ACK newly acknowledged (0 for a duplicate).
    pub newly_acked: u32,
    pub complete: bool,
}

pub trait LossRecovery: std::marker::Send {
    /// A digest of the state this scheme carries from one flow to the next, if a flow's
    /// behaviour depends on nothing else (not on its index, not on a shared random
    /// stream): exact reuse of busy periods (`crate::reuse`) replays a period only when
    /// the digests are equal. None (the default): never replay.
    fn reuse_digest(&self) -> Option<u64> {
        None
    }

    /// The next packet `flow` should send now, recorded as sent; None if nothing is due.
    /// After a None the engine stops asking until the flow's next `on_ack` or
    /// `on_timeout`: nothing may become due only because time passed.
    fn next_packet(&mut self, flow: FlowId, now: Time) -> Option<Send>;

    /// A reply reached the sender (the first family to see it; see `transport`): what it
    /// newly acknowledges, and whether the flow is now complete.
    fn on_feedback(&mut self, fb: &Feedback) -> AckOutcome;

    /// Declare lost what has been outstanding for `rto` or longer; returns how many packets.
    fn on_timeout(&mut self, flow: FlowId, now: Time, rto: Dur) -> u32;

    /// Send time of the oldest packet still awaiting its ACK.
    fn oldest_outstanding(&self, flow: FlowId) -> Option<Time>;

    fn in_flight_bytes(&self, flow: FlowId) -> u64;

    /// True only if `next_packet` would return None now (no side effects). After an ACK the
    /// engine leaves such a flow out of its send loop; false is always correct, just slower.
    fn nothing_due(&self, _flow: FlowId) -> bool {
        false
    }

    /// True if every packet has its own timer: after a timeout the flow's timer is re-armed
    /// at the deadline of the oldest packet still outstanding. False: one timer per flow,
    /// restarted a full timeout after each expiry (RFC 6298 §5.5).
    fn per_packet_timers(&self) -> bool {
        false
    }

    /// Whether switches should trim the data packets they cannot queue (and receivers NACK
    /// them) rather than drop them.
    fn wants_trimming(&self) -> bool {
        false
    }

    /// The receiver policy it relies on (`receiver::names`).
    fn receiver(&self) -> &'static str {
        "ack"
    }

    /// Named counts for reports.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// A hint: the ACK of `flow`'s packet `seq` arrives soon, so start loading what
    /// `on_ack` reads. Results must not depend on it.
    fn prefetch_ack(&self, _flow: FlowId, _seq: u32) {}
}

type Factory = fn(&LossInit, &Params) -> SimResult<Box<dyn LossRecovery>>;

const REGISTRY: &[(&str, Factory)] = &[
    ("erasure", erasure::build),
    ("sack", sack::build),
    ("trim", trim::build),
    ("gbn", gbn::build),
    ("rto", rto::build),
];

pub fn names() -> Vec<&'static str> {
    crate::registry::names(REGISTRY)
}

pub fn build(name: &str, init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    crate::registry::find("loss", REGISTRY, name)?(init, params)
}

#[cfg(test)]
pub(crate) fn feedback(flow: FlowId, seq: u32, now: Time) -> Feedback {
    Feedback {
        flow,
        now,
        seq,
        echo: 0,
        flags: 0,
        rtt: Dur(0),
        hops: 2,
        int: Default::default(),
        newly_acked: 0,
        complete: false,
        in_flight: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_due_predicts_every_schemes_next_packet() {
        // Random sends, ACKs (some out of order, some duplicates) and timeouts on flows of
        // a few packets: before each send, `nothing_due` must say whether it yields None.
        let bytes = [600_000u64, 4096, 90_000];
        for name in names() {
            let init = LossInit {
                flow_bytes: &bytes,
                payload_bytes: 4096,
            };
            let mut loss = build(name, &init, &Params::new()).unwrap();
            let (mut x, mut now, mut checked) = (99u64, 0u64, [0u32; 2]);
            let mut sent: Vec<Vec<u32>> = vec![Vec::new(); bytes.len()];
            for _ in 0..3000 {
                x = crate::rng::mix64(x);
                now += 1 + x % 500;
                let f = (x >> 8) as usize % bytes.len();
                match (x >> 16) % 8 {
                    0..=3 => {
                        let predicted = loss.nothing_due(f as FlowId);
                        let got = loss.next_packet(f as FlowId, Time(now));
                        assert_eq!(predicted, got.is_none(), "{name}, flow {f}");
                        checked[predicted as usize] += 1;
                        if let Some(s) = got {
                            sent[f].push(s.seq);
                        }
                    }
                    4..=6 if !sent[f].is_empty() => {
                        let seq = sent[f][(x >> 24) as usize % sent[f].len()];
                        loss.on_feedback(&feedback(f as FlowId, seq, Time(now)));
                    }
                    _ => {
                        loss.on_timeout(f as FlowId, Time(now), Dur(2_000));
                    }
                }
            }
            assert!(checked[0] > 100 && checked[1] > 100, "{name}: {checked:?}");
        }
    }
}
