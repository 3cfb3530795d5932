//! `ack`: one ACK per data packet about that packet, echoing its ECN mark; a packet
//! trimmed on its way is answered with a NACK.

use super::{Arrival, ReceiverInit, ReceiverPolicy, Reply};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::transport::flags;

pub struct PerPacketAck;

pub fn build(_init: &ReceiverInit, params: &Params) -> SimResult<Box<dyn ReceiverPolicy>> {
    ParamReader::new("receiver", "ack", params).finish()?;
    Ok(Box::new(PerPacketAck))
}

impl ReceiverPolicy for PerPacketAck {
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    #[inline]
    fn on_data(&mut self, a: &Arrival) -> Reply {
        let nack = if a.flags & flags::TRIMMED != 0 {
            flags::NACK
        } else {
            0
        };
        Reply::Ack {
            seq: a.seq,
            flags: a.flags & (flags::ECN | flags::TRIMMED) | nack,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_the_mark_and_answers_a_trimmed_packet_with_a_nack() {
        let mut r = PerPacketAck;
        let at = |f: u8| Arrival {
            flow: 0,
            seq: 3,
            flags: f,
            now: crate::units::Time(0),
        };
        assert_eq!(r.on_data(&at(0)), Reply::Ack { seq: 3, flags: 0 });
        assert_eq!(
            r.on_data(&at(flags::ECN)),
            Reply::Ack {
                seq: 3,
                flags: flags::ECN
            }
        );
        assert_eq!(
            r.on_data(&at(flags::TRIMMED)),
            Reply::Ack {
                seq: 3,
                flags: flags::TRIMMED | flags::NACK
            }
        );
    }
}
