//! ASTRA-sim 2.x's congestion-aware analytical backend: every directed link is a FIFO
//! that carries one whole message at a time (store and forward). A message starting on
//! a free link reaches the next device after latency + bytes/bandwidth and frees the
//! link after bytes/bandwidth (each truncated to whole ns); a busy link queues it.

use crate::slab::Slab;
use crate::topology::{AstraTopology, LinkKey};
use crate::unaware::check_endpoints;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use tracefabric_netapi::{FlowRequest, Network, Ps, PS_PER_NS};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Inject(u32),
    Arrive(u32),
    LinkFree(u32),
}

struct Link {
    busy: bool,
    queue: VecDeque<u32>,
    bytes_per_ns: f64,
    latency_ns: f64,
}

struct Msg {
    id: u64,
    bytes: u64,
    route: Vec<u32>,
    hop: usize,
}

pub struct Aware {
    topo: AstraTopology,
    link_of: HashMap<LinkKey, u32>,
    links: Vec<Link>,
    msgs: Slab<Msg>,
    events: BinaryHeap<Reverse<(Ps, u64, Ev)>>,
    seq: u64,
    now: Ps,
    scratch: Vec<(usize, LinkKey)>,
    queued: u64,
    flows: u64,
}

impl Aware {
    pub fn new(topo: AstraTopology) -> Aware {
        Aware {
            topo,
            link_of: HashMap::new(),
            links: Vec::new(),
            msgs: Slab::default(),
            events: BinaryHeap::new(),
            seq: 0,
            now: 0,
            scratch: Vec::new(),
            queued: 0,
            flows: 0,
        }
    }

    fn push(&mut self, at: Ps, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    fn link_send(&mut self, l: u32, m: u32) {
        if self.links[l as usize].busy {
            self.links[l as usize].queue.push_back(m);
            self.queued += 1;
        } else {
            self.link_start(l, m);
        }
    }

    fn link_start(&mut self, l: u32, m: u32) {
        let link = &mut self.links[l as usize];
        link.busy = true;
        let bytes = self.msgs.get(m).bytes as f64;
        let serialization = bytes / link.bytes_per_ns;
        let arrive = (link.latency_ns + serialization) as u64 * PS_PER_NS;
        let free = serialization as u64 * PS_PER_NS;
        let now = self.now;
        self.push(now + arrive, Ev::Arrive(m));
        self.push(now + free, Ev::LinkFree(l));
    }
}

impl Network for Aware {
    fn endpoints(&self) -> u32 {
        self.topo.npus
    }
    fn start_flow(&mut self, f: FlowRequest, at: Ps) -> Result<(), String> {
        check_endpoints(&f, self.topo.npus)?;
        self.topo.check_fits_clock(f.bytes, at)?;
        self.flows += 1;
        let mut scratch = std::mem::take(&mut self.scratch);
        self.topo.route(f.src, f.dst, &mut scratch);
        let route = scratch
            .iter()
            .map(|&(d, key)| {
                let next = self.links.len() as u32;
                *self.link_of.entry(key).or_insert_with(|| {
                    let spec = &self.topo.dims[d];
                    self.links.push(Link {
                        busy: false,
                        queue: VecDeque::new(),
                        bytes_per_ns: spec.bytes_per_ns(),
                        latency_ns: spec.latency_ns,
                    });
                    next
                })
            })
            .collect();
        self.scratch = scratch;
        let msg = Msg {
            id: f.id,
            bytes: f.bytes,
            route,
            hop: 0,
        };
        let slot = self.msgs.insert(msg);
        self.push(at, Ev::Inject(slot));
        Ok(())
    }

    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String> {
        while let Some(&Reverse((t, _, ev))) = self.events.peek() {
            if t >= limit {
                break;
            }
            self.events.pop();
            self.now = t;
            let m = match ev {
                Ev::LinkFree(l) => {
                    let link = &mut self.links[l as usize];
                    link.busy = false;
                    if let Some(next) = link.queue.pop_front() {
                        self.link_start(l, next);
                    }
                    continue;
                }
                Ev::Inject(m) => m,
                Ev::Arrive(m) => {
                    self.msgs.get_mut(m).hop += 1;
                    m
                }
            };
            let msg = self.msgs.get(m);
            if msg.hop == msg.route.len() {
                let id = msg.id;
                self.msgs.remove(m);
                return Ok(Some((t, id)));
            }
            let l = msg.route[msg.hop];
            self.link_send(l, m);
        }
        Ok(None)
    }

    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("flows".into(), self.flows),
            ("links".into(), self.links.len() as u64),
            ("messages_queued_at_links".into(), self.queued),
        ]
    }
}
