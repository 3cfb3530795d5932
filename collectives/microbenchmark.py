"""Collective microbenchmarks as Chakra ETs: one COMM_COLL node per rank, the way
ASTRA-sim's microbenchmark generator writes them (e.g. `all_reduce.<rank>.et`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..traces.chakra_io import COMM_TYPES, EtNode, encode_trace

KINDS = {"all_reduce": "ALL_REDUCE", "all_gather": "ALL_GATHER", "reduce_scatter": "REDUCE_SCATTER",
         "all_to_all": "ALL_TO_ALL", "broadcast": "BROADCAST"}


def write_microbenchmark(folder: str | Path, ranks: int, kind: str, size: int, prefix: str | None = None) -> Path:
    """Write `<folder>/<prefix>.<r>.et` for r in 0..ranks; returns the prefix path to pass as a workload."""
    if kind not in KINDS:
        raise ConfigError(f"unknown collective {kind!r}; expected one of {', '.join(KINDS)}", "kind")
    if ranks < 1 or size < 0:
        raise ConfigError(f"a microbenchmark needs ranks >= 1 and size >= 0, got ranks={ranks}, size={size}", "ranks")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    prefix = prefix or kind
    node = EtNode(0, f"{kind}_{ranks}npus_{size}B", "COMM_COLL_NODE",
                  attrs={"is_cpu_op": False, "comm_type": COMM_TYPES[KINDS[kind]], "comm_size": size})
    data = encode_trace([node])  # every rank's trace is the same bytes
    for r in range(ranks):
        (out / f"{prefix}.{r}.et").write_bytes(data)
    return out / prefix
