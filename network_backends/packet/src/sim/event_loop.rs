//! The event loop: pop the next event, dispatch it, stop when the run is done.

use super::*;

impl Simulation {
    pub fn run(mut self, progress: Progress) -> SimResult<Report> {
        let total = self.flows.len();
        // A driven run may declare no flows (a workload that only computes); a standalone
        // one would have nothing to measure.
        if total == 0 {
            return Err(config_err("traffic", "no flows to simulate"));
        }
        for f in 0..total as u32 {
            let start = self.flows[f as usize].spec.start;
            self.events.push(start, Event::FlowStart(f));
        }
        if self.process(Time(u64::MAX), progress)? != Stop::AllComplete {
            return Err(self.unfinished("no events left while flows were incomplete".to_string()));
        }
        // Every flow is complete: freeze the statistics, then let stragglers drain.
        self.draining = true;
        let completed_at = self.now;
        self.catch_up_all(completed_at);
        let areas_at_completion: Vec<u128> = (0..self.ports.len())
            .map(|p| self.queue_area_until(p, completed_at))
            .collect();
        self.process(Time(u64::MAX), progress)?;
        progress(total, total);
        let bound = self.lower_bound();
        Ok(self.report(completed_at, &areas_at_completion, Some(bound), true))
    }

    /// The event loop of `run` and of `next_completion`: one loop, so the compiler inlines
    /// its hot paths once. (With a copy in each, LLVM left the switch and host arrivals
    /// and `enqueue` out of line in the Python extension, where `next_completion` is live,
    /// and (c) of the benchmarks ran ~15% slower there than in the example runner.) Runs
    /// the events before `until` until none is left, a driven flow completes, or every
    /// flow is complete.
    #[inline(never)]
    pub(super) fn process(&mut self, until: Time, progress: Progress) -> SimResult<Stop> {
        let total = self.flows.len();
        // Events after this end the run, until every flow is complete.
        let limit = if self.draining {
            Time(u64::MAX)
        } else {
            Time((self.limits.max_time_ms * 1e9).round() as u64)
        };
        while let Some((t, ev)) = self.events.pop_before(until) {
            if self.prefetch {
                self.prefetch_ahead();
            }
            if t > limit {
                // Report the limit, not the last event before it (t = 0 when the first
                // frame's arrival already lies past it).
                self.now = limit;
                return Err(self.unfinished(format!(
                    "limits.max_time_ms = {} reached",
                    self.limits.max_time_ms
                )));
            }
            self.dispatch(t, ev)?;
            if self.driven {
                if !self.completions.is_empty() {
                    return Ok(Stop::Completion);
                }
            } else if self.done == total && !self.draining {
                return Ok(Stop::AllComplete);
            }
            if self.events.processed() & 0xF_FFFF == 0 && !progress(self.done, total) {
                return Err(self.unfinished("cancelled".to_string()));
            }
        }
        Ok(Stop::Waiting)
    }

    /// At scale most of an event's time goes to cache misses on its port's record and on
    /// the frame it takes from a FIFO. The coming events are known, so start those
    /// loads early: the port record a few events ahead, the frame nearer (finding its
    /// address reads the record). A hint only: results do not depend on it.
    #[inline]
    pub(super) fn prefetch_ahead(&self) {
        const NEAR: usize = 3;
        const FAR: usize = 7;
        if let Some((p, _)) = self.events.port_event_ahead(FAR) {
            // Both events read the record's first line (with the backlog) and, at a
            // switch port catching up, the queues' (the second and third).
            let rt = &self.ports[p as usize];
            prefetch(rt, 1);
            prefetch(&rt.q_hi, 1);
            prefetch(&rt.q_lo, 1);
        }
        if let Some((p, arrival)) = self.events.port_event_ahead(NEAR) {
            let rt = &self.ports[p as usize];
            if arrival {
                // The frame, and the next one (its arrival time is read right after).
                if let Some(f) = rt.wire.front() {
                    prefetch(f, 2);
                }
            }
            if let Some(f) = rt.q_hi.front().or_else(|| rt.q_lo.front()) {
                prefetch(f, 1);
            }
        }
        // The next event's frame is in cache by now; if it is arriving at a switch, start
        // loading the route entry it will need. Branch-free (a mispredicted branch per
        // event cost more than the miss at k=8): for a host or a PortFree the address
        // is just useless.
        if let Some((p, _)) = self.events.port_event_ahead(0) {
            let rt = &self.ports[p as usize];
            if let Some(f) = rt.wire.front() {
                let dst_edge = self.topo.host_edge[f.dst() as usize];
                prefetch_addr(self.topo.route_addr(rt.peer, dst_edge));
            }
        }
    }

    #[inline(always)]
    pub(super) fn dispatch(&mut self, t: Time, ev: Event) -> SimResult<()> {
        self.now = t;
        match ev {
            Event::PortFree(p) => self.on_port_free(p as usize),
            Event::LinkArrive(p) => self.on_link_arrive(p as usize),
            Event::FlowStart(f) => self.on_flow_start(f),
            Event::HostWake(h) => {
                self.hosts[h as usize].wake_at = None;
                self.host_try_send(h);
            }
            Event::Rto(f) => self.on_rto(f),
            Event::CcTimer(f) => self.on_cc_timer(f),
            Event::Fabric(i) => self.on_fabric_change(i as usize),
            Event::Pfc(i) => self.on_pfc(i),
            Event::Pacer(h) => self.on_pacer(h),
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
