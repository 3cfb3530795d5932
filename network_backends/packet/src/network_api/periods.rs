//! The periods of a driven run (`crate::reuse`): closing a logged one, finishing a replayed
//! one without simulating it, and materializing one that a call cut short.

use super::*;

impl DrivenPacket {
    /// The logged period, if any, ended (the engine is quiescent): keep its log.
    pub(super) fn close_period(&mut self) {
        if let State::Live(b) = &mut self.state {
            if let Some(b) = b.take() {
                let quiet = self.sim.idle_since().0.max(self.sim_last_done(&b));
                let stats = self.sim.stats_since(b.mark);
                let rec = Recording {
                    entries: b.entries,
                    quiet_rel: quiet as i64 - b.t0 as i64,
                    stats,
                };
                self.library.add(b.key, rec);
            }
        }
    }

    pub(super) fn sim_last_done(&self, b: &Building) -> u64 {
        let last = b.entries.iter().rev().find_map(|e| match e {
            Entry::Done { rel, .. } => Some(*rel),
            _ => None,
        });
        (b.t0 as i64 + last.unwrap_or(0)) as u64
    }

    /// A replay whose calls are all made is over: its flows complete without simulation.
    pub(super) fn finish_replay_if_complete(&mut self) {
        if let State::Replaying(r) = &self.state {
            if let Some(c) = r.complete(&self.library) {
                self.finish_replay(c);
            }
        }
    }

    pub(super) fn finish_replay(&mut self, c: u32) {
        let State::Replaying(r) = std::mem::replace(&mut self.state, State::Live(None)) else {
            return;
        };
        let rec = self.library.get(c);
        let mut starts = Vec::with_capacity(r.ids.len());
        for e in &rec.entries {
            match e {
                Entry::Start { rel, .. } => starts.push(r.t0 as i64 + rel),
                Entry::Done {
                    rel,
                    start,
                    outcome,
                } => {
                    let id = r.ids[*start as usize];
                    let (start, finish) = (starts[*start as usize], r.t0 as i64 + rel);
                    // In another engine window than the current one: counted, not listed.
                    if let Some(i) = self.engine_index_if_here(self.engine_flow[id as usize]) {
                        let (start, finish) = (Time(start as u64), Time(finish as u64));
                        self.sim.complete_replayed(i, start, finish, *outcome);
                    }
                    self.replay_end = self.replay_end.max(finish as u64);
                }
            }
        }
        self.sim.add_stats(&rec.stats);
        self.reuse.replayed += 1;
        self.reuse.flows_replayed += r.ids.len() as u64;
    }

    /// A call inside a replayed period did not match its log: give the engine the calls
    /// matched so far, in order and at the same points of its progress, so that it stands
    /// where a simulation would, and check that it returns the logged completions. Exact
    /// mode guarantees it does (else an internal error); in fast mode the schemes' state may
    /// differ: from the first difference on, the remaining starts go to the engine at their
    /// times, completions already handed out are not handed out again and the others are
    /// handed out when the engine gives them.
    pub(super) fn materialize(&mut self) -> Result<(), String> {
        let State::Replaying(r) = std::mem::replace(&mut self.state, State::Live(None)) else {
            return Ok(());
        };
        self.reuse.materialized += 1;
        let entries = self.library.get(r.cands[0]).entries[..r.pos].to_vec();
        // Requests whose completion the replay handed out.
        let handed: HashSet<u64> = (entries.iter())
            .filter_map(|e| match e {
                Entry::Done { start, .. } => Some(r.ids[*start as usize]),
                _ => None,
            })
            .collect();
        if let Some(&first) = r.ids.first() {
            // The window that runs the period, before its mark (see `live_start`).
            self.engine_index(self.engine_flow[first as usize])?;
        }
        let mark = self.sim.stats_mark();
        let mut same = true;
        let (mut k, mut start_of) = (0, HashMap::new());
        for e in &entries {
            match e {
                Entry::Start { rel, progress, .. } => {
                    if same && k > 0 && progress % 2 == 0 {
                        let limit = r.t0 + (progress / 2) as u64;
                        if let Some(got) = self.engine_next(limit)? {
                            self.off_log(&r, &handed, "a completion before a logged start", got)?;
                            same = false;
                        }
                    }
                    start_of.insert(r.ids[k], k as u32);
                    self.engine_start(r.ids[k], r.keys[k], (r.t0 as i64 + rel) as u64)?;
                    k += 1;
                }
                Entry::Done { rel, start, .. } => {
                    let id = r.ids[*start as usize];
                    if same {
                        let t = (r.t0 as i64 + rel) as u64;
                        let got = self.engine_next(t + 1)?;
                        if got.map(|(at, i)| (at, self.request_of(i))) == Some((t, id)) {
                            continue;
                        }
                        let what = "another completion than the logged one";
                        match got {
                            Some(got) => self.off_log(&r, &handed, what, got)?,
                            None => self.off_log_at_all(&r, what)?,
                        }
                        same = false;
                    }
                    self.delivered.insert(id);
                }
            }
        }
        if same && r.progress % 2 == 0 && r.progress > 0 {
            if let Some(got) = self.engine_next(r.t0 + (r.progress / 2) as u64)? {
                self.off_log(&r, &handed, "a completion the replay did not hand out", got)?;
                same = false;
            }
        }
        if !same {
            self.sim.stats_abandon(mark);
            return Ok(());
        }
        self.state = State::Live(Some(Box::new(Building {
            t0: r.t0,
            key: r.key,
            entries,
            start_of,
            mark,
            progress: r.progress,
        })));
        Ok(())
    }

    /// The engine did not follow a replayed period's log: an internal error in exact mode;
    /// in fast mode nothing to check.
    fn off_log_at_all(&mut self, r: &Replay, what: &str) -> Result<(), String> {
        if r.fast {
            return Ok(());
        }
        Err(format!(
            "internal error: exact reuse diverged from the simulation ({what})"
        ))
    }

    /// As `off_log_at_all`, the engine having completed `got` instead: handed out later
    /// unless the replay already did.
    fn off_log(
        &mut self,
        r: &Replay,
        handed: &HashSet<u64>,
        what: &str,
        got: (Ps, u32),
    ) -> Result<(), String> {
        self.off_log_at_all(r, what)?;
        let id = self.request_of(got.1);
        if handed.contains(&id) {
            self.delivered.remove(&id);
        } else {
            self.pending.push_back((got.0, id));
        }
        Ok(())
    }
}
