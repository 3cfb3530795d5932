"""Reading and writing Chakra execution traces with MLCommons Chakra's own schema
(`chakra.schema.protobuf.et_def_pb2` from the `mlc-chakra` package): a file is a
GlobalMetadata message followed by Node messages, each prefixed by its varint length."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from chakra.schema.protobuf import et_def_pb2 as pb
from google.protobuf.internal.decoder import _DecodeVarint32  # noqa: PLC2701 (the varint framing Chakra uses)
from google.protobuf.internal.encoder import _VarintBytes  # noqa: PLC2701

from ..errors import ConfigError

SCHEMA_VERSION = "0.0.4"

COMM_TYPES = {name: pb.CollectiveCommType.Value(name) for name in pb.CollectiveCommType.keys()}


def comm_type_name(value: int) -> str:
    """Chakra's name of a `comm_type` attribute value (ALL_GATHER for 2, ...)."""
    return pb.CollectiveCommType.Name(value)


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


def _attr(name: str, value: Any) -> pb.AttributeProto:
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
    msg = pb.Node(id=n.id, name=n.name, type=pb.NodeType.Value(n.type), duration_micros=n.duration_micros)
    msg.data_deps.extend(n.data_deps)
    msg.ctrl_deps.extend(n.ctrl_deps)
    msg.attr.extend(_attr(k, v) for k, v in n.attrs.items())
    return _framed(msg)


def _framed(msg: Any) -> bytes:
    body = msg.SerializeToString()
    return _VarintBytes(len(body)) + body


def encode_trace(nodes: list[EtNode], metadata: dict[str, Any] | None = None, cache: dict[int, bytes] | None = None) -> bytes:
    """The ET file's bytes. `cache` (node object id -> bytes) lets traces that share node objects
    encode each once; the caller keeps the nodes alive while it uses the cache."""
    meta = pb.GlobalMetadata(version=SCHEMA_VERSION)
    meta.attr.extend(_attr(k, v) for k, v in (metadata or {}).items())
    if cache is None:
        return _framed(meta) + b"".join(encode_node(n) for n in nodes)
    parts = [_framed(meta)]
    for n in nodes:
        b = cache.get(id(n))
        if b is None:
            b = cache[id(n)] = encode_node(n)
        parts.append(b)
    return b"".join(parts)


def write_trace(path: str | Path, nodes: list[EtNode], metadata: dict[str, Any] | None = None) -> None:
    Path(path).write_bytes(encode_trace(nodes, metadata))


def _attr_value(a: pb.AttributeProto) -> Any:
    kind = a.WhichOneof("value")
    if kind is None:
        return None  # set by name only: the readers treat it as absent or refuse it by name
    v = getattr(a, kind)
    return list(v.values) if kind.endswith("_list") else v


def _messages(f: BinaryIO, path: Path) -> Iterator[bytes]:
    data = f.read()
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
        raise ConfigError(f"{path}: file not found", "et")
    with path.open("rb") as f:
        msgs = _messages(f, path)
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
                    m.duration_micros, {a.name: _attr_value(a) for a in m.attr}) for m in msgs]
    return {"version": meta.version, **{a.name: _attr_value(a) for a in meta.attr}}, nodes
