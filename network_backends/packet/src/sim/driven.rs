//! Driven runs: a system layer starts flows and collects their completions.

use super::*;

impl Simulation {
    /// Hands the start of every flow to the caller: `run` is not used; the caller starts
    /// flows with `start_flow` and collects them with `next_completion`.
    pub fn drive(&mut self) {
        self.driven = true;
    }

    pub fn flow_spec(&self, f: u32) -> Option<FlowSpec> {
        self.flows.get(f as usize).map(|rt| rt.spec)
    }

    /// Starts flow `f` (declared in the config's flow list) at `at`, which must not be in
    /// the past. Its declared start time is ignored, and so is an LB's start delay
    /// (Ethereal's jitter): chains of dependent flows would pay it at every step.
    pub fn start_flow(&mut self, f: u32, at: Time) -> SimResult<()> {
        let n = self.flows.len();
        let Some(flow) = self.flows.get_mut(f as usize) else {
            return Err(SimError::BadFlow {
                index: f as usize,
                field: "id",
                message: format!("no such flow (the run declared {n})"),
            });
        };
        if flow.started {
            return Err(SimError::BadFlow {
                index: f as usize,
                field: "id",
                message: format!("started twice (first at {} ps)", flow.spec.start.0),
            });
        }
        if at < self.now {
            return Err(SimError::BadFlow {
                index: f as usize,
                field: "start_ps",
                message: format!(
                    "started at {} ps, before the engine's clock ({} ps)",
                    at.0, self.now.0
                ),
            });
        }
        // As a declared start (`setup`): past the limit the event clock would not hold it.
        let max_ms = self.limits.max_time_ms;
        if at.0 as f64 > max_ms * 1e9 {
            return Err(SimError::BadFlow {
                index: f as usize,
                field: "start_ps",
                message: format!("starts at {} ps, after limits.max_time_ms = {max_ms}", at.0),
            });
        }
        flow.started = true;
        flow.spec.start = at;
        if self.quiescent() {
            // A new busy period begins: its draws count its own bytes (`draw_bytes`).
            for (o, rt) in self.draw_origin.iter_mut().zip(&self.ports) {
                *o = rt.tx_bytes;
            }
        }
        self.n_started += 1;
        self.hot[f as usize].next_allowed = at;
        self.events.push(at, Event::FlowStart(f));
        Ok(())
    }

    /// Runs until the next flow completes (its last ACK is back at the sender), processing
    /// only events before `limit`; `None` when nothing completes before it.
    pub fn next_completion(&mut self, limit: Time) -> SimResult<Option<(Time, u32)>> {
        if self.completions.is_empty() {
            self.process(limit, &mut |_, _| true)?;
        }
        Ok(self.completions.pop_front())
    }

    /// The report of a driven run, with statistics up to `end` or the engine's clock if
    /// later (replayed periods end past it, `crate::reuse`), and the per-flow list if
    /// `with_flows`. Its `lower_bound_ps` is 0: the system layer decides when flows start,
    /// and reads only the counts.
    pub fn driven_report_at(mut self, end: Time, with_flows: bool) -> Report {
        let end = self.now.max(end);
        self.catch_up_all(end);
        let areas: Vec<u128> = (0..self.ports.len())
            .map(|p| self.queue_area_until(p, end))
            .collect();
        self.report(end, &areas, None, with_flows)
    }

    pub(super) fn unfinished(&self, reason: String) -> SimError {
        SimError::DidNotFinish {
            unfinished: self.flows.len() - self.done,
            total: self.flows.len(),
            time_us: self.now.as_us(),
            reason,
        }
    }
}
