"""OFAN §8.4 / Fig. 14: how far above its bound each FSDP all-gather and reduce-scatter of
an iteration ends, per load balancer, all three under MSwift with SACK loss recovery.

`cct_increase(trace, network, lb)` runs the trace on the packet backend (`reuse="fast"`) and
returns, per collective over all ranks of kind all-gather or reduce-scatter (with `servers`:
scale-up phase plus the inter-server rings, GPU i to GPU i + gpus), its CCT, its bound and
`increase = cct / bound - 1`.

**The bound** is the fluid ideal of the same collective alone on an idle fabric: the flow
model (`analytical:flow`) running that collective as a microbenchmark with the trace's
placement, network and system. Every flow is spread evenly over all shortest paths (no
collision, no queue); it pays the packet engine's headers, gaps and ACKs, the round trip of a
flow's last ACK (a ring step starts when the previous one completed) and the scale-up phase
exactly, so an ideal load balancer meets it. It charges each switch one full frame of
store-and-forward, where a packet run's short last frame takes less: on an idle fabric OFAN
ends up to 0.11 % below it (1.7 MB steps, every ring step across pods) and 3 % below it when a
step is a single short frame (GPT-2's 12-B shards). tests/test_fig14.py checks it against a
closed form.

**Overlap.** The system layer runs one chunk per network dimension at a time, so a
collective that meets another in flight may wait for the dimension: its CCT is then not its
own fabric time. Such collectives are flagged `overlapped` and left out of `summary`. In
FSDP with long compute per layer (Llama-3) only the few around the embedding's and head's
reduce-scatters meet others; with GPT-2 small, all of the backward pass does. `summary` also
leaves out collectives whose ring steps are shorter than one frame (GPT-2's 12-B norm shards).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..astra_configs import load_scheme_preset
from ..collectives.iteration import IterationResults, simulate
from ..collectives.placement import PLACEMENT_FILE, workload_folder
from ..collectives.workload import Workload, read_workload
from ..traces.chakra_io import COLLECTIVES, comm_kind
from ..traces.microbenchmark import write_microbenchmark

#: The paper's HOST PKT AR (REPS), SWITCH PKT AR and OFAN, as their LB presets name them.
LBS = ("reps", "switch_ar", "ofan")
#: Whose CC and loss recovery (and their parameters) every LB runs under: MSwift + SACK.
CC_PRESET = "mswift_sack"
KINDS = ("all_gather", "reduce_scatter")

#: Hierarchical rings as ASTRA-sim runs them on [gpus, servers]; one chunk; no local
#: reduction cost (the paper's CCT is the network's).
SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO", "endpoint-delay": 0, "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 1, "collective-optimization": "localBWAware", "local-mem-bw": 0,
    **{f"{k}-implementation": ["ring", "ring"] for k in ("all-reduce", "all-gather", "reduce-scatter")},
    "all-to-all-implementation": ["direct", "direct"]}


def network(k: int, *, gpus: int = 8, rate_gbps: float = 800, latency_ns: float = 500, **extra: Any) -> dict[str, Any]:
    """A k-ary fat tree of servers with `gpus` GPUs each (one NIC per GPU), as in §8.4."""
    return {"topology": {"kind": "fat_tree", "k": k}, "link": {"rate_gbps": rate_gbps, "latency_ns": latency_ns},
            "servers": {"gpus": gpus}, **extra}


def scheme_options(lb: str) -> dict[str, Any]:
    """`simulate`'s scheme options for `lb` under MSwift + SACK: the LB's own preset (its
    parameters and switch settings, e.g. REPS's ECN threshold), with the CC, loss recovery
    and their parameters of `mswift_sack`. For `ofan` this is `mswift_sack` itself."""
    p = load_scheme_preset(CC_PRESET)
    return {"scheme": lb, "cc": p["cc"], "cc_params": p["cc_params"], "loss": p["loss"], "loss_params": p["loss_params"]}


def _placement(trace: str | Path, placement: Any) -> Any:
    """What the trace's run used, passed on explicitly (a microbenchmark has no placement.json)."""
    if placement is not None:
        return placement
    found = workload_folder(trace) / PLACEMENT_FILE
    return str(found) if found.is_file() else "packed"


def _everyone(w: Workload) -> set[str]:
    # FSDP's group holds every rank: a world collective too (as studies.run_point counts it).
    return {"world"} | {g for g, members in w.groups.items() if len(set(members)) == w.ranks}


def collective_keys(w: Workload) -> list[tuple[str, int]]:
    """(kind, bytes) of the all-gathers and reduce-scatters over all ranks, from rank 0's
    trace (every rank issues them), in order of first use: what `bounds` needs, without a run."""
    groups, out = _everyone(w), []
    for n in w.traces[0].nodes:
        kind = COLLECTIVES.get(comm_kind(n.attrs.get("comm_type")) or "") if n.type == "COMM_COLL_NODE" else None
        if kind in KINDS and str(n.attrs.get("pg_name") or "world") in groups:
            out.append((kind, int(n.attrs["comm_size"])))
    return list(dict.fromkeys(out))


def bounds(keys: list[tuple[str, int]], ranks: int, network: dict[str, Any], *, system: dict[str, Any] = SYSTEM,
           placement: Any = "packed") -> dict[tuple[str, int], float]:
    """The fluid ideal (ns) of each (kind, bytes) collective over `ranks` ranks, alone."""
    out: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as d:
        for kind, size in dict.fromkeys(keys):
            w = write_microbenchmark(d, ranks, kind, int(size), prefix=f"{kind}-{size}")
            r = simulate(w, system, network, backend="analytical:flow", placement=placement)
            out[kind, size] = float(r.collectives["cct_ns"].iloc[0])
    return out


def _overlapped(colls: pd.DataFrame) -> np.ndarray:
    s, e = colls["start_ns"].to_numpy(), colls["end_ns"].to_numpy()
    return np.array([int(((s < e[i]) & (e > s[i])).sum()) > 1 for i in range(len(colls))], dtype=bool)


def cct_increase(trace: str | Path | Workload, network: dict[str, Any], lb: str, *, system: dict[str, Any] = SYSTEM,
                 placement: Any = None, reuse: str = "fast",
                 bound_cache: dict[tuple[str, int], float] | None = None) -> tuple[pd.DataFrame, IterationResults]:
    """One packet run of `trace` (an ET prefix or folder, or a read Workload) with `lb`
    under MSwift + SACK. Returns (table, the run's results); the table has, per all-gather
    and reduce-scatter over all ranks: kind, bytes,
    step_bytes (what each GPU sends per inter-server ring step), start_ns, cct_ns, bound_ns,
    increase and overlapped. `bound_cache` keeps the bounds between schemes of one trace."""
    w = trace if isinstance(trace, Workload) else read_workload(trace)
    where = _placement(w.source, placement)
    r = simulate(w, system, network, backend="packet", reuse=reuse, placement=placement, **scheme_options(lb))
    ranks = w.ranks
    c = r.collectives
    over = _overlapped(c)
    keep = (c["group_name"].isin(_everyone(w)) & c["kind"].isin(KINDS)).to_numpy()
    c, over = c[keep], over[keep]
    keys = [(k, int(b)) for k, b in zip(c["kind"], c["bytes"])]
    cache = {} if bound_cache is None else bound_cache
    missing = [key for key in keys if key not in cache]
    if missing:
        cache.update(bounds(missing, ranks, network, system=system, placement=where))
    # An all-gather's bytes are the rank's shard, a reduce-scatter's the whole buffer.
    step = [b if k == "all_gather" else b / ranks for k, b in keys]
    table = pd.DataFrame({"kind": c["kind"].to_numpy(), "bytes": c["bytes"].to_numpy(), "step_bytes": step,
                          "start_ns": c["start_ns"].to_numpy(), "cct_ns": c["cct_ns"].to_numpy(),
                          "bound_ns": [cache[key] for key in keys], "overlapped": over})
    table.insert(6, "increase", table["cct_ns"] / table["bound_ns"] - 1)
    return table, r


def summary(table: pd.DataFrame, min_step_bytes: float = 4096) -> dict[str, float]:
    """Mean and max increase over the collectives that met no other and whose ring steps
    fill a frame's payload (`n` of them). Shorter steps are latency only, no load to balance,
    and the bound charges their one short frame a full frame's store-and-forward."""
    own = table[~table["overlapped"] & (table["step_bytes"] >= min_step_bytes)]
    if own.empty:
        return {"n": 0, "mean": math.nan, "max": math.nan}
    return {"n": len(own), "mean": float(own["increase"].mean()), "max": float(own["increase"].max())}
