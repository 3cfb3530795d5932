//! Flow-level model: every sending flow gets its max-min fair rate over the links it
//! uses (progressive filling), recomputed whenever a flow starts or finishes sending.
//! A flow may be split over several paths (fat trees: evenly over all shortest paths,
//! as ideal spraying does), so its use of a link is a fraction of its rate.
//! Cut-through: the last byte leaves the source when the fluid drains and arrives one
//! path latency later — no store-and-forward of whole messages.
//!
//! On a packet fabric (fat tree, leaf-spine) the model charges what the packet engine
//! pays: header and inter-frame gap per data packet on the forward path, the ACK per
//! data packet on the reverse path, one frame of store-and-forward per switch, and the
//! ACK's return to the sender (a flow completes when its sender knows, as in the packet engine).

use crate::slab::Slab;
use crate::topology::{AstraTopology, LinkKey};
use crate::unaware::check_endpoints;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tracefabric_fabric::config::PacketConfig;
use tracefabric_fabric::topology::Topology;
use tracefabric_fabric::units::Dur;
use tracefabric_netapi::{FlowRequest, Network, Ps, PS_PER_NS};

/// What the flows run over.
pub enum Fabric {
    Astra {
        topo: AstraTopology,
        link_of: HashMap<LinkKey, u32>,
    },
    Packet {
        topo: Topology,
        packet: PacketConfig,
        switch_latency: Dur,
    },
}

struct FlowSt {
    id: u64,
    /// (link, share of the flow's rate that crosses it)
    usage: Vec<(u32, f64)>,
    remaining: f64,
    rate: f64,
    latency: Ps,
    drains_at: Ps,
}

pub struct FlowModel {
    fabric: Fabric,
    /// Capacity of every link, bytes per ps.
    caps: Vec<f64>,
    now: Ps,
    seq: u64,
    pending: BinaryHeap<Reverse<(Ps, u64, u32)>>,
    tails: BinaryHeap<Reverse<(Ps, u64, u64)>>,
    active: Vec<u32>,
    flows: Slab<FlowSt>,
    dirty: bool,
    next_drain: Ps,
    recomputes: u64,
    started: u64,
    // Scratch for progressive filling, indexed by link.
    residual: Vec<f64>,
    weight: Vec<f64>,
}

impl FlowModel {
    pub fn on_astra(topo: AstraTopology) -> FlowModel {
        FlowModel::new(
            Fabric::Astra {
                topo,
                link_of: HashMap::new(),
            },
            Vec::new(),
        )
    }

    pub fn on_packet_fabric(fabric: tracefabric_fabric::Fabric) -> FlowModel {
        let (cfg, topo) = (fabric.config, fabric.topology);
        let caps = topo
            .ports
            .iter()
            .map(|p| p.rate.bps() as f64 / 8.0 / 1e12)
            .collect();
        FlowModel::new(
            Fabric::Packet {
                topo,
                packet: cfg.packet.clone(),
                switch_latency: Dur::from_ns_f64(cfg.switch.latency_ns),
            },
            caps,
        )
    }

    fn new(fabric: Fabric, caps: Vec<f64>) -> FlowModel {
        FlowModel {
            fabric,
            caps,
            now: 0,
            seq: 0,
            pending: BinaryHeap::new(),
            tails: BinaryHeap::new(),
            active: Vec::new(),
            flows: Slab::default(),
            dirty: false,
            next_drain: Ps::MAX,
            recomputes: 0,
            started: 0,
            residual: Vec::new(),
            weight: Vec::new(),
        }
    }

    /// When the model next acts (a flow starts, drains or is delivered); `Ps::MAX` when
    /// idle. Looking changes nothing the model will do.
    pub fn next_event_time(&mut self) -> Ps {
        if self.dirty {
            self.recompute();
        }
        let t_tail = self.tails.peek().map_or(Ps::MAX, |r| r.0 .0);
        let t_start = self.pending.peek().map_or(Ps::MAX, |r| r.0 .0);
        t_tail.min(t_start).min(self.next_drain)
    }

    /// Links a flow uses with their shares, and its latency (see the module comment).
    fn path(&mut self, src: u32, dst: u32) -> (Vec<(u32, f64)>, Ps) {
        match &mut self.fabric {
            Fabric::Astra { topo, link_of } => {
                let mut route = Vec::new();
                topo.route(src, dst, &mut route);
                let mut latency = 0.0;
                let usage = route
                    .iter()
                    .map(|&(d, key)| {
                        let spec = topo.dims[d];
                        latency += spec.latency_ns;
                        let next = self.caps.len() as u32;
                        let l = *link_of.entry(key).or_insert_with(|| {
                            self.caps.push(spec.bytes_per_ns() / PS_PER_NS as f64);
                            next
                        });
                        (l, 1.0)
                    })
                    .collect();
                (usage, (latency * PS_PER_NS as f64).round() as Ps)
            }
            Fabric::Packet {
                topo,
                packet,
                switch_latency,
            } => {
                let payload = packet.payload_bytes as f64;
                let data_share = (packet.payload_bytes + packet.header_bytes + packet.gap_bytes)
                    as f64
                    / payload;
                let ack_share = (packet.ack_bytes + packet.gap_bytes) as f64 / payload;
                let data = spread(topo, src, dst);
                let acks = spread(topo, dst, src);
                let mut usage: Vec<(u32, f64)> =
                    data.iter().map(|&(p, f)| (p, f * data_share)).collect();
                usage.extend(acks.iter().map(|&(p, f)| (p, f * ack_share)));
                let frame = (packet.payload_bytes + packet.header_bytes) as u64;
                let path_latency =
                    |hops: &[(u32, f64)], bytes: u64, skip_first_serialization: bool| -> Ps {
                        // All shortest paths have the same length: follow the first.
                        let mut at = hops.first().map(|&(p, _)| topo.ports[p as usize].owner);
                        let mut total = 0u64;
                        let mut first = true;
                        while let Some(node) = at {
                            let Some(&(p, _)) = hops
                                .iter()
                                .find(|&&(p, _)| topo.ports[p as usize].owner == node)
                            else {
                                break;
                            };
                            let port = &topo.ports[p as usize];
                            total += port.latency.0;
                            if port.peer >= topo.n_hosts {
                                total += switch_latency.0;
                            }
                            if !(first && skip_first_serialization) {
                                total += port.rate.serialization(bytes).0;
                            }
                            first = false;
                            at = if port.peer < topo.n_hosts {
                                None
                            } else {
                                Some(port.peer)
                            };
                        }
                        total
                    };
                let latency = path_latency(&data, frame, true)
                    + path_latency(&acks, packet.ack_bytes as u64, false);
                (usage, latency)
            }
        }
    }

    fn advance_to(&mut self, t: Ps) {
        let dt = (t - self.now) as f64;
        if dt > 0.0 {
            for &s in &self.active {
                let f = self.flows.get_mut(s);
                f.remaining = (f.remaining - f.rate * dt).max(0.0);
            }
        }
        self.now = t;
    }

    /// Max-min fair rates by progressive filling, then each flow's drain time.
    fn recompute(&mut self) {
        self.recomputes += 1;
        self.residual.resize(self.caps.len(), 0.0);
        self.weight.resize(self.caps.len(), 0.0);
        let mut touched: Vec<u32> = Vec::new();
        for &s in &self.active {
            let f = self.flows.get_mut(s);
            f.rate = 0.0;
            for &(l, share) in &f.usage {
                if self.weight[l as usize] == 0.0 {
                    touched.push(l);
                    self.residual[l as usize] = self.caps[l as usize];
                }
                self.weight[l as usize] += share;
            }
        }
        let mut unfrozen: Vec<u32> = self.active.clone();
        while !unfrozen.is_empty() {
            // The next link to saturate if every unfrozen flow speeds up equally.
            let mut delta = f64::INFINITY;
            for &l in &touched {
                let w = self.weight[l as usize];
                if w > 1e-12 {
                    delta = delta.min(self.residual[l as usize] / w);
                }
            }
            if !delta.is_finite() {
                break;
            }
            for &l in &touched {
                let w = self.weight[l as usize];
                if w > 1e-12 {
                    self.residual[l as usize] -= delta * w;
                }
            }
            let mut still = Vec::with_capacity(unfrozen.len());
            for &s in &unfrozen {
                let f = self.flows.get_mut(s);
                f.rate += delta;
                let saturated = f
                    .usage
                    .iter()
                    .any(|&(l, _)| self.residual[l as usize] <= 1e-9 * self.caps[l as usize]);
                if saturated {
                    for &(l, share) in &f.usage {
                        self.weight[l as usize] -= share;
                    }
                } else {
                    still.push(s);
                }
            }
            unfrozen = still;
        }
        for &l in &touched {
            self.weight[l as usize] = 0.0;
        }
        self.next_drain = Ps::MAX;
        for &s in &self.active {
            let f = self.flows.get_mut(s);
            let dt = if f.rate > 0.0 {
                (f.remaining / f.rate).round().max(1.0)
            } else {
                f64::MAX
            };
            f.drains_at = if dt >= (Ps::MAX - self.now) as f64 {
                Ps::MAX
            } else {
                self.now + dt as Ps
            };
            self.next_drain = self.next_drain.min(f.drains_at);
        }
        self.dirty = false;
    }
}

/// Share of a flow from `src` to `dst` on every port, split over next hops by their
/// W-ECMP weights (evenly on an intact fabric).
fn spread(topo: &Topology, src: u32, dst: u32) -> Vec<(u32, f64)> {
    let mut out = vec![(topo.host_port[src as usize], 1.0)];
    let (se, de) = (topo.host_edge[src as usize], topo.host_edge[dst as usize]);
    let mut layer: Vec<(u32, f64)> = vec![(se, 1.0)];
    while layer.iter().any(|&(n, _)| n != de) {
        let mut next: Vec<(u32, f64)> = Vec::new();
        for &(node, share) in &layer {
            let g = topo.group_towards(node, de) as usize;
            let total: u32 = topo.weights[g].iter().sum();
            for (&p, &w) in topo.groups[g].iter().zip(&topo.weights[g]) {
                let s = share * w as f64 / total as f64;
                out.push((p, s));
                let peer = topo.ports[p as usize].peer;
                match next.iter_mut().find(|(n, _)| *n == peer) {
                    Some(e) => e.1 += s,
                    None => next.push((peer, s)),
                }
            }
        }
        layer = next;
    }
    out.push((topo.host_down_port[dst as usize], 1.0));
    out
}

impl Network for FlowModel {
    fn endpoints(&self) -> u32 {
        match &self.fabric {
            Fabric::Astra { topo, .. } => topo.npus,
            Fabric::Packet { topo, .. } => topo.n_hosts,
        }
    }

    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        check_endpoints(&f, self.endpoints())?;
        if let Fabric::Astra { topo, .. } = &self.fabric {
            topo.check_fits_clock(f.bytes, at)?;
        }
        self.started += 1;
        self.seq += 1;
        if f.src == f.dst || f.bytes == 0 {
            let (_, latency) = if f.src == f.dst {
                (Vec::new(), 0)
            } else {
                self.path(f.src, f.dst)
            };
            self.tails.push(Reverse((at + latency, self.seq, f.id)));
            return Ok(());
        }
        let (usage, latency) = self.path(f.src, f.dst);
        let st = FlowSt {
            id: f.id,
            usage,
            remaining: f.bytes as f64,
            rate: 0.0,
            latency,
            drains_at: Ps::MAX,
        };
        let slot = self.flows.insert(st);
        self.pending.push(Reverse((at, self.seq, slot)));
        Ok(())
    }

    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        loop {
            if self.dirty {
                self.recompute();
            }
            let t_tail = self.tails.peek().map_or(Ps::MAX, |r| r.0 .0);
            let t_start = self.pending.peek().map_or(Ps::MAX, |r| r.0 .0);
            let t = t_tail.min(t_start).min(self.next_drain);
            if t == Ps::MAX || t >= limit {
                return Ok(None);
            }
            if t_tail == t {
                let Reverse((t, _, id)) = self.tails.pop().expect("peeked");
                return Ok(Some((t, id)));
            }
            self.advance_to(t);
            while let Some(&Reverse((ts, _, slot))) = self.pending.peek() {
                if ts > t {
                    break;
                }
                self.pending.pop();
                self.active.push(slot);
                self.dirty = true;
            }
            if self.next_drain <= t {
                let mut keep = Vec::with_capacity(self.active.len());
                for &s in &self.active {
                    let f = self.flows.get(s);
                    if f.drains_at <= t {
                        self.seq += 1;
                        self.tails.push(Reverse((t + f.latency, self.seq, f.id)));
                        self.flows.remove(s);
                    } else {
                        keep.push(s);
                    }
                }
                self.active = keep;
                self.dirty = true;
            }
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("flows".into(), self.started),
            ("rate_recomputations".into(), self.recomputes),
        ]
    }
}
