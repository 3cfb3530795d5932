"""Reading and writing Chakra execution traces with MLCommons Chakra's own schema
(`chakra.schema.protobuf.et_def_pb2` from the `mlc-chakra` package): a file is a
GlobalMetadata message followed by Node messages, each prefixed by its varint length."""

from __future__ import annotations

import glob
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from chakra.schema.protobuf import et_def_pb2 as pb
from google.protobuf.internal.decoder import _DecodeVarint32  # noqa: PLC2701 (the varint framing Chakra uses)
from google.protobuf.internal.encoder import _VarintBytes  # noqa: PLC2701

from ..errors import ConfigError
from ..jsonio import not_a_file

SCHEMA_VERSION = "0.0.4"

COMM_TYPES = {name: pb.CollectiveCommType.Value(name) for name in pb.CollectiveCommType.keys()}
COMM_NAMES = {value: name for name, value in COMM_TYPES.items()}
# The collectives `run` simulates (Chakra name -> the system layer's), which `trace validate` holds traces to.
# A barrier runs as an all-reduce of its comm_size: it starts once every member has issued it (a
# captured barrier has 0 bytes, so it ends then; NCCL's is a one-element all-reduce).
COLLECTIVES = {"ALL_REDUCE": "all_reduce", "ALL_GATHER": "all_gather", "REDUCE_SCATTER": "reduce_scatter",
               "ALL_TO_ALL": "all_to_all", "BROADCAST": "broadcast", "BARRIER": "all_reduce"}


def comm_type_name(value: int) -> str:
    """Chakra's name of a `comm_type` attribute value (ALL_GATHER for 2, ...)."""
    return pb.CollectiveCommType.Name(value)


# Readers of node attributes shared by `run` (collectives/workload.py) and `trace validate`,
# so that one never refuses what the other accepts.

def int_value(v: Any, key: str, where: str) -> int:
    """An integer attribute value (Chakra writers store some as strings of digits), or a
    ConfigError naming `where` and the attribute: never a float silently cut."""
    try:
        if isinstance(v, (bool, list, tuple, dict)) or (isinstance(v, float) and not v.is_integer()):
            raise TypeError
        if isinstance(v, str) and not re.fullmatch(r"-?[0-9]+", v):  # int() also takes " 12 " and "1_000"
            raise ValueError
        return int(v)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: attribute {key!r} = {v!r}: expected an integer", key) from None


def int_attr(attrs: dict[str, Any], key: str, where: str, default: int = 0) -> int:
    """`int_value` of attribute `key`, or `default` when the node does not set it."""
    v = attrs.get(key)
    return default if v is None else int_value(v, key, where)


def split_sum_problem(comm_size: int, splits: list[int]) -> str | None:
    """An all-to-all-v's comm_size is the bytes its rank sends: the sum of its comm_split_sizes
    (convert.py writes it so). What is wrong, or None."""
    if sum(splits) != comm_size:
        return f"comm_size = {comm_size} but comm_split_sizes sum to {sum(splits)} (expected the bytes this rank sends)"
    return None


def comm_kind(value: Any) -> str | None:
    """Chakra's name of a `comm_type` value given as its number (an int or a string of
    digits) or as the name itself, or None when it names no CollectiveCommType."""
    if isinstance(value, str) and value in COMM_TYPES:
        return value
    if type(value) is int and value in COMM_NAMES:  # the common case, looked up directly
        return COMM_NAMES[value]
    try:
        return comm_type_name(int_value(value, "comm_type", ""))
    except (ConfigError, ValueError):
        return None


@dataclass
class EtNode:
    """A Chakra node in plain Python: what synthesis produces and tests inspect."""

    id: int
    name: str
    type: str  # "COMP_NODE", "COMM_COLL_NODE", "COMM_SEND_NODE", ...
    data_deps: list[int] = field(default_factory=list)
    ctrl_deps: list[int] = field(default_factory=list)
    duration_micros: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)


def attr_proto(name: str, value: Any) -> pb.AttributeProto:
    """A Chakra attribute holding `value`: a bool, int64, string, or list of bools or int64s."""
    a = pb.AttributeProto(name=name)
    if isinstance(value, bool):
        a.bool_val = value
    elif isinstance(value, int):
        a.int64_val = value
    elif isinstance(value, str):
        a.string_val = value
    elif isinstance(value, list) and all(isinstance(v, bool) for v in value):
        a.bool_list.values.extend(value)
    elif isinstance(value, list) and all(isinstance(v, int) for v in value):
        a.int64_list.values.extend(value)
    else:
        raise TypeError(f"attribute {name}: unsupported value {value!r}")
    return a


def encode_node(n: EtNode) -> bytes:
    try:
        msg = pb.Node(id=n.id, name=n.name, type=pb.NodeType.Value(n.type), duration_micros=n.duration_micros)
        msg.data_deps.extend(n.data_deps)
        msg.ctrl_deps.extend(n.ctrl_deps)
        msg.attr.extend(attr_proto(k, v) for k, v in n.attrs.items())
    except (TypeError, ValueError) as e:
        # protobuf refuses every bad value but names neither the node nor the field
        # ("Value out of range: -1"); find them only then, off the fast path.
        field, why = _node_problem(n) or ("node", f"cannot be encoded ({e})")
        raise ConfigError(f"node {n.id} ({n.name!r}): {why}", field) from None
    return framed(msg)


U64_TEXT, I64_TEXT = "an integer in 0..2^64-1", "an integer in -2^63..2^63-1"


def _is_int(v: Any, low: int, high: int) -> bool:
    """An integer (numpy's too, as protobuf takes them; not a bool) in low..high-1."""
    if isinstance(v, bool):
        return False
    try:
        return low <= operator.index(v) < high
    except TypeError:
        return False


def _node_problem(n: EtNode) -> tuple[str, str] | None:
    """(field, why) of the first field of `n` Chakra's Node cannot hold, or None."""
    for fld in ("id", "duration_micros"):
        v = getattr(n, fld)
        if not _is_int(v, 0, 1 << 64):
            return fld, f"field `{fld}` = {v!r}: expected {U64_TEXT}"
    if not isinstance(n.name, str):
        return "name", f"field `name` = {n.name!r}: expected a string"
    if n.type not in pb.NodeType.keys():
        return "type", f"field `type` = {n.type!r}: expected one of {', '.join(pb.NodeType.keys())}"
    for fld in ("data_deps", "ctrl_deps"):
        deps = getattr(n, fld)
        if not isinstance(deps, (list, tuple)):
            return fld, f"field `{fld}` = {deps!r}: expected a list of node ids"
        for i, d in enumerate(deps):
            if not _is_int(d, 0, 1 << 64):
                return fld, f"field `{fld}`[{i}] = {d!r}: expected a node id, {U64_TEXT}"
    for key, value in n.attrs.items():
        if why := _attr_problem(key, value):
            return str(key), why
    return None


def _attr_problem(key: Any, value: Any) -> str | None:
    """Why `attr_proto` cannot store `value` under `key`, or None."""
    if not isinstance(key, str):
        return f"attribute name {key!r}: expected a string"
    def int64(v: Any) -> bool:  # as `attr_proto` takes them: Python ints, not bools
        return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63

    if isinstance(value, (bool, str)) or int64(value):
        return None
    if isinstance(value, list) and (all(isinstance(v, bool) for v in value) or all(int64(v) for v in value)):
        return None
    return (f"attribute `{key}` = {value!r:.80}: expected a bool, a string, {I64_TEXT}, "
            "or a list of bools or of such integers")


def framed(msg: Any) -> bytes:
    """A protobuf message with its varint length prefix, as Chakra's files frame them."""
    body = msg.SerializeToString()
    return _VarintBytes(len(body)) + body


def encode_trace(nodes: list[EtNode], metadata: dict[str, Any] | None = None, cache: dict[int, bytes] | None = None) -> bytes:
    """The ET file's bytes. `cache` (node object id -> bytes) lets traces that share node objects
    encode each once; the caller keeps the nodes alive while it uses the cache."""
    meta = pb.GlobalMetadata(version=SCHEMA_VERSION)
    for k, v in (metadata or {}).items():
        if why := _attr_problem(k, v):
            raise ConfigError(f"GlobalMetadata: {why}", str(k))
        meta.attr.append(attr_proto(k, v))
    if cache is None:
        return framed(meta) + b"".join(encode_node(n) for n in nodes)
    parts = [framed(meta)]
    for n in nodes:
        b = cache.get(id(n))
        if b is None:
            b = cache[id(n)] = encode_node(n)
        parts.append(b)
    return b"".join(parts)


def write_trace(path: str | Path, nodes: list[EtNode], metadata: dict[str, Any] | None = None) -> None:
    try:
        data = encode_trace(nodes, metadata)
    except ConfigError as e:  # nothing written: a bad node is named with the file it was meant for
        raise e.in_file(path) from None
    Path(path).write_bytes(data)


def attr_value(a: pb.AttributeProto) -> Any:
    """A Chakra attribute's value in Python (a list for the `*_list` kinds), or None if unset."""
    kind = a.WhichOneof("value")
    if kind is None:
        return None  # set by name only: the readers treat it as absent or refuse it by name
    v = getattr(a, kind)
    return list(v.values) if kind.endswith("_list") else v


def messages(data: bytes, path: Path) -> Iterator[bytes]:
    """The messages of an ET file's bytes, each without its length prefix (errors name `path`)."""
    pos = 0
    while pos < len(data):
        try:
            size, pos = _DecodeVarint32(data, pos)
        except Exception:
            raise ConfigError(f"{path}: corrupt length prefix at byte {pos}", "et") from None
        if pos + size > len(data):
            raise ConfigError(f"{path}: truncated message at byte {pos} (needs {size} bytes, {len(data) - pos} left)", "et")
        yield data[pos:pos + size]
        pos += size


def read_pb_trace(path: str | Path) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    """The raw protobuf messages of one ET file (every field kept, for passes that rewrite it)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {not_a_file(path, 'ET')}", "et")
    with path.open("rb") as f:
        msgs = messages(f.read(), path)
        meta = pb.GlobalMetadata()
        try:
            meta.ParseFromString(next(msgs))
        except StopIteration:
            raise ConfigError(f"{path}: empty trace (expected a GlobalMetadata message)", "et") from None
        except Exception as e:
            raise ConfigError(f"{path}: first message does not decode as Chakra GlobalMetadata ({e})", "et") from None
        nodes = []
        for i, raw in enumerate(msgs):
            m = pb.Node()
            try:
                m.ParseFromString(raw)
            except Exception as e:
                raise ConfigError(f"{path}: node message {i} does not decode as a Chakra Node ({e})", "et") from None
            nodes.append(m)
    return meta, nodes


def read_trace(path: str | Path) -> tuple[dict[str, Any], list[EtNode]]:
    """(metadata with `version`, nodes) of one ET file."""
    meta, msgs = read_pb_trace(path)
    for m in msgs:
        if m.type not in pb.NodeType.values():
            raise ConfigError(f"{path}: node {m.id}: type {m.type} is not a Chakra NodeType "
                              f"(expected one of {', '.join(pb.NodeType.keys())})", "type")
    nodes = [EtNode(m.id, m.name, pb.NodeType.Name(m.type), list(m.data_deps), list(m.ctrl_deps),
                    m.duration_micros, {a.name: attr_value(a) for a in m.attr}) for m in msgs]
    return {"version": meta.version, **{a.name: attr_value(a) for a in meta.attr}}, nodes


def remove_ranks_past(folder: Path, prefix: str, ranks: int) -> None:
    """Delete `<prefix>.<r>.et` for r >= ranks: left by an earlier, larger run into the same
    folder, they would be read as part of this workload (which its comm_groups.json does not know)."""
    for stale in folder.glob(f"{glob.escape(prefix)}.*.et"):
        rank = stale.name[len(prefix) + 1:-3]
        if rank.isascii() and rank.isdigit() and int(rank) >= ranks:
            stale.unlink()
