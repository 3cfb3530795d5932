"""Synthesize per-rank Chakra execution traces for a model and a parallelism plan.

What a rank does in one training iteration, as Chakra nodes:

* `fsdp` (FSDP / ZeRO-3, full shard, one unit per transformer block plus the embedding and
  the head): forward: all-gather of each unit's parameters, issued in order so the next
  all-gather (prefetch) overlaps the current unit's compute; backward, last unit first:
  all-gather again (parameters were resharded after forward), compute, reduce-scatter of
  the unit's gradients.
* `dp` (plain data parallel): forward and backward compute per unit, an all-reduce of each
  unit's gradients as soon as its backward is done.

Inside a block, tensor parallelism (Megatron) all-reduces the activation after attention and
after the MLP in forward, and the input gradients of both in backward. Expert parallelism
exchanges token counts (an all-to-all of one int64 per expert), dispatches the routed tokens
and combines them back (all-to-all-v); backward runs the combine's gradient first (it sends
what the dispatch sent) and then the dispatch's (what the combine sent). With both, each
tensor-parallel rank routes its 1/tp share of the tokens and an all-gather over the
tensor-parallel group rebuilds the activation (sequence-parallel style; experts are whole on
every tensor-parallel rank). Gradients that nothing upstream needs are not sent: a first layer
whose input is raw data (no embedding) skips its input-gradient collectives, as autograd does.

Collectives span every rank in one process group. With `gpus_per_server > 1` they are
hierarchical, as in the OFAN paper's FSDP layout (§8.4): a step inside each server on the
NVLink-class domain (dimension 0), then `gpus_per_server` parallel rings across servers in the
scale-out fabric (dimension 1; GPU i talks to GPU i + gpus_per_server mod world), with servers
placed at random. `comm_size` is each rank's input, as PyTorch records it and ASTRA-sim reads it:
the buffer of an all-reduce, the unsharded input of a reduce-scatter, the shard of an all-gather
(the unsharded buffer over the group, rounded up as FSDP pads it). Summaries report each
collective's whole buffer. Compute durations come from a roofline of the named GPU.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, load_json
from ..specs import plain
from .chakra_io import COMM_TYPES, EtNode, comm_type_name, encode_trace, remove_ranks_past
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


# Past these a synthesis fills memory before it writes anything.
PLAN_MAX = {"world": 1 << 17, "microbatches": 1 << 12, "seq": 1 << 24, "micro_batch": 1 << 16}


PLAN_INTEGERS = ("world", "gpus_per_server", "seq", "micro_batch", "seed", "tp", "ep", "pp", "microbatches")


@dataclass(frozen=True)
class Plan:
    parallel: str = "fsdp"  # "fsdp" | "dp": how the data-parallel dimension treats parameters
    world: int = 8
    gpus_per_server: int = 8
    precision: str = "bf16"
    gpu: str = "h100"
    seq: int = 4096
    micro_batch: int = 1
    seed: int = 1
    tp: int = 1  # tensor parallel (Megatron-style: consecutive ranks, two all-reduces per block and pass)
    ep: int = 1  # expert parallel inside the data-parallel dimension (MoE models)
    imbalance: float = 0.0  # EP routing skew: per-peer token shares vary by up to +-imbalance
    pp: int = 1  # pipeline stages (1F1B schedule)
    microbatches: int = 1  # per iteration, with pp > 1; each has `micro_batch` sequences
    #: FSDP2/FSDP1 wrapping of the root module: embedding, final norm and head form one unit,
    #: gathered first and not resharded after forward (so not gathered again in backward).
    root_unit: bool = False
    #: EP routing: routing[i][j] = tokens (token-expert assignments) that member i of an
    #: expert-parallel group sends to member j, the same for every MoE layer and group (e.g. the
    #: routing a captured run decided). None: balanced, or skewed by `imbalance`.
    routing: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        # Types first: a string or float here would fail deep in synthesis, or write a
        # fractional size into a trace. Sizes beyond 2^40 overflow the traces' int64 fields.
        for name in (*PLAN_INTEGERS, "imbalance", "root_unit"):
            object.__setattr__(self, name, plain(getattr(self, name)))  # numpy numbers from a sweep
        for name, known in (("parallel", ("fsdp", "dp")), ("precision", BYTES_PER_PARAM), ("gpu", GPUS)):
            if not isinstance(getattr(self, name), str):  # a list here was a TypeError (unhashable)
                raise ConfigError(f"`{name}`: expected a string, one of {', '.join(known)}, got {getattr(self, name)!r}", name)
        if not isinstance(self.root_unit, bool):  # "no" would be true
            raise ConfigError(f"`root_unit`: expected True or False, got {self.root_unit!r}", "root_unit")
        for name in PLAN_INTEGERS:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not -(1 << 40) < v < 1 << 40:
                raise ConfigError(f"`{name}`: expected an integer below 2^40, got {v!r}", name)
        if not isinstance(self.imbalance, (int, float)) or isinstance(self.imbalance, bool) or not math.isfinite(self.imbalance):
            raise ConfigError(f"`imbalance`: expected a number, got {self.imbalance!r}", "imbalance")
        for name, limit in PLAN_MAX.items():
            if getattr(self, name) > limit:
                raise ConfigError(f"`{name}`: at most {limit} (every rank gets its own trace, every micro-batch "
                                  f"its own nodes), got {getattr(self, name)}", name)
        if self.parallel not in ("fsdp", "dp"):
            raise ConfigError(f"parallel `{self.parallel}` is not supported; expected fsdp or dp", "parallel")
        for name in ("world", "gpus_per_server", "tp", "ep", "pp"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}", name)
        if self.seed < 0:  # as `net run` takes seeds
            raise ConfigError(f"seed must be >= 0, got {self.seed}", "seed")
        if self.world % self.gpus_per_server:
            raise ConfigError(f"world ({self.world}) must be a multiple of gpus_per_server ({self.gpus_per_server})", "gpus_per_server")
        if self.precision not in BYTES_PER_PARAM:
            raise ConfigError(f"precision `{self.precision}` unknown; expected one of {', '.join(BYTES_PER_PARAM)}", "precision")
        if self.gpu not in GPUS:
            raise ConfigError(f"gpu `{self.gpu}` unknown; expected one of {', '.join(GPUS)}", "gpu")
        if self.seq < 1 or self.micro_batch < 1:
            raise ConfigError("seq and micro_batch must be >= 1", "seq")
        if self.tp < 1 or self.world % self.tp:
            raise ConfigError(f"world ({self.world}) must be a multiple of tp ({self.tp})", "tp")
        if self.pp < 1 or self.world % (self.tp * self.pp):
            raise ConfigError(f"world ({self.world}) must be a multiple of tp x pp ({self.tp} x {self.pp})", "pp")
        if self.microbatches < 1 or (self.pp == 1 and self.microbatches != 1):
            raise ConfigError(f"microbatches must be >= 1, and 1 without pipeline parallelism (got {self.microbatches} with pp = {self.pp})", "microbatches")
        if self.ep < 1 or self.dp % self.ep:
            raise ConfigError(f"the data-parallel size ({self.dp}) must be a multiple of ep ({self.ep})", "ep")
        if self.root_unit and self.pp > 1:
            raise ConfigError("root_unit with pp > 1 is not supported: the embedding and the head sit on different stages", "root_unit")
        if self.tp > 1 and self.ep > 1 and (self.seq * self.micro_batch) % self.tp:
            raise ConfigError(f"with tp and ep, tp ({self.tp}) must divide the tokens per micro-batch "
                              f"(seq x micro_batch = {self.seq * self.micro_batch}): each tp rank routes its share", "tp")
        if self.routing is not None:
            try:
                object.__setattr__(self, "routing", tuple(tuple(row) for row in self.routing))  # lists from JSON
            except TypeError:
                raise ConfigError(f"routing must be an ep x ep matrix of token counts, got {self.routing!r}", "routing") from None
            if len(self.routing) != self.ep or any(len(row) != self.ep for row in self.routing):
                raise ConfigError(f"routing must be an ep x ep matrix ({self.ep} x {self.ep}) of token counts, got "
                                  f"{len(self.routing)} rows of lengths {sorted({len(r) for r in self.routing})}", "routing")
            if any(not isinstance(t, int) or isinstance(t, bool) or t < 0 for row in self.routing for t in row):
                raise ConfigError("routing entries must be non-negative integers (tokens)", "routing")
            if self.imbalance:
                raise ConfigError("give either routing or imbalance, not both", "routing")
        if not 0.0 <= self.imbalance < 1.0:
            raise ConfigError(f"imbalance must be in [0, 1), got {self.imbalance}", "imbalance")
        for name in ("imbalance", "routing"):  # they shape expert-parallel all-to-alls; with ep = 1 there are none
            if getattr(self, name) not in (0.0, None) and self.ep == 1:
                raise ConfigError(f"{name} shapes the expert-parallel all-to-alls, but ep = 1 has none; "
                                  "expected ep > 1 on a mixture-of-experts model", name)

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp)

    @property
    def stage_stride(self) -> int:
        """Rank distance between neighbouring pipeline stages (stages are the slowest index)."""
        return self.dp * self.tp

    @property
    def servers(self) -> int:
        return self.world // self.gpus_per_server

    @property
    def act_bytes(self) -> int:
        """Bytes per activation element on the wire (bf16, or fp32 for fp32 training)."""
        return 4 if self.precision == "fp32" else 2

    def check_model(self, model: ModelSpec) -> None:
        for what, n in (("heads", model.heads), ("kv_heads", model.kv_heads), ("ffn", model.ffn)):
            if n % self.tp:
                raise ConfigError(f"tp ({self.tp}) must divide {what} ({n}) of `{model.name}`", "tp")
        if self.ep > 1 and not model.is_moe:
            raise ConfigError(f"ep ({self.ep}) needs a mixture-of-experts model; `{model.name}` is dense", "ep")
        if model.experts % self.ep:
            raise ConfigError(f"ep ({self.ep}) must divide the experts ({model.experts}) of `{model.name}`", "ep")
        if model.layers % self.pp:
            raise ConfigError(f"pp ({self.pp}) must divide the layers ({model.layers}) of `{model.name}`", "pp")
        if self.routing is not None:
            want = self.seq * self.micro_batch // self.tp * model.top_k
            bad = [i for i, row in enumerate(self.routing) if sum(row) != want]
            if bad:
                raise ConfigError(f"routing row {bad[0]} sums to {sum(self.routing[bad[0]])} tokens; expected seq x micro_batch"
                                  f" / tp x top_k = {want}", "routing")


@dataclass(frozen=True)
class Unit:
    name: str
    #: Parameters of the unit held by one tensor-parallel rank, sharded (FSDP) or
    #: replicated (DP) over the data-parallel group.
    params: int
    #: Parameters of the routed experts one expert-parallel rank owns (EP only), sharded or
    #: replicated over the ranks that own the same experts.
    expert_params: int
    forward_flops: float  # per rank
    #: Bytes the forward pass reads from HBM (weights, or the embedding rows it looks up).
    forward_bytes: float
    is_block: bool
    moe: bool


def units(model: ModelSpec, plan: Plan) -> list[Unit]:
    """FSDP wrapping units: the embedding, every transformer block, the head. Tensor
    parallelism splits every matrix (vocabulary-parallel embedding and head); norms and MoE
    routers stay whole."""
    tokens = plan.seq * plan.micro_batch
    nbytes = BYTES_PER_PARAM[plan.precision]
    tp, ep = plan.tp, plan.ep
    out = [Unit("embedding", model.embedding_params() // tp, 0, 0.0, tokens * model.hidden * nbytes, False, False)]
    for i in range(model.layers):
        norms = model.norm_params()
        total = model.layer_params(i)
        moe = model.is_moe and i >= model.dense_layers
        active = total
        if moe:
            active -= (model.experts - model.top_k) * model.expert_params()  # a token sees only top_k routed experts
        attention = 2.0 * tokens * plan.seq * sum(model.attention_widths())  # QK^T and AV, 2 FLOPs per MAC, no causal saving
        flops = (2.0 * active * tokens + attention) / tp
        experts = model.experts // ep * model.expert_params() if moe and ep > 1 else 0
        dense = total - (model.experts * model.expert_params() if experts else 0)
        whole = norms + (model.hidden * model.experts if moe else 0)  # norms and the router are replicated over TP
        out.append(Unit(f"layer{i}", (dense - whole) // tp + whole, experts, flops, active / tp * nbytes, True, moe))
    # The logits matmul costs the same whether or not its weights are tied to the embedding.
    norm = model.final_norm_params()  # replicated over TP, the projection split
    out.append(Unit("head", (model.head_params() - norm) // tp + norm, 0,
                    2.0 * model.vocab * model.hidden * tokens / tp, model.vocab * model.hidden * nbytes / tp, False, False))
    return out


def roofline_micros(flops: float, bytes_moved: float, plan: Plan) -> int:
    gpu = GPUS[plan.gpu]
    seconds = max(flops / gpu.peak_flops[plan.precision], bytes_moved / gpu.hbm_bytes_per_s)
    return max(1, round(seconds * 1e6))


class Groups:
    """Process groups, numbered as ASTRA-sim's comm-group JSON numbers them. Ranks are laid
    out tensor-parallel fastest (so TP stays inside a server), then data-parallel; EP groups
    are consecutive data-parallel ranks; ranks owning the same experts form an expert-data group."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.ranks: dict[str, list[int]] = {}
        self._key: dict[tuple[int, ...], str] = {}

    def _id(self, members: list[int]) -> str | None:
        """The group's id; None for a group of one rank (it never communicates)."""
        if len(members) == 1:
            return None
        key = tuple(members)
        if key not in self._key:
            gid = str(len(self.ranks))
            self._key[key] = gid
            self.ranks[gid] = members
        return self._key[key]

    def tp(self, rank: int) -> str | None:
        t = self.plan.tp
        return self._id(list(range(rank - rank % t, rank - rank % t + t)))

    def _dp_members(self, rank: int) -> list[int]:
        stride = self.plan.stage_stride
        base = rank - rank % stride + rank % self.plan.tp
        return list(range(base, base + stride, self.plan.tp))

    def dp(self, rank: int) -> str | None:
        return self._id(self._dp_members(rank))

    def ep(self, rank: int) -> str | None:
        members = self._dp_members(rank)
        i = members.index(rank) // self.plan.ep * self.plan.ep
        return self._id(members[i:i + self.plan.ep])

    def edp(self, rank: int) -> str | None:
        """Ranks holding the same experts: same position in their EP group, any tensor-parallel
        index (experts are whole on every tensor-parallel rank, which route different tokens)."""
        p = self.plan
        base = rank - rank % p.stage_stride
        slot = (rank % p.stage_stride) // p.tp % p.ep
        return self._id([base + d * p.tp + t for d in range(slot, p.dp, p.ep) for t in range(p.tp)])


@dataclass
class Synthesis:
    model: ModelSpec
    plan: Plan
    graphs: list[list[EtNode]]  # per rank
    groups: dict[str, list[int]]  # comm-group id -> ranks
    placement: list[int]  # rank -> network host (random server placement)

    @property
    def nodes(self) -> list[EtNode]:
        """Rank 0's graph."""
        return self.graphs[0]

    def comm_groups(self) -> dict[str, list[int]]:
        return self.groups

    def collectives(self, rank: int = 0) -> list[EtNode]:
        return [n for n in self.graphs[rank] if n.type == "COMM_COLL_NODE"]

    def bytes_sent_per_rank(self, rank: int = 0) -> dict[str, float]:
        """Bytes `rank` sends per iteration inside its server (scale-up) and across servers
        (scale-out). A ring all-gather or reduce-scatter of P bytes over n ranks sends
        (n-1)/n * P; an all-reduce twice that; a group of g ranks per server on s servers
        runs hierarchically: (g-1)/g * P inside, then (s-1)/s * P/g across. An all-to-all
        sends each peer its split."""
        g_srv = self.plan.gpus_per_server
        up = out = 0.0
        for n in self.graphs[rank]:
            if n.type == "COMM_SEND_NODE":
                if n.attrs["comm_dst"] // g_srv == rank // g_srv:
                    up += n.attrs["comm_size"]
                else:
                    out += n.attrs["comm_size"]
        for n in self.collectives(rank):
            members = self.groups[n.attrs["pg_name"]]
            size = float(buffer_bytes(n, len(members)))
            if n.attrs["comm_type"] == COMM_TYPES["ALL_TO_ALL"]:
                for peer, b in zip(members, n.attrs["comm_split_sizes"]):
                    if peer != rank:
                        if peer // g_srv == rank // g_srv:
                            up += b
                        else:
                            out += b
                continue
            factor = 2 if n.attrs["comm_type"] == COMM_TYPES["ALL_REDUCE"] else 1
            local = sum(1 for m in members if m // g_srv == rank // g_srv)
            servers = len(members) // local
            up += factor * (local - 1) / local * size
            out += factor * (servers - 1) / servers * size / local
        return {"scale_up": up, "scale_out": out, "total": up + out}

    def queue_pairs(self, rank: int = 0) -> dict[str, int]:
        """Connections `rank` opens per iteration (distinct peers it sends to), inside its server
        and across servers. Rings (all-gather, reduce-scatter, all-reduce) are hierarchical: the
        next member in the server, then the member at the same place in the next server of the
        group; all-to-all is direct (every other member); send goes to its destination."""
        g_srv = self.plan.gpus_per_server
        peers: set[int] = set()
        for n in self.graphs[rank]:
            if n.type == "COMM_SEND_NODE":
                peers.add(n.attrs["comm_dst"])
            elif n.type == "COMM_COLL_NODE":
                members = self.groups[n.attrs["pg_name"]]
                if n.attrs["comm_type"] == COMM_TYPES["ALL_TO_ALL"]:
                    peers.update(m for m in members if m != rank)
                    continue
                servers: dict[int, list[int]] = {}
                for m in members:
                    servers.setdefault(m // g_srv, []).append(m)
                order = list(servers)
                local = servers[rank // g_srv]
                pos = local.index(rank)
                if len(local) > 1:
                    peers.add(local[(pos + 1) % len(local)])
                if len(order) > 1:
                    peers.add(servers[order[(order.index(rank // g_srv) + 1) % len(order)]][pos])
        up = sum(1 for p in peers if p // g_srv == rank // g_srv)
        return {"scale_up": up, "scale_out": len(peers) - up}

    def summary(self, payload_bytes: int = 4096) -> dict[str, Any]:
        """What one iteration of rank 0 holds. `collectives_by_size` gives each collective's whole
        buffer (`bytes`: an all-gather's gathered output) beside its ET `comm_size`."""
        colls = Counter((comm_type_name(n.attrs["comm_type"]), buffer_bytes(n, len(self.groups[n.attrs["pg_name"]])),
                         n.attrs["comm_size"]) for n in self.collectives())
        by_type = Counter(comm_type_name(n.attrs["comm_type"]) for n in self.collectives())
        out: dict[str, Any] = {
            "model": self.model.name, "params": self.model.total_params(), "plan": asdict(self.plan),
            "nodes_per_rank": len(self.nodes), "collectives_per_iteration": dict(by_type),
            "collectives_by_size": [{"type": t, "bytes": b, "comm_size": s, "count": c}
                                    for (t, b, s), c in sorted(colls.items())],
            "bytes_sent_per_rank": self.bytes_sent_per_rank(),
            "queue_pairs_per_rank": self.queue_pairs(),
            "comm_groups": len(self.groups),
        }
        p = self.plan
        if 1 < p.gpus_per_server < p.world and p.tp == 1 and p.ep == 1 and p.pp == 1:
            # Each ring step of the inter-server ring moves 1/world of a unit's bytes between
            # neighbours; in backward a gradient reduce-scatter and a parameter all-gather
            # share each ring link, so a ring flow per layer carries twice that.
            layer = max(u.params for u in units(self.model, p) if u.is_block) * BYTES_PER_PARAM[p.precision]
            step = layer / p.world
            out["inter_server_ring"] = {
                "rings": p.gpus_per_server, "members": p.servers,
                "step_bytes_per_collective": step, "backward_flow_bytes": 2 * step,
                "backward_flow_packets": -(-2 * step // payload_bytes),
                "queue_pairs_per_gpu": 1,
            }
        return out


def buffer_bytes(node: EtNode, group_size: int) -> int:
    """A collective's whole buffer: its comm_size, times the group size for an all-gather
    (whose comm_size is each rank's shard)."""
    size = node.attrs["comm_size"]
    return size * group_size if node.attrs["comm_type"] == COMM_TYPES["ALL_GATHER"] else size


def _splits(total: int, n: int, imbalance: float, rng: random.Random) -> list[int]:
    """Bytes to each of n peers: equal shares, or shares varying by up to +-imbalance."""
    weights = [1.0 + imbalance * rng.uniform(-1, 1) for _ in range(n)]
    raw = [int(total * w / sum(weights)) for w in weights]
    raw[0] += total - sum(raw)
    return raw


def read_routing(path: str | Path) -> list[list[int]]:
    """An EP routing matrix from JSON: a list of rows, or {"routing": [...]}."""
    path = Path(path)
    data = load_json(path, "routing")
    if isinstance(data, dict) and (extra := sorted(set(data) - {"routing"})):  # a misplaced key, not one to skip
        raise ConfigError(f"{path}: unknown key {extra[0]!r}; expected only \"routing\"", extra[0])
    rows = data.get("routing") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise ConfigError(f"{path}: expected a list of rows of token counts (or {{\"routing\": [...]}})", "routing")
    return rows


def dispatch_matrix(plan: Plan, model: ModelSpec, group: str, layer: int) -> list[list[int]]:
    """Bytes member i of an EP group dispatches to member j in one MoE layer: the given routing
    (tokens x hidden x activation bytes), or equal shares, or shares skewed by `imbalance` (seeded
    by plan seed, group and layer, so every rank of the group draws the same matrix)."""
    row = model.hidden * plan.act_bytes
    if plan.routing is not None:
        return [[t * row for t in r] for r in plan.routing]
    total = plan.seq * plan.micro_batch // plan.tp * model.top_k * row
    rng = random.Random(f"{plan.seed}/{group}/{layer}")
    return [_splits(total, plan.ep, plan.imbalance, rng) for _ in range(plan.ep)]


def synthesize(model: ModelSpec, plan: Plan, share_graphs: bool = True) -> Synthesis:
    """Every rank's graph. `share_graphs=False` builds each rank's on its own (slow; the same
    result, which a test checks)."""
    plan.check_model(model)
    nbytes = BYTES_PER_PARAM[plan.precision]
    us = units(model, plan)
    heaviest = max(us, key=lambda u: u.forward_flops)
    if 2 * heaviest.forward_flops >= 2**63:  # a backward's num_ops, an int64 in the trace
        raise ConfigError(f"seq x micro_batch = {plan.seq} x {plan.micro_batch} tokens give {heaviest.name} of "
                          f"`{model.name}` {2 * heaviest.forward_flops:.3g} FLOPs in backward, past the traces' int64 "
                          "num_ops; expected fewer tokens per micro-batch", "seq")
    fwd_time = [roofline_micros(u.forward_flops, u.forward_bytes, plan) for u in us]
    groups = Groups(plan)
    tokens = plan.seq * plan.micro_batch
    act = tokens * model.hidden * plan.act_bytes  # one activation tensor of the block
    # Autograd sends a unit's input gradient only if something before it has parameters.
    input_grad = [any(v.params + v.expert_params for v in us[:k]) for k in range(len(us))]
    matrices: dict[tuple[str, int], list[list[int]]] = {}

    def rank_graph(rank: int) -> list[EtNode]:
        nodes: list[EtNode] = []
        dp, tp, ep, edp = groups.dp(rank), groups.tp(rank), groups.ep(rank), groups.edp(rank)
        tp_size, ep_size = plan.tp, plan.ep
        fsdp = plan.parallel == "fsdp"

        def add(name: str, kind: str, data=(), ctrl=(), dur: int = 0, **attrs: Any) -> int:
            nodes.append(EtNode(len(nodes), name, kind, [d for d in data if d is not None], [c for c in ctrl if c is not None], dur, attrs))
            return len(nodes) - 1

        def coll(name: str, ctype: str, size: int, group: str | None, data=(), ctrl=(), **extra: Any) -> int | None:
            """A collective over `group` whose whole buffer is `size` bytes."""
            # An all-to-all-v is issued by every member even when this one sends nothing.
            if group is None or (size == 0 and ctype != "ALL_TO_ALL"):
                return None
            if ctype == "ALL_GATHER":  # each rank contributes its (padded) shard
                size = -(-size // len(groups.ranks[group]))
            return add(name, "COMM_COLL_NODE", data, ctrl, comm_type=COMM_TYPES[ctype], comm_size=size, pg_name=group,
                       involved_dim=[True, True], is_cpu_op=False, **extra)

        def a2a(name: str, layer: int, transposed: bool, data, ctrl) -> int | None:
            """Dispatch (what this rank routes to each peer) or, transposed, combine (what each
            peer routed here goes back)."""
            if (ep, layer) not in matrices:
                matrices[ep, layer] = dispatch_matrix(plan, model, ep, layer)
            m, i = matrices[ep, layer], groups.ranks[ep].index(rank)
            send, recv = ([row[i] for row in m], m[i]) if transposed else (m[i], [row[i] for row in m])
            return coll(name, "ALL_TO_ALL", sum(send), ep, data, ctrl, comm_split_sizes=send, comm_recv_split_sizes=recv)

        def compute(u: Unit, k: int, t: int, tag: str, data, ctrl, scale: int) -> int:
            """Unit k's compute in one pass; with TP or EP, split where the block communicates
            (the module docstring gives the order)."""
            base = dict(is_cpu_op=False, tensor_size=(u.params + u.expert_params) * nbytes)
            moe_ep = u.moe and ep_size > 1
            if not u.is_block or (tp_size == 1 and not moe_ep):
                return add(f"{u.name}.{tag}", "COMP_NODE", data, ctrl, scale * t, num_ops=int(scale * u.forward_flops), **base)
            half, ops = max(1, scale * t // 2), int(scale * u.forward_flops / 2)
            prev: list[int | None] = [None]

            def step(node: int | None) -> None:
                if node is not None:
                    prev[0] = node

            def comp(part: str) -> None:
                first = prev[0] is None
                step(add(f"{u.name}.{tag}.{part}", "COMP_NODE", data if first else [prev[0]], ctrl if first else [], half,
                         num_ops=ops, **base))

            def tp_coll(part: str, ctype: str) -> None:
                step(coll(f"{u.name}.{tag}.{part}", ctype, act, tp, data=[prev[0]]))

            def ep_coll(part: str, transposed: bool) -> None:
                first = prev[0] is None  # the pass starts with it: it waits for the unit's inputs
                step(a2a(f"{u.name}.{tag}.{part}", k, transposed, data if first else [prev[0]], ctrl if first else []))

            if tag.startswith("fwd"):
                comp("attention")
                tp_coll("attention.all_reduce", "ALL_REDUCE")
                if moe_ep:
                    experts_per_rank = model.experts // ep_size
                    step(coll(f"{u.name}.{tag}.token_counts", "ALL_TO_ALL", model.experts * 8, ep, data=[prev[0]],
                              comm_split_sizes=[experts_per_rank * 8] * ep_size,
                              comm_recv_split_sizes=[experts_per_rank * 8] * ep_size))
                    ep_coll("dispatch", False)
                    comp("experts")
                    ep_coll("combine", True)
                    if tp is not None:
                        tp_coll("experts.all_gather", "ALL_GATHER")
                else:
                    comp("mlp")
                    tp_coll("mlp.all_reduce", "ALL_REDUCE")
                return prev[0]
            # Backward: the MLP/experts first; input gradients only where something upstream needs them.
            if moe_ep:
                ep_coll("combine", False)  # the combine's gradient goes where the dispatch sent tokens
                comp("experts")
                if input_grad[k] or model.attention_params():
                    ep_coll("dispatch", True)
                    if tp is not None:
                        tp_coll("experts.all_gather", "ALL_GATHER")
            else:
                comp("mlp")
                tp_coll("mlp.all_reduce", "ALL_REDUCE")
            comp("attention")
            if input_grad[k]:
                tp_coll("attention.all_reduce", "ALL_REDUCE")
            return prev[0]

        if plan.pp > 1:
            return pipeline(rank, nodes, add, coll, compute, dp, edp, fsdp)
        # With a root unit, embedding and head share one all-gather (issued first) and one
        # reduce-scatter (issued last); their parameters stay gathered from forward to backward.
        in_root = [plan.root_unit and not u.is_block for u in us]
        root_bytes = sum(u.params for u, r in zip(us, in_root) if r) * nbytes
        root_ag = coll("root.fwd.all_gather", "ALL_GATHER", root_bytes, dp) if fsdp and plan.root_unit else None
        prev, prev_ag = None, root_ag
        for k, (u, t, r) in enumerate(zip(us, fwd_time, in_root)):
            if r:
                ags = [root_ag]
            else:
                ags = [coll(f"{u.name}.fwd.all_gather", "ALL_GATHER", u.params * nbytes, dp, ctrl=[prev_ag]),
                       coll(f"{u.name}.fwd.experts.all_gather", "ALL_GATHER", u.expert_params * nbytes, edp, ctrl=[prev_ag])] if fsdp else []
            prev = compute(u, k, t, "fwd", [a for a in ags if a is not None], [prev], 1)
            prev_ag = next((a for a in reversed(ags) if a is not None), prev_ag)
        kind, verb = ("REDUCE_SCATTER", "reduce_scatter") if fsdp else ("ALL_REDUCE", "all_reduce")
        gathered: dict[int, list[int]] = {}

        def gather(k: int, after: int | None) -> list[int]:
            """Backward all-gathers of unit k, issued once (the unit before prefetches the next)."""
            if not fsdp or in_root[k]:
                return [root_ag] if in_root[k] and root_ag is not None else []
            if k not in gathered:
                u = us[k]
                gathered[k] = [a for a in (
                    coll(f"{u.name}.bwd.all_gather", "ALL_GATHER", u.params * nbytes, dp, ctrl=[after]),
                    coll(f"{u.name}.bwd.experts.all_gather", "ALL_GATHER", u.expert_params * nbytes, edp, ctrl=[after]))
                    if a is not None]
            return gathered[k]

        backward = list(reversed(range(len(us))))
        for pos, k in enumerate(backward):
            u, t = us[k], fwd_time[k]
            ags = gather(k, prev)
            if pos + 1 < len(backward):  # backward prefetch: the next unit's gather goes out before this one's reduce
                gather(backward[pos + 1], ags[-1] if ags else prev)
            done = compute(u, k, t, "bwd", ags, [prev], 2)
            if not in_root[k]:
                coll(f"{u.name}.bwd.{verb}", kind, u.params * nbytes, dp, data=[done])
                coll(f"{u.name}.bwd.experts.{verb}", kind, u.expert_params * nbytes, edp, data=[done])
            prev = done
        coll(f"root.bwd.{verb}", kind, root_bytes, dp, data=[prev])
        return nodes

    def pipeline(rank, nodes, add, coll, compute, dp, edp, fsdp) -> list[EtNode]:
        """1F1B on stage s of pp with m microbatches: pp - s - 1 warm-up forwards, then one
        forward and one backward in turn, then the remaining backwards. Activations go to the
        next stage and gradients back with send/recv pairs (tag = microbatch, + m for
        gradients). FSDP gathers each unit once before the first forward and reduce-scatters
        once after the last backward (parameters stay gathered across microbatches)."""
        pp, m, stride = plan.pp, plan.microbatches, plan.stage_stride
        stage = rank // stride
        per = model.layers // pp
        mine = [(i, u, t) for i, (u, t) in enumerate(zip(us, fwd_time))
                if (i == 0 and stage == 0) or (i == len(us) - 1 and stage == pp - 1) or (0 < i < len(us) - 1 and (i - 1) // per == stage)]
        ags: list[int] = []
        prev = None
        if fsdp:
            for _, u, _ in mine:
                for size, group, tag in ((u.params, dp, ""), (u.expert_params, edp, ".experts")):
                    a = coll(f"{u.name}{tag}.all_gather", "ALL_GATHER", size * nbytes, group, ctrl=[prev])
                    if a is not None:
                        ags.append(a)
                        prev = a
            prev = None
        warmup = min(pp - stage - 1, m)
        order = [("F", j) for j in range(warmup)]
        for j in range(m - warmup):
            order += [("F", warmup + j), ("B", j)]
        order += [("B", j) for j in range(m - warmup, m)]
        for op, j in order:
            fwd = op == "F"
            src = rank - stride if fwd else rank + stride
            has_src = stage > 0 if fwd else stage < pp - 1
            tag = j if fwd else m + j
            x = prev
            if has_src:
                x = add(f"{'act' if fwd else 'grad'}.mb{j}.recv", "COMM_RECV_NODE", [], [prev], comm_src=src, comm_size=act,
                        comm_tag=tag, is_cpu_op=False)
            for k, u, t in (mine if fwd else reversed(mine)):
                x = compute(u, k, t, f"{'fwd' if fwd else 'bwd'}.mb{j}", [x, *ags], [], 1 if fwd else 2)
            dst = rank + stride if fwd else rank - stride
            if (stage < pp - 1) if fwd else (stage > 0):
                add(f"{'act' if fwd else 'grad'}.mb{j}.send", "COMM_SEND_NODE", [x], [], comm_dst=dst, comm_size=act,
                    comm_tag=tag, is_cpu_op=False)
            prev = x
        kind, verb = ("REDUCE_SCATTER", "reduce_scatter") if fsdp else ("ALL_REDUCE", "all_reduce")
        for _, u, _ in reversed(mine):
            coll(f"{u.name}.{verb}", kind, u.params * nbytes, dp, data=[prev])
            coll(f"{u.name}.experts.{verb}", kind, u.expert_params * nbytes, edp, data=[prev])
        return nodes

    # A rank's graph depends on its groups only through their ids, and on its place in its EP
    # group (its row of the dispatch matrix; with skewed routing, on the group's own matrix).
    # Build one graph per such class and give the other ranks a copy with their group ids:
    # compute nodes stay shared, and communication nodes are shared by the ranks of a group.
    built: dict[tuple, tuple[tuple, list[EtNode]]] = {}
    regrouped: dict[tuple[int, str], EtNode] = {}
    graphs = []
    shared = plan.pp == 1 and share_graphs  # with pp, send/recv peers differ per rank

    def graph_class(r: int, numbering: Groups) -> tuple:
        return (r % plan.stage_stride // plan.tp % plan.ep, numbering.ep(r) if plan.imbalance else None)

    # Rank 0's graph first, as the loop below would build it (groups are numbered as first used).
    first = (groups.dp(0), groups.tp(0), groups.ep(0), groups.edp(0)), rank_graph(0)
    counting = Groups(plan)  # numbers groups of its own, so the traces' numbering stays as it was
    distinct = len({graph_class(r, counting) for r in range(plan.world)}) if shared else plan.world
    _check_memory(model, plan, first, distinct, shared)
    for r in range(plan.world):
        mine = (groups.dp(r), groups.tp(r), groups.ep(r), groups.edp(r))
        if not shared:
            graphs.append(first[1] if r == 0 else rank_graph(r))
            continue
        if (cls := graph_class(r, groups)) not in built:
            built[cls] = first if r == 0 else (mine, rank_graph(r))
        template_groups, template = built[cls]
        if template_groups == mine:
            graphs.append(template)
        else:
            ids = dict(zip(template_groups, mine))
            graphs.append([_regroup(n, ids, regrouped) for n in template])
    servers = list(range(plan.servers))
    random.Random(plan.seed).shuffle(servers)
    g = plan.gpus_per_server
    placement = [servers[r // g] * g + r % g for r in range(plan.world)]
    return Synthesis(model, plan, graphs, groups.ranks, placement)


# Measured: ~1 KB per node held (an EtNode, its lists and attributes); 8 B per reference from a rank's graph.
NODE_BYTES, REF_BYTES = 1100, 8


# Share of the free memory a synthesis, or a capture's ranks, may take.
MEMORY_SHARE = 0.8


def available_memory() -> int:
    """Bytes of memory this machine has free."""
    import psutil

    return int(psutil.virtual_memory().available)


def memory_budget() -> int:
    """Bytes a synthesis may hold: most of the memory this machine has free."""
    return int(available_memory() * MEMORY_SHARE)


def memory_estimate(plan: Plan, first: tuple[tuple, list[EtNode]], distinct: int, shared: bool) -> int:
    """Bytes the traces will hold: `distinct` graphs of about rank 0's size (`first`: its
    dp, tp, ep, edp group ids and graph), with shared graphs a renamed copy of each
    communication node per group of its kind among the ranks of its class, and a reference
    per node per rank."""
    (dp, tp, ep, edp), graph = first
    groups_of = {dp: plan.tp * plan.pp, tp: plan.world // plan.tp, ep: plan.world // plan.ep, edp: plan.pp * plan.ep}
    per_class = -(-plan.world // distinct)
    copies = distinct * sum(min(groups_of.get(n.attrs.get("pg_name"), 1), per_class)
                            for n in graph if shared and n.type == "COMM_COLL_NODE")
    return NODE_BYTES * (distinct * len(graph) + copies) + REF_BYTES * plan.world * len(graph)


def _check_memory(model: ModelSpec, plan: Plan, first: tuple[tuple, list[EtNode]], distinct: int, shared: bool) -> None:
    """Refuse a plan whose traces would not fit in memory before building them (a skewed
    DeepSeek-V3 on 8192 ranks, or 4096 pipeline micro-batches, ran for minutes into a MemoryError)."""
    need, budget = memory_estimate(plan, first, distinct, shared), memory_budget()
    if need > budget:
        raise ConfigError(f"`{model.name}` on {plan.world} ranks: {distinct} distinct rank graphs of ~{len(first[1])} nodes "
                          f"need ~{need / 2**30:.1f} GiB, past the {budget / 2**30:.1f} GiB free for synthesis; "
                          "expected fewer ranks or micro-batches (or, with imbalance, fewer expert-parallel groups)", "world")


def _regroup(n: EtNode, ids: dict[str | None, str | None], memo: dict[tuple[int, str], EtNode]) -> EtNode:
    """`n` with its process group renamed by `ids` (one copy per node and new group)."""
    old = n.attrs.get("pg_name")
    if old is None or ids[old] == old:
        return n
    key = (id(n), ids[old])
    if key not in memo:
        memo[key] = replace(n, attrs={**n.attrs, "pg_name": ids[old]})
    return memo[key]


def write(s: Synthesis, out_dir: str | Path, prefix: str | None = None) -> dict[str, Any]:
    """`<prefix>.<rank>.et` for every rank, `comm_groups.json`, `placement.json`, `summary.json`."""
    prefix = prefix or s.model.name
    if not prefix or prefix in (".", "..") or any(sep in prefix for sep in "/\\"):
        raise ConfigError(f"ET prefix {prefix!r}: expected a plain file name (no folders)", "prefix")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"model": s.model.name, "parallel": s.plan.parallel, "world": s.plan.world}
    encoded: dict[int, bytes] = {}  # ranks sharing a graph share its bytes, and graphs their shared nodes'
    nodes: dict[int, bytes] = {}
    for rank, graph in enumerate(s.graphs):
        if id(graph) not in encoded:
            encoded[id(graph)] = encode_trace(graph, meta, nodes)
        (out / f"{prefix}.{rank}.et").write_bytes(encoded[id(graph)])
    remove_ranks_past(out, prefix, len(s.graphs))
    (out / "comm_groups.json").write_text(json.dumps(s.comm_groups()))
    (out / "placement.json").write_text(json.dumps({"rank_to_host": s.placement}))
    summary = s.summary()
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
