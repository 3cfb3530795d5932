//! `red`: drop-tail at the buffer limit, and RED/ECN marking at dequeue (CC-CATALOGUE §0):
//! a departing data frame is marked with a probability rising linearly from 0 at `kmin`
//! to `pmax` at `kmax` of the buffer, and always above, on the backlog it leaves behind
//! (`switch.ecn`, `switch.ecn_kmin`, `switch.ecn_kmax`, `switch.ecn_pmax`, default 1;
//! kmin = kmax gives DCTCP's step marking at K; DCQCN's paper uses Pmax = 1 %).
//! With `trim` (default: whether the loss-recovery scheme relies on it), a data frame that
//! does not fit is trimmed to its header instead of dropped (NDP, UET: the arrival is
//! trimmed; UET trims a queued packet instead half the time).

use super::{Overflow, QdiscInit, QueueDiscipline};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_seed, mix64};
use crate::topology::PortId;

pub struct Red {
    /// Never marks at or below `min`, always at or above `max` (bytes of backlog: kmin and
    /// kmax of the buffer, rounded down and up).
    min: u64,
    max: u64,
    kmin: f64,
    kmax: f64,
    pmax: f64,
    seed: u64,
    enabled: bool,
    trim: bool,
}

pub fn build(init: &QdiscInit, params: &Params) -> SimResult<Box<dyn QueueDiscipline>> {
    let mut p = ParamReader::new("qdisc", "red", params);
    let trim = p.bool("trim", init.trim)?;
    p.finish()?;
    let s = init.switch;
    let buffer = s.buffer_bytes as f64;
    Ok(Box::new(Red {
        min: (s.ecn_kmin * buffer).floor() as u64,
        max: (s.ecn_kmax * buffer).ceil() as u64,
        kmin: s.ecn_kmin * buffer,
        kmax: s.ecn_kmax * buffer,
        pmax: s.ecn_pmax,
        seed: derive_seed(init.seed, "switch.ecn", 0),
        enabled: s.ecn,
        trim,
    }))
}

impl QueueDiscipline for Red {
    /// A mark depends on the backlog and a draw keyed by the port's bytes since the
    /// busy period began (`Simulation::draw_bytes`).
    fn reuse_digest(&self) -> Option<u64> {
        Some(0)
    }

    fn dequeue_floor(&self) -> u64 {
        if self.enabled {
            self.min
        } else {
            u64::MAX
        }
    }

    /// The draw is a hash of the port and its byte count (`port_tx_bytes`: since the busy
    /// period began), so it does not depend on the order in which ports are caught up.
    fn on_dequeue(&mut self, port: PortId, backlog: u64, port_tx_bytes: u64) -> bool {
        if backlog <= self.min {
            false
        } else if backlog >= self.max {
            true
        } else {
            let draw = mix64(mix64(self.seed ^ port as u64) ^ port_tx_bytes);
            // The top 53 bits as a uniform value in [0, 1).
            let u = (draw >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            u < (backlog as f64 - self.kmin) / (self.kmax - self.kmin) * self.pmax
        }
    }

    fn on_overflow(&mut self, _port: PortId) -> Overflow {
        if self.trim {
            Overflow::Trim
        } else {
            Overflow::Drop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SwitchConfig;

    #[test]
    fn marks_with_probability_rising_to_pmax_at_kmax_and_always_above() {
        // 100 KB buffer, Kmin 5 KB, Kmax 200 KB... as fractions: 5 % and 50 %, Pmax 1 %.
        let switch = SwitchConfig {
            buffer_bytes: 100_000,
            ecn_kmin: 0.05,
            ecn_kmax: 0.5,
            ecn_pmax: 0.01,
            ..SwitchConfig::default()
        };
        let (link, packet) = (Default::default(), Default::default());
        let init = QdiscInit {
            switch: &switch,
            link: &link,
            packet: &packet,
            seed: 7,
            trim: false,
        };
        let mut red = build(&init, &crate::config::Params::new()).unwrap();
        let n = 400_000u64;
        let rate = |red: &mut Box<dyn QueueDiscipline>, backlog: u64| {
            (0..n)
                .filter(|i| red.on_dequeue(3, backlog, i * 4158))
                .count() as f64
                / n as f64
        };
        // Halfway between Kmin and Kmax: Pmax/2 = 0.5 % (binomial sd 0.011 %).
        let mid = rate(&mut red, 27_500);
        assert!((mid - 0.005).abs() < 0.0005, "{mid}");
        assert_eq!(rate(&mut red, 5_000), 0.0);
        assert_eq!(rate(&mut red, 50_000), 1.0);
    }
}
