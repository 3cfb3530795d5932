//! `rto`: per-packet retransmission timers and a reorder buffer at the receiver, as the
//! Ethereal paper runs packet spraying and REPS (§4.1: "per-packet timers for recovery
//! and reorder buffers at the receiver", 1 ms). The receiver acknowledges every packet
//! (selectively, as `sack`), but no gap is taken for a loss: a packet is resent only when
//! it has been outstanding for `limits.rto_us`, on its own deadline. On a lossless (PFC)
//! fabric the only losses are frames sent into a failed link, which nothing else reports:
//! a singlepath queue pair on a dead path gets no NACK either (§3.3), so this is also the
//! recovery of Ethereal's subflows there. No parameters.

use super::sack::Sack;
use super::{LossInit, LossRecovery};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;

pub fn build(init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    ParamReader::new("loss", "rto", params).finish()?;
    Ok(Box::new(
        Sack::new("rto", init, &Params::new(), false)?.timers_only(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::feedback;
    use crate::units::{Dur, Time};

    #[test]
    fn a_gap_is_never_a_loss_and_each_packet_times_out_on_its_own_deadline() {
        let init = LossInit {
            flow_bytes: &[100 * 1000],
            payload_bytes: 1000,
        };
        let mut r = build(&init, &Params::new()).unwrap();
        assert!(r.per_packet_timers());
        // Packet k sent at time 10k; packets 0 and 50 are lost, every other one acked.
        for k in 0..100u64 {
            r.next_packet(0, Time(10 * k)).unwrap();
        }
        for k in (1..100).filter(|&k| k != 50) {
            r.on_feedback(&feedback(0, k, Time(995)));
        }
        // 98 packets past the gap: SACK (threshold 32) would resend both; rto resends none.
        assert_eq!(r.next_packet(0, Time(995)), None);
        assert_eq!(r.in_flight_bytes(0), 2 * 1000);
        // Timeout 1000: packet 0 expires at 1000, packet 50 at 1500, each on its own.
        assert_eq!(r.oldest_outstanding(0), Some(Time(0)));
        assert_eq!(r.on_timeout(0, Time(1000), Dur(1000)), 1);
        assert_eq!(r.oldest_outstanding(0), Some(Time(500)));
        assert_eq!(r.on_timeout(0, Time(1499), Dur(1000)), 0);
        assert_eq!(r.on_timeout(0, Time(1500), Dur(1000)), 1);
        let again: Vec<u32> =
            std::iter::from_fn(|| r.next_packet(0, Time(1500)).map(|s| s.seq)).collect();
        assert_eq!(again, vec![0, 50]);
    }

    #[test]
    fn parameters_are_refused() {
        let mut params = Params::new();
        params.insert("threshold".into(), 3u64.into());
        let init = LossInit {
            flow_bytes: &[1000],
            payload_bytes: 1000,
        };
        assert!(build(&init, &params).is_err());
    }
}
