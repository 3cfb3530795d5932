"""htsim's connection-matrix format (`.cm`), read and written in full: headers `Nodes N`,
`Connections C`, `Triggers T`, `Failures F`; flow lines `SRC->DST id ID start US size BYTES`
with optional `trigger TID` (instead of `start`), `send_done_trigger TID`, `recv_done_trigger
TID`, `prio P`, `msg M`; trigger lines `trigger id TID oneshot|multishot|barrier [count N]`;
failure lines `failure switch_type TOR|AGG|CORE switch_id X link_id Y`. `#` starts a comment.

Every line is checked as htsim's loader checks it (and more: htsim asserts or reads garbage
where this reader names the line and the token). With `plain_flows=True` only what the packet
engine runs is accepted (flows with `id`, `start`, `size`), and anything else is refused at the
line it appears on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ... import _core
from ...errors import TrafficFileError
from ...specs import shown

# ASCII digits only (`\d` and str.isdigit also take `²` and other scripts' digits, which int()
# then refuses or reads; htsim's stoi reads neither).
FLOW_LINE = re.compile(r"^([0-9]+)->([0-9]+)((?:\s+\S+\s+\S+)*)\s*$")
UINT = re.compile(r"[0-9]+")
HEADERS = ("Nodes", "Connections", "Triggers", "Failures")
FLOW_TOKENS = ("id", "start", "size", "trigger", "send_done_trigger", "recv_done_trigger", "prio", "msg")
PLAIN_TOKENS = ("id", "start", "size")
TRIGGER_KINDS = ("oneshot", "multishot", "barrier")
SWITCH_TYPES = ("TOR", "AGG", "CORE")
# htsim reads `size`, ids and counts into C ints; starts are whole microseconds on the
# simulators' picosecond clock.
INT_MAX = 2**31 - 1
MAX_START_US = (_core.CLOCK_LIMIT_PS - 1) // 10**6


def nonneg_int(value: object, path: str, line: int | None, field_: str, limit: int) -> int:
    """A non-negative integer in 0..limit, from a JSON integer or ASCII digits (int() also
    reads `1_000` and other scripts' digits, which neither htsim nor a spreadsheet reads)."""
    if isinstance(value, int) and not isinstance(value, bool):
        v = value
    elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        v = int(value.strip())
    else:
        raise TrafficFileError(f"field `{field_}` must be a non-negative integer, got {value!r}", path, line, field_)
    if not 0 <= v <= limit:
        raise TrafficFileError(f"field `{field_}` must be in 0..{limit}, got {shown(v)}", path, line, field_)
    return v


@dataclass
class CmFlow:
    src: int
    dst: int
    size: int
    id: int | None = None
    start_us: int | None = None  # None: started by `trigger`
    trigger: int | None = None
    send_done_trigger: int | None = None
    recv_done_trigger: int | None = None
    prio: int | None = None
    msg: int | None = None
    line: int | None = None


@dataclass
class CmTrigger:
    id: int
    kind: str  # oneshot, multishot or barrier
    count: int | None = None  # a barrier fires after `count` activations
    line: int | None = None


@dataclass
class CmFailure:
    switch_type: str
    switch_id: int
    link_id: int
    line: int | None = None


@dataclass
class ConnectionMatrix:
    nodes: int | None
    flows: list[CmFlow] = field(default_factory=list)
    triggers: list[CmTrigger] = field(default_factory=list)
    failures: list[CmFailure] = field(default_factory=list)


def format_cm(cm: ConnectionMatrix) -> str:
    """The file's text: headers, flows, triggers, failures, one per line."""
    lines = [f"Nodes {cm.nodes}", f"Connections {len(cm.flows)}"]
    if cm.triggers:
        lines.append(f"Triggers {len(cm.triggers)}")
    if cm.failures:
        lines.append(f"Failures {len(cm.failures)}")
    for f in cm.flows:
        parts = [f"{f.src}->{f.dst}"]
        if f.id is not None:
            parts.append(f"id {f.id}")
        parts.append(f"start {f.start_us}" if f.trigger is None else f"trigger {f.trigger}")
        parts.append(f"size {f.size}")
        for key in ("send_done_trigger", "recv_done_trigger", "prio", "msg"):
            if getattr(f, key) is not None:
                parts.append(f"{key} {getattr(f, key)}")
        lines.append(" ".join(parts))
    for t in cm.triggers:
        lines.append(f"trigger id {t.id} {t.kind}" + (f" count {t.count}" if t.count is not None else ""))
    for x in cm.failures:
        lines.append(f"failure switch_type {x.switch_type} switch_id {x.switch_id} link_id {x.link_id}")
    return "\n".join(lines) + "\n"


def read_cm(path: str | Path, plain_flows: bool = False) -> ConnectionMatrix:
    """Parse a connection matrix, naming the line and token of anything wrong."""
    p = str(path)
    cm = ConnectionMatrix(nodes=None)
    counts: dict[str, int] = {}
    header_lines: dict[str, int] = {}
    id_lines: dict[int, int] = {}
    trigger_lines: dict[int, int] = {}
    for line_no, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head = line.split()[0]
        if head in HEADERS:
            parts = line.split()
            if len(parts) != 2 or not UINT.fullmatch(parts[1]):
                raise TrafficFileError(f"expected `{head} <count>`, got {line!r}", p, line_no, head)
            if head in header_lines:
                raise TrafficFileError(f"`{head}` given twice (also on line {header_lines[head]})", p, line_no, head)
            if cm.flows or cm.triggers or cm.failures:  # htsim reads headers first; a late `Nodes` escaped the host check
                raise TrafficFileError(f"`{head}` after the first flow (line {_first_line(cm)}); headers come before flows",
                                       p, line_no, head)
            header_lines[head] = line_no
            counts[head] = int(parts[1])
            if head == "Nodes":
                cm.nodes = counts[head]
            elif plain_flows and head in ("Triggers", "Failures") and counts[head] != 0:
                raise TrafficFileError(f"{head.lower()} are not supported (only flows with `start`)", p, line_no, head)
            continue
        if head in ("trigger", "failure"):
            if plain_flows:
                raise TrafficFileError(f"`{head}` lines are not supported (only flows with `start`)", p, line_no, head)
            if head == "trigger":
                t = _trigger(line, p, line_no)
                if t.id in trigger_lines:
                    raise TrafficFileError(f"trigger {t.id} is also defined on line {trigger_lines[t.id]}", p, line_no, "id")
                trigger_lines[t.id] = line_no
                cm.triggers.append(t)
            else:
                cm.failures.append(_failure(line, p, line_no))
            continue
        f = _flow(line, p, line_no, plain_flows, cm.nodes)
        if f.id is not None:  # htsim's triggers name flows by id: one id, one flow
            if f.id in id_lines:
                raise TrafficFileError(f"flow id {f.id} is also the id of line {id_lines[f.id]}", p, line_no, "id")
            id_lines[f.id] = line_no
        cm.flows.append(f)
    for head, have in (("Connections", len(cm.flows)), ("Triggers", len(cm.triggers)), ("Failures", len(cm.failures))):
        if head in counts and counts[head] != have:
            what = {"Connections": "flows", "Triggers": "trigger lines", "Failures": "failure lines"}[head]
            raise TrafficFileError(f"header says `{head} {counts[head]}` but the file has {have} {what}", p, None, head)
    if not cm.flows:
        raise TrafficFileError("no flows in file", p, None, "flows")
    for f in cm.flows:
        for key in ("trigger", "send_done_trigger", "recv_done_trigger"):
            tid = getattr(f, key)
            if tid is not None and tid not in trigger_lines:
                raise TrafficFileError(f"`{key} {tid}`: trigger {tid} is never defined (expected a line "
                                       f"`trigger id {tid} oneshot|multishot|barrier`)", p, f.line, key)
    return cm


def _first_line(cm: ConnectionMatrix) -> int | None:
    return min((x.line for x in [*cm.flows, *cm.triggers, *cm.failures] if x.line is not None), default=None)


def _pairs(tokens: list[str], p: str, line_no: int) -> dict[str, str]:
    if len(tokens) % 2:
        raise TrafficFileError(f"token `{tokens[-1]}` has no value", p, line_no, tokens[-1])
    keys = tokens[::2]
    if twice := next((k for k in keys if keys.count(k) > 1), None):
        raise TrafficFileError(f"token `{twice}` appears twice", p, line_no, twice)
    return dict(zip(keys, tokens[1::2]))


def _flow(line: str, p: str, line_no: int, plain: bool, nodes: int | None) -> CmFlow:
    m = FLOW_LINE.match(line)
    if not m:
        raise TrafficFileError(f"expected `SRC->DST id ID start US size BYTES`, got {line!r}", p, line_no, "flow")
    fields = _pairs(m.group(3).split(), p, line_no)
    allowed = PLAIN_TOKENS if plain else FLOW_TOKENS
    for key in fields:
        if key not in allowed:
            raise TrafficFileError(f"token `{key}` is not supported (only {', '.join(allowed)})", p, line_no, key)
    starts = [k for k in ("start", "trigger") if k in fields]
    if len(starts) == 2:
        raise TrafficFileError("flow has both `start` and `trigger` (htsim starts a flow by one)", p, line_no, "trigger")
    for key in ("start" if plain or not starts else starts[0], "size"):
        if key not in fields:
            raise TrafficFileError(f"flow has no `{key}`" if plain or key == "size" else "flow has no `start` or `trigger`",
                                   p, line_no, key)
    ints = {k: nonneg_int(v, p, line_no, k, MAX_START_US if k == "start" else INT_MAX) for k, v in fields.items()}
    src, dst = (nonneg_int(m.group(i), p, line_no, key, 2**32 - 1) for i, key in ((1, "src"), (2, "dst")))
    if nodes is not None and (src >= nodes or dst >= nodes):
        raise TrafficFileError(f"host {max(src, dst)} is outside `Nodes {nodes}`", p, line_no, "Nodes")
    # htsim exits: "Flow ID zero is not allowed" (checked last: a line's bad values come first).
    if ints.get("id") == 0:
        raise TrafficFileError("flow id 0 is not allowed (htsim's ids start at 1)", p, line_no, "id")
    for key in ("trigger", "send_done_trigger", "recv_done_trigger"):
        if key in ints and "id" not in ints:  # htsim asserts on it
            raise TrafficFileError(f"flow has `{key}` but no `id` (htsim names triggered flows by id)", p, line_no, "id")
    return CmFlow(src, dst, ints["size"], ints.get("id"), ints.get("start"), ints.get("trigger"),
                  ints.get("send_done_trigger"), ints.get("recv_done_trigger"), ints.get("prio"), ints.get("msg"), line_no)


def _trigger(line: str, p: str, line_no: int) -> CmTrigger:
    tokens = line.split()[1:]
    kinds = [t for t in tokens if t in TRIGGER_KINDS]
    rest = [t for t in tokens if t not in TRIGGER_KINDS]
    if len(kinds) != 1:
        raise TrafficFileError(f"trigger needs one type of {', '.join(TRIGGER_KINDS)}, got {line!r}", p, line_no, "type")
    fields = _pairs(rest, p, line_no)
    for key in fields:
        if key not in ("id", "count"):
            raise TrafficFileError(f"trigger token `{key}` is not supported (only id, count and a type)", p, line_no, key)
    if "id" not in fields:
        raise TrafficFileError("trigger has no `id`", p, line_no, "id")
    tid = nonneg_int(fields["id"], p, line_no, "id", INT_MAX)
    if tid == 0:
        raise TrafficFileError("trigger id 0 is not allowed (htsim's ids start at 1)", p, line_no, "id")
    count = nonneg_int(fields["count"], p, line_no, "count", INT_MAX) if "count" in fields else None
    if kinds[0] == "barrier" and not count:
        raise TrafficFileError("a barrier trigger needs `count N` >= 1 (the activations it waits for)", p, line_no, "count")
    return CmTrigger(tid, kinds[0], count, line_no)


def _failure(line: str, p: str, line_no: int) -> CmFailure:
    fields = _pairs(line.split()[1:], p, line_no)
    for key in ("switch_type", "switch_id", "link_id"):
        if key not in fields:
            raise TrafficFileError(f"failure has no `{key}`", p, line_no, key)
    if len(fields) != 3:
        extra = next(k for k in fields if k not in ("switch_type", "switch_id", "link_id"))
        raise TrafficFileError(f"failure token `{extra}` is not supported", p, line_no, extra)
    if fields["switch_type"] not in SWITCH_TYPES:
        raise TrafficFileError(f"switch_type {fields['switch_type']!r}: expected one of {', '.join(SWITCH_TYPES)}",
                               p, line_no, "switch_type")
    return CmFailure(fields["switch_type"], nonneg_int(fields["switch_id"], p, line_no, "switch_id", INT_MAX),
                     nonneg_int(fields["link_id"], p, line_no, "link_id", INT_MAX), line_no)
