"""Traffic files: explicit flow lists (CSV or JSON) and htsim's connection-matrix format.

CSV: a header with `src,dst,bytes` and optionally `start_us` (or `start_ps`; one per flow).
JSON: a list of objects with the same keys, or `{"flows": [...]}`.
Connection matrix (htsim, `network_backends/htsim/cm.py`): `Nodes N`, `Connections C`, then
`SRC->DST id ID start US size BYTES`. The engine runs flows with a start time: triggers and
failures are refused with the line they appear on (`tracefabric htsim` reads and writes them).
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
from ...errors import DuplicateKeyError, TrafficFileError, loads_json, not_a_file
from ...specs import _DECIMAL, shown
from ..htsim.cm import FLOW_LINE, INT_MAX, MAX_START_US, UINT, nonneg_int, read_cm



FLOW_KEYS = ("src", "dst", "bytes", "start_us", "start_ps")
# Largest value of each field the engine takes (host ids are u32; times stay below the
# 2^62 ps clock): beyond them a file is refused here, by line, not by the engine's reader.
FIELD_MAX = {"src": 2**32 - 1, "dst": 2**32 - 1, "bytes": 2**63, "start_ps": _core.CLOCK_LIMIT_PS - 1}
# htsim reads a connection matrix's `size` into an int and aborts past it.
CM_MAX_SIZE = INT_MAX


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
    if isinstance(path, str) and not path.strip():  # Path("") is the current folder: "is a folder" misled
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
    """A `start_us` value in picoseconds, read exactly: a float rounded a start below 1 ps to 0
    and overflowed on a JSON integer of hundreds of digits."""
    if us in (None, ""):
        return 0
    if isinstance(us, bool) or not isinstance(us, (int, float, str)):  # JSON's true is no time
        raise TrafficFileError(f"field `start_us` must be a number, got {us!r}", path, line, "start_us")
    if isinstance(us, float) and not math.isfinite(us):  # a JSON 1e400 is read as inf
        raise TrafficFileError(f"field `start_us` must be a finite number >= 0, got {us!r}", path, line, "start_us")
    # ASCII decimal syntax only: float() also read `1_000` and other scripts' digits.
    if isinstance(us, str) and not _DECIMAL.fullmatch(us.strip()):
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


_nonneg_int = nonneg_int


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
            if parts[:1] == ["Nodes"] and len(parts) == 2 and UINT.fullmatch(parts[1]):
                return int(parts[1]), line_no
            if parts and FLOW_LINE.match(" ".join(parts)):
                return None
    return None


def _read_connection_matrix(path: str | Path) -> tuple[dict[str, Any], list[int], list[str]]:
    cm = read_cm(path, plain_flows=True)
    out = {"src": [f.src for f in cm.flows], "dst": [f.dst for f in cm.flows], "bytes": [f.size for f in cm.flows],
           "start_ps": [(f.start_us or 0) * 1_000_000 for f in cm.flows]}
    lines = [f.line or 0 for f in cm.flows]
    return {"kind": "flows", **out}, lines, ["start"] * len(lines)
