"""Rank -> GPU slot placement on a packet fabric. Slot `s * gpus + i` is GPU `i` of server
`s`; with the network file's `servers` the slot's NIC is its fabric host (`packed`) or a
rail's host (`rail`), without it every GPU is its own server and the slot is the host.

A placement is one of:
- `None` (default): the workload's own `placement.json` (synthesized traces carry one:
  random servers), else `packed`;
- `"packed"`: rank r on slot r;
- `"random"` / `"random:SEED"`: servers in a random order (seeded; default seed 0), each
  server's GPUs in rank order, as synthesis places them;
- a list of slots, one per rank, or a JSON file `{"rank_to_host": [...]}`.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..jsonio import load_json
from ..specs import shown

PLACEMENT_FILE = "placement.json"
POLICIES = ("packed", "random", "random:SEED")


def workload_folder(source: str | Path) -> Path:
    """The folder holding a workload's ETs (`source`: a folder, a prefix or one rank's ET)."""
    p = Path(source)
    return p if p.is_dir() else p.parent


def random_servers(ranks: int, gpus: int, seed: int) -> list[int]:
    """Servers shuffled by `seed`, each server's GPUs in rank order (what synthesis writes)."""
    servers = list(range(-(-ranks // gpus)))
    random.Random(seed).shuffle(servers)
    return [servers[r // gpus] * gpus + r % gpus for r in range(ranks)]


def _from_file(path: Path) -> list[int]:
    raw = load_json(path, "placement", "a placement JSON")
    slots = raw.get("rank_to_host") if isinstance(raw, dict) else None
    if not isinstance(slots, list):
        raise ConfigError(f"{path}: expected {{\"rank_to_host\": [slot of rank 0, slot of rank 1, ...]}}", "rank_to_host")
    return slots


def resolve(placement: Any, source: str | Path | None, ranks: int, gpus: int, slots: int) -> tuple[list[int] | None, str]:
    """(slot of every rank, or None for rank r on slot r; how it was chosen). `slots`: the
    fabric's GPU slots (its hosts)."""
    how = "given"
    if placement is None:
        found = workload_folder(source) / PLACEMENT_FILE if source is not None else None
        if found is None or not found.is_file():
            return None, "packed"
        placement, how = found, str(found)
    if isinstance(placement, str) and not Path(placement).suffix == ".json":
        if placement == "packed":
            return None, "packed"
        m = re.fullmatch(r"random(?::(\d+))?", placement)
        if not m:
            raise ConfigError(f"placement = {placement!r}: expected one of {', '.join(POLICIES)}, a list of GPU slots "
                              "or a placement.json", "placement")
        return random_servers(ranks, gpus, int(m.group(1) or 0)), placement
    if isinstance(placement, (str, Path)):
        path = Path(placement)
        slots_of = _from_file(path)
        how = str(path) if how == "given" else how
        where = f"{path}: rank_to_host"
    else:
        slots_of, where = placement, "placement"
    if not isinstance(slots_of, (list, tuple)):
        raise ConfigError(f"placement = {shown(slots_of):.80}: expected a policy name, a list of GPU slots or a file", "placement")
    if len(slots_of) != ranks:
        raise ConfigError(f"{where}: {len(slots_of)} ranks placed but the workload has {ranks}", "placement")
    seen: set[int] = set()
    for r, s in enumerate(slots_of):
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < slots:
            raise ConfigError(f"{where}[{r}] = {shown(s)}: expected a GPU slot in 0..{slots - 1} (the fabric's hosts)",
                              "placement")
        if s in seen:
            raise ConfigError(f"{where}[{r}] = {s}: that slot already holds another rank", "placement")
        seen.add(s)
    return list(slots_of), how


def write(slots: list[int], path: str | Path) -> None:
    Path(path).write_text(json.dumps({"rank_to_host": slots}))
