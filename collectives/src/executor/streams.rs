//! Collective instances and their chunk streams: an instance starts once every member
//! has issued it; each chunk becomes a stream that moves through its phases, waiting
//! in the (group, dimension) queue of each phase for one of its
//! `active-chunks-per-dimension` slots.

use super::flow_layout::plan_instance;
use super::{reuse_slot, Executor};
use crate::error::SystemResult;
use crate::plan::Phase;
use crate::system::Policy;
use crate::workload::NONE;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tracefabric_netapi::Ps;

#[derive(Default)]
pub(super) struct InstanceRt {
    pub(super) issued: u32,
    pub(super) first_issue: Ps,
    pub(super) start: Ps,
    /// Chunk count (0 until the instance starts).
    pub(super) chunks: u32,
    chunks_left: u32,
    /// Start order among instances (scheduling priority).
    order: u64,
    pub(super) algorithm: String,
    pub(super) end: Ps,
    /// Stream slot of each chunk while it runs (NONE otherwise).
    pub(super) stream_of_chunk: Vec<u32>,
}

/// A chunk of an instance, moving through its phases.
pub(super) struct Stream {
    pub(super) inst: u32,
    pub(super) chunk: u32,
    pub(super) phases: Vec<Phase>,
    pub(super) phase: usize,
    /// Flow id of transfer 0 of subgroup 0 of the current phase.
    pub(super) base: u64,
    /// Transfers per subgroup in the current phase.
    pub(super) len: u64,
    pub(super) left: u64,
    /// Multi-dependency transfers: (dependencies still missing, latest ready time so far).
    pub(super) pending: HashMap<u64, (u32, Ps)>,
    pub(super) last_ready: Ps,
}

#[derive(Default)]
pub(super) struct DimQueue {
    active: u32,
    /// (priority, chunk order, stream) — highest first.
    waiting: BinaryHeap<(u64, Reverse<u32>, u32)>,
}

impl Executor<'_> {
    /// Starts instance `k` at `at` with its chunk plans: those made before the run where
    /// kept, else planned now (`plan_chunk` is deterministic, so the flow counts match
    /// the layout).
    pub(super) fn start_instance(&mut self, k: u32, at: Ps) -> SystemResult<()> {
        let plan = match self.plans.get_mut(k as usize) {
            Some(kept) => std::mem::take(kept),
            None => plan_instance(
                self.w,
                self.cfg,
                &self.m.instances[k as usize],
                &self.layout,
            )?,
        };
        self.started_instances += 1;
        let order = self.started_instances;
        let rt = &mut self.inst[k as usize];
        rt.start = at;
        rt.chunks = plan.len() as u32;
        rt.chunks_left = plan.len() as u32;
        rt.stream_of_chunk = vec![NONE; plan.len()];
        rt.order = order;
        if let Some(first) = plan.first() {
            rt.algorithm = first
                .iter()
                .map(|p| p.dag.algorithm())
                .collect::<Vec<_>>()
                .join("+");
        }
        for (c, phases) in plan.into_iter().enumerate() {
            let s = self.new_stream(k, c as u32, phases);
            self.enqueue(s);
        }
        self.dispatch_all(k)
    }

    fn new_stream(&mut self, k: u32, c: u32, phases: Vec<Phase>) -> u32 {
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
        let slot = reuse_slot(&mut self.streams, &mut self.free_streams, stream);
        self.inst[k as usize].stream_of_chunk[c as usize] = slot;
        slot
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

    pub(super) fn phase_done(&mut self, s: u32) -> SystemResult<()> {
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
}
