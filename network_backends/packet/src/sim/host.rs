//! Host NICs: the send loop (replies first, then flows round-robin), decided lazily.

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
    /// inter-frame gap (`lazy_hosts` is false), a PortFree event comes at `busy_until`
    /// instead. Saves two events per data packet (its own departure and its ACK's), about
    /// 15% of all.
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

    /// Start the NIC's next frame at `at` if it is idle then: a reply if any, else the
    /// next data packet. `at` is now, or for a NIC catching up, the moment it freed up.
    ///
    /// A paced flow becomes sendable with time alone: if the earliest one is due by now,
    /// the NIC (catching up) was idle until then and decides again at that moment (the
    /// host was unchanged meanwhile, and the frame arrives after its predecessor);
    /// otherwise a HostWake event comes then. One event per paced frame at most.
    pub(super) fn host_send_at(&mut self, h: u32, port: usize, mut at: Time) {
        loop {
            match self.host_decide_at(h, port, at) {
                Some(wake) if wake <= self.now => at = wake,
                Some(wake) => {
                    let host = &mut self.hosts[h as usize];
                    if host.wake_at.map_or(true, |w| wake < w) {
                        host.wake_at = Some(wake);
                        self.events.push(wake, Event::HostWake(h));
                    }
                    return;
                }
                None => return,
            }
        }
    }

    /// One decision of `host_send_at`: sends a frame, or returns the earliest time a paced
    /// flow may send (None: nothing to wait for).
    #[inline(always)]
    fn host_decide_at(&mut self, h: u32, port: usize, at: Time) -> Option<Time> {
        if self.ports[port].busy_until > at {
            self.owe_send(port);
            return None;
        }
        if let Some(pkt) = self.ports[port].q_hi.pop_front() {
            self.transmit(port, pkt, at);
            self.owe_send(port); // come back for the next frame
            return None;
        }
        let host = &self.hosts[h as usize];
        if host.unblocked == 0 || host.paused {
            // Only unblocked flows could send, and a flow is unblocked only by feedback, a
            // timeout or a CC timer, each of which comes back here; a NIC PFC paused
            // sends no data until its RESUME, which comes back here too.
            return None;
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
            let wire = send.payload + self.fabric.packet.header_bytes;
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
            if self.cc_counts_sends {
                self.count_send(f, at);
            }
            self.hosts[h as usize].rr = idx + 1;
            self.transmit(port, pkt, at);
            self.owe_send(port);
            return None;
        }
        earliest
    }

    /// `cc.on_send` for a scheme that counts sends.
    #[cold]
    #[inline(never)]
    fn count_send(&mut self, f: u32, at: Time) {
        self.cc.on_send(f, at, &mut self.cc_timers);
        if !self.cc_timers.is_empty() {
            self.apply_cc_timers();
        }
    }

    /// A data packet reached `h`: its pull pacer, if idle, may have work now.
    #[cold]
    #[inline(never)]
    fn wake_pacer(&mut self, h: u32) {
        if let Some(at) = self.receiver.pacer_wake(h, self.now) {
            self.events.push(at, Event::Pacer(h));
        }
    }

    /// The pull pacer of receiving host `h` runs: its pull goes out on the control priority.
    pub(super) fn on_pacer(&mut self, h: u32) {
        let port = self.host_nic_now(h);
        let (pull, next) = self.receiver.on_pacer(h, self.now);
        if let Some(at) = next {
            self.events.push(at, Event::Pacer(h));
        }
        let Some(pull) = pull else { return };
        let f = pull.flow;
        let entropy = self.lb.ack_entropy(f, mix64(f as u64) as u32, self.now);
        let src = self.hot[f as usize].src;
        let pkt = Packet::new(
            self.now,
            f,
            pull.seq,
            entropy,
            0,
            src,
            self.fabric.packet.ack_bytes as u16,
            PULL | ACK,
        );
        self.live_packets += 1;
        self.ports[port].q_hi.push_back(pkt);
        self.host_send_at(h, port, self.now);
    }

    pub(super) fn payload(&self, p: &Packet) -> u64 {
        (p.wire() as u32 - self.fabric.packet.header_bytes) as u64
    }

    /// A frame reaches host `h`: a data packet goes to the receiver policy, whose reply
    /// (on the control priority, ahead of data) carries the data packet's entropy back; a
    /// reply goes to the sender's families (`on_reply`).
    pub(super) fn host_receive(&mut self, h: u32, p: Packet) {
        let port = self.host_nic_now(h);
        if p.is_ack() {
            self.on_reply(h, port, p);
            return;
        }
        self.bytes_delivered += self.payload(&p);
        let arrival = Arrival {
            flow: p.flow(),
            seq: p.seq(),
            flags: p.flags(),
            now: self.now,
        };
        let reply = self.receiver.on_data(&arrival);
        if self.rx_paces {
            self.wake_pacer(h);
        }
        let Reply::Ack { seq, flags } = reply else {
            if self.int_on {
                self.int_take(&p);
            }
            self.packet_gone();
            return;
        };
        let entropy = self.lb.ack_entropy(p.flow(), p.entropy(), self.now);
        let src = self.hot[p.flow() as usize].src;
        let reply = Packet::new(
            p.sent_at(),
            p.flow(),
            seq,
            entropy,
            p.entropy(), // the data packet's own (its echo half may hold an INT slot)
            src,
            self.fabric.packet.ack_bytes as u16,
            flags | ACK,
        );
        self.ports[port].q_hi.push_back(reply);
        self.host_send_at(h, port, self.now);
    }
}
