//! Test support: watch one queue of a running simulation (steady-state checks of the
//! congestion controllers against theory).

use super::*;

/// A host's downlink queue (the output port of its switch towards it) over a window.
pub(crate) struct QueueWatch {
    /// Time-averaged backlog (bytes waiting behind the frame on the wire).
    pub mean_bytes: f64,
    /// Largest and smallest backlog among samples taken every `step`.
    pub max_bytes: u64,
    pub min_bytes: u64,
    /// Data frame bytes the port sent in the window, and its capacity in data frame
    /// bytes (line rate, inter-frame gaps left out): their ratio is its utilization.
    pub data_bytes: u64,
    pub capacity_bytes: f64,
    /// The fabric's frame timing (base RTTs, serialization).
    pub timing: FrameTiming,
    /// Data packets each flow sent in the window.
    pub flow_packets: Vec<u64>,
}

/// Runs `cfg` with every flow starting when its spec says and watches the queue towards host `dst`
/// from `from` to `to`, sampling it every `step`.
pub(crate) fn watch_downlink(
    cfg: &serde_json::Value,
    dst: u32,
    from: Time,
    to: Time,
    step: Dur,
) -> QueueWatch {
    let mut sim = Simulation::new(SimConfig::from_json(&cfg.to_string()).unwrap()).unwrap();
    for f in 0..sim.flows.len() as u32 {
        let start = sim.flows[f as usize].spec.start;
        sim.events.push(start, Event::FlowStart(f));
    }
    let port = sim.topo.host_down_port[dst as usize] as usize;
    let timing = FrameTiming::new(&sim.fabric);
    let at = |sim: &mut Simulation, t: Time| {
        sim.process(t, &mut |_, _| true).unwrap();
        sim.catch_up(port, t);
    };
    at(&mut sim, from);
    let sent0: Vec<u64> = sim.hot.iter().map(|h| h.sent).collect();
    let (area0, tx0) = (
        sim.queue_area_until(port, from),
        sim.ports[port].data_tx_bytes,
    );
    let (mut max_bytes, mut min_bytes) = (0u64, u64::MAX);
    let mut t = from;
    while t < to {
        t = Time(t.0 + step.0).min(to);
        at(&mut sim, t);
        let q = sim.ports[port].queued;
        (max_bytes, min_bytes) = (max_bytes.max(q), min_bytes.min(q));
    }
    let span = (to - from).0 as f64;
    let wire = (timing.payload + timing.header) as f64;
    let slot = timing.data(timing.payload).0 as f64 + timing.gap.0 as f64;
    QueueWatch {
        mean_bytes: (sim.queue_area_until(port, to) - area0) as f64 / span,
        max_bytes,
        min_bytes,
        data_bytes: sim.ports[port].data_tx_bytes - tx0,
        capacity_bytes: span / slot * wire,
        timing,
        flow_packets: sim
            .hot
            .iter()
            .zip(&sent0)
            .map(|(h, s0)| h.sent - s0)
            .collect(),
    }
}
