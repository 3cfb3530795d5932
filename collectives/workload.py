"""The workload layer's Python half: read a workload (per-rank Chakra ETs, as ASTRA-sim
reads them) and hand the Rust system layer each rank's graph, with node ids turned into
indices, communicator groups resolved, and compute/memory times fixed (duration_micros,
or the roofline when the system config enables it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _core
from ..astra_configs.formats import RemoteMemory, SystemConfig
from . import astra_limits
from ..errors import ConfigError, from_system
from ..traces.chakra_io import COLLECTIVES, EtNode, comm_kind, int_attr, int_value, split_sum_problem
from ..traces.validate import COUNT_UNITS, RankTrace, graph_problems, group_problem, load



@dataclass
class Workload:
    traces: list[RankTrace]
    groups: dict[str, list[int]]
    source: str

    @property
    def ranks(self) -> int:
        return len(self.traces)


def read_workload(where: str | Path, comm_groups: str | Path | None = None) -> Workload:
    """ETs `<prefix>.<rank>.et` (a prefix or a directory), with the comm groups of
    `comm_groups.json` beside them, or of an ASTRA-sim comm-group file given apart."""
    traces, groups = load(where, comm_groups)
    return Workload(traces, groups, str(where))


def _split_list(splits: Any, attr: str, where: str) -> list[int]:
    if not isinstance(splits, list):
        raise ConfigError(f"{where}: attribute {attr!r} = {splits!r}: expected a list of bytes per group rank", attr)
    out = [int_value(x, attr, where) for x in splits]
    if any(b < 0 for b in out):
        raise ConfigError(f"{where}: {attr} {splits}: expected bytes >= 0", attr)
    return out


def _involved_dims(value: Any, where: str) -> list[bool]:
    """Chakra's `involved_dim`: one bool per network dimension."""
    if not isinstance(value, list) or not all(isinstance(v, bool) for v in value):
        raise ConfigError(f"{where}: attribute 'involved_dim' = {value!r:.80}: expected a list of bools, one per "
                          "network dimension", "involved_dim")
    return value


def _duration(ps: int, field: str, where: str) -> int:
    if ps >= _core.CLOCK_LIMIT_PS:  # the simulators' clock: no single node may take longer
        raise ConfigError(f"{where}: {field} gives {ps / 1e12:.3e} s, past the simulators' picosecond clock "
                          "(2^62 ps, 53 days)", field)
    return ps


def _memory_ps(memory: RemoteMemory, size: int, where: str) -> int:
    ps = memory.access_ps(size)
    if ps >= _core.CLOCK_LIMIT_PS:  # the size, the memory's bandwidth or its latency: name all three
        raise ConfigError(f"{where}: a remote access of tensor_size = {size} B at remote-mem-bw = {memory.bandwidth_gbps:g} "
                          f"GB/s and remote-mem-latency = {memory.latency_ns:g} ns takes {ps / 1e12:.3e} s, past the "
                          "simulators' picosecond clock (2^62 ps, 53 days)", "tensor_size")
    return round(ps)


def is_cpu_op(node: EtNode) -> bool:
    """Whether a compute node runs on the CPU: it then skips the roofline and runs beside the
    GPU's nodes (ASTRA-sim's rule; absent means the GPU, as its roofline reads it)."""
    return bool(node.attrs.get("is_cpu_op", False))


def _compute_ps(node: EtNode, cfg: SystemConfig, where: str, astra: bool) -> int:
    a = node.attrs
    num_ops, tensor = int_attr(a, "num_ops", where), int_attr(a, "tensor_size", where)
    for key, value in (("num_ops", num_ops), ("tensor_size", tensor)):
        if value < 0:  # refused with the roofline off too, as `trace validate` and `astra export` do
            raise ConfigError(f"{where}: {key} = {value}: expected {COUNT_UNITS[key]} >= 0", key)
    if astra:
        astra_limits.check_compute(num_ops, tensor, cfg.roofline, is_cpu_op(node), where)
    if cfg.roofline and not is_cpu_op(node) and num_ops > 0 and tensor > 0:
        # ASTRA-sim's roofline: perf = min(memory bw x operational intensity, peak).
        perf = min(float(cfg["local-mem-bw"]) * 1e9 * num_ops / tensor, float(cfg["peak-perf"]) * 1e12)
        ns = num_ops / perf * 1e9
        return _duration(int(min(ns, _core.CLOCK_LIMIT_PS)) * 1000, "num_ops", where)
    # ASTRA-sim runs a zero-length compute node for 1 ns.
    return _duration(max(int(node.duration_micros) * 1_000_000, 1000), "duration_micros", where)


def check(w: Workload, cfg: SystemConfig, memory: RemoteMemory, dims: list[int]) -> None:
    """Everything an `analytical:astra-*` run checks before it starts, without running: each
    node's attributes, collectives matched across their groups, send/recv pairs, every collective
    planned with the system config's algorithms on `dims` (NPUs per network dimension), and
    nothing ASTRA-sim would print no result for."""
    try:
        _core.check_system(json.dumps(engine_input(w, cfg, memory, astra=True)), json.dumps(cfg.for_engine(dims, astra=True)))
    except _core.SystemError as e:
        raise from_system(e, cfg.path) from None


def engine_input(w: Workload, cfg: SystemConfig, memory: RemoteMemory, astra: bool = False) -> dict[str, Any]:
    """The JSON the Rust system layer reads (`WorkloadInput`). With `astra`, what ASTRA-sim 2.x
    prints no result for is refused (`astra_limits`)."""
    names = ["world"] + sorted(w.groups)
    index = {name: i for i, name in enumerate(names)}
    group_lists = [list(range(w.ranks))] + [w.groups[n] for n in names[1:]]
    ranks = []
    for t in w.traces:
        # The same graph checks as `trace validate` (cycles: the system layer names them).
        if problems := graph_problems(t.nodes):
            field, message = problems[0]
            raise ConfigError(f"{t.path}: {message}", field)
        pos = {n.id: i for i, n in enumerate(t.nodes)}
        nodes = []
        for n in t.nodes:
            where = f"{t.path}: node {n.id} ({n.name!r})"
            node: dict[str, Any] = {"id": n.id, "deps": sorted({pos[d] for d in [*n.data_deps, *n.ctrl_deps]})}
            a = n.attrs
            if n.type == "COMP_NODE":
                node.update(kind="compute", duration_ps=_compute_ps(n, cfg, where, astra), cpu=is_cpu_op(n))
            elif n.type in ("MEM_LOAD_NODE", "MEM_STORE_NODE"):
                if memory.memory_type == "NO_MEMORY_EXPANSION":
                    raise ConfigError(f"{where}: {n.type} needs remote memory, but the memory config is "
                                      "NO_MEMORY_EXPANSION", "memory-type")
                size = int_attr(a, "tensor_size", where)
                if size < 0:  # else the engine's reader blames a negative time, with no file or node
                    raise ConfigError(f"{where}: tensor_size = {size}: expected bytes >= 0", "tensor_size")
                node.update(kind="memory", duration_ps=_memory_ps(memory, size, where))
            elif n.type == "COMM_COLL_NODE":
                if "comm_type" not in a:
                    raise ConfigError(f"{where}: collective without attribute 'comm_type'", "comm_type")
                kind_name = comm_kind(a["comm_type"]) or str(a["comm_type"])
                if kind_name not in COLLECTIVES:
                    raise ConfigError(f"{where}: comm_type {kind_name}: expected one of {', '.join(COLLECTIVES)}", "comm_type")
                if astra:
                    astra_limits.check_collective(kind_name, where)
                pg = str(a.get("pg_name", ""))
                if bad := group_problem(pg, w.groups):
                    raise ConfigError(f"{where}: {bad}", "pg_name")
                group = index[pg] if pg in w.groups else 0
                if "comm_size" not in a:  # as `trace validate` refuses it: 0 bytes would be a guess
                    raise ConfigError(f"{where}: collective without attribute 'comm_size'", "comm_size")
                size = int_attr(a, "comm_size", where)
                if size < 0:
                    raise ConfigError(f"{where}: comm_size = {size}: expected bytes >= 0", "comm_size")
                node.update(kind="collective", collective=COLLECTIVES[kind_name], bytes=size, group=group)
                if "involved_dim" in a:
                    node["involved_dim"] = _involved_dims(a["involved_dim"], where)
                if kind_name == "BROADCAST":  # ASTRA-sim replays its recorded time
                    node["duration_ps"] = _duration(int(n.duration_micros) * 1_000_000, "duration_micros", where)
                # All-to-all-v: bytes to (and from) each group rank; the system layer checks
                # that what one rank sends is what its peer expects.
                for attr, key in (("comm_split_sizes", "split_bytes"), ("comm_recv_split_sizes", "recv_split_bytes")):
                    if attr in a:
                        node[key] = _split_list(a[attr], attr, where)
                if "split_bytes" in node and (bad := split_sum_problem(size, node["split_bytes"])):
                    raise ConfigError(f"{where}: {bad}", "comm_size")
            elif n.type in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                field = "comm_dst" if n.type == "COMM_SEND_NODE" else "comm_src"
                for key in (field, "comm_size"):  # 0 bytes would be a guess, as for collectives
                    if key not in a:
                        raise ConfigError(f"{where}: {n.type} without attribute {key!r}", key)
                peer, size = int_attr(a, field, where), int_attr(a, "comm_size", where)
                if peer < 0 or size < 0:
                    raise ConfigError(f"{where}: {field} = {peer}, comm_size = {size}: expected a rank and bytes >= 0",
                                      field if peer < 0 else "comm_size")
                node.update(kind="send" if n.type == "COMM_SEND_NODE" else "recv", peer=peer,
                            tag=int_attr(a, "comm_tag", where), bytes=size)
            elif n.type in ("METADATA_NODE", "INVALID_NODE"):
                node.update(kind="instant")
            else:
                raise ConfigError(f"{where}: node type {n.type} is not one tracefabric runs", "type")
            nodes.append(node)
        ranks.append({"file": str(t.path), "nodes": nodes})
    return {"ranks": ranks, "groups": group_lists, "group_names": names}
