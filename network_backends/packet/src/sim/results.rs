//! The report of a run.

use super::*;

impl Simulation {
    /// Scheme counters, those of replayed periods (`reuse`) included.
    fn scheme_counters(&self) -> Vec<(String, u64)> {
        let mut c = self.scheme_counters_simulated();
        for (k, v) in &self.replayed_counters {
            if let Some(at) = c.iter_mut().find(|(name, _)| name == k) {
                at.1 += v;
            }
        }
        c
    }

    fn lb_counters(&self) -> Vec<(String, u64)> {
        let mut c = lb::report_counters(self.lb.as_ref(), self.flows.len());
        for (k, v) in &self.replayed_counters {
            if let Some(at) = (c.iter_mut()).find(|(name, _)| k.strip_prefix("lb.") == Some(name)) {
                at.1 += v;
            }
        }
        c
    }

    pub(super) fn scheme_counters_simulated(&self) -> Vec<(String, u64)> {
        let mut qdisc = self.qdisc.counters();
        if let Some(pfc) = &self.pfc {
            qdisc.extend(pfc.counters());
        }
        let families = [
            ("cc", self.cc.counters()),
            ("loss", self.loss.counters()),
            ("receiver", self.receiver.counters()),
            ("qdisc", qdisc),
        ];
        (families.into_iter())
            .flat_map(|(family, c)| {
                c.into_iter()
                    .map(move |(k, v)| (format!("{family}.{k}"), v))
            })
            .collect()
    }

    /// The CCT lower bound of the flows (`bounds::cct_lower_bound`). It counts from the
    /// requested start times, so a scheme that delays starts (e.g. Ethereal's jitter) pays
    /// for it in its CCT; where no flow is ever held back, it also follows each NIC's round
    /// robin, in the order flows really start.
    pub fn lower_bound(&self) -> Time {
        let timing = FrameTiming::new(&self.fabric);
        let requested: Vec<FlowSpec> = (self.flows.iter().zip(&self.requested_starts))
            .map(|(f, &start)| FlowSpec { start, ..f.spec })
            .collect();
        let starts: Vec<Time> = self.flows.iter().map(|f| f.spec.start).collect();
        let nic_order = self.cc.never_holds_back().then_some(&starts[..]);
        bounds::cct_lower_bound(&self.topo, &requested, nic_order, &timing)
    }

    /// The report at `completed_at`; `lower_bound` None for a driven run, whose flows start
    /// when the system layer says (it reports 0 then). Without `with_flows` its per-flow list
    /// is empty (a driven run of tens of millions of flows reads only the counts).
    pub(super) fn report(
        self,
        completed_at: Time,
        areas: &[u128],
        lower_bound: Option<Time>,
        with_flows: bool,
    ) -> Report {
        let first_start = self.requested_start;
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        for (f, hot) in self.flows.iter().zip(&self.hot) {
            for x in [f.finish.map_or(0, |t| t.0), hot.sent, f.retransmitted] {
                digest = mix64(digest ^ x);
            }
        }
        let listed = if with_flows { self.flows.len() } else { 0 };
        let flows: Vec<FlowResult> = self.flows[..listed]
            .iter()
            .zip(&self.hot)
            .enumerate()
            .map(|(i, (f, hot))| FlowResult {
                src: f.spec.src,
                dst: f.spec.dst,
                bytes: f.spec.bytes,
                start_ps: f.spec.start.0,
                finish_ps: f.finish.map_or(0, |t| t.0),
                packets_sent: hot.sent,
                retransmissions: f.retransmitted,
                timeouts: f.timeouts,
                blackholed: self
                    .failures
                    .per_flow
                    .get(&(i as u32))
                    .copied()
                    .unwrap_or(0),
                hops: self.topo.hops_between(f.spec.src, f.spec.dst),
            })
            .collect();
        let span = (completed_at - first_start).0.max(1) as f64;
        // Keyed by position along a path (host->E, E->A, A->C, C->A, A->E, E->host), then name.
        let mut stages: BTreeMap<(u32, String), StageStats> = BTreeMap::new();
        let mut area_sum: BTreeMap<String, f64> = BTreeMap::new();
        let mut cap_sum: BTreeMap<String, f64> = BTreeMap::new();
        let mut data_sum: BTreeMap<String, f64> = BTreeMap::new();
        for (i, rt) in self.ports.iter().enumerate() {
            let name = self.topo.stage_name(i as u32);
            let order = self.topo.stage_order(i as u32);
            let s = stages
                .entry((order, name.clone()))
                .or_insert_with(|| StageStats {
                    name: name.clone(),
                    ports: 0,
                    max_queue_bytes: 0,
                    mean_queue_bytes: 0.0,
                    utilization: 0.0,
                    drops: 0,
                    trims: 0,
                    ecn_marks: 0,
                    max_link_load: 0.0,
                });
            s.ports += 1;
            s.max_queue_bytes = s.max_queue_bytes.max(rt.max_queue);
            s.drops += self.port_counts[i].drops;
            s.trims += self.port_counts[i].trims;
            s.ecn_marks += self.port_counts[i].marks;
            *area_sum.entry(name.clone()).or_default() += areas[i] as f64;
            *data_sum.entry(name.clone()).or_default() += rt.data_tx_bytes as f64;
            s.max_link_load = s.max_link_load.max(rt.data_tx_bytes as f64);
            s.utilization += rt.tx_bytes as f64 * 8.0;
            *cap_sum.entry(name).or_default() += rt.rate.bps() as f64 * span / 1e12;
        }
        for s in stages.values_mut() {
            s.mean_queue_bytes = area_sum[&s.name] / (s.ports as f64 * span);
            s.utilization /= cap_sum[&s.name];
            let mean = data_sum[&s.name] / s.ports as f64;
            s.max_link_load = if mean > 0.0 {
                s.max_link_load / mean
            } else {
                0.0
            };
        }
        let live = self.live_packets;
        let paused_ps = self.pfc_paused_until(completed_at);
        let links = (self.ports.iter().enumerate())
            .map(|(i, rt)| LinkResult {
                owner: self.topo.ports[i].owner,
                peer: rt.peer,
                stage: self.topo.stage_name(i as u32),
                data_bytes: rt.data_tx_bytes,
                bytes: rt.tx_bytes,
                max_queue_bytes: rt.max_queue,
                down_ps: self.failures.down_ps.get(&(i as u32)).copied().unwrap_or(0)
                    + (self.failures.down_since.get(&(i as u32)))
                        .map_or(0, |&since| completed_at.0.saturating_sub(since.0)),
                pauses: self.pfc.as_ref().map_or(0, |p| p.pauses[i]),
                paused_ps: paused_ps[i],
            })
            .collect();
        Report {
            cct_ps: (completed_at - first_start).0,
            lower_bound_ps: lower_bound.map_or(0, |b| (b - first_start).0),
            events: self.events.processed(),
            events_skipped: self.events_skipped,
            data_packet_hops: self.data_hops,
            data_bytes_sent: self.bytes_sent,
            data_bytes_delivered: self.bytes_delivered,
            data_bytes_dropped: self.bytes_dropped,
            data_packets_dropped: self.pkts_dropped,
            acks_dropped: self.acks_dropped,
            data_packets_trimmed: self.pkts_trimmed,
            data_packets_lost_on_links: self.pkts_lost,
            frames_blackholed: self.failures.blackholed,
            data_bytes_blackholed: self.failures.bytes_blackholed,
            reroutes: self.failures.reroutes,
            rho_max: self.rho_max(),
            data_bytes_trimmed: self.bytes_trimmed,
            ecn_marks: self.port_counts.iter().map(|p| p.marks).sum(),
            packets_alive_at_end: live,
            lb_counters: self.lb_counters(),
            scheme_counters: self.scheme_counters(),
            stages: stages.into_values().collect(),
            links,
            digest: mix64(digest ^ self.events.processed()),
            flows,
        }
    }
}
