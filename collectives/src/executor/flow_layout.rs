//! Planning the chunks of collectives, and laying out before the run the flow ids the
//! plans use.

use super::Executor;
use crate::error::{SystemError, SystemResult};
use crate::plan::{chunk_sizes, plan_chunk, Layout, Phase, Shape};
use crate::system::SystemConfig;
use crate::workload::{group_label, Instance, Matched, WorkloadInput, NONE};

/// The phases of each chunk of one collective instance, chunk by chunk.
pub(super) type InstancePlan = Vec<Vec<Phase>>;

/// Where every flow id lives: instance i owns ids [inst_base[i], inst_base[i+1]);
/// inside, each (chunk, phase) owns a contiguous range.
pub(super) struct FlowLayout {
    pub(super) inst_base: Vec<u64>,
    /// Per instance, the id offset of each (chunk, phase), chunk-major.
    pub(super) offsets: Vec<Vec<u64>>,
    pub(super) p2p_base: u64,
}

/// The share of an all-to-all-v matrix that chunk `c` of `count` carries.
fn chunk_matrix(matrix: Option<&[u64]>, count: usize, c: usize) -> Option<Vec<u64>> {
    matrix.map(|m| {
        m.iter()
            .map(|&b| crate::dag::Blocks::Exact.size(b, count as u64, c as u64))
            .collect()
    })
}

/// The phases of every chunk of `inst`, chunk by chunk.
pub(super) fn plan_instance(
    w: &WorkloadInput,
    cfg: &SystemConfig,
    inst: &Instance,
    layout: &Layout,
) -> SystemResult<InstancePlan> {
    let members = &w.groups[inst.group as usize];
    let chunks = chunk_sizes(cfg, inst.kind, inst.bytes, members.len() as u32);
    let shape = Shape {
        kind: inst.kind,
        members,
        involved: inst.involved.as_deref(),
    };
    // ASTRA-sim reads no split sizes: an all-to-all-v runs as a plain all-to-all there.
    let matrix = inst.matrix.as_deref().filter(|_| !cfg.astra);
    let mut plan = Vec::with_capacity(chunks.len());
    for (c, &bytes) in chunks.iter().enumerate() {
        let matrix = chunk_matrix(matrix, chunks.len(), c);
        let phases =
            plan_chunk(cfg, &shape, bytes, matrix.as_deref(), layout).map_err(|e| match e {
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
        plan.push(phases);
    }
    Ok(plan)
}

/// Plans every chunk of every collective and lays out the flow ids, in flow-id order
/// (instance, chunk, phase, subgroup, transfer). With `keep`, returns every instance's
/// plan; without, drops each once counted (explicit DAGs of collectives that are not
/// running then hold no memory) and returns no plans.
pub(super) fn plan_workload(
    w: &WorkloadInput,
    cfg: &SystemConfig,
    m: &Matched,
    layout: &Layout,
    keep: bool,
) -> SystemResult<(FlowLayout, Vec<InstancePlan>)> {
    let mut inst_base = Vec::with_capacity(m.instances.len() + 1);
    let mut offsets = Vec::with_capacity(m.instances.len());
    let mut plans = Vec::with_capacity(if keep { m.instances.len() } else { 0 });
    let mut next = 0u64;
    for inst in &m.instances {
        inst_base.push(next);
        let plan = plan_instance(w, cfg, inst, layout)?;
        let mut offs = Vec::new();
        for p in plan.iter().flatten() {
            offs.push(next);
            next += p.dag.len() as u64 * p.subgroups.len() as u64;
        }
        offsets.push(offs);
        if keep {
            plans.push(plan);
        }
    }
    inst_base.push(next);
    let ids = FlowLayout {
        inst_base,
        offsets,
        p2p_base: next,
    };
    Ok((ids, plans))
}

impl FlowLayout {
    /// (instance, (chunk, phase) slot, index in the slot) of collective flow `id`.
    pub(super) fn locate(&self, id: u64) -> (usize, usize, u64) {
        let k = self.inst_base.partition_point(|&b| b <= id) - 1;
        let offs = &self.offsets[k];
        let slot = offs.partition_point(|&b| b <= id) - 1;
        (k, slot, id - offs[slot])
    }
}

impl Executor<'_> {
    /// The stream running the chunk that owns collective flow `id`.
    pub(super) fn stream_of_flow(&self, id: u64) -> SystemResult<u32> {
        let k = self.ids.inst_base.partition_point(|&b| b <= id) - 1;
        let offs = &self.ids.offsets[k];
        let slot_in = offs.partition_point(|&b| b <= id) - 1;
        // Offsets are chunk-major and every chunk of an instance has the same phase count.
        let phases_per_chunk = (offs.len() / (self.inst[k].chunks as usize).max(1)).max(1);
        let chunk = slot_in / phases_per_chunk;
        match self.inst[k].stream_of_chunk.get(chunk) {
            Some(&s) if s != NONE => Ok(s),
            _ => Err(SystemError::Network(format!(
                "completion of unknown flow {id}"
            ))),
        }
    }
}
