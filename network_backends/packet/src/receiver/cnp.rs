//! The congestion notification point (DCQCN's NP; CC-CATALOGUE §2), wrapped around the
//! receiver policy the loss recovery chose when the CC scheme asks for one
//! (`CongestionControl::cnp_interval`): a reply to a CE-marked data packet carries the CNP
//! flag, at most once per flow per interval. The reply already goes on the receiver's
//! control priority, ahead of its data, as a CNP does. A marked packet the inner policy
//! answers with nothing (a Go-Back-N receiver past a gap) sends no CNP and leaves the
//! interval open for the next marked packet.

use super::{Arrival, ReceiverPolicy, Reply};
use crate::transport::flags;
use crate::units::{Dur, Time};

pub struct Cnp {
    inner: Box<dyn ReceiverPolicy>,
    interval: Dur,
    /// When each flow's last CNP went out.
    last: Vec<Option<Time>>,
    cnps: u64,
}

pub fn wrap(
    inner: Box<dyn ReceiverPolicy>,
    interval: Dur,
    n_flows: usize,
) -> Box<dyn ReceiverPolicy> {
    Box::new(Cnp {
        inner,
        interval,
        last: vec![None; n_flows],
        cnps: 0,
    })
}

impl ReceiverPolicy for Cnp {
    fn on_data(&mut self, a: &Arrival) -> Reply {
        let reply = self.inner.on_data(a);
        let Reply::Ack { seq, flags: f } = reply else {
            return reply;
        };
        if a.flags & flags::ECN == 0 {
            return reply;
        }
        let last = &mut self.last[a.flow as usize];
        if last.is_some_and(|t| a.now < t + self.interval) {
            return reply;
        }
        *last = Some(a.now);
        self.cnps += 1;
        Reply::Ack {
            seq,
            flags: f | flags::CNP,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = self.inner.counters();
        c.push(("cnps", self.cnps));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Params;
    use crate::receiver::ReceiverInit;

    #[test]
    fn a_marked_flow_gets_one_cnp_per_interval() {
        let inner = crate::receiver::build("ack", &ReceiverInit::plain(2), &Params::new()).unwrap();
        let mut r = wrap(inner, Dur(50_000_000), 2);
        let mut at = |flow: u32, us: u64, f: u8| match r.on_data(&Arrival {
            flow,
            seq: 0,
            flags: f,
            now: Time(us * 1_000_000),
        }) {
            Reply::Ack { flags, .. } => flags & flags::CNP != 0,
            Reply::Nothing => panic!("the ack policy always replies"),
        };
        // 50 µs interval: marked packets at 0, 10, 49 µs give one CNP; 50 µs the next;
        // an unmarked packet none; flow 1 has its own interval.
        assert!(at(0, 0, flags::ECN));
        assert!(!at(0, 10, flags::ECN));
        assert!(!at(0, 49, flags::ECN));
        assert!(at(1, 49, flags::ECN));
        assert!(!at(0, 60, 0));
        assert!(at(0, 50 + 10, flags::ECN));
        assert!(!at(0, 109, flags::ECN));
        assert!(at(0, 110, flags::ECN));
        assert_eq!(r.counters().last(), Some(&("cnps", 4)));
    }
}
