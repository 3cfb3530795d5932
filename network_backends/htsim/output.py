"""htsim's per-flow output, read into tracefabric's flow frame (the packet engine's columns).

htsim prints one line when a flow's last byte is acknowledged, e.g. (htsim_uec, eqds):
`Flow Uec_3_17 flowId 4 uecSrc4 finished at 12.5 total messages 1 total packets 257 ...`,
and in older protocols `Flow ndp_3_17 4 finished at 12.5 total bytes 1048576`. The name ends
in `_SRC_DST`; times are microseconds. With the connection matrix the run read, each flow also
gets its size and, where it started at a given time, its start and completion time (a flow
started by a trigger has no start in the file).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from ...errors import TracefabricError
from .cm import ConnectionMatrix

_FINISHED = re.compile(r"^Flow (?P<name>\S+?)_(?P<src>[0-9]+)_(?P<dst>[0-9]+) (?:flowId |flow_id )?(?P<id>[0-9]+) "
                       r"(?:\S+ )?finished at (?P<us>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
                       r"(?:.*? total bytes (?P<bytes>[0-9]+))?")
COLUMNS = ("flow_id", "src", "dst", "bytes", "start_ps", "finish_ps", "fct_ps")


class HtsimOutputError(TracefabricError, ValueError):
    """htsim's output does not read as per-flow results (or does not match its connection matrix)."""


def parse_output(text: str, cm: ConnectionMatrix | None = None, source: str = "htsim output") -> pd.DataFrame:
    """One row per finished flow, in flow id order: flow_id, src, dst, bytes, start_ps,
    finish_ps, fct_ps (start and FCT are NaN where unknown)."""
    rows: dict[int, dict[str, Any]] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        m = _FINISHED.match(line.strip())
        if not m:
            continue
        fid = int(m["id"])
        if fid in rows:
            raise HtsimOutputError(f"{source}: line {line_no}: flow {fid} finishes again (first on line "
                                   f"{rows[fid]['line']}); expected one line per flow")
        rows[fid] = {"line": line_no, "flow_id": fid, "src": int(m["src"]), "dst": int(m["dst"]),
                     "bytes": int(m["bytes"]) if m["bytes"] else None, "finish_ps": round(float(m["us"]) * 1e6)}
    if not rows:
        raise HtsimOutputError(f"{source}: no `Flow ... finished at T` lines found (run htsim with its flow "
                               "completions printed)")
    if cm is not None:
        _join(rows, cm, source)
    frame = pd.DataFrame([rows[k] for k in sorted(rows)]).drop(columns="line")
    for col in ("start_ps", "bytes"):
        if col not in frame:
            frame[col] = math.nan
    frame["fct_ps"] = frame["finish_ps"] - frame["start_ps"]
    return frame[list(COLUMNS)]


def _join(rows: dict[int, dict[str, Any]], cm: ConnectionMatrix, source: str) -> None:
    """Size and start of each flow from the matrix; a flow htsim names otherwise is refused."""
    by_id = {f.id: f for f in cm.flows if f.id is not None}
    for fid, row in rows.items():
        f = by_id.get(fid)
        if f is None or (f.src, f.dst) != (row["src"], row["dst"]):
            where = f"{f.src}->{f.dst}" if f else "no flow"
            raise HtsimOutputError(f"{source}: line {row['line']}: flow {fid} ({row['src']}->{row['dst']}) is {where} in "
                                   "the connection matrix; expected the output of a run of that file")
        row["bytes"] = f.size
        row["start_ps"] = f.start_us * 10**6 if f.start_us is not None else math.nan
    missing = sorted(set(by_id) - set(rows))
    if missing:
        raise HtsimOutputError(f"{source}: flows {missing[:10]} of the connection matrix never finished "
                               f"({len(missing)} of {len(by_id)}); the run ended early (-end) or failed")
