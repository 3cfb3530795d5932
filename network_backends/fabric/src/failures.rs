//! Link failures over time: which links fail (each switch-switch link with probability p,
//! seeded, and links named explicitly), when, for how long, or how much slower; when the
//! switches next to a failed link stop using it (detection), and when every switch's
//! routes reflect it (global convergence G; never when unset). `FailurePlan::build` turns
//! the config into a time-ordered list of changes for a backend to apply.

use crate::error::{config_err, FabricResult};
use crate::topology::{PortId, Topology};
use serde::Deserialize;

#[derive(Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields, default)]
pub struct FailureConfig {
    /// Each switch-switch link fails independently with this probability.
    pub probability: f64,
    /// When the random failures happen, in microseconds (0: before the run).
    pub at_us: f64,
    /// Links named by the two nodes they join.
    pub links: Vec<LinkFailure>,
    /// From a failure until the switches at the link's ends stop using it (local reroute).
    pub detection_us: f64,
    /// From a failure (or repair) until every switch's routes reflect it; unset: never.
    pub convergence_us: Option<f64>,
    /// The same in round trips (OFAN §5.2 sets G in multiples of the minimum RTT): the
    /// unloaded round trip of a full data packet and its ACK across the fabric's diameter
    /// (6.25 µs on a k = 8 fat tree at 800 Gbps with 0.5 µs links). Not with `convergence_us`.
    pub convergence_rtts: Option<f64>,
    /// Converged routes weight every next hop alike, by reachability alone, instead of by
    /// the shortest paths left behind it (W-ECMP, the default).
    pub equal_weights: bool,
    /// Allow failing a host's only link (the host is cut off from the fabric).
    pub allow_host_links: bool,
    /// Seed of the random failures (default: the run's seed).
    pub seed: Option<u64>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct LinkFailure {
    /// The link's two nodes (hosts first, then switches tier by tier, as in the report).
    pub nodes: [u32; 2],
    #[serde(default)]
    pub down_at_us: f64,
    /// When it comes back; unset: never.
    #[serde(default)]
    pub up_at_us: Option<f64>,
    /// Instead of failing, the link runs at this fraction of its rate from `down_at_us`.
    #[serde(default)]
    pub rate_fraction: Option<f64>,
}

/// What happens to the fabric at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// The link behind this port (both directions) stops carrying frames.
    Down(PortId),
    Up(PortId),
    /// The link runs at this fraction of its nominal rate.
    Degrade(PortId, f64),
    /// The switches at the link's ends stop using it where they have another next hop.
    Detect(PortId),
    /// Every switch's routes are recomputed over the links that are up.
    Converge,
}

/// Changes in time order (ps), ties in the order they were listed.
#[derive(Clone, Debug, Default)]
pub struct FailurePlan {
    pub changes: Vec<(u64, Change)>,
    /// The links that fail (one port of each), for reports and bounds.
    pub failed: Vec<PortId>,
}

fn ps(us: f64, field: &str) -> FabricResult<u64> {
    if !(us.is_finite() && (0.0..=crate::config::MAX_TIME_MS * 1e3).contains(&us)) {
        return Err(config_err(
            field,
            format!(
                "= {us:?}: expected microseconds in 0..{:e}",
                crate::config::MAX_TIME_MS * 1e3
            ),
        ));
    }
    Ok((us * 1e6).round() as u64)
}

impl FailurePlan {
    /// `rtt_ps`: the fabric's unloaded round trip across its diameter, the unit of
    /// `convergence_rtts`.
    pub fn build(
        cfg: &FailureConfig,
        topo: &Topology,
        run_seed: u64,
        rtt_ps: u64,
    ) -> FabricResult<FailurePlan> {
        if !(0.0..=1.0).contains(&cfg.probability) {
            return Err(config_err(
                "failures.probability",
                format!("= {:?}: expected a probability in [0, 1]", cfg.probability),
            ));
        }
        let detect = ps(cfg.detection_us, "failures.detection_us")?;
        let converge =
            match (cfg.convergence_us, cfg.convergence_rtts) {
                (Some(_), Some(_)) => return Err(config_err(
                    "failures.convergence_rtts",
                    "is set with convergence_us: give G once, in microseconds or in round trips",
                )),
                (Some(us), None) => Some(ps(us, "failures.convergence_us")?),
                (None, Some(rtts)) if !(rtts.is_finite() && rtts >= 0.0) => {
                    return Err(config_err(
                        "failures.convergence_rtts",
                        format!("= {rtts:?}: expected a number of round trips >= 0"),
                    ))
                }
                (None, Some(rtts)) => Some(ps(
                    rtts * rtt_ps as f64 / 1e6,
                    "failures.convergence_rtts (in microseconds)",
                )?),
                (None, None) => None,
            };
        let mut plan = FailurePlan::default();
        let fail = |plan: &mut FailurePlan, port: PortId, at: u64| {
            plan.failed.push(port);
            plan.changes.push((at, Change::Down(port)));
            plan.changes.push((at + detect, Change::Detect(port)));
            if let Some(g) = converge {
                plan.changes.push((at + g, Change::Converge));
            }
        };
        if cfg.probability > 0.0 {
            let at = ps(cfg.at_us, "failures.at_us")?;
            let seed = crate::seed::derive_seed(cfg.seed.unwrap_or(run_seed), "failures", 0);
            for port in (0..topo.ports.len() as PortId).step_by(2) {
                let p = &topo.ports[port as usize];
                let switches = p.owner >= topo.n_hosts && p.peer >= topo.n_hosts;
                if switches && crate::seed::uniform(seed, port as u64) < cfg.probability {
                    fail(&mut plan, port, at);
                }
            }
        }
        for (i, link) in cfg.links.iter().enumerate() {
            let field = |name: &str| format!("failures.links[{i}].{name}");
            let [a, b] = link.nodes;
            let port = (topo.node_ports.get(a as usize).into_iter().flatten())
                .copied()
                .find(|&p| topo.ports[p as usize].peer == b)
                .ok_or_else(|| {
                    config_err(
                        &field("nodes"),
                        format!("= [{a}, {b}]: no link joins these nodes"),
                    )
                })?;
            let host_link = a < topo.n_hosts || b < topo.n_hosts;
            if host_link && link.rate_fraction.is_none() && !cfg.allow_host_links {
                return Err(config_err(
                    &field("nodes"),
                    format!(
                        "= [{a}, {b}] is the link of host {}: failing it cuts the host off (set \
                         failures.allow_host_links to mean it)",
                        a.min(b)
                    ),
                ));
            }
            let down = ps(link.down_at_us, &field("down_at_us"))?;
            match link.rate_fraction {
                Some(f) if !(f > 0.0 && f <= 1.0) => {
                    return Err(config_err(
                        &field("rate_fraction"),
                        format!("= {f:?}: expected a fraction in (0, 1]"),
                    ))
                }
                Some(f) => plan.changes.push((down, Change::Degrade(port, f))),
                None => fail(&mut plan, port, down),
            }
            if let Some(up_us) = link.up_at_us {
                let up = ps(up_us, &field("up_at_us"))?;
                if up <= down {
                    return Err(config_err(
                        &field("up_at_us"),
                        format!("= {up_us} is not after down_at_us = {}", link.down_at_us),
                    ));
                }
                match link.rate_fraction {
                    Some(_) => plan.changes.push((up, Change::Degrade(port, 1.0))),
                    None => {
                        plan.changes.push((up, Change::Up(port)));
                        if let Some(g) = converge {
                            plan.changes.push((up + g, Change::Converge));
                        }
                    }
                }
            }
        }
        // Stable: a link's own changes keep their order at equal times. Convergences go
        // last at their time and count once there: routes recomputed over every change of
        // that moment are the same as recomputed after each.
        plan.changes
            .sort_by_key(|&(t, c)| (t, c == Change::Converge));
        plan.changes
            .dedup_by(|b, a| a.0 == b.0 && a.1 == Change::Converge && b.1 == Change::Converge);
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;
    use crate::units::{Dur, Rate};

    fn k8() -> Topology {
        Topology::build(
            &TopologyConfig::fat_tree(8),
            Rate::from_gbps(800.0),
            Dur(500_000),
        )
        .unwrap()
    }

    fn plan(cfg: serde_json::Value, seed: u64) -> FabricResult<FailurePlan> {
        FailurePlan::build(
            &serde_json::from_value(cfg).unwrap(),
            &k8(),
            seed,
            6_253_320,
        )
    }

    #[test]
    fn random_failures_hit_switch_links_at_the_rate_asked_and_follow_the_seed() {
        // 256 switch-switch links on k = 8; p = 10 % over 40 seeds: about 1,024 failures.
        let cfg =
            serde_json::json!({"probability": 0.1, "detection_us": 2.0, "convergence_us": 10.0});
        let mut total = 0;
        for seed in 0..40 {
            let p = plan(cfg.clone(), seed).unwrap();
            let t = k8();
            assert!(p
                .failed
                .iter()
                .all(|&port| t.ports[port as usize].owner >= t.n_hosts
                    && t.ports[port as usize].peer >= t.n_hosts));
            // Down at 0, detected at 2 us, converged at 10 us (once for all), in time order.
            let n = p.failed.len();
            assert_eq!(p.changes.iter().filter(|c| c.0 == 0).count(), n);
            assert_eq!(p.changes.iter().filter(|c| c.0 == 2_000_000).count(), n);
            let converged: Vec<_> = p.changes.iter().filter(|c| c.0 == 10_000_000).collect();
            assert_eq!(converged, [&(10_000_000, Change::Converge)][..n.min(1)]);
            assert!(p.changes.windows(2).all(|w| w[0].0 <= w[1].0));
            total += n;
            assert_eq!(plan(cfg.clone(), seed).unwrap().failed, p.failed);
        }
        // G = 0: one convergence, after every link that fails at 0 has gone down.
        let p = plan(
            serde_json::json!({"probability": 0.1, "convergence_us": 0.0}),
            3,
        )
        .unwrap();
        let n = p.failed.len();
        assert!(n > 1 && p.changes.len() == 2 * n + 1);
        assert!(p.changes.iter().all(|c| c.0 == 0));
        let converged = p.changes.iter().position(|c| c.1 == Change::Converge);
        assert_eq!(converged, Some(2 * n));
        // Binomial(10,240, 0.1): mean 1,024, sd 30.
        assert!((900..1150).contains(&total), "{total}");
        assert_ne!(
            plan(cfg.clone(), 1).unwrap().failed,
            plan(cfg, 2).unwrap().failed
        );
    }

    #[test]
    fn convergence_in_round_trips_scales_the_round_trip_given() {
        // 6,253,320 ps: the k = 8, 800 Gbps, 0.5 us-link fabric's round trip (OFAN: 6.25 us).
        let p = plan(
            serde_json::json!({"probability": 0.05, "convergence_rtts": 2.5}),
            1,
        );
        let at = |c: Change| {
            p.as_ref()
                .unwrap()
                .changes
                .iter()
                .find(|x| x.1 == c)
                .map(|x| x.0)
        };
        assert_eq!(at(Change::Converge), Some(15_633_300));
        let bad = |cfg: serde_json::Value| plan(cfg, 0).unwrap_err().to_string();
        let e = bad(serde_json::json!({"convergence_us": 1.0, "convergence_rtts": 1.0}));
        assert!(
            e.contains("failures.convergence_rtts") && e.contains("give G once"),
            "{e}"
        );
        let e = bad(serde_json::json!({"convergence_rtts": -1.0}));
        assert!(
            e.contains("failures.convergence_rtts") && e.contains("round trips"),
            "{e}"
        );
    }

    #[test]
    fn named_links_fail_degrade_and_come_back() {
        let t = k8();
        let (host, edge, agg) = (0, t.host_edge[0], t.n_hosts + 32);
        let p = plan(
            serde_json::json!({"links": [
            {"nodes": [edge, agg], "down_at_us": 5, "up_at_us": 9},
            {"nodes": [agg, edge + 1], "down_at_us": 1, "rate_fraction": 0.25}]}),
            0,
        )
        .unwrap();
        let port = (t.node_ports[edge as usize].iter().copied())
            .find(|&q| t.ports[q as usize].peer == agg)
            .unwrap();
        assert!(p.changes.contains(&(5_000_000, Change::Down(port))));
        assert!(p.changes.contains(&(9_000_000, Change::Up(port))));
        assert_eq!(p.changes[0].0, 1_000_000);
        assert!(matches!(p.changes[0].1, Change::Degrade(_, f) if f == 0.25));
        let bad = |cfg: serde_json::Value| plan(cfg, 0).unwrap_err().to_string();
        let e = bad(serde_json::json!({"links": [{"nodes": [host, edge]}]}));
        assert!(
            e.contains("failures.links[0].nodes") && e.contains("cuts the host off"),
            "{e}"
        );
        let e = bad(serde_json::json!({"links": [{"nodes": [edge, edge + 1]}]}));
        assert!(e.contains("no link joins these nodes"), "{e}");
        let e = bad(serde_json::json!({"probability": 1.5}));
        assert!(e.contains("failures.probability"), "{e}");
        let e = bad(
            serde_json::json!({"links": [{"nodes": [edge, agg], "down_at_us": 5, "up_at_us": 5}]}),
        );
        assert!(e.contains("failures.links[0].up_at_us"), "{e}");
        assert!(plan(
            serde_json::json!({"links": [{"nodes": [host, edge]}], "allow_host_links": true}),
            0
        )
        .is_ok());
    }
}
