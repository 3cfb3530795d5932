//! `ethereal` (Ethereal paper §3, Algorithm 1): single-path flows with source
//! routing, balanced by construction. For every source host and destination edge
//! switch (leaf) with n flows over s paths, each path gets floor(n/s) whole flows;
//! only the r = n mod s remaining flows are split, each into s/g subflows
//! (g = gcd(r, s)), and every path gets r/g of those. By Theorem 1 every path then
//! carries exactly f*n/s, with r*(s-g)/g extra flows. Flows start after a small
//! random jitter (against repetitive incasts). Each of the paper's subflows is its own
//! queue pair with its own timeout (§3.3), so a flow timeout moves the subflows that
//! went a whole timeout without an acknowledgement (those queue pairs timed out) to
//! random paths not marked bad, and marks their old paths bad at the source for
//! `bad_path_reset_us`. If none did (one packet lost on a path still acked, which the
//! paper's receiver NACKs, and a NACK reroutes too), the subflows acknowledged least
//! recently move, unless a subflow of the flow moved within the last timeout (the
//! expiring packets then are the moved subflow's, resent on its new path). A flow's
//! first packet consults its source's bad marks: "subsequent flow arrivals undergo
//! load balancing based only on the available good paths" (§3.3), so its subflows on
//! bad paths are dropped (a flow left with none takes a random good path). Subflows
//! take turns packet by packet, so each carries an equal share of the flow (to one packet).

use super::source_route::SourceRoutes;
use super::{FlowId, Header, LbInit, LoadBalancer, SwitchView};
use crate::config::Params;
use crate::error::SimResult;
use crate::params::ParamReader;
use crate::rng::{derive_rng, Rng};
use crate::topology::{PortId, Topology};
use crate::transport::Feedback;
use crate::units::{Dur, Time, PS_PER_US};
use rand::seq::SliceRandom;
use rand::Rng as _;
use std::collections::{BTreeMap, HashMap};

pub struct Ethereal {
    routes: SourceRoutes,
    /// Per flow: the path id of each of its subflows (one for an unsplit flow).
    paths: Vec<Vec<u32>>,
    /// Per flow and subflow: when a reply last echoed the subflow's path (or it was moved).
    last_ack: Vec<Vec<Time>>,
    /// Per flow and subflow: when it last sent a packet. A subflow that sent nothing since
    /// its last acknowledgement awaits nothing: it is idle, never dead.
    last_send: Vec<Vec<Time>>,
    /// Per flow: its source host and number of paths to its destination.
    src_and_paths: Vec<(u32, u32)>,
    /// Per flow: whether its first packet has been sent (its paths were checked then).
    started: Vec<bool>,
    /// Per flow: when a timeout last moved one of its subflows.
    moved_at: Vec<Option<Time>>,
    extra_flows: u64,
    jitter_ps: u64,
    reset: Dur,
    rto: Dur,
    /// (source host, path id) -> bad until.
    bad: HashMap<(u32, u32), Time>,
    reroutes: u64,
    rng: Rng,
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

pub fn build(init: &LbInit, params: &Params) -> SimResult<Box<dyn LoadBalancer>> {
    let mut p = ParamReader::new("lb", "ethereal", params);
    let jitter_ns = p.f64_in("start_jitter_ns", 500.0, 0.0, 1e9)?;
    let reset_us = p.f64_in("bad_path_reset_us", 500.0, 0.0, 1e9)?;
    p.finish()?;
    let routes = SourceRoutes::new(init.topo);
    let mut rng = derive_rng(init.seed, "lb.ethereal", 0);

    // The batch of every source host, grouped by destination leaf (ordered maps: deterministic).
    let mut batches: BTreeMap<(u32, u32), Vec<FlowId>> = BTreeMap::new();
    for (i, f) in init.flows.iter().enumerate() {
        batches
            .entry((f.src, routes.dst_edge(f.dst)))
            .or_default()
            .push(i as FlowId);
    }
    let mut paths = vec![Vec::new(); init.flows.len()];
    let mut extra_flows = 0u64;
    for mut flows in batches.into_values() {
        let f0 = init.flows[flows[0] as usize];
        let s = routes.paths_between(f0.src, f0.dst);
        flows.shuffle(&mut rng);
        let mut order: Vec<u32> = (0..s).collect();
        order.shuffle(&mut rng);
        let n = flows.len() as u32;
        let whole = (n / s) * s;
        for (i, &f) in flows[..whole as usize].iter().enumerate() {
            paths[f as usize].push(order[i % s as usize]);
        }
        let r = n - whole;
        if r > 0 {
            let g = gcd(r, s);
            let parts = s / g;
            for (t, &f) in flows[whole as usize..].iter().enumerate() {
                // Part x = t*parts + u goes to path x mod s: each path gets r/g parts,
                // and one flow's parts land on distinct paths.
                paths[f as usize] = (0..parts)
                    .map(|u| order[((t as u32 * parts + u) % s) as usize])
                    .collect();
            }
            extra_flows += (r * (parts - 1)) as u64;
        }
    }
    let src_and_paths = init
        .flows
        .iter()
        .map(|f| (f.src, routes.paths_between(f.src, f.dst)))
        .collect();
    let last_ack: Vec<Vec<Time>> = paths.iter().map(|p| vec![Time::ZERO; p.len()]).collect();
    let last_send = last_ack.clone();
    Ok(Box::new(Ethereal {
        routes,
        started: vec![false; paths.len()],
        moved_at: vec![None; paths.len()],
        paths,
        last_ack,
        last_send,
        src_and_paths,
        extra_flows,
        jitter_ps: (jitter_ns * 1e3).round() as u64,
        reset: Dur((reset_us * PS_PER_US as f64).round() as u64),
        rto: init.rto,
        bad: HashMap::new(),
        reroutes: 0,
        rng,
    }))
}

impl Ethereal {
    /// The path ids from `src` (of `s`) not marked bad at `now`.
    fn good_paths(&self, src: u32, s: u32, now: Time) -> Vec<u32> {
        (0..s)
            .filter(|&q| self.bad.get(&(src, q)).map_or(true, |&until| until <= now))
            .collect()
    }

    /// A flow arriving drops its subflows on paths its source marked bad; one left with
    /// none takes a random good path (all bad: it keeps its paths). Called at its first packet.
    fn avoid_bad_paths(&mut self, flow: FlowId, now: Time) {
        let (src, s) = self.src_and_paths[flow as usize];
        let good = if self.bad.is_empty() {
            Vec::new()
        } else {
            self.good_paths(src, s, now)
        };
        if !good.is_empty() && good.len() < s as usize {
            let paths = &mut self.paths[flow as usize];
            paths.retain(|q| good.contains(q));
            if paths.is_empty() {
                paths.push(good[self.rng.gen_range(0..good.len())]);
            }
        }
        // A subflow's silence counts from the flow's start.
        let n = self.paths[flow as usize].len();
        self.last_ack[flow as usize] = vec![now; n];
        self.last_send[flow as usize] = vec![now; n];
    }
}

impl LoadBalancer for Ethereal {
    fn on_routes_changed(&mut self, topo: &Topology) {
        self.routes.routes_changed(topo);
    }

    fn entropy(&mut self, flow: FlowId, seq: u32, now: Time) -> u32 {
        if !self.started[flow as usize] {
            self.started[flow as usize] = true;
            self.avoid_bad_paths(flow, now);
        }
        let p = &self.paths[flow as usize];
        let slot = seq as usize % p.len();
        self.last_send[flow as usize][slot] = now;
        p[slot]
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        let (paths, acked) = (
            &self.paths[fb.flow as usize],
            &mut self.last_ack[fb.flow as usize],
        );
        // Every subflow on the echoed path: a cumulative ACK's seq need not be the packet's.
        for (slot, &q) in paths.iter().enumerate() {
            if q == fb.echo {
                acked[slot] = fb.now;
            }
        }
    }

    fn on_timeout(&mut self, flow: FlowId, now: Time) {
        let (src, s) = self.src_and_paths[flow as usize];
        let (acked, sent) = (
            &self.last_ack[flow as usize],
            &self.last_send[flow as usize],
        );
        let waiting: Vec<usize> = (0..acked.len()).filter(|&i| sent[i] > acked[i]).collect();
        let mut dead: Vec<usize> = (waiting.iter().copied())
            .filter(|&i| acked[i] + self.rto <= now)
            .collect();
        if dead.is_empty() {
            if self.moved_at[flow as usize].is_some_and(|t| t + self.rto > now) {
                return;
            }
            let Some(stalest) = waiting.iter().map(|&i| acked[i]).min() else {
                return; // nothing awaited: the expiry is about a packet no subflow still owes
            };
            dead = (waiting.into_iter())
                .filter(|&i| acked[i] == stalest)
                .collect();
        }
        for &i in &dead {
            self.bad
                .insert((src, self.paths[flow as usize][i]), now + self.reset);
        }
        let good = self.good_paths(src, s, now);
        for &i in &dead {
            self.paths[flow as usize][i] = if good.is_empty() {
                self.rng.gen_range(0..s)
            } else {
                good[self.rng.gen_range(0..good.len())]
            };
            self.last_ack[flow as usize][i] = now;
        }
        self.moved_at[flow as usize] = Some(now);
        self.reroutes += 1;
    }

    fn start_delay(&mut self, _flow: FlowId) -> Dur {
        Dur(if self.jitter_ps == 0 {
            0
        } else {
            self.rng.gen_range(0..self.jitter_ps)
        })
    }

    fn choose_port(&mut self, view: &SwitchView, hdr: &Header) -> PortId {
        self.routes.port(view, hdr.entropy)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("queue_pairs", self.paths.len() as u64 + self.extra_flows),
            ("extra_flows", self.extra_flows),
            ("reroutes", self.reroutes),
        ]
    }
}
