"""Inputs on which ASTRA-sim 2.x (commit 518bd513) prints no result. The `analytical:astra-*`
backends (and `astra export`, whose folder is meant for ASTRA-sim) refuse them with the reason,
or, where tracefabric has a natural reading (a barrier), run it and warn with
`AstraExtensionWarning`, rather than print a number labelled ASTRA-compatible; `analytical:flow`
and `packet` run them. See docs/astra-sim.md ("Where ASTRA-sim gives no result")."""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import AstraExtensionWarning, ConfigError

ELSEWHERE = "analytical:flow and packet run it"


def check_compute(num_ops: int, tensor_size: int, roofline: bool, cpu: bool, where: str) -> None:
    """A GPU compute node under the roofline needs num_ops > 0 and tensor_size > 0: ASTRA-sim
    stalls on one without (it prints no `finished` line)."""
    if not roofline or cpu:
        return
    for key, value in (("num_ops", num_ops), ("tensor_size", tensor_size)):
        if value == 0:
            raise ConfigError(f"{where}: {key} = 0 with roofline-enabled: ASTRA-sim 2.x stalls on such a compute node "
                              f"and prints no result, so the astra-* backends refuse it (give {key} > 0, or turn the "
                              f"roofline off to replay duration_micros; {ELSEWHERE})", key)


def check_collective(kind_name: str, where: str) -> None:
    """ASTRA-sim's workload layer runs all-reduce, all-gather, reduce-scatter, all-to-all and
    broadcast (as its recorded duration); it has no barrier, which tracefabric runs as an
    all-reduce of its comm_size (a captured barrier: 0 bytes)."""
    if kind_name == "BARRIER":
        warnings.warn(AstraExtensionWarning(
            f"{where}: comm_type BARRIER: ASTRA-sim 2.x has no barrier collective and gives no result for this "
            "workload; tracefabric extension: the barrier runs as an all-reduce of its comm_size, so this run's "
            "times are not ASTRA-compatible"), stacklevel=4)


def check_network(backend: str, npus_count: list[int], path: Any) -> None:
    """ASTRA-sim's congestion-aware analytical backend refuses networks of more than one
    dimension (it exits with status 255)."""
    if backend == "analytical:astra-aware" and len(npus_count) > 1:
        raise ConfigError(f"{path}: {len(npus_count)} dimensions: ASTRA-sim 2.x's congestion-aware backend takes "
                          "one-dimensional networks only (it exits with status 255), so analytical:astra-aware refuses "
                          "this network; use analytical:astra-unaware, or analytical:flow for contention on several "
                          "dimensions", "topology")
