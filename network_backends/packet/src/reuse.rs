//! Reuse of busy periods. An FSDP iteration runs the same collectives layer after layer;
//! when one starts on an idle network its packets meet only each other. A *period* runs
//! from a flow start on a quiescent engine (`Simulation::quiescent`) until the network is
//! empty again. Its log (every start handed to the engine and every completion the engine
//! handed back, in order) is kept; a later period that starts on a quiescent engine with
//! the same state digest and makes the same calls gets the logged completions without
//! being simulated.
//!
//! Exact mode: a log entry matches only if the call is identical: a start's (time since
//! the period began, src, dst, bytes) and how far the engine had run when it came (its
//! *progress*, below), a completion's place among the starts. The engine is
//! deterministic and, by `Simulation::reuse_digest`, depends on nothing else, so the
//! replayed completions are those a simulation would give: bit-identical results. When a
//! call does not match (another collective starts inside the period), the period is
//! *materialized*: the engine is given the matched calls, in order, and runs on.
//!
//! Fast mode (opt-in): periods match on the fabric's state (links down, routes) and the
//! starts' times and sizes alone, whatever the schemes' state (random streams, pointers,
//! caches). An approximation: its error is measured (docs/iterations.md, tests/test_reuse.py).
//!
//! Progress codes (times relative to the period's first start, clamped at 0: before it,
//! the engine holds no live event): 2·L after a call that ran every event before L and
//! returned nothing, 2·t + 1 right after a completion at t. A start's effect depends on
//! the events processed before it: equal codes at equal log positions, equal engines.

use crate::sim::reuse::{FlowOutcome, StatsDelta};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReuseMode {
    /// Every period simulated.
    Off,
    /// Replays only what a simulation would give bit for bit (the default).
    Exact,
    /// Also replays periods whose schemes' state differs (measured error).
    Fast,
}

impl ReuseMode {
    pub fn parse(s: &str) -> Result<ReuseMode, String> {
        match s {
            "off" => Ok(ReuseMode::Off),
            "exact" => Ok(ReuseMode::Exact),
            "fast" => Ok(ReuseMode::Fast),
            _ => Err(format!(
                "reuse: unknown mode `{s}`: expected `off`, `exact` or `fast`"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReuseMode::Off => "off",
            ReuseMode::Exact => "exact",
            ReuseMode::Fast => "fast",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    Start {
        rel: i64,
        src: u32,
        dst: u32,
        bytes: u64,
        progress: i64,
    },
    /// The completion of the period's `start`-th start.
    Done {
        rel: i64,
        start: u32,
        outcome: FlowOutcome,
    },
}

/// A finished period.
pub struct Recording {
    pub entries: Vec<Entry>,
    /// When its network was empty again (relative to its first start).
    pub quiet_rel: i64,
    pub stats: StatsDelta,
}

/// Most recordings kept per digest (newest replace the oldest).
const MAX_PER_KEY: usize = 32;
/// A period still open after this many log entries is no longer recorded.
pub const MAX_ENTRIES: usize = 1 << 22;

/// Finished periods by state digest.
#[derive(Default)]
pub struct Library {
    recordings: Vec<Recording>,
    by_key: HashMap<u64, Vec<u32>>,
}

impl Library {
    pub fn add(&mut self, key: u64, r: Recording) {
        let list = self.by_key.entry(key).or_default();
        if list.len() == MAX_PER_KEY {
            let old = list.remove(0);
            self.recordings[old as usize] = Recording {
                entries: Vec::new(),
                quiet_rel: 0,
                stats: StatsDelta::default(),
            };
        }
        list.push(self.recordings.len() as u32);
        self.recordings.push(r);
    }

    pub fn get(&self, i: u32) -> &Recording {
        &self.recordings[i as usize]
    }

    /// Recordings under `key` that begin with this start.
    pub fn candidates(&self, key: u64, src: u32, dst: u32, bytes: u64) -> Vec<u32> {
        (self.by_key.get(&key).into_iter().flatten())
            .copied()
            .filter(|&i| {
                matches!(self.recordings[i as usize].entries.first(),
                    Some(Entry::Start { src: s, dst: d, bytes: b, .. }) if (*s, *d, *b) == (src, dst, bytes))
            })
            .collect()
    }
}

/// Progress code after a call that ran every event before `limit` (see the module doc).
pub fn progress_before(t0: u64, limit: u64) -> i64 {
    2 * (limit.saturating_sub(t0).min(i64::MAX as u64 / 4) as i64)
}

pub fn progress_after_done(rel: i64) -> i64 {
    2 * rel + 1
}

/// A period being replayed: the candidates all share `entries[..pos]` with the calls made.
pub struct Replay {
    pub t0: u64,
    pub key: u64,
    pub cands: Vec<u32>,
    pub pos: usize,
    /// Request id and connection key of each matched start.
    pub ids: Vec<u64>,
    pub keys: Vec<u32>,
    pub progress: i64,
    pub fast: bool,
}

pub enum StartMatch {
    Matched,
    /// The replayed period was over (its network empty) before this start: recording `rec`.
    Over(u32),
    Deviates,
}

pub enum NextMatch {
    /// (time, request id)
    Deliver(u64, u64),
    Nothing,
    Deviates,
}

impl Replay {
    #[allow(clippy::too_many_arguments)]
    pub fn on_start(
        &mut self,
        lib: &Library,
        id: u64,
        key: u32,
        src: u32,
        dst: u32,
        bytes: u64,
        at: u64,
    ) -> StartMatch {
        let rel = at as i64 - self.t0 as i64;
        let (pos, progress, fast) = (self.pos, self.progress, self.fast);
        let matched: Vec<u32> = (self.cands.iter().copied())
            .filter(|&c| match lib.get(c).entries.get(pos) {
                Some(Entry::Start {
                    rel: r,
                    src: s,
                    dst: d,
                    bytes: b,
                    progress: p,
                }) => (*r, *s, *d, *b) == (rel, src, dst, bytes) && (fast || *p == progress),
                _ => false,
            })
            .collect();
        if !matched.is_empty() {
            self.cands = matched;
            self.ids.push(id);
            self.keys.push(key);
            self.pos += 1;
            return StartMatch::Matched;
        }
        let over = self.cands.iter().copied().find(|&c| {
            let r = lib.get(c);
            pos == r.entries.len() && rel >= r.quiet_rel
        });
        match over {
            Some(c) => StartMatch::Over(c),
            None => StartMatch::Deviates,
        }
    }

    pub fn next(&mut self, lib: &Library, limit: u64) -> NextMatch {
        let pos = self.pos;
        let due = |c: u32| match lib.get(c).entries.get(pos) {
            Some(Entry::Done { rel, start, .. })
                if (self.t0 as i128 + *rel as i128) < limit as i128 =>
            {
                Some((*rel, *start))
            }
            _ => None,
        };
        if let Some(done) = self.cands.iter().find_map(|&c| due(c)) {
            // Candidates that would not hand out this completion now part ways with the run.
            self.cands.retain(|&c| due(c) == Some(done));
            self.pos += 1;
            self.progress = progress_after_done(done.0);
            return NextMatch::Deliver((self.t0 as i64 + done.0) as u64, self.ids[done.1 as usize]);
        }
        let progress = self.progress.max(progress_before(self.t0, limit));
        let fast = self.fast;
        let t0 = self.t0 as i64;
        let kept: Vec<u32> = (self.cands.iter().copied())
            .filter(|&c| match lib.get(c).entries.get(pos) {
                // The run went past the point where this start came.
                Some(Entry::Start {
                    rel, progress: p, ..
                }) => {
                    if fast {
                        limit as i128 <= (t0 + rel) as i128
                    } else {
                        progress <= *p
                    }
                }
                _ => true,
            })
            .collect();
        // On a deviation the candidates stay: the materialization reads their shared prefix.
        if kept.is_empty() {
            return NextMatch::Deviates;
        }
        self.cands = kept;
        self.progress = progress;
        NextMatch::Nothing
    }

    /// The candidate whose log is complete, if the period's calls are all made.
    pub fn complete(&self, lib: &Library) -> Option<u32> {
        (self.cands.iter().copied()).find(|&c| lib.get(c).entries.len() == self.pos)
    }
}
