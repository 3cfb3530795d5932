//! Hosts: the NIC's send loop (ACKs first, then flows round-robin) and the transport
//! (ACK handling, retransmission timers, completion).

use super::*;

impl Simulation {
    pub(super) fn on_flow_start(&mut self, f: u32) {
        if self.draining {
            return;
        }
        let src = self.flows[f as usize].spec.src;
        let port = self.host_nic_now(src);
        let host = &mut self.hosts[src as usize];
        self.flows[f as usize].slot = host.active.len();
        host.active.push(f);
        host.unblocked += !self.hot[f as usize].blocked as u32;
        self.host_send_at(src, port, self.now);
    }

    /// Catches the host's NIC up, then starts its next frame now if it is idle.
    pub(super) fn host_try_send(&mut self, h: u32) {
        let port = self.host_nic_now(h);
        self.host_send_at(h, port, self.now);
    }

    /// Catches host `h`'s NIC up to now, before anything at the host changes; its port.
    #[inline]
    pub(super) fn host_nic_now(&mut self, h: u32) -> usize {
        let port = self.topo.host_port[h as usize] as usize;
        self.host_catch_up(port, self.now);
        port
    }

    /// Host NICs, like switch ports (see `catch_up`), work out their next frame lazily:
    /// a NIC that frees up at `busy_until` owes the decision then, and makes it when
    /// something next happens at the host (an arrival, a flow start, a timer: each
    /// catches the NIC up first, so the decision sees the host as it was then) or when
    /// the frame it sent last reaches the far end, whichever comes first. That is in
    /// time: the frame decided on is sent at `busy_until` and arrives a link delay
    /// later, after its predecessor. Where the link delay is shorter than the
    /// inter-frame gap, or flows are paced (`lazy_hosts` is false), a PortFree event
    /// comes at `busy_until` instead. Saves two events per data packet (its own
    /// departure and its ACK's), about 15% of all.
    #[inline(always)]
    pub(super) fn host_catch_up(&mut self, port: usize, upto: Time) {
        while self.ports[port].send_owed && self.ports[port].busy_until <= upto {
            self.ports[port].send_owed = false;
            let (h, at) = (self.topo.ports[port].owner, self.ports[port].busy_until);
            self.host_send_at(h, port, at);
        }
    }

    /// The NIC owes the decision on its next frame when it frees up.
    #[inline]
    pub(super) fn owe_send(&mut self, port: usize) {
        self.ports[port].send_owed = true;
        if !self.lazy_hosts {
            self.wake_port(port);
        }
    }

    /// Start the NIC's next frame at `at` if it is idle then: an ACK if any, else the
    /// next data packet. `at` is now, or for a NIC catching up, the moment it freed up.
    pub(super) fn host_send_at(&mut self, h: u32, port: usize, at: Time) {
        if self.ports[port].busy_until > at {
            self.owe_send(port);
            return;
        }
        if let Some(pkt) = self.ports[port].q_hi.pop_front() {
            self.transmit(port, pkt, at);
            self.owe_send(port); // come back for the next frame
            return;
        }
        if self.hosts[h as usize].unblocked == 0 && !self.paced {
            // Unpaced flows are due from their start: only unblocked ones could send.
            return;
        }
        let n = self.hosts[h as usize].active.len();
        let mut earliest: Option<Time> = None;
        // Round robin from `rr`, stepping instead of taking a remainder per flow.
        let mut next = if n == 0 {
            0
        } else {
            self.hosts[h as usize].rr % n
        };
        for _ in 0..n {
            let idx = next;
            next = if idx + 1 == n { 0 } else { idx + 1 };
            let f = self.hosts[h as usize].active[idx];
            let hot = self.hot[f as usize];
            if hot.next_allowed > at {
                earliest =
                    Some(earliest.map_or(hot.next_allowed, |e: Time| e.min(hot.next_allowed)));
                continue;
            }
            if hot.blocked {
                continue;
            }
            if self.loss.in_flight_bytes(f) >= self.cc.window_bytes(f) {
                self.set_blocked(f, true);
                continue;
            }
            let Some(send) = self.loss.next_packet(f, at) else {
                self.set_blocked(f, true);
                continue;
            };
            let entropy = self.lb.entropy(f, send.seq, at);
            let wire = send.payload + self.cfg.packet.header_bytes;
            let pkt = Packet::new(at, f, send.seq, entropy, entropy, hot.dst, wire as u16, 0);
            self.live_packets += 1;
            let gap = self.cc.pacing_gap(f, wire);
            let hot = &mut self.hot[f as usize];
            if let Some(gap) = gap {
                hot.next_allowed = at + gap;
            }
            hot.sent += 1;
            self.bytes_sent += send.payload as u64;
            if !hot.rto_pending {
                hot.rto_pending = true;
                self.events.push(at + self.rto, Event::Rto(f));
            }
            if send.retransmission {
                self.flows[f as usize].retransmitted += 1;
            }
            self.hosts[h as usize].rr = idx + 1;
            self.transmit(port, pkt, at);
            self.owe_send(port);
            return;
        }
        if let Some(wake) = earliest {
            let host = &mut self.hosts[h as usize];
            if host.wake_at.map_or(true, |w| wake < w) {
                host.wake_at = Some(wake);
                self.events.push(wake, Event::HostWake(h));
            }
        }
    }

    pub(super) fn payload(&self, p: &Packet) -> u64 {
        (p.wire() as u32 - self.cfg.packet.header_bytes) as u64
    }

    pub(super) fn host_receive(&mut self, h: u32, p: Packet) {
        let port = self.host_nic_now(h);
        if !p.is_ack() {
            self.bytes_delivered += self.payload(&p);
            // The data packet becomes its own ACK, echoing its entropy and ECN mark.
            let entropy = self.lb.ack_entropy(p.flow(), p.entropy(), self.now);
            let src = self.hot[p.flow() as usize].src;
            let ack = Packet::new(
                p.sent_at(),
                p.flow(),
                p.seq(),
                entropy,
                p.echo(),
                src,
                self.cfg.packet.ack_bytes as u16,
                p.flags() | ACK,
            );
            self.ports[port].q_hi.push_back(ack);
            self.host_send_at(h, port, self.now);
            return;
        }
        self.live_packets -= 1;
        let f = p.flow();
        if self.draining || self.hot[f as usize].done {
            return;
        }
        let outcome = self.loss.on_ack(f, p.seq(), self.now);
        // The ACK may open the window or make a packet due, unless the scheme knows better.
        self.set_blocked(f, self.loss.nothing_due(f));
        self.lb.on_ack(f, p.echo(), p.ecn(), self.now);
        self.cc.on_ack(
            f,
            outcome.newly_acked,
            p.ecn(),
            self.now - p.sent_at(),
            self.now,
        );
        if outcome.newly_acked > 0 && self.hot[f as usize].timed_out {
            self.hot[f as usize].timed_out = false;
            self.flows[f as usize].timeouts_in_a_row = 0;
        }
        if outcome.complete {
            self.finish_flow(f);
        }
        self.host_send_at(h, port, self.now);
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
            self.cc.on_timeout(f, self.now);
            let flow = &mut self.flows[f as usize];
            flow.timeouts += 1;
            flow.timeouts_in_a_row += 1;
            self.hot[f as usize].timed_out = true;
            if flow.timeouts_in_a_row > self.cfg.limits.max_timeouts {
                let reason = format!(
                    "flow {f} ({} -> {}) made no progress through {} consecutive timeouts (limits.max_timeouts) of {:.3} us each (limits.rto_us); {lost} packets presumed lost in the last one",
                    flow.spec.src, flow.spec.dst, self.cfg.limits.max_timeouts,
                    self.rto.0 as f64 / PS_PER_US as f64
                );
                self.error = Some(self.unfinished(reason));
                return;
            }
            // Re-arm before sending replacements, so the send path does not arm a second timer.
            self.hot[f as usize].rto_pending = true;
            self.events.push(self.now + self.rto, Event::Rto(f));
            self.host_try_send(src);
            return;
        }
        self.hot[f as usize].rto_pending = true;
        self.events.push(next, Event::Rto(f));
    }
}
