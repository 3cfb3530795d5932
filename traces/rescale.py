"""Rescale a captured data-parallel / FSDP / expert-parallel trace from N to M ranks.

In data parallelism every rank runs the same step on its own data, so an M-rank iteration is
the N-rank one with the data-parallel width grown (weak scaling: the per-rank batch, hence
every compute node's measured duration, is kept). New rank r takes the graph of captured rank
r mod N. Each process group is recognised by its shape and rescaled by it:

* the world group (every rank) widens to all M ranks;
* a block group (consecutive ranks, an aligned block of size s < N, e.g. an expert-parallel or
  tensor-parallel group) keeps its size: block b of the new world is a copy of captured block
  b mod N/s, and its collectives (all-to-all included: the same routing) stay as captured;
* a strided group (ranks congruent modulo s, e.g. the expert-data-parallel ranks holding the
  same experts) widens to every new rank with the same residue.

All-reduce, broadcast, reduce and barrier buffers stay the same. A reduce-scatter's input is the
unsharded buffer, padded to a multiple of the new group size (FSDP1 pads each flat parameter
that way; FSDP2 pads each parameter's first dimension, which gives the same size whenever those
dimensions divide by the group); an all-gather's input (its comm_size) is each rank's shard of
that padded buffer.

Refused, with the reason: all-to-all on a group that widens (its expert placement and routing
would change: experts = group size), groups of another shape, M not a multiple of a block or
stride size, send/recv (pipeline stages), and traces that do not validate.
"""

from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path
from typing import Any

from chakra.schema.protobuf import et_def_pb2 as pb

from ..errors import ConfigError
from . import validate as v
from .chakra_io import COMM_TYPES, _attr_value, _framed, read_pb_trace, remove_ranks_past
from .convert import tensor_records
from .synthesis import PLAN_MAX

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


def _shape(members: list[int], n: int) -> tuple[str, int]:
    """("world", n), ("block", size) or ("strided", stride) of a captured group; ("other", 0)."""
    m = sorted(members)
    if m == list(range(n)):
        return "world", n
    size = len(m)
    if n % size == 0 and m[0] % size == 0 and m == list(range(m[0], m[0] + size)):
        return "block", size
    stride = n // size if n % size == 0 else 0
    if stride and m == list(range(m[0], n, stride)) and m[0] < stride:
        return "strided", stride
    return "other", 0


def _new_members(kind: str, size: int, rank: int, ranks: int) -> list[int]:
    """The new group of `rank` for a captured group of this shape."""
    if kind == "world":
        return list(range(ranks))
    if kind == "block":
        start = rank - rank % size
        return list(range(start, start + size))
    return list(range(rank % size, ranks, size))


def rescale(et_dir: str | Path, ranks: int, out: str | Path) -> dict[str, Any]:
    """Write `trace.<r>.et` for r < ranks and `comm_groups.json` into `out`; returns a report."""
    # One file per rank: past the largest world a synthesis writes, a typo fills the disk.
    if not isinstance(ranks, int) or isinstance(ranks, bool) or not 1 <= ranks <= PLAN_MAX["world"]:
        raise RescaleError(f"rescale: ranks must be an integer in 1..{PLAN_MAX['world']} (got {ranks!r})", "ranks")
    folder = Path(et_dir) if Path(et_dir).is_dir() else Path(et_dir).parent
    if Path(out).resolve() == folder.resolve():
        raise RescaleError(f"rescale: --out {out} is the input folder; its comm_groups.json would be overwritten "
                           "and old and new traces mixed", "out")
    traces, groups = v.load(et_dir)
    found = v.problems(traces, groups)
    if found:
        raise RescaleError(f"rescale: {et_dir} does not validate, fix it first: {found[0]}", "et")
    n = len(traces)
    shapes: dict[str, tuple[str, int]] = {}
    for t in traces:
        for x in v.collectives(t):
            if x.type != "COMM_COLL_NODE":
                raise RescaleError(f"rescale: rank {t.rank} node {x.id} is {x.type}: point-to-point traffic (pipeline "
                                   "stages) does not rescale with the data-parallel width", "type")
            g = str(x.attrs["pg_name"]) if "pg_name" in x.attrs else None  # None: the world, as ASTRA-sim reads it
            if g is not None and g not in shapes:
                kind, size = _shape(groups.get(g, list(range(n))), n)
                if kind == "other":
                    raise RescaleError(f"rescale: process group {g} {groups.get(g)} is neither the world, an aligned block "
                                       "of consecutive ranks nor a strided set; its place in a larger world is unknown", "pg_name")
                if kind != "world" and ranks % size:
                    raise RescaleError(f"rescale: process group {g} {groups[g]} repeats every {size} ranks; ranks ({ranks}) "
                                       f"must be a multiple of {size}", "ranks")
                shapes[g] = (kind, size)
            kind = shapes[g][0] if g is not None else "world"
            if x.attrs["comm_type"] not in RESIZED | KEPT and not (kind == "block" and x.attrs["comm_type"] == COMM_TYPES["ALL_TO_ALL"]):
                raise RescaleError(f"rescale: rank {t.rank} node {x.id} ({v.describe(x)}) on {kind} group {g}: all-to-all "
                                   "traffic depends on expert placement and routing, which change when its group widens", "comm_type")
    new_ids: dict[tuple[str, tuple[int, ...]], str] = {}
    new_groups: dict[str, list[int]] = {}
    spare_ids = (str(i) for i in itertools.count() if str(i) not in shapes)  # for the new copies

    def new_group(g: str, rank: int, gid: str | None = None) -> tuple[str, int]:
        kind, size = shapes[g]
        members = _new_members(kind, size, rank, ranks)
        key = (g, tuple(members))
        if key not in new_ids:
            new_ids[key] = gid if gid is not None else next(spare_ids)
            new_groups[new_ids[key]] = members
        return new_ids[key], len(members)

    # A captured group keeps its id (as seen from one of its own members); copies get unused ones.
    for g in sorted(shapes, key=lambda g: (len(g), g)):
        new_group(g, min(groups.get(g, [0])), gid=g)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    changed = []  # sizes that padding to the new width changed
    templates: dict[int, list[bytes | pb.Node]] = {}  # per captured rank: framed bytes, or a collective to adapt
    for t in traces:
        meta, nodes = read_pb_trace(t.path)
        parts: list[bytes | pb.Node] = [_framed(meta)]
        for node in nodes:
            keep = [a for a in node.attr if a.name not in DROPPED_ATTRS]
            del node.attr[:]
            node.attr.extend(keep)
            parts.append(node if node.type == pb.NodeType.Value("COMM_COLL_NODE") else _framed(node))
        templates[t.rank] = parts
    for r in range(ranks):
        body = []
        for part in templates[r % n]:
            if isinstance(part, bytes):
                body.append(part)
                continue
            node = pb.Node()
            node.CopyFrom(part)
            attrs = {a.name: a for a in node.attr}
            if "pg_name" in attrs:
                g = str(_attr_value(attrs["pg_name"]))
                was = len(groups.get(g, range(n)))
                gid, width = new_group(g, r)
                _set_group(attrs["pg_name"], gid)
            else:
                was, width = n, ranks
            if attrs["comm_type"].int64_val in RESIZED:
                # The unsharded buffer, padded to the new width (an all-gather carries a shard of it).
                gather = attrs["comm_type"].int64_val == COMM_TYPES["ALL_GATHER"]
                old = attrs["comm_size"].int64_val * (was if gather else 1)
                unit = width * _elem_bytes(node)
                padded = -(-old // unit) * unit
                attrs["comm_size"].int64_val = padded // width if gather else padded
                if r == 0 and old != padded:
                    changed.append({"node": node.id, "from": old, "to": padded})
            body.append(_framed(node))
        (out / f"trace.{r}.et").write_bytes(b"".join(body))
    remove_ranks_past(out, "trace", ranks)
    (out / "comm_groups.json").write_text(json.dumps(new_groups, indent=1))
    report = {"from_ranks": n, "to_ranks": ranks, "source": str(Path(et_dir).resolve()),
              "groups": {g: {"shape": kind, "members": groups.get(g)} for g, (kind, _) in shapes.items()},
              "resized_on_rank0": changed}
    (out / "rescale.json").write_text(json.dumps(report, indent=1))
    return report


def _set_group(a: pb.AttributeProto, gid: str) -> None:
    """Keep the attribute's type: captured traces name groups by string, some writers by number."""
    if a.WhichOneof("value") == "string_val":
        a.string_val = gid
    else:
        a.int64_val = int(gid)
