"""Rescale a captured data-parallel / FSDP trace from N to M ranks.

In data parallelism every rank runs the same step on its own data, so an M-rank iteration is
the N-rank one with the group widened (weak scaling: the per-rank batch, hence every compute
node's measured duration, is kept). What changes is the collectives: all-reduce buffers stay
the same; an FSDP all-gather's output and a reduce-scatter's input are the unsharded buffer,
padded to a multiple of the group size (FSDP1 pads each flat parameter that way; FSDP2 pads
each parameter's first dimension, which gives the same size whenever those dimensions divide
by M). New rank r takes the graph of captured rank r mod N.

Refused, with the reason: traces with more than one process group (TP, PP or EP layouts
change shape with the world), all-to-all (the expert placement and the routing would
change), send/recv, and traces that do not validate.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from chakra.schema.protobuf import et_def_pb2 as pb

from ..errors import ConfigError
from . import validate as v
from .chakra_io import COMM_TYPES, _framed, read_pb_trace
from .convert import tensor_records

RESIZED = {COMM_TYPES["ALL_GATHER"], COMM_TYPES["REDUCE_SCATTER"]}
KEPT = {COMM_TYPES["ALL_REDUCE"], COMM_TYPES["BROADCAST"], COMM_TYPES["REDUCE"], COMM_TYPES["BARRIER"]}
DROPPED_ATTRS = ("wait_micros",)  # waiting depended on the captured peers


class RescaleError(ConfigError):
    """A trace that cannot be rescaled faithfully."""


def _elem_bytes(node: pb.Node) -> int:
    """Element size of a collective's buffer, from the tensor records Chakra keeps in `inputs`."""
    try:
        records = tensor_records(ast.literal_eval(node.inputs.values))
    except (ValueError, SyntaxError):
        records = []
    return int(records[0][4]) if records else 1


def rescale(et_dir: str | Path, ranks: int, out: str | Path) -> dict[str, Any]:
    """Write `trace.<r>.et` for r < ranks and `comm_groups.json` into `out`; returns a report."""
    if ranks < 1:
        raise RescaleError(f"rescale: ranks must be >= 1 (got {ranks})", "ranks")
    traces, groups = v.load(et_dir)
    found = v.problems(traces, groups)
    if found:
        raise RescaleError(f"rescale: {et_dir} does not validate, fix it first: {found[0]}", "et")
    n = len(traces)
    used = {str(a) for t in traces for x in v.collectives(t) for a in [x.attrs.get("pg_name")]}
    if len(used) > 1 or (used and sorted(groups.get(next(iter(used)), [])) != list(range(n))):
        raise RescaleError(f"rescale: {et_dir} uses process groups {sorted(used)}; only traces whose collectives all "
                           f"span the whole world (data parallel / FSDP) rescale faithfully", "pg_name")
    for t in traces:
        for x in v.collectives(t):
            if x.type != "COMM_COLL_NODE":
                raise RescaleError(f"rescale: rank {t.rank} node {x.id} is {x.type}: point-to-point traffic (pipeline "
                                   "stages) does not rescale with the data-parallel width", "type")
            if x.attrs["comm_type"] not in RESIZED | KEPT:
                raise RescaleError(f"rescale: rank {t.rank} node {x.id} ({v.describe(x)}): all-to-all traffic depends on "
                                   "expert placement and routing, which change with the world size", "comm_type")
    group = next(iter(used), "0")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    changed = []  # sizes that padding to the new width changed
    encoded: dict[int, bytes] = {}
    for r in range(ranks):
        src = traces[r % n]
        if src.rank not in encoded:
            meta, nodes = read_pb_trace(src.path)
            body = [_framed(meta)]
            for node in nodes:
                attrs = {a.name: a for a in node.attr}
                if node.type == pb.NodeType.Value("COMM_COLL_NODE") and attrs["comm_type"].int64_val in RESIZED:
                    old = attrs["comm_size"].int64_val
                    unit = ranks * _elem_bytes(node)
                    attrs["comm_size"].int64_val = -(-old // unit) * unit
                    if src.rank == 0 and old != attrs["comm_size"].int64_val:
                        changed.append({"node": node.id, "from": old, "to": attrs["comm_size"].int64_val})
                keep = [a for a in node.attr if a.name not in DROPPED_ATTRS]
                del node.attr[:]
                node.attr.extend(keep)
                body.append(_framed(node))
            encoded[src.rank] = b"".join(body)
        (out / f"trace.{r}.et").write_bytes(encoded[src.rank])
    (out / "comm_groups.json").write_text(json.dumps({group: list(range(ranks))}, indent=1))
    report = {"from_ranks": n, "to_ranks": ranks, "source": str(Path(et_dir).resolve()), "group": group,
              "resized_on_rank0": changed}
    (out / "rescale.json").write_text(json.dumps(report, indent=1))
    return report
