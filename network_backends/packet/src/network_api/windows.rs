//! Engine windows: a driven run that declares more flows than `limits.max_flows` (a whole
//! Llama iteration on 1,024 GPUs declares tens of millions of ring steps, a few thousand of
//! them in flight at a time) runs on a sequence of engines, each built for a window of
//! `max_flows` declared flows. A busy period that starts on a quiescent engine with less
//! than half a window left builds the next engine from its first flow on; the finished
//! engine's statistics carry over. A flow outside the window while others run is refused.
//!
//! A fresh engine stands where a quiescent one does for every scheme whose
//! `reuse_digest` is Some (none carries state across flows); a scheme that does (host
//! spraying's random stream, OFAN's pointers) restarts it at a window's start. Failures
//! and PFC keep state of their own (scheduled changes, pause counters): such runs are
//! refused a window.

use super::*;
use crate::error::SimResult;
use crate::traffic::FlowSpec;

/// Builds an engine (driven) for the given flows.
pub type EngineFactory = Box<dyn FnMut(Vec<FlowSpec>) -> SimResult<Simulation> + Send>;

pub struct Windows {
    /// Every declared flow's (src, dst, bytes), by declared index.
    flows: Vec<(u32, u32, u64)>,
    size: usize,
    build: EngineFactory,
    /// First declared index of the current engine's window.
    pub(super) lo: usize,
    /// Events the finished engines processed.
    pub(super) events_before: u64,
}

impl Windows {
    /// Windows over the requests that put bytes on the network (`DrivenPacket::declared`),
    /// `size` flows each.
    pub fn new(requests: &[FlowRequest], size: usize, build: EngineFactory) -> Windows {
        Windows {
            flows: (requests.iter().filter(|f| on_network(f)))
                .map(|f| (f.src, f.dst, f.bytes))
                .collect(),
            size: size.max(1),
            build,
            lo: 0,
            events_before: 0,
        }
    }

    /// The flows of the window starting at `lo`.
    pub fn specs(&self, lo: usize) -> Vec<FlowSpec> {
        let hi = (lo + self.size).min(self.flows.len());
        (self.flows[lo..hi].iter())
            .map(|&(src, dst, bytes)| FlowSpec {
                src,
                dst,
                bytes,
                start: Time::ZERO,
            })
            .collect()
    }

    /// Declared flows in all.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Whether one engine holds every declared flow.
    pub fn single(&self) -> bool {
        self.flows.len() <= self.size
    }

    /// A driven engine for the window starting at declared flow `lo`.
    pub fn engine(&mut self, lo: usize) -> SimResult<Simulation> {
        let specs = self.specs(lo);
        let mut sim = (self.build)(specs)?;
        sim.drive();
        Ok(sim)
    }

    pub fn flow(&self, g: usize) -> Option<(u32, u32, u64)> {
        self.flows.get(g).copied()
    }

    pub fn contains(&self, g: usize) -> bool {
        (self.lo..self.lo + self.size).contains(&g)
    }
}

impl DrivenPacket {
    /// The engine index of declared flow `g`, moving to the window that holds it when the
    /// current engine is quiescent.
    pub(super) fn engine_index(&mut self, g: u32) -> Result<u32, String> {
        let Some(w) = &mut self.windows else {
            return Ok(g);
        };
        let quiescent = self.sim.quiescent();
        // A new busy period moves on while less than half a window is left, so that the
        // flows of one period (at most half a window) never straddle two engines.
        let roomy = g as usize + w.size / 2 <= w.lo + w.size;
        if w.contains(g as usize) && (roomy || !quiescent) {
            return Ok((g as usize - w.lo) as u32);
        }
        if !quiescent {
            return Err(format!(
                "declared flow {g} starts while flows of the engine's window [{}, {}) are still \
                 running: raise limits.max_flows (= {}) so that flows in flight together share \
                 a window",
                w.lo,
                w.lo + w.size,
                w.size
            ));
        }
        let next = w.engine(g as usize).map_err(|e| e.to_string())?;
        let old = std::mem::replace(&mut self.sim, next);
        w.events_before += old.events_processed();
        w.lo = g as usize;
        self.sim.carry_over(old);
        Ok(0)
    }

    /// The engine index of declared flow `g` if the current window holds it.
    pub(super) fn engine_index_if_here(&self, g: u32) -> Option<u32> {
        match &self.windows {
            Some(w) if !w.contains(g as usize) => None,
            Some(w) => Some((g as usize - w.lo) as u32),
            None => Some(g),
        }
    }
}
