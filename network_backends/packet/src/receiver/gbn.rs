//! `gbn`: a RoCE receiver for Go-Back-N (CC-CATALOGUE §10). It accepts only the packet it
//! expects next and acknowledges cumulatively (the reply's `seq` is the highest in-order
//! packet). A packet past a gap is discarded and answered, once per gap, by a NACK naming
//! the expected packet; a duplicate is acknowledged again (a receiver that stays silent on
//! duplicates livelocks a flow whose ACK was lost, §13). A trimmed packet is a gap; a
//! trimmed copy of the expected packet is NACKed every time.

use super::{Arrival, ReceiverInit, ReceiverPolicy, Reply};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::transport::flags;

#[derive(Clone, Copy, Default)]
struct Flow {
    expected: u32,
    /// The gap (expected packet) a NACK was already sent for.
    nacked: Option<u32>,
}

pub struct GoBackN {
    flows: Vec<Flow>,
    nacks: u64,
    discarded: u64,
}

pub fn build(init: &ReceiverInit, params: &Params) -> SimResult<Box<dyn ReceiverPolicy>> {
    ParamReader::new("receiver", "gbn", params).finish()?;
    Ok(Box::new(GoBackN {
        flows: vec![Flow::default(); init.n_flows],
        nacks: 0,
        discarded: 0,
    }))
}

impl ReceiverPolicy for GoBackN {
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn on_data(&mut self, a: &Arrival) -> Reply {
        let f = &mut self.flows[a.flow as usize];
        let ecn = a.flags & flags::ECN;
        if a.seq == f.expected && a.flags & flags::TRIMMED == 0 {
            f.expected += 1;
            f.nacked = None;
            return Reply::Ack {
                seq: a.seq,
                flags: ecn,
            };
        }
        if a.seq < f.expected {
            return Reply::Ack {
                seq: f.expected - 1,
                flags: ecn,
            };
        }
        self.discarded += 1;
        // A trimmed copy of the expected packet is a resend lost again: NACKed again, or
        // only the sender's timeout would recover it.
        let resend_trimmed = a.seq == f.expected;
        if f.nacked == Some(f.expected) && !resend_trimmed {
            return Reply::Nothing;
        }
        f.nacked = Some(f.expected);
        self.nacks += 1;
        Reply::Ack {
            seq: f.expected,
            flags: ecn | flags::NACK,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("nacks", self.nacks), ("discarded", self.discarded)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Time;

    #[test]
    fn acks_in_order_nacks_a_gap_once_and_reacks_duplicates() {
        let mut r = build(&ReceiverInit::plain(1), &Params::new()).unwrap();
        let mut at = |seq: u32, f: u8| {
            r.on_data(&Arrival {
                flow: 0,
                seq,
                flags: f,
                now: Time(0),
            })
        };
        assert_eq!(at(0, 0), Reply::Ack { seq: 0, flags: 0 });
        assert_eq!(
            at(1, flags::ECN),
            Reply::Ack {
                seq: 1,
                flags: flags::ECN
            }
        );
        // Packet 2 lost: 3 and 4 are discarded, one NACK for 2.
        assert_eq!(
            at(3, 0),
            Reply::Ack {
                seq: 2,
                flags: flags::NACK
            }
        );
        assert_eq!(at(4, 0), Reply::Nothing);
        // The sender goes back to 2: 2, 3, 4 are accepted; a late duplicate of 1 is re-acked.
        assert_eq!(at(2, 0), Reply::Ack { seq: 2, flags: 0 });
        assert_eq!(at(1, 0), Reply::Ack { seq: 2, flags: 0 });
        assert_eq!(at(3, 0), Reply::Ack { seq: 3, flags: 0 });
        // A trimmed packet is a gap too, NACKed once; when the resend of 4 is trimmed as
        // well it is NACKed again (5 behind it still is not).
        for _ in 0..2 {
            let nack = Reply::Ack {
                seq: 4,
                flags: flags::NACK,
            };
            assert_eq!(at(4, flags::TRIMMED), nack);
            assert_eq!(at(5, 0), Reply::Nothing);
        }
    }
}
