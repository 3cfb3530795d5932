"""Compute durations measured in a captured trace, carried onto a synthesized one.

A synthesized rank and a captured rank of the same model issue the same communication, one
node after another (the synthesis issue's check 2). Communication nodes therefore cut both
graphs, taken in node-id (issue) order, into the same intervals: interval i is the compute
issued after communication node i and before node i + 1. Each synthesized interval receives
the measured compute time of the captured one, shared among its compute nodes in proportion to
their roofline estimates, rounded so the interval's total stays exact. When a synthesized
interval has no compute node, its measured time moves to the next interval that has one (the
last interval's to the previous one), so a rank's total compute always equals the captured
rank's. Synthesized rank r takes captured rank r mod N (weak scaling: each rank keeps its batch),
so sizes may differ (a rescaled world) but the sequence of communication types must not. On the
captured world itself sizes must match too (all-to-alls aside: their sizes follow the routing),
so a capture of another model with the same sequence is refused rather than used.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import validate as v
from .chakra_io import EtNode, comm_type_name
from .synthesis import Synthesis


def _comm_label(n: EtNode) -> str:
    if n.type == "COMM_COLL_NODE":
        return comm_type_name(n.attrs["comm_type"])
    return n.type.removeprefix("COMM_").removesuffix("_NODE")


def intervals(nodes: list[EtNode]) -> tuple[list[str], list[list[EtNode]]]:
    """The communication labels in issue order, and the compute nodes of each interval
    (one more interval than communication nodes)."""
    labels: list[str] = []
    cut: list[list[EtNode]] = [[]]
    for n in sorted(nodes, key=lambda n: n.id):
        if n.type.startswith("COMM_"):
            labels.append(_comm_label(n))
            cut.append([])
        elif n.type == "COMP_NODE":
            cut[-1].append(n)
    return labels, cut


def _shares(total: int, weights: list[int]) -> list[int]:
    """Split `total` in proportion to `weights` (equally if all zero), integer parts summing to it."""
    w = weights if any(weights) else [1] * len(weights)
    exact = [total * x / sum(w) for x in w]
    out = [int(e) for e in exact]
    for i in sorted(range(len(w)), key=lambda i: out[i] - exact[i])[:total - sum(out)]:
        out[i] += 1
    return out


def measured_durations(s: Synthesis, captured: str | Path) -> tuple[Synthesis, dict[str, Any]]:
    """`s` with every compute node's duration taken from the captured trace at `captured`
    (a folder of `<prefix>.<rank>.et`), and a report: per rank, the captured and synthesized
    compute totals and the number of intervals."""
    traces, _ = v.load(captured)
    cap = [intervals(t.nodes) for t in traces]
    done: dict[tuple[int, int], list[EtNode]] = {}  # ranks sharing a graph and a captured rank share the result
    graphs, report = [], []
    for rank, graph in enumerate(s.graphs):
        c = rank % len(traces)
        key = (id(graph), c)
        if key not in done:
            done[key] = _transfer(graph, cap[c], f"synthesized rank {rank}", f"{traces[c].path}")
            if len(traces) == len(s.graphs):  # a rescaled world pads FSDP units differently
                _same_sizes(traces[c].nodes, graph, f"synthesized rank {rank}", f"{traces[c].path}")
        graphs.append(done[key])
        report.append({"rank": rank, "captured_rank": c, "intervals": len(cap[c][1]),
                       "compute_us": sum(n.duration_micros for n in done[key] if n.type == "COMP_NODE"),
                       "captured_compute_us": sum(n.duration_micros for part in cap[c][1] for n in part)})
    return replace(s, graphs=graphs), {"captured": str(captured), "ranks": report}


def _same_sizes(captured: list[EtNode], graph: list[EtNode], who: str, where: str) -> None:
    """Collective sizes in issue order, all-to-alls (routed by the data) left out."""
    def sizes(nodes: list[EtNode]) -> list[tuple[int, str, int]]:
        comm = [n for n in sorted(nodes, key=lambda n: n.id) if n.type.startswith("COMM_")]
        return [(i, _comm_label(n), n.attrs.get("comm_size", 0)) for i, n in enumerate(comm)
                if _comm_label(n) != "ALL_TO_ALL"]
    for (i, label, theirs), (_, _, ours) in zip(sizes(captured), sizes(graph)):
        if theirs != ours:
            raise ConfigError(f"{where}: communication node #{i} ({label}) has comm_size {theirs:,} B in the captured "
                              f"trace but {ours:,} B in the {who}: measured durations need the same model and "
                              "parallelism as the capture", "durations")


def _transfer(graph: list[EtNode], captured: tuple[list[str], list[list[EtNode]]], who: str, where: str) -> list[EtNode]:
    labels, parts = intervals(graph)
    cap_labels, cap_parts = captured
    if labels != cap_labels:
        i = next((i for i, (a, b) in enumerate(zip(labels, cap_labels)) if a != b), min(len(labels), len(cap_labels)))
        ours = labels[i] if i < len(labels) else "nothing"
        theirs = cap_labels[i] if i < len(cap_labels) else "nothing"
        raise ConfigError(f"{where}: communication node #{i} is {theirs} in the captured trace but {ours} in the "
                          f"{who} ({len(cap_labels)} vs {len(labels)} communication nodes): measured durations need "
                          "the same model and parallelism as the capture", "durations")
    budget = [sum(n.duration_micros for n in part) for part in cap_parts]
    with_compute = [i for i, part in enumerate(parts) if part]
    if not with_compute:
        raise ConfigError(f"{who} has no compute node to carry measured durations", "durations")
    for i, t in enumerate(budget):  # time of an interval without compute moves on (or back, at the end)
        if not parts[i] and t:
            j = next((j for j in with_compute if j > i), with_compute[-1])
            budget[j] += t
            budget[i] = 0
    new = {}
    for part, t in zip(parts, budget):
        for n, d in zip(part, _shares(t, [n.duration_micros for n in part])):
            new[n.id] = d
    return [replace(n, duration_micros=new[n.id]) if n.id in new else n for n in graph]
