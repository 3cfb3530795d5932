"""Collective microbenchmarks as Chakra ETs: one COMM_COLL node per rank, the way
ASTRA-sim's microbenchmark generator writes them (e.g. `all_reduce.<rank>.et`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..specs import plain
from ..traces.chakra_io import COMM_TYPES, EtNode, encode_trace, remove_ranks_past
from ..traces.synthesis import PLAN_MAX

MAX_RANKS = PLAN_MAX["world"]

KINDS = {"all_reduce": "ALL_REDUCE", "all_gather": "ALL_GATHER", "reduce_scatter": "REDUCE_SCATTER",
         "all_to_all": "ALL_TO_ALL", "broadcast": "BROADCAST"}


def write_microbenchmark(folder: str | Path, ranks: int, kind: str, size: int, prefix: str | None = None) -> Path:
    """Write `<folder>/<prefix>.<r>.et` for r in 0..ranks; returns the prefix path to pass as a workload.
    `size` is the nodes' comm_size: each rank's input (an all-gather's shard; docs/astra-sim.md)."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise ConfigError(f"unknown collective {kind!r}; expected one of {', '.join(KINDS)}", "kind")
    ranks, size = plain(ranks), plain(size)  # numpy numbers from a sweep
    # One file per rank: past the largest world a synthesis writes, a typo fills the disk.
    if not isinstance(ranks, int) or isinstance(ranks, bool) or not 1 <= ranks <= MAX_RANKS:
        raise ConfigError(f"`ranks`: expected an integer in 1..{MAX_RANKS}, got {ranks!r}", "ranks")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 1 << 63:
        # 0 B stays allowed: a latency-only collective.
        raise ConfigError(f"`size`: expected an integer number of bytes in 0..2^63-1, got {size!r}", "size")
    if not isinstance(folder, (str, Path)) or str(folder) == "":
        raise ConfigError(f"`folder`: expected a folder path, got {folder!r}", "folder")
    prefix = kind if prefix is None else prefix
    # As synthesis.write: the ETs stay inside `folder`.
    if not isinstance(prefix, str) or prefix in ("", ".", "..") or any(sep in prefix for sep in "/\\"):
        raise ConfigError(f"ET prefix {prefix!r}: expected a plain file name (no folders)", "prefix")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    node = EtNode(0, f"{kind}_{ranks}npus_{size}B", "COMM_COLL_NODE",
                  attrs={"is_cpu_op": False, "comm_type": COMM_TYPES[KINDS[kind]], "comm_size": size})
    data = encode_trace([node])  # every rank's trace is the same bytes
    for r in range(ranks):
        (out / f"{prefix}.{r}.et").write_bytes(data)
    remove_ranks_past(out, prefix, ranks)
    return out / prefix
