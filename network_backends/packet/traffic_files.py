"""Traffic files: explicit flow lists (CSV or JSON) and htsim's connection-matrix format.

CSV: a header with `src,dst,bytes` and optionally `start_us` (or `start_ps`; one per flow).
JSON: a list of objects with the same keys, or `{"flows": [...]}`.
Connection matrix (htsim): `Nodes N`, `Connections C`, then `SRC->DST id ID start US size BYTES`.
Triggers and failures are not supported yet and are refused with the line they appear on.
"""

from __future__ import annotations

import csv
import json
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from ... import _core
from ...errors import TrafficFileError
from ...jsonio import DuplicateKeyError, loads_json, not_a_file
from ...specs import DECIMAL, shown

# ASCII digits only (`\d` and str.isdigit also take `²` and other scripts' digits, which int()
# then refuses or reads; htsim's stoi reads neither).
_FLOW_LINE = re.compile(r"^([0-9]+)->([0-9]+)((?:\s+\S+\s+\S+)*)\s*$")
_UINT = re.compile(r"[0-9]+")


FLOW_KEYS = ("src", "dst", "bytes", "start_us", "start_ps")
# Largest value of each field the engine takes (host ids are u32; times stay below the
# 2^62 ps clock): beyond them a file is refused here, by line, not by the engine's reader.
FIELD_MAX = {"src": 2**32 - 1, "dst": 2**32 - 1, "bytes": 2**63, "start_ps": _core.CLOCK_LIMIT_PS - 1}
MAX_START_US = FIELD_MAX["start_ps"] // 10**6
# htsim reads a connection matrix's `size` into an int and aborts past it.
CM_MAX_SIZE = 2**31 - 1


def read_traffic_file(path: str | Path) -> dict[str, Any]:
    """The engine's `flows` traffic dict, from a .csv, .json or .cm file."""
    return _read(path)[0]


def flow_line(path: str | Path, index: int) -> int | None:
    """Where `path` declares flow `index` (0-based, in file order), as this module's errors
    name it (a line; in JSON the flow's 1-based position), for errors the engine reports by
    flow index."""
    lines = _read(path)[1]
    return lines[index] if 0 <= index < len(lines) else None


def _read(path: str | Path) -> tuple[dict[str, Any], list[int], list[str]]:
    """The flows of a traffic file, where each is declared (see `flow_line`) and the field its
    start is written in (see `file_field`)."""
    if isinstance(path, str) and not path.strip():  # Path("") would be the current folder
        raise TrafficFileError("the path is empty (expected a .csv, .json or .cm traffic file)", "''", None, "path")
    try:
        return _read_text_file(Path(path))
    except UnicodeDecodeError as e:
        raise TrafficFileError(f"not UTF-8 text (byte {e.start})", str(path), None, "path") from None


def _read_text_file(p: Path) -> tuple[dict[str, Any], list[int], list[str]]:
    if not p.is_file():
        raise TrafficFileError(not_a_file(p, "traffic"), str(p), None, "path")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return _from_rows(_csv_rows(p), str(p))
    if suffix == ".json":
        try:
            data = loads_json(p.read_text())
        except json.JSONDecodeError as e:
            raise TrafficFileError(f"not valid JSON ({e.msg} at line {e.lineno})", str(p), None, "json") from None
        except DuplicateKeyError as e:
            raise TrafficFileError(str(e), str(p), None, str(e.key)) from None
        # Another key beside `flows` (a misspelt option, say) would otherwise be ignored silently.
        extra = [k for k in data if k != "flows"] if isinstance(data, dict) else []
        if extra:
            raise TrafficFileError(f"unknown key {extra[0]!r} (expected a list of flows or {{\"flows\": [...]}})",
                                   str(p), None, extra[0])
        rows = data.get("flows") if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise TrafficFileError("expected a list of flows or {\"flows\": [...]}", str(p), None, "flows")
        return _from_rows([(i + 1, r) for i, r in enumerate(rows)], str(p))
    if suffix in CM_SUFFIXES:
        return _read_connection_matrix(p)
    raise TrafficFileError(f"unknown traffic file type {suffix!r} (expected .csv, .json or .cm)", str(p), None, "path")


def _csv_rows(p: Path) -> list[tuple[int, dict[str, Any]]]:
    with p.open(newline="", encoding="utf-8-sig") as fh:  # a BOM (Excel) is not part of `src`
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            raise TrafficFileError(f"column {twice[0]!r} appears twice in the header", str(p), 1, twice[0])
        missing = {"src", "dst", "bytes"} - set(columns)
        if missing:
            raise TrafficFileError(f"missing column(s) {', '.join(sorted(missing))} (expected src,dst,bytes[,start_us])", str(p), 1, sorted(missing)[0])
        return [(reader.line_num, row) for row in reader]


def _from_rows(rows: list[tuple[int, Any]], path: str) -> tuple[dict[str, Any], list[int], list[str]]:
    out: dict[str, list[int]] = {"src": [], "dst": [], "bytes": [], "start_ps": []}
    start_fields: list[str] = []
    for line, row in rows:
        if not isinstance(row, dict):
            raise TrafficFileError("each flow must be an object with src, dst, bytes", path, line, "flow")
        # A misspelt key (say `start_usec`) must not silently mean "start at 0".
        unknown = [str(k) if k is not None else "(a value past the last column)" for k in row if k not in FLOW_KEYS]
        if unknown:
            raise TrafficFileError(f"unknown field {unknown[0]!r} (expected {', '.join(FLOW_KEYS)})", path, line, str(unknown[0]))
        for key in ("src", "dst", "bytes"):
            out[key].append(_nonneg_int(row.get(key), path, line, key, FIELD_MAX[key]))
        given = [key for key in ("start_us", "start_ps") if row.get(key) not in (None, "")]
        if len(given) == 2:  # which one would be meant?
            raise TrafficFileError("fields `start_us` and `start_ps` both given; expected one start",
                                   path, line, "start_ps")
        start_fields.append(given[0] if given else "start_us")
        if given == ["start_ps"]:
            out["start_ps"].append(_nonneg_int(row["start_ps"], path, line, "start_ps", FIELD_MAX["start_ps"]))
        else:
            out["start_ps"].append(_start_us_ps(row.get("start_us"), path, line))
    if not out["src"]:
        raise TrafficFileError("no flows in file", path, None, "flows")
    return {"kind": "flows", **out}, [line for line, _ in rows], start_fields


def _start_us_ps(us: Any, path: str, line: int) -> int:
    """A `start_us` value in picoseconds, read exactly (as a fraction, never a float): a start
    below 1 ps is refused, not rounded to 0, and an integer of any length is compared, not
    converted."""
    if us in (None, ""):
        return 0
    if isinstance(us, bool) or not isinstance(us, (int, float, str)):  # JSON's true is no time
        raise TrafficFileError(f"field `start_us` must be a number, got {us!r}", path, line, "start_us")
    if isinstance(us, float) and not math.isfinite(us):  # a JSON 1e400 is read as inf
        raise TrafficFileError(f"field `start_us` must be a finite number >= 0, got {us!r}", path, line, "start_us")
    # ASCII decimal syntax only: float() also reads `1_000` and other scripts' digits.
    if isinstance(us, str) and not DECIMAL.fullmatch(us.strip()):
        raise TrafficFileError(f"field `start_us` must be a number, got {us!r}", path, line, "start_us")
    exact = Fraction(repr(us) if isinstance(us, float) else us.strip() if isinstance(us, str) else us) * 10**6
    if exact < 0:
        raise TrafficFileError(f"field `start_us` must be a finite number >= 0, got {shown(us)}", path, line, "start_us")
    if exact > FIELD_MAX["start_ps"]:
        raise TrafficFileError(f"field `start_us` must be at most {MAX_START_US} (2^62 ps), got {shown(us)}", path, line, "start_us")
    if exact.denominator != 1:
        raise TrafficFileError(f"field `start_us` must be a whole number of picoseconds (at most 6 decimals), "
                               f"got {us!r}", path, line, "start_us")
    return int(exact)


def _nonneg_int(value: Any, path: str, line: int, field: str, limit: int) -> int:
    # A JSON integer as it is; text in ASCII digits only: int() also reads `1_000` and other
    # scripts' digits, which neither htsim nor a spreadsheet reads as that number.
    if isinstance(value, int) and not isinstance(value, bool):
        v = value
    elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        v = int(value.strip())
    else:
        raise TrafficFileError(f"field `{field}` must be a non-negative integer, got {value!r}", path, line, field)
    if not 0 <= v <= limit:
        raise TrafficFileError(f"field `{field}` must be in 0..{limit}, got {shown(v)}", path, line, field)
    return v


def read_connection_matrix(path: str | Path) -> dict[str, Any]:
    """Flows from an htsim connection matrix (flows with `start` only)."""
    return _read_connection_matrix(path)[0]


# A connection matrix's names for the engine's flow fields, for errors the engine reports.
CM_FIELDS = {"bytes": "size", "start_ps": "start"}
CM_SUFFIXES = (".cm", ".txt")


def file_field(path: str | Path, field: str, index: int | None = None) -> str:
    """What the traffic file at `path` calls the engine's flow field `field` (for `start_ps`,
    the field flow `index` writes its start in: `start_us` unless it gives `start_ps`)."""
    if Path(path).suffix.lower() in CM_SUFFIXES:
        return CM_FIELDS.get(field, field)
    if field == "start_ps" and index is not None:
        starts = _read(path)[2]
        return starts[index] if 0 <= index < len(starts) else field
    return field


def connection_matrix_nodes(path: str | Path) -> tuple[int, int] | None:
    """(N, line) of a connection matrix's `Nodes N` header, or None (another format, or no
    header). Reads only up to the first flow: the file itself has been read and checked."""
    if Path(path).suffix.lower() not in CM_SUFFIXES:
        return None
    with open(path, encoding="utf-8") as f:
        for line_no, raw in enumerate(f, start=1):
            parts = raw.split("#", 1)[0].split()
            if parts[:1] == ["Nodes"] and len(parts) == 2 and _UINT.fullmatch(parts[1]):
                return int(parts[1]), line_no
            if parts and _FLOW_LINE.match(" ".join(parts)):
                return None
    return None


def _read_connection_matrix(path: str | Path) -> tuple[dict[str, Any], list[int], list[str]]:
    p = str(path)
    lines: list[int] = []
    nodes = connections = None
    header_lines: dict[str, int] = {}
    id_lines: dict[int, int] = {}
    out: dict[str, list[int]] = {"src": [], "dst": [], "bytes": [], "start_ps": []}
    for line_no, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head = line.split()[0]
        if head in ("Nodes", "Connections", "Triggers", "Failures"):
            parts = line.split()
            if len(parts) != 2 or not _UINT.fullmatch(parts[1]):
                raise TrafficFileError(f"expected `{head} <count>`, got {line!r}", p, line_no, head)
            if head in header_lines:
                raise TrafficFileError(f"`{head}` given twice (also on line {header_lines[head]})", p, line_no, head)
            if lines:  # htsim reads headers before flows; a late `Nodes` also escaped the host check
                raise TrafficFileError(f"`{head}` after the first flow (line {lines[0]}); headers come before flows",
                                       p, line_no, head)
            header_lines[head] = line_no
            if head == "Nodes":
                nodes = int(parts[1])
            elif head == "Connections":
                connections = int(parts[1])
            elif int(parts[1]) != 0:
                raise TrafficFileError(f"{head.lower()} are not supported (only flows with `start`)", p, line_no, head)
            continue
        if head in ("trigger", "failure"):
            raise TrafficFileError(f"`{head}` lines are not supported (only flows with `start`)", p, line_no, head)
        m = _FLOW_LINE.match(line)
        if not m:
            raise TrafficFileError(f"expected `SRC->DST id ID start US size BYTES`, got {line!r}", p, line_no, "flow")
        tokens = m.group(3).split()
        fields = dict(zip(tokens[::2], tokens[1::2]))
        if len(fields) < len(tokens) // 2:
            key = next(k for k in tokens[::2] if tokens[::2].count(k) > 1)
            raise TrafficFileError(f"token `{key}` appears twice", p, line_no, key)
        for key in fields:
            if key not in ("id", "start", "size"):
                raise TrafficFileError(f"token `{key}` is not supported (only id, start, size)", p, line_no, key)
        for key in ("start", "size"):
            if key not in fields:
                raise TrafficFileError(f"flow has no `{key}`", p, line_no, key)
        if "id" in fields:  # htsim's triggers name flows by id: one id, one flow
            flow_id = _nonneg_int(fields["id"], p, line_no, "id", FIELD_MAX["src"])
            if flow_id in id_lines:
                raise TrafficFileError(f"flow id {flow_id} is also the id of line {id_lines[flow_id]}", p, line_no, "id")
            id_lines[flow_id] = line_no
        src, dst = (_nonneg_int(m.group(i), p, line_no, key, FIELD_MAX[key]) for i, key in ((1, "src"), (2, "dst")))
        if nodes is not None and (src >= nodes or dst >= nodes):
            raise TrafficFileError(f"host {max(src, dst)} is outside `Nodes {nodes}`", p, line_no, "Nodes")
        out["src"].append(src)
        out["dst"].append(dst)
        out["bytes"].append(_nonneg_int(fields["size"], p, line_no, "size", CM_MAX_SIZE))
        out["start_ps"].append(_nonneg_int(fields["start"], p, line_no, "start", MAX_START_US) * 1_000_000)
        # htsim exits: "Flow ID zero is not allowed" (checked last: a line's bad values come first).
        if "id" in fields and flow_id == 0:
            raise TrafficFileError("flow id 0 is not allowed (htsim's ids start at 1)", p, line_no, "id")
        lines.append(line_no)
    if connections is not None and connections != len(out["src"]):
        raise TrafficFileError(f"header says `Connections {connections}` but the file has {len(out['src'])} flows", p, None, "Connections")
    if not out["src"]:
        raise TrafficFileError("no flows in file", p, None, "flows")
    return {"kind": "flows", **out}, lines, ["start"] * len(lines)
