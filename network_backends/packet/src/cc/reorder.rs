//! Loss inferred from acknowledgements, as a window-based sender with duplicate ACKs
//! sees it: per flow, the lowest packet not yet acknowledged (TCP's cumulative ACK) and
//! the highest acknowledged. When the highest runs more than `threshold` packets ahead
//! (the dup-ACK count of TCP's fast retransmit, SACK's reordering threshold, OFAN §4), a
//! loss episode opens; it closes once everything up to the highest acknowledged at its
//! start is acknowledged, so one loss (or one burst) is counted once.
//!
//! A bitmap of the acknowledged packets between the two is kept in 64-bit words (words
//! below the lowest unacknowledged are dropped): its size follows the reordering, not
//! the flow. Under `erasure` loss recovery nothing is resent, so a lost packet stays a
//! hole: one episode, which never closes.

use std::collections::VecDeque;

#[derive(Default)]
pub(super) struct Reorder {
    /// Sequence number of bit 0 of `words[0]` (a multiple of 64).
    base: u32,
    words: VecDeque<u64>,
    /// Lowest packet not yet acknowledged.
    cum: u32,
    /// One past the highest acknowledged packet.
    top: u32,
    /// The open episode ends once `cum` passes this.
    recover: Option<u32>,
}

impl Reorder {
    /// Records the first ACK of packet `seq`; true if it opens a loss episode.
    pub fn ack(&mut self, seq: u32, threshold: u32) -> bool {
        if seq < self.cum {
            return false;
        }
        let off = (seq - self.base) as usize;
        let (w, bit) = (off / 64, 1u64 << (off % 64));
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.top = self.top.max(seq + 1);
        if seq == self.cum {
            self.advance();
        }
        if self.recover.is_some_and(|r| self.cum > r) {
            self.recover = None;
        }
        if self.recover.is_none() && self.top - 1 > self.cum && self.top - 1 - self.cum > threshold
        {
            self.recover = Some(self.top - 1);
            return true;
        }
        false
    }

    /// Moves `cum` past the run of acknowledged packets it points at.
    fn advance(&mut self) {
        loop {
            let off = (self.cum - self.base) as usize;
            let (w, shift) = (off / 64, off % 64);
            let Some(&word) = self.words.get(w) else {
                break;
            };
            let ones = (!(word >> shift)).trailing_zeros().min(64 - shift as u32);
            self.cum += ones;
            if (ones as usize) < 64 - shift {
                break;
            }
        }
        while self.cum - self.base >= 64 {
            self.words.pop_front();
            self.base += 64;
        }
    }

    #[cfg(test)]
    pub fn lowest_unacked(&self) -> u32 {
        self.cum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cumulative_point_skips_runs_and_episodes_open_once_per_hole() {
        let mut r = Reorder::default();
        // In order: no episode; the cumulative point follows across word boundaries.
        for s in 0..130 {
            assert!(!r.ack(s, 3));
        }
        assert_eq!(r.lowest_unacked(), 130);
        // 130 lost: 131..134 are four ahead (highest - lowest = 4 > 3) -> one episode.
        let opened: Vec<bool> = (131..140).map(|s| r.ack(s, 3)).collect();
        assert_eq!(opened.iter().filter(|&&o| o).count(), 1);
        assert!(opened[3], "opens when 134 - 130 = 4 > 3");
        // A duplicate changes nothing; the retransmission fills the hole and the
        // cumulative point jumps over all ten.
        assert!(!r.ack(135, 3));
        assert!(!r.ack(130, 3));
        assert_eq!(r.lowest_unacked(), 140);
        // A new hole after the episode closed opens a new one.
        let again: usize = (141..150).map(|s| r.ack(s, 3) as usize).sum();
        assert_eq!(again, 1);
        // Reordering within the threshold opens nothing.
        let mut q = Reorder::default();
        for s in [1, 0, 3, 2, 5, 6, 4, 7] {
            assert!(!q.ack(s, 3), "{s}");
        }
        assert_eq!(q.lowest_unacked(), 8);
    }
}
