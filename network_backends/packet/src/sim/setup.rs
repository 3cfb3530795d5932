//! Building a run: checking the flows against the limits, the schemes, the ports,
//! the retransmission timeout.

use super::*;

impl Simulation {
    /// A standalone run of the config's traffic.
    pub fn new(cfg: SimConfig) -> SimResult<Simulation> {
        cfg.validate()?;
        let Some(traffic_cfg) = &cfg.traffic else {
            return Err(config_err(
                "traffic",
                "missing: a run needs flows (permutation, all_to_all, incast or flows)",
            ));
        };
        let fabric = Fabric::build(cfg.fabric())?;
        let specs = traffic::generate(traffic_cfg, &fabric.topology, cfg.seed)?;
        Simulation::build(fabric, specs, &cfg.scheme, &cfg.limits, cfg.seed)
    }

    /// A run of `flows` (indexed by position) on `fabric` with these schemes and limits:
    /// what every run is built from, the system layer's included.
    pub fn build(
        fabric: Fabric,
        mut specs: Vec<FlowSpec>,
        scheme: &SchemeConfig,
        limits: &LimitsConfig,
        seed: u64,
    ) -> SimResult<Simulation> {
        limits.validate()?;
        let Fabric {
            config: fab,
            topology: mut topo,
        } = fabric;
        topo.equal_weights = fab.failures.equal_weights;
        if specs.len() as u64 > limits.max_flows {
            return Err(config_err(
                "traffic",
                format!(
                    "{} flows exceeds the maximum of {} flows per run (limits.max_flows)",
                    specs.len(),
                    limits.max_flows
                ),
            ));
        }
        traffic::check(&specs, topo.n_hosts)?;
        let diameter_rtt = FrameTiming::new(&fab).base_rtt(topo.diameter_hops);
        let failure_plan = FailurePlan::build(&fab.failures, &topo, seed, diameter_rtt.0)?;
        let rate = Rate::from_gbps(fab.link.rate_gbps);
        let max_time = Time((limits.max_time_ms * 1e9).round() as u64);
        if let Some((i, f)) = specs.iter().enumerate().find(|(_, f)| f.start > max_time) {
            return Err(SimError::BadFlow {
                index: i,
                field: "start_ps",
                message: format!(
                    "starts at {} ps, after limits.max_time_ms = {}",
                    f.start.0, limits.max_time_ms
                ),
            });
        }
        // A flow its own NIC cannot even serialize before the run's limit would only time
        // out (and a huge one would exhaust memory first): refuse it now.
        let timing = FrameTiming::new(&fab);
        let seconds = |bytes: u64| bytes as f64 * 8.0 / (fab.link.rate_gbps * 1e9);
        if let Some((i, f)) = specs.iter().enumerate().find(|(_, f)| {
            seconds(f.bytes) * 1e3 > limits.max_time_ms
                || timing.packets(f.bytes).0 > u32::MAX as u64
        }) {
            return Err(SimError::BadFlow {
                index: i,
                field: "bytes",
                message: format!(
                    "= {} needs at least {:.1} ms on a {} Gbps link ({} packets), past \
                     limits.max_time_ms = {} (or past 2^32 packets)",
                    f.bytes,
                    seconds(f.bytes) * 1e3,
                    fab.link.rate_gbps,
                    timing.packets(f.bytes).0,
                    limits.max_time_ms
                ),
            });
        }
        let infos: Vec<FlowInfo> = specs
            .iter()
            .map(|f| FlowInfo {
                src: f.src,
                dst: f.dst,
                bytes: f.bytes,
            })
            .collect();
        // A timeout shorter than the round trip presumes every packet lost before its ACK
        // can return; late ACKs of "lost" packets count nothing, so no flow would finish.
        // Over the longest path the flows take (the fabric's, when flows come later).
        let longest = specs
            .iter()
            .filter(|f| f.src != f.dst)
            .map(|f| topo.hops_between(f.src, f.dst))
            .max()
            .unwrap_or(topo.diameter_hops);
        let base_rtt = timing.base_rtt(longest);
        let rto = match limits.rto_us {
            Some(us) => {
                let rto = Dur((us * PS_PER_US as f64).round() as u64);
                if rto <= base_rtt {
                    return Err(config_err(
                        "limits.rto_us",
                        format!(
                            "= {us} us is not longer than the unloaded round trip of a full packet \
                             on the longest path of the traffic ({:.3} us): every packet would be \
                             presumed lost before its ACK could be back",
                            base_rtt.0 as f64 / PS_PER_US as f64
                        ),
                    ));
                }
                rto
            }
            // Nor should a packet be presumed lost while it may still wait in queues: at
            // 1-10 Gbps draining one 800 KB buffer takes longer than the default, and with
            // a timeout of one drain ECMP flows starved through 32 timeouts; two drains
            // finished every run (docs/schemes/loss.md). Still 100 us from 200 Gbps up.
            // Capped at the longest run allowed: it would never fire later, and event times
            // must stay within the clock: the sum is computed saturating, then capped.
            None => {
                let drain = timing.rate.serialization(fab.switch.buffer_bytes);
                Dur((DEFAULT_RTO_US * PS_PER_US as f64).round() as u64)
                    .max(Dur(2 * base_rtt.0))
                    .max(Dur(base_rtt.0.saturating_add(drain.0.saturating_mul(2))))
                    .min(Dur((crate::config::MAX_TIME_MS * 1e9) as u64))
            }
        };
        let bdp_packets = timing.bdp_packets(topo.diameter_hops);
        let mut lb = lb::build(
            &scheme.lb,
            &LbInit {
                topo: &topo,
                flows: &infos,
                seed: seed,
                bdp_packets,
                rto,
            },
            &scheme.lb_params,
        )?;
        let requested_start = specs.iter().map(|f| f.start).min().unwrap_or(Time::ZERO);
        let starts: Vec<Time> = specs
            .iter()
            .enumerate()
            .map(|(i, f)| f.start + lb.start_delay(i as u32))
            .collect();
        let paths: Vec<FlowPath> = specs
            .iter()
            .map(|f| {
                let hops = topo.hops_between(f.src, f.dst);
                let base_rtt = timing.base_rtt(hops);
                let bdp_bytes =
                    (rate.bps() as u128 * base_rtt.0 as u128 / 8_000_000_000_000) as u64;
                FlowPath {
                    hops,
                    base_rtt,
                    bdp_bytes,
                }
            })
            .collect();
        let loss = loss::build(
            &scheme.loss,
            &LossInit {
                flow_bytes: &specs.iter().map(|f| f.bytes).collect::<Vec<_>>(),
                payload_bytes: fab.packet.payload_bytes,
            },
            &scheme.loss_params,
        )?;
        let cc = cc::build(
            &scheme.cc,
            &CcInit {
                paths: &paths,
                flow_bytes: &specs.iter().map(|f| f.bytes).collect::<Vec<_>>(),
                line_rate: rate,
                mss: fab.packet.payload_bytes,
                packet_wire_bytes: fab.packet.payload_bytes + fab.packet.header_bytes,
                trimming: loss.wants_trimming(),
            },
            &scheme.cc_params,
        )?;
        // A receiver-driven CC's pacer answers data packets with the policy the loss
        // recovery (or `scheme.receiver`) names; the pacer takes `receiver_params` then.
        let answer = scheme.receiver.as_deref().unwrap_or(loss.receiver());
        let dst: Vec<u32> = specs.iter().map(|f| f.dst).collect();
        let packets: Vec<u32> = (specs.iter())
            .map(|f| timing.packets(f.bytes).0 as u32)
            .collect();
        let unsolicited: Vec<u32> = (0..specs.len() as u32)
            .map(|f| cc.unsolicited_packets(f))
            .collect();
        let mut receiver = receiver::build(
            cc.receiver().unwrap_or(answer),
            &ReceiverInit {
                n_flows: specs.len(),
                dst: &dst,
                packets: &packets,
                unsolicited: &unsolicited,
                n_hosts: topo.n_hosts,
                frame_time: rate.serialization(
                    (fab.packet.payload_bytes + fab.packet.header_bytes + fab.packet.gap_bytes)
                        as u64,
                ),
                inner: answer,
            },
            &scheme.receiver_params,
        )?;
        if let Some(interval) = cc.cnp_interval() {
            receiver = receiver::with_cnp(receiver, interval, specs.len());
        }
        let qdisc = qdisc::build(
            &scheme.qdisc,
            &QdiscInit {
                switch: &fab.switch,
                link: &fab.link,
                packet: &fab.packet,
                seed,
                trim: loss.wants_trimming(),
            },
            &scheme.qdisc_params,
        )?;
        let requested_starts: Vec<Time> = specs.iter().map(|f| f.start).collect();
        for (f, &at) in specs.iter_mut().zip(&starts) {
            f.start = at;
        }

        let switch_latency = Dur::from_ns_f64(fab.switch.latency_ns);
        let ports: Vec<PortRt> = topo
            .ports
            .iter()
            .map(|p| PortRt {
                q_hi: VecDeque::new(),
                q_lo: VecDeque::new(),
                wire: VecDeque::new(),
                busy_until: Time::ZERO,
                queued: 0,
                wake_pending: false,
                send_owed: false,
                down: false,
                rate: p.rate,
                arrive_delay: if p.peer < topo.n_hosts {
                    p.latency
                } else {
                    p.latency + switch_latency
                },
                peer: p.peer,
                owner_is_host: p.owner < topo.n_hosts,
                max_queue: 0,
                queue_area: 0,
                last_change: Time::ZERO,
                tx_bytes: 0,
                data_tx_bytes: 0,
            })
            .collect();
        let hot = (specs.iter().zip(&paths))
            .map(|(spec, path)| FlowHot {
                next_allowed: spec.start,
                sent: 0,
                src: spec.src,
                dst: spec.dst,
                blocked: false,
                done: false,
                timed_out: false,
                rto_pending: false,
                hops: path.hops.min(u8::MAX as u32) as u8,
            })
            .collect();
        let flows = specs
            .iter()
            .map(|&spec| FlowRt {
                spec,
                finish: None,
                slot: 0,
                started: false,
                timeouts_in_a_row: 0,
                counted_timeout: None,
                timeouts: 0,
                retransmitted: 0,
                cc_timer: None,
            })
            .collect();
        let n_ports = topo.ports.len();
        // A lazy NIC's owed decision is caught up by the arrival of the frame before it
        // at the far end, so that must not come before the NIC frees up (link delay >=
        // inter-frame gap); and a decision caught up that late must not arm a timer in
        // the past (timeout >= link delay). A paced flow that becomes sendable while the NIC
        // is idle is decided at that moment (see `host_send_at`).
        let lazy_hosts = ports.iter().all(|p: &PortRt| {
            let gap = p.rate.serialization(fab.packet.gap_bytes as u64);
            !p.owner_is_host || (p.arrive_delay >= gap && rto >= p.arrive_delay)
        });
        let salts = lb::switch_salts(seed, topo.n_nodes());
        let pfc = qdisc
            .lossless()
            .map(|cfg| Box::new(pfc::PfcState::new(cfg, &topo)));
        let mut sim = Simulation {
            pfc,
            rx_paces: receiver.paces(),
            cc_counts_sends: cc.counts_sends(),
            rto,
            qdisc_floor: qdisc.dequeue_floor(),
            qdisc,
            receiver,
            cc_timers: CcTimers::default(),
            int_on: cc.wants_int(),
            int: Default::default(),
            lazy_hosts,
            lb_reads_queues: lb.reads_queues(),
            prefetch: n_ports >= PREFETCH_MIN_PORTS,
            hosts: (0..topo.n_hosts).map(|_| HostRt::default()).collect(),
            port_counts: vec![PortCounts::default(); n_ports],
            live_packets: 0,
            events: EventQueue::default(),
            now: Time::ZERO,
            done: 0,
            draining: false,
            error: None,
            data_hops: 0,
            bytes_sent: 0,
            bytes_delivered: 0,
            bytes_dropped: 0,
            pkts_dropped: 0,
            acks_dropped: 0,
            pkts_trimmed: 0,
            pkts_lost: 0,
            bytes_trimmed: 0,
            loss_threshold: (fab.link.loss_rate * 18_446_744_073_709_551_616.0) as u64,
            loss_seed: derive_seed(seed, "link.loss", 0),
            driven: false,
            completions: VecDeque::new(),
            late_arrivals: HashMap::new(),
            failures: FailureState::default(),
            tuples: Vec::new(),
            draw_origin: vec![0; n_ports],
            n_started: 0,
            idle_since: Time::ZERO,
            events_skipped: 0,
            replayed_counters: BTreeMap::new(),
            topo,
            flows,
            hot,
            ports,
            lb,
            cc,
            loss,
            salts,
            requested_starts,
            fabric: fab,
            limits: limits.clone(),
            requested_start,
        };
        sim.schedule_failures(failure_plan);
        Ok(sim)
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }
}
