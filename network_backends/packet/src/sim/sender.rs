//! The sender's side of the transport: replies and timeouts handed to loss recovery, LB
//! and CC in that order (see `transport`), CC timers, flow completion.

use super::*;

impl Simulation {
    /// A packet left the network (delivered as its last reply, or dropped).
    #[inline(always)]
    pub(super) fn packet_gone(&mut self) {
        self.live_packets -= 1;
        if self.live_packets == 0 {
            self.idle_since = self.now;
        }
    }

    /// A reply reached the sender `h` (whose NIC is caught up).
    pub(super) fn on_reply(&mut self, h: u32, port: usize, p: Packet) {
        self.packet_gone();
        let f = p.flow();
        if self.draining || self.hot[f as usize].done {
            if self.int_on {
                self.int_take(&p);
            }
            return;
        }
        if p.flags() & PULL != 0 {
            return self.on_pull(h, port, p);
        }
        let mut fb = self.feedback_of(&p);
        let outcome = self.loss.on_feedback(&fb);
        (fb.newly_acked, fb.complete) = (outcome.newly_acked, outcome.complete);
        fb.in_flight = self.loss.in_flight_bytes(f);
        // The reply may open the window or make a packet due, unless the scheme knows better.
        self.set_blocked(f, self.loss.nothing_due(f));
        self.lb.on_feedback(&fb);
        if self.int_on {
            self.cc_feedback_int(&mut fb, &p);
        } else {
            self.cc.on_feedback(&fb, &mut self.cc_timers);
        }
        if !self.cc_timers.is_empty() {
            self.apply_cc_timers();
        }
        if outcome.newly_acked > 0 && self.hot[f as usize].timed_out {
            self.hot[f as usize].timed_out = false;
            self.flows[f as usize].timeouts_in_a_row = 0;
        }
        if outcome.complete {
            self.finish_flow(f);
        }
        self.host_send_at(h, port, self.now);
    }

    /// The CC's feedback with the INT records the reply's data packet collected (kept out
    /// of `on_reply`, so schemes without INT do not carry them).
    #[cold]
    #[inline(never)]
    fn cc_feedback_int(&mut self, fb: &mut Feedback, p: &Packet) {
        let stack = self.int_take(p);
        let (records, n) = self.int_hops(&stack);
        let hops = &records[..n];
        fb.int = IntSummary {
            max_queue_bytes: hops
                .iter()
                .map(|h| h.qlen)
                .max()
                .unwrap_or(0)
                .min(u32::MAX as u64) as u32,
            hops: hops.len() as u8,
        };
        self.cc.on_feedback_int(fb, hops, &mut self.cc_timers);
    }

    /// What a reply tells the sender before loss recovery has read it (nothing acked yet).
    #[inline]
    fn feedback_of(&self, p: &Packet) -> Feedback {
        let f = p.flow();
        Feedback {
            flow: f,
            now: self.now,
            seq: p.seq(),
            echo: p.echo(),
            flags: p.flags() & !(ACK | LOST),
            rtt: self.now - p.sent_at(),
            hops: self.hot[f as usize].hops as u32,
            int: IntSummary::default(),
            newly_acked: 0,
            complete: false,
            in_flight: 0,
        }
    }

    /// A pull reached the sender: credit, for congestion control alone (it acknowledges
    /// nothing; see `transport::flags::PULL`).
    #[cold]
    fn on_pull(&mut self, h: u32, port: usize, p: Packet) {
        let f = p.flow();
        let mut fb = self.feedback_of(&p);
        fb.in_flight = self.loss.in_flight_bytes(f);
        self.cc.on_feedback(&fb, &mut self.cc_timers);
        if !self.cc_timers.is_empty() {
            self.apply_cc_timers();
        }
        self.set_blocked(f, self.loss.nothing_due(f));
        self.host_send_at(h, port, self.now);
    }

    /// Arms and cancels the CC timers requested during the scheme's last call.
    #[cold]
    pub(super) fn apply_cc_timers(&mut self) {
        let mut timers = std::mem::take(&mut self.cc_timers);
        for (f, at) in timers.drain() {
            let at = at.map(|t| t.max(self.now));
            self.flows[f as usize].cc_timer = at;
            if let Some(t) = at {
                self.events.push(t, Event::CcTimer(f));
            }
        }
        self.cc_timers = timers;
    }

    /// A CC timer event: stale unless it is the one armed last.
    pub(super) fn on_cc_timer(&mut self, f: u32) {
        let src = self.hot[f as usize].src;
        self.host_nic_now(src);
        if self.flows[f as usize].cc_timer != Some(self.now) {
            return;
        }
        self.flows[f as usize].cc_timer = None;
        if self.draining || self.hot[f as usize].done {
            return;
        }
        self.cc.on_timer(f, self.now, &mut self.cc_timers);
        if !self.cc_timers.is_empty() {
            self.apply_cc_timers();
        }
        // The window or rate may have grown.
        self.set_blocked(f, self.loss.nothing_due(f));
        self.host_try_send(src);
    }

    /// Marks an active flow as (not) worth a look from its host's send loop.
    #[inline]
    pub(super) fn set_blocked(&mut self, f: u32, blocked: bool) {
        let hot = &mut self.hot[f as usize];
        if hot.blocked != blocked {
            hot.blocked = blocked;
            let host = &mut self.hosts[hot.src as usize];
            if blocked {
                host.unblocked -= 1;
            } else {
                host.unblocked += 1;
            }
        }
    }

    pub(super) fn finish_flow(&mut self, f: u32) {
        self.set_blocked(f, true);
        let flow = &mut self.flows[f as usize];
        flow.finish = Some(self.now);
        self.hot[f as usize].done = true;
        self.done += 1;
        if self.driven {
            self.completions.push_back((self.now, f));
        }
        // Removed in place, not swapped with the last: the round robin keeps its order, so
        // a flow neither loses nor gains a turn (the lower bound counts on that).
        let (src, slot) = (flow.spec.src as usize, flow.slot);
        let host = &mut self.hosts[src];
        host.active.remove(slot);
        for (i, &moved) in host.active[slot..].iter().enumerate() {
            self.flows[moved as usize].slot = slot + i;
        }
        if host.rr > slot {
            host.rr -= 1;
        }
    }

    pub(super) fn on_rto(&mut self, f: u32) {
        // The sender's owed decisions come first: they may send (and arm this timer).
        let src = self.hot[f as usize].src;
        self.host_nic_now(src);
        let hot = &mut self.hot[f as usize];
        hot.rto_pending = false;
        if self.draining || hot.done {
            return;
        }
        let Some(oldest) = self.loss.oldest_outstanding(f) else {
            return;
        };
        let next = oldest + self.rto;
        if next <= self.now {
            let lost = self.loss.on_timeout(f, self.now, self.rto);
            self.set_blocked(f, false);
            self.lb.on_timeout(f, self.now);
            // Per-packet timers (the loss scheme's own, `rto`, or `limits.rto_per_packet`)
            // expiring within one timeout of the last counted expiry are one loss event: the
            // CC reacts once (unless it reacts to every expiry) and `limits.max_timeouts`
            // counts once.
            let per_packet = self.limits.rto_per_packet || self.loss.per_packet_timers();
            let flow = &mut self.flows[f as usize];
            let new_event = !per_packet
                || flow
                    .counted_timeout
                    .is_none_or(|t| t + self.rto <= self.now);
            flow.timeouts += 1;
            if new_event {
                flow.timeouts_in_a_row += 1;
                flow.counted_timeout = Some(self.now);
            }
            if new_event || self.cc.reacts_to_every_expiry() {
                self.cc.on_timeout(f, self.now, &mut self.cc_timers);
                if !self.cc_timers.is_empty() {
                    self.apply_cc_timers();
                }
            }
            let flow = &mut self.flows[f as usize];
            self.hot[f as usize].timed_out = true;
            if flow.timeouts_in_a_row > self.limits.max_timeouts {
                let hint = self.blackhole_hint(f);
                let flow = &self.flows[f as usize];
                let reason = format!(
                    "flow {f} ({} -> {}) made no progress through {} consecutive timeouts (limits.max_timeouts) of {:.3} us each (limits.rto_us); {lost} packets presumed lost in the last one{hint}",
                    flow.spec.src, flow.spec.dst, self.limits.max_timeouts,
                    self.rto.0 as f64 / PS_PER_US as f64,
                );
                self.error = Some(self.unfinished(reason));
                return;
            }
            // Re-armed before sending replacements, so the send path arms no second timer.
            // Per-packet timers: at the next expiry among the packets still in flight (a
            // replacement sent now expires no earlier); else a full timeout from now.
            let next = match self.loss.oldest_outstanding(f) {
                Some(oldest) if per_packet && oldest + self.rto > self.now => oldest + self.rto,
                _ => self.now + self.rto,
            };
            self.hot[f as usize].rto_pending = true;
            self.events.push(next, Event::Rto(f));
            self.host_try_send(src);
            return;
        }
        self.hot[f as usize].rto_pending = true;
        self.events.push(next, Event::Rto(f));
    }
}
