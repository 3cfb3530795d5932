//! Units of the simulation: integer picoseconds and bytes. No floating point
//! ever enters simulation state; floats appear only in reports.

use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time, in picoseconds since the start of the run.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

/// A span of simulated time, in picoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub u64);

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;

impl Time {
    pub const ZERO: Time = Time(0);
    pub fn as_us(self) -> f64 {
        self.0 as f64 / PS_PER_US as f64
    }
}

impl Dur {
    pub fn from_ns_f64(ns: f64) -> Dur {
        Dur((ns * PS_PER_NS as f64).round() as u64)
    }
    pub fn as_us(self) -> f64 {
        self.0 as f64 / PS_PER_US as f64
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0 + d.0)
    }
}
impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        self.0 += d.0
    }
}
impl Sub for Time {
    type Output = Dur;
    fn sub(self, o: Time) -> Dur {
        Dur(self.0 - o.0)
    }
}
impl Add for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0 + d.0)
    }
}

/// A link rate in bits per second, with exact serialization times.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rate {
    bps: u64,
    /// Picoseconds per byte when that is a whole number (the common rates), else 0.
    ps_per_byte: u64,
}

impl Rate {
    pub fn from_gbps(gbps: f64) -> Rate {
        let bps = ((gbps * 1e9).round() as u64).max(1);
        let ps_per_byte = if 8_000_000_000_000 % bps == 0 {
            8_000_000_000_000 / bps
        } else {
            0
        };
        Rate { bps, ps_per_byte }
    }
    pub fn bps(self) -> u64 {
        self.bps
    }
    /// Time to put `bytes` on the wire, rounded up to the next picosecond
    /// (exact at 100/200/400/800/1600 Gbps, where a byte is a whole number of ps).
    #[inline]
    pub fn serialization(self, bytes: u64) -> Dur {
        if self.ps_per_byte != 0 {
            return Dur(bytes * self.ps_per_byte);
        }
        let num = bytes as u128 * 8 * 1_000_000_000_000u128;
        let bps = self.bps as u128;
        Dur(((num + bps - 1) / bps) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_is_exact_at_common_rates() {
        // 4158 B at 800 Gbps = 33,264 bits / 0.8 bit/ps = 41,580 ps.
        assert_eq!(Rate::from_gbps(800.0).serialization(4158), Dur(41_580));
        assert_eq!(Rate::from_gbps(400.0).serialization(64), Dur(1_280));
        assert_eq!(Rate::from_gbps(100.0).serialization(1), Dur(80));
        // 1 B at 3 Gbps = 2666.67 ps: rounded up, never down.
        assert_eq!(Rate::from_gbps(3.0).serialization(1), Dur(2_667));
    }
}
