"""Run one resolved point and return its rows: one `runs` row, and `ranks`, `collectives`,
`counters` (iteration points) or `flows` and `stages` (traffic points) tables.

This module is what a worker process or a Ray task imports; it reads the point's traces
from the study's trace cache (synthesizing them there first if this machine has none)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..collectives.iteration import simulate as simulate_iteration
from ..collectives.workload import read_workload
from ..errors import TracefabricError
from ..network_backends.packet import build_config, run_config
from ..traces.models import ModelSpec
from ..traces.synthesis import Plan, synthesize, write

TRACE_PREFIX = "trace"
RUN_COLUMNS = ("iteration_us", "compute_us", "comm_us", "exposed_comm_us", "collectives", "flows", "params", "cct_us", "lower_bound_us", "cct_increase", "drops", "max_queue_bytes", "events")


def ensure_workload(workload: dict[str, Any], key: str, cache: str | Path) -> tuple[Path, float]:
    """The ET prefix of a workload in the cache, synthesized once: written into a private
    temporary folder and renamed into place, so a reader never sees half a trace and two
    writers racing leave one copy. Returns (prefix, seconds spent synthesizing; 0 if cached)."""
    if "trace" in workload:  # a captured trace: read where it is
        return Path(workload["trace"]), 0.0
    final = Path(cache) / key
    if (final / "summary.json").exists():
        return final / TRACE_PREFIX, 0.0
    t0 = time.perf_counter()
    model = ModelSpec(**workload["model"])
    plan_fields = dict(workload["plan"])
    if plan_fields.get("routing") is not None:
        plan_fields["routing"] = tuple(tuple(r) for r in plan_fields["routing"])
    tmp = Path(cache) / f".tmp-{key}-{os.getpid()}-{time.monotonic_ns()}"
    write(synthesize(model, Plan(**plan_fields)), tmp, prefix=TRACE_PREFIX)
    try:
        os.rename(tmp, final)
    except OSError:  # another process renamed its copy first: same bytes, keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return final / TRACE_PREFIX, time.perf_counter() - t0


_READ: dict[str, Any] = {}


def _read_cached(prefix: str) -> Any:
    """A worker reads each workload's ETs once and reuses them for its later points (the
    system layer only reads the Workload); at most 4 kept, oldest dropped first."""
    if prefix not in _READ:
        if len(_READ) >= 4:
            _READ.pop(next(iter(_READ)))
        _READ[prefix] = read_workload(prefix)
    return _READ[prefix]


# Bytes each member's NIC must send for a collective of `comm_size` bytes on n ranks, any
# algorithm (comm_size as ASTRA-sim reads it: an all-gather's is the rank's shard).
NIC_BYTES = {
    "all_reduce": lambda s, n: 2 * (n - 1) / n * s,
    "reduce_scatter": lambda s, n: (n - 1) / n * s,
    "all_gather": lambda s, n: (n - 1) * s,
    "all_to_all": lambda s, n: (n - 1) / n * s,
    "all_to_allv": lambda s, n: (n - 1) / n * s,
    "broadcast": lambda s, n: float(s),
}


def nic_rate_bytes_per_ns(network: dict[str, Any]) -> float | None:
    """A host NIC's rate: the packet fabric's link rate, or ASTRA-sim's first dimension (GB/s)."""
    if isinstance(network.get("topology"), dict):
        return float(network.get("link", {}).get("rate_gbps", 800)) / 8
    bw = network.get("bandwidth")
    return float(bw[0]) if bw else None


def collective_bounds(colls: pd.DataFrame, groups: dict[str, list[int]], world: int, rate: float | None,
                      gpus: int = 1) -> pd.Series:
    """Each collective's NIC serialization bound (ns): the bytes its members' NICs must send /
    NIC rate. With servers of `gpus` GPUs a world collective is hierarchical, and only its
    cross-server part uses NICs: n = servers, and AR/RS cross with 1/gpus of the buffer (the
    scale-up phase reduced it), AG with the rank's shard. Other groups then mix NVLink and NIC
    flows by placement: no NIC bound (NaN). A group of every rank (FSDP's) is a world
    collective too."""
    out = []
    for kind, size, group in zip(colls["kind"], colls["bytes"], colls["group_name"]):
        n = world if group == "world" else len(groups.get(group, [])) or world
        f = NIC_BYTES.get(kind)
        if gpus > 1:
            if n != world or kind not in ("all_reduce", "reduce_scatter", "all_gather"):
                out.append(np.nan)
                continue
            n, size = world // gpus, size if kind == "all_gather" else size / gpus
        out.append(f(size, n) / rate if f and rate and n > 1 else np.nan)
    return pd.Series(out, index=colls.index, dtype="float64")


def _digest(*frames: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for f in frames:
        h.update(pd.util.hash_pandas_object(f, index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


def run_point(point: dict[str, Any], trace_cache: str) -> dict[str, Any]:
    """The point's tables (DataFrames) and timings. A failing run gives a `runs` row with
    status `error` and the message: it never raises for the study's other points to see."""
    t0 = time.perf_counter()
    base = _base_row(point)
    tables: dict[str, pd.DataFrame] = {}
    synth_s = 0.0
    try:
        if point["kind"] == "iteration":
            prefix, synth_s = ensure_workload(point["workload"], point["workload_key"], trace_cache)
            t_read = time.perf_counter()
            w = _read_cached(str(prefix))
            read_s = time.perf_counter() - t_read
            t_sim = time.perf_counter()
            reuse = {"reuse": point["reuse"]} if point.get("reuse") else {}
            r = simulate_iteration(w, point["system"], point["network"], backend=point["backend"],
                                   placement=point.get("placement"), **reuse, **point["scheme"])
            sim_s = time.perf_counter() - t_sim
            colls = r.collectives.copy()
            gpus = int((point["network"].get("servers") or {}).get("gpus", 1))
            colls["bound_ns"] = collective_bounds(colls, w.groups, w.ranks, nic_rate_bytes_per_ns(point["network"]), gpus)
            colls["cct_increase"] = colls["cct_ns"] / colls["bound_ns"] - 1
            row = r.summary_row()
            del row["backend"]
            base.update(row)
            base["params"] = _params(point["workload"])
            # The run's CCT increase: all collectives' CCT over all their bounds (so a 256-B
            # collective's latency does not outweigh the megabytes).
            bounded = colls["bound_ns"].notna()
            if bounded.any():
                base["cct_increase"] = float(colls.loc[bounded, "cct_ns"].sum() / colls.loc[bounded, "bound_ns"].sum() - 1)
            base["events"] = r.network_counters.get("events", np.nan)
            base["drops"] = r.network_counters.get("data_packets_dropped", np.nan)
            base["digest"] = _digest(r.ranks, r.collectives)
            tables["ranks"] = r.ranks
            tables["collectives"] = colls
            tables["counters"] = pd.DataFrame({"counter": list(r.network_counters),
                                               "value": [int(v) for v in r.network_counters.values()]})
            if len(r.stages):  # the packet backend's per-stage and per-link tables
                tables["stages"] = r.stages
                tables["links"] = r.links
        else:
            read_s = 0.0
            t_sim = time.perf_counter()
            cfg = build_config(point["network"]["topology"], point["traffic"], seed=point["seed"],
                               **{k: point["network"].get(k) for k in ("link", "switch", "packet", "limits", "failures")},
                               **point["scheme"])
            r = run_config(cfg)
            sim_s = time.perf_counter() - t_sim
            s = r.summary_row()
            base.update(cct_us=s["cct_us"], lower_bound_us=s["lower_bound_us"], cct_increase=r.cct_increase,
                        drops=s["drops"], max_queue_bytes=s["max_queue_bytes"], events=s["events"], flows=len(r.flows))
            base["digest"] = r.summary.get("digest", _digest(r.flows))
            tables["flows"] = r.flows
            tables["stages"] = r.stages
    except (TracefabricError, ValueError, RuntimeError, MemoryError, OSError) as e:  # recorded, the study goes on
        base.update(status="error", error=f"{type(e).__name__}: {e}")
        sim_s = read_s = 0.0
    base.setdefault("digest", "")
    for name, df in tables.items():
        df.insert(0, "point", point["key"])
    tables["runs"] = pd.DataFrame([base])
    return {"tables": tables, "timing": {"point": point["key"], "synth_s": synth_s, "read_s": read_s, "sim_s": sim_s,
                                         "total_s": time.perf_counter() - t0}}


def _base_row(point: dict[str, Any]) -> dict[str, Any]:
    row = {"point": point["key"], "status": "ok", "error": "", "kind": point["kind"], **point["labels"]}
    row.update({c: np.nan for c in RUN_COLUMNS})
    return row


def error_result(point: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """The rows of a point whose worker died (killed for memory, a crash): its error only."""
    row = {**_base_row(point), "status": "error", "error": f"{type(error).__name__}: {error}", "digest": ""}
    return {"tables": {"runs": pd.DataFrame([row])},
            "timing": {"point": point["key"], "synth_s": 0.0, "read_s": 0.0, "sim_s": 0.0, "total_s": 0.0}}


def _params(workload: dict[str, Any]) -> float:
    """The model's parameters (NaN for a captured trace: its model is not described)."""
    return float(ModelSpec(**workload["model"]).total_params()) if "model" in workload else np.nan
