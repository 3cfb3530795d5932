"""The runs whose results are frozen in `tests/golden/*.json`, and how to measure them.

Every simulated number a refactoring must not move: per packet-engine run the digest (all
flows' finish times, packets sent and retransmissions, and the event count), CCT, lower
bound, events, drops and ECN marks; per system-layer run every rank's times and the network
counters. `python tests/golden/regenerate.py` rewrites the files; a change to them is a
deliberate commit of its own that says why the numbers moved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent

# Every LB x loss scheme on k=4, on two traffics that load the fabric differently: an
# incast through small buffers (drops, ECN marks, timeouts) and an all-to-all (every path).
K4_TRAFFICS = {
    "incast": {"traffic": "incast:senders=12,size=96KiB", "switch": {"buffer_bytes": 60_000}},
    "all_to_all": {"traffic": "all-to-all:size=48KiB", "switch": {"buffer_bytes": 100_000}},
}
K4_LOSS = ("erasure", "sack")
# Paced flows (ideal CC below line rate) take the NIC's other send path.
K4_PACED = (("ecmp", "sack", 0.9), ("reps", "erasure", 0.5))
# OFAN Fig. 1 (128 hosts, 800 Gbps, 0.5 us links): the five contenders, both traffics.
FIG1_SCHEMES = ("ecmp", "host_spray", "switch_rr", "reps", "switch_ar")
FIG1_TRAFFICS = {"permutation": "permutation:size=1MiB", "all_to_all": "all-to-all:size=1MiB"}

SUMMARY_KEYS = ("digest", "cct_ps", "lower_bound_ps", "events", "data_packet_hops", "data_packets_dropped",
                "acks_dropped", "ecn_marks", "data_bytes_sent", "data_bytes_delivered")


def _packet_row(**kwargs: Any) -> dict[str, Any]:
    from tracefabric.network_backends.packet import simulate

    r = simulate(**kwargs)
    row = {k: r.summary[k] for k in SUMMARY_KEYS}
    row["timeouts"] = int(r.flows["timeouts"].sum())
    row["retransmissions"] = int(r.flows["retransmissions"].sum())
    return row


def packet_k4_cases() -> dict[str, Callable[[], dict[str, Any]]]:
    from tracefabric.network_backends.packet import scheme_names

    cases: dict[str, Callable[[], dict[str, Any]]] = {}
    for lb in scheme_names()["lb"]:
        for loss in K4_LOSS:
            for name, t in K4_TRAFFICS.items():
                cases[f"k4/{name}/{lb}/{loss}"] = (lambda lb=lb, loss=loss, t=t: _packet_row(
                    topology="fat-tree:k=4", traffic=t["traffic"], lb=lb, loss=loss, seed=1,
                    link={"rate_gbps": 400, "latency_ns": 500}, switch=t["switch"]))
    for lb, loss, rho in K4_PACED:
        cases[f"k4/all_to_all/{lb}/{loss}/rho={rho}"] = (lambda lb=lb, loss=loss, rho=rho: _packet_row(
            topology="fat-tree:k=4", traffic=K4_TRAFFICS["all_to_all"]["traffic"], lb=lb, loss=loss, seed=1,
            cc="ideal", cc_params={"rho": rho}, link={"rate_gbps": 400, "latency_ns": 500}))
    return cases


def packet_fig1_cases() -> dict[str, Callable[[], dict[str, Any]]]:
    return {f"fig1/{t}/{s}": (lambda s=s, traffic=traffic: _packet_row(
        topology="fat-tree:k=8", traffic=traffic, scheme=s, seed=1))
        for t, traffic in FIG1_TRAFFICS.items() for s in FIG1_SCHEMES}


def _iteration_row(workload: Any, system: Any, network: Any, backend: str, **kw: Any) -> dict[str, Any]:
    from tracefabric.collectives.iteration import simulate

    r = simulate(workload, system, network, backend=backend, **kw)
    ranks = {c: [int(round(x * 1000)) for x in r.ranks[f"{c}_ns"]] for c in ("wall", "compute", "comm", "exposed_comm")}
    return {"ranks_ps": ranks, "flows": r.flows, "collectives": len(r.collectives),
            "collective_end_ps": [int(round(x * 1000)) for x in r.collectives["end_ns"]],
            "network_counters": {k: int(v) for k, v in sorted(r.network_counters.items())}}


def system_cases(shared: Path, tmp: Path) -> dict[str, Callable[[], dict[str, Any]]]:
    """ASTRA-sim's fixture runs on the analytical modes, and a synthesized FSDP trace on the
    flow and packet backends."""
    f = shared / "fixtures" / "astra-sim"
    cases: dict[str, Callable[[], dict[str, Any]]] = {}
    for npus in (8, 64):
        for sys_name in ("sys_ring_1chunk.json", "sys_ring_4chunks.json"):
            for mode in ("astra-unaware", "astra-aware", "flow"):
                cases[f"astra/{npus}npus_1MB/{sys_name}/{mode}"] = (lambda npus=npus, s=sys_name, m=mode: _iteration_row(
                    f / "workloads" / f"{npus}npus_1MB" / "all_reduce", f / "configs" / s,
                    f / "configs" / f"switch_{npus}npus.yml", f"analytical:{m}",
                    memory=f / "configs" / "no_memory_expansion.json"))
    for mode in ("astra-unaware", "astra-aware", "flow"):
        cases[f"astra/all_to_all_64npus_1MB/{mode}"] = (lambda m=mode: _iteration_row(
            f / "workloads" / "all_to_all_64npus_1MB" / "all_to_all", f / "configs" / "sys_ring_4chunks_a2a_direct.json",
            f / "configs" / "switch_64npus.yml", f"analytical:{m}", memory=f / "configs" / "no_memory_expansion.json"))
    for folder in ("a_fsdp", "b_dp", "d_pp2", "x_two_groups8", "x_send_then_ar8", "x_mixed_seq8"):
        d = f / "multi" / folder
        for mode in ("astra-unaware", "astra-aware"):
            cases[f"multi/{folder}/{mode}"] = (lambda d=d, m=mode: _iteration_row(
                _workload(d), d / "system.json", d / "network.yml", f"analytical:{m}", memory=d / "memory.json"))

    def fsdp(backend: str, **kw: Any) -> dict[str, Any]:
        from tracefabric.traces.synthesis import Plan, synthesize, write
        from tracefabric.traces.models import ZOO

        out = tmp / "fsdp_gpt2_small_8"
        if not out.exists():
            write(synthesize(ZOO["gpt2-small"], Plan("fsdp", world=8, gpus_per_server=1, seq=1024)), out)
        system = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 4,
                  "endpoint-delay": 10, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
                  "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
        fabric = {"topology": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4}, "link": {"rate_gbps": 400, "latency_ns": 500},
                  "switch": {"buffer_bytes": 400_000}}
        return _iteration_row(_workload(out), system, fabric, backend, **kw)

    cases["fsdp/gpt2-small-8/flow"] = lambda: fsdp("analytical:flow")
    cases["fsdp/gpt2-small-8/packet/ecmp"] = lambda: fsdp("packet", scheme="ecmp")
    cases["fsdp/gpt2-small-8/packet/reps"] = lambda: fsdp("packet", scheme="reps")
    return cases


def _workload(folder: Path) -> Path:
    """The ET prefix or folder inside a fixture folder (the folder itself when it holds ETs)."""
    inner = folder / "workload"
    return inner if inner.exists() else folder


def load(name: str) -> dict[str, Any]:
    return json.loads((HERE / f"{name}.json").read_text())


def save(name: str, rows: dict[str, Any]) -> None:
    (HERE / f"{name}.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
