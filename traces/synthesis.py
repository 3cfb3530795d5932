"""Synthesize per-rank Chakra execution traces for a model and a parallelism plan.

What a rank does in one training iteration, as Chakra nodes:

* `fsdp` (FSDP / ZeRO-3, full shard, one unit per transformer block plus the embedding and
  the head): forward: all-gather of each unit's parameters, issued in order so the next
  all-gather (prefetch) overlaps the current unit's compute; backward, last unit first:
  all-gather again (parameters were resharded after forward), compute, reduce-scatter of
  the unit's gradients.
* `dp` (plain data parallel): forward and backward compute per unit, an all-reduce of each
  unit's gradients as soon as its backward is done.

Collectives span every rank in one process group. With `gpus_per_server > 1` they are
hierarchical, as in the OFAN paper's FSDP layout (§8.4): a step inside each server on the
NVLink-class domain (dimension 0), then `gpus_per_server` parallel rings across servers in the
scale-out fabric (dimension 1; GPU i talks to GPU i + gpus_per_server mod world), with servers
placed at random. `comm_size` is the full (unsharded) buffer of the collective, as ASTRA-sim's
workload layer expects. Compute durations come from a roofline of the named GPU.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .chakra_io import COMM_TYPES, EtNode, comm_type_name, encode_trace
from .models import ModelSpec

BYTES_PER_PARAM = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class GpuSpec:
    name: str
    peak_flops: dict[str, float]  # dense tensor FLOP/s per precision
    hbm_bytes_per_s: float


# Vendor datasheet values (dense, SXM parts).
GPUS = {
    "h100": GpuSpec("h100", {"fp8": 1979e12, "bf16": 989e12, "fp16": 989e12, "fp32": 67e12}, 3.35e12),
    "h200": GpuSpec("h200", {"fp8": 1979e12, "bf16": 989e12, "fp16": 989e12, "fp32": 67e12}, 4.8e12),
    "b200": GpuSpec("b200", {"fp8": 4500e12, "bf16": 2250e12, "fp16": 2250e12, "fp32": 80e12}, 8.0e12),
}


@dataclass(frozen=True)
class Plan:
    parallel: str = "fsdp"  # "fsdp" | "dp"
    world: int = 8
    gpus_per_server: int = 8
    precision: str = "bf16"
    gpu: str = "h100"
    seq: int = 4096
    micro_batch: int = 1
    seed: int = 1

    def __post_init__(self) -> None:
        if self.parallel not in ("fsdp", "dp"):
            raise ConfigError(f"parallel `{self.parallel}` is not supported; expected fsdp or dp", "parallel")
        if self.world < 1:
            raise ConfigError(f"world must be >= 1, got {self.world}", "world")
        if self.gpus_per_server < 1 or self.world % self.gpus_per_server:
            raise ConfigError(f"world ({self.world}) must be a multiple of gpus_per_server ({self.gpus_per_server})", "gpus_per_server")
        if self.precision not in BYTES_PER_PARAM:
            raise ConfigError(f"precision `{self.precision}` unknown; expected one of {', '.join(BYTES_PER_PARAM)}", "precision")
        if self.gpu not in GPUS:
            raise ConfigError(f"gpu `{self.gpu}` unknown; expected one of {', '.join(GPUS)}", "gpu")
        if self.seq < 1 or self.micro_batch < 1:
            raise ConfigError("seq and micro_batch must be >= 1", "seq")

    @property
    def servers(self) -> int:
        return self.world // self.gpus_per_server

    @property
    def dims(self) -> list[int]:
        """Group size per network dimension: [intra-server, inter-server] (one entry if flat)."""
        g = self.gpus_per_server
        return [g, self.servers] if 1 < g < self.world else [self.world]


@dataclass(frozen=True)
class Unit:
    name: str
    params: int
    forward_flops: float
    #: Bytes the forward pass reads from HBM (weights, or the embedding rows it looks up).
    forward_bytes: float


def units(model: ModelSpec, plan: Plan) -> list[Unit]:
    """FSDP wrapping units: the embedding, every transformer block, the head."""
    tokens = plan.seq * plan.micro_batch
    nbytes = BYTES_PER_PARAM[plan.precision]
    out = [Unit("embedding", model.embedding_params(), 0.0, tokens * model.hidden * nbytes)]
    for i in range(model.layers):
        active = model.layer_params(i)
        if model.is_moe and i >= model.dense_layers:
            routed_idle = (model.experts - model.top_k) * model.expert_params()
            active -= routed_idle  # only top_k routed experts see a given token
        attention = 4.0 * tokens * plan.seq * model.hidden  # QK^T and AV, 2 FLOPs per MAC, no causal saving
        out.append(Unit(f"layer{i}", model.layer_params(i), 2.0 * active * tokens + attention, active * nbytes))
    # The logits matmul costs the same whether or not its weights are tied to the embedding.
    out.append(Unit("head", model.head_params(), 2.0 * model.vocab * model.hidden * tokens, model.vocab * model.hidden * nbytes))
    return out


def roofline_micros(flops: float, bytes_moved: float, plan: Plan) -> int:
    gpu = GPUS[plan.gpu]
    seconds = max(flops / gpu.peak_flops[plan.precision], bytes_moved / gpu.hbm_bytes_per_s)
    return max(1, round(seconds * 1e6))


@dataclass
class Synthesis:
    model: ModelSpec
    plan: Plan
    nodes: list[EtNode]  # every rank runs this same graph
    placement: list[int]  # rank -> network host (random server placement)

    def comm_groups(self) -> dict[str, list[int]]:
        return {"0": list(range(self.plan.world))}

    def collectives(self) -> list[EtNode]:
        return [n for n in self.nodes if n.type == "COMM_COLL_NODE"]

    def bytes_sent_per_rank(self) -> dict[str, float]:
        """Bytes one rank sends per iteration, per dimension, for ring algorithms: a ring
        all-gather or reduce-scatter of P bytes over n ranks sends (n-1)/n * P; an all-reduce
        twice that; hierarchically, the inter-server step moves 1/g of the data."""
        dims = self.plan.dims
        sent = [0.0] * len(dims)
        for n in self.collectives():
            size = n.attrs["comm_size"]
            factor = 2 if n.attrs["comm_type"] == COMM_TYPES["ALL_REDUCE"] else 1
            share = float(size)
            for d, k in enumerate(dims):
                sent[d] += factor * (k - 1) / k * share
                share /= k
        names = ["scale_up", "scale_out"] if len(dims) == 2 else ["ring"]
        return dict(zip(names, sent)) | {"total": sum(sent)}

    def summary(self, payload_bytes: int = 4096) -> dict[str, Any]:
        colls = Counter((comm_type_name(n.attrs["comm_type"]), n.attrs["comm_size"]) for n in self.collectives())
        by_type = Counter(comm_type_name(n.attrs["comm_type"]) for n in self.collectives())
        out: dict[str, Any] = {
            "model": self.model.name, "params": self.model.total_params(), "plan": asdict(self.plan),
            "nodes_per_rank": len(self.nodes), "collectives_per_iteration": dict(by_type),
            "collectives_by_size": [{"type": t, "bytes": b, "count": c} for (t, b), c in sorted(colls.items())],
            "bytes_sent_per_rank": self.bytes_sent_per_rank(),
        }
        if len(self.plan.dims) == 2:
            # Each ring step of the inter-server ring moves 1/world of a unit's bytes between
            # neighbours; in backward a gradient reduce-scatter and a parameter all-gather
            # share each ring link, so a ring flow per layer carries twice that.
            layer = max(u.params for u in units(self.model, self.plan)[1:-1]) * BYTES_PER_PARAM[self.plan.precision]
            step = layer / self.plan.world
            out["inter_server_ring"] = {
                "rings": self.plan.gpus_per_server, "members": self.plan.servers,
                "step_bytes_per_collective": step, "backward_flow_bytes": 2 * step,
                "backward_flow_packets": -(-2 * step // payload_bytes),
                "queue_pairs_per_gpu": 1 if self.plan.parallel in ("fsdp", "dp") else None,
            }
        return out


def synthesize(model: ModelSpec, plan: Plan) -> Synthesis:
    nbytes = BYTES_PER_PARAM[plan.precision]
    dims = plan.dims
    involved = [True] * len(dims)
    nodes: list[EtNode] = []

    def add(name: str, kind: str, data: list[int] = (), ctrl: list[int] = (), dur: int = 0, **attrs: Any) -> int:
        nid = len(nodes)
        nodes.append(EtNode(nid, name, kind, [d for d in data if d is not None], [c for c in ctrl if c is not None], dur, attrs))
        return nid

    def coll(name: str, ctype: str, size: int, data: list[int] = (), ctrl: list[int] = ()) -> int:
        return add(name, "COMM_COLL_NODE", data, ctrl, comm_type=COMM_TYPES[ctype], comm_size=size, pg_name="0", involved_dim=involved,
                   is_cpu_op=False)

    us = units(model, plan)
    fwd_time = [roofline_micros(u.forward_flops, u.forward_bytes, plan) for u in us]
    prev_comp = prev_ag = None
    for u, t in zip(us, fwd_time):
        ag = coll(f"{u.name}.fwd.all_gather", "ALL_GATHER", u.params * nbytes, ctrl=[prev_ag]) if plan.parallel == "fsdp" else None
        prev_comp = add(f"{u.name}.fwd", "COMP_NODE", data=[ag], ctrl=[prev_comp], dur=t, num_ops=int(u.forward_flops),
                        tensor_size=u.params * nbytes, is_cpu_op=False)
        prev_ag = ag if ag is not None else prev_ag
    prev_ag = None
    for u, t in zip(reversed(us), reversed(fwd_time)):
        ag = coll(f"{u.name}.bwd.all_gather", "ALL_GATHER", u.params * nbytes, ctrl=[prev_ag or prev_comp]) if plan.parallel == "fsdp" else None
        comp = add(f"{u.name}.bwd", "COMP_NODE", data=[ag], ctrl=[prev_comp], dur=2 * t, num_ops=int(2 * u.forward_flops),
                   tensor_size=u.params * nbytes, is_cpu_op=False)
        if plan.parallel == "fsdp":
            coll(f"{u.name}.bwd.reduce_scatter", "REDUCE_SCATTER", u.params * nbytes, data=[comp])
        else:
            coll(f"{u.name}.bwd.all_reduce", "ALL_REDUCE", u.params * nbytes, data=[comp])
        prev_comp, prev_ag = comp, ag
    rng = random.Random(plan.seed)
    servers = list(range(plan.servers))
    rng.shuffle(servers)
    g = plan.gpus_per_server
    placement = [servers[r // g] * g + r % g for r in range(plan.world)]
    return Synthesis(model, plan, nodes, placement)


def write(s: Synthesis, out_dir: str | Path, prefix: str | None = None) -> dict[str, Any]:
    """`<prefix>.<rank>.et` for every rank, `comm_groups.json`, `placement.json`, `summary.json`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = prefix or s.model.name
    blob = encode_trace(s.nodes, {"model": s.model.name, "parallel": s.plan.parallel, "world": s.plan.world})
    for rank in range(s.plan.world):
        (out / f"{prefix}.{rank}.et").write_bytes(blob)  # every rank runs the same graph
    (out / "comm_groups.json").write_text(json.dumps(s.comm_groups()))
    (out / "placement.json").write_text(json.dumps({"rank_to_host": s.placement}))
    summary = s.summary()
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
