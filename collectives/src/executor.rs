//! The event loop of the workload and system layers. Each rank walks its ET graph:
//! a node is issued once all its dependencies are done; compute nodes run one at a
//! time per rank (lowest node id first, as ASTRA-sim scans its ready set);
//! communication overlaps them as the dependencies allow. A collective starts once
//! every member of its group has issued it; its chunks queue per (group, dimension)
//! with at most `active-chunks-per-dimension` in flight, and each chunk's phase is a
//! DAG of transfers handed to the network as flows.
//!
//! Timing of a phase (ASTRA-sim's system layer): the first transfers leave one
//! endpoint delay after the phase starts; every arrival costs the receiver an endpoint
//! delay plus, for a reducing transfer, the local reduction time; a transfer leaves
//! when the last transfer it waits on has been processed; the phase ends when its
//! last arrival has been processed.

use crate::error::{SystemError, SystemResult};
use crate::report::{CollectiveRecord, RankStats, SystemReport};
use crate::system::{chunk_sizes, plan_chunk, Layout, Phase, Policy, SystemConfig};
use crate::workload::{
    check_and_match, group_label, Matched, NodeInput, NodeKind, WorkloadInput, NONE,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tracefabric_netapi::{FlowRequest, Network, Ps, CLOCK_LIMIT_PS};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// A compute, memory or receive node of (rank, node) finishes.
    NodeDone(u32, u32),
    /// The phase a stream is in has processed its last arrival.
    PhaseDone(u32),
}

struct RankRt {
    waiting_deps: Vec<u32>,
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    done: Vec<bool>,
    issued_at: Vec<Ps>,
    /// Ready compute nodes per unit (`unit_of`), lowest index first.
    compute_ready: [BinaryHeap<Reverse<u32>>; 2],
    computing: [bool; 2],
    /// Busy time of the compute units: their sum while one unit is used, else the union
    /// of `compute_intervals` (kept only for a rank with nodes on both units).
    compute_ps: Ps,
    compute_intervals: Option<Vec<(Ps, Ps)>>,
    comm_intervals: Vec<(Ps, Ps)>,
    wall: Ps,
    finished: usize,
}

struct InstanceRt {
    issued: u32,
    first_issue: Ps,
    start: Ps,
    chunks: Vec<u64>,
    chunks_left: u32,
    /// Start order among instances (scheduling priority).
    order: u64,
    algorithm: String,
    end: Ps,
    /// Stream slot of each chunk while it runs (NONE otherwise).
    stream_of_chunk: Vec<u32>,
}

/// A chunk of an instance, moving through its phases.
struct Stream {
    inst: u32,
    chunk: u32,
    phases: Vec<Phase>,
    phase: usize,
    /// Flow id of transfer 0 of subgroup 0 of the current phase.
    base: u64,
    /// Transfers per subgroup in the current phase.
    len: u64,
    left: u64,
    /// Multi-dependency transfers: (dependencies still missing, latest ready time so far).
    pending: HashMap<u64, (u32, Ps)>,
    last_ready: Ps,
}

#[derive(Default)]
struct DimQueue {
    active: u32,
    /// (priority, chunk order, stream) — highest first.
    waiting: BinaryHeap<(u64, Reverse<u32>, u32)>,
}

#[derive(Default, Clone, Copy)]
struct PairRt {
    arrived: Option<Ps>,
    recv_issued: bool,
}

/// Where every flow id lives: instance i owns ids [inst_base[i], inst_base[i+1]);
/// inside, each (chunk, phase) owns a contiguous range.
struct FlowLayout {
    inst_base: Vec<u64>,
    /// Per instance, the id offset of each (chunk, phase), chunk-major.
    offsets: Vec<Vec<u64>>,
    p2p_base: u64,
}

pub struct Executor<'a> {
    w: &'a WorkloadInput,
    cfg: &'a SystemConfig,
    m: Matched,
    layout: Layout,
    ids: FlowLayout,
    net: &'a mut dyn Network,
    now: Ps,
    seq: u64,
    timers: BinaryHeap<Reverse<(Ps, u64, Timer)>>,
    ranks: Vec<RankRt>,
    inst: Vec<InstanceRt>,
    streams: Vec<Option<Stream>>,
    free_streams: Vec<u32>,
    /// Flow-id range [lo, hi) of the phase that completed last, and its stream.
    last_phase: (u64, u64, u32),
    /// Reused buffers of the per-completion hot path.
    scratch_next: Vec<usize>,
    scratch_start: Vec<(u64, Ps)>,
    queues: HashMap<(u32, usize), DimQueue>,
    pairs: Vec<PairRt>,
    started_instances: u64,
    flows: u64,
    /// (rank, node) issued and waiting to be handled (a worklist instead of recursion).
    to_issue: Vec<(u32, u32, Ps)>,
}

/// A checked workload with its flow ids laid out, ready to run on a network.
pub struct Prepared<'a> {
    w: &'a WorkloadInput,
    cfg: &'a SystemConfig,
    m: Matched,
    layout: Layout,
    ids: FlowLayout,
}

/// Runs the workload to completion on `net`.
pub fn run(
    w: &WorkloadInput,
    cfg: &SystemConfig,
    net: &mut dyn Network,
) -> SystemResult<SystemReport> {
    Prepared::new(w, cfg, false)?.0.run(net)
}

impl<'a> Prepared<'a> {
    /// Checks the workload and plans every collective once. With `list_flows` it also
    /// returns every flow in id order, for backends that must know their flows up front
    /// (the packet engine, whose load balancers plan per flow).
    pub fn new(
        w: &'a WorkloadInput,
        cfg: &'a SystemConfig,
        list_flows: bool,
    ) -> SystemResult<(Prepared<'a>, Vec<FlowRequest>)> {
        let m = check_and_match(w)?;
        let layout = Layout::new(&cfg.dims, w.ranks.len() as u32)?;
        let mut flows = Vec::new();
        let ids = flow_layout(w, cfg, &m, &layout, |phase| {
            if list_flows {
                for sub in phase.subgroups.iter() {
                    for t in 0..phase.dag.len() {
                        let tr = phase.dag.transfer(t);
                        let id = flows.len() as u64;
                        flows.push(FlowRequest {
                            id,
                            src: sub[tr.src as usize],
                            dst: sub[tr.dst as usize],
                            bytes: tr.bytes,
                        });
                    }
                }
            }
        })?;
        if list_flows {
            for p in &m.p2p {
                flows.push(FlowRequest {
                    id: flows.len() as u64,
                    src: p.src,
                    dst: p.dst,
                    bytes: p.bytes,
                });
            }
        }
        Ok((
            Prepared {
                w,
                cfg,
                m,
                layout,
                ids,
            },
            flows,
        ))
    }

    /// Names the ET node that issues `flow` (one of the list `new` returned), for a
    /// backend that refuses it before the run: `why` is the backend's reason.
    pub fn flow_error(&self, flow: &FlowRequest, why: &str) -> SystemError {
        let (rank, node, what) = if flow.id >= self.ids.p2p_base {
            let p = &self.m.p2p[(flow.id - self.ids.p2p_base) as usize];
            (p.src, p.send_node, "send".to_string())
        } else {
            let k = self.ids.inst_base.partition_point(|&b| b <= flow.id) - 1;
            let inst = &self.m.instances[k];
            let members = &self.w.groups[inst.group as usize];
            let pos = members.iter().position(|&r| r == flow.src).unwrap_or(0);
            let what = format!(
                "{} on group {}",
                inst.kind.name(),
                group_label(self.w, inst.group)
            );
            (members[pos], inst.nodes[pos], what)
        };
        let r = &self.w.ranks[rank as usize];
        SystemError::Workload {
            file: r.file.clone(),
            node: r.nodes[node as usize].id,
            message: format!(
                "{what}: its transfer of {} bytes from rank {} to rank {} is refused by the \
                 network backend: {why}",
                flow.bytes, flow.src, flow.dst
            ),
        }
    }

    pub fn run(self, net: &mut dyn Network) -> SystemResult<SystemReport> {
        let Prepared {
            w,
            cfg,
            m,
            layout,
            ids,
        } = self;
        let n = w.ranks.len() as u32;
        if net.endpoints() < n {
            return Err(SystemError::Network(format!(
                "the network connects {} NPUs but the workload has {n} ranks",
                net.endpoints()
            )));
        }
        let ex = Executor {
            ranks: w.ranks.iter().map(rank_rt).collect(),
            inst: m
                .instances
                .iter()
                .map(|_| InstanceRt {
                    issued: 0,
                    first_issue: 0,
                    start: 0,
                    chunks: Vec::new(),
                    chunks_left: 0,
                    order: 0,
                    algorithm: String::new(),
                    end: 0,
                    stream_of_chunk: Vec::new(),
                })
                .collect(),
            pairs: vec![PairRt::default(); m.p2p.len()],
            w,
            cfg,
            m,
            layout,
            ids,
            net,
            now: 0,
            seq: 0,
            timers: BinaryHeap::new(),
            streams: Vec::new(),
            free_streams: Vec::new(),
            last_phase: (0, 0, NONE),
            scratch_next: Vec::new(),
            scratch_start: Vec::new(),
            queues: HashMap::new(),
            started_instances: 0,
            flows: 0,
            to_issue: Vec::new(),
        };
        ex.run_loop()
    }
}

fn rank_rt(r: &crate::workload::RankInput) -> RankRt {
    let n = r.nodes.len();
    let mut counts = vec![0u32; n + 1];
    for node in &r.nodes {
        for &d in &node.deps {
            counts[d as usize + 1] += 1;
        }
    }
    for i in 0..n {
        counts[i + 1] += counts[i];
    }
    let mut fill = counts.clone();
    let mut succ = vec![0u32; counts[n] as usize];
    for (i, node) in r.nodes.iter().enumerate() {
        for &d in &node.deps {
            succ[fill[d as usize] as usize] = i as u32;
            fill[d as usize] += 1;
        }
    }
    RankRt {
        waiting_deps: r.nodes.iter().map(|nd| nd.deps.len() as u32).collect(),
        succ_start: counts,
        succ,
        done: vec![false; n],
        issued_at: vec![0; n],
        compute_ready: [BinaryHeap::new(), BinaryHeap::new()],
        computing: [false; 2],
        compute_ps: 0,
        compute_intervals: {
            let on = |cpu: bool| {
                r.nodes
                    .iter()
                    .any(|nd| nd.kind == NodeKind::Compute && nd.cpu == cpu)
            };
            (on(true) && on(false)).then(Vec::new)
        },
        comm_intervals: Vec::new(),
        wall: 0,
        finished: 0,
    }
}

/// The share of an all-to-all-v matrix that chunk `c` of `count` carries.
fn chunk_matrix(matrix: Option<&[u64]>, count: usize, c: usize) -> Option<Vec<u64>> {
    matrix.map(|m| {
        m.iter()
            .map(|&b| crate::dag::Blocks::Exact.size(b, count as u64, c as u64))
            .collect()
    })
}

/// Plans every chunk of every collective (calling `on_phase` for each phase, in flow-id
/// order) and lays out the flow ids.
fn flow_layout(
    w: &WorkloadInput,
    cfg: &SystemConfig,
    m: &Matched,
    layout: &Layout,
    mut on_phase: impl FnMut(&Phase),
) -> SystemResult<FlowLayout> {
    let mut inst_base = Vec::with_capacity(m.instances.len() + 1);
    let mut offsets = Vec::with_capacity(m.instances.len());
    let mut next = 0u64;
    for inst in &m.instances {
        inst_base.push(next);
        let members = &w.groups[inst.group as usize];
        let chunks = chunk_sizes(cfg, inst.kind, inst.bytes, members.len() as u32);
        let mut offs = Vec::new();
        for (c, &bytes) in chunks.iter().enumerate() {
            let matrix = chunk_matrix(inst.matrix.as_deref(), chunks.len(), c);
            let phases = plan_chunk(cfg, inst.kind, bytes, matrix.as_deref(), members, layout)
                .map_err(|e| match e {
                    // The system file is at fault; the collective says why its key matters.
                    SystemError::Config { field, message } => {
                        let rank = &w.ranks[members[0] as usize];
                        SystemError::Config {
                            field,
                            message: format!(
                                "{message}, for the {} on group {} ({} node {})",
                                inst.kind.name(),
                                group_label(w, inst.group),
                                rank.file,
                                rank.nodes[inst.nodes[0] as usize].id
                            ),
                        }
                    }
                    other => other,
                })?;
            for p in &phases {
                offs.push(next);
                next += p.dag.len() as u64 * p.subgroups.len() as u64;
                on_phase(p);
            }
        }
        offsets.push(offs);
    }
    inst_base.push(next);
    Ok(FlowLayout {
        inst_base,
        offsets,
        p2p_base: next,
    })
}

impl Executor<'_> {
    fn timer(&mut self, at: Ps, t: Timer) {
        self.seq += 1;
        self.timers.push(Reverse((at, self.seq, t)));
    }

    fn run_loop(mut self) -> SystemResult<SystemReport> {
        for r in 0..self.ranks.len() as u32 {
            for i in 0..self.ranks[r as usize].waiting_deps.len() as u32 {
                if self.ranks[r as usize].waiting_deps[i as usize] == 0 {
                    self.to_issue.push((r, i, 0));
                }
            }
        }
        self.drain_issues()?;
        loop {
            let limit = self.timers.peek().map_or(Ps::MAX, |Reverse((t, _, _))| *t);
            match self
                .net
                .next_completion(limit)
                .map_err(SystemError::Network)?
            {
                Some((t, id)) => {
                    if t >= CLOCK_LIMIT_PS {
                        return Err(self.clock_error(t, "a flow completes"));
                    }
                    self.now = t;
                    self.on_flow_done(t, id)?;
                }
                None => match self.timers.pop() {
                    Some(Reverse((t, _, timer))) => {
                        if t >= CLOCK_LIMIT_PS {
                            return Err(self.timer_clock_error(t, timer));
                        }
                        self.now = t;
                        match timer {
                            Timer::NodeDone(r, i) => {
                                let node = &self.w.ranks[r as usize].nodes[i as usize];
                                if node.kind == NodeKind::Compute {
                                    let unit = unit_of(node);
                                    self.ranks[r as usize].computing[unit] = false;
                                    self.start_compute(r, unit);
                                }
                                self.node_done(r, i, t);
                            }
                            Timer::PhaseDone(s) => self.phase_done(s)?,
                        }
                    }
                    None => break,
                },
            }
            self.drain_issues()?;
        }
        self.finish()
    }

    fn drain_issues(&mut self) -> SystemResult<()> {
        while let Some((r, i, at)) = self.to_issue.pop() {
            self.issue(r, i, at)?;
        }
        Ok(())
    }

    fn issue(&mut self, r: u32, i: u32, at: Ps) -> SystemResult<()> {
        let node = &self.w.ranks[r as usize].nodes[i as usize];
        self.ranks[r as usize].issued_at[i as usize] = at;
        match node.kind {
            NodeKind::Compute => {
                let unit = unit_of(node);
                self.ranks[r as usize].compute_ready[unit].push(Reverse(i));
                self.start_compute(r, unit);
            }
            NodeKind::Memory => {
                self.timer(at.saturating_add(node.duration_ps), Timer::NodeDone(r, i))
            }
            NodeKind::Instant => self.node_done(r, i, at),
            NodeKind::Collective => {
                let k = self.m.link[r as usize][i as usize];
                let rt = &mut self.inst[k as usize];
                if rt.issued == 0 {
                    rt.first_issue = at;
                }
                rt.issued += 1;
                if rt.issued as usize
                    == self.w.groups[self.m.instances[k as usize].group as usize].len()
                {
                    self.start_instance(k, at)?;
                }
            }
            NodeKind::Send => {
                let k = self.m.link[r as usize][i as usize];
                let p = self.m.p2p[k as usize];
                self.flows += 1;
                let id = self.ids.p2p_base + k as u64;
                self.net
                    .start_flow(
                        FlowRequest {
                            id,
                            src: p.src,
                            dst: p.dst,
                            bytes: p.bytes,
                        },
                        at,
                    )
                    .map_err(SystemError::Network)?;
            }
            NodeKind::Recv => {
                let k = self.m.link[r as usize][i as usize] as usize;
                self.pairs[k].recv_issued = true;
                if let Some(arrived) = self.pairs[k].arrived {
                    // Through a timer: nodes complete only at the loop's current time.
                    self.timer(arrived.max(at), Timer::NodeDone(r, i));
                }
            }
        }
        Ok(())
    }

    fn start_compute(&mut self, r: u32, unit: usize) {
        let rank = &mut self.ranks[r as usize];
        if rank.computing[unit] {
            return;
        }
        if let Some(Reverse(i)) = rank.compute_ready[unit].pop() {
            rank.computing[unit] = true;
            let d = self.w.ranks[r as usize].nodes[i as usize].duration_ps;
            let at = self.now.max(rank.issued_at[i as usize]);
            let end = at.saturating_add(d);
            match rank.compute_intervals.as_mut() {
                Some(v) => v.push((at, end)),
                None => rank.compute_ps = rank.compute_ps.saturating_add(d),
            }
            self.timer(end, Timer::NodeDone(r, i));
        }
    }

    fn node_done(&mut self, r: u32, i: u32, at: Ps) {
        let kind = self.w.ranks[r as usize].nodes[i as usize].kind;
        let rank = &mut self.ranks[r as usize];
        if matches!(kind, NodeKind::Collective | NodeKind::Send | NodeKind::Recv) {
            rank.comm_intervals.push((rank.issued_at[i as usize], at));
        }
        rank.done[i as usize] = true;
        rank.finished += 1;
        rank.wall = rank.wall.max(at);
        for s in rank.succ_start[i as usize]..rank.succ_start[i as usize + 1] {
            let j = rank.succ[s as usize];
            rank.waiting_deps[j as usize] -= 1;
            if rank.waiting_deps[j as usize] == 0 {
                self.to_issue.push((r, j, at));
            }
        }
    }

    // ---- collectives ---------------------------------------------------------

    fn start_instance(&mut self, k: u32, at: Ps) -> SystemResult<()> {
        let inst = &self.m.instances[k as usize];
        let members = &self.w.groups[inst.group as usize];
        let chunks = chunk_sizes(self.cfg, inst.kind, inst.bytes, members.len() as u32);
        self.started_instances += 1;
        let order = self.started_instances;
        let rt = &mut self.inst[k as usize];
        rt.start = at;
        rt.chunks_left = chunks.len() as u32;
        rt.stream_of_chunk = vec![NONE; chunks.len()];
        rt.chunks = chunks;
        rt.order = order;
        for c in 0..self.inst[k as usize].chunks.len() as u32 {
            let s = self.new_stream(k, c)?;
            self.enqueue(s);
        }
        self.dispatch_all(k)
    }

    fn new_stream(&mut self, k: u32, c: u32) -> SystemResult<u32> {
        let inst = &self.m.instances[k as usize];
        let rt = &self.inst[k as usize];
        let matrix = chunk_matrix(inst.matrix.as_deref(), rt.chunks.len(), c as usize);
        let phases = plan_chunk(
            self.cfg,
            inst.kind,
            rt.chunks[c as usize],
            matrix.as_deref(),
            &self.w.groups[inst.group as usize],
            &self.layout,
        )?;
        if c == 0 {
            self.inst[k as usize].algorithm = phases
                .iter()
                .map(|p| p.dag.algorithm())
                .collect::<Vec<_>>()
                .join("+");
        }
        let stream = Stream {
            inst: k,
            chunk: c,
            phases,
            phase: 0,
            base: 0,
            len: 0,
            left: 0,
            pending: HashMap::new(),
            last_ready: 0,
        };
        let slot = match self.free_streams.pop() {
            Some(s) => {
                self.streams[s as usize] = Some(stream);
                s
            }
            None => {
                self.streams.push(Some(stream));
                (self.streams.len() - 1) as u32
            }
        };
        self.inst[k as usize].stream_of_chunk[c as usize] = slot;
        Ok(slot)
    }

    fn queue_key(&self, s: u32) -> (u32, usize) {
        let st = self.streams[s as usize].as_ref().expect("live stream");
        (
            self.m.instances[st.inst as usize].group,
            st.phases.get(st.phase).map_or(0, |p| p.dim),
        )
    }

    fn enqueue(&mut self, s: u32) {
        let key = self.queue_key(s);
        let st = self.streams[s as usize].as_ref().expect("live stream");
        let order = self.inst[st.inst as usize].order;
        let priority = match self.cfg.scheduling_policy {
            Policy::Lifo => order,
            Policy::Fifo => u64::MAX - order,
        };
        let chunk = st.chunk;
        self.queues
            .entry(key)
            .or_default()
            .waiting
            .push((priority, Reverse(chunk), s));
    }

    /// Start waiting streams in every queue an instance's group uses.
    fn dispatch_all(&mut self, k: u32) -> SystemResult<()> {
        let g = self.m.instances[k as usize].group;
        let mut keys: Vec<(u32, usize)> = self
            .queues
            .keys()
            .copied()
            .filter(|&(qg, _)| qg == g)
            .collect();
        keys.sort_unstable();
        for key in keys {
            self.dispatch(key)?;
        }
        Ok(())
    }

    fn dispatch(&mut self, key: (u32, usize)) -> SystemResult<()> {
        let limit = self.cfg.active_chunks_per_dimension.max(1);
        loop {
            let q = self.queues.get_mut(&key).expect("queue exists");
            if q.active >= limit {
                return Ok(());
            }
            let Some((_, _, s)) = q.waiting.pop() else {
                return Ok(());
            };
            q.active += 1;
            self.start_phase(s)?;
        }
    }

    fn start_phase(&mut self, s: u32) -> SystemResult<()> {
        let now = self.now;
        let st = self.streams[s as usize].as_mut().expect("live stream");
        let k = st.inst as usize;
        st.base = self.ids.offsets[k][st.chunk as usize * st.phases.len() + st.phase];
        let phase = &st.phases[st.phase];
        st.len = phase.dag.len() as u64;
        st.left = st.len * phase.subgroups.len() as u64;
        st.pending.clear();
        st.last_ready = now;
        if st.left == 0 {
            self.timer(now, Timer::PhaseDone(s));
            return Ok(());
        }
        let at = now + self.cfg.endpoint_delay_ps;
        let mut initial = Vec::new();
        phase.dag.for_each_initial(&mut |t| initial.push(t as u64));
        let len = phase.dag.len() as u64;
        for sub in 0..phase.subgroups.len() as u64 {
            for &t in &initial {
                self.start_transfer(s, sub * len + t, at)?;
            }
        }
        Ok(())
    }

    fn start_transfer(&mut self, s: u32, local: u64, at: Ps) -> SystemResult<()> {
        if at >= CLOCK_LIMIT_PS {
            return Err(self.clock_error(
                at,
                &format!("a transfer of {} starts", self.stream_label(s)),
            ));
        }
        let st = self.streams[s as usize].as_ref().expect("live stream");
        let phase = &st.phases[st.phase];
        let (g, ti) = split(local, st.len, phase.subgroups.len());
        let tr = phase.dag.transfer(ti);
        let sub = &phase.subgroups[g as usize];
        let req = FlowRequest {
            id: st.base + local,
            src: sub[tr.src as usize],
            dst: sub[tr.dst as usize],
            bytes: tr.bytes,
        };
        self.flows += 1;
        self.net.start_flow(req, at).map_err(SystemError::Network)
    }

    fn on_flow_done(&mut self, t: Ps, id: u64) -> SystemResult<()> {
        if id >= self.ids.p2p_base {
            let k = (id - self.ids.p2p_base) as usize;
            let p = self.m.p2p[k];
            self.node_done(p.src, p.send_node, t);
            let ready = t.saturating_add(self.cfg.endpoint_delay_ps);
            self.pairs[k].arrived = Some(ready);
            if self.pairs[k].recv_issued {
                let issued = self.ranks[p.dst as usize].issued_at[p.recv_node as usize];
                self.timer(ready.max(issued), Timer::NodeDone(p.dst, p.recv_node));
            }
            return Ok(());
        }
        // Consecutive completions mostly belong to the same phase: try it first.
        let stream_id = match self.last_phase {
            (lo, hi, s) if lo <= id && id < hi => s,
            _ => {
                let s = self.stream_of_flow(id)?;
                let st = self.streams[s as usize].as_ref().expect("live stream");
                let span = st.len * st.phases[st.phase].subgroups.len() as u64;
                self.last_phase = (st.base, st.base + span, s);
                s
            }
        };
        let reduce_time;
        let ready;
        let mut successors = std::mem::take(&mut self.scratch_start);
        let mut next = std::mem::take(&mut self.scratch_next);
        {
            let st = self.streams[stream_id as usize]
                .as_mut()
                .expect("live stream");
            let local = id - st.base;
            let phase = &st.phases[st.phase];
            let len = st.len;
            let (sub, ti) = split(local, len, phase.subgroups.len());
            let tr = phase.dag.transfer(ti);
            reduce_time = if tr.reduce {
                self.cfg.reduce_time_ps(tr.bytes)?
            } else {
                0
            };
            ready = t
                .saturating_add(self.cfg.endpoint_delay_ps)
                .saturating_add(reduce_time);
            st.last_ready = st.last_ready.max(ready);
            st.left -= 1;
            phase.dag.for_each_successor(ti, &mut |j| next.push(j));
            for j in next.drain(..) {
                let g = sub * len + j as u64;
                let deps = phase.dag.n_deps(j);
                if deps <= 1 {
                    successors.push((g, ready));
                } else {
                    let e = st.pending.entry(g).or_insert((deps, 0));
                    e.0 -= 1;
                    e.1 = e.1.max(ready);
                    if e.0 == 0 {
                        let at = e.1;
                        st.pending.remove(&g);
                        successors.push((g, at));
                    }
                }
            }
            if st.left == 0 {
                let at = st.last_ready;
                self.timer(at, Timer::PhaseDone(stream_id));
            }
        }
        self.scratch_next = next;
        for &(g, at) in &successors {
            self.start_transfer(stream_id, g, at)?;
        }
        successors.clear();
        self.scratch_start = successors;
        Ok(())
    }

    fn stream_of_flow(&self, id: u64) -> SystemResult<u32> {
        let k = self.ids.inst_base.partition_point(|&b| b <= id) - 1;
        let offs = &self.ids.offsets[k];
        let slot_in = offs.partition_point(|&b| b <= id) - 1;
        // Offsets are chunk-major and every chunk of an instance has the same phase count.
        let phases_per_chunk = (offs.len() / self.inst[k].chunks.len().max(1)).max(1);
        let chunk = slot_in / phases_per_chunk;
        match self.inst[k].stream_of_chunk.get(chunk) {
            Some(&s) if s != NONE => Ok(s),
            _ => Err(SystemError::Network(format!(
                "completion of unknown flow {id}"
            ))),
        }
    }

    fn phase_done(&mut self, s: u32) -> SystemResult<()> {
        self.last_phase = (0, 0, NONE);
        let key = self.queue_key(s);
        self.queues.get_mut(&key).expect("queue exists").active -= 1;
        let st = self.streams[s as usize].as_mut().expect("live stream");
        st.phase += 1;
        let (k, more) = (st.inst, st.phase < st.phases.len());
        if more {
            self.enqueue(s);
            self.dispatch(self.queue_key(s))?;
        } else {
            let st = self.streams[s as usize].take().expect("live stream");
            self.inst[st.inst as usize].stream_of_chunk[st.chunk as usize] = NONE;
            self.free_streams.push(s);
            let rt = &mut self.inst[k as usize];
            rt.chunks_left -= 1;
            if rt.chunks_left == 0 {
                let now = self.now;
                rt.end = now;
                let w = self.w;
                let (group, nodes) = (
                    self.m.instances[k as usize].group,
                    self.m.instances[k as usize].nodes.clone(),
                );
                for (p, &r) in w.groups[group as usize].iter().enumerate() {
                    self.node_done(r, nodes[p], now);
                }
            }
        }
        self.dispatch(key)
    }

    fn finish(self) -> SystemResult<SystemReport> {
        for (r, rank) in self.ranks.iter().enumerate() {
            if rank.finished < rank.done.len() {
                return Err(self.deadlock(r as u32));
            }
        }
        let ranks = self
            .ranks
            .iter()
            .map(|rank| {
                let comm = union_length(rank.comm_intervals.clone());
                let compute = match &rank.compute_intervals {
                    Some(v) => union_length(v.clone()),
                    None => rank.compute_ps,
                };
                RankStats {
                    wall_ps: rank.wall,
                    compute_ps: compute,
                    comm_ps: comm,
                    exposed_comm_ps: rank.wall.saturating_sub(compute),
                    overlap_ps: (compute + comm).saturating_sub(rank.wall),
                    nodes: rank.done.len() as u64,
                }
            })
            .collect();
        let collectives = self
            .m
            .instances
            .iter()
            .zip(&self.inst)
            .enumerate()
            .map(|(k, (inst, rt))| CollectiveRecord {
                group: inst.group,
                seq: inst.seq,
                kind: inst.kind.name(),
                bytes: inst.bytes,
                algorithm: rt.algorithm.clone(),
                chunks: rt.chunks.len() as u32,
                flows: self.ids.inst_base[k + 1] - self.ids.inst_base[k],
                first_issue_ps: rt.first_issue,
                start_ps: rt.start,
                end_ps: rt.end,
            })
            .collect();
        Ok(SystemReport {
            ranks,
            collectives,
            flows: self.flows,
            network_counters: self.net.counters(),
        })
    }

    /// "all_reduce on group `world`": the collective a stream belongs to.
    fn stream_label(&self, s: u32) -> String {
        let st = self.streams[s as usize].as_ref().expect("live stream");
        let inst = &self.m.instances[st.inst as usize];
        format!(
            "{} on group {}",
            inst.kind.name(),
            group_label(self.w, inst.group)
        )
    }

    fn timer_clock_error(&self, t: Ps, timer: Timer) -> SystemError {
        let what = match timer {
            Timer::NodeDone(r, i) => format!(
                "{}: node {} finishes",
                self.w.ranks[r as usize].file, self.w.ranks[r as usize].nodes[i as usize].id
            ),
            Timer::PhaseDone(s) => format!("a phase of {} ends", self.stream_label(s)),
        };
        self.clock_error(t, &what)
    }

    fn clock_error(&self, t: Ps, what: &str) -> SystemError {
        let when = if t == Ps::MAX {
            "beyond".to_string()
        } else {
            format!("at {:.3e} s,", t as f64 / 1e12)
        };
        SystemError::Clock {
            message: format!(
                "{what} {when} past the picosecond clock (2^62 ps, 53 days): a duration, \
                 delay or size in the inputs is out of scale"
            ),
        }
    }

    fn deadlock(&self, r: u32) -> SystemError {
        let rank = &self.ranks[r as usize];
        let file = &self.w.ranks[r as usize].file;
        let stuck: Vec<usize> = (0..rank.done.len())
            .filter(|&i| !rank.done[i] && rank.waiting_deps[i] == 0)
            .collect();
        let mut why = Vec::new();
        for &i in stuck.iter().take(3) {
            let node = &self.w.ranks[r as usize].nodes[i];
            let k = self.m.link[r as usize][i];
            let reason = match node.kind {
                NodeKind::Collective if k != NONE => {
                    let inst = &self.m.instances[k as usize];
                    let members = &self.w.groups[inst.group as usize];
                    let missing: Vec<String> = members
                        .iter()
                        .enumerate()
                        .filter(|&(p, &m)| {
                            self.ranks[m as usize].waiting_deps[inst.nodes[p] as usize] > 0
                        })
                        .map(|(_, &m)| m.to_string())
                        .take(8)
                        .collect();
                    format!(
                        "its {} on group {} waits for ranks [{}] that never issue theirs",
                        inst.kind.name(),
                        group_label(self.w, inst.group),
                        missing.join(", ")
                    )
                }
                NodeKind::Recv => format!(
                    "its receive from rank {} never gets its data (the send never issues)",
                    node.peer
                ),
                _ => "it never completes".to_string(),
            };
            why.push(format!("{file}: node {}: {reason}", node.id));
        }
        let blocked = rank.done.len() - rank.finished;
        SystemError::Deadlock {
            message: format!(
                "rank {r} has {blocked} nodes that can never run; {}",
                why.join("; ")
            ),
        }
    }
}

/// (subgroup, transfer) of a phase-local flow index; no division in the common one-group case.
#[inline]
fn split(local: u64, len: u64, subgroups: usize) -> (u64, usize) {
    if subgroups == 1 {
        (0, local as usize)
    } else {
        (local / len, (local % len) as usize)
    }
}

/// Total length of the union of intervals.
/// The compute unit a compute node runs on: 0 the GPU, 1 the CPU (`is_cpu_op`). Each runs
/// one node at a time and the two run side by side, as in ASTRA-sim's HardwareResource.
fn unit_of(node: &NodeInput) -> usize {
    node.cpu as usize
}

fn union_length(mut v: Vec<(Ps, Ps)>) -> Ps {
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(Ps, Ps)> = None;
    for (a, b) in v {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::union_length;
    #[test]
    fn union_merges_overlaps() {
        assert_eq!(union_length(vec![(0, 10), (5, 20), (30, 40)]), 30);
        assert_eq!(union_length(vec![]), 0);
    }
}
