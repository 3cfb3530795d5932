//! Ports, links and switches: serialization, link FIFOs, routing, output queues.

use super::*;

impl Simulation {
    // Always inlined: passed through memory, the packet is reloaded with wider loads
    // than the stores that built it, which cannot be store-forwarded.
    /// Starts serializing `pkt` at `at` (now, or for a switch port catching up, the
    /// moment it freed up).
    #[inline(always)]
    pub(super) fn transmit(&mut self, port: usize, mut pkt: Packet, at: Time) {
        if self.ports[port].down {
            self.blackhole(&mut pkt);
        } else if self.loss_threshold != 0 && self.link_loses(port) {
            pkt.mark_lost();
            self.pkts_lost += !pkt.is_ack() as u64;
        }
        let p = &mut self.ports[port];
        let wire = pkt.wire() as u64;
        let ser = p.rate.serialization(wire);
        let busy_until = at + ser + p.rate.serialization(self.fabric.packet.gap_bytes as u64);
        if p.wire.is_empty() {
            self.events
                .push(at + ser + p.arrive_delay, Event::LinkArrive(port as u32));
        } else {
            // The frame ahead is still on the wire, so the gap is under a frame's
            // serialization plus the link's delay: 32 bits hold it unless that is ~4.3 ms.
            let gap = (busy_until - p.busy_until).0;
            if gap < GAP_LATE as u64 {
                pkt.set_gap(gap as u32);
            } else {
                pkt.set_gap(GAP_LATE);
                let arrive = at + ser + p.arrive_delay;
                self.late_arrivals
                    .entry(port as u32)
                    .or_default()
                    .push_back(arrive);
            }
        }
        p.wire.push_back(pkt);
        p.busy_until = busy_until;
        p.tx_bytes += wire;
        if !pkt.is_ack() {
            self.data_hops += 1;
            p.data_tx_bytes += wire;
            if self.int_on && !p.owner_is_host {
                // (A departing frame has left its port's backlog: `queued` is what waits.)
                let qlen = p.queued;
                self.int_stamp(port, at, qlen);
            }
        }
    }

    /// Ask for a PortFree event when the current frame is done (at most one pending).
    #[inline]
    pub(super) fn wake_port(&mut self, port: usize) {
        let p = &mut self.ports[port];
        if !p.wake_pending {
            p.wake_pending = true;
            self.events.push(p.busy_until, Event::PortFree(port as u32));
        }
    }

    pub(super) fn on_port_free(&mut self, port: usize) {
        let rt = &mut self.ports[port];
        rt.wake_pending = false;
        if rt.owner_is_host {
            self.host_catch_up(port, self.now);
            // (Eager NICs only.) Its decision may have come first, at an arrival at the
            // same time: then it owes the next one.
            if self.ports[port].send_owed {
                self.wake_port(port);
            }
        } else {
            self.catch_up(port, self.now);
            self.keep_draining(port);
        }
    }

    // Always inlined into the event loop (the most common event).
    #[inline(always)]
    pub(super) fn on_link_arrive(&mut self, port: usize) {
        let pkt = self.ports[port]
            .wire
            .pop_front()
            .expect("arrival event without a frame on the link");
        if let Some(next) = self.ports[port].wire.front() {
            let (gap, next_flow, next_seq, next_is_ack) =
                (next.gap(), next.flow(), next.seq(), next.is_ack());
            // Its event fires at its arrival, so now is the arrival of the frame it follows.
            let at = match gap {
                GAP_LATE => self.late_arrival(port),
                gap => self.now + Dur(gap as u64),
            };
            self.events.push(at, Event::LinkArrive(port as u32));
            if self.ports[port].peer < self.topo.n_hosts {
                self.prefetch_host_bound(next_flow, next_seq, next_is_ack);
            }
            // The next arrival reads the gap of the frame after `next`, every other
            // time on a line not touched since it was sent, a link latency ago (~24
            // frames at 800 Gbps and 1 us): start loading it now. (The look-ahead, where
            // on, does it anyway.)
            if !self.prefetch {
                if let Some(f) = self.ports[port].wire.get(1) {
                    prefetch(f, 1);
                }
            }
        }
        if !self.ports[port].owner_is_host {
            // The usual time a switch port's next departures are worked out (see
            // `catch_up`): its record is in cache now.
            self.catch_up(port, self.now);
            self.keep_draining(port);
        } else {
            // Likewise a host NIC's next frames (see `host_catch_up`).
            self.host_catch_up(port, self.now);
        }
        let node = self.ports[port].peer;
        if pkt.is_lost() {
            self.drop_packet(port, pkt);
        } else if node < self.topo.n_hosts {
            self.host_receive(node, pkt);
        } else if self.pfc.is_none() {
            self.switch_receive(node, pkt);
        } else {
            self.pfc_switch_receive(port, node, pkt);
        }
    }

    /// The next frame on a link reaches a host: start loading the flow state it will
    /// read there (a receiver addresses the ACK from it, a sender checks the ACK against
    /// it). With thousands of flows these are misses (all-to-all (c) of the benchmarks).
    #[inline(never)]
    pub(super) fn prefetch_host_bound(&self, flow: u32, seq: u32, is_ack: bool) {
        prefetch_addr(&self.hot[flow as usize]);
        if is_ack {
            self.loss.prefetch_ack(flow, seq);
        }
    }

    /// The arrival time of a frame whose gap did not fit 32 bits (links over ~4.3 ms).
    #[cold]
    #[inline(never)]
    pub(super) fn late_arrival(&mut self, port: usize) -> Time {
        self.late_arrivals
            .get_mut(&(port as u32))
            .and_then(|q| q.pop_front())
            .expect("a late frame without its arrival time")
    }

    pub(super) fn switch_receive(&mut self, node: u32, p: Packet) {
        if let Some(out) = self.route(node, p) {
            self.enqueue(out as usize, p);
        }
    }

    /// The output port switch `node` sends `p` out of (None: it has no route; `p` is lost).
    #[inline(always)]
    pub(super) fn route(&mut self, node: u32, p: Packet) -> Option<PortId> {
        let dst_edge = self.topo.host_edge[p.dst() as usize];
        let out = if dst_edge == node {
            self.topo.host_down_port[p.dst() as usize]
        } else {
            let group = self.topo.group_towards(node, dst_edge);
            if group == NO_GROUP {
                self.unroutable(p);
                return None;
            }
            let n = self.topo.group_ports(group).len();
            if n == 1 {
                self.topo.group_ports(group)[0]
            } else {
                if self.lb_reads_queues {
                    // The schedule's first round lists each port once.
                    for i in 0..self.topo.groups[group as usize].len() {
                        let c = self.topo.group_ports(group)[i] as usize;
                        self.catch_up(c, self.now);
                    }
                }
                let candidates = self.topo.group_ports(group);
                let ports = &self.ports;
                let backlog = |p: PortId| ports[p as usize].queued;
                let view = SwitchView {
                    now: self.now,
                    node,
                    group,
                    candidates,
                    backlog: &backlog,
                    buffer_bytes: self.fabric.switch.buffer_bytes,
                    salt: self.salts[node as usize],
                };
                let hdr = Header {
                    flow: p.flow(),
                    tuple: match self.tuples.is_empty() {
                        true => p.flow(),
                        false => self.tuples[p.flow() as usize],
                    },
                    dst: p.dst(),
                    entropy: p.entropy(),
                    is_ack: p.is_ack(),
                    wire_bytes: p.wire() as u32,
                };
                self.lb.choose_port(&view, &hdr)
            }
        };
        Some(out)
    }

    pub(super) fn enqueue(&mut self, port: usize, p: Packet) {
        self.catch_up(port, self.now);
        let wire = p.wire() as u64;
        if self.ports[port].queued + wire > self.admits(p.flags()) {
            return self.overflow(port, p);
        }
        self.enqueue_fitting(port, p, wire);
    }

    /// Queues (or sends straight on) a frame of `wire` bytes that fits in the port.
    /// On a lossless fabric only control frames come here, from `pfc_enqueue`, which
    /// starts a paused idle port's control frame itself (`pfc_kick`).
    #[inline(always)]
    pub(super) fn enqueue_fitting(&mut self, port: usize, p: Packet, wire: u64) {
        // (A switch port's queues are empty exactly when it has no bytes queued.)
        if self.ports[port].busy_until <= self.now && self.ports[port].queued == 0 {
            // Straight through an idle port: no queue, no mark.
            self.transmit(port, p, self.now);
            return;
        }
        if p.flags() & (ACK | TRIMMED) != 0 {
            self.ports[port].q_hi.push_back(p);
        } else {
            self.ports[port].q_lo.push_back(p);
        }
        self.set_queued(port, self.ports[port].queued + wire, self.now);
        self.keep_draining(port);
    }

    /// Whether the frame `port` sends now is lost on its link: a draw keyed by the port and
    /// its byte count so far, so it does not depend on the order ports are worked out.
    #[cold]
    fn link_loses(&self, port: usize) -> bool {
        mix64(mix64(self.loss_seed ^ port as u64) ^ self.draw_bytes(port)) < self.loss_threshold
    }

    /// The byte count random draws at a port are keyed by: bytes sent since the engine was
    /// last quiescent at a flow start (`start_flow`), so a busy period's draws do not
    /// depend on the periods before it (`crate::reuse`).
    #[inline]
    pub(super) fn draw_bytes(&self, port: usize) -> u64 {
        self.ports[port].tx_bytes - self.draw_origin[port]
    }

    /// Most bytes a port may hold once a frame with these flags joins: its buffer for data;
    /// twice that for the control priority (ACKs, trimmed headers), as UET caps its
    /// high-priority queue, so that replies and NACKs get through a port that data fills.
    #[inline(always)]
    pub(super) fn admits(&self, flags: u8) -> u64 {
        let control = flags & (ACK | TRIMMED) != 0;
        self.fabric.switch.buffer_bytes << control as u32
    }

    /// A frame that does not fit in `port`'s buffer: a data frame whose header still fits
    /// goes on trimmed if the discipline trims; anything else is dropped.
    #[cold]
    #[inline(never)]
    pub(super) fn overflow(&mut self, port: usize, p: Packet) {
        let header = self.fabric.packet.header_bytes as u64;
        let fits = self.ports[port].queued + header <= self.admits(ACK);
        let data = p.flags() & (ACK | TRIMMED) == 0;
        if !(data && header > 0 && fits) || self.qdisc.on_overflow(port as PortId) != Overflow::Trim
        {
            return self.drop_packet(port, p);
        }
        self.port_counts[port].trims += 1;
        self.pkts_trimmed += 1;
        self.bytes_trimmed += self.payload(&p);
        self.enqueue_fitting(port, p.trimmed(header as u16), header);
    }

    #[cold]
    #[inline(never)]
    pub(super) fn drop_packet(&mut self, port: usize, p: Packet) {
        self.port_counts[port].drops += 1;
        self.count_drop(p);
    }

    /// Failures left a switch without a way to the frame's destination: it is lost.
    #[cold]
    #[inline(never)]
    fn unroutable(&mut self, mut p: Packet) {
        self.blackhole(&mut p);
        self.count_drop(p);
    }

    fn count_drop(&mut self, p: Packet) {
        if self.int_on {
            self.int_take(&p);
        }
        if p.is_ack() {
            self.acks_dropped += 1;
        } else {
            self.pkts_dropped += 1;
            self.bytes_dropped += self.payload(&p);
        }
        self.packet_gone();
    }

    /// Switch ports dequeue lazily. Instead of an event each time a port frees up, a
    /// port's departures up to `upto` are worked out when something next looks at it:
    /// a packet arriving at it (`enqueue`), the arrival of a frame it sent (the usual
    /// case: a link's latency is many frame times), a queue-aware scheme reading its
    /// backlog, the end of the run. This is exact, not an approximation: every packet
    /// reaches a queue through `enqueue`, which first catches the port up to the
    /// packet's arrival, so each departure sees exactly the packets that had arrived by
    /// then. And it is in time: a departure is worked out no later than the arrival of
    /// the frame before it on the same link (`keep_draining` covers ports with an
    /// empty link), so the frame it sends is never scheduled in the past. It saves
    /// about a third of all events.
    #[inline(always)]
    pub(super) fn catch_up(&mut self, port: usize, upto: Time) {
        // Checked inline: most calls find nothing due.
        if self.ports[port].busy_until <= upto && self.ports[port].queued > 0 {
            self.dequeue_until(port, upto);
        }
    }

    #[inline(never)]
    pub(super) fn dequeue_until(&mut self, port: usize, upto: Time) {
        loop {
            let at = self.ports[port].busy_until;
            // (Nothing sent: PFC paused the port with only data queued.)
            if !self.dequeue_at(port, at) {
                return;
            }
            if self.ports[port].busy_until > upto || self.ports[port].queued == 0 {
                return;
            }
        }
    }

    /// A switch port with frames queued and none on its link has nothing that will catch
    /// it up: ask for an event when it frees up. Needed only after its link lost a frame,
    /// its wake-up fired or a packet joined its queue: a catch-up that sends a frame leaves
    /// one on the link, and one that sends nothing changes nothing. A port PFC paused with
    /// only data queued waits for its RESUME instead.
    #[inline]
    pub(super) fn keep_draining(&mut self, port: usize) {
        let rt = &self.ports[port];
        if rt.queued > 0 && rt.wire.is_empty() && (self.pfc.is_none() || self.pfc_may_send(port)) {
            self.wake_port(port);
        }
    }

    /// Catches every port up to `upto` (for statistics that must be exact then).
    pub(super) fn catch_up_all(&mut self, upto: Time) {
        for port in 0..self.ports.len() {
            if !self.ports[port].owner_is_host {
                self.catch_up(port, upto);
            } else {
                self.host_catch_up(port, upto);
            }
        }
    }

    /// The departure of a switch port's next frame at `at`: ACKs first; the queue
    /// discipline decides on an ECN mark from the backlog it leaves behind. False if it
    /// sent nothing (no frame, or only data while PFC pauses the port).
    // Always inlined into `dequeue_until`'s loop, its hot caller (the other callers are PFC's).
    #[inline(always)]
    pub(super) fn dequeue_at(&mut self, port: usize, at: Time) -> bool {
        let lossless = self.pfc.is_some();
        let rt = &mut self.ports[port];
        let pkt = match rt.q_hi.pop_front() {
            Some(pkt) => pkt,
            // Data on a lossless fabric: PFC may hold it, and accounts for it.
            None if lossless => return self.pfc_dequeue_data(port, at),
            None => match rt.q_lo.pop_front() {
                Some(pkt) => pkt,
                None => return false,
            },
        };
        self.depart(port, pkt, at);
        true
    }

    /// The departure of `pkt`, just taken from `port`'s queue, at `at`.
    #[inline(always)]
    pub(super) fn depart(&mut self, port: usize, mut pkt: Packet, at: Time) {
        let rt = &mut self.ports[port];
        // The port's next departure reads the new head, often on a line not touched
        // since it was queued: start loading it now (it is needed a frame time or more
        // from now, when a packet arrives at the port or one it sent reaches the far end).
        if let Some(f) = rt.q_hi.front().or_else(|| rt.q_lo.front()) {
            prefetch(f, 1);
        }
        let left = self.ports[port].queued - pkt.wire() as u64;
        self.set_queued(port, left, at);
        // Data only: a trimmed header's loss is its NACK (marking it too would report the
        // full queue that trimmed it twice, as a mark and a trim).
        if pkt.flags() & (ACK | TRIMMED) == 0
            && left > self.qdisc_floor
            && self
                .qdisc
                .on_dequeue(port as PortId, left, self.draw_bytes(port))
        {
            pkt.mark_ecn();
            self.port_counts[port].marks += 1;
        }
        self.transmit(port, pkt, at);
    }

    pub(super) fn set_queued(&mut self, port: usize, bytes: u64, at: Time) {
        let rt = &mut self.ports[port];
        rt.queue_area += rt.queued as u128 * (at - rt.last_change).0 as u128;
        rt.last_change = at;
        rt.max_queue = rt.max_queue.max(bytes);
        rt.queued = bytes;
    }

    pub(super) fn queue_area_until(&self, port: usize, t: Time) -> u128 {
        let rt = &self.ports[port];
        rt.queue_area + rt.queued as u128 * (t - rt.last_change).0 as u128
    }
}
