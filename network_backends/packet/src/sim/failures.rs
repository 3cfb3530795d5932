//! Link failures at run time (`tracefabric_fabric::failures`): a failed link blackholes what
//! its ports send until the switches at its ends detect it and reroute locally; after the
//! global convergence time every switch's routes avoid it. Schemes learn of changed routes
//! through `LoadBalancer::on_routes_changed` and of lost packets through their own feedback.

use super::*;
use tracefabric_fabric::failures::Change;
use tracefabric_fabric::routes::LinkState;

#[derive(Default)]
pub(super) struct FailureState {
    pub(super) changes: Vec<(Time, Change)>,
    /// The nominal rate of each degraded port.
    pub(super) nominal: HashMap<u32, Rate>,
    /// Since when each failed port has been down, and its total down time so far.
    pub(super) down_since: HashMap<u32, Time>,
    pub(super) down_ps: HashMap<u32, u64>,
    pub(super) blackholed: u64,
    pub(super) bytes_blackholed: u64,
    /// Data frames (with payload) of each flow lost into failed links (absent: none):
    /// what the failures cost that flow in retransmissions.
    pub(super) per_flow: HashMap<u32, u64>,
    /// Times routes changed (local reroutes and global convergences).
    pub(super) reroutes: u64,
    /// One port of every link that fails during the run.
    pub(super) failed: Vec<u32>,
    /// The routes are globally converged over the links' current states.
    pub(super) converged: bool,
}

impl Simulation {
    /// Schedules the fabric's changes (before any flow starts: one at a flow's start time
    /// comes first).
    pub(super) fn schedule_failures(&mut self, plan: tracefabric_fabric::failures::FailurePlan) {
        for (i, &(at, _)) in plan.changes.iter().enumerate() {
            self.events.push(Time(at), Event::Fabric(i as u32));
        }
        self.failures.changes = plan
            .changes
            .into_iter()
            .map(|(t, c)| (Time(t), c))
            .collect();
        self.failures.failed = plan.failed;
    }

    /// ρ_max (`bounds::failure`) with every link that fails during the run down, routes
    /// converged around them and every degraded link at its lowest rate: 1 without
    /// failures, 0 if they cut flows off (a host's own link included).
    pub fn rho_max(&self) -> f64 {
        let mut degraded: HashMap<PortId, f64> = HashMap::new();
        for (_, change) in &self.failures.changes {
            if let Change::Degrade(p, r) = *change {
                for q in [p, p ^ 1] {
                    let e = degraded.entry(q).or_insert(r);
                    *e = e.min(r);
                }
            }
        }
        if self.failures.failed.is_empty() && degraded.is_empty() {
            return 1.0;
        }
        let flows: Vec<FlowSpec> = self.flows.iter().map(|f| f.spec).collect();
        let all_down = (self.failures.failed.iter()).all(|&p| self.ports[p as usize].down);
        if self.failures.converged && all_down {
            // The run ended converged around exactly these links (no other link fails).
            return bounds::failure::rho_max_degraded(&self.topo, &flows, &degraded);
        }
        let mut topo = self.topo.clone();
        for &p in &self.failures.failed {
            if topo.set_link_state(p, LinkState::Down).is_err() {
                // A host's own link (`allow_host_links`): that host's flows have no path.
                let host = self.topo.ports[p as usize]
                    .owner
                    .min(self.topo.ports[p as usize].peer);
                if flows.iter().any(|f| f.src == host || f.dst == host) {
                    return 0.0;
                }
            }
        }
        let parts = topo.compute_routes_in_parts();
        if self.cut_off(&topo, &parts, false).is_some() {
            return 0.0; // a flow with no path left
        }
        bounds::failure::rho_max_degraded(&topo, &flows, &degraded)
    }

    /// The first flow (unfinished ones only, if `unfinished`) whose edge switches lie in
    /// different parts of a cut fabric.
    fn cut_off(&self, topo: &Topology, parts: &[u32], unfinished: bool) -> Option<usize> {
        let part = |host: u32| {
            let edge = topo.host_edge[host as usize];
            parts[topo.edge_index[edge as usize] as usize]
        };
        (self.flows.iter()).position(|f| {
            (!unfinished || f.finish.is_none()) && part(f.spec.src) != part(f.spec.dst)
        })
    }

    pub(super) fn on_fabric_change(&mut self, i: usize) {
        let change = self.failures.changes[i].1;
        match change {
            Change::Down(port) | Change::Up(port) => {
                let down = matches!(change, Change::Down(_));
                for p in [port, port ^ 1] {
                    // What the port has sent so far is decided; from now on it is lost, and so
                    // is what is on the wire (it arrives nowhere).
                    self.catch_up_port(p as usize, self.now);
                    self.ports[p as usize].down = down;
                    if down {
                        self.cut_wire(p as usize);
                        self.failures.down_since.entry(p).or_insert(self.now);
                    } else if let Some(since) = self.failures.down_since.remove(&p) {
                        *self.failures.down_ps.entry(p).or_default() += (self.now - since).0;
                    }
                }
                self.failures.converged = false;
                let state = if down { LinkState::Down } else { LinkState::Up };
                // Host links were refused when the plan was built unless asked for.
                let _ = self.topo.set_link_state(port, state);
            }
            Change::Degrade(port, fraction) => {
                for p in [port, port ^ 1] {
                    self.catch_up_port(p as usize, self.now);
                    let nominal = *self
                        .failures
                        .nominal
                        .entry(p)
                        .or_insert(self.ports[p as usize].rate);
                    self.ports[p as usize].rate =
                        Rate::from_gbps(nominal.bps() as f64 * fraction / 1e9);
                }
            }
            Change::Detect(port) => {
                if !self.ports[port as usize].down {
                    return; // repaired before it was detected
                }
                let ends = [
                    (self.topo.ports[port as usize].owner, port),
                    (self.topo.ports[port as usize].peer, port ^ 1),
                ];
                let mut changed = false;
                for (node, p) in ends {
                    changed |= self.topo.exclude_locally(node, p);
                }
                if changed {
                    self.failures.converged = false;
                    self.routes_changed();
                }
            }
            Change::Converge => {
                // A cut matters only if a flow still to finish spans it.
                let parts = self.topo.compute_routes_in_parts();
                if let Some(f) = self.cut_off(&self.topo, &parts, true) {
                    self.error = Some(self.disconnected(f));
                    return;
                }
                self.failures.converged = true;
                self.routes_changed();
            }
        }
    }

    fn routes_changed(&mut self) {
        self.failures.reroutes += 1;
        self.lb.on_routes_changed(&self.topo);
    }

    /// Brings a port's departures up to `t` before its state changes.
    fn catch_up_port(&mut self, port: usize, t: Time) {
        if self.ports[port].owner_is_host {
            self.host_catch_up(port, t);
        } else {
            self.catch_up(port, t);
        }
    }

    /// The error of a failure set that cuts flow `f` off, with the links that are down.
    fn disconnected(&self, f: usize) -> SimError {
        let spec = self.flows[f].spec;
        let edge = |h: u32| self.topo.host_edge[h as usize];
        config_err(
            "failures",
            format!(
                "flow {f} ({} -> {}) cannot reach its destination: the links that are down disconnect edge switch {} from edge switch {}; links down: {}",
                spec.src, spec.dst, edge(spec.src), edge(spec.dst), self.links_down().join(", ")
            ),
        )
    }

    /// Every link that is down, as "owner-peer" of its first port.
    fn links_down(&self) -> Vec<String> {
        (0..self.ports.len())
            .step_by(2)
            .filter(|&p| self.ports[p].down)
            .map(|p| format!("{}-{}", self.topo.ports[p].owner, self.topo.ports[p].peer))
            .collect()
    }

    /// Why a stalled flow may have stalled while links are down: its data (or its ACKs,
    /// not counted per flow) go into them, and routes that never converge keep them
    /// there (a switch away from the link has no local reroute).
    pub(super) fn blackhole_hint(&self, f: u32) -> String {
        let down = self.links_down();
        if down.is_empty() {
            return String::new();
        }
        let frames = self.failures.per_flow.get(&f).copied().unwrap_or(0);
        let fix = if self.failures.converged {
            ""
        } else {
            "; routes have not converged around them (failures.convergence_us / convergence_rtts unset, or not yet reached), so a hash-based LB keeps a flow, or its ACKs, on them: set one, or use an LB that moves paths on timeouts (reps, ethereal, host_spray)"
        };
        format!(
            "; links down: {} ({frames} of this flow's data frames went into them){fix}",
            down.join(", ")
        )
    }

    /// The frames on a failing link's wire are lost where they are (their arrival events
    /// still come, and drop them).
    fn cut_wire(&mut self, port: usize) {
        let mut wire = std::mem::take(&mut self.ports[port].wire);
        for pkt in wire.iter_mut().filter(|p| !p.is_lost()) {
            self.blackhole(pkt);
        }
        self.ports[port].wire = wire;
    }

    /// A frame sent into a failed link: lost, counted as blackholed.
    #[cold]
    pub(super) fn blackhole(&mut self, pkt: &mut Packet) {
        pkt.mark_lost();
        self.failures.blackholed += 1;
        let payload = (pkt.wire() as u32).saturating_sub(self.fabric.packet.header_bytes);
        // A trimmed header's payload was counted as trimmed where it was cut.
        if !pkt.is_ack() && payload > 0 {
            *self.failures.per_flow.entry(pkt.flow()).or_default() += 1;
            self.failures.bytes_blackholed += payload as u64;
        }
    }
}
