"""Turn a capture (host + Kineto traces per rank) into Chakra ETs a simulator can schedule.

Chakra's own tools do the linking and the conversion (`chakra.src.trace_link.TraceLinker`,
`chakra.src.converter.PyTorchConverter` from `mlc-chakra` 1.0.0). What they get wrong is fixed here:

* `et_replay`, which the linker imports, is not on PyPI; HolisticTraceAnalysis ships it under
  `param_bench/et_replay`, which we put on `sys.path`.
* The linker needs absolute paths (HTA joins the trace directory with the file name again).
* Synchronization dependencies come from HTA's critical-path analysis, which fails with pandas 3
  (and crashes on CPU-only traces with pandas 2). A CPU trace has no device to synchronize
  with; for a GPU trace we derive them from the Kineto trace directly: each CUDA
  synchronize call depends on the last kernel that finished before it returned.
* The converter makes COMM nodes only from `ncclDevKernel…` GPU kernels, so a gloo (CPU) run
  has no communication at all. Our pass makes each `c10d::` operator a COMM node of the type the
  operator says (gloo runs a reduce-scatter as `gloo:all_reduce`: the backend's name is not the
  collective), with `comm_size` in the simulator's convention (below), `pg_name`, the group's
  ranks (comm-group JSON and the trace's process-group metadata node), per-peer split sizes for
  all-to-all(v), and completion edges to the operators that consume its result (on a GPU: to
  the kernels they launch; the CPU does not wait for NCCL).
* Chakra leaves the kernels of one CUDA stream unordered; they run in launch order (FIFO), so
  each GPU node depends on the one before it on its stream.
* Durations: a collective's measured time on one rank includes waiting for its slowest peer.
  Ranks' clocks are aligned (median offset of collective end times); a collective starts when
  its last rank arrives, so its own time is end - max(start) and the rest is `wait_micros`.

`comm_size` convention: each rank's input to the collective, in bytes, as PyTorch's
`record_param_comms` records it, Chakra's converter writes it and ASTRA-sim 2.x reads it
(docs/astra-sim.md): all-reduce: the buffer; all-gather: this rank's shard (the output is
group size x comm_size); reduce-scatter: the unreduced input; all-to-all: the bytes this rank
sends (`comm_split_sizes`: bytes to each group rank, `comm_recv_split_sizes`: bytes from each);
broadcast/reduce: the buffer; send/recv: the message.

Output layout: `OUT/linked/rank<r>.json` (Chakra host+device trace), `OUT/chakra/rank<r>.et`
(Chakra's converter), `OUT/et/trace.<r>.et` (final), `OUT/et/comm_groups.json`,
`OUT/et/conversion.json` (what was changed, per rank).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chakra.schema.protobuf import et_def_pb2 as pb

from ..errors import ConfigError, load_json
from ..specs import shown
from .capture import GROUP_MARK
from .chakra_io import COMM_TYPES, SCHEMA_VERSION, _attr, _framed, read_pb_trace, remove_ranks_past

PREFIX = "trace"

# c10d operator -> (node type, Chakra collective type or None for send/recv, argument whose
# bytes are comm_size (the collective's input), argument that holds the result).
C10D_OPS: dict[str, tuple[str, str | None, int, int]] = {
    "c10d::allreduce_": ("COMM_COLL_NODE", "ALL_REDUCE", 0, 0),
    "c10d::allreduce_coalesced_": ("COMM_COLL_NODE", "ALL_REDUCE", 0, 0),
    "c10d::allgather_": ("COMM_COLL_NODE", "ALL_GATHER", 1, 0),
    "c10d::_allgather_base_": ("COMM_COLL_NODE", "ALL_GATHER", 1, 0),
    "c10d::allgather_coalesced_": ("COMM_COLL_NODE", "ALL_GATHER", 1, 0),
    "c10d::allgather_into_tensor_coalesced_": ("COMM_COLL_NODE", "ALL_GATHER", 1, 0),
    "c10d::reduce_scatter_": ("COMM_COLL_NODE", "REDUCE_SCATTER", 1, 0),
    "c10d::_reduce_scatter_base_": ("COMM_COLL_NODE", "REDUCE_SCATTER", 1, 0),
    "c10d::reduce_scatter_tensor_coalesced_": ("COMM_COLL_NODE", "REDUCE_SCATTER", 1, 0),
    "c10d::alltoall_base_": ("COMM_COLL_NODE", "ALL_TO_ALL", 1, 0),
    "c10d::alltoall_": ("COMM_COLL_NODE", "ALL_TO_ALL", 1, 0),
    "c10d::broadcast_": ("COMM_COLL_NODE", "BROADCAST", 0, 0),
    "c10d::reduce_": ("COMM_COLL_NODE", "REDUCE", 0, 0),
    "c10d::gather_": ("COMM_COLL_NODE", "GATHER", 1, 0),
    "c10d::scatter_": ("COMM_COLL_NODE", "SCATTER", 0, 0),
    "c10d::barrier": ("COMM_COLL_NODE", "BARRIER", -1, -1),
    "c10d::send": ("COMM_SEND_NODE", None, 0, -1),
    "c10d::recv_": ("COMM_RECV_NODE", None, 0, 0),
}
CUDA_SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")


class ConversionError(ConfigError):
    """A capture that cannot be turned into a faithful Chakra trace."""


# --- Chakra's linker and converter, with their environment fixed ----------------------------

def _provide_et_replay() -> None:
    """Make `import et_replay` work from HolisticTraceAnalysis's bundled copy (no network needed)."""
    if importlib.util.find_spec("et_replay") is not None:
        return
    spec = importlib.util.find_spec("param_bench")
    if spec is None or not spec.submodule_search_locations:
        raise ConversionError("et_replay not found: install HolisticTraceAnalysis (it ships param_bench/et_replay)",
                              "et_replay")
    sys.path.insert(0, list(spec.submodule_search_locations)[0])


def kineto_sync_dependencies(kineto: dict[str, Any]) -> dict[int, list[int]]:
    """External id of each op that calls a CUDA synchronize -> external ids of the kernel that
    finished last before the call returned (what HTA's critical path calls a sync edge)."""
    events = [e for e in kineto.get("traceEvents", []) if e.get("ph") == "X"]
    kernels = sorted((e["ts"] + e.get("dur", 0), e["args"]["External id"]) for e in events
                     if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "External id" in e.get("args", {}))
    deps: dict[int, list[int]] = {}
    for e in events:
        if e.get("cat") != "cuda_runtime" or e.get("name") not in CUDA_SYNC_CALLS:
            continue
        end, ext = e["ts"] + e.get("dur", 0), e.get("args", {}).get("External id")
        done = [k for k in kernels if k[0] <= end]
        if ext is not None and done and done[-1][1] != ext:
            deps.setdefault(ext, []).append(done[-1][1])
    return deps


def _rank_traces(rank: int, world: int, host: Path, kineto: Path) -> dict[str, Any]:
    """Rank `rank`'s Kineto trace, once both raw files are checked to be that rank's of one run:
    files swapped between ranks or taken from another capture converted without a word."""
    traces = {}
    for path, what, key in ((host, "a host (execution) trace", "nodes"), (kineto, "a Kineto trace", "traceEvents")):
        if not path.is_file():
            raise ConversionError(f"{path}: file not found (expected a capture's raw/ traces)", "raw")
        try:
            t = load_json(path, "raw", what)
        except ConfigError as e:  # corrupt JSON: a conversion error as the rest of this pass raises
            raise ConversionError(str(e), e.field) from None
        if not isinstance(t, dict) or not isinstance(t.get(key), list):
            raise ConversionError(f"{path}: expected {what}: a JSON object with a list '{key}'", key)
        traces[key] = t
    kin = traces["traceEvents"]
    info = kin.get("distributedInfo")
    if isinstance(info, dict):  # Kineto names its rank when torch.distributed is up
        for field, want in (("rank", rank), ("world_size", world)):
            if field in info and info[field] != want:
                raise ConversionError(f"{kineto}: field distributedInfo.{field} = {shown(info[field])}: expected {want} "
                                      f"(rank {rank} of capture.json's world of {world})", field)
    pid = traces["nodes"].get("pid")
    pids = {e.get("pid") for e in kin["traceEvents"] if isinstance(e, dict) and e.get("cat") == "cpu_op"}
    if pid is not None and pids and pid not in pids:
        raise ConversionError(f"{host}: field 'pid' = {shown(pid)}: expected the process that wrote {kineto.name} "
                              f"({', '.join(map(str, sorted(pids, key=str)))}): the two files are not from one run", "pid")
    return kin


def chakra_link(rank: int, host: Path, kineto: Path, out: Path) -> None:
    """Chakra's linker on one rank's raw files (`_rank_traces` has checked them)."""
    _provide_et_replay()
    from chakra.src.trace_link.trace_linker import TraceLinker

    class Linker(TraceLinker):
        def load_sync_dependencies(self, rank: int, kineto_file: str, *a: Any, **k: Any) -> dict[int, list[int]]:
            return kineto_sync_dependencies(json.loads(Path(kineto_file).read_text()))

    logging.getLogger().setLevel(logging.WARNING)  # Chakra's linker logs every step at INFO on the root logger
    try:
        Linker().link(rank, str(host.resolve()), str(kineto.resolve()), str(out.resolve()))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ConversionError(f"rank {rank}: chakra_trace_link failed on {host} + {kineto}: {e!r}", "raw") from None


def chakra_convert(linked: Path, out: Path) -> None:
    from chakra.src.converter.pytorch_converter import PyTorchConverter

    PyTorchConverter().convert(str(linked.resolve()), str(out.resolve()), False)


# --- tracefabric's pass ------------------------------------------------------------------------

def tensor_records(value: Any) -> list[list]:
    """The tensor records ([id, storage, offset, numel, elem_bytes, device]) in an ET argument."""
    if isinstance(value, list) and len(value) == 6 and isinstance(value[0], int) and isinstance(value[5], str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in tensor_records(v)]
    return []


def _nbytes(value: Any) -> int:
    return sum(t[3] * t[4] for t in tensor_records(value))


@dataclass
class Collective:
    """One c10d operator on one rank, as found in the linked trace."""

    node_id: int
    op: str
    kind: str
    comm_type: str | None
    size: int
    group: str
    blocking: bool
    outputs: set[int]  # storage ids the result lands in
    exec_ids: list[int]  # backend nodes that executed it (gloo:…, nccl:…, kernels): removed
    start: float  # execution window on this rank (µs, this rank's clock)
    end: float
    attrs: dict[str, Any] = field(default_factory=dict)


def _checked_groups(groups: Any, path: Path, field: str, world: int) -> list[dict[str, Any]]:
    """A list of process groups as `trace capture` writes them, or a ConversionError naming the
    file and field: each an object with a `pg_name` and its `ranks`, ranks of the world."""
    if not isinstance(groups, list):
        raise ConversionError(f"{path}: field '{field}' must be a list of process groups (got {type(groups).__name__})", field)
    for i, g in enumerate(groups):
        where = f"{path}: {field}[{i}]"
        if not isinstance(g, dict) or not isinstance(g.get("pg_name"), str):
            raise ConversionError(f"{where}: expected an object with a string 'pg_name' (got {shown(g)})", field)
        ranks = g.get("ranks", [])
        if not isinstance(ranks, list) or not all(type(x) is int and 0 <= x < world for x in ranks):
            raise ConversionError(f"{where}: group {g['pg_name']!r}: field 'ranks' = {shown(ranks)}: expected a list of "
                                  f"ranks in 0..{world - 1} (capture.json's world is {world})", "ranks")
    return groups


def _groups_of(capture: dict[str, Any], kineto: dict[str, Any], records: list[Path] = (),
               meta_path: Path = Path("capture.json")) -> list[dict[str, Any]]:
    """Process groups with their ranks: from capture.json and each rank's record (a rank only
    sees the groups it belongs to), else from the Kineto trace's distributedInfo."""
    world = capture.get("world", 1 << 17)
    found: dict[str, dict[str, Any]] = {}
    for g in _checked_groups(capture.get("process_groups", []), meta_path, "process_groups", world):
        found[g["pg_name"]] = g
    for path in records:
        if path.is_file():
            record = load_json(path, "records", "a rank's record of `trace capture`")
            if not isinstance(record, dict):
                raise ConversionError(f"{path}: expected a JSON object (as `trace capture` writes it), got "
                                      f"{type(record).__name__}", "records")
            for g in _checked_groups(record.get("_process_groups", []), path, "_process_groups", world):
                found.setdefault(g["pg_name"], g)
    if found:
        return list(found.values())
    info = kineto.get("distributedInfo", {})
    return [{"pg_name": g["pg_name"], "pg_desc": g.get("pg_desc", ""), "ranks": g.get("ranks", [])}
            for g in info.get("pg_config", [])]


def _infer_group(rank: int, op: str, args: list, groups: list[dict[str, Any]], where: str,
                 named: str | None) -> dict[str, Any]:
    """gloo traces do not say which process group ran a collective: take the one the trace names
    (NCCL's record_param_comms), else the only group of the right size that holds this rank."""
    mine = [g for g in groups if rank in g["ranks"]]
    if named is not None:
        for g in mine:
            if g["pg_name"] == named:
                return g
    size = None
    if op in ("c10d::_allgather_base_", "c10d::allgather_into_tensor_coalesced_") and _nbytes(args[1]):
        size = _nbytes(args[0]) // _nbytes(args[1])
    elif op in ("c10d::_reduce_scatter_base_", "c10d::reduce_scatter_tensor_coalesced_") and _nbytes(args[0]):
        size = _nbytes(args[1]) // _nbytes(args[0])
    elif op == "c10d::alltoall_base_" and isinstance(args[3], list) and args[3]:
        size = len(args[3])
    cands = [g for g in mine if size is None or len(g["ranks"]) == size]
    if len(cands) == 1:
        return cands[0]
    if len(mine) == 1:
        return mine[0]
    raise ConversionError(
        f"{where}: cannot tell which process group ran {op} (candidates: {[g['pg_name'] for g in cands or mine]}); "
        "gloo traces carry no group name", "pg_name")


def _collective(rank: int, node: dict, args: list, types: list, groups: list[dict], exec_nodes: list[dict],
                where: str, named: str | None = None) -> Collective:
    op = node["name"]
    kind, ctype, size_arg, out_arg = C10D_OPS[op]
    named = next((v for c in exec_nodes if c["name"] == "record_param_comms"
                  for v in c["inputs"]["values"] if isinstance(v, str) and v in {g["pg_name"] for g in groups}), named)
    group = _infer_group(rank, op, args, groups, where, named)
    size = _nbytes(args[size_arg]) if size_arg >= 0 else 0
    bools = [v for v, t in zip(args, types) if t == "Bool"]
    # A gloo collective called without async_op blocks the calling thread until it completes.
    blocking = (not bools or not bools[0]) and all("cpu" in t[5] for t in tensor_records(args))
    timed = [c for c in exec_nodes if "ts" in c and c["name"] != "record_param_comms" and not c["name"].startswith(GROUP_MARK)]
    gpu = [c for c in timed if "ncclDevKernel" in c["name"] or "ncclKernel" in c["name"]]  # NCCL: the kernel is the transfer
    window = gpu or timed
    if not window:
        raise ConversionError(f"{where}: {op} (node {node['id']}) has no execution record (gloo:/nccl: op or kernel) "
                              "in the Kineto trace", "exec")
    c = Collective(node["id"], op, kind, ctype, size, group["pg_name"], blocking,
                   {t[1] for t in tensor_records(args[out_arg])} if out_arg >= 0 else set(),
                   [x["id"] for x in exec_nodes], min(x["ts"] for x in window),
                   max(x["ts"] + x.get("inclusive_dur", 0.0) for x in window))
    n = len(group["ranks"])
    if kind in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
        # c10d takes the peer's rank in the group: ETs name the global rank.
        peer = int(args[2])
        if not 0 <= peer < n:
            raise ConversionError(f"{where}: {op} (node {node['id']}) addresses rank {peer} of group {group['pg_name']!r}, "
                                  f"which has {n} ranks {group['ranks']}", "comm_peer")
        key = "comm_dst" if kind == "COMM_SEND_NODE" else "comm_src"
        c.attrs.update({key: group["ranks"][peer], "comm_tag": int(args[3])})
    elif op == "c10d::alltoall_base_":
        c.attrs["comm_split_sizes"] = _split_bytes(args[1], args[4], n)
        c.attrs["comm_recv_split_sizes"] = _split_bytes(args[0], args[3], n)
    elif op == "c10d::alltoall_":
        c.attrs["comm_split_sizes"] = [_nbytes(t) for t in args[1]]
        c.attrs["comm_recv_split_sizes"] = [_nbytes(t) for t in args[0]]
    return c


def _split_bytes(tensor: Any, splits: Any, n: int) -> list[int]:
    """Per-peer bytes of an all_to_all_single: rows per peer (empty list: equal split) x bytes per row."""
    total = _nbytes(tensor)
    if not splits:
        return [total // n] * n
    rows = sum(splits)
    return [total * s // rows if rows else 0 for s in splits]


def _attrs_dict(node: dict) -> dict[str, Any]:
    return {a["name"]: a["value"] for a in node.get("attrs", [])}


def find_collectives(rank: int, linked: dict, groups: list[dict], where: str) -> list[Collective]:
    nodes = sorted(linked["nodes"], key=lambda n: n["id"])
    for n in nodes:
        n["attrs_dict"] = _attrs_dict(n)
    children = _children(nodes)
    by_id = {n["id"]: n for n in nodes}
    claimed: set[int] = set()
    out = []
    for i, n in enumerate(nodes):
        if n["name"] not in C10D_OPS:
            continue
        mark = _group_mark(n, by_id)
        # The backend's own record is a child of the c10d op, or (gloo's worker thread) the next
        # unclaimed gloo:/nccl: record after it.
        execs = [c for c in _descendants(n["id"], children) if _is_exec(c)]
        if not any(c["name"].startswith(("gloo:", "nccl:")) for c in execs):
            nxt = next((m for m in nodes[i + 1:] if m["name"].startswith(("gloo:", "nccl:")) and m["id"] not in claimed
                        and m["name"] != "record_param_comms"), None)
            if nxt is not None:
                execs.append(nxt)
        claimed.update(c["id"] for c in execs)
        named = mark["name"][len(GROUP_MARK):-3] if mark else None
        c = _collective(rank, n, n["inputs"]["values"], n["inputs"]["types"], groups, execs + ([mark] if mark else []),
                        where, named)
        if c.kind in ("COMM_SEND_NODE", "COMM_RECV_NODE") and c.blocking:
            # send/recv record no async_op flag, and a Python `req.wait()` records nothing: isend and
            # irecv are the calls whose thread went on (its next op started) before the transfer ended.
            below = {m["id"] for m in _descendants(n["id"], children)}
            tid = n["attrs_dict"].get("tid")
            nxt = next((m for m in nodes[i + 1:] if "ts" in m and m["id"] not in below and not _is_exec(m)
                        and m["attrs_dict"].get("tid") == tid), None)
            c.blocking = nxt is None or nxt["ts"] >= c.end
        out.append(c)
    return out


def _group_mark(n: dict, by_id: dict[int, dict]) -> dict | None:
    """The capture's annotation naming the process group of collective `n` (an ancestor)."""
    p = by_id.get(n.get("ctrl_deps"))
    for _ in range(16):  # a few levels at most (FSDP wraps its collectives in ranges of its own)
        if p is None or p["name"] in C10D_OPS:
            return None
        if p["name"].startswith(GROUP_MARK):
            return p
        p = by_id.get(p.get("ctrl_deps")) if p.get("ctrl_deps") != p["id"] else None
    return None


def _is_exec(n: dict) -> bool:
    """A backend's own record of running a collective (removed from the converted graph)."""
    name = n["name"]
    return name.startswith(("gloo:", "nccl:")) or name == "record_param_comms" or "ncclDevKernel" in name \
        or "ncclKernel" in name


def _children(nodes: list[dict]) -> dict[int, list[dict]]:
    """Linked-trace nodes by their parent (`ctrl_deps`)."""
    children: dict[int, list[dict]] = {}
    for n in nodes:
        children.setdefault(n.get("ctrl_deps"), []).append(n)
    return children


def _descendants(nid: int, children: dict[int, list[dict]]) -> list[dict]:
    out, stack, seen = [], list(children.get(nid, [])), {nid}
    while stack:
        c = stack.pop()
        if c["id"] in seen:  # a node listed as its own parent (PyTorch's root does that)
            continue
        seen.add(c["id"])
        out.append(c)
        stack.extend(children.get(c["id"], []))
    return out


def align(per_rank: dict[int, list[Collective]], hosts: dict[int, str]) -> dict[int, float]:
    """Clock offset of each rank against the lowest rank. Ranks on the reference's host share its
    clock (offset 0); on another host, the median difference of the end times of the collectives
    they share (a collective ends at nearly the same moment on every member)."""
    seqs = _sequences(per_rank)
    ref = min(per_rank)
    offsets = {ref: 0.0}
    for r in sorted(per_rank):
        if r == ref or (hosts.get(r) is not None and hosts.get(r) == hosts.get(ref)):
            offsets[r] = 0.0
            continue
        diffs = [by_rank[r].end - by_rank[ref].end for by_rank in seqs if r in by_rank and ref in by_rank]
        offsets[r] = statistics.median(diffs) if diffs else 0.0
    return offsets


def _sequences(per_rank: dict[int, list[Collective]]) -> list[dict[int, Collective]]:
    """The k-th collective on each group, across its ranks: [{rank: Collective}]."""
    out: dict[tuple[str, int], dict[int, Collective]] = {}
    for r, colls in per_rank.items():
        count: dict[str, int] = {}
        for c in colls:
            k = count.get(c.group, 0)
            count[c.group] = k + 1
            out.setdefault((c.group, k), {})[r] = c
    return list(out.values())


def split_wait(per_rank: dict[int, list[Collective]], groups: list[dict],
               hosts: dict[int, str] | None = None) -> dict[int, float]:
    """Set attrs own_micros/wait_micros on every collective; returns the clock offsets used.

    A rank's part of a collective can start only when every rank it needs data from has
    started: all members for all-reduce/all-gather/reduce-scatter, the senders of non-empty
    splits for all-to-all(v), the peer for send/recv."""
    offsets = align(per_rank, hosts or {})
    members = {g["pg_name"]: g["ranks"] for g in groups}
    for by_rank in _sequences(per_rank):
        start = {r: c.start - offsets[r] for r, c in by_rank.items()}
        for r, c in by_rank.items():
            ranks = members.get(c.group, list(by_rank))
            if "comm_recv_split_sizes" in c.attrs:
                needs = [ranks[i] for i, b in enumerate(c.attrs["comm_recv_split_sizes"]) if b and i < len(ranks)]
            elif "comm_src" in c.attrs or "comm_dst" in c.attrs:
                needs = [c.attrs.get("comm_src", c.attrs.get("comm_dst"))]
            else:
                needs = ranks
            ready = max([start[r]] + [start[s] for s in needs if s in start])
            c.attrs["wait_micros"] = int(round(ready - start[r]))
            c.attrs["own_micros"] = int(round(max(0.0, c.end - offsets[r] - ready)))
    return offsets


def rewrite(nodes: list[pb.Node], colls: list[Collective], groups: list[dict], linked: dict) -> list[pb.Node]:
    """Apply the collectives to Chakra's converted nodes: COMM nodes, execution records removed,
    completion edges added, dangling and self dependencies dropped."""
    by_id = {n.id: n for n in nodes}
    info = {n["id"]: n for n in linked["nodes"]}
    drop = {x for c in colls for x in c.exec_ids} & set(by_id)
    colls_by_id = {c.node_id: c for c in colls if c.node_id in by_id}
    # Nodes to bypass: the executions (gone), and non-blocking collectives on the issue chain.
    bypass = set(drop) | {i for i, c in colls_by_id.items() if not c.blocking}
    resolved: dict[int, list[int]] = {}

    def through(dep: int) -> list[int]:
        if dep not in bypass:
            return [dep]
        if dep not in resolved:
            resolved[dep] = []  # guards cycles in a corrupt input
            resolved[dep] = [d for x in by_id[dep].data_deps for d in through(x)]
        return resolved[dep]

    parent = {n.id: (n.ctrl_deps[0] if n.ctrl_deps else None) for n in nodes}
    out = []
    for n in nodes:
        if n.id in drop:
            continue
        data = []
        for d in n.data_deps:
            for x in (through(d) if n.id not in colls_by_id or d not in colls_by_id else [d]):
                if x != n.id and x in by_id and x not in data:
                    data.append(x)
        ctrl = []
        for d in n.ctrl_deps:
            while d in drop or d in colls_by_id:  # the caller of a collective's child is the collective's caller
                d = parent.get(d)
            if d is not None and d != n.id and d in by_id:
                ctrl.append(d)
        del n.data_deps[:]
        n.data_deps.extend(data)
        del n.ctrl_deps[:]
        n.ctrl_deps.extend(ctrl)
        out.append(n)

    order = [n.id for n in out]
    tid = {i: _attrs_dict(info[i]).get("tid", 0) if i in info else 0 for i in order}
    pos = {i: k for k, i in enumerate(order)}
    gpu = {i for i in order if info.get(i, {}).get("cat")}  # kernels, copies, fills (Chakra: a Kineto category)
    children = _children(linked["nodes"])
    # Kernels of one CUDA stream run in launch order: (Kineto start, node) per stream, a collective
    # standing where its NCCL kernel ran.
    streams: dict[int, list[tuple[float, int]]] = {}
    for i in gpu:
        streams.setdefault(info[i].get("stream", 0), []).append((info[i]["ts"], i))
    for cid, c in colls_by_id.items():
        n = by_id[cid]
        n.type = pb.NodeType.Value(c.kind)
        n.duration_micros = c.attrs["own_micros"]
        keep = [a for a in n.attr if a.name not in ("is_cpu_op", "stream")]  # the c10d op's stream 0 is Chakra's default
        del n.attr[:]
        n.attr.extend(keep)
        extra: dict[str, Any] = {"is_cpu_op": False, "pg_name": c.group, "comm_size": c.size, **c.attrs}
        if c.comm_type:
            extra["comm_type"] = COMM_TYPES[c.comm_type]
        kernels = sorted((info[x]["ts"], info[x].get("stream", 0)) for x in c.exec_ids if info.get(x, {}).get("cat"))
        if kernels:
            extra["stream"] = kernels[0][1]
            streams.setdefault(kernels[0][1], []).append((kernels[0][0], cid))
        n.attr.extend(_attr(k, v) for k, v in extra.items())
        if not c.blocking:
            # Completion edge: the first later op on the same thread that reads the result. On a GPU the
            # CPU does not wait for it: the kernels that op launches do (the stream chain below holds
            # back the later ones). An op launching none reads the result on the CPU (`.tolist()`) or
            # only its shape: the op itself waits, as on gloo.
            for j in order[pos[cid] + 1:]:
                if tid[j] == tid[cid] and j not in colls_by_id and _reads(info.get(j), c.outputs):
                    launched = [k["id"] for k in _descendants(j, children) if k["id"] in gpu]
                    for k in [j] if j in gpu else launched or [j]:
                        if cid not in by_id[k].data_deps:
                            by_id[k].data_deps.append(cid)
                    break
    for chain in streams.values():
        chain.sort()
        for (_, a), (_, b) in zip(chain, chain[1:]):
            if a not in by_id[b].data_deps:
                by_id[b].data_deps.append(a)
    for n in out:
        if n.name == "## process_group:init ##":
            n.inputs.values = str([json.dumps([{"pg_name": g["pg_name"], "pg_desc": g.get("pg_desc", ""),
                                                "ranks": g["ranks"], "group_size": len(g["ranks"])} for g in groups])])
    return out


def _reads(node: dict | None, storages: set[int]) -> bool:
    return bool(node) and any(t[1] in storages for t in tensor_records(node["inputs"]["values"]))


def convert(capture_dir: str | Path, out: str | Path | None = None) -> Path:
    """Link, convert and fix every rank of a capture; returns the directory of the final ETs."""
    cap = Path(capture_dir).resolve()
    meta_path = cap / "capture.json"
    if not meta_path.is_file():
        raise ConversionError(f"{meta_path}: file not found (run `tracefabric trace capture` first)", "capture.json")
    meta = load_json(meta_path, "capture.json")
    if not isinstance(meta, dict):
        raise ConversionError(f"{meta_path}: expected a JSON object (as `trace capture` writes it), got {type(meta).__name__}",
                              "capture.json")
    world = meta.get("world")
    if not isinstance(world, int) or isinstance(world, bool) or not 1 <= world <= 1 << 17:
        raise ConversionError(f"{meta_path}: field 'world' must be a rank count in 1..131072 (got {world!r})", "world")
    out = Path(out).resolve() if out else cap
    for sub in ("linked", "chakra", "et"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    linked: dict[int, dict] = {}
    hosts: dict[int, str] = {}
    per_rank: dict[int, list[Collective]] = {}
    for r in range(world):
        host, kin = cap / "raw" / f"rank{r}.host.json", cap / "raw" / f"rank{r}.kineto.json"
        kineto = _rank_traces(r, world, host, kin)
        chakra_link(r, host, kin, out / "linked" / f"rank{r}.json")
        linked[r] = json.loads((out / "linked" / f"rank{r}.json").read_text())
        hosts[r] = kineto.get("host_name")
        if r == 0:
            groups = _groups_of(meta, kineto, [cap / "records" / f"rank{i}.json" for i in range(world)], meta_path)
        per_rank[r] = find_collectives(r, linked[r], groups, f"rank {r} ({host})")
    offsets = split_wait(per_rank, groups, hosts)
    report = {"world": world, "clock_offsets_us": offsets, "ranks": {}}
    for r in range(world):
        chakra_convert(out / "linked" / f"rank{r}.json", out / "chakra" / f"rank{r}.et")
        gmeta, nodes = read_pb_trace(out / "chakra" / f"rank{r}.et")
        fixed = rewrite(nodes, per_rank[r], groups, linked[r])
        gmeta.version = SCHEMA_VERSION
        with open(out / "et" / f"{PREFIX}.{r}.et", "wb") as f:
            f.write(_framed(gmeta))
            for n in fixed:
                f.write(_framed(n))
        report["ranks"][r] = {"nodes": len(fixed), "collectives": len(per_rank[r]),
                              "removed_exec_nodes": len(nodes) - len(fixed)}
    remove_ranks_past(out / "et", PREFIX, world)  # an earlier, larger conversion's ranks
    comm_groups = {g["pg_name"]: g["ranks"] for g in groups}
    (out / "et" / "comm_groups.json").write_text(json.dumps(comm_groups, indent=1))
    (out / "et" / "conversion.json").write_text(json.dumps(report, indent=1))
    return out / "et"
