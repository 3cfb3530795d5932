//! Cut bounds: every data packet between the hosts below a switch (an edge or leaf switch)
//! or inside a pod and the rest of the fabric crosses that group's links to the tier above
//! in at least one full frame (ACKs are left out: one may be dropped, or still be on its
//! way when a later one completes its flow). Those links serialize the frames at best in
//! parallel, so the last one leaves no sooner than the earliest such flow's start plus the
//! frames' time over the link count, and still crosses the link. Binding where the fabric
//! is oversubscribed; links count at their nominal rate, so a failed or degraded one only
//! makes the bound looser.

use crate::timing::FrameTiming;
use crate::topology::Topology;
use crate::traffic::FlowSpec;
use crate::units::Time;

/// One direction of one cut: frame time through it (gaps included), and the earliest start
/// of a flow that sends frames through it.
#[derive(Clone, Copy)]
struct Load {
    busy: u64,
    first: u64,
}

impl Default for Load {
    fn default() -> Load {
        Load {
            busy: 0,
            first: u64::MAX,
        }
    }
}

impl Load {
    fn add(&mut self, busy: u64, start: u64) {
        self.busy += busy;
        self.first = self.first.min(start);
    }
}

/// The cut bound over every edge switch and (in a 3-tier fabric) every pod.
pub fn cut_bound(topo: &Topology, flows: &[FlowSpec], t: &FrameTiming) -> Time {
    let three_tier = topo.tier.iter().any(|&t| t == 3);
    // Cuts: one per edge switch (keyed by node), one per pod (keyed past the nodes).
    let n_nodes = topo.n_nodes();
    let n_pods = topo
        .pod
        .iter()
        .filter(|&&p| p != u32::MAX)
        .max()
        .map_or(0, |&p| p + 1);
    let mut links = vec![0u64; n_nodes + n_pods as usize];
    for port in &topo.ports {
        let (from, to) = (port.owner as usize, port.peer as usize);
        if topo.tier[to] != topo.tier[from] + 1 {
            continue;
        }
        match topo.tier[from] {
            1 => links[from] += 1,
            2 if three_tier => links[n_nodes + topo.pod[from] as usize] += 1,
            _ => {}
        }
    }
    let (mut up, mut down) = (
        vec![Load::default(); links.len()],
        vec![Load::default(); links.len()],
    );
    for f in flows.iter().filter(|f| f.src != f.dst) {
        let (n, last_payload) = t.packets(f.bytes);
        let data = (n - 1) * (t.data(t.payload).0 + t.gap.0) + t.data(last_payload).0 + t.gap.0;
        let (se, de) = (
            topo.host_edge[f.src as usize],
            topo.host_edge[f.dst as usize],
        );
        let mut cross = |a: usize, b: usize| {
            up[a].add(data, f.start.0);
            down[b].add(data, f.start.0);
        };
        if se != de {
            cross(se as usize, de as usize);
        }
        let (sp, dp) = (topo.pod[se as usize], topo.pod[de as usize]);
        if three_tier && sp != dp {
            cross(n_nodes + sp as usize, n_nodes + dp as usize);
        }
    }
    let mut bound = Time::ZERO;
    for (c, &l) in links.iter().enumerate().filter(|(_, &l)| l > 0) {
        for load in [up[c], down[c]] {
            if load.busy > 0 {
                let serial = load.busy.div_ceil(l).saturating_sub(t.gap.0);
                bound = bound.max(Time(load.first + serial + t.link.0));
            }
        }
    }
    bound
}
